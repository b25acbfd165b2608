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
    /// Where each image sits in `content`: a byte offset (at a char boundary), in
    /// the order of `images`, as the wire's parts placed it. An image without one
    /// goes before the text (Ollama's `images` have no place: Ollama puts them first).
    #[serde(skip)]
    pub image_at: Vec<usize>,
}

/// libmtmd's default media marker (`mtmd_default_marker()`): where an image goes in
/// a turn's text (and so in the rendered prompt, where the prompt layout cuts it).
pub const MEDIA_MARKER: &str = "<__media__>";

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
    /// The turn with its images written into its text as libmtmd's marker
    /// ([`MEDIA_MARKER`](crate::MEDIA_MARKER)), each where the wire placed it (as
    /// llama.cpp's server writes an image part), for the template to render; a
    /// turn without images is returned as it is.
    pub fn with_markers(mut self) -> ChatMessage {
        if self.images.is_empty() {
            return self;
        }
        let text = self.content.take().unwrap_or_default();
        let mut out = String::with_capacity(text.len() + self.images.len() * 12);
        let mut from = 0;
        for i in 0..self.images.len() {
            // Offsets off a char boundary or past the end (never from our wire
            // readers) clamp to the nearest place before.
            let mut at = self
                .image_at
                .get(i)
                .copied()
                .unwrap_or(0)
                .clamp(from, text.len());
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            out.push_str(&text[from..at]);
            out.push_str(MEDIA_MARKER);
            from = at;
        }
        out.push_str(&text[from..]);
        self.content = Some(out);
        self
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(text: &str, at: Vec<usize>, n: usize) -> ChatMessage {
        ChatMessage {
            images: (0..n).map(|i| ImageInput(vec![i as u8].into())).collect(),
            image_at: at,
            ..ChatMessage::new("user", text)
        }
    }

    #[test]
    fn markers_go_where_the_wire_placed_the_images() {
        let m = MEDIA_MARKER;
        let placed = turn("ab", vec![0, 1, 2], 3).with_markers();
        assert_eq!(placed.content.unwrap(), format!("{m}a{m}b{m}"));
        // Ollama's images carry no place: before the text.
        let first = turn("what?", Vec::new(), 2).with_markers();
        assert_eq!(first.content.unwrap(), format!("{m}{m}what?"));
        // A place inside a character falls back to the character's start.
        let inside = turn("é", vec![1], 1).with_markers();
        assert_eq!(inside.content.unwrap(), format!("{m}é"));
        assert_eq!(
            ChatMessage::new("user", "x")
                .with_markers()
                .content
                .unwrap(),
            "x"
        );
    }
}
