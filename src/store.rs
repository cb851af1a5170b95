//! The memory store: versioned Lance datasets in one directory, changed only by atomic
//! transactions.
//!
//! Layout of a store directory:
//! - `episodes.lance/`: one row per turn (conversation, session, turn id, position, speaker,
//!   text, image caption, timestamp, 384-float embedding);
//! - `questions.lance/`: benchmark questions with their resolved evidence;
//! - `conversations.lance/`: one row per conversation with its counts and provenance;
//! - `nodes.lance/`: the memory graph's nodes (episode and concept), with PageRank and, for
//!   concepts, key, label, kind and embedding;
//! - `edges.lance/`: the memory graph's edges (kind, weight, hours apart);
//! - `myelin.json`: the store manifest, which pins the Lance version of each dataset.
//!
//! Readers open every dataset at the version `myelin.json` pins, never at "latest". A write
//! ([`Writer::begin`], under the store's one [`Writer`]) appends new Lance versions and, only when all of them are written,
//! replaces `myelin.json` by an atomic rename. A write that fails or is killed half-way leaves
//! versions nobody pins; the next write restores the pinned version before it starts. So a
//! store is always seen as it was after the last committed write.
//!
//! This module owns the on-disk schema. It must not parse input files or run the model.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{Float32Builder, ListBuilder, StringBuilder};
use arrow_array::{
    Array, ArrayRef, BooleanArray, FixedSizeListArray, Float32Array, ListArray, RecordBatch, RecordBatchIterator,
    StringArray, TimestampMicrosecondArray, UInt32Array,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use lance::Dataset;
use lance::dataset::{WriteMode, WriteParams};
use serde::{Deserialize, Serialize};

use crate::conversation::{Conversation, Question, Turn};
use crate::embed::EMBEDDING_DIM;
use crate::error::{Error, Result};
use crate::graph::{Concept, ConceptKind, Edge, EdgeKind, Graph, NodeRef};

/// Environment variable naming the default store directory.
pub const STORE_ENV: &str = "MYELIN_STORE";
/// Store directory used when neither `--store` nor `$MYELIN_STORE` names one.
pub const DEFAULT_STORE_DIR: &str = "myelin-store";
/// Store format written by this version.
pub const STORE_FORMAT: u32 = 1;
/// Name of the embedding model whose vectors the store holds.
pub const EMBEDDING_MODEL: &str = "sentence-transformers/all-MiniLM-L6-v2";

const MANIFEST_FILE: &str = "myelin.json";
const LOCK_FILE: &str = ".myelin.lock";

/// The datasets of a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Table {
    /// One row per turn.
    Episodes,
    /// One row per question.
    Questions,
    /// One row per conversation.
    Conversations,
    /// One row per graph node.
    Nodes,
    /// One row per graph edge.
    Edges,
    /// One row per change made through the serving API (append-only; outlives what it
    /// records).
    History,
}

impl Table {
    /// Every table, in the order they are written.
    pub const ALL: [Table; 5] = [Table::Episodes, Table::Questions, Table::Conversations, Table::Nodes, Table::Edges];
    /// Every dataset a store may hold: the conversation tables and the history.
    pub const STORED: [Table; 6] =
        [Table::Episodes, Table::Questions, Table::Conversations, Table::Nodes, Table::Edges, Table::History];

    /// Dataset name (directory `<name>.lance`).
    pub fn name(self) -> &'static str {
        match self {
            Table::Episodes => "episodes",
            Table::Questions => "questions",
            Table::Conversations => "conversations",
            Table::Nodes => "nodes",
            Table::Edges => "edges",
            Table::History => "history",
        }
    }

    fn schema(self) -> SchemaRef {
        let ts = DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
        let list_of_str = DataType::List(Arc::new(Field::new("item", DataType::Utf8, true)));
        let embedding =
            DataType::FixedSizeList(Arc::new(Field::new("item", DataType::Float32, true)), EMBEDDING_DIM as i32);
        let fields = match self {
            Table::Episodes => vec![
                Field::new("conversation", DataType::Utf8, false),
                Field::new("session", DataType::UInt32, false),
                Field::new("turn_id", DataType::Utf8, false),
                Field::new("position", DataType::UInt32, false),
                Field::new("speaker", DataType::Utf8, false),
                Field::new("text", DataType::Utf8, false),
                Field::new("image_caption", DataType::Utf8, true),
                Field::new("timestamp", ts, true),
                Field::new("embedding", embedding.clone(), false),
            ],
            Table::Questions => vec![
                Field::new("conversation", DataType::Utf8, false),
                Field::new("question_id", DataType::Utf8, false),
                Field::new("text", DataType::Utf8, false),
                Field::new("category", DataType::Utf8, false),
                Field::new("answer", DataType::Utf8, false),
                Field::new("evidence", list_of_str.clone(), false),
                Field::new("unresolved_evidence", list_of_str, false),
                Field::new("adversarial", DataType::Boolean, false),
            ],
            Table::Conversations => vec![
                Field::new("conversation", DataType::Utf8, false),
                Field::new("format", DataType::Utf8, false),
                Field::new("source", DataType::Utf8, false),
                Field::new("sessions", DataType::UInt32, false),
                Field::new("turns", DataType::UInt32, false),
                Field::new("questions", DataType::UInt32, false),
                Field::new("unresolved_evidence", DataType::UInt32, false),
                Field::new("ingested_at", ts, false),
            ],
            Table::Nodes => vec![
                Field::new("conversation", DataType::Utf8, false),
                Field::new("node", DataType::UInt32, false),
                // "episode", or the concept kind ("name", "phrase", "term", "date").
                Field::new("kind", DataType::Utf8, false),
                // Episode index in the conversation, or concept index.
                Field::new("index", DataType::UInt32, false),
                // Turn id of an episode, key of a concept.
                Field::new("key", DataType::Utf8, false),
                Field::new("label", DataType::Utf8, false),
                Field::new("mentions", DataType::UInt32, false),
                Field::new("pagerank", DataType::Float32, false),
                // Concepts only (null for an episode, whose vector is its row in `episodes`): a
                // list, so an episode's row holds no values. Stores written before 2026-12 hold
                // a fixed-size list here, 384 zeros per episode; they are read and appended to
                // as they are (see `WriteTxn::put_graphs`).
                Field::new("embedding", node_embedding(), true),
            ],
            Table::Edges => vec![
                Field::new("conversation", DataType::Utf8, false),
                Field::new("src", DataType::UInt32, false),
                Field::new("dst", DataType::UInt32, false),
                Field::new("kind", DataType::Utf8, false),
                Field::new("weight", DataType::Float32, false),
                Field::new("hours", DataType::Float32, false),
            ],
            Table::History => vec![
                Field::new("memory_id", DataType::Utf8, false),
                Field::new("conversation", DataType::Utf8, false),
                // "ADD" or "DELETE".
                Field::new("event", DataType::Utf8, false),
                Field::new("at", ts, false),
            ],
        };
        Arc::new(Schema::new(fields))
    }
}

/// `myelin.json`: what a reader trusts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoreManifest {
    format: u32,
    /// Number of committed writes.
    generation: u64,
    embedding_model: String,
    embedding_dim: usize,
    /// Table name → pinned Lance dataset version.
    tables: BTreeMap<String, u64>,
    updated_at: DateTime<Utc>,
}

impl StoreManifest {
    fn empty() -> Self {
        StoreManifest {
            format: STORE_FORMAT,
            generation: 0,
            embedding_model: EMBEDDING_MODEL.into(),
            embedding_dim: EMBEDDING_DIM,
            tables: BTreeMap::new(),
            updated_at: Utc::now(),
        }
    }
}

