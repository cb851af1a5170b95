//! One conversation's memory as retrieval reads it: [`Memory`], the immutable index of a
//! scope (its episodes, graph, node embeddings, BM25 index, propagation matrices and what the
//! gates and the rerank read of each node), built from what the store returned
//! ([`Memory::new`]) or grown by a write ([`Memory::extend`]), and [`Ctx`], what every stage
//! of a query reads: the memory and the settings. A memory some of whose episodes are archived
//! (`graph::archive`) reads the active part of its graph and keeps the whole graph for the
//! store. Must not rank, embed text, choose what to archive or touch the store.

use std::sync::{Arc, OnceLock};

use super::bm25::{Analyzer, Bm25Index};
use super::config::RetrieveConfig;
use super::index::DenseIndex;
use super::mode::Mode;
use super::person::speaks_of_listener;
use crate::activation::{Resting, Spreading};
use crate::embed::EMBEDDING_DIM;
use crate::error::{Error, Result};
use crate::gnn::Relevance;
use crate::graph::pagerank::Transition;
use crate::graph::{EdgeKind, Graph, NodeRef};
use crate::kind::Kind;
use crate::knowing::BoundGate;
use crate::score::CONCEPT_TURN;
use crate::store::Episode;

/// One conversation's memory, ready for queries.
#[derive(Debug, Clone)]
pub struct Memory {
    pub(super) conversation: String,
    pub(super) episodes: Vec<Episode>,
    /// The graph retrieval reads: the active part of the stored graph when some episodes are
    /// archived, else the stored graph itself.
    pub(super) graph: Graph,
    /// The graph as stored, when some episodes are archived (`None`: it is `graph`).
    pub(super) stored: Option<Arc<Graph>>,
    /// Per episode: whether it is archived (out of the active graph, still in both indexes).
    pub(super) archived: Vec<bool>,
    /// Nodes of the active graph ([`Memory::active_nodes`]).
    pub(super) active_nodes: usize,
    /// Node embeddings, `node_count × EMBEDDING_DIM`.
    pub(super) embeddings: Vec<f32>,
    pub(super) bm25: Bm25Index,
    /// Per concept node: its episodes (abstraction out-edges).
    pub(super) concept_episodes: Vec<Vec<u32>>,
    /// Per episode: the episode of its turn's first passage (itself for a whole turn). A
    /// result holds a turn once.
    pub(super) turns: Vec<u32>,
    /// Per node: the node of its turn's first passage for an episode, [`CONCEPT_TURN`] for a
    /// concept (the GPU walk's twin of `turns`).
    pub(super) turn_nodes: Vec<u32>,
    pub(super) spreading: Spreading,
    pub(super) spreading_no_fan: Spreading,
    pub(super) no_graph: Spreading,
    pub(super) transition: Transition,
    /// Distinct speakers' first names, lower case.
    pub(super) speakers: Vec<String>,
    /// Per episode: its speaker's first name, lower case ([`first_name`]).
    pub(super) said_by: Vec<String>,
    /// Per episode: whether it speaks of its listener rather than its speaker
    /// ([`speaks_of_listener`]).
    pub(super) of_listener: Vec<bool>,
    /// Per episode: the kind of its turn, its first passage's ([`Kind::of_turn`]).
    pub(super) kinds: Vec<Kind>,
    /// The first episodes of the turns whose kind is standing ([`Kind::is_standing`]), in
    /// conversation order: what the standing stage consults on every search.
    pub(super) standing: Vec<u32>,
    /// Node id of each episode.
    pub(super) episode_nodes: Vec<u32>,
    /// Per node: normalised age (0 newest) and log-scaled degree, for the learned signal.
    pub(super) age: Vec<f32>,
    pub(super) importance: Vec<f32>,
    /// The time of its latest dated episode: the memory's "now" for the recency prior.
    pub(super) latest: Option<chrono::DateTime<chrono::Utc>>,
    /// The model of `synapse-gnn`, loaded on first use (a load error is kept and returned).
    pub(super) relevance: OnceLock<std::result::Result<Arc<Relevance>, String>>,
    /// The learned gate's model, the same way.
    pub(super) knowing: OnceLock<std::result::Result<Arc<BoundGate>, String>>,
    /// The dense index, built on the first query that uses it.
    pub(super) index: OnceLock<DenseIndex>,
    /// Per episode: the tokens of its embedded text as [`Ctx::hand_over`] counts them,
    /// counted the first time it is handed over.
    pub(super) tokens: Vec<OnceLock<usize>>,
    /// What unreached nodes hold under `spreading` with the configured dynamics, built on the
    /// first query that spreads sparsely.
    pub(super) resting: OnceLock<Resting>,
    /// Smallest memory, in nodes, that spreads sparsely ([`SPARSE_NODES`]).
    pub(super) sparse_min_nodes: usize,
    pub(super) config: RetrieveConfig,
}

