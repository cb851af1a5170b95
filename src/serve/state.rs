//! What a service's handle, writer and search thread share: the store's scopes as last
//! committed, memory ids, counters, the concept-label cache, the write jobs, and loading
//! scopes from the store. Must not answer requests itself.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, Utc};
use tokio::sync::RwLock;

use super::access::AccessLog;
use super::api::*;
use super::labels::*;
use crate::config::Config;
use crate::conversation::{SourceFormat, turn_of};
use crate::embed::{EMBEDDING_DIM, Embedder};
use crate::error::{Error, Result};
use crate::pipeline::stored_memory;
use crate::retrieve::Memory;
use crate::retrieve::engine::Choice;
use crate::store::{ConversationSummary, Location, Store, Writer};

/// Scope key → memory id → when it was archived, as the store's history says.
pub(super) type ArchivedAt = HashMap<String, HashMap<String, chrono::DateTime<chrono::Utc>>>;

/// The counters behind [`Stats`], shared by the writer and the search thread.
#[derive(Debug, Default)]
pub(super) struct Counters {
    pub(super) writes: AtomicU64,
    pub(super) commits: AtomicU64,
    pub(super) searches: AtomicU64,
    pub(super) batches: AtomicU64,
    pub(super) gpu_searches: AtomicU64,
    pub(super) cached_queries: AtomicU64,
    pub(super) embed_us: AtomicU64,
    pub(super) rank_us: AtomicU64,
    pub(super) hand_over_us: AtomicU64,
    pub(super) builders_resumed: AtomicU64,
    pub(super) builders_rebuilt: AtomicU64,
    /// Gauges, set after each commit or reload ([`Counters::gauge`]).
    pub(super) memories: AtomicU64,
    pub(super) archived: AtomicU64,
    pub(super) nodes: AtomicU64,
    pub(super) active_nodes: AtomicU64,
}

impl Counters {
    pub(super) fn add(counter: &AtomicU64, n: usize) {
        counter.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Adds the microseconds since `since` to `counter`.
    pub(super) fn add_time(counter: &AtomicU64, since: std::time::Instant) {
        counter.fetch_add(since.elapsed().as_micros() as u64, Ordering::Relaxed);
    }

    pub(super) fn snapshot(&self) -> Stats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Stats {
            writes: get(&self.writes),
            commits: get(&self.commits),
            searches: get(&self.searches),
            batches: get(&self.batches),
            gpu_searches: get(&self.gpu_searches),
            cached_queries: get(&self.cached_queries),
            embed_us: get(&self.embed_us),
            rank_us: get(&self.rank_us),
            hand_over_us: get(&self.hand_over_us),
            builders_resumed: get(&self.builders_resumed),
            builders_rebuilt: get(&self.builders_rebuilt),
            memories: get(&self.memories),
            archived: get(&self.archived),
            nodes: get(&self.nodes),
            active_nodes: get(&self.active_nodes),
        }
    }

    /// Sets the gauges from the scopes as committed.
    pub(super) fn gauge(&self, scopes: &HashMap<String, Arc<Memory>>) {
        let (mut memories, mut archived, mut nodes, mut active) = (0, 0, 0, 0);
        for m in scopes.values() {
            memories += m.turns().iter().enumerate().filter(|(i, t)| **t as usize == *i).count() as u64;
            archived += m.archived_memories() as u64;
            nodes += m.graph().node_count() as u64;
            active += m.active_nodes() as u64;
        }
        for (gauge, v) in
            [(&self.memories, memories), (&self.archived, archived), (&self.nodes, nodes), (&self.active_nodes, active)]
        {
            gauge.store(v, Ordering::Relaxed);
        }
    }
}

/// What a read-only service's follower knows of the writer's commits.
pub(super) struct Follow {
    /// The generation its scopes are loaded at.
    loaded: u64,
    /// The newest generation the last look at `myelin.json` found, and its commit time.
    seen: (u64, Option<DateTime<Utc>>),
    /// When that look was.
    checked: std::time::Instant,
}

impl Follow {
    pub(super) fn new(generation: u64, at: Option<DateTime<Utc>>) -> Follow {
        Follow { loaded: generation, seen: (generation, at), checked: std::time::Instant::now() }
    }

    /// A look found generation `g` (committed at `at`; `None`: the one already seen).
    pub(super) fn checked(&mut self, when: std::time::Instant, g: u64, at: Option<DateTime<Utc>>) {
        self.checked = when;
        if g != self.seen.0 {
            self.seen = (g, at);
        }
    }

    /// The scopes are now loaded at generation `g` (committed at `at`).
    pub(super) fn loaded(&mut self, g: u64, at: Option<DateTime<Utc>>) {
        self.loaded = g;
        if g > self.seen.0 {
            self.seen = (g, at);
        }
    }

    /// How far behind the writer this replica is, at `now`.
    pub(super) fn replica(&self, now: DateTime<Utc>) -> Replica {
        let behind = self.seen.0.saturating_sub(self.loaded);
        // The newest commit not loaded has waited since the writer made it (its clock).
        let lag_ms = match (behind, self.seen.1) {
            (0, _) | (_, None) => 0,
            (_, Some(at)) => (now - at).num_milliseconds().max(0) as u64,
        };
        Replica {
            generation: self.loaded,
            store_generation: self.seen.0,
            behind,
            lag_ms,
            checked_ms_ago: self.checked.elapsed().as_millis() as u64,
        }
    }
}

