//! The BEAM layout: one directory per conversation, holding `chat.json` and, optionally,
//! `probing_questions.json`. The BEAM-10M layout is the same with the chat split into plans:
//! `plan-0/chat.json`, `plan-1/chat.json`, … beside the questions; message ids restart at 0
//! in every plan and continue across plans in the conversation (the ids the questions name),
//! so plan p's ids are shifted by the messages of the plans before it.
//!
//! `chat.json` is a list of batches `{batch_number, time_anchor, turns}`, where `turns` is a list
//! of lists of messages `{role, id, content, time_anchor?}`; `id` (an integer, or a numeric
//! string in some published files) counts messages across the conversation (the plan). A batch
//! becomes a [`Session`]; a message becomes a [`Turn`] dated by the latest time anchor seen so
//! far. `probing_questions.json` maps each memory ability to a list of questions whose
//! `source_chat_ids` (null, integers, numeric strings, nested lists or objects of lists) name the
//! evidence messages.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Unexpected, Visitor};
use serde_json::Value;

use super::evidence::{self, MessageRef};
use super::locomo::answer_text;
use super::read::{LoadOptions, Loaded, check_conversation, file_name, parse_json, read_text};
use super::time::{BEAM_ANCHOR_EXAMPLE, parse_beam_anchor};
use crate::conversation::{Conversation, Question, Session, SourceFormat, Turn};
use crate::error::{Error, Result};

/// The file that makes a directory a BEAM conversation.
pub const CHAT_FILE: &str = "chat.json";

/// The optional file of questions beside it.
pub const QUESTIONS_FILE: &str = "probing_questions.json";

/// The prefix of a plan directory in the BEAM-10M layout (`plan-0`, `plan-1`, …).
pub const PLAN_PREFIX: &str = "plan-";

/// The chat files of the conversation in `dir`, in order: its `chat.json`, or its plans'
/// (`plan-<n>/chat.json`, by plan number, when every subdirectory with a chat is a plan).
/// `None` when it holds neither.
pub fn chat_files(dir: &Path) -> Option<Vec<PathBuf>> {
    let single = dir.join(CHAT_FILE);
    if single.is_file() {
        return Some(vec![single]);
    }
    // Plans only when every subdirectory holding a chat is a plan: otherwise `dir` is a folder
    // of conversations (some of which may be named like plans).
    let mut plans: Vec<(Option<u64>, PathBuf)> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| {
            (e.file_name().to_str().and_then(|n| n.strip_prefix(PLAN_PREFIX)?.parse().ok()), e.path().join(CHAT_FILE))
        })
        .filter(|(_, chat)| chat.is_file())
        .collect();
    if plans.is_empty() || plans.iter().any(|(n, _)| n.is_none()) {
        return None;
    }
    plans.sort();
    Some(plans.into_iter().map(|(_, p)| p).collect())
}

/// The ability whose questions have no answer in the conversation.
pub const ABSTENTION: &str = "abstention";

/// Fields tried, in order, for a question's gold answer.
const ANSWER_FIELDS: [&str; 5] = ["answer", "ideal_answer", "ideal_response", "ideal_summary", "expected_compliance"];

/// The id a BEAM directory's conversation gets: `beam-<parent name>-<name>`, e.g. `beam-100K-1`
/// for `…/100K/1` (or `beam-<name>` where there is no parent).
pub fn conversation_id(dir: &Path) -> String {
    let full = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let name = file_name(&full);
    match full.parent().map(file_name).filter(|p| !p.is_empty()) {
        Some(parent) => format!("beam-{parent}-{name}"),
        None => format!("beam-{name}"),
    }
}

