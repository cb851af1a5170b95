//! The episodic–semantic memory graph of one conversation (Synapse §3.1, Algorithm 1): episode
//! nodes (turns), concept nodes extracted from windows of turns, and temporal, abstraction and
//! association edges, each node keeping its strongest in-edges, with PageRank as a
//! query-independent prior.
//!
//! This module owns the graph's shape and its construction; it must not score queries (that is
//! `activation` and `retrieve`) nor read or write the store (that is `store`). The data types
//! live in `model`, the construction in `build`, its active part in `archive`, the concept extractor in `extract`; this file
//! only names them, so that every `crate::graph::…` path reads the same.

pub mod archive;
pub mod build;
pub mod extract;
mod model;
pub mod pagerank;
pub mod synthetic;

pub use archive::ArchiveConfig;
pub use build::{BuilderState, GraphBuilder, build_graph, labels_of};
pub use extract::{ConceptKind, ExtractConfig};
pub use model::{AbstractionScope, Concept, Edge, EdgeKind, Graph, GraphConfig, NodeRef};
