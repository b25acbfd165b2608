//! The XML call form of Qwen3-Coder and Qwen 3.5 ([`CallBody::Xml`]), inside a
//! `<tool_call>` block:
//!
//! ```text
//! <function=get_weather>
//! <parameter=city>
//! Paris
//! </parameter>
//! <parameter=days>
//! 3
//! </parameter>
//! </function>
//! ```
//!
//! As the models' templates render earlier calls: a string value is written raw, any
//! other value as JSON (Qwen 3.5's template writes booleans `True`/`False`, Python's
//! spelling, which is read too). A value is read back typed by its parameter's schema
//! ([`typed`]); [`grammar`] holds forced calls to the form; [`Reader`] reads a call
//! from text that may still be arriving, for both the parser and the stream.
//!
//! [`CallBody::Xml`]: crate::chat::CallBody::Xml

pub(crate) mod grammar;
mod reader;

use serde_json::Value;

pub(crate) use reader::{Event, Reader};

use super::{ToolCall, ToolDef, ToolSet};

pub(crate) const FUNCTION_OPEN: &str = "<function=";
pub(crate) const FUNCTION_CLOSE: &str = "</function>";
pub(crate) const PARAM_OPEN: &str = "<parameter=";
pub(crate) const PARAM_CLOSE: &str = "</parameter>";

/// The schema of `tool`'s parameter `key`, if its parameters name it.
fn property<'a>(tool: &'a ToolDef, key: &str) -> Option<&'a Value> {
    tool.parameters.get("properties")?.get(key)
}

/// Whether a value under `schema` is only ever a string (so it is written raw).
pub(crate) fn is_string_only(schema: &Value) -> bool {
    let all_strings = |v: &Value| v.as_array().is_some_and(|a| a.iter().all(Value::is_string));
    match schema.get("type") {
        Some(Value::String(t)) => t == "string",
        Some(_) => false,
        None => {
            schema.get("const").is_some_and(Value::is_string)
                || schema.get("enum").is_some_and(all_strings)
        }
    }
}

/// The value of `tool`'s parameter `key` as written `raw` (the newlines around it
/// already taken off): raw text for a string parameter or one the schema does not
/// name, else JSON (Python's `True`, `False` and `None` too), else the text.
pub(crate) fn typed(tool: &ToolDef, key: &str, raw: &str) -> Value {
    let Some(schema) = property(tool, key) else {
        return Value::String(raw.to_string());
    };
    if is_string_only(schema) {
        return Value::String(raw.to_string());
    }
    match raw.trim() {
        "True" => Value::Bool(true),
        "False" => Value::Bool(false),
        "None" => Value::Null,
        t => serde_json::from_str(t).unwrap_or_else(|_| Value::String(raw.to_string())),
    }
}

/// Why an XML call was not read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum XmlCallError {
    /// The text is not the XML form (or is cut off before `</function>`).
    Malformed(String),
    /// A tool that was not offered.
    UnknownTool(String),
    /// A required parameter is missing.
    Missing { tool: String, parameter: String },
}

impl std::fmt::Display for XmlCallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            XmlCallError::Malformed(why) => write!(f, "not an XML tool call: {why}"),
            XmlCallError::UnknownTool(n) => write!(f, "tool {n:?} was not offered"),
            XmlCallError::Missing { tool, parameter } => {
                write!(
                    f,
                    "tool {tool}: the required parameter {parameter:?} is missing"
                )
            }
        }
    }
}

