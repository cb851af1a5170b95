//! [`Service`], the async handle agents call: open (as the store's writer or read-only),
//! add, search, list, get, delete, history, stats, close; a read-only service follows the
//! writer's commits. The work happens in the writer and the search thread.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use tokio::sync::{RwLock, mpsc, oneshot};

use super::access::AccessLog;
use super::api::*;
use super::archive::archived_of;
use super::filter::{Filter, Selected, select};
use super::labels::*;
use super::searcher::*;
use super::state::*;
use super::writer::*;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::retrieve::engine::{Choice, choose};
use crate::retrieve::{Memory, Order};
use crate::store::{HistoryEvent, Location, Store, Writer};

/// How a search is answered: by one search of the batch as it is, or by merging several.
enum Plan {
    One(usize),
    Many(Vec<usize>),
}

/// Per episode of `memory`, whether it is live at `now` (not expired, [`Episode::expired`]);
/// `None` when every episode is live.
fn live(memory: &Memory, now: chrono::DateTime<chrono::Utc>) -> Option<Vec<bool>> {
    let episodes = memory.episodes();
    episodes.iter().any(|e| e.expired(now)).then(|| episodes.iter().map(|e| !e.expired(now)).collect())
}

/// Adds `request`'s searches to `searches` and says how to answer it from them. A search
/// never reads an expired memory.
fn plan(request: &SearchRequest, scopes: &HashMap<String, Arc<Memory>>, searches: &mut Vec<Search>) -> Result<Plan> {
    if request.query.trim().is_empty() {
        return Err(Error::InvalidArgument("empty query".into()));
    }
    let now = chrono::Utc::now();
    let filter = match select(&request.scope, request.filters.as_ref())? {
        Selected::Scope(key, scope) => {
            let Some(memory) = scopes.get(&key) else { return Ok(Plan::Many(Vec::new())) };
            let only = live(memory, now);
            if only.as_ref().is_some_and(|l| !l.contains(&true)) {
                return Ok(Plan::Many(Vec::new()));
            }
            let request = SearchRequest { scope, filters: None, ..request.clone() };
            searches.push(Search { request, key, memory: memory.clone(), only: only.map(Into::into) });
            return Ok(Plan::One(searches.len() - 1));
        }
        Selected::Where(f) => f,
    };
    let mut keys: Vec<&String> = scopes.keys().collect();
    keys.sort();
    let mut parts = Vec::new();
    for key in keys {
        let Some(scope) = Scope::from_key(key) else { continue };
        let memory = &scopes[key];
        let allowed = match filter.scope_verdict(&scope) {
            Some(false) => continue,
            Some(true) => None,
            None => {
                let mut allowed = Vec::with_capacity(memory.episodes().len());
                for passages in memories_of(memory.episodes()) {
                    let pass = filter.matches(&scope, &passages[0]);
                    allowed.extend(std::iter::repeat_n(pass, passages.len()));
                }
                Some(allowed)
            }
        };
        let only: Option<Arc<[bool]>> = match (allowed, live(memory, now)) {
            (Some(a), Some(l)) => Some(a.iter().zip(&l).map(|(a, l)| *a && *l).collect()),
            (a, l) => a.or(l).map(Into::into),
        };
        if only.as_ref().is_some_and(|o| !o.contains(&true)) {
            continue;
        }
        let request = SearchRequest { scope, filters: None, order: Order::Score, ..request.clone() };
        searches.push(Search { request, key: key.clone(), memory: memory.clone(), only });
        parts.push(searches.len() - 1);
    }
    Ok(Plan::Many(parts))
}

/// The bytes of `metadata` as stored (JSON text).
fn metadata_bytes(metadata: Option<&Metadata>) -> usize {
    metadata.map_or(0, |m| serde_json::Value::Object(m.clone()).to_string().len())
}

/// An async handle on a served store: cheap to clone, safe to share across tasks. The
/// service's threads stop when the last clone is dropped.
#[derive(Clone)]
pub struct Service {
    pub(super) inner: Arc<Inner>,
    /// The writer's queue (`None`: read-only).
    pub(super) writes: Option<mpsc::Sender<WriteJob>>,
    /// The writer task, awaited by [`Service::close`] (`None`: read-only).
    pub(super) writer_task: Option<Arc<std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>>>,
    pub(super) searcher: Searcher,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service").field("root", &self.inner.root).field("backend", &self.inner.backend).finish()
    }
}

impl Service {
    /// Opens the store at `root` (created on first write) as its one writer, loads every scope
    /// in it, and starts the search thread (on the GPU `config.gpu` chooses) and the writer.
    /// Fails with [`Error::Locked`] while another writer (a server, an ingest, another
    /// service) holds the store; the lock is held until the last clone of the service is
    /// dropped.
    pub async fn open(root: impl Into<Location>, config: Config) -> Result<Service> {
        let writer = Writer::acquire(root).await?;
        let root = writer.root().clone();
        Service::start(&root, config, Some(writer)).await
    }

