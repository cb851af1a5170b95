//! The dense index's bounds pass, the part of a large memory's query that reads every node:
//! a memory of `$MYELIN_BENCH_NODES` random unit embeddings (default 58,878, the node count of
//! a 10M-token BEAM history), compared with the f32 scan it replaces.
//!
//! - `index-<nodes>/scan`: every node's exact cosine (`score::dots`, 4 bytes a value);
//! - `index-<nodes>/<kernel>/<batch>`: `DenseIndex::bounds_on` for a batch of queries in one
//!   pass over the codes (1 byte a value), per kernel this CPU runs.
//!
//! Throughput is in queries, so criterion's rates compare per query across batch sizes.
//! Run: `cargo bench --bench index`.

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use myelin::embed::EMBEDDING_DIM;
use myelin::graph::synthetic::unit_embeddings;
use myelin::retrieve::index::{DenseIndex, Kernel};
use myelin::score::dots;
use rand::SeedableRng;
use rand::rngs::StdRng;

fn benches(c: &mut Criterion) {
    let nodes = std::env::var("MYELIN_BENCH_NODES").ok().and_then(|v| v.parse().ok()).unwrap_or(58_878);
    let mut rng = StdRng::seed_from_u64(1);
    let embeddings = unit_embeddings(nodes, &mut rng);
    let queries = unit_embeddings(16, &mut rng);
    let queries: Vec<&[f32]> = queries.chunks_exact(EMBEDDING_DIM).collect();
    let index = DenseIndex::build(&embeddings);
    let mut group = c.benchmark_group(format!("index-{nodes}"));
    group.sample_size(30).measurement_time(Duration::from_secs(4));
    group.throughput(Throughput::Elements(1));
    group.bench_function("scan", |b| b.iter(|| dots(&embeddings, queries[0])));
    for kernel in Kernel::available() {
        for batch in [1, 4, 16] {
            group.throughput(Throughput::Elements(batch as u64));
            group.bench_function(BenchmarkId::new(format!("{kernel:?}").to_lowercase(), batch), |b| {
                b.iter(|| index.bounds_on(kernel, &queries[..batch]))
            });
        }
    }
    group.finish();
}

criterion_group!(index, benches);
criterion_main!(index);
