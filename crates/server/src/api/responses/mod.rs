//! OpenAI's Responses API: `POST /v1/responses`, `GET /v1/responses/{id}`,
//! `DELETE /v1/responses/{id}`. A request becomes a [`GenRequest`] like a chat
//! completion (the same constraint surfaces, the same tool core: forced choices are
//! enforced exactly as on chat), and comes back as output items, or as the
//! Responses event stream. Responses are kept (unless `store: false`) for
//! `previous_response_id`, in the server's bounded, expiring store.

mod output;
mod request;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};

use crate::api::image_links::parse_with_links;
use crate::api::reasoning_wire::with_budget;
use crate::http::error::{ApiError, ErrorShape};
use crate::http::stream::{self, Frames};
use crate::http::{json_response, stream_response, AppState};
use crate::ids::{response_id, unix_secs};
use crate::kept::Kept;
use llamay_runtime::ThinkingAsk;
use llamay_runtime::ToolSet;
use llamay_runtime::{collect, Finish, GenEvent, GenRequest, Outcome, Prompt};
use llamay_runtime::{ChatMessage, ToolCallFunction, ToolCallMessage};

use output::Draft;
use request::CreateRequest;

/// The Responses routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/responses", post(create))
        .route("/v1/responses/{id}", get(fetch).delete(remove))
}

fn fail(e: impl Into<ApiError>) -> Response {
    e.into().into_response_as(ErrorShape(error_body))
}

/// OpenAI's error body, in the Responses API's words for a prompt past the context.
fn error_body(e: &ApiError) -> Value {
    let mut v = crate::api::openai::error_body(e);
    if let Some(o) = e.overflow {
        v["error"]["message"] = json!(format!(
            "Your input exceeds the context window of this model ({} tokens; the context \
             holds {}). Please adjust your input and try again.",
            o.prompt, o.context
        ));
        v["error"]["param"] = json!("input");
    }
    v
}

/// What a response object repeats of its request, and where it goes when done.
#[derive(Clone)]
struct Echo {
    id: String,
    created_at: u64,
    model: String,
    fields: Value,
    store: bool,
    /// The turns before this response's output (instructions excluded: they are
    /// not carried over).
    conversation: Vec<ChatMessage>,
}

impl Echo {
    fn object(&self, status: &str, output: &[Value], o: Option<&Outcome>) -> Value {
        let mut v = self.fields.clone();
        v["id"] = json!(self.id);
        v["object"] = json!("response");
        v["created_at"] = json!(self.created_at);
        v["model"] = json!(self.model);
        v["status"] = json!(status);
        v["output"] = json!(output);
        v["error"] = Value::Null;
        v["incomplete_details"] = match status {
            "incomplete" => json!({"reason": "max_output_tokens"}),
            _ => Value::Null,
        };
        v["usage"] = o.map_or(Value::Null, usage);
        if let Some(o) = o {
            v["llamay"] = o.llamay_json();
        }
        v
    }

    /// Keeps a finished response (unless `store: false`).
    fn keep(&self, st: &AppState, response: &Value, text: &str, o: &Outcome) {
        if !self.store {
            return;
        }
        let mut conversation = self.conversation.clone();
        conversation.push(ChatMessage {
            role: "assistant".into(),
            content: Some(text.to_string()),
            tool_calls: o
                .tool_calls
                .iter()
                .map(|c| ToolCallMessage {
                    id: c.id.clone(),
                    kind: "function".into(),
                    function: ToolCallFunction {
                        name: c.name.clone(),
                        arguments: c.arguments.clone(),
                    },
                })
                .collect(),
            ..ChatMessage::default()
        });
        st.kept.put(
            self.id.clone(),
            Kept {
                response: response.clone(),
                conversation,
            },
        );
    }
}

fn usage(o: &Outcome) -> Value {
    json!({
        "input_tokens": o.prompt_tokens,
        "input_tokens_details": {"cached_tokens": o.cached_tokens},
        "output_tokens": o.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": o.reasoning_tokens},
        "total_tokens": o.prompt_tokens + o.completion_tokens,
    })
}

/// `completed`, or `incomplete` when the token limit cut the output.
fn status_of(o: &Outcome) -> &'static str {
    match o.finish {
        Finish::Length => "incomplete",
        _ => "completed",
    }
}

async fn create(State(st): State<AppState>, body: Bytes) -> Response {
    create_inner(&st, &body).await.unwrap_or_else(fail)
}

