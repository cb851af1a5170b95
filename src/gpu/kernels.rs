//! Each kernel family on its own, behind one trait with a CPU and a GPU implementation: what
//! the parity tests and the benchmarks drive. The CPU side calls the engine's own reference
//! code (`activation`, `score::rank_order`, `graph::pagerank`), so a parity test compares
//! the GPU with exactly what the CPU engine computes.
//!
//! Inputs are batches over queries of one graph (`Vec` per query); the GPU runs each batch as
//! one submit and one readback of the stage's output.

use rayon::prelude::*;

use crate::activation::{self, ActivationConfig, Spreading};
use crate::embed::EMBEDDING_DIM;
use crate::error::{Error, Result};
use crate::graph::pagerank::Transition;
use crate::score::{CONCEPT_TURN, dense_score, dots, top_order};
use rand::RngExt;

use super::corpus::{Corpus, GraphInput};
use super::device::Gpu;
use super::layout::SELECT_STATE_WORDS;
use super::ranker::{Batch, Pool, RankQuery, RankSettings};

/// The kernel families, batched over queries.
pub trait Kernels {
    /// "cpu" or "gpu".
    fn name(&self) -> &'static str;
    /// Dense score of each query with each node (`n × EMBEDDING_DIM` normalised embeddings):
    /// the cosine, less `discount` where `turns` (per node, its turn's first passage, or
    /// [`CONCEPT_TURN`]) makes the node a later passage ([`dense_score`]).
    fn similarity(
        &self,
        embeddings: &[f32],
        turns: &[u32],
        discount: f32,
        queries: &[Vec<f32>],
    ) -> Result<Vec<Vec<f32>>>;
    /// One propagation step per query: `u = (1 − δ)·a + M·a`.
    fn propagate(&self, spreading: &Spreading, decay: f32, a: &[Vec<f32>]) -> Result<Vec<Vec<f32>>>;
    /// The `k` best node ids per query, in `rank_order`.
    fn top_k(&self, scores: &[Vec<f32>], k: usize) -> Result<Vec<Vec<u32>>>;
    /// The `m` largest values per query, descending.
    fn top_m_values(&self, u: &[Vec<f32>], m: usize) -> Result<Vec<Vec<f32>>>;
    /// Top-M inhibition then the sigmoid.
    fn inhibit_sigmoid(&self, u: &[Vec<f32>], config: &ActivationConfig) -> Result<Vec<Vec<f32>>>;
    /// PageRank per teleport vector (all zero: uniform) for `rounds` rounds (the CPU iterates
    /// to its tolerance).
    fn pagerank(
        &self,
        transition: &Transition,
        damping: f32,
        teleports: &[Vec<f32>],
        rounds: u32,
    ) -> Result<Vec<Vec<f32>>>;
}

/// The CPU engine's code.
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuKernels;

impl Kernels for CpuKernels {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn similarity(
        &self,
        embeddings: &[f32],
        turns: &[u32],
        discount: f32,
        queries: &[Vec<f32>],
    ) -> Result<Vec<Vec<f32>>> {
        same_turns(turns, embeddings.len() / EMBEDDING_DIM)?;
        Ok(queries
            .par_iter()
            .map(|q| {
                let cosines = dots(embeddings, q);
                cosines.iter().zip(turns).enumerate().map(|(i, (&c, &t))| dense_score(i, c, t, discount)).collect()
            })
            .collect())
    }

    fn propagate(&self, spreading: &Spreading, decay: f32, a: &[Vec<f32>]) -> Result<Vec<Vec<f32>>> {
        Ok(a.par_iter()
            .map(|a| {
                let mut u = vec![0.0; a.len()];
                activation::propagate(spreading, decay, a, &mut u);
                u
            })
            .collect())
    }

    fn top_k(&self, scores: &[Vec<f32>], k: usize) -> Result<Vec<Vec<u32>>> {
        Ok(scores.par_iter().map(|s| top_order(s, k)).collect())
    }

