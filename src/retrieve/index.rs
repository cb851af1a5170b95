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
use crate::simd::{self, Family};

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

/// `x` in 8 bits: its codes and their scale (max |value| / 127).
fn quantise(x: &[f32]) -> (Vec<i8>, f32) {
    let max = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let scale = if max > 0.0 { max / 127.0 } else { 1.0 };
    (x.iter().map(|v| (v / scale).round().clamp(-127.0, 127.0) as i8).collect(), scale)
}

/// `‖x − x̂‖` and `‖x̂‖` (x̂ the decoded `codes`), in f64.
fn error_and_norm(x: &[f32], codes: &[i8], scale: f32) -> (f64, f64) {
    let (mut error, mut norm) = (0.0f64, 0.0f64);
    for (&v, &c) in x.iter().zip(codes) {
        let decoded = c as f32 * scale;
        error += ((v - decoded) as f64).powi(2);
        norm += (decoded as f64).powi(2);
    }
    (error.sqrt(), norm.sqrt())
}

impl DenseIndex {
    /// Quantises `embeddings` (`nodes × EMBEDDING_DIM`).
    pub fn build(embeddings: &[f32]) -> DenseIndex {
        let rows: Vec<(Vec<i8>, f32, f32, f32)> = embeddings
            .par_chunks_exact(EMBEDDING_DIM)
            .map(|x| {
                let (codes, scale) = quantise(x);
                let (error, norm) = error_and_norm(x, &codes, scale);
                (codes, scale, error as f32 + BOUND_MARGIN, norm as f32 + BOUND_MARGIN)
            })
            .collect();
        let mut index = DenseIndex {
            codes: Vec::with_capacity(embeddings.len()),
            scale: Vec::with_capacity(rows.len()),
            error: Vec::with_capacity(rows.len()),
            norm: Vec::with_capacity(rows.len()),
        };
        for (codes, scale, error, norm) in rows {
            index.codes.extend(codes);
            index.scale.push(scale);
            index.error.push(error);
            index.norm.push(norm);
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
        self.bounds_batch(&[query]).pop().unwrap_or_default()
    }

    /// [`DenseIndex::bounds`] of several queries, from one pass over the codes: each node's
    /// codes are read once for all of them (at 10M tokens the codes are 22 MB, more than a
    /// core's caches hold). The same values as one [`DenseIndex::bounds`] each.
    pub fn bounds_batch(&self, queries: &[&[f32]]) -> Vec<Vec<f32>> {
        self.bounds_on(Kernel::detect(), queries)
    }

    /// [`DenseIndex::bounds_batch`] with the integer dot products computed by `kernel` (for
    /// tests and benchmarks: every kernel gives the same integers, so the same bounds).
    /// `kernel` must be one of [`Kernel::available`]; another falls back to the portable one.
    pub fn bounds_on(&self, kernel: Kernel, queries: &[&[f32]]) -> Vec<Vec<f32>> {
        let kernel = if kernel.runs_on(simd::features()) { kernel } else { Kernel::Portable };
        let queries: Vec<QueryCodes> = queries.iter().map(|q| QueryCodes::new(q)).collect();
        let mut out = vec![vec![0.0f32; self.len()]; queries.len()];
        let b = queries.len();
        crate::parallel::fill_nodes_many(&mut out, |first, pieces| {
            let len = pieces.first().map_or(0, |p| p.len());
            let mut dots = vec![0i32; BLOCK_NODES.min(len) * b];
            for start in (0..len).step_by(BLOCK_NODES) {
                let end = (start + BLOCK_NODES).min(len);
                let nodes = first + start..first + end;
                let codes = &self.codes[nodes.start * EMBEDDING_DIM..nodes.end * EMBEDDING_DIM];
                let dots = &mut dots[..(end - start) * b];
                kernel.dots(codes, &queries, dots);
                for (j, (q, piece)) in queries.iter().zip(pieces.iter_mut()).enumerate() {
                    for (k, node) in nodes.clone().enumerate() {
                        piece[start + k] = self.scale[node] * q.scale * dots[k * b + j] as f32
                            + (self.error[node] + q.error * self.norm[node]);
                    }
                }
            }
        });
        out
    }
}

/// Nodes whose dot products with every query of a batch are computed before their bounds
/// (the products of 256 nodes and 16 queries, 16 KB, stay in the first-level cache).
const BLOCK_NODES: usize = 256;

/// A query as the kernels read it: its codes (also widened to 16 bits), their scale, and
/// `‖q − q̂‖` rounded up.
struct QueryCodes {
    codes: Vec<i8>,
    wide: Vec<i16>,
    scale: f32,
    error: f32,
}

impl QueryCodes {
    fn new(query: &[f32]) -> QueryCodes {
        let (codes, scale) = quantise(query);
        let error = (error_and_norm(query, &codes, scale).0 + 1e-6) as f32;
        let wide = codes.iter().map(|&c| c as i16).collect();
        QueryCodes { codes, wide, scale, error }
    }
}

/// How the bounds' integer dot products are computed. Every kernel gives the same integers
/// (sums of products of 8-bit codes are exact in 32 bits, in any order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// Plain Rust, any CPU (compiled also for AVX2 and picked at run time).
    Portable,
    /// AVX2 by hand: a node's codes widened to 16 bits once, multiplied by up to four
    /// queries' at a time and added in pairs (`vpmaddwd`), 16 values per instruction.
    Avx2,
}

