//! Opening a store and reading it: [`Store`] at the versions the manifest pins, the stored
//! episodes, questions, graphs and summaries, and the checks that a store's files are whole.
//! It must not write (that is [`WriteTxn`]).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use arrow_array::{Array, BooleanArray, FixedSizeListArray, Float32Array, ListArray, RecordBatch, UInt64Array};
use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use lance::Dataset;
use lance::dataset::builder::DatasetBuilder;
use lance::session::Session;
use serde::{Deserialize, Serialize};

use super::location::{At, Location};
use super::manifest::*;
use super::rows::*;
use super::schema::*;
use crate::conversation::{EmbedText, Question};
use crate::embed::EMBEDDING_DIM;
use crate::error::{Error, Result};
use crate::graph::{BuilderState, Concept, ConceptKind, Edge, EdgeKind, Graph, NodeRef};

/// Environment variable naming the default store directory.
pub const STORE_ENV: &str = "MYELIN_STORE";
/// Store directory used when neither `--store` nor `$MYELIN_STORE` names one.
pub const DEFAULT_STORE_DIR: &str = "myelin-store";

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
    /// Unit-length MiniLM embedding of [`Episode::embedded`] in the store's form
    /// ([`Store::embedded_text`]).
    pub embedding: Vec<f32>,
    /// What the serving API keeps with the memory (mem0's `metadata`); `None` for none and
    /// for every ingested turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
    /// When the memory expires ([`Episode::expired`]); `None`: never (every ingested turn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
}

impl Episode {
    /// Whether it has expired at `now`: from its `expires_at` on, it is never returned, and
    /// the serving API's writer deletes it. The one rule every route applies.
    pub fn expired(&self, now: DateTime<Utc>) -> bool {
        self.expires_at.is_some_and(|t| t <= now)
    }

    /// The turn's words and photo caption (see [`Turn::embedding_text`]).
    pub fn embedding_text(&self) -> String {
        crate::conversation::embedding_text(&self.text, self.image_caption.as_deref())
    }

    /// The text embedded for this episode under `form` (see [`Turn::embedded`]).
    pub fn embedded(&self, form: EmbedText) -> String {
        form.of(&self.speaker, &self.text, self.image_caption.as_deref())
    }

    /// The text BM25 indexes: `speaker: ` and the turn's words (questions name people), the
    /// form [`EmbedText::Speaker`] embeds.
    pub fn indexed_text(&self) -> String {
        self.embedded(EmbedText::Speaker)
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
    /// The store's directory or URI.
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
    /// Bytes under the store (on disk, or objects under its prefix), old Lance versions
    /// included.
    pub size_bytes: u64,
    /// When the last write was committed.
    pub updated_at: DateTime<Utc>,
}

/// A store opened for reading at its committed state.
#[derive(Debug)]
pub struct Store {
    pub(super) root: Location,
    pub(super) manifest: StoreManifest,
    /// The manifest's version when read: the condition of the next commit on an object store.
    pub(super) manifest_version: ManifestVersion,
    pub(super) tables: BTreeMap<Table, Dataset>,
}

/// The store to use: `explicit`, else `$MYELIN_STORE`, else `./myelin-store`; a directory or
/// an object store's URI ([`Location::parse`]).
pub fn resolve_store(explicit: Option<&str>) -> Result<Location> {
    let env = std::env::var(STORE_ENV).ok().filter(|v| !v.is_empty());
    Location::parse(explicit.or(env.as_deref()).unwrap_or(DEFAULT_STORE_DIR))
}

impl Store {
    /// Opens the store at `root` (a directory, or a [`Location`] on an object store) as of its
    /// last committed write. A missing or empty directory (prefix) is an empty store; one
    /// without `myelin.json` that holds anything else is refused ([`check_unborn`]): some
    /// other folder (a typo must not turn it into a store), or a store that lost its manifest.
    pub async fn open(root: impl Into<Location>) -> Result<Store> {
        Store::open_after(&root.into(), None).await
    }

    /// The store as last committed, opened again: the datasets whose pinned version did not
    /// change are this store's handles as they are, the others opened anew. What a reader that
    /// follows a writer does at each commit (one dataset changed reads one dataset).
    pub async fn reopen(&self) -> Result<Store> {
        Store::open_after(&self.root, Some(self)).await
    }

