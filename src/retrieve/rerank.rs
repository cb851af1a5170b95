//! The learned rerank of `synapse-gnn`: the [`Rerank`] trait a rerank after ranking implements,
//! and [`GnnRerank`]: the candidate subgraph of a result, its features' inputs, the model
//! (GraphSAGE, `gnn`) and the reorder by its relevance, computed by the packed pass on the CPU
//! or, for a batch the GPU ranked, by the device's twin for every query at once
//! ([`relevance_on_gpu`]). Must not train (that is `gnn::train`) nor gate.

use std::sync::Arc;

use super::collect::Collector;
use super::memory::{Ctx, loaded};
use super::query::Query;
use super::result::{Hit, Retrieval};
use super::signals::Similarity;
use super::words::{Words, held_share};
use crate::error::{Error, Result};
use crate::gnn::features::cold_start_blend;
use crate::gnn::{Candidate, Candidates, Relevance, RelevanceInput};
use crate::gpu::ranker::Ranker;
use crate::graph::{EdgeKind, NodeRef};
use crate::score::similarity;

/// Most concepts a candidate subgraph takes for linking two or more returned episodes.
pub const LINKING_CONCEPTS: usize = 16;

/// A rerank after ranking: reorders a ranked result.
pub trait Rerank {
    /// `r` reordered (its hits' scores and signals as the rerank gives them).
    fn rerank(&self, query: &Query, r: Retrieval) -> Result<Retrieval>;
}

/// The learned relevance on one memory.
#[derive(Debug, Clone, Copy)]
pub struct GnnRerank<'a>(pub Ctx<'a>);

impl<'a> GnnRerank<'a> {
    /// The model behind `synapse-gnn`: the settings' weights file, or their shipped model.
    /// Loaded on first use; a missing or mismatched file is an error, on every call.
    pub fn model(&self) -> Result<&'a Arc<Relevance>> {
        let Ctx { m, config } = self.0;
        loaded(&m.relevance, || Relevance::for_config(config.gnn.weights.as_deref(), config.gnn.model))
    }

    /// The candidate subgraph of a synapse-family result: its returned episodes in result
    /// order, then the concepts that brought one of them, then up to [`LINKING_CONCEPTS`]
    /// concepts linked to two or more of them (most links first); every graph edge between
    /// two candidates, in both directions. Built only from what the result carries and the
    /// query's lexical evidence, so the CPU and the GPU results give the same candidates.
    pub fn candidates(&self, query: &Query, r: &Retrieval) -> Candidates {
        let Ctx { m, config } = self.0;
        let (words, signals, collector) = (Words(self.0), Similarity(self.0), Collector(self.0));
        // Every node's BM25 into one dense vector: no hashing and no sorting, as the scan does.
        let mut lexical = vec![0.0f32; m.graph.node_count()];
        m.bm25.score_into(&query.terms, &mut lexical);
        let max_bm25 = lexical.iter().copied().fold(0.0f32, f32::max);
        let w = config.lexical_weight;
        let named = words.named_speaker(query);
        let content = words.content_terms(query);
        let terms = m.bm25.term_postings(&content);
        // Node → local id (`NONE` for a node outside the subgraph); dense, as a subgraph is
        // built per query and a hash of its ~45 nodes cost more than the vector.
        const NONE: u32 = u32::MAX;
        let mut local = vec![NONE; m.graph.node_count()];
        let mut nodes: Vec<Candidate> = Vec::new();
        let make = |node: u32, ranked: Option<(f32, f32)>, rank: Option<usize>, via_concept: bool| {
            let i = node as usize;
            let cosine = signals.node_dense(node, query);
            let bm25 = if max_bm25 > 0.0 { lexical[i] / max_bm25 } else { 0.0 };
            let sign = |yes: bool| if yes { 1.0 } else { -1.0 };
            let coverage = held_share(&terms, &[node]);
            let (concept, episodes, speaker, window, owned) = match m.graph.nodes[i] {
                NodeRef::Episode(e) => {
                    let said = &m.said_by[e as usize];
                    let speaker = named.as_ref().map_or(0.0, |s| sign(s == said));
                    let owned = named.as_ref().map_or(0.0, |s| sign(words.owned_by(e, s)));
                    (false, vec![e], speaker, held_share(&terms, &words.window_nodes(e)), owned)
                }
                NodeRef::Concept(_) => {
                    let episodes = m.concept_episodes[i].iter().map(|&n| collector.episode_of(n)).collect();
                    (true, episodes, 0.0, coverage, 0.0)
                }
            };
            Candidate {
                node,
                concept,
                episodes,
                cosine,
                bm25,
                // `bm25` is already divided by the largest score, hence the maximum of 1.
                similarity: similarity(cosine, bm25, if max_bm25 > 0.0 { 1.0 } else { 0.0 }, w),
                ranked,
                rank,
                via_concept,
                pagerank: if r.mode.plan().dynamics.graph { m.graph.pagerank[i] } else { 0.0 },
                age: m.age[i],
                importance: m.importance[i],
                speaker,
                anchor: r.anchors.binary_search(&node).is_ok(),
                coverage,
                window,
                owned,
            }
        };
        let signals = |h: &Hit| Some((h.signals.activation.unwrap_or(0.0), h.signals.score));
        for (rank, h) in r.hits.iter().enumerate() {
            let node = m.episode_nodes[h.episode as usize];
            local[node as usize] = nodes.len() as u32;
            nodes.push(make(node, signals(h), Some(rank), h.node != node));
        }
        let hits = nodes.len();
        for (rank, h) in r.hits.iter().enumerate() {
            if local[h.node as usize] == NONE {
                local[h.node as usize] = nodes.len() as u32;
                nodes.push(make(h.node, signals(h), Some(rank), false));
            }
        }
        // Links of the concepts outside the subgraph to its episodes: counted per node, listed
        // once each.
        let mut links = vec![0u32; m.graph.node_count()];
        let mut linked = Vec::new();
        for c in &nodes[..hits] {
            for e in m.graph.in_edges(c.node) {
                if e.kind == EdgeKind::Abstraction && local[e.src as usize] == NONE {
                    if links[e.src as usize] == 0 {
                        linked.push(e.src);
                    }
                    links[e.src as usize] += 1;
                }
            }
        }
        let mut linking: Vec<(u32, u32)> =
            linked.into_iter().map(|c| (c, links[c as usize])).filter(|&(_, n)| n >= 2).collect();
        linking.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        for (node, _) in linking.into_iter().take(LINKING_CONCEPTS) {
            local[node as usize] = nodes.len() as u32;
            nodes.push(make(node, None, None, false));
        }
        let mut edges = Vec::new();
        for (l, c) in nodes.iter().enumerate() {
            for e in m.graph.in_edges(c.node) {
                let s = local[e.src as usize];
                if s != NONE {
                    edges.push((s, l as u32));
                    edges.push((l as u32, s));
                }
            }
        }
        edges.sort_unstable();
        edges.dedup();
        Candidates { nodes, hits, edges }
    }

    /// What the learned relevance takes for a synapse-family result: its candidates (see
    /// [`GnnRerank::candidates`]) and their embeddings, in candidate order.
    pub fn input(&self, query: &Query, r: &Retrieval) -> (Candidates, Vec<&'a [f32]>) {
        let candidates = self.candidates(query, r);
        let embeddings = candidates.nodes.iter().map(|c| self.0.m.embedding(c.node)).collect();
        (candidates, embeddings)
    }

    /// How much of the learned signal this conversation trusts, the cold start: 0 below
    /// `gnn.cold_start_episodes` episodes, 1 from there ([`cold_start_blend`]).
    pub fn cold_start(&self) -> f32 {
        cold_start_blend(self.0.m.episodes.len(), self.0.config.gnn.cold_start_episodes)
    }
}

