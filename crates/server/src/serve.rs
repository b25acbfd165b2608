//! `llamay serve` on a socket: the async runtime, the listener, the router, the
//! idle-model sweeper, and a graceful stop on SIGTERM or Ctrl-C.

use std::sync::Arc;
use std::time::Duration;

use llamay_runtime::Runtime;

use crate::banner;
use crate::boundary::Boundary;
use crate::http::AppState;
use crate::router::{router, sweep_models};

/// How to serve.
pub struct ServeOptions {
    /// `HOST:PORT`.
    pub addr: String,
    /// `-api-key` (or `$LLAMAY_API_KEY`): every request must carry it, as
    /// `Authorization: Bearer KEY` or `x-api-key`; `None`: no key is asked for.
    pub api_key: Option<Arc<str>>,
    /// Largest request body accepted, in bytes (a 413 above); `llamay serve` gives
    /// [`DEFAULT_BODY_LIMIT`](crate::DEFAULT_BODY_LIMIT).
    pub body_limit: usize,
    /// The KV cache type's name, for the log line.
    pub kv_label: String,
    /// `-allow-origin`: browser origins allowed besides loopback ones (`*`: any).
    pub allowed_origins: Vec<String>,
    /// `-allow-host`: `Host` names allowed besides loopback names and the bound
    /// address (`*`: any).
    pub allowed_hosts: Vec<String>,
    /// `-insecure-no-key`: listen beyond loopback without a key (model management
    /// stays refused).
    pub insecure_no_key: bool,
    /// How long in-flight generations may run on after a stop signal before they
    /// are ended as cancelled.
    pub drain_timeout: Duration,
    /// `/api/pull` may reach loopback, link-local and private addresses.
    pub allow_private_pulls: bool,
    /// `/api/pull` may use plain http and unverified certificates.
    pub insecure_pulls: bool,
    /// `-allow-image-urls`: requests may link images by http(s) URL, fetched under
    /// the pull rules (the two flags above).
    pub allow_image_urls: bool,
}

/// Why [`serve`] (or [`check_exposure`]) would not or could not serve.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The tokio runtime could not be built.
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// The address could not be listened on (taken, not this machine's, not allowed).
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address as given (`HOST:PORT`).
        addr: String,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The address (the field) is beyond loopback, with neither a key nor
    /// `-insecure-no-key`.
    #[error(
        "{0} is beyond loopback: anyone who can reach it could use it. Give -api-key KEY \
         (or $LLAMAY_API_KEY), or -insecure-no-key to serve it without one"
    )]
    NoKey(String),
    /// The serve model could not be loaded.
    #[error("{0}")]
    Preload(llamay_runtime::Error),
    /// The runtime's registry has no serve model: `serve` loads one before it answers.
    #[error("no default model")]
    NoDefaultModel,
}

/// Extra time, after the drain, for cancelled streams to send their final events.
const FINAL_EVENTS_GRACE: Duration = Duration::from_secs(5);