/// Loads one BEAM conversation directory.
pub fn load_dir(dir: &Path, opts: &LoadOptions) -> Result<Loaded> {
    let id = conversation_id(dir);
    let files = chat_files(dir).ok_or_else(|| Error::UnknownFormat {
        path: dir.to_path_buf(),
        message: format!("no {CHAT_FILE} and no {PLAN_PREFIX}<n>/{CHAT_FILE}"),
    })?;
    let mut sessions = Vec::new();
    let mut next = Next::default();
    for chat_path in &files {
        let batches: Vec<RawBatch> = parse_json(&read_text(chat_path)?, chat_path)?;
        sessions.extend(plan_sessions(&id, batches, chat_path, &mut next)?);
    }
    let checked = if files.len() == 1 { files[0].clone() } else { dir.to_path_buf() };
    check_conversation(&checked, &id, &sessions, opts)?;
    let mut loaded = Loaded { files, ..Loaded::default() };

    let questions_path = dir.join(QUESTIONS_FILE);
    let mut questions = Vec::new();
    if questions_path.exists() {
        let abilities: Abilities = parse_json(&read_text(&questions_path)?, &questions_path)?;
        let mut by_number: HashMap<u64, &str> = HashMap::new();
        for turn in sessions.iter().flat_map(|s| &s.turns) {
            if let Ok(n) = turn.id.parse::<u64>() {
                by_number.entry(n).or_insert(&turn.id);
            }
        }
        for (ability, list) in abilities.0 {
            for (index, q) in list.into_iter().enumerate() {
                let resolved = evidence::resolve_beam(&q.source_chat_ids.0, |n| by_number.get(&n).copied());
                if !resolved.unresolved.is_empty() {
                    tracing::debug!(
                        conversation = %id,
                        %ability,
                        index,
                        unresolved = ?resolved.unresolved,
                        "unresolved BEAM source_chat_ids"
                    );
                }
                loaded.repaired_evidence += resolved.repaired;
                loaded.unresolved_evidence += resolved.unresolved.len();
                questions.push(Question {
                    id: format!("{id}/{ability}/{index}"),
                    text: q.question,
                    category: ability.clone(),
                    answer: q.answer.unwrap_or_default(),
                    evidence: resolved.evidence,
                    unresolved_evidence: resolved.unresolved,
                    adversarial: ability == ABSTENTION,
                });
            }
        }
        loaded.files.push(questions_path);
    }

    loaded.conversations.push(Conversation { id, format: SourceFormat::Beam, sessions, questions });
    Ok(loaded)
}

/// Where the next plan of a conversation starts: its first message id, position and session
/// number, and the time anchor carried over.
#[derive(Debug, Default)]
struct Next {
    id: u64,
    position: u32,
    session: u32,
    anchor: Option<DateTime<Utc>>,
}

/// One plan's batches → sessions, dating each message by the latest anchor seen so far (in
/// this plan or the ones before). Message ids are shifted by `next.id`, sessions numbered on
/// from `next.session`, positions from `next.position`; `next` then points past this plan.
fn plan_sessions(id: &str, batches: Vec<RawBatch>, path: &Path, next: &mut Next) -> Result<Vec<Session>> {
    let anchor = |text: &str, place: String| -> Result<Option<DateTime<Utc>>> {
        if text.trim().is_empty() {
            return Ok(None);
        }
        parse_beam_anchor(text).map(Some).ok_or_else(|| {
            Error::format(
                path,
                place,
                format!(
                    "conversation `{id}`: cannot parse time anchor `{text}`; expected a date like \
                     `{BEAM_ANCHOR_EXAMPLE}`"
                ),
            )
        })
    };
    let mut current = next.anchor;
    let mut position = next.position;
    let mut top_id = None;
    let mut out = Vec::with_capacity(batches.len());
    for (b, batch) in batches.into_iter().enumerate() {
        let index = u32::try_from(batch.batch_number.0)
            .ok()
            .and_then(|n| n.checked_add(next.session))
            .ok_or_else(|| Error::format(path, format!("[{b}].batch_number"), "batch number too large"))?;
        let batch_anchor = match &batch.time_anchor {
            Some(text) => anchor(text, format!("[{b}].time_anchor"))?,
            None => None,
        };
        let carried = current;
        current = batch_anchor.or(current);
        let mut first_message_anchor = None;
        let mut turns = Vec::new();
        for (g, group) in batch.turns.into_iter().enumerate() {
            for (m, message) in group.into_iter().enumerate() {
                if let Some(text) = &message.time_anchor
                    && let Some(at) = anchor(text, format!("[{b}].turns[{g}][{m}].time_anchor"))?
                {
                    current = Some(at);
                    first_message_anchor = first_message_anchor.or(Some(at));
                }
                let shifted =
                    message.id.0.checked_add(next.id).ok_or_else(|| {
                        Error::format(path, format!("[{b}].turns[{g}][{m}].id"), "message id too large")
                    })?;
                top_id = top_id.max(Some(shifted));
                turns.push(Turn {
                    id: shifted.to_string(),
                    speaker: message.role,
                    text: message.content,
                    image_caption: None,
                    timestamp: current,
                    position,
                });
                position = position
                    .checked_add(1)
                    .ok_or_else(|| Error::format(path, format!("[{b}]"), "too many messages"))?;
            }
        }
        out.push(Session { index, date: batch_anchor.or(first_message_anchor).or(carried), turns });
    }
    *next = Next {
        id: top_id.map_or(next.id, |t| t + 1),
        position,
        session: out.iter().map(|s| s.index).max().unwrap_or(next.session),
        anchor: current,
    };
    Ok(out)
}

