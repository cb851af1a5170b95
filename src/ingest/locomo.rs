//! The LoCoMo layout (`locomo10.json`): a JSON list of samples
//! `{sample_id, conversation, qa, …}`.
//!
//! `conversation` holds `session_N` (a list of turns `{speaker, dia_id, text, blip_caption?}`)
//! and `session_N_date_time` (`"1:56 pm on 8 May, 2023"`, read as UTC) for each session N;
//! `qa` holds `{question, answer | adversarial_answer, evidence, category}`. Other keys
//! (summaries, observations, image URLs) are not read.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::Path;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;

use super::evidence::{self, DiaId};
use super::read::{LoadOptions, Loaded, check_conversation, parse_json, read_text};
use super::time::{LOCOMO_DATE_EXAMPLE, parse_locomo_date};
use crate::conversation::{Conversation, Question, Session, SourceFormat, Turn};
use crate::error::{Error, Result};

/// Loads a LoCoMo file.
pub fn load_file(path: &Path, opts: &LoadOptions) -> Result<Loaded> {
    parse_str(&read_text(path)?, path, opts)
}

/// Parses the text of a LoCoMo file; `origin` names it in errors and in [`Loaded::files`].
pub fn parse_str(text: &str, origin: &Path, opts: &LoadOptions) -> Result<Loaded> {
    let samples: Vec<RawSample> = parse_json(text, origin)?;
    let mut loaded = Loaded { files: vec![origin.to_path_buf()], ..Loaded::default() };
    let mut ids = HashMap::new();
    for (index, sample) in samples.into_iter().enumerate() {
        if let Some(first) = ids.insert(sample.sample_id.clone(), index) {
            return Err(Error::format(
                origin,
                format!("[{index}].sample_id"),
                format!("sample_id `{}` was already used by sample {first}", sample.sample_id),
            ));
        }
        let (conversation, repaired) = convert(sample, index, origin, opts)?;
        loaded.repaired_evidence += repaired;
        loaded.unresolved_evidence += conversation.questions.iter().map(|q| q.unresolved_evidence.len()).sum::<usize>();
        loaded.conversations.push(conversation);
    }
    Ok(loaded)
}

/// One sample; fields not listed are ignored.
#[derive(Deserialize)]
struct RawSample {
    sample_id: String,
    conversation: RawConversation,
    #[serde(default)]
    qa: Vec<RawQa>,
}

#[derive(Deserialize)]
struct RawTurn {
    speaker: String,
    dia_id: String,
    text: String,
    #[serde(default)]
    blip_caption: Option<String>,
}

#[derive(Deserialize)]
struct RawQa {
    question: String,
    #[serde(default)]
    answer: Option<Value>,
    #[serde(default)]
    adversarial_answer: Option<Value>,
    #[serde(default)]
    evidence: Vec<String>,
    #[serde(deserialize_with = "category_text")]
    category: String,
}

/// The `conversation` object: sessions and their dates, picked out of keys with numbers in them.
#[derive(Default)]
struct RawConversation {
    /// `(N, turns)` for each `session_N`, in file order.
    sessions: Vec<(u32, Vec<RawTurn>)>,
    /// `N → (key, text)` for each `session_N_date_time`.
    dates: HashMap<u32, (String, Option<String>)>,
}

enum SessionKey {
    Turns(u32),
    Date(u32),
}

/// `session_12` → turns of session 12; `session_12_date_time` → its date; other keys → `None`.
fn session_key(key: &str) -> Option<SessionKey> {
    let number = |s: &str| (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok()).flatten();
    let rest = key.strip_prefix("session_")?;
    match rest.strip_suffix("_date_time") {
        Some(n) => number(n).map(SessionKey::Date),
        None => number(rest).map(SessionKey::Turns),
    }
}

impl<'de> Deserialize<'de> for RawConversation {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct ConversationVisitor;

