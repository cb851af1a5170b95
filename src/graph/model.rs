//! The graph's data: nodes (episodes and concepts), edges and their kinds, PageRank values, the
//! checks of a loaded graph, and the construction settings ([`GraphConfig`]).
//!
//! Owns the shape of a graph and its invariants; it must not build graphs (that is `build`),
//! extract concepts (`extract`), score queries, or read or write the store. It imports nothing
//! from `graph/mod.rs`, which re-exports it, so the files of `graph` import each other in no
//! circle.

use serde::{Deserialize, Serialize};

use super::extract::{ConceptKind, ExtractConfig};
use super::pagerank;
/// The kind of an edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EdgeKind {
    /// Episode t−1 → episode t.
    Temporal,
    /// Episode ↔ concept extracted from its window.
    Abstraction,
    /// Concept ↔ concept, weighted by cosine similarity.
    Association,
}

impl EdgeKind {
    /// Name as stored and printed.
    pub fn as_str(self) -> &'static str {
        match self {
            EdgeKind::Temporal => "temporal",
            EdgeKind::Abstraction => "abstraction",
            EdgeKind::Association => "association",
        }
    }

    /// Parses [`EdgeKind::as_str`].
    pub fn parse(s: &str) -> Option<EdgeKind> {
        match s {
            "temporal" => Some(EdgeKind::Temporal),
            "abstraction" => Some(EdgeKind::Abstraction),
            "association" => Some(EdgeKind::Association),
            _ => None,
        }
    }
}

/// A directed edge `src → dst`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Edge {
    /// Source node.
    pub src: u32,
    /// Target node.
    pub dst: u32,
    /// Kind.
    pub kind: EdgeKind,
    /// Construction weight: 1.0 temporal, 0.8 abstraction, cosine for association.
    pub weight: f32,
    /// For temporal edges `|τ_dst − τ_src|` in hours (0 when a timestamp is unknown); 0 otherwise.
    /// Retrieval turns it into `exp(−ρ·hours)`.
    pub hours: f32,
}

/// What a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeRef {
    /// The episode at this index of the conversation (conversation order).
    Episode(u32),
    /// The concept at this index of [`Graph::concepts`].
    Concept(u32),
}

/// A semantic node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Concept {
    /// Normalised identity (see `extract`).
    pub key: String,
    /// Surface form as first seen; what was embedded.
    pub label: String,
    /// Name, phrase, term or date.
    pub kind: ConceptKind,
    /// Windows it was extracted from (merges included).
    pub mentions: u32,
    /// L2-normalised embedding, updated by an exponential moving average on merges.
    pub embedding: Vec<f32>,
}

/// The graph of one conversation. Node ids are given in arrival order: each episode as it
/// arrives, each new concept when its window is consolidated.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Graph {
    /// Node id → what it is.
    pub nodes: Vec<NodeRef>,
    /// Concept nodes.
    pub concepts: Vec<Concept>,
    /// Every edge, sorted by (dst, src).
    pub edges: Vec<Edge>,
    /// PageRank per node, divided by its maximum so the top node has 1 (all 0 for no nodes).
    pub pagerank: Vec<f32>,
}

impl Graph {
    /// Sets `pagerank` from the edges: weighted PageRank with `damping`, divided by its
    /// maximum. The builder calls it when it finishes; a memory loaded from a store calls it
    /// again (the serving API rewrites only the graph rows a write changed, so the stored
    /// column can be older than the edges), which gives the builder's values to the bit since
    /// the edges are in the same (dst, src) order.
    pub fn rank(&mut self, damping: f32) {
        let rank = pagerank::Transition::new(self.node_count(), self.edges.iter().map(|e| (e.src, e.dst, e.weight)))
            .rank(damping as f64, None);
        let max = rank.iter().copied().fold(0.0f64, f64::max);
        self.pagerank = rank.iter().map(|p| if max > 0.0 { (p / max) as f32 } else { 0.0 }).collect();
    }