    fn top_m_values(&self, u: &[Vec<f32>], m: usize) -> Result<Vec<Vec<f32>>> {
        Ok(u.par_iter().map(|u| activation::top_m(u, m).into_iter().map(|(_, v)| v).collect()).collect())
    }

    fn inhibit_sigmoid(&self, u: &[Vec<f32>], c: &ActivationConfig) -> Result<Vec<Vec<f32>>> {
        Ok(u.par_iter()
            .map(|u| {
                let mut h = vec![0.0; u.len()];
                let mut a = vec![0.0; u.len()];
                activation::inhibit(u, c.inhibition_top_m, c.inhibition_beta, &mut h);
                activation::sigmoid(&h, c.sigmoid_gamma, c.sigmoid_theta, &mut a);
                a
            })
            .collect())
    }

    fn pagerank(&self, t: &Transition, damping: f32, teleports: &[Vec<f32>], _rounds: u32) -> Result<Vec<Vec<f32>>> {
        Ok(teleports
            .par_iter()
            .map(|v| {
                let v: Vec<f64> = v.iter().map(|&x| x as f64).collect();
                t.rank(damping as f64, Some(&v)).into_iter().map(|p| p as f32).collect()
            })
            .collect())
    }
}

/// The WGSL kernels.
#[derive(Debug, Clone)]
pub struct GpuKernels {
    gpu: Gpu,
}

impl GpuKernels {
    /// On `gpu`.
    pub fn new(gpu: Gpu) -> GpuKernels {
        GpuKernels { gpu }
    }

    /// The device.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// A one-graph corpus of `n` nodes and a batch of `queries` queries over it; absent parts
    /// are empty.
    fn with_batch<T>(
        &self,
        n: usize,
        queries: usize,
        parts: Parts,
        settings: &RankSettings,
        body: impl FnOnce(&Batch) -> Result<T>,
    ) -> Result<T> {
        let zeros = vec![0.0f32; n * EMBEDDING_DIM];
        let empty = Spreading::empty(n);
        let no_transition = Transition::new(n, std::iter::empty());
        let pagerank = vec![0.0f32; n];
        let links = vec![Vec::new(); n];
        let own_turns: Vec<u32> = (0..n as u32).collect();
        let graph = GraphInput {
            embeddings: parts.embeddings.unwrap_or(&zeros),
            spreading: parts.spreading.unwrap_or(&empty),
            spreading_no_fan: parts.spreading.unwrap_or(&empty),
            pagerank: &pagerank,
            links: &links,
            turns: parts.turns.unwrap_or(&own_turns),
            transition: parts.transition.unwrap_or(&no_transition),
        };
        let corpus = Corpus::upload(&self.gpu, &[graph])?;
        let zero_query = vec![0.0f32; EMBEDDING_DIM];
        let qs: Vec<RankQuery> = (0..queries)
            .map(|q| RankQuery {
                graph: 0,
                embedding: parts.queries.map_or(zero_query.as_slice(), |v| v[q].as_slice()),
                lexical: &[],
                bm25_anchors: &[],
            })
            .collect();
        let mut pool = Pool::default();
        let batch = Batch::new(&corpus, &mut pool, &qs, settings)?;
        body(&batch)
    }

    /// Writes per-query vectors into a work buffer.
    fn write(&self, buffer: &wgpu::Buffer, rows: &[Vec<f32>]) {
        let flat: Vec<f32> = rows.concat();
        if !flat.is_empty() {
            self.gpu.queue().write_buffer(buffer, 0, bytemuck::cast_slice(&flat));
        }
    }

    fn split(words: &[u32], n: usize, queries: usize) -> Vec<Vec<f32>> {
        (0..queries).map(|q| words[q * n..(q + 1) * n].iter().map(|&b| f32::from_bits(b)).collect()).collect()
    }