/// The call a `<tool_call>` block's inside holds in the XML form.
pub(crate) fn read_call(inner: &str, set: &ToolSet) -> Result<ToolCall, XmlCallError> {
    let mut r = Reader::default();
    let mut name = None;
    let mut args = serde_json::Map::new();
    for e in r.push(inner)? {
        match e {
            Event::Name(n) => {
                if set.get(&n).is_none() {
                    return Err(XmlCallError::UnknownTool(n));
                }
                name = Some(n);
            }
            Event::Param(key, raw) => {
                let tool = set.get(name.as_deref().unwrap_or_default());
                let value = match tool {
                    Some(t) => typed(t, &key, &raw),
                    None => Value::String(raw),
                };
                args.insert(key, value);
            }
            Event::End => {}
        }
    }
    let (Some(name), true) = (name, r.is_done()) else {
        return Err(XmlCallError::Malformed(format!(
            "no {FUNCTION_CLOSE} closes the call"
        )));
    };
    let tool = set.get(&name).expect("checked when the name was read");
    let required = tool.parameters.get("required").and_then(Value::as_array);
    for p in required.into_iter().flatten().filter_map(Value::as_str) {
        if !args.contains_key(p) {
            return Err(XmlCallError::Missing {
                tool: name,
                parameter: p.to_string(),
            });
        }
    }
    Ok(ToolCall::new(name, Value::Object(args)))
}

/// A parameter as JSON arguments text: `"key": value`.
pub(crate) fn member_text(key: &str, value: &Value) -> String {
    format!(
        "{}: {value}",
        serde_json::to_string(key).expect("a string serializes")
    )
}

