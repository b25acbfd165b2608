//! The router: the three API shapes' routes, llamay's own (`/health`,
//! `/v1/stats`), and the guard every request passes (API key, body size, errors in
//! the shape of the API the path belongs to).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};

use axum::body::Body;
use llamay_runtime::Registry;

use crate::api::{anthropic, catalog, contexts, embeddings, ollama, openai, rerank, responses};
use crate::boundary::Refusal;
use crate::http::error::{ApiError, ErrorShape};
use crate::http::AppState;

/// The whole HTTP application.
pub fn router(state: AppState) -> Router {
    Router::new()
        .merge(openai::routes())
        .merge(responses::routes())
        .merge(catalog::routes())
        .merge(contexts::routes())
        .merge(anthropic::routes())
        .merge(ollama::routes())
        .merge(embeddings::routes())
        .merge(rerank::routes())
        .route("/health", get(health))
        .route("/v1/stats", get(stats))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(state.clone(), guard))
        .layer(DefaultBodyLimit::max(state.body_limit))
        .with_state(state)
}

/// Unloads idle models past their keep-alive, every few seconds, for ever.
pub(crate) async fn sweep_models(registry: Arc<Registry>) {
    let mut tick = tokio::time::interval(Duration::from_secs(2));
    loop {
        tick.tick().await;
        registry.sweep();
    }
}

/// The error shape of the API a path belongs to.
pub(crate) fn shape_for(path: &str) -> ErrorShape {
    if path.starts_with("/v1/messages") {
        ErrorShape(anthropic::error_body)
    } else if ["/rerank", "/v1/rerank", "/reranking", "/v1/reranking"].contains(&path) {
        ErrorShape(rerank::error_body)
    } else if path.starts_with("/api/") {
        ErrorShape(ollama::error_body)
    } else {
        ErrorShape(openai::error_body)
    }
}

async fn guard(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let shape = shape_for(req.uri().path());
    st.runtime.stats.requests.fetch_add(1, Ordering::Relaxed);
    if let Err(refusal) = st.boundary.check(req.method(), req.uri(), req.headers()) {
        st.runtime.stats.errors.fetch_add(1, Ordering::Relaxed);
        let e = match refusal {
            Refusal::Forbidden(why) => ApiError::forbidden(why),
            Refusal::NotJson => ApiError::unsupported_media_type(),
        };
        return e.into_response_as(shape);
    }
    // From here on the origin, if any, is allowed: a browser may read the answer.
    let origin = req.headers().get(header::ORIGIN).cloned();
    if req.method() == Method::OPTIONS && origin.is_some() {
        return with_cors(StatusCode::NO_CONTENT.into_response(), origin, true);
    }
    let resp = checked(&st, shape, req, next).await;
    with_cors(resp, origin, false)
}

/// Lets an allowed page read the answer (and, for a preflight, send its request).
fn with_cors(mut resp: Response, origin: Option<HeaderValue>, preflight: bool) -> Response {
    let Some(origin) = origin else {
        return resp;
    };
    let h = resp.headers_mut();
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    h.insert(header::VARY, HeaderValue::from_static("Origin"));
    if preflight {
        h.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static("GET, POST, DELETE, OPTIONS"),
        );
        h.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static("authorization, content-type, x-api-key, anthropic-version"),
        );
        h.insert(
            header::ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from_static("600"),
        );
    }
    resp
}

/// Longest a client may take to send a request's body.
pub(crate) const BODY_TIMEOUT: Duration = Duration::from_secs(60);

