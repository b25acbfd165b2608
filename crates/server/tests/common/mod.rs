//! The server's routes driven in-process: the real `router` over a `Runtime` serving
//! the tiny random-weight Qwen3 (Qwen3's own tokenizer and chat template, so tools,
//! thinking and constraints behave as on a real model; its text is noise), each
//! request sent with `tower::ServiceExt::oneshot`. No socket, no release binary, no
//! download.

#![allow(dead_code)] // each test binary uses its own part of the harness

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, HttpBody};
use axum::http::{header, HeaderMap, Method, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use llamay_runtime::{
    Encoders, ModelSpec, Registry, RegistryConfig, Resolver, Runtime, SchedulerConfig, Stats,
};
use llamay_server::{AppState, Boundary};
use llamay_store::Store;
use serde_json::Value;
use tower::ServiceExt;

/// One server: its router and the name its model answers to.
pub struct App {
    router: Router,
    pub model: String,
    pub runtime: Arc<Runtime>,
    /// The model store's folder (`Setup::store`, or another server's: `Setup::store_at`).
    store: Option<PathBuf>,
    /// Whether the folder is this server's own, removed on drop.
    owns_store: bool,
}

/// What a test's server differs in, as `llamay serve`'s options would set it.
pub struct Setup {
    /// Context positions (`-ctx`).
    pub n_ctx: usize,
    /// A request's time limit (`-timeout`).
    pub timeout: Duration,
    /// An empty model store of its own, as the binary tests' servers have (`/api/copy`,
    /// `/api/delete`, `/api/pull` then reach the store, not "no model store").
    pub store: bool,
    /// Origins allowed besides loopback ones (`-allow-origin`).
    pub allowed_origins: Vec<String>,
    /// The model file served (`-m`); the tiny Qwen3 when `None`.
    pub model: Option<PathBuf>,
    /// An encoder served for embeddings (`-embed`).
    pub embed: Option<PathBuf>,
    /// A vision projector for the model (`-mmproj`).
    pub projector: Option<PathBuf>,
    /// A draft model for the model (`-draft`).
    pub draft: Option<PathBuf>,
    /// Another server's model store (a restart over the same store: its snapshots),
    /// left in place on drop; beats `store`.
    pub store_at: Option<PathBuf>,
    /// `-allow-image-urls`, with these limits per image.
    pub image_urls: Option<llamay_store::FetchLimits>,
    /// `-allow-private-pulls -insecure`: linked images may come from loopback over
    /// plain http (a test's own image host).
    pub private_addresses: bool,
}

impl Default for Setup {
    fn default() -> Setup {
        Setup {
            n_ctx: 1024,
            timeout: Duration::from_secs(300),
            store: false,
            allowed_origins: Vec::new(),
            model: None,
            embed: None,
            projector: None,
            draft: None,
            store_at: None,
            image_urls: None,
            private_addresses: false,
        }
    }
}

/// A response: status, content type, headers, body text.
pub struct Reply {
    pub status: StatusCode,
    pub content_type: String,
    pub headers: HeaderMap,
    pub text: String,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text))
    }

    /// The `data:` payloads of an SSE body, `[DONE]` left out.
    pub fn sse(&self) -> Vec<Value> {
        self.text
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter(|d| *d != "[DONE]")
            .map(|d| serde_json::from_str(d).unwrap_or_else(|e| panic!("{e}: {d}")))
            .collect()
    }

    /// The lines of an NDJSON body.
    pub fn ndjson(&self) -> Vec<Value> {
        self.text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }
}

impl App {
    /// A server of the tiny Qwen3 with a 1,024-position context, on the defaults
    /// `llamay serve` uses.
    pub fn new() -> App {
        App::with(Setup::default())
    }