/// Loads the serve model, prints the log line and the routes, then answers requests
/// until SIGTERM or Ctrl-C; then stops accepting, lets in-flight generations finish
/// for up to the drain timeout, ends the rest as cancelled, and returns.
pub fn serve(runtime: Arc<Runtime>, opts: ServeOptions) -> Result<(), ServeError> {
    check_exposure(&opts.addr, opts.api_key.is_some(), opts.insecure_no_key)?;
    let host = crate::boundary::split_host(&opts.addr).to_string();
    let beyond_loopback = crate::boundary::beyond_loopback(&host);
    let boundary = Arc::new(Boundary {
        allowed_origins: opts.allowed_origins.clone(),
        allowed_hosts: opts.allowed_hosts.clone(),
        bound_host: host,
        beyond_loopback,
        has_key: opts.api_key.is_some(),
    });
    // Handlers only parse, queue and stream; the engine has its own threads. Two
    // workers keep the cores for the forward pass, except on bigger machines.
    let workers = std::thread::available_parallelism()
        .map(|n| (n.get() / 4).clamp(2, 8))
        .unwrap_or(2);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)?;
    rt.block_on(async move {
        let stop = StopSignal::listen();
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
        let now = || chrono::Local::now().format("%Y-%m-%dT%H:%M:%S%.3f%:z");
        if let Some(a) = model.device() {
            eprintln!(
                "time={} level=INFO msg=\"device graph attached\" device=\"{a}\"",
                now()
            );
        }
        if let Some(note) = model.device_note() {
            eprintln!("time={} level=WARN msg=\"{note}\"", now());
        }
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
                    lexicon_terms: runtime.constraints.settings().lexicon_terms(),
                },
                registry.config(),
            )
        );
        let encoders = &runtime.encoders;
        println!(
            "{}",
            banner::routes(
                &opts.addr,
                encoders.embed_model().map(|m| m.name.as_str()),
                encoders.rerank_model().map(|m| m.name.as_str()),
            )
        );
        drop(instance);
        for (spec, purpose) in [
            (encoders.embed_model(), llamay_runtime::Purpose::Embed),
            (encoders.rerank_model(), llamay_runtime::Purpose::Rerank),
        ] {
            if let Some(spec) = spec {
                encoders
                    .get(&spec.name, purpose, &registry)
                    .await
                    .map_err(ServeError::Preload)?;
            }
        }
        tokio::spawn(sweep_models(registry.clone()));
        let app = router(AppState {
            runtime,
            api_key: opts.api_key,
            body_limit: opts.body_limit,
            boundary,
            allow_private_pulls: opts.allow_private_pulls,
            insecure_pulls: opts.insecure_pulls,
            image_urls: opts
                .allow_image_urls
                .then_some(crate::api::image_links::DEFAULT_IMAGE_LIMITS),
            kept: Default::default(),
        });
        let drain = opts.drain_timeout;
        let stopping = async move {
            let signal = stop.wait().await;
            eprintln!(
                "llamay: {signal}: no new connections; in-flight generations have {}s to finish",
                drain.as_secs()
            );
            // Runs beside the graceful shutdown, which waits for open connections.
            tokio::spawn(async move {
                let t0 = tokio::time::Instant::now();
                while registry.any_busy() && t0.elapsed() < drain {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                if registry.any_busy() {
                    eprintln!("llamay: drain timeout: ending the remaining generations");
                    registry.cancel_all();
                }
                tokio::time::sleep(FINAL_EVENTS_GRACE).await;
                // Connections still open now hold no generation of ours (idle
                // keep-alives, a client that reads nothing): stop anyway.
                eprintln!("llamay: stopped with connections still open");
                std::process::exit(0);
            });
        };
        crate::listen::serve(listener, app, stopping).await;
        Ok(())
    })
}

/// Refuses to listen beyond loopback without a key, unless told to (so `serve` can
/// say so before it loads anything).
pub fn check_exposure(addr: &str, has_key: bool, insecure_no_key: bool) -> Result<(), ServeError> {
    let host = crate::boundary::split_host(addr);
    if crate::boundary::beyond_loopback(host) && !has_key && !insecure_no_key {
        return Err(ServeError::NoKey(addr.to_string()));
    }
    Ok(())
}

/// SIGTERM (how systemd, Docker and Kubernetes stop a service) or Ctrl-C. The
/// handlers are installed when this is made, before the port opens, so a signal sent
/// the moment the server answers is not taken by the default action instead.
struct StopSignal {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    int: Option<tokio::signal::unix::Signal>,
}

impl StopSignal {
    fn listen() -> StopSignal {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            StopSignal {
                term: signal(SignalKind::terminate()).ok(),
                int: signal(SignalKind::interrupt()).ok(),
            }
        }
        #[cfg(not(unix))]
        StopSignal {}
    }

    /// Waits for either, and says which came.
    async fn wait(self) -> &'static str {
        #[cfg(unix)]
        {
            let (mut term, mut int) = (self.term, self.int);
            let on_term = async {
                match term.as_mut() {
                    Some(t) => {
                        t.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            let on_int = async {
                match int.as_mut() {
                    Some(i) => {
                        i.recv().await;
                    }
                    None => {
                        let _ = tokio::signal::ctrl_c().await;
                    }
                }
            };
            tokio::select! {
                _ = on_term => "SIGTERM",
                _ = on_int => "SIGINT",
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            "Ctrl-C"
        }
    }
}
