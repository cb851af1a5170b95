//! Where a store lives: a directory on a local disk, or a prefix on an object store
//! (`s3://bucket/prefix` with the `aws` feature; `gs://` and `az://` with `gcp` and `azure`),
//! and the store's own small objects there (`myelin.json`, the writer's lease): reading one
//! with its version, putting one on a condition, listing sizes. Lance opens the datasets
//! under the same URI itself, with credentials and endpoint from the same environment
//! (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`,
//! `AWS_ALLOW_HTTP` for a plain-HTTP endpoint). It must not know what the objects hold.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};

use crate::error::{Error, Result};

/// Where a store lives. A plain path (or `file://…`) is a directory on this machine; a URI
/// with an object store's scheme is a prefix there. Cheap to clone.
#[derive(Clone)]
pub struct Location(Place);

#[derive(Clone)]
enum Place {
    Dir(PathBuf),
    Remote(Arc<Remote>),
}

/// A store's place, borrowed: see [`Location::at`].
pub(super) enum At<'a> {
    Dir(&'a Path),
    Remote(&'a Arc<Remote>),
}

/// A prefix on an object store and the client that reaches it.
pub(super) struct Remote {
    /// The URI as given, without a trailing `/`: what Lance opens and what messages name.
    pub(super) url: String,
    objects: Arc<dyn ObjectStore>,
    prefix: ObjectPath,
}

/// The outcome of a conditional put that the condition refused.
#[derive(Debug)]
pub(super) enum Refused {
    /// `PutMode::Create` found the object there.
    Exists,
    /// `PutMode::Update` found another version than the one it named.
    Changed,
}

impl Location {
    /// Reads `--store`, `$MYELIN_STORE` or a library caller's text: an object store's URI or a
    /// local path. A scheme this build cannot open is an error naming it and the features that
    /// would.
    pub fn parse(text: &str) -> Result<Location> {
        let Some((scheme, _)) = text.split_once("://") else { return Ok(Location::dir(text)) };
        let url = url::Url::parse(text)
            .map_err(|e| Error::InvalidArgument(format!("store '{text}' is not a valid URI: {e}")))?;
        if scheme == "file" {
            let path = url
                .to_file_path()
                .map_err(|()| Error::InvalidArgument(format!("store '{text}': not a local file URI")))?;
            return Ok(Location::dir(path));
        }
        let objects = object_store_for(&url, text)?;
        let prefix = ObjectPath::parse(url.path().trim_matches('/'))
            .map_err(|e| Error::InvalidArgument(format!("store '{text}': {e}")))?;
        Ok(Location(Place::Remote(Arc::new(Remote { url: text.trim_end_matches('/').to_string(), objects, prefix }))))
    }

    /// A directory on this machine.
    pub fn dir(path: impl Into<PathBuf>) -> Location {
        Location(Place::Dir(path.into()))
    }

    /// The directory, for a store on this machine.
    pub fn as_dir(&self) -> Option<&Path> {
        match &self.0 {
            Place::Dir(p) => Some(p),
            Place::Remote(_) => None,
        }
    }

    /// Which of the two it is, for the store's files that work on each differently.
    pub(super) fn at(&self) -> At<'_> {
        match &self.0 {
            Place::Dir(p) => At::Dir(p),
            Place::Remote(r) => At::Remote(r),
        }
    }

    /// `name` under the store, as messages name it (a path, or the object's URI).
    pub fn join(&self, name: &str) -> PathBuf {
        match &self.0 {
            Place::Dir(p) => p.join(name),
            Place::Remote(r) => PathBuf::from(format!("{}/{name}", r.url)),
        }
    }

    /// The store itself, as messages name it.
    pub fn to_path_buf(&self) -> PathBuf {
        match &self.0 {
            Place::Dir(p) => p.clone(),
            Place::Remote(r) => PathBuf::from(&r.url),
        }
    }

    /// The URI Lance opens for `name` under the store.
    pub(super) fn uri(&self, name: &str) -> Result<String> {
        match &self.0 {
            Place::Dir(p) => {
                let path = p.join(name);
                path.to_str()
                    .map(str::to_owned)
                    .ok_or_else(|| Error::InvalidArgument(format!("store path {} is not valid UTF-8", path.display())))
            }
            Place::Remote(r) => Ok(format!("{}/{name}", r.url)),
        }
    }

    /// Bytes of every file or object under the store, old Lance versions included.
    pub async fn size(&self) -> Result<u64> {
        match &self.0 {
            Place::Dir(p) => dir_size(p),
            Place::Remote(r) => Ok(r.list("").await?.iter().map(|(_, size)| size).sum()),
        }
    }
}

impl From<&Path> for Location {
    fn from(path: &Path) -> Location {
        Location::dir(path)
    }
}

impl From<PathBuf> for Location {
    fn from(path: PathBuf) -> Location {
        Location::dir(path)
    }
}

impl From<&PathBuf> for Location {
    fn from(path: &PathBuf) -> Location {
        Location::dir(path.clone())
    }
}

impl From<&Location> for Location {
    fn from(location: &Location) -> Location {
        location.clone()
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Place::Dir(p) => write!(f, "{}", p.display()),
            Place::Remote(r) => f.write_str(&r.url),
        }
    }
}

