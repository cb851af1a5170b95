//! Concept keys: the one normalisation that makes mentions of one thing meet. Lower case with ASCII
//! apostrophes, possessives removed, words joined by single spaces, the last word (the head noun)
//! singularised by simple English rules and the exception lists of `words`.
//!
//! Owns [`normalize_key`] and its parts (also used by the tokeniser and by RAKE, so that a token,
//! a candidate and a query are keyed alike); it must not tokenise text, find concepts or score them.

use super::words::{IE_PLURALS, IRREGULAR_PLURALS, SINGULAR_KEEP};

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
pub(super) fn make_key(words: &[&str]) -> String {
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

/// Lower case with typographic apostrophes made ASCII.
pub(super) fn lower_word(w: &str) -> String {
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

/// An ASCII, typographic or modifier-letter apostrophe.
pub(super) fn is_apostrophe(c: char) -> bool {
    matches!(c, '\'' | '\u{2019}' | '\u{02BC}')
}

/// Removes a possessive `'s` or a trailing `'` (after `s`) from a lower-case word.
pub(super) fn strip_possessive(w: &str) -> &str {
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

/// Singularises a lower-case word by simple English rules (idempotent).
pub(super) fn singular(w: &str) -> String {
    if let Some(singular) = IRREGULAR_PLURALS.get(w) {
        return singular.to_string();
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
