//! The first stage of a query: each node's signals, its dense score (a scan of every embedding,
//! the passage discount) and BM25, and their blend into the similarity of the graph modes
//! ([`Base`]). Must not rank or collect.

use super::memory::Ctx;
use super::query::Query;
use crate::score::{dense_score, dot, dots, similarity};

/// Per-query signals of every node, shared by all modes.
pub(super) struct Base {
    /// The dense score (cosine, less the passage discount).
    pub(super) dense: Vec<f32>,
    /// BM25.
    pub(super) bm25: Vec<f32>,
    /// The similarity of the graph modes: cosine blended with normalised BM25.
    pub(super) sim: Vec<f32>,
}

/// The signals stage.
#[derive(Debug, Clone, Copy)]
pub(super) struct Similarity<'a>(pub(super) Ctx<'a>);

impl Similarity<'_> {
    /// Every node's signals for `query`, by a scan.
    pub(super) fn base(&self, query: &Query) -> Base {
        let Ctx { m, config } = self.0;
        let n = m.graph.node_count();
        let dense = self.dense_scan(query);
        let mut bm25 = vec![0.0; n];
        m.bm25.score_into(&query.terms, &mut bm25);
        let w = config.lexical_weight;
        let max = bm25.iter().copied().fold(0.0f32, f32::max);
        let sim = if w == 0.0 || max == 0.0 {
            dense.clone()
        } else {
            dense.iter().zip(&bm25).map(|(&d, &b)| similarity(d, b, max, w)).collect()
        };
        Base { dense, bm25, sim }
    }

    /// The dense score of node `i` whose cosine (or a bound of it) is `cosine`: less
    /// `passage_discount` for a turn's later passage, the cosine itself otherwise.
    pub(super) fn dense_score(&self, i: usize, cosine: f32) -> f32 {
        dense_score(i, cosine, self.0.m.turn_nodes[i], self.0.config.passage_discount)
    }

    /// The exact dense score of `node` for `query`.
    pub(super) fn node_dense(&self, node: u32, query: &Query) -> f32 {
        self.dense_score(node as usize, dot(self.0.m.embedding(node), &query.embedding))
    }

    /// The dense score of every node for `query`, by a scan of every embedding.
    pub(super) fn dense_scan(&self, query: &Query) -> Vec<f32> {
        self.discounted(dots(&self.0.m.embeddings, &query.embedding))
    }

    /// [`Similarity::dense_score`] of every node, from their cosines (or bounds).
    pub(super) fn discounted(&self, mut cosines: Vec<f32>) -> Vec<f32> {
        if self.0.config.passage_discount != 0.0 {
            for (i, x) in cosines.iter_mut().enumerate() {
                *x = self.dense_score(i, *x);
            }
        }
        cosines
    }
}
