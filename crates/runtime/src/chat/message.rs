use std::sync::Arc;

use serde::Serialize;

/// One turn of a conversation, in the shape Hugging Face chat templates read
/// (`message['role']`, `message['content']`, `message.tool_calls`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant` or `tool` (the servers map other APIs' roles onto
    /// these, e.g. OpenAI's `developer` to `system`).
    pub role: String,
    /// The turn's text; `None` when it has none (an assistant turn that only calls
    /// tools).
    pub content: Option<String>,
    /// The calls an assistant turn made; empty for other turns.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallMessage>,
    /// On a `tool` turn, the id of the call whose result it carries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// An assistant turn's reasoning, when the client sends it back (Ollama's
    /// `thinking`, OpenAI's `reasoning_content`): harmony renders it as `analysis`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
    /// The name the message carries (OpenAI's `name`, Ollama's `tool_name`); Ollama
    /// templates read it as a `tool` turn's tool name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The images the turn carries, in order, as the client sent them (checked by
    /// [`Runtime::start`](crate::Runtime::start) before any model work).
    #[serde(skip)]
    pub images: Vec<ImageInput>,
}

/// An image's bytes as a request carried them (PNG, JPEG, WebP or GIF; the format
/// is read from the bytes).
#[derive(Clone, PartialEq)]
pub struct ImageInput(pub Arc<[u8]>);

impl std::fmt::Debug for ImageInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ImageInput({} bytes)", self.0.len())
    }
}

impl ChatMessage {
    /// A plain text turn: no tool calls, no id, no name.
    pub fn new(role: &str, content: &str) -> ChatMessage {
        ChatMessage {
            role: role.to_string(),
            content: Some(content.to_string()),
            ..ChatMessage::default()
        }
    }
}

/// A tool call made by the assistant in an earlier turn, as templates expect it:
/// `{"type": "function", "function": {"name": …, "arguments": {…}}}`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolCallMessage {
    /// The call's id, which the `tool` turn answering it repeats; empty when the API
    /// sent none (Ollama).
    pub id: String,
    /// The call's `type`: always `function` (the only kind a history carries).
    #[serde(rename = "type")]
    pub kind: String,
    /// The function called and its arguments.
    pub function: ToolCallFunction,
}

/// The `function` part of a [`ToolCallMessage`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolCallFunction {
    /// The name of the tool called.
    pub name: String,
    /// The arguments as a JSON value: an object where the wire's JSON string parses
    /// (templates iterate over it), else the value as sent.
    pub arguments: serde_json::Value,
}
