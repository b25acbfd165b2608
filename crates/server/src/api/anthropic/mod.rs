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

use crate::api::image_links::parse_with_links;
use crate::api::image_wire::{self, Placed};
use crate::api::reasoning_wire::with_budget;
use crate::http::error::{ApiError, ApiErrorKind, ErrorShape};
use crate::http::stream::{self, Frames};
use crate::http::{json_response, stream_response, AppState};
use llamay_runtime::Finish;
use llamay_runtime::SamplingAsk;
use llamay_runtime::Surfaces;
use llamay_runtime::ThinkingAsk;
use llamay_runtime::{collect, Started};
use llamay_runtime::{hosted_tool, ToolChoice, ToolDef, ToolSet};
use llamay_runtime::{ChatMessage, ImageInput};
use llamay_runtime::{GenEvent, GenRequest, Outcome, Prompt};
use llamay_runtime::{ToolCallFunction, ToolCallMessage};

/// The Anthropic route.
pub(crate) fn routes() -> Router<AppState> {
    Router::new().route("/v1/messages", post(messages))
}

/// Anthropic's error body: `{"type":"error","error":{"type":…,"message":…}}`.
pub(crate) fn error_body(e: &ApiError) -> Value {
    if let Some(o) = e.overflow {
        // Anthropic's own words for the case, which its clients match.
        let message = format!(
            "prompt is too long: {} tokens > {} maximum",
            o.prompt, o.context
        );
        return json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}});
    }
    let kind = match e.kind {
        ApiErrorKind::InvalidRequest => "invalid_request_error",
        ApiErrorKind::Authentication => "authentication_error",
        ApiErrorKind::Forbidden => "permission_error",
        ApiErrorKind::NotFound => "not_found_error",
        ApiErrorKind::TooLarge => "request_too_large",
        ApiErrorKind::Overloaded => "overloaded_error",
        ApiErrorKind::Timeout | ApiErrorKind::Internal => "api_error",
    };
    json!({"type": "error", "error": {"type": kind, "message": e.message}})
}

fn fail(e: impl Into<ApiError>) -> Response {
    e.into().into_response_as(ErrorShape(error_body))
}

/// `stop_reason`: `tool_use` when the model made calls.
fn stop_reason_of(o: &Outcome) -> &'static str {
    if o.tool_calls.is_empty() {
        stop_reason(o.finish)
    } else {
        "tool_use"
    }
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
    tools: Option<Vec<Tool>>,
    tool_choice: Option<AnthropicToolChoice>,
    llamay_schema: Option<Value>,
    llamay_format: Option<String>,
    llamay_grammar: Option<String>,
    grammar: Option<String>,
    llamay_sources: Option<Value>,
    #[serde(flatten)]
    exact: crate::api::constraint_wire::ExactFields,
    output_config: Option<OutputConfig>,
    /// The beta's spelling of `output_config.format`.
    output_format: Option<OutputFormat>,
    thinking: Option<Thinking>,
    llamay_thinking_budget: Option<i64>,
    llamay_echo_prompt: Option<bool>,
    /// `false`: no speculative drafts (the output is the same; only speed differs).
    llamay_speculate: Option<bool>,
    seed: Option<i64>,
    /// A named context the messages continue.
    llamay_context: Option<String>,
}

/// `{"type": "enabled", "budget_tokens": N}` or `{"type": "disabled"}`
/// (`adaptive`: enabled, the model's own budget).
#[derive(Deserialize)]
struct Thinking {
    #[serde(rename = "type")]
    kind: String,
    budget_tokens: Option<i64>,
}

