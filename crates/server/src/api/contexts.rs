//! `/v1/contexts`: named contexts (a prefix computed once, continued by any request
//! through `llamay_context`, forked without copying, snapshotted into the model
//! store). Errors in OpenAI's shape, like every `/v1/` route of ours.
//!
//! - `POST /v1/contexts` `{model, messages | prompt, tools?, ttl_s?}` or
//!   `{model, snapshot: "sha256:…"}` → the context
//! - `GET /v1/contexts`, `GET /v1/contexts/{id}`, `DELETE /v1/contexts/{id}`
//! - `POST /v1/contexts/{id}/fork?n=8` → `n` contexts sharing its blocks
//! - `POST /v1/contexts/{id}/snapshot` → `{snapshot: "sha256:…", bytes, tokens}`

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use serde::Deserialize;
use serde_json::{json, Value};

use super::openai::{chat_messages, fail, Message};
use super::tool_wire::{function_tools, openai_choice};
use crate::http::error::ApiError;
use crate::http::{json_response, parse_body, AppState};
use llamay_runtime::ToolSet;
use llamay_runtime::{ContextRequest, Prompt};

/// Longest idle time a context may ask for: a week.
const MAX_TTL_S: u64 = 7 * 24 * 3600;

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/contexts", post(create).get(list))
        .route("/v1/contexts/{id}", get(fetch).delete(remove))
        .route("/v1/contexts/{id}/fork", post(fork))
        .route("/v1/contexts/{id}/snapshot", post(snapshot))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    #[serde(default)]
    model: String,
    messages: Option<Vec<Message>>,
    prompt: Option<String>,
    tools: Option<Value>,
    snapshot: Option<String>,
    ttl_s: Option<u64>,
}

async fn create(State(st): State<AppState>, body: Bytes) -> Response {
    create_inner(&st, &body).await.unwrap_or_else(fail)
}

async fn create_inner(st: &AppState, body: &[u8]) -> Result<Response, ApiError> {
    let b: CreateBody = parse_body(body)?;
    let given = [
        b.messages.is_some(),
        b.prompt.is_some(),
        b.snapshot.is_some(),
    ];
    if given.iter().filter(|&&g| g).count() != 1 {
        return Err(ApiError::bad_request(
            "a context takes exactly one of messages, prompt or snapshot",
        ));
    }
    if let Some(t) = b.ttl_s {
        if !(1..=MAX_TTL_S).contains(&t) {
            return Err(ApiError::bad_request(format!(
                "ttl_s must be between 1 and {MAX_TTL_S}, not {t}"
            )));
        }
    }
    let prompt = match (b.messages, b.prompt) {
        (Some(m), _) => Some(Prompt::Chat(chat_messages(m)?)),
        (_, Some(p)) if p.is_empty() => {
            return Err(ApiError::bad_request("prompt must not be empty"))
        }
        (_, Some(p)) => Some(Prompt::Raw(p)),
        _ => None,
    };
    let tools = ToolSet::new(
        function_tools(b.tools.as_ref())?,
        openai_choice(None)?,
        true,
    )?;
    let info = st
        .runtime
        .create_context(ContextRequest {
            model: b.model,
            prompt,
            tools,
            snapshot: b.snapshot,
            ttl: b.ttl_s.map(Duration::from_secs),
        })
        .await?;
    Ok(json_response(StatusCode::OK, info.to_json()))
}

async fn list(State(st): State<AppState>) -> Response {
    let data: Vec<Value> = st
        .runtime
        .registry
        .contexts()
        .list()
        .iter()
        .map(|c| c.to_json())
        .collect();
    json_response(StatusCode::OK, json!({"object": "list", "data": data}))
}

async fn fetch(State(st): State<AppState>, Path(id): Path<String>) -> Response {
    match st.runtime.registry.contexts().get(&id) {
        Ok(c) => json_response(StatusCode::OK, c.info().to_json()),
        Err(e) => fail(e),
    }
}

async fn remove(State(st): State<AppState>, Path(id): Path<String>) -> Response {
    match st.runtime.registry.contexts().remove(&id) {
        Ok(_) => json_response(
            StatusCode::OK,
            json!({"id": id, "object": "llamay.context.deleted", "deleted": true}),
        ),
        Err(e) => fail(e),
    }
}

/// `n` from the query string (default 1).
fn forks_asked(query: Option<&str>) -> Result<usize, ApiError> {
    let mut n = 1;
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("n", v)) => {
                n = v.parse().map_err(|_| {
                    ApiError::bad_request(format!("n must be a whole number, not {v:?}"))
                })?
            }
            _ => {
                return Err(ApiError::bad_request(format!(
                    "unknown query parameter {pair:?} (fork takes n)"
                )))
            }
        }
    }
    Ok(n)
}

async fn fork(
    State(st): State<AppState>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Response {
    let n = match forks_asked(query.as_deref()) {
        Ok(n) => n,
        Err(e) => return fail(e),
    };
    match st.runtime.fork_context(&id, n) {
        Ok(forks) => json_response(
            StatusCode::OK,
            json!({
                "object": "list",
                "parent": id,
                "data": forks.iter().map(|c| c.to_json()).collect::<Vec<_>>(),
            }),
        ),
        Err(e) => fail(e),
    }
}

async fn snapshot(State(st): State<AppState>, Path(id): Path<String>) -> Response {
    match st.runtime.snapshot_context(&id).await {
        Ok(s) => json_response(
            StatusCode::OK,
            json!({"id": id, "snapshot": s.digest, "bytes": s.bytes, "tokens": s.tokens}),
        ),
        Err(e) => fail(e),
    }
}

#[cfg(test)]
mod tests {
    use super::forks_asked;

    #[test]
    fn fork_counts_come_from_the_query() {
        assert_eq!(forks_asked(None).unwrap(), 1);
        assert_eq!(forks_asked(Some("n=8")).unwrap(), 8);
        assert!(forks_asked(Some("n=x")).is_err());
        assert!(forks_asked(Some("m=2")).is_err());
    }
}
