//! The dense index of a large memory: its node embeddings quantised to 8 bits (one scale per
//! node), a quarter of the bytes a scan of the f32 embeddings reads, with a per-node bound of
//! the quantisation error. The query is quantised too, so a node's approximate cosine is an
//! integer dot product; plus both errors' bound, it is an upper bound of the exact one. The
//! ranking computes exact cosines only for the nodes those bounds cannot rule out, so its
//! anchors and result are the full scan's, exactly.
//!
//! Owns the quantised codes and the bounds. It must not score or rank nodes: `retrieve`
//! decides which exact cosines to compute.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::embed::EMBEDDING_DIM;

/// Margin added to every node's error bound so it survives f32 rounding.
const BOUND_MARGIN: f32 = 1e-4;

/// Settings of the dense index (`[retrieve.index]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IndexConfig {
    /// Use an index at all (default true). Without one every query scans the f32 embeddings.
    pub enabled: bool,
    /// Smallest memory, in nodes, that gets an index (default 20,000; under it the embeddings
    /// stay in cache and a scan is as fast).
    pub min_nodes: usize,
}

impl Default for IndexConfig {
    fn default() -> Self {
        IndexConfig { enabled: true, min_nodes: 20_000 }
    }
}

impl IndexConfig {
    /// Whether a memory of `nodes` nodes is searched through an index.
    pub fn applies(&self, nodes: usize) -> bool {
        self.enabled && nodes >= self.min_nodes && nodes > 0
    }
}

/// A memory's node embeddings, 8 bits each value.
#[derive(Debug, Clone)]
pub struct DenseIndex {
    /// `nodes × EMBEDDING_DIM` codes: value ≈ code · scale.
    codes: Vec<i8>,
    /// Per node: its scale, max |value| / 127.
    scale: Vec<f32>,
    /// Per node: `‖x − x̂‖` (x̂ the decoded vector) plus a rounding margin.
    error: Vec<f32>,
    /// Per node: `‖x̂‖`, rounded up.
    norm: Vec<f32>,
}

/// `x` in 8 bits: its codes, their scale (max |value| / 127), and what they lose, `x − x̂`.
fn quantise(x: &[f32]) -> (Vec<i8>, f32, impl Iterator<Item = f32> + '_) {
    let max = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let scale = if max > 0.0 { max / 127.0 } else { 1.0 };
    let codes: Vec<i8> = x.iter().map(|v| (v / scale).round().clamp(-127.0, 127.0) as i8).collect();
    let decoded = (0..x.len()).map(move |k| x[k] - ((x[k] / scale).round().clamp(-127.0, 127.0)) * scale);
    (codes, scale, decoded)
}

/// `‖v‖` in f64, over an iterator of f32 values.
fn norm(v: impl Iterator<Item = f64>) -> f64 {
    v.map(|x| x * x).sum::<f64>().sqrt()
}

impl DenseIndex {
    /// Quantises `embeddings` (`nodes × EMBEDDING_DIM`).
    pub fn build(embeddings: &[f32]) -> DenseIndex {
        let rows: Vec<(Vec<i8>, f32, f32, f32)> = embeddings
            .par_chunks_exact(EMBEDDING_DIM)
            .map(|x| {
                let (codes, scale, residual) = quantise(x);
                let error = norm(residual.map(|d| d as f64)) as f32 + BOUND_MARGIN;
                let length = norm(codes.iter().map(|&c| c as f64 * scale as f64)) as f32 + BOUND_MARGIN;
                (codes, scale, error, length)
            })
            .collect();
        let mut index = DenseIndex {
            codes: Vec::with_capacity(embeddings.len()),
            scale: Vec::with_capacity(rows.len()),
            error: Vec::with_capacity(rows.len()),
            norm: Vec::with_capacity(rows.len()),
        };
        for (codes, scale, error, length) in rows {
            index.codes.extend(codes);
            index.scale.push(scale);
            index.error.push(error);
            index.norm.push(length);
        }
        index
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.scale.len()
    }

    /// Whether it holds no node.
    pub fn is_empty(&self) -> bool {
        self.scale.is_empty()
    }

    /// Bytes a query reads.
    pub fn bytes(&self) -> usize {
        self.codes.len() + 12 * self.scale.len()
    }

    /// Per node, an upper bound of its cosine with the unit vector `query`. The query is
    /// quantised to 8 bits as the nodes are (q̂), so the decoded dot product is an exact
    /// integer sum times the two scales; then
    /// `q·x = q̂·x̂ + (q − q̂)·x̂ + q·(x − x̂) ≤ q̂·x̂ + ‖q − q̂‖·‖x̂‖ + ‖x − x̂‖`.
    pub fn bounds(&self, query: &[f32]) -> Vec<f32> {
        let (q, q_scale, residual) = quantise(query);
        let q_error = (norm(residual.map(|d| d as f64)) + 1e-6) as f32;
        let mut out = vec![0.0f32; self.len()];
        crate::parallel::fill_nodes(&mut out, |first, piece| {
            let nodes = first..first + piece.len();
            let codes = &self.codes[nodes.start * EMBEDDING_DIM..nodes.end * EMBEDDING_DIM];
            let rows =
                Rows { scale: &self.scale[nodes.clone()], error: &self.error[nodes.clone()], norm: &self.norm[nodes] };
            bounds_into(codes, &rows, &q, q_scale, q_error, piece)
        });
        out
    }
}