#[derive(Deserialize)]
struct RawBatch {
    batch_number: Uint,
    #[serde(default)]
    time_anchor: Option<String>,
    turns: Vec<Vec<RawMessage>>,
}

#[derive(Deserialize)]
struct RawMessage {
    role: String,
    id: Uint,
    content: String,
    #[serde(default)]
    time_anchor: Option<String>,
}

/// A non-negative integer written as a JSON number or as a string of digits (`"0"`).
struct Uint(u64);

impl<'de> Deserialize<'de> for Uint {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct UintVisitor;

        impl Visitor<'_> for UintVisitor {
            type Value = Uint;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a non-negative integer or a string of digits")
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<Uint, E> {
                Ok(Uint(v))
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<Uint, E> {
                u64::try_from(v).map(Uint).map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
            }

            fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Uint, E> {
                let t = v.trim();
                if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(E::invalid_value(Unexpected::Str(v), &self));
                }
                t.parse().map(Uint).map_err(|_| E::invalid_value(Unexpected::Str(v), &self))
            }
        }

        deserializer.deserialize_any(UintVisitor)
    }
}

/// `probing_questions.json`: ability → questions, in file order.
struct Abilities(Vec<(String, Vec<RawQuestion>)>);

impl<'de> Deserialize<'de> for Abilities {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct AbilitiesVisitor;

        impl<'de> Visitor<'de> for AbilitiesVisitor {
            type Value = Abilities;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object mapping each ability to a list of questions")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Abilities, A::Error> {
                let mut out: Vec<(String, Vec<RawQuestion>)> = Vec::new();
                while let Some(ability) = map.next_key::<String>()? {
                    if out.iter().any(|(a, _)| *a == ability) {
                        return Err(de::Error::custom(format!("ability `{ability}` appears twice")));
                    }
                    let questions = map.next_value()?;
                    out.push((ability, questions));
                }
                Ok(Abilities(out))
            }
        }

        deserializer.deserialize_map(AbilitiesVisitor)
    }
}

/// One probing question; fields not listed are ignored.
struct RawQuestion {
    question: String,
    answer: Option<String>,
    source_chat_ids: SourceIds,
}

impl<'de> Deserialize<'de> for RawQuestion {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct QuestionVisitor;

