//! The serving API: an async handle over one store that agents (or `myelin serve`) call to add,
//! search, list and delete memories in isolated scopes. Names follow mem0's: a scope is a
//! `user_id` / `agent_id` / `run_id`, a memory is one stored turn with an id.
//!
//! Each scope is one conversation of the store (format `api`) with its own graph, so
//! activation can never cross scopes. A write rebuilds its scope's episodes, graph and
//! in-memory index and commits them in one store transaction, with a history row per change;
//! searches read the last committed state and are never blocked by a write in progress.
//!
//! Owns scopes, memory ids, the write path of the API and the in-memory index of every scope.
//! Must not parse HTTP or JSON-RPC (that is `serve::http`) nor rank (that is `retrieve`).

pub mod http;
pub mod load;
pub mod mcp;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tokio::sync::{Mutex, RwLock};

use crate::config::Config;
use crate::conversation::{Conversation, Session, SourceFormat, Turn};
use crate::embed::{EMBEDDING_DIM, Embedder};
use crate::error::{Error, Result};
use crate::graph::build_graph;
use crate::ingest::pipeline::stored_memory;
use crate::retrieve::bm25::Analyzer;
use crate::retrieve::{Memory, Mode, Query};
use crate::store::{Episode, HistoryEvent, Store};

/// Longest scope id part, in bytes.
pub const MAX_ID_BYTES: usize = 128;

/// Who a memory belongs to: any of a user, an agent and a run (at least one).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Scope {
    /// The user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    /// The agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// The run (session).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
}

impl Scope {
    /// A user's scope.
    pub fn user(id: &str) -> Scope {
        Scope { user_id: Some(id.to_string()), ..Scope::default() }
    }

    /// The store conversation of this scope: `api:user=<u>;agent=<a>;run=<r>`. Each part must
    /// be 1–128 bytes without control characters, `;` or `=`, and one part at least is set.
    pub fn key(&self) -> Result<String> {
        let parts = [("user", &self.user_id), ("agent", &self.agent_id), ("run", &self.run_id)];
        if parts.iter().all(|(_, v)| v.is_none()) {
            return Err(Error::InvalidArgument("a scope needs a user_id, an agent_id or a run_id".into()));
        }
        let mut key = String::from("api:");
        for (i, (name, value)) in parts.iter().enumerate() {
            let v = value.as_deref().unwrap_or("");
            if value.is_some()
                && (v.is_empty() || v.len() > MAX_ID_BYTES || v.chars().any(|c| c.is_control() || c == ';' || c == '='))
            {
                return Err(Error::InvalidArgument(format!(
                    "{name}_id '{}' must be 1-{MAX_ID_BYTES} bytes without control characters, ';' or '='",
                    v.escape_debug()
                )));
            }
            if i > 0 {
                key.push(';');
            }
            key.push_str(&format!("{name}={v}"));
        }
        Ok(key)
    }

    /// The scope of a store conversation written by [`Scope::key`].
    pub fn from_key(key: &str) -> Option<Scope> {
        let mut scope = Scope::default();
        for part in key.strip_prefix("api:")?.split(';') {
            let (name, value) = part.split_once('=')?;
            let value = (!value.is_empty()).then(|| value.to_string());
            match name {
                "user" => scope.user_id = value,
                "agent" => scope.agent_id = value,
                "run" => scope.run_id = value,
                _ => return None,
            }
        }
        Some(scope)
    }
}

/// One message to remember.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Message {
    /// Who said it (`user`, `assistant`, a name).
    pub role: String,
    /// What was said.
    pub content: String,
    /// When (default: when it is added).
    #[serde(default)]
    pub timestamp: Option<DateTime<Utc>>,
}

/// A stored memory.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryItem {
    /// Its id.
    pub id: String,
    /// Its text.
    pub memory: String,
    /// Who said it.
    pub role: String,
    /// When.
    pub timestamp: Option<DateTime<Utc>>,
    /// Its scope.
    #[serde(flatten)]
    pub scope: Scope,
    /// The retrieval score (search results only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f32>,
}

/// A search.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SearchRequest {
    /// The question.
    pub query: String,
    /// Its scope.
    #[serde(flatten)]
    pub scope: Scope,
    /// Most memories returned (default: the retrieval `top_k`).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// What a search found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchResult {
    /// Memories in time order.
    pub results: Vec<MemoryItem>,
    /// The gate's confidence.
    pub confidence: f32,
    /// Whether the gate found no confident memory (the results are still given).
    pub rejected: bool,
}

