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

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

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
            self.find_names(text, turn, ti, &evidence, &mut used, &mut acc);
            self.find_phrases(text, turn, ti, &used, &mut acc, &mut occurrences);
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

    /// Names of one turn: runs of capitalised words (see the module documentation).
    fn find_names(
        &self,
        text: &str,
        turn: &[Token],
        ti: usize,
        evidence: &Evidence,
        used: &mut [bool],
        acc: &mut Accumulator,
    ) {
        let max_words = self.config.max_name_words;
        let eligible = |k: usize, used: &[bool]| name_eligible(turn, k, used, evidence);
        let mut i = 0;
        while i < turn.len() {
            let start_ok = eligible(i, used) || name_prefix(turn, i, used, evidence);
            if !start_ok || (turn[i].initial && !self.initial_leads_name(turn, i, used, evidence)) {
                i += 1;
                continue;
            }
            // Extend the run.
            let mut last = i;
            let mut k = i + 1;
            while k < turn.len() && k - i < max_words {
                let t = &turn[k];
                let joined = t.gap == Gap::Space || (t.gap == Gap::Dot && turn[k - 1].dot_joins());
                if !joined || turn[last].possessive || t.sent_start {
                    break;
                }
                if eligible(k, used) {
                    last = k;
                    k += 1;
                } else if is_connector(&t.lower) && !t.possessive {
                    k += 1;
                } else {
                    break;
                }
            }
            let first = &turn[i];
            let accept = if first.sent_start && !first.title {
                // Sentence-initial: the window must vouch for it, or it opens a longer capitalised run
                // and is never written in lower case here.
                evidence.capitalised_in_text(&first.lower)
                    || (last > i
                        && eligible(i + 1, used)
                        && !evidence.lower_case(&first.lower)
                        && !weak_word(&first.lower)
                        && !first.lower.ends_with("ing"))
                    || (last == i && !evidence.lower_case(&first.lower) && coordinated(turn, i, used, evidence))
            } else {
                // "The Support group's leader": a lone capitalised word that is the sentence's first
                // content word and is written in lower case elsewhere in the window is no name.
                !(last == i && evidence.lower_case(&first.lower) && first_content_word(turn, i))
            };
            if !accept {
                // A capitalised run opening a sentence without support is a title-cased phrase: skip
                // it, except for words the window shows capitalised in running text.
                i += 1;
                while i <= last && !evidence.capitalised_in_text(&turn[i].lower) {
                    i += 1;
                }
                continue;
            }
            if last == i && (turn[i].initial || numbered_label(turn, i)) {
                i += 1;
                continue;
            }
            let words: Vec<&str> = turn[i..=last].iter().map(|t| t.lower.as_str()).collect();
            let key = make_key(&words);
            let label = span_label(text, turn, i, last);
            acc.add(key, label, ConceptKind::Name, ti, words.len(), 0.0);
            for u in &mut used[i..=last] {
                *u = true;
            }
            i = last + 1;
        }
    }

    /// True when the initial at `i` is followed by more of a name ("J. K. Rowling").
    fn initial_leads_name(&self, turn: &[Token], i: usize, used: &[bool], evidence: &Evidence) -> bool {
        let mut k = i + 1;
        while k < turn.len() && k - i < self.config.max_name_words {
            if turn[k].gap != Gap::Dot && turn[k].gap != Gap::Space {
                return false;
            }
            if !name_eligible(turn, k, used, evidence) {
                return false;
            }
            if !turn[k].initial {
                return true;
            }
            k += 1;
        }
        false
    }

    /// Phrase and term candidates of one turn (RAKE).
    fn find_phrases(
        &self,
        text: &str,
        turn: &[Token],
        ti: usize,
        used: &[bool],
        acc: &mut Accumulator,
        occurrences: &mut Vec<Occurrence>,
    ) {
        let mut run: Vec<usize> = Vec::new();
        for (k, t) in turn.iter().enumerate() {
            if t.sent_start || t.gap != Gap::Space {
                self.flush_run(text, turn, ti, &mut run, acc, occurrences);
            }
            if used[k] || !self.content_word(t) {
                self.flush_run(text, turn, ti, &mut run, acc, occurrences);
                continue;
            }
            run.push(k);
            if t.possessive {
                self.flush_run(text, turn, ti, &mut run, acc, occurrences);
            }
        }
        self.flush_run(text, turn, ti, &mut run, acc, occurrences);
    }

    /// Turns a run of content words into candidates of at most `max_phrase_words`, cut from the end.
    fn flush_run(
        &self,
        text: &str,
        turn: &[Token],
        ti: usize,
        run: &mut Vec<usize>,
        acc: &mut Accumulator,
        occurrences: &mut Vec<Occurrence>,
    ) {
        if run.is_empty() {
            return;
        }
        let max = self.config.max_phrase_words;
        let mut first = 0;
        if run.len() > 1 && verb_follows(turn, run[0]) {
            // "I play clarinet": the first word after a pronoun or modal is a verb, not part of the phrase.
            self.add_candidate(text, turn, ti, &run[..1], acc, occurrences);
            first = 1;
        }
        let mut end = run.len();
        while end > first {
            let start = end.saturating_sub(max).max(first);
            self.add_candidate(text, turn, ti, &run[start..end], acc, occurrences);
            end = start;
        }
        run.clear();
    }

    /// Adds one phrase or term candidate made of the tokens `idx` (consecutive).
    fn add_candidate(
        &self,
        text: &str,
        turn: &[Token],
        ti: usize,
        idx: &[usize],
        acc: &mut Accumulator,
        occurrences: &mut Vec<Occurrence>,
    ) {
        let (Some(&a), Some(&b)) = (idx.first(), idx.last()) else { return };
        let words: Vec<String> = turn[a..=b].iter().map(|t| t.lower.clone()).collect();
        let refs: Vec<&str> = words.iter().map(String::as_str).collect();
        let key = make_key(&refs);
        let kind = if words.len() == 1 { ConceptKind::Term } else { ConceptKind::Phrase };
        let n = acc.add(key, span_label(text, turn, a, b), kind, ti, words.len(), 0.0);
        if turn[a].cap && turn[a].sent_start {
            acc.entries[n].capital_start = Some(turn[a].lower.clone());
        }
        occurrences.push(Occurrence { turn: ti, words });
    }

    /// Whether a token may be a term or part of a phrase.
    fn content_word(&self, t: &Token) -> bool {
        t.letters > 0
            && !t.long
            && t.chars >= self.config.min_word_chars
            && !t.contraction
            && !t.stop
            && !weak_word(&t.lower)
    }
}

/// Stop words that may open a name in running text when a capitalised word follows ("New York",
/// "St. Louis", "Great Barrier Reef").
static NAME_PREFIXES: WordSet = WordSet::new(
    "\
    east great mt new north old south st west",
);

/// True when token `i` is a capitalised name prefix in running text followed by a name word.
fn name_prefix(turn: &[Token], i: usize, used: &[bool], evidence: &Evidence) -> bool {
    let t = &turn[i];
    t.cap
        && !used[i]
        && !t.sent_start
        && !t.title
        && NAME_PREFIXES.contains(&t.lower)
        && i + 1 < turn.len()
        && (turn[i + 1].gap == Gap::Space || (turn[i + 1].gap == Gap::Dot && t.dot_joins()))
        && name_eligible(turn, i + 1, used, evidence)
}

/// Words that number things ("Chapter 3", "Step 2", "Phase 1"): capitalised before a number they
/// are labels, not names.
static ENUMERATORS: WordSet = WordSet::new(
    "\
    appendix chapter episode example exercise fig figure lesson level module page part phase problem question \
    round season section stage step table task unit version vol volume week",
);

/// True when token `i` is an enumerator word followed by a number ("Chapter 3").
fn numbered_label(turn: &[Token], i: usize) -> bool {
    i + 1 < turn.len()
        && turn[i + 1].gap == Gap::Space
        && turn[i + 1].letters == 0
        && ENUMERATORS.contains(&turn[i].lower)
}

/// True when token `i` is joined by "and"/"or" to a name in running text ("Luna and Oliver").
fn coordinated(turn: &[Token], i: usize, used: &[bool], evidence: &Evidence) -> bool {
    i + 2 < turn.len()
        && matches!(turn[i + 1].lower.as_str(), "and" | "or")
        && turn[i + 1].gap == Gap::Space
        && turn[i + 2].gap == Gap::Space
        && !turn[i + 2].sent_start
        && name_eligible(turn, i + 2, used, evidence)
}

