//! `llamay serve` on a socket: the async runtime, the listener, the router, the
//! idle-model sweeper, and a graceful stop on Ctrl-C.

use std::sync::Arc;

use llamay_runtime::Runtime;

use crate::banner;
use crate::http::AppState;
use crate::router::{router, sweep_models};

/// How to serve.
pub struct ServeOptions {
    /// `HOST:PORT`.
    pub addr: String,
    pub api_key: Option<Arc<str>>,
    pub body_limit: usize,
    /// The KV cache type's name, for the log line.
    pub kv_label: String,
    /// `/api/pull` may reach loopback, link-local and private addresses.
    pub allow_private_pulls: bool,
    /// `/api/pull` may use plain http and unverified certificates.
    pub insecure_pulls: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Preload(llamay_runtime::Error),
    #[error("no default model")]
    NoDefaultModel,
    #[error("the server stopped: {0}")]
    Stopped(#[source] std::io::Error),
}

/// Loads the serve model, prints the log line and the routes, then answers requests
/// until Ctrl-C.
pub fn serve(runtime: Arc<Runtime>, opts: ServeOptions) -> Result<(), ServeError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(&opts.addr)
            .await
            .map_err(|source| ServeError::Bind {
                addr: opts.addr.clone(),
                source,
            })?;
        let registry = runtime.registry.clone();
        let instance = registry
            .preload()
            .await
            .map_err(ServeError::Preload)?
            .ok_or(ServeError::NoDefaultModel)?;
        let model = &instance.lm.model;
        let facts = model.facts();
        eprintln!(
            "{}",
            banner::log_line(
                &opts.addr,
                &banner::LogFacts {
                    name: &instance.spec.name,
                    arch: &facts.architecture,
                    params: facts.parameters,
                    context: model.n_ctx(),
                    threads: model.n_threads(),
                    kv: &opts.kv_label,
                },
                registry.config(),
            )
        );
        println!("{}", banner::routes(&opts.addr));
        drop(instance);
        tokio::spawn(sweep_models(registry));
        let app = router(AppState {
            runtime,
            api_key: opts.api_key,
            body_limit: opts.body_limit,
            allow_private_pulls: opts.allow_private_pulls,
            insecure_pulls: opts.insecure_pulls,
        });
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await
            .map_err(ServeError::Stopped)
    })
}
