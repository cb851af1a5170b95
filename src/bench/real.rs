//! The real workloads of `myelin bench --real`: every conversation of a store with a memory
//! graph, its questions embedded once and kept in a query cache, so that a machine without the
//! model can time the same queries.
//!
//! Owns reading a store into a [`Workload`] and the cache's shape. Must not read or write the
//! cache file (the caller does) nor print.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::Workload;
use crate::config::Config;
use crate::embed::Embedder;
use crate::error::{Error, Result};
use crate::pipeline::stored_graph;
use crate::retrieve::bm25::Analyzer;
use crate::retrieve::{Memory, Query};
use crate::store::Store;

/// Question embeddings keyed by "conversation\u{1f}question".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueryCache {
    /// The model that embedded them.
    pub model: String,
    /// Embedding of each question, by [`QueryCache::key`].
    pub queries: BTreeMap<String, Vec<f32>>,
}

impl QueryCache {
    /// An empty cache for this build's model.
    pub fn new() -> QueryCache {
        QueryCache { model: "all-MiniLM-L6-v2".into(), queries: BTreeMap::new() }
    }

    /// The key of a question of a conversation.
    pub fn key(conversation: &str, question: &str) -> String {
        format!("{conversation}\u{1f}{question}")
    }
}

impl Default for QueryCache {
    fn default() -> Self {
        QueryCache::new()
    }
}

/// The conversations of the store at `dir` that have a memory graph, every question embedded:
/// from `cache` when it has them, else with `embedder` (loaded on first need, and kept for the
/// next store) and added to `cache`.
pub async fn real_workload(
    dir: &Path,
    config: &Config,
    cache: &mut QueryCache,
    embedder: &mut Option<Embedder>,
) -> Result<Workload> {
    let store = Store::open(dir).await?;
    let mut memories = Vec::new();
    let mut queries = Vec::new();
    let mut analyzer = Analyzer::new()?;
    for c in store.conversations().await? {
        let Some(graph) = stored_graph(&store, &c.id, config).await? else { continue };
        let m = memories.len();
        memories.push(Memory::new(&c.id, store.episodes(&c.id).await?, graph, config.retrieve.clone())?);
        for q in store.questions(&c.id).await? {
            let key = QueryCache::key(&c.id, &q.text);
            let embedding = match cache.queries.get(&key) {
                Some(v) => v.clone(),
                None => {
                    let e = match embedder {
                        Some(e) => e,
                        None => embedder.insert(Embedder::load(&config.embed).map_err(|e| {
                            Error::InvalidArgument(format!(
                                "the query cache lacks questions of this store and the model is not there to embed \
                                 them: {e}"
                            ))
                        })?),
                    };
                    let v = e.embed_one(&q.text)?;
                    cache.queries.insert(key, v.clone());
                    v
                }
            };
            queries.push((m, Query::new(&mut analyzer, &q.text, embedding)?));
        }
    }
    if memories.is_empty() {
        return Err(Error::InvalidArgument(format!("{}: no conversation with a memory graph", dir.display())));
    }
    let name = format!("{} ({} graphs)", store_name(dir), memories.len());
    Ok(Workload { name, memories, queries })
}

/// A store's name in benchmark reports and skeleton files: its folder's.
pub fn store_name(dir: &Path) -> String {
    dir.file_name().map_or("store".into(), |n| n.to_string_lossy().into_owned())
}
