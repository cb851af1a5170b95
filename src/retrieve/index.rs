//! The dense index of a large memory: an inverted file (IVF) over its node embeddings, so a
//! query's dense anchors come from the few lists nearest the query instead of a scan of every
//! node, and every node carries an upper bound of its cosine that lets the ranking skip nodes
//! that cannot reach the result.
//!
//! Owns the clustering (spherical k-means, deterministic for a seed), the lists and the bounds.
//! It must not score or rank nodes: `retrieve` decides what to do with the probed cosines and
//! the bounds.

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::dot;
use crate::embed::EMBEDDING_DIM;
use crate::error::{Error, Result};

/// Margin added to every node's residual norm so the cosine bound survives f32 rounding.
const BOUND_MARGIN: f32 = 1e-4;
/// k-means passes over the training sample.
const KMEANS_ROUNDS: usize = 10;
/// Training points per list (at most): the sample k-means learns the centroids from.
const SAMPLE_PER_LIST: usize = 64;

/// Settings of the dense index (`[retrieve.index]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IndexConfig {
    /// Use an index at all (default true). Without one every query scans every node.
    pub enabled: bool,
    /// Smallest memory, in nodes, that gets an index (default 20,000; under it a scan is as
    /// fast and exact).
    pub min_nodes: usize,
    /// Lists (k-means clusters); 0 picks √nodes (default 0).
    pub lists: usize,
    /// Lists searched per query for the dense anchors (default 32). Measured on a 10M-token
    /// BEAM history (243 lists): recall of the true top-10 dense anchors ≥ 0.99 from 24 probes,
    /// see README, "Scale".
    pub probes: usize,
    /// Seed of the clustering (default 7).
    pub seed: u64,
}

impl Default for IndexConfig {
    fn default() -> Self {
        IndexConfig { enabled: true, min_nodes: 20_000, lists: 0, probes: 32, seed: 7 }
    }
}

impl IndexConfig {
    /// Rejects settings the index cannot run with.
    pub fn validate(&self) -> Result<()> {
        if self.probes == 0 {
            return Err(Error::InvalidArgument("retrieve.index.probes must be at least 1".into()));
        }
        Ok(())
    }

    /// The number of lists for a memory of `nodes` nodes.
    pub fn lists_for(&self, nodes: usize) -> usize {
        let lists = if self.lists == 0 { (nodes as f64).sqrt().round() as usize } else { self.lists };
        lists.clamp(1, nodes.max(1))
    }

    /// Whether a memory of `nodes` nodes is searched through an index: enabled, large enough,
    /// and probing fewer lists than it has (probing all of them is a scan).
    pub fn applies(&self, nodes: usize) -> bool {
        self.enabled && nodes >= self.min_nodes && nodes > 0 && self.probes < self.lists_for(nodes)
    }
}

/// The inverted file of one memory's node embeddings.
#[derive(Debug, Clone)]
pub struct DenseIndex {
    /// Unit centroids, `lists × EMBEDDING_DIM`.
    centroids: Vec<f32>,
    /// `start[l]..start[l+1]` indexes the members of list l in `members`.
    start: Vec<u32>,
    /// Node ids, grouped by list, ascending within a list.
    members: Vec<u32>,
    /// Per node: its list.
    list_of: Vec<u32>,
    /// Per node: `‖x − c‖` to its list's centroid, plus a rounding margin. For a unit query q,
    /// `q·x ≤ q·c + ‖x − c‖`.
    residual: Vec<f32>,
}

/// What probing returns for one query.
#[derive(Debug, Clone)]
pub struct Probe {
    /// Per list: the query's dot product with its centroid.
    pub centroid: Vec<f32>,
    /// The members of the probed lists with their exact cosine, ascending node id.
    pub nodes: Vec<(u32, f32)>,
}