/// A page of a scope's memories.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct Page {
    /// Memories skipped.
    pub offset: usize,
    /// Memories returned at most.
    pub limit: usize,
}

impl Default for Page {
    fn default() -> Self {
        Page { offset: 0, limit: 100 }
    }
}

impl Page {
    /// The page a request names; what it leaves out takes the default (offset 0, 100 memories).
    pub fn or_default(offset: Option<usize>, limit: Option<usize>) -> Page {
        let d = Page::default();
        Page { offset: offset.unwrap_or(d.offset), limit: limit.unwrap_or(d.limit) }
    }
}

/// An async handle on a served store: cheap to clone, safe to share across tasks.
#[derive(Clone)]
pub struct Service {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service").field("root", &self.inner.root).finish()
    }
}

struct Inner {
    root: PathBuf,
    config: Config,
    embedder: Embedder,
    /// Scope key → its memory, as last committed.
    scopes: RwLock<HashMap<String, Arc<Memory>>>,
    /// Memory id → scope key.
    ids: RwLock<HashMap<String, String>>,
    /// Writes go one at a time.
    writer: Mutex<()>,
    /// Concept label → its embedding: a write rebuilds its scope's graph and embeds only the
    /// labels never seen before.
    labels: std::sync::Mutex<HashMap<String, Vec<f32>>>,
}

/// Runs CPU-heavy work off the async runtime's threads.
async fn cpu<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f).await.map_err(|e| Error::InvalidArgument(format!("worker failed: {e}")))?
}

impl Service {
    /// Opens the store at `root` (created on first write) and loads every scope in it.
    pub async fn open(root: &Path, config: Config) -> Result<Service> {
        config.retrieve.validate()?;
        let embedder = Embedder::load(&config.embed)?;
        let store = Store::open(root).await?;
        let mut scopes = HashMap::new();
        let mut ids = HashMap::new();
        for c in store.conversations().await? {
            if c.format != SourceFormat::Api.as_str() {
                continue;
            }
            let memory = stored_memory(&store, &c.id, &config.retrieve).await?;
            for e in memory.episodes() {
                ids.insert(e.turn_id.clone(), c.id.clone());
            }
            scopes.insert(c.id.clone(), Arc::new(memory));
        }
        Ok(Service {
            inner: Arc::new(Inner {
                root: root.to_path_buf(),
                config,
                embedder,
                scopes: RwLock::new(scopes),
                ids: RwLock::new(ids),
                writer: Mutex::new(()),
                labels: std::sync::Mutex::new(HashMap::new()),
            }),
        })
    }

    /// Remembers `messages` in `scope`; returns them with their new ids. Searchable when this
    /// returns; durable in the store.
    pub async fn add(&self, scope: &Scope, messages: Vec<Message>) -> Result<Vec<MemoryItem>> {
        let key = scope.key()?;
        if messages.is_empty() {
            return Err(Error::InvalidArgument("no message to add".into()));
        }
        let max = self.inner.config.ingest.max_turn_bytes;
        for (i, m) in messages.iter().enumerate() {
            if m.content.trim().is_empty() {
                return Err(Error::InvalidArgument(format!("message {i}: empty content")));
            }
            if m.content.len() > max {
                return Err(Error::InvalidArgument(format!(
                    "message {i}: {} bytes, over the limit of {max} (ingest.max_turn_bytes)",
                    m.content.len()
                )));
            }
            if m.role.trim().is_empty() {
                return Err(Error::InvalidArgument(format!("message {i}: empty role")));
            }
        }
        let _write = self.inner.writer.lock().await;
        let mut episodes = self.episodes_of(&key).await;
        let now = Utc::now();
        let texts: Vec<String> = messages.iter().map(|m| m.content.clone()).collect();
        let inner = self.inner.clone();
        let vectors = cpu(move || inner.embedder.embed(&texts)).await?;
        let mut added = Vec::with_capacity(messages.len());
        for (m, v) in messages.into_iter().zip(vectors.chunks_exact(EMBEDDING_DIM)) {
            let id = new_id();
            added.push(HistoryEvent { memory_id: id.clone(), conversation: key.clone(), event: "ADD".into(), at: now });
            episodes.push(Episode {
                conversation: key.clone(),
                session: 1,
                turn_id: id,
                position: episodes.len() as u32,
                speaker: m.role,
                text: m.content,
                image_caption: None,
                timestamp: Some(m.timestamp.unwrap_or(now)),
                embedding: v.to_vec(),
            });
        }
        let items: Vec<MemoryItem> = episodes[episodes.len() - added.len()..].iter().map(|e| item(scope, e)).collect();
        self.commit(&key, episodes, &added, false).await?;
        Ok(items)
    }

