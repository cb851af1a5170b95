//! The benchmark's workloads: synthetic memories with the shape of real ones, and a store's
//! graph skeletons dressed with random embeddings and words, each with queries near random
//! episodes. Re-exported by `bench.rs`, which times them.
//!
//! Must not time, compare or print, nor import `bench.rs` (which re-exports these).

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::embed::EMBEDDING_DIM;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::graph::synthetic::{self, Shape};
use crate::graph::{Graph, NodeRef};
use crate::retrieve::bm25::Analyzer;
use crate::retrieve::engine::Engine;
use crate::retrieve::{Memory, Query, RetrieveConfig};
use crate::store::Episode;

/// Words of the synthetic vocabulary.
const VOCABULARY: usize = 5000;

/// A memory to benchmark and the queries to run on it.
pub struct Workload {
    /// Name in reports ("synthetic-100000", "locomo (10 graphs)").
    pub name: String,
    /// The memories (one graph each).
    pub memories: Vec<Memory>,
    /// (memory, query).
    pub queries: Vec<(usize, Query)>,
}

impl Workload {
    /// A GPU engine over its memories (uploads them).
    pub fn on_gpu(&self, gpu: &Gpu) -> Result<Engine> {
        Engine::on_gpu(self.memories.clone(), gpu.clone(), "bench".into())
    }

    /// Nodes of the largest graph.
    pub fn nodes(&self) -> usize {
        self.memories.iter().map(|m| m.graph().node_count()).max().unwrap_or(0)
    }

    /// Edges in all graphs.
    pub fn edges(&self) -> usize {
        self.memories.iter().map(|m| m.graph().edges.len()).sum()
    }
}

fn word(rng: &mut StdRng) -> String {
    // Zipf-like: low indices are common words, high ones rare.
    let u: f64 = rng.random_range(0.0..1.0);
    let k = ((VOCABULARY as f64).powf(u) as usize).min(VOCABULARY - 1);
    let mut s = String::from("w");
    let mut x = k;
    loop {
        s.push((b'a' + (x % 26) as u8) as char);
        x /= 26;
        if x == 0 {
            break;
        }
    }
    s
}

/// A synthetic memory of `nodes` nodes (see `graph::synthetic`) with `queries` queries near
/// random episodes (see `queries_near`).
pub fn synthetic(nodes: usize, queries: usize, seed: u64, config: &RetrieveConfig) -> Result<Workload> {
    let (graph, embeddings) = synthetic::graph(&Shape::like_locomo(nodes, seed));
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);
    let name = format!("synthetic-{nodes}");
    let memory = dress(&name, graph, &embeddings, None, &mut rng, config)?;
    let queries = queries_near(&[&memory], queries, &mut rng)?;
    Ok(Workload { name, memories: vec![memory], queries })
}

/// One memory graph of a store without its text and embeddings: what the ranking step's cost
/// depends on (nodes, edges and their weights, which passages make one turn), small enough to
/// travel where the store cannot (`myelin bench --save-skeletons`, then `--skeleton`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkeletonGraph {
    /// The conversation.
    pub conversation: String,
    /// Per episode, its turn id (passages of one turn are `<turn>#<k>`).
    pub turn_ids: Vec<String>,
    /// The graph, its concepts' labels and embeddings left out.
    pub graph: Graph,
}

impl SkeletonGraph {
    /// The skeleton of a memory.
    pub fn of(memory: &Memory) -> SkeletonGraph {
        let mut graph = memory.graph().clone();
        for c in &mut graph.concepts {
            c.label.clear();
            c.embedding = Vec::new();
        }
        SkeletonGraph {
            conversation: memory.conversation().to_string(),
            turn_ids: memory.episodes().iter().map(|e| e.turn_id.clone()).collect(),
            graph,
        }
    }
}

/// The skeletons of one store's memories, benchmarked as one workload as the store would be.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Skeleton {
    /// Where it came from (the store's folder name).
    pub name: String,
    /// Its graphs.
    pub graphs: Vec<SkeletonGraph>,
}

