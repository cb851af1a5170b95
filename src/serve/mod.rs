//! The serving API: an async handle over one store that agents (or `myelin serve`) call to add,
//! search, list and delete memories in isolated scopes. Names follow mem0's: a scope is a
//! `user_id` / `agent_id` / `run_id`, a memory is one stored turn with an id. A message longer
//! than `ingest.passage_pieces` word pieces is stored as passages (episodes `<id>`, `<id>#1`, …,
//! as ingest does) that together are the message: every part of it is embedded, and the API
//! shows the memory whole, once.
//!
//! Each scope is one conversation of the store (format `api`) with its own graph, so
//! activation can never cross scopes. A service that writes holds the store's [`Writer`] lock
//! for its whole life (its scopes are a view of the store that only it may commit from); a
//! read-only one ([`Service::open_read_only`]) takes no lock and reloads the scopes another
//! process's commits changed. Two workers do the heavy work, off the async runtime:
//! - the writer (a task) takes every write waiting as one group: one embedding pass for all
//!   new messages, each touched scope's graph extended by its builder (rebuilt only after a
//!   deletion), one store transaction with a history row per change; then it swaps in the new
//!   scopes and answers. Its CPU work runs on a background embedder whose threads yield the
//!   cores to searches; its queue is bounded (`serve.write_queue`) and one add carries at most
//!   `serve.max_add_bytes`. Searches read the last committed state and never wait for a write.
//! - the search thread (`searcher`) batches concurrent searches into one embedding pass and
//!   one ranking dispatch, and owns the GPU queue and the resident graphs.
//!
//! Owns scopes, memory ids, the write path of the API and the in-memory index of every scope.
//! Must not parse HTTP or JSON-RPC (that is `serve::http`) nor rank (that is `retrieve`).

pub mod growth;
pub mod http;
pub mod load;
pub mod mcp;
mod searcher;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tokio::sync::{RwLock, mpsc, oneshot};

use crate::config::Config;
use crate::conversation::{PASSAGE_MARK, SourceFormat, turn_of};
use crate::embed::{EMBEDDING_DIM, Embedder};
use crate::error::{Error, Result};
use crate::graph::build::LabelEmbedder;
use crate::graph::{GraphBuilder, labels_of};
use crate::pipeline::stored_memory;
use crate::retrieve::engine::{Choice, choose};
use crate::retrieve::{Memory, Retrieval};
use crate::store::{ConversationSummary, Episode, HistoryEvent, Store, Table, Writer};
use searcher::{Msg, Search, Searcher};

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

impl SearchResult {
    /// The answer for a scope that holds no memory: nothing found, nothing known.
    pub fn nothing() -> SearchResult {
        SearchResult { results: Vec::new(), confidence: 0.0, rejected: true }
    }
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

/// What a service has done since it opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Stats {
    /// Write requests committed (adds, deletions).
    pub writes: u64,
    /// Store transactions they took (concurrent writes share one).
    pub commits: u64,
    /// Searches answered.
    pub searches: u64,
    /// Batches they took (concurrent searches share one).
    pub batches: u64,
    /// Searches ranked on the GPU.
    pub gpu_searches: u64,
}

/// The counters behind [`Stats`], shared by the writer and the search thread.
#[derive(Debug, Default)]
struct Counters {
    writes: AtomicU64,
    commits: AtomicU64,
    searches: AtomicU64,
    batches: AtomicU64,
    gpu_searches: AtomicU64,
}

impl Counters {
    fn add(counter: &AtomicU64, n: usize) {
        counter.fetch_add(n as u64, Ordering::Relaxed);
    }

    fn snapshot(&self) -> Stats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Stats {
            writes: get(&self.writes),
            commits: get(&self.commits),
            searches: get(&self.searches),
            batches: get(&self.batches),
            gpu_searches: get(&self.gpu_searches),
        }
    }
}

/// An async handle on a served store: cheap to clone, safe to share across tasks. The
/// service's threads stop when the last clone is dropped.
#[derive(Clone)]
pub struct Service {
    inner: Arc<Inner>,
    /// The writer's queue (`None`: read-only).
    writes: Option<mpsc::Sender<WriteJob>>,
    /// The writer task, awaited by [`Service::close`] (`None`: read-only).
    writer_task: Option<Arc<std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>>>,
    searcher: Searcher,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service").field("root", &self.inner.root).field("backend", &self.inner.backend).finish()
    }
}

struct Inner {
    root: PathBuf,
    config: Config,
    /// The same model on threads that yield to searches: every CPU-heavy step of a write.
    background: Embedder,
    /// The store's writer lock, held for the service's life (`None`: read-only).
    writer: Option<Writer>,
    /// Where searches are ranked, and why.
    backend: Choice,
    counters: Arc<Counters>,
    /// Scope key → its memory, as last committed.
    scopes: RwLock<HashMap<String, Arc<Memory>>>,
    /// Memory id → scope key.
    ids: RwLock<HashMap<String, String>>,
    /// The store as last committed (history reads it).
    store: RwLock<Store>,
    /// Scope key → its stored summary when loaded: what a read-only service compares to see
    /// which scopes a commit changed (a writer, the only one to commit, never reads it).
    loaded: RwLock<HashMap<String, ConversationSummary>>,
    /// Concept label → its embedding: building a scope's graph embeds only labels not seen
    /// recently.
    labels: std::sync::Mutex<LabelCache>,
}

