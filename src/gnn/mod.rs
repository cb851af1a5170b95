//! A learned relevance signal (Mnemosyne-GNN, SYNAPSE.md §3): a two-layer GraphSAGE over a
//! candidate subgraph of the memory graph, with a relevance head and a node-type head, run by
//! candle for training and inference.
//!
//! Owns the network, its loss and its weights file. Must not build node features or training
//! examples, nor rank: callers hand it a [`model::Subgraph`] and use its scores.

pub mod model;