        impl<'de> Visitor<'de> for QuestionVisitor {
            type Value = RawQuestion;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a question object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<RawQuestion, A::Error> {
                let mut question = None;
                let mut answers: Vec<(usize, Value)> = Vec::new();
                let mut source_chat_ids = SourceIds::default();
                while let Some(key) = map.next_key::<String>()? {
                    if key == "question" {
                        question = Some(map.next_value::<String>()?);
                    } else if key == "source_chat_ids" {
                        source_chat_ids = map.next_value()?;
                    } else if let Some(rank) = ANSWER_FIELDS.iter().position(|f| *f == key) {
                        let value: Value = map.next_value()?;
                        if !value.is_null() {
                            answers.push((rank, value));
                        }
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                let question = question.ok_or_else(|| de::Error::missing_field("question"))?;
                let answer = answers.into_iter().min_by_key(|(rank, _)| *rank).map(|(_, v)| answer_text(&v));
                Ok(RawQuestion { question, answer, source_chat_ids })
            }
        }

        deserializer.deserialize_map(QuestionVisitor)
    }
}

/// `source_chat_ids`, flattened in order: null → none, a number or string → one, a list or an
/// object → the flattened ids of its items or values.
#[derive(Default)]
struct SourceIds(Vec<MessageRef>);

impl<'de> Deserialize<'de> for SourceIds {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct SourceIdsVisitor;

        type R<E> = std::result::Result<SourceIds, E>;

        impl<'de> Visitor<'de> for SourceIdsVisitor {
            type Value = SourceIds;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("message ids: null, an integer, a string, or lists and objects of them")
            }

            fn visit_unit<E: de::Error>(self) -> R<E> {
                Ok(SourceIds::default())
            }

            fn visit_none<E: de::Error>(self) -> R<E> {
                Ok(SourceIds::default())
            }

            fn visit_some<D: Deserializer<'de>>(self, d: D) -> R<D::Error> {
                SourceIds::deserialize(d)
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> R<E> {
                Ok(SourceIds(vec![MessageRef::Number(v)]))
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> R<E> {
                Ok(SourceIds(vec![match u64::try_from(v) {
                    Ok(n) => MessageRef::Number(n),
                    Err(_) => MessageRef::Text(v.to_string()),
                }]))
            }

            fn visit_f64<E: de::Error>(self, v: f64) -> R<E> {
                Ok(SourceIds(vec![MessageRef::Text(v.to_string())]))
            }

            fn visit_bool<E: de::Error>(self, v: bool) -> R<E> {
                Ok(SourceIds(vec![MessageRef::Text(v.to_string())]))
            }

            fn visit_str<E: de::Error>(self, v: &str) -> R<E> {
                Ok(SourceIds(vec![MessageRef::Text(v.to_owned())]))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> R<A::Error> {
                let mut out = Vec::new();
                while let Some(SourceIds(ids)) = seq.next_element()? {
                    out.extend(ids);
                }
                Ok(SourceIds(out))
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> R<A::Error> {
                let mut out = Vec::new();
                while map.next_key::<IgnoredAny>()?.is_some() {
                    let SourceIds(ids) = map.next_value()?;
                    out.extend(ids);
                }
                Ok(SourceIds(out))
            }
        }

        deserializer.deserialize_any(SourceIdsVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use serde_json::json;
    use std::fs;
    use std::path::PathBuf;

    fn mini() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/beam-mini/1")
    }

    fn date(y: i32, m: u32, d: u32) -> Option<DateTime<Utc>> {
        Utc.with_ymd_and_hms(y, m, d, 0, 0, 0).single()
    }

    /// A conversation directory `<tmp>/set/1` with the given chat and, optionally, questions.
    fn dir_with(chat: &Value, questions: Option<&str>) -> (tempfile::TempDir, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("set").join("1");
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join(CHAT_FILE), chat.to_string()).unwrap();
        if let Some(q) = questions {
            fs::write(dir.join(QUESTIONS_FILE), q).unwrap();
        }
        (tmp, dir)
    }

    fn chat() -> Value {
        json!([
            {"batch_number": 1, "time_anchor": null, "turns": [[
                {"role": "user", "id": 0, "content": "hello", "time_anchor": "March-15-2024"},
                {"role": "assistant", "id": "1", "content": "hi"}
            ]]},
            {"batch_number": 2, "time_anchor": "April-01-2024", "turns": [[
                {"role": "user", "id": 2, "content": "again"}
            ], [
                {"role": "assistant", "id": 3, "content": "yes", "time_anchor": "April-03-2024"}
            ]]}
        ])
    }

    fn load(dir: &Path) -> Result<Loaded> {
        load_dir(dir, &LoadOptions::default())
    }

    #[test]
    fn plans_continue_ids_positions_sessions_and_time() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("10M").join("4");
        for (p, chat) in [
            (0, chat()),
            (
                1,
                json!([{"batch_number": 1, "turns": [[
                    {"role": "user", "id": 0, "content": "later"},
                    {"role": "assistant", "id": 1, "content": "much later", "time_anchor": "May-02-2024"}
                ]]}]),
            ),
        ] {
            fs::create_dir_all(dir.join(format!("plan-{p}"))).unwrap();
            fs::write(dir.join(format!("plan-{p}")).join(CHAT_FILE), chat.to_string()).unwrap();
        }
        // plan-10 sorts after plan-1 and plan-2 by number, not by name; here it is absent.
        let questions = r#"{"information_extraction": [{"question": "q", "answer": "a", "source_chat_ids": [5, 1]}]}"#;
        fs::write(dir.join(QUESTIONS_FILE), questions).unwrap();
        assert_eq!(chat_files(&dir).unwrap().len(), 2);
        let loaded = load(&dir).unwrap();
        let c = &loaded.conversations[0];
        assert_eq!(c.id, "beam-10M-4");
        let turns: Vec<(&str, u32, &str)> = c.turns().map(|t| (t.id.as_str(), t.position, t.text.as_str())).collect();
        assert_eq!(turns[4], ("4", 4, "later"));
        assert_eq!(turns[5], ("5", 5, "much later"));
        let sessions: Vec<u32> = c.sessions.iter().map(|s| s.index).collect();
        assert_eq!(sessions, [1, 2, 3]);
        // The last anchor of plan 0 dates plan 1's first message.
        assert_eq!(c.sessions[2].turns[0].timestamp, date(2024, 4, 3));
        assert_eq!(c.sessions[2].turns[1].timestamp, date(2024, 5, 2));
        assert_eq!(c.questions[0].evidence, ["5", "1"]);
        // Detected as one conversation, from the directory or from the folder above it.
        assert_eq!(crate::ingest::load_path(&dir, &LoadOptions::default()).unwrap().conversations.len(), 1);
        let above = crate::ingest::load_path(dir.parent().unwrap(), &LoadOptions::default()).unwrap();
        assert_eq!(above.conversations.len(), 1);
        assert_eq!(above.conversations[0].turn_count(), 6);
    }

