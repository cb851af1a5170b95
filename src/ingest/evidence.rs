//! Repairing and resolving gold-evidence ids: pure functions, no I/O.
//!
//! The public data spells evidence loosely. LoCoMo has several ids in one string
//! (`"D8:6; D9:17"`), stray colons (`"D:11:26"`), zero-padding (`"D08:06"`), ids wrapped in
//! brackets, quotes or spaces, ids that name no turn (`"D10:19"` where session 10 is shorter) and
//! a bare `"D"`. BEAM writes message ids as integers or numeric strings, nested in lists or in
//! objects of lists. This module finds the ids in what was written, puts them in canonical form
//! and resolves them against the ids of the turns that exist; the loaders count what it repaired
//! and what it could not resolve.

use std::fmt;

/// A LoCoMo dialogue id, `D<session>:<turn>`, in canonical form (no leading zeros).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DiaId {
    /// Session number (`session_N`).
    pub session: u32,
    /// Turn number within the session, 1-based as LoCoMo numbers them.
    pub turn: u32,
}

impl fmt::Display for DiaId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "D{}:{}", self.session, self.turn)
    }
}

impl DiaId {
    /// Reads a string that holds exactly one dialogue id, however loosely spelled
    /// (`"D08:06"`, `"(D:8:6)"`); `None` if it holds none or several.
    pub fn parse(text: &str) -> Option<DiaId> {
        match scan_dia_ids(text).as_slice() {
            [one] => Some(one.id),
            _ => None,
        }
    }
}

/// A dialogue id found in an evidence string, with the text it was found in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundId {
    /// The id in canonical form.
    pub id: DiaId,
    /// The characters it was spelled with, from its `D` to its last digit.
    pub spelling: String,
}

/// Finds every dialogue id in `text`, in order.
///
/// Ids may be separated by `;`, `,`, whitespace or anything else that is neither a `D` nor a
/// digit; around and inside an id, stray punctuation is skipped: a `D` (either case), then any
/// run of spaces and colons, the session digits, spaces, one or more colons, spaces, the turn
/// digits. Leading zeros are dropped. Text that does not fit (a bare `"D"`) yields nothing.
pub fn scan_dia_ids(text: &str) -> Vec<FoundId> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if matches!(bytes[i], b'D' | b'd')
            && let Some((id, end)) = dia_id_at(bytes, i + 1)
        {
            // Every index here sits on an ASCII byte, so it is a char boundary.
            found.push(FoundId { id, spelling: text[i..end].to_owned() });
            i = end;
        } else {
            i += 1;
        }
    }
    found
}

/// Parses the rest of a dialogue id whose `D` ends just before `start`; returns the id and the
/// index just past its last digit.
fn dia_id_at(bytes: &[u8], start: usize) -> Option<(DiaId, usize)> {
    let skip = |mut i: usize, what: &dyn Fn(u8) -> bool| {
        while i < bytes.len() && what(bytes[i]) {
            i += 1;
        }
        i
    };
    let i = skip(start, &|b| b == b':' || b.is_ascii_whitespace());
    let (session, i) = digits_at(bytes, i)?;
    let i = skip(i, &|b| b.is_ascii_whitespace());
    let after_colons = skip(i, &|b| b == b':');
    if after_colons == i {
        return None;
    }
    let i = skip(after_colons, &|b| b.is_ascii_whitespace());
    let (turn, end) = digits_at(bytes, i)?;
    Some((DiaId { session, turn }, end))
}

/// A run of ASCII digits starting at `i` as a number, and the index just past it.
fn digits_at(bytes: &[u8], i: usize) -> Option<(u32, usize)> {
    let end = i + bytes[i.min(bytes.len())..].iter().take_while(|b| b.is_ascii_digit()).count();
    if end == i {
        return None;
    }
    let mut value: u32 = 0;
    for &b in &bytes[i..end] {
        value = value.checked_mul(10)?.checked_add(u32::from(b - b'0'))?;
    }
    Some((value, end))
}

