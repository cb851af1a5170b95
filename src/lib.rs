//! Myelin: long-term memory for LLM agents.
//!
//! Conversations go in as dated turns ([`conversation`]); [`ingest`] reads the public LoCoMo and
//! BEAM layouts, [`embed`] turns text into all-MiniLM-L6-v2 vectors with candle, and [`store`]
//! keeps everything in versioned Lance datasets.
#![warn(missing_docs)]

pub mod activation;
pub mod bench;
pub mod calendar;
pub mod config;
pub mod conversation;
pub mod embed;
pub mod error;
pub mod eval;
pub mod fault;
pub mod gnn;
pub mod gpu;
pub mod graph;
pub mod ingest;
pub mod knowing;
pub mod parallel;
pub mod pipeline;
pub mod prepare;
pub mod retrieve;
pub mod scale;
pub mod score;
pub mod serve;
pub mod store;

pub use error::{Error, Result};
