//! gpt-oss's harmony format, rendered as OpenAI's renderer (`openai-harmony`'s
//! `render_conversation_for_completion`) renders it, byte for byte: a system message
//! (identity, knowledge cutoff, date, reasoning effort, channels), a developer message
//! (the API's system text as instructions, the tools as a TypeScript namespace), then
//! the turns. The GGUF's Jinja template is not used: it differs from the renderer the
//! model was trained with (docs/issues/issue-46-notes.md §6.2).
//!
//! Our messages map onto harmony's as: system and developer texts become the
//! instructions; an assistant turn's `thinking` the `analysis` channel, its text the
//! `final` one, each call a `commentary` message to `functions.NAME` constrained to
//! JSON; a tool turn a `commentary` message from `functions.NAME` to the assistant.

use serde_json::Value;

use super::message::ChatMessage;

/// The system message's first line unless the request gives another.
pub(crate) const DEFAULT_IDENTITY: &str =
    "You are ChatGPT, a large language model trained by OpenAI.";
const KNOWLEDGE_CUTOFF: &str = "2024-06";

/// What a harmony prompt is rendered with besides its messages.
#[derive(Clone, Debug, Default)]
pub(crate) struct HarmonyOptions<'a> {
    /// Tool definitions (OpenAI `tools` shape: `{"type": "function", "function": {…}}`).
    pub tools: Option<&'a Value>,
    /// `low`, `medium` or `high`; `None`: medium.
    pub reasoning_effort: Option<&'a str>,
    /// `Current date:` in the system message, when given.
    pub current_date: Option<&'a str>,
    /// The system message's identity line; `None`: [`DEFAULT_IDENTITY`].
    pub model_identity: Option<&'a str>,
}

/// One harmony message before it is written out.
struct Msg {
    /// `system`, `developer`, `user`, `assistant` or a tool's name.
    author: String,
    recipient: Option<String>,
    channel: Option<&'static str>,
    /// The content type after the header (`<|constrain|>json` for a call).
    constrain_json: bool,
    content: String,
}

impl Msg {
    fn new(author: &str, content: String) -> Msg {
        Msg {
            author: author.to_string(),
            recipient: None,
            channel: None,
            constrain_json: false,
            content,
        }
    }

    fn write(&self, out: &mut String) {
        out.push_str("<|start|>");
        out.push_str(&self.author);
        if let Some(r) = &self.recipient {
            out.push_str(" to=");
            out.push_str(r);
        }
        if let Some(c) = self.channel {
            out.push_str("<|channel|>");
            out.push_str(c);
        }
        if self.constrain_json {
            out.push_str(" <|constrain|>json");
        }
        out.push_str("<|message|>");
        out.push_str(&self.content);
        // A message to a tool ends the assistant's turn with a call.
        let call = self.author == "assistant" && self.recipient.is_some();
        out.push_str(if call { "<|call|>" } else { "<|end|>" });
    }
}

/// The prompt for `messages` in harmony, ending with the assistant's turn opened.
pub(crate) fn render_harmony(messages: &[ChatMessage], opts: &HarmonyOptions<'_>) -> String {
    let tools = function_tools(opts.tools);
    let mut msgs = vec![Msg::new("system", system_content(opts, !tools.is_empty()))];
    let instructions: Vec<&str> = messages
        .iter()
        .filter(|m| matches!(m.role.as_str(), "system" | "developer"))
        .filter_map(|m| m.content.as_deref())
        .filter(|c| !c.is_empty())
        .collect();
    if let Some(dev) = developer_content(&instructions, &tools) {
        msgs.push(Msg::new("developer", dev));
    }
    for (i, m) in messages.iter().enumerate() {
        turn(m, &messages[..i], &mut msgs);
    }
    let mut out = String::new();
    for (i, m) in msgs.iter().enumerate() {
        if !dropped_analysis(&msgs, i) {
            m.write(&mut out);
        }
    }
    out.push_str("<|start|>assistant");
    out
}

