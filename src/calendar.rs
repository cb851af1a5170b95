//! English month names, written once: the table that every reader of dates uses (`ingest::time`
//! for the date fields of the public layouts, `graph::extract` for dates in the text of turns),
//! with the two spelling rules built on it.
//!
//! Owns only the names and their numbers; it parses no dates and depends on nothing else in the
//! crate.
//!
//! * [`month_of_name`]: a full name or one of the abbreviations of [`MONTHS`] (`may`, `sept`,
//!   `dec`), nothing else. For running text, where "Marc" or "Augus" is a name or a typo rather
//!   than a month.
//! * [`month_of_prefix`]: also any other start of at least three letters of a full name (`marc`,
//!   `septem`). For fields that hold only a date. Every abbreviation of the table is such a start,
//!   so it accepts everything [`month_of_name`] accepts, with the same number.

/// The twelve months in order, lower case: each row holds the full name first, then the
/// abbreviations that running text uses.
pub const MONTHS: [&[&str]; 12] = [
    &["january", "jan"],
    &["february", "feb"],
    &["march", "mar"],
    &["april", "apr"],
    &["may"],
    &["june", "jun"],
    &["july", "jul"],
    &["august", "aug"],
    &["september", "sep", "sept"],
    &["october", "oct"],
    &["november", "nov"],
    &["december", "dec"],
];

/// `may`, `sept`, `december` → 5, 9, 12: the month of a lower-case full name or abbreviation of
/// [`MONTHS`], exactly.
pub fn month_of_name(lower: &str) -> Option<u32> {
    MONTHS.iter().position(|names| names.contains(&lower)).map(|i| i as u32 + 1)
}

/// `march`, `mar`, `marc`, `septem` → 3, 3, 3, 9: the month whose full name starts with `lower`
/// (lower case, at least three bytes). A superset of [`month_of_name`].
pub fn month_of_prefix(lower: &str) -> Option<u32> {
    if lower.len() < 3 {
        return None;
    }
    MONTHS.iter().position(|names| names[0].starts_with(lower)).map(|i| i as u32 + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_abbreviations() {
        assert_eq!(month_of_name("january"), Some(1));
        assert_eq!(month_of_name("may"), Some(5));
        assert_eq!(month_of_name("sep"), Some(9));
        assert_eq!(month_of_name("sept"), Some(9));
        assert_eq!(month_of_name("dec"), Some(12));
        for other in ["", "ma", "marc", "septem", "mai", "May", "janu", "decembers"] {
            assert_eq!(month_of_name(other), None, "{other:?}");
        }
    }

    #[test]
    fn prefixes_accept_every_name_and_abbreviation_and_more() {
        for (i, names) in MONTHS.iter().enumerate() {
            let month = Some(i as u32 + 1);
            for name in *names {
                assert!(name.len() >= 3 && names[0].starts_with(name), "{name} is a start of {}", names[0]);
                assert_eq!(month_of_prefix(name), month, "{name}");
                assert_eq!(month_of_name(name), month, "{name}");
            }
            for n in 3..=names[0].len() {
                assert_eq!(month_of_prefix(&names[0][..n]), month, "{}", &names[0][..n]);
            }
        }
        for other in ["", "m", "ma", "ju", "mai", "smarch", "Marc", "decembers"] {
            assert_eq!(month_of_prefix(other), None, "{other:?}");
        }
    }
}