    /// Encodes one compute pass, submits it and reads `read` back.
    fn run(&self, encode: impl FnOnce(&mut wgpu::ComputePass), read: &[(&wgpu::Buffer, u64)]) -> Result<Vec<Vec<u32>>> {
        let scopes = self.gpu.scopes();
        let mut encoder = self.gpu.encoder();
        {
            let mut pass = encoder
                .begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some("kernel"), timestamp_writes: None });
            encode(&mut pass);
        }
        self.gpu.finish(encoder, read, scopes, None)
    }

    /// The sorted selection list of each query, read back as (state, sorted).
    fn selection(&self, batch: &Batch, words: &[Vec<u32>], queries: usize) -> Vec<Vec<u32>> {
        let cap = batch.params.list_cap as usize;
        (0..queries)
            .map(|q| {
                let count = (words[0][q * SELECT_STATE_WORDS as usize + 4] as usize).min(cap);
                words[1][q * cap..q * cap + count].to_vec()
            })
            .collect()
    }
}

#[derive(Clone, Copy, Default)]
struct Parts<'a> {
    embeddings: Option<&'a [f32]>,
    turns: Option<&'a [u32]>,
    queries: Option<&'a [Vec<f32>]>,
    spreading: Option<&'a Spreading>,
    transition: Option<&'a Transition>,
}

/// Settings for running single stages: everything off but what the stage reads.
fn stage_settings(out_k: usize, top_m: usize, beta: f32) -> RankSettings {
    RankSettings {
        steps: 0,
        decay: 0.0,
        beta,
        top_m,
        gamma: 1.0,
        theta: 0.0,
        alpha: 1.0,
        lexical_weight: 0.0,
        lambdas: [1.0, 0.0, 0.0],
        edges: true,
        no_fan: false,
        pagerank: false,
        anchor_k: 0,
        out_k,
        top_k: 0,
        concepts: false,
        concept_anchors: true,
        passage_discount: 0.0,
    }
}

/// Per node of `n`, its turn's first passage as [`GraphInput::turns`] holds it: a fifth are
/// concepts, a third later passages of a turn that starts at an earlier node, the rest whole
/// turns.
pub fn random_turns(rng: &mut impl rand::Rng, n: usize) -> Vec<u32> {
    (0..n as u32)
        .map(|i| match rng.random_range(0..15u32) {
            0..3 => CONCEPT_TURN,
            3..8 if i > 0 => rng.random_range(0..i),
            _ => i,
        })
        .collect()
}

fn same_turns(turns: &[u32], n: usize) -> Result<()> {
    if turns.len() != n {
        return Err(Error::InvalidArgument(format!("{} turns for {n} nodes", turns.len())));
    }
    Ok(())
}

fn same_length(rows: &[Vec<f32>], n: usize) -> Result<()> {
    match rows.iter().position(|r| r.len() != n) {
        Some(q) => Err(Error::InvalidArgument(format!("query {q}: {} values for {n} nodes", rows[q].len()))),
        None => Ok(()),
    }
}

