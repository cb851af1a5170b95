//! `myelin write-bench`: time how one write's cost grows with its scope, on a fresh store.
//!
//! Owns checking that the store is new, reading the messages and the rows file. Must not time
//! anything itself (`myelin::bench::growth` does) nor format the table (render does).

use anyhow::Context;
use myelin::bench::growth::{GrowthOptions, short_messages};
use myelin::config::Config;

use crate::cli::Globals;
use crate::cli::flags::WriteBenchArgs;
use crate::cli::render;

pub fn run(args: WriteBenchArgs, mut config: Config, g: &Globals) -> anyhow::Result<()> {
    args.tuning.apply(&mut config)?;
    args.serving.apply(&mut config)?;
    let Some(store) = g.store.as_dir() else {
        anyhow::bail!("write-bench measures a store on this machine's disk; --store {} is not a directory", g.store)
    };
    anyhow::ensure!(
        !store.exists(),
        "write-bench fills a fresh store and {} exists: pass --store with a new path",
        store.display()
    );
    let loaded = myelin::ingest::load_path(&args.text, &config.ingest.load_options())?;
    let texts = short_messages(&loaded.conversations, 5, 40);
    let options = GrowthOptions { sizes: args.sizes, adds: args.adds, fill_batch: args.fill_batch };
    let rows = g.runtime.block_on(myelin::bench::growth::run(store, &config, &texts, &options))?;
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&rows)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    render::write_bench(&rows, args.adds);
    Ok(())
}
