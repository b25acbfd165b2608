//! The Ollama generation routes: `/api/chat` and `/api/generate` (NDJSON
//! streaming by default), and the empty request that only loads or unloads a model.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::api::image_links::parse_with_links;
use crate::api::image_wire;
use crate::api::reasoning_wire::with_budget;
use crate::api::sampling::{with_sampling_knobs, StopField};
use crate::api::tool_wire::{function_tools, openai_choice, HistoryCall};
use crate::http::error::ApiError;
use crate::http::stream::{self, Frames};
use crate::http::{json_response, stream_response, AppState};
use llamay_runtime::collect;
use llamay_runtime::SamplingAsk;
use llamay_runtime::Surfaces;
use llamay_runtime::ThinkingAsk;
use llamay_runtime::{ChatMessage, ImageInput};
use llamay_runtime::{GenEvent, GenRequest, Outcome, Prompt};
use llamay_runtime::{ToolCall, ToolSet};

use super::wire::{error_body, fail, now_rfc3339};

with_sampling_knobs! {
    #[derive(Deserialize, Default)]
    struct Options {
        num_predict: Option<i64>,
        stop: Option<StopField>,
        /// llamay's extension (Ollama has no `tool_choice`; its SDK passes `options`
        /// through): OpenAI's values.
        tool_choice: Option<Value>,
    }
}

impl Options {
    fn sampling_ask(self) -> SamplingAsk {
        let stop = self
            .stop
            .clone()
            .map(StopField::into_vec)
            .unwrap_or_default();
        // Ollama's `num_predict`: -1 is no limit, -2 fills the context; both are as
        // many as the context allows.
        let limit = match self.num_predict {
            Some(-1 | -2) => Some(i64::MAX),
            n => n,
        };
        self.sampling(limit, stop)
    }
}

/// The tools of an `/api/chat` request. Ollama has no `tool_choice`: llamay reads
/// one (OpenAI's values) at the top level or in `options`; default auto. A forced
/// choice makes exactly one call on this route.
fn chat_tools(c: &mut Common) -> Result<Option<std::sync::Arc<ToolSet>>, ApiError> {
    let choice = c
        .tool_choice
        .take()
        .or_else(|| c.options.as_mut().and_then(|o| o.tool_choice.take()));
    Ok(ToolSet::new(
        function_tools(c.tools.as_ref())?,
        openai_choice(choice.as_ref())?,
        false,
    )?)
}

/// Calls in Ollama's shape, arguments as an object.
fn tool_calls_json(calls: &[ToolCall]) -> Value {
    calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            json!({"id": c.id, "function": {"index": i, "name": c.name, "arguments": c.arguments}})
        })
        .collect()
}

/// What the chat and generate routes share.
#[derive(Deserialize)]
struct Common {
    #[serde(default)]
    model: String,
    format: Option<Value>,
    options: Option<Options>,
    stream: Option<bool>,
    keep_alive: Option<Value>,
    tools: Option<Value>,
    tool_choice: Option<Value>,
    llamay_grammar: Option<String>,
    grammar: Option<String>,
    llamay_sources: Option<Value>,
    /// `true`/`false`, or gpt-oss's `"low"`/`"medium"`/`"high"`.
    think: Option<Value>,
    llamay_thinking_budget: Option<i64>,
    llamay_echo_prompt: Option<bool>,
    #[serde(flatten)]
    exact: crate::api::constraint_wire::ExactFields,
    /// A named context the prompt continues.
    llamay_context: Option<String>,
}

