//! The grammar of a forced tool call, in the Hermes convention the parser reads:
//!
//! ```text
//! <tool_call>
//! {"name": "get_weather", "arguments": <get_weather's parameters schema>}
//! </tool_call>
//! ```
//!
//! An alternation over the callable tools (all of them for `required`/`any`, the
//! named one otherwise), each tool's arguments lowered from its own schema into the
//! same grammar; one call, or one or more separated by a newline when parallel
//! calls are allowed.

use std::time::Instant;

use llamay_constrain::grammar::{GrammarBuilder, Symbol};
use llamay_constrain::schema::lower::lower_into;
use llamay_constrain::schema::{Report, ReportEntry};
use serde_json::json;

use super::ToolSet;
use crate::constraint::CompiledSchema;
use crate::error::Error;

/// What opens a call.
pub(crate) const OPEN: &str = "<tool_call>\n";
/// What closes a call.
pub(crate) const CLOSE: &str = "\n</tool_call>";
/// What goes between two calls.
pub(crate) const BETWEEN: &str = "\n";
/// Most calls one forced answer may hold: a model that keeps calling stops here.
pub(crate) const MAX_PARALLEL_CALLS: u32 = 8;

/// The text of a call's head, up to its arguments.
pub(crate) fn head(name: &str) -> String {
    let name = serde_json::to_string(name).expect("a string serializes");
    format!("{{\"name\": {name}, \"arguments\": ")
}

/// Compiles the call grammar of a forced [`ToolSet`], with the tools' not-enforced
/// reports merged (each location prefixed by its tool).
pub(crate) fn compile(set: &ToolSet) -> Result<CompiledSchema, Error> {
    let t0 = Instant::now();
    let mut b = GrammarBuilder::new();
    let mut alts = Vec::new();
    let mut report = Report::default();
    let mut key_tools = Vec::new();
    for t in set.callable() {
        let args = lower_into(&mut b, &t.schema)
            .map_err(|e| Error::refusal(format!("tool {}: {e}", t.name)).at("tools"))?;
        alts.push(vec![Symbol::lit(head(&t.name)), args]);
        report
            .entries
            .extend(t.schema.report.entries.iter().map(|e| ReportEntry {
                location: format!("tool {} {}", t.name, e.location),
                ..e.clone()
            }));
        key_tools.push(json!([t.name, t.parameters]));
    }
    let call = b.rule(
        "tool_call",
        vec![vec![
            Symbol::lit(OPEN),
            Symbol::alt(alts),
            Symbol::lit(format!("}}{CLOSE}")),
        ]],
    );
    let root = if set.parallel {
        let more = Symbol::seq(vec![Symbol::lit(BETWEEN), Symbol::rule(call)]);
        b.rule(
            "tool_calls",
            vec![vec![
                Symbol::rule(call),
                Symbol::repeat(more, 0, Some(MAX_PARALLEL_CALLS - 1)),
            ]],
        )
    } else {
        call
    };
    let grammar = b
        .build(root)
        .map_err(|e| Error::bad_request(format!("the tool call grammar: {e}")))?;
    Ok(CompiledSchema {
        key: json!({"tools": key_tools, "parallel": set.parallel}).to_string(),
        grammar,
        report,
        compile_time: t0.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use llamay_constrain::{Constraint, Vocabulary};
    use serde_json::json;

    use super::super::{ToolChoice, ToolDef, ToolSet};

    fn byte_vocab() -> Arc<Vocabulary> {
        let mut toks: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        toks.push(b"</s>".to_vec());
        Arc::new(Vocabulary::new(toks, &[256], &[]))
    }

    fn tools() -> Vec<ToolDef> {
        let weather = json!({"type": "object",
            "properties": {"location": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
            "required": ["location", "unit"]});
        let time = json!({"type": "object", "properties": {"tz": {"type": "string"}}});
        vec![
            ToolDef::new("get_weather", None, Some(weather)).unwrap(),
            ToolDef::new("get_time", None, Some(time)).unwrap(),
        ]
    }

    fn walks(set: &ToolSet, text: &str) -> bool {
        let g = &set.forced_constraint().unwrap().grammar;
        let c = Constraint::from_grammar(g, byte_vocab()).unwrap();
        let mut m = c.matcher();
        text.bytes().all(|b| m.commit_bytes(&[b]).is_ok()) && m.is_accepting()
    }

    const PARIS: &str = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\", \"unit\": \"c\"}}\n</tool_call>";
    const TIME: &str =
        "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}\n</tool_call>";

    #[test]
    fn required_takes_any_tool_and_parallel_calls() {
        let set = ToolSet::new(tools(), ToolChoice::Required, true)
            .unwrap()
            .unwrap();
        assert!(walks(&set, PARIS));
        assert!(walks(&set, TIME));
        assert!(walks(&set, &format!("{PARIS}\n{TIME}")));
        assert!(!walks(&set, ""));
        assert!(!walks(&set, &PARIS.replace("\"c\"", "\"k\"")));
        assert!(!walks(&set, &PARIS.replace("get_weather", "get_news")));
        assert!(!walks(&set, &PARIS.replace(", \"unit\": \"c\"", "")));
    }

    #[test]
    fn named_and_single_calls_are_held_to_their_choice() {
        let set = ToolSet::new(tools(), ToolChoice::Named("get_time".into()), false)
            .unwrap()
            .unwrap();
        assert!(walks(&set, TIME));
        assert!(!walks(&set, PARIS));
        assert!(!walks(&set, &format!("{TIME}\n{TIME}")));
    }

    #[test]
    fn arguments_are_always_an_object() {
        let t = ToolDef::new("f", None, Some(json!({}))).unwrap();
        let set = ToolSet::new(vec![t], ToolChoice::Required, false)
            .unwrap()
            .unwrap();
        let call = |args: &str| {
            format!("<tool_call>\n{{\"name\": \"f\", \"arguments\": {args}}}\n</tool_call>")
        };
        assert!(walks(&set, &call("{\"any\": [1]}")));
        assert!(!walks(&set, &call("5")));
        assert!(ToolDef::new("g", None, Some(json!({"type": "string"}))).is_err());
    }

    #[test]
    fn refusals_and_choices() {
        let bad = json!({"type": "object", "properties": {"a": {"not": {}}}});
        let e = ToolDef::new("lookup", None, Some(bad)).unwrap_err();
        assert!(e.refusal);
        assert!(
            e.message
                .starts_with("tool lookup: properties.a uses \"not\""),
            "{}",
            e.message
        );
        assert!(ToolSet::new(tools(), ToolChoice::None, true)
            .unwrap()
            .is_none());
        assert!(ToolSet::new(tools(), ToolChoice::Named("nope".into()), true).is_err());
        let auto = ToolSet::new(tools(), ToolChoice::Auto, true)
            .unwrap()
            .unwrap();
        assert!(auto.forced_constraint().is_none());
    }
}