    /// A CRC-32 of the graph as stored: its nodes, its concepts (key, label, kind, mentions,
    /// the bits of their embeddings) and its edges; PageRank, derived from the edges, aside.
    /// The store keeps it with the graph and checks it when it reads the graph back.
    pub fn checksum(&self) -> u32 {
        // Fixed-size fields go through one buffer: hashing them a few bytes a call is slow.
        let mut bytes: Vec<u8> = Vec::with_capacity(8 + 5 * self.nodes.len() + 17 * self.edges.len());
        bytes.extend_from_slice(&(self.nodes.len() as u64).to_le_bytes());
        for node in &self.nodes {
            let (tag, i) = match *node {
                NodeRef::Episode(e) => (0u8, e),
                NodeRef::Concept(c) => (1u8, c),
            };
            bytes.push(tag);
            bytes.extend_from_slice(&i.to_le_bytes());
        }
        for e in &self.edges {
            bytes.extend_from_slice(&e.src.to_le_bytes());
            bytes.extend_from_slice(&e.dst.to_le_bytes());
            bytes.push(e.kind as u8);
            bytes.extend_from_slice(&e.weight.to_bits().to_le_bytes());
            bytes.extend_from_slice(&e.hours.to_bits().to_le_bytes());
        }
        let mut h = crc32fast::Hasher::new();
        h.update(&bytes);
        for c in &self.concepts {
            for text in [c.key.as_str(), c.label.as_str(), c.kind.as_str()] {
                h.update(&(text.len() as u64).to_le_bytes());
                h.update(text.as_bytes());
            }
            h.update(&c.mentions.to_le_bytes());
            h.update(&(c.embedding.len() as u64).to_le_bytes());
            let bits: Vec<u8> = c.embedding.iter().flat_map(|x| x.to_bits().to_le_bytes()).collect();
            h.update(&bits);
        }
        h.finalize()
    }

