//! The extractor's word lists and the predicates over them: each list is a plain text file under
//! `words/` (one lower-case word per line, sorted, no duplicates; `irregular_plurals.txt` holds one
//! `plural singular` pair per line), compiled in with `include_str!` and made a set on first use.
//! [`WordSet`] is also how the rest of the crate keeps a word list as data.
//! Also the small deterministic hasher that every word set and map of the extractor uses.
//!
//! Owns only the lists and how they are looked up; it must not tokenise, rank or know what a
//! concept is, and it imports nothing from the other parts of the extractor.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::OnceLock;

/// FNV-1a: a small, fast, deterministic hasher for short words.
#[derive(Clone, Copy)]
pub(super) struct Fnv(u64);

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

/// A hash set with the [`Fnv`] hasher (no random state: nothing depends on a process's seed).
pub(super) type FastSet<T> = HashSet<T, BuildHasherDefault<Fnv>>;
/// A hash map with the [`Fnv`] hasher.
pub(super) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<Fnv>>;

/// A word list written as whitespace-separated words (a data file: one a line, sorted, for the
/// reader), made a set on first use.
pub(crate) struct WordSet {
    words: &'static str,
    set: OnceLock<FastSet<&'static str>>,
}

impl WordSet {
    pub(crate) const fn new(words: &'static str) -> Self {
        WordSet { words, set: OnceLock::new() }
    }

    /// Whether `word` (lower case) is in the list.
    pub(crate) fn contains(&self, word: &str) -> bool {
        self.set.get_or_init(|| self.words.split_whitespace().collect()).contains(word)
    }
}

/// A list of word pairs written one `key value` pair a line (sorted by key), made a sorted table
/// on first use.
pub(super) struct WordPairs {
    text: &'static str,
    pairs: OnceLock<Vec<(&'static str, &'static str)>>,
}

impl WordPairs {
    const fn new(text: &'static str) -> Self {
        WordPairs { text, pairs: OnceLock::new() }
    }

    fn pairs(&self) -> &[(&'static str, &'static str)] {
        self.pairs.get_or_init(|| {
            let mut pairs: Vec<(&str, &str)> = self
                .text
                .lines()
                .filter_map(|line| {
                    let mut words = line.split_whitespace();
                    Some((words.next()?, words.next()?))
                })
                .collect();
            pairs.sort_unstable();
            pairs
        })
    }

    /// The value paired with `key` (lower case), if any.
    pub(super) fn get(&self, key: &str) -> Option<&'static str> {
        let pairs = self.pairs();
        pairs.binary_search_by(|(k, _)| (*k).cmp(key)).ok().map(|n| pairs[n].1)
    }
}

/// Built-in English stop words: function words, auxiliaries, common verbs, adjectives and adverbs,
/// chat words, weekdays, months and honorifics.
pub(super) static STOP_WORDS: WordSet = WordSet::new(include_str!("words/stop_words.txt"));

/// Words that may sit inside a name between two capitalised words ("Bank of America").
pub(super) static CONNECTORS: WordSet = WordSet::new(include_str!("words/connectors.txt"));

/// `-ly` words that are nouns or names, not adverbs.
pub(super) static LY_KEEP: WordSet = WordSet::new(include_str!("words/ly_keep.txt"));

/// `-ed` words that are nouns or adjectives, not participles.
pub(super) static ED_KEEP: WordSet = WordSet::new(include_str!("words/ed_keep.txt"));

/// Abbreviations after which a full stop does not end a sentence.
pub(super) static ABBREVIATIONS: WordSet = WordSet::new(include_str!("words/abbreviations.txt"));

/// Words ending in `s` that are not plurals (or whose plural is their singular).
pub(super) static SINGULAR_KEEP: WordSet = WordSet::new(include_str!("words/singular_keep.txt"));

/// Plurals in `-ies` whose singular ends in `-ie`.
pub(super) static IE_PLURALS: WordSet = WordSet::new(include_str!("words/ie_plurals.txt"));

/// Irregular plurals and their singulars (`plural singular`, sorted by plural).
pub(super) static IRREGULAR_PLURALS: WordPairs = WordPairs::new(include_str!("words/irregular_plurals.txt"));

/// Stop words that may open a name in running text when a capitalised word follows ("New York",
/// "St. Louis", "Great Barrier Reef").
pub(super) static NAME_PREFIXES: WordSet = WordSet::new(include_str!("words/name_prefixes.txt"));

