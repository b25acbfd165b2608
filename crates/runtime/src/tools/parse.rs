//! Reading calls back out of what the model wrote.
//!
//! A call is a `<tool_call>` … `</tool_call>` block holding
//! `{"name": …, "arguments": {…}}` (`parameters` is read as well, and arguments
//! written as a JSON string holding an object), or the XML form `<function=NAME>`
//! … `</function>` (see [`xml`](super::xml)). Every block is taken out of the
//! text, whether or not it held a call the caller can use: a call to a tool not
//! offered is dropped, never left in `content`. A block cut off by the token
//! limit is dropped too.
//!
//! Small models often write the call without its tags: the whole answer is
//! `{"name": "get_weather", "arguments": {…}}` (or a list of such objects, or the
//! same in a ```json fence). When nothing else was written and every object names
//! an offered tool, that answer is the call, as Ollama reads it; any other JSON answer
//! stays content.

use serde_json::Value;

use super::{gemma, xml, ToolCall, ToolSet};
use crate::chat::MARKERS;

pub(super) const OPEN_TAG: &str = "<tool_call>";
pub(super) const CLOSE_TAG: &str = "</tool_call>";

/// A kind of call block, by its tags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Block {
    /// `<tool_call>` … `</tool_call>`: a JSON call or the XML form.
    Tool,
    /// Gemma 4's `<|tool_call>` … `<tool_call|>`.
    Gemma,
}

impl Block {
    pub(super) const ALL: [Block; 2] = [Block::Tool, Block::Gemma];

    pub(super) fn open(self) -> &'static str {
        match self {
            Block::Tool => OPEN_TAG,
            Block::Gemma => gemma::OPEN,
        }
    }

    pub(super) fn close(self) -> &'static str {
        match self {
            Block::Tool => CLOSE_TAG,
            Block::Gemma => gemma::CLOSE,
        }
    }

    /// The call a block's inside holds, if it holds one the caller can use.
    fn read(self, inner: &str, set: &ToolSet) -> Option<ToolCall> {
        match self {
            Block::Tool => read_call(inner, set),
            Block::Gemma => gemma::read_call(inner, set)
                .map_err(|e| tracing::debug!(error = %e, "a tool call was not read"))
                .ok(),
        }
    }
}

/// Where the first block opens in `text`, and which kind it is.
pub(super) fn next_block(text: &str) -> Option<(usize, Block)> {
    Block::ALL
        .iter()
        .filter_map(|b| text.find(b.open()).map(|at| (at, *b)))
        .min_by_key(|(at, _)| *at)
}

/// How many bytes at the end of `text` could be the start of a block's open tag.
pub(super) fn cut_open(text: &str) -> usize {
    Block::ALL
        .iter()
        .map(|b| {
            let open = b.open();
            (1..open.len())
                .rev()
                .find(|&n| text.ends_with(&open[..n]))
                .unwrap_or(0)
        })
        .max()
        .unwrap_or(0)
}

/// What a generation's text holds.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Parsed {
    /// The text outside calls; `None` when there is none (or only whitespace
    /// around calls).
    pub content: Option<String>,
    pub calls: Vec<ToolCall>,
}

/// Splits `text` into content and the calls to tools `set` offers. Under a forced
/// choice everything the model wrote belongs to calls, so there is no content;
/// without parallel calls only the first call counts.
pub(crate) fn parse(text: &str, set: &ToolSet) -> Parsed {
    let mut p = parse_text(without_marker(text), set);
    if set.is_forced() {
        p.content = None;
    }
    if !set.parallel {
        p.calls.truncate(1);
    }
    p
}

/// The text after a control-token marker that opens calls (Mistral's
/// `[TOOL_CALLS]`, Llama's `<|python_tag|>`), when the answer starts with one.
fn without_marker(text: &str) -> &str {
    let t = text.trim_start();
    MARKERS
        .iter()
        .find_map(|m| t.strip_prefix(m))
        .unwrap_or(text)
}