/// Which episodes of a memory are archived (`graph::archive`), and the PageRank damping its
/// active graph is ranked with.
#[derive(Debug, Clone, PartialEq)]
pub struct Archived {
    /// Per episode, in conversation order.
    pub episodes: Vec<bool>,
    /// `graph.pagerank_damping`.
    pub damping: f32,
}

/// What every stage of a query reads: the memory and the settings it retrieves with (the
/// memory's own, [`Memory::cx`], or a request's, [`Memory::with_settings`]). The entrances of
/// a query are its methods (`search.rs`).
#[derive(Debug, Clone, Copy)]
pub struct Ctx<'a> {
    /// The memory.
    pub m: &'a Memory,
    /// The settings.
    pub config: &'a RetrieveConfig,
}

impl Memory {
    /// Builds the in-memory indices from what the store holds. `episodes` in conversation order.
    pub fn new(conversation: &str, episodes: Vec<Episode>, graph: Graph, config: RetrieveConfig) -> Result<Memory> {
        let none = Archived { episodes: vec![false; episodes.len()], damping: 0.0 };
        Memory::with_archived(conversation, episodes, graph, none, config)
    }

    /// [`Memory::new`] with the episodes `archived` marks out of the active graph.
    pub fn with_archived(
        conversation: &str,
        episodes: Vec<Episode>,
        graph: Graph,
        archived: Archived,
        config: RetrieveConfig,
    ) -> Result<Memory> {
        config.validate()?;
        graph.check(conversation, episodes.len())?;
        let (embeddings, texts) = node_rows(conversation, &episodes, &graph, 0)?;
        let mut analyzer = Analyzer::new()?;
        let terms: Vec<Vec<String>> = texts.iter().map(|t| analyzer.terms(t)).collect();
        let bm25 = Bm25Index::build(&terms, config.bm25_k1, config.bm25_b);
        let of_listener = episodes.iter().map(|e| speaks_of_listener(&e.text)).collect();
        let kinds = episodes.iter().map(|e| Kind::of_turn(&e.speaker, &e.text)).collect();
        Memory::assemble(conversation, episodes, graph, archived, embeddings, bm25, of_listener, kinds, config)
    }

    /// This memory with `added` episodes after its own and `graph`, a later version of its
    /// graph that holds them (the serving API's builder after a write): [`Memory::new`] of all
    /// the episodes and `graph`, to the bit, without analysing again the text of the nodes the
    /// two graphs share (the first stretch of node ids) or copying their embeddings one by one.
    /// `graph` is the whole graph; `archived` marks the episodes out of its active part.
    pub fn extend(&self, added: Vec<Episode>, graph: Graph, archived: Archived) -> Result<Memory> {
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
        of_listener.extend(episodes[self.episodes.len()..].iter().map(|e| speaks_of_listener(&e.text)));
        // A write adds whole turns, so the kinds of the turns it keeps stay as they are.
        let mut kinds = self.kinds.clone();
        kinds.extend(episodes[self.episodes.len()..].iter().map(|e| Kind::of_turn(&e.speaker, &e.text)));
        let mut memory = Memory::assemble(
            &self.conversation,
            episodes,
            graph,
            archived,
            embeddings,
            bm25,
            of_listener,
            kinds,
            self.config.clone(),
        )?;
        memory.sparse_min_nodes = self.sparse_min_nodes;
        // The episodes it keeps keep their texts, so their counts.
        memory.tokens[..self.tokens.len()].clone_from_slice(&self.tokens);
        Ok(memory)
    }

