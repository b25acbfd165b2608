//! Forced calls in the XML form and Gemma 4's on a tiny random-weight Qwen3 (its real
//! tokenizer):
//! whatever the weights pick, the grammar only lets through calls that parse back
//! to arguments valid under the tool's schema.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use llamay_constrain::{schema_grammar, Constraint, Vocabulary};
use llamay_engine::{LoadOptions, SamplerConfig};
use serde_json::{json, Value};

use crate::chat::CallConvention;
use crate::constraint::ConstraintSpec;
use crate::generate::{generate, Finish, GenerationParams};
use crate::loaded::LoadedModel;
use crate::tools::{parse, ToolChoice, ToolDef, ToolSet};

fn tools() -> Vec<ToolDef> {
    // No free strings: random weights would never end one (raw strings are checked
    // on the grammar itself).
    let weather = json!({"type": "object", "properties": {
        "city": {"enum": ["Paris", "Saint-Étienne", "a < b"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
        "metric": {"type": "boolean"},
        "tags": {"type": "array", "items": {"enum": ["x", "y"]}, "maxItems": 2}},
        "required": ["city", "days"]});
    let time = json!({"type": "object", "properties": {"utc": {"type": "boolean"}},
        "required": ["utc"]});
    vec![
        ToolDef::new("get_weather", None, Some(weather)).unwrap(),
        ToolDef::new("get_time", None, Some(time)).unwrap(),
    ]
}

/// Whether `args` is valid under `schema`: its JSON text walks the schema's grammar.
fn valid(schema: &Value, args: &Value) -> bool {
    let (g, _) = schema_grammar(schema).unwrap();
    let toks: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    let c = Constraint::from_grammar(&g, Arc::new(Vocabulary::new(toks, &[], &[]))).unwrap();
    let mut m = c.matcher();
    m.commit_bytes(args.to_string().as_bytes()).is_ok() && m.is_accepting()
}

fn run(lm: &LoadedModel, set: &Arc<ToolSet>, conv: CallConvention, seed: u64) -> String {
    let ConstraintSpec::Tools(g) = set.shape(conv, ConstraintSpec::None).unwrap() else {
        panic!("a forced choice is a tools constraint")
    };
    let constraint = Constraint::from_grammar(&g.grammar, lm.vocab.clone()).unwrap();
    let prompt = lm.tokenizer.encode(
        b"<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n",
        false,
        true,
    );
    let params = GenerationParams {
        max_tokens: 400,
        sampler: SamplerConfig {
            temperature: 1.0,
            seed,
            ..SamplerConfig::default()
        },
        stop: Vec::new(),
        fast_forward: true,
        draft: 0,
        draft_model: None,
    };
    let out = generate(
        &lm.model,
        &lm.tokenizer,
        &prompt,
        &params,
        Some(&constraint),
        &AtomicBool::new(false),
        &mut |_| {},
    )
    .unwrap();
    assert_ne!(out.finish, Finish::Length, "seed {seed}: cut off");
    String::from_utf8(out.text).unwrap()
}

#[test]
fn forced_and_named_calls_parse_to_valid_arguments() {
    let path = llamay_testdata::tiny_chat_model();
    let opts = LoadOptions {
        n_ctx: Some(1024),
        n_threads: Some(1),
        ..LoadOptions::default()
    };
    let lm = LoadedModel::load(&path, &opts).unwrap();
    let required = ToolSet::new(tools(), ToolChoice::Required, true)
        .unwrap()
        .unwrap();
    let named = ToolSet::new(tools(), ToolChoice::Named("get_weather".into()), false)
        .unwrap()
        .unwrap();
    let mut names = std::collections::BTreeSet::new();
    let forms = [
        (CallConvention::QwenXml, "<tool_call>\n<function="),
        (CallConvention::Gemma4, "<|tool_call>call:"),
    ];
    for seed in 0..24 {
        for ((conv, opening), set) in forms.iter().flat_map(|f| [(f, &required), (f, &named)]) {
            let text = run(&lm, set, *conv, seed);
            assert!(text.starts_with(opening), "{text}");
            let p = parse(&text, set);
            assert!(!p.calls.is_empty(), "seed {seed}: no call in {text:?}");
            for c in &p.calls {
                let tool = set.get(&c.name).unwrap();
                assert!(valid(&tool.parameters, &c.arguments), "seed {seed}: {text}");
                assert!(set.callable().any(|t| t.name == c.name));
                names.insert(c.name.clone());
            }
            if !set.parallel {
                assert_eq!(text.matches(opening).count(), 1, "{text}");
            }
        }
    }
    assert_eq!(names.len(), 2, "both tools are called under `required`");
}
