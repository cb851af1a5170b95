//! Phrases and terms (RAKE): a turn's tokens not taken by a date or a name are cut into runs of
//! content words at stop words, punctuation, numbers, possessives and weak words (`-ly` adverbs,
//! `-ed` participles); a first word right after a pronoun or modal is split off as a verb ("I play
//! | clarinet"); each run gives candidates of at most `max_phrase_words` words, cut from the end.
//! Over the candidate occurrences of a window, [`RakeStats`] holds each word's frequency and
//! degree (classic RAKE), from which a candidate's score is read.
//!
//! Owns the candidates and their statistics; it must not tokenise, decide names or dates, nor merge
//! candidates into concepts (that is the accumulator of the extractor).

use super::keys::{make_key, singular};
use super::tokens::{Gap, Token, span_label};
use super::words::{FastMap, VERB_CUES, weak_word};

/// One phrase or term candidate of a turn.
pub(super) struct Candidate {
    /// Its key ([`make_key`] of its words).
    pub(super) key: String,
    /// Its surface form.
    pub(super) label: String,
    /// Its words, lower case.
    pub(super) words: Vec<String>,
    /// Its first word, lower case, when that opens a sentence with a capital.
    pub(super) capital_start: Option<String>,
}

/// Phrase and term candidates of one turn, in text order (a run's leading verb first, then the
/// run's pieces from its end). `used` marks the tokens that dates and names took.
pub(super) fn find_phrases(
    text: &str,
    turn: &[Token],
    used: &[bool],
    max_phrase_words: usize,
    min_word_chars: usize,
) -> Vec<Candidate> {
    let mut cut = Cutter { text, turn, max_phrase_words, out: Vec::new() };
    let mut run: Vec<usize> = Vec::new();
    for (k, t) in turn.iter().enumerate() {
        if t.sent_start || t.gap != Gap::Space {
            cut.flush_run(&mut run);
        }
        if used[k] || !content_word(t, min_word_chars) {
            cut.flush_run(&mut run);
            continue;
        }
        run.push(k);
        if t.possessive {
            cut.flush_run(&mut run);
        }
    }
    cut.flush_run(&mut run);
    cut.out
}

/// Cuts runs of content words of one turn into candidates.
struct Cutter<'a> {
    text: &'a str,
    turn: &'a [Token],
    max_phrase_words: usize,
    out: Vec<Candidate>,
}

impl Cutter<'_> {
    /// Turns a run of content words into candidates of at most `max_phrase_words`, cut from the end.
    fn flush_run(&mut self, run: &mut Vec<usize>) {
        if run.is_empty() {
            return;
        }
        let max = self.max_phrase_words;
        let mut first = 0;
        if run.len() > 1 && verb_follows(self.turn, run[0]) {
            // "I play clarinet": the first word after a pronoun or modal is a verb, not part of the phrase.
            self.add_candidate(&run[..1]);
            first = 1;
        }
        let mut end = run.len();
        while end > first {
            let start = end.saturating_sub(max).max(first);
            self.add_candidate(&run[start..end]);
            end = start;
        }
        run.clear();
    }

    /// Adds one phrase or term candidate made of the tokens `idx` (consecutive).
    fn add_candidate(&mut self, idx: &[usize]) {
        let (Some(&a), Some(&b)) = (idx.first(), idx.last()) else { return };
        let turn = self.turn;
        let words: Vec<String> = turn[a..=b].iter().map(|t| t.lower.clone()).collect();
        let refs: Vec<&str> = words.iter().map(String::as_str).collect();
        let key = make_key(&refs);
        let label = span_label(self.text, turn, a, b);
        let capital_start = (turn[a].cap && turn[a].sent_start).then(|| turn[a].lower.clone());
        self.out.push(Candidate { key, label, words, capital_start });
    }
}

/// Whether a token may be a term or part of a phrase.
fn content_word(t: &Token, min_word_chars: usize) -> bool {
    t.letters > 0 && !t.long && t.chars >= min_word_chars && !t.contraction && !t.stop && !weak_word(&t.lower)
}

/// True when token `k` follows a pronoun or modal in the same sentence, so is most likely a verb.
fn verb_follows(turn: &[Token], k: usize) -> bool {
    k > 0
        && !turn[k].sent_start
        && turn[k].gap == Gap::Space
        && !turn[k - 1].possessive
        && VERB_CUES.contains(&turn[k - 1].lower)
}

/// One phrase or term candidate occurrence, for RAKE statistics and inner mentions.
pub(super) struct Occurrence {
    /// The turn of the window it is in.
    pub(super) turn: usize,
    /// Its words, lower case.
    pub(super) words: Vec<String>,
}

/// Word frequency and degree over the candidate occurrences of a window (RAKE).
pub(super) struct RakeStats {
    /// singular(word) → (frequency, degree).
    words: FastMap<String, (u32, u32)>,
}

impl RakeStats {
    /// Counts every word of every occurrence.
    pub(super) fn collect(occurrences: &[Occurrence]) -> Self {
        let mut words: FastMap<String, (u32, u32)> = FastMap::default();
        for occ in occurrences {
            let len = occ.words.len() as u32;
            for w in &occ.words {
                let s = words.entry(singular(w)).or_insert((0, 0));
                s.0 += 1;
                s.1 += len;
            }
        }
        RakeStats { words }
    }

    /// Σ deg(w)/freq(w) over the words of a key.
    pub(super) fn score(&self, key: &str) -> f32 {
        key.split(' ')
            .map(|w| match self.words.get(&singular(w)) {
                Some(&(f, d)) if f > 0 => d as f32 / f as f32,
                _ => 1.0,
            })
            .sum()
    }
}
