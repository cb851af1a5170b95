//! The scoring rules of retrieval, each written once: the dense score of a node, the blend of
//! dense and lexical similarity, the initial activation of an anchor, the triple hybrid score,
//! dot products, and the order of a ranking. `retrieve` composes them into modes; the GPU's
//! kernels (`gpu::kernels`, `shaders/*.wgsl`) are their twins and name the function they
//! mirror, and the parity tests hold them to it.
//!
//! This module owns formulas only: it must not know memories, graphs, embeddings,
//! configurations or devices (callers pass the numbers), so every layer above may use it.

use crate::parallel::select_top;

/// A node's turn in the column of first passages (`turn_nodes`) when the node is a concept: no
/// turn.
pub const CONCEPT_TURN: u32 = u32::MAX;

/// The dense score of node `i` whose cosine (or a bound of it) is `cosine` and whose turn's
/// first passage is node `turn` ([`CONCEPT_TURN`] for a concept): `cosine − discount` for a
/// turn's later passage, `cosine` otherwise (see `RetrieveConfig::passage_discount`;
/// `dense_scan` in shaders/similarity.wgsl is the GPU's twin).
#[inline]
pub fn dense_score(i: usize, cosine: f32, turn: u32, discount: f32) -> f32 {
    if turn != i as u32 && turn != CONCEPT_TURN { cosine - discount } else { cosine }
}

/// The similarity of the graph modes: `(1 − w)·dense + w·bm25 / max_bm25`, the dense score
/// alone when `w` is 0 or no node matched a query term (`max_bm25` is 0). `dense_scan` and
/// `lexical_blend` in shaders/similarity.wgsl are the GPU's twin.
#[inline]
pub fn similarity(dense: f32, bm25: f32, max_bm25: f32, w: f32) -> f32 {
    if w == 0.0 || max_bm25 == 0.0 { dense } else { (1.0 - w) * dense + w * bm25 / max_bm25 }
}

/// The initial activation a(0) of an anchor of similarity `sim`: `max(α·sim, 0)`
/// (`seed_anchors` in shaders/activation.wgsl is the GPU's twin).
#[inline]
pub fn initial_activation(alpha: f32, sim: f32) -> f32 {
    (alpha * sim).max(0.0)
}

/// The triple hybrid score `λ1·similarity + λ2·activation + λ3·PageRank`; `lambdas` are
/// `[λ1, λ2, λ3]` (`hybrid` in shaders/score.wgsl is the GPU's twin).
#[inline]
pub fn hybrid(lambdas: [f32; 3], similarity: f32, activation: f32, pagerank: f32) -> f32 {
    lambdas[0] * similarity + lambdas[1] * activation + lambdas[2] * pagerank
}

/// How the recency prior falls with an episode's age.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum RecencyForm {
    /// `2^(−age / half-life)`: the Synapse paper's S_decay(t), smooth.
    HalfLife,
    /// Mnemosyne's freshness tiers: 1 under 30 days, 0.5 under 180, 0.25 after.
    Tiers,
}

/// The recency prior `S_recency` of an episode `age_days` before the memory's latest, in
/// [0, 1] (1 for the latest): the term the final score adds, weighted (Synapse's
/// `S_final = S + λ·S_decay(t)`).
pub fn recency(form: RecencyForm, age_days: f32, half_life_days: f32) -> f32 {
    let age = age_days.max(0.0);
    match form {
        RecencyForm::HalfLife => (-age / half_life_days).exp2(),
        RecencyForm::Tiers if age < 30.0 => 1.0,
        RecencyForm::Tiers if age < 180.0 => 0.5,
        RecencyForm::Tiers => 0.25,
    }
}

/// The score with the learned signal of `synapse-gnn`: `score + weight · relevance` (λ4 is
/// the weight).
pub fn combined(score: f32, relevance: f32, weight: f32) -> f32 {
    score + weight * relevance
}

/// Positions of `scores` reordered by [`combined`] score, descending; ties keep the given order.
pub fn rerank(scores: &[f32], relevance: &[f32], weight: f32) -> Vec<usize> {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    let c: Vec<f32> = scores.iter().zip(relevance).map(|(&s, &r)| combined(s, r, weight)).collect();
    order.sort_by(|&a, &b| c[b].total_cmp(&c[a]).then(a.cmp(&b)));
    order
}

