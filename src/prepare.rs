//! Making a store ready for a run over some inputs (`myelin eval`, `myelin train-gnn`): read
//! the inputs, keep the conversations asked for, ingest those the store does not hold yet, and
//! build the graphs the store lacks; or, for a run that may not write (a shard of `eval`),
//! the same selection checked against what the store holds.
//!
//! Owns that selection and its order of steps; the ingest itself is [`crate::pipeline`]'s.
//! Must not print: what it did is told through its callback and its return value.

use std::path::PathBuf;
use std::time::Instant;

use crate::progress::Progress;

use crate::config::Config;
use crate::conversation::SourceFormat;
use crate::embed::Embedder;
use crate::error::{Error, Result};
use crate::pipeline::{LoadedInput, build_missing_graphs, ingest_loaded};
use crate::store::{Location, Store};

/// A step of [`prepare`] that changes the store, told before or after it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step<'a> {
    /// About to ingest this many conversations the store does not hold.
    Ingesting(usize),
    /// Built the memory graphs of these stored conversations, which had none.
    BuiltGraphs(&'a [String]),
}

/// The conversations a run is over.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    /// LoCoMo files, BEAM conversation directories, or folders of them.
    pub paths: &'a [PathBuf],
    /// Only these conversations of the inputs (each must exist); all when empty.
    pub only: &'a [String],
    /// With a format, a conversation of another format is an error.
    pub expected: Option<SourceFormat>,
}

/// Reads the inputs, keeps the conversations they ask for, ingests those not yet in the store
/// at `store_root`, builds missing graphs, and returns the ids kept, in input order.
/// `progress` counts the turns ingested; `step` hears of each step that writes.
pub async fn prepare(
    store_root: impl Into<Location>,
    inputs: Inputs<'_>,
    embedder: &Embedder,
    config: &Config,
    progress: &dyn Progress,
    mut step: impl FnMut(Step<'_>),
) -> Result<Vec<String>> {
    let store_root = &store_root.into();
    let started = Instant::now();
    let (ids, mut input) = select(inputs, config)?;
    let stored = stored_ids(store_root).await?;
    input.conversations.retain(|(c, _)| !stored.contains(&c.id));
    if !input.conversations.is_empty() {
        step(Step::Ingesting(input.conversations.len()));
        ingest_loaded(store_root, input, embedder, config, progress, started)
            .await
            .map_err(|e| Error::ingest(store_root.to_path_buf(), e))?;
    }
    let built = build_missing_graphs(store_root, embedder, &config.graph).await?;
    if !built.is_empty() {
        step(Step::BuiltGraphs(&built));
    }
    Ok(ids)
}

/// The ids [`prepare`] would return, without writing anything: the store at `store_root` must
/// hold every conversation kept (a run that may not write, such as one shard of several
/// running at once, needs it prepared first), else [`Error::NotFound`] names those it lacks. A
/// conversation without a graph is found when it is loaded.
pub async fn prepared(store_root: impl Into<Location>, inputs: Inputs<'_>, config: &Config) -> Result<Vec<String>> {
    let store_root = &store_root.into();
    let (ids, _) = select(inputs, config)?;
    let stored = stored_ids(store_root).await?;
    let missing: Vec<&str> = ids.iter().filter(|id| !stored.contains(id)).map(String::as_str).collect();
    if missing.is_empty() {
        return Ok(ids);
    }
    Err(Error::NotFound(format!(
        "store {}: holds {} of the {} conversations of this run, not {}: ingest them first",
        store_root,
        ids.len() - missing.len(),
        ids.len(),
        missing.join(", ")
    )))
}

/// Reads the inputs and keeps the conversations they ask for: their ids in input order, and
/// the input read (only those conversations).
fn select(inputs: Inputs<'_>, config: &Config) -> Result<(Vec<String>, LoadedInput)> {
    let Inputs { paths, only, expected } = inputs;
    let names = || paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
    let mut input = LoadedInput::read(paths, &config.ingest)?;
    if let Some(expected) = expected
        && let Some((c, _)) = input.conversations.iter().find(|(c, _)| c.format != expected)
    {
        return Err(Error::InvalidArgument(format!(
            "{}: conversation '{}' is {}, not {}",
            names(),
            c.id,
            c.format.as_str(),
            expected.as_str()
        )));
    }
    if !only.is_empty() {
        if let Some(id) = only.iter().find(|id| !input.conversations.iter().any(|(c, _)| &c.id == *id)) {
            return Err(Error::InvalidArgument(format!("{}: no conversation '{id}'", names())));
        }
        input.conversations.retain(|(c, _)| only.contains(&c.id));
    }
    let ids = input.conversations.iter().map(|(c, _)| c.id.clone()).collect();
    Ok((ids, input))
}

/// The ids of the conversations the store at `store_root` holds.
async fn stored_ids(store_root: &Location) -> Result<Vec<String>> {
    Ok(Store::open(store_root).await?.conversations().await?.into_iter().map(|c| c.id).collect())
}
