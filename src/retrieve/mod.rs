//! Retrieval over one conversation's memory: anchors by BM25 and dense similarity, the
//! retrieval modes (the baselines, Synapse and its ablations), the triple hybrid score, the
//! uncertainty gate, and explanations. Returns episodes in score order; [`Retrieval::time_ordered`]
//! is how they are handed to a caller.
//!
//! This module must not embed text (the caller passes the query embedding) nor touch the store
//! ([`Memory::new`] takes what the store returned).

pub mod bm25;
pub mod engine;
pub mod index;

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::activation::{self, ActivationConfig, Resting, Spreading, Trace};
use crate::embed::EMBEDDING_DIM;
use crate::error::{Error, Result};
use crate::gnn::features::cold_start_blend;
use crate::gnn::{Candidate, Candidates, Relevance};
use crate::gpu::corpus::GraphInput;
use crate::gpu::layout::MAX_LIST;
use crate::gpu::ranker::{RankSettings, Ranked};
use crate::graph::pagerank::Transition;
use crate::graph::{EdgeKind, Graph, NodeRef};
use crate::parallel::select_top;
use crate::store::Episode;
use bm25::{Analyzer, Bm25Index};
use index::{DenseIndex, IndexConfig};

/// A retrieval mode; the names are the CLI values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// MiniLM cosine only.
    Dense,
    /// BM25 only.
    Bm25,
    /// Reciprocal-rank fusion of dense and BM25.
    Rrf,
    /// 0.5·dense + 0.3·BM25 + 0.2·importance (Mnemosyne).
    Linear,
    /// Personalised PageRank from the anchors over the memory graph (HippoRAG style).
    Ppr,
    /// The full method.
    Synapse,
    /// Synapse with the learned GraphSAGE relevance as a fourth signal, reranking its result.
    SynapseGnn,
    /// Synapse without lateral inhibition (β = 0).
    NoInhibition,
    /// Synapse without the fan effect (fan = 1).
    NoFan,
    /// Synapse without decay (δ = 0).
    NoDecay,
    /// Synapse without edges (no propagation, no PageRank).
    NoGraph,
}

impl Mode {
    /// Every mode, in report order.
    pub const ALL: [Mode; 11] = [
        Mode::Dense,
        Mode::Bm25,
        Mode::Rrf,
        Mode::Linear,
        Mode::Ppr,
        Mode::Synapse,
        Mode::SynapseGnn,
        Mode::NoInhibition,
        Mode::NoFan,
        Mode::NoDecay,
        Mode::NoGraph,
    ];

    /// CLI name.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Dense => "dense",
            Mode::Bm25 => "bm25",
            Mode::Rrf => "rrf",
            Mode::Linear => "linear",
            Mode::Ppr => "ppr",
            Mode::Synapse => "synapse",
            Mode::SynapseGnn => "synapse-gnn",
            Mode::NoInhibition => "no-inhibition",
            Mode::NoFan => "no-fan",
            Mode::NoDecay => "no-decay",
            Mode::NoGraph => "no-graph",
        }
    }

    /// Parses a CLI name.
    pub fn parse(s: &str) -> Result<Mode> {
        Mode::ALL.into_iter().find(|m| m.as_str() == s).ok_or_else(|| {
            let names: Vec<&str> = Mode::ALL.iter().map(|m| m.as_str()).collect();
            Error::InvalidArgument(format!("unknown mode '{s}' (one of: {})", names.join(", ")))
        })
    }

    /// Synapse or one of its ablations: runs the activation dynamics, gated by activation.
    pub fn is_synapse(self) -> bool {
        matches!(
            self,
            Mode::Synapse | Mode::SynapseGnn | Mode::NoInhibition | Mode::NoFan | Mode::NoDecay | Mode::NoGraph
        )
    }
}

/// The names of [`Mode::as_str`] as the command line's values (`--mode`, `--modes`).
impl clap::ValueEnum for Mode {
    fn value_variants<'a>() -> &'a [Self] {
        &Mode::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.as_str()))
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Retrieval settings; defaults are the paper's unless stated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetrieveConfig {
    /// Episodes returned, k (default 30).
    pub top_k: usize,
    /// Anchors taken from each trigger: the top nodes by BM25 and by dense similarity (default 10).
    pub anchor_k: usize,
    /// Scale of the initial activation, `a(0) = α·max(0, sim)` on anchors (default 2; the
    /// paper's 1 leaves most anchors under the sigmoid's threshold θ after one step).
    pub alpha: f32,
    /// Share of lexical evidence in `sim`, w: the similarity that seeds anchors and enters the
    /// hybrid score is `(1 − w)·cosine + w·BM25 / max BM25 of the query` (default 0.7; the
    /// paper's cosine-only similarity, w = 0, lost 21 points of recall@10 on the tuning
    /// conversations, where MiniLM alone is the weakest signal).
    pub lexical_weight: f32,
    /// Weight of the similarity in the hybrid score, λ1 (default 0.6; the paper's 0.5).
    pub lambda_similarity: f32,
    /// Weight of activation, λ2 (default 0.4; the paper's 0.3).
    pub lambda_activation: f32,
    /// Weight of PageRank (divided by its maximum), λ3 (default 0; the paper's 0.2 favours hub
    /// concepts and cost 1–3 points of recall@10 on the tuning conversations).
    pub lambda_pagerank: f32,
    /// Reject when the activation of the top-ranked node is under this, τ_gate (default 0.12).
    /// Applies to `synapse` and its ablations; the baselines have no gate unless calibrated.
    pub gate_threshold: f32,
    /// Let a concept node in the ranking stand for its best-scoring episode not yet returned
    /// (default true, as the paper); when false only episode nodes are ranked.
    pub concepts_in_results: bool,
    /// Let concept nodes be anchors (default true, as the paper); when false only episodes are
    /// anchors, and concepts gain activation only through the episodes that anchor.
    pub concept_anchors: bool,
    /// Subtracted from the cosine of every passage of a long turn after its first, wherever the
    /// cosine enters (dense anchors, the similarity, the baselines' dense score; default 0.15).
    /// A turn's later passages are mostly code, tables and lists that match many queries a
    /// little: without it they took half of the dense top-10 slots on BEAM and brought a tenth
    /// of the evidence found. The paper stores short turns whole, so it has no such term; a
    /// memory without passages (LoCoMo) is not changed by it.
    pub passage_discount: f32,
    /// Multiply the confidence by the speaker agreement when the query names one speaker of
    /// the conversation: the best returned episode that speaker said, relative to the best
    /// (default true). Adversarial LoCoMo questions ask about one speaker what the other said.
    pub speaker_check: bool,
    /// The RRF constant (default 60).
    pub rrf_k: f32,
    /// Importance of a turn in the `linear` mode: turns carry no user-assigned importance, so
    /// every turn gets this value (default 0.5) and the term does not change the order.
    pub importance: f32,
    /// Damping of the `ppr` baseline (default 0.85).
    pub ppr_damping: f32,
    /// BM25 k1 (default 1.2).
    pub bm25_k1: f32,
    /// BM25 b (default 0.75).
    pub bm25_b: f32,
    /// The activation dynamics.
    pub activation: ActivationConfig,
    /// The learned relevance signal of `synapse-gnn`.
    pub gnn: GnnConfig,
    /// The dense index of large memories (CPU retrieval in the synapse modes).
    pub index: IndexConfig,
}

