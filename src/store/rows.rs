//! Rows to Arrow and back: record batches of episodes and graphs, typed column access,
//! filters. It must not open datasets or know about transactions.

use std::sync::Arc;

use arrow_array::builder::{Float32Builder, ListBuilder};
use arrow_array::{
    Array, ArrayRef, BinaryArray, FixedSizeListArray, Float32Array, ListArray, RecordBatch, StringArray,
    TimestampMicrosecondArray, UInt32Array, UInt64Array,
};
use arrow_schema::{DataType, Field};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::schema::*;
use crate::embed::EMBEDDING_DIM;
use crate::error::{Error, Result};
use crate::graph::{Edge, Graph, NodeRef};

/// A SQL equality filter with the value quoted.
/// One episode row as written, borrowed from a [`Turn`] or an [`Episode`].
pub(super) struct EpisodeRow<'a> {
    pub(super) conversation: &'a str,
    pub(super) session: u32,
    pub(super) id: &'a str,
    pub(super) position: u32,
    pub(super) speaker: &'a str,
    pub(super) text: &'a str,
    pub(super) image_caption: Option<&'a str>,
    pub(super) timestamp: Option<DateTime<Utc>>,
    /// The metadata as JSON text.
    pub(super) metadata: Option<String>,
    pub(super) expires_at: Option<DateTime<Utc>>,
}

impl<'a> EpisodeRow<'a> {
    /// The row of `turn`, of `conversation`'s session `session` (an ingested turn: no metadata).
    pub(super) fn of_turn(conversation: &'a str, session: u32, turn: &'a crate::conversation::Turn) -> EpisodeRow<'a> {
        EpisodeRow {
            conversation,
            session,
            id: &turn.id,
            position: turn.position,
            speaker: &turn.speaker,
            text: &turn.text,
            image_caption: turn.image_caption.as_deref(),
            timestamp: turn.timestamp,
            metadata: None,
            expires_at: None,
        }
    }
}

/// The `episodes` record batch of `rows` with their embeddings (`rows.len() × EMBEDDING_DIM`).
pub(super) fn episode_batch(rows: &[EpisodeRow], embeddings: Vec<f32>) -> Result<RecordBatch> {
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
        Arc::new(StringArray::from(rows.iter().map(|r| r.metadata.as_deref()).collect::<Vec<_>>())),
        Arc::new(
            TimestampMicrosecondArray::from(rows.iter().map(|r| micros(r.expires_at)).collect::<Vec<_>>())
                .with_timezone("UTC"),
        ),
    ];
    Ok(RecordBatch::try_new(Table::Episodes.schema(), columns)?)
}

pub(super) fn eq_filter(column: &str, value: &str) -> String {
    format!("{column} = {}", quote(value))
}

/// A SQL filter for `column` being one of `values`, each quoted.
pub(super) fn in_filter(column: &str, values: &[&str]) -> String {
    let quoted: Vec<String> = values.iter().map(|v| quote(v)).collect();
    format!("{column} IN ({})", quoted.join(", "))
}

/// `value` as an SQL string literal.
pub(super) fn quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}

/// Column `name` of `batch` as the Arrow array type `T`; `kind` names the type in the error.
pub(super) fn col<'a, T: Array + 'static>(batch: &'a RecordBatch, name: &str, kind: &str) -> Result<&'a T> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<T>())
        .ok_or_else(|| Error::InvalidArgument(format!("column {name} is missing or not {kind}")))
}

/// A column of `EMBEDDING_DIM`-float vectors.
pub(super) struct EmbeddingCol<'a> {
    pub(super) rows: EmbeddingRows<'a>,
    pub(super) values: &'a [f32],
}

/// How an embedding column lays out its rows.
pub(super) enum EmbeddingRows<'a> {
    /// `EMBEDDING_DIM` values per row, null rows included.
    Fixed(&'a FixedSizeListArray),
    /// A list per row; a null row holds no values.
    Listed(&'a ListArray),
}

impl<'a> EmbeddingCol<'a> {
    /// Row `r`'s vector, `None` for a null row (or a listed row without `EMBEDDING_DIM` values).
    pub(super) fn row(&self, r: usize) -> Option<&'a [f32]> {
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

/// Rows of one conversation's graph to append: the chosen nodes and edges.
pub(super) struct GraphRows<'a> {
    pub(super) conversation: &'a str,
    pub(super) graph: &'a Graph,
    pub(super) turn_ids: &'a [&'a str],
    pub(super) nodes: Vec<u32>,
    pub(super) edges: Vec<&'a Edge>,
}