/// True when every token of the sentence before token `i` is a stop word or a number.
fn first_content_word(turn: &[Token], i: usize) -> bool {
    let mut k = i;
    while k > 0 && !turn[k].sent_start {
        k -= 1;
        let t = &turn[k];
        if !t.stop && t.letters > 0 {
            return false;
        }
    }
    true
}

/// Whether token `k` may be part of a name: capitalised, not a stop word, not already used, and
/// (in a heading, bold span or title-case line) seen capitalised in running text of the window.
fn name_eligible(turn: &[Token], k: usize, used: &[bool], evidence: &Evidence) -> bool {
    let t = &turn[k];
    if used[k] || !t.name_like() {
        return false;
    }
    !t.title || evidence.capitalised_in_text(&t.lower)
}

impl Default for Extractor {
    fn default() -> Self {
        Extractor::new(ExtractConfig::default())
    }
}

/// Normalises a phrase into a concept key: lower case, words joined by single spaces, possessive
/// `'s` (and a trailing `'` after `s`) removed from every word, typographic apostrophes made ASCII,
/// and the last word singularised ("Support Groups'" → "support group"). Names are treated alike,
/// so "German Shepherds" and "German Shepherd" meet (at the price of keys such as "sara bareille"
/// for "Sara Bareilles"). Idempotent: a key is its own normalisation.
pub fn normalize_key(text: &str) -> String {
    let lowered: Vec<String> = text
        .split_whitespace()
        .map(|w| {
            let l = lower_word(w);
            strip_possessive(&l).to_string()
        })
        .filter(|w| !w.is_empty())
        .collect();
    let refs: Vec<&str> = lowered.iter().map(String::as_str).collect();
    make_key(&refs)
}

/// Joins lower-case words into a key, singularising the last one.
fn make_key(words: &[&str]) -> String {
    let mut key = String::new();
    for (n, w) in words.iter().enumerate() {
        if n > 0 {
            key.push(' ');
        }
        if n + 1 == words.len() {
            key.push_str(&singular(w));
        } else {
            key.push_str(w);
        }
    }
    key
}

fn push_unique(keys: &mut Vec<String>, key: String) {
    if !keys.contains(&key) {
        keys.push(key);
    }
}

/// Lower case with typographic apostrophes made ASCII.
fn lower_word(w: &str) -> String {
    if w.is_ascii() {
        return w.to_ascii_lowercase();
    }
    let mut out = String::with_capacity(w.len());
    for c in w.chars() {
        if is_apostrophe(c) {
            out.push('\'');
        } else {
            out.extend(c.to_lowercase());
        }
    }
    out
}

fn is_apostrophe(c: char) -> bool {
    matches!(c, '\'' | '\u{2019}' | '\u{02BC}')
}

/// Removes a possessive `'s` or a trailing `'` (after `s`) from a lower-case word.
fn strip_possessive(w: &str) -> &str {
    if w.chars().count() > 2 {
        if let Some(stem) = w.strip_suffix("'s") {
            return stem;
        }
        if let Some(stem) = w.strip_suffix('\'')
            && stem.ends_with('s')
        {
            return stem;
        }
    }
    w
}

/// Words ending in `s` that are not plurals (or whose plural is their singular).
static SINGULAR_KEEP: WordSet = WordSet::new(
    "\
    aerobics alias analytics andes angeles arkansas athens athletics atlas aws bias brussels canvas chaos \
    charles christmas clothes congrats cosmos dallas diabetes douglas economics electronics elias ethics ethos \
    gas genetics glasses graphics gymnastics hermes ios james jeans jonas jones kansas lens linguistics \
    logistics los lucas macos mars mathematics measles mercedes news nicholas pants physics politics scissors \
    series shorts species statistics texas thanks thomas tobias vegas wales williams yes",
);

/// Plurals in `-ies` whose singular ends in `-ie`.
static IE_PLURALS: WordSet = WordSet::new(
    "\
    aussies brownies calories cookies goodies hippies hoodies lies movies newbies pies rookies selfies smoothies \
    sweeties ties veggies zombies",
);

/// Irregular plurals and their singulars, sorted by plural.
const IRREGULAR_PLURALS: &[(&str, &str)] = &[
    ("calves", "calf"),
    ("children", "child"),
    ("elves", "elf"),
    ("feet", "foot"),
    ("geese", "goose"),
    ("halves", "half"),
    ("knives", "knife"),
    ("leaves", "leaf"),
    ("lives", "life"),
    ("loaves", "loaf"),
    ("men", "man"),
    ("mice", "mouse"),
    ("selves", "self"),
    ("shelves", "shelf"),
    ("teeth", "tooth"),
    ("thieves", "thief"),
    ("wives", "wife"),
    ("wolves", "wolf"),
    ("women", "woman"),
];

/// Singularises a lower-case word by simple English rules (idempotent).
fn singular(w: &str) -> String {
    if let Ok(n) = IRREGULAR_PLURALS.binary_search_by(|(p, _)| p.cmp(&w)) {
        return IRREGULAR_PLURALS[n].1.to_string();
    }
    let n = w.chars().count();
    if n < 4 || !w.ends_with('s') || SINGULAR_KEEP.contains(w) {
        return w.to_string();
    }
    let before_s = w[..w.len() - 1].chars().next_back();
    if !before_s.is_some_and(char::is_alphabetic) {
        return w.to_string();
    }
    if w.ends_with("ss") || w.ends_with("us") || w.ends_with("is") || w.ends_with("'s") {
        return w.to_string();
    }
    if w.ends_with("ies") && n > 4 {
        if IE_PLURALS.contains(w) {
            return w[..w.len() - 1].to_string();
        }
        return format!("{}y", &w[..w.len() - 3]);
    }
    if w.ends_with("sses") || w.ends_with("shes") || w.ends_with("ches") || w.ends_with("xes") || w.ends_with("zzes") {
        return w[..w.len() - 2].to_string();
    }
    if w.ends_with("oes") && n > 5 {
        return w[..w.len() - 2].to_string();
    }
    w[..w.len() - 1].to_string()
}

