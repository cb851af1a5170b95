//! Retrieval over one conversation's memory, as stages over an immutable index. The index is
//! [`Memory`] (`memory.rs`: episodes, graph, node embeddings, BM25, built once per scope and
//! grown by a write). A query goes through stages, each a type of its own in its own file:
//! signals (`signals.rs`) → anchors (`anchors.rs`) → spread (`spread.rs`) → score
//! (`score.rs`) → collect (`collect.rs`) → verdict (`verdict.rs`, the activation gate; `gate.rs`,
//! the learned one) → rerank (`rerank.rs`, the GNN) → recency (`recency.rs`, the prior of the
//! final score) → standing (`standing.rs`, the instructions and preferences that lead a
//! result), composed in `search.rs` as each mode's
//! [`Plan`] says (`mode.rs`, the table of modes). `words.rs` and `person.rs` hold the rules on
//! words the gates and the rerank share, `explain.rs` why an episode surfaced, `gpu.rs` the
//! bridge to the GPU ranker, `engine.rs` many memories on one backend.
//!
//! This module only names what its files define. It must not embed text (the caller passes the
//! query embedding) nor touch the store ([`Memory::new`] takes what the store returned).

mod anchors;
pub mod bm25;
mod collect;
mod config;
mod current;
pub mod engine;
mod explain;
mod gate;
mod gpu;
pub mod index;
mod memory;
mod mode;
mod person;
mod query;
mod recency;
mod rerank;
mod result;
mod score;
mod search;
mod signals;
mod spread;
mod standing;
mod timeline;
mod verdict;
mod words;

pub use config::{CurrentConfig, Gate, GnnConfig, RecencyConfig, RetrieveConfig, StandingConfig, TimelineConfig};
pub use gate::{KNOWING_DEPTH, KnowingFeatures, LearnedGate};
pub use gpu::GpuBridge;
pub use memory::{Archived, BOUNDS_GROUP, Ctx, Memory, SPARSE_NODES, episode_index};
pub use mode::{Baseline, Dynamics, Mode, Plan, Scoring};
pub use person::speaks_of_listener;
pub use query::{Lexical, Query};
pub use rerank::{GnnRerank, LINKING_CONCEPTS, Rerank};
pub use result::{Explanation, Hit, Order, Retrieval, Signals};
pub use verdict::{ActivationGate, Verdict};
