//! Writing: the right to write a store, one [`Writer`] per store for the life of a process (an
//! `flock` on `.myelin.lock` that the kernel releases when the process dies; a lease object on
//! an object store), and a write, [`WriteTxn`], which appends new Lance versions of the
//! datasets it changes and commits them all at once by replacing the manifest (a rename; a
//! conditional put); the history of the serving API. It must not
//! decide what to write (callers hand it conversations, graphs, episodes).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{ListBuilder, StringBuilder};
use arrow_array::{
    Array, ArrayRef, BooleanArray, Float32Array, RecordBatch, RecordBatchIterator, StringArray,
    TimestampMicrosecondArray, UInt32Array, UInt64Array,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use chrono::Utc;
use lance::Dataset;
use lance::dataset::{WriteMode, WriteParams};

use super::lease::Lease;
use super::location::{At, Location};
use super::manifest::*;
use super::open::*;
use super::rows::*;
use super::schema::*;
use crate::conversation::{Conversation, EmbedText, Turn};
use crate::embed::EMBEDDING_DIM;
use crate::error::{Error, Result};
use crate::graph::{BuilderState, Edge, Graph, NodeRef};

/// The right to write one store, which a writing process (serve, mcp, ingest, a library
/// `Service`) takes once and holds for as long as it may write. Whoever keeps state derived
/// from the store (the serving API's scopes) must hold it for that state's whole life, so that
/// no other view of the store can commit meanwhile. A second writer, in this process or
/// another, gets [`Error::Locked`] naming the holder. Readers take no lock.
///
/// On a local disk it is an exclusive OS lock (`flock` on `.myelin.lock`), which the kernel
/// releases when the process dies, so a crash never leaves a stale lock. On an object store,
/// where no lock reaches across machines, it is a lease object (`.myelin.lease`, see
/// `lease.rs`): renewed while held, given back when the last handle goes, taken by the next
/// writer once it runs out if its holder died.
#[derive(Debug, Clone)]
pub struct Writer {
    pub(super) root: Location,
    /// The lock or lease; held while any clone of this handle is.
    hold: Arc<Hold>,
    /// On an object store, the manifest's version as this writer last read or committed it:
    /// a transaction that finds another begins nothing (see [`Writer::begin`]).
    last: Arc<std::sync::Mutex<ManifestVersion>>,
}

#[derive(Debug)]
enum Hold {
    File(#[allow(dead_code)] std::fs::File),
    Lease(Lease),
}

/// Who this process is, for the error a later writer gets.
fn holder() -> String {
    let command: Vec<String> = std::env::args().collect();
    let mut host = [0u8; 256];
    // SAFETY: the buffer is valid for its length; the name is NUL-terminated within it or cut.
    let named = unsafe { libc::gethostname(host.as_mut_ptr().cast(), host.len()) } == 0;
    let host = if named {
        let end = host.iter().position(|&b| b == 0).unwrap_or(host.len());
        String::from_utf8_lossy(&host[..end]).into_owned()
    } else {
        "an unnamed host".into()
    };
    format!("pid {} ({}) on {host}, since {}", std::process::id(), command.join(" "), Utc::now().to_rfc3339())
}

/// Takes `dir`'s `flock`, naming this process in the lock file.
fn lock_dir(root: &Location, dir: &Path) -> Result<std::fs::File> {
    use std::io::{Read, Seek, Write};
    let lock_path = dir.join(LOCK_FILE);
    let mut lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&lock_path)
        .map_err(|e| Error::io(&lock_path, e))?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut holder = String::new();
            // The holder writes its name right after locking: it may not be there yet.
            let _ = lock.read_to_string(&mut holder);
            let holder = holder.trim();
            return Err(Error::Locked {
                path: root.to_path_buf(),
                holder: if holder.is_empty() {
                    "a process that has not named itself yet".into()
                } else {
                    holder.into()
                },
            });
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(Error::io(&lock_path, e)),
    }
    let name = format!("{}\n", holder());
    lock.set_len(0)
        .and_then(|()| lock.rewind())
        .and_then(|()| lock.write_all(name.as_bytes()))
        .map_err(|e| Error::io(&lock_path, e))?;
    Ok(lock)
}