impl Kernels for GpuKernels {
    fn name(&self) -> &'static str {
        "gpu"
    }

    fn similarity(
        &self,
        embeddings: &[f32],
        turns: &[u32],
        discount: f32,
        queries: &[Vec<f32>],
    ) -> Result<Vec<Vec<f32>>> {
        let n = embeddings.len() / EMBEDDING_DIM;
        if queries.iter().any(|q| q.len() != EMBEDDING_DIM) || !embeddings.len().is_multiple_of(EMBEDDING_DIM) {
            return Err(Error::InvalidArgument(format!("vectors must have {EMBEDDING_DIM} values")));
        }
        same_turns(turns, n)?;
        let parts =
            Parts { embeddings: Some(embeddings), queries: Some(queries), turns: Some(turns), ..Parts::default() };
        let mut settings = stage_settings(0, 0, 0.0);
        settings.passage_discount = discount;
        self.with_batch(n, queries.len(), parts, &settings, |b| {
            let words = self.run(|p| b.encode_similarity(p), &[(&b.dense, b.work_words * 4)])?;
            Ok(Self::split(&words[0], n, queries.len()))
        })
    }

    fn propagate(&self, spreading: &Spreading, decay: f32, a: &[Vec<f32>]) -> Result<Vec<Vec<f32>>> {
        let n = spreading.len();
        same_length(a, n)?;
        let mut s = stage_settings(0, 0, 0.0);
        s.decay = decay;
        let parts = Parts { spreading: Some(spreading), ..Parts::default() };
        self.with_batch(n, a.len(), parts, &s, |b| {
            self.write(&b.a, a);
            let words = self.run(|p| b.encode_propagate(p, false), &[(&b.u, b.work_words * 4)])?;
            Ok(Self::split(&words[0], n, a.len()))
        })
    }

    fn top_k(&self, scores: &[Vec<f32>], k: usize) -> Result<Vec<Vec<u32>>> {
        let n = scores.first().map_or(0, Vec::len);
        same_length(scores, n)?;
        self.with_batch(n, scores.len(), Parts::default(), &stage_settings(k, 0, 0.0), |b| {
            self.write(&b.score, scores);
            let read = [(&b.state, scores.len() as u64 * SELECT_STATE_WORDS * 4), (&b.sorted, b.sorted.size())];
            let words = self.run(|p| b.encode_select(p, &b.score, k, 64), &read)?;
            Ok(self.selection(b, &words, scores.len()))
        })
    }

    fn top_m_values(&self, u: &[Vec<f32>], m: usize) -> Result<Vec<Vec<f32>>> {
        let n = u.first().map_or(0, Vec::len);
        same_length(u, n)?;
        self.with_batch(n, u.len(), Parts::default(), &stage_settings(0, m, 1.0), |b| {
            self.write(&b.u, u);
            let read = [(&b.state, u.len() as u64 * SELECT_STATE_WORDS * 4), (&b.sorted, b.sorted.size())];
            let words = self.run(|p| b.encode_select(p, &b.u, m, 32), &read)?;
            Ok(self
                .selection(b, &words, u.len())
                .into_iter()
                .map(|l| l.into_iter().map(f32::from_bits).collect())
                .collect())
        })
    }

    fn inhibit_sigmoid(&self, u: &[Vec<f32>], c: &ActivationConfig) -> Result<Vec<Vec<f32>>> {
        let n = u.first().map_or(0, Vec::len);
        same_length(u, n)?;
        let mut s = stage_settings(0, c.inhibition_top_m, c.inhibition_beta);
        s.gamma = c.sigmoid_gamma;
        s.theta = c.sigmoid_theta;
        self.with_batch(n, u.len(), Parts::default(), &s, |b| {
            self.write(&b.u, u);
            let words = self.run(|p| b.encode_inhibit_sigmoid(p), &[(&b.a, b.work_words * 4)])?;
            Ok(Self::split(&words[0], n, u.len()))
        })
    }

    fn pagerank(&self, t: &Transition, damping: f32, teleports: &[Vec<f32>], rounds: u32) -> Result<Vec<Vec<f32>>> {
        let n = t.len();
        same_length(teleports, n)?;
        // The teleport distribution as the CPU normalises it (all zero: uniform).
        let v: Vec<Vec<f32>> = teleports
            .iter()
            .map(|t| {
                let s: f64 = t.iter().map(|&x| x.max(0.0) as f64).sum();
                if s > 0.0 {
                    t.iter().map(|&x| (x.max(0.0) as f64 / s) as f32).collect()
                } else {
                    vec![1.0 / n as f32; n]
                }
            })
            .collect();
        let parts = Parts { transition: Some(t), ..Parts::default() };
        self.with_batch(n, teleports.len(), parts, &stage_settings(0, 0, 0.0), |b| {
            self.write(&b.sim, &v);
            let scopes = self.gpu.scopes();
            let mut encoder = self.gpu.encoder();
            let result = b.encode_pagerank(&mut encoder, damping, rounds);
            let words = self.gpu.finish(encoder, &[(result, b.work_words * 4)], scopes, None)?;
            Ok(Self::split(&words[0], n, teleports.len()))
        })
    }
}

