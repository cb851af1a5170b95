//! Retrieval over one conversation's memory: anchors by BM25 and dense similarity, the
//! retrieval modes (the baselines, Synapse and its ablations), the triple hybrid score, the
//! uncertainty gate, and explanations. Returns episodes in score order; [`Retrieval::time_ordered`]
//! is how they are handed to a caller.
//!
//! This module must not embed text (the caller passes the query embedding) nor touch the store
//! ([`Memory::new`] takes what the store returned).

mod anchors;
pub mod bm25;
mod collect;
mod config;
pub mod engine;
mod explain;
pub mod gate;
mod gpu;
pub mod index;
mod learned;
mod modes;
mod signals;

pub use config::{Gate, GnnConfig, Mode, RetrieveConfig};

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::activation::{self, Resting, Spreading, Trace};
use crate::embed::EMBEDDING_DIM;
use crate::error::{Error, Result};
use crate::gnn::features::cold_start_blend;
use crate::gnn::{Candidate, Candidates, Relevance};
use crate::gpu::corpus::GraphInput;
use crate::gpu::ranker::{RankSettings, Ranked};
use crate::graph::pagerank::Transition;
use crate::graph::{EdgeKind, Graph, NodeRef};
use crate::parallel::select_top;
use crate::score::{
    CONCEPT_TURN, dense_score, dot, dots, hybrid, initial_activation, rank_order, similarity, top_order,
};
use crate::store::Episode;
use bm25::{Analyzer, Bm25Index};
use index::DenseIndex;

/// A query ready to run: its text, analysed terms and embedding.
#[derive(Debug, Clone)]
pub struct Query {
    /// The text.
    pub text: String,
    /// BM25 terms.
    pub terms: Vec<String>,
    /// L2-normalised embedding.
    pub embedding: Vec<f32>,
    /// The episodes (by index) a result may hold; `None`: every one. Ranking is unchanged: a
    /// result is the full ranking's best allowed episodes (a filter applied inside ranking,
    /// not to a cut list).
    pub only: Option<std::sync::Arc<[bool]>>,
}

impl Query {
    /// Analyses `text`; `embedding` is its MiniLM vector. An empty query is an error.
    pub fn new(analyzer: &mut Analyzer, text: &str, embedding: Vec<f32>) -> Result<Query> {
        if text.trim().is_empty() {
            return Err(Error::InvalidArgument("empty query".into()));
        }
        if embedding.len() != EMBEDDING_DIM {
            return Err(Error::InvalidArgument(format!(
                "query embedding has {} values, expected {EMBEDDING_DIM}",
                embedding.len()
            )));
        }
        Ok(Query { text: text.to_string(), terms: analyzer.terms(text), embedding, only: None })
    }
}

impl Query {
    /// Whether a result may hold episode `e`.
    pub fn allows(&self, e: u32) -> bool {
        self.only.as_ref().is_none_or(|only| only.get(e as usize).copied().unwrap_or(false))
    }
}

/// The signals behind one returned episode.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Signals {
    /// Cosine of the query and the node, less `passage_discount` for a turn's later passage
    /// (see [`RetrieveConfig::passage_discount`]).
    pub dense: f32,
    /// BM25 of the node.
    pub bm25: f32,
    /// Final activation a(T) (synapse modes) or personalised PageRank (ppr).
    pub activation: Option<f32>,
    /// PageRank divided by its maximum (graph modes).
    pub pagerank: Option<f32>,
    /// Learned relevance in [0, 1] (`synapse-gnn`).
    pub relevance: Option<f32>,
    /// The mode's score, which orders the result.
    pub score: f32,
}

/// One returned episode.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hit {
    /// Index of the episode in the conversation.
    pub episode: u32,
    /// The node that brought it: the episode's own, or a concept that stands for it.
    pub node: u32,
    /// Signals of that node.
    pub signals: Signals,
}