/// Settings of the learned relevance signal (`synapse-gnn`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GnnConfig {
    /// Weights file, its card beside it as `<name>.json` (default: the model that ships with
    /// Myelin, `models/gnn/relevance.safetensors`, built into the library).
    pub weights: Option<PathBuf>,
    /// Weight of the learned relevance in the score, λ4 (default: the weight the model's card
    /// chose on its validation split).
    pub weight: Option<f32>,
    /// Episodes from which the learned signal is fully trusted: it enters the score scaled by
    /// min(1, episodes / this), the seed's cold start (default 15).
    pub cold_start_episodes: usize,
}

impl Default for GnnConfig {
    fn default() -> Self {
        GnnConfig { weights: None, weight: None, cold_start_episodes: 15 }
    }
}

impl Default for RetrieveConfig {
    fn default() -> Self {
        RetrieveConfig {
            top_k: 30,
            anchor_k: 10,
            alpha: 2.0,
            lexical_weight: 0.7,
            lambda_similarity: 0.6,
            lambda_activation: 0.4,
            lambda_pagerank: 0.0,
            gate_threshold: 0.12,
            concepts_in_results: true,
            concept_anchors: true,
            passage_discount: 0.15,
            speaker_check: true,
            rrf_k: 60.0,
            importance: 0.5,
            ppr_damping: 0.85,
            bm25_k1: bm25::DEFAULT_K1,
            bm25_b: bm25::DEFAULT_B,
            activation: ActivationConfig::default(),
            gnn: GnnConfig::default(),
            index: IndexConfig::default(),
        }
    }
}

impl RetrieveConfig {
    /// Rejects settings retrieval cannot run with.
    pub fn validate(&self) -> Result<()> {
        if self.top_k == 0 {
            return Err(Error::InvalidArgument("top_k must be at least 1".into()));
        }
        if !(0.0..=1.0).contains(&self.lexical_weight) {
            return Err(Error::InvalidArgument(format!("lexical_weight {} is not in [0, 1]", self.lexical_weight)));
        }
        if !(self.passage_discount.is_finite() && self.passage_discount >= 0.0) {
            return Err(Error::InvalidArgument(format!(
                "passage_discount {} is not a finite non-negative number",
                self.passage_discount
            )));
        }
        if !(0.0..1.0).contains(&self.ppr_damping) {
            return Err(Error::InvalidArgument(format!("ppr_damping {} is not in [0, 1)", self.ppr_damping)));
        }
        if let Some(w) = self.gnn.weight
            && !(w.is_finite() && w >= 0.0)
        {
            return Err(Error::InvalidArgument(format!("gnn.weight {w} is not a finite non-negative number")));
        }
        self.activation.validate()
    }

    /// The dynamics a synapse-family mode runs with.
    pub fn activation_for(&self, mode: Mode) -> ActivationConfig {
        let mut a = self.activation.clone();
        match mode {
            Mode::NoInhibition => a.inhibition_beta = 0.0,
            Mode::NoFan => a.fan_effect = false,
            Mode::NoDecay => a.decay = 0.0,
            _ => {}
        }
        a
    }

    /// The GPU settings of a synapse-family mode (`None` for the baselines, which run on the
    /// CPU): the mode's dynamics, and enough of the ranking read back to hand over `top_k`
    /// episodes as the CPU would.
    pub fn rank_settings(&self, mode: Mode) -> Option<RankSettings> {
        if !mode.is_synapse() {
            return None;
        }
        let c = self;
        let a = c.activation_for(mode);
        Some(RankSettings {
            steps: a.steps,
            decay: a.decay,
            beta: a.inhibition_beta,
            top_m: a.inhibition_top_m,
            gamma: a.sigmoid_gamma,
            theta: a.sigmoid_theta,
            alpha: c.alpha,
            lexical_weight: c.lexical_weight,
            lambdas: [c.lambda_similarity, c.lambda_activation, c.lambda_pagerank],
            edges: mode != Mode::NoGraph,
            no_fan: mode == Mode::NoFan,
            pagerank: mode != Mode::NoGraph,
            anchor_k: c.anchor_k,
            out_k: (4 * c.top_k).max(c.top_k + 64).min(MAX_LIST),
            top_k: c.top_k,
            concepts: c.concepts_in_results,
            concept_anchors: c.concept_anchors,
            passage_discount: c.passage_discount,
        })
    }
}

