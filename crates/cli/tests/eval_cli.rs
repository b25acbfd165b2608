//! `llamay eval` end to end on the real binary: the invoice example with both test
//! models (constrained output always parses, fits the schema, and quotes spans of its
//! input, each checked here independently: the `jsonschema` crate and a substring
//! search), the HTML report in headless Chromium, and bad input that loses nothing.

use std::path::{Path, PathBuf};
use std::process::Command;

use llamay_testdata::{real_model, RealModel};
use serde_json::Value;

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
}

struct Out {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn eval(args: &[&str]) -> Out {
    let out = Command::new(env!("CARGO_BIN_EXE_llamay"))
        .arg("eval")
        .args(args)
        .output()
        .expect("llamay eval runs");
    Out {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("llamay-eval-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// Quoted values in `mode` that are not spans of their document's input, of those
/// that are strings.
fn non_spans(report: &Value, mode: &str) -> (usize, usize) {
    let (mut bad, mut all) = (0, 0);
    for d in report["documents"].as_array().unwrap() {
        let input = d["input"].as_str().unwrap();
        if let Some(q) = d["runs"][mode]["value"]["source_quote"].as_str() {
            all += 1;
            bad += usize::from(!input.contains(q));
        }
    }
    (bad, all)
}

/// Counts the `<svg class="field-chart"` elements Chromium rendered, and the console
/// messages at error level it logged, for a page on disk.
fn chromium(page: &Path) -> (usize, Vec<String>) {
    let profile = tmp(&format!(
        "profile-{}",
        page.file_name().unwrap().to_string_lossy()
    ));
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=2000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs (apt-get install chromium; .ci/run installs it)");
    let dom = String::from_utf8_lossy(&out.stdout);
    let charts = dom.matches("<svg class=\"field-chart\"").count();
    let errors = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.contains("CONSOLE") && (l.contains("ERROR") || l.contains("Uncaught")))
        .map(str::to_string)
        .collect();
    (charts, errors)
}

#[test]
fn invoices_with_both_models_constrained_always_parses_fits_and_quotes_its_input() {
    let schema_path = repo("examples/invoices/schema.json");
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(&schema_path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let fields = schema["properties"].as_object().unwrap().len();
    let data = repo("examples/invoices/data.jsonl");
    let docs = std::fs::read_to_string(&data).unwrap().lines().count();
    assert!(docs >= 40);
    for m in RealModel::ALL {
        let model = real_model(m);
        let html = tmp(&format!("{m:?}.html"));
        // The comparison with a prompted run doubles the work: CI makes it on SmolLM2;
        // LLAMAY_EVAL_COMPARE_ALL=1 makes it on every model.
        let compare =
            m == RealModel::SmolLM2 || std::env::var_os("LLAMAY_EVAL_COMPARE_ALL").is_some();
        let mut args = vec![
            "-m",
            model.to_str().unwrap(),
            "-threads",
            "2",
            "-schema",
            schema_path.to_str().unwrap(),
            "-data",
            data.to_str().unwrap(),
            "-temp",
            "0.8",
            "-max-tokens",
            "160",
            "-json",
            "-html",
            html.to_str().unwrap(),
        ];
        if compare {
            args.extend(["-compare", "prompted"]);
        }
        let out = eval(&args);
        assert_eq!(out.code, Some(0), "{m:?}: {}", out.stderr);
        // The table, on stderr beside the JSON.
        assert!(
            out.stderr.contains("schema-valid") && out.stderr.contains("source_quote"),
            "{}",
            out.stderr
        );
        let report: Value = serde_json::from_str(&out.stdout).unwrap();
        let constrained = &report["modes"][0];
        assert_eq!(constrained["mode"], "constrained");
        assert_eq!(constrained["docs"], docs);
        assert_eq!(constrained["parse_rate"], 1.0, "{m:?}");
        assert_eq!(constrained["schema_valid_rate"], 1.0, "{m:?}");
        for d in report["documents"].as_array().unwrap() {
            let v = &d["runs"]["constrained"]["value"];
            assert!(
                validator.is_valid(v),
                "{m:?} {}: {v} does not fit the schema",
                d["id"]
            );
        }
        let (bad, quoted) = non_spans(&report, "constrained");
        assert_eq!(bad, 0, "{m:?}: {bad} of {quoted} quotes are not spans");
        if !compare {
            let (charts, errors) = chromium(&html);
            assert_eq!(charts, fields, "{m:?}: one chart per field");
            assert!(errors.is_empty(), "{m:?}: console errors {errors:?}");
            continue;
        }
        let (pbad, pquoted) = non_spans(&report, "prompted");
        eprintln!(
            "{m:?}: constrained quotes {quoted}, non-spans 0; prompted quotes {pquoted}, non-spans {pbad}; \
             prompted parse {} schema-valid {}",
            report["modes"][1]["parse_rate"], report["modes"][1]["schema_valid_rate"]
        );
        let (charts, errors) = chromium(&html);
        assert_eq!(charts, fields, "{m:?}: one chart per field");
        assert!(errors.is_empty(), "{m:?}: console errors {errors:?}");
    }
}

#[test]
fn the_console_check_sees_an_error_when_there_is_one() {
    // The negative control for the check above.
    let page = tmp("broken.html");
    std::fs::write(&page, "<html><body><svg class=\"field-chart\"></svg><script>console.error('boom'); undefinedThing();</script></body></html>").unwrap();
    let (charts, errors) = chromium(&page);
    assert_eq!(charts, 1);
    assert!(!errors.is_empty(), "no console error seen");
}

#[test]
fn bad_lines_and_missing_sources_are_named_and_the_rest_runs() {
    let model = real_model(RealModel::SmolLM2);
    let schema = tmp("contract.json");
    std::fs::write(
        &schema,
        r#"{"type":"object","additionalProperties":false,"required":["party","clause"],
            "properties":{"party":{"type":["string","null"]},
                          "clause":{"type":"string","maxLength":30,"x-llamay-quote":"contract"}}}"#,
    )
    .unwrap();
    let data = tmp("contract.jsonl");
    std::fs::write(
        &data,
        concat!(
            "{\"id\":\"a\",\"input\":\"Who signs?\",\"expected\":{\"party\":\"Acme\",\"clause\":\"Acme Ltd signs\"},\"sources\":{\"contract\":\"This deal: Acme Ltd signs.\"}}\n",
            "{\"id\":\"broken\",\"input\":\"x\",\n",
            "{\"id\":\"c\",\"input\":\"Who pays?\",\"expected\":{\"party\":null,\"clause\":\"pays\"}}\n",
            "{\"id\":\"d\",\"input\":\"Who pays?\",\"expected\":{\"party\":\"Bo\",\"clause\":\"Bo pays\"},\"sources\":{\"contract\":\"Bo pays all.\"}}\n",
        ),
    )
    .unwrap();
    let out = eval(&[
        "-m",
        model.to_str().unwrap(),
        "-threads",
        "2",
        "-schema",
        schema.to_str().unwrap(),
        "-data",
        data.to_str().unwrap(),
        "-max-tokens",
        "48",
        "-json",
    ]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stderr.contains("line 2"), "{}", out.stderr);
    let report: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(report["bad_lines"][0]["line"], 2);
    let docs = report["documents"].as_array().unwrap();
    let ids: Vec<&str> = docs.iter().map(|d| d["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["a", "c", "d"]);
    let err = docs[1]["runs"]["constrained"]["error"].as_str().unwrap();
    assert!(
        err.contains("x-llamay-quote") && err.contains("\"contract\""),
        "{err}"
    );
    for i in [0, 2] {
        let run = &docs[i]["runs"]["constrained"];
        assert!(run["error"].is_null(), "{run}");
        let clause = run["value"]["clause"].as_str().unwrap();
        let source = if i == 0 {
            "This deal: Acme Ltd signs."
        } else {
            "Bo pays all."
        };
        assert!(source.contains(clause), "{clause:?}");
    }

    // A schema the constraint refuses: refused before any model work, naming it.
    let refused = tmp("refused.json");
    std::fs::write(
        &refused,
        r#"{"type":"object","properties":{"a":{"not":{"type":"string"}}}}"#,
    )
    .unwrap();
    let out = eval(&[
        "-m",
        model.to_str().unwrap(),
        "-schema",
        refused.to_str().unwrap(),
        "-data",
        data.to_str().unwrap(),
    ]);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("\"not\"") && out.stderr.contains("properties.a"),
        "{}",
        out.stderr
    );
}

/// Data lines may carry pictures (`images`: a file beside the data, or a data URL)
/// read through `-mmproj`; a document of pictures only has no text to quote, and a
/// model without a projector refuses pictures naming the capability. Each failure
/// stays in its own document.
#[test]
fn documents_may_be_pictures() {
    let model = llamay_testdata::ref_path("tiny/tiny-gemma3-Q6_K.gguf");
    let projector = llamay_testdata::vision_model("gemma3-F32");
    let images = llamay_testdata::vision_reference().join("images");
    let data = tmp("pictures.jsonl");
    std::fs::copy(images.join("square-rgb.png"), tmp("square.png")).unwrap();
    let schema = tmp("pictures.json");
    std::fs::write(
        &schema,
        r#"{"type":"object","additionalProperties":false,"required":["n","said"],
            "properties":{"n":{"type":"integer","minimum":0,"maximum":9},
                          "said":{"type":["string","null"],"maxLength":12,"x-llamay-quote":true}}}"#,
    )
    .unwrap();
    std::fs::write(
        &data,
        concat!(
            "{\"id\":\"text\",\"input\":\"Three cats.\",\"images\":[\"square.png\"],\"expected\":{\"n\":3,\"said\":\"Three\"}}\n",
            "{\"id\":\"alone\",\"images\":[\"square.png\"],\"expected\":{\"n\":1,\"said\":null}}\n",
            "{\"id\":\"gone\",\"images\":[\"gone.png\"],\"expected\":{\"n\":1,\"said\":null}}\n",
        ),
    )
    .unwrap();
    let run = |with_projector: bool| {
        let mut args = vec![
            "-m",
            model.to_str().unwrap(),
            "-threads",
            "2",
            "-schema",
            schema.to_str().unwrap(),
            "-data",
            data.to_str().unwrap(),
            "-max-tokens",
            "24",
            "-json",
        ];
        if with_projector {
            args.extend(["-mmproj", projector.to_str().unwrap()]);
        }
        let out = eval(&args);
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        assert!(out.stderr.contains("gone.png"), "{}", out.stderr);
        let report: Value = serde_json::from_str(&out.stdout).unwrap();
        let docs = report["documents"].as_array().unwrap().clone();
        let ids: Vec<&str> = docs.iter().map(|d| d["id"].as_str().unwrap()).collect();
        assert_eq!(ids, ["text", "alone"]);
        docs
    };
    let docs = run(true);
    let with_text = &docs[0]["runs"]["constrained"];
    assert!(with_text["error"].is_null(), "{with_text}");
    assert_eq!(with_text["schema_valid"], true, "{with_text}");
    if let Some(said) = with_text["value"]["said"].as_str() {
        assert!("Three cats.".contains(said), "{said:?}");
    }
    let alone = docs[1]["runs"]["constrained"]["error"].as_str().unwrap();
    assert!(alone.contains("no input text"), "{alone}");

    // Without the projector the document with text is refused for its picture (the
    // one without text already for its quote).
    let docs = run(false);
    let err = docs[0]["runs"]["constrained"]["error"].as_str().unwrap();
    assert!(err.contains("capability \"vision\""), "{err}");
}
