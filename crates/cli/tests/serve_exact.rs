//! The whole-output constraints on every route: `llamay_lexicon` (a served lexicon or
//! inline terms), `llamay_choice`, `llamay_regex`, vLLM's `guided_*` aliases; schema
//! strings with `x-llamay-lexicon` and `format`; `llamay_options`; the banner's and
//! the catalog's lexicon counts.

mod common;

use common::serve::{client, post, Server};
use serde_json::{json, Value};

const CITIES: [&str; 5] = [
    "Paris",
    "Lyon",
    "Saint-Étienne",
    "New York",
    "Name \"Quoted\"",
];

fn lexicon_file() -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("llamay-cities-{}.txt", std::process::id()));
    std::fs::write(&p, CITIES.join("\n") + "\n").unwrap();
    p
}

/// The generated text of a response, whatever the route.
fn text(path: &str, v: &Value) -> String {
    let t = match path {
        "/v1/chat/completions" => &v["choices"][0]["message"]["content"],
        "/v1/completions" => &v["choices"][0]["text"],
        "/v1/messages" => &v["content"][0]["text"],
        "/v1/responses" => &v["output"][0]["content"][0]["text"],
        "/api/chat" => &v["message"]["content"],
        _ => &v["response"],
    };
    t.as_str()
        .unwrap_or_else(|| panic!("{path}: no text in {v}"))
        .to_string()
}

fn body(path: &str, model: &str, seed: u64, extra: Value) -> Value {
    let msgs = json!([{"role": "user", "content": "Name a city."}]);
    let mut b = match path {
        "/v1/completions" | "/api/generate" => json!({"prompt": "A city:"}),
        "/v1/responses" => json!({"input": "Name a city."}),
        _ => json!({"messages": msgs}),
    };
    b["model"] = json!(model);
    b["stream"] = json!(false);
    if path.starts_with("/api/") {
        b["options"] = json!({"seed": seed, "temperature": 1.0, "num_predict": 40});
    } else {
        b["seed"] = json!(seed);
        b["temperature"] = json!(1.0);
        let n = if path == "/v1/responses" {
            "max_output_tokens"
        } else {
            "max_tokens"
        };
        b[n] = json!(40);
    }
    for (k, v) in extra.as_object().unwrap() {
        b[k] = v.clone();
    }
    b
}

const ROUTES: [&str; 6] = [
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/messages",
    "/v1/responses",
    "/api/chat",
    "/api/generate",
];

#[test]
fn exact_outputs_on_every_route() {
    let file = lexicon_file();
    let s = Server::start(&["-lexicon", &format!("cities={}", file.display())]);
    assert!(s.log_line.contains(" lexicon=5"), "{}", s.log_line);
    let c = client();
    let choices = ["red", "green", "blue sky"];
    for path in ROUTES {
        for seed in 0..3 {
            let (st, v) = post(
                &c,
                &s.url(path),
                &body(path, &s.model, seed, json!({"llamay_lexicon": "cities"})),
            );
            assert_eq!(st, 200, "{path}: {v}");
            let t = text(path, &v);
            assert!(CITIES.contains(&t.as_str()), "{path}: {t:?} is not a city");
            let (st, v) = post(
                &c,
                &s.url(path),
                &body(path, &s.model, seed, json!({"guided_choice": choices})),
            );
            assert_eq!(st, 200, "{path}: {v}");
            assert!(choices.contains(&text(path, &v).as_str()), "{path}: {v}");
        }
        let (st, v) = post(
            &c,
            &s.url(path),
            &body(
                path,
                &s.model,
                1,
                json!({"llamay_regex": "[0-9]{3}-[a-z]{2}"}),
            ),
        );
        assert_eq!(st, 200, "{path}: {v}");
        let t = text(path, &v);
        assert!(t.len() == 6 && t.as_bytes()[3] == b'-', "{path}: {t:?}");
    }
    // The report names the kind and the lexicon.
    let path = "/v1/chat/completions";
    let (_, v) = post(
        &c,
        &s.url(path),
        &body(
            path,
            &s.model,
            0,
            json!({"llamay_choice": ["a", "b"], "llamay_regex": "x"}),
        ),
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("llamay_regex and llamay_choice were both given"),
        "{v}"
    );
    let (_, v) = post(
        &c,
        &s.url(path),
        &body(
            path,
            &s.model,
            0,
            json!({"llamay_lexicon": {"terms": ["yes", "no"]}}),
        ),
    );
    assert_eq!(v["llamay"]["constraint"], "lexicon", "{v}");
    assert!(["yes", "no"].contains(&text(path, &v).as_str()));
    let (st, v) = post(
        &c,
        &s.url(path),
        &body(path, &s.model, 0, json!({"llamay_lexicon": "towns"})),
    );
    assert_eq!(st, 400, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("(loaded: cities)"),
        "{v}"
    );
    // The catalog lists the lexicon.
    let cat: Value = c
        .get(s.url("/v1/catalog/models"))
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(
        cat["data"][0]["lexicons"],
        json!([{"name": "cities", "terms": 5}]),
        "{cat}"
    );
    let _ = std::fs::remove_file(file);
}