impl Common {
    /// Ollama's `think`, and llamay's budget.
    fn thinking(&self, max_tokens: usize) -> Result<ThinkingAsk, ApiError> {
        let ask = match &self.think {
            None | Some(Value::Null) => ThinkingAsk::default(),
            Some(Value::Bool(b)) => ThinkingAsk {
                enabled: Some(*b),
                budget: None,
                field: "think",
                effort: None,
            },
            Some(Value::String(level)) => ThinkingAsk::from_effort("think", level, max_tokens)?,
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "think must be true, false, \"low\", \"medium\" or \"high\", not {other}"
                )))
            }
        };
        Ok(with_budget(ask, self.llamay_thinking_budget)?)
    }

    fn surfaces(&self) -> Result<Surfaces, ApiError> {
        let mut s = Surfaces::default();
        match &self.format {
            None | Some(Value::Null) => {}
            Some(Value::String(f)) if f.is_empty() => {}
            Some(Value::String(f)) if f == "json" => s.json = Some("format"),
            Some(v @ Value::Object(_)) => s.schema("format", v),
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "format must be \"json\" or a JSON Schema object, not {other}"
                )))
            }
        }
        s.grammar_fields(self.llamay_grammar.as_ref(), self.grammar.as_ref());
        s.llamay_sources(self.llamay_sources.as_ref())?;
        self.exact.read(&mut s)?;
        Ok(s)
    }

    fn keep_alive(&self) -> Result<Option<Duration>, ApiError> {
        self.keep_alive.as_ref().map(parse_keep_alive).transpose()
    }
}

/// Ollama's `keep_alive`: seconds as a number, or a Go duration (`5m`, `1h30m`,
/// `10s`); a negative value keeps the model loaded.
pub(crate) fn parse_keep_alive(v: &Value) -> Result<Duration, ApiError> {
    const FOREVER: Duration = Duration::from_secs(100 * 365 * 86400);
    let bad = || ApiError::bad_request(format!("keep_alive {v} is not a duration"));
    match v {
        Value::Number(n) => {
            let s = n.as_f64().ok_or_else(bad)?;
            Ok(if s < 0.0 {
                FOREVER
            } else {
                Duration::from_secs_f64(s.min(FOREVER.as_secs_f64()))
            })
        }
        Value::String(s) => {
            let s = s.trim();
            if s.starts_with('-') {
                return Ok(FOREVER);
            }
            if let Ok(n) = s.parse::<f64>() {
                return parse_keep_alive(&json!(n));
            }
            let mut total = 0f64;
            let mut num = String::new();
            let mut chars = s.chars().peekable();
            while let Some(c) = chars.next() {
                if c.is_ascii_digit() || c == '.' {
                    num.push(c);
                    continue;
                }
                let mut unit = c.to_string();
                while let Some(&n) = chars.peek() {
                    if n.is_ascii_alphabetic() {
                        unit.push(n);
                        chars.next();
                    } else {
                        break;
                    }
                }
                let x: f64 = num.parse().map_err(|_| bad())?;
                num.clear();
                total += x * match unit.as_str() {
                    "ms" => 0.001,
                    "s" => 1.0,
                    "m" => 60.0,
                    "h" => 3600.0,
                    _ => return Err(bad()),
                };
            }
            if !num.is_empty() {
                return Err(bad());
            }
            Ok(Duration::from_secs_f64(total.min(FOREVER.as_secs_f64())))
        }
        _ => Err(bad()),
    }
}

#[derive(Deserialize)]
struct ChatRequest {
    #[serde(flatten)]
    common: Common,
    messages: Vec<Message>,
}

#[derive(Deserialize)]
struct Message {
    role: String,
    #[serde(default)]
    content: String,
    images: Option<Vec<Value>>,
    tool_calls: Option<Vec<HistoryCall>>,
    tool_name: Option<String>,
    tool_call_id: Option<String>,
    /// An earlier assistant turn's reasoning, sent back.
    thinking: Option<String>,
}

#[derive(Deserialize)]
struct GenerateRequest {
    #[serde(flatten)]
    common: Common,
    #[serde(default)]
    prompt: String,
    system: Option<String>,
    raw: Option<bool>,
    /// Base64 images for the prompt (read with the chat template, not `raw`).
    images: Option<Vec<Value>>,
}

/// Ollama's `images`: base64 strings.
fn ollama_images(images: Option<&[Value]>) -> Result<Vec<ImageInput>, ApiError> {
    images
        .unwrap_or_default()
        .iter()
        .map(|v| {
            let data = v
                .as_str()
                .ok_or_else(|| ApiError::bad_request("images must be base64 strings"))?;
            image_wire::from_base64(data, "images")
        })
        .collect()
}

/// The route a generation came from decides where its text goes.
#[derive(Clone, Copy)]
enum Route {
    Chat,
    Generate,
}