/// The key, the declared size, then the handler, with errors in the path's shape.
async fn checked(st: &AppState, shape: ErrorShape, req: Request, next: Next) -> Response {
    if let Some(key) = &st.api_key {
        if !authorized(req.headers(), key) {
            st.runtime.stats.errors.fetch_add(1, Ordering::Relaxed);
            return ApiError::unauthorized().into_response_as(shape);
        }
    }
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > st.body_limit as u64) {
        st.runtime.stats.errors.fetch_add(1, Ordering::Relaxed);
        return ApiError::too_large(st.body_limit).into_response_as(shape);
    }
    // The whole body, in time: a client that trickles it holds no handler.
    let (parts, body) = req.into_parts();
    let bytes =
        match tokio::time::timeout(BODY_TIMEOUT, axum::body::to_bytes(body, st.body_limit)).await {
            Ok(Ok(b)) => b,
            Ok(Err(e)) => {
                st.runtime.stats.errors.fetch_add(1, Ordering::Relaxed);
                let too_long = std::error::Error::source(&e)
                    .is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
                let err = if too_long {
                    ApiError::too_large(st.body_limit)
                } else {
                    ApiError::bad_request(format!("the request body could not be read: {e}"))
                };
                return err.into_response_as(shape);
            }
            Err(_) => {
                st.runtime.stats.errors.fetch_add(1, Ordering::Relaxed);
                return ApiError::body_timeout(BODY_TIMEOUT).into_response_as(shape);
            }
        };
    let req = Request::from_parts(parts, Body::from(bytes));
    let resp = next.run(req).await;
    let status = resp.status();
    if status.is_client_error() || status.is_server_error() {
        st.runtime.stats.errors.fetch_add(1, Ordering::Relaxed);
    }
    if status.is_client_error() && !is_json(&resp) {
        // axum's own rejections (405, 413 on a chunked body, ...) are plain text:
        // answer them in the API's shape too.
        let (parts, body) = resp.into_parts();
        let text = axum::body::to_bytes(body, 4096)
            .await
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        let message = if text.is_empty() {
            parts
                .status
                .canonical_reason()
                .unwrap_or("bad request")
                .to_string()
        } else {
            text
        };
        let e = ApiError {
            status: parts.status.as_u16(),
            ..ApiError::bad_request(message)
        };
        return e.into_response_as(shape);
    }
    resp
}

fn authorized(headers: &axum::http::HeaderMap, key: &str) -> bool {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    let x_api_key = headers.get("x-api-key").and_then(|v| v.to_str().ok());
    [bearer, x_api_key]
        .into_iter()
        .flatten()
        .any(|k| constant_time_eq(k.as_bytes(), key.as_bytes()))
}

/// Compares without stopping at the first difference (no timing oracle on the key).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn is_json(r: &Response) -> bool {
    r.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
}

async fn not_found(req: Request) -> Response {
    let path = req.uri().path().to_string();
    ApiError::not_found(format!("no route {} {path}", req.method()))
        .into_response_as(shape_for(&path))
}

async fn health() -> Response {
    Json(serde_json::json!({"status": "ok"})).into_response()
}

async fn stats(State(st): State<AppState>) -> Response {
    let rt = &st.runtime;
    let mut v = rt.stats.to_json();
    let mut queued = 0usize;
    let mut active = 0usize;
    let models: Vec<serde_json::Value> = st
        .runtime
        .registry
        .loaded()
        .iter()
        .map(|e| {
            let c = e.scheduler.counts();
            let (a, w) = (
                c.active.load(Ordering::SeqCst),
                c.waiting.load(Ordering::SeqCst),
            );
            active += a;
            queued += w;
            serde_json::json!({
                "name": e.spec.name,
                "state": "loaded",
                "active": a,
                "queued": w,
                "constraints_cached": e.lm.constraints.len(),
                "constraint_cache_bytes": e.lm.constraints.bytes(),
                "kv_cache": e.scheduler.kv_cache().stats_json(&e.lm.model),
                "expires_at": chrono::DateTime::<chrono::Utc>::from(e.expires_at()).to_rfc3339(),
            })
        })
        .collect();
    let mut models = models;
    if let Some(d) = rt.registry.default_model() {
        if !models.iter().any(|m| m["name"] == d.name.as_str()) {
            models.push(serde_json::json!({"name": d.name, "state": "unloaded"}));
        }
    }
    v["contexts"] = rt.registry.contexts().len().into();
    v["constraints"] = rt.constraints.stats_json();
    v["active"] = active.into();
    v["queue_depth"] = queued.into();
    v["models"] = models.into();
    if let Some(d) = rt.registry.default_model() {
        v["default_model"] = d.name.clone().into();
    }
    let cfg = rt.registry.config();
    v["limits"] = serde_json::json!({
        "max_active_per_model": cfg.scheduler.max_active,
        "max_queue_per_model": cfg.scheduler.max_queue,
        "max_loaded": cfg.max_loaded,
        "keep_alive_s": cfg.keep_alive.as_secs(),
        "constraint_cache_bytes_per_model": cfg.constraint_cache_bytes,
    });
    Json(v).into_response()
}
