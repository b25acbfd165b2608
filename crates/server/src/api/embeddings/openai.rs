//! `POST /v1/embeddings` in OpenAI's shape: `input` as a string, strings, token ids or
//! arrays of token ids; `encoding_format` float or base64 (little-endian f32);
//! `dimensions`; `usage`.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use base64::Engine;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::api::openai::error_body;
use crate::http::error::{ApiError, ErrorShape};
use crate::http::{json_response, parse_body, AppState};
use llamay_runtime::{EmbedInput, EmbedRequest};

#[derive(Deserialize)]
struct Request {
    #[serde(default)]
    model: String,
    input: Option<Value>,
    encoding_format: Option<String>,
    dimensions: Option<i64>,
}

fn fail(e: impl Into<ApiError>) -> Response {
    e.into().into_response_as(ErrorShape(error_body))
}

/// OpenAI's `input`: one text, texts, token ids, or arrays of token ids.
pub(super) fn inputs(v: Option<Value>) -> Result<Vec<EmbedInput>, ApiError> {
    let bad = |why: &str| {
        let mut e = ApiError::bad_request(format!(
            "input must be a string, an array of strings, an array of token ids or an array of \
             arrays of token ids ({why})"
        ));
        e.param = Some("input".into());
        e
    };
    let token = |x: &Value| x.as_u64().and_then(|t| u32::try_from(t).ok());
    let tokens = |a: &[Value]| a.iter().map(token).collect::<Option<Vec<u32>>>();
    Ok(match v {
        None | Some(Value::Null) => return Err(bad("it is missing")),
        Some(Value::String(s)) => vec![EmbedInput::Text(s)],
        Some(Value::Array(a)) if a.is_empty() => return Err(bad("it is an empty array")),
        Some(Value::Array(a)) => match &a[0] {
            Value::String(_) => a
                .into_iter()
                .enumerate()
                .map(|(i, x)| match x {
                    Value::String(s) => Ok(EmbedInput::Text(s)),
                    _ => Err(bad(&format!("input[{i}] is not a string"))),
                })
                .collect::<Result<_, _>>()?,
            Value::Number(_) => {
                vec![EmbedInput::Tokens(
                    tokens(&a).ok_or_else(|| bad("a token id is not a u32"))?,
                )]
            }
            Value::Array(_) => a
                .iter()
                .enumerate()
                .map(|(i, x)| {
                    x.as_array()
                        .and_then(|t| tokens(t))
                        .map(EmbedInput::Tokens)
                        .ok_or_else(|| bad(&format!("input[{i}] is not an array of token ids")))
                })
                .collect::<Result<_, _>>()?,
            _ => return Err(bad("its items are neither strings nor token ids")),
        },
        Some(_) => return Err(bad("it is neither")),
    })
}

pub(super) async fn embeddings(State(st): State<AppState>, body: Bytes) -> Response {
    match run(&st, &body).await {
        Ok(r) => r,
        Err(e) => fail(e),
    }
}

async fn run(st: &AppState, body: &[u8]) -> Result<Response, ApiError> {
    let req: Request = parse_body(body)?;
    let base64 = match req.encoding_format.as_deref() {
        None | Some("float") => false,
        Some("base64") => true,
        Some(other) => {
            let mut e = ApiError::bad_request(format!(
                "encoding_format must be \"float\" or \"base64\", not {other:?}"
            ));
            e.param = Some("encoding_format".into());
            return Err(e);
        }
    };
    let dimensions = match req.dimensions {
        None => None,
        Some(d) if d >= 1 => Some(d as usize),
        Some(d) => {
            let mut e = ApiError::bad_request(format!("dimensions must be at least 1, not {d}"));
            e.param = Some("dimensions".into());
            return Err(e);
        }
    };
    let out = st
        .runtime
        .embed(EmbedRequest {
            model: req.model,
            inputs: inputs(req.input)?,
            dimensions,
            ..Default::default()
        })
        .await?;
    let data: Vec<Value> = out
        .vectors
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let embedding = if base64 {
                let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                json!(base64::engine::general_purpose::STANDARD.encode(bytes))
            } else {
                json!(v)
            };
            json!({"object": "embedding", "index": i, "embedding": embedding})
        })
        .collect();
    Ok(json_response(
        StatusCode::OK,
        json!({
            "object": "list",
            "data": data,
            "model": out.model,
            "usage": {"prompt_tokens": out.prompt_tokens, "total_tokens": out.prompt_tokens},
        }),
    ))
}