    /// A server of the tiny Qwen3 as `setup` has it.
    pub fn with(setup: Setup) -> App {
        let path = match setup.model {
            Some(p) => p,
            None => llamay_testdata::tiny_chat_model(),
        };
        let mut cfg = RegistryConfig::default();
        cfg.load.n_ctx = Some(setup.n_ctx);
        cfg.load.n_threads = Some(2);
        cfg.scheduler = SchedulerConfig {
            max_active: 4,
            timeout: setup.timeout,
            ..SchedulerConfig::default()
        };
        let owns_store = setup.store_at.is_none();
        let store = setup.store_at.or_else(|| {
            setup.store.then_some(())?;
            static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let dir =
                std::env::temp_dir().join(format!("llamay-server-test-{}-{n}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            Some(dir)
        });
        let spec = ModelSpec {
            projector: setup.projector,
            draft: setup.draft,
            ..ModelSpec::from_arg(&path.display().to_string(), path.clone(), None)
        };
        let model = spec.name.clone();
        let embed = setup
            .embed
            .map(|p| ModelSpec::from_arg(&p.display().to_string(), p.clone(), None));
        let stats = Arc::new(Stats::default());
        let registry_store = store.as_ref().map(|d| Store::new(d, None));
        let runtime = Arc::new(Runtime {
            registry: Arc::new(Registry::new(
                Some(spec),
                registry_store,
                cfg,
                stats.clone(),
            )),
            stats,
            constraints: Resolver::new(None),
            encoders: Arc::new(Encoders::new(embed, None, Default::default())),
        });
        let boundary = Boundary {
            allowed_origins: setup.allowed_origins,
            allowed_hosts: Vec::new(),
            bound_host: "localhost".into(),
            beyond_loopback: false,
            has_key: false,
        };
        let mut state = AppState::new(runtime.clone(), boundary);
        if let Some(limits) = setup.image_urls {
            state = state.allow_image_urls(limits);
        }
        if setup.private_addresses {
            state = state.allow_private_addresses().allow_insecure_transport();
        }
        let router = llamay_server::router(state);
        App {
            router,
            model,
            runtime,
            store,
            owns_store,
        }
    }

    /// The model store's folder, if the server has one.
    #[allow(dead_code)] // not every test binary including this module restarts
    pub fn store_dir(&self) -> Option<PathBuf> {
        self.store.clone()
    }

    pub async fn send(&self, method: Method, path: &str, body: Option<&Value>) -> Reply {
        match body {
            Some(v) => self.send_bytes(method, path, v.to_string()).await,
            None => {
                let req = Request::builder()
                    .method(method)
                    .uri(path)
                    .header(header::HOST, "localhost");
                self.request(req.body(Body::empty()).unwrap()).await
            }
        }
    }

    /// Sends `body` as it is, declared JSON (malformed bodies, raw strings).
    pub async fn send_bytes(&self, method: Method, path: &str, body: impl Into<Body>) -> Reply {
        let req = Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, "localhost")
            .header(header::CONTENT_TYPE, "application/json");
        self.request(req.body(body.into()).unwrap()).await
    }

    /// Sends a request built by the test (its own headers: `Origin`, `Host`, ...).
    /// A body gets the `Content-Length` hyper reads off the wire (the boundary tells
    /// a browser's body by it), unless the test declared its own.
    pub async fn request(&self, mut req: Request<Body>) -> Reply {
        let len = req.body().size_hint().exact().filter(|&n| n > 0);
        if let Some(n) = len {
            let h = req.headers_mut();
            if !h.contains_key(header::CONTENT_LENGTH) && !h.contains_key(header::TRANSFER_ENCODING)
            {
                h.insert(header::CONTENT_LENGTH, n.into());
            }
        }
        let resp = self.router.clone().oneshot(req).await.unwrap();
        let status = resp.status();
        let headers = resp.headers().clone();
        let content_type = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        Reply {
            status,
            content_type,
            headers,
            text: String::from_utf8_lossy(&bytes).into_owned(),
        }
    }

    pub async fn post(&self, path: &str, body: Value) -> Reply {
        self.send(Method::POST, path, Some(&body)).await
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.send(Method::GET, path, None).await
    }

    pub async fn delete(&self, path: &str) -> Reply {
        self.send(Method::DELETE, path, None).await
    }
}

impl Drop for App {
    fn drop(&mut self) {
        if let Some(dir) = self.store.as_ref().filter(|_| self.owns_store) {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// One user message.
pub fn user(text: &str) -> Value {
    serde_json::json!([{"role": "user", "content": text}])
}
