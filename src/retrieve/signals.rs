//! The signals of a node for a query: its dense score (a scan of every embedding, the
//! passage discount) and the blend with BM25 into the similarity of the graph modes. Must not
//! rank or collect.

use super::*;

impl Memory {
    pub(super) fn base(&self, query: &Query) -> Base {
        let n = self.graph.node_count();
        let dense = self.dense_scan(query);
        let mut bm25 = vec![0.0; n];
        self.bm25.score_into(&query.terms, &mut bm25);
        let w = self.config.lexical_weight;
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
        dense_score(i, cosine, self.turn_nodes[i], self.config.passage_discount)
    }

    /// The exact dense score of `node` for `query`.
    pub(super) fn node_dense(&self, node: u32, query: &Query) -> f32 {
        self.dense_score(node as usize, dot(self.embedding(node), &query.embedding))
    }

    /// The dense score of every node for `query`, by a scan of every embedding.
    pub(super) fn dense_scan(&self, query: &Query) -> Vec<f32> {
        self.discounted(dots(&self.embeddings, &query.embedding))
    }

    /// [`Memory::dense_score`] of every node, from their cosines (or bounds).
    pub(super) fn discounted(&self, mut cosines: Vec<f32>) -> Vec<f32> {
        if self.config.passage_discount != 0.0 {
            for (i, x) in cosines.iter_mut().enumerate() {
                *x = self.dense_score(i, *x);
            }
        }
        cosines
    }
}
