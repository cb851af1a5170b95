//! The learned gate's model, a "feeling of knowing": a logistic regression from what retrieval
//! knows about a result (`retrieve`'s `LearnedGate::features`) to the probability that the
//! memory holds the answer, its training (Newton's method with an L2 penalty, on standardised
//! features), the threshold that refuses at most a given share of answerable questions,
//! cross-validation by conversation, and the model file with its card.
//!
//! Must not compute features (retrieve does) nor gather labelled questions (eval does).

use std::path::Path;
use std::sync::OnceLock;

use nalgebra::{DMatrix, DVector};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Version of the gate model's file format.
pub const GATE_FORMAT: u32 = 1;

/// The model that ships with the project (`models/gate/knowing.json`), compiled into the
/// library so it loads wherever it runs.
const SHIPPED: &str = include_str!("../models/gate/knowing.json");
/// What the shipped model is called in messages and reports.
pub const SHIPPED_NAME: &str = "models/gate/knowing.json (built in)";

/// One labelled question for the gate: its features and whether the memory holds its answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateExample {
    /// Its conversation (the unit of every split).
    pub conversation: String,
    /// `locomo` or `beam`.
    pub dataset: String,
    /// The question id.
    pub question: String,
    /// Whether it is answerable (LoCoMo categories 1–4, BEAM abilities but abstention).
    pub answerable: bool,
    /// The features, in the card's order.
    pub features: Vec<f32>,
    /// The conversation whose question it is, when it was asked of another one (`conversation`)
    /// instead: unanswerable there by construction (none for a question of its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
}

impl GateExample {
    /// The unit of every split: its conversation, or the one its scope was cut from.
    pub fn fold(&self) -> &str {
        cut_from(&self.conversation)
    }
}

/// The conversation a scope was cut from: a scope named `{conversation}@{part}` is a part of
/// it (`scripts/locomo-sessions.py` names a session so), held out with it; any other id is
/// its own.
pub fn cut_from(conversation: &str) -> &str {
    conversation.split_once('@').map_or(conversation, |(whole, _)| whole)
}

/// How a gate model is trained.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GateOptions {
    /// L2 penalty on the (standardised) weights, per example (default 1e-3).
    pub l2: f64,
    /// Newton steps at most (default 50; training stops when a step moves no weight by 1e-9).
    pub max_steps: usize,
    /// Most answerable questions refused, as a share, that the threshold allows (default 0.03).
    pub max_false_refusal: f64,
    /// Other conversations of its data set each answerable question is asked of as well, as
    /// an unanswerable example (default 1; `eval::gate::gate_examples`).
    #[serde(default)]
    pub cross_conversation: usize,
}

impl Default for GateOptions {
    fn default() -> Self {
        GateOptions { l2: 1e-3, max_steps: 50, max_false_refusal: 0.03, cross_conversation: 1 }
    }
}

/// A trained gate: standardisation, weights, bias and the threshold, with what it was
/// trained on. The file is this struct as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateModel {
    /// [`GATE_FORMAT`].
    pub format: u32,
    /// Feature names in input order; must be the features this build computes.
    pub feature_names: Vec<String>,
    /// Per feature: the training mean.
    pub mean: Vec<f64>,
    /// Per feature: the training standard deviation (1 where it was constant).
    pub scale: Vec<f64>,
    /// Per standardised feature: its weight.
    pub weights: Vec<f64>,
    /// The bias.
    pub bias: f64,
    /// A result is rejected when its confidence is under this.
    pub threshold: f64,
    /// How it was trained.
    pub training: GateTraining,
}

/// What a gate model was trained on and how it measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateTraining {
    /// The options.
    pub options: GateOptions,
    /// Conversations trained on.
    pub conversations: Vec<String>,
    /// Answerable questions trained on.
    pub answerable: usize,
    /// Unanswerable questions trained on.
    pub unanswerable: usize,
    /// Newton steps taken.
    pub steps: usize,
    /// The threshold's rule, in words.
    pub threshold_rule: String,
}

