//! `llamay run -schema` with `x-llamay-quote`: `-source [NAME=]FILE` names the texts a
//! quote may come from, `true` quotes the prompt, and a name no `-source` gives is
//! refused before the model loads. Each quoted value is checked with a plain substring
//! search, independently of the constraint.

mod common;

use common::run::*;
use llamay_testdata::{real_model, RealModel};
use serde_json::{json, Value};

/// Escapes, quotes, a backslash and non-ASCII text, so the JSON layer is crossed too.
const CONTRACT: &str = "Clause 4: the \"Supplier\" ships within 10 days.\n\
                        Clause 9: fees are 1.250,00 € per year (C:\\fees).";

fn schema_file(dir: &std::path::Path, name: &str, quote: Value) -> std::path::PathBuf {
    let schema = json!({"type": "object", "additionalProperties": false, "required": ["q"],
        "properties": {"q": {"type": "string", "maxLength": 30, "x-llamay-quote": quote}}});
    let path = dir.join(format!("{name}.schema.json"));
    std::fs::write(&path, schema.to_string()).unwrap();
    path
}

/// The quoted value of one run's stdout.
fn quoted(out: &Out) -> String {
    out.assert_ok();
    let doc: Value = serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("not one JSON document ({e}): {:?}", out.stdout));
    doc["q"].as_str().expect("q is a string").to_string()
}

/// A chat run at temperature 0.8 under `schema`, with one `-source` if given: the
/// quoted value.
fn quote_run(
    model: &std::path::Path,
    schema: &std::path::Path,
    source: Option<&str>,
    seed: &str,
    prompt: &str,
) -> String {
    let mut args = vec!["-chat", "-schema", schema.to_str().unwrap()];
    if let Some(s) = source {
        args.extend(["-source", s]);
    }
    args.extend(["-n", "40", "-temp", "0.8", "-seed", seed, "-p", prompt]);
    quoted(&run_model(model, &args))
}

/// A plain substring test, independent of the constraint.
fn assert_span(q: &str, source: &str) {
    assert!(
        !q.is_empty() && source.contains(q),
        "{q:?} is not a span of {source:?}"
    );
}

#[test]
fn a_named_source_and_the_prompt_are_quoted_and_a_missing_name_is_refused() {
    let model = real_model(RealModel::SmolLM2);
    let dir = std::env::temp_dir().join(format!("llamay-run-quote-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let contract = dir.join("contract.txt");
    std::fs::write(&contract, CONTRACT).unwrap();
    let source = format!("doc={}", contract.display());
    let named = schema_file(&dir, "named", json!("doc"));
    let prompt = "Quote the delivery clause: Clause 4 says the goods ship within 10 days.";
    for seed in ["1", "2", "3"] {
        let q = quote_run(
            &model,
            &named,
            Some(&source),
            seed,
            "Quote the fees clause.",
        );
        assert_span(&q, CONTRACT);
    }
    // `-source FILE`: named by the file's stem.
    let by_stem = schema_file(&dir, "stem", json!("contract"));
    let file = contract.to_str().unwrap();
    assert_span(
        &quote_run(&model, &by_stem, Some(file), "4", "Quote the fees clause."),
        CONTRACT,
    );
    // `true`: the prompt's user text.
    let input = schema_file(&dir, "input", json!(true));
    for seed in ["1", "2"] {
        assert_span(&quote_run(&model, &input, None, seed, prompt), prompt);
    }
    // A name no -source gives: exit 2 (a usage error, decided before the model loads),
    // naming the keyword, the name and the sources there are.
    let args = [
        "-chat",
        "-schema",
        named.to_str().unwrap(),
        "-source",
        &format!("other={}", contract.display()),
        "-p",
        "x",
    ];
    let out = run_model(&model, &args);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("x-llamay-quote")
            && out.stderr.contains("\"doc\"")
            && out.stderr.contains("other"),
        "{}",
        out.stderr
    );
    // A source file that cannot be read is the caller's mistake too.
    let out = run_model(&model, &["-source", "/nonexistent/doc.txt", "-p", "x"]);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("/nonexistent/doc.txt"),
        "{}",
        out.stderr
    );
    let _ = std::fs::remove_dir_all(&dir);
}
