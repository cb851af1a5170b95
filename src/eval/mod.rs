//! Evaluation: runs every question of a set of stored conversations through the retrieval
//! modes and measures evidence recall@k (on the score order), hit@k, context size, the gate
//! (rejection of adversarial questions, false refusals, ROC AUC of the confidence, optional
//! calibration of τ_gate) and retrieval latency. Produces a [`Report`] (a stable JSON
//! interface) that the binary prints as tables and can draw with [`plot`]. A peer's answers
//! to the same questions ([`peer`]) are scored beside the modes by the same code.
//!
//! Two steps: [`measure`] runs the questions into a [`Run`] (`run.rs`: every question's outcome,
//! each conversation's facts), and [`Run::report`] (`figures.rs`, the only place a figure is
//! computed) makes the report of it. A [`shard`] of the conversations measures its own run;
//! the shards' runs joined are the whole run, reported by the same code.
//!
//! This module must not ingest (the caller stores conversations first) nor print. The report's
//! types are in `report.rs`, the unit tests in `tests.rs`.

mod exact;
mod figures;
pub mod gate;
pub mod peer;
pub mod plot;
pub mod rates;
pub mod reader;
mod report;
pub mod run;
pub mod shard;

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use crate::progress::Progress;

use crate::config::Config;
use crate::embed::Embedder;
use crate::error::{Error, Result};
use crate::gnn::FeatureSet;
use crate::gnn::train::Example;
use crate::gpu::Backend;
use crate::kind::Kind;
use crate::pipeline::stored_memory;
use crate::retrieve::bm25::Analyzer;
use crate::retrieve::engine::Engine;
use crate::retrieve::{Gate, GnnRerank, LearnedGate, Memory, Mode, Query, Retrieval, RetrieveConfig, episode_index};
use crate::store::Store;
pub use figures::{latency, percentile};
use peer::{PeerQuestion, PeerRuns, PeerTurn};
pub use rates::auc;
pub use report::{
    Backends, GateReport, GateUse, GnnUse, GroupReport, IndexUse, KindFound, KindsUse, Latency, Mean, ModeReport,
    NewestFirst, QuestionOutcome, QuestionResult, Report,
};
pub use run::Run;
use run::{ConversationRun, EmbedSettings, GnnModel, IndexTally, Models, Outcome, Process, QuestionRun, Settings};

/// The k of the reported recall@k.
pub const RECALL_KS: [usize; 4] = [5, 10, 25, 30];
/// What context tokens are counted with.
pub const TOKENIZER: &str = "all-MiniLM-L6-v2 WordPiece, no special tokens";

/// How an evaluation runs.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalOptions {
    /// Modes to run, in report order.
    pub modes: Vec<Mode>,
    /// Pick τ_gate per mode on a 10% split of the questions and report on the other 90%.
    pub calibrate: bool,
    /// Calibration picks the threshold that rejects the most adversarial questions of the split
    /// while refusing at most this fraction of its answerable ones (default 0.03).
    pub max_false_refusal: f64,
    /// Keep every question's result in [`Report::per_question`].
    pub per_question: bool,
    /// A peer's answers to the same questions, reported after the modes as columns of their
    /// own (no gate: a peer gives no confidence).
    pub peers: PeerRuns,
}

impl Default for EvalOptions {
    fn default() -> Self {
        EvalOptions {
            modes: Mode::ALL.to_vec(),
            calibrate: false,
            max_false_refusal: 0.03,
            per_question: false,
            peers: PeerRuns::default(),
        }
    }
}

/// The reporting group of a question: LoCoMo category numbers become names.
pub fn group_name(dataset: &str, category: &str) -> String {
    if dataset == "locomo" {
        match category {
            "1" => return "multi-hop".into(),
            "2" => return "temporal".into(),
            "3" => return "open-domain".into(),
            "4" => return "single-hop".into(),
            "5" => return "adversarial".into(),
            _ => {}
        }
    }
    category.to_string()
}

/// A question ready to run, with its gold evidence.
#[derive(Debug, Clone)]
pub struct Labelled {
    /// Index of its conversation's memory in [`Loaded::memories`].
    pub memory: usize,
    /// Question id.
    pub id: String,
    /// The query.
    pub query: Query,
    /// Gold evidence episodes (indices in the conversation).
    pub gold: Vec<u32>,
    /// Reporting group.
    pub group: String,
    /// Whether it has no answer in the conversation.
    pub adversarial: bool,
}