/// One stored turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Episode {
    /// Conversation id.
    pub conversation: String,
    /// Session number.
    pub session: u32,
    /// Source turn id (`D3:12`, `42`).
    pub turn_id: String,
    /// 0-based position in the conversation.
    pub position: u32,
    /// Speaker or role.
    pub speaker: String,
    /// The turn's text.
    pub text: String,
    /// Caption of a shared photo.
    pub image_caption: Option<String>,
    /// When it was said.
    pub timestamp: Option<DateTime<Utc>>,
    /// Unit-length MiniLM embedding of [`Turn::embedding_text`].
    pub embedding: Vec<f32>,
}

impl Episode {
    /// The text that was embedded (see [`Turn::embedding_text`]).
    pub fn embedding_text(&self) -> String {
        crate::conversation::embedding_text(&self.text, self.image_caption.as_deref())
    }

    /// The text BM25 indexes: `speaker: ` and the embedded text (questions name people).
    pub fn indexed_text(&self) -> String {
        format!("{}: {}", self.speaker, self.embedding_text())
    }
}

/// One row of `conversations.lance`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConversationSummary {
    /// Conversation id.
    pub id: String,
    /// Source layout.
    pub format: String,
    /// File or directory it was read from.
    pub source: String,
    /// Number of sessions.
    pub sessions: u32,
    /// Number of turns (episodes).
    pub turns: u32,
    /// Number of questions.
    pub questions: u32,
    /// Evidence ids that named no turn.
    pub unresolved_evidence: u32,
    /// When it was (last) ingested.
    pub ingested_at: DateTime<Utc>,
}

/// Versions and sizes of a store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoreInfo {
    /// Store directory.
    pub path: PathBuf,
    /// Store format.
    pub format: u32,
    /// Number of committed writes.
    pub generation: u64,
    /// Embedding model of the stored vectors.
    pub embedding_model: String,
    /// Pinned Lance dataset version per table.
    pub table_versions: BTreeMap<String, u64>,
    /// Rows per table at the pinned versions.
    pub table_rows: BTreeMap<String, usize>,
    /// Lance file format of the episodes dataset (e.g. `2.0`), if it exists.
    pub lance_file_format: Option<String>,
    /// Bytes on disk under the store directory, old Lance versions included.
    pub size_bytes: u64,
    /// When the last write was committed.
    pub updated_at: DateTime<Utc>,
}

/// A store opened for reading at its committed state.
#[derive(Debug)]
pub struct Store {
    root: PathBuf,
    manifest: StoreManifest,
    tables: BTreeMap<Table, Dataset>,
}

/// The store directory to use: `explicit`, else `$MYELIN_STORE`, else `./myelin-store`.
pub fn resolve_store_dir(explicit: Option<&Path>) -> PathBuf {
    explicit
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os(STORE_ENV).filter(|v| !v.is_empty()).map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from(DEFAULT_STORE_DIR))
}

fn uri(root: &Path, table: Table) -> Result<String> {
    let path = root.join(format!("{}.lance", table.name()));
    path.to_str()
        .map(str::to_owned)
        .ok_or_else(|| Error::InvalidArgument(format!("store path {} is not valid UTF-8", path.display())))
}

fn read_manifest(root: &Path) -> Result<Option<StoreManifest>> {
    let path = root.join(MANIFEST_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(&path, e)),
    };
    let manifest: StoreManifest = serde_json::from_slice(&bytes)
        .map_err(|e| Error::format(&path, format!("line {} column {}", e.line(), e.column()), e.to_string()))?;
    if manifest.format != STORE_FORMAT {
        return Err(Error::Store {
            path: root.to_path_buf(),
            message: format!("store format {} is not supported (this build reads {STORE_FORMAT})", manifest.format),
        });
    }
    if manifest.embedding_dim != EMBEDDING_DIM {
        return Err(Error::Store {
            path: root.to_path_buf(),
            message: format!("store holds {}-dim embeddings, this build uses {EMBEDDING_DIM}", manifest.embedding_dim),
        });
    }
    Ok(Some(manifest))
}

impl Store {
    /// Opens the store at `root` as of its last committed write. A directory without
    /// `myelin.json` (or a missing one) is an empty store; a non-empty directory that holds
    /// anything but Myelin's files is refused, so that a typo cannot turn some other folder
    /// into a store.
    pub async fn open(root: &Path) -> Result<Store> {
        let manifest = match read_manifest(root)? {
            Some(m) => m,
            None => {
                check_foreign(root)?;
                StoreManifest::empty()
            }
        };
        let mut tables = BTreeMap::new();
        for table in Table::STORED {
            if let Some(&version) = manifest.tables.get(table.name()) {
                let ds = Dataset::open(&uri(root, table)?).await.map_err(|e| unreadable(root, table, e))?;
                let ds = if ds.version().version == version {
                    ds
                } else {
                    ds.checkout_version(version).await.map_err(|e| unreadable(root, table, e))?
                };
                check_files(root, table, &ds)?;
                tables.insert(table, ds);
            }
        }
        Ok(Store { root: root.to_path_buf(), manifest, tables })
    }

    /// The store directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The generation `root`'s manifest holds now (0 for a store never written): one small
    /// read, for a reader that follows a writer's commits.
    pub fn committed_generation(root: &Path) -> Result<u64> {
        Ok(read_manifest(root)?.map_or(0, |m| m.generation))
    }

    /// Number of committed writes (0 for a store never written).
    pub fn generation(&self) -> u64 {
        self.manifest.generation
    }

    /// The model its embeddings come from.
    pub fn embedding_model(&self) -> &str {
        &self.manifest.embedding_model
    }

    /// Versions, row counts and size on disk.
    pub async fn info(&self) -> Result<StoreInfo> {
        let mut table_rows = BTreeMap::new();
        for (table, ds) in &self.tables {
            table_rows.insert(table.name().to_string(), ds.count_rows(None).await?);
        }
        Ok(StoreInfo {
            table_rows,
            path: self.root.clone(),
            format: self.manifest.format,
            generation: self.manifest.generation,
            embedding_model: self.manifest.embedding_model.clone(),
            table_versions: self.manifest.tables.clone(),
            lance_file_format: self
                .tables
                .get(&Table::Episodes)
                .map(|d| d.manifest().data_storage_format.version.to_string()),
            size_bytes: dir_size(&self.root)?,
            updated_at: self.manifest.updated_at,
        })
    }

