//! `myelin embed-bench`: time the embedder on files of sentences, one at a time and in
//! batches, against the machine's peak matrix-product rate (`myelin::bench::embed`).
//!
//! Owns reading the sentences. Must not time (the library does) nor format the result (render
//! does).

use std::path::Path;

use anyhow::Context;
use myelin::bench::embed;
use myelin::config::Config;
use myelin::embed::Embedder;
use myelin::gpu::Backend;
use myelin::pipeline::load_embedder;

use crate::cli::Globals;
use crate::cli::flags::EmbedBenchArgs;
use crate::cli::render;

pub fn run(args: EmbedBenchArgs, mut config: Config, _g: &Globals) -> anyhow::Result<()> {
    if let Some(b) = args.batch_size {
        config.embed.batch_size = b;
    }
    let read = |path: &Path| -> anyhow::Result<String> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        anyhow::ensure!(text.lines().next().is_some(), "{}: no sentences", path.display());
        Ok(text)
    };
    let text = read(&args.sentences)?;
    let sentences: Vec<&str> = text.lines().collect();
    let queries_text = args.queries.as_deref().map(read).transpose()?;
    let queries: Vec<&str> = queries_text.as_deref().map_or(sentences.clone(), |t| t.lines().collect());
    let queries = &queries[..queries.len().min(args.one)];
    let embedder = Embedder::load(&config.embed)?;
    // The GPU's forward beside the CPU's, on the same texts in the same run: every call there.
    let gpu = match args.backend {
        Backend::Cpu => None,
        backend => {
            config.gpu.backend = backend;
            config.gpu.embed_min_texts = 1;
            let e = load_embedder(&config)?;
            e.accelerator().is_some().then_some(e)
        }
    };
    let mut runs = Vec::new();
    for e in std::iter::once(&embedder).chain(&gpu) {
        if !queries.is_empty() {
            runs.push(embed::one_at_a_time(e, queries, args.repeat)?);
        }
        runs.push(embed::batched(e, &sentences, config.embed.batch_size, args.repeat)?);
    }
    let peak = embed::peak_gflops(embedder.threads());
    render::embed_bench(&runs, peak, args.gpu_peak_gflops, args.json);
    Ok(())
}