fn parse_text(text: &str, set: &ToolSet) -> Parsed {
    if next_block(text).is_none() {
        if let Some(calls) = bare_calls(text, set) {
            return Parsed {
                content: None,
                calls,
            };
        }
    }
    let mut content = String::new();
    let mut calls = Vec::new();
    let mut blocks = 0;
    let mut rest = text;
    while let Some((start, block)) = next_block(rest) {
        blocks += 1;
        content.push_str(&rest[..start]);
        let body = &rest[start + block.open().len()..];
        let (inner, after) = match body.find(block.close()) {
            Some(end) => (&body[..end], &body[end + block.close().len()..]),
            None => (body, ""),
        };
        if let Some(c) = block.read(inner, set) {
            calls.push(c);
        }
        rest = after;
    }
    // A tag cut off by the token limit is the start of a call, not text.
    let cut = cut_open(rest);
    content.push_str(&rest[..rest.len() - cut]);
    let blocks = blocks + usize::from(cut > 0);
    let content = if blocks == 0 {
        (!content.is_empty()).then_some(content)
    } else {
        let t = content.trim();
        (!t.is_empty() && !is_fence(t)).then(|| t.to_string())
    };
    Parsed { content, calls }
}

/// Whether what is left around calls is only the code fence the model wrapped them
/// in (```` ``` ````, ```` ```xml ````): formatting of the calls, not content.
fn is_fence(t: &str) -> bool {
    t.split_whitespace().all(|w| {
        w.strip_prefix("```")
            .is_some_and(|lang| lang.bytes().all(|b| b.is_ascii_alphanumeric()))
    })
}

/// An answer that is nothing but calls written as JSON (see the module's comment).
fn bare_calls(text: &str, set: &ToolSet) -> Option<Vec<ToolCall>> {
    let mut t = text.trim();
    if let Some(inner) = t.strip_prefix("```json").or_else(|| t.strip_prefix("```")) {
        t = inner.strip_suffix("```")?.trim();
    }
    if !(t.starts_with('{') || t.starts_with('[')) {
        return None;
    }
    let v: Value = serde_json::from_str(t).ok()?;
    let objects = match v {
        Value::Array(items) if !items.is_empty() => items,
        v @ Value::Object(_) => vec![v],
        _ => return None,
    };
    // Only an object shaped like a call (its arguments named) is read as one.
    let shaped = |o: &Value| o.get("arguments").or_else(|| o.get("parameters")).is_some();
    if !objects.iter().all(shaped) {
        return None;
    }
    objects.iter().map(|o| call_of(o, set)).collect()
}

fn read_call(inner: &str, set: &ToolSet) -> Option<ToolCall> {
    if inner.trim_start().starts_with(xml::FUNCTION_OPEN) {
        return xml::read_call(inner, set)
            .map_err(|e| tracing::debug!(error = %e, "a tool call was not read"))
            .ok();
    }
    let v: Value = serde_json::Deserializer::from_str(inner.trim_start())
        .into_iter::<Value>()
        .next()?
        .ok()?;
    call_of(&v, set)
}