/// The harmony messages of one of our turns (`before`: the turns before it).
fn turn(m: &ChatMessage, before: &[ChatMessage], msgs: &mut Vec<Msg>) {
    let text = m.content.clone().unwrap_or_default();
    match m.role.as_str() {
        "system" | "developer" => {}
        "assistant" => {
            if let Some(t) = m.thinking.as_deref().filter(|t| !t.is_empty()) {
                msgs.push(Msg {
                    channel: Some("analysis"),
                    ..Msg::new("assistant", t.to_string())
                });
            }
            for call in &m.tool_calls {
                let args = match &call.function.arguments {
                    Value::String(s) => s.clone(),
                    v => v.to_string(),
                };
                msgs.push(Msg {
                    recipient: Some(format!("functions.{}", call.function.name)),
                    channel: Some("commentary"),
                    constrain_json: true,
                    ..Msg::new("assistant", args)
                });
            }
            if m.tool_calls.is_empty() || !text.is_empty() {
                msgs.push(Msg {
                    channel: Some("final"),
                    ..Msg::new("assistant", text)
                });
            }
        }
        "tool" => {
            let name = m
                .name
                .clone()
                .or_else(|| called_name(before, m.tool_call_id.as_deref()))
                .unwrap_or_else(|| "tool".into());
            msgs.push(Msg {
                recipient: Some("assistant".into()),
                channel: Some("commentary"),
                ..Msg::new(&format!("functions.{name}"), text)
            });
        }
        role => msgs.push(Msg::new(role, text)),
    }
}

/// The name of the call a tool turn answers: the one with its id, else the latest.
fn called_name(before: &[ChatMessage], id: Option<&str>) -> Option<String> {
    let calls = || before.iter().rev().flat_map(|m| m.tool_calls.iter().rev());
    calls()
        .find(|c| id.is_some_and(|id| c.id == id))
        .or_else(|| calls().next())
        .map(|c| c.function.name.clone())
}

/// Whether message `i` is old chain of thought that the renderer leaves out: when the
/// conversation's last assistant message is a final answer, every analysis message
/// before the first final answer is dropped (openai-harmony's `auto_drop_analysis`).
fn dropped_analysis(msgs: &[Msg], i: usize) -> bool {
    let last_is_final = msgs
        .iter()
        .rev()
        .find(|m| m.author == "assistant")
        .is_some_and(|m| m.channel == Some("final"));
    let first_final = msgs.iter().position(|m| m.channel == Some("final"));
    last_is_final && first_final.is_some_and(|f| i < f) && msgs[i].channel == Some("analysis")
}

fn system_content(opts: &HarmonyOptions<'_>, function_tools: bool) -> String {
    let mut top = vec![
        opts.model_identity.unwrap_or(DEFAULT_IDENTITY).to_string(),
        format!("Knowledge cutoff: {KNOWLEDGE_CUTOFF}"),
    ];
    if let Some(d) = opts.current_date {
        top.push(format!("Current date: {d}"));
    }
    let mut channels = "# Valid channels: analysis, commentary, final. \
                        Channel must be included for every message."
        .to_string();
    if function_tools {
        channels.push_str("\nCalls to these tools must go to the commentary channel: 'functions'.");
    }
    [
        top.join("\n"),
        format!("Reasoning: {}", opts.reasoning_effort.unwrap_or("medium")),
        channels,
    ]
    .join("\n\n")
}

/// A function tool: name, description, parameters schema.
struct Tool<'a> {
    name: &'a str,
    description: &'a str,
    parameters: Option<&'a Value>,
}

/// The function tools of an OpenAI `tools` list (other kinds have no harmony form).
fn function_tools(tools: Option<&Value>) -> Vec<Tool<'_>> {
    let Some(list) = tools.and_then(Value::as_array) else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|t| {
            let f = t.get("function").unwrap_or(t);
            Some(Tool {
                name: f.get("name")?.as_str()?,
                description: f.get("description").and_then(Value::as_str).unwrap_or(""),
                parameters: f.get("parameters").filter(|p| !p.is_null()),
            })
        })
        .collect()
}

fn developer_content(instructions: &[&str], tools: &[Tool]) -> Option<String> {
    let mut sections = Vec::new();
    if !instructions.is_empty() {
        sections.push("# Instructions".to_string());
        sections.push(instructions.join("\n\n"));
    }
    if !tools.is_empty() {
        sections.push(tools_section(tools));
    }
    (!sections.is_empty()).then(|| sections.join("\n\n"))
}

