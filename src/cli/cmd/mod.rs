//! One module per subcommand, each with a `run` that takes its parsed arguments, the loaded
//! config and the [`Globals`](super::Globals), calls the library, and hands what it returns to
//! [`render`](super::render). A module must not format a table or a report itself, nor hold
//! logic the library's users would need.

pub mod bench;
pub mod check;
pub mod demo;
pub mod embed_bench;
pub mod eval;
pub mod eval_merge;
pub mod index_bench;
pub mod ingest;
pub mod load;
pub mod mcp;
pub mod peer_inputs;
pub mod query;
pub mod scale_history;
pub mod serve;
pub mod stats;
pub mod train_gate;
pub mod train_gnn;
pub mod write_bench;