impl Kernel {
    /// The fastest kernel this CPU runs ([`simd::best`]).
    pub fn detect() -> Kernel {
        simd::best()
    }

    /// Every kernel this CPU runs, slowest first ([`simd::available`], reversed).
    pub fn available() -> Vec<Kernel> {
        let mut out = simd::available::<Kernel>();
        out.reverse();
        out
    }

    /// `out[k·b + j]` = the dot product of node `k`'s codes (`codes`, rows of
    /// `EMBEDDING_DIM`) with query `j`'s, `b` = `queries.len()`.
    fn dots(self, codes: &[i8], queries: &[QueryCodes], out: &mut [i32]) {
        match self {
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 if simd::features().avx2 => {
                let wide: Vec<&[i16]> = queries.iter().map(|q| q.wide.as_slice()).collect();
                // SAFETY: this CPU has AVX2 (`simd::features` found it, checked just above),
                // the only requirement of `avx2::dots`, which reads its slices through
                // bounds-checked safe code.
                unsafe { avx2::dots(codes, &wide, out) }
            }
            _ => {
                let codes_of: Vec<&[i8]> = queries.iter().map(|q| q.codes.as_slice()).collect();
                portable_dots(codes, &codes_of, out)
            }
        }
    }
}

impl Family for Kernel {
    const PORTABLE: Kernel = Kernel::Portable;
    const ACCELERATED: &'static [Kernel] = &[Kernel::Avx2];

    fn runs_on(self, cpu: &simd::Features) -> bool {
        match self {
            Kernel::Avx2 => cpu.avx2,
            Kernel::Portable => true,
        }
    }
}

