//! Tool calls (SPEC §7), written once for the three API shapes.
//!
//! Each route translates its own `tools` / `tool_choice` into a [`ToolSet`]
//! (or none, for `tool_choice: "none"`), and its history (earlier calls, tool
//! results) into [`ChatMessage`](crate::chat::ChatMessage)s. From there:
//! - [`prompt`]: the tools and the history go to the model through its own chat
//!   template when that template renders `tools`, and as Hermes-style text
//!   (`<tool_call>` / `<tool_response>`) otherwise;
//! - [`Convention`] (`chat::CallConvention`): each family's written form of a call,
//!   read off its template;
//! - [`grammar`]: a forced choice (`required`, `any`, a named tool) becomes a grammar
//!   that can only write calls, in the model's convention, whose arguments match the
//!   tool's schema; `auto` beside a response schema becomes calls-or-answer; a strict
//!   `auto` call is constrained from the moment the model opens it;
//! - [`parse`]: calls are read back out of what the model wrote (the same text the
//!   grammars emit), calls to tools not offered are dropped;
//! - [`xml`]: the XML form of Qwen3-Coder and Qwen 3.5 (`<function=NAME>` inside
//!   `<tool_call>`): its grammar, and its reader for the parser and the stream;
//! - [`stream`]: a stream with tools offered sends text as it is written (held back
//!   only while it could begin a call) and each call as its name, then its arguments
//!   piece by piece; the runtime's `hold` module drives it, or holds the whole
//!   answer back for a whole response, Ollama's shape and `whole_tool_calls`.

mod gemma;
pub(crate) mod grammar;
pub(crate) mod harmony;
mod parse;
pub(crate) mod plan;
pub(crate) mod prompt;
mod raw_text;
pub(crate) mod stream;
pub(crate) mod xml;

use std::sync::Arc;

use llamay_constrain::{compile_schema, CompiledSchema};
use serde_json::Value;

use crate::error::Error;
pub use harmony::chat_channels;
pub(crate) use parse::parse;

/// Most tools one request may offer.
pub(crate) const MAX_TOOLS: usize = 128;
/// Longest tool name, in bytes.
pub(crate) const MAX_NAME_BYTES: usize = 128;

/// One function the caller offers.
#[derive(Debug)]
pub struct ToolDef {
    /// The name calls use: 1 to 128 bytes, unique within a request.
    pub name: String,
    /// What the tool does, as the caller described it for the model; `None` if not.
    pub description: Option<String>,
    /// The parameters schema as the caller sent it (an empty object schema if none).
    pub parameters: Value,
    /// The schema compiled through the keyword table (refusals already answered).
    pub schema: CompiledSchema,
}

impl ToolDef {
    /// Checks the name and compiles the parameters schema; a refused keyword is the
    /// same 400 a response schema gets, naming the tool.
    pub fn new(
        name: &str,
        description: Option<String>,
        parameters: Option<Value>,
    ) -> Result<ToolDef, Error> {
        if name.is_empty() || name.len() > MAX_NAME_BYTES {
            return Err(Error::bad_request(format!(
                "a tool name must be 1 to {MAX_NAME_BYTES} bytes, not {:?}",
                name.chars().take(MAX_NAME_BYTES + 1).collect::<String>()
            )));
        }
        let parameters = match parameters {
            None | Some(Value::Null) => serde_json::json!({"type": "object", "properties": {}}),
            Some(v @ Value::Object(_)) => v,
            Some(other) => {
                return Err(Error::bad_request(format!(
                    "tool {name}: parameters must be a JSON Schema object, not {other}"
                )))
            }
        };
        // Arguments are an object: a schema that names no type is read as one.
        let mut as_object = parameters.clone();
        match as_object.get("type") {
            None => {
                as_object["type"] = Value::String("object".into());
            }
            Some(Value::String(t)) if t == "object" => {}
            Some(other) => {
                return Err(Error::bad_request(format!(
                    "tool {name}: parameters must describe an object, not type {other}"
                )))
            }
        }
        let schema = compile_schema(&as_object)
            .map_err(|e| Error::refusal(format!("tool {name}: {e}")).at("tools"))?;
        Ok(ToolDef {
            name: name.to_string(),
            description,
            parameters,
            schema,
        })
    }

