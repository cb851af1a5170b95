//! `myelin stats`: the conversations of a store with their counts (archived memories too),
//! versions and size.
//!
//! Owns opening the store read-only for it. Must not format the table (render does).

use myelin::store::{Location, Store};

use crate::cli::Globals;
use crate::cli::flags::StatsArgs;
use crate::cli::render;

pub fn run(args: StatsArgs, g: &Globals) -> anyhow::Result<()> {
    g.runtime.block_on(show(&g.store, args.json))
}

/// Prints what the store at `store_dir` holds (also the end of `myelin demo`).
pub async fn show(store_dir: &Location, json: bool) -> anyhow::Result<()> {
    let store = Store::open(store_dir).await?;
    let info = store.info().await?;
    let conversations = store.conversations().await?;
    let archived = store.archived_counts().await?;
    render::stats(&info, &conversations, &archived, json)
}
