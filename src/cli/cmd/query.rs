//! `myelin query`: retrieve the episodes a question needs from one stored conversation, through
//! the engine (with `--explain`, its CPU path, which records every step).
//!
//! Owns the command's steps and their timing. Must not format the answer (render does).

use std::time::Instant;

use myelin::config::Config;
use myelin::pipeline::load_embedder;
use myelin::retrieve::bm25::Analyzer;
use myelin::retrieve::engine::Engine;
use myelin::retrieve::{Mode, Order, Query};
use myelin::store::{Location, Store};

use crate::cli::Globals;
use crate::cli::flags::QueryArgs;
use crate::cli::render::{self, Answer};

pub fn run(args: QueryArgs, mut config: Config, g: &Globals) -> anyhow::Result<()> {
    args.tuning.apply(&mut config)?;
    let QueryArgs { conversation, question, json, explain, order, .. } = args;
    let mode = config.retrieve.mode;
    g.runtime.block_on(query(&g.store, &config, &conversation, &question, (mode, order), json, explain))
}

async fn query(
    store_dir: &Location,
    config: &Config,
    conversation: &str,
    question: &str,
    (mode, order): (Mode, Order),
    json: bool,
    explain: bool,
) -> anyhow::Result<()> {
    anyhow::ensure!(!question.trim().is_empty(), "empty question: nothing to retrieve");
    let store = Store::open(store_dir).await?;
    let memory = myelin::pipeline::stored_memory(&store, conversation, config).await?;
    let embedder = load_embedder(config)?;
    let t0 = Instant::now();
    let embedding = embedder.embed_one(question)?;
    let embed_ms = t0.elapsed().as_secs_f64() * 1e3;
    let query = Query::new(&mut Analyzer::new()?, question, embedding)?;
    // --explain traces every step of the dynamics, which only the CPU engine records.
    let engine = if explain {
        Engine::on_cpu_because(vec![memory], "--explain traces every step, which only the CPU engine records".into())?
    } else {
        Engine::new(vec![memory], &config.gpu)?
    };
    let t0 = Instant::now();
    let (result, explanations) =
        if explain { engine.explain(0, &query, mode)? } else { (engine.retrieve(0, &query, mode)?, Vec::new()) };
    let (memory, cx) = (engine.memory(0)?, engine.cx(0)?);
    let retrieve_ms = t0.elapsed().as_secs_f64() * 1e3;
    // The context budget hands over the best episodes that fit.
    let result = cx.hand_over(result, |t| embedder.token_count(t))?;
    let mut explanations = explanations;
    explanations.truncate(result.hits.len());
    let answer = Answer {
        conversation,
        question,
        mode,
        order,
        memory,
        result: &result,
        explanations: &explanations,
        threshold: cx.rejection_threshold(mode)?,
        gate: config.retrieve.gate,
        embed_ms,
        retrieve_ms,
        backend: engine.choice(),
    };
    render::answer(&answer, json)
}
