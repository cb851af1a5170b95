//! Deterministic concept extraction: proper names, noun phrases, key terms and explicit dates from a
//! window of turns. Owns only text analysis; it embeds nothing and knows nothing of the graph.
//!
//! The method, in one pass per turn (linear in the length of the text):
//!
//! 1. **Tokens.** Words are runs of Unicode letters and digits (with combining marks), keeping
//!    apostrophes, hyphens, underscores and dots that sit between two letters or digits (`don't`,
//!    `self-care`, `user_id`, `3.11`, `Chart.js`, `U.S`) and thousands separators (`1,000`). What
//!    lies between two words (a "gap") decides whether a phrase or name may run across it. Fenced and
//!    inline code, LaTeX (`\(...\)`, `\[...\]`, `$$...$$`, `\commands`), URLs and e-mail addresses
//!    are skipped. Sentences end at `. ! ? … : ;` and line breaks (not after `Dr.`, `St.` or an
//!    initial); for capitalisation an opening quote also starts a sentence. Markdown headings, bold
//!    spans, list items whose content words are all capitalised, and title-case sentences (three or
//!    more content words, all capitalised) are "titles".
//! 2. **Dates** (kind [`ConceptKind::Date`]): ISO dates (`2023-05-07`), numeric dates with slashes,
//!    day-month(-year) and month-day(-year) with month names or their abbreviations, month-year, and
//!    lone four-digit years 1900–2099. Keys are ISO-like: `2023-05-07`, `2023-05`, `2023`, and
//!    `--05-07` for a day without a year. Relative expressions ("yesterday") are not dates here.
//! 3. **Names** (kind [`ConceptKind::Name`]): maximal runs of capitalised words (or camel case such
//!    as "iPhone"), with `of`, `the`, `de`, `van`, … allowed between two of them ("Bank of America"),
//!    initials ("J. K. Rowling") and a leading "New", "St.", "North", … ("New York"). A capitalised
//!    word that opens a sentence, or sits in a title, is taken as a name only when the window shows it
//!    capitalised in running text elsewhere, or (sentence start only) when it is never seen in lower
//!    case in the window and either a second capitalised word follows it ("Harry Potter is …") or
//!    "and" joins it to a name ("Luna and Oliver"). A lone capitalised word that is the first content
//!    word of its sentence and is seen in lower case elsewhere ("The Support group") is no name.
//!    Stop words ("Hey", "Thanks", "That's", "I", "Dr") are never part of a name.
//! 4. **Phrases and terms** (RAKE): the remaining text is cut at stop words, punctuation, names,
//!    dates, numbers, possessives and weak words (`-ly` adverbs, `-ed` participles); a first word
//!    right after a pronoun or modal is split off as a verb ("I play | clarinet"); each run of
//!    content words (at least `min_word_chars` characters, at most `max_phrase_words` words, longer
//!    runs cut from the end, where English puts the head noun) is a candidate: one word is a
//!    [`ConceptKind::Term`], several a [`ConceptKind::Phrase`]. A candidate that also occurs inside a
//!    longer candidate of the window is credited with that mention too ("support group" inside
//!    "LGBTQ support group").
//!
//! **Keys** ([`normalize_key`]): lower case, words joined by single spaces, possessive `'s` removed,
//! the last word (the head noun) singularised by simple English rules with a list of exceptions.
//! Names are normalised alike, so that "German Shepherds" meets "German Shepherd".
//!
//! **Score** (higher first). With `d` the number of turns of the window that mention the concept and
//! `m` its number of mentions (`m ≥ d ≥ 1`), the coverage is `c = d + 0.5·ln(m / d)`. Then
//!
//! * Name: `100 + c + 0.25·(words − 1)`;
//! * Date: `100 + c + p`, with `p` = 0.5 for a full date, 0.25 for month-year or day-month, 0 for a year;
//! * Phrase and Term: `min(49, c · √rake)`, where `rake = Σ deg(w) / freq(w)` over the words `w` of
//!   the candidate, with `freq(w)` the number of candidate occurrences in the window that contain `w`
//!   and `deg(w)` the summed length in words of those occurrences (classic RAKE). A single word seen
//!   once scores 1, a two-word phrase seen once 2, a term repeated in three turns about 3. The score
//!   is multiplied by 1.5 when the candidate opens a sentence with a capital and is never written in
//!   lower case in the window ("Caroline went home." with no other "Caroline"): a likely name that
//!   the window cannot confirm.
//!
//! So names and dates (both rare and precise) always outrank phrases and terms; ties go by key
//! ascending. On LoCoMo, taking the eight best this way kept more question-relevant concepts than
//! ranking everything on one scale, and plain RAKE (without the square root) favoured long one-off
//! phrases. Everything is deterministic: no hashing order reaches the output, and the cost is linear
//! in the length of the window.
//!
//! **Files**, one job each: `tokens.rs` (step 1), `dates.rs` (2), `names.rs` (3), `rake.rs` (4:
//! candidates and RAKE statistics), `keys.rs` (keys), `words.rs` (the word lists, kept as data in
//! `words/*.txt`). This file holds the public types and settings, runs the steps over a window,
//! and accumulates, scores and ranks what they find; the parts import nothing from it (no circle of
//! files), and the month names come from `crate::calendar`, shared with `ingest::time`.

