//! The ingest pipeline and the memory openers: load conversations, embed their turns in
//! chunks, build their graphs, write them into the store as one transaction, and report what
//! happened; and open a stored (or in-memory) conversation as a `retrieve::Memory`.
//!
//! All input is parsed and validated before the store is touched; the store changes only when
//! the whole run succeeds (see `store`). This file must not parse formats itself (the loaders
//! in `ingest` do) nor know the on-disk schema (the store does).

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::progress::Progress;
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::config::{Config, IngestConfig};
use crate::conversation::{Conversation, Session, Turn, passage_id, turn_of};
use crate::embed::{EMBEDDING_DIM, Embedder};
use crate::error::{Error, Result};
use crate::graph::{Graph, GraphConfig, build_graph};
use crate::ingest::{Loaded, load_path};
use crate::retrieve::{Archived, Memory};
use crate::store::{Episode, Location, Store, WriteTxn, Writer};

/// What an ingest run did.
#[derive(Debug, Clone, Serialize)]
pub struct IngestSummary {
    /// Inputs read.
    pub sources: Vec<PathBuf>,
    /// Conversations written.
    pub conversations: usize,
    /// Of those, how many replaced a conversation already in the store.
    pub replaced: usize,
    /// Turns read.
    pub turns: usize,
    /// Of those, how many were cut into passages (`ingest.passage_pieces`).
    pub split_turns: usize,
    /// Episodes embedded and stored: whole turns and passages.
    pub episodes: usize,
    /// Questions stored.
    pub questions: usize,
    /// Evidence ids whose spelling was repaired and then resolved.
    pub repaired_evidence: usize,
    /// Evidence ids that name no turn (kept with their question, not counted as evidence).
    pub unresolved_evidence: usize,
    /// Each unresolved id as `<question id>: <id as written>`.
    pub unresolved_ids: Vec<String>,
    /// Wall time of the whole run, seconds.
    pub seconds: f64,
    /// Time spent embedding, seconds.
    pub embed_seconds: f64,
    /// Episodes embedded per second of embedding time.
    pub episodes_per_second: f64,
    /// Episodes whose embedding came from `ingest.reuse_embeddings` (not embedded again).
    pub reused_embeddings: usize,
    /// Concept nodes in the graphs built.
    pub concepts: usize,
    /// Edges in the graphs built.
    pub edges: usize,
    /// Time spent building graphs (concept extraction, label embedding, edges, PageRank), seconds.
    pub graph_seconds: f64,
    /// Store generation after the commit.
    pub store_generation: u64,
}

/// Conversations read and validated, not yet written.
#[derive(Debug, Default)]
pub struct LoadedInput {
    /// Files read.
    pub sources: Vec<PathBuf>,
    /// Each conversation with the input it came from.
    pub conversations: Vec<(Conversation, String)>,
    /// Evidence ids repaired by the loaders.
    pub repaired_evidence: usize,
}

impl LoadedInput {
    /// Reads and validates every path; a conversation id that appears twice is an error.
    pub fn read(paths: &[PathBuf], options: &IngestConfig) -> Result<LoadedInput> {
        if paths.is_empty() {
            return Err(Error::InvalidArgument("nothing to ingest: no path given".into()));
        }
        let options = options.load_options();
        let mut input = LoadedInput::default();
        for path in paths {
            input.add(load_path(path, &options)?, &path.display().to_string())?;
        }
        Ok(input)
    }

    /// Adds what one loader returned, each conversation tagged with `source`; a conversation
    /// id must be new to this input.
    pub fn add(&mut self, loaded: Loaded, source: &str) -> Result<()> {
        self.repaired_evidence += loaded.repaired_evidence;
        self.sources.extend(loaded.files);
        for conversation in loaded.conversations {
            if self.conversations.iter().any(|(c, _)| c.id == conversation.id) {
                return Err(Error::InvalidArgument(format!(
                    "{source}: conversation '{}' appears twice in this ingest",
                    conversation.id
                )));
            }
            self.conversations.push((conversation, source.to_string()));
        }
        Ok(())
    }
}

