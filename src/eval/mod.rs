//! Evaluation: runs every question of a set of stored conversations through the retrieval
//! modes and measures evidence recall@k (on the score order), hit@k, context size, the gate
//! (rejection of adversarial questions, false refusals, ROC AUC of the confidence, optional
//! calibration of τ_gate) and retrieval latency. Produces a [`Report`] (a stable JSON
//! interface) that the binary prints as tables and can draw with [`plot`]. A peer's answers
//! to the same questions ([`peer`]) are scored beside the modes by the same code.
//!
//! This module must not ingest (the caller stores conversations first) nor print.

pub mod gate;
pub mod peer;
pub mod plot;
pub mod rates;

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use indicatif::ProgressBar;
use serde::Serialize;

use crate::config::Config;
use crate::conversation::ANSWERABLE_GROUP;
use crate::embed::Embedder;
use crate::error::{Error, Result};
use crate::gnn::FeatureSet;
use crate::gnn::train::Example;
use crate::gpu::Backend;
use crate::pipeline::stored_memory;
use crate::retrieve::bm25::Analyzer;
use crate::retrieve::engine::{BatchReport, Choice, Engine};
use crate::retrieve::{Gate, Memory, Mode, Query, Retrieval, episode_index};
use crate::store::Store;
use peer::{PeerQuestion, PeerRuns, PeerTurn};
pub use rates::auc;

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

/// Recall figures of one group of questions in one mode.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupReport {
    /// Questions in the group.
    pub n: usize,
    /// Mean fraction of gold evidence turns among the first 5 returned.
    #[serde(rename = "recall@5")]
    pub recall_5: f64,
    /// … among the first 10.
    #[serde(rename = "recall@10")]
    pub recall_10: f64,
    /// … among the first 25.
    #[serde(rename = "recall@25")]
    pub recall_25: f64,
    /// … among the first 30.
    #[serde(rename = "recall@30")]
    pub recall_30: f64,
    /// Fraction of questions with any gold turn among the first 10.
    #[serde(rename = "hit@10")]
    pub hit_10: f64,
    /// Mean fraction of gold evidence turns among those the context budget hands over
    /// (`retrieve.max_context_tokens`; all `top_k` without a budget).
    pub recall_handed: f64,
    /// Recall@k for k = 1 … top_k.
    pub recall_curve: Vec<f64>,
}

/// The uncertainty gate of one mode.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct GateReport {
    /// τ_gate used (null for a baseline without calibration: it has no gate).
    pub threshold: Option<f64>,
    /// Fraction of adversarial questions rejected.
    pub rejection_rate: Option<f64>,
    /// Fraction of answerable questions rejected.
    pub false_refusal_rate: Option<f64>,
    /// ROC AUC of the confidence separating answerable (higher) from adversarial questions.
    pub auc: Option<f64>,
    /// Adversarial questions counted.
    pub adversarial: usize,
    /// Answerable questions counted.
    pub answerable: usize,
    /// What a threshold chosen on these questions' own answerable confidences rejects, at
    /// each limit of [`rates::GATE_LIMITS`] on false refusals (the ROC curve's operating
    /// points, not held out; `train-gate` reports them cross-validated).
    pub at: Vec<rates::OperatingPoint>,
    /// The rates at every threshold τ of [`rates::TAU_STEPS`]: (τ, answerable refused,
    /// adversarial rejected) (meaningful where confidences lie in [0, 1], as the learned
    /// gate's do).
    pub curve: Vec<(f64, f64, f64)>,
}

/// The gate an evaluation ran with.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GateUse {
    /// `learned` or `activation`.
    pub gate: String,
    /// The learned gate's model (its file, or the shipped one).
    pub model: Option<String>,
    /// Conversations evaluated that the learned gate's model was trained on: its figures
    /// there are not held out.
    pub seen: Vec<String>,
}

/// Mean and median of a per-question quantity.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Mean {
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
}

/// Percentiles of a latency, milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Latency {
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// Mean.
    pub mean: f64,
}

/// Everything measured for one mode.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModeReport {
    /// Per group (LoCoMo category name or BEAM ability, and [`ANSWERABLE_GROUP`]).
    pub groups: BTreeMap<String, GroupReport>,
    /// The gate.
    pub gate: GateReport,
    /// Tokens of the returned episodes per question (the top_k, whatever the gate says).
    pub context_tokens: Mean,
    /// Tokens the context budget hands over per question, and how many episodes.
    pub handed_tokens: Mean,
    /// Episodes handed over per question.
    pub handed: Mean,
    /// Retrieval time per question, query embedding excluded (on the GPU: the batch's time
    /// divided by its questions, so p50 = p95 = mean).
    pub latency_ms: Latency,
    /// How the GPU ran the mode, when it did (one batch over every question).
    pub gpu_batch: Option<BatchReport>,
}

