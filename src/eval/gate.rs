//! The learned gate in evaluation: its labelled examples (every question's `synapse` result,
//! ranked through the engine, and the features the gate reads off it; every answerable
//! question asked of other conversations as well, where it has no answer) and its
//! cross-validated figures per data set and kind of unanswerable question (ROC AUC, what it
//! rejects at each limit on false refusals, the reliability diagram's bins). Must not fit a
//! model (`knowing` does) nor print.

use std::collections::BTreeMap;

use serde::Serialize;

use super::rates::{GATE_LIMITS, OperatingPoint, ReliabilityBin, auc, rates_by_threshold, reliability};
use super::{Labelled, Loaded};
use crate::error::Result;
use crate::knowing::{GateExample, GateOptions, HeldOut, nested_cross_validation};
use crate::reader::ReaderPair;
use crate::retrieve::LearnedGate;
use crate::retrieve::engine::Engine;
use crate::retrieve::{Gate, Mode, Query, RetrieveConfig};

/// What a reader reads of one gate example: its question beside each of its `depth` best
/// returned turns, whether that turn answers it (only a gold turn of its own answerable
/// question does), and its gold turns that were not returned so high (answering).
#[derive(Debug, Clone, Default)]
pub struct Read {
    /// The best returned turns, best first, and whether each answers.
    pub top: Vec<(ReaderPair, bool)>,
    /// Its gold turns below them (none for an unanswerable example).
    pub gold_below: Vec<ReaderPair>,
}

/// Every question of `loaded` (answerable or not) as a gate example: the features of its
/// `synapse` result (what the gate reads, see `Ctx::learned`), ranked on the CPU (the
/// reference), one batch for all questions. The results pass the activation gate, which reads
/// no model (the features do not depend on it). Then each answerable question is asked of the
/// `cross` conversations after its own (in `loaded`'s order, round) as well, where it has no
/// answer: an unanswerable example whose `from` names its own conversation. Each example comes
/// with what a reader reads of its `depth` best returned turns ([`Read`]; nothing at 0).
pub fn gate_examples(loaded: Loaded, dataset: &str, cross: usize, depth: usize) -> Result<Vec<(GateExample, Read)>> {
    use rayon::prelude::*;
    let n = loaded.memories.len();
    let mut engine = Engine::on_cpu_because(loaded.memories, "gate examples rank on the CPU reference".into())?;
    // The features of the ranking the learned gate judges: before the standing context leads it.
    engine.set_settings(RetrieveConfig { gate: Gate::Activation, ..engine.settings().ranking_only() })?;
    // (question, the memory it is asked of).
    let mut asked: Vec<(&Labelled, usize)> = loaded.questions.iter().map(|q| (q, q.memory)).collect();
    for k in 1..=cross.min(n.saturating_sub(1)) {
        asked.extend(loaded.questions.iter().filter(|q| !q.adversarial).map(|q| (q, (q.memory + k) % n)));
    }
    let requests: Vec<(usize, &Query)> = asked.iter().map(|&(q, m)| (m, &q.query)).collect();
    let (results, _) = engine.retrieve_batch(&requests, Mode::Synapse)?;
    asked
        .par_iter()
        .zip(results.par_iter())
        .map(|(&(q, memory), r)| {
            let cx = engine.cx(memory)?;
            let own = memory == q.memory;
            let answerable = own && !q.adversarial;
            let example = GateExample {
                conversation: cx.m.conversation().to_string(),
                dataset: dataset.to_string(),
                question: q.id.clone(),
                answerable,
                features: LearnedGate(cx).features(&q.query, r).values(),
                from: (!own).then(|| engine.cx(q.memory).map(|c| c.m.conversation().to_string())).transpose()?,
            };
            let pair = |e: u32| ReaderPair::of(&q.query.text, &cx.m.episodes()[e as usize]);
            let top: Vec<u32> = r.hits.iter().take(depth).map(|h| h.episode).collect();
            let read = Read {
                top: top.iter().map(|&e| (pair(e), answerable && q.gold.contains(&e))).collect(),
                gold_below: if answerable && depth > 0 {
                    q.gold.iter().filter(|e| !top.contains(e)).map(|&e| pair(e)).collect()
                } else {
                    Vec::new()
                },
            };
            Ok((example, read))
        })
        .collect()
}

/// What a data set's own unanswerable questions are called: LoCoMo's category 5 is
/// `adversarial`, BEAM's ability `abstention`.
pub fn own_unanswerable(dataset: &str) -> &'static str {
    match dataset {
        d if d.starts_with("beam") => "abstention",
        _ => "adversarial",
    }
}

/// What unanswerable examples asked of another conversation are called.
pub const CROSS_CONVERSATION: &str = "cross-conversation";

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
    /// Folds: conversations, each with the scopes cut from it ([`GateExample::fold`]).
    pub conversations: usize,
    /// Per data set and kind of unanswerable question ("locomo: adversarial", "beam:
    /// cross-conversation", …): the data set's answerable questions against those.
    pub sets: BTreeMap<String, GateFigures>,
    /// Over every question.
    pub all: GateFigures,
    /// The held-out confidence against how often it was right, over every question.
    pub reliability: Vec<ReliabilityBin>,
}

/// Cross-validates the gate on `examples` (their features `names`) and measures it per data
/// set and kind of unanswerable question, and over all.
pub fn gate_cross_validation(
    examples: &[GateExample],
    names: &[&str],
    options: GateOptions,
) -> Result<GateCrossValidation> {
    let refs: Vec<&GateExample> = examples.iter().collect();
    let held = nested_cross_validation(&refs, names, options, &GATE_LIMITS)?;
    let pairs: Vec<(&GateExample, &HeldOut)> = examples.iter().zip(&held).collect();
    let mut sets = BTreeMap::new();
    let mut names: Vec<&str> = examples.iter().map(|e| e.dataset.as_str()).collect();
    names.sort();
    names.dedup();
    for name in names {
        for cross in [false, true] {
            let of: Vec<(&GateExample, &HeldOut)> = pairs
                .iter()
                .copied()
                .filter(|(e, _)| e.dataset == name && (e.answerable || e.from.is_some() == cross))
                .collect();
            if of.iter().any(|(e, _)| !e.answerable) {
                let kind = if cross { CROSS_CONVERSATION } else { own_unanswerable(name) };
                sets.insert(format!("{name}: {kind}"), figures(&of));
            }
        }
    }
    let mut conversations: Vec<&str> = examples.iter().map(|e| e.fold()).collect();
    conversations.sort();
    conversations.dedup();
    Ok(GateCrossValidation {
        options,
        conversations: conversations.len(),
        sets,
        all: figures(&pairs),
        reliability: reliability(&confidences(&pairs, true), &confidences(&pairs, false)),
    })
}

/// The held-out confidences of the answerable examples of `pairs`, or of the others.
fn confidences(pairs: &[(&GateExample, &HeldOut)], answerable: bool) -> Vec<f64> {
    pairs.iter().filter(|(e, _)| e.answerable == answerable).map(|(_, h)| h.confidence as f64).collect()
}

fn figures(pairs: &[(&GateExample, &HeldOut)]) -> GateFigures {
    let share = |answerable: bool, k: usize| {
        let of: Vec<_> = pairs.iter().filter(|(e, _)| e.answerable == answerable).collect();
        let under = of.iter().filter(|(_, h)| (h.confidence as f64) < h.thresholds[k]).count();
        if of.is_empty() { 0.0 } else { under as f64 / of.len() as f64 }
    };
    let (yes, no) = (confidences(pairs, true), confidences(pairs, false));
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
