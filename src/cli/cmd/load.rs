//! `myelin load`: drive a running server with concurrent clients for a bounded time and
//! report throughput, latency, errors and lost writes; fails when there were any.
//!
//! Owns checking the flags, filling the scopes and the report file. Must not generate load
//! itself (`myelin::bench::load` does) nor format the table (render does).

use std::time::{Duration, Instant};

use anyhow::Context;
use myelin::bench::load::{LoadOptions, fill, large_text};
use myelin::config::Config;

use super::serve::read_token;
use crate::cli::Globals;
use crate::cli::flags::LoadArgs;
use crate::cli::render;

pub fn run(args: LoadArgs, config: Config, g: &Globals) -> anyhow::Result<()> {
    let LoadArgs { addr, locomo, conversations, clients, seconds, write_share, rate, large_add, token_file, json } =
        args;
    anyhow::ensure!(rate.is_none_or(|r| r > 0.0 && r.is_finite()), "--rate must be a positive number");
    anyhow::ensure!(clients > 0 && seconds > 0, "--clients and --seconds must be at least 1");
    anyhow::ensure!((0.0..=1.0).contains(&write_share), "--write-share {write_share} is not in [0, 1]");
    let token = token_file.as_deref().map(read_token).transpose()?;
    let mut loaded = myelin::ingest::load_path(&locomo, &config.ingest.load_options())?;
    if !conversations.is_empty() {
        loaded.conversations.retain(|c| conversations.contains(&c.id));
        anyhow::ensure!(!loaded.conversations.is_empty(), "{}: none of {conversations:?}", locomo.display());
    }
    let memories = loaded.conversations.iter().map(|c| c.turn_count()).sum();
    let options =
        LoadOptions { addr, token, clients, duration: Duration::from_secs(seconds), write_share, rate, large_add };
    let large = large_add.map(|n| large_text(&loaded.conversations, n)).transpose()?;
    let report = g.runtime.block_on(async {
        let t0 = Instant::now();
        let targets = fill(&options, &loaded.conversations).await?;
        eprintln!("{} scopes with {memories} memories ready in {:.1} s", targets.len(), t0.elapsed().as_secs_f64());
        myelin::bench::load::run(&options, &targets, memories, large).await
    })?;
    if let Some(path) = &json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    render::load(&report, large_add.is_some());
    anyhow::ensure!(
        report.errors == 0 && report.lost_writes == 0,
        "{} errors, {} lost writes",
        report.errors,
        report.lost_writes
    );
    Ok(())
}