/// Words after which a verb follows ("I play clarinet", "we could visit").
pub(super) static VERB_CUES: WordSet = WordSet::new(include_str!("words/verb_cues.txt"));

/// Words that number things ("Chapter 3", "Step 2", "Phase 1"): capitalised before a number they
/// are labels, not names.
pub(super) static ENUMERATORS: WordSet = WordSet::new(include_str!("words/enumerators.txt"));

/// A stop word.
pub(crate) fn is_stop(lower: &str) -> bool {
    STOP_WORDS.contains(lower)
}

/// A word that may join two capitalised words into one name.
pub(super) fn is_connector(lower: &str) -> bool {
    CONNECTORS.contains(lower)
}

/// Adverbs in `-ly` and participles in `-ed`: weak as terms and as phrase words.
pub(super) fn weak_word(lower: &str) -> bool {
    let n = lower.chars().count();
    if n >= 5 && lower.ends_with("ly") {
        return !LY_KEEP.contains(lower);
    }
    if n >= 5 && lower.ends_with("ed") && !lower.ends_with("eed") {
        return !ED_KEEP.contains(lower);
    }
    false
}

/// Checks a word-list file as every list of the crate is written: one entry a line of `fields`
/// space-separated words, nothing else on it, lower case, sorted in byte order by its first
/// word with no duplicates, not empty, the last line ended. For the tests of every module that
/// keeps a list.
#[cfg(test)]
pub(crate) fn check_word_list_file(name: &str, text: &str, fields: usize) {
    assert!(text.ends_with('\n'), "{name}: the last line ends with a line break");
    let lines: Vec<&str> = text.lines().collect();
    assert!(!lines.is_empty(), "{name} is empty");
    for line in &lines {
        let words: Vec<&str> = line.split(' ').collect();
        assert_eq!(words.len(), fields, "{name}: {line:?}");
        assert!(words.iter().all(|f| !f.is_empty() && !f.contains(char::is_whitespace)), "{name}: {line:?}");
        assert_eq!(*line, line.to_lowercase(), "{name}: {line:?} is not lower case");
    }
    let keys: Vec<&str> = lines.iter().map(|l| l.split(' ').next().unwrap_or("")).collect();
    for w in keys.windows(2) {
        assert!(w[0] < w[1], "{name}: {:?} before {:?} (unsorted or a duplicate)", w[0], w[1]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every word set with its name.
    fn word_sets() -> [(&'static str, &'static WordSet); 10] {
        [
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
        ]
    }

    #[test]
    fn word_lists_are_sorted_and_unique() {
        for (name, list) in word_sets() {
            let words: Vec<&str> = list.words.split_whitespace().collect();
            assert!(!words.is_empty(), "{name} is empty");
            assert!(words.windows(2).all(|w| w[0] < w[1]), "{name} is not sorted and unique");
            assert!(words.iter().all(|w| list.contains(w) && *w == w.to_lowercase()), "{name}");
        }
        let pairs = IRREGULAR_PLURALS.pairs();
        assert!(pairs.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(is_stop("thanks") && is_stop("that's") && !is_stop("pottery"));
    }

    /// The data files themselves: one entry a line, nothing else on it, lower case (every lookup is
    /// of a lower-case word), sorted in byte order with no duplicates, and not empty.
    #[test]
    fn word_list_files_are_one_sorted_lower_case_entry_a_line() {
        for (name, set) in word_sets() {
            check_word_list_file(name, set.words, 1);
        }
        check_word_list_file("IRREGULAR_PLURALS", IRREGULAR_PLURALS.text, 2);
        assert_eq!(IRREGULAR_PLURALS.get("children"), Some("child"));
        assert_eq!(IRREGULAR_PLURALS.get("wolves"), Some("wolf"));
        assert_eq!(IRREGULAR_PLURALS.get("child"), None);
        assert_eq!(IRREGULAR_PLURALS.pairs().len(), IRREGULAR_PLURALS.text.lines().count());
    }

    /// Months are stop words in every spelling the date reader knows, so that a month name that is
    /// no part of a date never becomes a term.
    #[test]
    fn every_month_spelling_is_a_stop_word() {
        for names in crate::calendar::MONTHS {
            for name in names {
                assert!(is_stop(name), "{name}");
            }
        }
    }
}
