//! The kernel families and the whole ranking step, CPU engine against GPU, on a synthetic graph
//! with the shape of a real one (`myelin::bench::synthetic`, `$MYELIN_BENCH_NODES` nodes,
//! default 30,000) and a batch of `$MYELIN_BENCH_BATCH` queries (default 64).
//!
//! - `rank/<backend>/<batch>`: `Engine::retrieve_batch` (GPU: graphs resident, one submit);
//! - `kernel/cpu/<stage>`: the CPU twin of a stage over the batch (rayon over queries);
//! - `kernel/gpu/<stage>`: the stage encoded `iters` times into one submit.
//!
//! Without a GPU adapter only the CPU benches run. Timings mean something only on a real GPU.
//! Run: `cargo bench --bench gpu` (`scripts/bench-cpu-vs-gpu.sh` gives the tables and sizes).

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use myelin::activation::{ActivationConfig, Spreading};
use myelin::bench::synthetic;
use myelin::embed::EMBEDDING_DIM;
use myelin::gpu::Gpu;
use myelin::gpu::kernels::{CpuKernels, Kernels};
use myelin::gpu::ranker::{RankQuery, Stage};
use myelin::retrieve::engine::Engine;
use myelin::retrieve::{GpuBridge, Mode, Query, RetrieveConfig};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn benches(c: &mut Criterion) {
    let nodes = env("MYELIN_BENCH_NODES", 30_000);
    let batch = env("MYELIN_BENCH_BATCH", 64);
    let config = RetrieveConfig::default();
    let w = synthetic(nodes, batch, 7, &config).expect("synthetic workload");
    let memory = &w.memories[0];
    let queries: Vec<(usize, &Query)> = w.queries.iter().map(|(m, q)| (*m, q)).collect();
    let gpu = Gpu::new().map_err(|e| eprintln!("GPU benches skipped: {e}")).ok();

    let mut group = c.benchmark_group(format!("rank-{nodes}"));
    group.sample_size(10).measurement_time(Duration::from_secs(5));
    let cpu = Engine::on_cpu(w.memories.clone()).expect("cpu engine");
    for b in [1, batch] {
        group.bench_with_input(BenchmarkId::new("cpu", b), &b, |bench, &b| {
            bench.iter(|| cpu.retrieve_batch(&queries[..b], Mode::Synapse).expect("cpu"))
        });
    }
    if let Some(g) = &gpu {
        let engine = Engine::on_gpu(w.memories.clone(), g.clone(), "bench".into()).expect("upload");
        for b in [1, batch] {
            group.bench_with_input(BenchmarkId::new("gpu", b), &b, |bench, &b| {
                bench.iter(|| engine.retrieve_batch(&queries[..b], Mode::Synapse).expect("gpu"))
            });
        }
    }
    group.finish();

    let mut group = c.benchmark_group(format!("kernel-{nodes}x{batch}"));
    group.sample_size(10).measurement_time(Duration::from_secs(5));
    let graph = memory.graph();
    let spreading = Spreading::new(graph, &ActivationConfig::default());
    let a: Vec<Vec<f32>> =
        (0..batch).map(|q| (0..nodes).map(|i| ((i * 7 + q) % 101) as f32 / 101.0).collect()).collect();
    let embeddings: Vec<f32> = GpuBridge(memory.cx()).input().embeddings.to_vec();
    let vectors: Vec<Vec<f32>> = w.queries.iter().map(|(_, q)| q.embedding.clone()).collect();
    let cpu_k = CpuKernels;
    let (turns, discount) = (GpuBridge(memory.cx()).input().turns, memory.config().passage_discount);
    group.bench_function("cpu/similarity", |b| {
        b.iter(|| cpu_k.similarity(&embeddings, turns, discount, &vectors).expect("cpu"))
    });
    group.bench_function("cpu/propagate", |b| b.iter(|| cpu_k.propagate(&spreading, 0.5, &a).expect("cpu")));
    group.bench_function("cpu/inhibit+sigmoid", |b| {
        b.iter(|| cpu_k.inhibit_sigmoid(&a, &ActivationConfig::default()).expect("cpu"))
    });
    group.bench_function("cpu/top-k", |b| b.iter(|| cpu_k.top_k(&a, 120).expect("cpu")));
    if let Some(g) = &gpu {
        let engine = Engine::on_gpu(w.memories.clone(), g.clone(), "bench".into()).expect("upload");
        let settings = memory.config().rank_settings(Mode::Synapse).expect("synapse");
        let lexical: Vec<_> = w.queries.iter().map(|(_, q)| GpuBridge(memory.cx()).lexical(q)).collect();
        let rank_queries: Vec<RankQuery> = w
            .queries
            .iter()
            .zip(&lexical)
            .map(|((_, q), l)| RankQuery {
                graph: 0,
                embedding: &q.embedding,
                lexical: &l.entries,
                bm25_anchors: &l.anchors,
            })
            .collect();
        assert_eq!(rank_queries[0].embedding.len(), EMBEDDING_DIM);
        let ranker = engine.ranker().expect("gpu engine");
        for stage in Stage::ALL {
            group.bench_function(format!("gpu/{}", stage.as_str()), |b| {
                b.iter_custom(|iters| {
                    let (us, _) = ranker.time_stage(&rank_queries, &settings, stage, iters as usize).expect("gpu");
                    Duration::from_secs_f64(us * iters as f64 / 1e6)
                })
            });
        }
    }
    group.finish();
}

criterion_group!(gpu_benches, benches);
criterion_main!(gpu_benches);