impl GateModel {
    /// The probability that the memory holds the answer, from a result's features.
    pub fn confidence(&self, features: &[f32]) -> f32 {
        self.probability(features.iter().copied())
    }

    /// The probability from the features in the model's own order: the one place the model's
    /// formula is written.
    fn probability(&self, features: impl Iterator<Item = f32>) -> f32 {
        let z = self.bias
            + features
                .zip(&self.mean)
                .zip(&self.scale)
                .zip(&self.weights)
                .map(|(((x, m), s), w)| w * (x as f64 - m) / s)
                .sum::<f64>();
        sigmoid(z) as f32
    }

    /// The model that ships with the project.
    pub fn shipped() -> Result<&'static GateModel> {
        static MODEL: OnceLock<std::result::Result<GateModel, String>> = OnceLock::new();
        MODEL
            .get_or_init(|| GateModel::parse(SHIPPED, SHIPPED_NAME).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| Error::Model(e.clone()))
    }

    /// Reads a model file.
    pub fn load(path: &Path) -> Result<GateModel> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| Error::Model(format!("{name}: {e}")))?;
        GateModel::parse(&text, &name)
    }

    fn parse(text: &str, source: &str) -> Result<GateModel> {
        let model: GateModel = serde_json::from_str(text).map_err(|e| Error::Model(format!("{source}: {e}")))?;
        if model.format != GATE_FORMAT {
            return Err(Error::Model(format!(
                "{source}: gate format {} (this build reads {GATE_FORMAT})",
                model.format
            )));
        }
        let n = model.feature_names.len();
        if [model.mean.len(), model.scale.len(), model.weights.len()] != [n, n, n] {
            return Err(Error::Model(format!("{source}: {n} features but other lengths of mean, scale or weights")));
        }
        if model.scale.iter().any(|&s| s.is_nan() || s <= 0.0) {
            return Err(Error::Model(format!("{source}: a scale that is not positive")));
        }
        Ok(model)
    }

    /// This model bound to the features a build computes, `names` in the order it computes
    /// them: each of the model's features found by name. A feature the model takes that the
    /// build does not compute, or one the build computes that the model does not take, is an
    /// error naming it (and `source`, the model's file).
    pub fn bind(self, names: &[&str], source: &str) -> Result<BoundGate> {
        let at = self
            .feature_names
            .iter()
            .map(|f| {
                names.iter().position(|n| n == f).ok_or_else(|| {
                    Error::Model(format!(
                        "{source}: the gate takes feature '{f}', which this build does not compute (it computes [{}])",
                        names.join(", ")
                    ))
                })
            })
            .collect::<Result<Vec<usize>>>()?;
        if let Some(missing) = names.iter().find(|n| !self.feature_names.iter().any(|f| f == *n)) {
            return Err(Error::Model(format!(
                "{source}: the gate does not take feature '{missing}', which this build computes"
            )));
        }
        let mut seen = vec![false; names.len()];
        for (&i, f) in at.iter().zip(&self.feature_names) {
            if std::mem::replace(&mut seen[i], true) {
                return Err(Error::Model(format!("{source}: the gate takes feature '{f}' twice")));
            }
        }
        Ok(BoundGate { model: self, at })
    }
}

/// A gate model read by name against the features a build computes ([`GateModel::bind`]).
#[derive(Debug, Clone, PartialEq)]
pub struct BoundGate {
    /// The model.
    pub model: GateModel,
    /// Per model feature: its place among the build's features.
    at: Vec<usize>,
}

impl BoundGate {
    /// The probability that the memory holds the answer, from a result's features in the
    /// build's order (each weight meets its feature by name, whatever order the file lists).
    pub fn confidence(&self, features: &[f32]) -> f32 {
        self.model.probability(self.at.iter().map(|&i| features[i]))
    }
}

