//! `POST /rerank` and `/v1/rerank` (also `/v1/rerank` spelt by Jina and Cohere clients):
//! `query`, `documents` as strings or `{text}`, `top_n`, `return_documents`; results
//! sorted by `relevance_score`, each with its `index`, in the shape llama.cpp's server
//! answers (which Jina's and Cohere's clients read). Errors in llama.cpp's shape.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::http::error::{ApiError, ApiErrorKind, ErrorShape};
use crate::http::{json_response, parse_body, AppState};
use llamay_runtime::RerankRequest;

/// The rerank routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/rerank", post(rerank))
        .route("/v1/rerank", post(rerank))
        .route("/reranking", post(rerank))
        .route("/v1/reranking", post(rerank))
}

/// llama.cpp's error body: `{"error": {"code", "message", "type"}}`.
pub(crate) fn error_body(e: &ApiError) -> Value {
    let kind = match e.kind {
        ApiErrorKind::InvalidRequest | ApiErrorKind::TooLarge => "invalid_request_error",
        ApiErrorKind::Authentication => "authentication_error",
        ApiErrorKind::Forbidden => "permission_error",
        ApiErrorKind::NotFound => "not_found_error",
        ApiErrorKind::Overloaded => "unavailable_error",
        ApiErrorKind::Timeout => "timeout",
        ApiErrorKind::Internal => "server_error",
    };
    json!({"error": {"code": e.status, "message": e.message, "type": kind, "param": e.param}})
}

#[derive(Deserialize)]
struct Body {
    #[serde(default)]
    model: String,
    query: Option<String>,
    documents: Option<Vec<Value>>,
    /// llama.cpp also reads `texts`.
    texts: Option<Vec<Value>>,
    top_n: Option<i64>,
    return_documents: Option<bool>,
}

fn bad(message: String, param: &str) -> ApiError {
    let mut e = ApiError::bad_request(message);
    e.param = Some(param.into());
    e
}

async fn rerank(State(st): State<AppState>, body: Bytes) -> Response {
    run(&st, &body)
        .await
        .unwrap_or_else(|e| e.into_response_as(ErrorShape(error_body)))
}

async fn run(st: &AppState, body: &[u8]) -> Result<Response, ApiError> {
    let b: Body = parse_body(body)?;
    let query = b
        .query
        .ok_or_else(|| bad("query is missing".into(), "query"))?;
    let docs = b
        .documents
        .or(b.texts)
        .ok_or_else(|| bad("documents is missing".into(), "documents"))?;
    let documents = docs
        .iter()
        .enumerate()
        .map(|(i, d)| match d {
            Value::String(s) => Ok(s.clone()),
            Value::Object(o) => match o.get("text") {
                Some(Value::String(s)) => Ok(s.clone()),
                _ => Err(bad(
                    format!("documents[{i}] has no \"text\" string"),
                    "documents",
                )),
            },
            _ => Err(bad(
                format!("documents[{i}] must be a string or an object with \"text\""),
                "documents",
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let top_n = match b.top_n {
        None => documents.len(),
        Some(n) if n >= 1 => (n as usize).min(documents.len()),
        Some(n) => return Err(bad(format!("top_n must be at least 1, not {n}"), "top_n")),
    };
    let out = st
        .runtime
        .rerank(RerankRequest {
            model: b.model,
            query,
            documents: documents.clone(),
            keep_alive: None,
        })
        .await?;
    let mut order: Vec<usize> = (0..out.scores.len()).collect();
    order.sort_by(|&a, &b| out.scores[b].total_cmp(&out.scores[a]).then(a.cmp(&b)));
    let results: Vec<Value> = order
        .into_iter()
        .take(top_n)
        .map(|i| {
            let mut r = json!({"index": i, "relevance_score": out.scores[i]});
            if b.return_documents.unwrap_or(false) {
                r["document"] = json!({"text": documents[i]});
            }
            r
        })
        .collect();
    Ok(json_response(
        StatusCode::OK,
        json!({
            "model": out.model,
            "object": "list",
            "results": results,
            "usage": {"prompt_tokens": out.prompt_tokens, "total_tokens": out.prompt_tokens},
        }),
    ))
}