/// The embedder `config` asks for: `config.embed`'s model on the CPU, handing its calls to
/// all-MiniLM-L6-v2 on the GPU (`gpu::bert`) where `config.gpu.backend` says: `gpu`, every call
/// (no usable adapter is an error); `auto`, calls of at least `gpu.embed_min_texts` texts when
/// there is a hardware adapter; `cpu`, none. A call the GPU fails is embedded on the CPU.
pub fn load_embedder(config: &Config) -> Result<Embedder> {
    let embedder = Embedder::load(&config.embed)?;
    accelerate(embedder, &config.gpu)
}

#[cfg(feature = "gpu")]
fn accelerate(mut embedder: Embedder, config: &crate::gpu::GpuConfig) -> Result<Embedder> {
    use crate::gpu::{Backend, Gpu, bert::GpuBert};
    let min_texts = match config.backend {
        Backend::Cpu => return Ok(embedder),
        Backend::Gpu => 1,
        Backend::Auto => config.embed_min_texts,
    };
    // With the `cuda` feature, candle on the NVIDIA GPU where one opens; else the WGSL forward.
    #[cfg(feature = "cuda")]
    match crate::embed::cuda::CudaBert::load(embedder.model_dir(), 0) {
        Ok(bert) => {
            tracing::info!("embedding calls of {min_texts}+ texts on CUDA device 0 (candle)");
            embedder.accelerate(std::sync::Arc::new(bert), min_texts);
            return Ok(embedder);
        }
        Err(e) => tracing::info!("embedding with the WGSL forward: {e}"),
    }
    let gpu = match (config.backend, Gpu::new()) {
        (Backend::Gpu, opened) => opened.map_err(|e| Error::Gpu(format!("--backend gpu: {e}")))?,
        (_, Ok(gpu)) if !gpu.adapter().software => gpu,
        (_, Ok(gpu)) => {
            tracing::debug!("embedding on the CPU: the only adapter, {}, is a software renderer", gpu.adapter());
            return Ok(embedder);
        }
        (_, Err(e)) => {
            tracing::debug!("embedding on the CPU: {e}");
            return Ok(embedder);
        }
    };
    let bert = GpuBert::load(&gpu, embedder.model_dir())?;
    tracing::info!("embedding calls of {min_texts}+ texts on {}", gpu.adapter());
    embedder.accelerate(std::sync::Arc::new(bert), min_texts);
    Ok(embedder)
}

#[cfg(not(feature = "gpu"))]
fn accelerate(embedder: Embedder, config: &crate::gpu::GpuConfig) -> Result<Embedder> {
    match config.backend {
        crate::gpu::Backend::Gpu => match crate::gpu::Gpu::new() {
            Err(e) => Err(Error::Gpu(format!("--backend gpu: {e}"))),
            Ok(gpu) => match gpu {},
        },
        _ => Ok(embedder),
    }
}

/// Reads every path, then embeds and writes all conversations and their graphs in one
/// transaction. `progress` counts turns; pass `&progress::Silent` for none.
pub async fn ingest_paths(
    store_root: impl Into<Location>,
    paths: &[PathBuf],
    embedder: &Embedder,
    config: &Config,
    progress: &dyn Progress,
) -> Result<IngestSummary> {
    let started = Instant::now();
    let input = LoadedInput::read(paths, &config.ingest)?;
    ingest_loaded(store_root, input, embedder, config, progress, started).await
}