    /// Every conversation in the store, sorted by id.
    pub async fn conversations(&self) -> Result<Vec<ConversationSummary>> {
        let mut out = Vec::new();
        for batch in self.scan(Table::Conversations, None).await? {
            let ingested = ts_col(&batch, "ingested_at")?;
            for r in 0..batch.num_rows() {
                out.push(ConversationSummary {
                    id: str_col(&batch, "conversation")?.value(r).to_string(),
                    format: str_col(&batch, "format")?.value(r).to_string(),
                    source: str_col(&batch, "source")?.value(r).to_string(),
                    sessions: u32_col(&batch, "sessions")?.value(r),
                    turns: u32_col(&batch, "turns")?.value(r),
                    questions: u32_col(&batch, "questions")?.value(r),
                    unresolved_evidence: u32_col(&batch, "unresolved_evidence")?.value(r),
                    ingested_at: DateTime::from_timestamp_micros(ingested.value(r)).unwrap_or_default(),
                });
            }
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    /// The episodes of one conversation in conversation order. An unknown id is an error.
    pub async fn episodes(&self, conversation: &str) -> Result<Vec<Episode>> {
        self.require_conversation(conversation).await?;
        let mut out = Vec::new();
        for batch in self.scan(Table::Episodes, Some(conversation)).await? {
            let emb = self.embedding_col(&batch, Table::Episodes)?;
            let caption = str_col(&batch, "image_caption")?;
            let ts = ts_col(&batch, "timestamp")?;
            for r in 0..batch.num_rows() {
                let embedding = emb.row(r).ok_or_else(|| self.schema_error("episodes.embedding (null)"))?;
                out.push(Episode {
                    conversation: str_col(&batch, "conversation")?.value(r).to_string(),
                    session: u32_col(&batch, "session")?.value(r),
                    turn_id: str_col(&batch, "turn_id")?.value(r).to_string(),
                    position: u32_col(&batch, "position")?.value(r),
                    speaker: str_col(&batch, "speaker")?.value(r).to_string(),
                    text: str_col(&batch, "text")?.value(r).to_string(),
                    image_caption: (!caption.is_null(r)).then(|| caption.value(r).to_string()),
                    timestamp: (!ts.is_null(r)).then(|| DateTime::from_timestamp_micros(ts.value(r))).flatten(),
                    embedding: embedding.to_vec(),
                });
            }
        }
        out.sort_by_key(|e| e.position);
        Ok(out)
    }

    /// The questions of one conversation in source order. An unknown id is an error.
    pub async fn questions(&self, conversation: &str) -> Result<Vec<Question>> {
        self.require_conversation(conversation).await?;
        let mut out = Vec::new();
        for batch in self.scan(Table::Questions, Some(conversation)).await? {
            let evidence = list_col(&batch, "evidence")?;
            let unresolved = list_col(&batch, "unresolved_evidence")?;
            let adversarial: &BooleanArray = col(&batch, "adversarial", "boolean")?;
            for r in 0..batch.num_rows() {
                out.push(Question {
                    id: str_col(&batch, "question_id")?.value(r).to_string(),
                    text: str_col(&batch, "text")?.value(r).to_string(),
                    category: str_col(&batch, "category")?.value(r).to_string(),
                    answer: str_col(&batch, "answer")?.value(r).to_string(),
                    evidence: list_values(evidence, r)?,
                    unresolved_evidence: list_values(unresolved, r)?,
                    adversarial: adversarial.value(r),
                });
            }
        }
        Ok(out)
    }

    /// The memory graph of one conversation, or `None` if none was built for it (a store
    /// written before graphs existed). An unknown id is an error.
    pub async fn graph(&self, conversation: &str) -> Result<Option<Graph>> {
        self.require_conversation(conversation).await?;
        let mut rows: Vec<(u32, NodeRef, Option<Concept>, f32)> = Vec::new();
        for batch in self.scan(Table::Nodes, Some(conversation)).await? {
            let emb = self.embedding_col(&batch, Table::Nodes)?;
            let (node, index, mentions) =
                (u32_col(&batch, "node")?, u32_col(&batch, "index")?, u32_col(&batch, "mentions")?);
            let (kind, key, label) = (str_col(&batch, "kind")?, str_col(&batch, "key")?, str_col(&batch, "label")?);
            let pagerank: &Float32Array = col(&batch, "pagerank", "float")?;
            for r in 0..batch.num_rows() {
                let (node_ref, concept) = if kind.value(r) == "episode" {
                    (NodeRef::Episode(index.value(r)), None)
                } else {
                    let concept_kind = ConceptKind::parse(kind.value(r))
                        .ok_or_else(|| self.schema_error(&format!("nodes.kind value '{}'", kind.value(r))))?;
                    let embedding = emb.row(r).ok_or_else(|| {
                        self.schema_error(&format!(
                            "nodes.embedding (null, or not {EMBEDDING_DIM} values, for a concept)"
                        ))
                    })?;
                    let concept = Concept {
                        key: key.value(r).to_string(),
                        label: label.value(r).to_string(),
                        kind: concept_kind,
                        mentions: mentions.value(r),
                        embedding: embedding.to_vec(),
                    };
                    (NodeRef::Concept(index.value(r)), Some(concept))
                };
                rows.push((node.value(r), node_ref, concept, pagerank.value(r)));
            }
        }
        if rows.is_empty() {
            return Ok(None);
        }
        rows.sort_by_key(|r| r.0);
        let mut graph = Graph::default();
        let mut concepts: Vec<(u32, Concept)> = Vec::new();
        for (_, node_ref, concept, pagerank) in rows {
            if let (NodeRef::Concept(c), Some(concept)) = (node_ref, concept) {
                concepts.push((c, concept));
            }
            graph.nodes.push(node_ref);
            graph.pagerank.push(pagerank);
        }
        concepts.sort_by_key(|c| c.0);
        graph.concepts = concepts.into_iter().map(|c| c.1).collect();
        for batch in self.scan(Table::Edges, Some(conversation)).await? {
            let (src, dst, kind) = (u32_col(&batch, "src")?, u32_col(&batch, "dst")?, str_col(&batch, "kind")?);
            let weight: &Float32Array = col(&batch, "weight", "float")?;
            let hours: &Float32Array = col(&batch, "hours", "float")?;
            for r in 0..batch.num_rows() {
                let kind = EdgeKind::parse(kind.value(r))
                    .ok_or_else(|| self.schema_error(&format!("edges.kind value '{}'", kind.value(r))))?;
                graph.edges.push(Edge {
                    src: src.value(r),
                    dst: dst.value(r),
                    kind,
                    weight: weight.value(r),
                    hours: hours.value(r),
                });
            }
        }
        graph.edges.sort_by_key(|e| (e.dst, e.src));
        graph.validate().map_err(|e| Error::Store {
            path: self.root.clone(),
            message: format!("graph of conversation '{conversation}' is inconsistent: {e}"),
        })?;
        Ok(Some(graph))
    }

    async fn require_conversation(&self, conversation: &str) -> Result<()> {
        let n = match self.tables.get(&Table::Conversations) {
            Some(ds) => ds.count_rows(Some(eq_filter("conversation", conversation))).await?,
            None => 0,
        };
        if n == 0 {
            return Err(Error::InvalidArgument(format!(
                "unknown conversation '{conversation}' in store {} (see `myelin stats`)",
                self.root.display()
            )));
        }
        Ok(())
    }

    async fn scan(&self, table: Table, conversation: Option<&str>) -> Result<Vec<RecordBatch>> {
        self.scan_where(table, conversation.map(|c| eq_filter("conversation", c))).await
    }

    async fn scan_where(&self, table: Table, filter: Option<String>) -> Result<Vec<RecordBatch>> {
        let Some(ds) = self.tables.get(&table) else { return Ok(Vec::new()) };
        let mut scanner = ds.scan();
        if let Some(f) = filter {
            scanner.filter(&f)?;
        }
        Ok(scanner.try_into_stream().await?.try_collect().await?)
    }

    /// The recorded changes of a memory (or of every memory when `memory_id` is `None`),
    /// oldest first.
    pub async fn history(&self, memory_id: Option<&str>) -> Result<Vec<HistoryEvent>> {
        let mut out = Vec::new();
        for batch in self.scan_where(Table::History, memory_id.map(|m| eq_filter("memory_id", m))).await? {
            let at = ts_col(&batch, "at")?;
            for r in 0..batch.num_rows() {
                out.push(HistoryEvent {
                    memory_id: str_col(&batch, "memory_id")?.value(r).to_string(),
                    conversation: str_col(&batch, "conversation")?.value(r).to_string(),
                    event: str_col(&batch, "event")?.value(r).to_string(),
                    at: DateTime::from_timestamp_micros(at.value(r)).unwrap_or_default(),
                });
            }
        }
        out.sort_by_key(|e| e.at);
        Ok(out)
    }

    /// The `embedding` column of a batch of `table`: a fixed-size list, or (nodes) a list.
    fn embedding_col<'a>(&self, batch: &'a RecordBatch, table: Table) -> Result<EmbeddingCol<'a>> {
        let column = batch
            .column_by_name("embedding")
            .ok_or_else(|| Error::InvalidArgument(format!("column {}.embedding is missing", table.name())))?;
        let (rows, values) = if let Some(list) = column.as_any().downcast_ref::<FixedSizeListArray>() {
            (EmbeddingRows::Fixed(list), list.values())
        } else if let Some(list) = column.as_any().downcast_ref::<ListArray>() {
            (EmbeddingRows::Listed(list), list.values())
        } else {
            return Err(self.schema_error(&format!("{}.embedding", table.name())));
        };
        let values = values
            .as_any()
            .downcast_ref::<Float32Array>()
            .ok_or_else(|| self.schema_error(&format!("{}.embedding values", table.name())))?;
        Ok(EmbeddingCol { rows, values: values.values() })
    }