impl Writer {
    /// Takes the right to write the store at `root` (a directory, created if need be, or a
    /// [`Location`] on an object store), or fails at once with [`Error::Locked`] if another
    /// writer holds it.
    pub async fn acquire(root: impl Into<Location>) -> Result<Writer> {
        let root = root.into();
        check_unborn(&root).await?;
        let hold = match root.at() {
            At::Dir(dir) => {
                std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
                Hold::File(lock_dir(&root, dir)?)
            }
            At::Remote(remote) => Hold::Lease(Lease::take(&root, remote, holder()).await?),
        };
        // A store is born with its manifest, before any dataset: from then on a directory
        // with datasets and no manifest is damage (refused), never an empty store to write.
        let last = match read_manifest(&root).await? {
            Some((_, version)) => version,
            None => {
                check_unborn(&root).await?;
                write_manifest(&root, &StoreManifest::empty(), false, &None).await?
            }
        };
        Ok(Writer { root, hold: Arc::new(hold), last: Arc::new(std::sync::Mutex::new(last)) })
    }

    /// Where the store lives.
    pub fn root(&self) -> &Location {
        &self.root
    }

    /// Whether this writer may still commit: always on a local disk; on an object store, while
    /// its lease is neither run out nor taken.
    pub fn check(&self) -> Result<()> {
        match &*self.hold {
            Hold::File(_) => Ok(()),
            Hold::Lease(lease) => lease.check(),
        }
    }

    /// Starts a write transaction on the store as last committed. Nothing is visible to
    /// readers before [`WriteTxn::commit`].
    ///
    /// On an object store, a transaction begins only on the manifest this writer last read or
    /// committed: one that another writer committed meanwhile (a predecessor that stalled past
    /// its lease and committed late) is refused, so that no state this writer derived from the
    /// store (the serving API's scopes) is built upon; restarting the writer reads it afresh.
    pub async fn begin(&self) -> Result<WriteTxn> {
        let store = Store::open(&self.root).await?;
        if matches!(self.root.at(), At::Remote(_)) {
            let last = self.last.lock().map_err(|_| Error::Batch("writer state poisoned".into()))?.clone();
            if store.manifest_version != last {
                return Err(Error::Store {
                    path: self.root.to_path_buf(),
                    message: format!(
                        "another writer committed (generation {}) since this writer took the store; nothing \
                         is written: restart this writer to read the store as committed",
                        store.generation()
                    ),
                });
            }
        }
        Ok(WriteTxn { store, writer: self.clone(), fresh: BTreeMap::new(), metas: BTreeMap::new() })
    }
}

/// A write in progress. Dropping it without [`WriteTxn::commit`] abandons every change.
#[derive(Debug)]
pub struct WriteTxn {
    pub(super) store: Store,
    /// Held for the transaction's life (and by its owner for longer).
    pub(super) writer: Writer,
    /// Tables already brought to the pinned state (restored) in this transaction.
    pub(super) fresh: BTreeMap<Table, Dataset>,
    /// The [`Table::Graphs`] row of every graph this transaction wrote, written at commit.
    pub(super) metas: BTreeMap<String, GraphMeta>,
}

impl WriteTxn {
    /// The store as it was when the transaction began.
    pub fn base(&self) -> &Store {
        &self.store
    }

    /// The dataset of `table` ready for writing, at the committed state: versions left by an
    /// abandoned write are rolled back by a Lance restore. `None` if the table has never been
    /// committed.
    pub(super) async fn table(&mut self, table: Table) -> Result<Option<&mut Dataset>> {
        if !self.fresh.contains_key(&table) {
            let Some(pinned) = self.store.tables.get(&table) else { return Ok(None) };
            let mut ds = pinned.clone();
            let latest = ds.latest_version_id().await?;
            if latest != ds.version().version {
                tracing::warn!(
                    table = table.name(),
                    pinned = ds.version().version,
                    latest,
                    "rolling back versions of an abandoned write"
                );
                ds.restore().await?;
            }
            self.fresh.insert(table, ds);
        }
        Ok(self.fresh.get_mut(&table))
    }

    /// Removes a conversation from every table (a no-op for an unknown id). Used before
    /// writing a conversation again, so re-ingesting replaces and never duplicates.
    pub async fn remove_conversation(&mut self, conversation: &str) -> Result<()> {
        self.remove_conversations(&[conversation], &Table::ALL).await
    }

