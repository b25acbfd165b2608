//! Malformed bodies thrown at every route, in-process (see `common`): every answer is
//! a 4xx (or a 200 when the mutation happens to be a valid request), never a 5xx, an
//! error is a JSON body, and the server keeps serving. (Moved from the binary test
//! `crates/cli/tests/serve_fuzz.rs`: the same strategy, routes and cases; the
//! server is the router over the tiny Qwen3 instead of `llamay serve` on SmolLM2.)

use std::time::Duration;

use crate::common::{App, Setup};
use axum::http::Method;
use proptest::prelude::*;
use serde_json::{json, Value};

/// Valid requests per route, each cheap (a few tokens at most).
fn seeds(model: &str) -> Vec<(Method, &'static str, Value)> {
    let msgs = json!([{"role": "user", "content": "hi"}]);
    vec![
        (
            Method::POST,
            "/v1/chat/completions",
            json!({"model": model, "messages": msgs, "max_tokens": 2}),
        ),
        (
            Method::POST,
            "/v1/completions",
            json!({"model": model, "prompt": "hi", "max_tokens": 2}),
        ),
        (
            Method::POST,
            "/v1/messages",
            json!({"model": model, "messages": msgs, "max_tokens": 2}),
        ),
        (
            Method::POST,
            "/api/chat",
            json!({"model": model, "messages": msgs, "stream": false, "options": {"num_predict": 2}}),
        ),
        (
            Method::POST,
            "/api/generate",
            json!({"model": model, "prompt": "hi", "stream": false, "options": {"num_predict": 2}}),
        ),
        (Method::POST, "/api/show", json!({"model": model})),
        (
            Method::POST,
            "/api/copy",
            json!({"source": "a:latest", "destination": "b:latest"}),
        ),
        (Method::DELETE, "/api/delete", json!({"model": "a:latest"})),
        // Only malformed bodies: a valid name would start a network pull.
        (Method::POST, "/api/pull", json!({"model": 1})),
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

/// A plain test driving its own tokio runtime: proptest's runner is synchronous.
#[test]
fn malformed_bodies_get_4xx_and_the_server_survives() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let _entered = rt.enter();
    // `llamay serve -ctx 128 -timeout 20` on an empty store, as the binary test ran.
    let app = App::with(Setup {
        n_ctx: 128,
        timeout: Duration::from_secs(20),
        store: true,
        ..Setup::default()
    });
    let seeds = seeds(&app.model);
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
            let r = rt.block_on(app.send_bytes(method.clone(), path, bytes.clone()));
            let status = r.status.as_u16();
            *seen.borrow_mut().entry(status).or_insert(0usize) += 1;
            prop_assert!(
                status == 200 || (400..500).contains(&status),
                "{path} {}: {status} {}",
                String::from_utf8_lossy(&bytes),
                r.text
            );
            if status >= 400 {
                prop_assert!(
                    serde_json::from_str::<Value>(&r.text).is_ok(),
                    "{path}: {}",
                    r.text
                );
            }
            Ok(())
        })
        .unwrap();
    let seen = seen.into_inner();
    eprintln!("statuses: {seen:?}");
    // Still serving: the binary test asked the process's `/health`; here a handler
    // that panicked would have failed its case, and the model still generates.
    let health = rt.block_on(app.get("/health"));
    assert_eq!(health.status.as_u16(), 200, "{}", health.text);
    let (_, path, body) = &seeds[0];
    let r = rt.block_on(app.post(path, body.clone()));
    assert_eq!(r.status.as_u16(), 200, "{}", r.text);
    assert!(seen.keys().any(|&k| k >= 400));
}
