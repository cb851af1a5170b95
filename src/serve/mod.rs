//! The serving API: an async handle over one store that agents (or `myelin serve`) call to add,
//! search, list and delete memories in isolated scopes. Names follow mem0's: a scope is a
//! `user_id` / `agent_id` / `run_id`, a memory is one stored turn with an id. A message longer
//! than `ingest.passage_pieces` word pieces is stored as passages (episodes `<id>`, `<id>#1`, …,
//! as ingest does) that together are the message: every part of it is embedded, and the API
//! shows the memory whole, once.
//!
//! Each scope is one conversation of the store (format `api`) with its own graph, so
//! activation can never cross scopes. A service that writes holds the store's [`Writer`] lock
//! for its whole life (its scopes are a view of the store that only it may commit from); a
//! read-only one ([`Service::open_read_only`]) takes no lock and reloads the scopes another
//! process's commits changed. Two workers do the heavy work, off the async runtime:
//! - the writer (a task) takes every write waiting as one group: one embedding pass for all
//!   new messages, each touched scope's graph extended by its builder (rebuilt only after a
//!   deletion), one store transaction with a history row per change; then it swaps in the new
//!   scopes and answers. Its CPU work runs on a background embedder whose threads yield the
//!   cores to searches; its queue is bounded (`serve.write_queue`) and one add carries at most
//!   `serve.max_add_bytes`. Searches read the last committed state and never wait for a write.
//! - the search thread (`searcher`) batches concurrent searches into one embedding pass and
//!   one ranking dispatch, and owns the GPU queue and the resident graphs.
//!
//! Files: `scope.rs` (a memory's scope, metadata and client times, below the rest), `api.rs`
//! (the types agents see), `access.rs` (when each memory was last returned), `archive.rs`
//! (which memories a write archives or restores), `filter.rs` (mem0's filters: which memories a
//! request reads, across scopes), `wire.rs` (mem0's wire format, for `http`), `writer.rs` (the write path), `blocking.rs` (the
//! facade without async), `searcher.rs` (the search thread); the [`Service`] handle is here.
//! Owns scopes, memory ids, the write path of the API and the in-memory index of every scope.
//! Must not parse HTTP or JSON-RPC (that is `serve::http`) nor rank (that is `retrieve`).

mod access;
mod api;
mod archive;
mod blocking;
pub mod filter;
#[cfg(feature = "server")]
pub mod http;
mod labels;
#[cfg(feature = "server")]
pub mod mcp;
mod scope;
mod searcher;
mod service;
mod state;
#[cfg(feature = "server")]
pub mod wire;
mod writer;

pub use crate::retrieve::Order;
pub use api::{
    Edit, MAX_ID_BYTES, MemoryItem, Message, Metadata, Page, Replica, Scope, SearchRequest, SearchResult, Stats,
    expiration_date_of, expiry_of_date,
};
pub use blocking::BlockingService;
pub use filter::Filter;
pub use service::Service;
