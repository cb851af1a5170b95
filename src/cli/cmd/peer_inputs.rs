//! `myelin peer-inputs`: ingest what the data set needs, load its questions as `eval` does, and
//! write what a peer engine is given (`turns.jsonl`, `questions.jsonl`).
//!
//! Owns the command's steps and its files. Must not choose what a peer sees
//! (`myelin::eval::peer_inputs` does).

use anyhow::Context;
use myelin::config::Config;
use myelin::conversation::SourceFormat;
use myelin::eval::peer::to_lines;
use myelin::eval::{load, peer_inputs};
use myelin::pipeline::load_embedder;
use myelin::prepare::Inputs;
use myelin::store::Store;

use super::eval::prepare_noting;
use crate::cli::Globals;
use crate::cli::flags::PeerInputsArgs;
use crate::cli::render;

pub fn run(args: PeerInputsArgs, config: Config, g: &Globals) -> anyhow::Result<()> {
    g.runtime.block_on(async {
        let expected = if args.dataset == "locomo" { SourceFormat::Locomo } else { SourceFormat::Beam };
        let embedder = load_embedder(&config)?;
        let inputs =
            Inputs { paths: std::slice::from_ref(&args.path), only: &args.conversations, expected: Some(expected) };
        let ids = prepare_noting(&g.store, inputs, &embedder, &config, g.quiet).await?;
        let store = Store::open(&g.store).await?;
        let progress = render::progress_bar(g.quiet, "questions")?;
        let loaded = load(&store, &args.dataset, &ids, &embedder, &config, &progress).await?;
        let (turns, questions) = peer_inputs(&loaded);
        std::fs::create_dir_all(&args.out).with_context(|| format!("making {}", args.out.display()))?;
        for (name, lines) in [("turns.jsonl", to_lines(&turns)?), ("questions.jsonl", to_lines(&questions)?)] {
            let path = args.out.join(name);
            std::fs::write(&path, lines).with_context(|| format!("writing {}", path.display()))?;
        }
        eprintln!(
            "wrote {} turns and {} questions of {} conversations to {}",
            turns.len(),
            questions.len(),
            ids.len(),
            args.out.display()
        );
        Ok(())
    })
}
