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
//! Its files: `schema.rs` (datasets and columns), `manifest.rs` (`myelin.json`), `open.rs`
//! (opening and reading), `txn.rs` (the writer lock and writes), `rows.rs` (Arrow
//! conversions). This file only names what the others define.

mod lease;
mod location;
mod manifest;
mod open;
mod rows;
mod schema;
#[cfg(test)]
mod tests;
mod txn;

pub use lease::{LEASE_ENV, LEASE_MS};
pub use location::{Location, dir_size};
pub use manifest::{EMBEDDING_MODEL, STORE_FORMAT};
pub use open::{ConversationSummary, DEFAULT_STORE_DIR, Episode, STORE_ENV, Store, StoreInfo, resolve_store};
pub use rows::{Access, HistoryEvent};
pub use schema::Table;
pub use txn::{WriteTxn, Writer};
