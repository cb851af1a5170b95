//! An evaluation split across processes: a [`Shard`] (`I/N`, I counted from 1) of the run's
//! conversations, the rule that deals them out ([`assign`]), the part a shard writes ([`Part`])
//! and the merge of every part into the run of the whole ([`merge`]), which
//! [`Run::report`] reports figure for figure as one process would.
//!
//! The rule: the selection's conversations in descending order of their question count (ties:
//! by id), each to the shard with the fewest questions so far (ties: the lowest I). It reads
//! only the ids and the question counts, so every shard of a run, on any machine, deals the
//! same hand; N may exceed the conversations (a shard with none writes an empty part).
//!
//! Owns the rule, the part's format and the merge's checks. Must not compute a figure
//! (`figures.rs` does) nor run retrieval.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::run::{Models, Process, Run};
use crate::error::{Error, Result};
use crate::ingest::read::{parse_json, read_text};
use crate::retrieve::engine::{BatchReport, Choice};
use crate::store::Store;

/// What a part's `format` says.
pub const PART_FORMAT: &str = "myelin-eval-part/1";

/// Shard `index` of `count`, `index` counted from 1; written `I/N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Shard {
    /// Which shard, 1 … `count`.
    pub index: usize,
    /// How many shards the run has.
    pub count: usize,
}

impl FromStr for Shard {
    type Err = Error;

    fn from_str(text: &str) -> Result<Shard> {
        let bad = |why: &str| Err(Error::InvalidArgument(format!("shard '{text}': {why}")));
        let Some((i, n)) = text.split_once('/') else {
            return bad("expected I/N, shard I of N counted from 1 (2/3 is the second of three)");
        };
        let (Ok(index), Ok(count)) = (i.trim().parse::<usize>(), n.trim().parse::<usize>()) else {
            return bad("I and N must be whole numbers (2/3 is the second of three)");
        };
        match (index, count) {
            (_, 0) => bad("N must be at least 1"),
            (0, _) => bad("I counts from 1: the shards of N are 1/N … N/N"),
            (i, n) if i > n => bad(&format!("I must be at most N: the shards of {n} are 1/{n} … {n}/{n}")),
            _ => Ok(Shard { index, count }),
        }
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl TryFrom<String> for Shard {
    type Error = Error;

    fn try_from(text: String) -> Result<Shard> {
        text.parse()
    }
}

impl From<Shard> for String {
    fn from(shard: Shard) -> String {
        shard.to_string()
    }
}

/// A conversation of the run's selection and its question count: what the rule deals out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Selected {
    /// Conversation id.
    pub id: String,
    /// Its questions in the store.
    pub questions: usize,
}

/// The shard (1 … `count`) of each conversation of `selection`, by the rule of this module.
pub fn assign(selection: &[Selected], count: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..selection.len()).collect();
    order.sort_by(|&a, &b| {
        let (a, b) = (&selection[a], &selection[b]);
        b.questions.cmp(&a.questions).then_with(|| a.id.cmp(&b.id))
    });
    let mut load = vec![0usize; count.max(1)];
    let mut shard = vec![0; selection.len()];
    for at in order {
        // The first of the least loaded: the lowest shard number on ties.
        let lightest = (0..load.len()).min_by_key(|&s| (load[s], s)).unwrap_or(0);
        load[lightest] += selection[at].questions;
        shard[at] = lightest + 1;
    }
    shard
}

impl Shard {
    /// The conversations of `selection` this shard evaluates, in the selection's order.
    pub fn select(&self, selection: &[Selected]) -> Vec<String> {
        let shards = assign(selection, self.count);
        selection.iter().zip(shards).filter(|(_, s)| *s == self.index).map(|(c, _)| c.id.clone()).collect()
    }
}

/// The question counts of the conversations `ids` of `store` (the run's selection, in its
/// order); a conversation the store does not hold is an error.
pub async fn selection(store: &Store, ids: &[String]) -> Result<Vec<Selected>> {
    let stored: HashMap<String, usize> =
        store.conversations().await?.into_iter().map(|c| (c.id, c.questions as usize)).collect();
    ids.iter()
        .map(|id| match stored.get(id) {
            Some(&questions) => Ok(Selected { id: id.clone(), questions }),
            None => Err(Error::NotFound(format!("conversation '{id}' is not in the store"))),
        })
        .collect()
}

/// What one shard of an evaluation writes: which shard it is, the whole run's selection (the
/// rule's input, so the merge can deal the hand again) and its own run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Part {
    /// [`PART_FORMAT`].
    pub format: String,
    /// Which shard.
    pub shard: Shard,
    /// Every conversation of the whole run, in its order, with its question count.
    pub selection: Vec<Selected>,
    /// What this shard measured: the conversations [`Shard::select`] gives it.
    pub run: Run,
}

