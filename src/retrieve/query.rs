//! What a query brings to retrieval: its text, analysed terms, embedding, what it asks for and
//! the episodes a result may hold ([`Query`]), and its BM25 evidence in the form the GPU takes
//! ([`Lexical`]). Plain data; must not rank.

use super::bm25::Analyzer;
use crate::embed::EMBEDDING_DIM;
use crate::error::{Error, Result};
use crate::kind::Asks;

/// A query ready to run: its text, analysed terms, embedding and what it asks for.
#[derive(Debug, Clone)]
pub struct Query {
    /// The text.
    pub text: String,
    /// BM25 terms.
    pub terms: Vec<String>,
    /// L2-normalised embedding.
    pub embedding: Vec<f32>,
    /// What its words ask for (a timeline; what the asker said), read once here.
    pub asks: Asks,
    /// The episodes (by index) a result may hold; `None`: every one. Ranking is unchanged: a
    /// result is the full ranking's best allowed episodes (a filter applied inside ranking,
    /// not to a cut list).
    pub only: Option<std::sync::Arc<[bool]>>,
}

impl Query {
    /// Analyses `text`; `embedding` is its MiniLM vector. An empty query is an error.
    pub fn new(analyzer: &mut Analyzer, text: &str, embedding: Vec<f32>) -> Result<Query> {
        if text.trim().is_empty() {
            return Err(Error::InvalidArgument("empty query".into()));
        }
        if embedding.len() != EMBEDDING_DIM {
            return Err(Error::InvalidArgument(format!(
                "query embedding has {} values, expected {EMBEDDING_DIM}",
                embedding.len()
            )));
        }
        Ok(Query {
            text: text.to_string(),
            terms: analyzer.terms(text),
            embedding,
            asks: Asks::of_question(text),
            only: None,
        })
    }

    /// Whether a result may hold episode `e`.
    pub fn allows(&self, e: u32) -> bool {
        self.only.as_ref().is_none_or(|only| only.get(e as usize).copied().unwrap_or(false))
    }
}

/// A query's BM25 evidence for the GPU: non-zero scores by ascending node, and its BM25 anchors.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Lexical {
    /// (node, BM25 score), ascending node.
    pub entries: Vec<(u32, f32)>,
    /// The top `anchor_k` nodes by BM25.
    pub anchors: Vec<u32>,
}

impl Lexical {
    /// The BM25 score of `node` (0 without a match).
    pub fn score(&self, node: u32) -> f32 {
        self.entries.binary_search_by_key(&node, |e| e.0).map_or(0.0, |k| self.entries[k].1)
    }
}