    fn schema_error(&self, what: &str) -> Error {
        Error::Store { path: self.root.clone(), message: format!("column {what} has an unexpected type") }
    }

    /// Deletes every version of every table older than the committed one, with the files only
    /// they use: after a compacting write, deleted rows then exist in no file. Run by the one
    /// writer, after its commit.
    pub async fn purge_old_versions(&self) -> Result<()> {
        for ds in self.tables.values() {
            ds.cleanup_old_versions(chrono::Duration::zero(), Some(true), None).await?;
            crate::fault::point("purge");
        }
        Ok(())
    }
}

/// The right to write one store: an exclusive OS lock (`flock` on `.myelin.lock`) that a writing
/// process (serve, mcp, ingest, a library `Service`) takes once and holds for as long as it may
/// write. Whoever keeps state derived from the store (the serving API's scopes) must hold it for
/// that state's whole life, so that no other view of the store can commit meanwhile. The kernel
/// releases the lock when the process dies, so a crash never leaves a stale lock; a second
/// writer, in this process or another, gets [`Error::Locked`] naming the holder. Readers take
/// no lock.
#[derive(Debug, Clone)]
pub struct Writer {
    root: PathBuf,
    /// The locked file; the lock lasts while any clone of this handle does.
    _lock: Arc<std::fs::File>,
}

impl Writer {
    /// Takes the writer lock of the store at `root` (creating the directory), or fails at once
    /// with [`Error::Locked`] if another writer holds it. The lock file then names this
    /// process, for the error a later writer gets.
    pub fn acquire(root: &Path) -> Result<Writer> {
        use std::io::{Read, Seek, Write};
        std::fs::create_dir_all(root).map_err(|e| Error::io(root, e))?;
        check_foreign_if_unborn(root)?;
        let lock_path = root.join(LOCK_FILE);
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
        let command: Vec<String> = std::env::args().collect();
        let name = format!("pid {} ({}), since {}\n", std::process::id(), command.join(" "), Utc::now().to_rfc3339());
        lock.set_len(0)
            .and_then(|()| lock.rewind())
            .and_then(|()| lock.write_all(name.as_bytes()))
            .map_err(|e| Error::io(&lock_path, e))?;
        Ok(Writer { root: root.to_path_buf(), _lock: Arc::new(lock) })
    }

    /// The store directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Starts a write transaction on the store as last committed. Nothing is visible to
    /// readers before [`WriteTxn::commit`].
    pub async fn begin(&self) -> Result<WriteTxn> {
        let store = Store::open(&self.root).await?;
        Ok(WriteTxn { store, _writer: self.clone(), fresh: BTreeMap::new() })
    }
}

/// A store directory never committed to must not be some other folder (see [`Store::open`]).
fn check_foreign_if_unborn(root: &Path) -> Result<()> {
    if root.join(MANIFEST_FILE).exists() { Ok(()) } else { check_foreign(root) }
}

/// A dataset that Lance cannot open at its pinned version: the error names the dataset.
fn unreadable(root: &Path, table: Table, e: lance::Error) -> Error {
    Error::Store { path: root.join(format!("{}.lance", table.name())), message: format!("cannot be opened: {e}") }
}

/// Every data file of `ds`'s version is there with the size its manifest recorded, so a
/// truncated or missing file is an error naming it when the store opens, not a read that
/// fails (or succeeds on part of the rows) later. Lance keeps no checksum of a file's bytes:
/// damage that keeps the size is not seen here.
fn check_files(root: &Path, table: Table, ds: &Dataset) -> Result<()> {
    let dir = root.join(format!("{}.lance", table.name()));
    for fragment in ds.fragments().iter() {
        for file in &fragment.files {
            let path = dir.join("data").join(&file.path);
            let found = match std::fs::metadata(&path) {
                Ok(m) => m.len(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(Error::Store { path, message: "is missing: the store cannot be read".into() });
                }
                Err(e) => return Err(Error::io(&path, e)),
            };
            if let Some(recorded) = file.file_size_bytes.get()
                && recorded.get() != found
            {
                return Err(Error::Store {
                    path,
                    message: format!(
                        "is {found} bytes where the dataset records {recorded}: truncated or damaged, the store cannot be read"
                    ),
                });
            }
        }
    }
    Ok(())
}

/// Refuses a non-empty directory that holds files other than a store's.
fn check_foreign(root: &Path) -> Result<()> {
    let entries = match std::fs::read_dir(root) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io(root, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(root, e))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let ours = name == LOCK_FILE
            || name.starts_with(MANIFEST_FILE)
            || Table::STORED.iter().any(|t| name == format!("{}.lance", t.name()));
        if !ours {
            return Err(Error::Store {
                path: root.to_path_buf(),
                message: format!("not a Myelin store: it has no {MANIFEST_FILE} and holds '{name}'"),
            });
        }
    }
    Ok(())
}

/// Bytes of every file under `root` (0 when it does not exist).
pub fn dir_size(root: &Path) -> Result<u64> {
    let mut total = 0;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io(&dir, e)),
        };
        for entry in entries {
            let entry = entry.map_err(|e| Error::io(&dir, e))?;
            let meta = entry.metadata().map_err(|e| Error::io(entry.path(), e))?;
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                total += meta.len();
            }
        }
    }
    Ok(total)
}

/// A SQL equality filter with the value quoted.
/// One episode row as written, borrowed from a [`Turn`] or an [`Episode`].
struct EpisodeRow<'a> {
    conversation: &'a str,
    session: u32,
    id: &'a str,
    position: u32,
    speaker: &'a str,
    text: &'a str,
    image_caption: Option<&'a str>,
    timestamp: Option<DateTime<Utc>>,
}

/// The `episodes` record batch of `rows` with their embeddings (`rows.len() × EMBEDDING_DIM`).
fn episode_batch(rows: &[EpisodeRow], embeddings: Vec<f32>) -> Result<RecordBatch> {
    let emb = embedding_array(embeddings, None)?;
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.conversation))),
        Arc::new(UInt32Array::from_iter_values(rows.iter().map(|r| r.session))),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.id))),
        Arc::new(UInt32Array::from_iter_values(rows.iter().map(|r| r.position))),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.speaker))),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.text))),
        Arc::new(StringArray::from(rows.iter().map(|r| r.image_caption).collect::<Vec<_>>())),
        Arc::new(
            TimestampMicrosecondArray::from(rows.iter().map(|r| micros(r.timestamp)).collect::<Vec<_>>())
                .with_timezone("UTC"),
        ),
        Arc::new(emb),
    ];
    Ok(RecordBatch::try_new(Table::Episodes.schema(), columns)?)
}

fn eq_filter(column: &str, value: &str) -> String {
    format!("{column} = {}", quote(value))
}

/// `value` as an SQL string literal.
fn quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}

/// Column `name` of `batch` as the Arrow array type `T`; `kind` names the type in the error.
fn col<'a, T: Array + 'static>(batch: &'a RecordBatch, name: &str, kind: &str) -> Result<&'a T> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<T>())
        .ok_or_else(|| Error::InvalidArgument(format!("column {name} is missing or not {kind}")))
}