impl Part {
    /// The part of `shard` of a run over `selection` that measured `run`.
    pub fn new(shard: Shard, selection: Vec<Selected>, run: Run) -> Part {
        Part { format: PART_FORMAT.to_string(), shard, selection, run }
    }

    /// Reads the part at `path`; a file that is not one is an error naming it and the place.
    pub fn read(path: &Path) -> Result<Part> {
        /// What says a file is a part, read before the rest.
        #[derive(Deserialize)]
        struct Head {
            format: Option<String>,
        }
        let text = read_text(path)?;
        let message = match parse_json::<Head>(&text, path)?.format {
            Some(format) if format == PART_FORMAT => return parse_json(&text, path),
            Some(other) => format!("'{other}' is not {PART_FORMAT}, the part `eval --shard I/N --json` writes"),
            None => format!("not a part of a sharded eval (no \"format\": \"{PART_FORMAT}\")"),
        };
        Err(Error::format(path, "format", message))
    }
}

/// The run of the whole from every shard's part (each with the file it came from): the parts
/// must be shards of one run (the same N, selection and settings; the same models where they
/// measured anything), every shard 1 … N exactly once, each holding the conversations the rule
/// gives it. Conversations and their questions come in the selection's order, as one process
/// measures them; the process facts are joined ([`join_process`]).
pub fn merge(parts: &[(PathBuf, Part)]) -> Result<Run> {
    let Some((first_path, first)) = parts.first() else {
        return Err(Error::InvalidArgument("no part to merge".into()));
    };
    let count = first.shard.count;
    let mut by_index: BTreeMap<usize, &(PathBuf, Part)> = BTreeMap::new();
    for entry in parts {
        let (path, part) = entry;
        if part.shard.count != count {
            let message = format!(
                "shard {}, but {} is shard {}: the parts of one run have the same N",
                part.shard,
                first_path.display(),
                first.shard
            );
            return Err(Error::format(path, "shard", message));
        }
        if let Some((other, _)) = by_index.insert(part.shard.index, entry) {
            let message = format!("shard {} again: {} is shard {} too", part.shard, other.display(), part.shard);
            return Err(Error::format(path, "shard", message));
        }
    }
    let given = || parts.iter().map(|(p, part)| format!("{} ({})", part.shard, p.display())).collect::<Vec<_>>();
    if let Some(missing) = (1..=count).find(|i| !by_index.contains_key(i)) {
        return Err(Error::InvalidArgument(format!(
            "no part for shard {missing}/{count}: the parts given are {}",
            given().join(", ")
        )));
    }
    let ordered: Vec<&(PathBuf, Part)> = by_index.into_values().collect();
    let (base_path, base) = ordered[0];
    // Each conversation's part (its place in `ordered`) and its place in that part's run.
    let mut owner: HashMap<&str, (usize, usize)> = HashMap::new();
    for (n, &(path, part)) in ordered.iter().enumerate() {
        part.run.check().map_err(|e| Error::format(path, "run", e.to_string()))?;
        if let Some(difference) = first_difference(&part.selection, &base.selection) {
            let message = format!("{difference} in {}: not a shard of one run", base_path.display());
            return Err(Error::format(path, "selection", message));
        }
        if let Some(difference) = first_difference(&part.run.settings, &base.run.settings) {
            let message = format!("{difference} in {}: not a shard of one run", base_path.display());
            return Err(Error::format(path, "run.settings", message));
        }
        for (at, c) in part.run.conversations.iter().enumerate() {
            if let Some((other, _)) = owner.insert(c.id.as_str(), (n, at)) {
                let message = format!("conversation '{}' is in {} too", c.id, ordered[other].0.display());
                return Err(Error::format(path, "run.conversations", message));
            }
        }
        let held: Vec<&str> = part.run.conversations.iter().map(|c| c.id.as_str()).collect();
        let dealt = part.shard.select(&base.selection);
        if held != dealt {
            let message = format!(
                "holds [{}] but shard {} of this selection is [{}]",
                held.join(", "),
                part.shard,
                dealt.join(", ")
            );
            return Err(Error::format(path, "run.conversations", message));
        }
    }
    let measured: Vec<&(PathBuf, Part)> =
        ordered.iter().copied().filter(|(_, p)| !p.run.conversations.is_empty()).collect();
    if let Some(&(model_path, model_part)) = measured.first() {
        for (path, part) in &measured {
            if let Some(difference) = first_difference(&part.run.models, &model_part.run.models) {
                let message = format!("{difference} in {}: the shards ran other models", model_path.display());
                return Err(Error::format(path, "run.models", message));
            }
        }
    }
    let mut run = Run {
        settings: base.run.settings.clone(),
        models: measured.first().map_or_else(Models::default, |(_, p)| p.run.models.clone()),
        process: join_process(&ordered.iter().map(|(_, p)| p).collect::<Vec<_>>()),
        conversations: Vec::new(),
        questions: Vec::new(),
    };
    // The rule dealt every conversation of the selection to one part, and each part holds
    // what it was dealt: each is found here once.
    for selected in &base.selection {
        let Some(&(n, at)) = owner.get(selected.id.as_str()) else { continue };
        let part = &ordered[n].1.run;
        let to = run.conversations.len();
        run.conversations.push(part.conversations[at].clone());
        run.questions.extend(part.questions.iter().filter(|q| q.conversation == at).map(|q| {
            let mut q = q.clone();
            q.conversation = to;
            q
        }));
    }
    Ok(run)
}

