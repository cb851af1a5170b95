//! The writer: one task that takes every write waiting as one group, embeds the new messages
//! on the background embedder, extends each touched scope's graph, commits one store
//! transaction (with a history row per change), swaps in the new scopes and answers. Also the
//! concept-label cache graph building reuses across writes. Must not answer searches.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use chrono::Utc;
use tokio::sync::{mpsc, oneshot};

use super::access::AccessWrite;
use super::api::*;
use super::archive::Recall;
use super::searcher::*;
use super::state::*;
use crate::conversation::{EmbedText, SourceFormat, passage_id, turn_of};
use crate::embed::EMBEDDING_DIM;
use crate::error::{Error, Result};
use crate::graph::build::LabelEmbedder;
use crate::graph::{BuilderState, Graph, GraphBuilder, labels_of};
use crate::progress::Lap;
use crate::retrieve::{Archived, Memory};
use crate::store::{ConversationSummary, Episode, HistoryEvent, Table};

/// A change the writer applies.
pub(super) enum Change {
    Add {
        key: String,
        scope: Scope,
        messages: Vec<Message>,
    },
    /// A memory's text (its passages embedded anew) or metadata replaced: the same id,
    /// speaker and time.
    Update {
        id: String,
        edit: Edit,
    },
    Delete {
        id: String,
    },
    DeleteAll {
        key: String,
    },
    /// Every memory expired by now, in every scope (the sweep's; an `EXPIRE` in the history).
    Expire,
    /// What the service recorded of its answers, written on its own (every
    /// `serve.access_flush_ms` while some is unwritten, and when the writer stops).
    Flush,
}

/// What a change did.
pub(super) enum Done {
    Added(Vec<MemoryItem>),
    Deleted(usize),
    Flushed,
}

pub(super) struct WriteJob {
    pub(super) change: Change,
    pub(super) reply: oneshot::Sender<Result<Done>>,
}

/// A scope a group of writes changes: its memory as committed, the episodes after the group
/// (only the new ones until a deletion needs them all), how many of them the store holds, and
/// whether a deletion means it must be written anew.
pub(super) struct Pending {
    pub(super) base: Option<Arc<Memory>>,
    pub(super) episodes: Vec<Episode>,
    /// `episodes` holds every episode of the scope, not only the new ones.
    pub(super) whole: bool,
    pub(super) stored: usize,
    pub(super) rewrite: bool,
}

impl Pending {
    /// Episodes of the scope after the group so far.
    pub(super) fn len(&self) -> usize {
        if self.whole { self.episodes.len() } else { self.stored + self.episodes.len() }
    }

    /// Every episode of the scope, the committed ones copied in first (what a deletion needs).
    pub(super) fn whole(&mut self) -> &mut Vec<Episode> {
        if !self.whole {
            let mut all = self.base.as_ref().map(|m| m.episodes().to_vec()).unwrap_or_default();
            all.append(&mut self.episodes);
            self.episodes = all;
            self.whole = true;
        }
        &mut self.episodes
    }

    /// The episodes the group added (for a scope no deletion touched).
    pub(super) fn added(&self) -> &[Episode] {
        if self.whole { &self.episodes[self.stored..] } else { &self.episodes }
    }
}

/// Where a scope's builder comes from in a group.
pub(super) enum Start {
    /// The one the writer kept from the scope's last write.
    Builder(Box<GraphBuilder>),
    /// The state the store kept (the first write since the service opened).
    Resume(BuilderState),
    /// A new one over the scope's episodes.
    Fresh,
}

