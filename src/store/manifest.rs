//! `myelin.json`, the store manifest: which Lance version of each dataset a reader trusts,
//! where each dataset lives, and reading the manifest. It must not write datasets (a
//! [`WriteTxn`](super::WriteTxn) commits by replacing the manifest).

use std::collections::BTreeMap;
use std::path::Path;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::schema::*;
use crate::conversation::EmbedText;
use crate::embed::EMBEDDING_DIM;
use crate::error::{Error, Result};

/// Store format written by this version.
pub const STORE_FORMAT: u32 = 1;
/// Name of the embedding model whose vectors the store holds.
pub const EMBEDDING_MODEL: &str = "sentence-transformers/all-MiniLM-L6-v2";
/// The manifest's file name.
pub(super) const MANIFEST_FILE: &str = "myelin.json";
/// The lock file's name.
pub(super) const LOCK_FILE: &str = ".myelin.lock";

/// `myelin.json`: what a reader trusts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct StoreManifest {
    pub(super) format: u32,
    /// Number of committed writes.
    pub(super) generation: u64,
    pub(super) embedding_model: String,
    pub(super) embedding_dim: usize,
    /// What of a turn its embeddings embed (`embed.text`); a store written before the
    /// setting existed holds the bare text. Written only when it is not the bare text, so a
    /// store of the default form stays readable by the versions before the setting.
    #[serde(default, skip_serializing_if = "EmbedText::is_bare")]
    pub(super) embedded_text: EmbedText,
    /// Table name → pinned Lance dataset version.
    pub(super) tables: BTreeMap<String, u64>,
    pub(super) updated_at: DateTime<Utc>,
}

impl StoreManifest {
    pub(super) fn empty() -> Self {
        StoreManifest {
            format: STORE_FORMAT,
            generation: 0,
            embedding_model: EMBEDDING_MODEL.into(),
            embedding_dim: EMBEDDING_DIM,
            embedded_text: EmbedText::default(),
            tables: BTreeMap::new(),
            updated_at: Utc::now(),
        }
    }
}

pub(super) fn uri(root: &Path, table: Table) -> Result<String> {
    let path = root.join(format!("{}.lance", table.name()));
    path.to_str()
        .map(str::to_owned)
        .ok_or_else(|| Error::InvalidArgument(format!("store path {} is not valid UTF-8", path.display())))
}

/// Replaces `root`'s manifest by `manifest` atomically: written beside it, synced, renamed
/// over it, the directory synced. A commit (`commit`) passes the fault points around the
/// rename that the kill tests stop at; a store's birth does not.
pub(super) fn write_manifest(root: &Path, manifest: &StoreManifest, commit: bool) -> Result<()> {
    let tmp = root.join(format!("{MANIFEST_FILE}.tmp"));
    let target = root.join(MANIFEST_FILE);
    let bytes = serde_json::to_vec_pretty(manifest)
        .map_err(|e| Error::Store { path: root.to_path_buf(), message: format!("cannot encode manifest: {e}") })?;
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
        f.write_all(&bytes).map_err(|e| Error::io(&tmp, e))?;
        f.sync_all().map_err(|e| Error::io(&tmp, e))?;
    }
    if commit {
        crate::fault::point("before manifest rename");
    }
    std::fs::rename(&tmp, &target).map_err(|e| Error::io(&target, e))?;
    if commit {
        crate::fault::point("after manifest rename");
    }
    if let Ok(dir) = std::fs::File::open(root) {
        // Persist the rename itself; not every platform can fsync a directory.
        let _ = dir.sync_all();
    }
    Ok(())
}

pub(super) fn read_manifest(root: &Path) -> Result<Option<StoreManifest>> {
    let path = root.join(MANIFEST_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(&path, e)),
    };
    let manifest: StoreManifest = serde_json::from_slice(&bytes)
        .map_err(|e| Error::format(&path, format!("line {} column {}", e.line(), e.column()), e.to_string()))?;
    if manifest.format != STORE_FORMAT {
        return Err(Error::Store {
            path: root.to_path_buf(),
            message: format!("store format {} is not supported (this build reads {STORE_FORMAT})", manifest.format),
        });
    }
    if manifest.embedding_dim != EMBEDDING_DIM {
        return Err(Error::Store {
            path: root.to_path_buf(),
            message: format!("store holds {}-dim embeddings, this build uses {EMBEDDING_DIM}", manifest.embedding_dim),
        });
    }
    Ok(Some(manifest))
}