        impl<'de> Visitor<'de> for ConversationVisitor {
            type Value = RawConversation;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object with session_N and session_N_date_time keys")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<RawConversation, A::Error> {
                let mut out = RawConversation::default();
                while let Some(key) = map.next_key::<String>()? {
                    match session_key(&key) {
                        Some(SessionKey::Turns(n)) => {
                            if out.sessions.iter().any(|(m, _)| *m == n) {
                                return Err(de::Error::custom(format!("session {n} appears twice")));
                            }
                            out.sessions.push((n, map.next_value()?));
                        }
                        Some(SessionKey::Date(n)) => {
                            let text = map.next_value()?;
                            if out.dates.insert(n, (key, text)).is_some() {
                                return Err(de::Error::custom(format!("session {n} has two dates")));
                            }
                        }
                        None => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(out)
            }
        }

        deserializer.deserialize_map(ConversationVisitor)
    }
}

/// A category number (or, leniently, its text).
fn category_text<'de, D: Deserializer<'de>>(deserializer: D) -> std::result::Result<String, D::Error> {
    match Value::deserialize(deserializer)? {
        Value::Number(n) => Ok(n.to_string()),
        Value::String(s) => Ok(s),
        other => Err(de::Error::custom(format!("expected a category number, found {other}"))),
    }
}