/// The result of one query in one mode.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Retrieval {
    /// The mode.
    pub mode: Mode,
    /// Episodes in score order (best first), at most `top_k`.
    pub hits: Vec<Hit>,
    /// The gate's signal: the activation of the top-ranked node (synapse modes) or the top
    /// score (baselines).
    pub confidence: f32,
    /// Whether the gate rejects the query (never for a baseline without a threshold).
    pub rejected: bool,
    /// Anchor nodes (graph modes).
    pub anchors: Vec<u32>,
}

/// The order a result is shown in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// Best first (mem0's contract).
    #[default]
    Score,
    /// In the order they were said: the paper's hand-over order, for building a prompt.
    Time,
}

impl Order {
    /// Its name in requests and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Order::Score => "score",
            Order::Time => "time",
        }
    }
}

impl Retrieval {
    /// Episode indices in time (conversation) order: how the paper hands the result over.
    pub fn time_ordered(&self) -> Vec<&Hit> {
        self.in_order(Order::Time)
    }

    /// The hits best first, or in time order.
    pub fn in_order(&self, order: Order) -> Vec<&Hit> {
        let mut hits: Vec<&Hit> = self.hits.iter().collect();
        if order == Order::Time {
            hits.sort_by_key(|h| h.episode);
        }
        hits
    }
}

/// Why a node ended where it did (synapse modes): what `--explain` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Explanation {
    /// The node explained.
    pub node: u32,
    /// Rank among all nodes by dense similarity, if it was a dense anchor.
    pub dense_anchor_rank: Option<usize>,
    /// Rank by BM25, if it was a BM25 anchor.
    pub bm25_anchor_rank: Option<usize>,
    /// Activation a(0) … a(T).
    pub activation: Vec<f32>,
    /// Inhibition received per step, u − û.
    pub inhibition: Vec<f32>,
    /// The strongest path the activation took into the node, from the earliest step: the node
    /// whose contribution was largest at each step (the node itself when retention dominated).
    pub path: Vec<u32>,
}

/// One conversation's memory, ready for queries.
#[derive(Debug, Clone)]
pub struct Memory {
    conversation: String,
    episodes: Vec<Episode>,
    graph: Graph,
    /// Node embeddings, `node_count × EMBEDDING_DIM`.
    embeddings: Vec<f32>,
    bm25: Bm25Index,
    /// Per concept node: its episodes (abstraction out-edges).
    concept_episodes: Vec<Vec<u32>>,
    /// Per episode: the episode of its turn's first passage (itself for a whole turn). A
    /// result holds a turn once.
    turns: Vec<u32>,
    /// Per node: the node of its turn's first passage for an episode, [`CONCEPT_TURN`] for a
    /// concept (the GPU walk's twin of `turns`).
    turn_nodes: Vec<u32>,
    spreading: Spreading,
    spreading_no_fan: Spreading,
    no_graph: Spreading,
    transition: Transition,
    /// Distinct speakers' first names, lower case.
    speakers: Vec<String>,
    /// Per episode: its speaker's first name, lower case ([`first_name`]).
    said_by: Vec<String>,
    /// Per episode: whether it speaks of its listener rather than its speaker
    /// ([`gate::speaks_of_listener`]).
    of_listener: Vec<bool>,
    /// Node id of each episode.
    episode_nodes: Vec<u32>,
    /// Per node: normalised age (0 newest) and log-scaled degree, for the learned signal.
    age: Vec<f32>,
    importance: Vec<f32>,
    /// The model of `synapse-gnn`, loaded on first use (a load error is kept and returned).
    relevance: std::sync::OnceLock<std::result::Result<Arc<Relevance>, String>>,
    /// The learned gate's model, the same way.
    knowing: std::sync::OnceLock<std::result::Result<Arc<crate::knowing::GateModel>, String>>,
    /// The dense index, built on the first query that uses it.
    index: std::sync::OnceLock<DenseIndex>,
    /// Per episode: the tokens of its embedded text as [`Memory::hand_over`] counts them,
    /// counted the first time it is handed over.
    tokens: Vec<std::sync::OnceLock<usize>>,
    /// What unreached nodes hold under `spreading` with the configured dynamics, built on the
    /// first query that spreads sparsely.
    resting: std::sync::OnceLock<Resting>,
    /// Smallest memory, in nodes, that spreads sparsely ([`SPARSE_NODES`]).
    sparse_min_nodes: usize,
    config: RetrieveConfig,
}

