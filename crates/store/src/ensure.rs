//! Fetching a model whatever it is called: a registry name or a `.gguf` URL, pulled
//! only when the store lacks it; and blocking forms of the pulls for the CLI. Above
//! both kinds of pull, so neither needs the other.

use crate::error::{Result, StoreError};
use crate::name::{url_model_name, ModelName, ModelRef};
use crate::progress::Progress;
use crate::pull::{pull, PullOptions};
use crate::store::{ResolvedModel, Store};
use crate::url_pull::pull_url;

/// Resolves a model, pulling it first when it is a name (or URL) not in the store.
pub async fn ensure(
    store: &Store,
    model: &str,
    opts: &PullOptions,
    progress: &dyn Progress,
) -> Result<ResolvedModel> {
    let (name, url) = match ModelRef::parse(model)? {
        ModelRef::File(_) => return store.resolve(model),
        ModelRef::Url(url) => (url_model_name(&url)?, Some(url)),
        ModelRef::Name(name) => (name, None),
    };
    if !store.contains(&name)? {
        match &url {
            Some(url) => pull_url(store, url, opts, progress).await?,
            None => pull(store, &name, opts, progress).await?,
        };
    }
    store.resolve_name(&name)
}

/// Blocking forms for the CLI (each runs its own small runtime; do not call them
/// from inside an async runtime — use the async functions there).
pub mod blocking {
    use super::*;
    use crate::pull::PullReport;

    fn runtime() -> Result<tokio::runtime::Runtime> {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| StoreError::Other(format!("cannot start the async runtime: {e}")))
    }

    /// [`crate::pull()`], blocking.
    pub fn pull(
        store: &Store,
        name: &ModelName,
        opts: &PullOptions,
        progress: &dyn Progress,
    ) -> Result<PullReport> {
        runtime()?.block_on(crate::pull::pull(store, name, opts, progress))
    }

    /// [`crate::pull_url`], blocking.
    pub fn pull_url(
        store: &Store,
        url: &str,
        opts: &PullOptions,
        progress: &dyn Progress,
    ) -> Result<PullReport> {
        runtime()?.block_on(crate::url_pull::pull_url(store, url, opts, progress))
    }

    /// [`super::ensure`], blocking.
    pub fn ensure(
        store: &Store,
        model: &str,
        opts: &PullOptions,
        progress: &dyn Progress,
    ) -> Result<ResolvedModel> {
        runtime()?.block_on(super::ensure(store, model, opts, progress))
    }
}