/// Stored conversations loaded for questions.
#[derive(Debug)]
pub struct Loaded {
    /// One memory per conversation, in the order asked for.
    pub memories: Vec<Memory>,
    /// Every question, conversation by conversation.
    pub questions: Vec<Labelled>,
    /// Tokens of each conversation's episodes.
    pub tokens: Vec<Vec<usize>>,
    /// Query embedding time per question, ms.
    pub embed_ms: Vec<f64>,
}

/// Loads `conversations` of `store` (their graphs must exist) as memories and embeds their
/// questions, resolving gold evidence turn ids to episodes (the first passage of each turn).
pub async fn load(
    store: &Store,
    dataset: &str,
    conversations: &[String],
    embedder: &Embedder,
    config: &Config,
    progress: &dyn Progress,
) -> Result<Loaded> {
    let mut loaded = Loaded { memories: Vec::new(), questions: Vec::new(), tokens: Vec::new(), embed_ms: Vec::new() };
    let mut analyzer = Analyzer::new()?;
    let mut all_questions = Vec::with_capacity(conversations.len());
    for id in conversations {
        all_questions.push(store.questions(id).await?);
    }
    progress.set_length(all_questions.iter().map(Vec::len).sum::<usize>() as u64);
    for (id, questions) in conversations.iter().zip(all_questions) {
        progress.set_message(id.clone());
        let memory = stored_memory(store, id, config).await?;
        let episodes = memory.episodes();
        let position = episode_index(episodes);
        let golds: Vec<Vec<u32>> = questions
            .iter()
            .map(|q| q.evidence.iter().filter_map(|e| position.get(e.as_str()).copied()).collect())
            .collect();
        let texts: Vec<String> = episodes.iter().map(|e| e.embedding_text()).collect();
        loaded.tokens.push(texts.iter().map(|t| embedder.token_count(t)).collect::<Result<_>>()?);
        drop(position);
        let m = loaded.memories.len();
        loaded.memories.push(memory);
        for (q, gold) in questions.into_iter().zip(golds) {
            let t0 = Instant::now();
            let embedding = embedder.embed_one(&q.text)?;
            loaded.embed_ms.push(t0.elapsed().as_secs_f64() * 1e3);
            loaded.questions.push(Labelled {
                memory: m,
                query: Query::new(&mut analyzer, &q.text, embedding)?,
                gold,
                group: group_name(dataset, &q.category),
                adversarial: q.adversarial,
                id: q.id,
            });
            progress.inc(1);
        }
    }
    progress.finish_and_clear();
    Ok(loaded)
}

/// What a peer is given for `loaded`'s questions ([`peer`]'s formats): every memory's
/// episodes, and every question with the query embedding the modes get.
pub fn peer_inputs(loaded: &Loaded) -> (Vec<PeerTurn>, Vec<PeerQuestion>) {
    let turns = loaded.memories.iter().flat_map(peer::turns).collect();
    let questions = loaded
        .questions
        .iter()
        .map(|q| peer::question(loaded.memories[q.memory].conversation(), &q.id, &q.query))
        .collect();
    (turns, questions)
}

/// Training examples for the learned relevance: every answerable question with evidence, its
/// candidate subgraph from the `synapse` result, labelled by its gold episodes; in question
/// order. The results come through the engine like every other retrieval, on the CPU (the
/// reference the shipped card's figures were measured on), one batch for all questions.
pub fn training_examples(loaded: Loaded, set: FeatureSet) -> Result<Vec<Example>> {
    use rayon::prelude::*;
    let mut engine = Engine::on_cpu_because(loaded.memories, "training examples rank on the CPU reference".into())?;
    // Synapse's ranking as deep as the rerank pool: the candidates the rerank will see.
    let settings = engine.settings().ranking_only();
    engine.set_settings(RetrieveConfig { top_k: settings.depth(Mode::SynapseGnn), ..settings })?;
    let asked: Vec<&Labelled> = loaded.questions.iter().filter(|q| !q.adversarial && !q.gold.is_empty()).collect();
    let requests: Vec<(usize, &Query)> = asked.iter().map(|q| (q.memory, &q.query)).collect();
    let (results, _) = engine.retrieve_batch(&requests, Mode::Synapse)?;
    asked
        .par_iter()
        .zip(results.par_iter())
        .map(|(q, r)| {
            let cx = engine.cx(q.memory)?;
            let memory = cx.m;
            let (candidates, embeddings) = GnnRerank(cx).input(&q.query, r);
            // Every passage of a gold turn is relevant (evidence names turns).
            let turns = memory.turns();
            let gold: Vec<u32> = (0..turns.len() as u32).filter(|&e| q.gold.contains(&turns[e as usize])).collect();
            Example::new(
                set,
                &candidates,
                &q.query.embedding,
                &embeddings,
                &gold,
                memory.conversation(),
                &q.group,
                GnnRerank(cx).cold_start(),
            )
        })
        .collect()
}