    /// [`Store::open`], reusing `prior`'s datasets at the versions still pinned. The datasets
    /// are opened together (on an object store each is a few requests' latency), each at its
    /// pinned version directly.
    async fn open_after(root: &Location, prior: Option<&Store>) -> Result<Store> {
        let (manifest, manifest_version) = match read_manifest(root).await? {
            Some(m) => m,
            None => {
                check_unborn(root).await?;
                (StoreManifest::empty(), None)
            }
        };
        let opening = Table::STORED.into_iter().filter_map(|table| {
            let version = *manifest.tables.get(table.name())?;
            let kept = prior.and_then(|p| p.tables.get(&table)).filter(|ds| ds.version().version == version).cloned();
            Some(async move {
                if let Some(ds) = kept {
                    return Ok::<_, Error>((table, ds));
                }
                let ds = DatasetBuilder::from_uri(uri(root, table)?)
                    .with_session(session())
                    .with_version(version)
                    .load()
                    .await
                    .map_err(|e| unreadable(root, table, e))?;
                check_files(root, table, &ds).await?;
                Ok((table, ds))
            })
        });
        let tables = futures::future::try_join_all(opening).await?.into_iter().collect();
        Ok(Store { root: root.clone(), manifest, manifest_version, tables })
    }

    /// Where the store lives.
    pub fn root(&self) -> &Location {
        &self.root
    }

    /// The generation `root`'s manifest holds now (0 for a store never written) and when it
    /// was committed: one small read, for a reader that follows a writer's commits.
    pub async fn committed_generation(root: &Location) -> Result<(u64, Option<DateTime<Utc>>)> {
        Ok(read_manifest(root).await?.map_or((0, None), |(m, _)| (m.generation, m.committed_at())))
    }

    /// When the last write was committed (`None`: never written).
    pub fn updated_at(&self) -> Option<DateTime<Utc>> {
        self.manifest.committed_at()
    }

    /// Number of committed writes (0 for a store never written).
    pub fn generation(&self) -> u64 {
        self.manifest.generation
    }

    /// The model its embeddings come from.
    pub fn embedding_model(&self) -> &str {
        &self.manifest.embedding_model
    }

    /// What of a turn its embeddings embed.
    pub fn embedded_text(&self) -> EmbedText {
        self.manifest.embedded_text
    }

    /// Whether it holds episodes (a store that never held one takes any `embed.text`).
    pub fn has_episodes(&self) -> bool {
        self.tables.contains_key(&Table::Episodes)
    }

    /// Refuses to read or write this store's episodes in another form than they were embedded
    /// in: a query embedded against turns embedded otherwise would be compared with vectors of
    /// another function, and a store that mixed the two would answer neither well.
    pub fn check_embedded_text(&self, form: EmbedText) -> Result<()> {
        let stored = self.embedded_text();
        if form == stored || !self.has_episodes() {
            return Ok(());
        }
        Err(Error::Store {
            path: self.root.to_path_buf(),
            message: format!(
                "its turns were embedded as '{}' text and the settings say '{}' (embed.text, --embed-text): \
                 use --embed-text {}, or ingest into a new store with --embed-text {}",
                stored.as_str(),
                form.as_str(),
                stored.as_str(),
                form.as_str()
            ),
        })
    }

