//! CPU-vs-GPU benchmark of the ranking step (`myelin bench`): synthetic memories with the
//! shape of real ones and the real graphs of a store, batches of queries, the CPU engine and
//! the GPU engine timed on the same inputs in one run, parity of their results, the bandwidth
//! each kernel family reaches, and the floor of one GPU round trip.
//!
//! Owns building benchmark inputs, the timing loops and the report's shape; [`real`] reads a
//! store's conversations into a workload, [`suite`] runs the whole benchmark around the loops.
//! The serving API's benchmarks live beside it: [`load`] (the client of `myelin load`) and
//! [`growth`] (`myelin write-bench`); so does [`embed`] (`myelin embed-bench`).
//! The workloads (synthetic, skeletons) are built in `workload.rs`; the unit tests are in
//! `tests.rs`.
//! Must not print: the binary prints tables and writes files.

pub mod embed;
pub mod growth;
pub mod load;
pub mod real;
pub mod suite;
mod workload;

use std::time::Instant;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::eval::percentile;
use crate::gpu::Gpu;
use crate::gpu::ranker::{RankQuery, Stage};
use crate::retrieve::engine::{Engine, rank_query};
use crate::retrieve::index::IndexConfig;
use crate::retrieve::{Ctx, GpuBridge, Memory, Mode, Query, Retrieval, RetrieveConfig};
pub use workload::{Skeleton, SkeletonGraph, Workload, from_skeleton, synthetic};

/// One (workload, batch size) measurement.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Workload name.
    pub graph: String,
    /// Graphs in the workload.
    pub graphs: usize,
    /// Nodes of its largest graph.
    pub nodes: usize,
    /// Edges in all its graphs.
    pub edges: usize,
    /// Queries per batch.
    pub batch: usize,
    /// CPU engine, ms per query: the batch's queries in parallel over every core (median of
    /// the repetitions; at most `cpu_queries` of them timed).
    pub cpu_ms: f64,
    /// GPU engine end to end (BM25 and result assembly on the host included), ms per query.
    pub gpu_ms: Option<f64>,
    /// GPU submit to readback only, ms per query.
    pub gpu_device_ms: Option<f64>,
    /// cpu_ms / gpu_ms.
    pub speedup: Option<f64>,
    /// Queries per second on the GPU, end to end.
    pub gpu_qps: Option<f64>,
    /// Queries whose GPU result equals the CPU's exactly (same episodes, same order).
    pub identical: Option<usize>,
    /// Queries whose results first differ where the two scores are tied within 1e-5
    /// (relative): f32 rounding, not a defect.
    pub tie_swaps: Option<usize>,
    /// Queries compared.
    pub compared: usize,
    /// Queries the GPU handed back to the CPU (walk not decided by the nodes read back).
    pub completed_on_cpu: usize,
}

/// One kernel family's throughput.
#[derive(Debug, Clone, Serialize)]
pub struct KernelRow {
    /// Workload name.
    pub graph: String,
    /// Nodes.
    pub nodes: usize,
    /// Queries per batch.
    pub batch: usize,
    /// The stage.
    pub stage: Stage,
    /// µs per run of the stage.
    pub us: f64,
    /// Least bytes one run moves.
    pub bytes: u64,
    /// bytes / time.
    pub gb_per_s: f64,
    /// Of the device's measured copy bandwidth.
    pub of_copy: Option<f64>,
}

/// Timing settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Batch sizes.
    pub batches: Vec<usize>,
    /// Timed repetitions (the median counts).
    pub repeat: usize,
    /// Most queries the CPU times per batch (its per-query time does not depend on more).
    pub cpu_queries: usize,
    /// Mode.
    pub mode: Mode,
}

fn opt(x: Option<impl ToString>) -> String {
    x.map_or(String::new(), |v| v.to_string())
}

