//! A trained relevance model with its card: loading (the weights that ship with the project,
//! or a file), scoring a query's candidates, and the formula that adds the learned relevance
//! to the hybrid score as a fourth signal.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use candle_core::Device;
use serde::{Deserialize, Serialize};

use super::features::{Candidates, FeatureSet, features};
use super::model::{GnnShape, Subgraph, Weights};
use super::packed::{Packed, RelevanceInput, RelevanceWeights};
use super::record::TrainingRecord;
use crate::embed::EMBEDDING_DIM;
use crate::error::{Error, Result};

/// Version of the card format.
pub const CARD_FORMAT: u32 = 1;

/// A model that ships with the project (`models/gnn/<name>.safetensors` and its card
/// `<name>.json`), compiled into the library so it loads wherever it runs. The names are the
/// values of `retrieve.gnn.model` and `--gnn-model`: the data each was trained on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum Shipped {
    /// Trained on LoCoMo's conversations alone: the best on chat between people.
    Locomo,
    /// Trained on LoCoMo's and BEAM's: the model of `config/beam.toml`, for long assistant
    /// histories.
    LocomoBeam,
}

impl Shipped {
    /// Every shipped model.
    pub const ALL: [Shipped; 2] = [Shipped::Locomo, Shipped::LocomoBeam];

    /// The name of the model in config files, flags and file names.
    pub fn as_str(self) -> &'static str {
        match self {
            Shipped::Locomo => "locomo",
            Shipped::LocomoBeam => "locomo-beam",
        }
    }

    /// What the model is called in messages and reports.
    pub fn source(self) -> String {
        format!("models/gnn/{}.safetensors (built in)", self.as_str())
    }

    /// The compiled-in weights and card.
    fn files(self) -> (&'static [u8], &'static str) {
        match self {
            Shipped::Locomo => {
                (include_bytes!("../../models/gnn/locomo.safetensors"), include_str!("../../models/gnn/locomo.json"))
            }
            Shipped::LocomoBeam => (
                include_bytes!("../../models/gnn/locomo-beam.safetensors"),
                include_str!("../../models/gnn/locomo-beam.json"),
            ),
        }
    }
}

/// What a weights file is: the features it takes, its shape, the weight it was validated
/// with, and how it was trained. Written beside the weights as `<name>.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Card {
    /// [`CARD_FORMAT`].
    pub format: u32,
    /// The feature set.
    pub features: FeatureSet,
    /// Feature names in input order.
    pub feature_names: Vec<String>,
    /// Shape of the network.
    pub shape: GnnShape,
    /// Weight of the relevance in the score, chosen on the validation split.
    pub weight: f32,
    /// Seed of the initialisation and of the batch order.
    pub seed: u64,
    /// Data, epochs and validation figures.
    pub training: TrainingRecord,
}

impl Card {
    /// Checks that the card describes a model this build can feed.
    pub fn check(&self, source: &str) -> Result<()> {
        let bad = |m: String| Err(Error::Model(format!("{source}: {m}")));
        if self.format != CARD_FORMAT {
            return bad(format!("card format {} (this build reads {CARD_FORMAT})", self.format));
        }
        let expected = self.features.names(EMBEDDING_DIM);
        if self.feature_names != expected {
            let first = self.feature_names.iter().zip(&expected).position(|(a, b)| a != b);
            return bad(format!(
                "the model takes features {} but this build computes {} for '{}' (first difference at {})",
                self.feature_names.len(),
                expected.len(),
                self.features.as_str(),
                first.map_or("the end".to_string(), |i| format!("input {i}"))
            ));
        }
        if self.shape.input != expected.len() {
            return bad(format!("shape takes {} inputs, the features are {}", self.shape.input, expected.len()));
        }
        if !self.weight.is_finite() || self.weight < 0.0 {
            return bad(format!("weight {} is not a finite non-negative number", self.weight));
        }
        Ok(())
    }
}

/// The card path of a weights file: the same name with `.json`.
pub fn card_path(weights: &Path) -> PathBuf {
    weights.with_extension("json")
}

/// A loaded model.
pub struct Relevance {
    /// Where it came from (a path, or [`Shipped::source`]).
    pub source: String,
    /// Its card.
    pub card: Card,
    weights: Weights,
    /// The relevance half of the same weights, as inference reads them.
    inference: RelevanceWeights,
    /// Those packed for the CPU.
    packed: Packed,
}

impl std::fmt::Debug for Relevance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relevance").field("source", &self.source).field("features", &self.card.features).finish()
    }
}

impl Relevance {
    /// A model that ships with the project (each loaded once per process).
    pub fn shipped(model: Shipped) -> Result<Arc<Relevance>> {
        type Loaded = OnceLock<std::result::Result<Arc<Relevance>, String>>;
        static LOADED: [Loaded; Shipped::ALL.len()] = [const { OnceLock::new() }; Shipped::ALL.len()];
        LOADED[model as usize]
            .get_or_init(|| {
                let source = model.source();
                let (bytes, card) = model.files();
                let load = || -> Result<Relevance> {
                    let card: Card =
                        serde_json::from_str(card).map_err(|e| Error::Model(format!("{source}: card: {e}")))?;
                    card.check(&source)?;
                    let tensors = candle_core::safetensors::load_buffer(bytes, &Device::Cpu)
                        .map_err(|e| Error::Model(format!("{source}: {e}")))?;
                    let weights = Weights::from_tensors(tensors, card.shape, &Device::Cpu, &source)?;
                    let inference = RelevanceWeights::read(&weights)?;
                    let packed = Packed::new(&inference)?;
                    Ok(Relevance { source: source.clone(), card, weights, inference, packed })
                };
                load().map(Arc::new).map_err(|e| e.to_string())
            })
            .clone()
            .map_err(Error::Model)
    }