    /// Versions, row counts and size on disk.
    pub async fn info(&self) -> Result<StoreInfo> {
        let mut table_rows = BTreeMap::new();
        for (table, ds) in &self.tables {
            table_rows.insert(table.name().to_string(), ds.count_rows(None).await?);
        }
        Ok(StoreInfo {
            table_rows,
            path: self.root.to_path_buf(),
            format: self.manifest.format,
            generation: self.manifest.generation,
            embedding_model: self.manifest.embedding_model.clone(),
            table_versions: self.manifest.tables.clone(),
            lance_file_format: self
                .tables
                .get(&Table::Episodes)
                .map(|d| d.manifest().data_storage_format.version.to_string()),
            size_bytes: self.root.size().await?,
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
            // Absent from a store written before 2026-12 that has not been written since.
            let metadata = match batch.column_by_name(METADATA) {
                Some(_) => Some(str_col(&batch, METADATA)?),
                None => None,
            };
            let expires = match batch.column_by_name(EXPIRES_AT) {
                Some(_) => Some(ts_col(&batch, EXPIRES_AT)?),
                None => None,
            };
            for r in 0..batch.num_rows() {
                let embedding = emb.row(r).ok_or_else(|| self.schema_error("episodes.embedding (null)"))?;
                let turn_id = str_col(&batch, "turn_id")?.value(r);
                let metadata = match metadata.filter(|m| !m.is_null(r)) {
                    None => None,
                    Some(m) => Some(serde_json::from_str(m.value(r)).map_err(|e| Error::Store {
                        path: self.root.to_path_buf(),
                        message: format!("episodes.metadata of {conversation} {turn_id}: not a JSON object ({e})"),
                    })?),
                };
                out.push(Episode {
                    conversation: str_col(&batch, "conversation")?.value(r).to_string(),
                    session: u32_col(&batch, "session")?.value(r),
                    turn_id: turn_id.to_string(),
                    position: u32_col(&batch, "position")?.value(r),
                    speaker: str_col(&batch, "speaker")?.value(r).to_string(),
                    text: str_col(&batch, "text")?.value(r).to_string(),
                    image_caption: (!caption.is_null(r)).then(|| caption.value(r).to_string()),
                    timestamp: (!ts.is_null(r)).then(|| DateTime::from_timestamp_micros(ts.value(r))).flatten(),
                    embedding: embedding.to_vec(),
                    metadata,
                    expires_at: expires
                        .filter(|t| !t.is_null(r))
                        .and_then(|t| DateTime::from_timestamp_micros(t.value(r))),
                });
            }
        }
        out.sort_by_key(|e| e.position);
        Ok(out)
    }

    /// Every stored concept label with its embedding, as (conversation, label, embedding);
    /// only serving scopes have them ([`Table::Labels`]).
    pub async fn labels(&self) -> Result<Vec<(String, String, Vec<f32>)>> {
        let mut out = Vec::new();
        for batch in self.scan(Table::Labels, None).await? {
            let emb = self.embedding_col(&batch, Table::Labels)?;
            let (conversation, label) = (str_col(&batch, "conversation")?, str_col(&batch, "label")?);
            for r in 0..batch.num_rows() {
                let v = emb.row(r).ok_or_else(|| self.schema_error("labels.embedding (null)"))?;
                out.push((conversation.value(r).to_string(), label.value(r).to_string(), v.to_vec()));
            }
        }
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
    /// written before graphs existed). An unknown id is an error. Of the rows of a node, or of
    /// a node's in-edges, those of the highest generation are read; the graph's row of
    /// [`Table::Graphs`] gives its node count and its checksum, which the graph read must
    /// match (a store written before 2026-12-06 has none: its graph is read unchecked).
    pub async fn graph(&self, conversation: &str) -> Result<Option<Graph>> {
        self.require_conversation(conversation).await?;
        let meta = self.graph_metas(&[conversation]).await?.remove(conversation);
        let count = meta.as_ref().map_or(u32::MAX, |m| m.nodes);
        // Node id → (generation, what it is, its concept, its PageRank as written).
        let mut rows: BTreeMap<u32, (u64, NodeRef, Option<Concept>, f32)> = BTreeMap::new();
        for batch in self.scan(Table::Nodes, Some(conversation)).await? {
            let emb = self.embedding_col(&batch, Table::Nodes)?;
            let (node, index, mentions) =
                (u32_col(&batch, "node")?, u32_col(&batch, "index")?, u32_col(&batch, "mentions")?);
            let (kind, key, label) = (str_col(&batch, "kind")?, str_col(&batch, "key")?, str_col(&batch, "label")?);
            let pagerank: &Float32Array = col(&batch, "pagerank", "float")?;
            for (r, &generation) in generations(&batch)?.iter().enumerate() {
                let id = node.value(r);
                if id >= count || rows.get(&id).is_some_and(|old| old.0 > generation) {
                    continue;
                }
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
                rows.insert(id, (generation, node_ref, concept, pagerank.value(r)));
            }
        }
        if rows.is_empty() {
            return Ok(None);
        }
        let damaged = |message: String| Error::Store {
            path: self.root.to_path_buf(),
            message: format!(
                "graph of conversation '{conversation}' is damaged: {message} (`myelin check` names every \
                 damaged part; ingesting a conversation again rebuilds its graph)"
            ),
        };
        if let Some((i, _)) = rows.keys().enumerate().find(|(i, id)| **id != *i as u32) {
            return Err(damaged(format!("node {i} is missing")));
        }
        let mut graph = Graph::default();
        let mut concepts: Vec<(u32, Concept)> = Vec::new();
        for (_, (_, node_ref, concept, pagerank)) in rows {
            if let (NodeRef::Concept(c), Some(concept)) = (node_ref, concept) {
                concepts.push((c, concept));
            }
            graph.nodes.push(node_ref);
            graph.pagerank.push(pagerank);
        }
        concepts.sort_by_key(|c| c.0);
        graph.concepts = concepts.into_iter().map(|c| c.1).collect();
        // Node → the generation of its in-edges; then the edges of that generation.
        let mut edges: Vec<(u64, Edge)> = Vec::new();
        let mut latest: HashMap<u32, u64> = HashMap::new();
        for batch in self.scan(Table::Edges, Some(conversation)).await? {
            let (src, dst, kind) = (u32_col(&batch, "src")?, u32_col(&batch, "dst")?, str_col(&batch, "kind")?);
            let weight: &Float32Array = col(&batch, "weight", "float")?;
            let hours: &Float32Array = col(&batch, "hours", "float")?;
            for (r, &generation) in generations(&batch)?.iter().enumerate() {
                if dst.value(r) >= count {
                    continue;
                }
                let kind = EdgeKind::parse(kind.value(r))
                    .ok_or_else(|| self.schema_error(&format!("edges.kind value '{}'", kind.value(r))))?;
                let g = latest.entry(dst.value(r)).or_insert(generation);
                *g = (*g).max(generation);
                let edge =
                    Edge { src: src.value(r), dst: dst.value(r), kind, weight: weight.value(r), hours: hours.value(r) };
                edges.push((generation, edge));
            }
        }
        graph.edges = edges.into_iter().filter(|(g, e)| latest.get(&e.dst) == Some(g)).map(|(_, e)| e).collect();
        graph.edges.sort_by_key(|e| (e.dst, e.src));
        graph.validate().map_err(|e| damaged(format!("inconsistent: {e}")))?;
        if let Some(meta) = meta {
            if graph.node_count() != meta.nodes as usize {
                return Err(damaged(format!("{} nodes stored of its {}", graph.node_count(), meta.nodes)));
            }
            let checksum = graph.checksum();
            if checksum != meta.checksum {
                return Err(damaged(format!(
                    "its nodes and edges do not match their checksum ({checksum:08x} read, {:08x} written)",
                    meta.checksum
                )));
            }
        }
        Ok(Some(graph))
    }

    /// The state of the builder that made a conversation's graph, if the writer kept one (a
    /// serving scope's), its checksum verified.
    pub async fn builder_state(&self, conversation: &str) -> Result<Option<BuilderState>> {
        let Some(meta) = self.graph_metas(&[conversation]).await?.remove(conversation) else { return Ok(None) };
        let Some((bytes, checksum)) = meta.builder else { return Ok(None) };
        let damaged = |what: String| Error::Store {
            path: self.root.join(&format!("{}.lance", Table::Graphs.name())),
            message: format!("the builder state of conversation '{conversation}' {what}"),
        };
        if crc32fast::hash(&bytes) != checksum {
            return Err(damaged("does not match its checksum".into()));
        }
        ciborium::from_reader(bytes.as_slice()).map(Some).map_err(|e| damaged(format!("cannot be read: {e}")))
    }

    /// The [`Table::Graphs`] rows of `conversations` (those that have one).
    pub(super) async fn graph_metas(&self, conversations: &[&str]) -> Result<HashMap<String, GraphMeta>> {
        if conversations.is_empty() {
            return Ok(HashMap::new());
        }
        let filter = in_filter("conversation", conversations);
        let mut out = HashMap::new();
        for batch in self.scan_where(Table::Graphs, Some(filter)).await? {
            out.extend(graph_metas(&batch)?);
        }
        Ok(out)
    }

    async fn require_conversation(&self, conversation: &str) -> Result<()> {
        let n = match self.tables.get(&Table::Conversations) {
            Some(ds) => ds.count_rows(Some(eq_filter("conversation", conversation))).await?,
            None => 0,
        };
        if n == 0 {
            return Err(Error::InvalidArgument(format!(
                "unknown conversation '{conversation}' in store {} (see `myelin stats`)",
                self.root
            )));
        }
        Ok(())
    }

    async fn scan(&self, table: Table, conversation: Option<&str>) -> Result<Vec<RecordBatch>> {
        self.scan_where(table, conversation.map(|c| eq_filter("conversation", c))).await
    }

    /// The rows of `table` (those `filter` selects). A read that fails names the dataset: a
    /// page that does not decode is Lance's error, which names no file.
    async fn scan_where(&self, table: Table, filter: Option<String>) -> Result<Vec<RecordBatch>> {
        let Some(ds) = self.tables.get(&table) else { return Ok(Vec::new()) };
        let named = |e: lance::Error| Error::Store {
            path: self.root.join(&format!("{}.lance", table.name())),
            message: format!("its rows cannot be read (damaged? `myelin check` names every damaged part): {e}"),
        };
        let mut scanner = ds.scan();
        if let Some(f) = filter {
            scanner.filter(&f).map_err(named)?;
        }
        scanner.try_into_stream().await.map_err(named)?.try_collect().await.map_err(named)
    }

    /// When the serving API last returned each memory it has recorded ([`Table::Access`]):
    /// of a memory's rows, the one with the latest time (the highest count among equals).
    pub async fn accesses(&self) -> Result<Vec<Access>> {
        let mut latest: BTreeMap<String, Access> = BTreeMap::new();
        for batch in self.scan(Table::Access, None).await? {
            let (conversation, memory_id) = (str_col(&batch, "conversation")?, str_col(&batch, "memory_id")?);
            let at = ts_col(&batch, "accessed_at")?;
            let count: &UInt64Array = col(&batch, "count", "uint64")?;
            for r in 0..batch.num_rows() {
                let row = Access {
                    memory_id: memory_id.value(r).to_string(),
                    conversation: conversation.value(r).to_string(),
                    at: DateTime::from_timestamp_micros(at.value(r)).unwrap_or_default(),
                    count: count.value(r),
                };
                match latest.get(&row.memory_id) {
                    Some(had) if (had.at, had.count) >= (row.at, row.count) => {}
                    _ => {
                        latest.insert(row.memory_id.clone(), row);
                    }
                }
            }
        }
        Ok(latest.into_values().collect())
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

    /// The memories of `conversation` archived out of its active graph, with when: those whose
    /// latest `ARCHIVE` or `RESTORE` in the history is an `ARCHIVE`.
    pub async fn archived(&self, conversation: &str) -> Result<HashMap<String, DateTime<Utc>>> {
        Ok(self.archive_state(Some(conversation)).await?.into_iter().map(|(id, (_, at))| (id, at)).collect())
    }

    /// How many memories of each conversation are archived ([`Store::archived`]).
    pub async fn archived_counts(&self) -> Result<BTreeMap<String, usize>> {
        let mut counts = BTreeMap::new();
        for (conversation, _) in self.archive_state(None).await?.into_values() {
            *counts.entry(conversation).or_default() += 1;
        }
        Ok(counts)
    }

    /// Memory id → (conversation, when archived), for the archived memories of `conversation`
    /// (of every conversation with `None`).
    async fn archive_state(&self, conversation: Option<&str>) -> Result<HashMap<String, (String, DateTime<Utc>)>> {
        let mut filter = in_filter("event", &["ARCHIVE", "RESTORE"]);
        if let Some(c) = conversation {
            filter = format!("{} AND {filter}", eq_filter("conversation", c));
        }
        let mut events: Vec<(i64, String, String, bool)> = Vec::new();
        for batch in self.scan_where(Table::History, Some(filter)).await? {
            let (memory_id, event, at) =
                (str_col(&batch, "memory_id")?, str_col(&batch, "event")?, ts_col(&batch, "at")?);
            let conversation = str_col(&batch, "conversation")?;
            for r in 0..batch.num_rows() {
                let (id, c) = (memory_id.value(r).to_string(), conversation.value(r).to_string());
                events.push((at.value(r), id, c, event.value(r) == "ARCHIVE"));
            }
        }
        // Stable: of one memory's events at the same time, the one written last wins.
        events.sort_by_key(|e| e.0);
        let mut archived = HashMap::new();
        for (at, id, c, archive) in events {
            if archive {
                archived.insert(id, (c, DateTime::from_timestamp_micros(at).unwrap_or_default()));
            } else {
                archived.remove(&id);
            }
        }
        Ok(archived)
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
        Error::Store { path: self.root.to_path_buf(), message: format!("column {what} has an unexpected type") }
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

/// The process's one Lance session: every dataset opened or written shares its object-store
/// clients (one per bucket, where a session each would build a client, TLS roots and all, per
/// dataset opened: 8 of them per store opened) and its caches of immutable metadata.
pub(super) fn session() -> Arc<Session> {
    static SESSION: OnceLock<Arc<Session>> = OnceLock::new();
    SESSION.get_or_init(|| Arc::new(Session::default())).clone()
}

/// A dataset that Lance cannot open at its pinned version: the error names the dataset.
pub(super) fn unreadable(root: &Location, table: Table, e: lance::Error) -> Error {
    Error::Store { path: root.join(&format!("{}.lance", table.name())), message: format!("cannot be opened: {e}") }
}

/// Every data file of `ds`'s version is there with the size its manifest recorded, so a
/// truncated or missing file is an error naming it when the store opens, not a read that
/// fails (or succeeds on part of the rows) later. Lance keeps no checksum of a file's bytes:
/// damage that keeps the size is not seen here.
pub(super) async fn check_files(root: &Location, table: Table, ds: &Dataset) -> Result<()> {
    let dir = format!("{}.lance/data", table.name());
    // On an object store, one listing of the dataset's data files rather than a request each.
    let listed: Option<HashMap<String, u64>> = match root.at() {
        At::Dir(_) => None,
        At::Remote(remote) => Some(remote.list(&dir).await?.into_iter().collect()),
    };
    for fragment in ds.fragments().iter() {
        for file in &fragment.files {
            let path = root.join(&format!("{dir}/{}", file.path));
            let found = match &listed {
                Some(sizes) => sizes.get(&file.path).copied(),
                None => match std::fs::metadata(&path) {
                    Ok(m) => Some(m.len()),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                    Err(e) => return Err(Error::io(&path, e)),
                },
            };
            let Some(found) = found else {
                return Err(Error::Store { path, message: "is missing: the store cannot be read".into() });
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

/// Refuses a directory (prefix) without `myelin.json` that holds anything but the lock file
/// (lease) or a half-written manifest (`myelin.json.tmp`): a foreign folder, or a store whose manifest is
/// gone while its datasets remain. Such a store must not open as empty, since the first write
/// to an empty store would replace every dataset in it. A store is born with its manifest
/// ([`super::Writer::acquire`]), so datasets without one are damage, not a store never
/// written; stores born before that rule that were killed during their first write hold
/// datasets of no committed write, and the error says so too.
pub(super) async fn check_unborn(root: &Location) -> Result<()> {
    let names: Vec<String> = match root.at() {
        At::Dir(dir) => {
            if dir.join(MANIFEST_FILE).exists() {
                return Ok(());
            }
            let entries = match std::fs::read_dir(dir) {
                Ok(e) => e,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(Error::io(dir, e)),
            };
            let mut names = Vec::new();
            for entry in entries {
                names.push(entry.map_err(|e| Error::io(dir, e))?.file_name().to_string_lossy().into_owned());
            }
            names
        }
        At::Remote(remote) => remote.entries().await?,
    };
    if names.iter().any(|n| n == MANIFEST_FILE) {
        return Ok(());
    }
    for name in names {
        if name == LOCK_FILE || name == LEASE_FILE || name.starts_with(MANIFEST_FILE) {
            continue;
        }
        let message = if Table::STORED.iter().any(|t| name == format!("{}.lance", t.name())) {
            format!(
                "its manifest {MANIFEST_FILE} is missing while it holds '{name}': nothing says which version of \
                 each dataset is committed, so the store is not opened (a write would replace its datasets). \
                 Restore {MANIFEST_FILE} from a backup; if the store never finished its first write, remove \
                 its *.lance directories to start afresh"
            )
        } else {
            format!("not a Myelin store: it has no {MANIFEST_FILE} and holds '{name}'")
        };
        return Err(Error::Store { path: root.to_path_buf(), message });
    }
    Ok(())
}
