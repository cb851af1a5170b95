//! `myelin train-gnn`: ingest what training and validation need, train the learned relevance
//! of `synapse-gnn` with a progress bar over epochs, write the weights and their card.
//!
//! Owns the command's steps and its files. Must not train (`myelin::gnn::train` does) nor
//! format the card's table (render does).

use std::time::Instant;

use anyhow::Context;
use myelin::config::Config;
use myelin::embed::EMBEDDING_DIM;
use myelin::eval::{load, training_examples};
use myelin::gnn::record::TrainOptions;
use myelin::gnn::relevance::{CARD_FORMAT, Card, card_path};
use myelin::pipeline::load_embedder;
use myelin::prepare::Inputs;
use myelin::store::{Location, Store};

use super::eval::prepare_noting;
use crate::cli::Globals;
use crate::cli::flags::{TrainFlags, TrainGnnArgs};
use crate::cli::render;

pub fn run(args: TrainGnnArgs, mut config: Config, g: &Globals) -> anyhow::Result<()> {
    args.tuning.apply(&mut config)?;
    let options = args.flags.options()?;
    g.runtime.block_on(train_gnn(&g.store, &config, &args.flags, options, g.quiet))
}

async fn train_gnn(
    store_dir: &Location,
    config: &Config,
    args: &TrainFlags,
    options: TrainOptions,
    quiet: bool,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let embedder = load_embedder(config)?;
    let inputs = |paths, only| Inputs { paths, only, expected: None };
    let train_ids =
        prepare_noting(store_dir, inputs(&args.train, &args.train_conversations), &embedder, config, quiet).await?;
    let val_ids =
        prepare_noting(store_dir, inputs(&args.val, &args.val_conversations), &embedder, config, quiet).await?;
    if let Some(both) = train_ids.iter().find(|c| val_ids.contains(c)) {
        anyhow::bail!("conversation '{both}' is in both the training and the validation data: split by conversation");
    }
    let store = Store::open(store_dir).await?;
    let stored = store.conversations().await?;
    // Group names: LoCoMo's category names when every conversation is LoCoMo.
    let dataset = |ids: &[String]| {
        let locomo = stored.iter().filter(|c| ids.contains(&c.id)).all(|c| c.format == "locomo");
        if locomo { "locomo" } else { "beam" }
    };
    let mut splits = Vec::new();
    for (ids, inputs) in [(&train_ids, &args.train), (&val_ids, &args.val)] {
        let progress = render::progress_bar(quiet, "questions")?;
        let loaded = load(&store, dataset(ids), ids, &embedder, config, &progress).await?;
        let examples = training_examples(loaded, options.features)?;
        splits.push((examples, inputs.iter().map(|p| p.display().to_string()).collect::<Vec<_>>()));
    }
    let [(train, train_inputs), (val, val_inputs)] =
        <[_; 2]>::try_from(splits).map_err(|_| anyhow::anyhow!("splits"))?;
    eprintln!(
        "{} training questions from {}, {} validation questions from {}",
        train.len(),
        train_ids.join(","),
        val.len(),
        val_ids.join(",")
    );
    let progress = render::progress_bar(quiet, "epochs")?;
    progress.set_length(options.epochs as u64);
    let trained = myelin::gnn::train::train(&train, &val, &options, EMBEDDING_DIM, |e| {
        progress.set_message(format!("R@10 {:.3}", e.val_recall_10));
        progress.inc(1);
        let line = format!(
            "epoch {:>3}  train loss {:.4}  val loss {:.4}  val R@10 {:.4} (weight {})",
            e.epoch, e.train_loss, e.val_loss, e.val_recall_10, e.weight
        );
        if progress.is_hidden() { eprintln!("{line}") } else { progress.println(line) }
    })?;
    progress.finish_and_clear();
    let mut record = trained.record;
    record.train.inputs = train_inputs;
    record.val.inputs = val_inputs;
    let card = Card {
        format: CARD_FORMAT,
        features: options.features,
        feature_names: options.features.names(EMBEDDING_DIM),
        shape: trained.weights.model.shape(),
        weight: trained.weight,
        seed: options.seed,
        training: record,
    };
    if let Some(dir) = args.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    trained.weights.save(&args.out)?;
    let card_file = card_path(&args.out);
    std::fs::write(&card_file, serde_json::to_string_pretty(&card)? + "\n")
        .with_context(|| format!("writing {}", card_file.display()))?;
    render::card(&card, &args.out, &card_file, args.json)?;
    eprintln!("trained in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}