/// A BEAM message id as a `source_chat_ids` list wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MessageRef {
    /// A non-negative JSON integer.
    Number(u64),
    /// Anything else, as written: a string (`"58"`), or the JSON text of a negative or
    /// fractional number, a boolean, …
    Text(String),
}

impl MessageRef {
    /// The message id this names, if it names one: the integer, or a string of digits with
    /// surrounding spaces, quotes and brackets stripped.
    pub fn number(&self) -> Option<u64> {
        match self {
            MessageRef::Number(n) => Some(*n),
            MessageRef::Text(t) => {
                let core = t.trim_matches(|c: char| c.is_whitespace() || "\"'()[]{}<>".contains(c));
                if core.is_empty() || !core.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                core.parse().ok()
            }
        }
    }

    /// How the source wrote it.
    pub fn spelling(&self) -> String {
        match self {
            MessageRef::Number(n) => n.to_string(),
            MessageRef::Text(t) => t.clone(),
        }
    }
}

/// The evidence of one question after repair and resolution.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resolved {
    /// Ids of turns that exist, in first-mention order, each once.
    pub evidence: Vec<String>,
    /// Ids as the source spelled them that name no turn, each once.
    pub unresolved: Vec<String>,
    /// How many ids resolved only after their spelling was repaired.
    pub repaired: usize,
}

impl Resolved {
    fn resolve(&mut self, turn_id: &str, repaired: bool) {
        if repaired {
            self.repaired += 1;
        }
        if !self.evidence.iter().any(|e| e == turn_id) {
            self.evidence.push(turn_id.to_owned());
        }
    }

    fn unresolved(&mut self, spelling: &str) {
        if !self.unresolved.iter().any(|u| u == spelling) {
            self.unresolved.push(spelling.to_owned());
        }
    }
}

/// Repairs and resolves a LoCoMo `evidence` list.
///
/// `exact` answers whether a string is the id of an existing turn as written; `lookup` maps a
/// canonical [`DiaId`] to the id of the turn it names. An entry that is already a turn id is kept
/// as is. Otherwise every id found in it ([`scan_dia_ids`]) that names a turn is kept and counted
/// as repaired; one that names no turn goes to `unresolved` with its original spelling (the whole
/// entry where the entry held one id, else the id's own characters); an entry holding no id at
/// all goes to `unresolved` whole.
pub fn resolve_locomo<'a>(
    entries: &[String],
    exact: impl Fn(&str) -> bool,
    lookup: impl Fn(DiaId) -> Option<&'a str>,
) -> Resolved {
    let mut out = Resolved::default();
    for entry in entries {
        if exact(entry) {
            out.resolve(entry, false);
            continue;
        }
        let found = scan_dia_ids(entry);
        if found.is_empty() {
            out.unresolved(entry);
        }
        for f in &found {
            match lookup(f.id) {
                Some(turn_id) => out.resolve(turn_id, true),
                None if found.len() == 1 => out.unresolved(entry),
                None => out.unresolved(&f.spelling),
            }
        }
    }
    out
}