#[cfg(test)]
mod model_tests;

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::{parse, ToolChoice, ToolDef, ToolSet};
    use super::*;
    use crate::chat::CallConvention;

    pub(super) fn weather() -> ToolDef {
        let params = json!({"type": "object", "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer"},
            "metric": {"type": "boolean"},
            "where": {"type": "object"},
            "unit": {"enum": ["c", "f"]}},
            "required": ["city", "days"]});
        ToolDef::new("get_weather", None, Some(params)).unwrap()
    }

    fn set() -> std::sync::Arc<ToolSet> {
        ToolSet::new(vec![weather()], ToolChoice::Auto, true)
            .unwrap()
            .unwrap()
    }

    fn call(params: &[(&str, &str)]) -> String {
        let mut s = String::from("<tool_call>\n<function=get_weather>\n");
        for (k, v) in params {
            s.push_str(&format!("<parameter={k}>\n{v}\n</parameter>\n"));
        }
        s + "</function>\n</tool_call>"
    }

    #[test]
    fn values_are_typed_by_their_schema() {
        let text = call(&[
            ("city", "Saint-\nÉtienne < Lyon"),
            ("days", "3"),
            ("metric", "True"),
            ("where", "{\"lat\": 45.4}"),
            ("unit", "c"),
            ("extra", "12"),
        ]);
        let p = parse(&format!("Let me look.\n\n{text}"), &set());
        assert_eq!(p.content.as_deref(), Some("Let me look."));
        assert_eq!(p.calls.len(), 1);
        assert_eq!(
            p.calls[0].arguments,
            json!({"city": "Saint-\nÉtienne < Lyon", "days": 3, "metric": true,
                "where": {"lat": 45.4}, "unit": "c", "extra": "12"})
        );
        // A value a typed parameter cannot read stays the text it was.
        let p = parse(&call(&[("city", "3"), ("days", "three")]), &set());
        assert_eq!(p.calls[0].arguments, json!({"city": "3", "days": "three"}));
    }

    #[test]
    fn several_calls_and_what_is_not_a_call() {
        let s = set();
        let one = call(&[("city", "Paris"), ("days", "1")]);
        let two = call(&[("city", "</function>"), ("days", "2")]);
        let p = parse(&format!("{one}\n{two}"), &s);
        assert_eq!(p.content, None);
        let days: Vec<_> = p
            .calls
            .iter()
            .map(|c| c.arguments["days"].clone())
            .collect();
        assert_eq!(days, [json!(1), json!(2)]);
        assert_eq!(p.calls[1].arguments["city"], "</function>");
        // Missing a required parameter, an unknown tool, cut off: no call, no panic.
        let missing = call(&[("city", "Paris")]);
        assert_eq!(
            read_call(&missing["<tool_call>".len()..], &s),
            Err(XmlCallError::Missing {
                tool: "get_weather".into(),
                parameter: "days".into()
            })
        );
        assert!(parse(&missing, &s).calls.is_empty());
        let unknown = one.replace("get_weather", "rm_rf");
        assert_eq!(
            read_call(&unknown["<tool_call>".len()..], &s),
            Err(XmlCallError::UnknownTool("rm_rf".into()))
        );
        // Cut anywhere before `</function>` is whole (a call whose close tag alone is
        // missing is read, as a Hermes block's is).
        for cut in 1..one.find(FUNCTION_CLOSE).unwrap() + FUNCTION_CLOSE.len() {
            let p = parse(&one[..cut], &s);
            assert!(p.calls.is_empty(), "{cut}");
        }
        let e = read_call("<function=get_weather>\n<parameter=city>\nParis", &s).unwrap_err();
        assert!(e.to_string().contains("</function>"), "{e}");
    }

    /// The assistant turn of the Qwen3-Coder / Qwen 3.5 template as documented (the
    /// real one is on no registry): earlier calls written back in the XML form.
    const HISTORY_TEMPLATE: &str = r#"{%- for message in messages %}
{%- if message.role == "assistant" %}{{- '<|im_start|>assistant' }}
{%- if message.content %}{{- '\n' + message.content }}{% endif %}
{%- for tool_call in message.tool_calls %}
{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}
{{- '\n<tool_call>\n<function=' + tool_call.name + '>\n' }}
{%- for args_name, args_value in tool_call.arguments|items %}
{{- '<parameter=' + args_name + '>\n' }}
{%- set args_value = args_value | tojson | safe if args_value is mapping or (args_value is sequence and args_value is not string) else args_value | string %}
{{- args_value }}
{{- '\n</parameter>\n' }}
{%- endfor %}
{{- '</function>\n</tool_call>' }}
{%- endfor %}
{{- '<|im_end|>\n' }}
{%- else %}{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }}
{%- endif %}
{%- endfor %}"#;

    #[test]
    fn history_written_by_the_template_reads_back_as_the_same_calls() {
        use crate::chat::{
            ChatMessage, ChatTemplate, RenderOptions, ToolCallFunction, ToolCallMessage,
        };
        let args = json!({"city": "Lyon\n< Paris", "days": 3, "metric": true,
            "where": {"lat": 45.7, "tags": ["a", "b"]}, "unit": "f"});
        let mut turn = ChatMessage::new("assistant", "Looking.");
        turn.tool_calls = vec![ToolCallMessage {
            id: "call_1".into(),
            kind: "function".into(),
            function: ToolCallFunction {
                name: "get_weather".into(),
                arguments: args.clone(),
            },
        }];
        let t = ChatTemplate::new(HISTORY_TEMPLATE).unwrap();
        let text = t
            .render(
                &[ChatMessage::new("user", "Weather?"), turn],
                &RenderOptions::default(),
            )
            .unwrap();
        assert_eq!(
            CallConvention::of_template(Some(HISTORY_TEMPLATE)),
            CallConvention::QwenXml
        );
        let reply = text
            .split("<|im_start|>assistant\n")
            .nth(1)
            .and_then(|r| r.strip_suffix("<|im_end|>\n"))
            .unwrap_or_else(|| panic!("{text}"));
        assert!(
            reply.contains("<function=get_weather>\n<parameter=city>\nLyon\n< Paris\n</parameter>\n<parameter=days>\n3\n</parameter>"),
            "{reply}"
        );
        let p = parse(reply, &set());
        assert_eq!(p.content.as_deref(), Some("Looking."));
        assert_eq!(p.calls.len(), 1);
        assert_eq!(p.calls[0].arguments, args);
    }

    #[test]
    fn string_only_schemas() {
        for (schema, want) in [
            (json!({"type": "string"}), true),
            (json!({"enum": ["a", "b"]}), true),
            (json!({"const": "a"}), true),
            (json!({"enum": ["a", 1]}), false),
            (json!({"type": ["string", "null"]}), false),
            (json!({"type": "integer"}), false),
            (json!({}), false),
        ] {
            assert_eq!(is_string_only(&schema), want, "{schema}");
        }
    }
}
