//! What every loader shares: the options a load accepts ([`LoadOptions`]), what it returns
//! ([`Loaded`]), reading a file as text and parsing it as JSON with errors that name the file
//! and the place, the checks every conversation must pass, and people's order of numbered
//! names. Must not know a layout (that is `locomo.rs` and `beam.rs`).

use std::cmp::Ordering;
use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

use crate::conversation::{Conversation, Session};
use crate::error::{Error, Result};

/// The default largest turn accepted, in bytes of UTF-8: 512 KiB.
///
/// BEAM has genuine messages of about 350 KB (pasted logs and code); a turn of a megabyte is far
/// past anything in the public data and more likely a broken file than a conversation.
pub const DEFAULT_MAX_TURN_BYTES: usize = 512 * 1024;

/// What a load accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadOptions {
    /// The largest turn accepted, in bytes of UTF-8 (its text plus any image caption); a longer
    /// turn is an error. Defaults to [`DEFAULT_MAX_TURN_BYTES`].
    pub max_turn_bytes: usize,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions { max_turn_bytes: DEFAULT_MAX_TURN_BYTES }
    }
}

/// The result of a load: conversations ready to ingest, and what was done to get them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Loaded {
    /// The conversations, in file (LoCoMo) or directory (BEAM) order.
    pub conversations: Vec<Conversation>,
    /// Every file that was read, in the order read.
    pub files: Vec<PathBuf>,
    /// Evidence ids that resolved only after their spelling was repaired.
    pub repaired_evidence: usize,
    /// Evidence ids that name no turn; each is kept, as written, in its question's
    /// `unresolved_evidence`.
    pub unresolved_evidence: usize,
}

impl Loaded {
    /// Number of questions over all conversations.
    pub fn question_count(&self) -> usize {
        self.conversations.iter().map(|c| c.questions.len()).sum()
    }

    /// Number of turns over all conversations.
    pub fn turn_count(&self) -> usize {
        self.conversations.iter().map(Conversation::turn_count).sum()
    }

    /// Appends another load's conversations, files and counts to this one.
    pub fn extend(&mut self, other: Loaded) {
        self.conversations.extend(other.conversations);
        self.files.extend(other.files);
        self.repaired_evidence += other.repaired_evidence;
        self.unresolved_evidence += other.unresolved_evidence;
    }
}

/// The last component of `path`, for ids and sorting.
pub(crate) fn file_name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

/// Compares names the way people number folders: runs of digits by value, the rest by text.
pub(crate) fn natural_cmp(a: &str, b: &str) -> Ordering {
    natural_key(a).cmp(&natural_key(b)).then_with(|| a.cmp(b))
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Chunk<'a> {
    /// A run of digits: its length without leading zeros, then those digits.
    Number(usize, &'a str),
    Text(&'a str),
}

fn natural_key(name: &str) -> Vec<Chunk<'_>> {
    let mut chunks = Vec::new();
    let mut rest = name;
    while let Some(first) = rest.chars().next() {
        let digit = first.is_ascii_digit();
        let len = rest.find(|c: char| c.is_ascii_digit() != digit).unwrap_or(rest.len());
        let (chunk, tail) = rest.split_at(len);
        chunks.push(if digit {
            let value = chunk.trim_start_matches('0');
            Chunk::Number(value.len(), value)
        } else {
            Chunk::Text(chunk)
        });
        rest = tail;
    }
    chunks
}

/// Reads `path` as UTF-8 text, without a leading byte-order mark.
pub(crate) fn read_text(path: &Path) -> Result<String> {
    let bytes = fs::read(path).map_err(|e| Error::io(path, e))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        // The valid prefix is UTF-8 by definition; count characters after the last newline.
        let line_start = valid.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let column = String::from_utf8_lossy(&valid[line_start..]).chars().count() + 1;
        let line = valid.iter().filter(|&&b| b == b'\n').count() + 1;
        Error::format(path, format!("byte offset {} (line {line}, column {column})", valid.len()), "not valid UTF-8")
    })?;
    Ok(match text.strip_prefix('\u{feff}') {
        Some(rest) => rest.to_owned(),
        None => text,
    })
}

/// Parses `text` (the contents of `path`) as JSON of type `T`. Syntax errors name the line and
/// column; shape errors name the JSON path (`[3].qa[12].question`) as well.
pub(crate) fn parse_json<T: DeserializeOwned>(text: &str, path: &Path) -> Result<T> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let place = e.path().to_string();
        json_error(path, &place, e.inner())
    })?;
    de.end().map_err(|e| json_error(path, ".", &e))?;
    Ok(value)
}

fn json_error(path: &Path, place: &str, e: &serde_json::Error) -> Error {
    let at = format!("line {}, column {}", e.line(), e.column());
    // serde_json ends its messages with " at line L column C"; say it once, our way.
    let full = e.to_string();
    let message = full.strip_suffix(&format!(" at line {} column {}", e.line(), e.column())).unwrap_or(&full);
    match e.classify() {
        serde_json::error::Category::Data => Error::format(path, place, format!("wrong shape: {message} ({at})")),
        _ => Error::format(path, at, format!("not JSON: {message}")),
    }
}

/// Checks what every conversation must satisfy, whatever its layout: it has turns, its turn ids
/// are unique, and no turn is longer than the limit.
pub(crate) fn check_conversation(path: &Path, id: &str, sessions: &[Session], opts: &LoadOptions) -> Result<()> {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    let mut position = 0;
    for session in sessions {
        for turn in &session.turns {
            let size = turn.text.len() + turn.image_caption.as_ref().map_or(0, String::len);
            if size > opts.max_turn_bytes {
                return Err(Error::format(
                    path,
                    format!("conversation `{id}`, turn `{}`", turn.id),
                    format!("turn is {size} bytes, more than the limit of {} bytes", opts.max_turn_bytes),
                ));
            }
            if let Some(first) = seen.insert(&turn.id, position) {
                return Err(Error::format(
                    path,
                    format!("conversation `{id}`, turn `{}`", turn.id),
                    format!("duplicate turn id: turns {first} and {position} (0-based) share it"),
                ));
            }
            position += 1;
        }
    }
    if position == 0 {
        return Err(Error::format(path, format!("conversation `{id}`"), "conversation has no turns"));
    }
    Ok(())
}