/// The process facts of the shards joined: where each part's work ran (the parts that measured
/// any conversation speak for it; `gpu+cpu` where they differ), one backend choice (theirs
/// when they are the same, else one whose reason names each shard's: a choice by the graphs'
/// size names each shard's largest), each mode's GPU batches added up, the index build times
/// summed.
pub fn join_process(parts: &[&Part]) -> Process {
    let measured: Vec<&Part> = parts.iter().copied().filter(|p| !p.run.conversations.is_empty()).collect();
    let speaking: Vec<&Part> = if measured.is_empty() { parts.iter().take(1).copied().collect() } else { measured };
    let either = |name: fn(&Process) -> &str| {
        let names: Vec<&str> = speaking.iter().map(|p| name(&p.run.process)).collect();
        let has = |device: &str| names.iter().filter(|n| n.contains(device)).count() as u64;
        crate::embed::backend_name(has("gpu"), has("cpu")).to_string()
    };
    let choices: Vec<&Choice> = speaking.iter().map(|p| &p.run.process.backend).collect();
    let backend = match choices.first() {
        Some(first) if choices.iter().all(|c| c == first) => (*first).clone(),
        _ => {
            use crate::gpu::Backend::{Cpu, Gpu};
            let one = choices.iter().all(|c| c.backend == choices[0].backend);
            let each = speaking.iter().map(|p| format!("{} {}", p.shard, p.run.process.backend));
            let each = each.collect::<Vec<_>>().join("; ");
            Choice {
                backend: if choices.iter().any(|c| c.backend == Gpu) { Gpu } else { Cpu },
                reason: match one {
                    true => format!("each shard's: {each}"),
                    false => format!("the shards ran on different backends: {each}"),
                },
                adapter: choices.iter().find_map(|c| c.adapter.clone()),
            }
        }
    };
    let mut batches: BTreeMap<String, BatchReport> = BTreeMap::new();
    for (mode, b) in parts.iter().flat_map(|p| &p.run.process.batches) {
        match batches.get_mut(mode) {
            Some(sum) => {
                sum.queries += b.queries;
                sum.on_gpu &= b.on_gpu;
                sum.submits += b.submits;
                sum.completed_on_cpu += b.completed_on_cpu;
                sum.fallback = sum.fallback.take().or_else(|| b.fallback.clone());
                sum.gpu_us += b.gpu_us;
                sum.reranked_on_gpu += b.reranked_on_gpu;
                sum.reranked_on_cpu += b.reranked_on_cpu;
            }
            None => {
                batches.insert(mode.clone(), b.clone());
            }
        }
    }
    Process {
        backend,
        embed: either(|p| &p.embed),
        rank: either(|p| &p.rank),
        batches,
        index_build_ms: parts.iter().map(|p| p.run.process.index_build_ms).sum(),
    }
}

/// The first place where `a` and `b` differ as JSON (`retrieve.top_k: 10, not 30`), or
/// `None` when they are the same.
fn first_difference<T: Serialize>(a: &T, b: &T) -> Option<String> {
    fn walk(a: &serde_json::Value, b: &serde_json::Value, at: &str) -> Option<String> {
        use serde_json::Value::{Array, Object};
        let here = |key: &str| if at.is_empty() { key.to_string() } else { format!("{at}.{key}") };
        match (a, b) {
            (Object(x), Object(y)) => {
                let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
                let null = serde_json::Value::Null;
                keys.into_iter().find_map(|k| walk(x.get(k).unwrap_or(&null), y.get(k).unwrap_or(&null), &here(k)))
            }
            (Array(x), Array(y)) if x.len() == y.len() => {
                x.iter().zip(y).enumerate().find_map(|(i, (x, y))| walk(x, y, &format!("{at}[{i}]")))
            }
            _ if a == b => None,
            _ => Some(format!("{}: {a} here, {b}", if at.is_empty() { "the whole" } else { at })),
        }
    }
    match (serde_json::to_value(a), serde_json::to_value(b)) {
        (Ok(a), Ok(b)) => walk(&a, &b, ""),
        (Err(e), _) | (_, Err(e)) => Some(format!("not comparable: {e}")),
    }
}

#[cfg(test)]
mod tests;
