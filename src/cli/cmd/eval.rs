//! `myelin eval`: ingest what the data set needs, run every question through the modes, show
//! the report and write the files asked for (JSON, SVG plot, per-question lines).
//!
//! Owns the command's steps and its files. Must not compute a figure (`myelin::eval` does) nor
//! format a table (render does).

use myelin::store::Location;
use std::time::Instant;

use anyhow::Context;
use myelin::config::Config;
use myelin::conversation::SourceFormat;
use myelin::embed::Embedder;
use myelin::eval::peer::PeerRuns;
use myelin::eval::{EvalOptions, evaluate};
use myelin::pipeline::load_embedder;
use myelin::prepare::{Inputs, prepare};
use myelin::retrieve::Mode;
use myelin::store::Store;

use crate::cli::Globals;
use crate::cli::flags::EvalArgs;
use crate::cli::render;

pub fn run(args: EvalArgs, mut config: Config, g: &Globals) -> anyhow::Result<()> {
    args.tuning.apply(&mut config)?;
    let modes = match (&args.modes[..], args.tuning.mode) {
        ([], None) => Mode::ALL.to_vec(),
        ([], Some(mode)) => vec![mode],
        (modes, _) => modes.to_vec(),
    };
    let mut peers = PeerRuns::default();
    for path in &args.peer {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        peers.runs.extend(PeerRuns::parse(path, &text)?.runs);
    }
    let options = EvalOptions {
        modes,
        calibrate: args.calibrate,
        max_false_refusal: args.max_false_refusal,
        per_question: args.per_question.is_some(),
        peers,
    };
    g.runtime.block_on(eval(&g.store, &config, &args, &options, g.quiet))
}

async fn eval(
    store_dir: &Location,
    config: &Config,
    args: &EvalArgs,
    options: &EvalOptions,
    quiet: bool,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let expected = if args.dataset == "locomo" { SourceFormat::Locomo } else { SourceFormat::Beam };
    let embedder = load_embedder(config)?;
    let inputs =
        Inputs { paths: std::slice::from_ref(&args.path), only: &args.conversations, expected: Some(expected) };
    let ids = prepare_noting(store_dir, inputs, &embedder, config, quiet).await?;
    let store = Store::open(store_dir).await?;
    let progress = render::progress_bar(quiet, "questions")?;
    let report = evaluate(&store, &args.dataset, &ids, &embedder, config, options, &progress).await?;
    render::eval_notes(&report);
    render::eval_report(&report);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.plot {
        let svg = render::eval_plot(&report).map_err(|e| anyhow::anyhow!("drawing {}: {e}", path.display()))?;
        std::fs::write(path, svg).with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.gate_plot {
        let svg = render::eval_gate_plot(&report).map_err(|e| anyhow::anyhow!("drawing {}: {e}", path.display()))?;
        std::fs::write(path, svg).with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.per_question {
        let mut lines = String::new();
        for q in &report.per_question {
            lines.push_str(&serde_json::to_string(q)?);
            lines.push('\n');
        }
        std::fs::write(path, lines).with_context(|| format!("writing {}", path.display()))?;
    }
    eprintln!("evaluated in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// [`prepare`]s the inputs, a progress bar counting the turns ingested and a note on stderr
/// for each step that writes the store (also `myelin train-gnn`'s).
pub async fn prepare_noting(
    store_dir: &Location,
    inputs: Inputs<'_>,
    embedder: &Embedder,
    config: &Config,
    quiet: bool,
) -> anyhow::Result<Vec<String>> {
    let progress = render::progress_bar(quiet, "turns")?;
    let ids =
        prepare(store_dir, inputs, embedder, config, &progress, |step| render::prepare_step(store_dir, step)).await?;
    Ok(ids)
}