/// A column of `EMBEDDING_DIM`-float vectors.
struct EmbeddingCol<'a> {
    rows: EmbeddingRows<'a>,
    values: &'a [f32],
}

/// How an embedding column lays out its rows.
enum EmbeddingRows<'a> {
    /// `EMBEDDING_DIM` values per row, null rows included.
    Fixed(&'a FixedSizeListArray),
    /// A list per row; a null row holds no values.
    Listed(&'a ListArray),
}

impl<'a> EmbeddingCol<'a> {
    /// Row `r`'s vector, `None` for a null row (or a listed row without `EMBEDDING_DIM` values).
    fn row(&self, r: usize) -> Option<&'a [f32]> {
        match self.rows {
            EmbeddingRows::Fixed(list) => {
                let start = list.value_offset(r) as usize;
                (!list.is_null(r)).then(|| &self.values[start..start + EMBEDDING_DIM])
            }
            EmbeddingRows::Listed(list) => {
                let (start, end) = (list.value_offsets()[r] as usize, list.value_offsets()[r + 1] as usize);
                (!list.is_null(r) && end - start == EMBEDDING_DIM).then(|| &self.values[start..end])
            }
        }
    }
}

/// The type of `nodes.embedding`: a list of floats, null for an episode.
fn node_embedding() -> DataType {
    DataType::List(Arc::new(Field::new("item", DataType::Float32, true)))
}

/// Rows of one conversation's graph to append: the chosen nodes and edges.
struct GraphRows<'a> {
    conversation: &'a str,
    graph: &'a Graph,
    turn_ids: &'a [&'a str],
    nodes: Vec<u32>,
    edges: Vec<&'a Edge>,
}

/// What a graph changed since an older version of it. Node ids are given in arrival order, so
/// the two share a first stretch of nodes (`kept`); after it the old version's nodes are gone
/// (the serving API's graph consolidates its open window into concepts, which the next write's
/// episode then follows) and the new one's are new.
#[derive(Debug, PartialEq)]
struct GraphDiff {
    /// Nodes the two versions share: ids `0..kept` are the same nodes.
    kept: u32,
    /// Nodes to write, ascending: the kept ones whose row changed (a concept's mentions or
    /// embedding), then every node from `kept` on.
    nodes: Vec<u32>,
    /// Nodes whose in-edges to write, ascending: the kept ones whose in-edges changed, then
    /// every node from `kept` on that has any.
    edges_to: Vec<u32>,
}

impl GraphDiff {
    fn of(old: &Graph, new: &Graph) -> GraphDiff {
        let kept = old.shared_nodes(new) as u32;
        let mut nodes: Vec<u32> = (0..kept)
            .filter(|&i| match new.nodes[i as usize] {
                NodeRef::Concept(c) => old.concepts[c as usize] != new.concepts[c as usize],
                NodeRef::Episode(_) => false,
            })
            .collect();
        nodes.extend(kept..new.node_count() as u32);
        let edges_to = (0..new.node_count() as u32)
            .filter(|&d| {
                let fresh = new.in_edges(d);
                if d < kept { old.in_edges(d) != fresh } else { !fresh.is_empty() }
            })
            .collect();
        GraphDiff { kept, nodes, edges_to }
    }

    /// Whether writing only what changed beats writing the graph whole: at most a quarter of
    /// its nodes changed or have changed in-edges.
    fn small(&self, nodes: usize) -> bool {
        4 * (self.nodes.len() + self.edges_to.len()) <= nodes
    }

    /// The rows of `table` this diff replaces in `conversation`: the changed kept nodes' and
    /// everything from `kept` on (`None`: none).
    fn stale(&self, table: Table, conversation: &str, old_nodes: usize) -> Option<String> {
        let (column, ids) = match table {
            Table::Nodes => ("node", &self.nodes),
            _ => ("dst", &self.edges_to),
        };
        let changed: Vec<String> = ids.iter().take_while(|&&i| i < self.kept).map(u32::to_string).collect();
        let mut any = Vec::new();
        if !changed.is_empty() {
            any.push(format!("{column} IN ({})", changed.join(", ")));
        }
        if (self.kept as usize) < old_nodes {
            any.push(format!("{column} >= {}", self.kept));
        }
        (!any.is_empty()).then(|| format!("({} AND ({}))", eq_filter("conversation", conversation), any.join(" OR ")))
    }
}

/// `vectors` (one per row, `None` for a null row) as a list column: a null row holds no values.
fn listed_embeddings(vectors: &[Option<&[f32]>]) -> ListArray {
    let mut builder = ListBuilder::with_capacity(Float32Builder::new(), vectors.len());
    for v in vectors {
        match v {
            Some(v) => {
                builder.values().append_slice(v);
                builder.append(true);
            }
            None => builder.append(false),
        }
    }
    builder.finish()
}

/// Rows of `EMBEDDING_DIM` floats as the schema's embedding column; `valid` marks the non-null
/// rows (all when `None`).
fn embedding_array(values: Vec<f32>, valid: Option<Vec<bool>>) -> Result<FixedSizeListArray> {
    let item = Arc::new(Field::new("item", DataType::Float32, true));
    let values = Arc::new(Float32Array::from(values));
    Ok(FixedSizeListArray::try_new(item, EMBEDDING_DIM as i32, values, valid.map(Into::into))?)
}

fn str_col<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a StringArray> {
    col(batch, name, "text")
}

fn u32_col<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a UInt32Array> {
    col(batch, name, "uint32")
}

fn ts_col<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a TimestampMicrosecondArray> {
    col(batch, name, "a timestamp")
}

fn list_col<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a ListArray> {
    col(batch, name, "a list")
}

fn list_values(list: &ListArray, row: usize) -> Result<Vec<String>> {
    let values = list.value(row);
    let strings = values
        .as_any()
        .downcast_ref::<StringArray>()
        .ok_or_else(|| Error::InvalidArgument("list column does not hold text".into()))?;
    Ok((0..strings.len()).map(|i| strings.value(i).to_string()).collect())
}

fn micros(t: Option<DateTime<Utc>>) -> Option<i64> {
    t.map(|t| t.timestamp_micros())
}

/// One recorded change of a memory. It holds no text, so a deleted memory's words survive
/// nowhere.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryEvent {
    /// The memory.
    pub memory_id: String,
    /// The conversation (scope) it belonged to.
    pub conversation: String,
    /// `ADD` or `DELETE`.
    pub event: String,
    /// When.
    pub at: DateTime<Utc>,
}

/// A write in progress. Dropping it without [`WriteTxn::commit`] abandons every change.
#[derive(Debug)]
pub struct WriteTxn {
    store: Store,
    /// Held for the transaction's life (and by its owner for longer).
    _writer: Writer,
    /// Tables already brought to the pinned state (restored) in this transaction.
    fresh: BTreeMap<Table, Dataset>,
}

impl WriteTxn {
    /// The store as it was when the transaction began.
    pub fn base(&self) -> &Store {
        &self.store
    }

    /// The dataset of `table` ready for writing, at the committed state: versions left by an
    /// abandoned write are rolled back by a Lance restore. `None` if the table has never been
    /// committed.
    async fn table(&mut self, table: Table) -> Result<Option<&mut Dataset>> {
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
        let quoted: Vec<String> = conversations.iter().map(|c| quote(c)).collect();
        let filter = format!("conversation IN ({})", quoted.join(", "));
        for &table in tables {
            if let Some(ds) = self.table(table).await? {
                ds.delete(&filter).await?;
                crate::fault::point("delete");
            }
        }
        Ok(())
    }