/// A scope built after a group of writes: its new memory (`None`: now empty), its memory as
/// committed before, the builder that made its graph, and the episodes to append to the store.
pub(super) struct Built {
    pub(super) key: String,
    pub(super) memory: Option<Memory>,
    pub(super) base: Option<Arc<Memory>>,
    pub(super) builder: Option<GraphBuilder>,
    /// What the builder holds beyond the graph, stored with it.
    pub(super) state: Option<BuilderState>,
    pub(super) stored: usize,
    pub(super) rewrite: bool,
    /// Concept labels to store for the scope with their embeddings: every label its graph
    /// takes when `rewrite` (its rows are written anew), else the ones the store lacks.
    pub(super) labels: Vec<(String, Vec<f32>)>,
    /// The scope's memories archived or restored by this group (`ARCHIVE`, `RESTORE`).
    pub(super) events: Vec<HistoryEvent>,
}

/// The writer: takes every write waiting (up to `serve.max_write_batch`) as one group and
/// commits the group in one store transaction; writes that arrive meanwhile form the next
/// group. Each scope keeps the graph builder of its committed episodes, so an add pushes only
/// its new episodes; a deletion rebuilds the scope. Every `serve.expiry_sweep_ms` (and when it
/// starts) it deletes the memories that have expired, as a group of its own; every
/// `serve.access_flush_ms`, and when it stops, it writes the access history the store lacks.
pub(super) async fn write_loop(inner: Arc<Inner>, mut rx: mpsc::Receiver<WriteJob>, searcher: Searcher) {
    let mut builders: HashMap<String, GraphBuilder> = HashMap::new();
    let every = |ms: u64| {
        let mut t = tokio::time::interval(std::time::Duration::from_millis(ms));
        t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        t
    };
    let (mut sweep, mut flush) = (every(inner.config.serve.expiry_sweep_ms), every(inner.config.serve.access_flush_ms));
    // Nobody waits for the answer of the writer's own changes.
    let own = |change: Change| WriteJob { change, reply: oneshot::channel().0 };
    loop {
        let first = tokio::select! {
            job = rx.recv() => match job {
                Some(job) => job,
                None => break,
            },
            _ = sweep.tick() => {
                if inner.expiring(Utc::now()).await.is_empty() {
                    continue;
                }
                own(Change::Expire)
            }
            _ = flush.tick() => {
                if !inner.access_unwritten() {
                    continue;
                }
                own(Change::Flush)
            }
        };
        let mut jobs = vec![first];
        while jobs.len() < inner.config.serve.max_write_batch {
            match rx.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        inner.commit_group(jobs, &mut builders, &searcher).await;
    }
    // Closing: what was recorded since the last flush is written before the store is let go.
    if inner.access_unwritten() {
        Box::pin(inner.commit_group(vec![own(Change::Flush)], &mut builders, &searcher)).await;
    }
}

impl Inner {
    /// Where memory `id` is as the group stands: its scope's key, the index of its first passage
    /// among the scope's episodes and how many passages it has; none if it does not exist (never
    /// added, or deleted, in the store or earlier in the group).
    async fn locate(
        self: &Arc<Self>,
        touched: &mut BTreeMap<String, Pending>,
        group_ids: &HashMap<String, Option<String>>,
        id: &str,
    ) -> Option<(String, usize, usize)> {
        let key = match group_ids.get(id) {
            Some(k) => k.clone(),
            None => self.ids.read().await.get(id).cloned(),
        }?;
        let episodes = self.pending(touched, &key).await.whole();
        let at = episodes.iter().position(|e| e.turn_id == id)?;
        let n = passages_at(episodes, at).len();
        Some((key, at, n))
    }

    /// Applies `jobs` in order and commits them together; answers each.
    pub(super) async fn commit_group(
        self: &Arc<Self>,
        jobs: Vec<WriteJob>,
        builders: &mut HashMap<String, GraphBuilder>,
        searcher: &Searcher,
    ) {
        let form = self.config.embed.text;
        let mut touched: BTreeMap<String, Pending> = BTreeMap::new();
        // Each new text with its speaker (`embed.text = speaker` embeds `speaker: passage`): an
        // add's message's, an update's memory's (none for a memory not found: its update fails).
        let mut texts: Vec<(String, String)> = Vec::new();
        for j in &jobs {
            match &j.change {
                Change::Add { messages, .. } => {
                    texts.extend(messages.iter().map(|m| (m.speaker().to_string(), m.content.clone())))
                }
                Change::Update { id, edit } => {
                    if let Some(text) = &edit.text {
                        let mut speaker = String::new();
                        if form != EmbedText::Bare
                            && let Some((key, at, _)) = self.locate(&mut touched, &HashMap::new(), id).await
                        {
                            speaker = self.pending(&mut touched, &key).await.whole()[at].speaker.clone();
                        }
                        texts.push((speaker, text.clone()));
                    }
                }
                _ => {}
            }
        }
        let t_embed = std::time::Instant::now();
        let (spans, vectors) = if texts.is_empty() {
            (Vec::new(), Vec::new())
        } else {
            let (inner, n) = (self.clone(), texts.len());
            let pieces = self.config.ingest.passage_pieces;
            let cut_and_embed = move || {
                let embedder = &inner.background;
                embedder.install(|| {
                    let spans =
                        texts.iter().map(|(_, t)| embedder.passage_spans(t, pieces)).collect::<Result<Vec<_>>>()?;
                    let passages: Vec<String> = texts
                        .iter()
                        .zip(&spans)
                        .flat_map(|((speaker, t), s)| s.iter().map(|r| form.of(speaker, t[r.clone()].trim(), None)))
                        .collect();
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
                                turn_id: passage_id(&id, k),
                                position,
                                speaker: m.speaker().to_string(),
                                text: m.content[r].to_string(),
                                image_caption: None,
                                timestamp: Some(m.timestamp.unwrap_or(now)),
                                embedding: vectors.next().map(<[f32]>::to_vec).unwrap_or_default(),
                                metadata: m.metadata.clone(),
                                expires_at: m.expires_at,
                            });
                        }
                        items.push(item(&scope, &p.episodes[from..]));
                    }
                    Done::Added(items)
                }
                Change::Update { id, edit } => {
                    // The new passages come first off the iterators, in job order, found or not.
                    let fresh: Option<(Vec<_>, Vec<Vec<f32>>)> = edit.text.as_ref().map(|_| {
                        let ranges = spans.next().unwrap_or_default();
                        let v =
                            ranges.iter().map(|_| vectors.next().map(<[f32]>::to_vec).unwrap_or_default()).collect();
                        (ranges, v)
                    });
                    let Some((key, at, n)) = self.locate(&mut touched, &group_ids, &id).await else {
                        let _ = job.reply.send(Err(unknown(&id)));
                        continue;
                    };
                    let p = self.pending(&mut touched, &key).await;
                    let episodes = p.whole();
                    if let Some(e) = expired(&id, &episodes[at], now) {
                        let _ = job.reply.send(Err(e));
                        continue;
                    }
                    let mut first = episodes[at].clone();
                    if let Some(metadata) = edit.metadata {
                        first.metadata = Some(metadata).filter(|m| !m.is_empty());
                    }
                    if let Some(expires_at) = edit.expires_at {
                        first.expires_at = expires_at;
                    }
                    let passages: Vec<Episode> = match (fresh, &edit.text) {
                        (Some((ranges, new_vectors)), Some(text)) => ranges
                            .into_iter()
                            .zip(new_vectors)
                            .enumerate()
                            .map(|(k, (r, embedding))| Episode {
                                turn_id: passage_id(&id, k),
                                text: text[r].to_string(),
                                embedding,
                                ..first.clone()
                            })
                            .collect(),
                        // The metadata or the expiry alone: the same passages.
                        _ => episodes[at..at + n]
                            .iter()
                            .map(|e| Episode {
                                metadata: first.metadata.clone(),
                                expires_at: first.expires_at,
                                ..e.clone()
                            })
                            .collect(),
                    };
                    let m = passages.len();
                    episodes.splice(at..at + n, passages);
                    events.push(HistoryEvent {
                        memory_id: id.clone(),
                        conversation: key.clone(),
                        event: "UPDATE".into(),
                        at: now,
                    });
                    p.rewrite = true;
                    let scope = Scope::from_key(&key).unwrap_or_default();
                    Done::Added(vec![item(&scope, &p.whole()[at..at + m])])
                }
                Change::Delete { id } => {
                    let Some((key, at, n)) = self.locate(&mut touched, &group_ids, &id).await else {
                        let _ = job.reply.send(Err(unknown(&id)));
                        continue;
                    };
                    let p = self.pending(&mut touched, &key).await;
                    let episodes = p.whole();
                    let removed: Vec<Episode> = episodes.drain(at..at + n).collect();
                    events.extend(removed.first().map(deletion));
                    p.rewrite = true;
                    group_ids.insert(id, None);
                    Done::Deleted(1)
                }
                Change::Expire => {
                    let mut n = 0;
                    for key in self.expiring(now).await {
                        let episodes = self.pending(&mut touched, &key).await.whole();
                        for e in episodes.iter().filter(|e| e.expired(now) && turn_of(&e.turn_id) == e.turn_id) {
                            group_ids.insert(e.turn_id.clone(), None);
                            events.push(HistoryEvent { event: "EXPIRE".into(), ..deletion(e) });
                            n += 1;
                        }
                        episodes.retain(|e| !e.expired(now));
                        self.pending(&mut touched, &key).await.rewrite = true;
                    }
                    Done::Deleted(n)
                }
                Change::Flush => Done::Flushed,
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
        let flush = accepted.iter().any(|(_, done)| matches!(done, Done::Flushed));
        // Archived memories a search returned since go back into their scope's active graph.
        let mut recall = self.recall(touched.keys()).await;
        for key in recall.keys() {
            self.pending(&mut touched, key).await;
        }
        // A scope that lost episodes is rebuilt: its builder holds them. A scope written first
        // since the service opened resumes the builder the store kept for it.
        let mut work: Vec<(String, Pending, Start, Recall)> = Vec::with_capacity(touched.len());
        for (k, p) in touched {
            let start = match builders.remove(&k) {
                _ if p.rewrite => Start::Fresh,
                Some(b) => Start::Builder(Box::new(b)),
                None if p.base.is_some() => match self.store.read().await.builder_state(&k).await {
                    Ok(Some(state)) => Start::Resume(state),
                    Ok(None) => Start::Fresh,
                    Err(e) => {
                        tracing::warn!("scope '{k}': {e}; rebuilding its builder from its episodes");
                        Start::Fresh
                    }
                },
                None => Start::Fresh,
            };
            work.push((k.clone(), p, start, recall.remove(&k).unwrap_or_default()));
        }
        let inner = self.clone();
        let t_build = std::time::Instant::now();
        let built = match cpu(move || {
            use rayon::prelude::*;
            inner.background.install(|| {
                work.into_par_iter()
                    .map(|(key, p, start, recall)| inner.build_scope(key, p, start, recall))
                    .collect::<Result<Vec<_>>>()
            })
        })
        .await
        {
            Ok(built) => {
                let build_ms = t_build.elapsed().as_secs_f64() * 1e3;
                let t_store = std::time::Instant::now();
                events.extend(built.iter().flat_map(|b| b.events.iter().cloned()));
                let stored = self.store_group(built, &events, flush).await;
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
                            self.root
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
                    "ADD" | "UPDATE" => ids.insert(e.memory_id.clone(), e.conversation.clone()),
                    "ARCHIVE" | "RESTORE" => None,
                    _ => ids.remove(&e.memory_id),
                };
            }
            self.archived_changed(&events);
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
        self.counters.gauge(&*self.scopes.read().await);
        Counters::add(&self.counters.commits, 1);
        Counters::add(&self.counters.writes, accepted.len());
        for (reply, done) in accepted {
            let _ = reply.send(Ok(done));
        }
    }

    /// The scopes that hold a memory expired at `now`, as committed.
    pub(super) async fn expiring(&self, now: chrono::DateTime<Utc>) -> Vec<String> {
        let scopes = self.scopes.read().await;
        scopes.iter().filter(|(_, m)| m.episodes().iter().any(|e| e.expired(now))).map(|(k, _)| k.clone()).collect()
    }

    /// The pending state of scope `key` in this group, from its committed state.
    pub(super) async fn pending<'a>(&self, touched: &'a mut BTreeMap<String, Pending>, key: &str) -> &'a mut Pending {
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
    pub(super) fn build_scope(&self, key: String, mut p: Pending, start: Start, recall: Recall) -> Result<Built> {
        let (stored, rewrite, base) = (p.stored, p.rewrite, p.base.clone());
        let mut events = Vec::new();
        let mut archive = |graph: &Graph, ids: &[&str]| {
            let (marks, e) = self.archive(&key, base.as_deref(), ids, graph, &recall);
            events = e;
            marks
        };
        // Every label the graph asks for, to store those the store lacks.
        let mut taken: Vec<String> = Vec::new();
        let mut embed = |labels: &[String]| {
            taken.extend_from_slice(labels);
            self.embed_labels(labels)
        };
        let (memory, builder, state) = if p.len() == 0 {
            (None, None, None)
        } else if rewrite {
            let episodes = p.whole();
            for (i, e) in episodes.iter_mut().enumerate() {
                e.position = i as u32;
            }
            let mut builder = self.fresh_builder(episodes, &[], &mut embed)?;
            Counters::add(&self.counters.builders_rebuilt, 1);
            let (graph, state) = builder.snapshot(&mut embed)?;
            let ids: Vec<&str> = episodes.iter().map(|e| e.turn_id.as_str()).collect();
            let marks = archive(&graph, &ids);
            drop(ids);
            let episodes = std::mem::take(episodes);
            let memory = Memory::with_archived(&key, episodes, graph, marks, self.config.retrieve.clone())?;
            (Some(memory), Some(builder), Some(state))
        } else {
            let (memory, builder, state) = self.grow_scope(&key, &p, base.as_ref(), start, &mut embed, &mut archive)?;
            (Some(memory), Some(builder), Some(state))
        };
        taken.sort();
        taken.dedup();
        if !rewrite {
            let stored_labels = self.stored_labels.lock().map_err(|_| Error::Batch("label set poisoned".into()))?;
            if let Some(known) = stored_labels.get(&key) {
                taken.retain(|l| !known.contains(l));
            }
        }
        let vectors = if taken.is_empty() { Vec::new() } else { self.embed_labels(&taken)? };
        let labels = taken.into_iter().zip(vectors.chunks_exact(EMBEDDING_DIM).map(<[f32]>::to_vec)).collect();
        Ok(Built { key, memory, base, builder, state, stored, rewrite, labels, events })
    }

    /// A scope that only grew: its builder (resumed from the state the store kept, or a fresh
    /// one over the committed episodes, when the service has none) takes the added episodes,
    /// and its memory grows by them.
    fn grow_scope(
        &self,
        key: &str,
        p: &Pending,
        base: Option<&Arc<Memory>>,
        start: Start,
        embed: &mut LabelEmbedder<'_>,
        archive: &mut dyn FnMut(&Graph, &[&str]) -> Archived,
    ) -> Result<(Memory, GraphBuilder, BuilderState)> {
        let added = p.added();
        let resumed = match (start, base) {
            (Start::Builder(b), _) => Some(*b),
            (Start::Resume(state), Some(m)) => {
                let episode = |e: u32| m.episodes().get(e as usize).map(|e| (e.embedding_text(), e.timestamp));
                match GraphBuilder::resume(self.config.graph.clone(), m.stored_graph(), &state, &episode, embed) {
                    Ok(b) => {
                        Counters::add(&self.counters.builders_resumed, 1);
                        Some(b)
                    }
                    Err(e) => {
                        tracing::warn!("scope '{key}': {e}; rebuilding its builder from its episodes");
                        None
                    }
                }
            }
            _ => None,
        };
        let mut builder = match resumed {
            Some(b) => b,
            None => {
                // The committed episodes first.
                let committed = base.map_or(&[][..], |m| m.episodes());
                if !committed.is_empty() {
                    Counters::add(&self.counters.builders_rebuilt, 1);
                }
                self.fresh_builder(committed, added, embed)?
            }
        };
        let mut lap = Lap::start();
        for e in added {
            builder.push_episode(&e.embedding_text(), e.timestamp, embed)?;
        }
        lap.mark("push");
        let (graph, state) = builder.snapshot(embed)?;
        lap.mark("snapshot");
        let ids: Vec<&str> = base.iter().flat_map(|m| m.episodes()).chain(added).map(|e| e.turn_id.as_str()).collect();
        let marks = archive(&graph, &ids);
        drop(ids);
        let memory = match base {
            Some(m) => m.extend(added.to_vec(), graph, marks)?,
            None => Memory::with_archived(key, added.to_vec(), graph, marks, self.config.retrieve.clone())?,
        };
        lap.mark("extend");
        tracing::debug!(stages = %lap, "grow");
        Ok((memory, builder, state))
    }

    /// A fresh builder that has taken `episodes`, the labels they and `later` (the episodes
    /// it will take next) ask for embedded first in one pass, not one per window.
    pub(super) fn fresh_builder(
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
    /// compacted and its old versions purged. The access history goes with a flush, a
    /// rewrite or a compaction ([`super::access::AccessLog::for_commit`]), never with a plain
    /// add: the search path's records cost a write nothing.
    pub(super) async fn store_group(
        &self,
        built: Vec<Built>,
        events: &[HistoryEvent],
        flush: bool,
    ) -> Result<Vec<Built>> {
        // A deletion must leave no trace on disk; other writes leave the scopes' replaced graph
        // rows behind, reclaimed every `compact_every` commits.
        let every = self.config.serve.compact_every as u64;
        let purge = built.iter().any(|b| b.rewrite)
            || (self.counters.commits.load(Ordering::Relaxed) + 1).is_multiple_of(every);
        let access = self.access_for_commit(&built, purge, flush)?;
        // Boxed: the future of a whole group is deep enough to overflow the compiler's limits.
        let stored = Box::pin(self.write_group(built, events, &access, purge)).await;
        if stored.is_err()
            && let Ok(mut log) = self.access.lock()
        {
            log.unflushed(&access.taken);
        }
        stored
    }

    /// What a group writes of the access history ([`super::access::AccessLog::for_commit`]).
    fn access_for_commit(&self, built: &[Built], purge: bool, flush: bool) -> Result<AccessWrite> {
        let mut log = self.access.lock().map_err(|_| Error::Batch("access log poisoned".into()))?;
        let anew: HashMap<&str, HashSet<&str>> = built
            .iter()
            .filter(|b| b.rewrite || b.memory.is_none())
            .map(|b| (b.key.as_str(), b.memory.iter().flat_map(|m| m.episodes()).map(|e| e.turn_id.as_str()).collect()))
            .collect();
        Ok(log.for_commit(&anew, purge, flush))
    }

    async fn write_group(
        &self,
        built: Vec<Built>,
        events: &[HistoryEvent],
        access: &AccessWrite,
        purge: bool,
    ) -> Result<Vec<Built>> {
        let writer = self.writer.as_ref().ok_or_else(|| Error::ReadOnly { path: self.root.to_path_buf() })?;
        let mut lap = Lap::start();
        let mut txn = writer.begin().await?;
        lap.mark("begin");
        txn.embed_as(self.config.embed.text)?;
        let keys: Vec<&str> = built.iter().map(|b| b.key.as_str()).collect();
        let rewritten: Vec<&str> = built.iter().filter(|b| b.rewrite).map(|b| b.key.as_str()).collect();
        let emptied: Vec<&str> = built.iter().filter(|b| b.memory.is_none()).map(|b| b.key.as_str()).collect();
        txn.remove_conversations(&rewritten, &[Table::Episodes, Table::Labels]).await?;
        txn.remove_conversations(&emptied, &[Table::Nodes, Table::Edges, Table::Labels, Table::Graphs]).await?;
        let labels: Vec<(&str, &str, &[f32])> = built
            .iter()
            .filter(|b| b.memory.is_some())
            .flat_map(|b| b.labels.iter().map(|(l, v)| (b.key.as_str(), l.as_str(), v.as_slice())))
            .collect();
        txn.append_labels(&labels).await?;
        lap.mark("labels");
        txn.remove_conversations(&keys, &[Table::Conversations]).await?;
        lap.mark("summaries out");
        let live: Vec<(&Built, &Memory)> = built.iter().filter_map(|b| b.memory.as_ref().map(|m| (b, m))).collect();
        let rows: Vec<&Episode> =
            live.iter().flat_map(|(b, m)| m.episodes()[if b.rewrite { 0 } else { b.stored }..].iter()).collect();
        txn.append_episode_rows(&rows).await?;
        lap.mark("episodes");
        let ids: Vec<Vec<&str>> =
            live.iter().map(|(_, m)| m.episodes().iter().map(|e| e.turn_id.as_str()).collect()).collect();
        // A scope that only grew rewrites the graph rows that changed; one written anew, or
        // new, is written whole.
        let mut grown: Vec<(&str, &crate::graph::Graph, &crate::graph::Graph, &[&str])> = Vec::new();
        let mut whole: Vec<(&str, &crate::graph::Graph, &[&str])> = Vec::new();
        for ((b, m), ids) in live.iter().zip(&ids) {
            match (&b.base, b.rewrite) {
                (Some(old), false) => {
                    grown.push((b.key.as_str(), old.stored_graph(), m.stored_graph(), ids.as_slice()))
                }
                _ => whole.push((b.key.as_str(), m.stored_graph(), ids.as_slice())),
            }
        }
        txn.update_graphs(&grown).await?;
        txn.put_graphs(&whole).await?;
        let states: Vec<(&str, &BuilderState)> =
            live.iter().filter_map(|(b, _)| b.state.as_ref().map(|s| (b.key.as_str(), s))).collect();
        txn.put_builder_states(&states)?;
        lap.mark("graphs");
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
        lap.mark("summaries, history");
        let clear: Vec<&str> = access.clear.iter().map(String::as_str).collect();
        txn.remove_conversations(&clear, &[Table::Access]).await?;
        txn.append_access(&access.rows).await?;
        lap.mark("access");
        if purge {
            txn.compact().await?;
        }
        lap.mark("compact");
        let store = txn.commit().await?;
        lap.mark("commit");
        tracing::debug!(stages = %lap, "store");
        // Committed: from here on the write is done whatever fails. A purge that fails leaves
        // old versions on disk for the next one; it must not report the write as failed.
        if purge && let Err(e) = store.purge_old_versions().await {
            tracing::warn!("purging old versions of {}: {e}", self.root);
        }
        *self.store.write().await = store;
        // Committed: a poisoned set only makes later writes store some labels twice.
        if let Ok(mut stored_labels) = self.stored_labels.lock() {
            for b in &built {
                let known = stored_labels.entry(b.key.clone()).or_default();
                if b.rewrite || b.memory.is_none() {
                    known.clear();
                }
                known.extend(b.labels.iter().filter(|_| b.memory.is_some()).map(|(l, _)| l.clone()));
            }
        }
        Ok(built)
    }
}

pub(super) fn deletion(e: &Episode) -> HistoryEvent {
    HistoryEvent {
        memory_id: e.turn_id.clone(),
        conversation: e.conversation.clone(),
        event: "DELETE".into(),
        at: Utc::now(),
    }
}