impl DenseIndex {
    /// Clusters `embeddings` (`nodes × EMBEDDING_DIM`, unit rows) into `lists` lists.
    pub fn build(embeddings: &[f32], lists: usize, seed: u64) -> DenseIndex {
        let n = embeddings.len() / EMBEDDING_DIM;
        let lists = lists.clamp(1, n.max(1));
        let row = |i: usize| &embeddings[i * EMBEDDING_DIM..(i + 1) * EMBEDDING_DIM];
        let mut order: Vec<u32> = (0..n as u32).collect();
        order.shuffle(&mut StdRng::seed_from_u64(seed));
        let sample = &order[..n.min(lists * SAMPLE_PER_LIST)];
        let mut centroids: Vec<f32> = Vec::with_capacity(lists * EMBEDDING_DIM);
        for &i in sample.iter().take(lists) {
            centroids.extend_from_slice(row(i as usize));
        }
        for _ in 0..KMEANS_ROUNDS {
            let assigned: Vec<(u32, f32)> = sample.par_iter().map(|&i| nearest(&centroids, row(i as usize))).collect();
            let mut sums = vec![0.0f32; lists * EMBEDDING_DIM];
            let mut counts = vec![0usize; lists];
            for (&i, &(l, _)) in sample.iter().zip(&assigned) {
                counts[l as usize] += 1;
                for (s, x) in sums[l as usize * EMBEDDING_DIM..][..EMBEDDING_DIM].iter_mut().zip(row(i as usize)) {
                    *s += x;
                }
            }
            // An empty list restarts at the sample point its centroid fits worst.
            let mut worst: Vec<usize> = (0..sample.len()).collect();
            worst.sort_by(|&a, &b| assigned[a].1.total_cmp(&assigned[b].1).then(a.cmp(&b)));
            let mut worst = worst.into_iter();
            for l in 0..lists {
                let c = &mut sums[l * EMBEDDING_DIM..(l + 1) * EMBEDDING_DIM];
                if counts[l] == 0
                    && let Some(p) = worst.next()
                {
                    c.copy_from_slice(row(sample[p] as usize));
                }
                normalise(c);
            }
            centroids = sums;
        }
        let assigned: Vec<(u32, f32)> = (0..n).into_par_iter().map(|i| nearest(&centroids, row(i))).collect();
        let mut start = vec![0u32; lists + 1];
        for &(l, _) in &assigned {
            start[l as usize + 1] += 1;
        }
        for l in 0..lists {
            start[l + 1] += start[l];
        }
        let mut next = start.clone();
        let mut members = vec![0u32; n];
        for (i, &(l, _)) in assigned.iter().enumerate() {
            members[next[l as usize] as usize] = i as u32;
            next[l as usize] += 1;
        }
        let residual = (0..n)
            .map(|i| {
                let (l, cos) = assigned[i];
                let c = &centroids[l as usize * EMBEDDING_DIM..][..EMBEDDING_DIM];
                let squared = dot(row(i), row(i)) - 2.0 * cos + dot(c, c);
                squared.max(0.0).sqrt() + BOUND_MARGIN
            })
            .collect();
        DenseIndex { centroids, start, members, list_of: assigned.iter().map(|a| a.0).collect(), residual }
    }

    /// Number of lists.
    pub fn lists(&self) -> usize {
        self.start.len() - 1
    }

    /// Number of nodes indexed.
    pub fn len(&self) -> usize {
        self.list_of.len()
    }

    /// Whether no node is indexed.
    pub fn is_empty(&self) -> bool {
        self.list_of.is_empty()
    }

    /// The members of list `l`.
    pub fn members(&self, l: usize) -> &[u32] {
        &self.members[self.start[l] as usize..self.start[l + 1] as usize]
    }

    /// Scores the query against every centroid and, exactly, against every member of the
    /// `probes` lists whose centroids score highest (ties by lower list).
    pub fn probe(&self, embeddings: &[f32], query: &[f32], probes: usize) -> Probe {
        let centroid: Vec<f32> = self.centroids.chunks_exact(EMBEDDING_DIM).map(|c| dot(c, query)).collect();
        let lists = super::top_order(&centroid, probes);
        let mut nodes: Vec<(u32, f32)> = lists
            .iter()
            .flat_map(|&l| self.members(l as usize))
            .map(|&i| (i, dot(&embeddings[i as usize * EMBEDDING_DIM..][..EMBEDDING_DIM], query)))
            .collect();
        nodes.sort_unstable_by_key(|&(i, _)| i);
        Probe { centroid, nodes }
    }

    /// An upper bound of the cosine of `node` with the query `probe` was made for (at most 1).
    pub fn bound(&self, probe: &Probe, node: usize) -> f32 {
        (probe.centroid[self.list_of[node] as usize] + self.residual[node]).min(1.0)
    }
}

