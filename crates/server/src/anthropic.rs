//! The Anthropic shape: `POST /v1/messages`, with its SSE event sequence
//! (`message_start`, `content_block_start`, `content_block_delta`…,
//! `content_block_stop`, `message_delta`, `message_stop`).

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::app::{json_response, parse_body, stream_response, AppState};
use crate::chat::ChatMessage;
use crate::constraint_spec::Surfaces;
use crate::error::{ApiError, ErrorKind, ErrorShape};
use crate::generate::Finish;
use crate::params::Sampling;
use crate::request::has_tools;
use crate::request::{GenEvent, GenRequest, Outcome, Prompt};
use crate::service::{collect, start, Started};
use crate::stream::{self, Frames};

/// The Anthropic route.
pub fn routes() -> Router<AppState> {
    Router::new().route("/v1/messages", post(messages))
}

/// Anthropic's error body: `{"type":"error","error":{"type":…,"message":…}}`.
pub fn error_body(e: &ApiError) -> Value {
    let kind = match e.kind {
        ErrorKind::InvalidRequest => "invalid_request_error",
        ErrorKind::Authentication => "authentication_error",
        ErrorKind::NotFound => "not_found_error",
        ErrorKind::TooLarge => "request_too_large",
        ErrorKind::Overloaded => "overloaded_error",
        ErrorKind::Timeout | ErrorKind::Internal => "api_error",
    };
    json!({"type": "error", "error": {"type": kind, "message": e.message}})
}

fn fail(e: ApiError) -> Response {
    e.into_response_as(ErrorShape(error_body))
}

fn stop_reason(f: Finish) -> &'static str {
    match f {
        Finish::Length => "max_tokens",
        Finish::Stop => "stop_sequence",
        Finish::Eog | Finish::Grammar | Finish::Cancelled => "end_turn",
    }
}

#[derive(Deserialize)]
struct MessagesRequest {
    #[serde(default)]
    model: String,
    messages: Vec<Message>,
    system: Option<Content>,
    max_tokens: i64,
    temperature: Option<f64>,
    top_p: Option<f64>,
    top_k: Option<i64>,
    stop_sequences: Option<Vec<String>>,
    stream: Option<bool>,
    tools: Option<Value>,
    llamay_schema: Option<Value>,
    llamay_format: Option<String>,
    llamay_grammar: Option<String>,
    grammar: Option<String>,
    output_config: Option<OutputConfig>,
    seed: Option<i64>,
}

#[derive(Deserialize)]
struct OutputConfig {
    format: Option<OutputFormat>,
}

#[derive(Deserialize)]
struct OutputFormat {
    #[serde(rename = "type")]
    kind: String,
    schema: Option<Value>,
}

#[derive(Deserialize)]
struct Message {
    role: String,
    content: Content,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Blocks(Vec<Block>),
}

#[derive(Deserialize)]
struct Block {
    #[serde(rename = "type")]
    kind: String,
    text: Option<String>,
}

fn text_of(c: Content) -> Result<String, ApiError> {
    match c {
        Content::Text(t) => Ok(t),
        Content::Blocks(blocks) => {
            let mut out = String::new();
            for b in blocks {
                match (b.kind.as_str(), b.text) {
                    ("text", Some(t)) => out.push_str(&t),
                    (kind, _) => {
                        return Err(ApiError::bad_request(format!(
                            "content blocks of type {kind:?} are not supported; send text"
                        )))
                    }
                }
            }
            Ok(out)
        }
    }
}

async fn messages(State(st): State<AppState>, body: Bytes) -> Response {
    match messages_inner(&st, &body).await {
        Ok(r) => r,
        Err(e) => fail(e),
    }
}