/// One parity check of the GPU against the CPU engine.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ParityCheck {
    /// Kernel family.
    pub kernel: &'static str,
    /// Nodes.
    pub nodes: usize,
    /// Queries.
    pub queries: usize,
    /// Largest relative error, |gpu − cpu| / max(|cpu|, 1e-3) (0 for id comparisons).
    pub max_rel_err: f64,
    /// Whether it passed: relative error < 1e-5, identical ids and values for selections.
    pub passed: bool,
}

/// Every kernel family on the GPU against the CPU engine, on seeded random inputs of awkward
/// sizes (0, 1, the workgroup size ± 1, past one histogram chunk; synthetic graphs with hubs),
/// batches of 9 queries (more than a dense-scan tile).
pub fn parity_suite(gpu: &GpuKernels, seed: u64) -> Result<Vec<ParityCheck>> {
    use crate::graph::synthetic::{self, Shape};
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    let cpu = CpuKernels;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut checks = Vec::new();
    let rel = |g: &[Vec<f32>], c: &[Vec<f32>]| -> f64 {
        g.iter()
            .flatten()
            .zip(c.iter().flatten())
            .map(|(&x, &y)| (x as f64 - y as f64).abs() / (y.abs() as f64).max(1e-3))
            .fold(0.0, f64::max)
    };
    let mut push = |kernel, nodes, queries, err: f64, same: bool| {
        checks.push(ParityCheck { kernel, nodes, queries, max_rel_err: err, passed: same && err < 1e-5 })
    };
    for n in [0usize, 1, 255, 256, 257, 1000, 4097] {
        let (graph, emb) = synthetic::graph(&Shape { hub_links: 60, ..Shape::like_locomo(n, seed + n as u64) });
        let q = 9;
        let rows: Vec<Vec<f32>> = (0..q).map(|_| (0..n).map(|_| rng.random_range(0.0..1.0f32)).collect()).collect();
        let vectors: Vec<Vec<f32>> =
            (0..q).map(|_| (0..EMBEDDING_DIM).map(|_| rng.random_range(-0.1..0.1f32)).collect()).collect();
        let turns = random_turns(&mut rng, n);
        let (g, c) = (gpu.similarity(&emb, &turns, 0.15, &vectors)?, cpu.similarity(&emb, &turns, 0.15, &vectors)?);
        push("similarity", n, q, rel(&g, &c), g.len() == c.len());
        for fan in [true, false] {
            let s = Spreading::new(&graph, &ActivationConfig { fan_effect: fan, ..ActivationConfig::default() });
            let (g, c) = (gpu.propagate(&s, 0.5, &rows)?, cpu.propagate(&s, 0.5, &rows)?);
            push("propagate", n, q, rel(&g, &c), true);
        }
        for (m, beta) in [(50usize, 0.02f32), (7, 0.15), (1024, 0.02)] {
            let config = ActivationConfig { inhibition_top_m: m, inhibition_beta: beta, ..ActivationConfig::default() };
            let (g, c) = (gpu.inhibit_sigmoid(&rows, &config)?, cpu.inhibit_sigmoid(&rows, &config)?);
            push("inhibit+sigmoid", n, q, rel(&g, &c), true);
            let (g, c) = (gpu.top_m_values(&rows, m)?, cpu.top_m_values(&rows, m)?);
            push("top-m values", n, q, 0.0, g == c);
        }
        let mut tied = rows.clone();
        for row in tied.iter_mut() {
            for x in row.iter_mut() {
                *x = (*x * 8.0).round() / 8.0;
            }
        }
        for k in [1usize, 10, 120] {
            push("top-k", n, q, 0.0, gpu.top_k(&rows, k)? == cpu.top_k(&rows, k)?);
            push("top-k (ties)", n, q, 0.0, gpu.top_k(&tied, k)? == cpu.top_k(&tied, k)?);
        }
        if n > 0 {
            let t = Transition::new(n, graph.edges.iter().map(|e| (e.src, e.dst, e.weight)));
            let teleports = vec![vec![0.0f32; n], rows[0].clone()];
            let (g, c) = (gpu.pagerank(&t, 0.85, &teleports, 200)?, cpu.pagerank(&t, 0.85, &teleports, 200)?);
            // Relative to the largest value: f32 iterations against f64 ones to 1e-10.
            let scale = c.iter().flatten().fold(0.0f32, |a, &b| a.max(b)) as f64;
            let err = g
                .iter()
                .flatten()
                .zip(c.iter().flatten())
                .map(|(&x, &y)| (x as f64 - y as f64).abs() / scale)
                .fold(0.0, f64::max);
            push("pagerank", n, 2, err, true);
        }
    }
    Ok(checks)
}