    /// Removes the rows of `conversations` from `tables`: one delete per table, however many
    /// conversations (a no-op for none).
    pub async fn remove_conversations(&mut self, conversations: &[&str], tables: &[Table]) -> Result<()> {
        if conversations.is_empty() {
            return Ok(());
        }
        let filter = in_filter("conversation", conversations);
        if tables.contains(&Table::Graphs) {
            self.metas.retain(|c, _| !conversations.contains(&c.as_str()));
        }
        for &table in tables {
            if let Some(ds) = self.table(table).await? {
                ds.delete(&filter).await?;
                crate::fault::point("delete");
            }
        }
        Ok(())
    }

    pub(super) async fn append(&mut self, table: Table, batch: RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let schema = batch.schema();
        let reader = RecordBatchIterator::new(vec![Ok(batch)], schema.clone());
        match self.table(table).await? {
            Some(ds) => {
                // A store written before a column was added (`episodes.metadata`) gets it now,
                // null in every row it holds: a change of the schema alone, no data rewritten,
                // a new version that this transaction pins or abandons like any other.
                let missing: Vec<Field> = schema
                    .fields()
                    .iter()
                    .filter(|f| f.is_nullable() && ds.schema().field(f.name()).is_none())
                    .map(|f| f.as_ref().clone())
                    .collect();
                if !missing.is_empty() {
                    let added = Arc::new(Schema::new(missing));
                    ds.add_columns(lance::dataset::NewColumnTransform::AllNulls(added), None, None).await?;
                    crate::fault::point("add column");
                }
                ds.append(reader, None).await?
            }
            None => {
                // Never committed: a dataset left by an abandoned first write is overwritten.
                let params =
                    WriteParams { mode: WriteMode::Overwrite, session: Some(session()), ..WriteParams::default() };
                let ds = Dataset::write(reader, uri(&self.store.root, table)?.as_str(), Some(params)).await?;
                self.fresh.insert(table, ds);
            }
        }
        crate::fault::point(table.name());
        Ok(())
    }

    /// Appends episodes: `turns` of `conversation` with their embeddings
    /// (`turns.len() × EMBEDDING_DIM` values, row-major).
    pub async fn append_episodes(
        &mut self,
        conversation: &str,
        session_of: &[u32],
        turns: &[&Turn],
        embeddings: &[f32],
    ) -> Result<()> {
        if embeddings.len() != turns.len() * EMBEDDING_DIM || session_of.len() != turns.len() {
            return Err(Error::InvalidArgument(format!(
                "{} turns, {} session numbers and {} embedding values do not match",
                turns.len(),
                session_of.len(),
                embeddings.len()
            )));
        }
        let rows: Vec<EpisodeRow> =
            turns.iter().zip(session_of).map(|(t, &session)| EpisodeRow::of_turn(conversation, session, t)).collect();
        self.append(Table::Episodes, episode_batch(&rows, embeddings.to_vec())?).await
    }

    /// Appends stored episodes as they are, of any conversations, in one write.
    pub async fn append_episode_rows(&mut self, episodes: &[&Episode]) -> Result<()> {
        if let Some(e) = episodes.iter().find(|e| e.embedding.len() != EMBEDDING_DIM) {
            return Err(Error::InvalidArgument(format!(
                "episode {} of {}: {} embedding values, expected {EMBEDDING_DIM}",
                e.turn_id,
                e.conversation,
                e.embedding.len()
            )));
        }
        let rows: Vec<EpisodeRow> = episodes
            .iter()
            .map(|e| EpisodeRow {
                conversation: &e.conversation,
                session: e.session,
                id: &e.turn_id,
                position: e.position,
                speaker: &e.speaker,
                text: &e.text,
                image_caption: e.image_caption.as_deref(),
                timestamp: e.timestamp,
                metadata: e.metadata.as_ref().map(|m| serde_json::Value::Object(m.clone()).to_string()),
                expires_at: e.expires_at,
            })
            .collect();
        let embeddings = episodes.iter().flat_map(|e| e.embedding.iter().copied()).collect();
        self.append(Table::Episodes, episode_batch(&rows, embeddings)?).await
    }

