//! Scale histories: BEAM conversations with their questions placed among real long-history text
//! (the plans of BEAM-10M conversations), so that their questions can be asked of a history of
//! any size, 100K to 10M tokens, and keep valid labels.
//!
//! Each conversation's batches are spread evenly through the history, in their order (several
//! conversations interleave); every message is renumbered in the order of the result and the
//! questions' `source_chat_ids` are rewritten to the new ids (the questions of several
//! conversations are listed together, ability by ability). The output is a BEAM conversation directory in the BEAM-10M
//! layout (`plan-<n>/chat.json` of about `plan_tokens` tokens each, ids restarting at 0 in every
//! plan, `probing_questions.json` naming the continued ids) plus `scale.json`, which records
//! what went in. Tokens are all-MiniLM-L6-v2 word pieces of the messages' content.
//!
//! Owns building such a directory. Must not ingest, embed or store anything.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Value, json};

use crate::embed::Embedder;
use crate::error::{Error, Result};
use crate::ingest::beam::{CHAT_FILE, PLAN_PREFIX, QUESTIONS_FILE, chat_files};
use crate::ingest::read::{parse_json, read_text};

/// What went into a scale history (`scale.json`).
#[derive(Debug, Clone, Serialize)]
pub struct ScaleReport {
    /// The conversations whose questions are asked.
    pub conversations: Vec<PathBuf>,
    /// Tokens asked for.
    pub target_tokens: usize,
    /// Tokens written: the conversation's and the filler's.
    pub tokens: usize,
    /// Tokens of the conversations.
    pub conversation_tokens: usize,
    /// Messages written.
    pub messages: usize,
    /// Messages of the conversations.
    pub conversation_messages: usize,
    /// Batches written.
    pub batches: usize,
    /// Plan files written.
    pub plans: usize,
    /// Filler chat files read, in order (the last one possibly in part).
    pub filler: Vec<PathBuf>,
    /// Where each of the conversations' batches went (index among all batches), conversation
    /// by conversation.
    pub placed_at: Vec<Vec<usize>>,
}

/// A batch of messages, its token count, and which placed conversation it is from (`None`:
/// filler).
struct Batch {
    value: Value,
    tokens: usize,
    own: Option<usize>,
}

/// The batches of a chat file, each with its word-piece count.
fn batches(path: &Path, embedder: &Embedder, own: Option<usize>) -> Result<Vec<Batch>> {
    let value: Value = parse_json(&read_text(path)?, path)?;
    let Value::Array(list) = value else {
        return Err(Error::format(path, "document", "expected a list of batches"));
    };
    use rayon::prelude::*;
    list.into_par_iter()
        .enumerate()
        .map(|(b, value)| {
            let mut tokens = 0;
            for m in messages(&value) {
                let content = m
                    .get("content")
                    .and_then(Value::as_str)
                    .ok_or_else(|| Error::format(path, format!("[{b}]"), "a message without a string `content`"))?;
                tokens += embedder.word_pieces(content)?;
            }
            Ok(Batch { value, tokens, own })
        })
        .collect()
}

/// The messages of a batch, in order.
fn messages(batch: &Value) -> impl Iterator<Item = &Value> {
    batch.get("turns").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_array).flatten()
}