mod dates;
mod keys;
mod names;
mod rake;
mod tokens;
mod words;

use serde::{Deserialize, Serialize};

use dates::find_dates;
use keys::make_key;
pub use keys::normalize_key;
use names::{Evidence, find_names};
use rake::{Occurrence, RakeStats, find_phrases};
use tokens::{Token, mark_title_sentences, span_label, tokenize};
use words::FastMap;
#[cfg(test)]
pub(crate) use words::check_word_list_file;
pub(crate) use words::{WordSet, is_stop};

/// What kind of concept a phrase is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConceptKind {
    /// A proper name: person, place, organisation, title ("Caroline", "Bank of America").
    Name,
    /// A multiword noun phrase ("pottery class").
    Phrase,
    /// A single key word ("painting").
    Term,
    /// An explicit calendar date or year ("7 May 2023" → key `2023-05-07`).
    Date,
}

impl ConceptKind {
    /// Name as stored and serialised.
    pub fn as_str(self) -> &'static str {
        match self {
            ConceptKind::Name => "name",
            ConceptKind::Phrase => "phrase",
            ConceptKind::Term => "term",
            ConceptKind::Date => "date",
        }
    }

    /// Parses [`ConceptKind::as_str`].
    pub fn parse(s: &str) -> Option<ConceptKind> {
        [ConceptKind::Name, ConceptKind::Phrase, ConceptKind::Term, ConceptKind::Date]
            .into_iter()
            .find(|k| k.as_str() == s)
    }
}

/// A concept found in a window.
#[derive(Debug, Clone, PartialEq)]
pub struct Concept {
    /// Normalised identity: lower case, single spaces, possessive 's removed, simple plurals singularised
    /// ("support groups" and "Support group's" → "support group"). Two mentions of one thing share a key.
    /// Dates use ISO-like keys (`2023-05-07`, `2023-05`, `2023`, `--05-07`).
    pub key: String,
    /// The surface form as first seen (for display and for embedding), e.g. "LGBTQ support group".
    pub label: String,
    /// Kind.
    pub kind: ConceptKind,
    /// Indices into the window (0-based) of the turns that mention it, ascending, no duplicates.
    pub turns: Vec<usize>,
    /// Salience score used to rank concepts (higher first); see the module documentation: names
    /// and dates score above 100, phrases and terms at most 49.
    pub score: f32,
}

/// Extractor settings (serde, with documented defaults).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExtractConfig {
    /// At most this many concepts per window, the highest-scoring ones (default 8).
    pub max_concepts: usize,
    /// Longest phrase in words (default 4).
    pub max_phrase_words: usize,
    /// Longest name in words, connectors such as "of" included (default 6).
    pub max_name_words: usize,
    /// Shortest word, in characters, that may be a term or part of a phrase (default 3).
    pub min_word_chars: usize,
    /// Longest word, in characters, that may be part of any concept (default 30); longer ones are
    /// identifiers, hashes or glued-together text.
    pub max_word_chars: usize,
}

impl Default for ExtractConfig {
    fn default() -> Self {
        ExtractConfig { max_concepts: 8, max_phrase_words: 4, max_name_words: 6, min_word_chars: 3, max_word_chars: 30 }
    }
}

