//! The learned relevance of `synapse-gnn`: the candidate subgraph of a result, its features'
//! inputs, and the rerank by the GNN's signal. Must not train (that is `gnn::train`).

use super::*;

impl Memory {
    /// The model behind `synapse-gnn`: the settings' weights file, or their shipped model.
    /// Loaded on first use; a missing or mismatched file is an error, on every call.
    pub fn relevance(&self) -> Result<&Arc<Relevance>> {
        self.relevance
            .get_or_init(|| {
                Relevance::for_config(self.config.gnn.weights.as_deref(), self.config.gnn.model).map_err(|e| match e {
                    Error::Model(m) => m,
                    other => other.to_string(),
                })
            })
            .as_ref()
            .map_err(|e| Error::Model(e.clone()))
    }

    /// The candidate subgraph of a synapse-family result: its returned episodes in result
    /// order, then the concepts that brought one of them, then up to [`LINKING_CONCEPTS`]
    /// concepts linked to two or more of them (most links first); every graph edge between
    /// two candidates, in both directions. Built only from what the result carries and the
    /// query's lexical evidence, so the CPU and the GPU results give the same candidates.
    pub fn candidates(&self, query: &Query, r: &Retrieval) -> Candidates {
        // Every node's BM25 into one dense vector: no hashing and no sorting, as the scan does.
        let mut lexical = vec![0.0f32; self.graph.node_count()];
        self.bm25.score_into(&query.terms, &mut lexical);
        let max_bm25 = lexical.iter().copied().fold(0.0f32, f32::max);
        let w = self.config.lexical_weight;
        let named = self.named_speaker(query);
        let content = self.content_terms(query);
        let terms = self.bm25.term_postings(&content);
        // Node → local id (`NONE` for a node outside the subgraph); dense, as a subgraph is
        // built per query and a hash of its ~45 nodes cost more than the vector.
        const NONE: u32 = u32::MAX;
        let mut local = vec![NONE; self.graph.node_count()];
        let mut nodes: Vec<Candidate> = Vec::new();
        let make = |node: u32, ranked: Option<(f32, f32)>, rank: Option<usize>, via_concept: bool| {
            let i = node as usize;
            let cosine = self.node_dense(node, query);
            let bm25 = if max_bm25 > 0.0 { lexical[i] / max_bm25 } else { 0.0 };
            let sign = |yes: bool| if yes { 1.0 } else { -1.0 };
            let coverage = gate::held_share(&terms, &[node]);
            let (concept, episodes, speaker, window, owned) = match self.graph.nodes[i] {
                NodeRef::Episode(e) => {
                    let said = &self.said_by[e as usize];
                    let speaker = named.as_ref().map_or(0.0, |s| sign(s == said));
                    let owned = named.as_ref().map_or(0.0, |s| sign(self.owned_by(e, s)));
                    (false, vec![e], speaker, gate::held_share(&terms, &self.window_nodes(e)), owned)
                }
                NodeRef::Concept(_) => {
                    let episodes = self.concept_episodes[i].iter().map(|&n| self.episode_of(n)).collect();
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
                pagerank: if r.mode == Mode::NoGraph { 0.0 } else { self.graph.pagerank[i] },
                age: self.age[i],
                importance: self.importance[i],
                speaker,
                anchor: r.anchors.binary_search(&node).is_ok(),
                coverage,
                window,
                owned,
            }
        };
        let signals = |h: &Hit| Some((h.signals.activation.unwrap_or(0.0), h.signals.score));
        for (rank, h) in r.hits.iter().enumerate() {
            let node = self.episode_nodes[h.episode as usize];
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
        let mut links = vec![0u32; self.graph.node_count()];
        let mut linked = Vec::new();
        for c in &nodes[..hits] {
            for e in self.graph.in_edges(c.node) {
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
            for e in self.graph.in_edges(c.node) {
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
    /// [`Memory::candidates`]) and their embeddings, in candidate order.
    pub fn gnn_input(&self, query: &Query, r: &Retrieval) -> (Candidates, Vec<&[f32]>) {
        let candidates = self.candidates(query, r);
        let embeddings = candidates.nodes.iter().map(|c| self.embedding(c.node)).collect();
        (candidates, embeddings)
    }

    /// How much of the learned signal this conversation trusts, the cold start: 0 below
    /// `gnn.cold_start_episodes` episodes, 1 from there ([`cold_start_blend`]).
    pub fn cold_start(&self) -> f32 {
        cold_start_blend(self.episodes.len(), self.config.gnn.cold_start_episodes)
    }

    /// Applies the learned relevance to a `synapse-gnn` result (other modes pass through):
    /// every episode of the pool (`gnn.pool`, [`RetrieveConfig::depth`]) gains
    /// `weight · blend · relevance` in its score, where blend is the cold start
    /// ([`Memory::cold_start`]), the episodes are reordered by it and the
    /// best `top_k` kept. The gate's confidence stays synapse's.
    /// Then the learned gate decides, when the settings choose it ([`Memory::know`], on the
    /// ranking before the rerank).
    pub fn learned(&self, query: &Query, r: Retrieval) -> Result<Retrieval> {
        let known = self.know(query, &r)?;
        let mut r = self.rerank(query, r)?;
        r.hits.truncate(self.config.top_k);
        if let Some((confidence, rejected)) = known {
            (r.confidence, r.rejected) = (confidence, rejected);
        }
        Ok(r)
    }

    /// This memory with every mode ranking as deep as `synapse-gnn`'s rerank pool: the
    /// `synapse` results of the learned relevance's training examples are then the candidates
    /// the rerank will see.
    pub fn ranking_the_pool(mut self) -> Memory {
        self.config.top_k = self.config.depth(Mode::SynapseGnn);
        self
    }

    /// The rerank of [`Memory::learned`].
    fn rerank(&self, query: &Query, mut r: Retrieval) -> Result<Retrieval> {
        if r.mode != Mode::SynapseGnn || r.hits.is_empty() {
            return Ok(r);
        }
        let (candidates, embeddings) = self.gnn_input(query, &r);
        let model = self.relevance()?;
        let relevance = model.score(&candidates, &query.embedding, &embeddings)?;
        let weight = self.config.gnn.weight.unwrap_or(model.card.weight) * self.cold_start();
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