    async fn append(&mut self, table: Table, batch: RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let schema = batch.schema();
        let reader = RecordBatchIterator::new(vec![Ok(batch)], schema);
        match self.table(table).await? {
            Some(ds) => ds.append(reader, None).await?,
            None => {
                // Never committed: a dataset left by an abandoned first write is overwritten.
                let params = WriteParams { mode: WriteMode::Overwrite, ..WriteParams::default() };
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
        let rows: Vec<EpisodeRow> = turns
            .iter()
            .zip(session_of)
            .map(|(t, &session)| EpisodeRow {
                conversation,
                session,
                id: &t.id,
                position: t.position,
                speaker: &t.speaker,
                text: &t.text,
                image_caption: t.image_caption.as_deref(),
                timestamp: t.timestamp,
            })
            .collect();
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
            })
            .collect();
        let embeddings = episodes.iter().flat_map(|e| e.embedding.iter().copied()).collect();
        self.append(Table::Episodes, episode_batch(&rows, embeddings)?).await
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
    async fn put_graphs_laid_out(&mut self, graphs: &[(&str, &Graph, &[&str])], fixed: Option<bool>) -> Result<()> {
        for (conversation, graph, turn_ids) in graphs {
            graph.check(conversation, turn_ids.len())?;
        }
        let names: Vec<&str> = graphs.iter().map(|g| g.0).collect();
        self.remove_conversations(&names, &[Table::Nodes, Table::Edges]).await?;
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
    /// Only the rows that changed are rewritten (old rows deleted, new ones appended): every
    /// node after the stretch both versions share (the serving API consolidates its open
    /// window into concepts, so the last write's window is consolidated again with the new
    /// episodes), the concepts before it whose mentions or embedding moved, and the in-edges of
    /// every node whose in-edges changed. PageRank, which every edge moves, is not rewritten:
    /// [`Graph::rank`] derives it from the edges on load, so a row's `pagerank` is its value
    /// when the row was written. A graph that changed in more than a quarter of its rows is
    /// written whole, as [`WriteTxn::put_graphs`] does.
    pub async fn update_graphs(&mut self, graphs: &[(&str, &Graph, &Graph, &[&str])]) -> Result<()> {
        let mut whole: Vec<(&str, &Graph, &[&str])> = Vec::new();
        let mut rows: Vec<GraphRows> = Vec::new();
        let mut stale: Vec<(Table, String)> = Vec::new();
        for &(conversation, old, new, turn_ids) in graphs {
            new.check(conversation, turn_ids.len())?;
            let diff = GraphDiff::of(old, new);
            if !diff.small(new.node_count()) {
                whole.push((conversation, new, turn_ids));
                continue;
            }
            for table in [Table::Nodes, Table::Edges] {
                stale.extend(diff.stale(table, conversation, old.node_count()).map(|f| (table, f)));
            }
            let edges = diff.edges_to.iter().flat_map(|&d| new.in_edges(d)).collect();
            rows.push(GraphRows { conversation, graph: new, turn_ids, nodes: diff.nodes, edges });
        }
        for table in [Table::Nodes, Table::Edges] {
            let filters: Vec<&str> = stale.iter().filter(|(t, _)| *t == table).map(|(_, f)| f.as_str()).collect();
            if !filters.is_empty()
                && let Some(ds) = self.table(table).await?
            {
                ds.delete(&filters.join(" OR ")).await?;
                crate::fault::point("delete");
            }
        }
        self.append_graph_rows(&rows, None).await?;
        self.put_graphs_laid_out(&whole, None).await
    }

    /// Appends the chosen node and edge rows of graphs, `nodes.embedding` laid out as
    /// [`WriteTxn::put_graphs_laid_out`] says.
    async fn append_graph_rows(&mut self, graphs: &[GraphRows<'_>], fixed: Option<bool>) -> Result<()> {
        if graphs.iter().all(|g| g.nodes.is_empty() && g.edges.is_empty()) {
            return Ok(());
        }
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

    /// Makes every change visible at once by replacing `myelin.json` atomically, and returns
    /// the store as committed.
    pub async fn commit(mut self) -> Result<Store> {
        let root = self.store.root.clone();
        let mut manifest = self.store.manifest.clone();
        for (table, ds) in &self.fresh {
            manifest.tables.insert(table.name().to_string(), ds.version().version);
        }
        manifest.generation += 1;
        manifest.updated_at = Utc::now();
        let tmp = root.join(format!("{MANIFEST_FILE}.tmp"));
        let target = root.join(MANIFEST_FILE);
        let bytes = serde_json::to_vec_pretty(&manifest)
            .map_err(|e| Error::Store { path: root.clone(), message: format!("cannot encode manifest: {e}") })?;
        {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
            f.write_all(&bytes).map_err(|e| Error::io(&tmp, e))?;
            f.sync_all().map_err(|e| Error::io(&tmp, e))?;
        }
        crate::fault::point("before manifest rename");
        std::fs::rename(&tmp, &target).map_err(|e| Error::io(&target, e))?;
        crate::fault::point("after manifest rename");
        if let Ok(dir) = std::fs::File::open(&root) {
            // Persist the rename itself; not every platform can fsync a directory.
            let _ = dir.sync_all();
        }
        // Tables written in this transaction at their new versions; the others as they were.
        let mut tables = std::mem::take(&mut self.store.tables);
        tables.append(&mut self.fresh);
        Ok(Store { root, manifest, tables })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::{Session, SourceFormat};

    fn conversation(id: &str, turns: usize) -> Conversation {
        let day = DateTime::from_timestamp(1_683_504_000, 0);
        let turns = (0..turns)
            .map(|i| Turn {
                id: format!("D1:{}", i + 1),
                speaker: if i % 2 == 0 { "Ana".into() } else { "Ben".into() },
                text: format!("turn {i} of {id} with a quote ' in it"),
                image_caption: (i == 1).then(|| "a photo of a dog".to_string()),
                timestamp: if i == 2 { None } else { day },
                position: i as u32,
            })
            .collect();
        Conversation {
            id: id.into(),
            format: SourceFormat::Locomo,
            sessions: vec![Session { index: 1, date: day, turns }],
            questions: vec![Question {
                id: format!("{id}/q0"),
                text: "what?".into(),
                category: "1".into(),
                answer: "that".into(),
                evidence: vec!["D1:1".into(), "D1:2".into()],
                unresolved_evidence: vec!["D9:9".into()],
                adversarial: false,
            }],
        }
    }

    /// Deterministic unit vectors, distinct per row.
    fn vectors(n: usize, seed: usize) -> Vec<f32> {
        let mut out = vec![0f32; n * EMBEDDING_DIM];
        for r in 0..n {
            out[r * EMBEDDING_DIM + (r + seed) % EMBEDDING_DIM] = 1.0;
        }
        out
    }

    async fn write(root: &Path, c: &Conversation, seed: usize) -> Store {
        let mut txn = Writer::acquire(root).expect("lock").begin().await.expect("begin");
        if txn.base().conversations().await.expect("list").iter().any(|s| s.id == c.id) {
            txn.remove_conversation(&c.id).await.expect("remove");
        }
        let turns: Vec<&Turn> = c.turns().collect();
        let sessions = vec![1; turns.len()];
        txn.append_episodes(&c.id, &sessions, &turns, &vectors(turns.len(), seed)).await.expect("append");
        txn.put_conversation(c, "test").await.expect("put");
        txn.commit().await.expect("commit")
    }

    fn small_graph(turns: u32) -> Graph {
        use crate::graph::ConceptKind;
        let mut g = Graph::default();
        for e in 0..turns {
            g.nodes.push(NodeRef::Episode(e));
        }
        g.nodes.push(NodeRef::Concept(0));
        let mut embedding = vec![0.0; EMBEDDING_DIM];
        embedding[5] = 0.6;
        embedding[9] = 0.8;
        g.concepts.push(Concept {
            key: "dog".into(),
            label: "Dog's".into(),
            kind: ConceptKind::Term,
            mentions: 2,
            embedding,
        });
        let c = turns;
        for e in 1..turns {
            g.edges.push(Edge { src: e - 1, dst: e, kind: EdgeKind::Temporal, weight: 1.0, hours: 2.5 * e as f32 });
        }
        g.edges.push(Edge { src: 0, dst: c, kind: EdgeKind::Abstraction, weight: 0.8, hours: 0.0 });
        g.edges.push(Edge { src: c, dst: 0, kind: EdgeKind::Abstraction, weight: 0.8, hours: 0.0 });
        g.edges.sort_by_key(|e| (e.dst, e.src));
        g.pagerank = (0..=turns).map(|i| 1.0 / (1.0 + i as f32)).collect();
        g
    }

    #[tokio::test]
    async fn updating_a_growing_graph_stores_what_writing_it_whole_stores() {
        let (_, graphs) = crate::graph::build::growing_graphs(200);
        let dir = tempfile::tempdir().unwrap();
        let c = conversation("conv-u", 200);
        write(dir.path(), &c, 0).await;
        let ids: Vec<String> = c.turns().map(|t| t.id.clone()).collect();
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        let (mut partial, mut moved) = (0, 0);
        for (k, new) in graphs.iter().enumerate() {
            let turn_ids = &ids[..new.episode_count()];
            let mut txn = Writer::acquire(dir.path()).expect("lock").begin().await.unwrap();
            if k == 0 {
                txn.put_graphs(&[("conv-u", new, turn_ids)]).await.unwrap();
            } else {
                let old = &graphs[k - 1];
                let diff = GraphDiff::of(old, new);
                assert!(diff.kept as usize <= old.node_count() && diff.kept > 0, "write {k}: {diff:?}");
                partial += diff.small(new.node_count()) as usize;
                moved += diff.nodes.iter().filter(|&&n| n < diff.kept).count();
                txn.update_graphs(&[("conv-u", old, new, turn_ids)]).await.unwrap();
            }
            let store = txn.commit().await.unwrap();
            let mut back = store.graph("conv-u").await.unwrap().expect("a graph");
            back.rank(crate::graph::GraphConfig::default().pagerank_damping);
            assert_eq!(&back, new, "write {k}");
        }
        assert!(partial * 2 >= graphs.len(), "{partial} of {} writes rewrote only what changed", graphs.len());
        assert!(moved > 0, "no stored concept row changed: the test does not reach that path");
        // A graph written whole and read back ranks as the builder did, to the bit.
        let last = graphs.last().unwrap();
        let mut txn = Writer::acquire(dir.path()).expect("lock").begin().await.unwrap();
        txn.put_graphs(&[("conv-u", last, &ids[..last.episode_count()])]).await.unwrap();
        let store = txn.commit().await.unwrap();
        let mut back = store.graph("conv-u").await.unwrap().expect("a graph");
        assert_eq!(&back, last);
        back.rank(crate::graph::GraphConfig::default().pagerank_damping);
        assert_eq!(&back, last);
    }

    #[tokio::test]
    async fn graph_round_trips_and_is_replaced_and_removed_with_its_conversation() {
        let dir = tempfile::tempdir().unwrap();
        let c = conversation("conv-g", 3);
        let store = write(dir.path(), &c, 0).await;
        assert_eq!(store.graph("conv-g").await.unwrap(), None, "no graph written yet");
        let graph = small_graph(3);
        let mut txn = Writer::acquire(dir.path()).expect("lock").begin().await.unwrap();
        txn.put_graph("conv-g", &graph, &["D1:1", "D1:2", "D1:3"]).await.unwrap();
        let store = txn.commit().await.unwrap();
        assert_eq!(store.graph("conv-g").await.unwrap().as_ref(), Some(&graph));
        // Reopened from disk, not rebuilt.
        let reopened = Store::open(dir.path()).await.unwrap();
        assert_eq!(reopened.graph("conv-g").await.unwrap().as_ref(), Some(&graph));

        let mut txn = Writer::acquire(dir.path()).expect("lock").begin().await.unwrap();
        let smaller = small_graph(3);
        let smaller = Graph { edges: smaller.edges[..2].to_vec(), ..smaller };
        txn.put_graph("conv-g", &smaller, &["D1:1", "D1:2", "D1:3"]).await.unwrap();
        let store = txn.commit().await.unwrap();
        assert_eq!(store.graph("conv-g").await.unwrap().unwrap().edges.len(), 2, "replaced, not appended");

        let mut txn = Writer::acquire(dir.path()).expect("lock").begin().await.unwrap();
        let wrong = txn.put_graph("conv-g", &graph, &["D1:1"]).await.unwrap_err();
        assert!(wrong.to_string().contains("3 episodes in the graph, 1 given"), "{wrong}");
        txn.remove_conversation("conv-g").await.unwrap();
        let store = txn.commit().await.unwrap();
        assert_eq!(store.info().await.unwrap().table_rows["nodes"], 0);
        assert_eq!(store.info().await.unwrap().table_rows["edges"], 0);
    }

    #[tokio::test]
    async fn node_embeddings_are_listed_and_stores_with_fixed_size_ones_still_read_and_grow() {
        // A store written before node embeddings were lists: 384 zeros per episode node.
        let old = tempfile::tempdir().unwrap();
        let (a, b) = (conversation("conv-a", 40), conversation("conv-b", 3));
        write(old.path(), &a, 0).await;
        write(old.path(), &b, 1).await;
        let ids = |n: usize| (1..=n).map(|t| format!("D1:{t}")).collect::<Vec<String>>();
        let (ids_a, ids_b) = (ids(40), ids(3));
        let ids_a: Vec<&str> = ids_a.iter().map(String::as_str).collect();
        let ids_b: Vec<&str> = ids_b.iter().map(String::as_str).collect();
        let (graph_a, graph_b) = (small_graph(40), small_graph(3));
        let mut txn = Writer::acquire(old.path()).expect("lock").begin().await.unwrap();
        txn.put_graphs_laid_out(&[("conv-a", &graph_a, &ids_a)], Some(true)).await.unwrap();
        txn.commit().await.unwrap();
        // Appended to in its own layout (a list batch would not match its schema), and read.
        let mut txn = Writer::acquire(old.path()).expect("lock").begin().await.unwrap();
        txn.put_graph("conv-b", &graph_b, &ids_b).await.unwrap();
        let store = txn.commit().await.unwrap();
        assert_eq!(store.graph("conv-a").await.unwrap().as_ref(), Some(&graph_a));
        assert_eq!(store.graph("conv-b").await.unwrap().as_ref(), Some(&graph_b));
        // A new store lists them: an episode's row holds no values.
        let new = tempfile::tempdir().unwrap();
        write(new.path(), &a, 0).await;
        let mut txn = Writer::acquire(new.path()).expect("lock").begin().await.unwrap();
        txn.put_graph("conv-a", &graph_a, &ids_a).await.unwrap();
        let store = txn.commit().await.unwrap();
        assert_eq!(store.graph("conv-a").await.unwrap().as_ref(), Some(&graph_a));
        let values = |store: &Store| {
            Schema::from(store.tables[&Table::Nodes].schema()).field_with_name("embedding").unwrap().data_type().clone()
        };
        assert!(matches!(values(&store), DataType::List(_)), "{:?}", values(&store));
        let old_store = Store::open(old.path()).await.unwrap();
        assert!(matches!(values(&old_store), DataType::FixedSizeList(..)), "{:?}", values(&old_store));
        let bytes = |dir: &Path| {
            let mut total = 0;
            let mut stack = vec![dir.join("nodes.lance")];
            while let Some(d) = stack.pop() {
                for e in std::fs::read_dir(&d).unwrap() {
                    let e = e.unwrap();
                    if e.file_type().unwrap().is_dir() {
                        stack.push(e.path());
                    } else if e.path().extension().is_some_and(|x| x == "lance") {
                        total += e.metadata().unwrap().len();
                    }
                }
            }
            total
        };
        // 41 nodes: 40 episodes and one concept. Listed, the data files hold about one vector.
        assert!(bytes(new.path()) < 4 * EMBEDDING_DIM as u64 * 4, "{} bytes", bytes(new.path()));
        assert!(bytes(old.path()) > 40 * EMBEDDING_DIM as u64 * 4, "{} bytes", bytes(old.path()));
    }

    #[tokio::test]
    async fn many_conversations_are_written_and_removed_in_one_write_each() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (conversation("a'1", 3), conversation("b", 2));
        write(dir.path(), &a, 0).await;
        let store = write(dir.path(), &b, 1).await;
        let mut eps = store.episodes("b").await.unwrap();
        // Episodes appended as stored rows, to two conversations at once.
        let mut txn = Writer::acquire(dir.path()).expect("lock").begin().await.unwrap();
        let mut extra = eps[0].clone();
        extra.turn_id = "D9:1".into();
        extra.position = 2;
        let mut moved = eps[1].clone();
        moved.conversation = "a'1".into();
        moved.turn_id = "D9:2".into();
        moved.position = 3;
        txn.append_episode_rows(&[&extra, &moved]).await.unwrap();
        let (ga, gb) = (small_graph(4), small_graph(3));
        txn.put_graphs(&[("a'1", &ga, &["D1:1", "D1:2", "D1:3", "D9:2"]), ("b", &gb, &["D1:1", "D1:2", "D9:1"])])
            .await
            .unwrap();
        let store = txn.commit().await.unwrap();
        eps.push(extra);
        assert_eq!(store.episodes("b").await.unwrap(), eps);
        assert_eq!(store.episodes("a'1").await.unwrap()[3], moved);
        assert_eq!(store.graph("a'1").await.unwrap().as_ref(), Some(&ga));
        assert_eq!(store.graph("b").await.unwrap().as_ref(), Some(&gb));
        let mut bad = eps[0].clone();
        bad.embedding.pop();
        let mut txn = Writer::acquire(dir.path()).expect("lock").begin().await.unwrap();
        let err = txn.append_episode_rows(&[&bad]).await.unwrap_err().to_string();
        assert!(err.contains("383 embedding values"), "{err}");
        // One removal of both, from the tables named only.
        txn.remove_conversations(&["a'1", "b"], &[Table::Nodes, Table::Edges]).await.unwrap();
        let store = txn.commit().await.unwrap();
        let rows = store.info().await.unwrap().table_rows;
        assert_eq!((rows["nodes"], rows["edges"], rows["episodes"]), (0, 0, 7));
    }

    #[tokio::test]
    async fn episodes_and_questions_round_trip() {
        let dir = tempfile::tempdir().expect("tempdir");
        let c = conversation("conv-'1", 5);
        let store = write(dir.path(), &c, 0).await;
        let eps = store.episodes(&c.id).await.expect("episodes");
        assert_eq!(eps.len(), 5);
        for (e, t) in eps.iter().zip(c.turns()) {
            assert_eq!((&e.turn_id, &e.speaker, &e.text, e.position), (&t.id, &t.speaker, &t.text, t.position));
            assert_eq!(e.image_caption, t.image_caption);
            assert_eq!(e.timestamp, t.timestamp);
        }
        assert_eq!(eps[3].embedding, vectors(5, 0)[3 * EMBEDDING_DIM..4 * EMBEDDING_DIM].to_vec());
        assert_eq!(store.questions(&c.id).await.expect("questions"), c.questions);
        let list = store.conversations().await.expect("list");
        assert_eq!(list.len(), 1);
        assert_eq!((list[0].turns, list[0].questions, list[0].unresolved_evidence), (5, 1, 1));
        // Reopening reads the same committed state.
        let again = Store::open(dir.path()).await.expect("reopen");
        assert_eq!(again.episodes(&c.id).await.expect("episodes").len(), 5);
        assert_eq!(again.info().await.expect("info").generation, 1);
    }

    #[tokio::test]
    async fn rewriting_a_conversation_replaces_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), &conversation("a", 4), 0).await;
        write(dir.path(), &conversation("b", 3), 0).await;
        let store = write(dir.path(), &conversation("a", 2), 7).await;
        assert_eq!(store.episodes("a").await.expect("a").len(), 2);
        assert_eq!(store.episodes("b").await.expect("b").len(), 3);
        assert_eq!(store.questions("a").await.expect("qa").len(), 1);
        assert_eq!(store.conversations().await.expect("list").len(), 2);
        assert_eq!(store.episodes("a").await.expect("a")[0].embedding[7], 1.0);
    }

    #[tokio::test]
    async fn abandoned_write_is_invisible_and_rolled_back_by_the_next() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), &conversation("a", 4), 0).await;
        {
            let mut txn = Writer::acquire(dir.path()).expect("lock").begin().await.expect("begin");
            txn.remove_conversation("a").await.expect("remove");
            let c = conversation("zz", 6);
            let turns: Vec<&Turn> = c.turns().collect();
            txn.append_episodes("zz", &[1; 6], &turns, &vectors(6, 0)).await.expect("append");
            // Dropped without commit, as a killed process would leave it.
        }
        let store = Store::open(dir.path()).await.expect("open");
        assert_eq!(store.episodes("a").await.expect("a").len(), 4, "delete of the abandoned write is not visible");
        assert!(store.episodes("zz").await.is_err(), "append of the abandoned write is not visible");
        let store = write(dir.path(), &conversation("b", 1), 0).await;
        assert_eq!(store.episodes("a").await.expect("a").len(), 4, "next write starts from the committed state");
        assert_eq!(store.conversations().await.expect("list").len(), 2);
        assert_eq!(store.info().await.expect("info").generation, 2);
    }

    #[tokio::test]
    async fn unknown_conversation_and_foreign_directory_are_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).await.expect("empty store");
        let err = store.episodes("nope").await.expect_err("unknown").to_string();
        assert!(err.contains("unknown conversation 'nope'"), "{err}");
        std::fs::write(dir.path().join("notes.txt"), "x").expect("write");
        let err = Store::open(dir.path()).await.expect_err("foreign").to_string();
        assert!(err.contains("not a Myelin store") && err.contains("notes.txt"), "{err}");
    }

    #[tokio::test]
    async fn a_second_writer_is_refused_while_the_first_lives_and_admitted_after() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = Writer::acquire(dir.path()).expect("first");
        // flock locks belong to an open file, so a second handle in this very process is
        // refused as another process would be, and a transaction of the first keeps it held.
        let txn = first.begin().await.expect("begin");
        drop(first);
        let err = Writer::acquire(dir.path()).expect_err("second").to_string();
        assert!(err.contains("being written by another process"), "{err}");
        assert!(err.contains(&format!("pid {}", std::process::id())), "names the holder: {err}");
        assert!(err.contains(&dir.path().display().to_string()), "names the store: {err}");
        drop(txn);
        let again = Writer::acquire(dir.path()).expect("free once the holder is gone");
        let store = again.begin().await.expect("begin").commit().await.expect("commit");
        assert_eq!(store.generation(), 1);
    }

    #[test]
    fn a_foreign_directory_is_not_locked_or_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("notes.txt"), "x").expect("write");
        let err = Writer::acquire(dir.path()).expect_err("foreign").to_string();
        assert!(err.contains("not a Myelin store"), "{err}");
        assert!(!dir.path().join(LOCK_FILE).exists());
    }

    #[test]
    fn filter_quotes_are_escaped() {
        assert_eq!(eq_filter("conversation", "a'b"), "conversation = 'a''b'");
    }
}