    /// The memories of `request.scope` that answer `request.query`, in time order.
    pub async fn search(&self, request: &SearchRequest) -> Result<SearchResult> {
        Ok(self.search_batch(std::slice::from_ref(request)).await?.remove(0))
    }

    /// Many searches at once: one embedding pass over every query, then retrieval in
    /// parallel over the queries. Results in request order; any bad request fails the batch.
    pub async fn search_batch(&self, requests: &[SearchRequest]) -> Result<Vec<SearchResult>> {
        let mut memories = Vec::with_capacity(requests.len());
        for (i, r) in requests.iter().enumerate() {
            let at =
                |e: Error| if requests.len() > 1 { Error::InvalidArgument(format!("request {i}: {e}")) } else { e };
            if r.query.trim().is_empty() {
                return Err(at(Error::InvalidArgument("empty query".into())));
            }
            let key = r.scope.key().map_err(at)?;
            let memory = self.inner.scopes.read().await.get(&key).cloned();
            memories.push(memory.ok_or_else(|| at(Error::NotFound(format!("no memories in scope {key}"))))?);
        }
        let requests = requests.to_vec();
        let inner = self.inner.clone();
        cpu(move || {
            use rayon::prelude::*;
            let texts: Vec<&str> = requests.iter().map(|r| r.query.as_str()).collect();
            let vectors = inner.embedder.embed(&texts)?;
            // Queries are analysed first, with one analyzer for the batch; retrieval runs in parallel.
            let mut analyzer = Analyzer::new()?;
            let queries: Vec<Query> = requests
                .iter()
                .zip(vectors.chunks_exact(EMBEDDING_DIM))
                .map(|(r, v)| Query::new(&mut analyzer, &r.query, v.to_vec()))
                .collect::<Result<_>>()?;
            requests
                .par_iter()
                .zip(memories.par_iter())
                .zip(queries.par_iter())
                .map(|((r, m), query)| {
                    let found = m.retrieve(query, Mode::Synapse)?;
                    let limit = r.limit.unwrap_or(usize::MAX);
                    let mut hits: Vec<_> = found.hits.iter().take(limit).collect();
                    hits.sort_by_key(|h| h.episode);
                    let results = hits
                        .iter()
                        .map(|h| {
                            let mut it = item(&r.scope, &m.episodes()[h.episode as usize]);
                            it.score = Some(h.signals.score);
                            it
                        })
                        .collect();
                    Ok(SearchResult { results, confidence: found.confidence, rejected: found.rejected })
                })
                .collect()
        })
        .await
    }

    /// One memory by id.
    pub async fn get(&self, id: &str) -> Result<MemoryItem> {
        let (key, memory) = self.locate(id).await?;
        let scope = Scope::from_key(&key).unwrap_or_default();
        let e = memory.episodes().iter().find(|e| e.turn_id == id).ok_or_else(|| unknown(id))?;
        Ok(item(&scope, e))
    }

    /// A page of a scope's memories, oldest first (an unknown scope has none).
    pub async fn get_all(&self, scope: &Scope, page: Page) -> Result<Vec<MemoryItem>> {
        let key = scope.key()?;
        let memory = self.inner.scopes.read().await.get(&key).cloned();
        Ok(memory
            .map(|m| m.episodes().iter().skip(page.offset).take(page.limit).map(|e| item(scope, e)).collect())
            .unwrap_or_default())
    }

    /// Deletes one memory: from the stored episodes, the lexical index, the embeddings and
    /// the graph of its scope; the history records it.
    pub async fn delete(&self, id: &str) -> Result<()> {
        let _write = self.inner.writer.lock().await;
        let (key, _) = self.locate(id).await?;
        let mut episodes = self.episodes_of(&key).await;
        let Some(at) = episodes.iter().position(|e| e.turn_id == id) else { return Err(unknown(id)) };
        let gone = episodes.remove(at);
        let event = deletion(&gone);
        self.commit(&key, episodes, &[event], true).await
    }

    /// Deletes every memory of a scope; returns how many.
    pub async fn delete_all(&self, scope: &Scope) -> Result<usize> {
        let key = scope.key()?;
        let _write = self.inner.writer.lock().await;
        let episodes = self.episodes_of(&key).await;
        let events: Vec<HistoryEvent> = episodes.iter().map(deletion).collect();
        self.commit(&key, Vec::new(), &events, true).await?;
        Ok(events.len())
    }