/// Embeds and writes conversations already read, and builds their graphs, in one transaction.
pub async fn ingest_loaded(
    store_root: impl Into<Location>,
    input: LoadedInput,
    embedder: &Embedder,
    config: &Config,
    progress: &dyn Progress,
    started: Instant,
) -> Result<IngestSummary> {
    let store_root = store_root.into();
    let options = &config.ingest;
    config.graph.validate()?;
    if options.chunk_turns == 0 {
        return Err(Error::InvalidArgument("chunk size must be at least 1 turn".into()));
    }
    let LoadedInput { sources, conversations: pending, repaired_evidence: repaired } = input;
    let total_turns: usize = pending.iter().map(|(c, _)| c.turn_count()).sum();
    let unresolved_ids: Vec<String> = pending
        .iter()
        .flat_map(|(c, _)| c.questions.iter())
        .flat_map(|q| q.unresolved_evidence.iter().map(move |e| format!("{}: {e}", q.id)))
        .collect();
    progress.set_length(total_turns as u64);

    check_passages(config)?;
    let reuse = match &options.reuse_embeddings {
        Some(dir) => Some(Reuse::read(dir).await?),
        None => None,
    };
    let mut reused = 0;
    let mut txn = Writer::acquire(&store_root).await?.begin().await?;
    txn.embed_as(config.embed.text)?;
    let existing: BTreeSet<String> = txn.base().conversations().await?.into_iter().map(|c| c.id).collect();
    let mut embed_time = Duration::ZERO;
    let mut graph_time = Duration::ZERO;
    let (mut replaced, mut questions, mut concepts, mut edges) = (0, 0, 0, 0);
    let (mut split_turns, mut episodes) = (0, 0);
    for (whole, source) in &pending {
        progress.set_message(whole.id.clone());
        let (conversation, split) = passages(whole, embedder, config.ingest.passage_pieces)?;
        let conversation = conversation.as_ref();
        split_turns += split;
        episodes += conversation.turn_count();
        if existing.contains(&conversation.id) {
            txn.remove_conversation(&conversation.id).await?;
            replaced += 1;
        }
        let rows: Vec<(u32, &Turn)> = conversation.session_turns().collect();
        for chunk in rows.chunks(options.chunk_turns) {
            let texts: Vec<String> = chunk.iter().map(|(_, t)| t.embedded(config.embed.text)).collect();
            let t0 = Instant::now();
            let embeddings = match &reuse {
                Some(r) => {
                    let (v, n) = r.embed(&texts, embedder)?;
                    reused += n;
                    v
                }
                None => blocking(|| embedder.embed(&texts))?,
            };
            embed_time += t0.elapsed();
            let sessions: Vec<u32> = chunk.iter().map(|(s, _)| *s).collect();
            let turns: Vec<&Turn> = chunk.iter().map(|(_, t)| *t).collect();
            txn.append_episodes(&conversation.id, &sessions, &turns, &embeddings).await?;
            progress.inc(chunk.iter().filter(|(_, t)| turn_of(&t.id) == t.id).count() as u64);
        }
        let t0 = Instant::now();
        let turns: Vec<&Turn> = rows.iter().map(|(_, t)| *t).collect();
        let texts: Vec<_> = turns.iter().map(|t| (t.embedding_text(), t.timestamp)).collect();
        let graph = graph_of(&texts, embedder, &config.graph)?;
        put_graph(&mut txn, &conversation.id, &graph, &turns).await?;
        graph_time += t0.elapsed();
        concepts += graph.concepts.len();
        edges += graph.edges.len();
        txn.put_conversation(conversation, source).await?;
        questions += conversation.questions.len();
    }
    let store = txn.commit().await?;
    progress.finish_and_clear();
    let embed_seconds = embed_time.as_secs_f64();
    Ok(IngestSummary {
        sources,
        conversations: pending.len(),
        replaced,
        turns: total_turns,
        split_turns,
        episodes,
        questions,
        repaired_evidence: repaired,
        unresolved_evidence: unresolved_ids.len(),
        unresolved_ids,
        seconds: started.elapsed().as_secs_f64(),
        embed_seconds,
        episodes_per_second: if embed_seconds > 0.0 { episodes as f64 / embed_seconds } else { 0.0 },
        reused_embeddings: reused,
        concepts,
        edges,
        graph_seconds: graph_time.as_secs_f64(),
        store_generation: store.generation(),
    })
}