/// The result of an evaluation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// `locomo` or `beam`.
    pub dataset: String,
    /// Conversations evaluated.
    pub conversations: Vec<String>,
    /// Questions reported on (after the calibration split, if any).
    pub questions: usize,
    /// Questions used only to calibrate τ_gate.
    pub calibration_questions: usize,
    /// Episodes returned per query.
    pub top_k: usize,
    /// The context budget, in tokens (`retrieve.max_context_tokens`; null: none).
    pub max_context_tokens: Option<usize>,
    /// What context tokens are counted with.
    pub tokenizer: String,
    /// Query embedding time per question, reported apart from retrieval.
    pub query_embedding_ms: Latency,
    /// The backend retrieval ran on, and why.
    pub backend: Choice,
    /// Per mode, by CLI name.
    pub modes: BTreeMap<String, ModeReport>,
    /// Mode names in the order they were asked for.
    pub mode_order: Vec<String>,
    /// The learned relevance, when `synapse-gnn` ran.
    pub gnn: Option<GnnUse>,
    /// The gate.
    pub gate: GateUse,
    /// The dense index, when retrieval ran on the CPU over memories large enough for one.
    pub index: Option<IndexUse>,
    /// Every reported question's result, when [`EvalOptions::per_question`] asked for them
    /// (written apart from the report, one JSON line each).
    #[serde(skip)]
    pub per_question: Vec<QuestionResult>,
}

/// What one question got: its gold turns and, per mode, the turns returned.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QuestionResult {
    /// Its conversation.
    pub conversation: String,
    /// Question id.
    pub id: String,
    /// Reporting group.
    pub group: String,
    /// Whether it has no answer in the conversation.
    pub adversarial: bool,
    /// Gold evidence turn ids.
    pub gold: Vec<String>,
    /// Per mode, by CLI name.
    pub modes: BTreeMap<String, QuestionOutcome>,
}

/// One question's result in one mode.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QuestionOutcome {
    /// Turn ids returned, best first.
    pub returned: Vec<String>,
    /// What brought each: the turn id of the episode (`<turn>#<k>` for a later passage), or
    /// `concept:<label>` for a concept standing in for it (empty for a peer).
    pub via: Vec<String>,
    /// Fraction of the gold turns among the first 10 returned (null without gold).
    #[serde(rename = "recall@10")]
    pub recall_10: Option<f64>,
    /// The gate's signal (null for a peer, which gives none).
    pub confidence: Option<f64>,
    /// Whether the mode's gate (when it has one) rejects the question.
    pub rejected: Option<bool>,
}

/// How the dense index served an evaluation (`retrieve::index`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IndexUse {
    /// Memories searched through an index.
    pub memories: usize,
    /// Their size, bytes.
    pub bytes: usize,
    /// Time to build the indices, before any question ran.
    pub build_ms: f64,
    /// Questions asked of those memories.
    pub questions: usize,
    /// Share of the questions' true dense anchors (the top `anchor_k` by a scan of every
    /// node) the index gave (1 unless its bounds are wrong).
    pub anchor_recall: f64,
}

/// Which learned model `synapse-gnn` used.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GnnUse {
    /// Its weights.
    pub weights: String,
    /// Its features.
    pub features: FeatureSet,
    /// The weight of its signal.
    pub weight: f32,
    /// Conversations of this evaluation it was trained or validated on (its figures on them
    /// are not held out).
    pub seen: Vec<String>,
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
    progress: &ProgressBar,
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
    // Synapse's ranking as deep as the rerank pool: the candidates the rerank will see.
    let memories = loaded.memories.into_iter().map(Memory::ranking_the_pool).collect();
    let engine = Engine::on_cpu_because(memories, "training examples rank on the CPU reference".into());
    let asked: Vec<&Labelled> = loaded.questions.iter().filter(|q| !q.adversarial && !q.gold.is_empty()).collect();
    let requests: Vec<(usize, &Query)> = asked.iter().map(|q| (q.memory, &q.query)).collect();
    let (results, _) = engine.retrieve_batch(&requests, Mode::Synapse)?;
    asked
        .par_iter()
        .zip(results.par_iter())
        .map(|(q, r)| {
            let memory = &engine.memories()[q.memory];
            let (candidates, embeddings) = memory.gnn_input(&q.query, r);
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
                memory.cold_start(),
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
    progress: &ProgressBar,
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
            let model = m.relevance()?;
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
                let trained = &m.gate_model()?.training.conversations;
                conversations.iter().filter(|c| trained.contains(c)).cloned().collect()
            }
            _ => Vec::new(),
        },
    };
    let engine = Engine::new(memories, gpu)?;
    let refs: Vec<(usize, &Query)> = requests.iter().map(|(m, q)| (*m, q)).collect();
    let index = if engine.choice().backend == Backend::Cpu { index_use(engine.memories(), &refs) } else { None };
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
        let turns = engine.memories()[m].turns();
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
                let r = engine.memories()[m].retrieve(q, mode)?;
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
            let memory = &engine.memories()[item.memory];
            let (episodes, millis) =
                options.peers.episodes(k, memory, &episode_ids[item.memory], &item.id, config.top_k)?;
            item.outcomes.push(returned(item.memory, &episodes, Vec::new(), None, millis)?);
        }
    }
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
            match engine.memories().first() {
                Some(memory) => memory.rejection_threshold(mode)?.map(f64::from),
                None => None,
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
        reported.iter().map(|item| question_result(item, engine.memories(), &columns, &thresholds)).collect()
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
        modes,
        mode_order: columns,
        gnn,
        gate: gate_use,
        index,
        per_question,
    })
}

