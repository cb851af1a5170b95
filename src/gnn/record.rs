//! What a relevance model's card records of its training: the options, each split's data,
//! every epoch, the validation recall per group. Plain data, in every build (a card is read
//! with its weights); the training that fills it is `train`'s, under the `lab` feature.
//! Must not train.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::features::FeatureSet;

/// How to train.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainOptions {
    /// Features.
    pub features: FeatureSet,
    /// Width of the GraphSAGE layers (the seed's 128).
    pub hidden: usize,
    /// Most epochs.
    pub epochs: usize,
    /// Stop after this many epochs without a better validation recall.
    pub patience: usize,
    /// AdamW learning rate.
    pub lr: f64,
    /// AdamW weight decay.
    pub weight_decay: f64,
    /// Questions per mini-batch.
    pub batch: usize,
    /// Seed of initialisation and batch order.
    pub seed: u64,
    /// Weights of the learned signal tried on the validation split.
    pub weights: Vec<f32>,
    /// Aggregate over the candidate subgraph's edges (false: every node sees only itself, the
    /// ablation that shows what the graph adds).
    pub edges: bool,
}

impl Default for TrainOptions {
    fn default() -> Self {
        TrainOptions {
            features: FeatureSet::Words,
            hidden: 128,
            epochs: 60,
            patience: 8,
            lr: 3e-3,
            weight_decay: 1e-2,
            batch: 16,
            seed: 1,
            weights: vec![0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0, 5.0, 10.0, 100.0],
            edges: true,
        }
    }
}

/// One split's data.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataRecord {
    /// Input files and directories.
    pub inputs: Vec<String>,
    /// Conversations.
    pub conversations: Vec<String>,
    /// Questions (answerable, with evidence).
    pub questions: usize,
    /// Of which have a gold episode among the candidates.
    pub reachable: usize,
    /// Candidate nodes per question, mean.
    pub mean_nodes: f64,
}

/// One epoch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EpochRecord {
    /// 1-based.
    pub epoch: usize,
    /// Mean training loss.
    pub train_loss: f64,
    /// Validation loss.
    pub val_loss: f64,
    /// Validation recall@10 at the best weight.
    pub val_recall_10: f64,
    /// That weight.
    pub weight: f32,
}

/// Recall@10 of one group on the validation split.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupRecall {
    /// Questions.
    pub n: usize,
    /// Synapse's order.
    pub synapse: f64,
    /// Reranked by the model at the chosen weight.
    pub synapse_gnn: f64,
}

/// How a model was trained: what the card records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainingRecord {
    /// Training data.
    pub train: DataRecord,
    /// Validation data.
    pub val: DataRecord,
    /// The options.
    pub options: TrainOptions,
    /// Epochs run.
    pub epochs_run: usize,
    /// The epoch whose weights were kept.
    pub best_epoch: usize,
    /// Validation recall@10 per group and over all (`1-4`), at the kept epoch and weight.
    pub val_recall_10: BTreeMap<String, GroupRecall>,
    /// Every epoch.
    pub history: Vec<EpochRecord>,
    /// Wall time, seconds.
    pub seconds: f64,
}
