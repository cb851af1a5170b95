//! Scoring: each mode's family of scores over the signals of every node (the baselines, PPR,
//! Synapse's hybrid score after spreading) or, for the synapse family on a large memory,
//! through the dense index's bounds; then collection and the activation gate. The formulas are
//! `crate::score`'s; this file composes them as the mode's plan says.

use super::anchors::Anchors;
use super::collect::Collector;
use super::memory::Ctx;
use super::mode::{Baseline, Mode, Scoring};
use super::query::Query;
use super::result::{Retrieval, Signals};
use super::signals::{Base, Similarity};
use super::spread::Spread;
use super::verdict::ActivationGate;
use crate::activation::Trace;
use crate::graph::NodeRef;
use crate::score::{hybrid, initial_activation, rank_order, similarity};

/// The scoring stage.
#[derive(Debug, Clone, Copy)]
pub(super) struct Scorer<'a>(pub(super) Ctx<'a>);

impl Scorer<'_> {
    /// A synapse-family mode through the dense index: the quantised embeddings bound every
    /// node's cosine, so its dense score; exact dense scores are computed for the dense
    /// anchors' candidates and for the nodes whose score bound could place them in the result
    /// ([`Collector::rank_hits`]). Anchors, scores and result are the scan's, to the bit.
    /// `bounds` are the index's ([`super::index::DenseIndex::bounds`] of the query).
    pub(super) fn indexed(&self, query: &Query, mode: Mode, bounds: Vec<f32>) -> Retrieval {
        let Ctx { m, config: c } = self.0;
        let n = m.graph.node_count();
        let (signals, anchors) = (Similarity(self.0), Anchors(self.0));
        let mut bm25 = vec![0.0f32; n];
        m.bm25.score_into(&query.terms, &mut bm25);
        let max = bm25.iter().copied().fold(0.0f32, f32::max);
        let w = c.lexical_weight;
        // The same rule as `base`, so a scored node's score is the scan's to the bit.
        let sim = |dense: f32, i: usize| similarity(dense, bm25[i], max, w);
        // Bounds and exact values of the dense score, as `base` computes it.
        let dense_bound = signals.discounted(bounds);
        let mut known = vec![f32::NAN; n];
        let dense_anchors = anchors.dense(&anchors.scores(&dense_bound), &mut known, query);
        let anchors = anchors.with_lexical(dense_anchors, &bm25);
        let known = known;
        let dense_of = |i: u32| {
            let x = known[i as usize];
            if x.is_nan() { signals.node_dense(i, query) } else { x }
        };
        let a0: Vec<(u32, f32)> =
            anchors.iter().map(|&i| (i, initial_activation(c.alpha, sim(dense_of(i), i as usize)))).collect();
        let a = Spread(self.0).activate(mode, &a0, None);
        let graph = mode.plan().dynamics.graph;
        let pagerank = |i: usize| if graph { m.graph.pagerank[i] } else { 0.0 };
        let lambdas = [c.lambda_similarity, c.lambda_activation, c.lambda_pagerank];
        let hybrid = |dense: f32, i: usize| hybrid(lambdas, sim(dense, i), a[i], pagerank(i));
        let bound: Vec<f32> =
            (0..n).map(|i| hybrid(if known[i].is_nan() { dense_bound[i] } else { known[i] }, i)).collect();
        let score = |i: u32| hybrid(dense_of(i), i as usize);
        let (hits, top) = Collector(self.0).rank_hits(query, mode, &bound, false, &score, &|i, s| Signals {
            dense: dense_of(i as u32),
            bm25: bm25[i],
            activation: Some(a[i]),
            pagerank: Some(pagerank(i)),
            relevance: None,
            score: s,
        });
        let confidence = top.map_or(0.0, |i| a[i as usize]);
        ActivationGate(self.0)
            .apply(query, Retrieval { mode, hits, confidence, rejected: false, anchors, timeline: false })
    }

    /// A query in `mode` over every node: the mode's scoring family on the signals of `base`,
    /// collected and gated. `trace` records the dynamics of a synapse-family mode.
    pub(super) fn run(&self, query: &Query, base: &Base, mode: Mode, trace: Option<&mut Trace>) -> Retrieval {
        let Ctx { m, config } = self.0;
        let n = m.graph.node_count();
        let collector = Collector(self.0);
        let gate = ActivationGate(self.0);
        let episode_only = |scores: &[f32]| -> Vec<f32> {
            (0..n)
                .map(|i| match m.graph.nodes[i] {
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
        match mode.plan().scoring {
            Scoring::Baseline(baseline) => {
                let scores = match baseline {
                    Baseline::Dense => base.dense.clone(),
                    Baseline::Bm25 => base.bm25.clone(),
                    Baseline::Rrf => {
                        let mut s = vec![0.0f32; n];
                        for list in [&base.dense, &base.bm25] {
                            for (rank, i) in rank_order(&episode_only(list)).into_iter().enumerate() {
                                s[i as usize] += 1.0 / (config.rrf_k + rank as f32 + 1.0);
                            }
                        }
                        s
                    }
                    Baseline::Linear => {
                        let max = episode_only(&base.bm25).into_iter().fold(0.0f32, f32::max);
                        (0..n)
                            .map(|i| {
                                let lexical = if max > 0.0 { base.bm25[i] / max } else { 0.0 };
                                0.5 * base.dense[i] + 0.3 * lexical + 0.2 * config.importance
                            })
                            .collect()
                    }
                };
                let ranked = episode_only(&scores);
                let (hits, _) = collector
                    .rank_hits(query, mode, &ranked, true, &|i| ranked[i as usize], &|i, s| signals(i, s, None, None));
                let confidence = hits.first().map_or(0.0, |h| h.signals.score);
                gate.apply(
                    query,
                    Retrieval { mode, hits, confidence, rejected: false, anchors: Vec::new(), timeline: false },
                )
            }
            Scoring::Ppr => {
                let anchors = Anchors(self.0).of(base);
                let mut teleport = vec![0.0f64; n];
                for &a in &anchors {
                    teleport[a as usize] = initial_activation(config.alpha, base.sim[a as usize]) as f64 + 1e-6;
                }
                let ppr = m.transition.rank(config.ppr_damping as f64, Some(&teleport));
                let scores: Vec<f32> = ppr.iter().map(|&p| (p * n as f64) as f32).collect();
                let (hits, _) = collector.rank_hits(query, mode, &scores, true, &|i| scores[i as usize], &|i, s| {
                    signals(i, s, Some(s), Some(m.graph.pagerank[i]))
                });
                let confidence = hits.first().map_or(0.0, |h| h.signals.score);
                gate.apply(query, Retrieval { mode, hits, confidence, rejected: false, anchors, timeline: false })
            }
            Scoring::Synapse => {
                let anchors = Anchors(self.0).of(base);
                let a0: Vec<(u32, f32)> =
                    anchors.iter().map(|&i| (i, initial_activation(config.alpha, base.sim[i as usize]))).collect();
                let a = Spread(self.0).activate(mode, &a0, trace);
                let c = config;
                let pagerank: Vec<f32> =
                    if mode.plan().dynamics.graph { m.graph.pagerank.clone() } else { vec![0.0; n] };
                let lambdas = [c.lambda_similarity, c.lambda_activation, c.lambda_pagerank];
                let scores: Vec<f32> = (0..n).map(|i| hybrid(lambdas, base.sim[i], a[i], pagerank[i])).collect();
                let (hits, top) = collector.rank_hits(query, mode, &scores, true, &|i| scores[i as usize], &|i, s| {
                    signals(i, s, Some(a[i]), Some(pagerank[i]))
                });
                let confidence = top.map_or(0.0, |i| a[i as usize]);
                gate.apply(query, Retrieval { mode, hits, confidence, rejected: false, anchors, timeline: false })
            }
        }
    }
}