/// Per-query signals shared by all modes.
struct Base {
    dense: Vec<f32>,
    bm25: Vec<f32>,
    /// The similarity of the graph modes: cosine blended with normalised BM25.
    sim: Vec<f32>,
}

/// A query's BM25 evidence for the GPU: non-zero scores by ascending node, and its BM25 anchors.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Lexical {
    /// (node, BM25 score), ascending node.
    pub entries: Vec<(u32, f32)>,
    /// The top `anchor_k` nodes by BM25.
    pub anchors: Vec<u32>,
}

impl Lexical {
    /// The BM25 score of `node` (0 without a match).
    pub fn score(&self, node: u32) -> f32 {
        self.entries.binary_search_by_key(&node, |e| e.0).map_or(0.0, |k| self.entries[k].1)
    }
}

impl Memory {
    /// Builds the in-memory indices from what the store holds. `episodes` in conversation order.
    pub fn new(conversation: &str, episodes: Vec<Episode>, graph: Graph, config: RetrieveConfig) -> Result<Memory> {
        config.validate()?;
        graph.check(conversation, episodes.len())?;
        let (embeddings, texts) = node_rows(conversation, &episodes, &graph, 0)?;
        let mut analyzer = Analyzer::new()?;
        let terms: Vec<Vec<String>> = texts.iter().map(|t| analyzer.terms(t)).collect();
        let bm25 = Bm25Index::build(&terms, config.bm25_k1, config.bm25_b);
        let of_listener = episodes.iter().map(|e| gate::speaks_of_listener(&e.text)).collect();
        Memory::assemble(conversation, episodes, graph, embeddings, bm25, of_listener, config)
    }

    /// This memory with `added` episodes after its own and `graph`, a later version of its
    /// graph that holds them (the serving API's builder after a write): [`Memory::new`] of all
    /// the episodes and `graph`, to the bit, without analysing again the text of the nodes the
    /// two graphs share (the first stretch of node ids) or copying their embeddings one by one.
    pub fn extend(&self, added: Vec<Episode>, graph: Graph) -> Result<Memory> {
        let mut episodes = Vec::with_capacity(self.episodes.len() + added.len());
        episodes.extend_from_slice(&self.episodes);
        episodes.extend(added);
        graph.check(&self.conversation, episodes.len())?;
        let kept = self.graph.shared_nodes(&graph);
        let (fresh, texts) = node_rows(&self.conversation, &episodes, &graph, kept)?;
        let mut embeddings = Vec::with_capacity(graph.node_count() * EMBEDDING_DIM);
        embeddings.extend_from_slice(&self.embeddings[..kept * EMBEDDING_DIM]);
        // A concept's embedding moves when a mention merges into it; its label never changes.
        for (id, node) in graph.nodes[..kept].iter().enumerate() {
            if let NodeRef::Concept(c) = *node {
                let v = &graph.concepts[c as usize].embedding;
                if v.len() != EMBEDDING_DIM {
                    return Err(no_embedding(&self.conversation, id));
                }
                embeddings[id * EMBEDDING_DIM..(id + 1) * EMBEDDING_DIM].copy_from_slice(v);
            }
        }
        embeddings.extend_from_slice(&fresh);
        let mut analyzer = Analyzer::new()?;
        let terms: Vec<Vec<String>> = texts.iter().map(|t| analyzer.terms(t)).collect();
        let mut bm25 = self.bm25.clone();
        bm25.truncate(kept);
        bm25.extend(&terms);
        // The episodes it keeps keep their texts, so whom they speak of.
        let mut of_listener = self.of_listener.clone();
        of_listener.extend(episodes[self.episodes.len()..].iter().map(|e| gate::speaks_of_listener(&e.text)));
        let mut memory =
            Memory::assemble(&self.conversation, episodes, graph, embeddings, bm25, of_listener, self.config.clone())?;
        memory.sparse_min_nodes = self.sparse_min_nodes;
        // The episodes it keeps keep their texts, so their counts.
        memory.tokens[..self.tokens.len()].clone_from_slice(&self.tokens);
        Ok(memory)
    }