/// `{"name": …, "arguments" | "parameters": {…} or "{…}"}` naming an offered tool.
fn call_of(v: &Value, set: &ToolSet) -> Option<ToolCall> {
    let name = v.get("name")?.as_str()?;
    set.get(name)?;
    let arguments = match v.get("arguments").or_else(|| v.get("parameters")) {
        None | Some(Value::Null) => Value::Object(Default::default()),
        Some(a @ Value::Object(_)) => a.clone(),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s).ok()? {
            a @ Value::Object(_) => a,
            _ => return None,
        },
        Some(_) => return None,
    };
    Some(ToolCall::new(name, arguments))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::{ToolChoice, ToolDef};
    use super::*;

    fn set() -> std::sync::Arc<ToolSet> {
        set_with(true)
    }

    fn set_with(parallel: bool) -> std::sync::Arc<ToolSet> {
        let t = ToolDef::new("get_weather", None, None).unwrap();
        ToolSet::new(vec![t], ToolChoice::Auto, parallel)
            .unwrap()
            .unwrap()
    }

    #[test]
    fn without_parallel_calls_only_the_first_counts() {
        let call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>";
        let two = format!("{call}\n{call}");
        assert_eq!(parse(&two, &set_with(true)).calls.len(), 2);
        assert_eq!(parse(&two, &set_with(false)).calls.len(), 1);
    }

    #[test]
    fn calls_come_out_and_content_keeps_the_rest() {
        let s = set();
        let p = parse(
            "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Lyon\\\"}\"}\n</tool_call>",
            &s,
        );
        assert_eq!(p.content.as_deref(), Some("Let me check."));
        assert_eq!(p.calls.len(), 2);
        assert_eq!(p.calls[0].arguments, json!({"city": "Paris"}));
        assert_eq!(p.calls[1].arguments, json!({"city": "Lyon"}));
        assert_ne!(p.calls[0].id, p.calls[1].id);
        for c in &p.calls {
            assert!(c.id.starts_with("call_") && c.id.len() == 17, "{}", c.id);
            assert!(c.id[5..].bytes().all(|b| b.is_ascii_hexdigit()));
        }
    }

    #[test]
    fn unknown_tools_broken_and_cut_blocks_never_reach_content() {
        let s = set();
        let p = parse(
            "<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call>",
            &s,
        );
        assert_eq!(p, Parsed::default());
        let p = parse("<tool_call>\n{\"name\": \"get_wea", &s);
        assert_eq!(p, Parsed::default());
        let p = parse("Let me see. <tool", &s);
        assert_eq!(p.content.as_deref(), Some("Let me see."));
        let p = parse("a < b", &s);
        assert_eq!(p.content.as_deref(), Some("a < b"));
        let p = parse("<tool_call>not json</tool_call> ok", &s);
        assert_eq!(p.content.as_deref(), Some("ok"));
        assert!(p.calls.is_empty());
        let fenced =
            "```\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>\n```";
        let p = parse(fenced, &s);
        assert_eq!((p.content, p.calls.len()), (None, 1));
        let p = parse("``` ```", &s);
        assert_eq!(
            p.content.as_deref(),
            Some("``` ```"),
            "no call: the text is the answer"
        );
        let p = parse("  plain text  ", &s);
        assert_eq!(p.content.as_deref(), Some("  plain text  "));
        assert_eq!(parse("", &s), Parsed::default());
    }

    #[test]
    fn mistral_and_llama_markers_open_calls() {
        let s = set();
        let p = parse(
            "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]",
            &s,
        );
        assert_eq!(p.content, None);
        assert_eq!(p.calls[0].arguments, json!({"city": "Paris"}));
        let p = parse(
            "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}",
            &s,
        );
        assert_eq!(p.calls[0].arguments, json!({"city": "Oslo"}));
        // A marker in the middle of prose is prose.
        let p = parse("Use [TOOL_CALLS] to call.", &s);
        assert_eq!(p.content.as_deref(), Some("Use [TOOL_CALLS] to call."));
    }

    #[test]
    fn a_bare_json_call_is_a_call() {
        let s = set();
        let p = parse(
            " {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}\n",
            &s,
        );
        assert_eq!(p.content, None);
        assert_eq!(p.calls.len(), 1);
        assert_eq!(p.calls[0].arguments, json!({"city": "Paris", "unit": "c"}));
        let fenced = "```json\n[{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Lyon\"}}, {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}]\n```";
        let p = parse(fenced, &s);
        assert_eq!(p.calls.len(), 2);
        assert_eq!(p.calls[1].arguments, json!({"city": "Oslo"}));
        // JSON that is not a call to an offered tool stays the answer.
        for text in [
            "{\"name\": \"rm_rf\", \"arguments\": {}}",
            "{\"city\": \"Paris\"}",
            "[1, 2]",
            "{\"name\": \"get_weather\", \"arguments\": {}} and more",
            "[]",
            "{\"name\": \"get_weather\"}",
        ] {
            let p = parse(text, &s);
            assert!(p.calls.is_empty(), "{text}");
            assert_eq!(p.content.as_deref(), Some(text), "{text}");
        }
    }
}
