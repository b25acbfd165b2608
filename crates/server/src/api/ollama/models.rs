//! The Ollama model-management routes: `/api/tags`, `/api/show`, `/api/pull`,
//! `/api/copy`, `/api/delete`, `/api/ps`, `/api/version`.
//!
//! `/api/pull` runs on the server's terms, not the request's: plain http only with
//! `-insecure` (a body's `"insecure"` is ignored), private addresses only with
//! `-allow-private-pulls`, a URL pull onto a name holding another model only with
//! `"replace": true` (else 409), and the pull stops when its client leaves.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use llamay_runtime::Capabilities;
use llamay_store::{ModelName, ModelRef, PullEvent, PullOptions, StoreError};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::http::error::ApiError;
use crate::http::stream::{self};
use crate::http::{json_response, parse_body, stream_response, AppState};

use super::wire::{fail, rfc3339};

fn details(family: Option<&str>, file_type: Option<&str>, params: Option<u64>) -> Value {
    json!({
        "parent_model": "",
        "format": "gguf",
        "family": family.unwrap_or(""),
        "families": family.map(|f| vec![f.to_string()]),
        "parameter_size": params.map(parameter_size).unwrap_or_default(),
        "quantization_level": file_type.unwrap_or(""),
    })
}

/// `135M`, `1.5B`, as Ollama writes parameter counts.
fn parameter_size(n: u64) -> String {
    if n >= 1_000_000_000 {
        format!("{:.1}B", n as f64 / 1e9)
    } else {
        format!("{}M", (n as f64 / 1e6).round() as u64)
    }
}

pub(super) async fn tags(State(st): State<AppState>) -> Response {
    let mut models = Vec::new();
    let mut seen = std::collections::HashSet::new();
    if let Some(store) = st.runtime.registry.store() {
        match store.list() {
            Ok(list) => {
                for e in list {
                    let name = e.name.short();
                    seen.insert(name.clone());
                    let family = e.config.as_ref().and_then(|c| c.model_family.clone());
                    models.push(json!({
                        "name": name, "model": name,
                        "modified_at": rfc3339(e.modified),
                        "size": e.size,
                        "digest": e.digest.hex(),
                        "details": details(family.as_deref(), e.file_type(), None),
                    }));
                }
            }
            Err(e) => return fail(ApiError::internal(format!("cannot list the store: {e}"))),
        }
    }
    if let Some(d) = st.runtime.registry.default_model() {
        if !seen.contains(&d.name) {
            let meta = std::fs::metadata(&d.path).ok();
            let loaded = st
                .runtime
                .registry
                .loaded()
                .into_iter()
                .find(|e| e.spec.path == d.path);
            let info = loaded.as_ref().map(|e| e.lm.model.facts().clone());
            models.insert(
                0,
                json!({
                    "name": d.name, "model": d.name,
                    "modified_at": meta.as_ref().and_then(|m| m.modified().ok()).map(rfc3339).unwrap_or_default(),
                    "size": meta.map(|m| m.len()).unwrap_or(0),
                    "digest": "",
                    "details": details(info.as_ref().map(|i| i.architecture.as_str()), info.as_ref().and_then(|i| i.file_type.as_deref()), info.as_ref().map(|i| i.parameters)),
                }),
            );
        }
    }
    json_response(StatusCode::OK, json!({"models": models}))
}

#[derive(Deserialize)]
struct NameRequest {
    model: Option<String>,
    name: Option<String>,
    stream: Option<bool>,
    /// Pull only: a URL pull may replace a different model stored under its name.
    /// (`insecure` is not read: the server's `-insecure` flag decides.)
    replace: Option<bool>,
}

impl NameRequest {
    fn name(&self) -> Result<&str, ApiError> {
        self.model
            .as_deref()
            .or(self.name.as_deref())
            .filter(|s| !s.is_empty())
            .ok_or_else(|| ApiError::bad_request("model is required"))
    }
}