    /// The rest of a memory, from its node embeddings, lexical index and, per episode, whether
    /// it speaks of its listener.
    fn assemble(
        conversation: &str,
        episodes: Vec<Episode>,
        graph: Graph,
        embeddings: Vec<f32>,
        bm25: Bm25Index,
        of_listener: Vec<bool>,
        config: RetrieveConfig,
    ) -> Result<Memory> {
        let n = graph.node_count();
        let mut concept_episodes = vec![Vec::new(); n];
        for e in &graph.edges {
            if e.kind == EdgeKind::Abstraction && matches!(graph.nodes[e.src as usize], NodeRef::Concept(_)) {
                concept_episodes[e.src as usize].push(e.dst);
            }
        }
        let turns = turn_starts(&episodes);
        let episode_nodes = graph.episode_nodes();
        let turn_nodes = graph
            .nodes
            .iter()
            .map(|n| match *n {
                NodeRef::Episode(e) => episode_nodes[turns[e as usize] as usize],
                NodeRef::Concept(_) => CONCEPT_TURN,
            })
            .collect();
        let spreading = Spreading::new(&graph, &config.activation_for(Mode::Synapse));
        let spreading_no_fan = Spreading::new(&graph, &config.activation_for(Mode::NoFan));
        let transition =
            Transition::new(n, graph.edges.iter().map(|e| (e.src, e.dst, config.activation.edge_weight(e))));
        let said_by: Vec<String> = episodes.iter().map(|e| first_name(&e.speaker)).collect();
        let mut speakers: Vec<String> = said_by.iter().filter(|s| !s.is_empty()).cloned().collect();
        speakers.sort();
        speakers.dedup();
        let age = node_ages(&graph, &concept_episodes);
        let importance = node_importance(&graph);
        Ok(Memory {
            speakers,
            said_by,
            of_listener,
            episode_nodes,
            age,
            importance,
            relevance: std::sync::OnceLock::new(),
            knowing: std::sync::OnceLock::new(),
            index: std::sync::OnceLock::new(),
            resting: std::sync::OnceLock::new(),
            tokens: vec![std::sync::OnceLock::new(); episodes.len()],
            sparse_min_nodes: SPARSE_NODES,
            conversation: conversation.to_string(),
            episodes,
            no_graph: Spreading::empty(n),
            graph,
            embeddings,
            bm25,
            concept_episodes,
            turns,
            turn_nodes,
            spreading,
            spreading_no_fan,
            transition,
            config,
        })
    }

    /// The conversation id.
    pub fn conversation(&self) -> &str {
        &self.conversation
    }

    /// Its episodes in conversation order.
    pub fn episodes(&self) -> &[Episode] {
        &self.episodes
    }

    /// Its graph.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The settings it retrieves with.
    pub fn config(&self) -> &RetrieveConfig {
        &self.config
    }

    /// A short name for a node: the turn id of an episode, `concept:<label>` for a concept.
    pub fn node_name(&self, node: u32) -> String {
        match self.graph.nodes.get(node as usize) {
            Some(NodeRef::Episode(e)) => self.episodes[*e as usize].turn_id.clone(),
            Some(NodeRef::Concept(c)) => format!("concept:{}", self.graph.concepts[*c as usize].label),
            None => format!("node {node}"),
        }
    }

