//! What the gates and the rerank read of the words: whom a question names, its content words,
//! how much of them a turn (or its window) holds, and whose fact a turn states (by
//! `person.rs`'s rule). One place for each rule; must not rank.

use super::memory::Ctx;
use super::query::Query;
use crate::graph::extract::is_stop;

/// Whether a term's postings hold `node`.
pub(super) fn holds(postings: &[(u32, u32)], node: u32) -> bool {
    postings.binary_search_by_key(&node, |p| p.0).is_ok()
}

/// The share of the idf of `terms` (idf and postings, as [`super::bm25::Bm25Index::term_postings`]
/// gives them) that `nodes` hold between them; 0 without terms.
pub(super) fn held_share(terms: &[(f32, &[(u32, u32)])], nodes: &[u32]) -> f32 {
    let total: f32 = terms.iter().map(|t| t.0).sum();
    let held: f32 = terms.iter().filter(|t| nodes.iter().any(|&n| holds(t.1, n))).map(|t| t.0).sum();
    if total > 0.0 { held / total } else { 0.0 }
}

/// The words of a query against one memory: whom it names, its content words, and whose fact
/// each turn states.
#[derive(Debug, Clone, Copy)]
pub(super) struct Words<'a>(pub(super) Ctx<'a>);

impl Words<'_> {
    /// The one speaker of the conversation the query names (first name, lower case), if it
    /// names exactly one.
    pub(super) fn named_speaker(&self, query: &Query) -> Option<String> {
        let words: Vec<String> = query
            .text
            .split(|c: char| !c.is_alphanumeric())
            .map(|w| w.to_lowercase())
            .filter(|w| !w.is_empty())
            .collect();
        let named: Vec<&String> = self.0.m.speakers.iter().filter(|s| words.contains(s)).collect();
        let [speaker] = named.as_slice() else { return None };
        Some((*speaker).clone())
    }

    /// The query's content words: its terms but a speaker's name, the extractor's stop words
    /// and one-letter pieces of a contraction or a possessive (the analyzer splits "Maya's"
    /// into "maya" and "s").
    pub(super) fn content_terms(&self, query: &Query) -> Vec<String> {
        let content_word = |t: &str| t.chars().count() > 1 && !self.speaker_term(t) && !is_stop(t);
        query.terms.iter().filter(|t| content_word(t)).cloned().collect()
    }

    /// Whether term `t` is (the start of) a speaker's name.
    pub(super) fn speaker_term(&self, t: &str) -> bool {
        t.len() >= 3 && self.0.m.speakers.iter().any(|s| s.starts_with(t))
    }

    /// The names the query writes ([`Query::names`]) but the speakers'.
    pub(super) fn other_names(&self, query: &Query) -> Vec<String> {
        query.names.iter().filter(|t| !self.speaker_term(t)).cloned().collect()
    }

    /// The nodes of an episode's window: the turn and the turns before and after it.
    pub(super) fn window_nodes(&self, e: u32) -> [u32; 3] {
        let m = self.0.m;
        let last = m.episodes.len().saturating_sub(1) as u32;
        [e.saturating_sub(1), e, (e + 1).min(last)].map(|n| m.episode_nodes[n as usize])
    }

    /// Whether the fact episode `e` states is `speaker`'s: they said it of themselves, or the
    /// other said it of them ([`super::person::speaks_of_listener`]).
    pub(super) fn owned_by(&self, e: u32, speaker: &str) -> bool {
        let m = self.0.m;
        (m.said_by[e as usize] == speaker) != m.of_listener[e as usize]
    }
}