    /// How many first nodes this graph and `other` share (ids `0..n` are the same nodes in
    /// both): a later version of a growing graph keeps the earlier one's nodes, up to the
    /// concepts of the window it consolidated last.
    pub fn shared_nodes(&self, other: &Graph) -> usize {
        self.nodes.iter().zip(&other.nodes).take_while(|(a, b)| a == b).count()
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Number of episode nodes.
    pub fn episode_count(&self) -> usize {
        self.nodes.len() - self.concepts.len()
    }

    /// Out-degree of every node (the fan of the fan effect).
    pub fn out_degrees(&self) -> Vec<u32> {
        let mut out = vec![0u32; self.nodes.len()];
        for e in &self.edges {
            out[e.src as usize] += 1;
        }
        out
    }

    /// The edges into `node` (a slice: edges are sorted by destination).
    pub fn in_edges(&self, node: u32) -> &[Edge] {
        let start = self.edges.partition_point(|e| e.dst < node);
        let end = self.edges.partition_point(|e| e.dst <= node);
        &self.edges[start..end]
    }

    /// Node id of each episode, by episode index.
    pub fn episode_nodes(&self) -> Vec<u32> {
        let mut out = vec![0u32; self.episode_count()];
        for (id, node) in self.nodes.iter().enumerate() {
            if let NodeRef::Episode(e) = node {
                out[*e as usize] = id as u32;
            }
        }
        out
    }

    /// Checks the invariants a reader relies on: node references in range and unique, edges
    /// between existing nodes, sorted by (dst, src) without duplicates, one PageRank per node.
    pub fn validate(&self) -> std::result::Result<(), String> {
        let n = self.nodes.len();
        let mut seen_episode = vec![false; n];
        let mut seen_concept = vec![false; self.concepts.len()];
        for (id, node) in self.nodes.iter().enumerate() {
            let (seen, i) = match *node {
                NodeRef::Episode(e) => (&mut seen_episode, e as usize),
                NodeRef::Concept(c) => (&mut seen_concept, c as usize),
            };
            match seen.get_mut(i) {
                Some(s) if !*s => *s = true,
                _ => return Err(format!("node {id} refers to {node:?}, out of range or repeated")),
            }
        }
        if self.episode_count() != seen_episode.iter().filter(|s| **s).count() {
            return Err("episode indices are not 0..episodes".into());
        }
        for pair in self.edges.windows(2) {
            if (pair[0].dst, pair[0].src) >= (pair[1].dst, pair[1].src) {
                return Err(format!("edges not sorted or repeated at {} → {}", pair[1].src, pair[1].dst));
            }
        }
        if let Some(e) = self.edges.iter().find(|e| e.src as usize >= n || e.dst as usize >= n || e.src == e.dst) {
            return Err(format!("edge {} → {} is not between two distinct nodes of {n}", e.src, e.dst));
        }
        if self.pagerank.len() != n {
            return Err(format!("{} PageRank values for {n} nodes", self.pagerank.len()));
        }
        Ok(())
    }
}

impl Graph {
    /// [`Graph::validate`], and that the graph has `episodes` episode nodes; errors name the
    /// conversation.
    pub fn check(&self, conversation: &str, episodes: usize) -> crate::error::Result<()> {
        let bad = |m: String| Err(crate::error::Error::InvalidArgument(format!("graph of '{conversation}': {m}")));
        if let Err(e) = self.validate() {
            return bad(e);
        }
        if self.episode_count() != episodes {
            return bad(format!("{} episodes in the graph, {episodes} given", self.episode_count()));
        }
        Ok(())
    }
}

/// Settings of graph construction (Synapse §3.1); the defaults are the paper's unless stated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GraphConfig {
    /// Turns per concept-extraction window, N (default 5). Windows do not overlap.
    pub window: usize,
    /// A new concept whose embedding has cosine above this with an existing one is merged into
    /// it, τ_dup (default 0.92).
    pub dedup_threshold: f32,
    /// Weight of the new embedding in the moving average of a merge (default 0.1).
    pub merge_rate: f32,
    /// Least cosine for an association edge between two concepts (default 0.6; the paper's
    /// 0.92 cannot fire for pairs that deduplication already merged).
    pub association_threshold: f32,
    /// Association edges each new concept gets at most, its most similar concepts (default 15).
    pub association_top: usize,
    /// Also link each episode back to its predecessor (t → t−1, same weight), so activation
    /// reaches the turn a reply answers (default false: forward only, as the paper).
    pub temporal_backward: bool,
    /// Weight of abstraction edges (default 0.8).
    pub abstraction_weight: f32,
    /// Which episodes of a window a concept links to: `window` (all of them, as the paper) or
    /// `mention` (only those whose text mentions it) (default `mention`).
    pub abstraction_scope: AbstractionScope,
    /// Each node keeps at most this many incoming edges, the heaviest (ties: the newest source),
    /// K (default 15).
    pub max_in_edges: usize,
    /// PageRank damping factor (default 0.85).
    pub pagerank_damping: f32,
    /// The deterministic concept extractor.
    pub extract: ExtractConfig,
}

/// Which episodes a concept is linked to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AbstractionScope {
    /// Every episode of the window it was extracted from.
    Window,
    /// The episodes of the window whose text mentions it.
    Mention,
}

impl Default for GraphConfig {
    fn default() -> Self {
        GraphConfig {
            window: 5,
            dedup_threshold: 0.92,
            merge_rate: 0.1,
            association_threshold: 0.6,
            association_top: 15,
            temporal_backward: false,
            abstraction_weight: 0.8,
            abstraction_scope: AbstractionScope::Mention,
            max_in_edges: 15,
            pagerank_damping: 0.85,
            extract: ExtractConfig::default(),
        }
    }
}

impl GraphConfig {
    /// A checksum of the settings, so that state built under some can be told from state
    /// built under others.
    pub fn fingerprint(&self) -> u32 {
        crc32fast::hash(serde_json::to_string(self).unwrap_or_default().as_bytes())
    }

    /// Rejects settings construction cannot run with.
    pub fn validate(&self) -> crate::error::Result<()> {
        let bad = |what: &str| Err(crate::error::Error::InvalidArgument(format!("graph config: {what}")));
        if self.window == 0 {
            return bad("window must be at least 1 turn");
        }
        if self.max_in_edges == 0 {
            return bad("max_in_edges must be at least 1");
        }
        if !(0.0..=1.0).contains(&self.merge_rate) {
            return bad("merge_rate must be in [0, 1]");
        }
        if !(0.0..1.0).contains(&self.pagerank_damping) {
            return bad("pagerank_damping must be in [0, 1)");
        }
        Ok(())
    }
}