    /// Runs one query in one mode.
    pub fn retrieve(&self, query: &Query, mode: Mode) -> Result<Retrieval> {
        let r = match self.index_for(mode) {
            Some(index) => self.run_indexed(query, mode, index.bounds(&query.embedding)),
            None => self.run(query, &self.base(query), mode, None),
        };
        self.learned(query, r)
    }

    /// The dense index a query in `mode` goes through: a synapse-family mode on a memory that
    /// has one, with a non-negative similarity weight (the score bounds need it).
    fn index_for(&self, mode: Mode) -> Option<&DenseIndex> {
        (mode.is_synapse() && self.config.lambda_similarity >= 0.0).then(|| self.dense_index()).flatten()
    }

    /// Runs many queries in one mode, in parallel over the queries; the same results as one
    /// [`Memory::retrieve`] each.
    pub fn retrieve_batch(&self, queries: &[Query], mode: Mode) -> Result<Vec<Retrieval>> {
        self.retrieve_many(&queries.iter().collect::<Vec<_>>(), mode)
    }

    /// [`Memory::retrieve_batch`] of borrowed queries. Through the dense index, the bounds of
    /// each group of [`BOUNDS_GROUP`] queries come from one pass over the codes
    /// ([`DenseIndex::bounds_batch`]) instead of one pass each.
    pub fn retrieve_many(&self, queries: &[&Query], mode: Mode) -> Result<Vec<Retrieval>> {
        use rayon::prelude::*;
        let Some(index) = self.index_for(mode) else {
            return queries.par_iter().map(|q| self.retrieve(q, mode)).collect();
        };
        let mut out = Vec::with_capacity(queries.len());
        for group in queries.chunks(BOUNDS_GROUP) {
            let embeddings: Vec<&[f32]> = group.iter().map(|q| q.embedding.as_slice()).collect();
            let bounds = index.bounds_batch(&embeddings);
            let results: Vec<Retrieval> = group
                .par_iter()
                .zip(bounds)
                .map(|(q, bounds)| self.learned(q, self.run_indexed(q, mode, bounds)))
                .collect::<Result<_>>()?;
            out.extend(results);
        }
        Ok(out)
    }

    /// The embedding of `node`.
    pub fn embedding(&self, node: u32) -> &[f32] {
        let i = node as usize;
        &self.embeddings[i * EMBEDDING_DIM..(i + 1) * EMBEDDING_DIM]
    }

    /// The dense index of this memory, built on first use; `None` when the settings give it
    /// none (see [`IndexConfig::applies`]).
    pub fn dense_index(&self) -> Option<&DenseIndex> {
        if !self.config.index.applies(self.graph.node_count()) {
            return None;
        }
        Some(self.index.get_or_init(|| DenseIndex::build(&self.embeddings)))
    }

    /// Sets the smallest memory, in nodes, that spreads activation sparsely (default
    /// [`SPARSE_NODES`]; 0 always tries, `usize::MAX` never does). Results do not change.
    pub fn set_sparse_min_nodes(&mut self, nodes: usize) {
        self.sparse_min_nodes = nodes;
    }

    /// Sets the gate its results go through.
    pub fn set_gate(&mut self, gate: Gate) {
        self.config.gate = gate;
    }

    /// Turns the dense index on or off; a built index is kept.
    pub fn set_index_enabled(&mut self, enabled: bool) {
        self.config.index.enabled = enabled;
    }

    /// How many of the query's true `anchor_k` dense anchors (by a scan of every node) the
    /// dense index gives, and `anchor_k`; `None` without an index. The anchors are those
    /// retrieval uses: dense scores, episodes only unless concepts may anchor.
    pub fn dense_anchor_recall(&self, query: &Query) -> Option<(usize, usize)> {
        let index = self.dense_index()?;
        let mut known = vec![f32::NAN; self.graph.node_count()];
        let bounds = self.discounted(index.bounds(&query.embedding));
        let found = self.dense_anchors(&self.anchor_scores(&bounds), &mut known, query);
        let truth = top_order(&self.anchor_scores(&self.dense_scan(query)), self.config.anchor_k);
        Some((truth.iter().filter(|t| found.contains(t)).count(), truth.len()))
    }
}