/// Extracts concepts from windows of turns.
#[derive(Debug, Clone)]
pub struct Extractor {
    config: ExtractConfig,
}

/// Tier added to the score of names.
const NAME_TIER: f32 = 100.0;
/// Tier added to the score of dates.
const DATE_TIER: f32 = 100.0;
/// Factor on the score of a phrase or term that opens a sentence with a capital and is never
/// written in lower case in the window ("Caroline went home."): likely a name the window cannot
/// confirm.
const PROPER_FACTOR: f32 = 1.5;
/// Ceiling of the score of phrases and terms (below the name and date tiers).
const PHRASE_CEILING: f32 = 49.0;

impl Extractor {
    /// Builds an extractor. Zero limits are raised to 1 (a phrase or name has at least one word).
    pub fn new(config: ExtractConfig) -> Self {
        let mut config = config;
        config.max_phrase_words = config.max_phrase_words.max(1);
        config.max_name_words = config.max_name_words.max(1);
        config.min_word_chars = config.min_word_chars.max(1);
        config.max_word_chars = config.max_word_chars.max(config.min_word_chars);
        Extractor { config }
    }

    /// The settings in use.
    pub fn config(&self) -> &ExtractConfig {
        &self.config
    }

    /// Concepts of one window, ordered by score descending, ties by key ascending. `turns` are the raw texts.
    pub fn extract(&self, turns: &[&str]) -> Vec<Concept> {
        let mut concepts = self.analyse(turns);
        concepts.truncate(self.config.max_concepts);
        concepts
    }

    /// Keys of the concepts a query mentions (same normalisation), for callers that match queries to concepts.
    ///
    /// All concepts of the query count (no `max_concepts` limit), in score order; then, for each
    /// multiword phrase, its shorter parts, longest first ("clothing store" → "clothing", "store"),
    /// so that a query naming a longer form still meets the shorter one. No duplicates.
    pub fn query_keys(&self, query: &str) -> Vec<String> {
        let concepts = self.analyse(&[query]);
        let mut keys: Vec<String> = Vec::with_capacity(concepts.len());
        for c in &concepts {
            push_unique(&mut keys, c.key.clone());
        }
        for c in &concepts {
            if c.kind == ConceptKind::Phrase {
                let words: Vec<&str> = c.key.split(' ').collect();
                for len in (1..words.len()).rev() {
                    for start in 0..=words.len() - len {
                        push_unique(&mut keys, normalize_key(&words[start..start + len].join(" ")));
                    }
                }
            }
        }
        keys
    }

    /// Every concept of a window, ranked, without the `max_concepts` cut.
    fn analyse(&self, turns: &[&str]) -> Vec<Concept> {
        let cfg = &self.config;
        let mut toks: Vec<Vec<Token>> = turns.iter().map(|t| tokenize(t, cfg.max_word_chars)).collect();
        for turn in &mut toks {
            mark_title_sentences(turn);
        }
        let evidence = Evidence::collect(&toks);
        let mut acc = Accumulator::default();
        let mut occurrences: Vec<Occurrence> = Vec::new();
        for (ti, (text, turn)) in turns.iter().zip(&toks).enumerate() {
            let mut used = vec![false; turn.len()];
            for hit in find_dates(text, turn) {
                for u in &mut used[hit.first..=hit.last] {
                    *u = true;
                }
                let label = span_label(text, turn, hit.first, hit.last);
                acc.add(hit.key, label, ConceptKind::Date, ti, 1, hit.precision);
            }
            for name in find_names(text, turn, &evidence, &mut used, cfg.max_name_words) {
                acc.add(name.key, name.label, ConceptKind::Name, ti, name.words, 0.0);
            }
            for c in find_phrases(text, turn, &used, cfg.max_phrase_words, cfg.min_word_chars) {
                let kind = if c.words.len() == 1 { ConceptKind::Term } else { ConceptKind::Phrase };
                let n = acc.add(c.key, c.label, kind, ti, c.words.len(), 0.0);
                if c.capital_start.is_some() {
                    acc.entries[n].capital_start = c.capital_start;
                }
                occurrences.push(Occurrence { turn: ti, words: c.words });
            }
        }
        for e in &mut acc.entries {
            e.proper = e.capital_start.as_deref().is_some_and(|w| !evidence.lower_case(w));
        }
        credit_inner_mentions(&mut acc, &occurrences);
        let rake = RakeStats::collect(&occurrences);
        let mut concepts: Vec<Concept> = acc.entries.into_iter().map(|e| e.into_concept(&rake)).collect();
        concepts.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.key.cmp(&b.key)));
        concepts
    }
}

