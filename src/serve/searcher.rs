//! The search thread of the serving API. One OS thread takes every search waiting in its queue
//! as one batch (up to `serve.max_batch` queries), embeds all of the batch's queries in one
//! MiniLM pass and ranks them together: in one GPU submit when the service runs on a GPU, else
//! on the CPU in parallel over queries. Searches that arrive while a batch runs form the next
//! one, so a batch is as large as the load makes it and an idle server answers at once.
//!
//! On a GPU this thread is the only one that touches the queue: it owns the resident graphs
//! (a `retrieve::engine::Engine`, one slot per scope) and applies the writer's updates to them
//! in the order they come, uploading only the scope a write changed; after a deletion it
//! compacts the engine, so no GPU buffer keeps what was deleted. A search whose scope the
//! engine does not hold as the request saw it runs on the CPU instead, so results never depend
//! on an update in flight; so does a search restricted by a filter (`Query::only`), which the
//! GPU's walk does not read.
//!
//! Query embeddings are kept by exact text in a bounded cache (`serve.query_cache`), so a
//! question asked again skips the model.
//!
//! Owns batching, the query cache and the GPU state of the service. Must not write the store or change a scope
//! (that is the writer in `serve`).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Instant;

use tokio::sync::oneshot;

use super::api::{SearchRequest, SearchResult, answer, batch_failed};
use super::state::Counters;
use crate::config::ServeConfig;
use crate::embed::{EMBEDDING_DIM, Embedder};
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::gpu::ranker::Ranker;
use crate::retrieve::bm25::Analyzer;
use crate::retrieve::engine::{Engine, retrieve_on};
use crate::retrieve::{Memory, Mode, Query, Retrieval, RetrieveConfig};

/// One search of a batch: the request, its scope's key, the scope as the request found it, and
/// the episodes its filter allows (`None`: all; such a search is ranked on the CPU).
pub(crate) struct Search {
    pub(crate) request: SearchRequest,
    pub(crate) key: String,
    pub(crate) memory: Arc<Memory>,
    pub(crate) only: Option<Arc<[bool]>>,
}

/// What the thread is asked.
pub(crate) enum Msg {
    /// Searches answered together, each on its own, in order.
    Search(Vec<Search>, oneshot::Sender<Vec<Result<SearchResult>>>),
    /// Scope `key` now holds `memory` (`None`: it is gone).
    Scope(String, Option<Arc<Memory>>),
    /// Upload a fresh corpus of the live scopes only (after a deletion).
    Compact,
}

/// The sending side: cheap to clone; the thread stops when every clone is dropped.
#[derive(Clone)]
pub(crate) struct Searcher {
    tx: mpsc::Sender<Msg>,
}

impl Searcher {
    /// Starts the thread over `scopes`, searching with `settings` (the ones the scopes were
    /// opened with), on `gpu` when given.
    pub(crate) fn start(
        embedder: Arc<Embedder>,
        gpu: Option<Gpu>,
        scopes: &HashMap<String, Arc<Memory>>,
        config: &ServeConfig,
        settings: RetrieveConfig,
        counters: Arc<Counters>,
    ) -> Result<Searcher> {
        let resident = match gpu {
            Some(gpu) => Some(Resident::upload(gpu, scopes, settings.clone())?),
            None => None,
        };
        let analyzer = Analyzer::new()?;
        let (tx, rx) = mpsc::channel();
        let cache = (config.query_cache > 0).then(|| quick_cache::unsync::Cache::new(config.query_cache));
        let max_batch = config.max_batch;
        let mut thread = Thread { embedder, resident, analyzer, max_batch, counters, cache, settings };
        std::thread::Builder::new()
            .name("myelin-search".into())
            .spawn(move || thread.run(rx))
            .map_err(|e| Error::InvalidArgument(format!("cannot start the search thread: {e}")))?;
        Ok(Searcher { tx })
    }

    /// Queues `msg`.
    pub(crate) fn send(&self, msg: Msg) -> Result<()> {
        self.tx.send(msg).map_err(|_| Error::Batch("the search thread has stopped".into()))
    }
}

/// The scopes resident on the GPU: the engine's slots, and which scope is in which.
struct Resident {
    engine: Engine,
    /// Scope key → its slot in the engine.
    slots: HashMap<String, u32>,
}

impl Resident {
    fn upload(gpu: Gpu, scopes: &HashMap<String, Arc<Memory>>, settings: RetrieveConfig) -> Result<Resident> {
        let mut keys: Vec<&String> = scopes.keys().collect();
        keys.sort();
        let memories: Vec<Arc<Memory>> = keys.iter().map(|k| scopes[*k].clone()).collect();
        let reason = format!("the service's backend, {}", gpu.adapter());
        let mut engine = Engine::on_gpu(memories, gpu, reason)?;
        engine.set_settings(settings)?;
        let slots = keys.iter().enumerate().map(|(i, k)| ((*k).clone(), i as u32)).collect();
        Ok(Resident { engine, slots })
    }

