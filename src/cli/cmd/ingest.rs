//! `myelin ingest`: read the inputs, embed and store them, show the summary.
//!
//! Owns the command's steps and the progress bar of an ingest (also `myelin demo`'s). Must not
//! read formats or write the store itself (`myelin::ingest` does) nor format the summary.

use std::time::Instant;

use myelin::config::Config;
use myelin::pipeline::load_embedder;
use myelin::pipeline::{IngestSummary, LoadedInput, ingest_loaded};
use myelin::store::Location;

use crate::cli::Globals;
use crate::cli::flags::IngestArgs;
use crate::cli::render;

pub fn run(args: IngestArgs, mut config: Config, g: &Globals) -> anyhow::Result<()> {
    args.tuning.apply(&mut config);
    let started = Instant::now();
    let input = LoadedInput::read(&args.paths, &config.ingest)?;
    let summary = g.runtime.block_on(ingest(&g.store, input, &config, g.quiet, started))?;
    render::ingest(&summary, args.json)
}

/// Loads the model and ingests `input` into `store`, a progress bar counting its turns;
/// `started` is when reading the input began.
pub async fn ingest(
    store: &Location,
    input: LoadedInput,
    config: &Config,
    quiet: bool,
    started: Instant,
) -> anyhow::Result<IngestSummary> {
    let embedder = load_embedder(config)?;
    let progress = render::progress_bar(quiet, "turns")?;
    let summary = ingest_loaded(store, input, &embedder, config, &progress, started)
        .await
        .map_err(|e| myelin::Error::ingest(store.to_path_buf(), e))?;
    Ok(summary)
}
