//! `llamay run` with a constraint, through the real binary on the real test models:
//! the seed's transcripts (`-json`, `-schema`, `-grammar-file`), its statistics lines,
//! and where each stop reason occurs.

mod common;

use common::run::*;
use llamay_testdata::{real_model, RealModel};

/// stdout must be exactly one JSON document and a newline, so `| jq .` works.
fn one_document(out: &Out) -> serde_json::Value {
    let doc = out
        .stdout
        .strip_suffix('\n')
        .unwrap_or_else(|| panic!("stdout does not end in a newline: {:?}", out.stdout));
    assert!(
        !doc.starts_with(char::is_whitespace) && !doc.ends_with(char::is_whitespace),
        "stdout has stray whitespace around the document: {:?}",
        out.stdout
    );
    serde_json::from_str(doc)
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}): {:?}", out.stdout))
}

/// `llamay run -chat <constraint> -n <n> -temp 0 -p <prompt>`: a greedy chat run.
fn run_greedy_chat(model: &std::path::Path, constraint: &[&str], n: &str, prompt: &str) -> Out {
    let mut args = vec!["-chat"];
    args.extend_from_slice(constraint);
    args.extend(["-n", n, "-temp", "0", "-p", prompt]);
    run_model(model, &args)
}

/// A shared grammar file's path and the grammar itself, to check outputs against.
fn seed_grammar(rel: &str) -> (std::path::PathBuf, ByteGrammar) {
    let path = shared(rel);
    let grammar = ByteGrammar::gbnf(&std::fs::read_to_string(&path).unwrap());
    (path, grammar)
}

/// The run wrote exactly `n` tokens (so the limit, not the model, ended it).
fn assert_generated(out: &Out, n: &str) {
    assert!(
        out.summary().contains(&format!("generated {n} in")),
        "{}",
        out.summary()
    );
}

/// The model (end of generation) or a finished grammar ended the run, not the limit.
fn assert_model_or_grammar_ended(out: &Out) {
    assert!(
        ["eog", "grammar"].contains(&out.stop()),
        "{}",
        out.summary()
    );
}

/// The first statistics line reads like the seed's.
fn assert_summary_shape(out: &Out) {
    let s = out.summary();
    let words: Vec<&str> = s.split(' ').collect();
    assert_eq!(words[0], "prompt", "{s}");
    assert!(words[1].parse::<usize>().is_ok(), "{s}");
    assert_eq!(words[2..4], ["tokens", "in"], "{s}");
    assert!(s.contains(" tok/s) · generated "), "{s}");
    assert!(s.contains(" · stop: "), "{s}");
    // Statistics go to stderr only: stdout never carries them.
    assert!(!out.stdout.contains("tok/s"), "{}", out.stdout);
}

#[test]
fn json_on_the_seed_prompt_prints_one_document_and_the_two_mask_lines() {
    let model = real_model(RealModel::SmolLM2);
    let out = run_greedy_chat(&model, &["-json"], "200", SEED_JSON_PROMPT);
    out.assert_ok();
    let doc = one_document(&out);
    assert!(doc.is_object(), "{doc}");
    assert_model_or_grammar_ended(&out);
    assert_summary_shape(&out);
    let (mask, states) = out.mask_lines("json");
    assert!(
        mask.contains(" steps, ") && mask.contains(" ms each, "),
        "{mask}"
    );
    assert!(
        mask.contains("% of decode · ") && mask.contains("% hit rate)"),
        "{mask}"
    );
    assert!(
        states.starts_with("  states ") && states.ends_with(" table clears"),
        "{states}"
    );
    assert!(out.mask_share("json") <= 5.0, "{mask}");
}

#[test]
fn the_seed_order_schema_gives_a_document_that_validates() {
    order_schema_validates(RealModel::SmolLM2);
}

/// The seed's own model family (Qwen2.5-Coder-0.5B-Instruct here).
#[test]
fn the_seed_order_schema_validates_on_qwen25() {
    order_schema_validates(RealModel::Qwen25);
}

fn order_schema_validates(which: RealModel) {
    let model = real_model(which);
    let schema_path = shared("corpus/seed/order.schema.json");
    let schema: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&schema_path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let out = run_greedy_chat(
        &model,
        &["-schema", schema_path.to_str().unwrap()],
        "300",
        SEED_ORDER_PROMPT,
    );
    out.assert_ok();
    let doc = one_document(&out);
    let errors: Vec<String> = validator.iter_errors(&doc).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{doc} does not validate: {errors:?}");
    assert_model_or_grammar_ended(&out);
    out.mask_lines("schema");
}