async fn messages_inner(st: &AppState, body: &[u8]) -> Result<Response, ApiError> {
    let r: MessagesRequest = parse_body(body)?;
    if r.tools.as_ref().is_some_and(has_tools) {
        return Err(ApiError::bad_request("tools are not supported yet"));
    }
    if r.max_tokens < 1 {
        return Err(ApiError::bad_request("max_tokens must be at least 1"));
    }
    let mut s = Surfaces::default();
    if let Some(v) = &r.llamay_schema {
        s.schema("llamay_schema", v);
    }
    if let Some(f) = r.output_config.as_ref().and_then(|o| o.format.as_ref()) {
        match (f.kind.as_str(), &f.schema) {
            ("json_schema", Some(v)) => s.schema("output_config.format", v),
            _ => {
                return Err(ApiError::bad_request(
                    "output_config.format must be {\"type\":\"json_schema\",\"schema\":{…}}",
                ))
            }
        }
    }
    if let Some(f) = &r.llamay_format {
        if f != "json" {
            return Err(ApiError::bad_request(format!(
                "llamay_format must be \"json\", not {f:?}"
            )));
        }
        s.json = Some("llamay_format");
    }
    s.grammar = match (&r.llamay_grammar, &r.grammar) {
        (Some(g), _) => Some(("llamay_grammar", g.as_str())),
        (None, Some(g)) => Some(("grammar", g.as_str())),
        (None, None) => None,
    };
    let constraint = s.resolve()?;
    if r.messages.is_empty() {
        return Err(ApiError::bad_request("messages must not be empty"));
    }
    let mut chat = Vec::new();
    if let Some(sys) = r.system {
        chat.push(ChatMessage::new("system", &text_of(sys)?));
    }
    for m in r.messages {
        if m.role != "user" && m.role != "assistant" {
            return Err(ApiError::bad_request(format!(
                "message role {:?} must be user or assistant",
                m.role
            )));
        }
        chat.push(ChatMessage::new(&m.role, &text_of(m.content)?));
    }
    let params = Sampling {
        temperature: r.temperature,
        top_p: r.top_p,
        top_k: r.top_k,
        seed: r.seed,
        max_tokens: Some(r.max_tokens),
        stop: r.stop_sequences.unwrap_or_default(),
        ..Sampling::default()
    }
    .into_params()?;
    let stream = r.stream.unwrap_or(false);
    let started = start(
        st,
        GenRequest {
            model: r.model,
            prompt: Prompt::Chat(chat),
            params,
            constraint,
            stream,
            keep_alive: None,
        },
    )
    .await?;
    let id = format!("msg_{}", crate::openai::short_id());
    if stream {
        return Ok(stream_messages(started, id));
    }
    let model = started.model.clone();
    let (text, o) = collect(started.events).await?;
    Ok(json_response(
        StatusCode::OK,
        json!({
            "id": id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": stop_reason(o.finish),
            "stop_sequence": o.stop_sequence,
            "usage": usage(&o),
            "llamay": o.llamay_json(),
        }),
    ))
}

fn usage(o: &Outcome) -> Value {
    json!({"input_tokens": o.prompt_tokens, "output_tokens": o.completion_tokens})
}

fn stream_messages(started: Started, id: String) -> Response {
    let head = vec![
        stream::sse(
            Some("message_start"),
            &json!({"type": "message_start", "message": {
                "id": id, "type": "message", "role": "assistant", "model": started.model,
                "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": started.prompt_tokens, "output_tokens": 0},
            }}),
        ),
        stream::sse(
            Some("content_block_start"),
            &json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        stream::sse(Some("ping"), &json!({"type": "ping"})),
    ];
    let body = stream::body(started.events, head, |ev| match ev {
        GenEvent::Text(t) => Frames {
            bytes: vec![stream::sse(
                Some("content_block_delta"),
                &json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}}),
            )],
            end: false,
        },
        GenEvent::Done(o) => Frames {
            bytes: vec![
                stream::sse(
                    Some("content_block_stop"),
                    &json!({"type": "content_block_stop", "index": 0}),
                ),
                stream::sse(
                    Some("message_delta"),
                    &json!({"type": "message_delta",
                        "delta": {"stop_reason": stop_reason(o.finish), "stop_sequence": o.stop_sequence},
                        "usage": {"output_tokens": o.completion_tokens},
                        "llamay": o.llamay_json()}),
                ),
                stream::sse(Some("message_stop"), &json!({"type": "message_stop"})),
            ],
            end: true,
        },
        GenEvent::Error(e) => Frames {
            bytes: vec![stream::sse(Some("error"), &error_body(&e))],
            end: true,
        },
    });
    stream_response("text/event-stream", body)
}
