//! The GPU bridge: what a memory hands the GPU ranker (its graph, a query's lexical evidence)
//! and how a GPU ranking becomes the [`Retrieval`] the CPU returns (the same collection
//! signals and gate). Must not dispatch kernels (that is `gpu`) nor rerank.

use super::collect::Collector;
use super::memory::Ctx;
use super::mode::Mode;
use super::query::{Lexical, Query};
use super::result::{Hit, Retrieval, Signals};
use super::signals::Similarity;
use super::verdict::ActivationGate;
use crate::gpu::request::{GraphInput, Ranked};
use crate::score::CONCEPT_TURN;

/// One memory as the GPU ranking step sees it.
#[derive(Debug, Clone, Copy)]
pub struct GpuBridge<'a>(pub Ctx<'a>);

impl<'a> GpuBridge<'a> {
    /// What the GPU ranking step needs of this memory's graph.
    pub fn input(&self) -> GraphInput<'a> {
        let m = self.0.m;
        GraphInput {
            embeddings: &m.embeddings,
            spreading: &m.spreading,
            spreading_no_fan: &m.spreading_no_fan,
            pagerank: &m.graph.pagerank,
            links: &m.concept_episodes,
            turns: &m.turn_nodes,
            transition: &m.transition,
        }
    }

    /// A query's lexical evidence in the form the GPU takes: its non-zero BM25 scores and its
    /// BM25 anchors (the same values and anchors the CPU path uses).
    pub fn lexical(&self, query: &Query) -> Lexical {
        let Ctx { m, config } = self.0;
        let entries = m.bm25.score_sparse(&query.terms);
        let mut ranked = entries.clone();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let anchors = ranked
            .into_iter()
            .filter(|&(d, _)| config.concept_anchors || m.turn_nodes[d as usize] != CONCEPT_TURN)
            .take(config.anchor_k)
            .map(|(d, _)| d)
            .collect();
        Lexical { entries, anchors }
    }

    /// Turns the GPU's result for `query` into the retrieval the CPU returns. `None` when the
    /// ranked nodes the GPU could see did not decide the walk: the caller then runs the query
    /// on the CPU.
    pub fn finish(&self, query: &Query, lexical: &Lexical, ranked: &Ranked, mode: Mode) -> Option<Retrieval> {
        if !ranked.complete {
            return None;
        }
        let m = self.0.m;
        let (collector, signals) = (Collector(self.0), Similarity(self.0));
        let graph_modes = mode.plan().dynamics.graph;
        let hits = ranked
            .hits
            .iter()
            .map(|h| {
                let i = h.node as usize;
                Hit {
                    episode: collector.episode_of(h.episode_node),
                    node: h.node,
                    signals: Signals {
                        dense: signals.node_dense(h.node, query),
                        bm25: lexical.score(h.node),
                        activation: Some(h.activation),
                        pagerank: Some(if graph_modes { m.graph.pagerank[i] } else { 0.0 }),
                        relevance: None,
                        score: h.score,
                    },
                }
            })
            .collect();
        let mut anchors = ranked.dense_anchors.clone();
        anchors.extend(&lexical.anchors);
        anchors.sort_unstable();
        anchors.dedup();
        let r = Retrieval { mode, hits, confidence: ranked.confidence, rejected: false, anchors, timeline: false };
        Some(ActivationGate(self.0).apply(query, r))
    }
}