/// Runs the evaluation over `conversations` of `store` (their graphs must exist) on the backend
/// `gpu` chooses, and reports it ([`measure`], then [`Run::report`]).
#[allow(clippy::too_many_arguments)]
pub async fn evaluate(
    store: &Store,
    dataset: &str,
    conversations: &[String],
    embedder: &Embedder,
    config: &Config,
    options: &EvalOptions,
    progress: &dyn Progress,
) -> Result<Report> {
    measure(store, dataset, conversations, embedder, config, options, progress).await?.report(options.per_question)
}

/// Runs every question of `conversations` of `store` (their graphs must exist) through the
/// modes and the peers on the backend `gpu` chooses, and returns what it measured, no figure
/// yet. On the GPU the synapse modes run as one batch over every conversation, and their
/// latency is the batch's time divided by its questions.
#[allow(clippy::too_many_arguments)]
pub async fn measure(
    store: &Store,
    dataset: &str,
    conversations: &[String],
    embedder: &Embedder,
    config: &Config,
    options: &EvalOptions,
    progress: &dyn Progress,
) -> Result<Run> {
    if options.modes.is_empty() {
        return Err(Error::InvalidArgument("no retrieval mode to evaluate".into()));
    }
    let Loaded { memories, questions, tokens: tokens_of, embed_ms } =
        load(store, dataset, conversations, embedder, config, progress).await?;
    let (gpu, rc) = (&config.gpu, &config.retrieve);
    let mut runs: Vec<QuestionRun> = Vec::with_capacity(questions.len());
    let mut requests: Vec<(usize, Query)> = Vec::with_capacity(questions.len());
    for (q, embed_ms) in questions.into_iter().zip(embed_ms) {
        let memory = &memories[q.memory];
        runs.push(QuestionRun {
            conversation: q.memory,
            gold_turns: q.gold.iter().map(|&e| memory.episodes()[e as usize].turn_id.clone()).collect(),
            calibration: options.calibrate && in_calibration_split(memory.conversation(), q.id.as_str()),
            id: q.id,
            group: q.group,
            adversarial: q.adversarial,
            gold: q.gold,
            embed_ms,
            outcomes: Vec::with_capacity(options.modes.len() + options.peers.runs.len()),
        });
        requests.push((q.memory, q.query));
    }
    let (models, gnn_trained, gate_trained) = models(&memories, options, rc)?;
    let mut facts = conversation_facts(&memories, &runs);
    let engine = Engine::new(memories, gpu)?;
    let refs: Vec<(usize, &Query)> = requests.iter().map(|(m, q)| (*m, q)).collect();
    let mut index_build_ms = 0.0;
    if engine.choice().backend == Backend::Cpu {
        index_build_ms = index_use(&engine.memories(), &refs, &mut facts);
    }
    let mut batched = BTreeMap::new();
    // What memory `m` returned (episodes best first) makes of one question; the budget cuts it
    // as it cuts every search.
    let returned = |m: usize, episodes: &[u32], via: Vec<String>, confidence: Option<f64>, millis: f64| {
        let hit_tokens: Vec<usize> = episodes.iter().map(|&e| tokens_of[m][e as usize]).collect();
        let tokens = hit_tokens.iter().sum();
        let handed = Retrieval::budget_run(episodes.len(), rc.max_context_tokens, hit_tokens.iter().map(|&t| Ok(t)))?;
        let handed_tokens = hit_tokens[..handed].iter().sum();
        // Ranked by turn: a passage stands for the turn evidence names.
        let memory = engine.memory(m)?;
        let ranked: Vec<u32> = episodes.iter().map(|&e| memory.turns()[e as usize]).collect();
        let returned = ranked.iter().map(|&t| memory.episodes()[t as usize].turn_id.clone()).collect();
        Ok::<_, Error>(Outcome { ranked, returned, via, confidence, millis, tokens, handed, handed_tokens })
    };
    for &mode in &options.modes {
        let outcome = |m: usize, r: &Retrieval, millis: f64| -> Result<Outcome> {
            let episodes: Vec<u32> = r.hits.iter().map(|h| h.episode).collect();
            let memory = engine.memory(m)?;
            let via = r.hits.iter().map(|h| memory.node_name(h.node)).collect();
            returned(m, &episodes, via, Some(r.confidence as f64), millis)
        };
        if engine.choice().backend == Backend::Gpu && mode.is_synapse() && !refs.is_empty() {
            let t0 = Instant::now();
            let (results, report) = engine.retrieve_batch(&refs, mode)?;
            let millis = t0.elapsed().as_secs_f64() * 1e3 / refs.len() as f64;
            for ((q, r), &(m, _)) in runs.iter_mut().zip(&results).zip(&refs) {
                q.outcomes.push(outcome(m, r, millis)?);
            }
            batched.insert(mode.as_str().to_string(), report);
        } else {
            for (q, &(m, query)) in runs.iter_mut().zip(&refs) {
                let t0 = Instant::now();
                let r = engine.memory(m)?.retrieve(query, mode)?;
                let millis = t0.elapsed().as_secs_f64() * 1e3;
                q.outcomes.push(outcome(m, &r, millis)?);
            }
        }
    }
    // A peer names episodes by id (no map is built without one).
    let episode_ids: Vec<HashMap<&str, u32>> = if options.peers.runs.is_empty() {
        Vec::new()
    } else {
        engine.memories().iter().map(|m| episode_index(m.episodes())).collect()
    };
    for k in 0..options.peers.runs.len() {
        for q in runs.iter_mut() {
            let memory = engine.memory(q.conversation)?;
            let (episodes, millis) =
                options.peers.episodes(k, memory, &episode_ids[q.conversation], &q.id, rc.top_k)?;
            q.outcomes.push(returned(q.conversation, &episodes, Vec::new(), None, millis)?);
        }
    }
    let mut columns: Vec<String> = options.modes.iter().map(|m| m.as_str().to_string()).collect();
    columns.extend(options.peers.runs.iter().map(|(name, _)| name.clone()));
    let conversations = conversations
        .iter()
        .zip(facts)
        .map(|(id, (kinds, labelled, index))| ConversationRun {
            gnn_seen: gnn_trained.contains(id),
            gate_seen: gate_trained.contains(id),
            id: id.clone(),
            kinds,
            labelled,
            index,
        })
        .collect();
    Ok(Run {
        settings: Settings {
            dataset: dataset.to_string(),
            columns,
            modes: options.modes.len(),
            calibrate: options.calibrate,
            max_false_refusal: options.max_false_refusal,
            tokenizer: TOKENIZER.to_string(),
            gate: rc.gate.as_str().to_string(),
            gate_model: (rc.gate == Gate::Learned).then(|| {
                rc.gate_model.as_ref().map_or(crate::knowing::SHIPPED_NAME.to_string(), |p| p.display().to_string())
            }),
            backend: gpu.backend,
            embed: EmbedSettings {
                forward: config.embed.forward,
                precision: config.embed.precision,
                text: config.embed.text,
                max_seq_len: config.embed.max_seq_len,
            },
            retrieve: rc.clone(),
            archive: config.archive.clone(),
        },
        models,
        process: Process {
            backend: engine.choice().clone(),
            embed: embedder.backend().to_string(),
            rank: engine.choice().backend.as_str().to_string(),
            batches: batched,
            index_build_ms,
        },
        conversations,
        questions: runs,
    })
}

