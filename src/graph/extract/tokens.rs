//! Tokens: a turn's text cut into words, with what separates each word from the one before it (a
//! [`Gap`]), sentence starts, capitals, possessives and contractions, and the lines and spans where
//! capitals prove nothing (headings, bold spans, list items, title-case sentences). Fenced and
//! inline code, LaTeX, URLs and e-mail addresses are skipped. Linear in the length of the text.
//!
//! Owns the tokeniser and the labels of token spans; it must not decide what is a name, a date or
//! a phrase, nor rank anything.

use super::keys::{is_apostrophe, lower_word, strip_possessive};
use super::words::{ABBREVIATIONS, is_connector, is_stop};

/// What separates a token from the one before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Gap {
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

/// One word of a turn, with what the extractor needs to know about it.
#[derive(Debug, Clone)]
pub(super) struct Token {
    /// Byte range of the word in its text.
    pub(super) start: usize,
    pub(super) end: usize,
    /// End of the word without a possessive suffix.
    pub(super) core_end: usize,
    /// Lower case, apostrophes made ASCII, possessive removed.
    pub(super) lower: String,
    /// A stop word.
    pub(super) stop: bool,
    /// Starts with an upper-case letter, or is camel-cased from lower case ("iPhone").
    pub(super) cap: bool,
    /// A single upper-case letter.
    pub(super) initial: bool,
    /// Had a possessive `'s`.
    pub(super) possessive: bool,
    /// A contraction such as `don't`, `I'm`, `we've`.
    pub(super) contraction: bool,
    /// Characters (Unicode scalar values).
    pub(super) chars: usize,
    /// Alphabetic characters.
    pub(super) letters: usize,
    /// Longer than `max_word_chars`.
    pub(super) long: bool,
    /// Opens a sentence.
    pub(super) sent_start: bool,
    /// The separation before it.
    pub(super) gap: Gap,
    /// Last non-space character before it in its gap (or ' ').
    pub(super) prev_char: char,
    /// Heading, bold span or title-case sentence: capitals here prove nothing.
    pub(super) title: bool,
    /// On a markdown list item line.
    pub(super) bullet: bool,
}

impl Token {
    /// Capitalised, not a stop word, not too short or long: may be part of a name.
    pub(super) fn name_like(&self) -> bool {
        self.cap
            && !self.long
            && !self.contraction
            && (self.letters >= 2 || self.initial)
            && !self.stop
            && !(self.initial && (self.lower == "i" || self.lower == "a"))
    }

    /// A full stop after it does not end a sentence: an initial or an abbreviation ("J.", "Dr.").
    pub(super) fn dot_joins(&self) -> bool {
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
pub(super) fn tokenize(text: &str, max_word_chars: usize) -> Vec<Token> {
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
pub(super) fn mark_title_sentences(turn: &mut [Token]) {
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
pub(super) fn span_label(text: &str, turn: &[Token], a: usize, b: usize) -> String {
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