    /// Weights from `path` and their card from [`card_path`]; a missing file, a card this build
    /// cannot feed or weights of another shape are errors naming the file.
    pub fn load(path: &Path) -> Result<Relevance> {
        let card_file = card_path(path);
        let text = std::fs::read_to_string(&card_file).map_err(|e| {
            Error::Model(format!("{}: the card of GNN weights {}: {e}", card_file.display(), path.display()))
        })?;
        let card: Card = serde_json::from_str(&text).map_err(|e| Error::format(&card_file, "card", e.to_string()))?;
        let source = path.display().to_string();
        card.check(&card_file.display().to_string())?;
        let weights = Weights::load(path, card.shape, &Device::Cpu)?;
        let inference = RelevanceWeights::read(&weights)?;
        let packed = Packed::new(&inference)?;
        Ok(Relevance { source, card, weights, inference, packed })
    }

    /// The model given in the settings: a weights file when one is set, else the shipped
    /// `model`.
    pub fn for_config(weights: Option<&Path>, model: Shipped) -> Result<Arc<Relevance>> {
        match weights {
            Some(path) => Relevance::load(path).map(Arc::new),
            None => Relevance::shipped(model),
        }
    }

    /// Relevance in [0, 1] of every candidate node for `query` (L2-normalised embedding);
    /// `embeddings` are the nodes' embeddings in candidate order.
    pub fn score(&self, candidates: &Candidates, query: &[f32], embeddings: &[&[f32]]) -> Result<Vec<f32>> {
        let input = self.input(candidates, query, embeddings)?;
        self.packed.relevance(&input.features, &input.edges)
    }

    /// What the network takes for a query's candidates (see [`Relevance::score`]): the
    /// features (row-major, a row per candidate) and the edges it reads (none for a model
    /// trained without them). [`Relevance::score`] is the packed pass over them; the GPU runs
    /// the same pass over many queries' at once.
    pub fn input(&self, candidates: &Candidates, query: &[f32], embeddings: &[&[f32]]) -> Result<RelevanceInput> {
        if candidates.nodes.is_empty() {
            return Ok(RelevanceInput::default());
        }
        let features = features(self.card.features, candidates, query, embeddings)?;
        let edges = if self.card.training.options.edges { candidates.edges.clone() } else { Vec::new() };
        Ok(RelevanceInput { features, edges })
    }

    /// [`Relevance::score`] through candle's forward pass (the one training runs), for
    /// checking the packed pass against it.
    pub fn score_with_candle(&self, candidates: &Candidates, query: &[f32], embeddings: &[&[f32]]) -> Result<Vec<f32>> {
        if candidates.nodes.is_empty() {
            return Ok(Vec::new());
        }
        let x = features(self.card.features, candidates, query, embeddings)?;
        let edges: &[(u32, u32)] = if self.card.training.options.edges { &candidates.edges } else { &[] };
        let g = Subgraph::new(&x, self.card.shape.input, edges, &Device::Cpu)?;
        let (logits, _) = self.weights.model.forward(&g)?;
        Ok(candle_nn::ops::sigmoid(&logits)?.to_vec1()?)
    }

    /// The packed weights the scores come from.
    pub fn packed(&self) -> &Packed {
        &self.packed
    }

    /// The weights as inference reads them (what the GPU's twin uploads).
    pub fn inference_weights(&self) -> &RelevanceWeights {
        &self.inference
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_model_loads_and_its_card_matches_this_build() {
        for model in Shipped::ALL {
            let r = Relevance::shipped(model).expect("shipped GNN weights");
            assert_eq!(r.source, format!("models/gnn/{}.safetensors (built in)", model.as_str()));
            assert_eq!(r.card.shape.input, r.card.features.width(EMBEDDING_DIM));
            assert!(r.card.weight > 0.0);
            // Trained and validated on disjoint conversations.
            let t = &r.card.training;
            assert!(!t.train.conversations.is_empty() && !t.val.conversations.is_empty());
            assert!(t.train.conversations.iter().all(|c| !t.val.conversations.contains(c)));
            // The name says what it learned from.
            let beam = t.train.conversations.iter().any(|c| c.starts_with("beam-"));
            assert_eq!(beam, model == Shipped::LocomoBeam, "{}", model.as_str());
            assert!(t.train.conversations.iter().any(|c| c.starts_with("conv-")), "{}", model.as_str());
            // The config name is the serde name.
            assert_eq!(serde_json::to_value(model).unwrap(), model.as_str());
        }
    }

    #[test]
    fn a_card_for_other_features_is_refused() {
        let mut card = Relevance::shipped(Shipped::Locomo).expect("shipped").card.clone();
        card.feature_names.swap(2, 3);
        let err = card.check("x.json").unwrap_err().to_string();
        assert!(err.contains("x.json") && err.contains("first difference at input 2"), "{err}");
        let mut card = Relevance::shipped(Shipped::Locomo).expect("shipped").card.clone();
        card.format = 7;
        assert!(card.check("x.json").unwrap_err().to_string().contains("card format 7"));
    }
}
