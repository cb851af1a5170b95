//! Engine configuration: plain serde structs whose defaults are the documented constants of
//! each stage. Loaded from a TOML file (`--config`), then overridden by command-line flags.
//!
//! This module owns only the shape of the settings and reading them; each stage validates the
//! values it uses.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::embed::EmbedConfig;
use crate::error::{Error, Result};

/// Every setting of the engine. Missing sections and keys take their defaults; unknown keys
/// are an error, so a typo never goes unnoticed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// The embedding model.
    pub embed: EmbedConfig,
    /// Reading and writing conversations.
    pub ingest: IngestConfig,
    /// Building the memory graph.
    pub graph: crate::graph::GraphConfig,
    /// Archiving memories out of a graph's active part.
    pub archive: crate::graph::ArchiveConfig,
    /// Answering queries.
    pub retrieve: crate::retrieve::RetrieveConfig,
    /// Where retrieval runs.
    pub gpu: crate::gpu::GpuConfig,
    /// The serving API (`myelin serve`, `myelin mcp`, the library's `Service`).
    pub serve: ServeConfig,
}

/// Settings of the serving API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServeConfig {
    /// Most searches answered as one batch: one embedding pass and one ranking dispatch
    /// (default 64). Searches that arrive while a batch runs wait for the next one.
    pub max_batch: usize,
    /// Most writes committed together in one store transaction (default 256).
    pub max_write_batch: usize,
    /// Concept-label embeddings kept for graph building across writes (default 100,000, about
    /// 150 MB); the least recently used go first.
    pub label_cache: usize,
    /// Commits between two compactions of the store (default 64). The rows a write deletes
    /// (summaries, a graph written whole) stay on disk until a compaction rewrites the files
    /// that hold them and purges the old versions (a deletion compacts at once); a grown
    /// graph's replaced rows are reclaimed when it is next written whole.
    pub compact_every: usize,
    /// Most bytes of message text one add may carry, all its messages together (default
    /// 512 KiB). Embedding runs at about 10 KB/s a core on long text, so the default admits an
    /// add of about a minute on two cores; a larger one is refused at once (HTTP 413) rather
    /// than held for minutes.
    pub max_add_bytes: usize,
    /// Most writes waiting for the writer (default 1024); one more is refused at once (HTTP 503
    /// with `Retry-After`) instead of queueing without bound.
    pub write_queue: usize,
    /// How often a read-only service looks for writes another process committed, in
    /// milliseconds (default 500); a new commit reloads the scopes it changed.
    pub reload_ms: u64,
    /// Query embeddings kept by their exact text, so a question asked again is not embedded
    /// again (default 4,096, about 6 MB; 0: none); the least used go first.
    pub query_cache: usize,
    /// How often the writer deletes the memories that have expired, in milliseconds (default
    /// 60,000; also once when it starts). An expired memory is never returned meanwhile; the
    /// sweep removes its text, vectors and graph nodes from the store (an `EXPIRE` in its
    /// history).
    pub expiry_sweep_ms: u64,
    /// Longest a request's body may take to arrive, in milliseconds, from the end of its
    /// headers (default 30,000): a client that sends it slower gets 408 and loses the
    /// connection, so a slow client cannot hold one open forever.
    pub body_timeout_ms: u64,
    /// How often the access history (when a search or a `get` last returned each memory, and
    /// how many have) is written to the store when nothing else is, in milliseconds (default
    /// 60,000; also with a write that rewrites a scope or compacts, and when the service
    /// closes). A crash loses what was recorded since. Each such commit also brings back into
    /// their scope's active graph the archived memories a search returned (`[archive]`).
    pub access_flush_ms: u64,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            max_batch: 64,
            max_write_batch: 256,
            label_cache: 100_000,
            compact_every: 64,
            max_add_bytes: 512 << 10,
            write_queue: 1024,
            reload_ms: 500,
            query_cache: 4096,
            expiry_sweep_ms: 60_000,
            body_timeout_ms: 30_000,
            access_flush_ms: 60_000,
        }
    }
}