impl Default for Extractor {
    fn default() -> Self {
        Extractor::new(ExtractConfig::default())
    }
}

fn push_unique(keys: &mut Vec<String>, key: String) {
    if !keys.contains(&key) {
        keys.push(key);
    }
}

// ---------------------------------------------------------------------------------------------
// Accumulation and scoring
// ---------------------------------------------------------------------------------------------

struct Entry {
    key: String,
    label: String,
    kind: ConceptKind,
    turns: Vec<usize>,
    mentions: usize,
    words: usize,
    precision: f32,
    /// The lower-case first word of an occurrence that opened a sentence with a capital.
    capital_start: Option<String>,
    /// Seen only capitalised, opening a sentence: perhaps a name the window could not confirm.
    proper: bool,
}

impl Entry {
    fn into_concept(self, rake: &RakeStats) -> Concept {
        let d = self.turns.len().max(1) as f32;
        let m = (self.mentions as f32).max(d);
        let coverage = d + 0.5 * (m / d).ln();
        let score = match self.kind {
            ConceptKind::Name => NAME_TIER + coverage + 0.25 * (self.words.saturating_sub(1)) as f32,
            ConceptKind::Date => DATE_TIER + coverage + self.precision,
            ConceptKind::Phrase | ConceptKind::Term => {
                let proper = if self.proper { PROPER_FACTOR } else { 1.0 };
                (coverage * rake.score(&self.key).max(1.0).sqrt() * proper).min(PHRASE_CEILING)
            }
        };
        Concept { key: self.key, label: self.label, kind: self.kind, turns: self.turns, score }
    }
}

/// Priority when one key is found as several kinds: a name wins, then a date, a phrase, a term.
fn kind_rank(kind: ConceptKind) -> u8 {
    match kind {
        ConceptKind::Name => 3,
        ConceptKind::Date => 2,
        ConceptKind::Phrase => 1,
        ConceptKind::Term => 0,
    }
}

#[derive(Default)]
struct Accumulator {
    entries: Vec<Entry>,
    index: FastMap<String, usize>,
}

impl Accumulator {
    /// Adds a mention; returns the index of its entry.
    fn add(
        &mut self,
        key: String,
        label: String,
        kind: ConceptKind,
        turn: usize,
        words: usize,
        precision: f32,
    ) -> usize {
        match self.index.get(&key) {
            Some(&n) => {
                let e = &mut self.entries[n];
                e.mentions += 1;
                if let Err(pos) = e.turns.binary_search(&turn) {
                    e.turns.insert(pos, turn);
                }
                if kind_rank(kind) > kind_rank(e.kind) {
                    e.kind = kind;
                    e.label = label;
                    e.words = words;
                }
                n
            }
            None => {
                let n = self.entries.len();
                self.index.insert(key.clone(), n);
                self.entries.push(Entry {
                    key,
                    label,
                    kind,
                    turns: vec![turn],
                    mentions: 1,
                    words,
                    precision,
                    capital_start: None,
                    proper: false,
                });
                n
            }
        }
    }
}

/// Credits shorter candidates found inside longer ones ("support group" inside "LGBTQ support group").
fn credit_inner_mentions(acc: &mut Accumulator, occurrences: &[Occurrence]) {
    for occ in occurrences {
        let n = occ.words.len();
        if n < 2 {
            continue;
        }
        for len in 1..n {
            for start in 0..=n - len {
                let refs: Vec<&str> = occ.words[start..start + len].iter().map(String::as_str).collect();
                let key = make_key(&refs);
                if let Some(&idx) = acc.index.get(&key) {
                    let e = &mut acc.entries[idx];
                    if matches!(e.kind, ConceptKind::Phrase | ConceptKind::Term) {
                        e.mentions += 1;
                        if let Err(pos) = e.turns.binary_search(&occ.turn) {
                            e.turns.insert(pos, occ.turn);
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
