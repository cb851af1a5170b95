//! BM25 over the nodes of one conversation: an in-memory inverted index whose terms come from
//! Lance's full-text analyzer. Owns tokenisation for lexical matching and BM25 scoring; it
//! knows nothing of embeddings or the graph.
//!
//! Scoring is Lance's (and tantivy's): `idf(t) = ln(1 + (N − n_t + 0.5) / (n_t + 0.5))`,
//! `score(d) = Σ_t idf(t) · (k1 + 1)·tf / (tf + k1·(1 − b + b·|d| / avgdl))` over the distinct
//! query terms, k1 = 1.2, b = 0.75. The index is in memory because a query on a conversation
//! of a few thousand nodes then takes microseconds, where a Lance FTS query through its
//! scanner costs milliseconds (see `benches/retrieve.rs`).

use std::collections::HashMap;

use lance_index::scalar::inverted::tokenizer::InvertedIndexParams;
use lance_index::scalar::inverted::tokenizer::document_tokenizer::LanceTokenizer;
use lance_tokenizer::TokenStream;

use crate::error::{Error, Result};

/// BM25 term-frequency saturation, Lance's and tantivy's default.
pub const DEFAULT_K1: f32 = 1.2;
/// BM25 length normalisation, Lance's and tantivy's default.
pub const DEFAULT_B: f32 = 0.75;

/// Lance's default full-text analyzer: `simple` tokenizer (splits on every non-alphanumeric
/// character), tokens over 40 bytes dropped, lower case, English Snowball stemming, English
/// stop words removed, ASCII folding.
#[derive(Debug, Clone)]
pub struct Analyzer {
    inner: Box<dyn LanceTokenizer>,
}

impl Analyzer {
    /// Lance's default analyzer.
    pub fn new() -> Result<Analyzer> {
        let inner = InvertedIndexParams::default()
            .build()
            .map_err(|e| Error::Tokenizer(format!("cannot build the Lance analyzer: {e}")))?;
        Ok(Analyzer { inner })
    }

    /// The terms of a text, in order, repeats kept.
    pub fn terms(&mut self, text: &str) -> Vec<String> {
        let mut stream = self.inner.token_stream_for_doc(text);
        let mut out = Vec::new();
        while stream.advance() {
            out.push(stream.token().text.clone());
        }
        out
    }
}

/// An inverted index over a fixed list of documents (node texts).
#[derive(Debug, Clone, PartialEq)]
pub struct Bm25Index {
    k1: f32,
    b: f32,
    terms: HashMap<String, u32>,
    /// Per term: (document, term frequency), documents ascending.
    postings: Vec<Vec<(u32, u32)>>,
    /// Per document: its length normaliser `k1·(1 − b + b·|d|/avgdl)`.
    norm: Vec<f32>,
    lengths: Vec<u32>,
}

impl Bm25Index {
    /// Indexes documents already split into terms.
    pub fn build(docs: &[Vec<String>], k1: f32, b: f32) -> Bm25Index {
        let mut index =
            Bm25Index { k1, b, terms: HashMap::new(), postings: Vec::new(), norm: Vec::new(), lengths: Vec::new() };
        index.extend(docs);
        index
    }

    /// Appends documents (numbered after those held): the index is then the one
    /// [`Bm25Index::build`] makes of all of them, posting for posting. Costs the new documents'
    /// terms plus one pass over the document lengths (the average length changes).
    pub fn extend(&mut self, docs: &[Vec<String>]) {
        for doc in docs {
            let d = self.lengths.len() as u32;
            self.lengths.push(doc.len() as u32);
            let mut counts: HashMap<&str, u32> = HashMap::new();
            for t in doc {
                *counts.entry(t.as_str()).or_default() += 1;
            }
            let mut counts: Vec<(&str, u32)> = counts.into_iter().collect();
            counts.sort_unstable();
            for (t, tf) in counts {
                let next = self.terms.len() as u32;
                let id = *self.terms.entry(t.to_string()).or_insert(next);
                if id as usize == self.postings.len() {
                    self.postings.push(Vec::new());
                }
                self.postings[id as usize].push((d, tf));
            }
        }
        self.normalise();
    }

    /// Sets every document's length normaliser from the average length of those held.
    fn normalise(&mut self) {
        let (k1, b) = (self.k1, self.b);
        let total: u64 = self.lengths.iter().map(|&l| l as u64).sum();
        let avgdl = if self.lengths.is_empty() {
            1.0
        } else {
            (total as f32 / self.lengths.len() as f32).max(f32::MIN_POSITIVE)
        };
        self.norm = self.lengths.iter().map(|&l| k1 * (1.0 - b + b * l as f32 / avgdl)).collect();
    }