/// A query ready to run: its text, analysed terms and embedding.
#[derive(Debug, Clone)]
pub struct Query {
    /// The text.
    pub text: String,
    /// BM25 terms.
    pub terms: Vec<String>,
    /// L2-normalised embedding.
    pub embedding: Vec<f32>,
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
        Ok(Query { text: text.to_string(), terms: analyzer.terms(text), embedding })
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

impl Retrieval {
    /// Episode indices in time (conversation) order: how the result is handed over.
    pub fn time_ordered(&self) -> Vec<&Hit> {
        let mut hits: Vec<&Hit> = self.hits.iter().collect();
        hits.sort_by_key(|h| h.episode);
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
    /// Node id of each episode.
    episode_nodes: Vec<u32>,
    /// Per node: normalised age (0 newest) and log-scaled degree, for the learned signal.
    age: Vec<f32>,
    importance: Vec<f32>,
    /// The model of `synapse-gnn`, loaded on first use (a load error is kept and returned).
    relevance: std::sync::OnceLock<std::result::Result<Arc<Relevance>, String>>,
    /// The dense index, built on the first query that uses it.
    index: std::sync::OnceLock<DenseIndex>,
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
        Memory::assemble(conversation, episodes, graph, embeddings, bm25, config)
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
        let mut memory = Memory::assemble(&self.conversation, episodes, graph, embeddings, bm25, self.config.clone())?;
        memory.sparse_min_nodes = self.sparse_min_nodes;
        Ok(memory)
    }