impl ServeConfig {
    /// Checks the values.
    pub fn validate(&self) -> Result<()> {
        for (name, v) in [
            ("max_batch", self.max_batch),
            ("max_write_batch", self.max_write_batch),
            ("label_cache", self.label_cache),
            ("compact_every", self.compact_every),
            ("max_add_bytes", self.max_add_bytes),
            ("write_queue", self.write_queue),
            ("reload_ms", self.reload_ms as usize),
            ("expiry_sweep_ms", self.expiry_sweep_ms as usize),
            ("body_timeout_ms", self.body_timeout_ms as usize),
            ("access_flush_ms", self.access_flush_ms as usize),
        ] {
            if v == 0 {
                return Err(Error::InvalidArgument(format!("serve.{name} must be at least 1")));
            }
        }
        Ok(())
    }
}

/// Settings of `myelin ingest`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IngestConfig {
    /// Longest turn accepted, in bytes of UTF-8 (default 512 KiB); a longer one is an error.
    pub max_turn_bytes: usize,
    /// Turns embedded and appended per Lance write (default 2048): memory is bounded by this,
    /// not by the history.
    pub chunk_turns: usize,
    /// Longest passage in word pieces (default 254: the model's 256 less [CLS] and [SEP]). A
    /// longer turn is cut into passages that keep its id (`<id>`, `<id>#1`, `<id>#2`, …), so
    /// nothing of it is lost to truncation; 0 keeps every turn whole (truncated when embedded).
    pub passage_pieces: usize,
    /// A store whose stored embeddings are reused for texts it holds word for word (default
    /// none): re-ingesting a history, or histories that share text, embeds only what is new.
    /// It must have been embedded with this model and these `[embed]` settings.
    pub reuse_embeddings: Option<std::path::PathBuf>,
}

impl Default for IngestConfig {
    fn default() -> Self {
        IngestConfig {
            max_turn_bytes: crate::ingest::DEFAULT_MAX_TURN_BYTES,
            chunk_turns: 2048,
            passage_pieces: crate::embed::DEFAULT_MAX_SEQ_LEN - 2,
            reuse_embeddings: None,
        }
    }
}

impl IngestConfig {
    /// The loader limits these settings imply.
    pub fn load_options(&self) -> crate::ingest::LoadOptions {
        crate::ingest::LoadOptions { max_turn_bytes: self.max_turn_bytes }
    }
}

impl Config {
    /// Reads a TOML file.
    pub fn from_file(path: &Path) -> Result<Config> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        Config::from_toml(&text).map_err(|e| match e {
            Error::Format { place, message, .. } => Error::format(path, place, message),
            other => other,
        })
    }

    /// Parses TOML text.
    pub fn from_toml(text: &str) -> Result<Config> {
        toml::from_str(text).map_err(|e| {
            let place = e.span().map(|s| format!("byte {}", s.start)).unwrap_or_else(|| "document".into());
            Error::format("<config>", place, e.message().to_string())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beam_profile_parses_and_changes_only_retrieval_weights() {
        let beam = Config::from_toml(include_str!("../config/beam.toml")).expect("beam.toml parses");
        assert_eq!(beam.retrieve.lexical_weight, 0.3);
        assert_eq!((beam.retrieve.lambda_similarity, beam.retrieve.lambda_activation), (0.8, 0.2));
        assert_eq!(beam.retrieve.max_context_tokens, Some(3000));
        assert_eq!(beam.retrieve.mode, crate::retrieve::Mode::SynapseGnn);
        assert_eq!(beam.retrieve.gnn.model, crate::gnn::Shipped::LocomoBeam);
        let mut back = beam.clone();
        back.retrieve = Config::default().retrieve;
        assert_eq!(back, Config::default());
    }

    #[test]
    fn example_config_parses_and_matches_defaults() {
        let text = include_str!("../config/example.toml");
        let parsed = Config::from_toml(text).expect("example.toml parses");
        assert_eq!(parsed, Config::default(), "example.toml documents the defaults");
    }

    #[test]
    fn unknown_key_is_an_error_naming_it() {
        let err = Config::from_toml("[ingest]\nmax_turn_byte = 3\n").expect_err("typo").to_string();
        assert!(err.contains("max_turn_byte"), "{err}");
    }

    #[test]
    fn partial_file_keeps_other_defaults() {
        let cfg = Config::from_toml("[embed]\nbatch_size = 8\n").expect("parses");
        assert_eq!(cfg.embed.batch_size, 8);
        assert_eq!(cfg.embed.max_seq_len, 256);
        assert_eq!(cfg.ingest, IngestConfig::default());
    }
}
