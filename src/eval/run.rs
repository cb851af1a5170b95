//! What an evaluation measured, before any figure is computed from it: the settings it ran
//! with, what the models it loaded give, where its work ran, each conversation's facts and
//! every question's outcome in every column. `figures.rs` computes the [`Report`] from a
//! [`Run`] (the only place any figure is computed); a shard (`eval --shard`) writes its run
//! into its part (`shard.rs`), and the parts' runs joined in conversation order are the run of
//! the whole, figure for figure.
//!
//! Plain data. Must not compute figures nor import `mod.rs` (which re-exports these). The
//! values figures depend on (confidences, thresholds, the calibration's limit) are written
//! exactly ([`super::exact`]); timings are plain JSON numbers.
//!
//! [`Report`]: super::report::Report

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::exact;
use super::report::KindFound;
use crate::embed::{EmbedText, Forward, Precision};
use crate::gnn::FeatureSet;
use crate::gpu::Backend;
use crate::graph::ArchiveConfig;
use crate::retrieve::RetrieveConfig;
use crate::retrieve::engine::{BatchReport, Choice};

/// An evaluation's measurements: everything its report is computed from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// How it ran: the same in every shard of one run.
    pub settings: Settings,
    /// What the models give (read through the first memory; none without one).
    pub models: Models,
    /// Where and how its work ran: facts of the process, not of the data.
    pub process: Process,
    /// The conversations evaluated, in the order asked for.
    pub conversations: Vec<ConversationRun>,
    /// Every question, conversation by conversation.
    pub questions: Vec<QuestionRun>,
}

/// The settings of a run, which every shard of it shares.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// `locomo` or `beam`.
    pub dataset: String,
    /// The report's columns: the modes in the order asked for, then the peers.
    pub columns: Vec<String>,
    /// How many of `columns` are retrieval modes (the rest are peers).
    pub modes: usize,
    /// Whether τ_gate is calibrated on the calibration split.
    pub calibrate: bool,
    /// The calibration's limit on false refusals.
    #[serde(with = "exact::float")]
    pub max_false_refusal: f64,
    /// What context tokens are counted with.
    pub tokenizer: String,
    /// `learned` or `activation`.
    pub gate: String,
    /// The learned gate's model, under the learned gate.
    pub gate_model: Option<String>,
    /// The backend asked for (`gpu.backend`).
    pub backend: Backend,
    /// What of the embedder changes a vector.
    pub embed: EmbedSettings,
    /// Retrieval's settings.
    pub retrieve: RetrieveConfig,
    /// Archival's (which memories a loaded graph keeps active).
    pub archive: ArchiveConfig,
}

/// The embedder's settings that change a vector.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmbedSettings {
    /// The forward pass.
    pub forward: Forward,
    /// Its arithmetic.
    pub precision: Precision,
    /// What of a turn is embedded.
    pub text: EmbedText,
    /// Word pieces kept of a text.
    pub max_seq_len: usize,
}

/// What the models of a run give, the same for every memory: read through the first one, so
/// a run over no conversation has none.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Models {
    /// Each mode's τ_gate without calibration (the gate's own; none for a mode without one).
    #[serde(with = "exact::options")]
    pub thresholds: Vec<Option<f64>>,
    /// The learned relevance, when `synapse-gnn` ran.
    pub gnn: Option<GnnModel>,
}

/// The learned relevance `synapse-gnn` used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GnnModel {
    /// Its weights.
    pub weights: String,
    /// Its features.
    pub features: FeatureSet,
    /// The weight of its signal.
    #[serde(with = "exact::single")]
    pub weight: f32,
}

/// Where a run's work ran and what it cost apart from the questions: facts of the process
/// (or processes, for a merged run), which the report carries but no figure depends on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Process {
    /// The backend retrieval ran on, and why.
    pub backend: Choice,
    /// Where the questions (and what the process ingested) were embedded: `cpu`, `gpu`,
    /// `gpu+cpu`.
    pub embed: String,
    /// Where retrieval ranked: `cpu`, `gpu`, or `gpu+cpu` for shards that differed.
    pub rank: String,
    /// How the GPU ran each mode it ran, by mode.
    pub batches: BTreeMap<String, BatchReport>,
    /// Time to build the dense indices, ms.
    pub index_build_ms: f64,
}

/// One evaluated conversation's facts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConversationRun {
    /// Its id.
    pub id: String,
    /// Its turns of each kind, by name.
    pub kinds: BTreeMap<String, usize>,
    /// What the kind rule finds of its questions' evidence, per group whose evidence states a
    /// kind (those it has questions with evidence of).
    pub labelled: Vec<KindFound>,
    /// Its dense index, when retrieval ran on the CPU and it has one.
    pub index: Option<IndexTally>,
    /// Whether the learned relevance was trained or validated on it.
    pub gnn_seen: bool,
    /// Whether the learned gate's model was trained on it.
    pub gate_seen: bool,
}

/// One conversation's dense index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexTally {
    /// Its size, bytes.
    pub bytes: usize,
    /// Questions asked of it.
    pub questions: usize,
    /// Of their true dense anchors, how many the index gave.
    pub found: usize,
    /// Their true dense anchors.
    pub wanted: usize,
}

/// One question and what it got in every column.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuestionRun {
    /// Its conversation: the index in [`Run::conversations`].
    pub conversation: usize,
    /// Question id.
    pub id: String,
    /// Reporting group.
    pub group: String,
    /// Whether it has no answer in the conversation.
    pub adversarial: bool,
    /// Gold evidence turns (the episode index of each turn's first passage).
    pub gold: Vec<u32>,
    /// Their turn ids.
    pub gold_turns: Vec<String>,
    /// Whether it is in the calibration split (used only to calibrate τ_gate).
    pub calibration: bool,
    /// Time to embed it, ms.
    pub embed_ms: f64,
    /// Per column of [`Settings::columns`].
    pub outcomes: Vec<Outcome>,
}

/// What one question got in one column.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// The turns returned, best first (as [`QuestionRun::gold`] names them).
    pub ranked: Vec<u32>,
    /// Their turn ids.
    pub returned: Vec<String>,
    /// What brought each (empty for a peer).
    pub via: Vec<String>,
    /// The gate's signal; none for a peer.
    #[serde(with = "exact::option")]
    pub confidence: Option<f64>,
    /// Retrieval time, ms.
    pub millis: f64,
    /// Tokens of the returned episodes.
    pub tokens: usize,
    /// Episodes the context budget hands over (the first of `ranked`).
    pub handed: usize,
    /// Their tokens.
    pub handed_tokens: usize,
}
