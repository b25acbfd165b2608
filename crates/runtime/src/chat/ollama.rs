//! A model's Ollama template layer: the values Ollama gives a Go template for a
//! conversation (`.Messages`, `.System`, `.Tools`, and the legacy `.Prompt` /
//! `.Response`), built the way Ollama builds them, so the prompt is the text Ollama
//! would send.

use serde_json::Value as Json;

use super::gotmpl::{go_json, GoTemplate, Value};
use super::message::ChatMessage;
use super::template::TemplateError;

/// A template layer, and the model's system layer (the default system message).
#[derive(Debug)]
pub struct OllamaTemplate {
    template: GoTemplate,
    system: Option<String>,
    renders_tools: bool,
}

impl OllamaTemplate {
    /// Parses a Go template layer; `system` is the model's system layer (an empty one
    /// counts as none). A template our Go-template engine cannot parse is a
    /// [`TemplateError::Compile`].
    pub fn new(source: &str, system: Option<&str>) -> Result<OllamaTemplate, TemplateError> {
        let template =
            GoTemplate::parse(source).map_err(|e| TemplateError::Compile(e.to_string()))?;
        Ok(OllamaTemplate {
            template,
            system: system.filter(|s| !s.is_empty()).map(str::to_string),
            renders_tools: source.contains(".Tools"),
        })
    }

    /// Whether the template renders `.Tools` itself.
    pub fn renders_tools(&self) -> bool {
        self.renders_tools
    }

    /// The prompt for `messages`. Without a system message of its own, the conversation
    /// gets the model's system layer first, as Ollama's chat route does.
    pub fn render(
        &self,
        messages: &[ChatMessage],
        tools: Option<&Json>,
    ) -> Result<String, TemplateError> {
        let mut msgs: Vec<ChatMessage> = Vec::with_capacity(messages.len() + 1);
        if let Some(system) = &self.system {
            if !messages.iter().any(|m| m.role == "system") {
                msgs.push(ChatMessage::new("system", system));
            }
        }
        msgs.extend(messages.iter().cloned());
        let fail = |e: super::gotmpl::GoTemplateError| TemplateError::Render(e.to_string());
        let tools = tools_value(tools);
        if self.template.uses_messages() {
            let (system, collated) = collate(&msgs);
            let data = values(&collated, &system, tools, "", "");
            return self.template.render(&data).map_err(fail);
        }
        // The legacy form: one rendering per exchange, the last cut at `.Response`.
        let mut out = String::new();
        let (mut system, mut prompt, mut response) = (String::new(), String::new(), String::new());
        let (_, collated) = collate(&msgs);
        for m in &collated {
            let content = m.content.clone().unwrap_or_default();
            let flush = match m.role.as_str() {
                "system" => !prompt.is_empty() || !response.is_empty(),
                "user" => !response.is_empty(),
                _ => false,
            };
            if flush {
                let data = values(&[], &system, tools.clone(), &prompt, &response);
                out.push_str(&self.template.render(&data).map_err(fail)?);
                system.clear();
                prompt.clear();
                response.clear();
            }
            match m.role.as_str() {
                "system" => system = content,
                "user" => prompt = content,
                "assistant" => response = content,
                _ => {}
            }
        }
        let data = values(&[], &system, tools, &prompt, &response);
        out.push_str(
            &self
                .template
                .render_until(&data, "Response")
                .map_err(fail)?,
        );
        Ok(out)
    }
}

/// Ollama's collation: every system message's text joined as `.System`, and runs of
/// messages of one role (other than `tool`) merged into one, joined by a blank line.
fn collate(msgs: &[ChatMessage]) -> (String, Vec<ChatMessage>) {
    let mut system = Vec::new();
    let mut out: Vec<ChatMessage> = Vec::new();
    for m in msgs {
        if m.role == "system" {
            system.push(m.content.clone().unwrap_or_default());
        }
        match out.last_mut() {
            Some(last) if last.role == m.role && m.role != "tool" => {
                let mut c = last.content.take().unwrap_or_default();
                c.push_str("\n\n");
                c.push_str(m.content.as_deref().unwrap_or(""));
                last.content = Some(c);
                last.tool_calls.extend(m.tool_calls.iter().cloned());
            }
            _ => out.push(m.clone()),
        }
    }
    (system.join("\n\n"), out)
}

fn values(msgs: &[ChatMessage], system: &str, tools: Value, prompt: &str, response: &str) -> Value {
    let messages = Value::list(msgs.iter().map(message).collect());
    Value::object(
        vec![
            ("Messages", messages),
            ("System", Value::str(system)),
            ("Tools", tools),
            ("Prompt", Value::str(prompt)),
            ("Response", Value::str(response)),
            ("Suffix", Value::str("")),
            ("Think", Value::Bool(false)),
            ("ThinkLevel", Value::str("")),
            ("IsThinkSet", Value::Bool(false)),
        ],
        "{}".into(),
    )
}