pub(super) async fn show(State(st): State<AppState>, body: Bytes) -> Response {
    let r: NameRequest = match parse_body(&body) {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    let name = match r.name() {
        Ok(n) => n,
        Err(e) => return fail(e),
    };
    let engine = match st.runtime.registry.get(name, None).await {
        Ok(e) => e,
        Err(e) => return fail(e),
    };
    let info = engine.lm.model.facts();
    let caps = match Capabilities::of_model(&engine.spec.path, engine.spec.projector.as_deref()) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let arch = info.architecture.as_str();
    json_response(
        StatusCode::OK,
        json!({
            "modelfile": format!("FROM {}\n", engine.spec.name),
            "parameters": "",
            "template": "",
            "details": details(Some(arch), info.file_type.as_deref(), Some(info.parameters)),
            "model_info": {
                "general.architecture": arch,
                "general.parameters": info.parameters,
                format!("{arch}.context_length"): info.context_length,
                format!("{arch}.embedding_length"): info.embedding_length,
                format!("{arch}.block_count"): info.block_count,
                format!("{arch}.attention.head_count"): info.head_count,
                format!("{arch}.attention.head_count_kv"): info.head_count_kv,
                "tokenizer.ggml.vocab_size": info.vocab_size,
            },
            "capabilities": caps.ollama_names(),
            "modified_at": rfc3339(engine.loaded_at),
        }),
    )
}

fn store_error(e: StoreError) -> ApiError {
    match e {
        StoreError::NotFound(_) | StoreError::NotInRegistry { .. } => {
            ApiError::not_found(e.to_string())
        }
        StoreError::InvalidName { .. } | StoreError::ReadOnly(_) => {
            ApiError::bad_request(e.to_string())
        }
        other => ApiError::internal(other.to_string()),
    }
}

fn parse_name(s: &str) -> Result<ModelName, ApiError> {
    ModelName::parse(s).map_err(store_error)
}

/// A pull's failure as an HTTP error: 409 for a name that holds another model,
/// 403 for a refused address, 404 for an unknown model, else 400.
fn pull_error(e: StoreError) -> ApiError {
    let status = match &e {
        StoreError::Exists(_) => 409,
        StoreError::PrivateAddress { .. } => 403,
        StoreError::NotFound(_) | StoreError::NotInRegistry { .. } => {
            return ApiError::not_found(e.to_string())
        }
        _ => 400,
    };
    ApiError {
        status,
        ..ApiError::bad_request(e.to_string())
    }
}

/// What the pull task tells the handler: progress, then how it ended.
enum PullMsg {
    Event(Value),
    Done(Result<(), StoreError>),
}

impl PullMsg {
    /// The NDJSON line.
    fn to_json(&self) -> Value {
        match self {
            PullMsg::Event(v) => v.clone(),
            PullMsg::Done(Ok(())) => json!({"status": "success"}),
            PullMsg::Done(Err(e)) => json!({"error": e.to_string()}),
        }
    }
}

/// Stops the pull task when dropped. The handler's future (`stream: false`) or the
/// response body (streaming) is dropped when the client goes away, and the pull
/// with it: its locks are released and its partial download kept for a resume.
struct CancelOnDrop(tokio::task::AbortHandle);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

pub(super) async fn pull(State(st): State<AppState>, body: Bytes) -> Response {
    let r: NameRequest = match parse_body(&body) {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    let name = match r.name() {
        Ok(n) => n.to_string(),
        Err(e) => return fail(e),
    };
    let Some(store) = st.runtime.registry.store().cloned() else {
        return fail(ApiError::bad_request("this server has no model store"));
    };
    let target = match ModelRef::parse(&name) {
        Ok(ModelRef::File(_)) => {
            return fail(ApiError::bad_request(
                "pull takes a model name or a URL, not a path",
            ))
        }
        Ok(t) => t,
        Err(e) => return fail(store_error(e)),
    };
    let opts = PullOptions {
        insecure: st.insecure_pulls,
        allow_private: st.allow_private_pulls,
        replace: r.replace.unwrap_or(false),
        ..PullOptions::default()
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<PullMsg>();
    let progress_tx = tx.clone();
    let task = tokio::spawn(async move {
        let progress = move |ev: PullEvent| {
            let _ = progress_tx.send(PullMsg::Event(ev.to_ollama_json()));
        };
        let result = match &target {
            ModelRef::Url(url) => llamay_store::pull_url(&store, url, &opts, &progress)
                .await
                .map(|_| ()),
            ModelRef::Name(n) => llamay_store::pull(&store, n, &opts, &progress)
                .await
                .map(|_| ()),
            ModelRef::File(_) => Ok(()),
        };
        let _ = tx.send(PullMsg::Done(result));
    });
    let cancel = CancelOnDrop(task.abort_handle());
    // A pull that fails before its first event (a clash, a refused address) still
    // gets its own status, streaming or not.
    let first = match rx.recv().await {
        Some(PullMsg::Done(Err(e))) => return fail(pull_error(e)),
        Some(m) => m,
        None => return fail(ApiError::internal("the pull ended without a result")),
    };
    if r.stream.unwrap_or(true) {
        let s = futures_util::stream::unfold(
            (Some(first), rx, cancel),
            |(next, mut rx, cancel)| async move {
                let msg = match next {
                    Some(m) => m,
                    None => rx.recv().await?,
                };
                let line = stream::ndjson(&msg.to_json());
                Some((Ok::<_, std::io::Error>(line), (None, rx, cancel)))
            },
        );
        return stream_response("application/x-ndjson", axum::body::Body::from_stream(s));
    }
    let mut last = first;
    while !matches!(last, PullMsg::Done(_)) {
        match rx.recv().await {
            Some(m) => last = m,
            None => break,
        }
    }
    drop(cancel);
    match last {
        PullMsg::Done(Ok(())) => json_response(StatusCode::OK, last.to_json()),
        PullMsg::Done(Err(e)) => fail(pull_error(e)),
        PullMsg::Event(_) => fail(ApiError::internal("the pull ended without a result")),
    }
}

#[derive(Deserialize)]
struct CopyRequest {
    source: String,
    destination: String,
}

pub(super) async fn copy(State(st): State<AppState>, body: Bytes) -> Response {
    let r: CopyRequest = match parse_body(&body) {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    let Some(store) = st.runtime.registry.store() else {
        return fail(ApiError::bad_request("this server has no model store"));
    };
    let result = parse_name(&r.source).and_then(|src| {
        let dst = parse_name(&r.destination)?;
        store.copy(&src, &dst).map_err(store_error)
    });
    match result {
        Ok(()) => StatusCode::OK.into_response(),
        Err(e) => fail(e),
    }
}

pub(super) async fn remove(State(st): State<AppState>, body: Bytes) -> Response {
    let r: NameRequest = match parse_body(&body) {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    let Some(store) = st.runtime.registry.store() else {
        return fail(ApiError::bad_request("this server has no model store"));
    };
    let result = r.name().and_then(|n| {
        let name = parse_name(n)?;
        store.remove(&name).map_err(store_error)?;
        st.runtime.registry.unload(&name.short());
        Ok(())
    });
    match result {
        Ok(()) => StatusCode::OK.into_response(),
        Err(e) => fail(e),
    }
}

pub(super) async fn ps(State(st): State<AppState>) -> Response {
    let models: Vec<Value> = st
        .runtime
        .registry
        .loaded()
        .iter()
        .map(|e| {
            let info = e.lm.model.facts();
            let c = e.scheduler.counts();
            json!({
                "name": e.spec.name, "model": e.spec.name,
                "size": e.size, "size_vram": 0, "digest": "",
                "details": details(Some(&info.architecture), info.file_type.as_deref(), Some(info.parameters)),
                "expires_at": rfc3339(e.expires_at()),
                "context_length": e.lm.model.n_ctx(),
                "llamay": {
                    "active": c.active.load(std::sync::atomic::Ordering::SeqCst),
                    "queued": c.waiting.load(std::sync::atomic::Ordering::SeqCst),
                },
            })
        })
        .collect();
    json_response(StatusCode::OK, json!({"models": models}))
}

pub(super) async fn version() -> Response {
    json_response(
        StatusCode::OK,
        json!({"version": env!("CARGO_PKG_VERSION")}),
    )
}