impl Thinking {
    fn ask(t: Option<&Thinking>) -> Result<ThinkingAsk, ApiError> {
        let Some(t) = t else {
            return Ok(ThinkingAsk::default());
        };
        let (enabled, budget) = match (t.kind.as_str(), t.budget_tokens) {
            ("disabled", _) => (false, None),
            ("adaptive", _) | ("enabled", None) => (true, None),
            ("enabled", Some(b)) if b >= 1 => (true, Some(b as usize)),
            _ => {
                return Err(ApiError::bad_request(
                    "thinking must be {\"type\": \"enabled\", \"budget_tokens\": N} (N ≥ 1) \
                     or {\"type\": \"disabled\"}",
                ))
            }
        };
        Ok(ThinkingAsk {
            enabled: Some(enabled),
            budget,
            field: "thinking",
            effort: None,
        })
    }
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
    /// `tool_use`: the call's id, tool and arguments.
    id: Option<String>,
    name: Option<String>,
    input: Option<Value>,
    /// `tool_result`: the call answered and what the tool returned.
    tool_use_id: Option<String>,
    content: Option<Content>,
    /// `image`: `{"type": "base64", "media_type": …, "data": …}` (or a `url` source,
    /// which is not fetched).
    source: Option<Value>,
}

/// An `image` block's picture.
fn block_image(source: Option<&Value>) -> Result<ImageInput, ApiError> {
    let source = source.ok_or_else(|| ApiError::bad_request("an image block needs a source"))?;
    match source.get("type").and_then(Value::as_str) {
        Some("base64") => {
            let data = source.get("data").and_then(Value::as_str).ok_or_else(|| {
                ApiError::bad_request("an image block's base64 source needs data")
            })?;
            image_wire::from_base64(data, "image.source.data")
        }
        Some("url") => image_wire::from_url(
            source
                .get("url")
                .and_then(Value::as_str)
                .unwrap_or_default(),
            "image.source.url",
        ),
        other => Err(ApiError::bad_request(format!(
            "an image block's source type must be base64, not {other:?}"
        ))),
    }
}

#[derive(Deserialize)]
struct Tool {
    #[serde(rename = "type")]
    kind: Option<String>,
    name: Option<String>,
    description: Option<String>,
    input_schema: Option<Value>,
}

#[derive(Deserialize)]
struct AnthropicToolChoice {
    #[serde(rename = "type")]
    kind: String,
    name: Option<String>,
    disable_parallel_tool_use: Option<bool>,
}