    #[test]
    fn the_fixture_loads() {
        let loaded = load(&mini()).unwrap();
        assert_eq!(loaded.files, [mini().join(CHAT_FILE), mini().join(QUESTIONS_FILE)]);
        assert_eq!(loaded.conversations.len(), 1);
        let c = &loaded.conversations[0];
        assert_eq!(c.id, "beam-beam-mini-1");
        assert_eq!(c.format, SourceFormat::Beam);
        assert_eq!(c.sessions.len(), 2);
        assert_eq!(c.turn_count(), 8);
        let ids: Vec<&str> = c.turns().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, ["0", "1", "2", "3", "4", "5", "6", "7"]);
        assert!(c.turns().enumerate().all(|(i, t)| t.position as usize == i));
        assert_eq!(c.sessions[0].date, date(2024, 3, 15));
        assert_eq!(c.sessions[1].date, date(2024, 4, 2));
        assert!(c.sessions[0].turns.iter().all(|t| t.timestamp == date(2024, 3, 15)));
        assert!(c.sessions[1].turns.iter().all(|t| t.timestamp == date(2024, 4, 2)));

        assert_eq!(c.questions.len(), 3);
        let by_category: HashMap<&str, &Question> = c.questions.iter().map(|q| (q.category.as_str(), q)).collect();
        let abstention = by_category["abstention"];
        assert!(abstention.adversarial && abstention.evidence.is_empty());
        assert_eq!(abstention.id, "beam-beam-mini-1/abstention/0");
        assert!(!abstention.answer.is_empty());
        let update = by_category["knowledge_update"];
        assert!(!update.adversarial);
        assert_eq!(update.evidence, ["2", "6"], "dict-shaped ids, in file order");
        let temporal = by_category["temporal_reasoning"];
        assert_eq!(temporal.evidence, ["0", "4"]);
        assert_eq!((loaded.repaired_evidence, loaded.unresolved_evidence), (0, 0));
    }

