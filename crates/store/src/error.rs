//! The store's error type: every variant renders as one line a user can act on.

use std::path::PathBuf;

/// Everything that can go wrong in the store, as one-line messages.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A model name that does not follow `[host/][namespace/]model[:tag]`.
    #[error("invalid model name {name:?}: {reason}")]
    InvalidName { name: String, reason: String },
    /// A name that is in neither store.
    #[error("model '{0}' not found (try `llamay pull {0}`)")]
    NotFound(String),
    /// The registry answered 404 for the manifest.
    #[error("model '{name}' not found in registry {registry}")]
    NotInRegistry { name: String, registry: String },
    /// The registry could not be reached at all.
    #[error("cannot reach {registry} to pull '{name}' (no network?): {reason}")]
    Unreachable {
        name: String,
        registry: String,
        reason: String,
    },
    /// The registry or URL answered in a way the protocol does not allow.
    #[error("registry error: {0}")]
    Registry(String),
    /// A downloaded blob whose sha256 differs from its digest.
    #[error("blob {expected} failed verification: its sha256 is {actual}")]
    DigestMismatch { expected: String, actual: String },
    /// A URL pull onto a name the store already has (for another model), without
    /// `replace`.
    #[error(
        "model '{0}' already exists; a URL pull does not replace it unless asked to (`replace`)"
    )]
    Exists(String),
    /// A pull the caller may not make: its address is loopback, link-local or
    /// private and private pulls are not allowed.
    #[error("refusing to pull from {host}: {reason} (private pulls are off; `llamay serve -allow-private-pulls` allows them)")]
    PrivateAddress { host: String, reason: String },
    /// A server whose sizes disagree with the size declared for the download.
    #[error("{url}: declared {declared} bytes, but {found}")]
    SizeMismatch {
        url: String,
        declared: u64,
        found: String,
    },
    /// A manifest or config that does not parse.
    #[error("bad manifest {path}: {reason}")]
    BadManifest { path: String, reason: String },
    /// A model that lives in the read-only Ollama store.
    #[error("'{0}' is in the Ollama store, which llamay never modifies (use `ollama rm`)")]
    ReadOnly(String),
    /// A model whose manifest lists no GGUF layer.
    #[error("model '{0}' has no GGUF layer")]
    NoModelLayer(String),
    /// A file that is not a GGUF model.
    #[error("{} is not a GGUF file: {reason}", path.display())]
    NotGguf { path: PathBuf, reason: String },
    /// A file-system error, with the path it concerns.
    // The io error is part of the message, not a `source`, so that printing the
    // error chain does not repeat it.
    #[error("{}: {error}", path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    /// Anything else, already phrased for the user.
    #[error("{0}")]
    Other(String),
}

/// The store's result type.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Attaches a path to an `io::Error`.
pub(crate) trait IoContext<T> {
    fn at(self, path: impl Into<PathBuf>) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn at(self, path: impl Into<PathBuf>) -> Result<T> {
        self.map_err(|error| StoreError::Io {
            path: path.into(),
            error,
        })
    }
}