    /// The rest of a memory, from its node embeddings and lexical index.
    fn assemble(
        conversation: &str,
        episodes: Vec<Episode>,
        graph: Graph,
        embeddings: Vec<f32>,
        bm25: Bm25Index,
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
        let mut speakers: Vec<String> =
            episodes.iter().map(|e| first_name(&e.speaker)).filter(|s| !s.is_empty()).collect();
        speakers.sort();
        speakers.dedup();
        let age = node_ages(&graph, &concept_episodes);
        let importance = node_importance(&graph);
        Ok(Memory {
            speakers,
            episode_nodes,
            age,
            importance,
            relevance: std::sync::OnceLock::new(),
            index: std::sync::OnceLock::new(),
            resting: std::sync::OnceLock::new(),
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

    fn base(&self, query: &Query) -> Base {
        let n = self.graph.node_count();
        let dense = self.dense_scan(query);
        let mut bm25 = vec![0.0; n];
        self.bm25.score_into(&query.terms, &mut bm25);
        let w = self.config.lexical_weight;
        let max = bm25.iter().copied().fold(0.0f32, f32::max);
        let sim = if w == 0.0 || max == 0.0 {
            dense.clone()
        } else {
            dense.iter().zip(&bm25).map(|(d, b)| (1.0 - w) * d + w * b / max).collect()
        };
        Base { dense, bm25, sim }
    }

    /// The dense score of node `i` whose cosine (or a bound of it) is `cosine`: less
    /// `passage_discount` for a turn's later passage, the cosine itself otherwise.
    fn dense_score(&self, i: usize, cosine: f32) -> f32 {
        dense_score(i, cosine, self.turn_nodes[i], self.config.passage_discount)
    }

    /// The exact dense score of `node` for `query`.
    fn node_dense(&self, node: u32, query: &Query) -> f32 {
        self.dense_score(node as usize, dot(self.embedding(node), &query.embedding))
    }

    /// The dense score of every node for `query`, by a scan of every embedding.
    fn dense_scan(&self, query: &Query) -> Vec<f32> {
        self.discounted(dots(&self.embeddings, &query.embedding))
    }

    /// [`Memory::dense_score`] of every node, from their cosines (or bounds).
    fn discounted(&self, mut cosines: Vec<f32>) -> Vec<f32> {
        if self.config.passage_discount != 0.0 {
            for (i, x) in cosines.iter_mut().enumerate() {
                *x = self.dense_score(i, *x);
            }
        }
        cosines
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

    /// Runs one query in a synapse mode and explains each returned episode's node.
    pub fn explain(&self, query: &Query, mode: Mode) -> Result<(Retrieval, Vec<Explanation>)> {
        let mut trace = Trace::default();
        let base = self.base(query);
        let r = self.learned(query, self.run(query, &base, mode, Some(&mut trace)))?;
        if !mode.is_synapse() {
            return Ok((r, Vec::new()));
        }
        let dense_rank = rank_order(&base.dense);
        let bm25_rank = rank_order(&base.bm25);
        let k = self.config.anchor_k;
        let spreading = self.spreading_for(mode);
        let decay = self.config.activation_for(mode).decay;
        let explanations = r
            .hits
            .iter()
            .map(|h| {
                let i = h.node as usize;
                let position = |order: &[u32]| order.iter().take(k).position(|&x| x as usize == i).map(|p| p + 1);
                let mut path = vec![h.node];
                let mut at = i;
                for t in (0..trace.potential.len()).rev() {
                    let a = &trace.activation[t];
                    let kept = (1.0 - decay) * a[at];
                    let best = spreading
                        .in_edges(at)
                        .map(|(j, c)| (j, c * a[j]))
                        .max_by(|x, y| x.1.total_cmp(&y.1).then(y.0.cmp(&x.0)));
                    if let Some((j, flow)) = best
                        && flow > kept
                    {
                        at = j;
                    }
                    path.push(at as u32);
                }
                path.reverse();
                path.dedup();
                Explanation {
                    node: h.node,
                    dense_anchor_rank: position(&dense_rank).filter(|_| base.dense[i] > 0.0),
                    bm25_anchor_rank: position(&bm25_rank).filter(|_| base.bm25[i] > 0.0),
                    activation: trace.activation.iter().map(|a| a[i]).collect(),
                    inhibition: trace.potential.iter().zip(&trace.inhibited).map(|(u, h)| u[i] - h[i]).collect(),
                    path,
                }
            })
            .collect();
        Ok((r, explanations))
    }

    /// The model behind `synapse-gnn`: the settings' weights file, or the shipped model.
    /// Loaded on first use; a missing or mismatched file is an error, on every call.
    pub fn relevance(&self) -> Result<&Arc<Relevance>> {
        self.relevance
            .get_or_init(|| {
                Relevance::for_config(self.config.gnn.weights.as_deref()).map_err(|e| match e {
                    Error::Model(m) => m,
                    other => other.to_string(),
                })
            })
            .as_ref()
            .map_err(|e| Error::Model(e.clone()))
    }

    /// The embedding of `node`.
    pub fn embedding(&self, node: u32) -> &[f32] {
        let i = node as usize;
        &self.embeddings[i * EMBEDDING_DIM..(i + 1) * EMBEDDING_DIM]
    }

    /// The candidate subgraph of a synapse-family result: its returned episodes in result
    /// order, then the concepts that brought one of them, then up to [`LINKING_CONCEPTS`]
    /// concepts linked to two or more of them (most links first); every graph edge between
    /// two candidates, in both directions. Built only from what the result carries and the
    /// query's lexical evidence, so the CPU and the GPU results give the same candidates.
    pub fn candidates(&self, query: &Query, lexical: &Lexical, r: &Retrieval) -> Candidates {
        let max_bm25 = lexical.entries.iter().map(|e| e.1).fold(0.0f32, f32::max);
        let w = self.config.lexical_weight;
        let named = self.named_speaker(query);
        let mut local: std::collections::HashMap<u32, u32> = std::collections::HashMap::new();
        let mut nodes: Vec<Candidate> = Vec::new();
        let make = |node: u32, ranked: Option<(f32, f32)>, rank: Option<usize>, via_concept: bool| {
            let i = node as usize;
            let cosine = self.node_dense(node, query);
            let bm25 = if max_bm25 > 0.0 { lexical.score(node) / max_bm25 } else { 0.0 };
            let (concept, episodes, speaker) = match self.graph.nodes[i] {
                NodeRef::Episode(e) => {
                    let said = first_name(&self.episodes[e as usize].speaker);
                    let speaker = named.as_ref().map_or(0.0, |s| if *s == said { 1.0 } else { -1.0 });
                    (false, vec![e], speaker)
                }
                NodeRef::Concept(_) => {
                    (true, self.concept_episodes[i].iter().map(|&n| self.episode_of(n)).collect(), 0.0)
                }
            };
            Candidate {
                node,
                concept,
                episodes,
                cosine,
                bm25,
                similarity: if max_bm25 > 0.0 { (1.0 - w) * cosine + w * bm25 } else { cosine },
                ranked,
                rank,
                via_concept,
                pagerank: if r.mode == Mode::NoGraph { 0.0 } else { self.graph.pagerank[i] },
                age: self.age[i],
                importance: self.importance[i],
                speaker,
                anchor: r.anchors.binary_search(&node).is_ok(),
            }
        };
        let signals = |h: &Hit| Some((h.signals.activation.unwrap_or(0.0), h.signals.score));
        for (rank, h) in r.hits.iter().enumerate() {
            let node = self.episode_nodes[h.episode as usize];
            local.insert(node, nodes.len() as u32);
            nodes.push(make(node, signals(h), Some(rank), h.node != node));
        }
        let hits = nodes.len();
        for (rank, h) in r.hits.iter().enumerate() {
            if let std::collections::hash_map::Entry::Vacant(slot) = local.entry(h.node) {
                slot.insert(nodes.len() as u32);
                nodes.push(make(h.node, signals(h), Some(rank), false));
            }
        }
        let mut links: std::collections::HashMap<u32, u32> = std::collections::HashMap::new();
        for c in &nodes[..hits] {
            for e in self.graph.in_edges(c.node) {
                if e.kind == EdgeKind::Abstraction && !local.contains_key(&e.src) {
                    *links.entry(e.src).or_default() += 1;
                }
            }
        }
        let mut linking: Vec<(u32, u32)> = links.into_iter().filter(|&(_, n)| n >= 2).collect();
        linking.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        for (node, _) in linking.into_iter().take(LINKING_CONCEPTS) {
            local.insert(node, nodes.len() as u32);
            nodes.push(make(node, None, None, false));
        }
        let mut edges = Vec::new();
        for (l, c) in nodes.iter().enumerate() {
            for e in self.graph.in_edges(c.node) {
                if let Some(&s) = local.get(&e.src) {
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
        let candidates = self.candidates(query, &self.lexical(query), r);
        let embeddings = candidates.nodes.iter().map(|c| self.embedding(c.node)).collect();
        (candidates, embeddings)
    }

    /// How much of the learned signal this conversation trusts: the cold-start blend,
    /// min(1, episodes / `gnn.cold_start_episodes`).
    pub fn cold_start(&self) -> f32 {
        cold_start_blend(self.episodes.len(), self.config.gnn.cold_start_episodes)
    }

    /// Applies the learned relevance to a `synapse-gnn` result (other modes pass through):
    /// every returned episode's score gains `weight · blend · relevance`, where blend is the
    /// cold start, min(1, episodes / `gnn.cold_start_episodes`), and the episodes are reordered
    /// by it. The gate's confidence stays synapse's.
    pub fn learned(&self, query: &Query, mut r: Retrieval) -> Result<Retrieval> {
        if r.mode != Mode::SynapseGnn || r.hits.is_empty() {
            return Ok(r);
        }
        let (candidates, embeddings) = self.gnn_input(query, &r);
        let model = self.relevance()?;
        let relevance = model.score(&candidates, &query.embedding, &embeddings)?;
        let weight = self.config.gnn.weight.unwrap_or(model.card.weight) * self.cold_start();
        let scores: Vec<f32> = r.hits.iter().map(|h| h.signals.score).collect();
        let order = crate::gnn::relevance::rerank(&scores, &relevance[..r.hits.len()], weight);
        let hits = std::mem::take(&mut r.hits);
        r.hits = order
            .into_iter()
            .map(|i| {
                let mut h = hits[i].clone();
                h.signals.relevance = Some(relevance[i]);
                h.signals.score = crate::gnn::relevance::combined(scores[i], relevance[i], weight);
                h
            })
            .collect();
        Ok(r)
    }

    /// What the GPU ranking step needs of this memory's graph.
    pub fn gpu_input(&self) -> GraphInput<'_> {
        GraphInput {
            embeddings: &self.embeddings,
            spreading: &self.spreading,
            spreading_no_fan: &self.spreading_no_fan,
            pagerank: &self.graph.pagerank,
            links: &self.concept_episodes,
            turns: &self.turn_nodes,
            transition: &self.transition,
        }
    }

    /// A query's lexical evidence in the form the GPU takes: its non-zero BM25 scores and its
    /// BM25 anchors (the same values and anchors the CPU path uses).
    pub fn lexical(&self, query: &Query) -> Lexical {
        let entries = self.bm25.score_sparse(&query.terms);
        let mut ranked = entries.clone();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let anchors = ranked
            .into_iter()
            .filter(|&(d, _)| self.config.concept_anchors || self.turn_nodes[d as usize] != CONCEPT_TURN)
            .take(self.config.anchor_k)
            .map(|(d, _)| d)
            .collect();
        Lexical { entries, anchors }
    }

    /// The GPU settings of a synapse-family mode ([`RetrieveConfig::rank_settings`]).
    pub fn rank_settings(&self, mode: Mode) -> Option<RankSettings> {
        self.config.rank_settings(mode)
    }

    /// Turns the GPU's result for `query` into the retrieval the CPU returns. `None` when the
    /// ranked nodes the GPU could see did not decide the walk: the caller then runs the query
    /// on the CPU.
    pub fn finish(&self, query: &Query, lexical: &Lexical, ranked: &Ranked, mode: Mode) -> Option<Retrieval> {
        if !ranked.complete {
            return None;
        }
        let graph_modes = mode != Mode::NoGraph;
        let hits = ranked
            .hits
            .iter()
            .map(|h| {
                let i = h.node as usize;
                Hit {
                    episode: self.episode_of(h.episode_node),
                    node: h.node,
                    signals: Signals {
                        dense: self.node_dense(h.node, query),
                        bm25: lexical.score(h.node),
                        activation: Some(h.activation),
                        pagerank: Some(if graph_modes { self.graph.pagerank[i] } else { 0.0 }),
                        relevance: None,
                        score: h.score,
                    },
                }
            })
            .collect();
        let mut anchors = ranked.dense_anchors.clone();
        anchors.extend(&lexical.anchors);
        anchors.sort_unstable();
        anchors.dedup();
        Some(self.gate(query, Retrieval { mode, hits, confidence: ranked.confidence, rejected: false, anchors }))
    }

    /// Every node's activation after spreading from `initial` (node, a₀) in `mode`. Synapse
    /// and synapse-gnn on a memory of `sparse_min_nodes` or more compute it on the nodes the
    /// anchors reach ([`activation::spread_sparse`]) where that is exact; otherwise, and when
    /// `trace` is asked for, on every node. The result is the same to the bit.
    fn activate(&self, mode: Mode, initial: &[(u32, f32)], trace: Option<&mut Trace>) -> Vec<f32> {
        let n = self.graph.node_count();
        let config = self.config.activation_for(mode);
        if trace.is_none() && n >= self.sparse_min_nodes && matches!(mode, Mode::Synapse | Mode::SynapseGnn) {
            let resting = self.resting.get_or_init(|| Resting::new(&self.spreading, &config));
            if let Some(sparse) = activation::spread_sparse(&self.spreading, resting, &config, initial) {
                return sparse.to_dense(n);
            }
        }
        let mut a0 = vec![0.0f32; n];
        for &(i, v) in initial {
            a0[i as usize] = v;
        }
        activation::spread(self.spreading_for(mode), &config, &a0, trace)
    }

    fn spreading_for(&self, mode: Mode) -> &Spreading {
        match mode {
            Mode::NoFan => &self.spreading_no_fan,
            Mode::NoGraph => &self.no_graph,
            _ => &self.spreading,
        }
    }

    /// Anchors: the union of the top `anchor_k` nodes by BM25 (score > 0) and by dense
    /// similarity, ascending node id.
    fn anchors(&self, base: &Base) -> Vec<u32> {
        self.with_lexical_anchors(top_order(&self.anchor_scores(&base.dense), self.config.anchor_k), &base.bm25)
    }

    /// `dense` anchors joined by the top `anchor_k` nodes by BM25 (score > 0), ascending node id.
    fn with_lexical_anchors(&self, mut dense: Vec<u32>, bm25: &[f32]) -> Vec<u32> {
        let bm25 = self.anchor_scores(bm25);
        dense.extend(top_order(&bm25, self.config.anchor_k).into_iter().filter(|&i| bm25[i as usize] > 0.0));
        dense.sort_unstable();
        dense.dedup();
        dense
    }

    /// `scores` as anchors are chosen by: concepts' at −∞ unless concepts may anchor.
    fn anchor_scores<'a>(&self, scores: &'a [f32]) -> std::borrow::Cow<'a, [f32]> {
        if self.config.concept_anchors {
            return std::borrow::Cow::Borrowed(scores);
        }
        std::borrow::Cow::Owned(
            scores
                .iter()
                .zip(&self.turn_nodes)
                .map(|(&s, &t)| if t == CONCEPT_TURN { f32::NEG_INFINITY } else { s })
                .collect(),
        )
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

    /// The `anchor_k` nodes of highest dense score (ties by lower node), as a scan finds them:
    /// exact dense scores, written into `known`, for a window of the best bounds, widened until
    /// the last anchor's score is above every bound outside it.
    fn dense_anchors(&self, bound: &[f32], known: &mut [f32], query: &Query) -> Vec<u32> {
        let (n, k) = (bound.len(), self.config.anchor_k);
        let mut window = (4 * k).max(64).min(n);
        loop {
            let (chosen, next) = select_top(bound, window);
            let mut exact: Vec<(u32, f32)> = chosen
                .into_iter()
                .map(|i| {
                    let x = &mut known[i as usize];
                    if x.is_nan() {
                        *x = self.node_dense(i, query);
                    }
                    (i, *x)
                })
                .collect();
            exact.sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)));
            exact.truncate(k);
            let settled = match next {
                None => true,
                Some(next) => exact.len() == k && exact.last().is_some_and(|x| x.1 > next),
            };
            if settled {
                return exact.into_iter().map(|x| x.0).collect();
            }
            window = (window * 4).min(n);
        }
    }

    /// A synapse-family mode through the dense index: the quantised embeddings bound every
    /// node's cosine, so its dense score; exact dense scores are computed for the dense
    /// anchors' candidates and for the nodes whose score bound could place them in the result
    /// ([`Memory::rank_hits`]). Anchors, scores and result are the scan's, to the bit.
    /// `bounds` are the index's ([`DenseIndex::bounds`] of the query).
    fn run_indexed(&self, query: &Query, mode: Mode, bounds: Vec<f32>) -> Retrieval {
        let n = self.graph.node_count();
        let c = &self.config;
        let mut bm25 = vec![0.0f32; n];
        self.bm25.score_into(&query.terms, &mut bm25);
        let max = bm25.iter().copied().fold(0.0f32, f32::max);
        let w = c.lexical_weight;
        // The same expression as `base`, so a scored node's score is the scan's to the bit.
        let sim = |dense: f32, i: usize| {
            if w == 0.0 || max == 0.0 { dense } else { (1.0 - w) * dense + w * bm25[i] / max }
        };
        // Bounds and exact values of the dense score, as `base` computes it.
        let dense_bound = self.discounted(bounds);
        let mut known = vec![f32::NAN; n];
        let dense_anchors = self.dense_anchors(&self.anchor_scores(&dense_bound), &mut known, query);
        let anchors = self.with_lexical_anchors(dense_anchors, &bm25);
        let known = known;
        let dense_of = |i: u32| {
            let x = known[i as usize];
            if x.is_nan() { self.node_dense(i, query) } else { x }
        };
        let a0: Vec<(u32, f32)> =
            anchors.iter().map(|&i| (i, (c.alpha * sim(dense_of(i), i as usize)).max(0.0))).collect();
        let a = self.activate(mode, &a0, None);
        let pagerank = |i: usize| if mode == Mode::NoGraph { 0.0 } else { self.graph.pagerank[i] };
        let hybrid = |dense: f32, i: usize| {
            c.lambda_similarity * sim(dense, i) + c.lambda_activation * a[i] + c.lambda_pagerank * pagerank(i)
        };
        let bound: Vec<f32> =
            (0..n).map(|i| hybrid(if known[i].is_nan() { dense_bound[i] } else { known[i] }, i)).collect();
        let score = |i: u32| hybrid(dense_of(i), i as usize);
        let (hits, top) = self.rank_hits(&bound, false, true, &score, &|i, s| Signals {
            dense: dense_of(i as u32),
            bm25: bm25[i],
            activation: Some(a[i]),
            pagerank: Some(pagerank(i)),
            relevance: None,
            score: s,
        });
        let confidence = top.map_or(0.0, |i| a[i as usize]);
        self.gate(query, Retrieval { mode, hits, confidence, rejected: false, anchors })
    }

    /// The result's episodes: nodes are taken best first (score descending, then node id)
    /// through [`Memory::expand`] until `top_k` episodes are in. `bound` holds each node's
    /// score when `exact`, otherwise an upper bound of it; `score` gives a node's exact score.
    /// Only a window of the best bounds is scored, widened until every node outside it is
    /// bounded below the last node the result used, so the result is the full ranking's.
    /// Returns the hits and the top-ranked node.
    fn rank_hits(
        &self,
        bound: &[f32],
        exact: bool,
        concepts: bool,
        score: &dyn Fn(u32) -> f32,
        signals: &dyn Fn(usize, f32) -> Signals,
    ) -> (Vec<Hit>, Option<u32>) {
        let n = bound.len();
        let top_k = self.config.top_k;
        let mut window = (4 * top_k + 64).min(n);
        loop {
            let (chosen, next) = select_top(bound, window);
            let mut order: Vec<(u32, f32)> =
                chosen.into_iter().map(|i| (i, if exact { bound[i as usize] } else { score(i) })).collect();
            if !exact {
                order.sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)));
            }
            let (hits, used) = self.expand(&order, concepts, score, signals);
            let settled = match next {
                None => true,
                Some(next) => hits.len() >= top_k && (exact || order[used - 1].1 > next),
            };
            if settled {
                return (hits, order.first().map(|o| o.0));
            }
            window = (window * 4).min(n);
        }
    }

