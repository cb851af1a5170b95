//! The uncertainty gate: rejecting a result whose confidence is under τ_gate, scaled by
//! whether the speaker a question names said the best episodes. Must not rank.

use super::*;

impl Memory {
    /// Applies the speaker check to the confidence and, in synapse modes, the threshold.
    pub(super) fn gate(&self, query: &Query, mut r: Retrieval) -> Retrieval {
        if self.config.speaker_check
            && let Some(ratio) = self.speaker_agreement(query, &r.hits)
        {
            r.confidence *= ratio;
        }
        r.rejected = r.mode.is_synapse() && r.confidence < self.config.gate_threshold;
        r
    }

    /// When the query names exactly one of the conversation's speakers: the score of the best
    /// returned episode that speaker said, divided by the best score (0 when they said none of
    /// them). `None` when the query names no speaker or several.
    pub fn speaker_agreement(&self, query: &Query, hits: &[Hit]) -> Option<f32> {
        let speaker = self.named_speaker(query)?;
        let top = hits.first()?.signals.score;
        let own = hits
            .iter()
            .find(|h| first_name(&self.episodes[h.episode as usize].speaker) == speaker)
            .map_or(0.0, |h| h.signals.score);
        Some(if top > 0.0 { (own / top).clamp(0.0, 1.0) } else { 0.0 })
    }

    /// The one speaker of the conversation the query names (first name, lower case), if it
    /// names exactly one.
    pub(super) fn named_speaker(&self, query: &Query) -> Option<String> {
        let words: Vec<String> = query
            .text
            .split(|c: char| !c.is_alphanumeric())
            .map(|w| w.to_lowercase())
            .filter(|w| !w.is_empty())
            .collect();
        let named: Vec<&String> = self.speakers.iter().filter(|s| words.contains(s)).collect();
        let [speaker] = named.as_slice() else { return None };
        Some((*speaker).clone())
    }
}
