//! Proper names in a turn's tokens: maximal runs of capitalised words, with connectors between
//! them ("Bank of America"), initials ("J. K. Rowling"), a leading name prefix ("New York"), and
//! the rules for sentence-initial and title-cased words, judged by the [`Evidence`] of the window
//! (which words it shows capitalised in running text, which in lower case).
//!
//! Owns the decision "is this span a name"; it marks the tokens it takes so that phrases skip
//! them, and must not tokenise, accumulate or rank.

use super::keys::make_key;
use super::tokens::{Gap, Token, span_label};
use super::words::{ENUMERATORS, FastSet, NAME_PREFIXES, is_connector, weak_word};

/// A name found in a turn.
pub(super) struct NameHit {
    /// Its key ([`make_key`] of its words).
    pub(super) key: String,
    /// Its surface form.
    pub(super) label: String,
    /// Its length in words, connectors included.
    pub(super) words: usize,
}

/// Names of one turn: runs of capitalised words (see the module documentation).
pub(super) fn find_names(
    text: &str,
    turn: &[Token],
    evidence: &Evidence,
    used: &mut [bool],
    max_words: usize,
) -> Vec<NameHit> {
    let mut hits = Vec::new();
    let eligible = |k: usize, used: &[bool]| name_eligible(turn, k, used, evidence);
    let mut i = 0;
    while i < turn.len() {
        let start_ok = eligible(i, used) || name_prefix(turn, i, used, evidence);
        if !start_ok || (turn[i].initial && !initial_leads_name(turn, i, used, evidence, max_words)) {
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
        hits.push(NameHit { key, label, words: words.len() });
        for u in &mut used[i..=last] {
            *u = true;
        }
        i = last + 1;
    }
    hits
}

/// True when the initial at `i` is followed by more of a name ("J. K. Rowling").
fn initial_leads_name(turn: &[Token], i: usize, used: &[bool], evidence: &Evidence, max_words: usize) -> bool {
    let mut k = i + 1;
    while k < turn.len() && k - i < max_words {
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

/// Evidence about capitalisation in a window.
pub(super) struct Evidence<'a> {
    /// Lower-case forms of words seen capitalised in running text (not opening a sentence, not in a
    /// capitalised run that opens one, not in a title).
    capitalised: FastSet<&'a str>,
    /// Lower-case forms of words seen written in lower case.
    lowered: FastSet<&'a str>,
}

impl<'a> Evidence<'a> {
    /// Reads the tokens of every turn of the window.
    pub(super) fn collect(toks: &'a [Vec<Token>]) -> Self {
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

    /// Seen capitalised in running text.
    pub(super) fn capitalised_in_text(&self, lower: &str) -> bool {
        self.capitalised.contains(lower)
    }

    /// Seen written in lower case.
    pub(super) fn lower_case(&self, lower: &str) -> bool {
        self.lowered.contains(lower)
    }
}
