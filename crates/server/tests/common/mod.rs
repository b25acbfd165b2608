//! The server's routes driven in-process: the real `router` over a `Runtime` serving
//! the tiny random-weight Qwen3 (Qwen3's own tokenizer and chat template, so tools,
//! thinking and constraints behave as on a real model; its text is noise), each
//! request sent with `tower::ServiceExt::oneshot`. No socket, no release binary, no
//! download.

#![allow(dead_code)] // each test binary uses its own part of the harness

use std::sync::Arc;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use llamay_runtime::{
    Encoders, ModelSpec, Registry, RegistryConfig, Resolver, Runtime, SchedulerConfig, Stats,
};
use llamay_server::{AppState, Boundary};
use serde_json::Value;
use tower::ServiceExt;

/// One server: its router and the name its model answers to.
pub struct App {
    router: Router,
    pub model: String,
    pub runtime: Arc<Runtime>,
}

/// A response: status, content type, body text.
pub struct Reply {
    pub status: StatusCode,
    pub content_type: String,
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
        let path = llamay_testdata::tiny_chat_model();
        let mut cfg = RegistryConfig::default();
        cfg.load.n_ctx = Some(1024);
        cfg.load.n_threads = Some(2);
        cfg.scheduler = SchedulerConfig {
            max_active: 4,
            ..SchedulerConfig::default()
        };
        let spec = ModelSpec::from_arg(&path.display().to_string(), path.clone(), None);
        let model = spec.name.clone();
        let stats = Arc::new(Stats::default());
        let runtime = Arc::new(Runtime {
            registry: Arc::new(Registry::new(Some(spec), None, cfg, stats.clone())),
            stats,
            constraints: Resolver::new(None),
            encoders: Arc::new(Encoders::new(None, None, Default::default())),
        });
        let boundary = Boundary {
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            bound_host: "localhost".into(),
            beyond_loopback: false,
            has_key: false,
        };
        let router = llamay_server::router(AppState::new(runtime.clone(), boundary));
        App {
            router,
            model,
            runtime,
        }
    }

    pub async fn send(&self, method: Method, path: &str, body: Option<&Value>) -> Reply {
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, "localhost");
        let body = match body {
            Some(v) => {
                req = req.header(header::CONTENT_TYPE, "application/json");
                Body::from(v.to_string())
            }
            None => Body::empty(),
        };
        let resp = self
            .router
            .clone()
            .oneshot(req.body(body).unwrap())
            .await
            .unwrap();
        let status = resp.status();
        let content_type = resp
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        Reply {
            status,
            content_type,
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

/// One user message.
pub fn user(text: &str) -> Value {
    serde_json::json!([{"role": "user", "content": text}])
}
