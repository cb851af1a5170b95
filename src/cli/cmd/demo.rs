//! `myelin demo`: ingest the built-in demo conversation, show the store, and answer the demo's
//! own questions with the default mode (other conversations of the store are left alone).
//!
//! Owns the demo's steps and its choice of what an answer shows (what a search hands over, the
//! best five). Must not format output.

use std::time::Instant;

use myelin::config::Config;
use myelin::pipeline::LoadedInput;
use myelin::pipeline::load_embedder;
use myelin::retrieve::Query;
use myelin::retrieve::bm25::Analyzer;
use myelin::retrieve::engine::Engine;
use myelin::store::{Location, Store};

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

/// Episodes shown per question, at most.
const SHOWN: usize = 5;

/// Answers the questions of `conversations` with the default mode: for each, what it hands
/// over (a rejected result's few closest, marked weak), the best five in rank order.
async fn answer(store_dir: &Location, config: &Config, conversations: &[String]) -> anyhow::Result<()> {
    let store = Store::open(store_dir).await?;
    let embedder = load_embedder(config)?;
    let mut analyzer = Analyzer::new()?;
    let mode = config.retrieve.mode;
    for id in conversations {
        let memory = myelin::pipeline::stored_memory(&store, id, config).await?;
        let engine = Engine::new(vec![memory], &config.gpu)?;
        let cx = engine.cx(0)?;
        let threshold = cx.rejection_threshold(mode)?;
        for q in store.questions(id).await? {
            let query = Query::new(&mut analyzer, &q.text, embedder.embed_one(&q.text)?)?;
            let r = engine.retrieve(0, &query, mode)?;
            let mut r = cx.hand_over(r, |t| embedder.token_count(t))?;
            r.hits.truncate(SHOWN);
            let shown: Vec<render::Shown> = r
                .hits
                .iter()
                .map(|h| {
                    let e = &cx.m.episodes()[h.episode as usize];
                    render::Shown {
                        turn: &e.turn_id,
                        speaker: &e.speaker,
                        text: &e.text,
                        evidence: q.evidence.contains(&e.turn_id),
                    }
                })
                .collect();
            render::demo_answer(id, &q.text, &shown, &r, threshold, &q.evidence);
        }
    }
    Ok(())
}