impl GnnRerank<'_> {
    /// What the model takes for `r`'s candidates ([`GnnRerank::input`]): their features and
    /// the edges it reads ([`Relevance::input`]).
    pub fn model_input(&self, query: &Query, r: &Retrieval) -> Result<RelevanceInput> {
        let (candidates, embeddings) = self.input(query, r);
        self.model()?.input(&candidates, &query.embedding, &embeddings)
    }

    /// `r` reordered by `relevance`, one value per candidate of [`GnnRerank::candidates`]
    /// (the returned episodes' first): every episode gains `weight · blend · relevance` in its
    /// score, where blend is the cold start ([`GnnRerank::cold_start`]). The confidence stays
    /// the ranking's.
    pub fn reorder(&self, mut r: Retrieval, relevance: &[f32]) -> Result<Retrieval> {
        if relevance.len() < r.hits.len() {
            return Err(Error::Model(format!("{} relevance values for {} hits", relevance.len(), r.hits.len())));
        }
        let model = self.model()?;
        let weight = self.0.config.gnn.weight.unwrap_or(model.card.weight) * self.cold_start();
        let scores: Vec<f32> = r.hits.iter().map(|h| h.signals.score).collect();
        let order = crate::score::rerank(&scores, &relevance[..r.hits.len()], weight);
        let hits = std::mem::take(&mut r.hits);
        r.hits = order
            .into_iter()
            .map(|i| {
                let mut h = hits[i].clone();
                h.signals.relevance = Some(relevance[i]);
                h.signals.score = crate::score::combined(scores[i], relevance[i], weight);
                h
            })
            .collect();
        Ok(r)
    }
}

impl Rerank for GnnRerank<'_> {
    /// Every episode of the pool (`gnn.pool`, [`super::RetrieveConfig::depth`]) reordered by
    /// the packed pass's relevance ([`GnnRerank::reorder`]).
    fn rerank(&self, query: &Query, r: Retrieval) -> Result<Retrieval> {
        if r.hits.is_empty() {
            return Ok(r);
        }
        let input = self.model_input(query, &r)?;
        let relevance = self.model()?.packed().relevance(&input.features, &input.edges)?;
        self.reorder(r, &relevance)
    }
}

/// The relevance of each query's candidates (`inputs`: the model and what it takes, as
/// [`GnnRerank::model_input`] gives it) on the GPU, one call per model; `None` for a query
/// whose model the GPU could not run (the error logged), for the packed pass to answer.
pub fn relevance_on_gpu(ranker: &Ranker, inputs: &[(&Arc<Relevance>, &RelevanceInput)]) -> Vec<Option<Vec<f32>>> {
    let mut out: Vec<Option<Vec<f32>>> = vec![None; inputs.len()];
    let mut models: Vec<&Arc<Relevance>> = Vec::new();
    for (model, _) in inputs {
        if !models.iter().any(|m| Arc::ptr_eq(m, model)) {
            models.push(model);
        }
    }
    for model in models {
        let ids: Vec<usize> = (0..inputs.len()).filter(|&i| Arc::ptr_eq(inputs[i].0, model)).collect();
        let graphs: Vec<&RelevanceInput> = ids.iter().map(|&i| inputs[i].1).collect();
        match ranker.relevance(model, &graphs) {
            Ok(values) => ids.into_iter().zip(values).for_each(|(i, v)| out[i] = Some(v)),
            Err(e) => tracing::warn!("the GPU's relevance pass failed for {} queries, run on the CPU: {e}", ids.len()),
        }
    }
    out
}
