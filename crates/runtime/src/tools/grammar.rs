//! The grammars of tool calls, in the model's own [`Convention`]. Hermes, for one:
//!
//! ```text
//! <tool_call>
//! {"name": "get_weather", "arguments": <get_weather's parameters schema>}
//! </tool_call>
//! ```
//!
//! A call is an alternation over the callable tools (all of them for `required`/`any`,
//! the named one otherwise), each tool's arguments lowered from its own schema into the
//! same grammar. Three languages are built from it:
//! - [`forced`]: `required` or a named tool: one call, or up to [`MAX_PARALLEL_CALLS`]
//!   when parallel calls are allowed;
//! - [`beside`]: `auto` with a response constraint: those calls, or an answer in the
//!   response's own language, whichever the model starts;
//! - [`one_call`]: strict `auto`: a single call from its opener on, which the decoder
//!   switches to when the model opens one in free text.

use std::sync::Arc;
use std::time::Instant;

use llamay_constrain::{Grammar, GrammarBuilder, ReportEntry, RuleId, SchemaReport, Symbol};
use serde_json::json;

use super::{gemma, xml, ToolSet};
use crate::chat::{CallBody, CallConvention as Convention, BARE_OPENER};
use crate::constraint::SchemaGrammar;
use crate::error::Error;

/// Most calls one forced answer may hold: a model that keeps calling stops here.
pub(crate) const MAX_PARALLEL_CALLS: u32 = 8;

/// The text of a call's head, up to its arguments.
pub(crate) fn head(name: &str, args_key: &str) -> String {
    let name = serde_json::to_string(name).expect("a string serializes");
    format!("{{\"name\": {name}, \"{args_key}\": ")
}

/// A grammar under construction with its call object rule (`{"name": …, "…": …}`), the
/// tools' reports merged (each location prefixed by its tool) and the cache key's parts.
struct Calls {
    b: GrammarBuilder,
    object: RuleId,
    report: SchemaReport,
    key: serde_json::Value,
    t0: Instant,
}

/// The calls of `set` with bodies in `body` (`args_key` naming a JSON body's
/// arguments).
fn calls(set: &ToolSet, body: CallBody, args_key: &str) -> Result<Calls, Error> {
    let t0 = Instant::now();
    let mut b = GrammarBuilder::new();
    let mut alts = Vec::new();
    let mut report = SchemaReport::default();
    let mut key_tools = Vec::new();
    for t in set.callable() {
        match body {
            CallBody::Json => {
                let args = t
                    .schema
                    .lower_into(&mut b)
                    .map_err(|e| Error::refusal(format!("tool {}: {e}", t.name)).at("tools"))?;
                alts.push(vec![
                    Symbol::lit(head(&t.name, args_key)),
                    args,
                    Symbol::lit("}"),
                ]);
            }
            CallBody::Xml => alts.push(vec![xml::grammar::call_body(&mut b, t)?]),
            CallBody::Gemma => alts.push(vec![gemma::grammar::call_body(&mut b, t)?]),
        }
        report
            .entries
            .extend(t.schema.report.entries.iter().map(|e| ReportEntry {
                location: format!("tool {} {}", t.name, e.location),
                ..e.clone()
            }));
        key_tools.push(json!([t.name, t.parameters]));
    }
    let object = b.rule("tool_call_object", vec![vec![Symbol::alt(alts)]]);
    Ok(Calls {
        b,
        object,
        report,
        key: json!({"tools": key_tools, "args": args_key, "body": format!("{body:?}")}),
        t0,
    })
}

impl Calls {
    /// The calls an answer may be in `conv`: one, or up to [`MAX_PARALLEL_CALLS`].
    fn answer(&mut self, conv: Convention, parallel: bool) -> RuleId {
        let f = conv.form();
        let object = Symbol::rule(self.object);
        let (unit, open, close) = if f.blocks {
            let block = self.b.rule(
                "tool_call",
                vec![vec![Symbol::lit(f.open), object, Symbol::lit(f.close)]],
            );
            (Symbol::rule(block), None, None)
        } else {
            (object, Some(f.open), Some(f.close))
        };
        let mut seq = Vec::new();
        seq.extend(open.map(Symbol::lit));
        seq.push(unit.clone());
        if parallel {
            let more = Symbol::seq(vec![Symbol::lit(f.between), unit]);
            seq.push(Symbol::repeat(more, 0, Some(MAX_PARALLEL_CALLS - 1)));
        }
        seq.extend(close.map(Symbol::lit));
        self.b.rule("tool_calls", vec![seq])
    }

