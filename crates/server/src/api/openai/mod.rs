//! The OpenAI shape: `POST /v1/chat/completions`, `POST /v1/completions`,
//! `GET /v1/models`. Requests become [`GenRequest`]s; events come back as OpenAI's
//! JSON or its SSE chunks (`data: {…}` … `data: [DONE]`).

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::api::image_links::parse_with_links;
use crate::api::image_wire::{self, Placed};
use crate::api::reasoning_wire::with_budget;
use crate::api::sampling::{with_sampling_knobs, StopField};
use crate::api::tool_wire::{function_tools, openai_choice, HistoryCall};
use crate::http::error::{ApiError, ApiErrorKind, ErrorShape};
use crate::http::stream::{self, Frames};
use crate::http::{json_response, parse_body, stream_response, AppState};
use crate::ids::unix_secs;
use llamay_runtime::ChatMessage;
use llamay_runtime::Surfaces;
use llamay_runtime::ThinkingAsk;
use llamay_runtime::{collect, Started};
use llamay_runtime::{GenEvent, GenRequest, Outcome, Prompt};
use llamay_runtime::{ToolCall, ToolSet};

/// The OpenAI routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/completions", post(completions))
        .route("/v1/models", get(models))
}

/// OpenAI's error body. A refused schema is an `invalid_request_error` like any other
/// bad request (what OpenAI's clients branch on), with `param` naming the field that
/// carried it and `code` saying why. A prompt past the context is OpenAI's
/// `context_length_exceeded`, in its wording: LiteLLM, LangChain and pydantic-ai
/// classify the error by those, and only then trim or fall back. The code is named in
/// the message too, because the openai SDK's exception text is the message alone and
/// LangChain looks for the code there.
pub(crate) fn error_body(e: &ApiError) -> Value {
    if let Some(o) = e.overflow {
        return json!({"error": {
            "message": format!(
                "This model's maximum context length is {} tokens. However, your messages \
                 resulted in {} tokens. Please reduce the length of the messages. \
                 (code: context_length_exceeded)",
                o.context, o.prompt
            ),
            "type": "invalid_request_error",
            "param": e.param.as_deref().unwrap_or("messages"),
            "code": "context_length_exceeded",
        }});
    }
    let kind = match e.kind {
        ApiErrorKind::InvalidRequest | ApiErrorKind::TooLarge => "invalid_request_error",
        ApiErrorKind::Authentication => "authentication_error",
        ApiErrorKind::Forbidden => "permission_error",
        ApiErrorKind::NotFound => "not_found_error",
        ApiErrorKind::Overloaded => "server_overloaded",
        ApiErrorKind::Timeout => "timeout",
        ApiErrorKind::Internal => "server_error",
    };
    let code = match e.kind {
        ApiErrorKind::NotFound if e.message.starts_with("model") => json!("model_not_found"),
        _ if e.refusal => json!("unsupported_schema"),
        _ => Value::Null,
    };
    json!({"error": {"message": e.message, "type": kind, "param": e.param, "code": code}})
}

pub(crate) fn fail(e: impl Into<ApiError>) -> Response {
    e.into().into_response_as(ErrorShape(error_body))
}

/// `finish_reason` in OpenAI's words: `tool_calls` when the model made calls.
fn chat_finish_reason(o: &Outcome) -> &'static str {
    if o.tool_calls.is_empty() {
        o.finish.stop_or_length()
    } else {
        "tool_calls"
    }
}

with_sampling_knobs! {
    #[derive(Deserialize)]
    struct ChatRequest {
        #[serde(default)]
        model: String,
        messages: Vec<Message>,
        max_tokens: Option<i64>,
        max_completion_tokens: Option<i64>,
        stop: Option<StopField>,
        stream: Option<bool>,
        stream_options: Option<StreamOptions>,
        n: Option<i64>,
        tools: Option<Value>,
        tool_choice: Option<Value>,
        parallel_tool_calls: Option<bool>,
        reasoning_effort: Option<String>,
        chat_template_kwargs: Option<serde_json::Map<String, Value>>,
        llamay_thinking_budget: Option<i64>,
        llamay_echo_prompt: Option<bool>,
        /// A named context the messages continue.
        llamay_context: Option<String>,
        #[serde(flatten)]
        constraint: ConstraintFields,
    }
}

