//! `myelin.json`, the store manifest: which Lance version of each dataset a reader trusts,
//! where each dataset lives, and reading the manifest. It must not write datasets (a
//! [`WriteTxn`](super::WriteTxn) commits by replacing the manifest).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use object_store::PutMode;

use super::location::{At, Location, Refused, Remote};
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
/// The lock file's name (a store on a local disk).
pub(super) const LOCK_FILE: &str = ".myelin.lock";
/// The writer's lease object's name (a store on an object store).
pub(super) const LEASE_FILE: &str = ".myelin.lease";

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
    /// When the last write was committed (`None`: never written).
    pub(super) fn committed_at(&self) -> Option<DateTime<Utc>> {
        (self.generation > 0).then_some(self.updated_at)
    }

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

pub(super) fn uri(root: &Location, table: Table) -> Result<String> {
    root.uri(&format!("{}.lance", table.name()))
}

/// The version of `myelin.json` a reader saw: its ETag on an object store (the condition of
/// the next commit there), nothing on a local disk (where the writer's `flock` is the guard).
pub(super) type ManifestVersion = Option<object_store::UpdateVersion>;

/// Replaces `root`'s manifest by `manifest` atomically and returns the version it now has.
/// On a local disk: written beside it, synced, renamed over it, the directory synced. On an
/// object store: one PUT, on the condition that the manifest is still the version `seen`
/// (`None`: that there is none yet), so a writer whose lease lapsed cannot overwrite what its
/// successor committed. A commit (`commit`) passes the fault points around the rename (the
/// put) that the kill tests stop at; a store's birth does not.
pub(super) async fn write_manifest(
    root: &Location,
    manifest: &StoreManifest,
    commit: bool,
    seen: &ManifestVersion,
) -> Result<ManifestVersion> {
    let bytes = serde_json::to_vec_pretty(manifest)
        .map_err(|e| Error::Store { path: root.to_path_buf(), message: format!("cannot encode manifest: {e}") })?;
    let dir = match root.at() {
        At::Dir(dir) => dir,
        At::Remote(remote) => return put_manifest(root, remote, bytes, commit, seen).await,
    };
    let tmp = dir.join(format!("{MANIFEST_FILE}.tmp"));
    let target = dir.join(MANIFEST_FILE);
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
    if let Ok(d) = std::fs::File::open(dir) {
        // Persist the rename itself; not every platform can fsync a directory.
        let _ = d.sync_all();
    }
    Ok(None)
}

/// The commit of a store on an object store: one conditional PUT of `myelin.json`.
async fn put_manifest(
    root: &Location,
    remote: &Remote,
    bytes: Vec<u8>,
    commit: bool,
    seen: &ManifestVersion,
) -> Result<ManifestVersion> {
    let mode = match seen {
        Some(version) => PutMode::Update(version.clone()),
        None => PutMode::Create,
    };
    if commit {
        crate::fault::point("before manifest rename");
    }
    let put = remote.put(MANIFEST_FILE, bytes, mode).await?;
    if commit {
        crate::fault::point("after manifest rename");
    }
    match put {
        Ok(version) => Ok(Some(version)),
        Err(refused) => Err(Error::Store {
            path: root.join(MANIFEST_FILE),
            message: match refused {
                Refused::Exists => "was created by another writer meanwhile; nothing of this write is committed".into(),
                Refused::Changed => "was committed by another writer since this write began (this writer's lease had \
                                     lapsed); nothing of this write is committed"
                    .into(),
            },
        }),
    }
}

/// `root`'s manifest and its version, or `None` for a store never born.
pub(super) async fn read_manifest(root: &Location) -> Result<Option<(StoreManifest, ManifestVersion)>> {
    let path = root.join(MANIFEST_FILE);
    let (bytes, version) = match root.at() {
        At::Dir(dir) => match std::fs::read(dir.join(MANIFEST_FILE)) {
            Ok(b) => (b, None),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(&path, e)),
        },
        At::Remote(remote) => match remote.get(MANIFEST_FILE).await? {
            Some((b, v)) => (b, Some(v)),
            None => return Ok(None),
        },
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
    Ok(Some((manifest, version)))
}
