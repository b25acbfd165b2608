//! Malformed bodies thrown at every route of the real `llamay serve`: every answer
//! is a 4xx (or a 200 when the mutation happens to be a valid request), never a 5xx,
//! and the server keeps serving.

mod common;

use common::serve::{client, Server};
use proptest::prelude::*;
use serde_json::{json, Value};

/// Valid requests per route, each cheap (a few tokens at most).
fn seeds(model: &str) -> Vec<(&'static str, &'static str, Value)> {
    let msgs = json!([{"role": "user", "content": "hi"}]);
    vec![
        (
            "POST",
            "/v1/chat/completions",
            json!({"model": model, "messages": msgs, "max_tokens": 2}),
        ),
        (
            "POST",
            "/v1/completions",
            json!({"model": model, "prompt": "hi", "max_tokens": 2}),
        ),
        (
            "POST",
            "/v1/messages",
            json!({"model": model, "messages": msgs, "max_tokens": 2}),
        ),
        (
            "POST",
            "/api/chat",
            json!({"model": model, "messages": msgs, "stream": false, "options": {"num_predict": 2}}),
        ),
        (
            "POST",
            "/api/generate",
            json!({"model": model, "prompt": "hi", "stream": false, "options": {"num_predict": 2}}),
        ),
        ("POST", "/api/show", json!({"model": model})),
        (
            "POST",
            "/api/copy",
            json!({"source": "a:latest", "destination": "b:latest"}),
        ),
        ("DELETE", "/api/delete", json!({"model": "a:latest"})),
        // Only malformed bodies: a valid name would start a network pull.
        ("POST", "/api/pull", json!({"model": 1})),
    ]
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-z_]{1,12}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Fields the routes read, so mutations hit real parsing paths.
const FIELDS: [&str; 23] = [
    "model",
    "messages",
    "prompt",
    "max_tokens",
    "temperature",
    "top_p",
    "stop",
    "stream",
    "response_format",
    "llamay_schema",
    "llamay_grammar",
    "grammar",
    "format",
    "options",
    "system",
    "stop_sequences",
    "tools",
    "tool_choice",
    "output_config",
    "seed",
    "n",
    "keep_alive",
    "raw",
];

#[derive(Debug, Clone)]
enum Body {
    Bytes(Vec<u8>),
    Json(Value),
    /// (seed index, field, replacement)
    Mutated(usize, usize, Value),
    Truncated(usize, usize),
}

fn arb_body() -> impl Strategy<Value = Body> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..64).prop_map(Body::Bytes),
        arb_json().prop_map(Body::Json),
        (0..9usize, 0..FIELDS.len(), arb_json()).prop_map(|(s, f, v)| Body::Mutated(s, f, v)),
        (0..9usize, 0..200usize).prop_map(|(s, n)| Body::Truncated(s, n)),
    ]
}

#[test]
fn malformed_bodies_get_4xx_and_the_server_survives() {
    let mut s = Server::start(&["-ctx", "128", "-timeout", "20"]);
    let c = client();
    let seeds = seeds(&s.model);
    let mut config = ProptestConfig::with_cases(400);
    config.failure_persistence = None;
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let seen = std::cell::RefCell::new(std::collections::BTreeMap::new());
    runner
        .run(&(0..seeds.len(), arb_body()), |(route, body)| {
            let (method, path, _) = &seeds[route];
            let bytes = match &body {
                Body::Bytes(b) => b.clone(),
                Body::Json(v) => v.to_string().into_bytes(),
                Body::Mutated(si, f, v) => {
                    let mut base = seeds[*si % seeds.len()].2.clone();
                    if path.ends_with("/pull") {
                        base = json!({"model": 1});
                    }
                    base[FIELDS[*f]] = v.clone();
                    if path.ends_with("/pull") {
                        base["model"] = json!(1);
                    }
                    base.to_string().into_bytes()
                }
                Body::Truncated(si, n) => {
                    let full = seeds[*si % seeds.len()].2.to_string().into_bytes();
                    full[..(*n).min(full.len().saturating_sub(1))].to_vec()
                }
            };
            let req = match *method {
                "DELETE" => c.delete(format!("{}{path}", s.base)),
                _ => c.post(format!("{}{path}", s.base)),
            };
            let r = req
                .header("content-type", "application/json")
                .body(bytes.clone())
                .send()
                .map_err(|e| TestCaseError::fail(format!("{path}: {e}")))?;
            let status = r.status().as_u16();
            let text = r.text().unwrap_or_default();
            *seen.borrow_mut().entry(status).or_insert(0usize) += 1;
            prop_assert!(
                status == 200 || (400..500).contains(&status),
                "{path} {}: {status} {text}",
                String::from_utf8_lossy(&bytes)
            );
            if status >= 400 {
                prop_assert!(
                    serde_json::from_str::<Value>(&text).is_ok(),
                    "{path}: {text}"
                );
            }
            Ok(())
        })
        .unwrap();
    let seen = seen.into_inner();
    eprintln!("statuses: {seen:?}");
    assert!(s.alive());
    let r = c.get(s.url("/health")).send().unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert!(seen.keys().any(|&k| k >= 400));
}