/// The structured-output surfaces of the OpenAI routes.
#[derive(Deserialize, Default)]
struct ConstraintFields {
    response_format: Option<ResponseFormat>,
    llamay_schema: Option<Value>,
    llamay_format: Option<String>,
    llamay_grammar: Option<String>,
    grammar: Option<String>,
    llamay_sources: Option<Value>,
    #[serde(flatten)]
    exact: super::constraint_wire::ExactFields,
}

#[derive(Deserialize)]
struct ResponseFormat {
    #[serde(rename = "type")]
    kind: String,
    json_schema: Option<JsonSchemaFormat>,
}

#[derive(Deserialize)]
struct JsonSchemaFormat {
    schema: Option<Value>,
}

#[derive(Deserialize)]
struct StreamOptions {
    include_usage: Option<bool>,
}

impl StreamOptions {
    /// Whether a stream ends with a usage chunk (off unless asked for).
    fn include_usage(o: Option<StreamOptions>) -> bool {
        o.and_then(|o| o.include_usage).unwrap_or(false)
    }
}

#[derive(Deserialize)]
pub(crate) struct Message {
    role: String,
    content: Option<Content>,
    name: Option<String>,
    tool_call_id: Option<String>,
    tool_calls: Option<Vec<HistoryCall>>,
    /// An earlier assistant turn's reasoning, sent back (llama.cpp's and vLLM's name).
    reasoning_content: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Deserialize)]
struct ContentPart {
    #[serde(rename = "type")]
    kind: String,
    text: Option<String>,
    /// `{"url": …}` (or the URL itself, as some clients send it).
    image_url: Option<Value>,
}

impl ConstraintFields {
    fn surfaces(&self) -> Result<Surfaces, ApiError> {
        let mut s = Surfaces::default();
        if let Some(v) = &self.llamay_schema {
            s.schema("llamay_schema", v);
        }
        s.llamay_format(self.llamay_format.as_ref())?;
        match &self.response_format {
            None => {}
            Some(rf) => match rf.kind.as_str() {
                "text" => {}
                "json_object" => s.json = s.json.or(Some("response_format")),
                "json_schema" => match rf.json_schema.as_ref().and_then(|j| j.schema.as_ref()) {
                    Some(v) => s.schema("response_format", v),
                    None => {
                        return Err(ApiError::bad_request(
                            "response_format json_schema needs json_schema.schema",
                        ))
                    }
                },
                other => {
                    return Err(ApiError::bad_request(format!(
                    "response_format type {other:?} is not one of text, json_object, json_schema"
                )))
                }
            },
        }
        s.grammar_fields(self.llamay_grammar.as_ref(), self.grammar.as_ref());
        s.llamay_sources(self.llamay_sources.as_ref())?;
        self.exact.read(&mut s)?;
        Ok(s)
    }
}

/// A message's text and images (`image_url` parts, in order, each placed).
fn message_content(content: Option<Content>) -> Result<(Option<String>, Placed), ApiError> {
    Ok(match content {
        None => (None, Placed::default()),
        Some(Content::Text(t)) => (Some(t), Placed::default()),
        Some(Content::Parts(parts)) => {
            let mut out = String::new();
            let mut images = Placed::default();
            for p in parts {
                match (p.kind.as_str(), p.text, p.image_url) {
                    ("text", Some(t), _) => out.push_str(&t),
                    ("image_url", _, Some(u)) => {
                        let url = u.get("url").unwrap_or(&u).as_str().ok_or_else(|| {
                            ApiError::bad_request("image_url.url must be a string")
                        })?;
                        images.push(&out, image_wire::from_url(url, "image_url")?);
                    }
                    (kind, _, _) => {
                        return Err(ApiError::bad_request(format!(
                            "content parts of type {kind:?} are not supported; send text \
                             or image_url parts"
                        )))
                    }
                }
            }
            (Some(out), images)
        }
    })
}