    /// What happened to a memory, oldest first (kept after it is deleted).
    pub async fn history(&self, id: &str) -> Result<Vec<HistoryEvent>> {
        let events = Store::open(&self.inner.root).await?.history(Some(id)).await?;
        if events.is_empty() {
            return Err(unknown(id));
        }
        Ok(events)
    }

    async fn locate(&self, id: &str) -> Result<(String, Arc<Memory>)> {
        let key = self.inner.ids.read().await.get(id).cloned().ok_or_else(|| unknown(id))?;
        let memory = self.inner.scopes.read().await.get(&key).cloned().ok_or_else(|| unknown(id))?;
        Ok((key, memory))
    }

    async fn episodes_of(&self, key: &str) -> Vec<Episode> {
        self.inner.scopes.read().await.get(key).map(|m| m.episodes().to_vec()).unwrap_or_default()
    }

    /// Writes `episodes` as the whole of scope `key` (none: the scope is removed) with
    /// `events` in the history, in one store transaction; then swaps in the new index. With
    /// `purge` the store keeps no file holding what was removed (compaction, then old
    /// versions deleted).
    async fn commit(&self, key: &str, mut episodes: Vec<Episode>, events: &[HistoryEvent], purge: bool) -> Result<()> {
        for (i, e) in episodes.iter_mut().enumerate() {
            e.position = i as u32;
        }
        let memory = if episodes.is_empty() {
            None
        } else {
            let inner = self.inner.clone();
            let key = key.to_string();
            Some(
                cpu(move || {
                    let texts: Vec<String> = episodes.iter().map(|e| e.embedding_text()).collect();
                    let dated: Vec<(&str, Option<DateTime<Utc>>)> =
                        texts.iter().zip(&episodes).map(|(t, e)| (t.as_str(), e.timestamp)).collect();
                    let graph =
                        build_graph(&dated, &inner.config.graph, &mut |labels: &[String]| inner.embed_labels(labels))?;
                    Memory::new(&key, episodes, graph, inner.config.retrieve.clone())
                })
                .await?,
            )
        };
        let mut txn = Store::begin_write(&self.inner.root).await?;
        txn.remove_conversation(key).await?;
        if let Some(m) = &memory {
            // The episodes as the new index holds them.
            let episodes = m.episodes();
            let turns: Vec<Turn> = episodes
                .iter()
                .map(|e| Turn {
                    id: e.turn_id.clone(),
                    speaker: e.speaker.clone(),
                    text: e.text.clone(),
                    image_caption: None,
                    timestamp: e.timestamp,
                    position: e.position,
                })
                .collect();
            let refs: Vec<&Turn> = turns.iter().collect();
            let embeddings: Vec<f32> = episodes.iter().flat_map(|e| e.embedding.iter().copied()).collect();
            txn.append_episodes(key, &vec![1; turns.len()], &refs, &embeddings).await?;
            let ids: Vec<&str> = turns.iter().map(|t| t.id.as_str()).collect();
            txn.put_graph(key, m.graph(), &ids).await?;
            let conversation = Conversation {
                id: key.to_string(),
                format: SourceFormat::Api,
                sessions: vec![Session { index: 1, date: None, turns }],
                questions: Vec::new(),
            };
            txn.put_conversation(&conversation, "api").await?;
        }
        txn.append_history(events).await?;
        if purge {
            txn.compact().await?;
        }
        let store = txn.commit().await?;
        if purge {
            store.purge_old_versions().await?;
        }
        let mut ids = self.inner.ids.write().await;
        for e in events {
            match e.event.as_str() {
                "ADD" => ids.insert(e.memory_id.clone(), key.to_string()),
                _ => ids.remove(&e.memory_id),
            };
        }
        let mut scopes = self.inner.scopes.write().await;
        match memory {
            Some(m) => scopes.insert(key.to_string(), Arc::new(m)),
            None => scopes.remove(key),
        };
        Ok(())
    }
}