/// A change the writer applies.
enum Change {
    Add { key: String, scope: Scope, messages: Vec<Message> },
    Delete { id: String },
    DeleteAll { key: String },
}

/// What a change did.
enum Done {
    Added(Vec<MemoryItem>),
    Deleted(usize),
}

struct WriteJob {
    change: Change,
    reply: oneshot::Sender<Result<Done>>,
}

/// Runs CPU-heavy work off the async runtime's threads.
async fn cpu<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f).await.map_err(|e| Error::InvalidArgument(format!("worker failed: {e}")))?
}

impl Service {
    /// Opens the store at `root` (created on first write) as its one writer, loads every scope
    /// in it, and starts the search thread (on the GPU `config.gpu` chooses) and the writer.
    /// Fails with [`Error::Locked`] while another writer (a server, an ingest, another
    /// service) holds the store; the lock is held until the last clone of the service is
    /// dropped.
    pub async fn open(root: &Path, config: Config) -> Result<Service> {
        let writer = Writer::acquire(root)?;
        Service::start(root, config, Some(writer)).await
    }

    /// Opens the store at `root` without writing it, beside the process that does: searches,
    /// lists, gets and history see its last committed state, checked every
    /// `serve.reload_ms`; adds and deletions fail with [`Error::ReadOnly`].
    pub async fn open_read_only(root: &Path, config: Config) -> Result<Service> {
        Service::start(root, config, None).await
    }

    async fn start(root: &Path, config: Config, writer: Option<Writer>) -> Result<Service> {
        config.retrieve.validate()?;
        config.serve.validate()?;
        let embedder = Arc::new(Embedder::load(&config.embed)?);
        let background = embedder.background()?;
        let store = Store::open(root).await?;
        let (scopes, loaded) = load_scopes(&store, &config, &HashMap::new()).await?;
        let scopes: HashMap<String, Arc<Memory>> = scopes.into_iter().filter_map(|(k, m)| Some((k, m?))).collect();
        let ids: HashMap<String, String> = scopes.iter().flat_map(|(k, m)| ids_of(k, m)).collect();
        // No size rule: scopes grow while the server runs, and every batch the GPU ranks leaves
        // the cores to the embedder.
        let (gpu, backend) = choose(&config.gpu, &config.retrieve, None)?;
        let counters = Arc::new(Counters::default());
        let searcher = Searcher::start(embedder.clone(), gpu, &scopes, config.serve.max_batch, counters.clone())?;
        let generation = store.generation();
        let read_only = writer.is_none();
        let (queue, reload) = (config.serve.write_queue, std::time::Duration::from_millis(config.serve.reload_ms));
        let inner = Arc::new(Inner {
            counters,
            root: root.to_path_buf(),
            labels: std::sync::Mutex::new(LabelCache::new(config.serve.label_cache)),
            config,
            background,
            backend,
            writer,
            scopes: RwLock::new(scopes),
            ids: RwLock::new(ids),
            store: RwLock::new(store),
            loaded: RwLock::new(loaded),
        });
        let (writes, writer_task) = if read_only {
            tokio::spawn(follow(Arc::downgrade(&inner), searcher.clone(), generation, reload));
            (None, None)
        } else {
            let (writes, rx) = mpsc::channel(queue);
            let task = tokio::spawn(write_loop(inner.clone(), rx, searcher.clone()));
            (Some(writes), Some(Arc::new(std::sync::Mutex::new(Some(task)))))
        };
        Ok(Service { inner, writes, writer_task, searcher })
    }

    /// Drops this handle. If it is the last, first waits until the writer has finished the
    /// group it was committing and let go of the store, so that the store can be opened
    /// again (by this process or another) as soon as this returns. Dropping the last handle
    /// without `close` stops the writer too, a moment later.
    pub async fn close(mut self) {
        if let Some(task) = self.let_go() {
            // A panic in the writer has already failed that group's requests.
            let _ = task.await;
        }
    }

    /// Drops this handle's side of the write queue; if it was the last, the queue is closed
    /// (the writer ends after its current group) and the writer task is returned to wait on.
    fn let_go(&mut self) -> Option<tokio::task::JoinHandle<()>> {
        let last = self.writes.take().is_some_and(|w| w.strong_count() == 1);
        let task = self.writer_task.take()?;
        if !last {
            return None;
        }
        task.lock().ok().and_then(|mut h| h.take())
    }

    /// Whether this service only reads its store.
    pub fn read_only(&self) -> bool {
        self.writes.is_none()
    }

    /// Where searches are ranked, and why.
    pub fn backend(&self) -> &Choice {
        &self.inner.backend
    }

    /// What the service has done since it opened.
    pub fn stats(&self) -> Stats {
        self.inner.counters.snapshot()
    }