pub(crate) fn chat_messages(messages: Vec<Message>) -> Result<Vec<ChatMessage>, ApiError> {
    if messages.is_empty() {
        return Err(ApiError::bad_request("messages must not be empty"));
    }
    messages
        .into_iter()
        .map(|m| {
            let role = match m.role.as_str() {
                "developer" => "system".to_string(),
                "system" | "user" | "assistant" | "tool" => m.role.clone(),
                other => {
                    return Err(ApiError::bad_request(format!(
                    "message role {other:?} is not one of system, developer, user, assistant, tool"
                )))
                }
            };
            let (content, images) = message_content(m.content)?;
            Ok(ChatMessage {
                role,
                content,
                images: images.images,
                image_at: images.at,
                name: m.name,
                tool_call_id: m.tool_call_id,
                thinking: m.reasoning_content,
                tool_calls: m
                    .tool_calls
                    .unwrap_or_default()
                    .into_iter()
                    .map(HistoryCall::into_message)
                    .collect(),
            })
        })
        .collect()
}

fn refuse_n(n: Option<i64>) -> Result<(), ApiError> {
    if n.is_some_and(|n| n != 1) {
        return Err(ApiError::bad_request(
            "n must be 1: llamay returns one choice",
        ));
    }
    Ok(())
}

async fn chat_completions(State(st): State<AppState>, body: Bytes) -> Response {
    chat_inner(&st, &body).await.unwrap_or_else(fail)
}

async fn chat_inner(st: &AppState, body: &[u8]) -> Result<Response, ApiError> {
    let r: ChatRequest = parse_with_links(st, body).await?;
    refuse_n(r.n)?;
    let mut surfaces = r.constraint.surfaces()?;
    let tools = ToolSet::new(
        function_tools(r.tools.as_ref())?,
        openai_choice(r.tool_choice.as_ref())?,
        r.parallel_tool_calls.unwrap_or(true),
    )?;
    let stop = r.stop.clone().map(StopField::into_vec).unwrap_or_default();
    let params = r
        .sampling(r.max_completion_tokens.or(r.max_tokens), stop)
        .into_params()?;
    let effort = match &r.reasoning_effort {
        Some(e) => ThinkingAsk::from_effort("reasoning_effort", e, params.max_tokens)?,
        None => ThinkingAsk::default(),
    };
    let thinking = with_budget(
        effort.or(ThinkingAsk::from_template_kwargs(
            r.chat_template_kwargs.as_ref(),
        )),
        r.llamay_thinking_budget,
    )?;
    let stream = r.stream.unwrap_or(false);
    let include_usage = StreamOptions::include_usage(r.stream_options);
    let prompt = Prompt::Chat(chat_messages(r.messages)?);
    surfaces.input(prompt.user_text());
    let mut req = GenRequest::new(r.model, prompt, params);
    req.constraint = surfaces;
    req.stream = stream;
    req.tools = tools;
    req.thinking = thinking;
    req.template_kwargs = r.chat_template_kwargs;
    req.echo_prompt = r.llamay_echo_prompt.unwrap_or(false);
    req.context = r.llamay_context;
    let started = st.runtime.start(req).await?;
    let id = crate::ids::response_id("chatcmpl-");
    if stream {
        return Ok(stream_chat(started, id, include_usage));
    }
    let model = started.model.clone();
    let created = unix_secs(started.created);
    let (text, outcome) = collect(started.events).await?;
    let mut message = json!({"role": "assistant", "content": text, "refusal": null});
    if !outcome.reasoning.is_empty() {
        message["reasoning_content"] = json!(outcome.reasoning);
    }
    if !outcome.tool_calls.is_empty() {
        if text.is_empty() {
            message["content"] = Value::Null;
        }
        message["tool_calls"] = tool_calls_json(&outcome.tool_calls, 0);
    }
    Ok(json_response(
        StatusCode::OK,
        json!({
            "id": id,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "system_fingerprint": "llamay",
            "choices": [{
                "index": 0,
                "message": message,
                "logprobs": null,
                "finish_reason": chat_finish_reason(&outcome),
            }],
            "usage": usage(&outcome),
            "llamay": outcome.llamay_json(),
        }),
    ))
}

/// Calls in OpenAI's shape, arguments as a JSON string.
/// A chunk whose delta is one piece of one call.
fn call_delta(chunk: &impl Fn(Value) -> Value, call: Value) -> Frames {
    Frames {
        bytes: vec![stream::sse(
            None,
            &chunk(
                json!([{"index": 0, "delta": {"tool_calls": [call]}, "logprobs": null, "finish_reason": null}]),
            ),
        )],
        end: false,
    }
}

