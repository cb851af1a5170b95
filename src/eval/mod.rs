//! Evaluation: runs every question of a set of stored conversations through the retrieval
//! modes and measures evidence recall@k (on the score order), hit@k, context size, the gate
//! (rejection of adversarial questions, false refusals, ROC AUC of the confidence, optional
//! calibration of τ_gate) and retrieval latency. Produces a [`Report`] (a stable JSON
//! interface) that the binary prints as tables and can draw with [`plot`]. A peer's answers
//! to the same questions ([`peer`]) are scored beside the modes by the same code.
//!
//! This module must not ingest (the caller stores conversations first) nor print. The report's
//! types are in `report.rs`, the unit tests in `tests.rs`.

pub mod gate;
pub mod peer;
pub mod plot;
pub mod rates;
pub mod reader;
mod report;

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use crate::progress::Progress;

use crate::config::Config;
use crate::conversation::ANSWERABLE_GROUP;
use crate::embed::Embedder;
use crate::error::{Error, Result};
use crate::gnn::FeatureSet;
use crate::gnn::train::Example;
use crate::gpu::Backend;
use crate::kind::Kind;
use crate::pipeline::stored_memory;
use crate::retrieve::bm25::Analyzer;
use crate::retrieve::engine::{BatchReport, Engine};
use crate::retrieve::{Gate, GnnRerank, LearnedGate, Memory, Mode, Query, Retrieval, RetrieveConfig, episode_index};
use crate::store::Store;
use peer::{PeerQuestion, PeerRuns, PeerTurn};
pub use rates::auc;
pub use report::{
    Backends, GateReport, GateUse, GnnUse, GroupReport, IndexUse, KindFound, KindsUse, Latency, Mean, ModeReport,
    NewestFirst, QuestionOutcome, QuestionResult, Report,
};

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

/// What one question got in one mode.
#[derive(Debug, Clone)]
struct Outcome {
    ranked: Vec<u32>,
    /// The node that brought each returned episode.
    via: Vec<u32>,
    /// The gate's signal; none for a peer.
    confidence: Option<f64>,
    millis: f64,
    tokens: usize,
    /// Episodes the context budget hands over (the first of `ranked`), and their tokens.
    handed: usize,
    handed_tokens: usize,
}

