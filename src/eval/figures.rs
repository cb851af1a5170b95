//! Every figure of an evaluation's [`Report`], computed from what it measured ([`Run`]): recall
//! and hit@k per group, the newest gold turn first, the gate (its threshold, calibrated on the
//! split or the model's own; rates, AUC, operating points, curve, reliability), context sizes,
//! latency percentiles, the dense index's recall, the kinds found, each question's result.
//!
//! The only place a figure is computed: `evaluate` reports one process's run through it and
//! `eval-merge` the run joined from the shards' parts, so the two agree figure for figure.
//! Must not run retrieval, read the store, or import `mod.rs` (which re-exports this).

use std::collections::BTreeMap;

use super::rates;
use super::report::{
    Backends, GateReport, GateUse, GnnUse, GroupReport, IndexUse, KindFound, KindsUse, Latency, Mean, ModeReport,
    NewestFirst, QuestionOutcome, QuestionResult, Report,
};
use super::run::{QuestionRun, Run};
use crate::conversation::ANSWERABLE_GROUP;
use crate::error::{Error, Result};
use crate::kind::Kind;
use crate::retrieve::engine::BatchReport;

/// The groups whose evidence is the turn that states a kind: BEAM's abilities that test a
/// standing instruction and a stated preference.
pub(super) const KIND_GROUPS: [(&str, Kind); 2] =
    [("instruction_following", Kind::Instruction), ("preference_following", Kind::Preference)];

impl Run {
    /// The report of this run; with `per_question`, each reported question's result too
    /// ([`Report::per_question`]). A run whose questions do not fit its settings and
    /// conversations (a hand-edited part) is an error.
    pub fn report(&self, per_question: bool) -> Result<Report> {
        self.check()?;
        let (s, config) = (&self.settings, &self.settings.retrieve);
        let (calibration, reported): (Vec<&QuestionRun>, Vec<&QuestionRun>) =
            self.questions.iter().partition(|q| q.calibration);
        let mut modes = BTreeMap::new();
        let mut thresholds = Vec::with_capacity(s.columns.len());
        for (m, name) in s.columns.iter().enumerate() {
            let threshold = if m >= s.modes {
                None
            } else if s.calibrate {
                calibrate(&calibration, m, s.max_false_refusal)
            } else if reported.is_empty() {
                None
            } else {
                self.models.thresholds.get(m).copied().flatten()
            };
            thresholds.push(threshold);
            let mut report = mode_report(&reported, m, threshold, config.top_k);
            report.gpu_batch = self.process.batches.get(name).cloned();
            // A mode named twice is reported once; a peer may not take a mode's name.
            if modes.insert(name.clone(), report).is_some() && m >= s.modes {
                return Err(Error::InvalidArgument(format!("peer mode {name} is named twice")));
            }
        }
        let ids = |seen: fn(&super::run::ConversationRun) -> bool| {
            self.conversations.iter().filter(|c| seen(c)).map(|c| c.id.clone()).collect::<Vec<_>>()
        };
        let batches = self.process.batches.values();
        let rerank = crate::embed::backend_name(
            batches.clone().map(|b: &BatchReport| b.reranked_on_gpu as u64).sum(),
            batches.map(|b: &BatchReport| b.reranked_on_cpu as u64).sum(),
        );
        let mut embed_ms: Vec<f64> = self.questions.iter().map(|q| q.embed_ms).collect();
        Ok(Report {
            dataset: s.dataset.clone(),
            conversations: self.conversations.iter().map(|c| c.id.clone()).collect(),
            questions: reported.len(),
            calibration_questions: calibration.len(),
            top_k: config.top_k,
            max_context_tokens: config.max_context_tokens,
            tokenizer: s.tokenizer.clone(),
            query_embedding_ms: latency(&mut embed_ms),
            backend: self.process.backend.clone(),
            backends: Backends {
                embed: self.process.embed.clone(),
                rank: self.process.rank.clone(),
                rerank: rerank.to_string(),
            },
            modes,
            mode_order: s.columns.clone(),
            gnn: self.models.gnn.as_ref().map(|g| GnnUse {
                weights: g.weights.clone(),
                features: g.features,
                weight: g.weight,
                seen: ids(|c| c.gnn_seen),
            }),
            gate: GateUse { gate: s.gate.clone(), model: s.gate_model.clone(), seen: ids(|c| c.gate_seen) },
            index: self.index_use(),
            kinds: self.kinds_use(),
            per_question: match per_question {
                true => reported.iter().map(|q| self.question_result(q, &thresholds)).collect(),
                false => Vec::new(),
            },
        })
    }