    fn run(&self, query: &Query, base: &Base, mode: Mode, trace: Option<&mut Trace>) -> Retrieval {
        let n = self.graph.node_count();
        let episode_only = |scores: &[f32]| -> Vec<f32> {
            (0..n)
                .map(|i| match self.graph.nodes[i] {
                    NodeRef::Episode(_) => scores[i],
                    NodeRef::Concept(_) => f32::NEG_INFINITY,
                })
                .collect()
        };
        let signals = |i: usize, score: f32, activation: Option<f32>, pagerank: Option<f32>| Signals {
            dense: base.dense[i],
            bm25: base.bm25[i],
            activation,
            pagerank,
            relevance: None,
            score,
        };
        match mode {
            Mode::Dense | Mode::Bm25 | Mode::Rrf | Mode::Linear => {
                let scores = match mode {
                    Mode::Dense => base.dense.clone(),
                    Mode::Bm25 => base.bm25.clone(),
                    Mode::Rrf => {
                        let mut s = vec![0.0f32; n];
                        for list in [&base.dense, &base.bm25] {
                            for (rank, i) in rank_order(&episode_only(list)).into_iter().enumerate() {
                                s[i as usize] += 1.0 / (self.config.rrf_k + rank as f32 + 1.0);
                            }
                        }
                        s
                    }
                    _ => {
                        let max = episode_only(&base.bm25).into_iter().fold(0.0f32, f32::max);
                        (0..n)
                            .map(|i| {
                                let lexical = if max > 0.0 { base.bm25[i] / max } else { 0.0 };
                                0.5 * base.dense[i] + 0.3 * lexical + 0.2 * self.config.importance
                            })
                            .collect()
                    }
                };
                let ranked = episode_only(&scores);
                let (hits, _) =
                    self.rank_hits(&ranked, true, false, &|i| ranked[i as usize], &|i, s| signals(i, s, None, None));
                let confidence = hits.first().map_or(0.0, |h| h.signals.score);
                self.gate(query, Retrieval { mode, hits, confidence, rejected: false, anchors: Vec::new() })
            }
            Mode::Ppr => {
                let anchors = self.anchors(base);
                let mut teleport = vec![0.0f64; n];
                for &a in &anchors {
                    teleport[a as usize] = (self.config.alpha * base.sim[a as usize]).max(0.0) as f64 + 1e-6;
                }
                let ppr = self.transition.rank(self.config.ppr_damping as f64, Some(&teleport));
                let scores: Vec<f32> = ppr.iter().map(|&p| (p * n as f64) as f32).collect();
                let (hits, _) = self.rank_hits(&scores, true, true, &|i| scores[i as usize], &|i, s| {
                    signals(i, s, Some(s), Some(self.graph.pagerank[i]))
                });
                let confidence = hits.first().map_or(0.0, |h| h.signals.score);
                self.gate(query, Retrieval { mode, hits, confidence, rejected: false, anchors })
            }
            _ => {
                let anchors = self.anchors(base);
                let a0: Vec<(u32, f32)> =
                    anchors.iter().map(|&i| (i, (self.config.alpha * base.sim[i as usize]).max(0.0))).collect();
                let a = self.activate(mode, &a0, trace);
                let c = &self.config;
                let pagerank: Vec<f32> = if mode == Mode::NoGraph { vec![0.0; n] } else { self.graph.pagerank.clone() };
                let scores: Vec<f32> = (0..n)
                    .map(|i| {
                        c.lambda_similarity * base.sim[i] + c.lambda_activation * a[i] + c.lambda_pagerank * pagerank[i]
                    })
                    .collect();
                let (hits, top) = self.rank_hits(&scores, true, true, &|i| scores[i as usize], &|i, s| {
                    signals(i, s, Some(a[i]), Some(pagerank[i]))
                });
                let confidence = top.map_or(0.0, |i| a[i as usize]);
                self.gate(query, Retrieval { mode, hits, confidence, rejected: false, anchors })
            }
        }
    }