#[cfg(test)]
mod tests {
    //! Every test body runs on both backends (`kernel_test!`) against an independent oracle
    //! written here (dense f64 loops, full sorts); `gpu_matches_cpu_*` compare the GPU with the
    //! CPU engine directly. Sizes are the awkward ones: 0, 1, the workgroup size ± 1, more than a
    //! histogram chunk, graphs with isolated nodes and hubs.
    use super::*;
    use crate::graph::synthetic::{self, Shape};
    use rand::rngs::StdRng;
    use rand::{RngExt, SeedableRng};

    const SIZES: [usize; 7] = [0, 1, 255, 256, 257, 1000, 4097];

    fn gpu_kernels() -> Option<GpuKernels> {
        crate::gpu::test_gpu().map(GpuKernels::new)
    }

    macro_rules! kernel_test {
        ($name:ident, $body:expr) => {
            mod $name {
                use super::*;
                #[test]
                fn cpu() {
                    ($body)(&CpuKernels as &dyn Kernels);
                }
                #[test]
                fn gpu() {
                    if let Some(k) = gpu_kernels() {
                        ($body)(&k as &dyn Kernels);
                    }
                }
            }
        };
    }

    fn close(got: f32, want: f64, what: &str) {
        let tol = 1e-5 * want.abs().max(1e-3);
        assert!((got as f64 - want).abs() <= tol, "{what}: got {got}, want {want}");
    }

    fn random_rows(rng: &mut StdRng, queries: usize, n: usize, lo: f32, hi: f32) -> Vec<Vec<f32>> {
        (0..queries).map(|_| (0..n).map(|_| rng.random_range(lo..hi)).collect()).collect()
    }

    fn spreading_for(n: usize, seed: u64, fan: bool) -> Spreading {
        let (g, _) = synthetic::graph(&Shape { hub_links: 60, ..Shape::like_locomo(n, seed) });
        let config = ActivationConfig { fan_effect: fan, ..ActivationConfig::default() };
        Spreading::new(&g, &config)
    }

    kernel_test!(similarity_is_the_dot_product_less_the_passage_discount, |k: &dyn Kernels| {
        let mut rng = StdRng::seed_from_u64(11);
        for n in [0usize, 1, 257, 1000] {
            for (queries, discount) in [(1usize, 0.0f32), (3, 0.15), (9, 0.15)] {
                let emb: Vec<f32> = (0..n * EMBEDDING_DIM).map(|_| rng.random_range(-0.1..0.1f32)).collect();
                let qs = random_rows(&mut rng, queries, EMBEDDING_DIM, -0.1, 0.1);
                let turns = random_turns(&mut rng, n);
                let got = k.similarity(&emb, &turns, discount, &qs).unwrap();
                let mut later = 0;
                for (q, row) in got.iter().enumerate() {
                    assert_eq!(row.len(), n);
                    for (i, &g) in row.iter().enumerate() {
                        let dot: f64 =
                            (0..EMBEDDING_DIM).map(|d| emb[i * EMBEDDING_DIM + d] as f64 * qs[q][d] as f64).sum();
                        let is_later = turns[i] != i as u32 && turns[i] != CONCEPT_TURN;
                        later += is_later as usize;
                        let want = if is_later { dot - discount as f64 } else { dot };
                        assert!(
                            (g as f64 - want).abs() <= 1e-5 * want.abs().max(1e-2),
                            "{} n {n} q {q} i {i} turn {}: {g} vs {want}",
                            k.name(),
                            turns[i]
                        );
                    }
                }
                assert!(n < 257 || later > n / 10, "{later} later passages of {n} nodes");
            }
        }
        assert!(k.similarity(&[0.0; EMBEDDING_DIM], &[], 0.0, &[vec![0.0; EMBEDDING_DIM]]).is_err(), "turns missing");
    });