/// `# Tools` with the one namespace, `functions`.
fn tools_section(tools: &[Tool]) -> String {
    let mut lines = vec![
        "## functions\n".to_string(),
        "namespace functions {\n".into(),
    ];
    for t in tools {
        lines.extend(t.description.lines().map(|l| format!("// {l}")));
        lines.push(match t.parameters {
            Some(p) => format!("type {} = (_: {}) => any;\n", t.name, typescript(p, "")),
            None => format!("type {} = () => any;\n", t.name),
        });
    }
    lines.push("} // namespace functions".into());
    format!("# Tools\n\n{}", lines.join("\n"))
}

/// A JSON Schema as the TypeScript type harmony writes for it, nested lines indented
/// by `indent`.
fn typescript(schema: &Value, indent: &str) -> String {
    if let Some(variants) = schema.get("oneOf").and_then(Value::as_array) {
        let mut out = String::new();
        for v in variants {
            out.push_str(&format!("\n{indent} | "));
            out.push_str(&nullable(v, typescript(v, &format!("{indent}   "))));
            let notes = variant_notes(v, None);
            if !notes.is_empty() {
                out.push_str(&format!(" // {}", notes.join(" ")));
            }
        }
        return out;
    }
    if let Some(types) = schema.get("type").and_then(Value::as_array) {
        let names: Vec<&str> = types
            .iter()
            .filter_map(Value::as_str)
            .map(|t| if t == "integer" { "number" } else { t })
            .collect();
        if !names.is_empty() {
            return names.join(" | ");
        }
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("object") => object(schema, indent),
        Some("string") => {
            let members: Vec<String> = schema
                .get("enum")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(|s| format!("\"{s}\"")))
                .collect();
            if members.is_empty() {
                "string".into()
            } else {
                members.join(" | ")
            }
        }
        Some("number" | "integer") => "number".into(),
        Some("boolean") => "boolean".into(),
        Some("array") => match schema.get("items") {
            Some(items) => format!("{}[]", typescript(items, indent)),
            None => "Array<any>".into(),
        },
        _ => "any".into(),
    }
}

/// An object type: its properties one per line, with their comments.
fn object(schema: &Value, indent: &str) -> String {
    let mut out = String::new();
    if let Some(d) = schema.get("description").and_then(Value::as_str) {
        out.push_str(&format!("{indent}// {d}\n"));
    }
    out.push_str("{\n");
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let props = schema.get("properties").and_then(Value::as_object);
    for (key, val) in props.into_iter().flatten() {
        let optional = if required.contains(&key.as_str()) {
            ""
        } else {
            "?"
        };
        if let Some(t) = val.get("title").and_then(Value::as_str) {
            out.push_str(&format!("{indent}// {t}\n{indent}//\n"));
        }
        let description = val.get("description").and_then(Value::as_str);
        if let Some(variants) = val.get("oneOf").and_then(Value::as_array) {
            one_of_property(key, optional, description, val, variants, indent, &mut out);
            continue;
        }
        if let Some(d) = description {
            out.push_str(&format!("{indent}// {d}\n"));
        }
        examples(val, indent, &mut out);
        let ty = nullable(val, typescript(val, &format!("{indent}    ")));
        out.push_str(&format!("{indent}{key}{optional}: {ty},"));
        if let Some(d) = default_note(val) {
            out.push_str(&format!(" // {d}"));
        }
        out.push('\n');
    }
    out.push_str(&format!("{indent}}}"));
    out
}