/// The embeddings of another store by embedding text (`ingest.reuse_embeddings`).
struct Reuse {
    by_text: HashMap<String, Vec<f32>>,
}

impl Reuse {
    /// Every episode embedding `dir` stores. Its model must be this build's.
    async fn read(dir: &Path) -> Result<Reuse> {
        let store = Store::open(dir).await?;
        if store.generation() == 0 {
            return Err(Error::InvalidArgument(format!(
                "{}: no store there to reuse embeddings from (ingest.reuse_embeddings)",
                dir.display()
            )));
        }
        let model = store.embedding_model();
        if model != crate::store::EMBEDDING_MODEL {
            return Err(Error::InvalidArgument(format!(
                "{}: embeddings of {model}, not {}: they cannot be reused",
                dir.display(),
                crate::store::EMBEDDING_MODEL
            )));
        }
        // Keyed by the text each vector embeds, in that store's form: a text embedded in
        // another form than the one asked for is never taken for it.
        let form = store.embedded_text();
        let mut by_text = HashMap::new();
        for c in store.conversations().await? {
            for e in store.episodes(&c.id).await? {
                if e.embedding.len() == EMBEDDING_DIM {
                    by_text.insert(e.embedded(form), e.embedding);
                }
            }
        }
        Ok(Reuse { by_text })
    }

    /// Embeddings of `texts` (rows in order): the stored ones where there are, the others
    /// embedded in one pass. Returns them and how many were reused.
    fn embed(&self, texts: &[String], embedder: &Embedder) -> Result<(Vec<f32>, usize)> {
        let missing: Vec<&str> = texts.iter().filter(|t| !self.by_text.contains_key(*t)).map(String::as_str).collect();
        let fresh = if missing.is_empty() { Vec::new() } else { blocking(|| embedder.embed(&missing))? };
        let returned = fresh.len() / EMBEDDING_DIM;
        let mut fresh = fresh.chunks_exact(EMBEDDING_DIM);
        let mut out = Vec::with_capacity(texts.len() * EMBEDDING_DIM);
        for t in texts {
            match self.by_text.get(t) {
                Some(v) => out.extend_from_slice(v),
                None => out.extend_from_slice(fresh.next().ok_or_else(|| {
                    Error::Batch(format!("the embedder returned {returned} vectors for {} texts", missing.len()))
                })?),
            }
        }
        Ok((out, texts.len() - missing.len()))
    }
}

/// Builds the graph of a conversation from its episodes' (embedding text, timestamp) in
/// conversation order, embedding concept labels with `embedder`.
pub fn graph_of(
    episodes: &[(String, Option<DateTime<Utc>>)],
    embedder: &Embedder,
    config: &GraphConfig,
) -> Result<Graph> {
    let episodes: Vec<(&str, _)> = episodes.iter().map(|(t, d)| (t.as_str(), *d)).collect();
    blocking(|| build_graph(&episodes, config, &mut |labels: &[String]| embedder.embed(labels)))
}

/// A stored conversation's memory: its episodes and graph read from `store`, indexed for
/// queries with `config`. A conversation without a graph is an error that says what to do.
pub async fn stored_memory(store: &Store, conversation: &str, config: &Config) -> Result<Memory> {
    store.check_embedded_text(config.embed.text)?;
    let episodes = store.episodes(conversation).await?;
    let graph = stored_graph(store, conversation, config).await?.ok_or_else(|| {
        Error::InvalidArgument(format!(
            "conversation '{conversation}' has no memory graph (written by an older version): \
             ingest its source again, or run `myelin eval` on it"
        ))
    })?;
    if config.archive.max_active_nodes == 0 {
        return Memory::new(conversation, episodes, graph, config.retrieve.clone());
    }
    let stored = store.archived(conversation).await?;
    let ids: Vec<&str> = episodes.iter().map(|e| e.turn_id.as_str()).collect();
    let was = |id: &str| stored.contains_key(id);
    let mut archived = archive_marks(config, &ids, &graph, &was, &HashMap::new());
    if archived.over_bound {
        // What the store kept leaves it over the bound (a lower bound than it was written
        // with, an ingested conversation): the access history orders the rest.
        let last: HashMap<String, DateTime<Utc>> = store
            .accesses()
            .await?
            .into_iter()
            .filter(|a| a.conversation == conversation)
            .map(|a| (a.memory_id, a.at))
            .collect();
        archived = archive_marks(config, &ids, &graph, &was, &last);
    }
    drop(ids);
    let memory = Memory::with_archived(conversation, episodes, graph, archived.marks, config.retrieve.clone())?;
    tracing::debug!(
        conversation,
        archived = memory.archived_memories(),
        active_nodes = memory.active_nodes(),
        nodes = memory.graph().node_count(),
        "archive"
    );
    Ok(memory)
}