fn sigmoid(z: f64) -> f64 {
    1.0 / (1.0 + (-z).exp())
}

/// Trains a gate on `examples` (label: answerable), with its threshold chosen by
/// leave-one-conversation-out predictions on the same examples (see [`threshold_for`]).
pub fn train(examples: &[&GateExample], names: &[&str], options: GateOptions) -> Result<GateModel> {
    let mut model = fit(examples, names, options)?;
    let held_out = cross_validate(examples, names, options)?;
    let answerable: Vec<f64> =
        examples.iter().zip(&held_out).filter(|(e, _)| e.answerable).map(|(_, &c)| c as f64).collect();
    model.threshold = threshold_for(&answerable, options.max_false_refusal);
    model.training.threshold_rule = format!(
        "refuses at most {:.1}% of the answerable questions, by their held-out confidences (each \
         conversation's from a model trained without it)",
        100.0 * options.max_false_refusal
    );
    Ok(model)
}

/// Fits the logistic regression (threshold 0.5; [`train`] sets the real one).
pub fn fit(examples: &[&GateExample], names: &[&str], options: GateOptions) -> Result<GateModel> {
    let d = names.len();
    if examples.is_empty() {
        return Err(Error::InvalidArgument("no questions to train the gate on".into()));
    }
    if let Some(e) = examples.iter().find(|e| e.features.len() != d) {
        return Err(Error::InvalidArgument(format!(
            "question '{}' has {} gate features, expected {d}",
            e.question,
            e.features.len()
        )));
    }
    let positives = examples.iter().filter(|e| e.answerable).count();
    if positives == 0 || positives == examples.len() {
        return Err(Error::InvalidArgument("the gate needs answerable and unanswerable questions to train on".into()));
    }
    let n = examples.len() as f64;
    let mut mean = vec![0.0; d];
    for e in examples {
        for (m, &x) in mean.iter_mut().zip(&e.features) {
            *m += x as f64 / n;
        }
    }
    let mut scale = vec![0.0; d];
    for e in examples {
        for ((s, &x), m) in scale.iter_mut().zip(&e.features).zip(&mean) {
            *s += (x as f64 - m).powi(2) / n;
        }
    }
    let scale: Vec<f64> = scale.into_iter().map(|v| if v > 1e-12 { v.sqrt() } else { 1.0 }).collect();
    // Design matrix with a column of ones for the bias (last).
    let x = DMatrix::from_fn(examples.len(), d + 1, |i, j| {
        if j == d { 1.0 } else { (examples[i].features[j] as f64 - mean[j]) / scale[j] }
    });
    let y = DVector::from_fn(examples.len(), |i, _| examples[i].answerable as u8 as f64);
    let mut w = DVector::zeros(d + 1);
    let penalty = options.l2 * n;
    let mut steps = 0;
    for _ in 0..options.max_steps {
        steps += 1;
        let p = (&x * &w).map(sigmoid);
        let mut gradient = x.transpose() * (&p - &y);
        let mut weighted = x.clone();
        for (mut row, p) in weighted.row_iter_mut().zip(p.iter()) {
            row *= (p * (1.0 - p)).max(1e-12);
        }
        let mut hessian = x.transpose() * weighted;
        for j in 0..d {
            gradient[j] += penalty * w[j];
            hessian[(j, j)] += penalty;
        }
        hessian[(d, d)] += 1e-9;
        let step = hessian
            .cholesky()
            .ok_or_else(|| Error::InvalidArgument("the gate's training matrix is not positive definite".into()))?
            .solve(&gradient);
        w -= &step;
        if step.amax() < 1e-9 {
            break;
        }
    }
    Ok(GateModel {
        format: GATE_FORMAT,
        feature_names: names.iter().map(|s| s.to_string()).collect(),
        mean,
        scale,
        weights: w.as_slice()[..d].to_vec(),
        bias: w[d],
        threshold: 0.5,
        training: GateTraining {
            options,
            conversations: conversations(examples),
            answerable: positives,
            unanswerable: examples.len() - positives,
            steps,
            threshold_rule: "0.5".into(),
        },
    })
}