/// A workload with the graphs of a skeleton and, in place of what it left out, what
/// [`synthetic()`] makes: random unit embeddings, Zipf words, `queries` queries near random
/// episodes of random graphs. Its ranking cost is the real graphs' (same nodes, edges, weights
/// and turns); its results mean nothing.
pub fn from_skeleton(skeleton: Skeleton, queries: usize, seed: u64, config: &RetrieveConfig) -> Result<Workload> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);
    let mut memories = Vec::with_capacity(skeleton.graphs.len());
    for g in skeleton.graphs {
        let embeddings = synthetic::unit_embeddings(g.graph.node_count(), &mut rng);
        let name = format!("{}/{}", skeleton.name, g.conversation);
        memories.push(dress(&name, g.graph, &embeddings, Some(&g.turn_ids), &mut rng, config)?);
    }
    if memories.is_empty() {
        return Err(Error::InvalidArgument(format!("skeleton '{}' has no graph", skeleton.name)));
    }
    let queries = queries_near(&memories.iter().collect::<Vec<_>>(), queries, &mut rng)?;
    let name = format!("skeleton {} ({} graphs)", skeleton.name, memories.len());
    Ok(Workload { name, memories, queries })
}

/// A memory over `graph` with the given node embeddings, every concept a label of two Zipf
/// words, every episode twelve (its turn id from `turn_ids` when given, else one turn each).
fn dress(
    name: &str,
    mut graph: Graph,
    embeddings: &[f32],
    turn_ids: Option<&[String]>,
    rng: &mut StdRng,
    config: &RetrieveConfig,
) -> Result<Memory> {
    graph.check(name, graph.episode_count())?;
    if embeddings.len() != graph.node_count() * EMBEDDING_DIM {
        return Err(Error::InvalidArgument(format!(
            "{name}: {} embedding values for {} nodes",
            embeddings.len(),
            graph.node_count()
        )));
    }
    if let Some(t) = turn_ids
        && t.len() != graph.episode_count()
    {
        return Err(Error::InvalidArgument(format!(
            "{name}: {} turn ids for {} episodes",
            t.len(),
            graph.episode_count()
        )));
    }
    let vector = |id: usize| embeddings[id * EMBEDDING_DIM..(id + 1) * EMBEDDING_DIM].to_vec();
    for (id, node) in graph.nodes.iter().enumerate() {
        if let NodeRef::Concept(c) = *node {
            graph.concepts[c as usize].embedding = vector(id);
        }
    }
    for c in graph.concepts.iter_mut() {
        c.label = format!("{} {}", word(rng), word(rng));
    }
    let mut episodes: Vec<Option<Episode>> = vec![None; graph.episode_count()];
    for (id, node) in graph.nodes.iter().enumerate() {
        if let NodeRef::Episode(e) = *node {
            let words: Vec<String> = (0..12).map(|_| word(rng)).collect();
            let turn_id = turn_ids.map_or_else(|| format!("D{}:{}", e / 20 + 1, e % 20 + 1), |t| t[e as usize].clone());
            episodes[e as usize] = Some(Episode {
                conversation: name.to_string(),
                session: e / 20,
                turn_id,
                position: e,
                speaker: if e % 2 == 0 { "Ann".into() } else { "Ben".into() },
                text: words.join(" "),
                image_caption: None,
                timestamp: None,
                embedding: vector(id),
                metadata: None,
                expires_at: None,
            });
        }
    }
    // `Graph::check` (in `Memory::new`) refuses graphs whose episode indices are not 0..n.
    let episodes = episodes.into_iter().flatten().collect();
    Memory::new(name, episodes, graph, config.clone())
}

/// `count` queries, each near a random episode of a random memory: its embedding the
/// episode's plus noise, its text two of the episode's words and one random word.
fn queries_near(memories: &[&Memory], count: usize, rng: &mut StdRng) -> Result<Vec<(usize, Query)>> {
    let mut analyzer = Analyzer::new()?;
    let mut out = Vec::with_capacity(count);
    if memories.iter().all(|m| m.episodes().is_empty()) {
        return Ok(out);
    }
    while out.len() < count {
        let m = if memories.len() > 1 { rng.random_range(0..memories.len()) } else { 0 };
        let episodes = memories[m].episodes();
        if episodes.is_empty() {
            continue;
        }
        let e = &episodes[rng.random_range(0..episodes.len())];
        let words: Vec<&str> = e.text.split(' ').collect();
        let text = format!(
            "{} {} {}",
            words[rng.random_range(0..words.len())],
            words[rng.random_range(0..words.len())],
            word(rng)
        );
        let mut v: Vec<f32> = e.embedding.iter().map(|x| x + rng.random_range(-0.05..0.05f32)).collect();
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter_mut().for_each(|x| *x /= norm);
        out.push((m, Query::new(&mut analyzer, &text, v)?));
    }
    Ok(out)
}