    /// Every question names a conversation of the run and has an outcome in every column;
    /// the models give a threshold for every mode (or none at all, for a run over nothing).
    pub(super) fn check(&self) -> Result<()> {
        let s = &self.settings;
        let bad = |what: String| Err(Error::InvalidArgument(format!("an evaluation run that does not fit: {what}")));
        if s.modes > s.columns.len() {
            return bad(format!("{} modes but {} columns", s.modes, s.columns.len()));
        }
        if !self.models.thresholds.is_empty() && self.models.thresholds.len() != s.modes {
            return bad(format!("{} thresholds for {} modes", self.models.thresholds.len(), s.modes));
        }
        for q in &self.questions {
            if q.conversation >= self.conversations.len() {
                return bad(format!(
                    "question {} names conversation #{}, of {}",
                    q.id,
                    q.conversation,
                    self.conversations.len()
                ));
            }
            if q.outcomes.len() != s.columns.len() || q.gold.len() != q.gold_turns.len() {
                return bad(format!(
                    "question {} has {} outcomes for {} columns",
                    q.id,
                    q.outcomes.len(),
                    s.columns.len()
                ));
            }
            if let Some(o) = q.outcomes.iter().find(|o| o.ranked.len() != o.returned.len() || o.handed > o.ranked.len())
            {
                return bad(format!(
                    "question {}: {} turns ranked, {} named, {} handed",
                    q.id,
                    o.ranked.len(),
                    o.returned.len(),
                    o.handed
                ));
            }
        }
        Ok(())
    }

    /// The dense index's use, summed over the conversations that have one; `None` when none does.
    fn index_use(&self) -> Option<IndexUse> {
        let tallies: Vec<_> = self.conversations.iter().filter_map(|c| c.index.as_ref()).collect();
        if tallies.is_empty() {
            return None;
        }
        let (found, wanted) = tallies.iter().fold((0, 0), |(f, w), t| (f + t.found, w + t.wanted));
        Some(IndexUse {
            memories: tallies.len(),
            bytes: tallies.iter().map(|t| t.bytes).sum(),
            build_ms: self.process.index_build_ms,
            questions: tallies.iter().map(|t| t.questions).sum(),
            anchor_recall: if wanted == 0 { 1.0 } else { found as f64 / wanted as f64 },
        })
    }

    /// The kinds of every conversation's turns, and each labelled group's tallies summed over
    /// the conversations (the groups of [`KIND_GROUPS`] with any question, in its order).
    fn kinds_use(&self) -> KindsUse {
        let mut memories = BTreeMap::new();
        for (kind, n) in self.conversations.iter().flat_map(|c| &c.kinds) {
            *memories.entry(kind.clone()).or_insert(0) += n;
        }
        let labelled = KIND_GROUPS
            .iter()
            .filter_map(|&(group, kind)| {
                let tallies: Vec<_> =
                    self.conversations.iter().flat_map(|c| &c.labelled).filter(|t| t.group == group).collect();
                let sum = |f: fn(&KindFound) -> usize| tallies.iter().map(|t| f(t)).sum::<usize>();
                (sum(|t| t.questions) > 0).then(|| KindFound {
                    group: group.to_string(),
                    kind: kind.as_str().to_string(),
                    questions: sum(|t| t.questions),
                    found: sum(|t| t.found),
                    turns: sum(|t| t.turns),
                    turns_found: sum(|t| t.turns_found),
                    predicted: sum(|t| t.predicted),
                })
            })
            .collect();
        KindsUse { memories, labelled }
    }

