//! The GPU bridge: what a memory hands the GPU ranker (its graph, lexical evidence, settings)
//! and how a GPU ranking becomes a [`Retrieval`]. Must not dispatch kernels (that is `gpu`).

use super::*;

impl Memory {
    /// What the GPU ranking step needs of this memory's graph.
    pub fn gpu_input(&self) -> GraphInput<'_> {
        GraphInput {
            embeddings: &self.embeddings,
            spreading: &self.spreading,
            spreading_no_fan: &self.spreading_no_fan,
            pagerank: &self.graph.pagerank,
            links: &self.concept_episodes,
            turns: &self.turn_nodes,
            transition: &self.transition,
        }
    }

    /// A query's lexical evidence in the form the GPU takes: its non-zero BM25 scores and its
    /// BM25 anchors (the same values and anchors the CPU path uses).
    pub fn lexical(&self, query: &Query) -> Lexical {
        let entries = self.bm25.score_sparse(&query.terms);
        let mut ranked = entries.clone();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let anchors = ranked
            .into_iter()
            .filter(|&(d, _)| self.config.concept_anchors || self.turn_nodes[d as usize] != CONCEPT_TURN)
            .take(self.config.anchor_k)
            .map(|(d, _)| d)
            .collect();
        Lexical { entries, anchors }
    }

    /// The GPU settings of a synapse-family mode ([`RetrieveConfig::rank_settings`]).
    pub fn rank_settings(&self, mode: Mode) -> Option<RankSettings> {
        self.config.rank_settings(mode)
    }

    /// Turns the GPU's result for `query` into the retrieval the CPU returns. `None` when the
    /// ranked nodes the GPU could see did not decide the walk: the caller then runs the query
    /// on the CPU.
    pub fn finish(&self, query: &Query, lexical: &Lexical, ranked: &Ranked, mode: Mode) -> Option<Retrieval> {
        if !ranked.complete {
            return None;
        }
        let graph_modes = mode != Mode::NoGraph;
        let hits = ranked
            .hits
            .iter()
            .map(|h| {
                let i = h.node as usize;
                Hit {
                    episode: self.episode_of(h.episode_node),
                    node: h.node,
                    signals: Signals {
                        dense: self.node_dense(h.node, query),
                        bm25: lexical.score(h.node),
                        activation: Some(h.activation),
                        pagerank: Some(if graph_modes { self.graph.pagerank[i] } else { 0.0 }),
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
        Some(self.gate(query, Retrieval { mode, hits, confidence: ranked.confidence, rejected: false, anchors }))
    }
}
