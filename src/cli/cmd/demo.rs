//! `myelin demo`: ingest the built-in demo conversation, show the store, and answer the demo's
//! own questions with the default mode (other conversations of the store are left alone).
//!
//! Owns the demo's steps and its choice of three episodes an answer. Must not format output.

use std::path::Path;
use std::time::Instant;

use myelin::config::Config;
use myelin::embed::Embedder;
use myelin::pipeline::LoadedInput;
use myelin::retrieve::Query;
use myelin::retrieve::bm25::Analyzer;
use myelin::retrieve::engine::Engine;
use myelin::store::Store;

use super::{ingest, stats};
use crate::cli::Globals;
use crate::cli::render;

pub fn run(config: Config, g: &Globals) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut input = LoadedInput::default();
    input.add(myelin::ingest::load_demo()?, "<built-in demo>")?;
    let ids: Vec<String> = input.conversations.iter().map(|(c, _)| c.id.clone()).collect();
    let summary = g.runtime.block_on(ingest::ingest(&g.store, input, &config, g.quiet, started))?;
    render::ingest(&summary, false)?;
    g.runtime.block_on(stats::show(&g.store, false))?;
    g.runtime.block_on(answer(&g.store, &config, &ids))
}

/// Episodes shown per question.
const SHOWN: usize = 3;

/// Answers the questions of `conversations` with the default mode, three episodes each.
async fn answer(store_dir: &Path, config: &Config, conversations: &[String]) -> anyhow::Result<()> {
    let store = Store::open(store_dir).await?;
    let embedder = Embedder::load(&config.embed)?;
    let mut analyzer = Analyzer::new()?;
    for id in conversations {
        let memory = myelin::pipeline::stored_memory(&store, id, config).await?;
        let engine = Engine::new(vec![memory], &config.gpu)?;
        let memory = engine.memory(0)?;
        for q in store.questions(id).await? {
            let query = Query::new(&mut analyzer, &q.text, embedder.embed_one(&q.text)?)?;
            // The whole result ranks and gates; the best three are shown, in time order.
            let mut r = engine.retrieve(0, &query, config.retrieve.mode)?;
            r.hits.truncate(SHOWN);
            let turns: Vec<String> =
                r.time_ordered().iter().map(|h| memory.episodes()[h.episode as usize].turn_id.clone()).collect();
            render::demo_answer(id, &q.text, &turns, &r, &q.evidence);
        }
    }
    Ok(())
}