/// What the models give, read through the first memory (nothing without one), and the
/// conversations the learned relevance and the learned gate were trained on.
fn models(
    memories: &[Memory],
    options: &EvalOptions,
    rc: &RetrieveConfig,
) -> Result<(Models, Vec<String>, Vec<String>)> {
    let Some(m) = memories.first() else { return Ok((Models::default(), Vec::new(), Vec::new())) };
    let thresholds = options
        .modes
        .iter()
        .map(|&mode| Ok(m.cx().rejection_threshold(mode)?.map(f64::from)))
        .collect::<Result<_>>()?;
    let (mut gnn, mut gnn_trained) = (None, Vec::new());
    if options.modes.contains(&Mode::SynapseGnn) {
        let model = GnnRerank(m.cx()).model()?;
        let t = &model.card.training;
        gnn_trained = t.train.conversations.iter().chain(&t.val.conversations).cloned().collect();
        gnn = Some(GnnModel {
            weights: model.source.clone(),
            features: model.card.features,
            weight: rc.gnn.weight.unwrap_or(model.card.weight),
        });
    }
    let gate_trained = match rc.gate {
        Gate::Learned => LearnedGate(m.cx()).model()?.model.training.conversations.clone(),
        _ => Vec::new(),
    };
    Ok((Models { thresholds, gnn }, gnn_trained, gate_trained))
}

