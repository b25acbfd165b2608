//! Fifty constrained generations across the seed's schemas and the JSONSchemaBench
//! corpus, with random seeds, in-process through `llamay_runtime::generate` (the loop
//! `llamay run` uses) so the model loads once: every generation ends by the model or the
//! grammar, never at the token limit (an unbounded array the model keeps filling is
//! closed within the budget), and every document parses and validates.

use std::sync::atomic::AtomicBool;

use llamay_constrain::Constraint;
use llamay_engine::LoadOptions;
use llamay_engine::SamplerConfig;
use llamay_runtime::ChatMessage;
use llamay_runtime::{generate, Finish, GenerationParams, LoadedModel};
use llamay_testdata::{real_model, shared_dir, RealModel};
use serde_json::Value;

const GENERATIONS: usize = 50;
const MAX_TOKENS: usize = 400;

/// Corpus features llamay ignores or treats loosely (`oneOf` as `anyOf`): a document
/// can satisfy llamay's automaton and still fail a full validator, by design.
const NOT_ENFORCED: &[&str] = &[
    "oneOf",
    "uniqueItems",
    "@minmaxProperties",
    "additionalItems",
    "dependencies",
    "propertyNames",
    "unevaluatedProperties",
    "dependentSchemas",
    "contentMediaType",
    "not",
    "if",
    "patternProperties",
];

struct Case {
    name: String,
    schema: Value,
    prompt: String,
}

fn seed_cases() -> Vec<Case> {
    let dir = shared_dir().join("corpus/seed");
    let read = |f: &str| -> Value {
        serde_json::from_slice(&std::fs::read(dir.join(f)).unwrap()).unwrap()
    };
    [
        (
            "order",
            "Order 7 from Acme: 3 widgets at 4.50 EUR each, ship to Lyon, postcode 69001.",
        ),
        (
            "invoice",
            "Invoice from Acme Tools Ltd, total due 310.00 GBP.",
        ),
        ("tool_call", "What is the weather in Pune, in celsius?"),
    ]
    .iter()
    .flat_map(|(stem, task)| {
        let schema = read(&format!("{stem}.schema.json"));
        let instances = read(&format!("{stem}.instances.json"));
        let example = serde_json::to_string(&instances[0]).unwrap();
        (0..2).map(move |i| Case {
            name: format!("seed/{stem}#{i}"),
            schema: schema.clone(),
            prompt: format!(
                "{task}\nAnswer with one JSON document shaped like this example: {example}"
            ),
        })
    })
    .collect()
}

/// Small corpus schemas whose keywords llamay enforces, each with a short valid
/// example, spread evenly over the (sorted) corpus.
fn corpus_cases(n: usize) -> Vec<Case> {
    let dir = shared_dir().join("corpus/jsonschemabench");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    let usable: Vec<Case> = names
        .iter()
        .filter_map(|name| {
            let file: Value = serde_json::from_slice(&std::fs::read(dir.join(name)).ok()?).ok()?;
            let features = file["meta"]["features"].as_array()?;
            if features
                .iter()
                .any(|f| NOT_ENFORCED.contains(&f.as_str().unwrap_or("")))
            {
                return None;
            }
            let schema = file["schema"].clone();
            // An explicitly open object lets the model add keys for ever: whether it
            // stops is the model's choice, not the constraint's, so it is not tested here.
            if serde_json::to_string(&schema)
                .ok()?
                .contains("\"additionalProperties\":true")
            {
                return None;
            }
            if serde_json::to_string(&schema).ok()?.len() > 600 {
                return None;
            }
            let example = file["tests"].as_array()?.iter().find_map(|t| {
                let s = serde_json::to_string(&t["data"]).ok()?;
                (t["valid"] == true && s.len() <= 160).then_some(s)
            })?;
            Some(Case {
                name: name.clone(),
                schema,
                prompt: format!(
                    "Answer with one JSON document shaped like this example: {example}"
                ),
            })
        })
        .collect();
    assert!(
        usable.len() >= n,
        "only {} usable corpus schemas",
        usable.len()
    );
    let step = usable.len() / n;
    usable.into_iter().step_by(step).take(n).collect()
}