    /// Applies the speaker check to the confidence and, in synapse modes, the threshold.
    fn gate(&self, query: &Query, mut r: Retrieval) -> Retrieval {
        if self.config.speaker_check
            && let Some(ratio) = self.speaker_agreement(query, &r.hits)
        {
            r.confidence *= ratio;
        }
        r.rejected = r.mode.is_synapse() && r.confidence < self.config.gate_threshold;
        r
    }

    /// When the query names exactly one of the conversation's speakers: the score of the best
    /// returned episode that speaker said, divided by the best score (0 when they said none of
    /// them). `None` when the query names no speaker or several.
    pub fn speaker_agreement(&self, query: &Query, hits: &[Hit]) -> Option<f32> {
        let speaker = self.named_speaker(query)?;
        let top = hits.first()?.signals.score;
        let own = hits
            .iter()
            .find(|h| first_name(&self.episodes[h.episode as usize].speaker) == speaker)
            .map_or(0.0, |h| h.signals.score);
        Some(if top > 0.0 { (own / top).clamp(0.0, 1.0) } else { 0.0 })
    }

    /// The one speaker of the conversation the query names (first name, lower case), if it
    /// names exactly one.
    fn named_speaker(&self, query: &Query) -> Option<String> {
        let words: Vec<String> = query
            .text
            .split(|c: char| !c.is_alphanumeric())
            .map(|w| w.to_lowercase())
            .filter(|w| !w.is_empty())
            .collect();
        let named: Vec<&String> = self.speakers.iter().filter(|s| words.contains(s)).collect();
        let [speaker] = named.as_slice() else { return None };
        Some((*speaker).clone())
    }