    /// The memory resident for `key` and its slot.
    fn get(&self, key: &str) -> Option<(u32, &Arc<Memory>)> {
        let slot = *self.slots.get(key)?;
        self.engine.memory(slot as usize).ok().map(|m| (slot, m))
    }

    /// Puts `memory` in `key`'s slot (a new slot for a new scope), or empties it.
    fn update(&mut self, key: String, memory: Option<Arc<Memory>>) -> Result<()> {
        let held = self.slots.get(&key).copied();
        let moved = match (memory, held) {
            (Some(m), Some(slot)) => self.engine.replace(slot, m)?,
            (Some(m), None) => {
                let (slot, moved) = self.engine.insert(m)?;
                self.slots.insert(key, slot);
                moved
            }
            (None, Some(slot)) => {
                self.slots.remove(&key);
                self.engine.remove(slot)?
            }
            (None, None) => None,
        };
        if let Some(moved) = moved {
            self.renumber(&moved);
        }
        Ok(())
    }

    /// A fresh corpus of the live scopes: nothing replaced or removed stays on the GPU.
    fn compact(&mut self) -> Result<()> {
        let moved = self.engine.compact()?;
        self.renumber(&moved);
        Ok(())
    }

    /// Follows the engine's compaction: each scope's slot where it moved.
    fn renumber(&mut self, moved: &[Option<u32>]) {
        for slot in self.slots.values_mut() {
            if let Some(Some(to)) = moved.get(*slot as usize) {
                *slot = *to;
            }
        }
    }
}

struct Thread {
    embedder: Arc<Embedder>,
    resident: Option<Resident>,
    analyzer: Analyzer,
    max_batch: usize,
    counters: Arc<Counters>,
    /// Query embeddings by exact text (`serve.query_cache`; `None`: off).
    cache: Option<quick_cache::unsync::Cache<String, Arc<[f32]>>>,
    /// The retrieval settings every search runs with (its mode and `top_k` apart).
    settings: RetrieveConfig,
}

type Job = (Vec<Search>, oneshot::Sender<Vec<Result<SearchResult>>>);

impl Thread {
    fn run(&mut self, rx: mpsc::Receiver<Msg>) {
        while let Ok(first) = rx.recv() {
            let mut jobs: Vec<Job> = Vec::new();
            let mut queries = 0;
            let mut next = Some(first);
            while let Some(msg) = next.take() {
                match msg {
                    Msg::Search(searches, reply) => {
                        queries += searches.len();
                        jobs.push((searches, reply));
                    }
                    Msg::Scope(key, memory) => self.update(|r| r.update(key, memory)),
                    Msg::Compact => self.update(Resident::compact),
                }
                if queries < self.max_batch {
                    next = rx.try_recv().ok();
                }
            }
            if !jobs.is_empty() {
                self.answer(jobs);
            }
        }
    }

    /// Applies a change to the resident graphs; a GPU failure sends every later search to the
    /// CPU (the service keeps serving).
    fn update(&mut self, change: impl FnOnce(&mut Resident) -> Result<()>) {
        if let Some(r) = self.resident.as_mut()
            && let Err(e) = change(r)
        {
            tracing::error!("updating the graphs on the GPU failed; searching on the CPU from now on: {e}");
            self.resident = None;
        }
    }

    fn answer(&mut self, jobs: Vec<Job>) {
        let searches: Vec<&Search> = jobs.iter().flat_map(|(s, _)| s).collect();
        let results = self.rank(&searches);
        Counters::add(&self.counters.batches, 1);
        Counters::add(&self.counters.searches, searches.len());
        let mut results = results.map(|r| r.into_iter());
        for (searches, reply) in jobs {
            let handing = Instant::now();
            let answer = match &mut results {
                Ok(all) => searches
                    .iter()
                    .zip(all.by_ref())
                    .map(|(s, r)| {
                        let r = r.and_then(|r| {
                            s.memory.with_settings(&self.settings)?.hand_over(r, |t| self.embedder.token_count(t))
                        })?;
                        Ok(answer(&s.request, &s.memory, &r))
                    })
                    .collect(),
                Err(e) => batch_failed(searches.len(), e),
            };
            Counters::add_time(&self.counters.hand_over_us, handing);
            // A client that went away no longer waits for its answer.
            let _ = reply.send(answer);
        }
    }