/// A property whose schema is a `oneOf`: its comments above it, then one line per
/// variant.
fn one_of_property(
    key: &str,
    optional: &str,
    description: Option<&str>,
    val: &Value,
    variants: &[Value],
    indent: &str,
    out: &mut String,
) {
    examples(val, indent, out);
    let first_says_it = variants
        .first()
        .and_then(|v| v.get("description"))
        .and_then(Value::as_str)
        .is_some_and(|d| Some(d) == description);
    let described_above = !first_says_it && description.is_some();
    if described_above {
        out.push_str(&format!("{indent}// {}\n", description.unwrap_or_default()));
    }
    if let Some(d) = default_note(val) {
        out.push_str(&format!("{indent}// {d}\n"));
    }
    out.push_str(&format!("{indent}{key}{optional}:\n"));
    for (i, v) in variants.iter().enumerate() {
        out.push_str(&format!("{indent} | "));
        out.push_str(&nullable(v, typescript(v, &format!("{indent}   "))));
        // The first variant's description was said above the property.
        let notes = if i == 0 && described_above {
            default_note(v).into_iter().collect()
        } else {
            variant_notes(v, description)
        };
        if !notes.is_empty() {
            out.push_str(&format!(" // {}", notes.join(" ")));
        }
        out.push('\n');
    }
    out.push_str(&format!("{indent},\n"));
}

/// A `oneOf` variant's trailing notes: its description (unless it repeats
/// `property_description`) and its default.
fn variant_notes(v: &Value, property_description: Option<&str>) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(d) = v.get("description").and_then(Value::as_str) {
        if Some(d) != property_description {
            notes.push(d.to_string());
        }
    }
    notes.extend(default_note(v));
    notes
}

/// `// Examples:` and one `// - "…"` line per string example.
fn examples(val: &Value, indent: &str, out: &mut String) {
    let Some(list) = val.get("examples").and_then(Value::as_array) else {
        return;
    };
    if list.is_empty() {
        return;
    }
    out.push_str(&format!("{indent}// Examples:\n"));
    for ex in list.iter().filter_map(Value::as_str) {
        out.push_str(&format!("{indent}// - \"{ex}\"\n"));
    }
}

/// `default: …` for a schema with a default: a string quoted unless the schema is an
/// enum, anything else as JSON.
fn default_note(v: &Value) -> Option<String> {
    let d = v.get("default")?;
    let is_enum = v
        .get("enum")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    Some(match d.as_str() {
        Some(s) if !is_enum => format!("default: \"{s}\""),
        Some(s) => format!("default: {s}"),
        None => format!("default: {d}"),
    })
}

/// `ty | null` for a schema marked `nullable` whose type does not say null already.
fn nullable(schema: &Value, ty: String) -> String {
    let marked = schema.get("nullable").and_then(Value::as_bool) == Some(true);
    if marked && !ty.contains("null") {
        format!("{ty} | null")
    } else {
        ty
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::{ToolCallFunction, ToolCallMessage};

    fn message(v: &Value) -> ChatMessage {
        let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        let calls = v.get("tool_calls").and_then(Value::as_array);
        ChatMessage {
            role: text("role").unwrap(),
            content: text("content"),
            thinking: text("thinking"),
            name: text("name"),
            tool_call_id: text("tool_call_id"),
            images: Vec::new(),
            image_at: Vec::new(),
            tool_calls: calls
                .into_iter()
                .flatten()
                .map(|c| ToolCallMessage {
                    id: c["id"].as_str().unwrap().to_string(),
                    kind: "function".into(),
                    function: ToolCallFunction {
                        name: c["function"]["name"].as_str().unwrap().to_string(),
                        arguments: c["function"]["arguments"].clone(),
                    },
                })
                .collect(),
        }
    }

    /// Every conversation of `scripts/harmony-reference` renders to exactly the text
    /// OpenAI's `openai-harmony` gives for it.
    #[test]
    fn conversations_render_as_openai_harmony_renders_them() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/harmony_renderings.json"
        );
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let cases = doc["cases"].as_array().unwrap();
        assert!(cases.len() >= 20, "{} cases", cases.len());
        for case in cases {
            let messages: Vec<ChatMessage> = case["messages"]
                .as_array()
                .unwrap()
                .iter()
                .map(message)
                .collect();
            let opts = HarmonyOptions {
                tools: case.get("tools"),
                reasoning_effort: case.get("reasoning_effort").and_then(Value::as_str),
                current_date: case.get("current_date").and_then(Value::as_str),
                model_identity: case.get("model_identity").and_then(Value::as_str),
            };
            let got = render_harmony(&messages, &opts);
            let want = case["expected"].as_str().unwrap();
            assert_eq!(got, want, "case {:?}", case["name"]);
        }
    }
}