pub(super) struct Inner {
    pub(super) root: Location,
    /// A read-only service's view of the writer's commits (a writer's stays as opened).
    pub(super) follow: std::sync::Mutex<Follow>,
    pub(super) config: Config,
    /// The same model on threads that yield to searches: every CPU-heavy step of a write.
    pub(super) background: Embedder,
    /// The store's writer lock, held for the service's life (`None`: read-only).
    pub(super) writer: Option<Writer>,
    /// Where searches are ranked, and why.
    pub(super) backend: Choice,
    pub(super) counters: Arc<Counters>,
    /// Scope key → its memory, as last committed.
    pub(super) scopes: RwLock<HashMap<String, Arc<Memory>>>,
    /// Memory id → scope key.
    pub(super) ids: RwLock<HashMap<String, String>>,
    /// The store as last committed (history reads it).
    pub(super) store: RwLock<Store>,
    /// Scope key → its stored summary when loaded: what a read-only service compares to see
    /// which scopes a commit changed (a writer, the only one to commit, never reads it).
    pub(super) loaded: RwLock<HashMap<String, ConversationSummary>>,
    /// Concept label → its embedding: building a scope's graph embeds only labels not seen
    /// recently.
    pub(super) labels: std::sync::Mutex<LabelCache>,
    /// Per scope, the concept labels the store holds for it ([`crate::store::Table::Labels`]):
    /// a write appends only the others.
    pub(super) stored_labels: std::sync::Mutex<HashMap<String, std::collections::HashSet<String>>>,
    /// When each memory was last returned ([`AccessLog`]).
    pub(super) access: std::sync::Mutex<AccessLog>,
    /// What the store's archive holds: scope key → memory id → when archived (`serve::archive`).
    pub(super) archived_at: std::sync::Mutex<ArchivedAt>,
}

impl Inner {
    /// Label embeddings, from the cache where it has them.
    pub(super) fn embed_labels(&self, labels: &[String]) -> Result<Vec<f32>> {
        let poisoned = || Error::Batch("label cache poisoned".into());
        let missing: Vec<String> = {
            let cache = self.labels.lock().map_err(|_| poisoned())?;
            let mut m: Vec<String> = labels.iter().filter(|l| !cache.contains(l)).cloned().collect();
            m.sort();
            m.dedup();
            m
        };
        let fresh = if missing.is_empty() { Vec::new() } else { self.background.embed(&missing)? };
        let mut cache = self.labels.lock().map_err(|_| poisoned())?;
        let mut out = Vec::with_capacity(labels.len() * EMBEDDING_DIM);
        let fresh: HashMap<&str, &[f32]> =
            missing.iter().map(String::as_str).zip(fresh.chunks_exact(EMBEDDING_DIM)).collect();
        for l in labels {
            let v = match fresh.get(l.as_str()) {
                Some(v) => v.to_vec(),
                None => cache.get(l).ok_or_else(|| Error::Batch(format!("label '{l}' left the cache")))?,
            };
            out.extend_from_slice(&v);
            cache.insert(l.clone(), v);
        }
        Ok(out)
    }

    /// Whether the access history holds records the store lacks.
    pub(super) fn access_unwritten(&self) -> bool {
        self.access.lock().is_ok_and(|log| log.is_dirty())
    }

    /// `items` with what the access history holds of each (before this answer).
    pub(super) fn with_access(&self, items: &mut [MemoryItem]) {
        let Ok(log) = self.access.lock() else { return };
        for it in items {
            shown(&log, it);
        }
    }

    /// `items`, which an answer returns, with their access history; then recorded as returned,
    /// under one lock, so that no other answer is recorded in between.
    pub(super) fn returned(&self, items: &mut [MemoryItem]) {
        let Ok(mut log) = self.access.lock() else { return };
        let now = chrono::Utc::now();
        for it in items.iter_mut() {
            shown(&log, it);
            if let Ok(key) = it.scope.key() {
                log.record(&key, [it.id.as_str()], now);
            }
        }
    }
}

/// `it` with what `log` holds of it.
fn shown(log: &AccessLog, it: &mut MemoryItem) {
    if let Some(seen) = log.get(&it.id) {
        (it.last_accessed_at, it.access_count) = (Some(seen.at), seen.count);
    }
}

/// Runs CPU-heavy work off the async runtime's threads.
pub(super) async fn cpu<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f).await.map_err(|e| Error::InvalidArgument(format!("worker failed: {e}")))?
}

/// Scope key → its memory (`None`: gone), for the scopes of `store` whose stored summary is not
/// the one in `known`; and the summary of every scope it holds.
pub(super) type ChangedScopes = (HashMap<String, Option<Arc<Memory>>>, HashMap<String, ConversationSummary>);

/// The scopes of `store` that changed since `known` (all of them, for an empty `known`).
pub(super) async fn load_scopes(
    store: &Store,
    config: &Config,
    known: &HashMap<String, ConversationSummary>,
) -> Result<ChangedScopes> {
    let mut changed = HashMap::new();
    let mut summaries = HashMap::new();
    for c in store.conversations().await? {
        if c.format != SourceFormat::Api.as_str() {
            continue;
        }
        if known.get(&c.id) != Some(&c) {
            changed.insert(c.id.clone(), Some(Arc::new(stored_memory(store, &c.id, config).await?)));
        }
        summaries.insert(c.id.clone(), c);
    }
    for key in known.keys().filter(|k| !summaries.contains_key(*k)) {
        changed.insert(key.clone(), None);
    }
    Ok((changed, summaries))
}

/// Memory id → scope key, for the memories of `memory` (passages are not memories).
pub(super) fn ids_of<'a>(key: &'a str, memory: &'a Memory) -> impl Iterator<Item = (String, String)> + 'a {
    memory
        .episodes()
        .iter()
        .filter(|e| turn_of(&e.turn_id) == e.turn_id)
        .map(move |e| (e.turn_id.clone(), key.to_string()))
}