#[derive(Debug, Clone)]
struct Item {
    memory: usize,
    id: String,
    group: String,
    adversarial: bool,
    gold: Vec<u32>,
    calibration: bool,
    outcomes: Vec<Outcome>,
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
/// `gpu` chooses. On the GPU the synapse modes run as one batch over every conversation, and
/// their latency is the batch's time divided by its questions.
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
    if options.modes.is_empty() {
        return Err(Error::InvalidArgument("no retrieval mode to evaluate".into()));
    }
    let Loaded { memories, questions, tokens: tokens_of, mut embed_ms } =
        load(store, dataset, conversations, embedder, config, progress).await?;
    let (gpu, config) = (&config.gpu, &config.retrieve);
    let mut items: Vec<Item> = Vec::with_capacity(questions.len());
    let mut requests: Vec<(usize, Query)> = Vec::with_capacity(questions.len());
    for q in questions {
        items.push(Item {
            memory: q.memory,
            id: q.id.clone(),
            group: q.group,
            adversarial: q.adversarial,
            gold: q.gold,
            calibration: options.calibrate && in_calibration_split(memories[q.memory].conversation(), q.id.as_str()),
            outcomes: Vec::with_capacity(options.modes.len()),
        });
        requests.push((q.memory, q.query));
    }
    let gnn = match memories.first() {
        Some(m) if options.modes.contains(&Mode::SynapseGnn) => {
            let model = GnnRerank(m.cx()).model()?;
            let t = &model.card.training;
            Some(GnnUse {
                weights: model.source.clone(),
                features: model.card.features,
                weight: config.gnn.weight.unwrap_or(model.card.weight),
                seen: conversations
                    .iter()
                    .filter(|c| t.train.conversations.contains(c) || t.val.conversations.contains(c))
                    .cloned()
                    .collect(),
            })
        }
        _ => None,
    };
    let gate_use = GateUse {
        gate: config.gate.as_str().to_string(),
        model: (config.gate == Gate::Learned).then(|| {
            config.gate_model.as_ref().map_or(crate::knowing::SHIPPED_NAME.to_string(), |p| p.display().to_string())
        }),
        seen: match memories.first() {
            Some(m) if config.gate == Gate::Learned => {
                let trained = &LearnedGate(m.cx()).model()?.model.training.conversations;
                conversations.iter().filter(|c| trained.contains(c)).cloned().collect()
            }
            _ => Vec::new(),
        },
    };
    let kinds = kinds_use(&memories, &items);
    let engine = Engine::new(memories, gpu)?;
    let refs: Vec<(usize, &Query)> = requests.iter().map(|(m, q)| (*m, q)).collect();
    let index = if engine.choice().backend == Backend::Cpu { index_use(&engine.memories(), &refs) } else { None };
    let mut batched = BTreeMap::new();
    // What memory `m` returned (episodes best first) makes of one question; the budget cuts it
    // as it cuts every search.
    let returned = |m: usize, episodes: &[u32], via: Vec<u32>, confidence: Option<f64>, millis: f64| {
        let hit_tokens: Vec<usize> = episodes.iter().map(|&e| tokens_of[m][e as usize]).collect();
        let tokens = hit_tokens.iter().sum();
        let handed =
            Retrieval::budget_run(episodes.len(), config.max_context_tokens, hit_tokens.iter().map(|&t| Ok(t)))?;
        let handed_tokens = hit_tokens[..handed].iter().sum();
        // Ranked by turn: a passage stands for the turn evidence names.
        let turns = engine.memory(m)?.turns();
        let ranked: Vec<u32> = episodes.iter().map(|&e| turns[e as usize]).collect();
        Ok::<_, Error>(Outcome { ranked, via, confidence, millis, tokens, handed, handed_tokens })
    };
    for &mode in &options.modes {
        let outcome = |m: usize, r: &Retrieval, millis: f64| -> Result<Outcome> {
            let episodes: Vec<u32> = r.hits.iter().map(|h| h.episode).collect();
            returned(m, &episodes, r.hits.iter().map(|h| h.node).collect(), Some(r.confidence as f64), millis)
        };
        if engine.choice().backend == Backend::Gpu && mode.is_synapse() && !refs.is_empty() {
            let t0 = Instant::now();
            let (results, report) = engine.retrieve_batch(&refs, mode)?;
            let millis = t0.elapsed().as_secs_f64() * 1e3 / refs.len() as f64;
            for ((item, r), &(m, _)) in items.iter_mut().zip(&results).zip(&refs) {
                item.outcomes.push(outcome(m, r, millis)?);
            }
            batched.insert(mode.as_str().to_string(), report);
        } else {
            for (item, &(m, q)) in items.iter_mut().zip(&refs) {
                let t0 = Instant::now();
                let r = engine.memory(m)?.retrieve(q, mode)?;
                let millis = t0.elapsed().as_secs_f64() * 1e3;
                item.outcomes.push(outcome(m, &r, millis)?);
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
        for item in items.iter_mut() {
            let memory = engine.memory(item.memory)?;
            let (episodes, millis) =
                options.peers.episodes(k, memory, &episode_ids[item.memory], &item.id, config.top_k)?;
            item.outcomes.push(returned(item.memory, &episodes, Vec::new(), None, millis)?);
        }
    }
    // Where the learned rerank ran: the GPU's batches count theirs; a mode the CPU ranked
    // reranks there.
    let rerank = crate::embed::backend_name(
        batched.values().map(|b: &BatchReport| b.reranked_on_gpu as u64).sum(),
        batched.values().map(|b: &BatchReport| b.reranked_on_cpu as u64).sum(),
    );
    let mut columns: Vec<String> = options.modes.iter().map(|m| m.as_str().to_string()).collect();
    columns.extend(options.peers.runs.iter().map(|(name, _)| name.clone()));
    let (calibration, reported): (Vec<&Item>, Vec<&Item>) = items.iter().partition(|i| i.calibration);
    let mut modes = BTreeMap::new();
    let mut thresholds = Vec::with_capacity(options.modes.len());
    for (m, &mode) in options.modes.iter().enumerate() {
        let threshold = if options.calibrate {
            calibrate(&calibration, m, options.max_false_refusal)
        } else if reported.is_empty() {
            None
        } else {
            match engine.memories().is_empty() {
                false => engine.cx(0)?.rejection_threshold(mode)?.map(f64::from),
                true => None,
            }
        };
        thresholds.push(threshold);
        let mut report = mode_report(&reported, m, threshold, config.top_k);
        report.gpu_batch = batched.remove(mode.as_str());
        modes.insert(mode.as_str().to_string(), report);
    }
    for (m, name) in columns.iter().enumerate().skip(options.modes.len()) {
        if modes.contains_key(name) {
            return Err(Error::InvalidArgument(format!("peer mode {name} is named twice")));
        }
        thresholds.push(None);
        modes.insert(name.clone(), mode_report(&reported, m, None, config.top_k));
    }
    let per_question = if options.per_question {
        {
            let memories = engine.memories();
            reported.iter().map(|item| question_result(item, &memories, &columns, &thresholds)).collect()
        }
    } else {
        Vec::new()
    };
    Ok(Report {
        dataset: dataset.to_string(),
        conversations: conversations.to_vec(),
        questions: reported.len(),
        calibration_questions: calibration.len(),
        top_k: config.top_k,
        max_context_tokens: config.max_context_tokens,
        tokenizer: TOKENIZER.to_string(),
        query_embedding_ms: latency(&mut embed_ms),
        backend: engine.choice().clone(),
        backends: Backends {
            embed: embedder.backend().to_string(),
            rank: engine.choice().backend.as_str().to_string(),
            rerank: rerank.to_string(),
        },
        modes,
        mode_order: columns,
        gnn,
        gate: gate_use,
        index,
        kinds,
        per_question,
    })
}

/// One reported question's result in every mode, by turn id.
fn question_result(
    item: &Item,
    memories: &[&Memory],
    columns: &[String],
    thresholds: &[Option<f64>],
) -> QuestionResult {
    let memory = &memories[item.memory];
    let turn = |e: &u32| memory.episodes()[*e as usize].turn_id.clone();
    let modes = columns
        .iter()
        .zip(&item.outcomes)
        .zip(thresholds)
        .map(|((mode, o), threshold)| {
            let outcome = QuestionOutcome {
                returned: o.ranked.iter().map(turn).collect(),
                via: o.via.iter().map(|&n| memory.node_name(n)).collect(),
                recall_10: (!item.gold.is_empty()).then(|| {
                    let found = item.gold.iter().filter(|g| o.ranked.iter().take(10).any(|r| r == *g)).count();
                    found as f64 / item.gold.len() as f64
                }),
                confidence: o.confidence,
                rejected: threshold.zip(o.confidence).map(|(t, c)| c < t),
            };
            (mode.clone(), outcome)
        })
        .collect();
    QuestionResult {
        conversation: memory.conversation().to_string(),
        id: item.id.clone(),
        group: item.group.clone(),
        adversarial: item.adversarial,
        gold: item.gold.iter().map(turn).collect(),
        modes,
    }
}

/// The groups whose evidence is the turn that states a kind: BEAM's abilities that test a
/// standing instruction and a stated preference.
const KIND_GROUPS: [(&str, Kind); 2] =
    [("instruction_following", Kind::Instruction), ("preference_following", Kind::Preference)];

/// The kinds of `memories`' turns, and what the kind rule finds of the evidence of the
/// [`KIND_GROUPS`] among `items`.
fn kinds_use(memories: &[Memory], items: &[Item]) -> KindsUse {
    fn of_turns(m: &Memory) -> impl Iterator<Item = Kind> + '_ {
        let (turns, kinds) = (m.turns(), m.kinds());
        (0..turns.len()).filter(move |&e| turns[e] as usize == e).map(move |e| kinds[e])
    }
    let mut counts = BTreeMap::new();
    for kind in memories.iter().flat_map(of_turns) {
        *counts.entry(kind.as_str().to_string()).or_insert(0) += 1;
    }
    let labelled = KIND_GROUPS
        .iter()
        .filter_map(|&(group, kind)| {
            let asked: Vec<&Item> = items.iter().filter(|i| i.group == group && !i.gold.is_empty()).collect();
            if asked.is_empty() {
                return None;
            }
            let is = |m: usize, e: u32| memories[m].kinds()[e as usize] == kind;
            let mut turns: Vec<(usize, u32)> =
                asked.iter().flat_map(|i| i.gold.iter().map(|&e| (i.memory, e))).collect();
            turns.sort_unstable();
            turns.dedup();
            let mut evaluated: Vec<usize> = asked.iter().map(|i| i.memory).collect();
            evaluated.sort_unstable();
            evaluated.dedup();
            Some(KindFound {
                group: group.to_string(),
                kind: kind.as_str().to_string(),
                questions: asked.len(),
                found: asked.iter().filter(|i| i.gold.iter().any(|&e| is(i.memory, e))).count(),
                turns: turns.len(),
                turns_found: turns.iter().filter(|&&(m, e)| is(m, e)).count(),
                predicted: evaluated.iter().flat_map(|&m| of_turns(&memories[m])).filter(|&k| k == kind).count(),
            })
        })
        .collect();
    KindsUse { memories: counts, labelled }
}

/// Builds the dense index of every memory that gets one (timed, so no question pays for it)
/// and measures the recall of the questions' true dense anchors; `None` when no memory has one.
fn index_use(memories: &[&Memory], refs: &[(usize, &Query)]) -> Option<IndexUse> {
    let t0 = Instant::now();
    let bytes: Vec<usize> = memories.iter().filter_map(|m| m.dense_index().map(|i| i.bytes())).collect();
    if bytes.is_empty() {
        return None;
    }
    let build_ms = t0.elapsed().as_secs_f64() * 1e3;
    let (anchor_recall, questions) = dense_anchor_recall(memories, refs);
    Some(IndexUse { memories: bytes.len(), bytes: bytes.iter().sum(), build_ms, questions, anchor_recall })
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

/// The threshold rejecting the most adversarial questions of the split while refusing at
/// most `max_false_refusal` of its answerable ones (the lowest such threshold on ties).
fn calibrate(items: &[&Item], m: usize, max_false_refusal: f64) -> Option<f64> {
    let (answerable, adversarial) = confidences(items, m)?;
    if adversarial.is_empty() || answerable.is_empty() {
        return None;
    }
    let mut candidates: Vec<f64> = adversarial.iter().chain(&answerable).copied().collect();
    candidates.sort_by(f64::total_cmp);
    candidates.dedup();
    let mut best: Option<(usize, f64)> = None;
    // Rejecting means confidence < threshold; a candidate just above a value rejects it.
    for c in candidates.iter().map(|c| next_up(*c)).chain([candidates[0]]) {
        let refused = answerable.iter().filter(|&&x| x < c).count() as f64 / answerable.len() as f64;
        if refused > max_false_refusal {
            continue;
        }
        let rejected = adversarial.iter().filter(|&&x| x < c).count();
        if best.is_none_or(|(r, t)| rejected > r || (rejected == r && c < t)) {
            best = Some((rejected, c));
        }
    }
    best.map(|(_, t)| t)
}

/// Mode `m`'s confidences of the answerable and of the adversarial questions of `items`; none
/// for a column without a gate (a peer).
fn confidences(items: &[&Item], m: usize) -> Option<(Vec<f64>, Vec<f64>)> {
    let of = |adversarial: bool| -> Option<Vec<f64>> {
        items.iter().filter(|i| i.adversarial == adversarial).map(|i| i.outcomes[m].confidence).collect()
    };
    Some((of(false)?, of(true)?))
}

fn next_up(x: f64) -> f64 {
    if x.is_finite() { x + x.abs().max(1e-12) * 1e-9 } else { x }
}

/// The gate's figures for these confidences, rejecting below `threshold`.
fn gate_report(answerable: &[f64], adversarial: &[f64], threshold: Option<f64>) -> GateReport {
    let rate =
        |xs: &[f64], t: f64| (!xs.is_empty()).then(|| xs.iter().filter(|&&x| x < t).count() as f64 / xs.len() as f64);
    GateReport {
        threshold,
        rejection_rate: threshold.and_then(|t| rate(adversarial, t)),
        false_refusal_rate: threshold.and_then(|t| rate(answerable, t)),
        auc: auc(answerable, adversarial),
        adversarial: adversarial.len(),
        answerable: answerable.len(),
        at: rates::GATE_LIMITS
            .iter()
            .map(|&limit| {
                let t = crate::knowing::threshold_for(answerable, limit);
                rates::OperatingPoint {
                    max_false_refusal: limit,
                    refused: rate(answerable, t).unwrap_or(0.0),
                    rejected: rate(adversarial, t).unwrap_or(0.0),
                }
            })
            .collect(),
        curve: rates::rates_by_threshold(answerable, adversarial),
        reliability: rates::reliability(answerable, adversarial),
    }
}

fn mode_report(items: &[&Item], m: usize, threshold: Option<f64>, top_k: usize) -> ModeReport {
    let mut by_group: BTreeMap<String, Vec<&Item>> = BTreeMap::new();
    for item in items.iter().filter(|i| !i.adversarial && !i.gold.is_empty()) {
        by_group.entry(item.group.clone()).or_default().push(item);
        by_group.entry(ANSWERABLE_GROUP.to_string()).or_default().push(item);
    }
    let groups = by_group.into_iter().map(|(g, list)| (g, group_report(&list, m, top_k))).collect();
    let gate = confidences(items, m).map_or_else(GateReport::default, |(answerable, adversarial)| {
        gate_report(&answerable, &adversarial, threshold)
    });
    let mut tokens: Vec<f64> = items.iter().map(|i| i.outcomes[m].tokens as f64).collect();
    let mut millis: Vec<f64> = items.iter().map(|i| i.outcomes[m].millis).collect();
    let l = latency(&mut tokens);
    let mut handed_tokens: Vec<f64> = items.iter().map(|i| i.outcomes[m].handed_tokens as f64).collect();
    let mut handed: Vec<f64> = items.iter().map(|i| i.outcomes[m].handed as f64).collect();
    let (ht, h) = (latency(&mut handed_tokens), latency(&mut handed));
    ModeReport {
        groups,
        gate,
        context_tokens: Mean { mean: l.mean, p50: l.p50 },
        handed_tokens: Mean { mean: ht.mean, p50: ht.p50 },
        handed: Mean { mean: h.mean, p50: h.p50 },
        latency_ms: latency(&mut millis),
        gpu_batch: None,
    }
}

fn group_report(items: &[&Item], m: usize, top_k: usize) -> GroupReport {
    let n = items.len();
    let mut curve = vec![0.0; top_k];
    let mut hit_10 = 0.0;
    let mut handed_recall = 0.0;
    let mut newest_first = NewestFirst::default();
    for item in items {
        let ranked = &item.outcomes[m].ranked;
        if let Some(&newest) = item.gold.iter().max()
            && item.gold.len() >= 2
        {
            newest_first.questions += 1;
            let rank = |e: &u32| ranked.iter().position(|r| r == e).unwrap_or(usize::MAX);
            let at = rank(&newest);
            if at != usize::MAX && item.gold.iter().all(|g| *g == newest || rank(g) > at) {
                newest_first.first += 1;
            }
        }
        // Each gold turn counts once, however many of its passages are returned.
        let mut found: Vec<u32> = Vec::new();
        for (k, slot) in curve.iter_mut().enumerate() {
            if let Some(e) = ranked.get(k)
                && item.gold.contains(e)
                && !found.contains(e)
            {
                found.push(*e);
            }
            let found = found.len();
            *slot += found as f64 / item.gold.len() as f64;
        }
        if ranked.iter().take(10).any(|e| item.gold.contains(e)) {
            hit_10 += 1.0;
        }
        let handed = &ranked[..item.outcomes[m].handed.min(ranked.len())];
        let mut found: Vec<&u32> = handed.iter().filter(|e| item.gold.contains(e)).collect();
        found.sort_unstable();
        found.dedup();
        handed_recall += found.len() as f64 / item.gold.len() as f64;
    }
    let denominator = n.max(1) as f64;
    curve.iter_mut().for_each(|x| *x /= denominator);
    let at = |k: usize| curve.get(k - 1).or(curve.last()).copied().unwrap_or(0.0);
    GroupReport {
        n,
        recall_5: at(5),
        recall_10: at(10),
        recall_25: at(25),
        recall_30: at(30),
        hit_10: hit_10 / denominator,
        recall_handed: handed_recall / denominator,
        recall_curve: curve,
        newest_first,
    }
}

/// Nearest-rank percentiles and mean (all 0 for no values).
pub fn latency(values: &mut [f64]) -> Latency {
    if values.is_empty() {
        return Latency { p50: 0.0, p95: 0.0, mean: 0.0 };
    }
    values.sort_by(f64::total_cmp);
    Latency {
        p50: percentile(values, 0.5),
        p95: percentile(values, 0.95),
        mean: values.iter().sum::<f64>() / values.len() as f64,
    }
}

/// The nearest-rank `q`-quantile of ascending `sorted` values (0 when there are none).
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests;