    kernel_test!(propagation_is_the_sparse_product, |k: &dyn Kernels| {
        let mut rng = StdRng::seed_from_u64(12);
        for n in SIZES {
            let s = spreading_for(n, n as u64, true);
            let a = random_rows(&mut rng, 3, n, 0.0, 1.0);
            let got = k.propagate(&s, 0.5, &a).unwrap();
            for q in 0..a.len() {
                for i in 0..n {
                    let want =
                        0.5 * a[q][i] as f64 + s.in_edges(i).map(|(j, c)| c as f64 * a[q][j] as f64).sum::<f64>();
                    close(got[q][i], want, &format!("{} n {n} q {q} node {i}", k.name()));
                }
            }
        }
    });

    kernel_test!(top_k_is_the_sorted_prefix, |k: &dyn Kernels| {
        let mut rng = StdRng::seed_from_u64(13);
        for n in SIZES {
            for kk in [0usize, 1, 10, 120, 1024] {
                let mut rows = random_rows(&mut rng, 2, n, -1.0, 1.0);
                // Ties, equal keys with distinct ids, negative zero and a plateau.
                if n > 10 {
                    rows[1][3] = rows[1][7];
                    rows[1][5] = -0.0;
                    rows[1][6] = 0.0;
                    for x in rows[1].iter_mut().skip(n / 2) {
                        *x = 0.25;
                    }
                }
                let got = k.top_k(&rows, kk).unwrap();
                for (q, row) in rows.iter().enumerate() {
                    let mut want: Vec<u32> = (0..n as u32).collect();
                    want.sort_by(|&a, &b| row[b as usize].total_cmp(&row[a as usize]).then(a.cmp(&b)));
                    want.truncate(kk);
                    assert_eq!(got[q], want, "{} n {n} k {kk} q {q}", k.name());
                }
            }
        }
    });

    kernel_test!(top_m_values_are_the_largest, |k: &dyn Kernels| {
        let mut rng = StdRng::seed_from_u64(14);
        for n in SIZES {
            for m in [1usize, 7, 50, 300] {
                let mut rows = random_rows(&mut rng, 2, n, 0.0, 2.0);
                if n > 4 {
                    // Many equal values at the threshold.
                    for x in rows[1].iter_mut() {
                        *x = (*x * 4.0).round() / 4.0;
                    }
                }
                let got = k.top_m_values(&rows, m).unwrap();
                for (q, row) in rows.iter().enumerate() {
                    let mut want = row.clone();
                    want.sort_by(|a, b| b.total_cmp(a));
                    want.truncate(m);
                    assert_eq!(got[q], want, "{} n {n} m {m} q {q}", k.name());
                }
            }
        }
    });

    kernel_test!(inhibition_and_sigmoid_follow_the_formula, |k: &dyn Kernels| {
        let mut rng = StdRng::seed_from_u64(15);
        for n in SIZES {
            for (m, beta) in [(50usize, 0.02f32), (7, 0.15), (3, 0.0)] {
                let c = ActivationConfig { inhibition_top_m: m, inhibition_beta: beta, ..ActivationConfig::default() };
                let rows = random_rows(&mut rng, 2, n, 0.0, 1.5);
                let got = k.inhibit_sigmoid(&rows, &c).unwrap();
                for (q, row) in rows.iter().enumerate() {
                    let mut top: Vec<f64> = row.iter().map(|&x| x as f64).collect();
                    top.sort_by(|a, b| b.total_cmp(a));
                    top.truncate(m);
                    for (i, &x) in row.iter().enumerate() {
                        let x = x as f64;
                        let pressure: f64 = top.iter().filter(|&&v| v > x).map(|v| v - x).sum();
                        let h = (x - beta as f64 * pressure).max(0.0);
                        let want = 1.0 / (1.0 + (-(c.sigmoid_gamma as f64) * (h - c.sigmoid_theta as f64)).exp());
                        close(got[q][i], want, &format!("{} n {n} m {m} q {q} node {i}", k.name()));
                    }
                }
            }
        }
    });