/// The centroid nearest `x` by dot product (ties by lower list) and that dot product.
fn nearest(centroids: &[f32], x: &[f32]) -> (u32, f32) {
    let mut best = (0u32, f32::NEG_INFINITY);
    for (l, c) in centroids.chunks_exact(EMBEDDING_DIM).enumerate() {
        let d = dot(c, x);
        if d > best.1 {
            best = (l as u32, d);
        }
    }
    best
}

fn normalise(v: &mut [f32]) {
    let norm = dot(v, v).sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::RngExt;

    /// `n` random unit vectors around `clusters` random directions.
    fn clustered(n: usize, clusters: usize, seed: u64) -> Vec<f32> {
        let mut rng = StdRng::seed_from_u64(seed);
        let centres: Vec<Vec<f32>> =
            (0..clusters).map(|_| (0..EMBEDDING_DIM).map(|_| rng.random_range(-1.0..1.0)).collect()).collect();
        let mut out = Vec::with_capacity(n * EMBEDDING_DIM);
        for i in 0..n {
            let mut v: Vec<f32> = centres[i % clusters].iter().map(|c| c + rng.random_range(-0.6f32..0.6)).collect();
            normalise(&mut v);
            out.extend(v);
        }
        out
    }

    #[test]
    fn every_node_is_in_exactly_one_list() {
        let e = clustered(500, 9, 1);
        let index = DenseIndex::build(&e, 20, 3);
        assert_eq!(index.lists(), 20);
        let mut seen: Vec<u32> = (0..20).flat_map(|l| index.members(l).to_vec()).collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..500).collect::<Vec<u32>>());
        for l in 0..20 {
            assert!(index.members(l).windows(2).all(|w| w[0] < w[1]));
        }
    }

    #[test]
    fn probing_every_list_is_a_scan() {
        let e = clustered(300, 5, 2);
        let index = DenseIndex::build(&e, 12, 3);
        let q = &clustered(1, 1, 9)[..];
        let probe = index.probe(&e, q, 12);
        let scan: Vec<(u32, f32)> =
            (0..300).map(|i| (i as u32, dot(&e[i * EMBEDDING_DIM..][..EMBEDDING_DIM], q))).collect();
        assert_eq!(probe.nodes, scan);
    }

    #[test]
    fn same_seed_same_index() {
        let e = clustered(400, 6, 4);
        let (a, b) = (DenseIndex::build(&e, 16, 5), DenseIndex::build(&e, 16, 5));
        assert_eq!(a.members, b.members);
        assert_eq!(a.centroids, b.centroids);
    }

    #[test]
    fn config_applies_only_to_large_memories_probing_fewer_lists_than_they_have() {
        let c = IndexConfig::default();
        assert_eq!(c.lists_for(59_000), 243);
        assert!(c.applies(59_000));
        assert!(!c.applies(19_999));
        assert!(!IndexConfig { probes: 243, ..c.clone() }.applies(59_000));
        assert!(!IndexConfig { enabled: false, ..c.clone() }.applies(59_000));
        assert!(IndexConfig { probes: 0, ..c }.validate().is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        /// The bound holds for every node and every query, probed or not.
        #[test]
        fn bound_is_never_below_the_cosine(seed in 0u64..1000, lists in 1usize..40, probes in 1usize..8) {
            let e = clustered(240, 7, seed);
            let index = DenseIndex::build(&e, lists, seed);
            let q = clustered(1, 1, seed + 1);
            let probe = index.probe(&e, &q, probes);
            for i in 0..240 {
                let cos = dot(&e[i * EMBEDDING_DIM..][..EMBEDDING_DIM], &q);
                prop_assert!(index.bound(&probe, i) >= cos, "node {i}: bound {} < cosine {cos}", index.bound(&probe, i));
            }
            let probed: usize = top_lists(&probe.centroid, probes).iter().map(|&l| index.members(l as usize).len()).sum();
            prop_assert_eq!(probe.nodes.len(), probed);
        }
    }

    fn top_lists(centroid: &[f32], probes: usize) -> Vec<u32> {
        let mut order: Vec<u32> = (0..centroid.len() as u32).collect();
        order.sort_by(|&a, &b| centroid[b as usize].total_cmp(&centroid[a as usize]).then(a.cmp(&b)));
        order.truncate(probes);
        order
    }
}