#[test]
fn fifty_schema_generations_all_finish_parse_and_validate() {
    let lm = LoadedModel::load(
        &real_model(RealModel::SmolLM2),
        &LoadOptions {
            n_ctx: Some(1024),
            // Fixed, so what each seed samples does not depend on the machine's cores.
            n_threads: Some(2),
            ..LoadOptions::default()
        },
    )
    .unwrap();
    let mut cases = seed_cases();
    cases.extend(corpus_cases(GENERATIONS - cases.len()));
    assert_eq!(cases.len(), GENERATIONS);

    let (mut failures, mut refused) = (Vec::new(), Vec::new());
    let mut closing_steps = 0;
    let (mut tokens, mut mask_time, mut decode_time) = (0, 0.0, 0.0);
    let (mut forced, mut fast_forwarded) = (0, 0);
    let mut finished_by = std::collections::BTreeMap::<&str, usize>::new();
    for (i, case) in cases.iter().enumerate() {
        let validator = jsonschema::options()
            .should_validate_formats(false)
            .build(&case.schema)
            .unwrap_or_else(|e| panic!("{}: the validator refuses the schema: {e}", case.name));
        let grammar = match llamay_constrain::schema_grammar(&case.schema) {
            Ok((g, _)) => g,
            Err(e) => {
                // A refusal is a clear error (never a panic); it must stay rare.
                refused.push(format!("{}: {e}", case.name));
                continue;
            }
        };
        let constraint = Constraint::from_grammar(&grammar, lm.vocab.clone()).unwrap();
        let prompt = lm
            .encode_chat(&[ChatMessage::new("user", &case.prompt)], None)
            .unwrap();
        let params = GenerationParams {
            max_tokens: MAX_TOKENS,
            sampler: SamplerConfig {
                temperature: 0.8,
                repeat_penalty: 1.1,
                seed: 0x5eed_0000 + i as u64 * 7919,
                ..SamplerConfig::default()
            },
            ..GenerationParams::default()
        };
        let g = generate(
            &lm.model,
            &lm.tokenizer,
            &prompt,
            &params,
            Some(&constraint),
            &AtomicBool::new(false),
            &mut |_| {},
        )
        .unwrap_or_else(|e| panic!("{}: {e}", case.name));
        *finished_by.entry(g.finish.as_str()).or_default() += 1;
        tokens += g.stats.generated_tokens;
        forced += g.stats.forced_tokens;
        fast_forwarded += g.stats.fast_forwarded_tokens;
        decode_time += g.stats.decode_time.as_secs_f64();
        mask_time += g.stats.mask.as_ref().unwrap().mask_time.as_secs_f64();
        closing_steps += g.stats.mask.as_ref().unwrap().closing_steps;
        let text = String::from_utf8_lossy(&g.text);
        let ws = structural_whitespace(&text);
        if ws > 64 {
            failures.push(format!(
                "{}: {ws} characters of structural whitespace: {text}",
                case.name
            ));
        }
        if !matches!(g.finish, Finish::Eog | Finish::Grammar) {
            failures.push(format!("{}: stopped by {:?}: {text}", case.name, g.finish));
            continue;
        }
        match serde_json::from_str::<Value>(&text) {
            Err(e) => failures.push(format!("{}: does not parse ({e}): {text}", case.name)),
            Ok(doc) => {
                let errors: Vec<String> = validator
                    .iter_errors(&doc)
                    .filter(|e| !decimal_multiple_false_alarm(e))
                    .map(|e| e.to_string())
                    .collect();
                if !errors.is_empty() {
                    failures.push(format!("{}: {errors:?}: {text}", case.name));
                }
            }
        }
    }
    eprintln!(
        "{} generations, {} refused schemas, stops {finished_by:?}, {tokens} tokens \
         ({forced} forced, {fast_forwarded} of them fast-forwarded), {:.1}s decoding, \
         mask {:.1}% of decode, {closing_steps} closing steps",
        cases.len() - refused.len(),
        refused.len(),
        decode_time,
        100.0 * mask_time / decode_time
    );
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // Every generation finished (by the model, or closed by the grammar within the
    // budget), parsed and validated, without runaway whitespace: all checked above.
    assert!(refused.len() <= 2, "too many refusals: {refused:#?}");
}

/// Whitespace outside JSON strings: what the constraint's budget (64) bounds.
fn structural_whitespace(text: &str) -> usize {
    let (mut n, mut in_string, mut escaped) = (0, false, false);
    for c in text.chars() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
        } else if c == '"' {
            in_string = true;
        } else if c.is_whitespace() {
            n += 1;
        }
    }
    n
}

/// `jsonschema` checks `multipleOf` in binary floating point, so `0.59` is "not a
/// multiple of 0.01"; JSON numbers are decimal, and so is llamay's constraint. An error
/// the exact decimal check clears is not a failure.
fn decimal_multiple_false_alarm(e: &jsonschema::ValidationError) -> bool {
    let jsonschema::error::ValidationErrorKind::MultipleOf { multiple_of } = &e.kind else {
        return false;
    };
    let (Some(value), Some(step)) = (
        scaled(&e.instance.to_string()),
        scaled(
            &serde_json::Number::from_f64(*multiple_of).map_or(String::new(), |n| n.to_string()),
        ),
    ) else {
        return false;
    };
    // value = v / 10^a, step = s / 10^b: compare on the common scale.
    let scale = value.1.max(step.1);
    let v = value.0 * 10i128.pow(scale - value.1);
    let s = step.0 * 10i128.pow(scale - step.1);
    s != 0 && v % s == 0
}

/// A plain decimal (no exponent) as an integer and its number of fraction digits.
fn scaled(text: &str) -> Option<(i128, u32)> {
    let (int, frac) = text.split_once('.').unwrap_or((text, ""));
    if frac.len() > 18 || int.len() > 18 {
        return None;
    }
    let digits = format!("{int}{frac}");
    Some((digits.parse().ok()?, frac.len() as u32))
}