/// Writes a history of about `tokens` tokens to `out`: the conversations in `conversations`
/// (BEAM conversation directories with `probing_questions.json`) among batches of the filler
/// conversations under `filler` (BEAM conversation directories, read in natural order, plans
/// in order), cut into plans of about `plan_tokens` tokens.
pub fn build(
    conversations: &[PathBuf],
    tokens: usize,
    filler: &Path,
    plan_tokens: usize,
    out: &Path,
    embedder: &Embedder,
) -> Result<ScaleReport> {
    if plan_tokens == 0 {
        return Err(Error::InvalidArgument("plan size must be at least 1 token".into()));
    }
    if conversations.is_empty() {
        return Err(Error::InvalidArgument("no conversation to place".into()));
    }
    let mut files = Vec::with_capacity(conversations.len());
    let mut question_files = Vec::with_capacity(conversations.len());
    let mut own_lists = Vec::with_capacity(conversations.len());
    for (k, conversation) in conversations.iter().enumerate() {
        let chats = chat_files(conversation).ok_or_else(|| Error::UnknownFormat {
            path: conversation.to_path_buf(),
            message: format!("not a BEAM conversation directory (no {CHAT_FILE})"),
        })?;
        let [chat] = chats.as_slice() else {
            return Err(Error::InvalidArgument(format!(
                "{}: a conversation in plans cannot be placed; give a single-chat conversation",
                conversation.display()
            )));
        };
        let questions_path = conversation.join(QUESTIONS_FILE);
        question_files.push((parse_json::<Value>(&read_text(&questions_path)?, &questions_path)?, questions_path));
        own_lists.push(batches(chat, embedder, Some(k))?);
        files.push(chat.clone());
    }
    let own_tokens: usize = own_lists.iter().flatten().map(|b| b.tokens).sum();
    // Conversation k's batch i goes at the fraction (i+1)/(C_k+1) of the history: each spread
    // evenly, in order, several interleaved.
    let mut own: Vec<(f64, usize, Batch)> = Vec::new();
    for (k, list) in own_lists.into_iter().enumerate() {
        let c = list.len();
        own.extend(list.into_iter().enumerate().map(|(i, b)| ((i + 1) as f64 / (c + 1) as f64, k, b)));
    }
    own.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let own: Vec<Batch> = own.into_iter().map(|(_, _, b)| b).collect();

    // Filler batches, in order, until the history holds `tokens`.
    let mut fill = Vec::new();
    let mut used = Vec::new();
    let mut have = own_tokens;
    let mut sources: Vec<PathBuf> = std::fs::read_dir(filler)
        .map_err(|e| Error::io(filler, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| chat_files(p).is_some())
        .collect();
    sources.sort_by(|a, b| crate::ingest::natural_cmp(&crate::ingest::file_name(a), &crate::ingest::file_name(b)));
    'fill: for dir in &sources {
        for file in chat_files(dir).unwrap_or_default() {
            if have >= tokens {
                break 'fill;
            }
            used.push(file.clone());
            for b in batches(&file, embedder, None)? {
                if have >= tokens {
                    break 'fill;
                }
                have += b.tokens;
                fill.push(b);
            }
        }
    }
    if have < tokens {
        return Err(Error::InvalidArgument(format!(
            "{}: only {have} tokens of conversation and filler, {tokens} asked",
            filler.display()
        )));
    }

    // The conversation's batch i goes before filler batch ⌊(i+1)·F/(C+1)⌋.
    let (c, f) = (own.len(), fill.len());
    let mut merged: Vec<Batch> = Vec::with_capacity(c + f);
    let mut placed_at = vec![Vec::new(); conversations.len()];
    let mut fill = fill.into_iter();
    let mut taken = 0;
    for (i, batch) in own.into_iter().enumerate() {
        let before = (i + 1) * f / (c + 1);
        merged.extend(fill.by_ref().take(before - taken));
        taken = before;
        if let Some(k) = batch.own {
            placed_at[k].push(merged.len());
        }
        merged.push(batch);
    }
    merged.extend(fill);

    // Renumber messages and batches; map each conversation's ids.
    let mut new_id: Vec<std::collections::HashMap<String, u64>> = vec![Default::default(); conversations.len()];
    let mut next_id = 0u64;
    let mut plans: Vec<Vec<Value>> = vec![Vec::new()];
    let (mut plan_start, mut plan_tokens_so_far) = (0u64, 0usize);
    let total_tokens: usize = merged.iter().map(|b| b.tokens).sum();
    let batch_count = merged.len();
    for (n, mut batch) in merged.into_iter().enumerate() {
        if plan_tokens_so_far >= plan_tokens {
            plans.push(Vec::new());
            plan_start = next_id;
            plan_tokens_so_far = 0;
        }
        plan_tokens_so_far += batch.tokens;
        batch.value["batch_number"] = json!(plans.last().map_or(0, Vec::len) + 1);
        let turns = batch.value.get_mut("turns").and_then(Value::as_array_mut).into_iter().flatten();
        for m in turns.filter_map(Value::as_array_mut).flatten() {
            if let Some(k) = batch.own {
                let old = match m.get("id") {
                    Some(Value::Number(x)) => x.to_string(),
                    Some(Value::String(x)) => x.clone(),
                    _ => return Err(Error::format(&files[k], format!("batch {n}"), "a message without an id")),
                };
                new_id[k].insert(old, next_id);
            }
            m["id"] = json!(next_id - plan_start);
            next_id += 1;
        }
        if let Some(plan) = plans.last_mut() {
            plan.push(batch.value);
        }
    }
    let mut questions = Value::Null;
    for ((mut q, path), ids) in question_files.into_iter().zip(&new_id) {
        remap_sources(&mut q, ids);
        questions = match (questions, q) {
            (Value::Null, q) => q,
            (Value::Object(mut all), Value::Object(more)) => {
                for (ability, list) in more {
                    match (all.get_mut(&ability), list) {
                        (Some(Value::Array(have)), Value::Array(add)) => have.extend(add),
                        (None, list) => {
                            all.insert(ability, list);
                        }
                        _ => return Err(Error::format(&path, ability, "expected a list of questions")),
                    }
                }
                Value::Object(all)
            }
            _ => return Err(Error::format(&path, "document", "expected an object of question lists")),
        };
    }

    std::fs::create_dir_all(out).map_err(|e| Error::io(out, e))?;
    for (p, plan) in plans.iter().enumerate() {
        let dir = out.join(format!("{PLAN_PREFIX}{p}"));
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        write_json(&dir.join(CHAT_FILE), plan, false)?;
    }
    write_json(&out.join(QUESTIONS_FILE), &questions, true)?;
    let report = ScaleReport {
        conversations: conversations.to_vec(),
        target_tokens: tokens,
        tokens: total_tokens,
        conversation_tokens: own_tokens,
        messages: next_id as usize,
        conversation_messages: new_id.iter().map(|m| m.len()).sum(),
        batches: batch_count,
        plans: plans.len(),
        filler: used,
        placed_at,
    };
    write_json(&out.join("scale.json"), &report, true)?;
    Ok(report)
}