/// Memories of at least this many nodes spread activation sparsely where that is exact
/// ([`Memory::activate`]); in smaller ones a pass over every node costs as little.
pub const SPARSE_NODES: usize = 4_096;

/// Queries of a batch whose dense-index bounds are computed in one pass over the codes
/// ([`Memory::retrieve_many`]): 16 queries' bounds of a 10M-token memory are 3.8 MB.
pub const BOUNDS_GROUP: usize = 16;

/// Each episode's index (conversation order) by its id (`turn_id`: a turn, or `<turn>#<k>` for
/// a later passage).
pub fn episode_index(episodes: &[Episode]) -> std::collections::HashMap<&str, u32> {
    episodes.iter().enumerate().map(|(i, e)| (e.turn_id.as_str(), i as u32)).collect()
}

/// Per episode (conversation order): the episode holding its turn's first passage, itself for
/// a whole turn or one whose first passage is not stored.
fn turn_starts(episodes: &[Episode]) -> Vec<u32> {
    let first = episode_index(episodes);
    episodes
        .iter()
        .enumerate()
        .map(|(i, e)| first.get(crate::conversation::turn_of(&e.turn_id)).copied().unwrap_or(i as u32))
        .collect()
}

/// Most concepts a candidate subgraph takes for linking two or more returned episodes.
pub const LINKING_CONCEPTS: usize = 16;

/// Normalised age of every node: 1 − position / (episodes − 1) for an episode (0 for the
/// newest), the mean of its episodes' ages for a concept.
fn node_ages(graph: &Graph, concept_episodes: &[Vec<u32>]) -> Vec<f32> {
    let last = graph.episode_count().saturating_sub(1).max(1) as f32;
    let episode_age = |node: u32| match graph.nodes[node as usize] {
        NodeRef::Episode(e) => 1.0 - e as f32 / last,
        NodeRef::Concept(_) => 0.0,
    };
    (0..graph.node_count())
        .map(|i| match graph.nodes[i] {
            NodeRef::Episode(_) => episode_age(i as u32),
            NodeRef::Concept(_) if concept_episodes[i].is_empty() => 0.0,
            NodeRef::Concept(_) => {
                concept_episodes[i].iter().map(|&n| episode_age(n)).sum::<f32>() / concept_episodes[i].len() as f32
            }
        })
        .collect()
}

/// ln(1 + degree) / ln(1 + largest degree) of every node, in and out edges counted.
fn node_importance(graph: &Graph) -> Vec<f32> {
    let mut degree = graph.out_degrees();
    for e in &graph.edges {
        degree[e.dst as usize] += 1;
    }
    let max = (1.0 + degree.iter().copied().max().unwrap_or(0) as f32).ln();
    degree.iter().map(|&d| if max > 0.0 { (1.0 + d as f32).ln() / max } else { 0.0 }).collect()
}

/// The first word of a speaker's name, lower case ("Caroline", "Dr. Ann Lee" → "dr").
fn first_name(speaker: &str) -> String {
    speaker.split(|c: char| !c.is_alphanumeric()).find(|w| !w.is_empty()).unwrap_or("").to_lowercase()
}

/// The error for a node whose embedding is not `EMBEDDING_DIM` values.
fn no_embedding(conversation: &str, node: usize) -> Error {
    Error::InvalidArgument(format!("node {node} of '{conversation}' has no {EMBEDDING_DIM}-d embedding"))
}