    /// The rest of a memory, from its node embeddings, lexical index and, per episode, whether
    /// it speaks of its listener and its own kind ([`Kind::of_turn`]).
    #[allow(clippy::too_many_arguments)]
    fn assemble(
        conversation: &str,
        episodes: Vec<Episode>,
        graph: Graph,
        archived: Archived,
        embeddings: Vec<f32>,
        bm25: Bm25Index,
        of_listener: Vec<bool>,
        kinds: Vec<Kind>,
        config: RetrieveConfig,
    ) -> Result<Memory> {
        if archived.episodes.len() != episodes.len() {
            return Err(Error::InvalidArgument(format!(
                "memory '{conversation}': {} archive marks for {} episodes",
                archived.episodes.len(),
                episodes.len()
            )));
        }
        let (graph, stored, active_nodes) = if archived.episodes.contains(&true) {
            let active = crate::graph::archive::active_nodes(&graph, &archived.episodes);
            let count = active.iter().filter(|a| **a).count();
            (graph.active(&active, archived.damping), Some(Arc::new(graph)), count)
        } else {
            let n = graph.node_count();
            (graph, None, n)
        };
        let n = graph.node_count();
        let mut concept_episodes = vec![Vec::new(); n];
        for e in &graph.edges {
            if e.kind == EdgeKind::Abstraction && matches!(graph.nodes[e.src as usize], NodeRef::Concept(_)) {
                concept_episodes[e.src as usize].push(e.dst);
            }
        }
        let turns = turn_starts(&episodes);
        // A memory's kind is its first passage's (where a rule or a preference is stated).
        let kinds: Vec<Kind> = turns.iter().map(|&t| kinds[t as usize]).collect();
        let standing: Vec<u32> =
            (0..episodes.len() as u32).filter(|&e| turns[e as usize] == e && kinds[e as usize].is_standing()).collect();
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
            latest: episodes.iter().filter_map(|e| e.timestamp).max(),
            speakers,
            said_by,
            of_listener,
            kinds,
            standing,
            episode_nodes,
            age,
            importance,
            relevance: OnceLock::new(),
            knowing: OnceLock::new(),
            index: OnceLock::new(),
            resting: OnceLock::new(),
            tokens: vec![OnceLock::new(); episodes.len()],
            sparse_min_nodes: SPARSE_NODES,
            conversation: conversation.to_string(),
            episodes,
            no_graph: Spreading::empty(n),
            graph,
            stored,
            archived: archived.episodes,
            active_nodes,
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

    /// The graph retrieval reads: the active part of [`Memory::stored_graph`] (all of it when
    /// no episode is archived).
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The whole graph, as the store keeps it (archived episodes' edges included).
    pub fn stored_graph(&self) -> &Graph {
        self.stored.as_deref().unwrap_or(&self.graph)
    }

    /// Per episode: whether it is archived.
    pub fn archived(&self) -> &[bool] {
        &self.archived
    }

    /// Memories (turns) archived.
    pub fn archived_memories(&self) -> usize {
        self.archived.iter().zip(&self.turns).enumerate().filter(|(i, (a, t))| **a && **t as usize == *i).count()
    }

    /// Nodes of the active graph: the episodes not archived and the concepts linked to one.
    pub fn active_nodes(&self) -> usize {
        self.active_nodes
    }

    /// The settings it was built with, and retrieves with unless a caller gives others
    /// ([`Memory::with_settings`]).
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

    /// The embedding of `node`.
    pub fn embedding(&self, node: u32) -> &[f32] {
        let i = node as usize;
        &self.embeddings[i * EMBEDDING_DIM..(i + 1) * EMBEDDING_DIM]
    }

    /// The dense index of this memory under its own settings ([`Ctx::dense_index`]).
    pub fn dense_index(&self) -> Option<&DenseIndex> {
        self.cx().dense_index()
    }

    /// Sets the smallest memory, in nodes, that spreads activation sparsely (default
    /// [`SPARSE_NODES`]; 0 always tries, `usize::MAX` never does). Results do not change.
    pub fn set_sparse_min_nodes(&mut self, nodes: usize) {
        self.sparse_min_nodes = nodes;
    }

    /// The first passage's episode of each episode's turn (itself for a whole turn).
    pub fn turns(&self) -> &[u32] {
        &self.turns
    }

    /// Per episode: the kind of its turn.
    pub fn kinds(&self) -> &[Kind] {
        &self.kinds
    }

    /// The standing context: the first episodes of the turns that set an instruction or state
    /// a preference, in conversation order.
    pub fn standing(&self) -> &[u32] {
        &self.standing
    }

    /// What every stage of a query on this memory reads, under the settings it was built with.
    pub fn cx(&self) -> Ctx<'_> {
        Ctx { m: self, config: &self.config }
    }

    /// What every stage of a query on this memory reads, under `settings` (a request's, an
    /// engine's): any settings that agree with the memory's on what its index is built with
    /// ([`RetrieveConfig::index_difference`]); others are an error naming the setting.
    pub fn with_settings<'a>(&'a self, settings: &'a RetrieveConfig) -> Result<Ctx<'a>> {
        if let Some(name) = self.config.index_difference(settings) {
            return Err(Error::InvalidArgument(format!(
                "memory '{}' was built with another `{name}` than the settings it is searched with; \
                 open it again with those settings",
                self.conversation
            )));
        }
        settings.validate()?;
        Ok(Ctx { m: self, config: settings })
    }
}

/// A model a memory loads on first use into `cell` (`load`'s error kept, as its message, and
/// returned on every call).
pub(super) fn loaded<T>(
    cell: &OnceLock<std::result::Result<Arc<T>, String>>,
    load: impl FnOnce() -> Result<Arc<T>>,
) -> Result<&Arc<T>> {
    let message = |e: Error| match e {
        Error::Model(m) => m,
        other => other.to_string(),
    };
    cell.get_or_init(|| load().map_err(message)).as_ref().map_err(|e| Error::Model(e.clone()))
}

/// Memories of at least this many nodes spread activation sparsely where that is exact
/// ([`super::spread::Spread::activate`]); in smaller ones a pass over every node costs as little.
pub const SPARSE_NODES: usize = 4_096;

/// Queries of a batch whose dense-index bounds are computed in one pass over the codes
/// ([`Ctx::retrieve_many`]): 16 queries' bounds of a 10M-token memory are 3.8 MB.
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

/// Every node embedding is unit length (the embedder's and the concepts' are normalised), so
/// one that is not finite or not of length 1 (within 10⁻³) is damage, refused here: a vector of
/// damaged bytes would otherwise score anything up to 10³⁵ and rank first.
fn check_unit(conversation: &str, node: usize, v: &[f32]) -> Result<()> {
    let norm2 = crate::score::dot(v, v);
    if norm2.is_finite() && (norm2 - 1.0).abs() <= 1e-3 {
        return Ok(());
    }
    Err(Error::InvalidArgument(format!(
        "node {node} of '{conversation}' has an embedding of squared length {norm2} where every stored embedding \
         has length 1: the stored vectors are damaged (restore the store from a backup, or ingest the \
         conversation again)"
    )))
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
        check_unit(conversation, from + i, v)?;
        embeddings.extend_from_slice(v);
        texts.push(text);
    }
    Ok((embeddings, texts))
}

