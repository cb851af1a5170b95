//! The store's datasets and their Arrow schemas: one [`Table`] per Lance dataset, its
//! directory name and its columns. This file owns the on-disk schema; it must not read or
//! write a dataset.

use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};

use crate::embed::EMBEDDING_DIM;

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
    /// One row per concept label a serving scope's graph takes, with the label's embedding:
    /// what the writer's label cache is filled from when a service opens, so the first write
    /// to a scope after a restart embeds no label again. A scope rewritten (a deletion, an
    /// update, an expiry) has its rows written anew, so no label of a deleted memory's text
    /// survives it.
    Labels,
    /// One row per graph: how many nodes it has, the generation that wrote it, its checksum,
    /// and the state of the serving API's builder that made it (see
    /// [`crate::graph::BuilderState`]), with the state's checksum. A graph's rows in `nodes`
    /// and `edges` are rewritten in place by appending (the highest `generation` of a node, or
    /// of a node's in-edges, wins; nodes past `nodes` are gone), so this row says which are
    /// live. Stores written before 2026-12-06 have none: their graphs are read as their rows
    /// are, unchecked.
    Graphs,
    /// One row per memory of a serving scope that a search or a `get` returned, per flush of
    /// what the service recorded ([`crate::store::Access`]): when it was last returned and how
    /// many answers have returned it. The row with the latest `accessed_at` of a memory wins;
    /// compaction keeps only that one. Holds no text.
    Access,
}

impl Table {
    /// Every table of a conversation, in the order they are written.
    pub const ALL: [Table; 8] = [
        Table::Episodes,
        Table::Questions,
        Table::Conversations,
        Table::Nodes,
        Table::Edges,
        Table::Labels,
        Table::Graphs,
        Table::Access,
    ];
    /// Every dataset a store may hold: the conversation tables and the history.
    pub const STORED: [Table; 9] = [
        Table::Episodes,
        Table::Questions,
        Table::Conversations,
        Table::Nodes,
        Table::Edges,
        Table::Labels,
        Table::Graphs,
        Table::Access,
        Table::History,
    ];

    /// Dataset name (directory `<name>.lance`).
    pub fn name(self) -> &'static str {
        match self {
            Table::Episodes => "episodes",
            Table::Questions => "questions",
            Table::Conversations => "conversations",
            Table::Nodes => "nodes",
            Table::Edges => "edges",
            Table::History => "history",
            Table::Labels => "labels",
            Table::Graphs => "graphs",
            Table::Access => "access",
        }
    }

    pub(super) fn schema(self) -> SchemaRef {
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
                Field::new("timestamp", ts.clone(), true),
                Field::new("embedding", embedding.clone(), false),
                // What the serving API was asked to keep with a memory (mem0's `metadata`): a
                // JSON object as text, on every passage of the memory; null for none (and for
                // every ingested turn). Stores written before 2026-12 lack the column until
                // their first write adds it (see `WriteTxn::append`).
                Field::new(METADATA, DataType::Utf8, true),
                // When the memory stops being returned (the serving API's `expires_at`, mem0's
                // `expiration_date`), null for never; added to older stores like `metadata`.
                Field::new(EXPIRES_AT, ts.clone(), true),
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
                // The store generation whose write appended the row (null: before 2026-12-06).
                Field::new(GENERATION, DataType::UInt64, true),
            ],
            Table::Edges => vec![
                Field::new("conversation", DataType::Utf8, false),
                Field::new("src", DataType::UInt32, false),
                Field::new("dst", DataType::UInt32, false),
                Field::new("kind", DataType::Utf8, false),
                Field::new("weight", DataType::Float32, false),
                Field::new("hours", DataType::Float32, false),
                // As in `nodes`: a node's in-edges of the highest generation are its in-edges.
                Field::new(GENERATION, DataType::UInt64, true),
            ],
            Table::History => vec![
                Field::new("memory_id", DataType::Utf8, false),
                Field::new("conversation", DataType::Utf8, false),
                // "ADD", "UPDATE", "DELETE", "EXPIRE", or "ARCHIVE" / "RESTORE" (out of and back into
                // its scope's active graph, `serve::archive`).
                Field::new("event", DataType::Utf8, false),
                Field::new("at", ts, false),
            ],
            Table::Access => vec![
                Field::new("conversation", DataType::Utf8, false),
                Field::new("memory_id", DataType::Utf8, false),
                Field::new("accessed_at", ts.clone(), false),
                Field::new("count", DataType::UInt64, false),
            ],
            Table::Labels => vec![
                Field::new("conversation", DataType::Utf8, false),
                Field::new("label", DataType::Utf8, false),
                Field::new("embedding", embedding.clone(), false),
            ],
            Table::Graphs => vec![
                Field::new("conversation", DataType::Utf8, false),
                Field::new(GENERATION, DataType::UInt64, false),
                Field::new("nodes", DataType::UInt32, false),
                // `Graph::checksum` of the graph, PageRank aside (derived on load).
                Field::new("checksum", DataType::UInt32, false),
                // The builder's state, CBOR (null: none kept; the next write rebuilds it).
                Field::new("builder", DataType::Binary, true),
                Field::new("builder_checksum", DataType::UInt32, true),
                // Rows of `nodes` and `edges` that later rows replaced and that are still on
                // disk: past a quarter of the live rows the graph is written whole again.
                Field::new("stale_rows", DataType::UInt64, false),
            ],
        };
        Arc::new(Schema::new(fields))
    }
}

/// The column of `episodes` that holds a memory's metadata.
pub(super) const METADATA: &str = "metadata";
/// The column of `nodes`, `edges` and `graphs` that holds the store generation of a row.
pub(super) const GENERATION: &str = "generation";
/// The column of `episodes` that holds when a memory expires.
pub(super) const EXPIRES_AT: &str = "expires_at";

/// The type of `nodes.embedding`: a list of floats, null for an episode.
pub(super) fn node_embedding() -> DataType {
    DataType::List(Arc::new(Field::new("item", DataType::Float32, true)))
}