    /// Appends concept labels with their embeddings: (conversation, label, `EMBEDDING_DIM`
    /// values) each.
    pub async fn append_labels(&mut self, rows: &[(&str, &str, &[f32])]) -> Result<()> {
        if let Some((c, l, v)) = rows.iter().find(|r| r.2.len() != EMBEDDING_DIM) {
            return Err(Error::InvalidArgument(format!(
                "label '{l}' of {c}: {} embedding values, expected {EMBEDDING_DIM}",
                v.len()
            )));
        }
        let values = rows.iter().flat_map(|r| r.2.iter().copied()).collect();
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(embedding_array(values, None)?),
        ];
        self.append(Table::Labels, RecordBatch::try_new(Table::Labels.schema(), columns)?).await
    }

    /// Records changes in the history.
    pub async fn append_history(&mut self, events: &[HistoryEvent]) -> Result<()> {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from_iter_values(events.iter().map(|e| e.memory_id.as_str()))),
            Arc::new(StringArray::from_iter_values(events.iter().map(|e| e.conversation.as_str()))),
            Arc::new(StringArray::from_iter_values(events.iter().map(|e| e.event.as_str()))),
            Arc::new(
                TimestampMicrosecondArray::from_iter_values(events.iter().map(|e| e.at.timestamp_micros()))
                    .with_timezone("UTC"),
            ),
        ];
        self.append(Table::History, RecordBatch::try_new(Table::History.schema(), columns)?).await
    }

    /// Records when memories were last returned ([`Table::Access`]), one row each.
    pub async fn append_access(&mut self, rows: &[Access]) -> Result<()> {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from_iter_values(rows.iter().map(|a| a.conversation.as_str()))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|a| a.memory_id.as_str()))),
            Arc::new(
                TimestampMicrosecondArray::from_iter_values(rows.iter().map(|a| a.at.timestamp_micros()))
                    .with_timezone("UTC"),
            ),
            Arc::new(UInt64Array::from_iter_values(rows.iter().map(|a| a.count))),
        ];
        self.append(Table::Access, RecordBatch::try_new(Table::Access.schema(), columns)?).await
    }

    /// Writes a conversation's questions and its summary row. Call after its episodes.
    pub async fn put_conversation(&mut self, conversation: &Conversation, source: &str) -> Result<ConversationSummary> {
        let qs = &conversation.questions;
        let mut evidence = ListBuilder::new(StringBuilder::new());
        let mut unresolved = ListBuilder::new(StringBuilder::new());
        for q in qs {
            for e in &q.evidence {
                evidence.values().append_value(e);
            }
            evidence.append(true);
            for e in &q.unresolved_evidence {
                unresolved.values().append_value(e);
            }
            unresolved.append(true);
        }
        let n = qs.len();
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(vec![conversation.id.as_str(); n])),
            Arc::new(StringArray::from_iter_values(qs.iter().map(|q| q.id.as_str()))),
            Arc::new(StringArray::from_iter_values(qs.iter().map(|q| q.text.as_str()))),
            Arc::new(StringArray::from_iter_values(qs.iter().map(|q| q.category.as_str()))),
            Arc::new(StringArray::from_iter_values(qs.iter().map(|q| q.answer.as_str()))),
            Arc::new(evidence.finish()),
            Arc::new(unresolved.finish()),
            Arc::new(BooleanArray::from(qs.iter().map(|q| q.adversarial).collect::<Vec<_>>())),
        ];
        // The list builders name their item field "item" and make it nullable, as the schema.
        let batch = RecordBatch::try_new(Table::Questions.schema(), columns)?;
        self.append(Table::Questions, batch).await?;

        let summary = ConversationSummary {
            id: conversation.id.clone(),
            format: conversation.format.as_str().to_string(),
            source: source.to_string(),
            sessions: conversation.sessions.len() as u32,
            turns: conversation.turn_count() as u32,
            questions: n as u32,
            unresolved_evidence: qs.iter().map(|q| q.unresolved_evidence.len() as u32).sum(),
            ingested_at: Utc::now(),
        };
        self.append_summaries(std::slice::from_ref(&summary)).await?;
        Ok(summary)
    }

    /// Appends conversation summary rows as they are (no questions), in one write.
    pub async fn append_summaries(&mut self, summaries: &[ConversationSummary]) -> Result<()> {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from_iter_values(summaries.iter().map(|s| s.id.as_str()))),
            Arc::new(StringArray::from_iter_values(summaries.iter().map(|s| s.format.as_str()))),
            Arc::new(StringArray::from_iter_values(summaries.iter().map(|s| s.source.as_str()))),
            Arc::new(UInt32Array::from_iter_values(summaries.iter().map(|s| s.sessions))),
            Arc::new(UInt32Array::from_iter_values(summaries.iter().map(|s| s.turns))),
            Arc::new(UInt32Array::from_iter_values(summaries.iter().map(|s| s.questions))),
            Arc::new(UInt32Array::from_iter_values(summaries.iter().map(|s| s.unresolved_evidence))),
            Arc::new(
                TimestampMicrosecondArray::from_iter_values(summaries.iter().map(|s| s.ingested_at.timestamp_micros()))
                    .with_timezone("UTC"),
            ),
        ];
        let batch = RecordBatch::try_new(Table::Conversations.schema(), columns)?;
        self.append(Table::Conversations, batch).await
    }

    /// Writes the graph of a conversation, replacing any it had. `turn_ids` are the ids of its
    /// episodes in conversation order (the graph's episode indices).
    pub async fn put_graph(&mut self, conversation: &str, graph: &Graph, turn_ids: &[&str]) -> Result<()> {
        self.put_graphs(&[(conversation, graph, turn_ids)]).await
    }

    /// Writes the graphs of many conversations, each replacing any it had, in one delete and
    /// one append per table. Each entry is (conversation, graph, its episodes' turn ids).
    pub async fn put_graphs(&mut self, graphs: &[(&str, &Graph, &[&str])]) -> Result<()> {
        self.put_graphs_laid_out(graphs, None).await
    }

    /// [`WriteTxn::put_graphs`], with `nodes.embedding` as a fixed-size list (`Some(true)`, the
    /// layout of stores written before 2026-12), a list (`Some(false)`), or as the nodes table
    /// already holds it (`None`; a list in a new store).
    pub(super) async fn put_graphs_laid_out(
        &mut self,
        graphs: &[(&str, &Graph, &[&str])],
        fixed: Option<bool>,
    ) -> Result<()> {
        for (conversation, graph, turn_ids) in graphs {
            graph.check(conversation, turn_ids.len())?;
        }
        let names: Vec<&str> = graphs.iter().map(|g| g.0).collect();
        self.remove_conversations(&names, &[Table::Nodes, Table::Edges]).await?;
        for &(conversation, graph, _) in graphs {
            let meta = GraphMeta {
                nodes: graph.node_count() as u32,
                checksum: graph.checksum(),
                builder: None,
                stale_rows: 0,
            };
            self.metas.insert(conversation.to_string(), meta);
        }
        let rows: Vec<GraphRows> = graphs
            .iter()
            .map(|&(conversation, graph, turn_ids)| GraphRows {
                conversation,
                graph,
                turn_ids,
                nodes: (0..graph.node_count() as u32).collect(),
                edges: graph.edges.iter().collect(),
            })
            .collect();
        self.append_graph_rows(&rows, fixed).await
    }

    /// Brings the stored graphs of conversations up to date after episodes were appended to
    /// them (the episodes they had keep their indices and turn ids): each entry is
    /// (conversation, the graph stored now, its new graph, the turn ids of all its episodes).
    /// Only the rows that changed are appended, nothing is deleted: every node after the
    /// stretch both versions share (the serving API consolidates its open window into concepts,
    /// so the last write's window is consolidated again with the new episodes), the concepts
    /// before it whose mentions or embedding moved, and the in-edges of every node whose
    /// in-edges changed; the rows' generation and the graph's [`Table::Graphs`] row say which
    /// rows are live (see [`Store::graph`]). PageRank, which every edge moves, is not
    /// rewritten: [`Graph::rank`] derives it from the edges on load, so a row's `pagerank` is
    /// its value when the row was written. A graph that changed in more than a quarter of its
    /// rows, or whose replaced rows would pass a quarter of its live ones, is written whole, as
    /// [`WriteTxn::put_graphs`] does. The cost is that of the rows written, and of reading
    /// the graphs' rows of [`Table::Graphs`].
    pub async fn update_graphs(&mut self, graphs: &[(&str, &Graph, &Graph, &[&str])]) -> Result<()> {
        let names: Vec<&str> = graphs.iter().map(|g| g.0).collect();
        let stored = self.store.graph_metas(&names).await?;
        let mut whole: Vec<(&str, &Graph, &[&str])> = Vec::new();
        let mut rows: Vec<GraphRows> = Vec::new();
        for &(conversation, old, new, turn_ids) in graphs {
            new.check(conversation, turn_ids.len())?;
            let diff = GraphDiff::of(old, new);
            // A graph stored without its row (before 2026-12-06) is written whole once.
            let Some(before) = stored.get(conversation) else {
                whole.push((conversation, new, turn_ids));
                continue;
            };
            if !diff.small(new, before.stale_rows) {
                whole.push((conversation, new, turn_ids));
                continue;
            }
            let meta = GraphMeta {
                nodes: new.node_count() as u32,
                checksum: new.checksum(),
                builder: None,
                stale_rows: before.stale_rows + diff.superseded,
            };
            self.metas.insert(conversation.to_string(), meta);
            let edges = diff.edges_to.iter().flat_map(|&d| new.in_edges(d)).collect();
            rows.push(GraphRows { conversation, graph: new, turn_ids, nodes: diff.nodes, edges });
        }
        self.append_graph_rows(&rows, None).await?;
        self.put_graphs_laid_out(&whole, None).await
    }

    /// Keeps the state of the builder that made each graph (`(conversation, state)`), with the
    /// graph this transaction wrote for it ([`WriteTxn::put_graphs`] or
    /// [`WriteTxn::update_graphs`], called first); a graph written without one keeps none.
    pub fn put_builder_states(&mut self, states: &[(&str, &BuilderState)]) -> Result<()> {
        for &(conversation, state) in states {
            let mut bytes = Vec::new();
            ciborium::into_writer(state, &mut bytes)
                .map_err(|e| Error::InvalidArgument(format!("builder state of '{conversation}': {e}")))?;
            let meta = self.metas.get_mut(conversation).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "builder state of '{conversation}' without its graph in the same transaction"
                ))
            })?;
            let checksum = crc32fast::hash(&bytes);
            meta.builder = Some((bytes, checksum));
        }
        Ok(())
    }

    /// Appends the chosen node and edge rows of graphs, `nodes.embedding` laid out as
    /// [`WriteTxn::put_graphs_laid_out`] says.
    pub(super) async fn append_graph_rows(&mut self, graphs: &[GraphRows<'_>], fixed: Option<bool>) -> Result<()> {
        if graphs.iter().all(|g| g.nodes.is_empty() && g.edges.is_empty()) {
            return Ok(());
        }
        let generation = self.generation();
        let n: usize = graphs.iter().map(|g| g.nodes.len()).sum();
        let (mut conv, mut id) = (Vec::with_capacity(n), Vec::with_capacity(n));
        let mut kind = Vec::with_capacity(n);
        let mut index = Vec::with_capacity(n);
        let mut key = Vec::with_capacity(n);
        let mut label = Vec::with_capacity(n);
        let mut mentions = Vec::with_capacity(n);
        let mut pagerank = Vec::with_capacity(n);
        let mut vectors: Vec<Option<&[f32]>> = Vec::with_capacity(n);
        for g in graphs {
            let graph = g.graph;
            for &node in &g.nodes {
                conv.push(g.conversation);
                id.push(node);
                pagerank.push(graph.pagerank[node as usize]);
                match graph.nodes[node as usize] {
                    NodeRef::Episode(e) => {
                        kind.push("episode");
                        index.push(e);
                        key.push(g.turn_ids[e as usize]);
                        label.push("");
                        mentions.push(0);
                        vectors.push(None);
                    }
                    NodeRef::Concept(c) => {
                        let concept = &graph.concepts[c as usize];
                        kind.push(concept.kind.as_str());
                        index.push(c);
                        key.push(concept.key.as_str());
                        label.push(concept.label.as_str());
                        mentions.push(concept.mentions);
                        vectors.push(Some(&concept.embedding));
                    }
                }
            }
        }
        let fixed = match fixed {
            Some(fixed) => fixed,
            None => match self.table(Table::Nodes).await? {
                Some(ds) => matches!(
                    Schema::from(ds.schema()).field_with_name("embedding").map(|f| f.data_type().clone()),
                    Ok(DataType::FixedSizeList(..))
                ),
                None => false,
            },
        };
        let (emb, schema): (ArrayRef, SchemaRef) = if fixed {
            let values = vectors.iter().flat_map(|v| v.unwrap_or(&[0.0; EMBEDDING_DIM]).iter().copied()).collect();
            let valid = vectors.iter().map(Option::is_some).collect();
            let emb = embedding_array(values, Some(valid))?;
            let mut fields: Vec<Field> = Table::Nodes.schema().fields().iter().map(|f| f.as_ref().clone()).collect();
            if let Some(f) = fields.iter_mut().find(|f| f.name() == "embedding") {
                *f = Field::new("embedding", emb.data_type().clone(), true);
            }
            (Arc::new(emb), Arc::new(Schema::new(fields)))
        } else {
            (Arc::new(listed_embeddings(&vectors)), Table::Nodes.schema())
        };
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(conv)),
            Arc::new(UInt32Array::from(id)),
            Arc::new(StringArray::from(kind)),
            Arc::new(UInt32Array::from(index)),
            Arc::new(StringArray::from(key)),
            Arc::new(StringArray::from(label)),
            Arc::new(UInt32Array::from(mentions)),
            Arc::new(Float32Array::from(pagerank)),
            emb,
            Arc::new(UInt64Array::from(vec![generation; n])),
        ];
        self.append(Table::Nodes, RecordBatch::try_new(schema, columns)?).await?;
        // Arrow's string builders need iterators of known length.
        let edges: Vec<(&str, &Edge)> =
            graphs.iter().flat_map(|g| g.edges.iter().map(move |&e| (g.conversation, e))).collect();
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from_iter_values(edges.iter().map(|(c, _)| *c))),
            Arc::new(UInt32Array::from_iter_values(edges.iter().map(|(_, e)| e.src))),
            Arc::new(UInt32Array::from_iter_values(edges.iter().map(|(_, e)| e.dst))),
            Arc::new(StringArray::from_iter_values(edges.iter().map(|(_, e)| e.kind.as_str()))),
            Arc::new(Float32Array::from_iter_values(edges.iter().map(|(_, e)| e.weight))),
            Arc::new(Float32Array::from_iter_values(edges.iter().map(|(_, e)| e.hours))),
            Arc::new(UInt64Array::from(vec![generation; edges.len()])),
        ];
        self.append(Table::Edges, RecordBatch::try_new(Table::Edges.schema(), columns)?).await
    }

    /// Rewrites every table this transaction changed without its deleted rows (Lance only
    /// marks rows deleted until then). Call before [`WriteTxn::commit`]; afterwards
    /// [`Store::purge_old_versions`] removes the files that still hold them.
    pub async fn compact(&mut self) -> Result<()> {
        use lance::dataset::optimize::{CompactionOptions, compact_files};
        for ds in self.fresh.values_mut() {
            let options = CompactionOptions {
                materialize_deletions: true,
                materialize_deletions_threshold: 0.0,
                ..CompactionOptions::default()
            };
            compact_files(ds, options, None).await?;
            crate::fault::point("compact");
        }
        Ok(())
    }

    /// Writes this transaction's episodes embedded as `form` (see
    /// [`Store::check_embedded_text`]): refused for a store that holds episodes embedded
    /// otherwise; recorded in the manifest at commit by a store that holds none.
    pub fn embed_as(&mut self, form: EmbedText) -> Result<()> {
        self.store.check_embedded_text(form)?;
        self.store.manifest.embedded_text = form;
        Ok(())
    }

    /// The generation this transaction's commit gives the store.
    pub(super) fn generation(&self) -> u64 {
        self.store.manifest.generation + 1
    }

    /// Makes every change visible at once by replacing `myelin.json` atomically, and returns
    /// the store as committed. Refused, with nothing committed, once the writer's lease is lost
    /// ([`Writer::check`]) or when another writer committed since this transaction began.
    pub async fn commit(mut self) -> Result<Store> {
        let metas = std::mem::take(&mut self.metas);
        if !metas.is_empty() {
            let names: Vec<&str> = metas.keys().map(String::as_str).collect();
            self.remove_conversations(&names, &[Table::Graphs]).await?;
            let generation = self.generation();
            let rows: Vec<(&str, u64, &GraphMeta)> = metas.iter().map(|(c, m)| (c.as_str(), generation, m)).collect();
            self.append(Table::Graphs, graph_meta_batch(&rows)?).await?;
        }
        let root = self.store.root.clone();
        let mut manifest = self.store.manifest.clone();
        for (table, ds) in &self.fresh {
            manifest.tables.insert(table.name().to_string(), ds.version().version);
        }
        manifest.generation += 1;
        manifest.updated_at = Utc::now();
        self.writer.check()?;
        let manifest_version = write_manifest(&root, &manifest, true, &self.store.manifest_version).await?;
        if let Ok(mut last) = self.writer.last.lock() {
            last.clone_from(&manifest_version);
        }
        // Tables written in this transaction at their new versions; the others as they were.
        let mut tables = std::mem::take(&mut self.store.tables);
        tables.append(&mut self.fresh);
        Ok(Store { root, manifest, manifest_version, tables })
    }
}
