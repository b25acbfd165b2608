//! A request body as far as the runtime's public door goes: arbitrary bytes parsed as
//! JSON, the constraint fields every API shape reads (`llamay_schema`,
//! `response_format`, `format`, `llamay_format`, `llamay_grammar`, `grammar`) put in
//! `Surfaces` and resolved, the tools (`tools`, `tool_choice`, `parallel_tool_calls`)
//! made a `ToolSet`, the sampling knobs checked, the constraint decided and built for
//! a small vocabulary and walked. Must not panic.
//!
//! Not covered: the server's own wire structs (private to `llamay-server`), HTTP, and
//! anything that needs a loaded model.
#![no_main]

use libfuzzer_sys::fuzz_target;
use llamay_constrain::Constraint;
use llamay_fuzz::{vocab, walk};
use llamay_runtime::{CallConvention as Convention, ToolChoice, ToolDef, ToolSet};
use llamay_runtime::{ConstraintSettings, ConstraintSpec, SamplingAsk, Surfaces};
use serde_json::Value;

fn sampling(body: &Value) -> SamplingAsk {
    let f = |k: &str| body.get(k).and_then(Value::as_f64);
    let i = |k: &str| body.get(k).and_then(Value::as_i64);
    SamplingAsk {
        temperature: f("temperature"),
        top_p: f("top_p"),
        top_k: i("top_k"),
        min_p: f("min_p"),
        repeat_penalty: f("repeat_penalty"),
        frequency_penalty: f("frequency_penalty"),
        presence_penalty: f("presence_penalty"),
        seed: i("seed"),
        max_tokens: i("max_tokens"),
        stop: match body.get("stop") {
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect(),
            _ => vec![],
        },
        speculate: body.get("llamay_speculate").and_then(Value::as_bool),
    }
}

fn tools(body: &Value) -> Option<ToolSet> {
    let defs = body.get("tools")?.as_array()?;
    let mut out = Vec::new();
    for d in defs {
        let f = d.get("function")?;
        let name = f.get("name")?.as_str()?;
        let description = f
            .get("description")
            .and_then(Value::as_str)
            .map(String::from);
        out.push(ToolDef::new(name, description, f.get("parameters").cloned()).ok()?);
    }
    let choice = match body.get("tool_choice") {
        Some(Value::String(s)) if s == "none" => ToolChoice::None,
        Some(Value::String(s)) if s == "required" => ToolChoice::Required,
        Some(Value::Object(o)) => ToolChoice::Named(o.get("name")?.as_str()?.to_string()),
        _ => ToolChoice::Auto,
    };
    let parallel = body
        .get("parallel_tool_calls")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let set = ToolSet::new(out, choice, parallel).ok()??;
    std::sync::Arc::into_inner(set)
}

fuzz_target!(|data: &[u8]| {
    let Ok(body) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let _ = sampling(&body).into_params();
    let text = |k: &str| match body.get(k) {
        Some(Value::String(s)) => Some(s.clone()),
        _ => None,
    };
    let (llamay_grammar, grammar, llamay_format) = (
        text("llamay_grammar"),
        text("grammar"),
        text("llamay_format"),
    );
    let mut s = Surfaces::default();
    if let Some(v) = body.get("llamay_schema") {
        s.schema("llamay_schema", v);
    }
    if s.llamay_format(llamay_format.as_ref()).is_err() {
        return;
    }
    match body
        .pointer("/response_format/type")
        .and_then(Value::as_str)
    {
        Some("json_object") => s.json = s.json.or(Some("response_format")),
        Some("json_schema") => {
            if let Some(v) = body.pointer("/response_format/json_schema/schema") {
                s.schema("response_format", v);
            }
        }
        _ => {}
    }
    match body.get("format") {
        Some(Value::String(f)) if f == "json" => s.json = s.json.or(Some("format")),
        Some(v @ (Value::Object(_) | Value::Bool(_))) => s.schema("format", v),
        _ => {}
    }
    s.grammar_fields(llamay_grammar.as_ref(), grammar.as_ref());
    let Ok(asked) = s.resolve(&ConstraintSettings::default()) else {
        return;
    };
    let asked = ConstraintSpec::decide(asked, None);
    let spec = match tools(&body) {
        Some(set) => match set.shape(convention(data), asked) {
            Ok(spec) => spec,
            Err(_) => return,
        },
        None => asked,
    };
    let c = match &spec {
        ConstraintSpec::None => return,
        ConstraintSpec::Json => Constraint::json_object(vocab().clone()),
        ConstraintSpec::JsonValue => Constraint::any_json(vocab().clone()),
        ConstraintSpec::Grammar(g) => Constraint::from_grammar(&g.grammar, vocab().clone()),
        ConstraintSpec::Regex(p) => Constraint::from_regex(p, vocab().clone()),
        ConstraintSpec::Choice(l) | ConstraintSpec::Lexicon { lexicon: l, .. } => {
            Constraint::from_lexicon(l, vocab().clone())
        }
        ConstraintSpec::Schema(s) | ConstraintSpec::Tools(s) | ConstraintSpec::ToolsOr(_, s) => {
            Constraint::from_grammar(&s.grammar, vocab().clone())
        }
    };
    if let Ok(c) = c {
        walk(&c, data, 128);
    }
});

/// Each family's call form, picked by the input's length.
fn convention(data: &[u8]) -> Convention {
    [
        Convention::Hermes,
        Convention::Llama3,
        Convention::Mistral,
        Convention::QwenXml,
        Convention::Gemma4,
    ][data.len() % 5]
}