    /// The grammar, cached under the tools and `key` (an uncacheable answer, whose
    /// key is empty, leaves the whole uncached).
    fn finish(self, root: RuleId, key: serde_json::Value) -> Result<SchemaGrammar, Error> {
        let grammar = self
            .b
            .build(root)
            .map_err(|e| Error::bad_request(format!("the tool call grammar: {e}")))?;
        let uncacheable = key.as_array().and_then(|k| k.last()) == Some(&json!(""));
        Ok(SchemaGrammar {
            key: match uncacheable {
                true => String::new(),
                false => json!({"calls": self.key, "as": key}).to_string(),
            },
            grammar: Arc::new(grammar),
            report: self.report,
            compile_time: self.t0.elapsed(),
        })
    }
}

/// The grammar of a forced choice: the output is calls, in `conv`.
pub(crate) fn forced(set: &ToolSet, conv: Convention) -> Result<SchemaGrammar, Error> {
    let f = conv.form();
    let mut c = calls(set, f.body, f.args_key)?;
    let root = c.answer(conv, set.parallel);
    c.finish(root, json!(["forced", conv.name(), set.parallel]))
}

/// `auto` beside a response constraint: calls in `conv`, or an answer in `answer`'s
/// language (its report joins the tools').
pub(crate) fn beside(
    set: &ToolSet,
    conv: Convention,
    answer: &Grammar,
    answer_key: &str,
    answer_report: &SchemaReport,
) -> Result<SchemaGrammar, Error> {
    let f = conv.form();
    let mut c = calls(set, f.body, f.args_key)?;
    let calls = c.answer(conv, set.parallel);
    let answer = c.b.import(answer);
    let root = c.b.rule(
        "calls_or_answer",
        vec![vec![Symbol::rule(calls)], vec![Symbol::rule(answer)]],
    );
    c.report
        .entries
        .extend(answer_report.entries.iter().cloned());
    c.report.quotes.extend(answer_report.quotes.iter().cloned());
    c.finish(
        root,
        json!(["beside", conv.name(), set.parallel, answer_key]),
    )
}

/// Where strict `auto` switches from free text to a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Opener {
    /// The convention's opener, anywhere in the answer (Hermes `<tool_call>`).
    Tag(&'static str),
    /// A bare JSON call that is the whole answer, from its first byte.
    Bare,
}

impl Opener {
    /// The text that opens the call.
    pub(crate) fn text(self) -> &'static str {
        match self {
            Opener::Tag(t) => t,
            Opener::Bare => BARE_OPENER,
        }
    }
}

