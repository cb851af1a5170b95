//! CPU-vs-GPU benchmark of the ranking step (`myelin bench`): synthetic memories with the
//! shape of real ones and the real graphs of a store, batches of queries, the CPU engine and
//! the GPU engine timed on the same inputs in one run, parity of their results, the bandwidth
//! each kernel family reaches, and the floor of one GPU round trip.
//!
//! Owns building benchmark inputs, the timing loops and the report's shape; [`real`] reads a
//! store's conversations into a workload, [`suite`] runs the whole benchmark around the loops.
//! The serving API's benchmarks live beside it: [`load`] (the client of `myelin load`) and
//! [`growth`] (`myelin write-bench`); so does [`embed`] (`myelin embed-bench`).
//! Must not print: the binary prints tables and writes files.

pub mod embed;
pub mod growth;
pub mod load;
pub mod real;
pub mod suite;

use std::time::Instant;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::embed::EMBEDDING_DIM;
use crate::error::{Error, Result};
use crate::eval::percentile;
use crate::gpu::Gpu;
use crate::gpu::ranker::{RankQuery, Stage};
use crate::graph::synthetic::{self, Shape};
use crate::graph::{Graph, NodeRef};
use crate::retrieve::bm25::Analyzer;
use crate::retrieve::engine::{Engine, rank_query};
use crate::retrieve::{Memory, Mode, Query, Retrieval, RetrieveConfig};
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
    let cpu = Engine::on_cpu(w.memories.clone());
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
                    return Err(crate::Error::Gpu(format!("{} batch {b}: fell back to the CPU: {e}", w.name)));
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
    let Some(settings) = w.memories.first().and_then(|m| m.rank_settings(Mode::Synapse)) else { return Ok(Vec::new()) };
    let lexical: Vec<_> = (0..batch)
        .map(|i| {
            let (m, q) = &w.queries[i % w.queries.len()];
            w.memories[*m].lexical(q)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_workloads_run_and_the_cpu_agrees_with_itself() {
        let w = synthetic(600, 8, 1, &RetrieveConfig::default()).unwrap();
        assert_eq!(w.nodes(), 600);
        assert_eq!(w.queries.len(), 8);
        let settings = Settings { batches: vec![1, 8], repeat: 1, cpu_queries: 8, mode: Mode::Synapse };
        let gpu = crate::gpu::test_gpu().map(|g| w.on_gpu(&g).unwrap());
        let rows = run(&w, gpu.as_ref(), &settings).unwrap();
        assert_eq!(rows.len(), 2);
        for r in &rows {
            assert!(r.cpu_ms > 0.0);
            if let Some(identical) = r.identical {
                assert_eq!(identical, r.compared, "batch {}: GPU and CPU differ", r.batch);
            }
        }
        // Queries near an episode find it: lexical and dense evidence point at it.
        let memory = &w.memories[0];
        let found = w
            .queries
            .iter()
            .filter(|(_, q)| memory.retrieve(q, Mode::Synapse).is_ok_and(|r| !r.hits.is_empty()))
            .count();
        assert_eq!(found, 8);
    }

    #[test]
    fn goals_give_the_growth_from_the_smallest_skeleton_to_the_largest() {
        let row = |graph: &str, nodes: usize, batch: usize, cpu_ms: f64, gpu_ms: f64| Row {
            graph: graph.into(),
            graphs: 1,
            nodes,
            edges: 5 * nodes,
            batch,
            cpu_ms,
            gpu_ms: Some(gpu_ms),
            gpu_device_ms: Some(gpu_ms),
            speedup: Some(cpu_ms / gpu_ms),
            gpu_qps: Some(1000.0 / gpu_ms),
            identical: Some(batch),
            tie_swaps: Some(0),
            compared: batch,
            completed_on_cpu: 0,
        };
        let rows = [
            row("skeleton big", 50_000, 1, 6.0, 0.3),
            row("skeleton small", 1_000, 1, 0.1, 0.2),
            row("skeleton big", 50_000, 16, 3.0, 0.05),
            row("skeleton small", 1_000, 16, 0.05, 0.04),
            row("skeleton middle", 7_000, 1, 0.7, 0.25),
        ];
        let goals = goals(&rows, &[], None);
        let growth: Vec<&Goal> = goals.iter().filter(|g| g.goal.starts_with("time per question")).collect();
        assert_eq!(growth.len(), 2, "{goals:?}");
        assert_eq!(growth[0].goal, "time per question, skeleton big / skeleton small, batch 1: GPU (CPU)");
        assert_eq!(growth[0].measured, "1.50× (60.0×)");
        assert_eq!(growth[1].measured, "1.25× (60.0×)");
        // Skeletons are not counted as real graphs that `auto` keeps on the CPU.
        assert!(!goals.iter().any(|g| g.goal.contains("auto keeps")));
        // One skeleton size alone: no growth to report.
        assert!(!super::goals(&rows[..1], &[], None).iter().any(|g| g.goal.starts_with("time per question")));
    }

    #[test]
    fn a_skeleton_keeps_graph_and_turns_and_leaves_text_and_embeddings_out() {
        let config = RetrieveConfig::default();
        let w = synthetic(400, 4, 2, &config).unwrap();
        let real = &w.memories[0];
        let mut skeleton = SkeletonGraph::of(real);
        assert_eq!(skeleton.graph.edges, real.graph().edges);
        assert!(skeleton.graph.concepts.iter().all(|c| c.label.is_empty() && c.embedding.is_empty()));
        assert!(!skeleton.graph.concepts.is_empty());
        // Episode 1 becomes a second passage of episode 0's turn.
        skeleton.turn_ids[1] = crate::conversation::passage_id(&skeleton.turn_ids[0], 1);
        let file = serde_json::to_vec(&Skeleton { name: "s".into(), graphs: vec![skeleton.clone()] }).unwrap();
        let back: Skeleton = serde_json::from_slice(&file).unwrap();
        let dressed = from_skeleton(back, 6, 3, &config).unwrap();
        assert_eq!(dressed.name, "skeleton s (1 graphs)");
        assert_eq!(dressed.queries.len(), 6);
        let m = &dressed.memories[0];
        assert_eq!(m.graph().nodes, real.graph().nodes);
        assert_eq!(m.graph().edges, real.graph().edges);
        assert_eq!(m.graph().pagerank, real.graph().pagerank);
        assert_eq!((m.turns()[0], m.turns()[1], m.turns()[2]), (0, 0, 2));
        // New embeddings, of unit length; every query finds something.
        let e = &m.episodes()[0].embedding;
        assert_ne!(e, &real.episodes()[0].embedding);
        approx::assert_relative_eq!(e.iter().map(|x| x * x).sum::<f32>(), 1.0, max_relative = 1e-5);
        assert!(dressed.queries.iter().all(|(_, q)| m.retrieve(q, Mode::Synapse).is_ok_and(|r| !r.hits.is_empty())));

        // A skeleton whose turns do not match its episodes is refused, by name.
        skeleton.turn_ids.pop();
        let err = from_skeleton(Skeleton { name: "s".into(), graphs: vec![skeleton] }, 1, 3, &config).err().unwrap();
        assert!(err.to_string().contains("turn ids for"), "{err}");
        let empty = from_skeleton(Skeleton { name: "e".into(), graphs: vec![] }, 1, 3, &config).err().unwrap();
        assert!(empty.to_string().contains("'e' has no graph"), "{empty}");
    }
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
/// the scan's. The memory's index setting is restored afterwards.
pub fn index_bench(memory: &mut Memory, queries: &[Query], mode: Mode) -> Result<Vec<IndexRow>> {
    if memory.dense_index().is_none() {
        return Err(Error::InvalidArgument(format!(
            "'{}' has {} nodes: no dense index with these settings (retrieve.index)",
            memory.conversation(),
            memory.graph().node_count()
        )));
    }
    let run = |memory: &Memory| -> Result<(Vec<Retrieval>, Vec<f64>)> {
        for q in queries {
            memory.retrieve(q, mode)?;
        }
        let mut results = Vec::with_capacity(queries.len());
        let mut millis = Vec::with_capacity(queries.len());
        for q in queries {
            let t0 = Instant::now();
            results.push(memory.retrieve(q, mode)?);
            millis.push(t0.elapsed().as_secs_f64() * 1e3);
        }
        Ok((results, millis))
    };
    memory.set_index_enabled(false);
    let (scan, mut millis) = run(memory)?;
    let mut rows = vec![IndexRow {
        indexed: false,
        anchor_recall: 1.0,
        same_result: 1.0,
        overlap_10: 1.0,
        latency_ms: crate::eval::latency(&mut millis),
    }];
    memory.set_index_enabled(true);
    let refs: Vec<(usize, &Query)> = queries.iter().map(|q| (0, q)).collect();
    let (anchor_recall, _) = crate::eval::dense_anchor_recall(std::slice::from_ref(memory), &refs);
    let (results, mut millis) = run(memory)?;
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