impl std::fmt::Debug for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Location({self})")
    }
}

impl Remote {
    fn key(&self, name: &str) -> ObjectPath {
        ObjectPath::parse(name)
            .map_or_else(|_| self.prefix.clone(), |rel| self.prefix.parts().chain(rel.parts()).collect())
    }

    fn error(&self, name: &str, e: object_store::Error) -> Error {
        Error::ObjectStore { path: PathBuf::from(format!("{}/{name}", self.url)), source: Box::new(e) }
    }

    /// The object `name` with its version, or `None` where there is none.
    pub(super) async fn get(&self, name: &str) -> Result<Option<(Vec<u8>, UpdateVersion)>> {
        match self.objects.get(&self.key(name)).await {
            Ok(got) => {
                let version = UpdateVersion { e_tag: got.meta.e_tag.clone(), version: got.meta.version.clone() };
                let bytes = got.bytes().await.map_err(|e| self.error(name, e))?;
                Ok(Some((bytes.to_vec(), version)))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.error(name, e)),
        }
    }

    /// Puts `bytes` as `name` if `mode`'s condition holds: `Ok(Err(_))` says it did not.
    pub(super) async fn put(
        &self,
        name: &str,
        bytes: Vec<u8>,
        mode: PutMode,
    ) -> Result<std::result::Result<UpdateVersion, Refused>> {
        let options = PutOptions { mode, ..PutOptions::default() };
        match self.objects.put_opts(&self.key(name), PutPayload::from(bytes), options).await {
            Ok(done) => Ok(Ok(UpdateVersion { e_tag: done.e_tag, version: done.version })),
            Err(object_store::Error::AlreadyExists { .. }) => Ok(Err(Refused::Exists)),
            Err(object_store::Error::Precondition { .. }) => Ok(Err(Refused::Changed)),
            Err(e) => Err(self.error(name, e)),
        }
    }

    /// Every object under `dir` (relative to the store; "" for all) with its size, named
    /// relative to `dir`.
    pub(super) async fn list(&self, dir: &str) -> Result<Vec<(String, u64)>> {
        use futures::TryStreamExt;
        let base = if dir.is_empty() { self.prefix.clone() } else { self.key(dir) };
        let found: Vec<_> = self.objects.list(Some(&base)).try_collect().await.map_err(|e| self.error(dir, e))?;
        Ok(found
            .into_iter()
            .map(|meta| {
                let rel = meta.location.prefix_match(&base).map(|parts| parts.map(|p| p.as_ref().to_string()));
                (rel.map(|parts| parts.collect::<Vec<_>>().join("/")).unwrap_or_default(), meta.size)
            })
            .collect())
    }

    /// The names directly under the store: objects and the first part of deeper ones.
    pub(super) async fn entries(&self) -> Result<Vec<String>> {
        let listed = self.objects.list_with_delimiter(Some(&self.prefix)).await.map_err(|e| self.error("", e))?;
        let names = listed.common_prefixes.iter().chain(listed.objects.iter().map(|o| &o.location));
        Ok(names.filter_map(|p| p.filename().map(str::to_owned)).collect())
    }
}

/// The client of `url`'s object store, configured from the environment as Lance's is.
fn object_store_for(url: &url::Url, text: &str) -> Result<Arc<dyn ObjectStore>> {
    let scheme = url.scheme();
    let built: std::result::Result<Arc<dyn ObjectStore>, object_store::Error> = match scheme {
        #[cfg(feature = "aws")]
        "s3" => object_store::aws::AmazonS3Builder::from_env().with_url(text).build().map(|s| Arc::new(s) as _),
        #[cfg(feature = "gcp")]
        "gs" => {
            object_store::gcp::GoogleCloudStorageBuilder::from_env().with_url(text).build().map(|s| Arc::new(s) as _)
        }
        #[cfg(feature = "azure")]
        "az" | "abfs" | "abfss" => {
            object_store::azure::MicrosoftAzureBuilder::from_env().with_url(text).build().map(|s| Arc::new(s) as _)
        }
        _ => {
            let known = [("s3", "aws"), ("gs", "gcp"), ("az", "azure")];
            let hint = match known.iter().find(|(s, _)| *s == scheme) {
                Some((_, feature)) => {
                    format!("this build has no '{scheme}' support (build with the `{feature}` feature)")
                }
                None => {
                    "a store is a directory, file://, s3:// (gs:// and az:// with the gcp and azure features)".into()
                }
            };
            return Err(Error::InvalidArgument(format!("store '{text}': scheme '{scheme}' cannot be opened: {hint}")));
        }
    };
    built.map_err(|e| Error::InvalidArgument(format!("store '{text}': {e}")))
}

/// Bytes of every file under `root` (0 when it does not exist).
pub fn dir_size(root: &Path) -> Result<u64> {
    let mut total = 0;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io(&dir, e)),
        };
        for entry in entries {
            let entry = entry.map_err(|e| Error::io(&dir, e))?;
            let meta = entry.metadata().map_err(|e| Error::io(entry.path(), e))?;
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                total += meta.len();
            }
        }
    }
    Ok(total)
}