/// Strict `auto`: from `opener` on (the opener included), one call in `conv`, or for
/// a list form the whole list.
pub(crate) fn one_call(
    set: &ToolSet,
    conv: Convention,
    opener: Opener,
) -> Result<SchemaGrammar, Error> {
    let f = conv.form();
    // A bare call is JSON in every convention.
    let body = match opener {
        Opener::Tag(_) => f.body,
        Opener::Bare => CallBody::Json,
    };
    let mut c = calls(set, body, f.args_key)?;
    let root = match opener {
        Opener::Tag(_) if f.blocks => c.b.rule(
            "tool_call",
            vec![vec![
                Symbol::lit(f.open),
                Symbol::rule(c.object),
                Symbol::lit(f.close),
            ]],
        ),
        Opener::Tag(tag) => {
            let list = c.answer(conv, set.parallel);
            c.b.rule(
                "tool_calls_after",
                vec![vec![Symbol::lit(tag), Symbol::rule(list)]],
            )
        }
        Opener::Bare => c.object,
    };
    c.finish(
        root,
        json!(["one", conv.name(), opener.text(), set.parallel]),
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use llamay_constrain::{Constraint, Vocabulary};
    use serde_json::json;

    use super::super::{ToolChoice, ToolDef, ToolSet};
    use super::*;
    use crate::chat::CallConvention as Convention;

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

    fn accepts(g: &Grammar, text: &str) -> bool {
        let c = Constraint::from_grammar(g, byte_vocab()).unwrap();
        let mut m = c.matcher();
        text.bytes().all(|b| m.commit_bytes(&[b]).is_ok()) && m.is_accepting()
    }

    fn walks(set: &ToolSet, text: &str) -> bool {
        accepts(&forced(set, Convention::Hermes).unwrap().grammar, text)
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
        assert!(!auto.is_forced());
    }

    #[test]
    fn each_family_is_forced_into_its_own_form() {
        let set = ToolSet::new(tools(), ToolChoice::Required, true)
            .unwrap()
            .unwrap();
        let llama = forced(&set, Convention::Llama3).unwrap().grammar;
        let call = "{\"name\": \"get_time\", \"parameters\": {\"tz\": \"UTC\"}}";
        assert!(accepts(&llama, call));
        assert!(accepts(&llama, &format!("{call}\n{call}")));
        assert!(!accepts(&llama, &call.replace("parameters", "arguments")));
        assert!(!accepts(&llama, TIME));
        let mistral = forced(&set, Convention::Mistral).unwrap().grammar;
        let m1 = "{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}";
        assert!(accepts(&mistral, &format!("[{m1}]")));
        assert!(accepts(&mistral, &format!("[{m1}, {m1}]")));
        assert!(!accepts(&mistral, m1));
        assert!(!accepts(&mistral, "[]"));
    }

    #[test]
    fn xml_calls_hold_each_value_to_its_schema() {
        let weather = json!({"type": "object", "properties": {
            "city": {"type": "string"}, "days": {"type": "integer"},
            "unit": {"enum": ["c", "f"]}, "at": {"type": "object",
            "properties": {"lat": {"type": "number"}}, "required": ["lat"]}},
            "required": ["city", "days"]});
        let tools = || {
            vec![
                ToolDef::new("get_weather", None, Some(weather.clone())).unwrap(),
                ToolDef::new("get_time", None, None).unwrap(),
            ]
        };
        let call = |params: &[(&str, &str)]| {
            let mut s = String::from("<tool_call>\n<function=get_weather>\n");
            for (k, v) in params {
                s.push_str(&format!("<parameter={k}>\n{v}\n</parameter>\n"));
            }
            s + "</function>\n</tool_call>"
        };
        let set = ToolSet::new(tools(), ToolChoice::Required, true)
            .unwrap()
            .unwrap();
        let g = forced(&set, Convention::QwenXml).unwrap().grammar;
        let paris = call(&[("city", "Paris\nor < Lyon"), ("days", "3")]);
        assert!(accepts(&g, &paris));
        let time = "<tool_call>\n<function=get_time>\n</function>\n</tool_call>";
        assert!(accepts(&g, time));
        assert!(accepts(&g, &format!("{paris}\n{time}")));
        let full = call(&[
            ("city", "P"),
            ("days", "-2"),
            ("unit", "f"),
            ("at", "{\"lat\": 1.5}"),
        ]);
        assert!(accepts(&g, &full));
        for bad in [
            call(&[("city", "Paris")]),
            call(&[("days", "3"), ("city", "Paris")]),
            call(&[("city", "Paris"), ("days", "three")]),
            call(&[("city", "a</parameter>b"), ("days", "3")]),
            call(&[("city", "P"), ("days", "3"), ("unit", "k")]),
            call(&[("city", "P"), ("days", "3"), ("at", "{}")]),
            call(&[("city", "P"), ("days", "3"), ("wind", "3")]),
            paris.replace("<function=get_weather>", "<function=get_news>"),
            paris.replace("\n</function>", "</function>"),
            PARIS.to_string(),
        ] {
            assert!(!accepts(&g, &bad), "{bad}");
        }
        let named = ToolSet::new(tools(), ToolChoice::Named("get_time".into()), false)
            .unwrap()
            .unwrap();
        let g = forced(&named, Convention::QwenXml).unwrap().grammar;
        assert!(accepts(&g, time));
        assert!(!accepts(&g, &paris) && !accepts(&g, &format!("{time}\n{time}")));
        // Strict `auto`: one call from the tag on; a bare call is still JSON.
        let auto = ToolSet::new(tools(), ToolChoice::Auto, true)
            .unwrap()
            .unwrap();
        let tag = one_call(&auto, Convention::QwenXml, Opener::Tag("<tool_call>"))
            .unwrap()
            .grammar;
        assert!(accepts(&tag, &paris) && !accepts(&tag, PARIS));
        let bare = one_call(&auto, Convention::QwenXml, Opener::Bare)
            .unwrap()
            .grammar;
        assert!(accepts(
            &bare,
            "{\"name\": \"get_time\", \"arguments\": {}}"
        ));
        // A name the form cannot write is refused by name.
        let odd = json!({"type": "object", "properties": {"a>b": {"type": "string"}}});
        let odd = ToolSet::new(
            vec![ToolDef::new("f", None, Some(odd)).unwrap()],
            ToolChoice::Required,
            false,
        )
        .unwrap()
        .unwrap();
        let e = forced(&odd, Convention::QwenXml).unwrap_err();
        assert!(e.message.contains("\"a>b\""), "{}", e.message);
    }

    #[test]
    fn gemma_calls_are_held_to_the_schema_in_gemmas_notation() {
        let weather = json!({"type": "object", "properties": {
            "days": {"type": "integer"}, "City": {"type": "string"},
            "unit": {"enum": ["c", "f"]}, "at": {"type": "object",
            "properties": {"lat": {"type": "number"}, "tags": {"type": "array",
            "items": {"type": "string"}, "maxItems": 2}}, "required": ["lat"]}},
            "required": ["City", "days"]});
        let set = ToolSet::new(
            vec![ToolDef::new("get_weather", None, Some(weather)).unwrap()],
            ToolChoice::Required,
            true,
        )
        .unwrap()
        .unwrap();
        let g = forced(&set, Convention::Gemma4).unwrap().grammar;
        let q = |s: &str| format!("<|\"|>{s}<|\"|>");
        let call = |args: &str| format!("<|tool_call>call:get_weather{{{args}}}<tool_call|>");
        // Keys sorted case-blind, as `dictsort` writes them.
        let paris = call(&format!("City:{},days:3", q("Paris, <b>")));
        assert!(accepts(&g, &paris));
        assert!(accepts(&g, &format!("{paris}{paris}")));
        let full = format!(
            "at:{{lat:1.5,tags:[{},{}]}},City:{},days:-2,unit:{}",
            q("x"),
            q("y"),
            q(""),
            q("f")
        );
        assert!(accepts(&g, &call(&full)), "{full}");
        for bad in [
            call(&format!("days:3,City:{}", q("P"))),
            call(&format!("City:{}", q("P"))),
            call("City:Paris,days:3"),
            call(&format!("City:{},days:three", q("P"))),
            call(&format!("City:{},days:3,unit:{}", q("P"), q("k"))),
            call(&format!("at:{{}},City:{},days:3", q("P"))),
            call(&format!(
                "at:{{lat:1,tags:[{},{},{}]}},City:{},days:3",
                q("a"),
                q("b"),
                q("c"),
                q("P")
            )),
            call(&format!("City:{},days:3,", q("P"))),
            call(&format!("City:{},days:3", q("a<|\"|>b"))),
            paris.replace("get_weather", "get_news"),
        ] {
            assert!(!accepts(&g, &bad), "{bad}");
        }
        // A schema the notation cannot be held to is refused by name.
        let union = json!({"type": "object", "properties": {"x": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}});
        let set = ToolSet::new(
            vec![ToolDef::new("f", None, Some(union)).unwrap()],
            ToolChoice::Required,
            false,
        )
        .unwrap()
        .unwrap();
        let e = forced(&set, Convention::Gemma4).unwrap_err();
        assert!(e.message.starts_with("tool f: x: "), "{}", e.message);
    }

    #[test]
    fn beside_a_schema_the_answer_is_calls_or_the_schema() {
        let set = ToolSet::new(tools(), ToolChoice::Auto, false)
            .unwrap()
            .unwrap();
        let schema = json!({"type": "object", "properties": {"answer": {"type": "integer"}},
            "required": ["answer"]});
        let (answer, report) = llamay_constrain::schema_grammar(&schema).unwrap();
        let g = beside(&set, Convention::Hermes, &answer, "k", &report)
            .unwrap()
            .grammar;
        assert!(accepts(&g, PARIS));
        assert!(accepts(&g, "{\"answer\": 42}"));
        assert!(!accepts(&g, "{\"answer\": \"x\"}"));
        assert!(
            !accepts(&g, &format!("{PARIS}\n{TIME}")),
            "one call: not parallel"
        );
        assert!(!accepts(&g, "The answer is 42."));
        assert!(!accepts(&g, &PARIS.replace("get_weather", "get_news")));
    }

    #[test]
    fn one_call_starts_at_its_opener() {
        let set = ToolSet::new(tools(), ToolChoice::Auto, true)
            .unwrap()
            .unwrap();
        let tag = one_call(&set, Convention::Hermes, Opener::Tag("<tool_call>"))
            .unwrap()
            .grammar;
        assert!(accepts(&tag, PARIS));
        assert!(!accepts(&tag, &format!("{PARIS}\n{TIME}")));
        let bare = one_call(&set, Convention::Hermes, Opener::Bare)
            .unwrap()
            .grammar;
        let object = "{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}";
        assert!(object.starts_with(Opener::Bare.text()));
        assert!(accepts(&bare, object));
        assert!(!accepts(&bare, TIME));
    }
}
