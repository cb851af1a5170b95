//! The retrieval modes: each baseline, Synapse and its ablations over a full scan, the
//! synapse family through the dense index, and ranking scores into hits. The formulas are
//! `crate::score`'s; this file composes them.

use super::*;

impl Memory {
    /// A synapse-family mode through the dense index: the quantised embeddings bound every
    /// node's cosine, so its dense score; exact dense scores are computed for the dense
    /// anchors' candidates and for the nodes whose score bound could place them in the result
    /// ([`Memory::rank_hits`]). Anchors, scores and result are the scan's, to the bit.
    /// `bounds` are the index's ([`DenseIndex::bounds`] of the query).
    pub(super) fn run_indexed(&self, query: &Query, mode: Mode, bounds: Vec<f32>) -> Retrieval {
        let n = self.graph.node_count();
        let c = &self.config;
        let mut bm25 = vec![0.0f32; n];
        self.bm25.score_into(&query.terms, &mut bm25);
        let max = bm25.iter().copied().fold(0.0f32, f32::max);
        let w = c.lexical_weight;
        // The same rule as `base`, so a scored node's score is the scan's to the bit.
        let sim = |dense: f32, i: usize| similarity(dense, bm25[i], max, w);
        // Bounds and exact values of the dense score, as `base` computes it.
        let dense_bound = self.discounted(bounds);
        let mut known = vec![f32::NAN; n];
        let dense_anchors = self.dense_anchors(&self.anchor_scores(&dense_bound), &mut known, query);
        let anchors = self.with_lexical_anchors(dense_anchors, &bm25);
        let known = known;
        let dense_of = |i: u32| {
            let x = known[i as usize];
            if x.is_nan() { self.node_dense(i, query) } else { x }
        };
        let a0: Vec<(u32, f32)> =
            anchors.iter().map(|&i| (i, initial_activation(c.alpha, sim(dense_of(i), i as usize)))).collect();
        let a = self.activate(mode, &a0, None);
        let pagerank = |i: usize| if mode == Mode::NoGraph { 0.0 } else { self.graph.pagerank[i] };
        let lambdas = [c.lambda_similarity, c.lambda_activation, c.lambda_pagerank];
        let hybrid = |dense: f32, i: usize| hybrid(lambdas, sim(dense, i), a[i], pagerank(i));
        let bound: Vec<f32> =
            (0..n).map(|i| hybrid(if known[i].is_nan() { dense_bound[i] } else { known[i] }, i)).collect();
        let score = |i: u32| hybrid(dense_of(i), i as usize);
        let (hits, top) = self.rank_hits(query, mode, &bound, false, &score, &|i, s| Signals {
            dense: dense_of(i as u32),
            bm25: bm25[i],
            activation: Some(a[i]),
            pagerank: Some(pagerank(i)),
            relevance: None,
            score: s,
        });
        let confidence = top.map_or(0.0, |i| a[i as usize]);
        self.gate(query, Retrieval { mode, hits, confidence, rejected: false, anchors })
    }