/// Which episodes of a memory are archived ([`crate::graph::archive`]), and whether the ones
/// `stored` names leave its active graph over `archive.max_active_nodes`.
pub struct ArchiveMarks {
    /// The marks: the memories `stored` names, and those [`crate::graph::archive::plan`]
    /// added to bring the active graph within its bound.
    pub marks: Archived,
    /// The memories `stored` names alone leave the active graph over its bound.
    pub over_bound: bool,
}

/// The archive marks of `episodes` (the ids of a memory's episodes, in conversation order;
/// its whole graph is `graph`): the memories `stored` says are (by memory id), and while the
/// active graph holds more than `archive.max_active_nodes` nodes, more memories, least recently
/// used first: those never returned (`last` has no time for them) in conversation order, then
/// the others by the time they were last returned. With no bound (0), none.
pub fn archive_marks(
    config: &Config,
    episodes: &[&str],
    graph: &Graph,
    stored: &dyn Fn(&str) -> bool,
    last: &HashMap<String, DateTime<Utc>>,
) -> ArchiveMarks {
    let mut marks = Archived { episodes: vec![false; episodes.len()], damping: config.graph.pagerank_damping };
    if config.archive.max_active_nodes == 0 {
        return ArchiveMarks { marks, over_bound: false };
    }
    // Each memory's passages: a run of episodes of one turn.
    let mut memories: Vec<(Option<DateTime<Utc>>, std::ops::Range<usize>)> = Vec::new();
    for (i, id) in episodes.iter().enumerate() {
        let turn = turn_of(id);
        match memories.last_mut() {
            Some((_, r)) if turn_of(episodes[r.start]) == turn => r.end = i + 1,
            _ => memories.push((last.get(turn).copied(), i..i + 1)),
        }
    }
    for (_, r) in &memories {
        if stored(turn_of(episodes[r.start])) {
            marks.episodes[r.clone()].iter_mut().for_each(|m| *m = true);
        }
    }
    // Stable: the never returned (`None`) first, in conversation order.
    memories.sort_by_key(|(at, _)| *at);
    let order: Vec<std::ops::Range<usize>> = memories.into_iter().map(|(_, r)| r).collect();
    let archived =
        crate::graph::archive::plan(graph, &mut marks.episodes, &order, config.graph.window, &config.archive);
    ArchiveMarks { marks, over_bound: archived > 0 }
}

/// One part of a store as [`check_store`] found it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PartCheck {
    /// `store`, or `conversation <id>`.
    pub part: String,
    /// Whether it reads whole.
    pub ok: bool,
    /// What it holds, or what is wrong with it and where.
    pub detail: String,
}

/// What [`check_store`] found, part by part.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoreCheck {
    /// The store directory.
    pub path: PathBuf,
    /// The parts, the store itself first.
    pub parts: Vec<PartCheck>,
}

impl StoreCheck {
    /// The parts that do not read whole.
    pub fn damaged(&self) -> usize {
        self.parts.iter().filter(|p| !p.ok).count()
    }
}

