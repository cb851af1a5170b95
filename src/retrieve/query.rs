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
    /// The terms of the names it writes: its words with a capital but a sentence's first
    /// ("Caroline", "Lisbon", "LGBTQ"), analysed as [`Query::terms`] are, each once.
    pub names: Vec<String>,
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
            names: names(analyzer, text),
            only: None,
        })
    }

    /// Whether a result may hold episode `e`.
    pub fn allows(&self, e: u32) -> bool {
        self.only.as_ref().is_none_or(|only| only.get(e as usize).copied().unwrap_or(false))
    }
}

/// The terms of the words of `text` written with a capital, but a sentence's first word and
/// one-letter words and pieces ("I", the "s" of "Maya's"), each once, in order.
fn names(analyzer: &mut Analyzer, text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut opens = true;
    for word in text.split_whitespace() {
        let bare = word.trim_matches(|c: char| !c.is_alphanumeric());
        let capital = bare.chars().next().is_some_and(char::is_uppercase) && bare.chars().nth(1).is_some();
        if capital && !opens {
            for t in analyzer.terms(bare) {
                if t.chars().nth(1).is_some() && !out.contains(&t) {
                    out.push(t);
                }
            }
        }
        opens = word.ends_with(['.', '?', '!', ':']) || (opens && bare.is_empty());
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    fn names_of(text: &str) -> Vec<String> {
        names(&mut Analyzer::new().unwrap(), text)
    }

    #[test]
    fn names_are_the_capitalised_words_past_a_sentences_first() {
        assert_eq!(names_of("What breed is Maya's dog?"), ["maya"]);
        // Stemmed, as the terms are.
        assert_eq!(names_of("When did Caroline go to the LGBTQ support group?"), ["carolin", "lgbtq"]);
        // A sentence's first word and "I" are no names; the second sentence opens afresh.
        assert_eq!(names_of("What is the capital of Australia? Tell me, I forgot."), ["australia"]);
        assert_eq!(names_of("How did I feel about it?"), Vec::<String>::new());
        // Each once.
        assert_eq!(names_of("Did Tom meet Tom's sister in Lisbon?"), ["tom", "lisbon"]);
    }
}
