//! `myelin eval`: ingest what the data set needs, run every question through the modes, show
//! the report and write the files asked for (JSON, SVG plot, per-question lines); with
//! `--shard I/N`, only that shard's conversations of a store made ready before, its part
//! written for `myelin eval-merge`; with `--prepare-only`, only the store made ready.
//!
//! Owns the command's steps and its files (also `eval-merge`'s: [`write_report`]). Must not
//! compute a figure (`myelin::eval` does) nor format a table (render does).

use std::time::Instant;

use anyhow::Context;
use myelin::config::Config;
use myelin::conversation::SourceFormat;
use myelin::embed::Embedder;
use myelin::eval::peer::PeerRuns;
use myelin::eval::shard::{Part, Shard, selection};
use myelin::eval::{EvalOptions, Report, evaluate, measure};
use myelin::pipeline::load_embedder;
use myelin::prepare::{Inputs, prepare, prepared};
use myelin::retrieve::Mode;
use myelin::store::{Location, Store};

use crate::cli::Globals;
use crate::cli::flags::{EvalArgs, ReportFiles};
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
        per_question: args.files.per_question.is_some(),
        peers,
    };
    match args.shard {
        Some(shard) => g.runtime.block_on(eval_shard(shard, &g.store, &config, &args, &options, g.quiet)),
        None => g.runtime.block_on(eval(&g.store, &config, &args, &options, g.quiet)),
    }
}

/// The conversations a run is over, as the flags name them.
fn inputs(args: &EvalArgs) -> Inputs<'_> {
    let expected = if args.dataset == "locomo" { SourceFormat::Locomo } else { SourceFormat::Beam };
    Inputs { paths: std::slice::from_ref(&args.path), only: &args.conversations, expected: Some(expected) }
}

async fn eval(
    store_dir: &Location,
    config: &Config,
    args: &EvalArgs,
    options: &EvalOptions,
    quiet: bool,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let embedder = load_embedder(config)?;
    let ids = prepare_noting(store_dir, inputs(args), &embedder, config, quiet).await?;
    if args.prepare_only {
        eprintln!("the store is ready for the {} conversations of this run", ids.len());
        return Ok(());
    }
    let store = Store::open(store_dir).await?;
    let progress = render::progress_bar(quiet, "questions")?;
    let report = evaluate(&store, &args.dataset, &ids, &embedder, config, options, &progress).await?;
    render::eval_notes(&report);
    render::eval_report(&report);
    write_report(&report, &args.files)?;
    eprintln!("evaluated in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// One shard: the run's conversations read from the inputs, the shard's dealt by their
/// question counts in the store, measured, its tables shown and its part written to `--json`.
async fn eval_shard(
    shard: Shard,
    store_dir: &Location,
    config: &Config,
    args: &EvalArgs,
    options: &EvalOptions,
    quiet: bool,
) -> anyhow::Result<()> {
    let started = Instant::now();
    // Only a store that lacks conversations of the run wants --prepare-only; any other error
    // (the store unreachable, its credentials refused) is shown as it is.
    let ids = match prepared(store_dir, inputs(args), config).await {
        Err(e @ myelin::Error::NotFound(_)) => Err(anyhow::Error::new(e).context(format!(
            "--shard {shard} reads the store and never writes it: run this eval once with --prepare-only first"
        ))),
        ready => ready.map_err(anyhow::Error::from),
    }?;
    let store = Store::open(store_dir).await?;
    let selection = selection(&store, &ids).await?;
    let mine = shard.select(&selection);
    let embedder = load_embedder(config)?;
    let progress = render::progress_bar(quiet, "questions")?;
    let run = measure(&store, &args.dataset, &mine, &embedder, config, options, &progress).await?;
    let report = run.report(false)?;
    render::eval_notes(&report);
    render::eval_report(&report);
    let path = args.files.json.as_deref().context("--shard writes its part to --json")?;
    let part = Part::new(shard, selection, run);
    // Written beside and renamed over: a shard that dies leaves no part a merge could take.
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    std::fs::write(&partial, serde_json::to_string(&part)?).with_context(|| format!("writing {}", path.display()))?;
    std::fs::rename(&partial, path).with_context(|| format!("writing {}", path.display()))?;
    eprintln!(
        "shard {shard}: {} of the run's {} conversations, {} questions, in {:.1} s; its part is {} (join the \
         parts with myelin eval-merge)",
        mine.len(),
        ids.len(),
        part.run.questions.len(),
        started.elapsed().as_secs_f64(),
        path.display()
    );
    Ok(())
}

/// Writes `report` to the files named (`eval`'s, and `eval-merge`'s for the merged report).
pub fn write_report(report: &Report, files: &ReportFiles) -> anyhow::Result<()> {
    if let Some(path) = &files.json {
        std::fs::write(path, serde_json::to_string_pretty(report)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &files.plot {
        let svg = render::eval_plot(report).map_err(|e| anyhow::anyhow!("drawing {}: {e}", path.display()))?;
        std::fs::write(path, svg).with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &files.gate_plot {
        let svg = render::eval_gate_plot(report).map_err(|e| anyhow::anyhow!("drawing {}: {e}", path.display()))?;
        std::fs::write(path, svg).with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &files.per_question {
        let mut lines = String::new();
        for q in &report.per_question {
            lines.push_str(&serde_json::to_string(q)?);
            lines.push('\n');
        }
        std::fs::write(path, lines).with_context(|| format!("writing {}", path.display()))?;
    }
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