/// What a graph changed since an older version of it. Node ids are given in arrival order, so
/// the two share a first stretch of nodes (`kept`); after it the old version's nodes are gone
/// (the serving API's graph consolidates its open window into concepts, which the next write's
/// episode then follows) and the new one's are new.
#[derive(Debug, PartialEq)]
pub(super) struct GraphDiff {
    /// Nodes the two versions share: ids `0..kept` are the same nodes.
    pub(super) kept: u32,
    /// Nodes to write, ascending: the kept ones whose row changed (a concept's mentions or
    /// embedding), then every node from `kept` on.
    pub(super) nodes: Vec<u32>,
    /// Nodes whose in-edges to write, ascending: the kept ones whose in-edges changed, then
    /// every node from `kept` on that has any.
    pub(super) edges_to: Vec<u32>,
    /// Rows of the old version that the new rows replace (or that lie past the new nodes).
    pub(super) superseded: u64,
    /// Some node of the new version has no in-edges where rows of older ones may say it has:
    /// appending cannot say so, the graph must be written whole.
    pub(super) cleared: bool,
}

impl GraphDiff {
    pub(super) fn of(old: &Graph, new: &Graph) -> GraphDiff {
        let kept = old.shared_nodes(new) as u32;
        let mut nodes: Vec<u32> = (0..kept)
            .filter(|&i| match new.nodes[i as usize] {
                NodeRef::Concept(c) => old.concepts[c as usize] != new.concepts[c as usize],
                NodeRef::Episode(_) => false,
            })
            .collect();
        let mut superseded = nodes.len() as u64 + (old.node_count() as u64).saturating_sub(kept as u64);
        nodes.extend(kept..new.node_count() as u32);
        let mut cleared = false;
        let mut edges_to = Vec::new();
        for d in 0..new.node_count().max(old.node_count()) as u32 {
            let (was, fresh) = (old.in_edges(d), new.in_edges(d));
            if d >= kept || was != fresh {
                superseded += was.len() as u64;
            }
            if (d as usize) < new.node_count() {
                cleared |= fresh.is_empty() && (d >= kept || !was.is_empty());
                if (d < kept && was != fresh) || (d >= kept && !fresh.is_empty()) {
                    edges_to.push(d);
                }
            }
        }
        GraphDiff { kept, nodes, edges_to, superseded, cleared }
    }

    /// Whether appending only what changed beats writing the graph whole: at most a quarter of
    /// its nodes changed or have changed in-edges, no node lost every in-edge, and the rows
    /// other rows replaced (`stale` before this change) stay under a quarter of the live ones.
    pub(super) fn small(&self, new: &Graph, stale: u64) -> bool {
        let live = (new.node_count() + new.edges.len()) as u64;
        4 * (self.nodes.len() + self.edges_to.len()) <= new.node_count()
            && !self.cleared
            && 4 * (stale + self.superseded) <= live
    }
}

/// A graph's row of [`Table::Graphs`].
#[derive(Debug, Clone, PartialEq)]
pub(super) struct GraphMeta {
    pub(super) nodes: u32,
    pub(super) checksum: u32,
    /// The builder's state as stored (CBOR) with its checksum.
    pub(super) builder: Option<(Vec<u8>, u32)>,
    pub(super) stale_rows: u64,
}