/// One conversation's kinds, its [`KindFound`]s and (filled in by [`index_use`]) its index.
type Facts = (BTreeMap<String, usize>, Vec<KindFound>, Option<IndexTally>);

/// Each memory's kinds of turns, and what the kind rule finds of the evidence of its
/// questions in the [`KIND_GROUPS`](figures::KIND_GROUPS).
fn conversation_facts(memories: &[Memory], questions: &[QuestionRun]) -> Vec<Facts> {
    fn of_turns(m: &Memory) -> impl Iterator<Item = Kind> + '_ {
        let (turns, kinds) = (m.turns(), m.kinds());
        (0..turns.len()).filter(move |&e| turns[e] as usize == e).map(move |e| kinds[e])
    }
    memories
        .iter()
        .enumerate()
        .map(|(at, memory)| {
            let mut counts = BTreeMap::new();
            for kind in of_turns(memory) {
                *counts.entry(kind.as_str().to_string()).or_insert(0) += 1;
            }
            let is = |e: u32| memory.kinds()[e as usize];
            let labelled = figures::KIND_GROUPS
                .iter()
                .filter_map(|&(group, kind)| {
                    let asked: Vec<&QuestionRun> = questions
                        .iter()
                        .filter(|q| q.conversation == at && q.group == group && !q.gold.is_empty())
                        .collect();
                    if asked.is_empty() {
                        return None;
                    }
                    let mut turns: Vec<u32> = asked.iter().flat_map(|q| q.gold.iter().copied()).collect();
                    turns.sort_unstable();
                    turns.dedup();
                    Some(KindFound {
                        group: group.to_string(),
                        kind: kind.as_str().to_string(),
                        questions: asked.len(),
                        found: asked.iter().filter(|q| q.gold.iter().any(|&e| is(e) == kind)).count(),
                        turns: turns.len(),
                        turns_found: turns.iter().filter(|&&e| is(e) == kind).count(),
                        predicted: of_turns(memory).filter(|&k| k == kind).count(),
                    })
                })
                .collect();
            (counts, labelled, None)
        })
        .collect()
}

/// Builds the dense index of every memory that gets one (timed, so no question pays for it),
/// measures the recall of the questions' true dense anchors, puts each memory's in its facts;
/// returns the time the indices took to build, ms.
fn index_use(memories: &[&Memory], refs: &[(usize, &Query)], facts: &mut [Facts]) -> f64 {
    use rayon::prelude::*;
    let t0 = Instant::now();
    for (m, fact) in memories.iter().zip(facts.iter_mut()) {
        fact.2 = m.dense_index().map(|i| IndexTally { bytes: i.bytes(), questions: 0, found: 0, wanted: 0 });
    }
    let build_ms = t0.elapsed().as_secs_f64() * 1e3;
    let recall: Vec<(usize, (usize, usize))> =
        refs.par_iter().filter_map(|&(m, q)| memories[m].cx().dense_anchor_recall(q).map(|r| (m, r))).collect();
    for (m, (found, wanted)) in recall {
        if let Some(t) = facts[m].2.as_mut() {
            t.questions += 1;
            t.found += found;
            t.wanted += wanted;
        }
    }
    build_ms
}

/// Share of the true dense anchors (by a scan) that the dense indices give, over the queries
/// `refs` asks of memories that have one (1 when none was wanted), and how many such queries.
pub fn dense_anchor_recall(memories: &[&Memory], refs: &[(usize, &Query)]) -> (f64, usize) {
    use rayon::prelude::*;
    let recall: Vec<(usize, usize)> =
        refs.par_iter().filter_map(|&(m, q)| memories[m].cx().dense_anchor_recall(q)).collect();
    let (found, wanted) = recall.iter().fold((0, 0), |(f, w), &(a, b)| (f + a, w + b));
    (if wanted == 0 { 1.0 } else { found as f64 / wanted as f64 }, recall.len())
}

/// About 10% of the questions, chosen by a hash of their ids (stable across runs and
/// machines, independent of file order).
pub fn in_calibration_split(conversation: &str, question: &str) -> bool {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in conversation.bytes().chain([0]).chain(question.bytes()) {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h.is_multiple_of(10)
}

#[cfg(test)]
mod tests;