    fn episode_of(&self, node: u32) -> u32 {
        match self.graph.nodes[node as usize] {
            NodeRef::Episode(e) => e,
            NodeRef::Concept(_) => u32::MAX,
        }
    }

    /// Walks a node ranking, (node, score) best first, into at most `top_k` episodes of
    /// distinct turns: an episode stands for itself unless a passage of its turn is already
    /// taken; a concept (when `concepts` and `concepts_in_results`) for its linked episode that
    /// ranks best (`score`, then lower node) and whose turn is not yet taken; otherwise it is
    /// passed over. Returns the hits and how many nodes of `order` it used. (`walk` in
    /// shaders/score.wgsl is the GPU's twin.)
    fn expand(
        &self,
        order: &[(u32, f32)],
        concepts: bool,
        score: &dyn Fn(u32) -> f32,
        signals: &dyn Fn(usize, f32) -> Signals,
    ) -> (Vec<Hit>, usize) {
        let mut taken = vec![false; self.episodes.len()];
        let free = |taken: &[bool], e: u32| !taken[self.turns[e as usize] as usize];
        let mut hits = Vec::with_capacity(self.config.top_k);
        let mut used = 0;
        for &(i, s) in order {
            if hits.len() >= self.config.top_k {
                break;
            }
            used += 1;
            let episode = match self.graph.nodes[i as usize] {
                NodeRef::Episode(e) => Some(e),
                NodeRef::Concept(_) if concepts && self.config.concepts_in_results => self.concept_episodes[i as usize]
                    .iter()
                    .copied()
                    .filter(|&e| free(&taken, self.episode_of(e)))
                    .map(|e| (e, score(e)))
                    .min_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)))
                    .map(|(e, _)| self.episode_of(e)),
                NodeRef::Concept(_) => None,
            };
            if let Some(e) = episode
                && free(&taken, e)
            {
                taken[self.turns[e as usize] as usize] = true;
                hits.push(Hit { episode: e, node: i, signals: signals(i as usize, s) });
            }
        }
        (hits, used)
    }

    /// The first passage's episode of each episode's turn (itself for a whole turn).
    pub fn turns(&self) -> &[u32] {
        &self.turns
    }
}

