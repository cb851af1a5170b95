//! Myelin: long-term memory for LLM agents.
//!
//! Conversations go in as dated turns ([`conversation`]); [`ingest`] reads the public LoCoMo and
//! BEAM layouts, [`embed`] turns text into all-MiniLM-L6-v2 vectors with candle, [`store`]
//! keeps everything in versioned Lance datasets, [`retrieve`] finds what a query needs, and
//! [`serve`]'s [`Service`] is the handle agents call.
//!
//! Cargo features, all on by default but `testing`: `cli` (the binary's flags, progress bars
//! and tables), `server` (HTTP and MCP), `gpu` (the ranking step on a GPU), `lab` (evaluation,
//! benchmarks, training, plots, scale histories), `testing` (fault points and test hooks).
//! `--no-default-features` builds the store, the embedder, the graph, retrieval and the
//! serving handle alone.
#![recursion_limit = "256"]
#![warn(missing_docs)]
// Without the `gpu` feature the GPU's types are uninhabited (`gpu/dummy.rs`): the branches that
// would use a device are unreachable, and what they would have read goes unused.
#![cfg_attr(not(feature = "gpu"), allow(unreachable_code, unused_variables))]

pub mod activation;
#[cfg(feature = "lab")]
pub mod bench;
pub(crate) mod calendar;
pub mod config;
pub mod conversation;
pub mod embed;
pub mod error;
#[cfg(feature = "lab")]
pub mod eval;
pub(crate) mod fault;
pub mod gnn;
pub mod gpu;
pub mod graph;
pub mod ingest;
pub mod kind;
pub mod knowing;
pub(crate) mod parallel;
pub mod pipeline;
#[cfg(feature = "lab")]
pub mod prepare;
pub mod progress;
#[cfg(feature = "lab")]
pub mod reader;
pub mod retrieve;
#[cfg(feature = "lab")]
pub mod scale;
pub mod score;
pub mod serve;
pub(crate) mod simd;
pub mod store;

pub use config::Config;
pub use error::{Error, Result};
pub use retrieve::{Memory, Mode, Query, Retrieval, RetrieveConfig};
pub use serve::{BlockingService, Message, Scope, SearchRequest, SearchResult, Service};

/// The README's code, compiled and run as doctests (its library example).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