/// Built-in English stop words: function words, auxiliaries, common verbs, adjectives and adverbs,
/// chat words, weekdays, months and honorifics. Sorted (byte order) for binary search.
static STOP_WORDS: WordSet = WordSet::new(
    "\
    a able about above absolutely accept achieve across actual actually add added adding additionally adorable \
    after afternoon afterwards again against ago ah aha ahead all allow allowed allows almost alone along \
    already alright also although always am amazing among amongst an and another any anybody anyhow anymore \
    anyone anything anyway anyways anywhere apart appreciate appreciated appreciates approach approaches \
    approximately apr april are aren't around as asap aside ask asked asking aspect aspects at aug august aw \
    away awe-inspiring awesome aww awww b back bad based basically be beautiful became because become becomes \
    becoming been before beforehand began begin beginning behind being believe below beside besides best better \
    between beyond big bit bits both brb breathtaking briefly brighten brilliant bring brought btw build busy \
    but by bye ca call called calling calming came can can't cannot care cared catch cause celebrate certain \
    certainly challenging charming check checked checking cheerful cheers clear clearly come comes comfortable \
    coming congrats congratulations consider considering continue continued cool could couldn't course crazy \
    create created creative crucial currently cute day days dear dec december decide decided decision definitely \
    delicious despite destress did didn't different do does doesn't doing don't done down dr due during e.g each \
    easily easy effective effectively efficient efficiently eh either else elsewhere embrace empowering \
    encourage encourages encouraging enjoy enjoyable enjoyed enjoying enough ensure ensuring entire especially \
    etc even evening evenings eventually ever every everybody everyday everyone everything everywhere exactly \
    example examples excited exciting explain explained explore exploring express expressing extra extremely fab \
    fabulous fairly fancy fantastic far favorite favourite feb february feel feeling feelings feels felt few \
    finally find finding fine first folks following follows for forward found fri friday from fulfilling fully \
    fun further furthermore fyi gave gee geez generally get gets getting give given gives giving glad go goes \
    going gone gonna good goodness gorgeous gosh got gotta gotten grateful great greatly grow guess guy guys ha \
    had hadn't hah haha hahaha hang happen happened happening happens happy hard has hasn't have haven't having \
    he he'd he'll he's heading hear heard heartwarming heh hehe hello help helped helpful helping helps her here \
    here's hers herself hey hi hilarious him himself his hmm hmmm hold holding honestly hope hoped hopefully \
    hopes hoping hour hours how however huge huh i i'd i'll i'm i've i.e idk if iirc im imho imo important \
    impressive in include included includes including inclusive incredible incredibly indeed inspire inspired \
    inspires inspiring instead interesting into irl is isn't it it'd it'll it's its itself jan january jk jr jul \
    july jun june just keep keeping keeps kept key kind kinda kinds knew know knowing known knows largely last \
    lately later lead leads learn learned learning least leave leaving left less let let's lets like liked \
    likely likes listen listening little lmao lmk lol long look looked looking looks lot lots love loved lovely \
    loves loving lucky madam made main mainly make makes making many mar march may maybe me mean meaning \
    meaningful means meant meanwhile meet meh memorable mention mentioned met might mine minute minutes miss \
    missed mm moment moments mon monday month months more moreover morning mornings most mostly motivate \
    motivates motivating move moved moving mr mrs ms mt much must my myself nah namely near nearly neat \
    necessarily necessary need needed needs neither nervous never nevertheless new next ngl nice nicely no \
    nobody none noone nope nor not nothing nov november now nowhere obviously oct october of off offer often oh \
    ohh ok okay omg on once one ones only onto oof ooh oops open opened or other others otherwise ouch ought our \
    ours ourselves out over overall own part particular particularly parts peaceful people per perfect perhaps \
    person phew picked piece playful please pls plus pm positive possible possibly potential potentially \
    powerful precious pretty previous probably prof proud provide provided provides providing put puts putting \
    quite rather reach reached ready real realize realized really received recently regarding related relax \
    relaxing relevant remember remind reminded reminds rewarding right rn rofl said same sat saturday saw say \
    saying says scary second seconds see seeing seem seemed seeming seems seen send sent sep sept september \
    serene set setting several shall share shared sharing she she'd she'll she's shh should shouldn't show \
    showed showing shown shows similar simple simply since sir sit smh so some somebody somehow someone \
    something sometime sometimes somewhat somewhere soon sorry sort sorts sounds specific specifically spread sr \
    st start started starting stay stayed staying step steps still stoked stop stopped stuff stunning such \
    suggest sun sunday super supportive sure surely sweet tackle take taken takes taking talk talked talking tbh \
    tell telling tells tend terrific than thank thankful thanks that that'll that's the their theirs them \
    themselves then there there'll there's thereafter thereby therefore these they they'd they'll they're \
    they've thing things think thinking thinks third this tho those though thought thoughts thrilled through \
    throughout thu thur thurs thursday thus thx time times to today together tomorrow tonight too took totally \
    touching tough toward towards tranquil tried tries truly try trying tue tues tuesday turn turned turns ty \
    type types typically ugh uh uhh um umm under understand understood unique unless until up uplifting upon us \
    use used useful uses using usually valuable various very via vibrant wait waiting wanna want wanted wanting \
    wants was wasn't watch watched watching way ways we we'd we'll we're we've wed wednesday week weekend \
    weekends weeks well welp went were weren't what what's whatever when whenever where where's whereas wherever \
    whether which while who who'd who'll who's whoa whoever whole whom whose why will with within without woah \
    won't wonder wondered wonderful wondering woohoo worth worthwhile would wouldn't wow wowza wtf ya yay yea \
    yeah year years yep yes yess yesterday yet yikes yo you you'd you'll you're you've your yours yourself \
    yourselves yum yummy yup",
);

/// FNV-1a: a small, fast, deterministic hasher for short words.
#[derive(Clone, Copy)]
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

type FastSet<T> = HashSet<T, BuildHasherDefault<Fnv>>;
type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<Fnv>>;

/// A word list written as one whitespace-separated string (sorted, for the reader), made a set
/// on first use.
struct WordSet {
    words: &'static str,
    set: OnceLock<FastSet<&'static str>>,
}

impl WordSet {
    const fn new(words: &'static str) -> Self {
        WordSet { words, set: OnceLock::new() }
    }

    fn contains(&self, word: &str) -> bool {
        self.set.get_or_init(|| self.words.split_whitespace().collect()).contains(word)
    }
}

fn is_stop(lower: &str) -> bool {
    STOP_WORDS.contains(lower)
}

/// Words that may sit inside a name between two capitalised words ("Bank of America").
static CONNECTORS: WordSet = WordSet::new(
    "\
    da de del della der di du la le of the van von",
);

fn is_connector(lower: &str) -> bool {
    CONNECTORS.contains(lower)
}

/// `-ly` words that are nouns or names, not adverbs.
static LY_KEEP: WordSet = WordSet::new(
    "\
    ally anomaly assembly belly billy bully butterfly emily family firefly holly italy jelly kelly lily molly \
    monopoly polly rally sally supply ugly",
);

/// `-ed` words that are nouns or adjectives, not participles.
static ED_KEEP: WordSet = WordSet::new(
    "\
    alfred beloved hundred jared kindred naked sacred wicked",
);

/// Adverbs in `-ly` and participles in `-ed`: weak as terms and as phrase words.
fn weak_word(lower: &str) -> bool {
    let n = lower.chars().count();
    if n >= 5 && lower.ends_with("ly") {
        return !LY_KEEP.contains(lower);
    }
    if n >= 5 && lower.ends_with("ed") && !lower.ends_with("eed") {
        return !ED_KEEP.contains(lower);
    }
    false
}

/// Abbreviations after which a full stop does not end a sentence.
static ABBREVIATIONS: WordSet = WordSet::new(
    "\
    dr e.g i.e jr mr mrs ms mt no prof sr st vs",
);

// ---------------------------------------------------------------------------------------------
// Tokens
// ---------------------------------------------------------------------------------------------

/// What separates a token from the one before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gap {
    /// Only spaces (or nothing: the first token).
    Space,
    /// One comma (and spaces).
    Comma,
    /// Exactly one slash.
    Slash,
    /// One full stop (and spaces).
    Dot,
    /// Anything else: other punctuation, symbols, emoji, skipped code, line breaks.
    Other,
}

#[derive(Debug, Clone)]
struct Token {
    /// Byte range of the word in its text.
    start: usize,
    end: usize,
    /// End of the word without a possessive suffix.
    core_end: usize,
    /// Lower case, apostrophes made ASCII, possessive removed.
    lower: String,
    /// A stop word.
    stop: bool,
    /// Starts with an upper-case letter, or is camel-cased from lower case ("iPhone").
    cap: bool,
    /// A single upper-case letter.
    initial: bool,
    /// Had a possessive `'s`.
    possessive: bool,
    /// A contraction such as `don't`, `I'm`, `we've`.
    contraction: bool,
    /// Characters (Unicode scalar values).
    chars: usize,
    /// Alphabetic characters.
    letters: usize,
    /// Longer than `max_word_chars`.
    long: bool,
    /// Opens a sentence.
    sent_start: bool,
    /// The separation before it.
    gap: Gap,
    /// Last non-space character before it in its gap (or ' ').
    prev_char: char,
    /// Heading, bold span or title-case sentence: capitals here prove nothing.
    title: bool,
    /// On a markdown list item line.
    bullet: bool,
}

impl Token {
    /// Capitalised, not a stop word, not too short or long: may be part of a name.
    fn name_like(&self) -> bool {
        self.cap
            && !self.long
            && !self.contraction
            && (self.letters >= 2 || self.initial)
            && !self.stop
            && !(self.initial && (self.lower == "i" || self.lower == "a"))
    }

    /// A full stop after it does not end a sentence: an initial or an abbreviation ("J.", "Dr.").
    fn dot_joins(&self) -> bool {
        self.initial || ABBREVIATIONS.contains(&self.lower)
    }
}

/// Accumulates the characters between two words.
#[derive(Default)]
struct GapAcc {
    newline: bool,
    sentence: bool,
    dots: u32,
    commas: u32,
    slashes: u32,
    other: bool,
    /// Last non-space character.
    last: Option<char>,
    /// Last character, spaces included.
    last_raw: Option<char>,
}

impl GapAcc {
    fn see(&mut self, c: char) {
        self.last_raw = Some(c);
        match c {
            '\n' | '\r' | '\u{2028}' | '\u{2029}' => self.newline = true,
            c if c.is_whitespace() => {}
            '.' => {
                self.dots += 1;
                self.last = Some(c);
            }
            '!' | '?' | '…' | ':' | ';' | '。' | '！' | '？' => {
                self.sentence = true;
                self.other = true;
                self.last = Some(c);
            }
            ',' => {
                self.commas += 1;
                self.last = Some(c);
            }
            '/' => {
                self.slashes += 1;
                self.last = Some(c);
            }
            _ => {
                self.other = true;
                self.last = Some(c);
            }
        }
    }