/// Reads every part of the store at `root` as retrieval would, without writing anything: the
/// manifest and every dataset at its pinned version (each data file there at its recorded
/// size; a directory with datasets and no manifest is damage), then each conversation's
/// episodes, graph and vectors (every node embedding finite and of length 1, the graph
/// consistent with its episodes), as [`stored_memory`] opens them. A part that fails is named
/// with the error that says where.
pub async fn check_store(root: impl Into<Location>, config: &Config) -> StoreCheck {
    let root = &root.into();
    let part = |part: String, result: std::result::Result<String, Error>| match result {
        Ok(detail) => PartCheck { part, ok: true, detail },
        Err(e) => PartCheck { part, ok: false, detail: e.to_string() },
    };
    let mut check = StoreCheck { path: root.to_path_buf(), parts: Vec::new() };
    let opened = async {
        let store = Store::open(root).await?;
        let conversations = store.conversations().await?;
        Ok::<_, Error>((store, conversations))
    };
    let (store, conversations) = match opened.await {
        Ok(v) => v,
        Err(e) => {
            check.parts.push(part("store".into(), Err(e)));
            return check;
        }
    };
    let summary = format!("generation {}, {} conversations", store.generation(), conversations.len());
    check.parts.push(part("store".into(), Ok(summary)));
    for c in conversations {
        let detail = match stored_memory(&store, &c.id, config).await {
            Ok(m) => store.builder_state(&c.id).await.map(|state| {
                let kept = if state.is_some() { ", its builder kept" } else { "" };
                format!("{} episodes, {} nodes{kept}", m.episodes().len(), m.graph().node_count())
            }),
            Err(e) => Err(e),
        };
        check.parts.push(part(format!("conversation {}", c.id), detail));
    }
    check
}

/// A stored conversation's graph (`None`: none was built), its PageRank derived from the
/// stored edges with `config.graph.pagerank_damping`: the serving API rewrites only the graph
/// rows a write changed, so the stored column can be older than the edges (for an ingested
/// graph the derived values are the stored ones, to the bit).
pub async fn stored_graph(store: &Store, conversation: &str, config: &Config) -> Result<Option<Graph>> {
    let mut graph = store.graph(conversation).await?;
    if let Some(g) = &mut graph {
        g.rank(config.graph.pagerank_damping);
    }
    Ok(graph)
}

/// `conversation` with every turn longer than `max_pieces` word pieces cut into passages
/// ([`Embedder::passages`]): the first keeps the turn's id, the others are `<id>#1`, `<id>#2`,
/// … ([`turn_of`] gives the turn back), each with the turn's speaker and time; positions are
/// renumbered. Returns the conversation (borrowed when nothing was cut) and how many turns
/// were cut. `max_pieces` 0 cuts nothing.
pub fn passages<'a>(
    conversation: &'a Conversation,
    embedder: &Embedder,
    max_pieces: usize,
) -> Result<(Cow<'a, Conversation>, usize)> {
    if max_pieces == 0 {
        return Ok((Cow::Borrowed(conversation), 0));
    }
    let cut: Vec<Vec<String>> = blocking(|| {
        use rayon::prelude::*;
        let turns: Vec<&Turn> = conversation.turns().collect();
        turns.par_iter().map(|t| embedder.passages(&t.text, max_pieces)).collect::<Result<Vec<_>>>()
    })?;
    let split = cut.iter().filter(|p| p.len() > 1).count();
    if split == 0 {
        return Ok((Cow::Borrowed(conversation), 0));
    }
    let mut out = Conversation {
        id: conversation.id.clone(),
        format: conversation.format,
        sessions: Vec::with_capacity(conversation.sessions.len()),
        questions: conversation.questions.clone(),
    };
    let mut pieces = cut.into_iter();
    let mut position = 0u32;
    for session in &conversation.sessions {
        let mut turns = Vec::with_capacity(session.turns.len());
        for (turn, parts) in session.turns.iter().zip(pieces.by_ref()) {
            for (k, text) in parts.into_iter().enumerate() {
                turns.push(Turn {
                    id: passage_id(&turn.id, k),
                    speaker: turn.speaker.clone(),
                    text,
                    image_caption: if k == 0 { turn.image_caption.clone() } else { None },
                    timestamp: turn.timestamp,
                    position,
                });
                position += 1;
            }
        }
        out.sessions.push(Session { index: session.index, date: session.date, turns });
    }
    Ok((Cow::Owned(out), split))
}