/// The distinct folds of `examples` ([`GateExample::fold`]), sorted.
fn conversations(examples: &[&GateExample]) -> Vec<String> {
    let mut ids: Vec<String> = examples.iter().map(|e| e.fold().to_string()).collect();
    ids.sort();
    ids.dedup();
    ids
}

/// Every example's confidence from a model trained on the other conversations (leave one
/// conversation out), in example order.
pub fn cross_validate(examples: &[&GateExample], names: &[&str], options: GateOptions) -> Result<Vec<f32>> {
    let ids = conversations(examples);
    if ids.len() < 2 {
        return Err(Error::InvalidArgument(format!(
            "the gate is cross-validated by conversation and needs questions of two conversations or more, \
             got {}",
            if ids.is_empty() { "none".to_string() } else { format!("only '{}'", ids[0]) }
        )));
    }
    let mut out = vec![0.0f32; examples.len()];
    for held in ids {
        let train: Vec<&GateExample> = examples.iter().copied().filter(|e| e.fold() != held).collect();
        let model = fit(&train, names, options)?;
        for (o, e) in out.iter_mut().zip(examples) {
            if e.fold() == held {
                *o = model.confidence(&e.features);
            }
        }
    }
    Ok(out)
}

/// One example's held-out verdict: its confidence from a model trained without its
/// conversation, and the thresholds that model's own training conversations chose (by their
/// leave-one-conversation-out confidences) for each of the false-refusal limits asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldOut {
    /// The confidence.
    pub confidence: f32,
    /// One threshold per limit.
    pub thresholds: Vec<f64>,
}

/// Nested cross-validation by conversation: for each conversation, a model trained on the
/// others gives its confidences, and the thresholds for `limits` (shares of answerable
/// questions refused) come from a leave-one-out over those others alone (from that model's
/// own confidences on them when they are one conversation). Nothing about a conversation,
/// labels included, chooses anything it is measured with. In example order.
pub fn nested_cross_validation(
    examples: &[&GateExample],
    names: &[&str],
    options: GateOptions,
    limits: &[f64],
) -> Result<Vec<HeldOut>> {
    let ids = conversations(examples);
    if ids.len() < 2 {
        // The same message as a plain cross-validation's.
        cross_validate(examples, names, options)?;
    }
    let mut out: Vec<Option<HeldOut>> = vec![None; examples.len()];
    for held in ids {
        let train: Vec<&GateExample> = examples.iter().copied().filter(|e| e.fold() != held).collect();
        let model = fit(&train, names, options)?;
        let inner = if conversations(&train).len() > 1 {
            cross_validate(&train, names, options)?
        } else {
            train.iter().map(|e| model.confidence(&e.features)).collect()
        };
        let answerable: Vec<f64> =
            train.iter().zip(&inner).filter(|(e, _)| e.answerable).map(|(_, &c)| c as f64).collect();
        let thresholds: Vec<f64> = limits.iter().map(|&l| threshold_for(&answerable, l)).collect();
        for (o, e) in out.iter_mut().zip(examples) {
            if e.fold() == held {
                *o = Some(HeldOut { confidence: model.confidence(&e.features), thresholds: thresholds.clone() });
            }
        }
    }
    Ok(out.into_iter().flatten().collect())
}