/// Writes `value` as JSON to `path`, indented when `pretty` (the small files people read).
fn write_json(path: &Path, value: &impl Serialize, pretty: bool) -> Result<()> {
    let bytes = if pretty { serde_json::to_vec_pretty(value) } else { serde_json::to_vec(value) }
        .map_err(|e| Error::InvalidArgument(format!("{}: {e}", path.display())))?;
    std::fs::write(path, bytes).map_err(|e| Error::io(path, e))
}

/// Rewrites every message id under a `source_chat_ids` key (numbers or digit strings, at any
/// depth) through `new_id`; ids that name no message are left as they are (the loader reports
/// them unresolved, as it would have).
fn remap_sources(v: &mut Value, new_id: &std::collections::HashMap<String, u64>) {
    fn ids(v: &mut Value, new_id: &std::collections::HashMap<String, u64>) {
        match v {
            Value::Number(n) => {
                if let Some(&id) = new_id.get(&n.to_string()) {
                    *v = json!(id);
                }
            }
            Value::String(s) => {
                if let Some(&id) = new_id.get(s.trim()) {
                    *v = json!(id.to_string());
                }
            }
            Value::Array(list) => list.iter_mut().for_each(|x| ids(x, new_id)),
            Value::Object(map) => map.values_mut().for_each(|x| ids(x, new_id)),
            _ => {}
        }
    }
    match v {
        Value::Object(map) => {
            for (k, x) in map.iter_mut() {
                if k == "source_chat_ids" { ids(x, new_id) } else { remap_sources(x, new_id) }
            }
        }
        Value::Array(list) => list.iter_mut().for_each(|x| remap_sources(x, new_id)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_ids_are_remapped_at_any_depth_and_unknown_ones_kept() {
        let map: std::collections::HashMap<String, u64> = [("3".to_string(), 103), ("7".to_string(), 907)].into();
        let mut q = json!({"temporal_reasoning": [
            {"question": "3", "source_chat_ids": [3, "7", {"a": [3, 99]}]},
            {"question": "x", "source_chat_ids": null, "other": 3}
        ]});
        remap_sources(&mut q, &map);
        assert_eq!(q["temporal_reasoning"][0]["source_chat_ids"], json!([103, "907", {"a": [103, 99]}]));
        assert_eq!(q["temporal_reasoning"][0]["question"], json!("3"));
        assert_eq!(q["temporal_reasoning"][1]["other"], json!(3));
    }
}