    fn kind(&self) -> Gap {
        let marks = self.dots + self.commas + self.slashes;
        if self.other || self.newline || marks > 1 {
            Gap::Other
        } else if self.dots == 1 {
            Gap::Dot
        } else if self.commas == 1 {
            Gap::Comma
        } else if self.slashes == 1 {
            Gap::Slash
        } else {
            Gap::Space
        }
    }
}

/// Letters and digits start and make words.
fn is_word_char(c: char) -> bool {
    c.is_alphanumeric()
}

/// Combining marks and joiners that belong to the word before them (accents written as separate
/// code points, Indic vowel signs and viramas, zero-width joiners).
fn is_combining(c: char) -> bool {
    matches!(
        u32::from(c),
        0x0300..=0x036F
            | 0x0483..=0x0489
            | 0x0591..=0x05BD
            | 0x0610..=0x061A
            | 0x064B..=0x065F
            | 0x0900..=0x0963
            | 0x0966..=0x0DFF
            | 0x1AB0..=0x1AFF
            | 0x1DC0..=0x1DFF
            | 0x200C..=0x200D
            | 0x20D0..=0x20FF
            | 0xFE20..=0xFE2F
    )
}

fn char_at(text: &str, i: usize) -> Option<char> {
    text.get(i..).and_then(|s| s.chars().next())
}

/// Index just past the end of the line containing `i` (after its `\n`), or the text's end.
fn line_end(text: &str, i: usize) -> usize {
    match text[i..].find('\n') {
        Some(p) => i + p + 1,
        None => text.len(),
    }
}

/// Splits a text into word tokens (see the module documentation).
fn tokenize(text: &str, max_word_chars: usize) -> Vec<Token> {
    let mut toks: Vec<Token> = Vec::new();
    let mut gap = GapAcc::default();
    let mut i = 0;
    let mut line_start = true;
    let (mut heading, mut bullet, mut bold, mut in_fence) = (false, false, false, false);
    // Once a closing delimiter has been searched for and not found, never search again (linear time).
    let (mut no_paren_close, mut no_bracket_close, mut no_dollar_close) = (false, false, false);
    // End of the whitespace-delimited chunk already checked for URLs.
    let mut url_checked_until = 0;
    while i < text.len() {
        if line_start {
            let rest = &text[i..];
            let trimmed = rest.trim_start_matches([' ', '\t']);
            let fence = trimmed.starts_with("```") || trimmed.starts_with("~~~");
            if fence || in_fence {
                if fence {
                    in_fence = !in_fence;
                }
                i = line_end(text, i);
                gap.other = true;
                gap.newline = true;
                continue;
            }
            heading = trimmed.starts_with('#');
            bullet = is_bullet(trimmed);
            bold = false;
            line_start = false;
        }
        let Some(c) = char_at(text, i) else { break };
        let next = char_at(text, i + c.len_utf8());
        if c == '\n' {
            gap.see(c);
            line_start = true;
            i += 1;
            continue;
        }
        if is_word_char(c) {
            let prev = if i == 0 { None } else { text[..i].chars().next_back() };
            let chunk_start = prev.is_none_or(|p| p.is_whitespace() || matches!(p, '(' | '<' | '[' | '"' | '\''));
            if chunk_start && i >= url_checked_until {
                let end = text[i..].find(char::is_whitespace).map_or(text.len(), |p| i + p);
                let chunk = &text[i..end];
                let trimmed = chunk.trim_end_matches(|c: char| !c.is_alphanumeric());
                url_checked_until = end;
                let email = trimmed.contains('@') && trimmed.rsplit('@').next().is_some_and(|d| d.contains('.'));
                if chunk.contains("://") || chunk.starts_with("www.") || email {
                    i = end;
                    gap.other = true;
                    continue;
                }
            }
            let end = scan_word(text, i);
            push_token(&mut toks, text, i, end, &gap, (heading || bold, bullet), max_word_chars);
            gap = GapAcc::default();
            i = end;
            continue;
        }
        match c {
            '`' => {
                // Inline code: skip to the closing backtick on the same line (an unclosed one is
                // the last of its line, so each character is scanned at most twice).
                match text[i + 1..].find(['`', '\n']) {
                    Some(p) if text.as_bytes()[i + 1 + p] == b'`' => i = i + 1 + p + 1,
                    _ => i += 1,
                }
                gap.other = true;
            }
            '\\' => {
                match next {
                    Some('(') | Some('[') => {
                        let (close, flag) = if next == Some('(') {
                            ("\\)", &mut no_paren_close)
                        } else {
                            ("\\]", &mut no_bracket_close)
                        };
                        i += 2;
                        if !*flag {
                            match text[i..].find(close) {
                                Some(p) => i += p + 2,
                                None => *flag = true,
                            }
                        }
                    }
                    Some(n) if n.is_ascii_alphabetic() => {
                        i += 1;
                        while let Some(n) = char_at(text, i) {
                            if !n.is_ascii_alphabetic() {
                                break;
                            }
                            i += 1;
                        }
                    }
                    _ => i += 1,
                }
                gap.other = true;
            }
            '$' if next == Some('$') => {
                i += 2;
                if !no_dollar_close {
                    match text[i..].find("$$") {
                        Some(p) => i += p + 2,
                        None => no_dollar_close = true,
                    }
                }
                gap.other = true;
            }
            '*' | '_' if next == Some(c) => {
                bold = !bold;
                i += 2;
                gap.other = true;
            }
            _ => {
                gap.see(c);
                i += c.len_utf8();
            }
        }
    }
    toks
}

/// End (byte index) of the word starting at `start`.
fn scan_word(text: &str, start: usize) -> usize {
    let mut i = start;
    let mut prev: Option<char> = None;
    while let Some(c) = char_at(text, i) {
        let clen = c.len_utf8();
        if is_word_char(c) {
            prev = Some(c);
            i += clen;
            continue;
        }
        let next = char_at(text, i + clen);
        let prev_alnum = prev.is_some_and(char::is_alphanumeric);
        let next_alnum = next.is_some_and(char::is_alphanumeric);
        let join = match c {
            _ if is_combining(c) => prev.is_some(),
            _ if is_apostrophe(c) => prev_alnum && next.is_some_and(char::is_alphabetic),
            '_' => prev_alnum && next_alnum,
            '-' | '\u{2010}' | '\u{2011}' => prev_alnum && next_alnum,
            // Versions, decimals, acronyms and file or domain names: "3.11", "U.S", "Chart.js", "Render.com".
            '.' => prev_alnum && next_alnum,
            ',' => {
                prev.is_some_and(|p| p.is_ascii_digit()) && {
                    let tail = &text.as_bytes()[i + 1..];
                    tail.len() >= 3
                        && tail[..3].iter().all(u8::is_ascii_digit)
                        && tail.get(3).is_none_or(|b| !b.is_ascii_alphanumeric())
                }
            }
            _ => false,
        };
        if !join {
            break;
        }
        prev = Some(c);
        i += clen;
    }
    i
}

/// True for a markdown list item: "- ", "* ", "+ ", "• ", "1. ", "2) ".
fn is_bullet(line: &str) -> bool {
    let mut chars = line.chars();
    match chars.next() {
        Some('-' | '*' | '+' | '•') => chars.next().is_some_and(char::is_whitespace),
        Some(c) if c.is_ascii_digit() => {
            let rest = line.trim_start_matches(|c: char| c.is_ascii_digit());
            rest.starts_with(". ") || rest.starts_with(") ")
        }
        _ => false,
    }
}