/// The largest threshold that refuses (confidence under it) at most `max_false_refusal` of
/// `answerable` confidences: the confidence of the answerable question at that quantile.
pub fn threshold_for(answerable: &[f64], max_false_refusal: f64) -> f64 {
    let mut sorted: Vec<f64> = answerable.to_vec();
    sorted.sort_by(f64::total_cmp);
    let allowed = (max_false_refusal * sorted.len() as f64).floor() as usize;
    // Refusing the `allowed` lowest: the threshold is the next one's confidence (ties refuse
    // nothing more, since the rule is "under").
    sorted.get(allowed).copied().unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example(conversation: &str, answerable: bool, features: Vec<f32>) -> GateExample {
        GateExample {
            conversation: conversation.into(),
            dataset: "locomo".into(),
            question: format!("{conversation}-{answerable}-{features:?}"),
            answerable,
            features,
            from: None,
        }
    }

    #[test]
    fn a_scope_cut_from_a_conversation_is_held_out_with_it() {
        assert_eq!(cut_from("conv-26@s3"), "conv-26");
        assert_eq!(cut_from("conv-26"), "conv-26");
        let mut cut = example("conv-26@s3", true, vec![0.0]);
        assert_eq!(cut.fold(), "conv-26");
        cut.conversation = "beam-100K-1".into();
        assert_eq!(cut.fold(), "beam-100K-1");
        // Two scopes of one conversation are one fold: a cross-validation needs a second.
        let (a, b) = (example("c@s1", true, vec![0.0]), example("c@s2", false, vec![1.0]));
        let err = cross_validate(&[&a, &b], &["x"], GateOptions::default()).unwrap_err().to_string();
        assert!(err.contains("only 'c'"), "{err}");
    }

    #[test]
    fn a_separable_signal_is_learned_and_a_noise_feature_is_not() {
        // Feature 0 decides the label with some overlap; feature 1 is noise.
        let mut examples = Vec::new();
        for i in 0..200 {
            let x = (i as f32) / 200.0;
            let noise = ((i * 37) % 11) as f32 / 11.0;
            examples.push(example(&format!("c{}", i % 5), x > 0.4 || i % 17 == 0, vec![x, noise]));
        }
        let refs: Vec<&GateExample> = examples.iter().collect();
        let model = fit(&refs, &["x", "noise"], GateOptions::default()).unwrap();
        assert!(model.weights[0] > 3.0, "{:?}", model.weights);
        assert!(model.weights[1].abs() < model.weights[0].abs() / 5.0, "{:?}", model.weights);
        assert!(model.confidence(&[0.9, 0.5]) > 0.9);
        assert!(model.confidence(&[0.1, 0.5]) < 0.2);
    }

    #[test]
    fn newton_reaches_the_penalised_optimum() {
        // At the optimum the penalised gradient is zero: check it from the model's own output.
        let examples: Vec<GateExample> =
            (0..60).map(|i| example("c", (i * 7) % 3 != 0, vec![(i % 10) as f32, ((i * 3) % 7) as f32])).collect();
        let refs: Vec<&GateExample> = examples.iter().collect();
        let options = GateOptions { l2: 0.01, ..GateOptions::default() };
        let model = fit(&refs, &["a", "b"], options).unwrap();
        let mut gradient = [0.0f64; 3];
        for e in &examples {
            let p = model.confidence(&e.features) as f64;
            let r = p - e.answerable as u8 as f64;
            for (j, g) in gradient.iter_mut().take(2).enumerate() {
                *g += r * (e.features[j] as f64 - model.mean[j]) / model.scale[j];
            }
            gradient[2] += r;
        }
        for (g, w) in gradient.iter_mut().zip(&model.weights) {
            *g += options.l2 * 60.0 * w;
        }
        // f32 confidences limit the check to about 1e-5 per example.
        assert!(gradient.iter().all(|g| g.abs() < 1e-3), "{gradient:?}");
    }

    #[test]
    fn the_threshold_refuses_at_most_the_allowed_share() {
        let answerable: Vec<f64> = (0..100).map(|i| i as f64 / 100.0).collect();
        let t = threshold_for(&answerable, 0.03);
        assert_eq!(answerable.iter().filter(|&&c| c < t).count(), 3);
        assert_eq!(threshold_for(&answerable, 0.0), 0.0);
    }

    #[test]
    fn cross_validation_never_predicts_a_conversation_with_its_own_model() {
        // Two conversations whose labels follow the feature in opposite directions: a model
        // that saw the held-out one would get it right; one trained on the other gets it wrong.
        let mut examples = Vec::new();
        for i in 0..40 {
            let x = i as f32 / 40.0;
            examples.push(example("a", x > 0.5, vec![x]));
            examples.push(example("b", x <= 0.5, vec![x]));
        }
        let refs: Vec<&GateExample> = examples.iter().collect();
        let held = cross_validate(&refs, &["x"], GateOptions::default()).unwrap();
        let right = refs.iter().zip(&held).filter(|(e, c)| (**c > 0.5) == e.answerable).count();
        assert!(right < 10, "{right} of 80 right: the folds leaked");
    }

    #[test]
    fn one_conversation_is_refused_by_name_and_two_are_enough() {
        let mut examples: Vec<GateExample> =
            (0..20).map(|i| example("only", i % 3 != 0, vec![i as f32 / 20.0])).collect();
        let refs: Vec<&GateExample> = examples.iter().collect();
        let e = nested_cross_validation(&refs, &["x"], GateOptions::default(), &[0.03]).unwrap_err().to_string();
        assert!(e.contains("only 'only'"), "{e}");
        examples.extend((0..20).map(|i| example("other", i % 3 != 0, vec![i as f32 / 20.0])));
        let refs: Vec<&GateExample> = examples.iter().collect();
        let held = nested_cross_validation(&refs, &["x"], GateOptions::default(), &[0.03]).unwrap();
        assert_eq!(held.len(), 40);
        assert!(held.iter().all(|h| h.thresholds.len() == 1 && h.confidence > 0.0 && h.confidence < 1.0));
    }

    #[test]
    fn the_shipped_model_loads() {
        let model = GateModel::shipped().unwrap();
        assert_eq!(model.feature_names.len(), model.weights.len());
        assert!(model.threshold > 0.0 && model.threshold < 1.0);
    }

    #[test]
    fn a_bad_file_is_an_error_naming_it() {
        let dir = std::env::temp_dir().join(format!("myelin-gate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("gate.json");
        std::fs::write(&path, "{\"format\": 1}").unwrap();
        let e = GateModel::load(&path).unwrap_err().to_string();
        assert!(e.contains("gate.json"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_model_is_read_by_name_whatever_order_its_file_lists() {
        let model = GateModel::shipped().unwrap().clone();
        let names: Vec<&str> = model.feature_names.iter().map(String::as_str).collect();
        let features: Vec<f32> = (0..names.len()).map(|i| (i as f32 * 0.37).sin()).collect();
        let bound = model.clone().bind(&names, "shipped").unwrap();
        // The file's features in reverse: each weight still meets its feature.
        let mut reversed = model.clone();
        reversed.feature_names.reverse();
        reversed.mean.reverse();
        reversed.scale.reverse();
        reversed.weights.reverse();
        let other = reversed.bind(&names, "reversed").unwrap();
        let (a, b) = (bound.confidence(&features), other.confidence(&features));
        assert!((a - b).abs() < 1e-6 && a > 0.0 && a < 1.0, "{a} vs {b}");
        // A feature the build does not compute, and one the model lacks, are named.
        let mut renamed = model.clone();
        renamed.feature_names[3] = "coverage_elsewhere".into();
        let e = renamed.bind(&names, "renamed.json").unwrap_err().to_string();
        assert!(e.contains("renamed.json") && e.contains("'coverage_elsewhere'"), "{e}");
        let mut fewer = names.clone();
        fewer.push("new_feature");
        let e = model.clone().bind(&fewer, "shipped").unwrap_err().to_string();
        assert!(e.contains("does not take feature 'new_feature'"), "{e}");
    }
}
