//! How tools, earlier calls and tool results reach the model.
//!
//! A chat template that renders `tools` gets them as they are (the tool list, and
//! messages with `tool_calls` and `role: tool`). Any other template gets the Hermes
//! convention as plain text: the tool list in the system message, earlier calls as
//! the `<tool_call>` blocks the model would have written, and tool results as
//! `<tool_response>` blocks in a user turn, so templates that know nothing of tools
//! (or refuse a `tool` role) still render the conversation.

use serde_json::{json, Value};

use super::grammar::head;
use super::ToolSet;
use crate::chat::CallConvention as Convention;
use crate::chat::ChatMessage;

/// The messages to render and the `tools` value to render them with.
pub(crate) fn prepare(
    messages: Vec<ChatMessage>,
    set: Option<&ToolSet>,
    template_renders_tools: bool,
) -> (Vec<ChatMessage>, Option<Value>) {
    if template_renders_tools {
        let tools = set.map(|s| Value::Array(s.tools.iter().map(|t| t.as_openai()).collect()));
        return (messages, tools);
    }
    let has_history = messages
        .iter()
        .any(|m| m.role == "tool" || !m.tool_calls.is_empty());
    if set.is_none() && !has_history {
        return (messages, None);
    }
    let mut out: Vec<ChatMessage> = Vec::with_capacity(messages.len() + 1);
    let mut in_results = false;
    for m in messages {
        if m.role == "tool" {
            let block = format!(
                "<tool_response>\n{}\n</tool_response>",
                m.content.as_deref().unwrap_or_default()
            );
            match out.last_mut().filter(|_| in_results) {
                Some(prev) => {
                    let c = prev.content.get_or_insert_with(String::new);
                    c.push('\n');
                    c.push_str(&block);
                }
                None => out.push(ChatMessage::new("user", &block)),
            }
            in_results = true;
            continue;
        }
        in_results = false;
        let mut text = m.content.clone().unwrap_or_default();
        for (i, c) in m.tool_calls.iter().enumerate() {
            if i > 0 || !text.is_empty() {
                text.push_str(Convention::Hermes.form().between);
            }
            text.push_str(&call_text(&c.function.name, &c.function.arguments));
        }
        out.push(ChatMessage::new(&m.role, &text));
    }
    if let Some(set) = set {
        let tools = system_text(set);
        match out.first_mut().filter(|m| m.role == "system") {
            Some(sys) => {
                let c = sys.content.get_or_insert_with(String::new);
                if !c.is_empty() {
                    c.push_str("\n\n");
                }
                c.push_str(&tools);
            }
            None => out.insert(0, ChatMessage::new("system", &tools)),
        }
    }
    (out, None)
}

/// One Hermes call as the model writes it (and as the forced grammar emits it).
pub(crate) fn call_text(name: &str, arguments: &Value) -> String {
    let f = Convention::Hermes.form();
    format!(
        "{}{}{arguments}}}{}",
        f.open,
        head(name, f.args_key),
        f.close
    )
}

/// The Hermes description of the offered tools, kept short: every request with
/// tools pays for it in prompt tokens.
fn system_text(set: &ToolSet) -> String {
    let mut s = String::from("You can call these functions:\n<tools>");
    for t in &set.tools {
        s.push('\n');
        s.push_str(&t.as_openai()["function"].to_string());
    }
    s.push_str("\n</tools>\nTo call one, write:\n");
    s.push_str(&call_text("<function-name>", &json!("<args-json-object>")));
    s
}

#[cfg(test)]
mod tests {
    use super::super::{ToolChoice, ToolDef};
    use super::*;
    use crate::chat::{ToolCallFunction, ToolCallMessage};

    fn history() -> Vec<ChatMessage> {
        let call = ToolCallMessage {
            id: "call_0123456789ab".into(),
            kind: "function".into(),
            function: ToolCallFunction {
                name: "get_weather".into(),
                arguments: json!({"city": "Paris"}),
            },
        };
        vec![
            ChatMessage::new("user", "Weather in Paris?"),
            ChatMessage {
                role: "assistant".into(),
                tool_calls: vec![call],
                ..ChatMessage::default()
            },
            ChatMessage {
                role: "tool".into(),
                content: Some("21 C".into()),
                tool_call_id: Some("call_0123456789ab".into()),
                ..ChatMessage::default()
            },
            ChatMessage {
                role: "tool".into(),
                content: Some("sunny".into()),
                ..ChatMessage::default()
            },
        ]
    }

    #[test]
    fn hermes_text_carries_tools_calls_and_results() {
        let t = ToolDef::new("get_weather", Some("Weather now.".into()), None).unwrap();
        let set = ToolSet::new(vec![t], ToolChoice::Auto, true)
            .unwrap()
            .unwrap();
        let (msgs, tools) = prepare(history(), Some(&set), false);
        assert!(tools.is_none());
        let roles: Vec<&str> = msgs.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "user"]);
        let sys = msgs[0].content.as_deref().unwrap();
        assert!(
            sys.contains("<tools>\n{\"name\":\"get_weather\",\"description\":\"Weather now.\",\"parameters\""),
            "{sys}"
        );
        assert_eq!(
            msgs[2].content.as_deref(),
            Some("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\"}}\n</tool_call>")
        );
        assert_eq!(
            msgs[3].content.as_deref(),
            Some(
                "<tool_response>\n21 C\n</tool_response>\n<tool_response>\nsunny\n</tool_response>"
            )
        );
        assert!(msgs
            .iter()
            .all(|m| m.content.is_some() && m.tool_calls.is_empty()));
    }

    #[test]
    fn a_template_that_renders_tools_gets_them_as_they_are() {
        let t = ToolDef::new("get_weather", None, None).unwrap();
        let set = ToolSet::new(vec![t], ToolChoice::Auto, true)
            .unwrap()
            .unwrap();
        let (msgs, tools) = prepare(history(), Some(&set), true);
        assert_eq!(msgs, history());
        assert_eq!(
            tools.as_ref().unwrap()[0]["function"]["name"],
            "get_weather"
        );
        // Through a template with its own tool convention (tojson'd arguments, as
        // Python's json.dumps writes them).
        let src = "{% for t in tools %}[{{ t.function.name }}]{% endfor %}\
            {% for m in messages %}{{ m.role }}:{% for c in m.tool_calls %}\
            {{ c.function.name }}{{ c.function.arguments | tojson }}{% endfor %}\
            {{ m.content or '' }}|{% endfor %}";
        let tmpl = crate::chat::ChatTemplate::new(src).unwrap();
        assert!(tmpl.renders_tools());
        let opts = crate::chat::RenderOptions {
            tools: tools.as_ref(),
            ..Default::default()
        };
        assert_eq!(
            tmpl.render(&msgs, &opts).unwrap(),
            "[get_weather]user:Weather in Paris?|assistant:get_weather{\"city\": \"Paris\"}|tool:21 C|tool:sunny|"
        );
        let plain = vec![ChatMessage::new("user", "hi")];
        assert_eq!(prepare(plain.clone(), None, false), (plain, None));
    }
}
