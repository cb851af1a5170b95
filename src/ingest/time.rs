//! Parsing the dates the public layouts write: LoCoMo session dates (`1:56 pm on 8 May, 2023`)
//! and BEAM time anchors (`March-15-2024`).
//!
//! Pure functions of text; no time zone is given by either source, so every date is read as UTC.
//! Callers turn a `None` into an error that names the file and the key.
//!
//! Month names come from the one table of `calendar`, read leniently
//! ([`crate::calendar::month_of_prefix`]: a full name, or any start of it of three letters or more,
//! `mar`, `marc`, `sept`), since these fields hold nothing but a date. The concept extractor reads
//! the same table strictly (full names and the table's abbreviations only).

use chrono::{DateTime, NaiveDate, NaiveTime, Utc};

use crate::calendar::month_of_prefix;

/// What a LoCoMo `session_N_date_time` looks like, for error messages.
pub const LOCOMO_DATE_EXAMPLE: &str = "1:56 pm on 8 May, 2023";

/// What a BEAM `time_anchor` looks like, for error messages.
pub const BEAM_ANCHOR_EXAMPLE: &str = "March-15-2024";

/// Parses a LoCoMo session date such as `1:56 pm on 8 May, 2023` or `10:37 am on 27 June, 2023`
/// as UTC.
///
/// Lenient about what varies harmlessly (case, runs of spaces, `pm`/`p.m.`, a missing comma
/// before the year, abbreviated month names, zero-padding); strict about what carries meaning
/// (the hour must be 1–12 with am/pm, or 0–23 without; the day must exist in that month).
pub fn parse_locomo_date(text: &str) -> Option<DateTime<Utc>> {
    let lower = text.trim().to_ascii_lowercase();
    let (time_part, date_part) = lower.split_once(" on ")?;
    let time = parse_clock(time_part)?;
    let date_words: Vec<&str> =
        date_part.split(|c: char| c.is_whitespace() || c == ',').filter(|w| !w.is_empty()).collect();
    let [day, month, year] = date_words.as_slice() else {
        return None;
    };
    let date = NaiveDate::from_ymd_opt(parse_year(year)?, month_of_prefix(month)?, parse_small(day)?)?;
    Some(date.and_time(time).and_utc())
}

/// Parses a BEAM time anchor such as `March-15-2024` (month name, day, year) as midnight UTC.
/// An ISO date (`2024-03-15`) is accepted too.
pub fn parse_beam_anchor(text: &str) -> Option<DateTime<Utc>> {
    let parts: Vec<&str> = text.trim().split(['-', ' ', ',']).filter(|p| !p.is_empty()).collect();
    let [a, b, c] = parts.as_slice() else {
        return None;
    };
    let date = if a.len() == 4 && a.bytes().all(|b| b.is_ascii_digit()) {
        NaiveDate::from_ymd_opt(parse_year(a)?, parse_small(b)?, parse_small(c)?)?
    } else {
        NaiveDate::from_ymd_opt(parse_year(c)?, month_of_prefix(&a.to_ascii_lowercase())?, parse_small(b)?)?
    };
    Some(date.and_time(NaiveTime::MIN).and_utc())
}

/// `1:56 pm`, `10:37am`, `1:56 p.m.`, `13:56` → a time of day.
fn parse_clock(text: &str) -> Option<NaiveTime> {
    let compact: String = text.chars().filter(|c| !c.is_whitespace() && *c != '.').collect();
    let (digits, meridiem) = if let Some(d) = compact.strip_suffix("am") {
        (d, Some(false))
    } else if let Some(d) = compact.strip_suffix("pm") {
        (d, Some(true))
    } else {
        (compact.as_str(), None)
    };
    let (h, m) = digits.split_once(':')?;
    let (hour, minute) = (parse_small(h)?, parse_small(m)?);
    if m.len() != 2 {
        return None;
    }
    let hour = match meridiem {
        Some(pm) if (1..=12).contains(&hour) => hour % 12 + if pm { 12 } else { 0 },
        Some(_) => return None,
        None => hour,
    };
    NaiveTime::from_hms_opt(hour, minute, 0)
}

/// A day, month or clock number: one or two ASCII digits.
fn parse_small(text: &str) -> Option<u32> {
    if text.is_empty() || text.len() > 2 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// A four-digit year.
fn parse_year(text: &str) -> Option<i32> {
    if text.len() != 4 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).single().unwrap()
    }

    #[test]
    fn locomo_dates_from_the_public_data() {
        assert_eq!(parse_locomo_date("1:56 pm on 8 May, 2023"), Some(utc(2023, 5, 8, 13, 56)));
        assert_eq!(parse_locomo_date("10:37 am on 27 June, 2023"), Some(utc(2023, 6, 27, 10, 37)));
        assert_eq!(parse_locomo_date("12:48 am on 1 February, 2023"), Some(utc(2023, 2, 1, 0, 48)));
        assert_eq!(parse_locomo_date("12:09 pm on 13 September, 2022"), Some(utc(2022, 9, 13, 12, 9)));
    }

    #[test]
    fn locomo_dates_tolerate_harmless_variation() {
        let want = Some(utc(2023, 5, 8, 13, 56));
        assert_eq!(parse_locomo_date("  1:56 PM on 8 May, 2023 "), want);
        assert_eq!(parse_locomo_date("1:56pm on 08 May 2023"), want);
        assert_eq!(parse_locomo_date("1:56 p.m. on 8 may, 2023"), want);
        assert_eq!(parse_locomo_date("13:56 on 8 May, 2023"), want);
        assert_eq!(parse_locomo_date("1:56 pm on 8 Sept, 2023"), Some(utc(2023, 9, 8, 13, 56)));
    }

    #[test]
    fn locomo_dates_reject_nonsense() {
        for bad in [
            "",
            "yesterday",
            "1:56 pm 8 May, 2023",
            "13:56 pm on 8 May, 2023",
            "0:56 am on 8 May, 2023",
            "1:5 pm on 8 May, 2023",
            "1:56 pm on 31 June, 2023",
            "1:56 pm on 29 February, 2023",
            "1:56 pm on 8 Mai, 2023",
            "1:56 pm on 8 Ma, 2023",
            "1:56 pm on May 8, 2023",
            "1:56 pm on 8 May, 23",
            "1:56 pm on 8 May, 2023, extra",
        ] {
            assert_eq!(parse_locomo_date(bad), None, "{bad:?} should not parse");
        }
    }

    #[test]
    fn beam_anchors() {
        assert_eq!(parse_beam_anchor("March-15-2024"), Some(utc(2024, 3, 15, 0, 0)));
        assert_eq!(parse_beam_anchor("April-05-2024"), Some(utc(2024, 4, 5, 0, 0)));
        assert_eq!(parse_beam_anchor("july-4-2024"), Some(utc(2024, 7, 4, 0, 0)));
        assert_eq!(parse_beam_anchor("2024-03-15"), Some(utc(2024, 3, 15, 0, 0)));
        for bad in ["", "March-2024", "March-32-2024", "Smarch-15-2024", "15-03-2024", "March 15"] {
            assert_eq!(parse_beam_anchor(bad), None, "{bad:?} should not parse");
        }
    }
}
