//! The GPU backend's stand-in in a build without the `gpu` feature (no wgpu), after candle's
//! dummy CUDA backend: the types `device.rs`, `corpus.rs` and `ranker.rs` give the rest of the
//! crate, none of which can exist (uninhabited enums), so every caller's GPU branch compiles
//! and is never taken, and opening a device says the build has none. Must do nothing else.

use super::config::AdapterDescription;
use super::request::{BatchTiming, GraphInput, RankQuery, RankSettings, Ranked};
use crate::error::{Error, Result};
use crate::gnn::{Relevance, RelevanceInput};

/// A GPU device: there is none in this build.
#[derive(Debug, Clone)]
pub enum Gpu {}

impl Gpu {
    /// Always the error that this build has no GPU backend.
    pub fn new() -> Result<Gpu> {
        Err(Error::Gpu("this build of Myelin has no GPU backend (built without the `gpu` feature)".into()))
    }

    /// Never called: there is no device.
    pub fn adapter(&self) -> &AdapterDescription {
        match *self {}
    }
}

/// Graphs resident on a GPU: none in this build.
#[derive(Debug)]
pub enum Corpus {}

impl Corpus {
    /// Never succeeds: there is no device to upload to.
    pub fn upload(gpu: &Gpu, _graphs: &[GraphInput]) -> Result<Corpus> {
        match *gpu {}
    }

    /// Never called: there is no corpus.
    pub fn replace(&mut self, _slot: usize, _graph: &GraphInput) -> Result<u64> {
        match *self {}
    }

    /// Never called: there is no corpus.
    pub fn remove(&mut self, _slot: usize) -> Result<()> {
        match *self {}
    }

    /// Never called: there is no corpus.
    pub fn live_nodes(&self) -> u64 {
        match *self {}
    }

    /// Never called: there is no corpus.
    pub fn garbage_nodes(&self) -> u64 {
        match *self {}
    }

    /// Never called: there is no corpus.
    pub fn len(&self) -> usize {
        match *self {}
    }

    /// Never called: there is no corpus.
    pub fn is_empty(&self) -> bool {
        match *self {}
    }
}

/// The GPU ranking step: none in this build.
#[derive(Debug)]
pub enum Ranker {}

impl Ranker {
    /// Never called: there is no corpus.
    pub fn new(corpus: Corpus) -> Ranker {
        match corpus {}
    }

    /// Never called: there is no ranker.
    pub fn corpus_mut(&mut self) -> &mut Corpus {
        match *self {}
    }

    /// Never called: there is no ranker.
    pub fn relevance(&self, _model: &std::sync::Arc<Relevance>, _graphs: &[&RelevanceInput]) -> Result<Vec<Vec<f32>>> {
        match *self {}
    }

    /// Never called: there is no ranker.
    pub fn rank(&self, _queries: &[RankQuery], _settings: &RankSettings) -> Result<(Vec<Ranked>, BatchTiming)> {
        match *self {}
    }
}
