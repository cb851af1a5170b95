//! The figures of a gate from its confidences: ROC AUC, the operating point at a limit on
//! false refusals, both rates against the threshold, the reliability diagram. Must not choose a
//! threshold for use (`knowing` does) nor run retrieval.

use serde::Serialize;

/// Limits on false refusals (shares of answerable questions) the gate is reported at.
pub const GATE_LIMITS: [f64; 3] = [0.01, 0.03, 0.05];

/// What the gate does at one limit on false refusals.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OperatingPoint {
    /// The limit the threshold was chosen for (share of answerable questions refused).
    pub max_false_refusal: f64,
    /// Share of answerable questions refused.
    pub refused: f64,
    /// Share of unanswerable questions rejected.
    pub rejected: f64,
}

/// Thresholds of a gate's curve: 0, 0.01, …, 1.
pub const TAU_STEPS: usize = 101;

/// (τ, share of `answerable` under τ, share of `unanswerable` under τ) at every τ of
/// [`TAU_STEPS`].
pub fn rates_by_threshold(answerable: &[f64], unanswerable: &[f64]) -> Vec<(f64, f64, f64)> {
    let under = |xs: &[f64], t: f64| {
        if xs.is_empty() { 0.0 } else { xs.iter().filter(|&&x| x < t).count() as f64 / xs.len() as f64 }
    };
    (0..TAU_STEPS)
        .map(|i| {
            let t = i as f64 / (TAU_STEPS - 1) as f64;
            (t, under(answerable, t), under(unanswerable, t))
        })
        .collect()
}

/// One bin of a reliability diagram: the questions whose confidence falls in it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReliabilityBin {
    /// The bin's lower bound (it holds [low, high); the last one holds 1 too).
    pub low: f64,
    /// Its upper bound.
    pub high: f64,
    /// Questions in it.
    pub questions: usize,
    /// Their mean confidence.
    pub confidence: f64,
    /// The share of them that are answerable.
    pub answerable: f64,
}

/// Bins of a reliability diagram, of equal width over [0, 1].
pub const RELIABILITY_BINS: usize = 10;

/// The reliability diagram of `answerable` and `unanswerable` confidences (in [0, 1]): per
/// bin, how many fall in it, their mean confidence and the share answerable (a calibrated gate
/// has the two equal).
pub fn reliability(answerable: &[f64], unanswerable: &[f64]) -> Vec<ReliabilityBin> {
    let bins = RELIABILITY_BINS as f64;
    let labelled = || answerable.iter().map(|&c| (c, true)).chain(unanswerable.iter().map(|&c| (c, false)));
    (0..RELIABILITY_BINS)
        .map(|b| {
            let (low, high) = (b as f64 / bins, (b + 1) as f64 / bins);
            let last = b + 1 == RELIABILITY_BINS;
            let of: Vec<(f64, bool)> = labelled().filter(|&(c, _)| c >= low && (c < high || last)).collect();
            let n = of.len().max(1) as f64;
            ReliabilityBin {
                low,
                high,
                questions: of.len(),
                confidence: of.iter().map(|x| x.0).sum::<f64>() / n,
                answerable: of.iter().filter(|x| x.1).count() as f64 / n,
            }
        })
        .collect()
}

/// ROC AUC: the probability that a random positive scores above a random negative (ties ½).
pub fn auc(positive: &[f64], negative: &[f64]) -> Option<f64> {
    if positive.is_empty() || negative.is_empty() {
        return None;
    }
    let mut all: Vec<(f64, bool)> =
        positive.iter().map(|&x| (x, true)).chain(negative.iter().map(|&x| (x, false))).collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    // Mann–Whitney U with mid-ranks for ties.
    let mut rank_sum = 0.0;
    let mut i = 0;
    while i < all.len() {
        let mut j = i;
        while j < all.len() && all[j].0 == all[i].0 {
            j += 1;
        }
        let mid = (i + j + 1) as f64 / 2.0;
        rank_sum += all[i..j].iter().filter(|x| x.1).count() as f64 * mid;
        i = j;
    }
    let (p, n) = (positive.len() as f64, negative.len() as f64);
    Some((rank_sum - p * (p + 1.0) / 2.0) / (p * n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auc_counts_ties_as_half() {
        assert_eq!(auc(&[0.9, 0.8], &[0.1, 0.2]), Some(1.0));
        assert_eq!(auc(&[0.1], &[0.9]), Some(0.0));
        assert_eq!(auc(&[0.5, 0.5], &[0.5]), Some(0.5));
        assert_eq!(auc(&[0.3, 0.7], &[0.5]), Some(0.5));
        assert_eq!(auc(&[], &[0.5]), None);
    }

    #[test]
    fn the_curve_runs_from_nothing_to_everything_under_the_threshold() {
        let curve = rates_by_threshold(&[0.2, 0.9], &[0.1]);
        assert_eq!(curve.len(), TAU_STEPS);
        assert_eq!(curve[0], (0.0, 0.0, 0.0));
        assert_eq!(curve[50], (0.5, 0.5, 1.0));
        assert_eq!(curve[100], (1.0, 1.0, 1.0));
    }

    #[test]
    fn each_confidence_falls_in_one_bin_and_the_last_holds_one() {
        let bins = reliability(&[0.95, 1.0, 0.85, 0.05], &[0.9, 0.0, 0.1]);
        assert_eq!(bins.len(), RELIABILITY_BINS);
        assert_eq!(bins.iter().map(|b| b.questions).sum::<usize>(), 7);
        let (top, first) = (&bins[9], &bins[0]);
        // 0.9, 0.95 and 1 are in [0.9, 1]: two answerable of three.
        assert_eq!((top.questions, top.low, top.high), (3, 0.9, 1.0));
        assert!((top.confidence - 2.85 / 3.0).abs() < 1e-12 && (top.answerable - 2.0 / 3.0).abs() < 1e-12);
        // 0 and 0.05 in [0, 0.1), 0.1 in the next.
        assert_eq!((first.questions, first.answerable, bins[1].questions), (2, 0.5, 1));
        assert_eq!((bins[5].questions, bins[5].confidence, bins[5].answerable), (0, 0.0, 0.0));
    }
}
