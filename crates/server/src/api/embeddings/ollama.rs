//! Ollama's `POST /api/embed` (`input`, `truncate`, `dimensions`, `keep_alive`;
//! durations and counts back) and the older `POST /api/embeddings` (`prompt` ->
//! `embedding`).

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::api::ollama::{error_body, parse_keep_alive};
use crate::http::error::{ApiError, ErrorShape};
use crate::http::{json_response, parse_body, AppState};
use llamay_runtime::{EmbedInput, EmbedRequest};

fn fail(e: impl Into<ApiError>) -> Response {
    e.into().into_response_as(ErrorShape(error_body))
}

#[derive(Deserialize)]
struct EmbedBody {
    #[serde(default)]
    model: String,
    input: Option<Value>,
    truncate: Option<bool>,
    dimensions: Option<i64>,
    keep_alive: Option<Value>,
}

#[derive(Deserialize)]
struct LegacyBody {
    #[serde(default)]
    model: String,
    prompt: Option<String>,
    keep_alive: Option<Value>,
}

fn keep_alive(v: Option<&Value>) -> Result<Option<std::time::Duration>, ApiError> {
    v.map(parse_keep_alive).transpose()
}

pub(super) async fn embed(State(st): State<AppState>, body: Bytes) -> Response {
    let run = async {
        let b: EmbedBody = parse_body(&body)?;
        let inputs = match b.input {
            Some(Value::String(s)) => vec![EmbedInput::Text(s)],
            Some(Value::Array(a)) if !a.is_empty() => a
                .into_iter()
                .enumerate()
                .map(|(i, x)| match x {
                    Value::String(s) => Ok(EmbedInput::Text(s)),
                    _ => Err(ApiError::bad_request(format!("input[{i}] is not a string"))),
                })
                .collect::<Result<_, _>>()?,
            _ => {
                return Err(ApiError::bad_request(
                    "input must be a string or a non-empty array of strings",
                ))
            }
        };
        let dimensions = match b.dimensions {
            None | Some(0) => None,
            Some(d) if d > 0 => Some(d as usize),
            Some(d) => return Err(ApiError::bad_request(format!("dimensions {d} is negative"))),
        };
        let out = st
            .runtime
            .embed(EmbedRequest {
                model: b.model,
                inputs,
                truncate: b.truncate.unwrap_or(true),
                dimensions,
                keep_alive: keep_alive(b.keep_alive.as_ref())?,
            })
            .await?;
        Ok::<_, ApiError>(json_response(
            StatusCode::OK,
            json!({
                "model": out.model,
                "embeddings": out.vectors,
                "total_duration": out.total_duration.as_nanos() as u64,
                "load_duration": out.load_duration.as_nanos() as u64,
                "prompt_eval_count": out.prompt_tokens,
            }),
        ))
    };
    run.await.unwrap_or_else(fail)
}

pub(super) async fn embeddings(State(st): State<AppState>, body: Bytes) -> Response {
    let run = async {
        let b: LegacyBody = parse_body(&body)?;
        let prompt = b
            .prompt
            .ok_or_else(|| ApiError::bad_request("prompt is missing"))?;
        let out = st
            .runtime
            .embed(EmbedRequest {
                model: b.model,
                inputs: vec![EmbedInput::Text(prompt)],
                truncate: true,
                keep_alive: keep_alive(b.keep_alive.as_ref())?,
                ..Default::default()
            })
            .await?;
        let v = out.vectors.into_iter().next().unwrap_or_default();
        Ok::<_, ApiError>(json_response(StatusCode::OK, json!({"embedding": v})))
    };
    run.await.unwrap_or_else(fail)
}
