//! The Responses request: `input` (a string or items), `instructions`, `text.format`,
//! flat function tools and their `tool_choice`, `reasoning`, sampling.

use serde::Deserialize;
use serde_json::Value;

use crate::api::image_wire::{self, Placed};
use crate::api::sampling::with_sampling_knobs;
use crate::api::tool_wire::{arguments_value, openai_choice};
use crate::http::error::ApiError;
use llamay_runtime::Surfaces;
use llamay_runtime::{hosted_tool, ToolChoice, ToolDef};
use llamay_runtime::{ChatMessage, ToolCallFunction, ToolCallMessage};

with_sampling_knobs! {
    #[derive(Deserialize)]
    pub(super) struct CreateRequest {
        #[serde(default)]
        pub model: String,
        pub input: Option<Value>,
        pub instructions: Option<String>,
        pub max_output_tokens: Option<i64>,
        pub stream: Option<bool>,
        pub text: Option<TextConfig>,
        pub tools: Option<Vec<Value>>,
        pub tool_choice: Option<Value>,
        pub parallel_tool_calls: Option<bool>,
        pub previous_response_id: Option<String>,
        pub store: Option<bool>,
        pub reasoning: Option<ReasoningConfig>,
        pub metadata: Option<Value>,
        pub llamay_schema: Option<Value>,
        pub llamay_format: Option<String>,
        pub llamay_grammar: Option<String>,
        pub grammar: Option<String>,
        pub llamay_sources: Option<Value>,
        pub llamay_thinking_budget: Option<i64>,
        pub llamay_echo_prompt: Option<bool>,
        #[serde(flatten)]
        pub exact: crate::api::constraint_wire::ExactFields,
        /// A named context the input continues.
        pub llamay_context: Option<String>,
    }
}

impl CreateRequest {
    /// The sampling as asked (the macro's method, reachable from the parent module).
    pub(super) fn sampling_ask(&self, max_tokens: Option<i64>) -> llamay_runtime::SamplingAsk {
        self.sampling(max_tokens, Vec::new())
    }
}

#[derive(Deserialize)]
pub(super) struct TextConfig {
    pub format: Option<Value>,
}

#[derive(Deserialize)]
pub(super) struct ReasoningConfig {
    pub effort: Option<String>,
}

impl CreateRequest {
    /// `text.format` and llamay's own surfaces.
    pub(super) fn surfaces(&self) -> Result<Surfaces, ApiError> {
        let mut s = Surfaces::default();
        if let Some(v) = &self.llamay_schema {
            s.schema("llamay_schema", v);
        }
        s.llamay_format(self.llamay_format.as_ref())?;
        s.llamay_sources(self.llamay_sources.as_ref())?;
        if let Some(f) = self.text.as_ref().and_then(|t| t.format.as_ref()) {
            match f.get("type").and_then(Value::as_str) {
                Some("text") => {}
                Some("json_object") => s.json = s.json.or(Some("text.format")),
                Some("json_schema") => match f.get("schema") {
                    Some(v) => s.schema("text.format", v),
                    None => {
                        return Err(ApiError::bad_request(
                            "text.format json_schema needs a schema",
                        ))
                    }
                },
                other => {
                    return Err(ApiError::bad_request(format!(
                        "text.format type {} is not one of text, json_object, json_schema",
                        other.map_or("(none)".to_string(), |o| format!("{o:?}"))
                    )))
                }
            }
        }
        s.grammar_fields(self.llamay_grammar.as_ref(), self.grammar.as_ref());
        self.exact.read(&mut s)?;
        Ok(s)
    }
}

/// The Responses tools: `{"type": "function", "name", "description", "parameters",
/// "strict"}`, flat; every other type is a hosted tool, refused by name.
pub(super) fn tools(v: Option<&Vec<Value>>) -> Result<Vec<ToolDef>, ApiError> {
    v.map(|items| {
        items
            .iter()
            .map(|t| {
                let kind = t.get("type").and_then(Value::as_str).unwrap_or("function");
                if kind != "function" {
                    return Err(hosted_tool(kind).into());
                }
                let name = t
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| ApiError::bad_request("a function tool needs a name"))?;
                let description = t
                    .get("description")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                Ok(ToolDef::new(
                    name,
                    description,
                    t.get("parameters").cloned(),
                )?)
            })
            .collect()
    })
    .unwrap_or(Ok(Vec::new()))
}

/// The Responses `tool_choice`: the chat route's strings, or `{"type": "function",
/// "name": …}` (the name at the top level).
pub(super) fn tool_choice(v: Option<&Value>) -> Result<ToolChoice, ApiError> {
    if let Some(o @ Value::Object(_)) = v {
        if o.get("type").and_then(Value::as_str) == Some("function") {
            return match o.get("name").and_then(Value::as_str) {
                Some(n) => Ok(ToolChoice::Named(n.to_string())),
                None => Err(ApiError::bad_request(
                    "tool_choice {\"type\": \"function\"} needs a name",
                )),
            };
        }
    }
    Ok(openai_choice(v)?)
}

/// `input` as chat turns after `earlier` (a kept conversation): a string is one
/// user turn; items are messages, `function_call`s (the assistant's earlier calls)
/// and `function_call_output`s (their results).
pub(super) fn turns(
    input: Option<&Value>,
    mut chat: Vec<ChatMessage>,
) -> Result<Vec<ChatMessage>, ApiError> {
    match input {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => chat.push(ChatMessage::new("user", s)),
        Some(Value::Array(items)) => {
            for item in items {
                push_item(&mut chat, item)?;
            }
        }
        Some(_) => {
            return Err(ApiError::bad_request(
                "input must be a string or an array of input items",
            ))
        }
    }
    Ok(chat)
}

