//! Synthetic memory graphs with the shape of real ones, for benchmarks and tests at sizes the
//! data sets do not reach: a chain of episodes (temporal edges), concepts each linked both
//! ways to a few episodes (a few hub concepts to many), association edges between concepts,
//! every node's in-degree capped as the builder caps it, random unit embeddings. Deterministic
//! for a seed.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::pagerank::Transition;
use super::{Concept, ConceptKind, Edge, EdgeKind, Graph, NodeRef};
use crate::embed::EMBEDDING_DIM;

/// Shape of a synthetic graph.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shape {
    /// Nodes in all.
    pub nodes: usize,
    /// Share of concept nodes (LoCoMo graphs: about 0.4).
    pub concept_share: f64,
    /// Most in-edges a node keeps (the builder's `max_in_edges`, 15).
    pub max_in_edges: usize,
    /// Concepts linked to many episodes (a name said in every session).
    pub hubs: usize,
    /// Episodes a hub links to.
    pub hub_links: usize,
    /// Seed.
    pub seed: u64,
}

impl Shape {
    /// The shape of a LoCoMo conversation graph, scaled to `nodes`.
    pub fn like_locomo(nodes: usize, seed: u64) -> Shape {
        Shape { nodes, concept_share: 0.4, max_in_edges: 15, hubs: 4.min(nodes / 8), hub_links: 200, seed }
    }
}

/// A graph of the given shape and its node embeddings (`nodes × EMBEDDING_DIM`, unit length).
pub fn graph(shape: &Shape) -> (Graph, Vec<f32>) {
    let mut rng = StdRng::seed_from_u64(shape.seed);
    let n = shape.nodes;
    let concepts = ((n as f64 * shape.concept_share) as usize).min(n.saturating_sub(1));
    let episodes = n - concepts;
    let mut nodes = Vec::with_capacity(n);
    let mut concept_list = Vec::with_capacity(concepts);
    // Episodes and concepts interleave as they arrive: a concept after every few episodes.
    let (mut e, mut c) = (0u32, 0u32);
    while nodes.len() < n {
        let want_concept = (c as usize) < concepts && (e as usize >= episodes || rng.random_range(0..n) < concepts);
        if want_concept {
            nodes.push(NodeRef::Concept(c));
            concept_list.push(Concept {
                key: format!("c{c}"),
                label: format!("concept {c}"),
                kind: ConceptKind::Term,
                mentions: 1,
                embedding: Vec::new(),
            });
            c += 1;
        } else {
            nodes.push(NodeRef::Episode(e));
            e += 1;
        }
    }
    let episode_ids: Vec<u32> = (0..n as u32).filter(|&i| matches!(nodes[i as usize], NodeRef::Episode(_))).collect();
    let concept_ids: Vec<u32> = (0..n as u32).filter(|&i| matches!(nodes[i as usize], NodeRef::Concept(_))).collect();
    let mut edges: Vec<Edge> = Vec::new();
    let edge = |src: u32, dst: u32, kind: EdgeKind, weight: f32, hours: f32| Edge { src, dst, kind, weight, hours };
    for w in episode_ids.windows(2) {
        edges.push(edge(w[0], w[1], EdgeKind::Temporal, 1.0, rng.random_range(0.0..48.0f32)));
    }
    for (k, &cid) in concept_ids.iter().enumerate() {
        if episode_ids.is_empty() {
            break;
        }
        let links = if k < shape.hubs { shape.hub_links } else { rng.random_range(1..=4) };
        let start = rng.random_range(0..episode_ids.len());
        for j in 0..links.min(episode_ids.len()) {
            let ep = episode_ids[(start + j * 7) % episode_ids.len()];
            edges.push(edge(cid, ep, EdgeKind::Abstraction, 0.8, 0.0));
            edges.push(edge(ep, cid, EdgeKind::Abstraction, 0.8, 0.0));
        }
        for _ in 0..rng.random_range(0..6) {
            let other = concept_ids[rng.random_range(0..concept_ids.len())];
            if other != cid {
                edges.push(edge(cid, other, EdgeKind::Association, rng.random_range(0.6..1.0f32), 0.0));
            }
        }
    }
    edges.sort_by_key(|e| (e.dst, e.src));
    edges.dedup_by_key(|e| (e.dst, e.src));
    // Keep the heaviest in-edges of each node, as the builder prunes.
    let mut kept = Vec::with_capacity(edges.len());
    for row in edges.chunk_by(|a, b| a.dst == b.dst) {
        let mut row = row.to_vec();
        row.sort_by(|a, b| b.weight.total_cmp(&a.weight).then(b.src.cmp(&a.src)));
        row.truncate(shape.max_in_edges);
        row.sort_by_key(|e| e.src);
        kept.extend(row);
    }
    let embeddings = unit_embeddings(n, &mut rng);
    for (k, &cid) in concept_ids.iter().enumerate() {
        let v = &embeddings[cid as usize * EMBEDDING_DIM..(cid as usize + 1) * EMBEDDING_DIM];
        concept_list[k].embedding = v.to_vec();
    }
    let t = Transition::new(n, kept.iter().map(|e| (e.src, e.dst, e.weight)));
    let pr = t.rank(0.85, None);
    let max = pr.iter().copied().fold(0.0f64, f64::max);
    let pagerank = pr.iter().map(|&p| if max > 0.0 { (p / max) as f32 } else { 0.0 }).collect();
    (Graph { nodes, concepts: concept_list, edges: kept, pagerank }, embeddings)
}

/// `n × EMBEDDING_DIM` random unit vectors.
pub fn unit_embeddings(n: usize, rng: &mut StdRng) -> Vec<f32> {
    let mut embeddings = vec![0.0f32; n * EMBEDDING_DIM];
    for row in embeddings.chunks_exact_mut(EMBEDDING_DIM) {
        for x in row.iter_mut() {
            *x = rng.random_range(-1.0..1.0f32);
        }
        let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt().max(f32::MIN_POSITIVE);
        row.iter_mut().for_each(|x| *x /= norm);
    }
    embeddings
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_graphs_are_valid_and_capped() {
        for nodes in [0usize, 1, 2, 50, 3000] {
            let (g, emb) = graph(&Shape::like_locomo(nodes, 3));
            g.validate().unwrap_or_else(|e| panic!("{nodes} nodes: {e}"));
            assert_eq!(g.node_count(), nodes);
            assert_eq!(emb.len(), nodes * EMBEDDING_DIM);
            let mut indeg = vec![0usize; nodes];
            for e in &g.edges {
                indeg[e.dst as usize] += 1;
            }
            assert!(indeg.iter().all(|&d| d <= 15), "{nodes} nodes: in-degree over 15");
            if nodes >= 3000 {
                let out = g.out_degrees();
                assert!(out.iter().copied().max().unwrap_or(0) >= 100, "a hub has many out-edges");
                assert!(g.concepts.len() > nodes / 4 && g.concepts.len() < nodes / 2);
            }
        }
    }
}
