//! A peer in the table: what an outside engine answering the same questions is given, and its
//! answers read back so that `eval` scores them beside its own modes (`myelin peer-inputs`,
//! `eval --peer`; `scripts/eval-peer.sh` runs LanceDB). Owns the three line formats (turns,
//! questions, answers) and their checks. Must not score: a peer's answers are scored by the
//! same code as every mode.

use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::retrieve::{Memory, Mode, Query};

/// One episode as a peer indexes it: one line of `turns.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerTurn {
    /// Its conversation (a peer keeps one table per conversation, as Myelin one memory).
    pub conversation: String,
    /// Episode id: the turn id, `42#1` for a later passage of a turn.
    pub id: String,
    /// The text Myelin's BM25 indexes (`speaker: text [shared a photo: caption]`).
    pub text: String,
    /// The embedding Myelin's dense signal reads (all-MiniLM-L6-v2, L2-normalised).
    pub vector: Vec<f32>,
}

/// One question as a peer is asked it: one line of `questions.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerQuestion {
    /// The conversation it is asked of.
    pub conversation: String,
    /// Question id.
    pub id: String,
    /// The question.
    pub text: String,
    /// Its query embedding, the one Myelin's modes are given.
    pub vector: Vec<f32>,
}

/// What a peer's mode returned for one question: one line of the answers file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerAnswer {
    /// The peer's mode, a column of the report (`lancedb-fts`); not a Myelin mode's name.
    pub mode: String,
    /// The conversation asked.
    pub conversation: String,
    /// Question id.
    pub question: String,
    /// Episode ids returned, best first, at most the report's top-k.
    pub returned: Vec<String>,
    /// The search's time, ms (the query vector given, so no embedding).
    pub ms: f64,
}

/// The episodes of `memory` as a peer indexes them, in conversation order.
pub fn turns(memory: &Memory) -> Vec<PeerTurn> {
    memory
        .episodes()
        .iter()
        .map(|e| PeerTurn {
            conversation: memory.conversation().to_string(),
            id: e.turn_id.clone(),
            text: e.indexed_text(),
            vector: e.embedding.clone(),
        })
        .collect()
}

/// A question as a peer is asked it.
pub fn question(conversation: &str, id: &str, query: &Query) -> PeerQuestion {
    PeerQuestion {
        conversation: conversation.to_string(),
        id: id.to_string(),
        text: query.text.clone(),
        vector: query.embedding.clone(),
    }
}

/// `items` as JSON Lines.
pub fn to_lines<T: Serialize>(items: &[T]) -> Result<String> {
    let mut out = String::new();
    for item in items {
        out.push_str(&serde_json::to_string(item).map_err(|e| Error::InvalidArgument(format!("peer line: {e}")))?);
        out.push('\n');
    }
    Ok(out)
}

/// One peer mode's answers by (conversation, question id).
pub type Answers = HashMap<(String, String), PeerAnswer>;

/// The answers of a peer, by mode in the order the file first names them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PeerRuns {
    /// (mode, its answers).
    pub runs: Vec<(String, Answers)>,
}

impl PeerRuns {
    /// Reads an answers file (`path` names it in errors): one [`PeerAnswer`] per line, blank
    /// lines skipped. A line that is not one, a mode named like a Myelin mode, a time that is
    /// not a finite non-negative number, or a question answered twice in one mode is an error
    /// naming the line.
    pub fn parse(path: &Path, text: &str) -> Result<PeerRuns> {
        let mut runs = PeerRuns::default();
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let place = format!("line {}", n + 1);
            let answer: PeerAnswer =
                serde_json::from_str(line).map_err(|e| Error::format(path, &place, e.to_string()))?;
            if answer.mode.trim().is_empty() || Mode::ALL.iter().any(|m| m.as_str() == answer.mode) {
                return Err(Error::format(
                    path,
                    &place,
                    format!("peer mode {:?} is empty or a Myelin mode's name; name it after the peer", answer.mode),
                ));
            }
            if !(answer.ms.is_finite() && answer.ms >= 0.0) {
                return Err(Error::format(path, &place, format!("ms {} is not a time", answer.ms)));
            }
            let k = match runs.runs.iter().position(|(m, _)| *m == answer.mode) {
                Some(k) => k,
                None => {
                    runs.runs.push((answer.mode.clone(), HashMap::new()));
                    runs.runs.len() - 1
                }
            };
            let key = (answer.conversation.clone(), answer.question.clone());
            if runs.runs[k].1.insert(key, answer.clone()).is_some() {
                return Err(Error::format(
                    path,
                    &place,
                    format!(
                        "mode {} answers question {} of {} twice",
                        answer.mode, answer.question, answer.conversation
                    ),
                ));
            }
        }
        Ok(runs)
    }

    /// Mode `k`'s answer to `question` of `conversation`, as episodes of `memory` (indices in
    /// conversation order, best first): an error names the mode and question when it has none,
    /// returned more than `top_k`, or an id the conversation does not hold.
    pub fn episodes(
        &self,
        k: usize,
        memory: &Memory,
        ids: &HashMap<&str, u32>,
        question: &str,
        top_k: usize,
    ) -> Result<(Vec<u32>, f64)> {
        let (mode, answers) = &self.runs[k];
        let conversation = memory.conversation();
        let key = (conversation.to_string(), question.to_string());
        let Some(answer) = answers.get(&key) else {
            return Err(Error::InvalidArgument(format!(
                "peer mode {mode} has no answer for question {question} of {conversation}"
            )));
        };
        if answer.returned.len() > top_k {
            return Err(Error::InvalidArgument(format!(
                "peer mode {mode} returned {} episodes for question {question} of {conversation}, more than top-k {top_k}",
                answer.returned.len()
            )));
        }
        let episodes = answer
            .returned
            .iter()
            .map(|id| {
                ids.get(id.as_str()).copied().ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "peer mode {mode} returned episode {id:?} for question {question}, which {conversation} does not hold"
                    ))
                })
            })
            .collect::<Result<Vec<u32>>>()?;
        Ok((episodes, answer.ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(mode: &str, question: &str, ms: f64) -> String {
        format!(r#"{{"mode":"{mode}","conversation":"c","question":"{question}","returned":["1","2"],"ms":{ms}}}"#)
    }

    #[test]
    fn answers_group_by_mode_in_file_order() {
        let text =
            [line("peer-b", "q1", 0.5), String::new(), line("peer-a", "q1", 1.0), line("peer-b", "q2", 2.0)].join("\n");
        let runs = PeerRuns::parse(Path::new("a.jsonl"), &text).unwrap();
        let names: Vec<&str> = runs.runs.iter().map(|(m, _)| m.as_str()).collect();
        assert_eq!(names, ["peer-b", "peer-a"]);
        assert_eq!(runs.runs[0].1.len(), 2);
        assert_eq!(runs.runs[0].1[&("c".to_string(), "q2".to_string())].ms, 2.0);
    }

    #[test]
    fn bad_lines_are_named() {
        let path = Path::new("a.jsonl");
        let err = |text: String| PeerRuns::parse(path, &text).unwrap_err().to_string();
        assert!(err(format!("{}\n{}", line("p", "q1", 1.0), line("synapse", "q1", 1.0))).contains("line 2"));
        assert!(err(line("p", "q1", -1.0)).contains("-1 is not a time"));
        assert!(err(format!("{}\n{}", line("p", "q1", 1.0), line("p", "q1", 2.0))).contains("twice"));
        assert!(
            err(r#"{"mode":"p","conversation":"c","question":"q","returned":[],"ms":1,"x":0}"#.into())
                .contains("unknown field `x`")
        );
    }
}