    /// Keeps the first `docs` documents only: the index is then the one [`Bm25Index::build`]
    /// makes of them, posting for posting (terms are numbered by first appearance, so the
    /// terms only later documents use are the last ones). Costs one pass over the terms.
    pub fn truncate(&mut self, docs: usize) {
        if docs >= self.lengths.len() {
            return;
        }
        let d = docs as u32;
        let first_later = self.postings.partition_point(|p| p.first().is_some_and(|&(doc, _)| doc < d));
        self.postings.truncate(first_later);
        self.terms.retain(|_, id| (*id as usize) < first_later);
        for list in &mut self.postings {
            let keep = list.partition_point(|&(doc, _)| doc < d);
            list.truncate(keep);
        }
        self.lengths.truncate(docs);
        self.normalise();
    }

    /// Number of documents.
    pub fn len(&self) -> usize {
        self.lengths.len()
    }

    /// Whether the index holds no document.
    pub fn is_empty(&self) -> bool {
        self.lengths.is_empty()
    }

    /// The k1 and b this index scores with.
    pub fn params(&self) -> (f32, f32) {
        (self.k1, self.b)
    }

    /// Calls `add(document, score)` for every posting of the distinct known `query_terms`, term
    /// by term: summing per document in call order gives each document's BM25 score.
    fn for_each_posting(&self, query_terms: &[String], mut add: impl FnMut(u32, f32)) {
        let n = self.len() as f32;
        let mut seen: Vec<u32> = Vec::with_capacity(query_terms.len());
        for t in query_terms {
            let Some(&id) = self.terms.get(t) else { continue };
            if seen.contains(&id) {
                continue;
            }
            seen.push(id);
            let list = &self.postings[id as usize];
            let idf = idf(n, list.len() as f32);
            for &(d, tf) in list {
                let tf = tf as f32;
                add(d, idf * (self.k1 + 1.0) * tf / (tf + self.norm[d as usize]));
            }
        }
    }

    /// Per distinct query term, in query order: its idf and its postings, (document, term
    /// frequency) by ascending document; a term no document holds has the largest idf and no
    /// postings. What the learned gate reads to see which of a question's words a turn holds.
    pub fn term_postings(&self, query_terms: &[String]) -> Vec<(f32, &[(u32, u32)])> {
        let n = self.len() as f32;
        let mut seen: Vec<&str> = Vec::with_capacity(query_terms.len());
        let mut out = Vec::with_capacity(query_terms.len());
        for t in query_terms {
            if seen.contains(&t.as_str()) {
                continue;
            }
            seen.push(t);
            let list: &[(u32, u32)] = self.terms.get(t).map_or(&[], |&id| &self.postings[id as usize]);
            out.push((idf(n, list.len() as f32), list));
        }
        out
    }

    /// The idf of a term no document holds: the largest any term can have in this index.
    pub fn largest_idf(&self) -> f32 {
        idf(self.len() as f32, 0.0)
    }

    /// The non-zero scores of [`Bm25Index::score_into`] as (document, score), ascending
    /// document: the same sums, in the same order, without a dense vector.
    pub fn score_sparse(&self, query_terms: &[String]) -> Vec<(u32, f32)> {
        let mut scores: HashMap<u32, f32> = HashMap::new();
        self.for_each_posting(query_terms, |d, s| *scores.entry(d).or_insert(0.0) += s);
        let mut out: Vec<(u32, f32)> = scores.into_iter().filter(|&(_, s)| s != 0.0).collect();
        out.sort_unstable_by_key(|&(d, _)| d);
        out
    }

    /// Adds each document's BM25 score for `query_terms` (repeats count once) into `scores`
    /// (`len()` long, zeroed by the caller); documents that match nothing keep 0.
    pub fn score_into(&self, query_terms: &[String], scores: &mut [f32]) {
        self.for_each_posting(query_terms, |d, s| scores[d as usize] += s);
    }
}