/// The [`Table::Graphs`] batch of `rows`: (conversation, generation, meta).
pub(super) fn graph_meta_batch(rows: &[(&str, u64, &GraphMeta)]) -> Result<RecordBatch> {
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
        Arc::new(UInt64Array::from_iter_values(rows.iter().map(|r| r.1))),
        Arc::new(UInt32Array::from_iter_values(rows.iter().map(|r| r.2.nodes))),
        Arc::new(UInt32Array::from_iter_values(rows.iter().map(|r| r.2.checksum))),
        Arc::new(BinaryArray::from_iter(rows.iter().map(|r| r.2.builder.as_ref().map(|b| b.0.as_slice())))),
        Arc::new(UInt32Array::from_iter(rows.iter().map(|r| r.2.builder.as_ref().map(|b| b.1)))),
        Arc::new(UInt64Array::from_iter_values(rows.iter().map(|r| r.2.stale_rows))),
    ];
    Ok(RecordBatch::try_new(Table::Graphs.schema(), columns)?)
}

/// The [`Table::Graphs`] rows of `batch`: (conversation, meta).
pub(super) fn graph_metas(batch: &RecordBatch) -> Result<Vec<(String, GraphMeta)>> {
    let conversation = str_col(batch, "conversation")?;
    let (nodes, checksum) = (u32_col(batch, "nodes")?, u32_col(batch, "checksum")?);
    let builder: &BinaryArray = col(batch, "builder", "binary")?;
    let builder_checksum = u32_col(batch, "builder_checksum")?;
    let stale: &UInt64Array = col(batch, "stale_rows", "uint64")?;
    Ok((0..batch.num_rows())
        .map(|r| {
            let meta = GraphMeta {
                nodes: nodes.value(r),
                checksum: checksum.value(r),
                builder: (!builder.is_null(r) && !builder_checksum.is_null(r))
                    .then(|| (builder.value(r).to_vec(), builder_checksum.value(r))),
                stale_rows: stale.value(r),
            };
            (conversation.value(r).to_string(), meta)
        })
        .collect())
}

/// The `generation` column of `batch` (0 for a row written before it existed, or a null).
pub(super) fn generations(batch: &RecordBatch) -> Result<Vec<u64>> {
    Ok(match batch.column_by_name(GENERATION) {
        None => vec![0; batch.num_rows()],
        Some(_) => {
            let g: &UInt64Array = col(batch, GENERATION, "uint64")?;
            (0..batch.num_rows()).map(|r| if g.is_null(r) { 0 } else { g.value(r) }).collect()
        }
    })
}

/// `vectors` (one per row, `None` for a null row) as a list column: a null row holds no values.
pub(super) fn listed_embeddings(vectors: &[Option<&[f32]>]) -> ListArray {
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
pub(super) fn embedding_array(values: Vec<f32>, valid: Option<Vec<bool>>) -> Result<FixedSizeListArray> {
    let item = Arc::new(Field::new("item", DataType::Float32, true));
    let values = Arc::new(Float32Array::from(values));
    Ok(FixedSizeListArray::try_new(item, EMBEDDING_DIM as i32, values, valid.map(Into::into))?)
}

pub(super) fn str_col<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a StringArray> {
    col(batch, name, "text")
}

pub(super) fn u32_col<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a UInt32Array> {
    col(batch, name, "uint32")
}

pub(super) fn ts_col<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a TimestampMicrosecondArray> {
    col(batch, name, "a timestamp")
}

pub(super) fn list_col<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a ListArray> {
    col(batch, name, "a list")
}

pub(super) fn list_values(list: &ListArray, row: usize) -> Result<Vec<String>> {
    let values = list.value(row);
    let strings = values
        .as_any()
        .downcast_ref::<StringArray>()
        .ok_or_else(|| Error::InvalidArgument("list column does not hold text".into()))?;
    Ok((0..strings.len()).map(|i| strings.value(i).to_string()).collect())
}

pub(super) fn micros(t: Option<DateTime<Utc>>) -> Option<i64> {
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
    /// `ADD`, `UPDATE` or `DELETE`.
    pub event: String,
    /// When.
    pub at: DateTime<Utc>,
}

/// When the serving API last returned a memory (a search or a `get`), and how many of its
/// answers have: one row of [`super::Table::Access`]. Holds no text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Access {
    /// The memory.
    pub memory_id: String,
    /// The conversation (scope) it belongs to.
    pub conversation: String,
    /// When an answer last returned it.
    pub at: DateTime<Utc>,
    /// How many answers have returned it.
    pub count: u64,
}
