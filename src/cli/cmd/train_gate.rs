//! `myelin train-gate`: ingest the inputs, rank every question with `synapse-gnn`, report the
//! learned gate cross-validated by conversation, then train it on every question and write the
//! model.
//!
//! Owns the command's steps and its files. Must not fit (`myelin::knowing` does), compute a
//! figure (`myelin::eval::gate` does) nor format the report (render does).

use std::time::Instant;

use anyhow::Context;
use myelin::config::Config;
use myelin::eval::gate::{Read, gate_cross_validation, gate_examples};
use myelin::eval::load;
use myelin::eval::reader::held_out_reader;
use myelin::knowing::{GateExample, GateOptions, cut_from, train};
use myelin::pipeline::load_embedder;
use myelin::prepare::Inputs;
use myelin::reader::train::ReaderOptions;
use myelin::reader::{DEPTH as READER_DEPTH, FEATURES as READER_FEATURES};
use myelin::retrieve::KnowingFeatures;
use myelin::store::Store;

use super::eval::prepare_noting;
use crate::cli::Globals;
use crate::cli::flags::TrainGateArgs;
use crate::cli::render;

pub fn run(args: TrainGateArgs, mut config: Config, g: &Globals) -> anyhow::Result<()> {
    args.tuning.apply(&mut config)?;
    g.runtime.block_on(train_gate(&args, &config, g))
}

async fn train_gate(args: &TrainGateArgs, config: &Config, g: &Globals) -> anyhow::Result<()> {
    let started = Instant::now();
    let options = GateOptions {
        l2: args.l2,
        max_false_refusal: args.max_false_refusal,
        cross_conversation: args.cross_conversation,
        ..GateOptions::default()
    };
    let embedder = load_embedder(config)?;
    let inputs = Inputs { paths: &args.paths, only: &args.conversations, expected: None };
    let ids = prepare_noting(&g.store, inputs, &embedder, config, g.quiet).await?;
    let store = Store::open(&g.store).await?;
    let stored = store.conversations().await?;
    let depth = if args.reader { READER_DEPTH } else { 0 };
    let mut examples: Vec<GateExample> = Vec::new();
    let mut reads: Vec<Read> = Vec::new();
    // Whole conversations and the scopes cut from them (their sessions) apart: each its own
    // set of examples, asked of the others of its set.
    for (format, cut, dataset) in [
        ("locomo", false, "locomo"),
        ("locomo", true, "locomo-sessions"),
        ("beam", false, "beam"),
        ("beam", true, "beam-sessions"),
    ] {
        let of: Vec<String> = ids
            .iter()
            .filter(|id| (cut_from(id) != id.as_str()) == cut)
            .filter(|id| stored.iter().any(|c| &c.id == *id && c.format == format))
            .cloned()
            .collect();
        if of.is_empty() {
            continue;
        }
        let progress = render::progress_bar(g.quiet, "questions")?;
        let loaded = load(&store, format, &of, &embedder, config, &progress).await?;
        for (e, r) in gate_examples(loaded, dataset, options.cross_conversation, depth)? {
            examples.push(e);
            reads.push(r);
        }
    }
    let mut names: Vec<&str> = KnowingFeatures::NAMES.to_vec();
    let mut reader = None;
    if args.reader {
        let reader_options = ReaderOptions {
            layers: args.reader_layers,
            epochs: args.reader_epochs,
            lr: args.reader_lr,
            ..ReaderOptions::default()
        };
        let progress = render::progress_bar(g.quiet, "pairs")?;
        reader = Some(held_out_reader(embedder.model_dir(), &mut examples, &reads, &reader_options, &progress)?);
        names.extend(READER_FEATURES);
    }
    if let Some(path) = &args.examples {
        let mut lines = String::new();
        for e in &examples {
            lines.push_str(&serde_json::to_string(e)?);
            lines.push('\n');
        }
        std::fs::write(path, lines).with_context(|| format!("writing {}", path.display()))?;
    }
    let report = gate_cross_validation(&examples, &names, options)?;
    let model = match &args.out {
        Some(out) => {
            let refs: Vec<&GateExample> = examples.iter().collect();
            let model = train(&refs, &names, options)?;
            if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            }
            std::fs::write(out, serde_json::to_string_pretty(&model)? + "\n")
                .with_context(|| format!("writing {}", out.display()))?;
            Some((model, out.as_path()))
        }
        None => None,
    };
    if let Some(path) = &args.plot {
        let svg = render::gate_plot(&report).map_err(|e| anyhow::anyhow!("drawing {}: {e}", path.display()))?;
        std::fs::write(path, svg).with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.reliability {
        let svg =
            render::gate_reliability_plot(&report).map_err(|e| anyhow::anyhow!("drawing {}: {e}", path.display()))?;
        std::fs::write(path, svg).with_context(|| format!("writing {}", path.display()))?;
    }
    render::gate_training(&report, reader.as_ref(), model.as_ref().map(|(m, p)| (m, *p)), args.json)?;
    eprintln!("trained in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}
