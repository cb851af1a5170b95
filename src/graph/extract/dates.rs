//! Explicit dates in a turn's tokens: ISO dates (`2023-05-07`), numeric dates with slashes,
//! day-month(-year) and month-day(-year) with month names or their abbreviations (the strict
//! reading of the one month table, [`crate::calendar::month_of_name`], on capitalised words only),
//! month-year, year ranges and lone four-digit years 1900–2099; each with an ISO-like key
//! (`2023-05-07`, `2023-05`, `2023`, `--05-07`) and a precision bonus.
//!
//! Owns the recognition of dates on token spans; it must not tokenise, accumulate or rank, and it
//! reads no relative expressions ("yesterday").

use super::tokens::{Gap, Token};
use crate::calendar::month_of_name;

/// A date found on tokens `first..=last` of a turn.
pub(super) struct DateHit {
    /// First token of the date.
    pub(super) first: usize,
    /// Last token of the date.
    pub(super) last: usize,
    /// ISO-like key.
    pub(super) key: String,
    /// Score bonus for precision: 0.5 full date, 0.25 month-year or day-month, 0 year.
    pub(super) precision: f32,
}

/// The month of a capitalised month name or abbreviation ("May", "Sept", "Dec").
fn month_of(t: &Token) -> Option<u32> {
    if !t.cap {
        return None;
    }
    month_of_name(&t.lower)
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
pub(super) fn find_dates(text: &str, turn: &[Token]) -> Vec<DateHit> {
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