fn push_token(
    toks: &mut Vec<Token>,
    text: &str,
    start: usize,
    end: usize,
    gap: &GapAcc,
    (title, bullet): (bool, bool),
    max: usize,
) {
    let surface = &text[start..end];
    let full_lower = lower_word(surface);
    let stem = strip_possessive(&full_lower);
    // "it's", "that's", "let's": a stop word before 's is a contraction, not a possessive.
    let stop = is_stop(stem);
    let lower = if stop { full_lower.clone() } else { stem.to_string() };
    let possessive = lower.len() < full_lower.len();
    let core_end = if possessive {
        // Remove the trailing "s" or "'s"/"’s" of the surface form.
        let mut e = end;
        let mut removed = 0;
        let target = full_lower.len() - lower.len();
        let mut it = surface.char_indices().rev();
        while removed < target {
            match it.next() {
                Some((p, ch)) => {
                    e = start + p;
                    removed += if is_apostrophe(ch) { 1 } else { ch.to_lowercase().map(char::len_utf8).sum() };
                }
                None => break,
            }
        }
        e
    } else {
        end
    };
    let contraction = match lower.rfind('\'') {
        Some(p) => matches!(&lower[p + 1..], "t" | "re" | "ll" | "ve" | "d" | "m" | "s"),
        None => false,
    };
    let mut chars = 0;
    let mut letters = 0;
    let mut first_upper = false;
    let mut first_lower = false;
    let mut inner_upper = false;
    for (n, c) in surface[..core_end - start].chars().enumerate() {
        chars += 1;
        if c.is_alphabetic() {
            letters += 1;
        }
        if n == 0 {
            first_upper = c.is_uppercase();
            first_lower = c.is_lowercase();
        } else if c.is_uppercase() {
            inner_upper = true;
        }
    }
    let cap = first_upper || (first_lower && inner_upper && chars >= 3 && !lower.contains('.'));
    let initial = chars == 1 && first_upper;
    let prev = toks.last();
    let kind = gap.kind();
    let abbreviation_dot = kind == Gap::Dot && prev.is_some_and(Token::dot_joins);
    // An opening quote right before the word starts a quotation: capitals there prove nothing either.
    let quote = matches!(gap.last_raw, Some('"' | '\u{201C}' | '\u{2018}' | '\''));
    let sent_start = prev.is_none() || gap.newline || gap.sentence || quote || (gap.dots > 0 && !abbreviation_dot);
    toks.push(Token {
        start,
        end,
        core_end,
        lower,
        stop,
        cap,
        initial,
        possessive,
        contraction,
        chars,
        letters,
        long: chars > max,
        sent_start,
        gap: if prev.is_none() { Gap::Space } else { kind },
        prev_char: gap.last.unwrap_or(' '),
        title,
        bullet,
    });
}

/// Marks title-case sentences (three or more content words, all capitalised; one or more on a
/// list item) as titles.
fn mark_title_sentences(turn: &mut [Token]) {
    let mut s = 0;
    while s < turn.len() {
        let mut e = s + 1;
        while e < turn.len() && !turn[e].sent_start {
            e += 1;
        }
        let mut content = 0;
        let mut caps = 0;
        for t in &turn[s..e] {
            if t.letters >= 2 && !t.stop && !is_connector(&t.lower) {
                content += 1;
                if t.cap {
                    caps += 1;
                }
            }
        }
        let needed = if turn[s].bullet { 1 } else { 3 };
        if caps >= needed && caps == content {
            for t in &mut turn[s..e] {
                t.title = true;
            }
        }
        s = e;
    }
}