impl Inner {
    /// Label embeddings, from the cache where it has them.
    fn embed_labels(&self, labels: &[String]) -> Result<Vec<f32>> {
        let poisoned = || Error::InvalidArgument("label cache poisoned".into());
        let missing: Vec<String> = {
            let cache = self.labels.lock().map_err(|_| poisoned())?;
            let mut m: Vec<String> = labels.iter().filter(|l| !cache.contains_key(*l)).cloned().collect();
            m.sort();
            m.dedup();
            m
        };
        let fresh = if missing.is_empty() { Vec::new() } else { self.embedder.embed(&missing)? };
        let mut cache = self.labels.lock().map_err(|_| poisoned())?;
        for (l, v) in missing.into_iter().zip(fresh.chunks_exact(EMBEDDING_DIM)) {
            cache.insert(l, v.to_vec());
        }
        let mut out = Vec::with_capacity(labels.len() * EMBEDDING_DIM);
        for l in labels {
            out.extend_from_slice(cache.get(l).ok_or_else(poisoned)?);
        }
        Ok(out)
    }
}

/// The [`Service`] for scripts and synchronous code: the same operations, each blocking on a
/// runtime of its own. Not for use inside an async runtime (use [`Service`] there).
#[derive(Debug)]
pub struct BlockingService {
    runtime: tokio::runtime::Runtime,
    service: Service,
}

impl BlockingService {
    /// [`Service::open`].
    pub fn open(root: &Path, config: Config) -> Result<BlockingService> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::io("<tokio runtime>", e))?;
        let service = runtime.block_on(Service::open(root, config))?;
        Ok(BlockingService { runtime, service })
    }

    /// The async handle, to share with async code.
    pub fn service(&self) -> &Service {
        &self.service
    }

    /// [`Service::add`].
    pub fn add(&self, scope: &Scope, messages: Vec<Message>) -> Result<Vec<MemoryItem>> {
        self.runtime.block_on(self.service.add(scope, messages))
    }

    /// [`Service::search`].
    pub fn search(&self, request: &SearchRequest) -> Result<SearchResult> {
        self.runtime.block_on(self.service.search(request))
    }

    /// [`Service::search_batch`].
    pub fn search_batch(&self, requests: &[SearchRequest]) -> Result<Vec<SearchResult>> {
        self.runtime.block_on(self.service.search_batch(requests))
    }

    /// [`Service::get`].
    pub fn get(&self, id: &str) -> Result<MemoryItem> {
        self.runtime.block_on(self.service.get(id))
    }

    /// [`Service::get_all`].
    pub fn get_all(&self, scope: &Scope, page: Page) -> Result<Vec<MemoryItem>> {
        self.runtime.block_on(self.service.get_all(scope, page))
    }

    /// [`Service::delete`].
    pub fn delete(&self, id: &str) -> Result<()> {
        self.runtime.block_on(self.service.delete(id))
    }

    /// [`Service::delete_all`].
    pub fn delete_all(&self, scope: &Scope) -> Result<usize> {
        self.runtime.block_on(self.service.delete_all(scope))
    }

    /// [`Service::history`].
    pub fn history(&self, id: &str) -> Result<Vec<HistoryEvent>> {
        self.runtime.block_on(self.service.history(id))
    }
}

fn item(scope: &Scope, e: &Episode) -> MemoryItem {
    MemoryItem {
        id: e.turn_id.clone(),
        memory: e.text.clone(),
        role: e.speaker.clone(),
        timestamp: e.timestamp,
        scope: scope.clone(),
        score: None,
    }
}

fn deletion(e: &Episode) -> HistoryEvent {
    HistoryEvent {
        memory_id: e.turn_id.clone(),
        conversation: e.conversation.clone(),
        event: "DELETE".into(),
        at: Utc::now(),
    }
}

fn unknown(id: &str) -> Error {
    Error::NotFound(format!("no memory with id '{}'", id.escape_debug()))
}

/// A random 128-bit id in hex (as a UUID v4 would be, without the dashes).
fn new_id() -> String {
    use rand::RngExt;
    format!("{:032x}", rand::rng().random::<u128>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_keys_round_trip_and_refuse_bad_ids() {
        let s = Scope { user_id: Some("alice".into()), agent_id: None, run_id: Some("r1".into()) };
        let key = s.key().unwrap();
        assert_eq!(key, "api:user=alice;agent=;run=r1");
        assert_eq!(Scope::from_key(&key), Some(s));
        assert!(Scope::default().key().unwrap_err().to_string().contains("needs a user_id"));
        for bad in ["", "a;b", "a=b", "tab\there"] {
            let err = Scope::user(bad).key().unwrap_err().to_string();
            assert!(err.contains("user_id"), "{bad:?}: {err}");
        }
        assert!(Scope::user(&"x".repeat(129)).key().is_err());
        assert_eq!(Scope::from_key("conv-26"), None);
    }

    #[test]
    fn ids_are_unique_hex() {
        let (a, b) = (new_id(), new_id());
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
    }
}