    async fn write(&self, change: Change) -> Result<Done> {
        let Some(writes) = &self.writes else { return Err(Error::ReadOnly { path: self.inner.root.clone() }) };
        let (reply, answer) = oneshot::channel();
        writes.try_send(WriteJob { change, reply }).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => Error::Busy(format!(
                "{} writes are already waiting for the writer (serve.write_queue); retry shortly",
                self.inner.config.serve.write_queue
            )),
            mpsc::error::TrySendError::Closed(_) => Error::Batch("the writer has stopped".into()),
        })?;
        answer.await.map_err(|_| Error::Batch("the writer dropped the request".into()))?
    }

    /// Remembers `messages` in `scope`; returns them with their new ids. Searchable when this
    /// returns; durable in the store. Concurrent writes are committed together.
    pub async fn add(&self, scope: &Scope, messages: Vec<Message>) -> Result<Vec<MemoryItem>> {
        let key = scope.key()?;
        if messages.is_empty() {
            return Err(Error::InvalidArgument("no message to add".into()));
        }
        for (i, m) in messages.iter().enumerate() {
            if m.content.trim().is_empty() {
                return Err(Error::InvalidArgument(format!("message {i}: empty content")));
            }
            if m.role.trim().is_empty() {
                return Err(Error::InvalidArgument(format!("message {i}: empty role")));
            }
        }
        let (bytes, max) =
            (messages.iter().map(|m| m.content.len()).sum::<usize>(), self.inner.config.serve.max_add_bytes);
        if bytes > max {
            return Err(Error::TooLarge(format!(
                "the messages hold {bytes} bytes of text, over the limit of {max} for one add (serve.max_add_bytes)"
            )));
        }
        match self.write(Change::Add { key, scope: scope.clone(), messages }).await? {
            Done::Added(items) => Ok(items),
            Done::Deleted(_) => Err(Error::Batch("the writer answered an add with a deletion".into())),
        }
    }

    /// The memories of `request.scope` that answer `request.query`, in time order. A scope
    /// that holds no memory answers [`SearchResult::nothing`].
    pub async fn search(&self, request: &SearchRequest) -> Result<SearchResult> {
        self.search_batch(std::slice::from_ref(request)).await.remove(0)
    }

    /// Many searches at once, answered in one batch of the search thread (with whatever other
    /// searches are waiting): one embedding pass, one ranking dispatch. Each request is
    /// answered on its own, in request order: a bad one fails alone.
    pub async fn search_batch(&self, requests: &[SearchRequest]) -> Vec<Result<SearchResult>> {
        let mut out: Vec<Option<Result<SearchResult>>> = (0..requests.len()).map(|_| None).collect();
        let (mut searches, mut at) = (Vec::new(), Vec::new());
        {
            let scopes = self.inner.scopes.read().await;
            for (i, r) in requests.iter().enumerate() {
                if r.query.trim().is_empty() {
                    out[i] = Some(Err(Error::InvalidArgument("empty query".into())));
                    continue;
                }
                let key = match r.scope.key() {
                    Ok(k) => k,
                    Err(e) => {
                        out[i] = Some(Err(e));
                        continue;
                    }
                };
                match scopes.get(&key) {
                    Some(memory) => {
                        searches.push(Search { request: r.clone(), key, memory: memory.clone() });
                        at.push(i);
                    }
                    None => out[i] = Some(Ok(SearchResult::nothing())),
                }
            }
        }
        if !searches.is_empty() {
            let (reply, answer) = oneshot::channel();
            let found = match self.searcher.send(Msg::Search(searches, reply)) {
                Ok(()) => {
                    answer.await.unwrap_or_else(|_| batch_failed(at.len(), "the search thread dropped the request"))
                }
                Err(e) => batch_failed(at.len(), &e.to_string()),
            };
            for (i, r) in at.into_iter().zip(found) {
                out[i] = Some(r);
            }
        }
        out.into_iter().map(|r| r.unwrap_or_else(|| Err(Error::Batch("search was not answered".into())))).collect()
    }

    /// One memory by id.
    pub async fn get(&self, id: &str) -> Result<MemoryItem> {
        let key = self.inner.ids.read().await.get(id).cloned().ok_or_else(|| unknown(id))?;
        let memory = self.inner.scopes.read().await.get(&key).cloned().ok_or_else(|| unknown(id))?;
        let scope = Scope::from_key(&key).unwrap_or_default();
        let at = memory.episodes().iter().position(|e| e.turn_id == id).ok_or_else(|| unknown(id))?;
        Ok(item(&scope, passages_at(memory.episodes(), at)))
    }

    /// A page of a scope's memories, oldest first (an unknown scope has none).
    pub async fn get_all(&self, scope: &Scope, page: Page) -> Result<Vec<MemoryItem>> {
        let key = scope.key()?;
        let memory = self.inner.scopes.read().await.get(&key).cloned();
        Ok(memory
            .map(|m| memories_of(m.episodes()).skip(page.offset).take(page.limit).map(|p| item(scope, p)).collect())
            .unwrap_or_default())
    }

    /// Episodes (passages) in a scope's memory: more than its memories where long messages
    /// were cut (an unknown scope has none).
    pub async fn scope_episodes(&self, scope: &Scope) -> Result<usize> {
        let key = scope.key()?;
        Ok(self.inner.scopes.read().await.get(&key).map_or(0, |m| m.episodes().len()))
    }

    /// Deletes one memory: from the stored episodes (compacted, old versions purged), the
    /// lexical index, the embeddings, the graph of its scope and the GPU buffers; the history
    /// records it.
    pub async fn delete(&self, id: &str) -> Result<()> {
        self.write(Change::Delete { id: id.to_string() }).await.map(|_| ())
    }

    /// Deletes every memory of a scope; returns how many.
    pub async fn delete_all(&self, scope: &Scope) -> Result<usize> {
        let key = scope.key()?;
        match self.write(Change::DeleteAll { key }).await? {
            Done::Deleted(n) => Ok(n),
            Done::Added(_) => Err(Error::Batch("the writer answered a deletion with an add".into())),
        }
    }

    /// What happened to a memory, oldest first (kept after it is deleted).
    pub async fn history(&self, id: &str) -> Result<Vec<HistoryEvent>> {
        let events = self.inner.store.read().await.history(Some(id)).await?;
        if events.is_empty() {
            return Err(unknown(id));
        }
        Ok(events)
    }
}

