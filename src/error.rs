//! The library's error type. Every fallible public function returns [`Result`].
//!
//! Messages are lower-case, name the file and the place where input was wrong, and end
//! without a full stop. Only the binary uses `anyhow`.

use std::path::PathBuf;

/// Everything that can go wrong in the library.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file or directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Input that does not have the shape the format requires.
    #[error("{path}: {place}: {message}")]
    Format {
        /// The file that is wrong.
        path: PathBuf,
        /// Where in it (JSON path, conversation, turn id, line).
        place: String,
        /// What is wrong.
        message: String,
    },
    /// A path holds neither a LoCoMo file nor a BEAM conversation directory.
    #[error("{path}: {message}")]
    UnknownFormat {
        /// The path given.
        path: PathBuf,
        /// What was looked for.
        message: String,
    },
    /// The embedding model could not be found or loaded.
    #[error("model: {0}")]
    Model(String),
    /// The tokenizer failed.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// A tensor operation failed in candle.
    #[error("candle: {0}")]
    Candle(#[from] candle_core::Error),
    /// The Lance store failed.
    #[error("lance: {0}")]
    Lance(#[from] lance::Error),
    /// An Arrow array had an unexpected type or shape.
    #[error("arrow: {0}")]
    Arrow(#[from] arrow_schema::ArrowError),
    /// The store is in a state this version cannot read.
    #[error("store {path}: {message}")]
    Store {
        /// The store directory.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// An object store (the store's `myelin.json` or lease on S3 and the like) failed.
    #[error("{path}: {source}")]
    ObjectStore {
        /// The object's URI.
        path: PathBuf,
        /// The object store's error.
        #[source]
        source: Box<object_store::Error>,
    },
    /// Another writer holds the store (see `store::Writer`).
    #[error(
        "store {path} is being written by another process: {holder}; stop it first, or read the store \
         without writing (query, stats, eval of stored conversations, serve --read-only)"
    )]
    Locked {
        /// The store directory.
        path: PathBuf,
        /// Who holds it: pid, command line and since when, as the holder wrote them.
        holder: String,
    },
    /// The GPU backend failed: no adapter, a device error, a limit exceeded.
    #[error("gpu: {0}")]
    Gpu(String),
    /// A caller passed an invalid argument (unknown conversation id, empty query, …).
    #[error("{0}")]
    InvalidArgument(String),
    /// A memory, scope or conversation the caller named does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The service was opened read-only (`serve --read-only`) and was asked to write.
    #[error("store {path} is open read-only here; write through the process that writes it")]
    ReadOnly {
        /// The store directory.
        path: PathBuf,
    },
    /// A request larger than a limit allows; the message names the limit and its setting.
    #[error("{0}")]
    TooLarge(String),
    /// The service cannot take the request now (its write queue is full); retrying later
    /// can succeed.
    #[error("{0}")]
    Busy(String),
    /// The disk under the store is full: nothing of the write was kept.
    #[error("{0}")]
    DiskFull(String),
    /// A failure shared by every request of a batch the serving API ran together (the
    /// embedder, a store write): each request of the batch gets it.
    #[error("{0}")]
    Batch(String),
    /// An ingest run failed before its commit: nothing of it was written.
    #[error("ingest into {} failed; the store is unchanged", path.display())]
    Ingest {
        /// The store directory.
        path: PathBuf,
        /// Why the run failed.
        #[source]
        source: Box<Error>,
    },
}

/// Shorthand for results of this library.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }

    /// Whether this failure is a full disk: ENOSPC anywhere in its chain of causes, or in the
    /// text of a cause that carries it only as text (Lance's object store does).
    pub fn is_disk_full(&self) -> bool {
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(self);
        while let Some(e) = cause {
            if let Some(io) = e.downcast_ref::<std::io::Error>()
                && (io.kind() == std::io::ErrorKind::StorageFull || io.raw_os_error() == Some(28))
            {
                return true;
            }
            cause = e.source();
        }
        let text = self.to_string();
        text.contains("No space left on device") || text.contains("os error 28")
    }

    /// A failed ingest into the store at `path`, which it left unchanged.
    pub fn ingest(path: impl Into<PathBuf>, source: Error) -> Self {
        Error::Ingest { path: path.into(), source: Box::new(source) }
    }

    /// A format error in `path` at `place`.
    pub fn format(path: impl Into<PathBuf>, place: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Format { path: path.into(), place: place.into(), message: message.into() }
    }
}