/// An answer as text: strings as they are, numbers and anything else as JSON text.
pub(crate) fn answer_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Turns sample number `index` into a conversation; also returns how many evidence ids it
/// repaired.
fn convert(sample: RawSample, index: usize, origin: &Path, opts: &LoadOptions) -> Result<(Conversation, usize)> {
    let id = sample.sample_id;
    let RawConversation { mut sessions, dates } = sample.conversation;
    sessions.sort_by_key(|(n, _)| *n);

    let mut out_sessions = Vec::with_capacity(sessions.len());
    let mut position: u32 = 0;
    for (number, turns) in sessions {
        let date = match dates.get(&number) {
            Some((key, Some(text))) if !text.trim().is_empty() => Some(parse_locomo_date(text).ok_or_else(|| {
                Error::format(
                    origin,
                    format!("[{index}].conversation.{key}"),
                    format!(
                        "conversation `{id}`: cannot parse date `{text}`; expected a date \
                             like `{LOCOMO_DATE_EXAMPLE}`"
                    ),
                )
            })?),
            _ => None,
        };
        let mut out_turns = Vec::with_capacity(turns.len());
        for turn in turns {
            out_turns.push(Turn {
                id: turn.dia_id,
                speaker: turn.speaker,
                text: turn.text,
                image_caption: turn.blip_caption.filter(|c| !c.trim().is_empty()),
                timestamp: date,
                position,
            });
            position = position.checked_add(1).ok_or_else(|| {
                Error::format(origin, format!("[{index}]"), format!("conversation `{id}` has too many turns"))
            })?;
        }
        out_sessions.push(Session { index: number, date, turns: out_turns });
    }
    check_conversation(origin, &id, &out_sessions, opts)?;

    let exact: HashSet<&str> = out_sessions.iter().flat_map(|s| &s.turns).map(|t| t.id.as_str()).collect();
    let mut canonical: HashMap<DiaId, &str> = HashMap::new();
    for turn in out_sessions.iter().flat_map(|s| &s.turns) {
        if let Some(dia) = DiaId::parse(&turn.id) {
            canonical.entry(dia).or_insert(turn.id.as_str());
        }
    }

    let mut repaired = 0;
    let mut questions = Vec::with_capacity(sample.qa.len());
    for (q_index, qa) in sample.qa.into_iter().enumerate() {
        let resolved = evidence::resolve_locomo(&qa.evidence, |e| exact.contains(e), |d| canonical.get(&d).copied());
        if resolved.repaired > 0 || !resolved.unresolved.is_empty() {
            tracing::debug!(
                conversation = %id,
                question = q_index,
                written = ?qa.evidence,
                resolved = ?resolved.evidence,
                unresolved = ?resolved.unresolved,
                "repaired LoCoMo evidence"
            );
        }
        repaired += resolved.repaired;
        let answer = qa.answer.as_ref().filter(|v| !v.is_null()).or(qa.adversarial_answer.as_ref());
        questions.push(Question {
            id: format!("{id}/q{q_index}"),
            text: qa.question,
            adversarial: qa.category == "5",
            category: qa.category,
            answer: answer.filter(|v| !v.is_null()).map(answer_text).unwrap_or_default(),
            evidence: resolved.evidence,
            unresolved_evidence: resolved.unresolved,
        });
    }
    let conversation = Conversation { id, format: SourceFormat::Locomo, sessions: out_sessions, questions };
    Ok((conversation, repaired))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};
    use serde_json::json;

    fn parse(value: Value) -> Result<Loaded> {
        parse_str(&value.to_string(), Path::new("sample.json"), &LoadOptions::default())
    }

    fn sample() -> Value {
        json!([{
            "sample_id": "conv-x",
            "conversation": {
                "speaker_a": "Ana", "speaker_b": "Ben",
                "session_10_date_time": "10:37 am on 27 June, 2023",
                "session_10": [
                    {"speaker": "Ana", "dia_id": "D10:1", "text": "Back from Lisbon!"},
                    {"speaker": "Ben", "dia_id": "D10:2", "text": "Photos?",
                     "blip_caption": "a photo of a tram",
                     "img_url": ["http://example.invalid/x.jpg"]}
                ],
                "session_2_date_time": "1:56 pm on 8 May, 2023",
                "session_2": [
                    {"speaker": "Ana", "dia_id": "D2:1", "text": "Flying to Lisbon on Friday."},
                    {"speaker": "Ben", "dia_id": "D2:2", "text": "Nice."}
                ]
            },
            "qa": [
                {"question": "Where did Ana fly?", "answer": "Lisbon",
                 "evidence": ["D2:1", "D10:1"], "category": 1},
                {"question": "What year?", "answer": 2023,
                 "evidence": ["D02:01; D10:2"], "category": 2},
                {"question": "Did Ben go?", "adversarial_answer": "Yes",
                 "evidence": ["D2:9", "D"], "category": 5}
            ],
            "event_summary": {}, "observation": {}, "session_summary": {}
        }])
    }

    #[test]
    fn converts_a_sample() {
        let loaded = parse(sample()).unwrap();
        assert_eq!(loaded.files, [Path::new("sample.json")]);
        let c = &loaded.conversations[0];
        assert_eq!(c.id, "conv-x");
        let indices: Vec<u32> = c.sessions.iter().map(|s| s.index).collect();
        assert_eq!(indices, [2, 10], "sessions ordered by number, not by key text or file order");
        assert_eq!(c.sessions[0].date, Utc.with_ymd_and_hms(2023, 5, 8, 13, 56, 0).single());
        assert_eq!(c.sessions[1].date, Utc.with_ymd_and_hms(2023, 6, 27, 10, 37, 0).single());
        let turns: Vec<(&str, u32)> = c.turns().map(|t| (t.id.as_str(), t.position)).collect();
        assert_eq!(turns, [("D2:1", 0), ("D2:2", 1), ("D10:1", 2), ("D10:2", 3)]);
        let photo = c.turns().find(|t| t.id == "D10:2").unwrap();
        assert_eq!(photo.image_caption.as_deref(), Some("a photo of a tram"));
        assert_eq!(photo.timestamp, c.sessions[1].date);

        let q = &c.questions;
        assert_eq!(q[0].id, "conv-x/q0");
        assert_eq!((q[0].category.as_str(), q[0].answer.as_str()), ("1", "Lisbon"));
        assert_eq!(q[0].evidence, ["D2:1", "D10:1"]);
        assert_eq!(q[1].answer, "2023", "numbers become text");
        assert_eq!(q[1].evidence, ["D2:1", "D10:2"]);
        assert!(q[2].adversarial && !q[1].adversarial);
        assert_eq!(q[2].answer, "Yes");
        assert!(q[2].evidence.is_empty());
        assert_eq!(q[2].unresolved_evidence, ["D2:9", "D"]);
        assert_eq!((loaded.repaired_evidence, loaded.unresolved_evidence), (2, 2));
    }

    #[test]
    fn answer_wins_over_adversarial_answer() {
        let mut v = sample();
        v[0]["qa"][2]["answer"] = json!("No");
        let loaded = parse(v).unwrap();
        assert_eq!(loaded.conversations[0].questions[2].answer, "No");
    }

    #[test]
    fn an_unparseable_date_names_the_key_and_the_text() {
        let mut v = sample();
        v[0]["conversation"]["session_10_date_time"] = json!("sometime in June");
        let text = parse(v).unwrap_err().to_string();
        assert!(text.starts_with("sample.json: "), "{text}");
        assert!(text.contains("[0].conversation.session_10_date_time"), "{text}");
        assert!(text.contains("`sometime in June`") && text.contains("conv-x"), "{text}");
    }

    #[test]
    fn a_missing_date_leaves_the_session_undated() {
        let mut v = sample();
        v[0]["conversation"].as_object_mut().unwrap().remove("session_2_date_time");
        let loaded = parse(v).unwrap();
        let c = &loaded.conversations[0];
        assert_eq!(c.sessions[0].date, None);
        assert!(c.sessions[0].turns.iter().all(|t| t.timestamp.is_none()));
    }

    #[test]
    fn duplicate_turn_ids_are_refused() {
        let mut v = sample();
        v[0]["conversation"]["session_2"][1]["dia_id"] = json!("D2:1");
        let text = parse(v).unwrap_err().to_string();
        assert!(text.contains("sample.json"), "{text}");
        assert!(text.contains("conversation `conv-x`, turn `D2:1`"), "{text}");
        assert!(text.contains("duplicate turn id"), "{text}");
    }

    #[test]
    fn a_conversation_without_turns_is_refused() {
        let mut v = sample();
        v[0]["conversation"]["session_2"] = json!([]);
        v[0]["conversation"]["session_10"] = json!([]);
        let text = parse(v).unwrap_err().to_string();
        assert!(text.contains("sample.json: conversation `conv-x`: conversation has no turns"), "{text}");
    }

    #[test]
    fn duplicate_sample_ids_are_refused() {
        let mut v = sample();
        let copy = v[0].clone();
        v.as_array_mut().unwrap().push(copy);
        let text = parse(v).unwrap_err().to_string();
        assert!(text.contains("[1].sample_id") && text.contains("conv-x"), "{text}");
    }

    #[test]
    fn shape_errors_name_the_json_path() {
        let mut v = sample();
        v[0]["qa"][1]["evidence"] = json!([["D2:1"]]);
        let text = parse(v).unwrap_err().to_string();
        assert!(text.contains("sample.json: [0].qa[1].evidence[0]: wrong shape"), "{text}");

        let mut v = sample();
        v[0]["qa"][0]["category"] = json!(null);
        let text = parse(v).unwrap_err().to_string();
        assert!(text.contains("[0].qa[0].category") && text.contains("category number"), "{text}");

        let mut v = sample();
        v[0].as_object_mut().unwrap().remove("sample_id");
        let text = parse(v).unwrap_err().to_string();
        assert!(text.contains("sample.json: [0]: wrong shape: missing field `sample_id`"), "{text}");

        let text = parse(json!({"sample_id": "x"})).unwrap_err().to_string();
        assert!(text.contains("sample.json: .: wrong shape") && text.contains("sequence"), "{text}");
    }

    #[test]
    fn session_keys() {
        assert!(matches!(session_key("session_12"), Some(SessionKey::Turns(12))));
        assert!(matches!(session_key("session_3_date_time"), Some(SessionKey::Date(3))));
        for other in ["speaker_a", "session_", "session_x", "session_1_summary", "session__date_time"] {
            assert!(session_key(other).is_none(), "{other}");
        }
    }
}
