//! A learned relevance signal (Mnemosyne-GNN, SYNAPSE.md §3): a two-layer GraphSAGE over the
//! candidate subgraph of a query, with a relevance head and a node-type head, run by candle for
//! training and inference, and trained on real evidence labels.
//!
//! Owns the network and its loss ([`model`]), its inference pass written for the subgraph's
//! shape ([`packed`]), the query-conditioned node features ([`features`]), the weights file
//! with its card and the fourth-signal formula ([`relevance`]), what the card records of
//! training ([`record`]), and the training loop (`train`, with the `lab` feature). Must not retrieve or touch the store:
//! `retrieve` hands it the candidates a query produced and applies the scores it returns.

pub mod features;
pub(crate) mod model;
pub(crate) mod packed;
pub mod record;
pub mod relevance;
#[cfg(feature = "lab")]
pub mod train;

pub use features::{Candidate, Candidates, FeatureSet};
pub use packed::{RelevanceInput, RelevanceWeights, SageLayerWeights};
pub use relevance::{Relevance, Shipped};
