//! `myelin embed-bench`: time the embedder on a file of sentences; the fastest full pass
//! counts.
//!
//! Owns reading the sentences and the timing loop. Must not format the result (render does).

use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use myelin::config::Config;
use myelin::embed::{EMBEDDING_DIM, Embedder};

use crate::cli::Globals;
use crate::cli::flags::EmbedBenchArgs;
use crate::cli::render;

pub fn run(args: EmbedBenchArgs, mut config: Config, _g: &Globals) -> anyhow::Result<()> {
    if let Some(b) = args.batch_size {
        config.embed.batch_size = b;
    }
    embed_bench(&args.sentences, &config, args.repeat.max(1), args.json)
}

fn embed_bench(path: &Path, config: &Config, repeat: usize, json: bool) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let sentences: Vec<&str> = text.lines().collect();
    anyhow::ensure!(!sentences.is_empty(), "{}: no sentences", path.display());
    let embedder = Embedder::load(&config.embed)?;
    // Warm-up on the first batch: page in the weights, spin up the thread pool.
    embedder.embed(&sentences[..sentences.len().min(config.embed.batch_size)])?;
    let mut best = f64::INFINITY;
    for _ in 0..repeat {
        let t0 = Instant::now();
        let out = embedder.embed(&sentences)?;
        best = best.min(t0.elapsed().as_secs_f64());
        anyhow::ensure!(out.len() == sentences.len() * EMBEDDING_DIM, "embedder returned a wrong size");
    }
    render::embed_bench(sentences.len(), config.embed.batch_size, embedder.threads(), best, json);
    Ok(())
}
