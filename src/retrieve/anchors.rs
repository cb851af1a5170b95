//! The anchors of a query: the top `anchor_k` nodes by dense similarity (by a scan, or exact
//! through the dense index's bounds) joined by the top `anchor_k` by BM25. Must not spread,
//! score or collect.

use std::borrow::Cow;

use super::memory::Ctx;
use super::query::Query;
use super::signals::{Base, Similarity};
use crate::parallel::select_top;
use crate::score::{CONCEPT_TURN, top_order};

/// The anchors stage.
#[derive(Debug, Clone, Copy)]
pub(super) struct Anchors<'a>(pub(super) Ctx<'a>);

impl Anchors<'_> {
    /// Anchors: the union of the top `anchor_k` nodes by BM25 (score > 0) and by dense
    /// similarity, ascending node id.
    pub(super) fn of(&self, base: &Base) -> Vec<u32> {
        self.with_lexical(top_order(&self.scores(&base.dense), self.0.config.anchor_k), &base.bm25)
    }

    /// `dense` anchors joined by the top `anchor_k` nodes by BM25 (score > 0), ascending node id.
    pub(super) fn with_lexical(&self, mut dense: Vec<u32>, bm25: &[f32]) -> Vec<u32> {
        let bm25 = self.scores(bm25);
        dense.extend(top_order(&bm25, self.0.config.anchor_k).into_iter().filter(|&i| bm25[i as usize] > 0.0));
        dense.sort_unstable();
        dense.dedup();
        dense
    }

    /// `scores` as anchors are chosen by: concepts' at −∞ unless concepts may anchor.
    pub(super) fn scores<'s>(&self, scores: &'s [f32]) -> Cow<'s, [f32]> {
        if self.0.config.concept_anchors {
            return Cow::Borrowed(scores);
        }
        Cow::Owned(
            scores
                .iter()
                .zip(&self.0.m.turn_nodes)
                .map(|(&s, &t)| if t == CONCEPT_TURN { f32::NEG_INFINITY } else { s })
                .collect(),
        )
    }

    /// The `anchor_k` nodes of highest dense score (ties by lower node), as a scan finds them:
    /// exact dense scores, written into `known`, for a window of the best bounds, widened until
    /// the last anchor's score is above every bound outside it.
    pub(super) fn dense(&self, bound: &[f32], known: &mut [f32], query: &Query) -> Vec<u32> {
        let (n, k) = (bound.len(), self.0.config.anchor_k);
        let similarity = Similarity(self.0);
        let mut window = (4 * k).max(64).min(n);
        loop {
            let (chosen, next) = select_top(bound, window);
            let mut exact: Vec<(u32, f32)> = chosen
                .into_iter()
                .map(|i| {
                    let x = &mut known[i as usize];
                    if x.is_nan() {
                        *x = similarity.node_dense(i, query);
                    }
                    (i, *x)
                })
                .collect();
            exact.sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)));
            exact.truncate(k);
            let settled = match next {
                None => true,
                Some(next) => exact.len() == k && exact.last().is_some_and(|x| x.1 > next),
            };
            if settled {
                return exact.into_iter().map(|x| x.0).collect();
            }
            window = (window * 4).min(n);
        }
    }
}
