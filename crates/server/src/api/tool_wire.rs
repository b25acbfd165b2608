//! The `tools` / `tool_choice` shape OpenAI's chat route and Ollama's `/api/chat`
//! share: `[{"type": "function", "function": {"name", "description", "parameters"}}]`.

use serde::Deserialize;
use serde_json::Value;

use llamay_runtime::Error;
use llamay_runtime::{hosted_tool, ToolChoice, ToolDef};
use llamay_runtime::{ToolCallFunction, ToolCallMessage};

/// An assistant's earlier call in a history message (OpenAI's and Ollama's shape;
/// Ollama sends no id).
#[derive(Deserialize)]
pub(crate) struct HistoryCall {
    #[serde(default)]
    pub id: Option<String>,
    pub function: HistoryFunction,
}

#[derive(Deserialize)]
pub(crate) struct HistoryFunction {
    pub name: String,
    #[serde(default)]
    pub arguments: Value,
}

impl HistoryCall {
    /// The call as chat templates read it, arguments as an object.
    pub(crate) fn into_message(self) -> ToolCallMessage {
        ToolCallMessage {
            id: self.id.unwrap_or_default(),
            kind: "function".into(),
            function: ToolCallFunction {
                name: self.function.name,
                arguments: arguments_value(&self.function.arguments),
            },
        }
    }
}

/// Reads a `tools` array of function tools; any other `type` is a hosted tool,
/// refused by name.
pub(crate) fn function_tools(v: Option<&Value>) -> Result<Vec<ToolDef>, Error> {
    let items = match v {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(a)) => a,
        Some(_) => return Err(Error::bad_request("tools must be an array")),
    };
    items
        .iter()
        .map(|t| {
            let kind = t.get("type").and_then(Value::as_str).unwrap_or("function");
            if kind != "function" {
                return Err(hosted_tool(kind));
            }
            let f = t
                .get("function")
                .filter(|f| f.is_object())
                .ok_or_else(|| Error::bad_request("a function tool needs a function object"))?;
            let name = f
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| Error::bad_request("a function tool needs function.name"))?;
            let description = f
                .get("description")
                .and_then(Value::as_str)
                .map(str::to_string);
            ToolDef::new(name, description, f.get("parameters").cloned())
        })
        .collect()
}

/// OpenAI's `tool_choice`: `"auto"`, `"none"`, `"required"` or
/// `{"type": "function", "function": {"name": …}}` (absent: auto).
pub(crate) fn openai_choice(v: Option<&Value>) -> Result<ToolChoice, Error> {
    let bad = || {
        Error::bad_request(
            "tool_choice must be \"auto\", \"none\", \"required\" or \
             {\"type\":\"function\",\"function\":{\"name\":…}}",
        )
    };
    Ok(match v {
        None | Some(Value::Null) => ToolChoice::Auto,
        Some(Value::String(s)) => match s.as_str() {
            "auto" => ToolChoice::Auto,
            "none" => ToolChoice::None,
            "required" => ToolChoice::Required,
            _ => return Err(bad()),
        },
        Some(o @ Value::Object(_)) => match o.get("type").and_then(Value::as_str) {
            Some("function") => ToolChoice::Named(
                o.pointer("/function/name")
                    .and_then(Value::as_str)
                    .ok_or_else(bad)?
                    .to_string(),
            ),
            Some(kind @ ("allowed_tools" | "custom")) => {
                return Err(Error::bad_request(format!(
                    "tool_choice type {kind:?} is not supported"
                )))
            }
            Some(other) => return Err(hosted_tool(other)),
            None => return Err(bad()),
        },
        Some(_) => return Err(bad()),
    })
}

/// A call's arguments as a history message carries them: an object, or a string
/// holding one (OpenAI); text that is not JSON stays a string.
pub(crate) fn arguments_value(v: &Value) -> Value {
    match v {
        Value::String(s) => serde_json::from_str(s).unwrap_or_else(|_| v.clone()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn function_tools_hosted_types_and_choices() {
        let t = json!([{"type": "function", "function": {"name": "f",
            "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}]);
        let defs = function_tools(Some(&t)).unwrap();
        assert_eq!(defs[0].name, "f");
        let e = function_tools(Some(&json!([{"type": "web_search_preview"}]))).unwrap_err();
        assert_eq!(e.kind, llamay_runtime::ErrorKind::InvalidRequest);
        assert!(
            e.message.contains("\"web_search_preview\""),
            "{}",
            e.message
        );
        let bad = json!([{"type": "function", "function": {"name": "lookup",
            "parameters": {"type": "object", "if": {}}}}]);
        let e = function_tools(Some(&bad)).unwrap_err();
        assert!(
            e.refusal && e.message.starts_with("tool lookup: "),
            "{}",
            e.message
        );
        assert_eq!(openai_choice(None).unwrap(), ToolChoice::Auto);
        assert_eq!(
            openai_choice(Some(&json!("required"))).unwrap(),
            ToolChoice::Required
        );
        assert_eq!(
            openai_choice(Some(
                &json!({"type": "function", "function": {"name": "f"}})
            ))
            .unwrap(),
            ToolChoice::Named("f".into())
        );
        assert!(openai_choice(Some(&json!("sometimes"))).is_err());
        assert_eq!(arguments_value(&json!("{\"a\":1}")), json!({"a": 1}));
    }
}