    /// Opens the store at `root` without writing it, beside the process that does: searches,
    /// lists, gets and history see its last committed state, checked every
    /// `serve.reload_ms`; adds and deletions fail with [`Error::ReadOnly`].
    pub async fn open_read_only(root: impl Into<Location>, config: Config) -> Result<Service> {
        Service::start(&root.into(), config, None).await
    }

    pub(super) async fn start(root: &Location, config: Config, writer: Option<Writer>) -> Result<Service> {
        config.retrieve.validate()?;
        config.serve.validate()?;
        let embedder = Arc::new(crate::pipeline::load_embedder(&config)?);
        let background = embedder.background()?;
        let store = Store::open(root).await?;
        store.check_embedded_text(config.embed.text)?;
        let (scopes, loaded) = load_scopes(&store, &config, &HashMap::new()).await?;
        let scopes: HashMap<String, Arc<Memory>> = scopes.into_iter().filter_map(|(k, m)| Some((k, m?))).collect();
        let ids: HashMap<String, String> = scopes.iter().flat_map(|(k, m)| ids_of(k, m)).collect();
        // No size rule: scopes grow while the server runs, and every batch the GPU ranks leaves
        // the cores to the embedder.
        let (gpu, backend) = choose(&config.gpu, &config.retrieve, None)?;
        let counters = Arc::new(Counters::default());
        let searcher =
            Searcher::start(embedder.clone(), gpu, &scopes, &config.serve, config.retrieve.clone(), counters.clone())?;
        let generation = store.generation();
        let read_only = writer.is_none();
        let (queue, reload) = (config.serve.write_queue, std::time::Duration::from_millis(config.serve.reload_ms));
        // The writer's label cache starts with the labels the store keeps, so the first write
        // to a scope after a restart embeds none of them again.
        let mut labels = LabelCache::new(config.serve.label_cache);
        let mut stored_labels: HashMap<String, std::collections::HashSet<String>> = HashMap::new();
        if !read_only {
            for (scope, label, embedding) in store.labels().await? {
                if stored_labels.entry(scope).or_default().insert(label.clone()) {
                    labels.insert(label, embedding);
                }
            }
        }
        let access = AccessLog::from_rows(store.accesses().await?, |id| ids.contains_key(id));
        let mut archived_at = HashMap::new();
        for (key, m) in scopes.iter().filter(|(_, m)| m.archived_memories() > 0) {
            archived_at.insert(key.clone(), archived_of(m, &store.archived(key).await?));
        }
        counters.gauge(&scopes);
        let inner = Arc::new(Inner {
            counters,
            root: root.clone(),
            follow: std::sync::Mutex::new(Follow::new(generation, store.updated_at())),
            labels: std::sync::Mutex::new(labels),
            stored_labels: std::sync::Mutex::new(stored_labels),
            access: std::sync::Mutex::new(access),
            archived_at: std::sync::Mutex::new(archived_at),
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
    pub(super) fn let_go(&mut self) -> Option<tokio::task::JoinHandle<()>> {
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

    /// For a read-only service, how far it is behind the writer it follows (`None`: this
    /// service is the writer).
    pub fn replica(&self) -> Option<Replica> {
        if !self.read_only() {
            return None;
        }
        self.inner.follow.lock().ok().map(|f| f.replica(chrono::Utc::now()))
    }

    pub(super) async fn write(&self, change: Change) -> Result<Done> {
        let Some(writes) = &self.writes else { return Err(Error::ReadOnly { path: self.inner.root.to_path_buf() }) };
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
        let now = chrono::Utc::now();
        for (i, m) in messages.iter().enumerate() {
            if m.content.trim().is_empty() {
                return Err(Error::InvalidArgument(format!("message {i}: empty content")));
            }
            if m.role.trim().is_empty() {
                return Err(Error::InvalidArgument(format!("message {i}: empty role")));
            }
            if let Some(t) = m.expires_at.filter(|&t| t <= now) {
                return Err(Error::InvalidArgument(format!(
                    "message {i}: it expires at {} (expiration_date {}), which has passed: it would never be returned",
                    t.to_rfc3339(),
                    expiration_date_of(t)
                )));
            }
        }
        let bytes: usize = messages.iter().map(|m| m.content.len() + metadata_bytes(m.metadata.as_ref())).sum();
        let max = self.inner.config.serve.max_add_bytes;
        if bytes > max {
            return Err(Error::TooLarge(format!(
                "the messages hold {bytes} bytes of text and metadata, over the limit of {max} for one add \
                 (serve.max_add_bytes)"
            )));
        }
        match self.write(Change::Add { key, scope: scope.clone(), messages }).await? {
            Done::Added(items) => Ok(items),
            _ => Err(Error::Batch("the writer answered an add with something else".into())),
        }
    }

    /// The memories of `request.scope` that answer `request.query`, best first or in time
    /// order as it asks. A scope
    /// that holds no memory answers [`SearchResult::nothing`].
    pub async fn search(&self, request: &SearchRequest) -> Result<SearchResult> {
        self.search_batch(std::slice::from_ref(request)).await.remove(0)
    }

    /// Many searches at once, answered in one batch of the search thread (with whatever other
    /// searches are waiting): one embedding pass, one ranking dispatch. Each request is
    /// answered on its own, in request order: a bad one fails alone. A request whose filters
    /// read several scopes is one search per scope that passes, merged by score
    /// ([`SearchRequest::filters`]).
    pub async fn search_batch(&self, requests: &[SearchRequest]) -> Vec<Result<SearchResult>> {
        let mut searches: Vec<Search> = Vec::new();
        let plans: Vec<Result<Plan>> = {
            let scopes = self.inner.scopes.read().await;
            requests.iter().map(|r| plan(r, &scopes, &mut searches)).collect()
        };
        let n = searches.len();
        let mut found: Vec<Option<Result<SearchResult>>> = if n == 0 {
            Vec::new()
        } else {
            let (reply, answer) = oneshot::channel();
            let found = match self.searcher.send(Msg::Search(searches, reply)) {
                Ok(()) => answer.await.unwrap_or_else(|_| batch_failed(n, "the search thread dropped the request")),
                Err(e) => batch_failed(n, &e.to_string()),
            };
            found.into_iter().map(Some).collect()
        };
        let mut take = |i: usize| {
            found
                .get_mut(i)
                .and_then(Option::take)
                .unwrap_or_else(|| Err(Error::Batch("search was not answered".into())))
        };
        let retrieve_k = self.inner.config.retrieve.top_k;
        plans
            .into_iter()
            .zip(requests)
            .map(|(plan, request)| {
                let mut found = match plan? {
                    Plan::One(i) => take(i)?,
                    Plan::Many(parts) => {
                        let parts = parts.into_iter().map(&mut take).collect::<Result<Vec<_>>>()?;
                        merge(request, parts, retrieve_k)
                    }
                };
                self.inner.returned(&mut found.results);
                Ok(found)
            })
            .collect()
    }

    /// Changes a memory: its text (the same id, speaker and time, its passages embedded and
    /// its scope's graph built anew), its metadata (replaced whole; an empty object removes
    /// it), its expiry (`Some(None)` clears it; a time already past expires it now), or
    /// several; the history records an `UPDATE`. Returns the memory as it now is. An expired
    /// memory is not found.
    pub async fn update(&self, id: &str, edit: Edit) -> Result<MemoryItem> {
        if edit.text.is_none() && edit.metadata.is_none() && edit.expires_at.is_none() {
            return Err(Error::InvalidArgument("nothing to update: give a text, metadata or an expiry".into()));
        }
        if edit.text.as_ref().is_some_and(|t| t.trim().is_empty()) {
            return Err(Error::InvalidArgument("empty text: nothing to update the memory to".into()));
        }
        let max = self.inner.config.serve.max_add_bytes;
        let bytes = edit.text.as_ref().map_or(0, String::len) + metadata_bytes(edit.metadata.as_ref());
        if bytes > max {
            return Err(Error::TooLarge(format!(
                "the text and metadata hold {bytes} bytes, over the limit of {max} for one write (serve.max_add_bytes)"
            )));
        }
        match self.write(Change::Update { id: id.to_string(), edit }).await? {
            Done::Added(mut items) if items.len() == 1 => {
                self.inner.with_access(&mut items);
                Ok(items.remove(0))
            }
            _ => Err(Error::Batch("the writer answered an update with something else".into())),
        }
    }

    /// One memory by id; an expired one is not found.
    pub async fn get(&self, id: &str) -> Result<MemoryItem> {
        let key = self.inner.ids.read().await.get(id).cloned().ok_or_else(|| unknown(id))?;
        let memory = self.inner.scopes.read().await.get(&key).cloned().ok_or_else(|| unknown(id))?;
        let scope = Scope::from_key(&key).unwrap_or_default();
        let at = memory.episodes().iter().position(|e| e.turn_id == id).ok_or_else(|| unknown(id))?;
        if let Some(e) = expired(id, &memory.episodes()[at], chrono::Utc::now()) {
            return Err(e);
        }
        let mut found = [item(&scope, passages_at(memory.episodes(), at))];
        self.inner.returned(&mut found);
        let [found] = found;
        Ok(found)
    }

    /// A page of a scope's memories, oldest first (an unknown scope has none).
    pub async fn get_all(&self, scope: &Scope, page: Page) -> Result<Vec<MemoryItem>> {
        Ok(self.list(scope, None, page).await?.1)
    }

    /// How many memories a scope holds (an unknown scope none).
    pub async fn count(&self, scope: &Scope) -> Result<usize> {
        Ok(self.list(scope, None, Page { offset: 0, limit: 0 }).await?.0)
    }

    /// The memories that the scope's ids and `filters` select ([`SearchRequest::filters`]):
    /// how many, and one page of them, scope by scope (in the order of their keys), each
    /// scope's oldest first; never an expired one.
    pub async fn list(&self, scope: &Scope, filters: Option<&Filter>, page: Page) -> Result<(usize, Vec<MemoryItem>)> {
        let selected = select(scope, filters)?;
        let now = chrono::Utc::now();
        let scopes = self.inner.scopes.read().await;
        let mut keys: Vec<&String> = scopes.keys().collect();
        keys.sort();
        let (mut count, mut items) = (0, Vec::new());
        for key in keys {
            let (scope, filter) = match &selected {
                Selected::Scope(k, s) if k == key => (s.clone(), None),
                Selected::Scope(..) => continue,
                Selected::Where(f) => match Scope::from_key(key) {
                    Some(s) if f.scope_verdict(&s) != Some(false) => (s, Some(f)),
                    _ => continue,
                },
            };
            for passages in memories_of(scopes[key].episodes()) {
                if passages[0].expired(now) || filter.is_some_and(|f| !f.matches(&scope, &passages[0])) {
                    continue;
                }
                if count >= page.offset && items.len() < page.limit {
                    items.push(item(&scope, passages));
                }
                count += 1;
            }
        }
        self.inner.with_access(&mut items);
        Ok((count, items))
    }

    /// Every scope that holds memories, with how many.
    pub async fn scopes(&self) -> Vec<(Scope, usize)> {
        let scopes = self.inner.scopes.read().await;
        let now = chrono::Utc::now();
        let live = |m: &Memory| memories_of(m.episodes()).filter(|p| !p[0].expired(now)).count();
        let mut all: Vec<(Scope, usize)> = scopes
            .iter()
            .filter_map(|(key, m)| Some((Scope::from_key(key)?, live(m))))
            .filter(|(_, n)| *n > 0)
            .collect();
        all.sort_by(|a, b| (&a.0.user_id, &a.0.agent_id, &a.0.run_id).cmp(&(&b.0.user_id, &b.0.agent_id, &b.0.run_id)));
        all
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
            _ => Err(Error::Batch("the writer answered a deletion with something else".into())),
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

/// A read-only service's follower: every `every`, a look at the store's committed generation;
/// a new one reloads the scopes it changed. Stops when the service is dropped.
pub(super) async fn follow(inner: Weak<Inner>, searcher: Searcher, mut seen: u64, every: std::time::Duration) {
    loop {
        tokio::time::sleep(every).await;
        let Some(inner) = inner.upgrade() else { return };
        let checked = std::time::Instant::now();
        match Store::committed_generation(&inner.root).await {
            Ok((g, _)) if g == seen => inner.followed(|f| f.checked(checked, g, None)),
            // A purge by the writer can remove what this read was opening: tried again next time.
            Ok((g, at)) => {
                inner.followed(|f| f.checked(checked, g, at));
                match inner.reload(&searcher).await {
                    Ok((g, at)) => {
                        seen = g;
                        inner.followed(|f| f.loaded(g, at));
                    }
                    Err(e) => tracing::warn!("following the writer of {}: {e}", inner.root),
                }
            }
            Err(e) => tracing::warn!("following the writer of {}: {e}", inner.root),
        }
    }
}

impl Inner {
    /// Records what the follower found.
    fn followed(&self, f: impl FnOnce(&mut Follow)) {
        if let Ok(mut follow) = self.follow.lock() {
            f(&mut follow);
        }
    }

    /// Reloads the scopes the store's last commit changed; returns its generation and when it
    /// was committed.
    pub(super) async fn reload(&self, searcher: &Searcher) -> Result<(u64, Option<chrono::DateTime<chrono::Utc>>)> {
        let store = self.store.read().await.reopen().await?;
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
        self.counters.gauge(&*self.scopes.read().await);
        *self.loaded.write().await = summaries;
        let (generation, at) = (store.generation(), store.updated_at());
        *self.store.write().await = store;
        Ok((generation, at))
    }
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