#[test]
fn the_list_grammar_is_followed_and_the_model_may_end_it() {
    let model = real_model(RealModel::SmolLM2);
    let (path, grammar) = seed_grammar("grammars/list.gbnf");
    // A question with a one-line answer: the model ends the list itself.
    let out = run_greedy_chat(
        &model,
        &["-grammar-file", path.to_str().unwrap()],
        "60",
        "What is your favourite fruit? Answer in one short line.",
    );
    out.assert_ok();
    assert_eq!(out.stop(), "eog", "{}", out.summary());
    assert!(grammar.accepts(out.stdout.as_bytes()), "{:?}", out.stdout);
    out.mask_lines("grammar");

    // The seed's own prompt asks for four items, more than 10 tokens hold: the list is
    // closed within the limit (the item under way ends its line), so the grammar
    // accepts the whole output. Over several seeds, since where the model stands at the
    // limit is its own choice: every run is valid and ends by eog or at the limit; the
    // ones at the limit were closed, and at least one got there.
    let mut at_limit = 0;
    for seed in ["1", "2", "3"] {
        let out = run_model(
            &model,
            &[
                "-chat",
                "-grammar-file",
                path.to_str().unwrap(),
                "-n",
                "10",
                "-seed",
                seed,
                "-p",
                "List four things that break when a laptop goes offline.",
            ],
        );
        out.assert_ok();
        assert!(grammar.accepts(out.stdout.as_bytes()), "{:?}", out.stdout);
        assert!(out.stdout.starts_with("- "), "{:?}", out.stdout);
        match out.stop() {
            "eog" => {}
            "grammar" => {
                at_limit += 1;
                assert_generated(&out, "10");
                assert!(
                    out.mask_lines("grammar").0.contains(" closing"),
                    "{}",
                    out.stderr
                );
            }
            other => panic!("stop {other}: {}", out.summary()),
        }
    }
    assert!(at_limit > 0, "no run reached the token limit");
}

#[test]
fn the_seed_move_grammar_ends_by_grammar_with_a_legal_move() {
    let model = real_model(RealModel::SmolLM2);
    let (path, grammar) = seed_grammar("grammars/seed-move.gbnf");
    for seed in ["1", "2"] {
        let out = run_model(
            &model,
            &[
                "-grammar-file",
                path.to_str().unwrap(),
                "-seed",
                seed,
                "-p",
                "White's best opening move:",
            ],
        );
        out.assert_ok();
        assert_eq!(out.stop(), "grammar", "{}", out.summary());
        let text = out.stdout.strip_suffix('\n').unwrap();
        assert!(grammar.accepts(text.as_bytes()), "{text:?}");
    }
}

#[test]
fn the_seed_arithmetic_grammar_writes_equations_it_accepts() {
    let model = real_model(RealModel::SmolLM2);
    let (path, grammar) = seed_grammar("grammars/seed-arithmetic.gbnf");
    let out = run_greedy_chat(
        &model,
        &["-grammar-file", path.to_str().unwrap()],
        "24",
        "Compute 6 * 7 and show the equation.",
    );
    out.assert_ok();
    // The grammar never has to end (more equations, trailing whitespace): a model that
    // runs to the limit (as in the seed) has its output closed there into text the
    // grammar accepts ("grammar"); one that ends first may only end where the grammar
    // accepts ("eog"). Either way the first line is a whole equation. Which of the two
    // happens is the model's choice, and has changed with its arithmetic.
    match out.stop() {
        "grammar" => assert_generated(&out, "24"),
        "eog" => {}
        other => panic!("stop {other}: {}", out.summary()),
    }
    assert!(grammar.accepts(out.stdout.as_bytes()), "{:?}", out.stdout);
    let first = &out.stdout[..=out.stdout.find('\n').unwrap()];
    assert!(grammar.accepts(first.as_bytes()), "{first:?}");
    assert!(first.contains('='), "{first:?}");
}

#[test]
fn stop_reasons_eog_and_length_without_a_constraint() {
    let model = real_model(RealModel::SmolLM2);
    let out = run_model(
        &model,
        &["-chat", "-n", "100", "-temp", "0", "-p", "Say hi."],
    );
    out.assert_ok();
    assert_eq!(out.stop(), "eog", "{}", out.summary());
    assert!(!out.stderr.contains(" mask: "), "{}", out.stderr);

    let out = run_model(&model, &["-n", "5", "-p", "Once upon a time"]);
    out.assert_ok();
    assert_eq!(out.stop(), "length", "{}", out.summary());
    assert_generated(&out, "5");
}