async fn create_inner(st: &AppState, body: &[u8]) -> Result<Response, ApiError> {
    let r: CreateRequest = parse_with_links(st, body).await?;
    let mut surfaces = r.surfaces()?;
    let choice = request::tool_choice(r.tool_choice.as_ref())?;
    let parallel = r.parallel_tool_calls.unwrap_or(true);
    let tools = ToolSet::new(request::tools(r.tools.as_ref())?, choice, parallel)?;
    let params = r.sampling_ask(r.max_output_tokens).into_params()?;
    let effort = r.reasoning.as_ref().and_then(|x| x.effort.as_deref());
    let thinking = with_budget(
        match effort {
            Some(e) => ThinkingAsk::from_effort("reasoning.effort", e, params.max_tokens)?,
            None => ThinkingAsk::default(),
        },
        r.llamay_thinking_budget,
    )?;
    let earlier = match &r.previous_response_id {
        None => Vec::new(),
        Some(id) => {
            st.kept
                .get(id)
                .ok_or_else(|| {
                    ApiError::not_found(format!(
                        "previous_response_id {id:?} is not a kept response (never stored, \
                         deleted, or past its time)"
                    ))
                })?
                .conversation
        }
    };
    let conversation = request::turns(r.input.as_ref(), earlier)?;
    if conversation.is_empty() {
        return Err(ApiError::bad_request("input must not be empty"));
    }
    let mut chat = Vec::with_capacity(conversation.len() + 1);
    if let Some(i) = &r.instructions {
        chat.push(ChatMessage::new("system", i));
    }
    chat.extend(conversation.iter().cloned());
    let prompt = Prompt::Chat(chat);
    surfaces.input(prompt.user_text());
    let stream = r.stream.unwrap_or(false);
    let fields = json!({
        "instructions": r.instructions,
        "max_output_tokens": r.max_output_tokens,
        "parallel_tool_calls": parallel,
        "previous_response_id": r.previous_response_id,
        "temperature": r.temperature,
        "top_p": r.top_p,
        "tool_choice": r.tool_choice.clone().unwrap_or(json!("auto")),
        "tools": r.tools.clone().unwrap_or_default(),
        "text": {"format": r.text.as_ref().and_then(|t| t.format.clone()).unwrap_or(json!({"type": "text"}))},
        "reasoning": {"effort": effort, "summary": null},
        "store": r.store.unwrap_or(true),
        "metadata": r.metadata.clone().unwrap_or(json!({})),
        "truncation": "disabled",
    });
    let mut req = GenRequest::new(r.model, prompt, params);
    req.constraint = surfaces;
    req.stream = stream;
    req.tools = tools;
    req.thinking = thinking;
    req.echo_prompt = r.llamay_echo_prompt.unwrap_or(false);
    req.context = r.llamay_context.clone();
    let started = st.runtime.start(req).await?;
    let echo = Echo {
        id: response_id("resp_"),
        created_at: unix_secs(started.created),
        model: started.model.clone(),
        fields,
        store: r.store.unwrap_or(true),
        conversation,
    };
    if stream {
        return Ok(stream_response_events(st.clone(), echo, started.events));
    }
    let (text, o) = collect(started.events).await?;
    let mut d = Draft::default();
    if !o.reasoning.is_empty() {
        d.reasoning(&o.reasoning);
    }
    if !text.is_empty() {
        d.text(&text);
    }
    d.finish(&o.tool_calls, status_of(&o));
    let v = echo.object(status_of(&o), &d.items, Some(&o));
    echo.keep(st, &v, &text, &o);
    Ok(json_response(StatusCode::OK, v))
}

/// The Responses event stream: `response.created`, `response.in_progress`, the
/// items' events, then `response.completed` (or `.incomplete`, or `.failed`).
fn stream_response_events(
    st: AppState,
    echo: Echo,
    events: tokio::sync::mpsc::UnboundedReceiver<GenEvent>,
) -> Response {
    let mut d = Draft::default();
    let snapshot = echo.object("in_progress", &[], None);
    d.event("response.created", json!({"response": snapshot}));
    d.event("response.in_progress", json!({"response": snapshot}));
    let sse = |evs: Vec<Value>| -> Vec<Bytes> {
        evs.iter()
            .map(|e| stream::sse(e["type"].as_str(), e))
            .collect()
    };
    let head = sse(std::mem::take(&mut d.events));
    let mut text = String::new();
    let body = stream::body(events, head, move |ev| {
        let end = match ev {
            GenEvent::Reasoning(t) => {
                d.reasoning(&t);
                false
            }
            GenEvent::Text(t) => {
                text.push_str(&t);
                d.text(&t);
                false
            }
            GenEvent::CallStart { id, name, .. } => {
                d.call_start(&id, &name);
                false
            }
            GenEvent::CallArgs { delta, .. } => {
                d.call_args(&delta);
                false
            }
            GenEvent::Done(o) => {
                let status = status_of(&o);
                d.finish(&o.tool_calls, status);
                let v = echo.object(status, &d.items, Some(&o));
                echo.keep(&st, &v, &text, &o);
                let kind = match status {
                    "incomplete" => "response.incomplete",
                    _ => "response.completed",
                };
                d.event(kind, json!({"response": v}));
                true
            }
            GenEvent::Error(e) => {
                let e: ApiError = e.into();
                let mut v = echo.object("failed", &d.items, None);
                v["error"] = json!({"code": "server_error", "message": e.message});
                d.event("response.failed", json!({"response": v}));
                true
            }
        };
        Frames {
            bytes: sse(std::mem::take(&mut d.events)),
            end,
        }
    });
    stream_response("text/event-stream", body)
}

async fn fetch(State(st): State<AppState>, Path(id): Path<String>) -> Response {
    match st.kept.get(&id) {
        Some(k) => json_response(StatusCode::OK, k.response),
        None => fail(not_kept(&id)),
    }
}

async fn remove(State(st): State<AppState>, Path(id): Path<String>) -> Response {
    if st.kept.remove(&id) {
        json_response(
            StatusCode::OK,
            json!({"id": id, "object": "response.deleted", "deleted": true}),
        )
    } else {
        fail(not_kept(&id))
    }
}

fn not_kept(id: &str) -> ApiError {
    ApiError::not_found(format!("response {id:?} is not kept"))
}