    #[test]
    fn time_anchors_carry_forward() {
        let (_tmp, dir) = dir_with(&chat(), None);
        let loaded = load(&dir).unwrap();
        let c = &loaded.conversations[0];
        assert_eq!(c.id, "beam-set-1");
        assert_eq!(loaded.files, [dir.join(CHAT_FILE)]);
        assert!(c.questions.is_empty());
        let stamps: Vec<_> = c.turns().map(|t| t.timestamp).collect();
        assert_eq!(stamps, [date(2024, 3, 15), date(2024, 3, 15), date(2024, 4, 1), date(2024, 4, 3)]);
        assert_eq!(c.sessions[1].date, date(2024, 4, 1), "the batch anchor dates its session");
        assert_eq!(c.sessions[1].turns[0].id, "2");
        assert_eq!(c.turns().nth(1).map(|t| t.id.as_str()), Some("1"), "string ids are read");

        let mut undated = chat();
        undated[0]["turns"][0][0].as_object_mut().unwrap().remove("time_anchor");
        let (_tmp, dir) = dir_with(&undated, None);
        let loaded = load(&dir).unwrap();
        let c = &loaded.conversations[0];
        assert_eq!(c.sessions[0].date, None);
        assert_eq!(c.sessions[0].turns[0].timestamp, None, "no anchor seen yet");
    }

