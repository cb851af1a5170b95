//! `myelin index-bench`: the dense index of one stored conversation against a scan of every
//! node, one query at a time.
//!
//! Owns loading the memory and embedding the questions. Must not measure anything itself
//! (`myelin::bench::index_bench` does) nor format the table (render does).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use myelin::config::Config;
use myelin::embed::EMBEDDING_DIM;
use myelin::pipeline::load_embedder;
use myelin::retrieve::bm25::Analyzer;
use myelin::retrieve::{Mode, Query};
use myelin::store::{Location, Store};

use crate::cli::Globals;
use crate::cli::flags::IndexBenchArgs;
use crate::cli::render::{self, IndexBench};

pub fn run(args: IndexBenchArgs, mut config: Config, g: &Globals) -> anyhow::Result<()> {
    args.tuning.apply(&mut config)?;
    let mode = config.retrieve.mode;
    anyhow::ensure!(mode.is_synapse(), "--mode {mode}: the dense index serves the synapse modes only");
    g.runtime.block_on(index_bench(&g.store, &config, &args.conversation, &args.questions, mode, args.json.as_deref()))
}

async fn index_bench(
    store_dir: &Location,
    config: &Config,
    conversation: &str,
    sources: &[PathBuf],
    mode: Mode,
    json: Option<&Path>,
) -> anyhow::Result<()> {
    let store = Store::open(store_dir).await?;
    let t0 = Instant::now();
    let memory = myelin::pipeline::stored_memory(&store, conversation, config).await?;
    let load_s = t0.elapsed().as_secs_f64();
    let t0 = Instant::now();
    let index_bytes = memory.dense_index().map_or(0, |i| i.bytes());
    let build_s = t0.elapsed().as_secs_f64();
    let mut texts = Vec::new();
    for path in sources {
        let loaded = myelin::ingest::load_path(path, &config.ingest.load_options())
            .with_context(|| format!("reading questions from {}", path.display()))?;
        texts.extend(loaded.conversations.into_iter().flat_map(|c| c.questions).map(|q| q.text));
    }
    anyhow::ensure!(
        !texts.is_empty(),
        "no questions in {}",
        sources.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
    );
    let embedder = load_embedder(config)?;
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let vectors = embedder.embed(&refs)?;
    let mut analyzer = Analyzer::new()?;
    let queries = texts
        .iter()
        .zip(vectors.chunks_exact(EMBEDDING_DIM))
        .map(|(t, v)| Query::new(&mut analyzer, t, v.to_vec()))
        .collect::<Result<Vec<_>, _>>()?;
    let rows = myelin::bench::index_bench(&memory, &queries, mode)?;
    let report = IndexBench {
        conversation,
        memory: &memory,
        load_s,
        index_bytes,
        build_s,
        questions: queries.len(),
        mode,
        rows: &rows,
    };
    render::index_bench(&report);
    if let Some(path) = json {
        std::fs::write(path, render::index_bench_json(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