    /// The embedding of each text: from the cache, else embedded (each distinct text once, in
    /// one pass) and kept.
    fn embed(&mut self, texts: &[&str]) -> std::result::Result<Vec<Arc<[f32]>>, String> {
        let mut out: Vec<Option<Arc<[f32]>>> =
            texts.iter().map(|t| self.cache.as_ref().and_then(|c| c.get(*t).cloned())).collect();
        Counters::add(&self.counters.cached_queries, out.iter().filter(|v| v.is_some()).count());
        let mut missing: Vec<&str> = texts.iter().zip(&out).filter(|(_, v)| v.is_none()).map(|(t, _)| *t).collect();
        missing.sort_unstable();
        missing.dedup();
        if !missing.is_empty() {
            let vectors =
                self.embedder.embed(&missing).map_err(|e| format!("embedding {} queries: {e}", missing.len()))?;
            let fresh: HashMap<&str, Arc<[f32]>> =
                missing.iter().zip(vectors.chunks_exact(EMBEDDING_DIM)).map(|(t, v)| (*t, Arc::from(v))).collect();
            for (t, v) in texts.iter().zip(out.iter_mut()) {
                if v.is_none() {
                    *v = fresh.get(t).cloned();
                }
            }
            if let Some(cache) = self.cache.as_mut() {
                for (t, v) in fresh {
                    cache.insert(t.to_string(), v);
                }
            }
        }
        out.into_iter().map(|v| v.ok_or_else(|| "a query was not embedded".to_string())).collect()
    }

    /// Every search's retrieval, in order; `Err` (a message) when the whole batch failed.
    fn rank(&mut self, searches: &[&Search]) -> std::result::Result<Vec<Result<Retrieval>>, String> {
        let texts: Vec<&str> = searches.iter().map(|s| s.request.query.as_str()).collect();
        let embedding = Instant::now();
        let vectors = self.embed(&texts)?;
        Counters::add_time(&self.counters.embed_us, embedding);
        let ranking = Instant::now();
        let queries: Vec<Result<Query>> = texts
            .iter()
            .zip(&vectors)
            .zip(searches)
            .map(|((t, v), s)| {
                let mut q = Query::new(&mut self.analyzer, t, v.to_vec())?;
                q.only = s.only.clone();
                Ok(q)
            })
            .collect();
        // On the GPU: the searches whose scope the corpus holds as the request saw it.
        let mut on_gpu: Vec<(usize, u32)> = Vec::new();
        let mut on_cpu: Vec<usize> = Vec::new();
        for (i, s) in searches.iter().enumerate() {
            if queries[i].is_err() {
                continue;
            }
            match self.resident.as_ref().and_then(|r| r.get(&s.key)) {
                Some((slot, m)) if Arc::ptr_eq(m, &s.memory) && s.only.is_none() => on_gpu.push((i, slot)),
                _ => on_cpu.push(i),
            }
        }
        let query = |i: usize| queries[i].as_ref().map_err(|e| e.to_string());
        let mut out: Vec<Option<Result<Retrieval>>> = (0..searches.len()).map(|_| None).collect();
        let ranker = self.resident.as_ref().and_then(|r| r.engine.ranker());
        // Each mode asked for is one batch (a search that names none takes its scope's
        // configured mode).
        let mode = |i: usize| searches[i].request.mode.unwrap_or(self.settings.mode);
        // (ranker, mode, (search, slot) of each search in the group).
        type Group<'a> = (Option<&'a Ranker>, Mode, Vec<(usize, u32)>);
        let mut groups: Vec<Group> = Vec::new();
        for (ranker, picked) in [(ranker, on_gpu), (None, on_cpu.into_iter().map(|i| (i, 0)).collect())] {
            for (i, slot) in picked {
                match groups.iter_mut().find(|g| g.0.is_some() == ranker.is_some() && g.1 == mode(i)) {
                    Some(g) => g.2.push((i, slot)),
                    None => groups.push((ranker, mode(i), vec![(i, slot)])),
                }
            }
        }
        for (ranker, mode, picked) in groups {
            let requests: Vec<(u32, &Memory, &Query)> = picked
                .iter()
                .map(|&(i, slot)| Ok((slot, &*searches[i].memory, query(i)?)))
                .collect::<std::result::Result<_, String>>()?;
            let (found, report) = retrieve_on(ranker, &requests, mode, &self.settings).map_err(|e| e.to_string())?;
            if report.on_gpu {
                Counters::add(&self.counters.gpu_searches, requests.len());
            }
            if report.fallback.is_some() {
                tracing::warn!(queries = report.queries, "a GPU batch fell back to the CPU");
            }
            for (&(i, _), r) in picked.iter().zip(found) {
                out[i] = Some(Ok(r));
            }
        }
        Counters::add_time(&self.counters.rank_us, ranking);
        Ok(out
            .into_iter()
            .zip(queries)
            .map(|(r, q)| match (r, q) {
                (Some(r), _) => r,
                (None, Err(e)) => Err(e),
                (None, Ok(_)) => Err(Error::Batch("search was not ranked".into())),
            })
            .collect())
    }
}