/// Resolves BEAM `source_chat_ids` (already flattened, in order) against the conversation's
/// message ids. `lookup` maps a message number to the id of the turn it names. A reference that
/// resolves is counted as repaired when the source spelled it other than as the turn id (a
/// zero-padded or bracketed string); one that does not goes to `unresolved` as written.
pub fn resolve_beam<'a>(refs: &[MessageRef], lookup: impl Fn(u64) -> Option<&'a str>) -> Resolved {
    let mut out = Resolved::default();
    for r in refs {
        let spelling = r.spelling();
        match r.number().and_then(&lookup) {
            Some(turn_id) => out.resolve(turn_id, spelling != turn_id),
            None => out.unresolved(&spelling),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn ids(text: &str) -> Vec<String> {
        scan_dia_ids(text).iter().map(|f| f.id.to_string()).collect()
    }

    #[test]
    fn scans_the_malformed_ids_of_the_public_data() {
        assert_eq!(ids("D8:6; D9:17"), ["D8:6", "D9:17"]);
        assert_eq!(ids("D:11:26"), ["D11:26"]);
        assert_eq!(ids("D08:06"), ["D8:6"]);
        assert_eq!(ids("(D3:4)"), ["D3:4"]);
        assert_eq!(ids("[\"D3:4\"]"), ["D3:4"]);
        assert_eq!(ids(" D 3 : 4 "), ["D3:4"]);
        assert_eq!(ids("D3:4,D3:5 D3:6"), ["D3:4", "D3:5", "D3:6"]);
        assert_eq!(ids("d3::4"), ["D3:4"]);
        assert_eq!(ids("D10:19"), ["D10:19"]);
        assert!(ids("D").is_empty());
        assert!(ids("").is_empty());
        assert!(ids("D3").is_empty());
        assert!(ids("D3:").is_empty());
        assert!(ids("3:4").is_empty());
        assert!(ids("D99999999999:1").is_empty(), "overflow is no id");
    }

    #[test]
    fn keeps_the_spelling_of_each_id() {
        let found = scan_dia_ids("D8:6; D:09:17)");
        let spellings: Vec<&str> = found.iter().map(|f| f.spelling.as_str()).collect();
        assert_eq!(spellings, ["D8:6", "D:09:17"]);
    }

    #[test]
    fn parse_wants_exactly_one_id() {
        assert_eq!(DiaId::parse("D08:06"), Some(DiaId { session: 8, turn: 6 }));
        assert_eq!(DiaId::parse("D8:6; D9:17"), None);
        assert_eq!(DiaId::parse("D"), None);
    }

    /// Resolves against a conversation with sessions of the given lengths.
    fn locomo(entries: &[&str], session_lengths: &[u32]) -> Resolved {
        let mut turns = HashMap::new();
        for (s, &len) in session_lengths.iter().enumerate() {
            for t in 1..=len {
                let id = DiaId { session: s as u32 + 1, turn: t };
                turns.insert(id, id.to_string());
            }
        }
        let entries: Vec<String> = entries.iter().map(|e| e.to_string()).collect();
        resolve_locomo(
            &entries,
            |e| DiaId::parse(e).is_some_and(|d| d.to_string() == e && turns.contains_key(&d)),
            |d| turns.get(&d).map(String::as_str),
        )
    }

    #[test]
    fn resolves_well_formed_ids_without_repair() {
        let r = locomo(&["D1:3", "D2:1", "D1:3"], &[5, 5]);
        assert_eq!(r.evidence, ["D1:3", "D2:1"]);
        assert!(r.unresolved.is_empty());
        assert_eq!(r.repaired, 0);
    }

    #[test]
    fn repairs_and_counts() {
        // Eleven sessions of 30 turns, but session 10 has only 10.
        let lengths: Vec<u32> = (1..=11).map(|s| if s == 10 { 10 } else { 30 }).collect();
        let r = locomo(&["D8:6; D9:17", "D:11:26", "D08:06", "D10:19", "D", "D1:1"], &lengths);
        assert_eq!(r.evidence, ["D8:6", "D9:17", "D11:26", "D1:1"]);
        assert_eq!(r.unresolved, ["D10:19", "D"]);
        assert_eq!(r.repaired, 4, "two split, one stray colon, one zero-padded");
    }

    #[test]
    fn an_unresolvable_part_of_a_list_keeps_its_own_spelling() {
        let r = locomo(&["D1:2; D7:40"], &[5]);
        assert_eq!(r.evidence, ["D1:2"]);
        assert_eq!(r.unresolved, ["D7:40"]);
        assert_eq!(r.repaired, 1);
    }

    #[test]
    fn beam_refs() {
        let turns: HashMap<u64, String> = (0..10).map(|i| (i, i.to_string())).collect();
        let refs = [
            MessageRef::Number(4),
            MessageRef::Text("4".into()),
            MessageRef::Text(" 07".into()),
            MessageRef::Number(99),
            MessageRef::Text("-1".into()),
            MessageRef::Text("seven".into()),
            MessageRef::Number(2),
        ];
        let r = resolve_beam(&refs, |n| turns.get(&n).map(String::as_str));
        assert_eq!(r.evidence, ["4", "7", "2"]);
        assert_eq!(r.unresolved, ["99", "-1", "seven"]);
        assert_eq!(r.repaired, 1, "only \" 07\" was spelled differently");
    }

    /// Stray characters the public data puts around ids (never a `D` or a digit).
    fn junk() -> impl Strategy<Value = String> {
        let chars = proptest::sample::select(" \t()[]{}\"';,.".chars().collect::<Vec<_>>());
        proptest::collection::vec(chars, 0..4).prop_map(String::from_iter)
    }

    /// A well-formed id and a loose spelling of it: junk around it, zero-padding, a stray colon
    /// after the `D`, spaces around the colon, either case of `D`.
    fn spelled() -> impl Strategy<Value = (DiaId, String)> {
        let id = (0u32..1000, 0u32..1000).prop_map(|(session, turn)| DiaId { session, turn });
        let looseness = (junk(), junk(), 0..3usize, 0..3usize, any::<bool>(), 0..3usize, 0..2usize);
        (id, looseness, any::<bool>()).prop_map(|(id, (pre, post, zs, zt, stray, sp1, sp2), lower)| {
            let spelling = format!(
                "{pre}{d}{colon}{zeros_s}{s}{sp1}:{sp2}{zeros_t}{t}{post}",
                d = if lower { "d" } else { "D" },
                colon = if stray { ":" } else { "" },
                zeros_s = "0".repeat(zs),
                s = id.session,
                sp1 = " ".repeat(sp1),
                sp2 = " ".repeat(sp2),
                zeros_t = "0".repeat(zt),
                t = id.turn,
            );
            (id, spelling)
        })
    }

    proptest! {
        #[test]
        fn a_loosely_spelled_id_round_trips((id, spelling) in spelled()) {
            prop_assert_eq!(DiaId::parse(&spelling), Some(id));
            let found = scan_dia_ids(&spelling);
            prop_assert_eq!(found.len(), 1);
            prop_assert!(spelling.contains(&found[0].spelling));
        }

        #[test]
        fn a_loosely_spelled_id_resolves_to_its_turn((id, spelling) in spelled()) {
            let canonical = id.to_string();
            let r = resolve_locomo(
                std::slice::from_ref(&spelling),
                |e| e == canonical,
                |d| (d == id).then_some(canonical.as_str()),
            );
            prop_assert_eq!(&r.evidence, std::slice::from_ref(&canonical));
            prop_assert!(r.unresolved.is_empty());
            prop_assert_eq!(r.repaired, usize::from(spelling != canonical));
        }

        #[test]
        fn several_ids_in_one_string_all_survive(
            pairs in proptest::collection::vec(spelled(), 1..5),
            seps in proptest::collection::vec(proptest::sample::select(&[";", ",", " ", "; "][..]), 5),
        ) {
            let mut text = String::new();
            for (i, (_, spelling)) in pairs.iter().enumerate() {
                if i > 0 {
                    text.push_str(seps[i]);
                }
                text.push_str(spelling);
            }
            let want: Vec<DiaId> = pairs.iter().map(|(id, _)| *id).collect();
            let got: Vec<DiaId> = scan_dia_ids(&text).iter().map(|f| f.id).collect();
            prop_assert_eq!(got, want);
        }

        #[test]
        fn scanning_never_panics(text in ".*") {
            let _ = scan_dia_ids(&text);
        }
    }
}