/// Passages must fit the model with [CLS] and [SEP].
fn check_passages(config: &Config) -> Result<()> {
    let (p, max) = (config.ingest.passage_pieces, config.embed.max_seq_len);
    if p + 2 > max {
        return Err(Error::InvalidArgument(format!(
            "ingest.passage_pieces {p} does not fit embed.max_seq_len {max} with [CLS] and [SEP] (at most {})",
            max.saturating_sub(2)
        )));
    }
    Ok(())
}

/// A conversation's memory built in memory, without a store: its turns cut into passages and
/// embedded, its graph built, exactly as `ingest` writes them. For library users, benchmarks
/// and tests.
pub fn in_memory(conversation: &Conversation, embedder: &Embedder, config: &Config) -> Result<Memory> {
    check_passages(config)?;
    let (conversation, _) = passages(conversation, embedder, config.ingest.passage_pieces)?;
    let conversation = conversation.as_ref();
    let turns: Vec<(u32, &Turn)> = conversation.session_turns().collect();
    let texts: Vec<_> = turns.iter().map(|(_, t)| (t.embedding_text(), t.timestamp)).collect();
    let embedded: Vec<String> = turns.iter().map(|(_, t)| t.embedded(config.embed.text)).collect();
    let vectors = blocking(|| embedder.embed(&embedded))?;
    let episodes = turns
        .iter()
        .zip(vectors.chunks_exact(EMBEDDING_DIM))
        .map(|((session, t), v)| Episode {
            conversation: conversation.id.clone(),
            session: *session,
            turn_id: t.id.clone(),
            position: t.position,
            speaker: t.speaker.clone(),
            text: t.text.clone(),
            image_caption: t.image_caption.clone(),
            timestamp: t.timestamp,
            embedding: v.to_vec(),
            metadata: None,
            expires_at: None,
        })
        .collect();
    let graph = graph_of(&texts, embedder, &config.graph)?;
    Memory::new(&conversation.id, episodes, graph, config.retrieve.clone())
}

async fn put_graph(txn: &mut WriteTxn, conversation: &str, graph: &Graph, turns: &[&Turn]) -> Result<()> {
    let ids: Vec<&str> = turns.iter().map(|t| t.id.as_str()).collect();
    txn.put_graph(conversation, graph, &ids).await
}

/// Builds and stores the graph of every conversation in the store that has none (stores
/// written before graphs existed), in one transaction. Returns the ids built.
pub async fn build_missing_graphs(
    store_root: impl Into<Location>,
    embedder: &Embedder,
    config: &GraphConfig,
) -> Result<Vec<String>> {
    config.validate()?;
    let store_root = &store_root.into();
    let store = Store::open(store_root).await?;
    let mut missing = Vec::new();
    for c in store.conversations().await? {
        if store.graph(&c.id).await?.is_none() {
            missing.push(c.id);
        }
    }
    if missing.is_empty() {
        return Ok(missing);
    }
    let mut txn = Writer::acquire(store_root).await?.begin().await?;
    for id in &missing {
        let episodes = txn.base().episodes(id).await?;
        let texts: Vec<_> = episodes.iter().map(|e| (e.embedding_text(), e.timestamp)).collect();
        let graph = graph_of(&texts, embedder, config)?;
        let ids: Vec<&str> = episodes.iter().map(|e| e.turn_id.as_str()).collect();
        txn.put_graph(id, &graph, &ids).await?;
    }
    txn.commit().await?;
    Ok(missing)
}

/// Runs CPU-heavy work without stalling other tasks of a multi-threaded runtime; on a
/// current-thread runtime (where `block_in_place` would panic) it simply runs.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}