pub(super) async fn chat(State(st): State<AppState>, body: Bytes) -> Response {
    let mut r: ChatRequest = match parse_with_links(&st, &body).await {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    let tools = match chat_tools(&mut r.common) {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    let mut msgs = Vec::new();
    for m in r.messages {
        let images = match ollama_images(m.images.as_deref()) {
            Ok(i) => i,
            Err(e) => return fail(e),
        };
        if !matches!(m.role.as_str(), "system" | "user" | "assistant" | "tool") {
            return fail(ApiError::bad_request(format!(
                "message role {:?} is not one of system, user, assistant, tool",
                m.role
            )));
        }
        msgs.push(ChatMessage {
            role: m.role,
            content: Some(m.content),
            tool_calls: m
                .tool_calls
                .unwrap_or_default()
                .into_iter()
                .map(HistoryCall::into_message)
                .collect(),
            tool_call_id: m.tool_call_id,
            name: m.tool_name,
            thinking: m.thinking,
            images,
            // Ollama's images have no place in the text: before it, as Ollama puts them.
            image_at: Vec::new(),
        });
    }
    if msgs.is_empty() {
        // Ollama loads the model and answers at once.
        return load_only(&st, &r.common, Route::Chat).await;
    }
    run(&st, r.common, Prompt::Chat(msgs), Route::Chat, tools).await
}

pub(super) async fn generate(State(st): State<AppState>, body: Bytes) -> Response {
    let r: GenerateRequest = match parse_with_links(&st, &body).await {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    if r.common.tools.as_ref().is_some_and(|t| !t.is_null()) {
        return fail(ApiError::bad_request(
            "tools are offered on /api/chat, not on /api/generate",
        ));
    }
    if r.prompt.is_empty() {
        return load_only(&st, &r.common, Route::Generate).await;
    }
    let images = match ollama_images(r.images.as_deref()) {
        Ok(i) => i,
        Err(e) => return fail(e),
    };
    let prompt = if r.raw.unwrap_or(false) {
        if !images.is_empty() {
            return fail(ApiError::bad_request(
                "images are placed by the chat template: send them without raw",
            ));
        }
        Prompt::Raw(r.prompt)
    } else {
        let mut msgs = Vec::new();
        if let Some(s) = &r.system {
            msgs.push(ChatMessage::new("system", s));
        }
        msgs.push(ChatMessage {
            images,
            ..ChatMessage::new("user", &r.prompt)
        });
        Prompt::Chat(msgs)
    };
    run(&st, r.common, prompt, Route::Generate, None).await
}

async fn load_only(st: &AppState, c: &Common, route: Route) -> Response {
    let keep = match c.keep_alive() {
        Ok(k) => k,
        Err(e) => return fail(e),
    };
    match st.runtime.registry.get(&c.model, keep).await {
        Ok(e) => {
            if keep == Some(Duration::ZERO) {
                st.runtime.registry.unload(&e.spec.name);
            }
            let mut v = json!({"model": e.spec.name, "created_at": now_rfc3339(), "done": true,
                "done_reason": if keep == Some(Duration::ZERO) { "unload" } else { "load" }});
            match route {
                Route::Chat => v["message"] = json!({"role": "assistant", "content": ""}),
                Route::Generate => v["response"] = json!(""),
            }
            json_response(StatusCode::OK, v)
        }
        Err(e) => fail(e),
    }
}

async fn run(
    st: &AppState,
    c: Common,
    prompt: Prompt,
    route: Route,
    tools: Option<std::sync::Arc<ToolSet>>,
) -> Response {
    run_inner(st, c, prompt, route, tools)
        .await
        .unwrap_or_else(fail)
}

async fn run_inner(
    st: &AppState,
    mut c: Common,
    prompt: Prompt,
    route: Route,
    tools: Option<std::sync::Arc<ToolSet>>,
) -> Result<Response, ApiError> {
    let mut surfaces = c.surfaces()?;
    surfaces.input(prompt.user_text());
    // Ollama sends a call whole, in the message that ends the stream.
    surfaces.whole_tool_calls = true;
    let keep_alive = c.keep_alive()?;
    let stream = c.stream.unwrap_or(true);
    let params = c
        .options
        .take()
        .unwrap_or_default()
        .sampling_ask()
        .into_params()?;
    let thinking = c.thinking(params.max_tokens)?;
    let mut req = GenRequest::new(c.model, prompt, params);
    req.constraint = surfaces;
    req.stream = stream;
    req.keep_alive = keep_alive;
    req.tools = tools;
    req.thinking = thinking;
    req.echo_prompt = c.llamay_echo_prompt.unwrap_or(false);
    req.context = c.llamay_context;
    let started = st.runtime.start(req).await?;
    let model = started.model.clone();
    let piece = move |text: &str, thinking: &str, done: bool| {
        let mut v = json!({"model": model, "created_at": now_rfc3339()});
        match route {
            Route::Chat => {
                v["message"] = json!({"role": "assistant", "content": text});
                if !thinking.is_empty() {
                    v["message"]["thinking"] = json!(thinking);
                }
            }
            Route::Generate => {
                v["response"] = json!(text);
                if !thinking.is_empty() {
                    v["thinking"] = json!(thinking);
                }
            }
        }
        v["done"] = json!(done);
        v
    };
    if stream {
        let body = stream::body(started.events, Vec::new(), move |ev| match ev {
            GenEvent::Reasoning(t) => Frames {
                bytes: vec![stream::ndjson(&piece("", &t, false))],
                end: false,
            },
            GenEvent::Text(t) => Frames {
                bytes: vec![stream::ndjson(&piece(&t, "", false))],
                end: false,
            },
            GenEvent::Done(o) => {
                let mut bytes = Vec::new();
                if !o.tool_calls.is_empty() {
                    // The calls go out whole, on one line.
                    let mut calls = piece("", "", false);
                    calls["message"]["tool_calls"] = tool_calls_json(&o.tool_calls);
                    bytes.push(stream::ndjson(&calls));
                }
                let mut v = piece("", "", true);
                add_final(&mut v, &o);
                bytes.push(stream::ndjson(&v));
                Frames { bytes, end: true }
            }
            GenEvent::Error(e) => Frames {
                bytes: vec![stream::ndjson(&error_body(&e.into()))],
                end: true,
            },
            // Ollama's calls arrive whole (its requests ask for whole calls).
            GenEvent::CallStart { .. } | GenEvent::CallArgs { .. } => Frames {
                bytes: Vec::new(),
                end: false,
            },
        });
        return Ok(stream_response("application/x-ndjson", body));
    }
    let (text, o) = collect(started.events).await?;
    let mut v = piece(&text, &o.reasoning, true);
    if !o.tool_calls.is_empty() {
        v["message"]["tool_calls"] = tool_calls_json(&o.tool_calls);
    }
    add_final(&mut v, &o);
    Ok(json_response(StatusCode::OK, v))
}

fn add_final(v: &mut Value, o: &Outcome) {
    let ns = |d: Duration| d.as_nanos() as u64;
    v["done_reason"] = json!(o.finish.stop_or_length());
    v["total_duration"] = json!(ns(o.queue_time + o.prompt_time + o.decode_time));
    v["load_duration"] = json!(ns(o.queue_time));
    v["prompt_eval_count"] = json!(o.prompt_tokens);
    v["prompt_eval_duration"] = json!(ns(o.prompt_time));
    v["eval_count"] = json!(o.completion_tokens);
    v["eval_duration"] = json!(ns(o.decode_time));
    v["llamay"] = o.llamay_json();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keep_alive_reads_numbers_and_go_durations() {
        let d = |v: Value| parse_keep_alive(&v).map(|d| d.as_secs_f64());
        assert_eq!(d(json!("5m")).unwrap(), 300.0);
        assert_eq!(d(json!("1h30m")).unwrap(), 5400.0);
        assert_eq!(d(json!(10)).unwrap(), 10.0);
        assert_eq!(d(json!("0")).unwrap(), 0.0);
        assert!(d(json!("-1")).unwrap() > 1e9);
        assert!(d(json!("5x")).is_err());
        assert!(d(json!("5")).is_ok());
        assert!(d(json!([1])).is_err());
    }
}