/// Scope key → its memory (`None`: gone), for the scopes of `store` whose stored summary is not
/// the one in `known`; and the summary of every scope it holds.
type ChangedScopes = (HashMap<String, Option<Arc<Memory>>>, HashMap<String, ConversationSummary>);

/// The scopes of `store` that changed since `known` (all of them, for an empty `known`).
async fn load_scopes(
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
fn ids_of<'a>(key: &'a str, memory: &'a Memory) -> impl Iterator<Item = (String, String)> + 'a {
    memory
        .episodes()
        .iter()
        .filter(|e| turn_of(&e.turn_id) == e.turn_id)
        .map(move |e| (e.turn_id.clone(), key.to_string()))
}

/// A read-only service's follower: every `every`, a look at the store's committed generation;
/// a new one reloads the scopes it changed. Stops when the service is dropped.
async fn follow(inner: Weak<Inner>, searcher: Searcher, mut seen: u64, every: std::time::Duration) {
    loop {
        tokio::time::sleep(every).await;
        let Some(inner) = inner.upgrade() else { return };
        match Store::committed_generation(&inner.root) {
            Ok(g) if g == seen => {}
            // A purge by the writer can remove what this read was opening: tried again next time.
            Ok(_) => match inner.reload(&searcher).await {
                Ok(g) => seen = g,
                Err(e) => tracing::warn!("following the writer of {}: {e}", inner.root.display()),
            },
            Err(e) => tracing::warn!("following the writer of {}: {e}", inner.root.display()),
        }
    }
}

impl Inner {
    /// Reloads the scopes the store's last commit changed; returns its generation.
    async fn reload(&self, searcher: &Searcher) -> Result<u64> {
        let store = Store::open(&self.root).await?;
        let known = self.loaded.read().await.clone();
        let (changed, summaries) = load_scopes(&store, &self.config, &known).await?;
        // A scope that lost memories must leave no copy on the GPU either.
        let shrank = changed.iter().any(|(k, m)| {
            let before = known.get(k).map_or(0, |c| c.turns as usize);
            m.as_ref().map_or(before > 0, |m| m.episodes().len() < before)
        });
        {
            let mut ids = self.ids.write().await;
            let mut scopes = self.scopes.write().await;
            ids.retain(|_, k| !changed.contains_key(k));
            for (key, memory) in changed {
                match &memory {
                    Some(m) => {
                        ids.extend(ids_of(&key, m));
                        scopes.insert(key.clone(), m.clone());
                    }
                    None => {
                        scopes.remove(&key);
                    }
                }
                let _ = searcher.send(Msg::Scope(key, memory));
            }
        }
        if shrank {
            let _ = searcher.send(Msg::Compact);
        }
        *self.loaded.write().await = summaries;
        let generation = store.generation();
        *self.store.write().await = store;
        Ok(generation)
    }
}

/// The answer of every search of a batch that failed whole.
fn batch_failed(n: usize, message: &str) -> Vec<Result<SearchResult>> {
    (0..n).map(|_| Err(Error::Batch(message.to_string()))).collect()
}

/// A scope a group of writes changes: its memory as committed, the episodes after the group
/// (only the new ones until a deletion needs them all), how many of them the store holds, and
/// whether a deletion means it must be written anew.
struct Pending {
    base: Option<Arc<Memory>>,
    episodes: Vec<Episode>,
    /// `episodes` holds every episode of the scope, not only the new ones.
    whole: bool,
    stored: usize,
    rewrite: bool,
}

impl Pending {
    /// Episodes of the scope after the group so far.
    fn len(&self) -> usize {
        if self.whole { self.episodes.len() } else { self.stored + self.episodes.len() }
    }

    /// Every episode of the scope, the committed ones copied in first (what a deletion needs).
    fn whole(&mut self) -> &mut Vec<Episode> {
        if !self.whole {
            let mut all = self.base.as_ref().map(|m| m.episodes().to_vec()).unwrap_or_default();
            all.append(&mut self.episodes);
            self.episodes = all;
            self.whole = true;
        }
        &mut self.episodes
    }

    /// The episodes the group added (for a scope no deletion touched).
    fn added(&self) -> &[Episode] {
        if self.whole { &self.episodes[self.stored..] } else { &self.episodes }
    }
}

/// A scope built after a group of writes: its new memory (`None`: now empty), its memory as
/// committed before, the builder that made its graph, and the episodes to append to the store.
struct Built {
    key: String,
    memory: Option<Memory>,
    base: Option<Arc<Memory>>,
    builder: Option<GraphBuilder>,
    stored: usize,
    rewrite: bool,
}

/// The writer: takes every write waiting (up to `serve.max_write_batch`) as one group and
/// commits the group in one store transaction; writes that arrive meanwhile form the next
/// group. Each scope keeps the graph builder of its committed episodes, so an add pushes only
/// its new episodes; a deletion rebuilds the scope.
async fn write_loop(inner: Arc<Inner>, mut rx: mpsc::Receiver<WriteJob>, searcher: Searcher) {
    let mut builders: HashMap<String, GraphBuilder> = HashMap::new();
    while let Some(first) = rx.recv().await {
        let mut jobs = vec![first];
        while jobs.len() < inner.config.serve.max_write_batch {
            match rx.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        inner.commit_group(jobs, &mut builders, &searcher).await;
    }
}

impl Inner {
    /// Applies `jobs` in order and commits them together; answers each.
    async fn commit_group(
        self: &Arc<Self>,
        jobs: Vec<WriteJob>,
        builders: &mut HashMap<String, GraphBuilder>,
        searcher: &Searcher,
    ) {
        let texts: Vec<String> = jobs
            .iter()
            .flat_map(|j| match &j.change {
                Change::Add { messages, .. } => messages.iter().map(|m| m.content.clone()).collect(),
                _ => Vec::new(),
            })
            .collect();
        let t_embed = std::time::Instant::now();
        let (spans, vectors) = if texts.is_empty() {
            (Vec::new(), Vec::new())
        } else {
            let (inner, n) = (self.clone(), texts.len());
            let pieces = self.config.ingest.passage_pieces;
            let cut_and_embed = move || {
                let embedder = &inner.background;
                embedder.install(|| {
                    let spans = texts.iter().map(|t| embedder.passage_spans(t, pieces)).collect::<Result<Vec<_>>>()?;
                    let passages: Vec<&str> =
                        texts.iter().zip(&spans).flat_map(|(t, s)| s.iter().map(|r| t[r.clone()].trim())).collect();
                    Ok((spans, embedder.embed(&passages)?))
                })
            };
            match cpu(cut_and_embed).await {
                Ok(v) => v,
                Err(e) => {
                    let message = format!("embedding {n} messages: {e}");
                    for job in jobs {
                        let _ = job.reply.send(Err(Error::Batch(message.clone())));
                    }
                    return;
                }
            }
        };
        let embed_ms = t_embed.elapsed().as_secs_f64() * 1e3;
        let mut spans = spans.into_iter();
        let mut vectors = vectors.chunks_exact(EMBEDDING_DIM);
        let now = Utc::now();
        let mut touched: BTreeMap<String, Pending> = BTreeMap::new();
        let mut events: Vec<HistoryEvent> = Vec::new();
        let mut accepted: Vec<(oneshot::Sender<Result<Done>>, Done)> = Vec::new();
        // Ids this group added (to their scope) or deleted (to None).
        let mut group_ids: HashMap<String, Option<String>> = HashMap::new();
        for job in jobs {
            let done = match job.change {
                Change::Add { key, scope, messages } => {
                    let p = self.pending(&mut touched, &key).await;
                    let mut items = Vec::with_capacity(messages.len());
                    for m in messages {
                        let id = new_id();
                        events.push(HistoryEvent {
                            memory_id: id.clone(),
                            conversation: key.clone(),
                            event: "ADD".into(),
                            at: now,
                        });
                        group_ids.insert(id.clone(), Some(key.clone()));
                        let from = p.episodes.len();
                        for (k, r) in spans.next().unwrap_or_default().into_iter().enumerate() {
                            let position = p.len() as u32;
                            p.episodes.push(Episode {
                                conversation: key.clone(),
                                session: 1,
                                turn_id: if k == 0 { id.clone() } else { format!("{id}{PASSAGE_MARK}{k}") },
                                position,
                                speaker: m.role.clone(),
                                text: m.content[r].to_string(),
                                image_caption: None,
                                timestamp: Some(m.timestamp.unwrap_or(now)),
                                embedding: vectors.next().map(<[f32]>::to_vec).unwrap_or_default(),
                            });
                        }
                        items.push(item(&scope, &p.episodes[from..]));
                    }
                    Done::Added(items)
                }
                Change::Delete { id } => {
                    let key = match group_ids.get(&id) {
                        Some(k) => k.clone(),
                        None => self.ids.read().await.get(&id).cloned(),
                    };
                    let Some(key) = key else {
                        let _ = job.reply.send(Err(unknown(&id)));
                        continue;
                    };
                    let p = self.pending(&mut touched, &key).await;
                    let episodes = p.whole();
                    let Some(at) = episodes.iter().position(|e| e.turn_id == id) else {
                        let _ = job.reply.send(Err(unknown(&id)));
                        continue;
                    };
                    let n = passages_at(episodes, at).len();
                    let removed: Vec<Episode> = episodes.drain(at..at + n).collect();
                    events.extend(removed.first().map(deletion));
                    p.rewrite = true;
                    group_ids.insert(id, None);
                    Done::Deleted(1)
                }
                Change::DeleteAll { key } => {
                    let p = self.pending(&mut touched, &key).await;
                    let mut n = 0;
                    for e in p.whole().drain(..).filter(|e| turn_of(&e.turn_id) == e.turn_id) {
                        group_ids.insert(e.turn_id.clone(), None);
                        events.push(deletion(&e));
                        n += 1;
                    }
                    p.rewrite = true;
                    Done::Deleted(n)
                }
            };
            accepted.push((job.reply, done));
        }
        if accepted.is_empty() {
            return;
        }
        // A scope that lost episodes is rebuilt: its builder holds them.
        let work: Vec<(String, Pending, Option<GraphBuilder>)> = touched
            .into_iter()
            .map(|(k, p)| {
                let builder = builders.remove(&k).filter(|_| !p.rewrite);
                (k, p, builder)
            })
            .collect();
        let inner = self.clone();
        let t_build = std::time::Instant::now();
        let built = match cpu(move || {
            use rayon::prelude::*;
            inner.background.install(|| {
                work.into_par_iter()
                    .map(|(key, p, builder)| inner.build_scope(key, p, builder))
                    .collect::<Result<Vec<_>>>()
            })
        })
        .await
        {
            Ok(built) => {
                let build_ms = t_build.elapsed().as_secs_f64() * 1e3;
                let t_store = std::time::Instant::now();
                let stored = self.store_group(built, &events).await;
                tracing::debug!(embed_ms, build_ms, store_ms = t_store.elapsed().as_secs_f64() * 1e3, "commit");
                stored
            }
            Err(e) => Err(e),
        };
        let built = match built {
            Ok(b) => b,
            Err(e) => {
                // Nothing is published: the store rolls the abandoned versions back on the next write.
                let message = format!("writing {} requests: {e}", accepted.len());
                tracing::error!("{message}");
                let full = e.is_disk_full();
                for (reply, _) in accepted {
                    let _ = reply.send(Err(if full {
                        Error::DiskFull(format!(
                            "the disk of store {} is full (no space left on device): nothing of this write was kept; \
                             free space and retry",
                            self.root.display()
                        ))
                    } else {
                        Error::Batch(message.clone())
                    }));
                }
                return;
            }
        };
        let purge = built.iter().any(|b| b.rewrite);
        {
            let mut ids = self.ids.write().await;
            for e in &events {
                match e.event.as_str() {
                    "ADD" => ids.insert(e.memory_id.clone(), e.conversation.clone()),
                    _ => ids.remove(&e.memory_id),
                };
            }
            let mut scopes = self.scopes.write().await;
            for b in built {
                let memory = b.memory.map(Arc::new);
                match &memory {
                    Some(m) => scopes.insert(b.key.clone(), m.clone()),
                    None => scopes.remove(&b.key),
                };
                if let Some(builder) = b.builder {
                    builders.insert(b.key.clone(), builder);
                }
                // A stopped search thread fails the searches themselves; the write is done.
                let _ = searcher.send(Msg::Scope(b.key, memory));
            }
        }
        if purge {
            let _ = searcher.send(Msg::Compact);
        }
        Counters::add(&self.counters.commits, 1);
        Counters::add(&self.counters.writes, accepted.len());
        for (reply, done) in accepted {
            let _ = reply.send(Ok(done));
        }
    }

    /// The pending state of scope `key` in this group, from its committed state.
    async fn pending<'a>(&self, touched: &'a mut BTreeMap<String, Pending>, key: &str) -> &'a mut Pending {
        if !touched.contains_key(key) {
            let base = self.scopes.read().await.get(key).cloned();
            let stored = base.as_ref().map_or(0, |m| m.episodes().len());
            touched
                .insert(key.to_string(), Pending { base, episodes: Vec::new(), whole: false, stored, rewrite: false });
        }
        touched.get_mut(key).expect("inserted above")
    }

    /// The memory of a scope after a group: its builder takes the new episodes (all of them,
    /// on a fresh builder, when the scope has none or lost episodes), and its memory grows by
    /// them ([`Memory::extend`]) unless it lost some.
    fn build_scope(&self, key: String, mut p: Pending, builder: Option<GraphBuilder>) -> Result<Built> {
        let (stored, rewrite, base) = (p.stored, p.rewrite, p.base.clone());
        let done = |memory, builder| Built { key: key.clone(), memory, base: base.clone(), builder, stored, rewrite };
        if p.len() == 0 {
            return Ok(done(None, None));
        }
        let mut embed = |labels: &[String]| self.embed_labels(labels);
        if rewrite {
            let episodes = p.whole();
            for (i, e) in episodes.iter_mut().enumerate() {
                e.position = i as u32;
            }
            let builder = self.fresh_builder(episodes, &[], &mut embed)?;
            let graph = builder.clone().finish(&mut embed)?;
            let memory = Memory::new(&key, std::mem::take(episodes), graph, self.config.retrieve.clone())?;
            return Ok(done(Some(memory), Some(builder)));
        }
        let added = p.added();
        let mut builder = match builder {
            Some(b) => b,
            None => {
                // The first write to a scope since the service opened: its builder takes the
                // committed episodes first.
                let committed = base.as_ref().map_or(&[][..], |m| m.episodes());
                self.fresh_builder(committed, added, &mut embed)?
            }
        };
        for e in added {
            builder.push_episode(&e.embedding_text(), e.timestamp, &mut embed)?;
        }
        let graph = builder.clone().finish(&mut embed)?;
        let memory = match &base {
            Some(m) => m.extend(added.to_vec(), graph)?,
            None => Memory::new(&key, added.to_vec(), graph, self.config.retrieve.clone())?,
        };
        Ok(done(Some(memory), Some(builder)))
    }

    /// A fresh builder that has taken `episodes`, the labels they and `later` (the episodes
    /// it will take next) ask for embedded first in one pass, not one per window.
    fn fresh_builder(
        &self,
        episodes: &[Episode],
        later: &[Episode],
        embed: &mut LabelEmbedder<'_>,
    ) -> Result<GraphBuilder> {
        let texts: Vec<String> = episodes.iter().chain(later).map(|e| e.embedding_text()).collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        embed(&labels_of(&refs, &self.config.graph))?;
        let mut builder = GraphBuilder::new(self.config.graph.clone())?;
        for (e, text) in episodes.iter().zip(&texts) {
            builder.push_episode(text, e.timestamp, embed)?;
        }
        Ok(builder)
    }

    /// Writes a group's scopes and `events` in one store transaction: new episodes appended
    /// (a scope that lost some is written anew), graphs and summaries replaced, history
    /// appended; after a deletion, and every `serve.compact_every` commits, the store is
    /// compacted and its old versions purged.
    async fn store_group(&self, built: Vec<Built>, events: &[HistoryEvent]) -> Result<Vec<Built>> {
        let writer = self.writer.as_ref().ok_or_else(|| Error::ReadOnly { path: self.root.clone() })?;
        let mut txn = writer.begin().await?;
        let keys: Vec<&str> = built.iter().map(|b| b.key.as_str()).collect();
        let rewritten: Vec<&str> = built.iter().filter(|b| b.rewrite).map(|b| b.key.as_str()).collect();
        let emptied: Vec<&str> = built.iter().filter(|b| b.memory.is_none()).map(|b| b.key.as_str()).collect();
        txn.remove_conversations(&rewritten, &[Table::Episodes]).await?;
        txn.remove_conversations(&emptied, &[Table::Nodes, Table::Edges]).await?;
        txn.remove_conversations(&keys, &[Table::Conversations]).await?;
        let live: Vec<(&Built, &Memory)> = built.iter().filter_map(|b| b.memory.as_ref().map(|m| (b, m))).collect();
        let rows: Vec<&Episode> =
            live.iter().flat_map(|(b, m)| m.episodes()[if b.rewrite { 0 } else { b.stored }..].iter()).collect();
        txn.append_episode_rows(&rows).await?;
        let ids: Vec<Vec<&str>> =
            live.iter().map(|(_, m)| m.episodes().iter().map(|e| e.turn_id.as_str()).collect()).collect();
        // A scope that only grew rewrites the graph rows that changed; one written anew, or
        // new, is written whole.
        let mut grown: Vec<(&str, &crate::graph::Graph, &crate::graph::Graph, &[&str])> = Vec::new();
        let mut whole: Vec<(&str, &crate::graph::Graph, &[&str])> = Vec::new();
        for ((b, m), ids) in live.iter().zip(&ids) {
            match (&b.base, b.rewrite) {
                (Some(old), false) => grown.push((b.key.as_str(), old.graph(), m.graph(), ids.as_slice())),
                _ => whole.push((b.key.as_str(), m.graph(), ids.as_slice())),
            }
        }
        txn.update_graphs(&grown).await?;
        txn.put_graphs(&whole).await?;
        let now = Utc::now();
        let summaries: Vec<ConversationSummary> = live
            .iter()
            .map(|(b, m)| ConversationSummary {
                id: b.key.clone(),
                format: SourceFormat::Api.as_str().to_string(),
                source: "api".into(),
                sessions: 1,
                turns: m.episodes().len() as u32,
                questions: 0,
                unresolved_evidence: 0,
                ingested_at: now,
            })
            .collect();
        txn.append_summaries(&summaries).await?;
        txn.append_history(events).await?;
        // A deletion must leave no trace on disk; other writes leave the scopes' replaced graph
        // rows behind, reclaimed every `compact_every` commits.
        let every = self.config.serve.compact_every as u64;
        let purge = !rewritten.is_empty() || (self.counters.commits.load(Ordering::Relaxed) + 1).is_multiple_of(every);
        if purge {
            txn.compact().await?;
        }
        let store = txn.commit().await?;
        // Committed: from here on the write is done whatever fails. A purge that fails leaves
        // old versions on disk for the next one; it must not report the write as failed.
        if purge && let Err(e) = store.purge_old_versions().await {
            tracing::warn!("purging old versions of {}: {e}", self.root.display());
        }
        *self.store.write().await = store;
        Ok(built)
    }

    /// Label embeddings, from the cache where it has them.
    fn embed_labels(&self, labels: &[String]) -> Result<Vec<f32>> {
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
}

/// Label → embedding, bounded: two generations, the older dropped whole when the newer fills
/// half the capacity; a hit in the older moves the label to the newer (least recently used
/// labels go first).
struct LabelCache {
    capacity: usize,
    new: HashMap<String, Vec<f32>>,
    old: HashMap<String, Vec<f32>>,
}

impl LabelCache {
    fn new(capacity: usize) -> LabelCache {
        LabelCache { capacity: capacity.max(2), new: HashMap::new(), old: HashMap::new() }
    }

    fn contains(&self, label: &str) -> bool {
        self.new.contains_key(label) || self.old.contains_key(label)
    }

    fn get(&mut self, label: &str) -> Option<Vec<f32>> {
        self.new.get(label).or_else(|| self.old.get(label)).cloned()
    }

    fn insert(&mut self, label: String, v: Vec<f32>) {
        self.old.remove(&label);
        self.new.insert(label, v);
        if self.new.len() >= self.capacity / 2 {
            self.old = std::mem::take(&mut self.new);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.new.len() + self.old.len()
    }
}

/// A search's answer: the retrieved memories of `request`'s scope in time order.
/// A memory found through several of its passages counts once, with its best passage's score.
fn answer(request: &SearchRequest, memory: &Memory, found: &Retrieval) -> SearchResult {
    let limit = request.limit.unwrap_or(usize::MAX);
    let episodes = memory.episodes();
    // (first passage, score), best first.
    let mut hits: Vec<(usize, f32)> = Vec::new();
    for h in &found.hits {
        let mut first = h.episode as usize;
        while first > 0 && turn_of(&episodes[first].turn_id) != episodes[first].turn_id {
            first -= 1;
        }
        if hits.len() < limit && !hits.iter().any(|&(f, _)| f == first) {
            hits.push((first, h.signals.score));
        }
    }
    hits.sort_by_key(|&(first, _)| first);
    let results = hits
        .into_iter()
        .map(|(first, score)| {
            let mut it = item(&request.scope, passages_at(episodes, first));
            it.score = Some(score);
            it
        })
        .collect();
    SearchResult { results, confidence: found.confidence, rejected: found.rejected }
}

/// The [`Service`] for scripts and synchronous code: the same operations, each blocking on a
/// runtime of its own. Not for use inside an async runtime (use [`Service`] there). Dropping
/// it waits for its writer to let go of the store ([`Service::close`]).
#[derive(Debug)]
pub struct BlockingService {
    runtime: tokio::runtime::Runtime,
    service: Service,
}

impl Drop for BlockingService {
    fn drop(&mut self) {
        if let Some(task) = self.service.let_go() {
            let _ = self.runtime.block_on(task);
        }
    }
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
    pub fn search_batch(&self, requests: &[SearchRequest]) -> Vec<Result<SearchResult>> {
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

/// The memory whose passages are `passages` (its first passage first): their texts together.
fn item(scope: &Scope, passages: &[Episode]) -> MemoryItem {
    let first = &passages[0];
    MemoryItem {
        id: first.turn_id.clone(),
        memory: passages.iter().map(|e| e.text.as_str()).collect(),
        role: first.speaker.clone(),
        timestamp: first.timestamp,
        scope: scope.clone(),
        score: None,
    }
}

/// The passages of the memory whose first passage is `episodes[at]`.
fn passages_at(episodes: &[Episode], at: usize) -> &[Episode] {
    let id = episodes[at].turn_id.as_str();
    let n = episodes[at..].iter().take_while(|e| turn_of(&e.turn_id) == id).count();
    &episodes[at..at + n]
}

/// A scope's memories in order, each as its passages.
fn memories_of(episodes: &[Episode]) -> impl Iterator<Item = &[Episode]> {
    let mut at = 0;
    std::iter::from_fn(move || {
        (at < episodes.len()).then(|| {
            let p = passages_at(episodes, at);
            at += p.len();
            p
        })
    })
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
    fn label_cache_is_bounded_and_keeps_what_is_used() {
        let mut cache = LabelCache::new(8);
        for i in 0..4 {
            cache.insert(format!("l{i}"), vec![i as f32]);
        }
        // The newer generation filled half the capacity and became the older one.
        assert_eq!(cache.len(), 4);
        assert_eq!(cache.get("l1"), Some(vec![1.0]));
        cache.insert("l1".into(), vec![1.0]);
        for i in 4..7 {
            cache.insert(format!("l{i}"), vec![i as f32]);
        }
        // l1 was used again and survives; l0, l2, l3 were not and are gone.
        assert!(cache.contains("l1") && cache.contains("l6"));
        assert!(!cache.contains("l0") && !cache.contains("l2") && !cache.contains("l3"));
        for i in 0..100 {
            cache.insert(format!("x{i}"), vec![0.0]);
            assert!(cache.len() <= 8);
        }
    }

    #[test]
    fn ids_are_unique_hex() {
        let (a, b) = (new_id(), new_id());
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
    }
}