/// Label of tokens `a..=b`: their surface text with whitespace collapsed, without a final possessive.
fn span_label(text: &str, turn: &[Token], a: usize, b: usize) -> String {
    let raw = &text[turn[a].start..turn[b].core_end];
    let mut out = String::with_capacity(raw.len());
    for (n, part) in raw.split_whitespace().enumerate() {
        if n > 0 {
            out.push(' ');
        }
        out.push_str(part);
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Evidence about capitalisation in the window
// ---------------------------------------------------------------------------------------------

struct Evidence<'a> {
    /// Lower-case forms of words seen capitalised in running text (not opening a sentence, not in a
    /// capitalised run that opens one, not in a title).
    capitalised: FastSet<&'a str>,
    /// Lower-case forms of words seen written in lower case.
    lowered: FastSet<&'a str>,
}

impl<'a> Evidence<'a> {
    fn collect(toks: &'a [Vec<Token>]) -> Self {
        let mut capitalised = FastSet::default();
        let mut lowered = FastSet::default();
        for turn in toks {
            // Whether the current run of capitalised words began at a sentence start ("Design Website").
            let mut run_from_start = false;
            for t in turn {
                run_from_start = if t.sent_start { t.cap } else { run_from_start && t.cap && t.gap == Gap::Space };
                if t.cap && !run_from_start && !t.title && t.name_like() {
                    capitalised.insert(t.lower.as_str());
                } else if !t.cap && t.letters > 0 {
                    lowered.insert(t.lower.as_str());
                }
            }
        }
        Evidence { capitalised, lowered }
    }

    fn capitalised_in_text(&self, lower: &str) -> bool {
        self.capitalised.contains(lower)
    }

    fn lower_case(&self, lower: &str) -> bool {
        self.lowered.contains(lower)
    }
}

// ---------------------------------------------------------------------------------------------
// Dates
// ---------------------------------------------------------------------------------------------

struct DateHit {
    first: usize,
    last: usize,
    key: String,
    /// Score bonus for precision: 0.5 full date, 0.25 month-year or day-month, 0 year.
    precision: f32,
}

fn month_of(t: &Token) -> Option<u32> {
    if !t.cap {
        return None;
    }
    let m = match t.lower.as_str() {
        "january" | "jan" => 1,
        "february" | "feb" => 2,
        "march" | "mar" => 3,
        "april" | "apr" => 4,
        "may" => 5,
        "june" | "jun" => 6,
        "july" | "jul" => 7,
        "august" | "aug" => 8,
        "september" | "sep" | "sept" => 9,
        "october" | "oct" => 10,
        "november" | "nov" => 11,
        "december" | "dec" => 12,
        _ => return None,
    };
    Some(m)
}

fn digits_value(s: &str, min_len: usize, max_len: usize) -> Option<u32> {
    if s.len() < min_len || s.len() > max_len || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn day_of(t: &Token) -> Option<u32> {
    let s = t.lower.as_str();
    let digits = ["st", "nd", "rd", "th"].iter().find_map(|suf| s.strip_suffix(suf)).unwrap_or(s);
    digits_value(digits, 1, 2).filter(|d| (1..=31).contains(d))
}

/// A day-and-month date spanning tokens `first..=last`, extended by the following year token when
/// `year` is known.
fn day_month_hit(first: usize, last: usize, m: u32, d: u32, year: Option<u32>) -> DateHit {
    match year {
        Some(y) => DateHit { first, last: last + 1, key: format!("{y:04}-{m:02}-{d:02}"), precision: 0.5 },
        None => DateHit { first, last, key: format!("--{m:02}-{d:02}"), precision: 0.25 },
    }
}

fn year_of(t: &Token) -> Option<u32> {
    digits_value(&t.lower, 4, 4).filter(|y| (1900..=2099).contains(y))
}

fn days_in_month(month: u32) -> u32 {
    match month {
        2 => 29,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

fn valid_day(month: u32, day: u32) -> bool {
    (1..=12).contains(&month) && day >= 1 && day <= days_in_month(month)
}

/// Explicit dates of one turn, in text order, on disjoint token spans.
fn find_dates(text: &str, turn: &[Token]) -> Vec<DateHit> {
    let mut hits = Vec::new();
    let n = turn.len();
    let gap_ok = |k: usize, allowed: &[Gap]| k < n && allowed.contains(&turn[k].gap);
    let mut i = 0;
    while i < n {
        let t = &turn[i];
        // ISO 2023-05-07 / 2023-05, and year ranges 2022-2023.
        if t.lower.as_bytes().first().is_some_and(u8::is_ascii_digit) && t.lower.contains('-') {
            let parts: Vec<&str> = t.lower.split('-').collect();
            let y = parts.first().and_then(|p| digits_value(p, 4, 4)).filter(|y| (1000..=2999).contains(y));
            if let Some(y) = y {
                let m = parts.get(1).and_then(|p| digits_value(p, 2, 2));
                let d = parts.get(2).and_then(|p| digits_value(p, 2, 2));
                let found = match (parts.len(), m, d) {
                    (3, Some(m), Some(d)) if valid_day(m, d) => {
                        vec![(format!("{y:04}-{m:02}-{d:02}"), 0.5)]
                    }
                    (2, Some(m), None) if (1..=12).contains(&m) => vec![(format!("{y:04}-{m:02}"), 0.25)],
                    (2, _, _) => match parts.get(1).and_then(|p| digits_value(p, 4, 4)) {
                        Some(y2) if (1900..=2099).contains(&y) && (1900..=2099).contains(&y2) && y2 > y => {
                            vec![(format!("{y:04}"), 0.0), (format!("{y2:04}"), 0.0)]
                        }
                        _ => Vec::new(),
                    },
                    _ => Vec::new(),
                };
                if !found.is_empty() {
                    for (key, precision) in found {
                        hits.push(DateHit { first: i, last: i, key, precision });
                    }
                    i += 1;
                    continue;
                }
            }
        }
        // Numeric with slashes: 2023/05/07, 05/07/2023 (month first unless the first number exceeds 12).
        if gap_ok(i + 1, &[Gap::Slash]) && gap_ok(i + 2, &[Gap::Slash]) {
            let (a, b, c) = (&turn[i].lower, &turn[i + 1].lower, &turn[i + 2].lower);
            let ymd = match (digits_value(a, 4, 4), digits_value(b, 1, 2), digits_value(c, 1, 2)) {
                (Some(y), Some(m), Some(d)) => Some((y, m, d)),
                _ => match (digits_value(a, 1, 2), digits_value(b, 1, 2), digits_value(c, 4, 4)) {
                    (Some(p), Some(q), Some(y)) if p > 12 => Some((y, q, p)),
                    (Some(p), Some(q), Some(y)) => Some((y, p, q)),
                    _ => None,
                },
            };
            if let Some((y, m, d)) = ymd.filter(|&(y, m, d)| (1000..=2999).contains(&y) && valid_day(m, d)) {
                hits.push(DateHit { first: i, last: i + 2, key: format!("{y:04}-{m:02}-{d:02}"), precision: 0.5 });
                i += 3;
                continue;
            }
        }
        // Day first: 7 May 2023, 7th of May, 2023, 7 May.
        if let Some(d) = day_of(t) {
            let mut k = i + 1;
            if k < n && turn[k].lower == "of" && turn[k].gap == Gap::Space {
                k += 1;
            }
            if gap_ok(k, &[Gap::Space])
                && let Some(m) = month_of(&turn[k]).filter(|&m| valid_day(m, d))
            {
                let year = if gap_ok(k + 1, &[Gap::Space, Gap::Comma]) { year_of(&turn[k + 1]) } else { None };
                let hit = day_month_hit(i, k, m, d, year);
                i = hit.last + 1;
                hits.push(hit);
                continue;
            }
        }
        // Month first: May 7, 2023; May 7th; May 2023; Nov. 15.
        if let Some(m) = month_of(t) {
            let k = i + 1;
            let day = if gap_ok(k, &[Gap::Space, Gap::Dot]) { day_of(&turn[k]) } else { None };
            if let Some(d) = day.filter(|&d| valid_day(m, d)) {
                let year = if gap_ok(k + 1, &[Gap::Space, Gap::Comma]) { year_of(&turn[k + 1]) } else { None };
                let hit = day_month_hit(i, k, m, d, year);
                i = hit.last + 1;
                hits.push(hit);
                continue;
            }
            let year = if gap_ok(k, &[Gap::Space, Gap::Comma]) { year_of(&turn[k]) } else { None };
            if let Some(y) = year {
                hits.push(DateHit { first: i, last: k, key: format!("{y:04}-{m:02}"), precision: 0.25 });
                i = k + 1;
                continue;
            }
        }
        // A lone year, not money, not a percentage, not a measure glued to symbols.
        if let Some(y) = year_of(t) {
            let after = text[t.end..].chars().next();
            let money = matches!(t.prev_char, '$' | '€' | '£' | '¥' | '#') && t.gap != Gap::Space;
            if !money && !matches!(after, Some('%') | Some('$')) {
                hits.push(DateHit { first: i, last: i, key: format!("{y:04}"), precision: 0.0 });
            }
        }
        i += 1;
    }
    hits
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

/// Words after which a verb follows ("I play clarinet", "we could visit").
static VERB_CUES: WordSet = WordSet::new(
    "\
    can could didn't don't he i i'll i'm i've let's might must she should they we we'll we're we've will would \
    you you'll",
);

/// True when token `k` follows a pronoun or modal in the same sentence, so is most likely a verb.
fn verb_follows(turn: &[Token], k: usize) -> bool {
    k > 0
        && !turn[k].sent_start
        && turn[k].gap == Gap::Space
        && !turn[k - 1].possessive
        && VERB_CUES.contains(&turn[k - 1].lower)
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

/// One phrase or term candidate occurrence, for RAKE statistics and inner mentions.
struct Occurrence {
    turn: usize,
    words: Vec<String>,
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

/// Word frequency and degree over the candidate occurrences of a window (RAKE).
struct RakeStats {
    /// singular(word) → (frequency, degree).
    words: FastMap<String, (u32, u32)>,
}

impl RakeStats {
    fn collect(occurrences: &[Occurrence]) -> Self {
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
    fn score(&self, key: &str) -> f32 {
        key.split(' ')
            .map(|w| match self.words.get(&singular(w)) {
                Some(&(f, d)) if f > 0 => d as f32 / f as f32,
                _ => 1.0,
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn extractor() -> Extractor {
        Extractor::new(ExtractConfig::default())
    }

    /// (key, kind, turns) of every concept, in output order.
    fn summary(concepts: &[Concept]) -> Vec<(String, ConceptKind, Vec<usize>)> {
        concepts.iter().map(|c| (c.key.clone(), c.kind, c.turns.clone())).collect()
    }

    fn find<'a>(concepts: &'a [Concept], key: &str) -> Option<&'a Concept> {
        concepts.iter().find(|c| c.key == key)
    }

    fn all(turns: &[&str]) -> Vec<Concept> {
        Extractor::new(ExtractConfig { max_concepts: 100, ..ExtractConfig::default() }).extract(turns)
    }

    #[test]
    fn word_lists_are_sorted_and_unique() {
        let lists: [(&str, &WordSet); 10] = [
            ("STOP_WORDS", &STOP_WORDS),
            ("CONNECTORS", &CONNECTORS),
            ("LY_KEEP", &LY_KEEP),
            ("ED_KEEP", &ED_KEEP),
            ("ABBREVIATIONS", &ABBREVIATIONS),
            ("SINGULAR_KEEP", &SINGULAR_KEEP),
            ("IE_PLURALS", &IE_PLURALS),
            ("NAME_PREFIXES", &NAME_PREFIXES),
            ("VERB_CUES", &VERB_CUES),
            ("ENUMERATORS", &ENUMERATORS),
        ];
        for (name, list) in lists {
            let words: Vec<&str> = list.words.split_whitespace().collect();
            assert!(!words.is_empty(), "{name} is empty");
            assert!(words.windows(2).all(|w| w[0] < w[1]), "{name} is not sorted and unique");
            assert!(words.iter().all(|w| list.contains(w) && *w == w.to_lowercase()), "{name}");
        }
        assert!(IRREGULAR_PLURALS.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(is_stop("thanks") && is_stop("that's") && !is_stop("pottery"));
    }

    #[test]
    fn names_with_sentence_initial_handling() {
        let concepts = all(&["Hey Mel! Good to see you.", "Thanks, Caroline! I saw Melanie at the park."]);
        assert_eq!(
            summary(&concepts),
            vec![
                ("caroline".to_string(), ConceptKind::Name, vec![1]),
                ("mel".to_string(), ConceptKind::Name, vec![0]),
                ("melanie".to_string(), ConceptKind::Name, vec![1]),
                ("park".to_string(), ConceptKind::Term, vec![1]),
            ]
        );
        assert_eq!(concepts[0].label, "Caroline");
        assert_eq!(concepts[0].score, 101.0);

        // A capitalised word opening a sentence is not a name by itself...
        let concepts = all(&["Painting is fun.", "I love painting."]);
        assert_eq!(summary(&concepts), vec![("painting".to_string(), ConceptKind::Term, vec![0, 1])]);
        assert_eq!(concepts[0].label, "Painting");
        // ...unless the window shows it capitalised in running text.
        let concepts = all(&["Caroline went home.", "I met Caroline there."]);
        assert_eq!(
            find(&concepts, "caroline").map(|c| (c.kind, c.turns.clone())),
            Some((ConceptKind::Name, vec![0, 1]))
        );
        // "Luna and Oliver!": joined to a name in running text.
        let concepts = all(&["Luna and Oliver! They are so sweet."]);
        assert_eq!(
            summary(&concepts)[..2],
            [("luna".to_string(), ConceptKind::Name, vec![0]), ("oliver".to_string(), ConceptKind::Name, vec![0]),]
        );
        // Numbered labels ("Chapter 3"), honorifics and "PM" are no names.
        let concepts =
            all(&["We read Chapter 3 with Alice, then Step 2 at 5 PM.", "Alice likes the Harry Potter books."]);
        let names: Vec<&str> =
            concepts.iter().filter(|c| c.kind == ConceptKind::Name).map(|c| c.key.as_str()).collect();
        assert_eq!(names, vec!["alice", "harry potter"]);
        assert_eq!(find(&concepts, "chapter").map(|c| c.kind), Some(ConceptKind::Term));
        // "I" never counts; a capitalised common word after "The" that is lower case elsewhere is no name.
        let concepts = all(&["We joined the support groups.", "The Support group's leader was kind. I did."]);
        assert_eq!(
            summary(&concepts),
            vec![
                ("support group".to_string(), ConceptKind::Phrase, vec![0, 1]),
                ("leader".to_string(), ConceptKind::Term, vec![1]),
            ]
        );
    }

    #[test]
    fn multiword_names() {
        let concepts = all(&[
            "I visited the Bank of America tower with Harry Potter fans in New York.",
            "We read a book by J. K. Rowling and met Dr. Smith.",
        ]);
        let names: Vec<(&str, &str)> = concepts
            .iter()
            .filter(|c| c.kind == ConceptKind::Name)
            .map(|c| (c.key.as_str(), c.label.as_str()))
            .collect();
        assert_eq!(
            names,
            vec![
                ("bank of america", "Bank of America"),
                ("j k rowling", "J. K. Rowling"),
                ("harry potter", "Harry Potter"),
                ("new york", "New York"),
                ("smith", "Smith"),
            ]
        );
        // Longer names score a little higher: 100 + 1 turn + 0.25 per extra word.
        assert_eq!(find(&concepts, "bank of america").map(|c| c.score), Some(101.5));
        assert_eq!(find(&concepts, "harry potter").map(|c| c.score), Some(101.25));
    }

    #[test]
    fn key_normalisation() {
        assert_eq!(normalize_key("Support group's"), "support group");
        assert_eq!(normalize_key("support   groups"), "support group");
        assert_eq!(normalize_key("Caroline\u{2019}s"), "caroline");
        assert_eq!(normalize_key("Stories"), "story");
        assert_eq!(normalize_key("pottery classes"), "pottery class");
        assert_eq!(normalize_key("boxes"), "box");
        assert_eq!(normalize_key("movies"), "movie");
        assert_eq!(normalize_key("our lives"), "our life");
        assert_eq!(normalize_key("news"), "news");
        assert_eq!(normalize_key("Paris"), "paris");
        assert_eq!(normalize_key("bus"), "bus");
        assert_eq!(normalize_key("German Shepherds"), "german shepherd");
        assert_eq!(normalize_key("2023-05-07"), "2023-05-07");
        // In extraction: plural, possessive and case variants share one key.
        let concepts = all(&[
            "My support groups meet weekly at the community center.",
            "Our support group's leader is kind.",
            "The community centers nearby are busy.",
        ]);
        assert_eq!(find(&concepts, "support group").map(|c| c.turns.clone()), Some(vec![0, 1]));
        assert_eq!(find(&concepts, "community center").map(|c| c.turns.clone()), Some(vec![0, 2]));
        assert_eq!(find(&concepts, "support group").map(|c| c.label.as_str()), Some("support groups"));
    }

    #[test]
    fn dates_in_several_forms() {
        let concepts = all(&[
            "We met on 7 May 2023 and again on May 8, 2023.",
            "Since May 2023, in 2022, on 2023-05-09 and 05/10/2023.",
            "The 7th of May, Nov. 15, 2019-2021, $2000 and 1999% yesterday and last week.",
        ]);
        let dates: Vec<(&str, &str, Vec<usize>)> = concepts
            .iter()
            .filter(|c| c.kind == ConceptKind::Date)
            .map(|c| (c.key.as_str(), c.label.as_str(), c.turns.clone()))
            .collect();
        assert_eq!(
            dates,
            vec![
                ("2023-05-07", "7 May 2023", vec![0]),
                ("2023-05-08", "May 8, 2023", vec![0]),
                ("2023-05-09", "2023-05-09", vec![1]),
                ("2023-05-10", "05/10/2023", vec![1]),
                ("--05-07", "7th of May", vec![2]),
                ("--11-15", "Nov. 15", vec![2]),
                ("2023-05", "May 2023", vec![1]),
                ("2019", "2019-2021", vec![2]),
                ("2021", "2019-2021", vec![2]),
                ("2022", "2022", vec![1]),
            ]
        );
        assert!(concepts.iter().all(|c| !matches!(c.key.as_str(), "yesterday" | "week" | "last week" | "2000")));
        assert_eq!(find(&concepts, "2023-05-07").map(|c| c.score), Some(101.5));
        // A bare month or "May" the verb is no date; an impossible day is no date.
        assert_eq!(all(&["May I come in March? See you on 31 Feb."]), vec![]);
    }

    #[test]
    fn stop_words_and_chat_noise_are_excluded() {
        let turns = [
            "Hey! Thanks, wow, that's really great, lol. Yeah, I think I know, I guess.",
            "Awesome, cool, love it! Gonna feel like it, just saying. That's It!",
            "It was yesterday, last week. Wow! Thanks!!",
        ];
        assert_eq!(all(&turns), vec![]);
        let concepts = all(&["Wow, that's cool, Caroline! Did you hear any inspiring stories?"]);
        assert_eq!(
            summary(&concepts),
            vec![
                ("caroline".to_string(), ConceptKind::Name, vec![0]),
                ("story".to_string(), ConceptKind::Term, vec![0]),
            ]
        );
    }

    #[test]
    fn phrases_terms_and_scores() {
        let turns = [
            "I went to a LGBTQ support group yesterday and it was so powerful.",
            "The transgender stories were so inspiring!",
            "The support group has made me feel accepted.",
        ];
        let concepts = all(&turns);
        assert_eq!(
            summary(&concepts),
            vec![
                ("lgbtq".to_string(), ConceptKind::Name, vec![0]),
                ("support group".to_string(), ConceptKind::Phrase, vec![0, 2]),
                ("transgender story".to_string(), ConceptKind::Phrase, vec![1]),
            ]
        );
        // Two turns, two mentions, each word always in a two-word candidate: c = 2, rake = 2 + 2.
        assert_eq!(concepts[1].score, 4.0);
        assert_eq!(concepts[2].score, 2.0);
        // Phrases are cut at max_phrase_words, from the end.
        let short = Extractor::new(ExtractConfig { max_phrase_words: 2, max_concepts: 100, ..Default::default() });
        let keys: Vec<String> =
            short.extract(&["We bought organic garden vegetable seeds."]).into_iter().map(|c| c.key).collect();
        // "We bought": the verb after a pronoun is split off.
        assert_eq!(keys, vec!["organic garden", "vegetable seed", "bought"]);
        // "I play clarinet": the verb after a pronoun is split off.
        let keys: Vec<String> = all(&["I play clarinet."]).into_iter().map(|c| c.key).collect();
        assert_eq!(keys, vec!["clarinet", "play"]);
    }

    #[test]
    fn markdown_code_and_links_are_handled() {
        let text = "### Understanding Conditional Probability\n\
                    Conditional probability is the chance of an event.\n\
                    - **Event A**: rain\n\
                    - Monthly Summary\n\
                    ```python\nimport Flask\nx = Foo()\n```\n\
                    See https://example.com/Bar and `Baz` here, also \\(x^2\\) and mail me@x.org.";
        let concepts = all(&[text]);
        assert!(concepts.iter().all(|c| c.kind != ConceptKind::Name), "{:?}", summary(&concepts));
        let keys: Vec<&str> = concepts.iter().map(|c| c.key.as_str()).collect();
        assert_eq!(keys[0], "conditional probability");
        for absent in ["flask", "foo", "bar", "baz", "example.com", "me@x.org", "python"] {
            assert!(!keys.contains(&absent), "{absent} in {keys:?}");
        }
        // "Monthly" is an adverb-like -ly word: weak, so the list item gives the term "summary".
        assert!(keys.contains(&"summary"), "{keys:?}");
    }

    #[test]
    fn deterministic_and_ordered() {
        let turns = [
            "Caroline went to the pottery class with Melanie on 7 May 2023.",
            "Melanie loved the pottery class and the painting workshop.",
            "The painting workshop in Sweden was fun; Sweden is lovely.",
            "We should do a camping trip soon, the camping trip last year was great.",
            "Thanks! See you at the pottery class.",
        ];
        let ex = extractor();
        let a = ex.extract(&turns);
        let b = ex.extract(&turns);
        assert_eq!(a, b);
        assert!(a.windows(2).all(|w| w[0].score > w[1].score || (w[0].score == w[1].score && w[0].key < w[1].key)));
        // "Caroline" only opens a sentence, so the window cannot tell it from a common word: a term.
        assert_eq!(
            summary(&a),
            vec![
                ("melanie".to_string(), ConceptKind::Name, vec![0, 1]),
                ("2023-05-07".to_string(), ConceptKind::Date, vec![0]),
                ("sweden".to_string(), ConceptKind::Name, vec![2]),
                ("pottery class".to_string(), ConceptKind::Phrase, vec![0, 1, 4]),
                ("painting workshop".to_string(), ConceptKind::Phrase, vec![1, 2]),
                ("camping trip".to_string(), ConceptKind::Phrase, vec![3]),
                ("caroline".to_string(), ConceptKind::Term, vec![0]),
            ]
        );
        let scores: Vec<f32> = a.iter().map(|c| c.score).collect();
        assert_eq!(scores[..5], [102.0, 101.5, 100.0 + 1.0 + 0.5 * 2f32.ln(), 6.0, 4.0]);
        // The unconfirmed sentence-initial "Caroline" gets the 1.5 factor of a likely name.
        assert_eq!(scores[6], 1.5);
        let cut = Extractor::new(ExtractConfig { max_concepts: 3, ..ExtractConfig::default() }).extract(&turns);
        assert_eq!(cut, a[..3]);
        // A fresh extractor gives the same answer.
        assert_eq!(Extractor::default().extract(&turns), a);
    }

    #[test]
    fn odd_input_does_not_panic() {
        let ex = extractor();
        assert_eq!(ex.extract(&[]), vec![]);
        assert_eq!(ex.extract(&["", "   ", "\n\n"]), vec![]);
        assert_eq!(ex.extract(&["🎉🎉🎉 👍🏽 ❤️"]), vec![]);
        let concepts =
            ex.extract(&["I love 🍕pizza🎉 parties", "我喜欢北京。", "Ça va? Élodie est à Paris. Café crème!"]);
        let got: Vec<(&str, ConceptKind)> = concepts.iter().map(|c| (c.key.as_str(), c.kind)).collect();
        assert_eq!(
            got,
            vec![
                ("paris", ConceptKind::Name),
                ("café crème", ConceptKind::Phrase),
                // English rules: a capitalised sentence start is not a name, and "est" is no stop word.
                ("élodie est", ConceptKind::Phrase),
                ("party", ConceptKind::Term),
                ("pizza", ConceptKind::Term),
                ("我喜欢北京", ConceptKind::Term),
            ]
        );
        // Unclosed code, maths and quotes, lone marks and combining characters.
        for text in [
            "```\nunclosed Fence",
            "\\(never closed",
            "$$ never",
            "`tick",
            "'",
            "\u{301}e\u{301}",
            "a\u{200d}b",
            "--'-",
            "$",
        ] {
            let out = ex.extract(&[text, text]);
            assert!(out.len() <= 8);
        }
        assert_eq!(ex.query_keys(""), Vec::<String>::new());
    }

    #[test]
    fn long_turn_completes() {
        let words = ["Caroline", "visited", "the", "pottery", "class", "in", "Sweden", "on", "7", "May", "2023."];
        let mut text = String::new();
        for n in 0..20_000 {
            text.push_str(words[n % words.len()]);
            text.push(' ');
        }
        let start = std::time::Instant::now();
        let concepts = extractor().extract(&[&text, "Melanie says hi"]);
        assert!(start.elapsed().as_secs() < 10);
        let keys: Vec<&str> = concepts.iter().map(|c| c.key.as_str()).collect();
        // "Caroline" and "Melanie" only open sentences here, so they are terms (below the phrase).
        assert_eq!(keys, vec!["2023-05-07", "sweden", "pottery class", "caroline", "melanie"]);
    }

    #[test]
    fn query_keys_share_the_normalisation() {
        let ex = extractor();
        assert_eq!(
            ex.query_keys("When did Caroline go to the LGBTQ support groups?"),
            vec!["caroline", "lgbtq", "support group", "support", "group"]
        );
        assert_eq!(ex.query_keys("What happened on 7 May 2023?"), vec!["2023-05-07"]);
        let window = ex.extract(&["I went to a LGBTQ support group yesterday."]);
        let keys = ex.query_keys("Tell me about Caroline's support group.");
        assert!(window.iter().any(|c| keys.contains(&c.key)));
    }

    #[test]
    fn config_defaults_and_serde() {
        let d = ExtractConfig::default();
        assert_eq!(
            (d.max_concepts, d.max_phrase_words, d.max_name_words, d.min_word_chars, d.max_word_chars),
            (8, 4, 6, 3, 30)
        );
        let parsed: ExtractConfig = serde_json::from_str(r#"{"max_concepts": 3}"#).unwrap();
        assert_eq!(parsed, ExtractConfig { max_concepts: 3, ..ExtractConfig::default() });
        assert!(serde_json::from_str::<ExtractConfig>(r#"{"max_concept": 3}"#).is_err());
        assert_eq!(serde_json::to_string(&ConceptKind::Phrase).unwrap(), r#""phrase""#);
        // Zero limits are raised so that extraction still works.
        let ex = Extractor::new(ExtractConfig { max_phrase_words: 0, max_name_words: 0, ..ExtractConfig::default() });
        assert_eq!(ex.config().max_phrase_words, 1);
        assert_eq!(ex.extract(&["We love the pottery class."]).len(), 2);
        let none = Extractor::new(ExtractConfig { max_concepts: 0, ..ExtractConfig::default() });
        assert_eq!(none.extract(&["Caroline loves pottery."]), vec![]);
    }

    /// Property-like test over generated strings (tiny LCG, no external crates).
    #[test]
    fn generated_strings_keep_the_invariants() {
        const PIECES: &[&str] = &[
            "Caroline",
            "melanie",
            "the",
            "Support",
            "groups",
            "group's",
            "I",
            "I'm",
            "don't",
            "May",
            "7",
            "2023",
            "2023-05-07",
            "05/07/2023",
            "of",
            "Bank",
            "America",
            "New",
            "York",
            "J.",
            "K.",
            "Rowling",
            "café",
            "Élodie",
            "北京",
            "東京タワー",
            "🎉",
            "👍🏽",
            "❤️",
            "lol",
            "Wow",
            "That's",
            "stories",
            "classes",
            "boxes",
            "’s",
            "'",
            "-",
            "--",
            ".",
            "!",
            "?",
            ",",
            ";",
            ":",
            "\n",
            "\n- ",
            "### ",
            "**",
            "```",
            "`",
            "\\(",
            "\\)",
            "$$",
            "$",
            "%",
            "https://x.y/z",
            "a@b.c",
            "St.",
            "Dr.",
            "e.g.",
            "U.S.",
            "3.5",
            "1,000",
            "x_y",
            "iPhone",
            "GPT-4",
            "\u{301}",
            "\u{200d}",
            "\t",
            "\"",
            "“",
            "”",
            "(",
            ")",
            "&",
            "Nov.",
            "15th",
            "sept",
            "Sept",
            "2099",
            "1899",
            "ß",
            "İ",
            "ΟΔΟΣ",
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "pottery",
            "class",
            "camping",
            "trip",
        ];
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move || {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) as usize
        };
        for case in 0..400 {
            let config = ExtractConfig {
                max_concepts: 1 + case % 10,
                max_phrase_words: 1 + case % 5,
                ..ExtractConfig::default()
            };
            let ex = Extractor::new(config.clone());
            let n_turns = 1 + next() % 5;
            let turns: Vec<String> = (0..n_turns)
                .map(|_| {
                    let len = next() % 40;
                    let mut s = String::new();
                    for _ in 0..len {
                        s.push_str(PIECES[next() % PIECES.len()]);
                        if next() % 3 != 0 {
                            s.push(' ');
                        }
                    }
                    s
                })
                .collect();
            let refs: Vec<&str> = turns.iter().map(String::as_str).collect();
            let out = ex.extract(&refs);
            assert!(out.len() <= config.max_concepts, "{refs:?}");
            assert_eq!(out, ex.extract(&refs), "not deterministic: {refs:?}");
            for c in &out {
                assert!(!c.key.is_empty(), "{refs:?}");
                assert!(!c.label.is_empty(), "{refs:?}");
                assert_eq!(normalize_key(&c.key), c.key, "{refs:?}");
                assert!(!c.turns.is_empty());
                assert!(c.turns.windows(2).all(|w| w[0] < w[1]), "{refs:?}");
                assert!(c.turns.iter().all(|&t| t < refs.len()));
                assert!(c.score.is_finite() && c.score > 0.0);
            }
            assert!(
                out.windows(2).all(|w| w[0].score > w[1].score || (w[0].score == w[1].score && w[0].key < w[1].key))
            );
            for k in ex.query_keys(&turns[0]) {
                assert_eq!(normalize_key(&k), k);
            }
        }
    }
}