/// [`Kernel::Portable`].
#[multiversion::multiversion(targets("x86_64+avx2"))]
fn portable_dots(codes: &[i8], queries: &[&[i8]], out: &mut [i32]) {
    let b = queries.len();
    for (row, o) in codes.chunks_exact(EMBEDDING_DIM).zip(out.chunks_exact_mut(b.max(1))) {
        for (x, q) in o.iter_mut().zip(queries) {
            *x = dot_codes(row, q);
        }
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

/// [`Kernel::Avx2`]. Vectors are read from slices with `bytemuck` (bounds-checked, unaligned
/// loads), so the only unsafe step is calling in without AVX2, which [`Kernel::dots`] rules out.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use crate::embed::EMBEDDING_DIM;

    /// 16-bit lanes of a 256-bit vector.
    const LANES: usize = 16;
    /// Vectors of 16 values in one row.
    const VECTORS: usize = EMBEDDING_DIM / LANES;
    const _: () = assert!(EMBEDDING_DIM.is_multiple_of(LANES), "a row is a whole number of vectors");

    /// 16 codes widened to 16 bits.
    #[target_feature(enable = "avx2")]
    fn widen(codes: &[i8]) -> __m256i {
        _mm256_cvtepi8_epi16(bytemuck::pod_read_unaligned::<__m128i>(bytemuck::cast_slice(codes)))
    }

    /// The four lanes' sums of `a`, `b`, `c`, `d`.
    #[target_feature(enable = "avx2")]
    fn sums4(a: __m256i, b: __m256i, c: __m256i, d: __m256i) -> [i32; 4] {
        let s = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
        bytemuck::cast(_mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256::<1>(s)))
    }

    /// See [`super::Kernel::dots`]; `queries` widened to 16 bits.
    #[target_feature(enable = "avx2")]
    pub(super) fn dots(codes: &[i8], queries: &[&[i16]], out: &mut [i32]) {
        let b = queries.len();
        if b == 0 {
            return;
        }
        let mut wide = vec![_mm256_setzero_si256(); b * VECTORS];
        for (w, q) in wide.chunks_exact_mut(VECTORS).zip(queries) {
            for (v, chunk) in w.iter_mut().zip(q.chunks_exact(LANES)) {
                *v = bytemuck::pod_read_unaligned(bytemuck::cast_slice(chunk));
            }
        }
        let mut row = [_mm256_setzero_si256(); VECTORS];
        for (codes, o) in codes.chunks_exact(EMBEDDING_DIM).zip(out.chunks_exact_mut(b)) {
            for (v, chunk) in row.iter_mut().zip(codes.chunks_exact(LANES)) {
                *v = widen(chunk);
            }
            let mut groups = wide.chunks_exact(4 * VECTORS);
            let mut at = 0;
            for group in groups.by_ref() {
                let (q0, rest) = group.split_at(VECTORS);
                let (q1, rest) = rest.split_at(VECTORS);
                let (q2, q3) = rest.split_at(VECTORS);
                let mut acc = [_mm256_setzero_si256(); 4];
                for j in 0..VECTORS {
                    acc[0] = _mm256_add_epi32(acc[0], _mm256_madd_epi16(row[j], q0[j]));
                    acc[1] = _mm256_add_epi32(acc[1], _mm256_madd_epi16(row[j], q1[j]));
                    acc[2] = _mm256_add_epi32(acc[2], _mm256_madd_epi16(row[j], q2[j]));
                    acc[3] = _mm256_add_epi32(acc[3], _mm256_madd_epi16(row[j], q3[j]));
                }
                o[at..at + 4].copy_from_slice(&sums4(acc[0], acc[1], acc[2], acc[3]));
                at += 4;
            }
            for q in groups.remainder().chunks_exact(VECTORS) {
                let mut acc = _mm256_setzero_si256();
                for j in 0..VECTORS {
                    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(row[j], q[j]));
                }
                let zero = _mm256_setzero_si256();
                o[at] = sums4(acc, zero, zero, zero)[0];
                at += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::score::dot;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn exact(embeddings: &[f32], node: usize, query: &[f32]) -> f32 {
        dot(&embeddings[node * EMBEDDING_DIM..(node + 1) * EMBEDDING_DIM], query)
    }

    fn unit_rows(n: usize, seed: u64) -> Vec<f32> {
        crate::graph::synthetic::unit_embeddings(n, &mut StdRng::seed_from_u64(seed))
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

    /// `got` (`kernel`'s bounds) is `want` to the bit: as many queries, `nodes` bounds each.
    fn same_bounds(kernel: Kernel, got: &[Vec<f32>], want: &[Vec<f32>], nodes: usize) {
        assert_eq!(got.len(), want.len());
        for (j, (b, r)) in got.iter().zip(want).enumerate() {
            assert_eq!(b.len(), nodes);
            for (i, (x, y)) in b.iter().zip(r).enumerate() {
                assert_eq!(x.to_bits(), y.to_bits(), "{kernel:?}: query {j} of {}, node {i}", want.len());
            }
        }
    }

    /// Bounds of `queries` in one batch by every kernel this CPU runs, checked bit for bit
    /// against the portable kernel's batch, itself checked bit for bit against the portable
    /// kernel's bounds one query at a time.
    fn every_kernel_agrees(e: &[f32], queries: &[f32]) {
        let index = DenseIndex::build(e);
        let queries: Vec<&[f32]> = queries.chunks_exact(EMBEDDING_DIM).collect();
        let Ok(portable) = simd::for_each_kernel(
            |kernel: Kernel| index.bounds_on(kernel, &queries),
            |kernel, batch: &Vec<Vec<f32>>, portable: &Vec<Vec<f32>>| -> Result<(), std::convert::Infallible> {
                same_bounds(kernel, batch, portable, index.len());
                Ok(())
            },
        );
        let one_by_one: Vec<Vec<f32>> =
            queries.iter().map(|q| index.bounds_on(Kernel::Portable, &[q]).remove(0)).collect();
        assert_eq!(portable.len(), queries.len());
        same_bounds(Kernel::Portable, &portable, &one_by_one, index.len());
    }

    #[test]
    fn every_kernel_and_batch_gives_the_same_bounds() {
        // Split across threads and into blocks, with a partial last block; batches that fill
        // the four-query groups, leave a remainder, or hold none.
        let n = crate::parallel::PARALLEL_NODES + 3 * BLOCK_NODES + 77;
        let mut e = unit_rows(n, 5);
        // Rows whose every code is ±127 (the largest products) and a zero row.
        for (r, row) in e.chunks_exact_mut(EMBEDDING_DIM).take(3).enumerate() {
            for (k, x) in row.iter_mut().enumerate() {
                *x = if r == 2 {
                    0.0
                } else if (k + r) % 3 == 0 {
                    -1.0
                } else {
                    1.0
                } / (EMBEDDING_DIM as f32).sqrt();
            }
        }
        let queries = unit_rows(9, 6);
        for b in [0, 1, 4, 5, 9] {
            every_kernel_agrees(&e, &queries[..b * EMBEDDING_DIM]);
        }
        // The query equal to the ±127 row: the largest dot product a row can have.
        every_kernel_agrees(&e, &e[..EMBEDDING_DIM]);
        assert!(Kernel::available().contains(&Kernel::detect()));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        /// Any rows and queries: every kernel gives the portable one's bounds.
        #[test]
        fn kernels_agree_on_random_rows(seed in 0u64..1000, n in 1usize..300, b in 1usize..7) {
            every_kernel_agrees(&unit_rows(n, seed), &unit_rows(b, seed + 7));
        }

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
