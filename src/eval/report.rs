//! The evaluation's report: the serialisable figures of every mode (recall per group, the
//! gate, context tokens, latency), the gate and learned model an evaluation ran with, and each
//! question's result. Plain data, re-exported by `mod.rs`, which computes it.
//!
//! Must not compute figures, run questions or import `mod.rs` (which re-exports these).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::rates;
use crate::gnn::FeatureSet;
use crate::retrieve::engine::{BatchReport, Choice};

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
    /// Currency: of the questions with two or more gold turns, how many have the newest (the
    /// latest said) ranked above every older one; what a knowledge-update question needs.
    pub newest_first: NewestFirst,
}

/// Of the questions with two or more gold turns, how many rank the newest above every older one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct NewestFirst {
    /// Questions with two or more gold turns.
    pub questions: usize,
    /// Those whose newest gold turn is returned and ranked above every older one returned.
    pub first: usize,
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
    /// The reliability diagram of these confidences (meaningful for the learned gate's, which
    /// are probabilities; not held out on the conversations its model was trained on).
    pub reliability: Vec<rates::ReliabilityBin>,
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
    /// Per group (LoCoMo category name or BEAM ability, and
    /// [`ANSWERABLE_GROUP`](crate::conversation::ANSWERABLE_GROUP)).
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

/// Which device did each part of an evaluation's work: `"cpu"`, `"gpu"`, or `"gpu+cpu"` where
/// some of it ran on each (`Embedder::backend`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Backends {
    /// Embedding the questions (and what this run ingested).
    pub embed: String,
    /// Ranking (dense scan, spreading activation, scores).
    pub rank: String,
    /// The learned relevance's rerank (synapse-gnn): on the GPU where the GPU ranked the mode
    /// (`"cpu"` also when no mode reranks).
    pub rerank: String,
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
    /// Which device did each part of the work.
    pub backends: Backends,
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
    /// The kinds of the memories evaluated.
    pub kinds: KindsUse,
    /// Every reported question's result, when
    /// [`EvalOptions::per_question`](super::EvalOptions::per_question) asked for them (written
    /// apart from the report, one JSON line each).
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

/// The kinds of the evaluated memories (`crate::kind`), and how many of the turns that
/// questions name as a rule or a preference (BEAM's `instruction_following` and
/// `preference_following`) the kind rule finds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KindsUse {
    /// Memories (turns) of each kind, by name.
    pub memories: BTreeMap<String, usize>,
    /// Per group whose evidence states a kind.
    pub labelled: Vec<KindFound>,
}

/// What the kind rule finds of one group's evidence: in one conversation (its
/// [`ConversationRun`](super::run::ConversationRun)'s share), or summed over a run's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KindFound {
    /// The group (`instruction_following`).
    pub group: String,
    /// The kind its evidence states (`instruction`).
    pub kind: String,
    /// Its questions with evidence.
    pub questions: usize,
    /// Of those, how many name at least one turn of that kind: the rule's recall by question.
    pub found: usize,
    /// Distinct evidence turns of the group, and how many of them are of that kind. Evidence
    /// also names follow-up turns that state nothing, so this is a floor of the recall.
    pub turns: usize,
    /// Of `turns`, those of the kind.
    pub turns_found: usize,
    /// Memories of that kind in the conversations evaluated. BEAM names only the rules and
    /// preferences its questions test, so `turns_found / predicted` is a floor of the
    /// precision, not the precision.
    pub predicted: usize,
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