/// Episodes of `texts` with the rows of `vectors` as embeddings, an hour apart (tests).
#[cfg(test)]
pub(super) fn episodes_of(texts: &[String], vectors: &[f32]) -> Vec<Episode> {
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
            expires_at: None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retrieve::{Gate, Mode, Query};
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn none(n: usize) -> Archived {
        Archived { episodes: vec![false; n], damping: 0.85 }
    }

    #[test]
    fn an_archived_episode_has_no_edges_yet_its_words_and_its_vector_find_it() {
        let (texts, graphs) = crate::graph::build::growing_graphs(60);
        let graph = graphs[graphs.len() - 1].clone();
        let mut rng = StdRng::seed_from_u64(7);
        let vectors = crate::graph::synthetic::unit_embeddings(texts.len(), &mut rng);
        let episodes = episodes_of(&texts, &vectors);
        let n = episodes.len();
        let archived = Archived { episodes: (0..n).map(|i| i < 30).collect(), damping: 0.85 };
        let m = Memory::with_archived("c", episodes, graph.clone(), archived, RetrieveConfig::default()).unwrap();
        let node = m.episode_nodes[3];
        assert!(graph.edges.iter().any(|e| e.src == node || e.dst == node), "episode 3 has edges when whole");
        assert!(!m.graph.edges.iter().any(|e| e.src == node || e.dst == node), "and none when archived");
        assert_eq!(m.archived_memories(), 30);
        let query = Query::new(&mut Analyzer::new().unwrap(), &texts[3], vectors[3 * 384..4 * 384].to_vec()).unwrap();
        for mode in [Mode::Bm25, Mode::Dense, Mode::Synapse] {
            let r = m.retrieve(&query, mode).unwrap();
            assert!(r.hits.iter().any(|h| h.episode == 3), "{mode:?}: {:?}", r.hits);
        }
    }

    #[test]
    fn a_damaged_embedding_is_refused_naming_its_node() {
        let (texts, graphs) = crate::graph::build::growing_graphs(30);
        let mut rng = StdRng::seed_from_u64(4);
        let vectors = crate::graph::synthetic::unit_embeddings(texts.len(), &mut rng);
        let graph = graphs.last().unwrap().clone();
        let n = graph.episode_count();
        let episodes = episodes_of(&texts, &vectors)[..n].to_vec();
        assert!(Memory::new("c", episodes.clone(), graph.clone(), RetrieveConfig::default()).is_ok());
        let node = graph.episode_nodes()[7] as usize;
        for damage in [1e35f32, f32::NAN, 0.5] {
            let mut damaged = episodes.clone();
            damaged[7].embedding[3] = damage;
            let e = Memory::new("c", damaged, graph.clone(), RetrieveConfig::default()).unwrap_err().to_string();
            assert!(e.contains(&format!("node {node} of 'c' has an embedding of squared length")), "{damage}: {e}");
            assert!(e.contains("damaged"), "{e}");
        }
    }

    #[test]
    fn a_memory_extended_write_by_write_is_the_memory_built_at_once() {
        let (texts, graphs) = crate::graph::build::growing_graphs(60);
        let mut rng = StdRng::seed_from_u64(4);
        let vectors = crate::graph::synthetic::unit_embeddings(texts.len(), &mut rng);
        let episodes = episodes_of(&texts, &vectors);
        let config = RetrieveConfig::default();
        let mut memory: Option<Memory> = None;
        let mut some_archived = 0;
        for (k, graph) in graphs.iter().enumerate() {
            let n = graph.episode_count();
            // Every other write archives the first third of the episodes.
            let archived = Archived { episodes: (0..n).map(|i| k % 2 == 1 && i < n / 3).collect(), damping: 0.85 };
            let grown = match &memory {
                None => {
                    Memory::with_archived("c", episodes[..n].to_vec(), graph.clone(), archived.clone(), config.clone())
                }
                Some(m) => m.extend(episodes[m.episodes().len()..n].to_vec(), graph.clone(), archived.clone()),
            }
            .unwrap();
            let whole =
                Memory::with_archived("c", episodes[..n].to_vec(), graph.clone(), archived.clone(), config.clone())
                    .unwrap();
            assert_eq!(grown.episodes, whole.episodes, "write {k}");
            assert_eq!(grown.graph, whole.graph, "write {k}");
            assert_eq!(grown.stored_graph(), graph, "write {k}");
            assert_eq!(grown.archived(), archived.episodes.as_slice(), "write {k}");
            if n / 3 > 0 && k % 2 == 1 {
                some_archived += 1;
                assert!(grown.graph.edges.len() < graph.edges.len(), "write {k}: archived episodes lose their edges");
                assert_eq!(grown.archived_memories(), n / 3, "write {k}");
                assert!(grown.active_nodes() < graph.node_count(), "write {k}");
            }
            assert_eq!(grown.embeddings, whole.embeddings, "write {k}");
            assert_eq!(grown.bm25, whole.bm25, "write {k}");
            assert_eq!(grown.concept_episodes, whole.concept_episodes, "write {k}");
            assert_eq!((&grown.turns, &grown.turn_nodes), (&whole.turns, &whole.turn_nodes), "write {k}");
            assert_eq!((&grown.age, &grown.importance), (&whole.age, &whole.importance), "write {k}");
            memory = Some(grown);
        }
        assert_eq!(memory.map(|m| m.episodes.len()), Some(60));
        assert!(some_archived > 2, "{some_archived} writes archived");
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
        let memory =
            first.extend(episodes[n..].to_vec(), graphs[graphs.len() - 1].clone(), none(episodes.len())).unwrap();
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
        let once = memory.cx().hand_over(r.clone(), words).unwrap();
        let counted = calls.get();
        assert_eq!(once.hits.len(), fresh);
        assert!(counted >= fresh, "{counted} counted for {fresh} handed");
        let twice = memory.cx().hand_over(r.clone(), words).unwrap();
        assert_eq!((twice.hits.len(), calls.get()), (fresh, counted), "the second hand-over counts nothing");
        // Counted on the smaller memory, kept by its extension.
        calls.set(0);
        let r = first.retrieve(&query, Mode::Bm25).unwrap();
        let before = first.cx().hand_over(r.clone(), words).unwrap();
        let counted = calls.get();
        let grown =
            first.extend(episodes[n..].to_vec(), graphs[graphs.len() - 1].clone(), none(episodes.len())).unwrap();
        assert_eq!(grown.cx().hand_over(r, words).unwrap().hits, before.hits);
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
