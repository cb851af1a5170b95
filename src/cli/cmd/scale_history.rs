//! `myelin scale-history`: build a history of a given size from BEAM conversations and filler
//! text, written as one BEAM conversation directory.
//!
//! Owns finding the filler and the model. Must not build anything itself (`myelin::scale`
//! does) nor format the summary (render does).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use myelin::config::Config;
use myelin::embed::Embedder;

use crate::cli::Globals;
use crate::cli::flags::ScaleHistoryArgs;
use crate::cli::render;

pub fn run(args: ScaleHistoryArgs, mut config: Config, _g: &Globals) -> anyhow::Result<()> {
    let ScaleHistoryArgs { conversations, tokens, out, filler, plan_tokens, model_dir } = args;
    let filler = match filler {
        Some(f) => f,
        None => std::env::var_os("MYELIN_DATASETS")
            .map(|d| PathBuf::from(d).join("beam/10M-plans"))
            .context("--filler not given and $MYELIN_DATASETS not set")?,
    };
    if model_dir.is_some() {
        config.embed.model_dir = model_dir;
    }
    let embedder = Embedder::load(&config.embed)?;
    let t0 = Instant::now();
    let r = myelin::scale::build(&conversations, tokens, &filler, plan_tokens, &out, &embedder)?;
    render::scale_history(&out, &r, t0.elapsed().as_secs_f64());
    Ok(())
}
