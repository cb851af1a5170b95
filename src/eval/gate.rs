//! The learned gate in evaluation: its labelled examples (every question's `synapse` result,
//! ranked through the engine, and the features the gate reads off it) and its
//! cross-validated figures by data set (ROC AUC, and what it rejects at each limit on false
//! refusals). Must not fit a model (`knowing` does) nor print.

use std::collections::BTreeMap;

use serde::Serialize;

use super::Loaded;
use super::rates::{GATE_LIMITS, OperatingPoint, auc, rates_by_threshold};
use crate::error::Result;
use crate::knowing::{GateExample, GateOptions, HeldOut, nested_cross_validation};
use crate::retrieve::engine::Engine;
use crate::retrieve::{Gate, Mode, Query, RetrieveConfig};
use crate::retrieve::{KnowingFeatures, LearnedGate};

/// Every question of `loaded` (answerable or not) as a gate example: the features of its
/// `synapse` result (what the gate reads, see `Ctx::learned`), ranked on the CPU (the
/// reference), one batch for all questions. The results pass the activation gate, which reads
/// no model (the features do not depend on it).
pub fn gate_examples(loaded: Loaded, dataset: &str) -> Result<Vec<GateExample>> {
    use rayon::prelude::*;
    let mut engine = Engine::on_cpu_because(loaded.memories, "gate examples rank on the CPU reference".into())?;
    // The features of the ranking the learned gate judges: before the standing context leads it.
    engine.set_settings(RetrieveConfig { gate: Gate::Activation, ..engine.settings().ranking_only() })?;
    let requests: Vec<(usize, &Query)> = loaded.questions.iter().map(|q| (q.memory, &q.query)).collect();
    let (results, _) = engine.retrieve_batch(&requests, Mode::Synapse)?;
    loaded
        .questions
        .par_iter()
        .zip(results.par_iter())
        .map(|(q, r)| {
            let cx = engine.cx(q.memory)?;
            Ok(GateExample {
                conversation: cx.m.conversation().to_string(),
                dataset: dataset.to_string(),
                question: q.id.clone(),
                answerable: !q.adversarial,
                features: LearnedGate(cx).features(&q.query, r).values(),
            })
        })
        .collect()
}

/// The gate's figures on one set of questions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GateFigures {
    /// Answerable questions.
    pub answerable: usize,
    /// Unanswerable questions.
    pub unanswerable: usize,
    /// ROC AUC of the confidence (answerable higher).
    pub auc: Option<f64>,
    /// One per limit of [`GATE_LIMITS`].
    pub at: Vec<OperatingPoint>,
    /// The held-out rates at every threshold τ of [`TAU_STEPS`]: (τ, answerable refused,
    /// unanswerable rejected).
    pub curve: Vec<(f64, f64, f64)>,
}

/// The gate, cross-validated by conversation (see [`nested_cross_validation`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GateCrossValidation {
    /// How every fold was trained.
    pub options: GateOptions,
    /// Conversations (folds).
    pub conversations: usize,
    /// Per data set.
    pub datasets: BTreeMap<String, GateFigures>,
    /// Over every question.
    pub all: GateFigures,
}

/// Cross-validates the gate on `examples` and measures it per data set and over all.
pub fn gate_cross_validation(examples: &[GateExample], options: GateOptions) -> Result<GateCrossValidation> {
    let refs: Vec<&GateExample> = examples.iter().collect();
    let held = nested_cross_validation(&refs, KnowingFeatures::NAMES, options, &GATE_LIMITS)?;
    let pairs: Vec<(&GateExample, &HeldOut)> = examples.iter().zip(&held).collect();
    let mut datasets = BTreeMap::new();
    let mut names: Vec<&str> = examples.iter().map(|e| e.dataset.as_str()).collect();
    names.sort();
    names.dedup();
    for name in names {
        let of: Vec<(&GateExample, &HeldOut)> = pairs.iter().copied().filter(|(e, _)| e.dataset == name).collect();
        datasets.insert(name.to_string(), figures(&of));
    }
    let mut conversations: Vec<&str> = examples.iter().map(|e| e.conversation.as_str()).collect();
    conversations.sort();
    conversations.dedup();
    Ok(GateCrossValidation { options, conversations: conversations.len(), datasets, all: figures(&pairs) })
}

fn figures(pairs: &[(&GateExample, &HeldOut)]) -> GateFigures {
    let confidences = |answerable: bool| -> Vec<f64> {
        pairs.iter().filter(|(e, _)| e.answerable == answerable).map(|(_, h)| h.confidence as f64).collect()
    };
    let share = |answerable: bool, k: usize| {
        let of: Vec<_> = pairs.iter().filter(|(e, _)| e.answerable == answerable).collect();
        let under = of.iter().filter(|(_, h)| (h.confidence as f64) < h.thresholds[k]).count();
        if of.is_empty() { 0.0 } else { under as f64 / of.len() as f64 }
    };
    let (yes, no) = (confidences(true), confidences(false));
    GateFigures {
        answerable: yes.len(),
        unanswerable: no.len(),
        auc: auc(&yes, &no),
        at: GATE_LIMITS
            .iter()
            .enumerate()
            .map(|(k, &l)| OperatingPoint { max_false_refusal: l, refused: share(true, k), rejected: share(false, k) })
            .collect(),
        curve: rates_by_threshold(&yes, &no),
    }
}
