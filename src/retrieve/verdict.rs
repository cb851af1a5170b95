//! The verdict after ranking: the [`Verdict`] trait every gate implements, and the paper's
//! gate ([`ActivationGate`]: a result whose top activation, scaled by whether the speaker a
//! question names said the best episodes, is under τ_gate is rejected). The learned gate is
//! `gate.rs`'s. Must not rank.

use super::memory::Ctx;
use super::query::Query;
use super::result::{Hit, Retrieval};
use super::words::Words;
use crate::error::Result;

/// A gate: its confidence that the memory holds what `query` asks, from a ranked result, and
/// whether the result is rejected.
pub trait Verdict {
    /// The confidence and whether `r` is rejected.
    fn judge(&self, query: &Query, r: &Retrieval) -> Result<(f32, bool)>;
}

/// The paper's gate, with the speaker check.
#[derive(Debug, Clone, Copy)]
pub struct ActivationGate<'a>(pub(super) Ctx<'a>);

impl Verdict for ActivationGate<'_> {
    fn judge(&self, query: &Query, r: &Retrieval) -> Result<(f32, bool)> {
        Ok(self.verdict(query, r))
    }
}

impl ActivationGate<'_> {
    /// The ranking's confidence (the top activation of a synapse mode, the top score of a
    /// baseline) times the speaker agreement when the settings check it; rejected, in a
    /// synapse mode, under `gate_threshold`. It cannot fail.
    fn verdict(&self, query: &Query, r: &Retrieval) -> (f32, bool) {
        let config = self.0.config;
        let mut confidence = r.confidence;
        if config.speaker_check
            && let Some(ratio) = self.speaker_agreement(query, self.gated(r))
        {
            confidence *= ratio;
        }
        (confidence, r.mode.is_synapse() && confidence < config.gate_threshold)
    }

    /// Applies the gate to a ranking: its confidence and rejection set.
    pub(super) fn apply(&self, query: &Query, mut r: Retrieval) -> Retrieval {
        (r.confidence, r.rejected) = self.verdict(query, &r);
        r
    }

    /// What both gates see of a result: its first `top_k` hits, so that `synapse-gnn`, which
    /// ranks a deeper pool for its rerank ([`super::RetrieveConfig::depth`]), is gated as `synapse`.
    pub(super) fn gated<'r>(&self, r: &'r Retrieval) -> &'r [Hit] {
        &r.hits[..r.hits.len().min(self.0.config.top_k)]
    }

    /// When the query names exactly one of the conversation's speakers: the score of the best
    /// returned episode that speaker said, divided by the best score (0 when they said none of
    /// them). `None` when the query names no speaker or several.
    pub(super) fn speaker_agreement(&self, query: &Query, hits: &[Hit]) -> Option<f32> {
        let speaker = Words(self.0).named_speaker(query)?;
        let top = hits.first()?.signals.score;
        let said_by = &self.0.m.said_by;
        let own = hits.iter().find(|h| said_by[h.episode as usize] == speaker).map_or(0.0, |h| h.signals.score);
        Some(if top > 0.0 { (own / top).clamp(0.0, 1.0) } else { 0.0 })
    }
}
