//! The model store: Ollama-style model names, the on-disk store (Ollama's
//! `manifests/` + `blobs/` layout, which also lets an existing Ollama store be read
//! as it is), and pulls from an Ollama-protocol registry or a direct GGUF URL.
//!
//! - [`ModelName`] / [`ModelRef`]: `[host/][namespace/]model[:tag]`, `.gguf` paths, URLs.
//! - [`Store`]: list, resolve, show, copy, remove, import, prune; llamay's store
//!   is read-write, an Ollama store behind it is read-only.
//! - [`pull()`], [`pull_url`], [`ensure`] (async) and [`blocking`]: resumable,
//!   parallel, sha256-verified downloads reporting [`PullEvent`]s to a [`Progress`];
//!   private addresses only when [`PullOptions::allow_private`] says so.
//! - [`fetch_small`]: one small file by URL (a linked image) under the same rules.
#![forbid(unsafe_code)]

mod digest;
mod download;
mod ensure;
mod error;
mod fetch;
mod fsutil;
mod gc;
mod manifest;
mod name;
mod outbound;
mod progress;
mod pull;
mod store;
mod url_pull;

pub use digest::Digest;
pub use ensure::{blocking, ensure};
pub use error::{Result, StoreError};
pub use fetch::{fetch_small, FetchLimits};
pub use gc::PruneReport;
pub use manifest::{
    Layer, Manifest, ModelConfig, RootFs, MEDIA_ADAPTER, MEDIA_CONFIG, MEDIA_LICENSE,
    MEDIA_MANIFEST, MEDIA_MESSAGES, MEDIA_MODEL, MEDIA_PARAMS, MEDIA_PROJECTOR, MEDIA_SYSTEM,
    MEDIA_TEMPLATE,
};
pub use name::{
    url_file_name, url_model_name, ModelName, ModelRef, DEFAULT_HOST, DEFAULT_NAMESPACE,
    DEFAULT_TAG,
};
pub use progress::{NoProgress, Progress, PullEvent};
pub use pull::{pull, PullOptions, PullReport};
pub use store::{
    check_gguf_magic, BlobFacts, ListEntry, RemoveReport, ResolvedModel, Source, Store, StoredModel,
};
pub use url_pull::pull_url;