    /// One reported question's result in every column, by turn id.
    fn question_result(&self, q: &QuestionRun, thresholds: &[Option<f64>]) -> QuestionResult {
        let modes = self
            .settings
            .columns
            .iter()
            .zip(&q.outcomes)
            .zip(thresholds)
            .map(|((mode, o), threshold)| {
                let outcome = QuestionOutcome {
                    returned: o.returned.clone(),
                    via: o.via.clone(),
                    recall_10: (!q.gold.is_empty()).then(|| {
                        let found = q.gold.iter().filter(|g| o.ranked.iter().take(10).any(|r| r == *g)).count();
                        found as f64 / q.gold.len() as f64
                    }),
                    confidence: o.confidence,
                    rejected: threshold.zip(o.confidence).map(|(t, c)| c < t),
                };
                (mode.clone(), outcome)
            })
            .collect();
        QuestionResult {
            conversation: self.conversations[q.conversation].id.clone(),
            id: q.id.clone(),
            group: q.group.clone(),
            adversarial: q.adversarial,
            gold: q.gold_turns.clone(),
            modes,
        }
    }
}

/// The threshold rejecting the most adversarial questions of the split while refusing at
/// most `max_false_refusal` of its answerable ones (the lowest such threshold on ties).
pub(super) fn calibrate(questions: &[&QuestionRun], m: usize, max_false_refusal: f64) -> Option<f64> {
    let (answerable, adversarial) = confidences(questions, m)?;
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

/// Column `m`'s confidences of the answerable and of the adversarial questions; none for a
/// column without a gate (a peer).
fn confidences(questions: &[&QuestionRun], m: usize) -> Option<(Vec<f64>, Vec<f64>)> {
    let of = |adversarial: bool| -> Option<Vec<f64>> {
        questions.iter().filter(|q| q.adversarial == adversarial).map(|q| q.outcomes[m].confidence).collect()
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
        auc: rates::auc(answerable, adversarial),
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

pub(super) fn mode_report(questions: &[&QuestionRun], m: usize, threshold: Option<f64>, top_k: usize) -> ModeReport {
    let mut by_group: BTreeMap<String, Vec<&QuestionRun>> = BTreeMap::new();
    for q in questions.iter().filter(|q| !q.adversarial && !q.gold.is_empty()) {
        by_group.entry(q.group.clone()).or_default().push(q);
        by_group.entry(ANSWERABLE_GROUP.to_string()).or_default().push(q);
    }
    let groups = by_group.into_iter().map(|(g, list)| (g, group_report(&list, m, top_k))).collect();
    let gate = confidences(questions, m).map_or_else(GateReport::default, |(answerable, adversarial)| {
        gate_report(&answerable, &adversarial, threshold)
    });
    let per = |f: fn(&super::run::Outcome) -> f64| questions.iter().map(|q| f(&q.outcomes[m])).collect::<Vec<f64>>();
    let (mut tokens, mut millis) = (per(|o| o.tokens as f64), per(|o| o.millis));
    let (mut handed_tokens, mut handed) = (per(|o| o.handed_tokens as f64), per(|o| o.handed as f64));
    let (l, ht, h) = (latency(&mut tokens), latency(&mut handed_tokens), latency(&mut handed));
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

pub(super) fn group_report(questions: &[&QuestionRun], m: usize, top_k: usize) -> GroupReport {
    let n = questions.len();
    let mut curve = vec![0.0; top_k];
    let mut hit_10 = 0.0;
    let mut handed_recall = 0.0;
    let mut newest_first = NewestFirst::default();
    for q in questions {
        let ranked = &q.outcomes[m].ranked;
        if let Some(&newest) = q.gold.iter().max()
            && q.gold.len() >= 2
        {
            newest_first.questions += 1;
            let rank = |e: &u32| ranked.iter().position(|r| r == e).unwrap_or(usize::MAX);
            let at = rank(&newest);
            if at != usize::MAX && q.gold.iter().all(|g| *g == newest || rank(g) > at) {
                newest_first.first += 1;
            }
        }
        // Each gold turn counts once, however many of its passages are returned.
        let mut found: Vec<u32> = Vec::new();
        for (k, slot) in curve.iter_mut().enumerate() {
            if let Some(e) = ranked.get(k)
                && q.gold.contains(e)
                && !found.contains(e)
            {
                found.push(*e);
            }
            let found = found.len();
            *slot += found as f64 / q.gold.len() as f64;
        }
        if ranked.iter().take(10).any(|e| q.gold.contains(e)) {
            hit_10 += 1.0;
        }
        let handed = &ranked[..q.outcomes[m].handed.min(ranked.len())];
        let mut found: Vec<&u32> = handed.iter().filter(|e| q.gold.contains(e)).collect();
        found.sort_unstable();
        found.dedup();
        handed_recall += found.len() as f64 / q.gold.len() as f64;
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