/// Ollama's `api.Message`.
fn message(m: &ChatMessage) -> Value {
    let calls: Vec<Value> = m
        .tool_calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let args = Value::from_json(&c.function.arguments);
            let args_json = go_json(&c.function.arguments);
            let function = Value::object(
                vec![
                    ("Index", Value::Int(i as i64)),
                    ("Name", Value::str(c.function.name.clone())),
                    ("Arguments", with_json(args, args_json.clone())),
                ],
                format!(
                    "{{\"index\":{i},\"name\":{},\"arguments\":{args_json}}}",
                    go_json(&Json::from(c.function.name.as_str()))
                ),
            );
            let json = format!("{{\"function\":{}}}", function_json(&function));
            Value::object(
                vec![("ID", Value::str(c.id.clone())), ("Function", function)],
                json,
            )
        })
        .collect();
    let tool_name = if m.role == "tool" {
        m.name.clone().unwrap_or_default()
    } else {
        String::new()
    };
    Value::object(
        vec![
            ("Role", Value::str(m.role.clone())),
            ("Content", Value::str(m.content.clone().unwrap_or_default())),
            ("Thinking", Value::str("")),
            ("ToolCalls", Value::list(calls)),
            ("ToolName", Value::str(tool_name)),
            (
                "ToolCallID",
                Value::str(m.tool_call_id.clone().unwrap_or_default()),
            ),
        ],
        go_json(&serde_json::json!({"role": m.role, "content": m.content})),
    )
}

fn function_json(v: &Value) -> String {
    match v {
        Value::Struct(s) => s.json.clone(),
        _ => "null".into(),
    }
}

/// A map-typed value that prints as JSON (Ollama's arguments type has a `String`).
fn with_json(v: Value, json: String) -> Value {
    match v {
        Value::Map(m) => Value::Struct(std::sync::Arc::new(super::gotmpl::Struct {
            fields: (*m).clone(),
            json,
        })),
        other => other,
    }
}

/// The request's tools (OpenAI shape) as Ollama's `[]api.Tool`.
fn tools_value(tools: Option<&Json>) -> Value {
    let Some(Json::Array(list)) = tools else {
        return Value::Nil;
    };
    Value::list(list.iter().map(tool).collect())
}

fn tool(t: &Json) -> Value {
    let f = &t["function"];
    let name = f["name"].as_str().unwrap_or("");
    let description = f["description"].as_str().unwrap_or("");
    let params = &f["parameters"];
    let required: Vec<Value> = params["required"]
        .as_array()
        .map(|r| {
            r.iter()
                .filter_map(|x| x.as_str())
                .map(Value::str)
                .collect()
        })
        .unwrap_or_default();
    let mut props = std::collections::BTreeMap::new();
    let mut props_json = Vec::new();
    if let Some(p) = params["properties"].as_object() {
        // Go's json.Marshal writes a map's keys sorted.
        let mut sorted: Vec<_> = p.iter().collect();
        sorted.sort_by(|a, b| a.0.cmp(b.0));
        for (k, v) in sorted {
            let (value, json) = property(v);
            props_json.push(format!("{}:{json}", go_json(&Json::from(k.as_str()))));
            props.insert(k.clone(), value);
        }
    }
    let props_json = format!("{{{}}}", props_json.join(","));
    let ptype = params["type"].as_str().unwrap_or("object");
    let mut pj = format!("{{\"type\":{}", go_json(&Json::from(ptype)));
    if !required.is_empty() {
        pj.push_str(&format!(",\"required\":{}", go_json(&params["required"])));
    }
    pj.push_str(&format!(",\"properties\":{props_json}}}"));
    let parameters = Value::object(
        vec![
            ("Type", Value::str(ptype)),
            ("Required", Value::list(required)),
            ("Properties", Value::Map(std::sync::Arc::new(props))),
        ],
        pj.clone(),
    );
    let mut fj = format!("{{\"name\":{}", go_json(&Json::from(name)));
    if !description.is_empty() {
        fj.push_str(&format!(
            ",\"description\":{}",
            go_json(&Json::from(description))
        ));
    }
    fj.push_str(&format!(",\"parameters\":{pj}}}"));
    let function = Value::object(
        vec![
            ("Name", Value::str(name)),
            ("Description", Value::str(description)),
            ("Parameters", parameters),
        ],
        fj.clone(),
    );
    let kind = t["type"].as_str().unwrap_or("function");
    Value::object(
        vec![("Type", Value::str(kind)), ("Function", function)],
        format!(
            "{{\"type\":{},\"function\":{fj}}}",
            go_json(&Json::from(kind))
        ),
    )
}