/// The embeddings (`EMBEDDING_DIM` values each) and indexed texts of `graph`'s nodes from
/// `from` on: an episode's from `episodes`, a concept's its own.
fn node_rows(conversation: &str, episodes: &[Episode], graph: &Graph, from: usize) -> Result<(Vec<f32>, Vec<String>)> {
    let nodes = &graph.nodes[from.min(graph.node_count())..];
    let mut embeddings = Vec::with_capacity(nodes.len() * EMBEDDING_DIM);
    let mut texts: Vec<String> = Vec::with_capacity(nodes.len());
    for (i, node) in nodes.iter().enumerate() {
        let (text, v) = match *node {
            NodeRef::Episode(e) => {
                let ep = &episodes[e as usize];
                (ep.indexed_text(), ep.embedding.as_slice())
            }
            NodeRef::Concept(c) => {
                let c = &graph.concepts[c as usize];
                (c.label.clone(), c.embedding.as_slice())
            }
        };
        if v.len() != EMBEDDING_DIM {
            return Err(no_embedding(conversation, from + i));
        }
        embeddings.extend_from_slice(v);
        texts.push(text);
    }
    Ok((embeddings, texts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn episodes_of(texts: &[String], vectors: &[f32]) -> Vec<Episode> {
        texts
            .iter()
            .enumerate()
            .map(|(i, t)| Episode {
                conversation: "c".into(),
                session: 1,
                turn_id: i.to_string(),
                position: i as u32,
                speaker: "user".into(),
                text: t.clone(),
                image_caption: None,
                timestamp: chrono::DateTime::from_timestamp(1_683_504_000 + 3_600 * i as i64, 0),
                embedding: vectors[i * EMBEDDING_DIM..(i + 1) * EMBEDDING_DIM].to_vec(),
                metadata: None,
            })
            .collect()
    }

    #[test]
    fn a_memory_extended_write_by_write_is_the_memory_built_at_once() {
        let (texts, graphs) = crate::graph::build::growing_graphs(60);
        let mut rng = StdRng::seed_from_u64(4);
        let vectors = crate::graph::synthetic::unit_embeddings(texts.len(), &mut rng);
        let episodes = episodes_of(&texts, &vectors);
        let config = RetrieveConfig::default();
        let mut memory: Option<Memory> = None;
        for (k, graph) in graphs.iter().enumerate() {
            let n = graph.episode_count();
            let grown = match &memory {
                None => Memory::new("c", episodes[..n].to_vec(), graph.clone(), config.clone()),
                Some(m) => m.extend(episodes[m.episodes().len()..n].to_vec(), graph.clone()),
            }
            .unwrap();
            let whole = Memory::new("c", episodes[..n].to_vec(), graph.clone(), config.clone()).unwrap();
            assert_eq!(grown.episodes, whole.episodes, "write {k}");
            assert_eq!(grown.graph, whole.graph, "write {k}");
            assert_eq!(grown.embeddings, whole.embeddings, "write {k}");
            assert_eq!(grown.bm25, whole.bm25, "write {k}");
            assert_eq!(grown.concept_episodes, whole.concept_episodes, "write {k}");
            assert_eq!((&grown.turns, &grown.turn_nodes), (&whole.turns, &whole.turn_nodes), "write {k}");
            assert_eq!((&grown.age, &grown.importance), (&whole.age, &whole.importance), "write {k}");
            memory = Some(grown);
        }
        assert_eq!(memory.map(|m| m.episodes.len()), Some(60));
    }

    #[test]
    fn hand_over_counts_each_episode_once_and_an_extended_memory_keeps_the_counts() {
        let (texts, graphs) = crate::graph::build::growing_graphs(60);
        let mut rng = StdRng::seed_from_u64(5);
        let vectors = crate::graph::synthetic::unit_embeddings(texts.len(), &mut rng);
        let episodes = episodes_of(&texts, &vectors);
        let config = RetrieveConfig { top_k: 20, max_context_tokens: Some(40), ..RetrieveConfig::default() };
        let n = graphs[graphs.len() - 2].episode_count();
        let first = Memory::new("c", episodes[..n].to_vec(), graphs[graphs.len() - 2].clone(), config).unwrap();
        let memory = first.extend(episodes[n..].to_vec(), graphs[graphs.len() - 1].clone()).unwrap();
        let calls = std::cell::Cell::new(0);
        let words = |t: &str| {
            calls.set(calls.get() + 1);
            Ok(t.split_whitespace().count())
        };
        let query = Query::new(&mut Analyzer::new().unwrap(), &texts[3], vectors[3 * 384..4 * 384].to_vec()).unwrap();
        let r = memory.retrieve(&query, Mode::Bm25).unwrap();
        // What the budget keeps, every text counted afresh.
        let fresh = r
            .within_budget(
                Some(40),
                r.hits.iter().map(|h| words(&memory.episodes[h.episode as usize].embedding_text())),
            )
            .unwrap();
        assert!(fresh > 1 && fresh < r.hits.len(), "the budget cuts inside the hits: {fresh} of {}", r.hits.len());
        calls.set(0);
        let once = memory.hand_over(r.clone(), words).unwrap();
        let counted = calls.get();
        assert_eq!(once.hits.len(), fresh);
        assert!(counted >= fresh, "{counted} counted for {fresh} handed");
        let twice = memory.hand_over(r.clone(), words).unwrap();
        assert_eq!((twice.hits.len(), calls.get()), (fresh, counted), "the second hand-over counts nothing");
        // Counted on the smaller memory, kept by its extension.
        calls.set(0);
        let r = first.retrieve(&query, Mode::Bm25).unwrap();
        let before = first.hand_over(r.clone(), words).unwrap();
        let counted = calls.get();
        let grown = first.extend(episodes[n..].to_vec(), graphs[graphs.len() - 1].clone()).unwrap();
        assert_eq!(grown.hand_over(r, words).unwrap().hits, before.hits);
        assert_eq!(calls.get(), counted, "the extension counted nothing again");
    }

    #[test]
    fn a_restricted_query_returns_the_full_rankings_best_allowed_episodes() {
        let (texts, graphs) = crate::graph::build::growing_graphs(60);
        let mut rng = StdRng::seed_from_u64(9);
        let vectors = crate::graph::synthetic::unit_embeddings(texts.len(), &mut rng);
        let episodes = episodes_of(&texts, &vectors);
        let graph = graphs.last().unwrap().clone();
        let config = RetrieveConfig { top_k: 5, gate: Gate::Activation, ..RetrieveConfig::default() };
        let all = RetrieveConfig { top_k: 60, ..config.clone() };
        let memory = Memory::new("c", episodes.clone(), graph.clone(), config).unwrap();
        let whole = Memory::new("c", episodes, graph, all).unwrap();
        let mut query =
            Query::new(&mut Analyzer::new().unwrap(), &texts[7], vectors[7 * 384..8 * 384].to_vec()).unwrap();
        let allowed: Vec<bool> = (0..60).map(|e| e % 3 == 1).collect();
        let unrestricted = query.clone();
        query.only = Some(allowed.clone().into());
        for mode in [Mode::Dense, Mode::Bm25, Mode::Rrf] {
            let got: Vec<u32> = memory.retrieve(&query, mode).unwrap().hits.iter().map(|h| h.episode).collect();
            let want: Vec<u32> = whole
                .retrieve(&unrestricted, mode)
                .unwrap()
                .hits
                .iter()
                .map(|h| h.episode)
                .filter(|&e| allowed[e as usize])
                .take(5)
                .collect();
            assert_eq!(got, want, "{mode:?}");
        }
        for mode in [Mode::Synapse, Mode::Ppr] {
            let hits = memory.retrieve(&query, mode).unwrap().hits;
            assert_eq!(hits.len(), 5, "{mode:?}");
            assert!(hits.iter().all(|h| allowed[h.episode as usize]), "{mode:?}");
        }
        // Nothing allowed: nothing returned.
        query.only = Some(vec![false; 60].into());
        assert!(memory.retrieve(&query, Mode::Synapse).unwrap().hits.is_empty());
    }
}
