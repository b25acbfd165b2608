use serde::Serialize;

/// One turn of a conversation, in the shape Hugging Face chat templates read
/// (`message['role']`, `message['content']`, `message.tool_calls`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallMessage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl ChatMessage {
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
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub function: ToolCallFunction,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolCallFunction {
    pub name: String,
    pub arguments: serde_json::Value,
}