    /// The result's episodes: nodes are taken best first (score descending, then node id)
    /// through [`Memory::expand`] until `mode`'s depth of episodes is in
    /// ([`RetrieveConfig::depth`]: `top_k`, or the rerank pool of `synapse-gnn`). `bound`
    /// holds each node's score when `exact`, otherwise an upper bound of it; `score` gives a
    /// node's exact score; concepts stand for their episodes where `mode`
    /// [ranks concepts](Mode::ranks_concepts).
    /// Only a window of the best bounds is scored, widened until every node outside it is
    /// bounded below the last node the result used, so the result is the full ranking's.
    /// Returns the hits and the top-ranked node.
    pub(super) fn rank_hits(
        &self,
        query: &Query,
        mode: Mode,
        bound: &[f32],
        exact: bool,
        score: &dyn Fn(u32) -> f32,
        signals: &dyn Fn(usize, f32) -> Signals,
    ) -> (Vec<Hit>, Option<u32>) {
        let n = bound.len();
        let top_k = self.config.depth(mode);
        let mut window = (4 * top_k + 64).min(n);
        loop {
            let (chosen, next) = select_top(bound, window);
            let mut order: Vec<(u32, f32)> =
                chosen.into_iter().map(|i| (i, if exact { bound[i as usize] } else { score(i) })).collect();
            if !exact {
                order.sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)));
            }
            let (hits, used) = self.expand(query, &order, top_k, mode.ranks_concepts(), score, signals);
            let settled = match next {
                None => true,
                Some(next) => hits.len() >= top_k && (exact || order[used - 1].1 > next),
            };
            if settled {
                return (hits, order.first().map(|o| o.0));
            }
            window = (window * 4).min(n);
        }
    }

    pub(super) fn run(&self, query: &Query, base: &Base, mode: Mode, trace: Option<&mut Trace>) -> Retrieval {
        let n = self.graph.node_count();
        let episode_only = |scores: &[f32]| -> Vec<f32> {
            (0..n)
                .map(|i| match self.graph.nodes[i] {
                    NodeRef::Episode(_) => scores[i],
                    NodeRef::Concept(_) => f32::NEG_INFINITY,
                })
                .collect()
        };
        let signals = |i: usize, score: f32, activation: Option<f32>, pagerank: Option<f32>| Signals {
            dense: base.dense[i],
            bm25: base.bm25[i],
            activation,
            pagerank,
            relevance: None,
            score,
        };
        match mode {
            Mode::Dense | Mode::Bm25 | Mode::Rrf | Mode::Linear => {
                let scores = match mode {
                    Mode::Dense => base.dense.clone(),
                    Mode::Bm25 => base.bm25.clone(),
                    Mode::Rrf => {
                        let mut s = vec![0.0f32; n];
                        for list in [&base.dense, &base.bm25] {
                            for (rank, i) in rank_order(&episode_only(list)).into_iter().enumerate() {
                                s[i as usize] += 1.0 / (self.config.rrf_k + rank as f32 + 1.0);
                            }
                        }
                        s
                    }
                    _ => {
                        let max = episode_only(&base.bm25).into_iter().fold(0.0f32, f32::max);
                        (0..n)
                            .map(|i| {
                                let lexical = if max > 0.0 { base.bm25[i] / max } else { 0.0 };
                                0.5 * base.dense[i] + 0.3 * lexical + 0.2 * self.config.importance
                            })
                            .collect()
                    }
                };
                let ranked = episode_only(&scores);
                let (hits, _) = self
                    .rank_hits(query, mode, &ranked, true, &|i| ranked[i as usize], &|i, s| signals(i, s, None, None));
                let confidence = hits.first().map_or(0.0, |h| h.signals.score);
                self.gate(query, Retrieval { mode, hits, confidence, rejected: false, anchors: Vec::new() })
            }
            Mode::Ppr => {
                let anchors = self.anchors(base);
                let mut teleport = vec![0.0f64; n];
                for &a in &anchors {
                    teleport[a as usize] = initial_activation(self.config.alpha, base.sim[a as usize]) as f64 + 1e-6;
                }
                let ppr = self.transition.rank(self.config.ppr_damping as f64, Some(&teleport));
                let scores: Vec<f32> = ppr.iter().map(|&p| (p * n as f64) as f32).collect();
                let (hits, _) = self.rank_hits(query, mode, &scores, true, &|i| scores[i as usize], &|i, s| {
                    signals(i, s, Some(s), Some(self.graph.pagerank[i]))
                });
                let confidence = hits.first().map_or(0.0, |h| h.signals.score);
                self.gate(query, Retrieval { mode, hits, confidence, rejected: false, anchors })
            }
            _ => {
                let anchors = self.anchors(base);
                let a0: Vec<(u32, f32)> =
                    anchors.iter().map(|&i| (i, initial_activation(self.config.alpha, base.sim[i as usize]))).collect();
                let a = self.activate(mode, &a0, trace);
                let c = &self.config;
                let pagerank: Vec<f32> = if mode == Mode::NoGraph { vec![0.0; n] } else { self.graph.pagerank.clone() };
                let lambdas = [c.lambda_similarity, c.lambda_activation, c.lambda_pagerank];
                let scores: Vec<f32> = (0..n).map(|i| hybrid(lambdas, base.sim[i], a[i], pagerank[i])).collect();
                let (hits, top) = self.rank_hits(query, mode, &scores, true, &|i| scores[i as usize], &|i, s| {
                    signals(i, s, Some(a[i]), Some(pagerank[i]))
                });
                let confidence = top.map_or(0.0, |i| a[i as usize]);
                self.gate(query, Retrieval { mode, hits, confidence, rejected: false, anchors })
            }
        }
    }
}