    kernel_test!(pagerank_is_stationary, |k: &dyn Kernels| {
        for n in [1usize, 255, 1000] {
            let (g, _) = synthetic::graph(&Shape::like_locomo(n, 5));
            let t = Transition::new(n, g.edges.iter().map(|e| (e.src, e.dst, e.weight)));
            let mut rng = StdRng::seed_from_u64(16);
            let teleports = vec![vec![0.0; n], (0..n).map(|_| rng.random_range(0.0..1.0f32)).collect()];
            let got = k.pagerank(&t, 0.85, &teleports, 150).unwrap();
            for (q, p) in got.iter().enumerate() {
                // Stationary: one more round of the textbook update (in f64) changes nothing.
                let s: f64 = teleports[q].iter().map(|&x| x as f64).sum();
                let v: Vec<f64> =
                    (0..n).map(|i| if s > 0.0 { teleports[q][i] as f64 / s } else { 1.0 / n as f64 }).collect();
                let (ptr, src, prob) = t.csr();
                let m: f64 = t.dangling().iter().map(|&i| p[i as usize] as f64).sum();
                let total: f64 = p.iter().map(|&x| x as f64).sum();
                assert!((total - 1.0).abs() < 1e-4, "{} n {n}: sums to {total}", k.name());
                for i in 0..n {
                    let pulled: f64 =
                        (ptr[i]..ptr[i + 1]).map(|e| prob[e as usize] * p[src[e as usize] as usize] as f64).sum();
                    let next = 0.15 * v[i] + 0.85 * (pulled + m * v[i]);
                    close(p[i], next, &format!("{} n {n} q {q} node {i}", k.name()));
                }
            }
        }
    });

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 24, ..Default::default() })]

        /// Any sizes, any finite values (duplicates and negatives included): the GPU selects
        /// exactly what the CPU selects.
        #[test]
        fn selections_match_the_cpu_on_arbitrary_input(
            rows in proptest::collection::vec(proptest::collection::vec(-4i32..40, 0..700), 1..4),
            k in 0usize..200,
            m in 1usize..80,
        ) {
            let Some(gpu) = gpu_kernels() else { return Ok(()) };
            let n = rows[0].len();
            let scores: Vec<Vec<f32>> = rows.iter().map(|r| (0..n).map(|i| r.get(i).copied().unwrap_or(0) as f32 / 8.0).collect()).collect();
            proptest::prop_assert_eq!(gpu.top_k(&scores, k).unwrap(), CpuKernels.top_k(&scores, k).unwrap());
            let u: Vec<Vec<f32>> = scores.iter().map(|r| r.iter().map(|x| x.abs()).collect()).collect();
            proptest::prop_assert_eq!(gpu.top_m_values(&u, m).unwrap(), CpuKernels.top_m_values(&u, m).unwrap());
            let c = ActivationConfig { inhibition_top_m: m, inhibition_beta: 0.1, ..ActivationConfig::default() };
            let (g, cpu) = (gpu.inhibit_sigmoid(&u, &c).unwrap(), CpuKernels.inhibit_sigmoid(&u, &c).unwrap());
            for (x, y) in g.iter().flatten().zip(cpu.iter().flatten()) {
                proptest::prop_assert!((x - y).abs() <= 1e-5 * y.abs().max(1e-3), "{} vs {}", x, y);
            }
        }
    }

    #[test]
    fn gpu_matches_cpu_on_every_kernel() {
        let Some(gpu) = gpu_kernels() else { return };
        let checks = parity_suite(&gpu, 17).unwrap();
        assert!(checks.len() > 30);
        for c in &checks {
            assert!(c.passed, "{c:?}");
        }
    }
}