/// Node ids by descending score, ties by ascending id; NaN and −∞ last.
pub fn rank_order(scores: &[f32]) -> Vec<u32> {
    let mut order: Vec<u32> = (0..scores.len() as u32).collect();
    order.sort_by(|&a, &b| scores[b as usize].total_cmp(&scores[a as usize]).then(a.cmp(&b)));
    order
}

/// The first `k` node ids of [`rank_order`], without sorting the rest.
pub fn top_order(scores: &[f32], k: usize) -> Vec<u32> {
    select_top(scores, k).0
}

/// Dot product with eight independent accumulators, so the compiler can vectorise it (a single
/// running sum is a serial chain of additions: 3.5× slower on the query path, measured).
#[inline(always)]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// `dot(row, query)` for every row of `rows` (`n × query.len()`, row after row): the same
/// sums in the same order, so the same values, across threads for a large memory
/// ([`crate::parallel::fill_nodes`]).
pub fn dots(rows: &[f32], query: &[f32]) -> Vec<f32> {
    let dim = query.len().max(1);
    let mut out = vec![0.0f32; rows.len() / dim];
    crate::parallel::fill_nodes(&mut out, |first, piece| {
        dots_into(&rows[first * dim..(first + piece.len()) * dim], query, piece)
    });
    out
}

/// [`dots`] of some rows into `out`, compiled also for AVX2 and picked at run time (a scan
/// reads every embedding; the wider vectors keep it at memory speed).
#[multiversion::multiversion(targets("x86_64+avx2"))]
fn dots_into(rows: &[f32], query: &[f32], out: &mut [f32]) {
    for (o, v) in out.iter_mut().zip(rows.chunks_exact(query.len().max(1))) {
        *o = dot(v, query);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::EMBEDDING_DIM;
    use rand::rngs::StdRng;
    use rand::{RngExt, SeedableRng};

    #[test]
    fn a_scan_split_across_threads_gives_each_row_its_dot_product() {
        let n = crate::parallel::PARALLEL_NODES + 333;
        let mut rng = StdRng::seed_from_u64(9);
        let rows: Vec<f32> = (0..n * EMBEDDING_DIM).map(|_| rng.random_range(-0.1..0.1f32)).collect();
        let q: Vec<f32> = (0..EMBEDDING_DIM).map(|_| rng.random_range(-0.1..0.1f32)).collect();
        let scan = dots(&rows, &q);
        assert_eq!(scan.len(), n);
        for (i, &x) in scan.iter().enumerate() {
            assert_eq!(x.to_bits(), dot(&rows[i * EMBEDDING_DIM..(i + 1) * EMBEDDING_DIM], &q).to_bits(), "row {i}");
        }
    }

    #[test]
    fn the_similarity_is_the_dense_score_when_nothing_matched_lexically() {
        assert_eq!(similarity(0.4, 0.0, 0.0, 0.7), 0.4);
        assert_eq!(similarity(0.4, 3.0, 6.0, 0.0), 0.4);
        let blended = similarity(0.4, 3.0, 6.0, 0.7);
        assert!((blended - (0.3 * 0.4 + 0.7 * 0.5)).abs() < 1e-6, "{blended}");
    }

    #[test]
    fn a_later_passage_is_discounted_and_a_first_passage_or_concept_is_not() {
        assert_eq!(dense_score(5, 0.5, 5, 0.15), 0.5);
        assert_eq!(dense_score(5, 0.5, CONCEPT_TURN, 0.15), 0.5);
        assert!((dense_score(6, 0.5, 5, 0.15) - 0.35).abs() < 1e-7);
        assert_eq!(initial_activation(2.0, -0.1), 0.0);
        assert_eq!(hybrid([0.6, 0.4, 0.0], 0.5, 0.25, 9.0), 0.6 * 0.5 + 0.4 * 0.25);
    }

    #[test]
    fn rerank_adds_the_weighted_relevance_and_keeps_ties_in_order() {
        let scores = [0.9, 0.8, 0.7, 0.7];
        let relevance = [0.0, 0.5, 1.0, 1.0];
        assert_eq!(rerank(&scores, &relevance, 0.0), vec![0, 1, 2, 3]);
        // 0.9, 1.05, 1.2, 1.2: the tie between 2 and 3 keeps their order.
        assert_eq!(rerank(&scores, &relevance, 0.5), vec![2, 3, 1, 0]);
        assert_eq!(combined(0.5, 0.5, 2.0), 1.5);
    }
}