#[test]
fn schemas_with_lexicons_formats_and_vllm_fields() {
    let file = lexicon_file();
    let s = Server::start(&["-lexicon", &format!("cities={}", file.display())]);
    let c = client();
    let schema = json!({"type": "object", "properties": {
        "city": {"type": "string", "x-llamay-lexicon": "cities"},
        "day": {"type": "string", "format": "date"}}, "required": ["city", "day"]});
    let date = regex_date();
    let path = "/v1/chat/completions";
    for (field, value) in [
        (
            "response_format",
            json!({"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}),
        ),
        ("guided_json", json!(schema.to_string())),
    ] {
        for seed in 0..3 {
            let (st, v) = post(
                &c,
                &s.url(path),
                &body(
                    path,
                    &s.model,
                    seed,
                    json!({field: value, "max_tokens": 80}),
                ),
            );
            assert_eq!(st, 200, "{v}");
            let doc: Value =
                serde_json::from_str(&text(path, &v)).unwrap_or_else(|e| panic!("{v}: {e}"));
            assert!(CITIES.contains(&doc["city"].as_str().unwrap()), "{doc}");
            assert!(date(doc["day"].as_str().unwrap()), "{doc}");
            let enforced = v["llamay"]["enforced"].to_string();
            assert!(
                enforced.contains("lexicon cities at properties.city: enforced"),
                "{enforced}"
            );
            assert!(
                enforced.contains("format date at properties.day: enforced"),
                "{enforced}"
            );
        }
    }
    // guided_grammar is GBNF.
    let (st, v) = post(
        &c,
        &s.url(path),
        &body(
            path,
            &s.model,
            0,
            json!({"guided_grammar": "root ::= \"ok\" [0-9]"}),
        ),
    );
    assert_eq!(st, 200, "{v}");
    assert!(text(path, &v).starts_with("ok"), "{v}");
    // llamay_options: checked, and open objects accepted.
    let open =
        json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]});
    let (st, v) = post(
        &c,
        &s.url(path),
        &body(
            path,
            &s.model,
            0,
            json!({"llamay_schema": open,
        "llamay_options": {"additional_properties": "open"}, "max_tokens": 60}),
        ),
    );
    assert_eq!(st, 200, "{v}");
    let (st, v) = post(
        &c,
        &s.url(path),
        &body(
            path,
            &s.model,
            0,
            json!({"llamay_schema": open,
        "llamay_options": {"additional_properties": "loose"}}),
        ),
    );
    assert_eq!(st, 400, "{v}");
    let _ = std::fs::remove_file(file);
}

/// `YYYY-MM-DD` with a real month and day.
fn regex_date() -> impl Fn(&str) -> bool {
    |d: &str| {
        let p: Vec<&str> = d.split('-').collect();
        p.len() == 3
            && p[0].len() == 4
            && p[1].parse::<u32>().is_ok_and(|m| (1..=12).contains(&m))
            && p[2].parse::<u32>().is_ok_and(|x| (1..=31).contains(&x))
    }
}

/// Objects of strings with distinct patterns: hundreds of milliseconds to compile.
fn costly_schema() -> Value {
    let groups: serde_json::Map<String, Value> = (0..12)
        .map(|g| {
            let props: serde_json::Map<String, Value> = (0..40)
                .map(|i| {
                    let p = format!("^[a-z]{{0,{}}}{g}y{i}[a-z0-9]{{0,30}}$", 20 + i);
                    (format!("s{i}"), json!({"type": "string", "pattern": p}))
                })
                .collect();
            (
                format!("group{g}"),
                json!({"type": "object", "properties": props}),
            )
        })
        .collect();
    json!({"type": "object", "properties": groups})
}

#[test]
fn a_compile_past_its_budget_is_a_400_and_others_are_served_meanwhile() {
    let budget_ms = 150;
    let s = Server::start(&["-compile-budget-ms", &budget_ms.to_string()]);
    let c = client();
    let path = "/v1/chat/completions";
    let slow = body(path, &s.model, 0, json!({"llamay_schema": costly_schema()}));
    let url = s.url(path);
    let slow_req = {
        let (c, url, slow) = (c.clone(), url.clone(), slow.clone());
        std::thread::spawn(move || {
            let t0 = std::time::Instant::now();
            let (st, v) = post(&c, &url, &slow);
            (st, v, t0.elapsed())
        })
    };
    // Meanwhile, a request without a schema is answered.
    let (st, v) = post(&c, &url, &body(path, &s.model, 0, json!({"max_tokens": 4})));
    assert_eq!(st, 200, "{v}");
    let (st, v, took) = slow_req.join().unwrap();
    assert_eq!(st, 400, "{v}");
    let msg = v["error"]["message"].as_str().unwrap().to_string();
    assert!(
        msg.contains("compile budget of 150 ms") && msg.contains("properties.group"),
        "{msg}"
    );
    eprintln!("over-budget schema answered in {took:?} (budget {budget_ms} ms)");
    assert!(took.as_millis() < budget_ms + 150, "{took:?}");
    // The same schema again: the remembered refusal, without compiling.
    let t0 = std::time::Instant::now();
    let (st, again) = post(&c, &url, &slow);
    let retry = t0.elapsed();
    assert_eq!(
        (st, &again["error"]["message"]),
        (400, &v["error"]["message"])
    );
    eprintln!("retry answered in {retry:?}");
    assert!(retry.as_millis() < 50, "{retry:?}");
}