/// OpenAI's `tool_calls`, from the `from`th call on.
fn tool_calls_json(calls: &[ToolCall], from: usize) -> Value {
    calls
        .iter()
        .enumerate()
        .skip(from)
        .map(|(i, c)| {
            json!({"index": i, "id": c.id, "type": "function",
                "function": {"name": c.name, "arguments": c.arguments_text()}})
        })
        .collect()
}

fn usage(o: &Outcome) -> Value {
    json!({
        "prompt_tokens": o.prompt_tokens,
        "completion_tokens": o.completion_tokens,
        "total_tokens": o.prompt_tokens + o.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": o.cached_tokens},
        "completion_tokens_details": {"reasoning_tokens": o.reasoning_tokens},
    })
}

fn stream_chat(started: Started, id: String, include_usage: bool) -> Response {
    let model = started.model.clone();
    let created = unix_secs(started.created);
    let chunk = move |choices: Value| {
        json!({
            "id": id, "object": "chat.completion.chunk", "created": created,
            "model": model, "system_fingerprint": "llamay", "choices": choices,
        })
    };
    let head = vec![stream::sse(
        None,
        &chunk(
            json!([{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": null, "finish_reason": null}]),
        ),
    )];
    // Calls already sent piece by piece; `Done` sends the rest whole.
    let mut streamed_calls = 0;
    let body = stream::body(started.events, head, move |ev| match ev {
        GenEvent::Reasoning(t) => Frames {
            bytes: vec![stream::sse(
                None,
                &chunk(
                    json!([{"index": 0, "delta": {"reasoning_content": t}, "logprobs": null, "finish_reason": null}]),
                ),
            )],
            end: false,
        },
        // OpenAI's form: the first delta of a call has its id, type and name, the
        // next ones more of its arguments.
        GenEvent::CallStart { index, id, name } => {
            streamed_calls = index + 1;
            call_delta(
                &chunk,
                json!({"index": index, "id": id, "type": "function",
                    "function": {"name": name, "arguments": ""}}),
            )
        }
        GenEvent::CallArgs { index, delta } => call_delta(
            &chunk,
            json!({"index": index, "function": {"arguments": delta}}),
        ),
        GenEvent::Text(t) => Frames {
            bytes: vec![stream::sse(
                None,
                &chunk(
                    json!([{"index": 0, "delta": {"content": t}, "logprobs": null, "finish_reason": null}]),
                ),
            )],
            end: false,
        },
        GenEvent::Done(o) => {
            let mut bytes = Vec::new();
            let unsent = tool_calls_json(&o.tool_calls, streamed_calls);
            if unsent.as_array().is_some_and(|a| !a.is_empty()) {
                // The calls not streamed go out whole, in one delta.
                bytes.push(stream::sse(
                    None,
                    &chunk(
                        json!([{"index": 0, "delta": {"tool_calls": unsent}, "logprobs": null, "finish_reason": null}]),
                    ),
                ));
            }
            let mut last = chunk(
                json!([{"index": 0, "delta": {}, "logprobs": null, "finish_reason": chat_finish_reason(&o)}]),
            );
            if include_usage {
                bytes.push(stream::sse(None, &last));
                last = chunk(json!([]));
                last["usage"] = usage(&o);
            }
            last["llamay"] = o.llamay_json();
            bytes.push(stream::sse(None, &last));
            bytes.push(Bytes::from_static(b"data: [DONE]\n\n"));
            Frames { bytes, end: true }
        }
        GenEvent::Error(e) => Frames {
            bytes: vec![stream::sse(None, &error_body(&e.into()))],
            end: true,
        },
    });
    stream_response("text/event-stream", body)
}

with_sampling_knobs! {
    #[derive(Deserialize)]
    struct CompletionRequest {
        #[serde(default)]
        model: String,
        prompt: PromptField,
        max_tokens: Option<i64>,
        stop: Option<StopField>,
        stream: Option<bool>,
        stream_options: Option<StreamOptions>,
        n: Option<i64>,
        tools: Option<Value>,
        /// A named context the prompt continues.
        llamay_context: Option<String>,
        #[serde(flatten)]
        constraint: ConstraintFields,
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum PromptField {
    One(String),
    Many(Vec<String>),
}

async fn completions(State(st): State<AppState>, body: Bytes) -> Response {
    completions_inner(&st, &body).await.unwrap_or_else(fail)
}

async fn completions_inner(st: &AppState, body: &[u8]) -> Result<Response, ApiError> {
    let r: CompletionRequest = parse_body(body)?;
    refuse_n(r.n)?;
    if r.tools
        .as_ref()
        .is_some_and(|t| !(t.is_null() || t.as_array().is_some_and(Vec::is_empty)))
    {
        return Err(ApiError::bad_request(
            "tools are offered on /v1/chat/completions, not on /v1/completions",
        ));
    }
    let stop = r.stop.clone().map(StopField::into_vec).unwrap_or_default();
    // The legacy route's default limit is OpenAI's: 16 tokens.
    let params = r
        .sampling(Some(r.max_tokens.unwrap_or(16)), stop)
        .into_params()?;
    let prompt = match r.prompt {
        PromptField::One(s) => s,
        PromptField::Many(mut v) if v.len() == 1 => v.remove(0),
        PromptField::Many(_) => {
            return Err(ApiError::bad_request(
                "prompt must be one string (batches of prompts are not supported)",
            ))
        }
    };
    let mut surfaces = r.constraint.surfaces()?;
    surfaces.input(prompt.clone());
    let stream = r.stream.unwrap_or(false);
    let include_usage = StreamOptions::include_usage(r.stream_options);
    let mut req = GenRequest::new(r.model, Prompt::Raw(prompt), params);
    req.constraint = surfaces;
    req.stream = stream;
    req.context = r.llamay_context;
    let started = st.runtime.start(req).await?;
    let id = crate::ids::response_id("cmpl-");
    let model = started.model.clone();
    let created = unix_secs(started.created);
    let chunk = move |choices: Value| json!({"id": id, "object": "text_completion", "created": created, "model": model, "choices": choices});
    if stream {
        let body = stream::body(started.events, Vec::new(), move |ev| match ev {
            // A completion has no thinking shown and no tools.
            GenEvent::Reasoning(_) | GenEvent::CallStart { .. } | GenEvent::CallArgs { .. } => {
                Frames {
                    bytes: Vec::new(),
                    end: false,
                }
            }
            GenEvent::Text(t) => Frames {
                bytes: vec![stream::sse(
                    None,
                    &chunk(
                        json!([{"index": 0, "text": t, "logprobs": null, "finish_reason": null}]),
                    ),
                )],
                end: false,
            },
            GenEvent::Done(o) => {
                let mut last = chunk(
                    json!([{"index": 0, "text": "", "logprobs": null, "finish_reason": o.finish.stop_or_length()}]),
                );
                if include_usage {
                    last["usage"] = usage(&o);
                }
                last["llamay"] = o.llamay_json();
                Frames {
                    bytes: vec![
                        stream::sse(None, &last),
                        Bytes::from_static(b"data: [DONE]\n\n"),
                    ],
                    end: true,
                }
            }
            GenEvent::Error(e) => Frames {
                bytes: vec![stream::sse(None, &error_body(&e.into()))],
                end: true,
            },
        });
        return Ok(stream_response("text/event-stream", body));
    }
    let (text, outcome) = collect(started.events).await?;
    let mut v = chunk(
        json!([{"index": 0, "text": text, "logprobs": null, "finish_reason": outcome.finish.stop_or_length()}]),
    );
    v["usage"] = usage(&outcome);
    v["llamay"] = outcome.llamay_json();
    Ok(json_response(StatusCode::OK, v))
}

async fn models(State(st): State<AppState>) -> Response {
    let mut data: Vec<Value> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    if let Some(d) = st.runtime.registry.default_model() {
        seen.insert(d.name.clone());
        let created = std::fs::metadata(&d.path)
            .and_then(|m| m.modified())
            .map(unix_secs)
            .unwrap_or(0);
        data.push(
            json!({"id": d.name, "object": "model", "created": created, "owned_by": "llamay"}),
        );
    }
    if let Some(store) = st.runtime.registry.store() {
        for e in store.list().unwrap_or_default() {
            let name = e.name.short();
            if seen.insert(name.clone()) {
                data.push(json!({"id": name, "object": "model", "created": unix_secs(e.modified), "owned_by": "llamay"}));
            }
        }
    }
    json_response(StatusCode::OK, json!({"object": "list", "data": data}))
}
