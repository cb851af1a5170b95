//! Anchors and activation: the dense and lexical anchors of a query, and spreading
//! activation from them (dense or sparse). Must not score or collect.

use super::*;

impl Memory {
    /// Every node's activation after spreading from `initial` (node, a₀) in `mode`. Synapse
    /// and synapse-gnn on a memory of `sparse_min_nodes` or more compute it on the nodes the
    /// anchors reach ([`activation::spread_sparse`]) where that is exact; otherwise, and when
    /// `trace` is asked for, on every node. The result is the same to the bit.
    pub(super) fn activate(&self, mode: Mode, initial: &[(u32, f32)], trace: Option<&mut Trace>) -> Vec<f32> {
        let n = self.graph.node_count();
        let config = self.config.activation_for(mode);
        if trace.is_none() && n >= self.sparse_min_nodes && matches!(mode, Mode::Synapse | Mode::SynapseGnn) {
            let resting = self.resting.get_or_init(|| Resting::new(&self.spreading, &config));
            if let Some(sparse) = activation::spread_sparse(&self.spreading, resting, &config, initial) {
                return sparse.to_dense(n);
            }
        }
        let mut a0 = vec![0.0f32; n];
        for &(i, v) in initial {
            a0[i as usize] = v;
        }
        activation::spread(self.spreading_for(mode), &config, &a0, trace)
    }

    pub(super) fn spreading_for(&self, mode: Mode) -> &Spreading {
        match mode {
            Mode::NoFan => &self.spreading_no_fan,
            Mode::NoGraph => &self.no_graph,
            _ => &self.spreading,
        }
    }

    /// Anchors: the union of the top `anchor_k` nodes by BM25 (score > 0) and by dense
    /// similarity, ascending node id.
    pub(super) fn anchors(&self, base: &Base) -> Vec<u32> {
        self.with_lexical_anchors(top_order(&self.anchor_scores(&base.dense), self.config.anchor_k), &base.bm25)
    }

    /// `dense` anchors joined by the top `anchor_k` nodes by BM25 (score > 0), ascending node id.
    pub(super) fn with_lexical_anchors(&self, mut dense: Vec<u32>, bm25: &[f32]) -> Vec<u32> {
        let bm25 = self.anchor_scores(bm25);
        dense.extend(top_order(&bm25, self.config.anchor_k).into_iter().filter(|&i| bm25[i as usize] > 0.0));
        dense.sort_unstable();
        dense.dedup();
        dense
    }

    /// `scores` as anchors are chosen by: concepts' at −∞ unless concepts may anchor.
    pub(super) fn anchor_scores<'a>(&self, scores: &'a [f32]) -> std::borrow::Cow<'a, [f32]> {
        if self.config.concept_anchors {
            return std::borrow::Cow::Borrowed(scores);
        }
        std::borrow::Cow::Owned(
            scores
                .iter()
                .zip(&self.turn_nodes)
                .map(|(&s, &t)| if t == CONCEPT_TURN { f32::NEG_INFINITY } else { s })
                .collect(),
        )
    }

    /// The `anchor_k` nodes of highest dense score (ties by lower node), as a scan finds them:
    /// exact dense scores, written into `known`, for a window of the best bounds, widened until
    /// the last anchor's score is above every bound outside it.
    pub(super) fn dense_anchors(&self, bound: &[f32], known: &mut [f32], query: &Query) -> Vec<u32> {
        let (n, k) = (bound.len(), self.config.anchor_k);
        let mut window = (4 * k).max(64).min(n);
        loop {
            let (chosen, next) = select_top(bound, window);
            let mut exact: Vec<(u32, f32)> = chosen
                .into_iter()
                .map(|i| {
                    let x = &mut known[i as usize];
                    if x.is_nan() {
                        *x = self.node_dense(i, query);
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