/// Inverse document frequency of a term held by `df` of `n` documents (Lucene's BM25 idf,
/// never negative).
fn idf(n: f32, df: f32) -> f32 {
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Brute-force BM25 re-derived from raw text on every call: shares no code and no
    /// statistics with the index.
    fn oracle(docs: &[&str], query: &str) -> Vec<f64> {
        let mut analyzer = Analyzer::new().unwrap();
        let docs: Vec<Vec<String>> = docs.iter().map(|d| analyzer.terms(d)).collect();
        let mut q = analyzer.terms(query);
        q.sort();
        q.dedup();
        let n = docs.len() as f64;
        let avgdl = docs.iter().map(|d| d.len() as f64).sum::<f64>() / n;
        docs.iter()
            .map(|d| {
                q.iter()
                    .map(|t| {
                        let df = docs.iter().filter(|x| x.contains(t)).count() as f64;
                        let tf = d.iter().filter(|x| *x == t).count() as f64;
                        if tf == 0.0 {
                            return 0.0;
                        }
                        let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                        idf * 2.2 * tf / (tf + 1.2 * (0.25 + 0.75 * d.len() as f64 / avgdl))
                    })
                    .sum()
            })
            .collect()
    }

    fn index_scores(docs: &[&str], query: &str) -> Vec<f32> {
        let mut analyzer = Analyzer::new().unwrap();
        let terms: Vec<Vec<String>> = docs.iter().map(|d| analyzer.terms(d)).collect();
        let index = Bm25Index::build(&terms, DEFAULT_K1, DEFAULT_B);
        let mut scores = vec![0.0; docs.len()];
        let query = analyzer.terms(query);
        index.score_into(&query, &mut scores);
        // The sparse form holds exactly the non-zero entries, bit for bit.
        let nonzero: Vec<(u32, f32)> =
            scores.iter().enumerate().filter(|(_, s)| **s != 0.0).map(|(d, s)| (d as u32, *s)).collect();
        assert_eq!(index.score_sparse(&query), nonzero);
        scores
    }

    #[test]
    fn analyzer_is_lances_default() {
        let mut a = Analyzer::new().unwrap();
        assert_eq!(a.terms("The Running dogs, and a café!"), ["run", "dog", "cafe"]);
        assert!(a.terms("").is_empty());
    }

    #[test]
    fn scores_match_the_oracle_on_real_sentences() {
        let docs = [
            "Caroline went to the LGBTQ support group yesterday and it was powerful.",
            "Melanie painted a lake sunrise last year; painting calms her.",
            "I'm going camping with the kids next month, camping is our thing.",
            "The support group made Caroline feel accepted.",
            "",
        ];
        for q in ["When did Caroline go to the support group?", "camping painting", "nothing matches zzz", ""] {
            let got = index_scores(&docs, q);
            let want = oracle(&docs, q);
            for (g, w) in got.iter().zip(&want) {
                approx::assert_relative_eq!(*g as f64, *w, max_relative = 1e-5, epsilon = 1e-9);
            }
        }
        let got = index_scores(&docs, "support group Caroline");
        assert!(got[3] > got[0] && got[0] > 0.0 && got[1] == 0.0, "{got:?}");
    }

    proptest! {
        #[test]
        fn scores_match_the_oracle(
            docs in proptest::collection::vec("[a-e ]{0,40}|[A-Za-z ,.!?']{0,60}", 1..20),
            query in "[a-e ]{0,12}|[A-Za-z ?]{0,30}",
        ) {
            let docs: Vec<&str> = docs.iter().map(String::as_str).collect();
            let got = index_scores(&docs, &query);
            let want = oracle(&docs, &query);
            for (g, w) in got.iter().zip(&want) {
                prop_assert!((*g as f64 - w).abs() <= 1e-5 * w.abs().max(1e-3), "{g} vs {w}");
            }
        }

        #[test]
        fn extending_and_truncating_equal_building_at_once(
            docs in proptest::collection::vec("[a-e ]{0,40}|[A-Za-z ,.!?']{0,60}", 0..20),
            cuts in proptest::collection::vec(0usize..20, 0..4),
        ) {
            let mut a = Analyzer::new().unwrap();
            let terms: Vec<Vec<String>> = docs.iter().map(|d| a.terms(d)).collect();
            let whole = Bm25Index::build(&terms, DEFAULT_K1, DEFAULT_B);
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(terms.len())).collect();
            cuts.push(terms.len());
            cuts.sort_unstable();
            let mut pieces = Bm25Index::build(&[], DEFAULT_K1, DEFAULT_B);
            let mut from = 0;
            for &to in &cuts {
                pieces.extend(&terms[from..to]);
                from = to;
            }
            prop_assert_eq!(&pieces, &whole);
            // Cut back to the first cut, then grown again: the same index.
            pieces.truncate(cuts[0]);
            prop_assert_eq!(&pieces, &Bm25Index::build(&terms[..cuts[0]], DEFAULT_K1, DEFAULT_B));
            pieces.extend(&terms[cuts[0]..]);
            prop_assert_eq!(&pieces, &whole);
        }
    }
}