/// Client tools only: a typed tool other than `custom` is one of Anthropic's
/// server tools (web search, code execution, computer use, bash, text editor…).
fn tool_set(
    tools: Option<Vec<Tool>>,
    choice: Option<AnthropicToolChoice>,
) -> Result<Option<std::sync::Arc<ToolSet>>, ApiError> {
    let defs = tools
        .unwrap_or_default()
        .into_iter()
        .map(|t| match t.kind.as_deref() {
            None | Some("custom") => {
                let name = t
                    .name
                    .ok_or_else(|| llamay_runtime::Error::bad_request("a tool needs a name"))?;
                ToolDef::new(&name, t.description, t.input_schema)
            }
            Some(kind) => Err(hosted_tool(kind)),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let parallel = !choice
        .as_ref()
        .and_then(|c| c.disable_parallel_tool_use)
        .unwrap_or(false);
    let choice = match choice {
        None => ToolChoice::Auto,
        Some(c) => match (c.kind.as_str(), c.name) {
            ("auto", _) => ToolChoice::Auto,
            ("any", _) => ToolChoice::Required,
            ("none", _) => ToolChoice::None,
            ("tool", Some(n)) => ToolChoice::Named(n),
            _ => {
                return Err(ApiError::bad_request(
                    "tool_choice must be {\"type\": \"auto\" | \"any\" | \"none\"} or \
                     {\"type\": \"tool\", \"name\": …}",
                ))
            }
        },
    };
    Ok(ToolSet::new(defs, choice, parallel)?)
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

/// One Anthropic message as chat turns: `tool_result` blocks become `tool` turns
/// (before the user's text, as Anthropic orders them), `tool_use` blocks become
/// the assistant turn's calls.
fn push_turns(chat: &mut Vec<ChatMessage>, role: &str, content: Content) -> Result<(), ApiError> {
    let blocks = match content {
        Content::Text(t) => {
            chat.push(ChatMessage::new(role, &t));
            return Ok(());
        }
        Content::Blocks(b) => b,
    };
    let mut text = String::new();
    let mut calls = Vec::new();
    let mut images = Placed::default();
    for b in blocks {
        match (role, b.kind.as_str()) {
            (_, "text") => text.push_str(b.text.as_deref().unwrap_or_default()),
            ("user", "image") => images.push(&text, block_image(b.source.as_ref())?),
            ("assistant", "tool_use") => calls.push(ToolCallMessage {
                id: b.id.unwrap_or_default(),
                kind: "function".into(),
                function: ToolCallFunction {
                    name: b
                        .name
                        .ok_or_else(|| ApiError::bad_request("a tool_use block needs a name"))?,
                    arguments: b.input.unwrap_or_else(|| json!({})),
                },
            }),
            ("user", "tool_result") => chat.push(ChatMessage {
                role: "tool".into(),
                content: Some(match b.content {
                    Some(c) => text_of(c)?,
                    None => String::new(),
                }),
                tool_call_id: b.tool_use_id,
                ..ChatMessage::default()
            }),
            (_, kind) => {
                return Err(ApiError::bad_request(format!(
                    "content blocks of type {kind:?} are not supported in a {role} message"
                )))
            }
        }
    }
    if !text.is_empty() || !calls.is_empty() || !images.images.is_empty() || role == "assistant" {
        chat.push(ChatMessage {
            role: role.into(),
            content: Some(text),
            tool_calls: calls,
            images: images.images,
            image_at: images.at,
            ..ChatMessage::default()
        });
    }
    Ok(())
}

async fn messages(State(st): State<AppState>, body: Bytes) -> Response {
    match messages_inner(&st, &body).await {
        Ok(r) => r,
        Err(e) => fail(e),
    }
}

async fn messages_inner(st: &AppState, body: &[u8]) -> Result<Response, ApiError> {
    let r: MessagesRequest = parse_with_links(st, body).await?;
    let tools = tool_set(r.tools, r.tool_choice)?;
    if r.max_tokens < 1 {
        return Err(ApiError::bad_request("max_tokens must be at least 1"));
    }
    let mut s = Surfaces::default();
    if let Some(v) = &r.llamay_schema {
        s.schema("llamay_schema", v);
    }
    let formats = [
        (
            "output_config.format",
            r.output_config.as_ref().and_then(|o| o.format.as_ref()),
        ),
        ("output_format", r.output_format.as_ref()),
    ];
    for (field, f) in formats {
        let Some(f) = f else { continue };
        match (f.kind.as_str(), &f.schema) {
            ("json_schema", Some(v)) => s.schema(field, v),
            _ => {
                return Err(ApiError::bad_request(format!(
                    "{field} must be {{\"type\":\"json_schema\",\"schema\":{{…}}}}"
                )))
            }
        }
    }
    s.llamay_format(r.llamay_format.as_ref())?;
    s.grammar_fields(r.llamay_grammar.as_ref(), r.grammar.as_ref());
    s.llamay_sources(r.llamay_sources.as_ref())?;
    r.exact.read(&mut s)?;
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
        push_turns(&mut chat, &m.role, m.content)?;
    }
    let prompt = Prompt::Chat(chat);
    s.input(prompt.user_text());
    let params = SamplingAsk {
        temperature: r.temperature,
        top_p: r.top_p,
        top_k: r.top_k,
        seed: r.seed,
        max_tokens: Some(r.max_tokens),
        stop: r.stop_sequences.unwrap_or_default(),
        speculate: r.llamay_speculate,
        ..SamplingAsk::default()
    }
    .into_params()?;
    let thinking = with_budget(
        Thinking::ask(r.thinking.as_ref())?,
        r.llamay_thinking_budget,
    )?;
    let stream = r.stream.unwrap_or(false);
    let with_tools = tools.is_some();
    let mut req = GenRequest::new(r.model, prompt, params);
    req.constraint = s;
    req.stream = stream;
    req.tools = tools;
    req.thinking = thinking;
    req.echo_prompt = r.llamay_echo_prompt.unwrap_or(false);
    req.context = r.llamay_context;
    let started = st.runtime.start(req).await?;
    let id = crate::ids::response_id("msg_");
    if stream {
        return Ok(stream_messages(started, id, with_tools));
    }
    let model = started.model.clone();
    let (text, o) = collect(started.events).await?;
    let mut content = Vec::new();
    if !o.reasoning.is_empty() {
        content.push(json!({"type": "thinking", "thinking": o.reasoning, "signature": ""}));
    }
    if !text.is_empty() || o.tool_calls.is_empty() {
        content.push(json!({"type": "text", "text": text}));
    }
    content.extend(o.tool_calls.iter().map(tool_use_block));
    Ok(json_response(
        StatusCode::OK,
        json!({
            "id": id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop_reason_of(&o),
            "stop_sequence": o.stop_sequence,
            "usage": usage(&o),
            "llamay": o.llamay_json(),
        }),
    ))
}

fn tool_use_block(c: &llamay_runtime::ToolCall) -> Value {
    json!({"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments})
}

/// `input_tokens` counts the whole prompt (as llamay has always reported it), of
/// which `cache_read_input_tokens` were read from the KV cache (a cached prefix or
/// the request's `llamay_context`); nothing is ever written to a cache on request.
fn usage(o: &Outcome) -> Value {
    json!({
        "input_tokens": o.prompt_tokens,
        "output_tokens": o.completion_tokens,
        "cache_read_input_tokens": o.cached_tokens,
        "cache_creation_input_tokens": 0,
    })
}

/// Anthropic's event sequence. Blocks open as their content comes: a `thinking`
/// block for a reasoning model's thinking, then the `text` block (with tools the
/// held text arrives whole), then each call as its own `tool_use` block with one
/// `input_json_delta`.
fn stream_messages(started: Started, id: String, with_tools: bool) -> Response {
    let mut head = vec![stream::sse(
        Some("message_start"),
        &json!({"type": "message_start", "message": {
            "id": id, "type": "message", "role": "assistant", "model": started.model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": started.prompt_tokens, "output_tokens": 0},
        }}),
    )];
    // Anthropic's order: the first block opens before the ping when it is known (the
    // thinking block, or text when no held tool call can come first).
    let mut blocks = Blocks::default();
    if started.thinks {
        head.extend(blocks.open(BlockKind::Thinking));
    } else if !with_tools {
        head.extend(blocks.open(BlockKind::Text));
    }
    head.push(stream::sse(Some("ping"), &json!({"type": "ping"})));
    // Calls already sent piece by piece; `Done` sends the rest whole.
    let mut streamed_calls = 0;
    let body = stream::body(started.events, head, move |ev| match ev {
        GenEvent::Reasoning(t) => {
            let mut bytes = blocks.open(BlockKind::Thinking);
            bytes.push(stream::sse(
                Some("content_block_delta"),
                &json!({"type": "content_block_delta", "index": blocks.index(),
                    "delta": {"type": "thinking_delta", "thinking": t}}),
            ));
            Frames { bytes, end: false }
        }
        GenEvent::Text(t) => {
            let mut bytes = blocks.open(BlockKind::Text);
            bytes.push(stream::sse(
                Some("content_block_delta"),
                &json!({"type": "content_block_delta", "index": blocks.index(), "delta": {"type": "text_delta", "text": t}}),
            ));
            Frames { bytes, end: false }
        }
        GenEvent::CallStart { index, id, name } => {
            streamed_calls = index + 1;
            Frames {
                bytes: blocks.open_tool(&id, &name),
                end: false,
            }
        }
        GenEvent::CallArgs { delta, .. } => Frames {
            bytes: vec![input_json_delta(blocks.index(), &delta)],
            end: false,
        },
        GenEvent::Done(o) => {
            let mut bytes = Vec::new();
            if o.tool_calls.is_empty() && blocks.texts == 0 {
                bytes.extend(blocks.open(BlockKind::Text));
            }
            // The calls not streamed go out whole.
            for c in o.tool_calls.iter().skip(streamed_calls) {
                bytes.extend(blocks.open_tool(&c.id, &c.name));
                bytes.push(input_json_delta(blocks.index(), &c.arguments_text()));
            }
            bytes.extend(blocks.close());
            bytes.push(stream::sse(
                Some("message_delta"),
                &json!({"type": "message_delta",
                    "delta": {"stop_reason": stop_reason_of(&o), "stop_sequence": o.stop_sequence},
                    "usage": {"output_tokens": o.completion_tokens},
                    "llamay": o.llamay_json()}),
            ));
            bytes.push(stream::sse(
                Some("message_stop"),
                &json!({"type": "message_stop"}),
            ));
            Frames { bytes, end: true }
        }
        GenEvent::Error(e) => Frames {
            bytes: vec![stream::sse(Some("error"), &error_body(&e.into()))],
            end: true,
        },
    });
    stream_response("text/event-stream", body)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum BlockKind {
    Thinking,
    Text,
    /// A `tool_use` block (each call its own).
    Tool,
}

/// The content block a stream has open, and the index the next one takes.
#[derive(Default)]
struct Blocks {
    open: Option<BlockKind>,
    next: usize,
    /// Text blocks opened so far.
    texts: usize,
}

impl Blocks {
    /// The index of the open block.
    fn index(&self) -> usize {
        self.next.saturating_sub(1)
    }

    /// Opens a block of `kind` unless it is the open one (closing the other).
    fn open(&mut self, kind: BlockKind) -> Vec<Bytes> {
        if self.open == Some(kind) {
            return Vec::new();
        }
        let mut bytes = self.close();
        let index = self.next;
        self.next += 1;
        self.open = Some(kind);
        bytes.push(match kind {
            BlockKind::Text => {
                self.texts += 1;
                text_block_start(index)
            }
            BlockKind::Thinking => stream::sse(
                Some("content_block_start"),
                &json!({"type": "content_block_start", "index": index,
                    "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
            ),
            // A call's block starts with its id and name: `open_tool`.
            BlockKind::Tool => return bytes,
        });
        bytes
    }

    /// Opens a `tool_use` block for a call (closing the open block); its input
    /// follows as `input_json_delta`s.
    fn open_tool(&mut self, id: &str, name: &str) -> Vec<Bytes> {
        let mut bytes = self.close();
        let index = self.next;
        self.next += 1;
        self.open = Some(BlockKind::Tool);
        bytes.push(stream::sse(
            Some("content_block_start"),
            &json!({"type": "content_block_start", "index": index,
                "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
        ));
        bytes
    }

    /// Closes the open block, if any (a thinking block with its empty signature).
    fn close(&mut self) -> Vec<Bytes> {
        let mut bytes = Vec::new();
        if let Some(kind) = self.open.take() {
            let index = self.index();
            if kind == BlockKind::Thinking {
                bytes.push(stream::sse(
                    Some("content_block_delta"),
                    &json!({"type": "content_block_delta", "index": index,
                        "delta": {"type": "signature_delta", "signature": ""}}),
                ));
            }
            bytes.push(block_stop(index));
        }
        bytes
    }
}

fn text_block_start(index: usize) -> Bytes {
    stream::sse(
        Some("content_block_start"),
        &json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
    )
}

fn input_json_delta(index: usize, partial: &str) -> Bytes {
    stream::sse(
        Some("content_block_delta"),
        &json!({"type": "content_block_delta", "index": index,
            "delta": {"type": "input_json_delta", "partial_json": partial}}),
    )
}

fn block_stop(index: usize) -> Bytes {
    stream::sse(
        Some("content_block_stop"),
        &json!({"type": "content_block_stop", "index": index}),
    )
}