fn push_item(chat: &mut Vec<ChatMessage>, item: &Value) -> Result<(), ApiError> {
    let kind = item
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("message");
    let str_field = |name: &str| -> Result<String, ApiError> {
        item.get(name)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| ApiError::bad_request(format!("a {kind} item needs {name}")))
    };
    match kind {
        "message" => {
            let role = match item.get("role").and_then(Value::as_str) {
                Some("developer") | Some("system") => "system",
                Some(r @ ("user" | "assistant")) => r,
                other => {
                    return Err(ApiError::bad_request(format!(
                        "an input message's role must be user, assistant, system or \
                         developer, not {other:?}"
                    )))
                }
            };
            let (text, images) = content(item.get("content"))?;
            chat.push(ChatMessage {
                images: images.images,
                image_at: images.at,
                ..ChatMessage::new(role, &text)
            });
        }
        "function_call" => {
            let call = ToolCallMessage {
                id: str_field("call_id")?,
                kind: "function".into(),
                function: ToolCallFunction {
                    name: str_field("name")?,
                    arguments: arguments_value(item.get("arguments").unwrap_or(&Value::Null)),
                },
            };
            // Calls made together belong to one assistant turn.
            match chat.last_mut() {
                Some(m) if m.role == "assistant" => m.tool_calls.push(call),
                _ => chat.push(ChatMessage {
                    role: "assistant".into(),
                    content: Some(String::new()),
                    tool_calls: vec![call],
                    ..ChatMessage::default()
                }),
            }
        }
        "function_call_output" => {
            let output = match item.get("output") {
                Some(Value::String(s)) => s.clone(),
                Some(v @ Value::Array(_)) => match content(Some(v))? {
                    (text, images) if images.images.is_empty() => text,
                    _ => {
                        return Err(ApiError::bad_request(
                            "a function_call_output's images are not read; send its text",
                        ))
                    }
                },
                _ => {
                    return Err(ApiError::bad_request(
                        "a function_call_output item needs output",
                    ))
                }
            };
            chat.push(ChatMessage {
                role: "tool".into(),
                content: Some(output),
                tool_call_id: Some(str_field("call_id")?),
                ..ChatMessage::default()
            });
        }
        // Earlier thinking is not fed back (the templates drop it too).
        "reasoning" => {}
        other => {
            return Err(ApiError::bad_request(format!(
                "input items of type {other:?} are not supported; send messages, \
                 function_call and function_call_output items"
            )))
        }
    }
    Ok(())
}

/// A message's content: a string, or parts of type `input_text` / `output_text` and
/// `input_image` (its `image_url` a base64 data URL), text and images in order.
fn content(v: Option<&Value>) -> Result<(String, Placed), ApiError> {
    match v {
        Some(Value::String(s)) => Ok((s.clone(), Placed::default())),
        Some(Value::Array(parts)) => {
            let mut out = String::new();
            let mut images = Placed::default();
            for p in parts {
                match (
                    p.get("type").and_then(Value::as_str),
                    p.get("text").and_then(Value::as_str),
                ) {
                    (Some("input_text" | "output_text" | "text"), Some(t)) => out.push_str(t),
                    (Some("input_image"), _) => {
                        let url = p.get("image_url").and_then(Value::as_str).ok_or_else(|| {
                            ApiError::bad_request(
                                "an input_image part needs image_url (a base64 data URL; \
                                 file_id is not read)",
                            )
                        })?;
                        images.push(&out, image_wire::from_url(url, "input_image.image_url")?);
                    }
                    (kind, _) => {
                        return Err(ApiError::bad_request(format!(
                            "content parts of type {} are not supported; send text or \
                             input_image",
                            kind.unwrap_or("(none)")
                        )))
                    }
                }
            }
            Ok((out, images))
        }
        _ => Err(ApiError::bad_request("an input message needs content")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn items_become_turns() {
        let input = json!([
            {"role": "developer", "content": "be brief"},
            {"role": "user", "content": [{"type": "input_text", "text": "weather?"}]},
            {"type": "function_call", "call_id": "call_1", "name": "w", "arguments": "{\"c\":1}"},
            {"type": "function_call", "call_id": "call_2", "name": "w", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        ]);
        let t = turns(Some(&input), Vec::new()).unwrap();
        let roles: Vec<&str> = t.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "tool"]);
        assert_eq!(t[2].tool_calls.len(), 2);
        assert_eq!(t[2].tool_calls[0].function.arguments, json!({"c": 1}));
        assert_eq!(t[3].tool_call_id.as_deref(), Some("call_1"));
        assert!(turns(
            Some(&json!([{"type": "item_reference", "id": "x"}])),
            Vec::new()
        )
        .is_err());
        let e = tools(Some(&vec![json!({"type": "web_search_preview"})])).unwrap_err();
        assert!(e.message.contains("web_search_preview"), "{}", e.message);
        assert_eq!(
            tool_choice(Some(&json!({"type": "function", "name": "w"}))).unwrap(),
            ToolChoice::Named("w".into())
        );
        assert_eq!(
            tool_choice(Some(&json!("required"))).unwrap(),
            ToolChoice::Required
        );
    }
}