    #[test]
    fn source_ids_of_every_shape() {
        // Raw text, not `json!`, so that the object's keys stay out of alphabetical order.
        let questions = r#"{
            "information_extraction": [
                {"question": "a", "answer": "x", "source_chat_ids": [0, [1, 2], 2]},
                {"question": "b", "answer": "x", "source_chat_ids": {"zeta": [3], "alpha": ["1"]}},
                {"question": "c", "answer": "x", "source_chat_ids": null},
                {"question": "d", "answer": "x", "source_chat_ids": 2},
                {"question": "e", "answer": "x", "source_chat_ids": ["03", 99, -1, 1.5, "x"]},
                {"question": "f", "answer": "x"}
            ]
        }"#;
        let (_tmp, dir) = dir_with(&chat(), Some(questions));
        let loaded = load(&dir).unwrap();
        let q = &loaded.conversations[0].questions;
        assert_eq!(q[0].evidence, ["0", "1", "2"]);
        assert_eq!(q[1].evidence, ["3", "1"], "object values in file order");
        assert!(q[2].evidence.is_empty() && q[2].unresolved_evidence.is_empty());
        assert_eq!(q[3].evidence, ["2"]);
        assert_eq!(q[4].evidence, ["3"]);
        assert_eq!(q[4].unresolved_evidence, ["99", "-1", "1.5", "x"]);
        assert!(q[5].evidence.is_empty());
        assert_eq!(q[0].id, "beam-set-1/information_extraction/0");
        assert_eq!((loaded.repaired_evidence, loaded.unresolved_evidence), (1, 4));
    }

    #[test]
    fn answers_come_from_the_first_field_present() {
        // Raw text, not `json!`: the abilities must come back in file order, not sorted.
        let questions = r#"{
                "summarization": [{"question": "s", "ideal_summary": "sum", "answer": null}],
                "instruction_following": [
                    {"question": "i", "expected_compliance": "do it", "ideal_response": "resp"}
                ],
                "event_ordering": [{"question": "o", "answer": ["first", "second"]}],
                "temporal_reasoning": [{"question": "t", "answer": 12}],
                "abstention": [{"question": "n"}]
            }"#;
        let (_tmp, dir) = dir_with(&chat(), Some(questions));
        let loaded = load(&dir).unwrap();
        let answers: Vec<(&str, &str, bool)> = loaded.conversations[0]
            .questions
            .iter()
            .map(|q| (q.category.as_str(), q.answer.as_str(), q.adversarial))
            .collect();
        assert_eq!(
            answers,
            [
                ("summarization", "sum", false),
                ("instruction_following", "resp", false),
                ("event_ordering", "[\"first\",\"second\"]", false),
                ("temporal_reasoning", "12", false),
                ("abstention", "", true),
            ]
        );
    }

    #[test]
    fn an_unparseable_anchor_names_the_place_and_the_text() {
        let mut bad = chat();
        bad[1]["turns"][1][0]["time_anchor"] = json!("the third of April");
        let (_tmp, dir) = dir_with(&bad, None);
        let text = load(&dir).unwrap_err().to_string();
        assert!(text.contains("chat.json: [1].turns[1][0].time_anchor"), "{text}");
        assert!(text.contains("`the third of April`") && text.contains("beam-set-1"), "{text}");

        let mut bad = chat();
        bad[0]["time_anchor"] = json!("Smarch-1-2024");
        let (_tmp, dir) = dir_with(&bad, None);
        let text = load(&dir).unwrap_err().to_string();
        assert!(text.contains("chat.json: [0].time_anchor") && text.contains("Smarch"), "{text}");
    }

    #[test]
    fn bad_ids_are_shape_errors_with_their_path() {
        let mut bad = chat();
        bad[0]["turns"][0][1]["id"] = json!("one");
        let (_tmp, dir) = dir_with(&bad, None);
        let text = load(&dir).unwrap_err().to_string();
        assert!(text.contains("chat.json: [0].turns[0][1].id: wrong shape"), "{text}");
        assert!(text.contains("a non-negative integer or a string of digits"), "{text}");

        let mut bad = chat();
        bad[0]["turns"][0][1]["id"] = json!(-4);
        let (_tmp, dir) = dir_with(&bad, None);
        let text = load(&dir).unwrap_err().to_string();
        assert!(text.contains("[0].turns[0][1].id"), "{text}");
    }

    #[test]
    fn question_shape_errors_name_the_questions_file() {
        let (_tmp, dir) = dir_with(&chat(), Some(r#"{"abstention": [{"ideal_response": "x"}]}"#));
        let text = load(&dir).unwrap_err().to_string();
        assert!(text.contains("probing_questions.json: abstention[0]: wrong shape"), "{text}");
        assert!(text.contains("missing field `question`"), "{text}");

        let (_tmp, dir) = dir_with(&chat(), Some(r#"{"abstention": "none"}"#));
        let text = load(&dir).unwrap_err().to_string();
        assert!(text.contains("probing_questions.json: abstention: wrong shape"), "{text}");
    }

    #[test]
    fn duplicate_message_ids_are_refused() {
        let mut bad = chat();
        bad[1]["turns"][0][0]["id"] = json!("1");
        let (_tmp, dir) = dir_with(&bad, None);
        let text = load(&dir).unwrap_err().to_string();
        assert!(text.contains("chat.json: conversation `beam-set-1`, turn `1`"), "{text}");
        assert!(text.contains("duplicate turn id: turns 1 and 2"), "{text}");
    }

    #[test]
    fn an_empty_chat_is_refused() {
        let (_tmp, dir) = dir_with(&json!([{"batch_number": 1, "time_anchor": null, "turns": [[]]}]), None);
        let text = load(&dir).unwrap_err().to_string();
        assert!(text.contains("chat.json: conversation `beam-set-1`: conversation has no turns"), "{text}");
    }

    #[test]
    fn a_huge_message_is_refused() {
        let mut bad = chat();
        bad[1]["turns"][0][0]["content"] = json!("y".repeat(1024 * 1024));
        let (_tmp, dir) = dir_with(&bad, None);
        let text = load(&dir).unwrap_err().to_string();
        assert!(text.contains("chat.json: conversation `beam-set-1`, turn `2`"), "{text}");
        assert!(text.contains("1048576 bytes"), "{text}");
    }
}