/// One reported question's result in every mode, by turn id.
fn question_result(item: &Item, memories: &[Memory], columns: &[String], thresholds: &[Option<f64>]) -> QuestionResult {
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

/// Builds the dense index of every memory that gets one (timed, so no question pays for it)
/// and measures the recall of the questions' true dense anchors; `None` when no memory has one.
fn index_use(memories: &[Memory], refs: &[(usize, &Query)]) -> Option<IndexUse> {
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
pub fn dense_anchor_recall(memories: &[Memory], refs: &[(usize, &Query)]) -> (f64, usize) {
    use rayon::prelude::*;
    let recall: Vec<(usize, usize)> =
        refs.par_iter().filter_map(|&(m, q)| memories[m].dense_anchor_recall(q)).collect();
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
    for item in items {
        let ranked = &item.outcomes[m].ranked;
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
mod tests {
    use super::*;

    fn item(adversarial: bool, gold: Vec<u32>, ranked: Vec<u32>, confidence: f64) -> Item {
        Item {
            memory: 0,
            id: "q".into(),
            group: "g".into(),
            adversarial,
            gold,
            calibration: false,
            outcomes: vec![Outcome {
                via: ranked.clone(),
                handed: ranked.len(),
                ranked,
                confidence: Some(confidence),
                millis: 1.0,
                tokens: 10,
                handed_tokens: 10,
            }],
        }
    }

    #[test]
    fn recall_is_the_fraction_of_gold_turns_returned() {
        let a = item(false, vec![3, 7], (0..30).collect(), 0.5); // 3 at rank 4, 7 at rank 8
        let b = item(false, vec![40], (0..30).collect(), 0.5); // never returned
        let r = group_report(&[&a, &b], 0, 30);
        assert_eq!(r.n, 2);
        assert_eq!(r.recall_curve[3], 0.25); // k = 4: half of a's gold, none of b's
        assert_eq!(r.recall_5, 0.25);
        assert_eq!(r.recall_10, 0.5);
        assert_eq!(r.hit_10, 0.5);
    }

    #[test]
    fn a_turn_returned_as_several_passages_counts_once() {
        // Turn 3's passages are ranked 1st and 2nd (both mapped to 3); turn 7 never.
        let a = item(false, vec![3, 7], vec![3, 3, 1, 2], 0.5);
        let r = group_report(&[&a], 0, 4);
        assert_eq!(r.recall_curve, vec![0.5, 0.5, 0.5, 0.5]);
        assert_eq!(r.hit_10, 1.0);
    }

    #[test]
    fn calibration_keeps_false_refusals_under_the_limit() {
        // 20 answerable at 0.3 … 0.49 plus one outlier at 0.05; adversarial at 0.1, 0.2, 0.35.
        let mut items: Vec<Item> = (0..20).map(|i| item(false, vec![], vec![], 0.3 + i as f64 * 0.01)).collect();
        items.push(item(false, vec![], vec![], 0.05));
        for c in [0.1, 0.2, 0.35] {
            items.push(item(true, vec![], vec![], c));
        }
        let refs: Vec<&Item> = items.iter().collect();
        // 1 of 21 answerable (4.8%) may be refused: the threshold rises just above 0.3's neighbours
        // only while at most one is below it.
        let t = calibrate(&refs, 0, 0.05).unwrap();
        assert!(t > 0.2 && t <= 0.3, "{t}");
        let t = calibrate(&refs, 0, 0.0).unwrap();
        assert!(t > 0.0 && t <= 0.05, "{t}");
    }

    #[test]
    fn split_is_about_a_tenth_and_stable() {
        let n = (0..5000).filter(|i| in_calibration_split("conv-1", &format!("q{i}"))).count();
        assert!((400..600).contains(&n), "{n}");
        assert_eq!(in_calibration_split("conv-1", "q7"), in_calibration_split("conv-1", "q7"));
    }

    #[test]
    fn locomo_categories_are_named() {
        assert_eq!(group_name("locomo", "1"), "multi-hop");
        assert_eq!(group_name("locomo", "2"), "temporal");
        assert_eq!(group_name("beam", "temporal_reasoning"), "temporal_reasoning");
    }
}