#[test]
fn an_unbounded_array_under_a_small_budget_closes_into_a_valid_document() {
    let model = real_model(RealModel::SmolLM2);
    let schema = std::env::temp_dir().join(format!("llamay-int-array-{}.json", std::process::id()));
    std::fs::write(&schema, r#"{"type":"array","items":{"type":"integer"}}"#).unwrap();
    // A prompt the model would gladly continue for a hundred numbers.
    let prompt = "The first one hundred positive integers, as a JSON array: \
        [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]. Again:";
    let mut closed = 0;
    for seed in ["1", "2", "3", "4"] {
        let out = run_model(
            &model,
            &[
                "-schema",
                schema.to_str().unwrap(),
                "-n",
                "12",
                "-seed",
                seed,
                "-p",
                prompt,
            ],
        );
        out.assert_ok();
        assert!(
            ["grammar", "eog"].contains(&out.stop()),
            "seed {seed}: {}",
            out.summary()
        );
        let doc = one_document(&out);
        let items = doc
            .as_array()
            .unwrap_or_else(|| panic!("not an array: {doc}"));
        assert!(items.iter().all(|v| v.is_i64() || v.is_u64()), "{doc}");
        let generated: usize = out
            .summary()
            .split(" · generated ")
            .nth(1)
            .and_then(|s| s.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{}", out.summary()));
        assert!(generated <= 12, "{}", out.summary());
        if out.mask_lines("schema").0.contains(" closing") {
            closed += 1;
        }
    }
    let _ = std::fs::remove_file(&schema);
    // The budget, not the model, ended these arrays.
    assert!(closed >= 2, "only {closed} of 4 runs needed closing");
}

#[test]
fn a_constrained_run_cut_short_stops_at_exactly_n_tokens() {
    // Fast-forwarded tokens count against -n like sampled ones; a budget shorter than
    // the shortest document cannot close it.
    let model = real_model(RealModel::SmolLM2);
    let schema = shared("corpus/seed/order.schema.json");
    for n in ["7", "30"] {
        let out = run_greedy_chat(
            &model,
            &["-schema", schema.to_str().unwrap()],
            n,
            SEED_ORDER_PROMPT,
        );
        out.assert_ok();
        assert_eq!(out.stop(), "length", "{}", out.summary());
        assert_generated(&out, n);
        assert!(out.stdout.starts_with('{'), "{:?}", out.stdout);
        assert!(
            serde_json::from_str::<serde_json::Value>(&out.stdout).is_err(),
            "a cut-short document cannot be whole: {:?}",
            out.stdout
        );
    }
}

#[test]
fn gemma3_base_model_uses_the_builtin_template_and_gives_json() {
    let model = real_model(RealModel::Gemma3);
    let out = run_model(
        &model,
        &[
            "-chat",
            "-json",
            "-n",
            "150",
            "-seed",
            "1",
            "-stats",
            "-p",
            SEED_JSON_PROMPT,
        ],
    );
    out.assert_ok();
    assert!(
        out.stderr.contains("template builtin gemma"),
        "{}",
        out.stderr
    );
    let doc = one_document(&out);
    assert!(doc.is_object(), "{doc}");
    assert_model_or_grammar_ended(&out);
    assert!(out.mask_share("json") <= 5.0, "{}", out.stderr);
}

/// `-lexicon FILE`: the output is one line of the file, and the mask line names it.
#[test]
fn a_lexicon_run_writes_one_term() {
    let file = std::env::temp_dir().join(format!("llamay-run-lexicon-{}.txt", std::process::id()));
    let terms = ["Paris", "Lyon", "New York", "Saint-Étienne"];
    std::fs::write(&file, terms.join("\n")).unwrap();
    let model = real_model(RealModel::SmolLM2);
    let out = run_greedy_chat(
        &model,
        &["-lexicon", file.to_str().unwrap()],
        "20",
        "Name a city.",
    );
    let text = out.stdout.trim_end_matches('\n');
    assert!(terms.contains(&text), "{text:?} is not a term");
    assert!(out.stderr.contains("lexicon mask:"), "{}", out.stderr);
    let _ = std::fs::remove_file(file);
}

/// gpt-oss chats in harmony's channels in this process too: the run prints the `final`
/// message only, under the schema (its analysis and every marker stay out).
#[test]
fn a_harmony_chat_prints_only_the_final_message_under_the_schema() {
    let model = llamay_testdata::moe_model("gpt-oss-harmony");
    let schema = std::env::temp_dir().join(format!("llamay-harmony-{}.json", std::process::id()));
    std::fs::write(
        &schema,
        r#"{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}"#,
    )
    .unwrap();
    for seed in ["1", "2"] {
        let out = run_model(
            &model,
            &[
                "-chat",
                "-schema",
                schema.to_str().unwrap(),
                "-n",
                "48",
                "-seed",
                seed,
                "-p",
                "hi",
            ],
        );
        out.assert_ok();
        for marker in [
            "<|channel|>",
            "<|message|>",
            "<|end|>",
            "<|start|>",
            "<|return|>",
        ] {
            assert!(!out.stdout.contains(marker), "{marker}: {:?}", out.stdout);
        }
        let doc: serde_json::Value = serde_json::from_str(out.stdout.trim())
            .unwrap_or_else(|e| panic!("{e}: {:?}", out.stdout));
        assert!(doc["a"].is_i64(), "{doc}");
        assert_model_or_grammar_ended(&out);
    }
    let _ = std::fs::remove_file(&schema);
}