/// Rows as CSV: one header from the same (name, value) list as the lines, so they cannot drift.
pub fn csv<T>(rows: &[T], fields: impl Fn(&T) -> Vec<(&'static str, String)>) -> String {
    let mut out = String::new();
    for (i, r) in rows.iter().enumerate() {
        let f = fields(r);
        if i == 0 {
            out += &f.iter().map(|(name, _)| *name).collect::<Vec<_>>().join(",");
            out.push('\n');
        }
        let quote = |v: &String| {
            if v.contains([',', '"', ' ']) { format!("\"{}\"", v.replace('"', "\"\"")) } else { v.clone() }
        };
        out += &f.iter().map(|(_, v)| quote(v)).collect::<Vec<_>>().join(",");
        out.push('\n');
    }
    out
}

impl Row {
    /// CSV columns.
    pub fn fields(&self) -> Vec<(&'static str, String)> {
        vec![
            ("graph", self.graph.clone()),
            ("graphs", self.graphs.to_string()),
            ("nodes", self.nodes.to_string()),
            ("edges", self.edges.to_string()),
            ("batch", self.batch.to_string()),
            ("cpu_ms", self.cpu_ms.to_string()),
            ("gpu_ms", opt(self.gpu_ms)),
            ("gpu_device_ms", opt(self.gpu_device_ms)),
            ("speedup", opt(self.speedup)),
            ("gpu_qps", opt(self.gpu_qps)),
            ("identical", opt(self.identical)),
            ("tie_swaps", opt(self.tie_swaps)),
            ("compared", self.compared.to_string()),
            ("completed_on_cpu", self.completed_on_cpu.to_string()),
        ]
    }
}

impl KernelRow {
    /// CSV columns.
    pub fn fields(&self) -> Vec<(&'static str, String)> {
        vec![
            ("graph", self.graph.clone()),
            ("nodes", self.nodes.to_string()),
            ("batch", self.batch.to_string()),
            ("stage", self.stage.as_str().to_string()),
            ("us", self.us.to_string()),
            ("bytes", self.bytes.to_string()),
            ("gb_per_s", self.gb_per_s.to_string()),
            ("of_copy", opt(self.of_copy)),
        ]
    }
}

/// One line of the goals table.
#[derive(Debug, Clone, Serialize)]
pub struct Goal {
    /// What is measured.
    pub goal: String,
    /// The target.
    pub target: String,
    /// What this run measured ("-" when it could not).
    pub measured: String,
}

/// The GPU goals against this run's rows (on the largest synthetic graph) and the floor
/// (round-trip p50 and p99, µs).
pub fn goals(rows: &[Row], kernels: &[KernelRow], floor: Option<(f64, f64)>) -> Vec<Goal> {
    let synthetic: Vec<&Row> = rows.iter().filter(|r| r.graph.starts_with("synthetic")).collect();
    let largest = synthetic.iter().map(|r| r.nodes).max().unwrap_or(0);
    let at_batch = |b: Option<usize>| {
        synthetic
            .iter()
            .filter(|r| r.nodes == largest && b.is_none_or(|b| r.batch == b))
            .max_by_key(|r| r.batch)
            .copied()
    };
    let (single, batched) = (at_batch(Some(1)), at_batch(None));
    let f = |x: Option<f64>, d: usize| x.map_or("-".to_string(), |v| format!("{v:.d$}"));
    let goal = |goal: String, target: &str, measured: String| Goal { goal, target: target.to_string(), measured };
    let batch = batched.map_or(0, |r| r.batch);
    let mut out = vec![
        goal(
            "GPU round trip floor (empty submit, wait, 4-byte readback)".into(),
            "-",
            floor.map_or("-".into(), |(p50, p99)| format!("p50 {p50:.1} µs, p99 {p99:.1} µs")),
        ),
        goal(
            format!("one query, {largest}-node graph, GPU end to end"),
            "≤ 0.5 ms",
            format!(
                "{} ms (device {} ms)",
                f(single.and_then(|r| r.gpu_ms), 3),
                f(single.and_then(|r| r.gpu_device_ms), 3)
            ),
        ),
        goal(
            format!("one query, {largest} nodes: GPU / multi-threaded CPU"),
            "≥ 3×",
            format!("{}×", f(single.and_then(|r| r.speedup), 1)),
        ),
        goal(
            format!("batch of {batch}, {largest} nodes: GPU / multi-threaded CPU"),
            "≥ 15×",
            format!("{}×", f(batched.and_then(|r| r.speedup), 1)),
        ),
        goal(
            format!("queries/s, batch of {batch}, {largest} nodes"),
            "≥ 20,000",
            f(batched.and_then(|r| r.gpu_qps), 0),
        ),
    ];
    for (stage, name) in [(Stage::Propagate, "propagation"), (Stage::Similarity, "dense scan")] {
        let best = kernels
            .iter()
            .filter(|k| k.stage == stage && k.nodes == largest)
            .filter_map(|k| k.of_copy)
            .reduce(f64::max);
        out.push(goal(
            format!("{name} bandwidth, {largest} nodes, of device copy bandwidth"),
            "≥ 60%",
            best.map_or("-".to_string(), |x| format!("{:.0}%", 100.0 * x)),
        ));
    }
    // Issue 7's scale goal: the cost of a question may grow at most 1.5× from the smallest
    // skeleton (a 100K-token history) to the largest (10M tokens).
    let skeletons: Vec<&Row> = rows.iter().filter(|r| r.graph.starts_with("skeleton")).collect();
    let smallest = skeletons.iter().min_by_key(|r| r.nodes);
    let biggest = skeletons.iter().max_by_key(|r| r.nodes);
    if let (Some(s), Some(l)) = (smallest, biggest)
        && l.nodes > s.nodes
    {
        let at = |graph: &str, batch: usize| skeletons.iter().find(|r| r.graph == graph && r.batch == batch);
        let mut batches: Vec<usize> = skeletons.iter().filter(|r| r.graph == l.graph).map(|r| r.batch).collect();
        batches.sort_unstable();
        batches.dedup();
        for b in batches {
            let (Some(small), Some(large)) = (at(&s.graph, b), at(&l.graph, b)) else { continue };
            let ratio = |x: Option<f64>, y: Option<f64>| x.zip(y).map(|(x, y)| y / x);
            out.push(goal(
                format!("time per question, {} / {}, batch {b}: GPU (CPU)", l.graph, s.graph),
                "≤ 1.5×",
                format!(
                    "{}× ({}×)",
                    f(ratio(small.gpu_ms, large.gpu_ms), 2),
                    f(ratio(Some(small.cpu_ms), Some(large.cpu_ms)), 1)
                ),
            ));
        }
    }
    for r in
        rows.iter().filter(|r| !r.graph.starts_with("synthetic") && !r.graph.starts_with("skeleton") && r.batch == 1)
    {
        out.push(goal(
            format!("{} ({} nodes), one query: GPU / CPU (auto keeps such graphs on the CPU)", r.graph, r.nodes),
            "auto never slower",
            format!("{}×", f(r.speedup, 2)),
        ));
    }
    out
}

/// Time per query against nodes on the synthetic graphs, CPU and GPU, at the smallest and the
/// largest batch.
pub fn series(rows: &[Row]) -> Vec<crate::eval::plot::Series> {
    let synthetic: Vec<&Row> = rows.iter().filter(|r| r.graph.starts_with("synthetic")).collect();
    let batches: Vec<usize> = [synthetic.iter().map(|r| r.batch).min(), synthetic.iter().map(|r| r.batch).max()]
        .into_iter()
        .flatten()
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut out = Vec::new();
    for b in batches {
        let points = |f: &dyn Fn(&Row) -> Option<f64>| -> Vec<(f64, f64)> {
            synthetic.iter().filter(|r| r.batch == b).filter_map(|r| f(r).map(|y| (r.nodes as f64, y))).collect()
        };
        out.push(crate::eval::plot::Series { name: format!("cpu, batch {b}"), points: points(&|r| Some(r.cpu_ms)) });
        let gpu = points(&|r| r.gpu_ms);
        if !gpu.is_empty() {
            out.push(crate::eval::plot::Series { name: format!("gpu, batch {b}"), points: gpu });
        }
    }
    out
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    percentile(&xs, 0.5)
}

/// Times the CPU and (when given: an engine over `w`'s memories) the GPU on `w` for each
/// batch size.
pub fn run(w: &Workload, gpu_engine: Option<&Engine>, s: &Settings) -> Result<Vec<Row>> {
    let cpu = Engine::on_cpu(w.memories.clone())?;
    let mut rows = Vec::new();
    for &b in &s.batches {
        if w.queries.is_empty() {
            break;
        }
        let batch: Vec<(usize, &Query)> = (0..b)
            .map(|i| {
                let (m, q) = &w.queries[i % w.queries.len()];
                (*m, q)
            })
            .collect();
        let cpu_part = &batch[..b.min(s.cpu_queries)];
        let mut cpu_times = Vec::new();
        let mut cpu_results: Vec<Retrieval> = Vec::new();
        for _ in 0..s.repeat {
            let t0 = Instant::now();
            let (r, _) = cpu.retrieve_batch(cpu_part, s.mode)?;
            cpu_times.push(t0.elapsed().as_secs_f64() * 1e3 / cpu_part.len() as f64);
            cpu_results = r;
        }
        let cpu_ms = median(cpu_times);
        let mut row = Row {
            graph: w.name.clone(),
            graphs: w.memories.len(),
            nodes: w.nodes(),
            edges: w.edges(),
            batch: b,
            cpu_ms,
            gpu_ms: None,
            gpu_device_ms: None,
            speedup: None,
            gpu_qps: None,
            identical: None,
            tie_swaps: None,
            compared: cpu_results.len(),
            completed_on_cpu: 0,
        };
        if let Some(engine) = gpu_engine {
            engine.retrieve_batch(&batch, s.mode)?; // warm-up: pipelines, buffers
            let (mut times, mut device) = (Vec::new(), Vec::new());
            let mut results = Vec::new();
            for _ in 0..s.repeat {
                let t0 = Instant::now();
                let (r, report) = engine.retrieve_batch(&batch, s.mode)?;
                times.push(t0.elapsed().as_secs_f64() * 1e3 / b as f64);
                device.push(report.gpu_us / 1e3 / b as f64);
                row.completed_on_cpu = report.completed_on_cpu;
                if let Some(e) = report.fallback {
                    return Err(crate::error::Error::Gpu(format!("{} batch {b}: fell back to the CPU: {e}", w.name)));
                }
                results = r;
            }
            let gpu_ms = median(times);
            row.gpu_ms = Some(gpu_ms);
            row.gpu_device_ms = Some(median(device));
            row.speedup = Some(cpu_ms / gpu_ms);
            row.gpu_qps = Some(1e3 / gpu_ms);
            let (identical, ties) = compare(&cpu_results, &results);
            row.identical = Some(identical);
            row.tie_swaps = Some(ties);
        }
        rows.push(row);
    }
    Ok(rows)
}

/// (identical, tied): results with the same episodes in the same order, and results that first
/// differ at a rank where the CPU's and the GPU's scores are within 1e-5 of each other.
pub fn compare(cpu: &[Retrieval], gpu: &[Retrieval]) -> (usize, usize) {
    let mut identical = 0;
    let mut tied = 0;
    for (c, g) in cpu.iter().zip(gpu) {
        match c.hits.iter().zip(&g.hits).find(|(x, y)| x.episode != y.episode) {
            None if c.hits.len() == g.hits.len() => identical += 1,
            None => {}
            Some((x, y)) => {
                let (a, b) = (x.signals.score, y.signals.score);
                if (a - b).abs() <= 1e-5 * a.abs().max(b.abs()).max(1e-3) {
                    tied += 1;
                }
            }
        }
    }
    (identical, tied)
}

/// Times each stage of the GPU ranking step on `engine` (over `w`'s memories) with `batch`
/// queries.
pub fn kernels(
    w: &Workload,
    engine: &Engine,
    batch: usize,
    reps: usize,
    copy_gb_s: Option<f64>,
) -> Result<Vec<KernelRow>> {
    let Some(settings) = w.memories.first().and_then(|m| m.config().rank_settings(Mode::Synapse)) else {
        return Ok(Vec::new());
    };
    let lexical: Vec<_> = (0..batch)
        .map(|i| {
            let (m, q) = &w.queries[i % w.queries.len()];
            GpuBridge(w.memories[*m].cx()).lexical(q)
        })
        .collect();
    let queries: Vec<RankQuery> = (0..batch)
        .map(|i| {
            let (m, q) = &w.queries[i % w.queries.len()];
            rank_query(*m, q, &lexical[i])
        })
        .collect();
    let Some(ranker) = engine.ranker() else { return Ok(Vec::new()) };
    Stage::ALL
        .iter()
        .map(|&stage| {
            let (us, bytes) = ranker.time_stage(&queries, &settings, stage, reps)?;
            let gb_per_s = bytes as f64 / us / 1e3;
            Ok(KernelRow {
                graph: w.name.clone(),
                nodes: w.nodes(),
                batch,
                stage,
                us,
                bytes,
                gb_per_s,
                of_copy: copy_gb_s.map(|c| gb_per_s / c),
            })
        })
        .collect()
}

/// Device-to-device copy bandwidth in GB/s (bytes read plus bytes written), over `mib` MiB.
pub fn copy_bandwidth(gpu: &Gpu, mib: u64) -> Result<f64> {
    let size = (mib << 20).min(gpu.max_binding() / 2 * 2).max(1 << 20) / 2;
    let a = gpu.storage("copy a", size)?;
    let b = gpu.storage("copy b", size)?;
    let reps = 20;
    let run = |n: usize| -> Result<f64> {
        let scopes = gpu.scopes();
        let t0 = Instant::now();
        let mut enc = gpu.encoder();
        for _ in 0..n {
            enc.copy_buffer_to_buffer(&a, 0, &b, 0, size);
        }
        gpu.finish(enc, &[(&b, 4)], scopes, None)?;
        Ok(t0.elapsed().as_secs_f64())
    };
    run(2)?;
    let t = run(reps)?;
    Ok(2.0 * size as f64 * reps as f64 / t / 1e9)
}

/// p50 and p99 of `samples`.
pub fn percentiles(samples: &[f64]) -> (f64, f64) {
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    (percentile(&s, 0.5), percentile(&s, 0.99))
}

/// One row of [`index_bench`]: the scan of every node's f32 embedding, or the dense index.
#[derive(Debug, Clone, Serialize)]
pub struct IndexRow {
    /// Whether the dense index served the queries.
    pub indexed: bool,
    /// Share of the true dense anchors (top `anchor_k` by the scan) it found.
    pub anchor_recall: f64,
    /// Queries whose result is the scan's exactly (same episodes in the same order).
    pub same_result: f64,
    /// Share of the scan's first 10 episodes in the first 10 returned.
    pub overlap_10: f64,
    /// Retrieval time per query, one at a time, ms (query embedding excluded).
    pub latency_ms: crate::eval::Latency,
}

/// Times `mode` on `memory` with a scan and with its dense index, one query at a time (a large
/// memory splits each query's passes over its nodes across threads, `crate::parallel`), every
/// query once after one untimed pass; compares each indexed result with
/// the scan's (the memory's settings with the index turned off).
pub fn index_bench(memory: &Memory, queries: &[Query], mode: Mode) -> Result<Vec<IndexRow>> {
    let indexed = memory.cx();
    if indexed.dense_index().is_none() {
        return Err(Error::InvalidArgument(format!(
            "'{}' has {} nodes: no dense index with these settings (retrieve.index)",
            memory.conversation(),
            memory.graph().node_count()
        )));
    }
    let run = |cx: Ctx| -> Result<(Vec<Retrieval>, Vec<f64>)> {
        for q in queries {
            cx.retrieve(q, mode)?;
        }
        let mut results = Vec::with_capacity(queries.len());
        let mut millis = Vec::with_capacity(queries.len());
        for q in queries {
            let t0 = Instant::now();
            results.push(cx.retrieve(q, mode)?);
            millis.push(t0.elapsed().as_secs_f64() * 1e3);
        }
        Ok((results, millis))
    };
    let settings = indexed.config;
    let scanning =
        RetrieveConfig { index: IndexConfig { enabled: false, ..settings.index.clone() }, ..settings.clone() };
    let (scan, mut millis) = run(memory.with_settings(&scanning)?)?;
    let mut rows = vec![IndexRow {
        indexed: false,
        anchor_recall: 1.0,
        same_result: 1.0,
        overlap_10: 1.0,
        latency_ms: crate::eval::latency(&mut millis),
    }];
    let refs: Vec<(usize, &Query)> = queries.iter().map(|q| (0, q)).collect();
    let (anchor_recall, _) = crate::eval::dense_anchor_recall(&[memory], &refs);
    let (results, mut millis) = run(indexed)?;
    let episodes = |r: &Retrieval| r.hits.iter().map(|h| h.episode).collect::<Vec<u32>>();
    let same = results.iter().zip(&scan).filter(|(r, s)| episodes(r) == episodes(s)).count();
    let overlap: usize = results
        .iter()
        .zip(&scan)
        .map(|(r, s)| {
            let top: Vec<u32> = r.hits.iter().take(10).map(|h| h.episode).collect();
            s.hits.iter().take(10).filter(|h| top.contains(&h.episode)).count()
        })
        .sum();
    let wanted_10: usize = scan.iter().map(|s| s.hits.len().min(10)).sum();
    rows.push(IndexRow {
        indexed: true,
        anchor_recall,
        same_result: same as f64 / queries.len().max(1) as f64,
        overlap_10: if wanted_10 == 0 { 1.0 } else { overlap as f64 / wanted_10 as f64 },
        latency_ms: crate::eval::latency(&mut millis),
    });
    Ok(rows)
}

#[cfg(test)]
mod tests;