/// Memories of at least this many nodes spread activation sparsely where that is exact
/// ([`Memory::activate`]); in smaller ones a pass over every node costs as little.
pub const SPARSE_NODES: usize = 4_096;

/// Queries of a batch whose dense-index bounds are computed in one pass over the codes
/// ([`Memory::retrieve_many`]): 16 queries' bounds of a 10M-token memory are 3.8 MB.
pub const BOUNDS_GROUP: usize = 16;

/// [`Memory`]'s turn of a concept node in the GPU walk's column: no turn.
pub const CONCEPT_TURN: u32 = u32::MAX;

/// The dense score of node `i` whose cosine (or a bound of it) is `cosine` and whose turn's
/// first passage is node `turn` ([`CONCEPT_TURN`] for a concept): `cosine − discount` for a
/// turn's later passage, `cosine` otherwise (see [`RetrieveConfig::passage_discount`];
/// `dense_scan` in shaders/similarity.wgsl is the GPU's twin).
#[inline]
pub fn dense_score(i: usize, cosine: f32, turn: u32, discount: f32) -> f32 {
    if turn != i as u32 && turn != CONCEPT_TURN { cosine - discount } else { cosine }
}

/// Per episode (conversation order): the episode holding its turn's first passage, itself for
/// a whole turn or one whose first passage is not stored.
fn turn_starts(episodes: &[Episode]) -> Vec<u32> {
    let first: std::collections::HashMap<&str, u32> =
        episodes.iter().enumerate().map(|(i, e)| (e.turn_id.as_str(), i as u32)).collect();
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

/// Node ids by descending score, ties by ascending id; NaN and −∞ last.
pub fn rank_order(scores: &[f32]) -> Vec<u32> {
    let mut order: Vec<u32> = (0..scores.len() as u32).collect();
    order.sort_by(|&a, &b| scores[b as usize].total_cmp(&scores[a as usize]).then(a.cmp(&b)));
    order
}

/// The first `k` node ids of [`rank_order`], without sorting the rest.
pub fn top_order(scores: &[f32], k: usize) -> Vec<u32> {
    select_top(scores, k).0
}

/// The first word of a speaker's name, lower case ("Caroline", "Dr. Ann Lee" → "dr").
fn first_name(speaker: &str) -> String {
    speaker.split(|c: char| !c.is_alphanumeric()).find(|w| !w.is_empty()).unwrap_or("").to_lowercase()
}

/// Dot product with eight independent accumulators, so the compiler can vectorise it (a single
/// running sum is a serial chain of additions: 3.5× slower on the query path, measured).
#[inline(always)]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// `dot(row, query)` for every row of `rows` (`n × EMBEDDING_DIM`): the same sums in the same
/// order, so the same values, across threads for a large memory
/// ([`crate::parallel::fill_nodes`]).
pub fn dots(rows: &[f32], query: &[f32]) -> Vec<f32> {
    let mut out = vec![0.0f32; rows.len() / EMBEDDING_DIM];
    crate::parallel::fill_nodes(&mut out, |first, piece| {
        dots_into(&rows[first * EMBEDDING_DIM..(first + piece.len()) * EMBEDDING_DIM], query, piece)
    });
    out
}

/// [`dots`] of some rows into `out`, compiled also for AVX2 and picked at run time (a scan
/// reads every embedding; the wider vectors keep it at memory speed).
#[multiversion::multiversion(targets("x86_64+avx2"))]
fn dots_into(rows: &[f32], query: &[f32], out: &mut [f32]) {
    for (o, v) in out.iter_mut().zip(rows.chunks_exact(EMBEDDING_DIM)) {
        *o = dot(v, query);
    }
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
    use rand::rngs::StdRng;
    use rand::{RngExt, SeedableRng};

    #[test]
    fn a_memory_extended_write_by_write_is_the_memory_built_at_once() {
        let (texts, graphs) = crate::graph::build::growing_graphs(60);
        let mut rng = StdRng::seed_from_u64(4);
        let vectors = crate::graph::synthetic::unit_embeddings(texts.len(), &mut rng);
        let episodes: Vec<Episode> = texts
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
            })
            .collect();
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
    fn a_scan_split_across_threads_gives_each_row_its_dot_product() {
        let n = crate::parallel::PARALLEL_NODES + 333;
        let mut rng = StdRng::seed_from_u64(9);
        let rows: Vec<f32> = (0..n * EMBEDDING_DIM).map(|_| rng.random_range(-0.1..0.1f32)).collect();
        let q: Vec<f32> = (0..EMBEDDING_DIM).map(|_| rng.random_range(-0.1..0.1f32)).collect();
        let scan = dots(&rows, &q);
        assert_eq!(scan.len(), n);
        for (i, &x) in scan.iter().enumerate() {
            assert_eq!(x.to_bits(), dot(&rows[i * EMBEDDING_DIM..(i + 1) * EMBEDDING_DIM], &q).to_bits(), "row {i}");
        }
    }
}