/// Ollama's `api.ToolProperty`: its type prints as the one name (or the list).
fn property(v: &Json) -> (Value, String) {
    let ty = match &v["type"] {
        Json::String(s) => (Value::str(s.clone()), go_json(&Json::from(s.as_str()))),
        Json::Array(a) => {
            let names: Vec<&str> = a.iter().filter_map(|x| x.as_str()).collect();
            (
                Value::str(format!("[{}]", names.join(" "))),
                go_json(&v["type"]),
            )
        }
        _ => (Value::str(""), String::new()),
    };
    let description = v["description"].as_str().unwrap_or("");
    let mut json = String::from("{");
    let mut parts = Vec::new();
    if !ty.1.is_empty() {
        parts.push(format!("\"type\":{}", ty.1));
    }
    if !v["items"].is_null() {
        parts.push(format!("\"items\":{}", go_json(&v["items"])));
    }
    if !description.is_empty() {
        parts.push(format!(
            "\"description\":{}",
            go_json(&Json::from(description))
        ));
    }
    if v["enum"].is_array() {
        parts.push(format!("\"enum\":{}", go_json(&v["enum"])));
    }
    json.push_str(&parts.join(","));
    json.push('}');
    let value = Value::object(
        vec![
            ("Type", ty.0),
            ("Items", Value::from_json(&v["items"])),
            ("Description", Value::str(description)),
            ("Enum", Value::from_json(&v["enum"])),
        ],
        json.clone(),
    );
    (value, json)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::{ToolCallFunction, ToolCallMessage};

    #[test]
    fn system_layer_applies_only_without_a_system_message() {
        let t = OllamaTemplate::new(
            "{{ range .Messages }}[{{ .Role }}:{{ .Content }}]{{ end }}",
            Some("be brief"),
        )
        .unwrap();
        let user = [ChatMessage::new("user", "hi")];
        assert_eq!(t.render(&user, None).unwrap(), "[system:be brief][user:hi]");
        let own = [
            ChatMessage::new("system", "mine"),
            ChatMessage::new("user", "hi"),
        ];
        assert_eq!(t.render(&own, None).unwrap(), "[system:mine][user:hi]");
    }

    #[test]
    fn runs_of_one_role_merge_and_systems_collect() {
        let t = OllamaTemplate::new(
            "{{ .System }}|{{ range .Messages }}[{{ .Content }}]{{ end }}",
            None,
        )
        .unwrap();
        let msgs = [
            ChatMessage::new("system", "a"),
            ChatMessage::new("user", "x"),
            ChatMessage::new("user", "y"),
            ChatMessage::new("system", "b"),
        ];
        assert_eq!(t.render(&msgs, None).unwrap(), "a\n\nb|[a][x\n\ny][b]");
    }

    #[test]
    fn legacy_templates_render_one_exchange_at_a_time() {
        let t = OllamaTemplate::new(
            "{{ if .System }}<s>{{ .System }}</s>{{ end }}<u>{{ .Prompt }}</u><a>{{ .Response }}</a>",
            None,
        )
        .unwrap();
        let msgs = [
            ChatMessage::new("system", "S"),
            ChatMessage::new("user", "1"),
            ChatMessage::new("assistant", "r1"),
            ChatMessage::new("user", "2"),
        ];
        assert_eq!(
            t.render(&msgs, None).unwrap(),
            "<s>S</s><u>1</u><a>r1</a><u>2</u><a>"
        );
    }

    #[test]
    fn tools_and_calls_print_as_ollama_prints_them() {
        let t = OllamaTemplate::new(
            "{{ range .Tools }}{{ .Function.Name }}({{ range $n, $p := .Function.Parameters.Properties }}{{ $n }}:{{ $p.Type }} {{ end }}){{ .Function }}{{ end }}|{{ range .Messages }}{{ range .ToolCalls }}{{ .Function.Name }}{{ .Function.Arguments }}{{ end }}{{ end }}",
            None,
        )
        .unwrap();
        let tools = serde_json::json!([{"type": "function", "function": {"name": "get_weather", "description": "Weather <now>",
            "parameters": {"type": "object", "required": ["city"], "properties": {"unit": {"type": "string", "enum": ["c", "f"]}, "city": {"type": "string", "description": "City"}}}}}]);
        let mut call = ChatMessage::new("assistant", "");
        call.tool_calls.push(ToolCallMessage {
            id: "c1".into(),
            kind: "function".into(),
            function: ToolCallFunction {
                name: "get_weather".into(),
                arguments: serde_json::json!({"city": "Paris", "unit": "c"}),
            },
        });
        let out = t
            .render(&[ChatMessage::new("user", "hi"), call], Some(&tools))
            .unwrap();
        assert_eq!(
            out,
            "get_weather(city:string unit:string ){\"name\":\"get_weather\",\"description\":\"Weather \\u003cnow\\u003e\",\"parameters\":{\"type\":\"object\",\"required\":[\"city\"],\"properties\":{\"city\":{\"type\":\"string\",\"description\":\"City\"},\"unit\":{\"type\":\"string\",\"enum\":[\"c\",\"f\"]}}}}|get_weather{\"city\":\"Paris\",\"unit\":\"c\"}"
        );
    }
}
