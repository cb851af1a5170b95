//! The recency prior of the final score: each returned episode gains `λ · S_recency(age)`
//! (`crate::score::recency`), its age taken before the memory's latest episode, and the result
//! is ordered again. Runs after the learned rerank, on the hits a ranking returned (CPU or GPU
//! alike); must not rank, rerank or gate.

use super::memory::Ctx;
use super::result::Retrieval;
use crate::score::recency;

/// The recency stage.
#[derive(Debug, Clone, Copy)]
pub(super) struct RecencyPrior<'a>(pub(super) Ctx<'a>);

impl RecencyPrior<'_> {
    /// `r` with each hit's score raised by the prior and the hits in the new score order (ties
    /// keep their order); unchanged at weight 0. An episode without a time gains nothing.
    pub(super) fn apply(&self, mut r: Retrieval) -> Retrieval {
        let Ctx { m, config } = self.0;
        let prior = &config.recency;
        let Some(now) = m.latest else { return r };
        if prior.weight == 0.0 {
            return r;
        }
        for hit in &mut r.hits {
            if let Some(t) = m.episodes[hit.episode as usize].timestamp {
                let days = (now - t).num_seconds() as f32 / 86_400.0;
                hit.signals.score += prior.weight * recency(prior.form, days, prior.half_life_days);
            }
        }
        r.hits.sort_by(|a, b| b.signals.score.total_cmp(&a.signals.score));
        r
    }
}

#[cfg(test)]
mod tests {
    use crate::score::{RecencyForm, recency};

    #[test]
    fn the_prior_halves_every_half_life_and_steps_down_by_tiers() {
        assert_eq!(recency(RecencyForm::HalfLife, 0.0, 30.0), 1.0);
        assert!((recency(RecencyForm::HalfLife, 30.0, 30.0) - 0.5).abs() < 1e-6);
        assert!((recency(RecencyForm::HalfLife, 90.0, 30.0) - 0.125).abs() < 1e-6);
        // An episode dated after the latest (clock skew) counts as the latest.
        assert_eq!(recency(RecencyForm::HalfLife, -5.0, 30.0), 1.0);
        let tiers: Vec<f32> =
            [0.0, 29.9, 30.0, 179.0, 180.0, 900.0].iter().map(|&d| recency(RecencyForm::Tiers, d, 30.0)).collect();
        assert_eq!(tiers, [1.0, 1.0, 0.5, 0.5, 0.25, 0.25]);
    }
}