    /// The definition in OpenAI's `tools` shape, which chat templates and the Hermes
    /// prompt both describe tools with.
    pub fn as_openai(&self) -> Value {
        // Key order is what a template's `tojson` shows the model: OpenAI's order.
        let mut f = serde_json::Map::new();
        f.insert("name".into(), Value::String(self.name.clone()));
        if let Some(d) = &self.description {
            f.insert("description".into(), Value::String(d.clone()));
        }
        f.insert("parameters".into(), self.parameters.clone());
        serde_json::json!({"type": "function", "function": f})
    }
}

/// What the caller asked the model to do with the tools.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolChoice {
    /// Described to the model; calls read from what it writes.
    Auto,
    /// Not offered at all.
    None,
    /// One or more calls, constrained.
    Required,
    /// Calls to this tool only, constrained.
    Named(String),
}

/// The tools offered to one generation.
#[derive(Debug)]
pub struct ToolSet {
    /// The tools offered, in the request's order (one to 128, names unique).
    pub tools: Vec<ToolDef>,
    /// Whether the model may or must call them, and which (never `None` in a set).
    pub choice: ToolChoice,
    /// More than one call allowed (`parallel_tool_calls`, not `disable_parallel_tool_use`).
    pub parallel: bool,
}

impl ToolSet {
    /// The set a request offers, or `None` when it offers nothing (no tools, or
    /// `tool_choice: "none"`). A named choice must name an offered tool; names are
    /// unique. (The call grammars are built once the model, and so its convention, is
    /// known; each tool's schema was compiled, and any refusal answered, by
    /// [`ToolDef::new`].)
    pub fn new(
        tools: Vec<ToolDef>,
        choice: ToolChoice,
        parallel: bool,
    ) -> Result<Option<Arc<ToolSet>>, Error> {
        if tools.len() > MAX_TOOLS {
            return Err(Error::bad_request(format!(
                "{} tools were offered; the limit is {MAX_TOOLS}",
                tools.len()
            )));
        }
        for (i, t) in tools.iter().enumerate() {
            if tools[..i].iter().any(|o| o.name == t.name) {
                return Err(Error::bad_request(format!(
                    "tool {} is offered twice",
                    t.name
                )));
            }
        }
        if let ToolChoice::Named(n) = &choice {
            if !tools.iter().any(|t| &t.name == n) {
                return Err(Error::bad_request(format!(
                    "tool_choice names {n:?}, which is not among the tools offered"
                )));
            }
        } else if tools.is_empty() && choice == ToolChoice::Required {
            return Err(Error::bad_request(
                "tool_choice requires a call but no tools were offered",
            ));
        }
        if tools.is_empty() || choice == ToolChoice::None {
            return Ok(None);
        }
        Ok(Some(Arc::new(ToolSet {
            tools,
            choice,
            parallel,
        })))
    }

    /// Whether the output must be calls.
    pub fn is_forced(&self) -> bool {
        matches!(self.choice, ToolChoice::Required | ToolChoice::Named(_))
    }

    /// The tool called `name`, if offered.
    pub fn get(&self, name: &str) -> Option<&ToolDef> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// The tools the model may call under this choice.
    pub fn callable(&self) -> impl Iterator<Item = &ToolDef> {
        self.tools.iter().filter(|t| match &self.choice {
            ToolChoice::Named(n) => &t.name == n,
            _ => true,
        })
    }
}

/// A call the model made.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    /// `call_` + 12 hex digits.
    pub id: String,
    /// The name of the tool called.
    pub name: String,
    /// The arguments object.
    pub arguments: Value,
    /// The arguments text as the model wrote it, when a stream sent it piece by
    /// piece: the final text must be the deltas' concatenation.
    pub written: Option<String>,
}

impl ToolCall {
    /// A call to `name` (a fresh id).
    pub fn new(name: impl Into<String>, arguments: Value) -> ToolCall {
        ToolCall {
            id: crate::ids::call_id(),
            name: name.into(),
            arguments,
            written: None,
        }
    }

    /// The arguments as JSON text (OpenAI's `arguments` string): as streamed, else
    /// compact.
    pub fn arguments_text(&self) -> String {
        match &self.written {
            Some(w) => w.clone(),
            None => self.arguments.to_string(),
        }
    }
}

/// Hosted tool types are refused by name: llamay runs nothing on the caller's behalf.
pub fn hosted_tool(kind: &str) -> Error {
    Error::bad_request(format!(
        "tool type {kind:?} is a hosted tool, which llamay does not run: llamay runs \
         nothing on the caller's behalf; offer client tools (functions) instead"
    ))
}