/// Some consecutive nodes' scales and bounds.
struct Rows<'a> {
    scale: &'a [f32],
    error: &'a [f32],
    norm: &'a [f32],
}

/// [`DenseIndex::bounds`] of some nodes into `out`, compiled also for AVX2 and picked at run
/// time.
#[multiversion::multiversion(targets("x86_64+avx2"))]
fn bounds_into(codes: &[i8], rows: &Rows, q: &[i8], q_scale: f32, q_error: f32, out: &mut [f32]) {
    for (k, (o, c)) in out.iter_mut().zip(codes.chunks_exact(EMBEDDING_DIM)).enumerate() {
        *o = rows.scale[k] * q_scale * dot_codes(c, q) as f32 + (rows.error[k] + q_error * rows.norm[k]);
    }
}

/// `Σ a_k·b_k` of two rows of codes, exact in 32-bit integers, sixteen lanes at a time.
#[inline(always)]
fn dot_codes(a: &[i8], b: &[i8]) -> i32 {
    let mut acc = [0i32; 16];
    for (x, y) in a.chunks_exact(16).zip(b.chunks_exact(16)) {
        for k in 0..16 {
            acc[k] += x[k] as i32 * y[k] as i32;
        }
    }
    let tail: i32 = a
        .chunks_exact(16)
        .remainder()
        .iter()
        .zip(b.chunks_exact(16).remainder())
        .map(|(&x, &y)| x as i32 * y as i32)
        .sum();
    acc.iter().sum::<i32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retrieve::dot;
    use proptest::prelude::*;
    use rand::rngs::StdRng;
    use rand::{RngExt, SeedableRng};

    fn exact(embeddings: &[f32], node: usize, query: &[f32]) -> f32 {
        dot(&embeddings[node * EMBEDDING_DIM..(node + 1) * EMBEDDING_DIM], query)
    }

    fn unit_rows(n: usize, seed: u64) -> Vec<f32> {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut out = Vec::with_capacity(n * EMBEDDING_DIM);
        for _ in 0..n {
            let v: Vec<f32> = (0..EMBEDDING_DIM).map(|_| rng.random_range(-1.0f32..1.0)).collect();
            let norm = dot(&v, &v).sqrt();
            out.extend(v.iter().map(|x| x / norm));
        }
        out
    }

    #[test]
    fn config_applies_only_to_large_memories() {
        let c = IndexConfig::default();
        assert!(c.applies(59_000) && !c.applies(19_999));
        assert!(!IndexConfig { enabled: false, ..c }.applies(59_000));
    }

    #[test]
    fn a_quarter_of_the_bytes_and_a_small_error() {
        let e = unit_rows(200, 1);
        let index = DenseIndex::build(&e);
        assert_eq!(index.len(), 200);
        assert!(index.bytes() * 3 < e.len() * 4, "{} bytes", index.bytes());
        // 8 bits per value: the error of a unit vector is about 1/127 of its largest value.
        assert!(index.error.iter().all(|&x| x < 0.01), "{:?}", index.error.iter().fold(0.0f32, |a, &b| a.max(b)));
    }

    #[test]
    fn a_large_index_bounds_each_node_as_a_small_one() {
        // Large enough to split the pass across threads; its last rows alone are not.
        let n = crate::parallel::PARALLEL_NODES + 700;
        let e = unit_rows(n, 3);
        let q = unit_rows(1, 4);
        let large = DenseIndex::build(&e).bounds(&q);
        let tail = DenseIndex::build(&e[(n - 700) * EMBEDDING_DIM..]).bounds(&q);
        for (k, (a, b)) in large[n - 700..].iter().zip(&tail).enumerate() {
            assert_eq!(a.to_bits(), b.to_bits(), "node {}", n - 700 + k);
        }
        assert!(large.iter().enumerate().all(|(i, &b)| b >= exact(&e, i, &q)), "a bound under its cosine");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        /// The bound holds for every node and query, and is tight.
        #[test]
        fn bound_is_never_below_the_cosine(seed in 0u64..1000) {
            let e = unit_rows(64, seed);
            let index = DenseIndex::build(&e);
            let q = unit_rows(1, seed + 1);
            let bounds = index.bounds(&q);
            for (i, &b) in bounds.iter().enumerate() {
                let cos = exact(&e, i, &q);
                prop_assert!(b >= cos, "node {i}: bound {b} < cosine {cos}");
                prop_assert!(b - cos < 0.02, "node {i}: bound {b} far above cosine {cos}");
            }
        }
    }
}
