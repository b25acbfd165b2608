//! Limits and the pull route: a full queue answers 503 with Retry-After, a request
//! past its time is stopped with a 504, and `/api/pull` streams NDJSON progress
//! while it fetches a model (here by URL, from a file server on loopback). A prompt
//! past the context is tested in-process (crates/server/tests/http/refusals.rs).

mod common;

use std::time::Duration;

use common::serve::{client, post, Server};
use serde_json::{json, Value};

#[test]
fn a_full_queue_answers_503_with_retry_after() {
    let s = Server::start(&["-parallel", "1", "-queue", "1"]);
    let base = s.url("/v1/chat/completions");
    let model = s.model.clone();
    let handles: Vec<_> = (0..6)
        .map(|_| {
            let (base, model) = (base.clone(), model.clone());
            std::thread::spawn(move || {
                let r = client()
                    .post(base)
                    .json(&json!({"model": model, "max_tokens": 40, "messages": [{"role": "user", "content": "Tell a story."}]}))
                    .send()
                    .unwrap();
                let status = r.status().as_u16();
                let retry = r.headers().get("retry-after").map(|v| v.to_str().unwrap().to_string());
                (status, retry, r.json::<Value>().unwrap())
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let busy: Vec<_> = results.iter().filter(|r| r.0 == 503).collect();
    assert!(!busy.is_empty(), "{results:?}");
    assert!(results.iter().any(|r| r.0 == 200), "{results:?}");
    assert!(
        results.iter().all(|r| r.0 == 200 || r.0 == 503),
        "{results:?}"
    );
    for (_, retry, body) in busy {
        assert_eq!(retry.as_deref(), Some("1"));
        assert_eq!(body["error"]["type"], "server_overloaded");
    }
}

#[test]
fn a_request_past_its_timeout_is_stopped() {
    let s = Server::start(&["-timeout", "1"]);
    let c = client();
    let (st, v) = post(
        &c,
        &s.url("/api/chat"),
        // The schema cannot be met in fewer than about 2,000 tokens, so the model
        // cannot end the answer (or sample its way to an end) within the second.
        &json!({"model": s.model, "stream": false, "messages": [{"role": "user", "content": "Tell a long story."}],
            "format": {"type": "array", "minItems": 1000, "items": {"type": "integer"}},
            "options": {"num_predict": 4000}}),
    );
    assert_eq!(st, 504, "{v}");
    assert!(
        v["error"].as_str().unwrap().contains("longer than 1s"),
        "{v}"
    );
    // The answer goes out at once; the engine drops the sequence at its next step.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let stats = loop {
        let stats: Value = c.get(s.url("/v1/stats")).send().unwrap().json().unwrap();
        if stats["active"] == 0 || std::time::Instant::now() > deadline {
            break stats;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(stats["timed_out"], 1);
    assert_eq!(stats["active"], 0, "{stats}");
}

/// Serves one file over plain HTTP on loopback (HEAD, GET, single ranges).
fn file_server(bytes: Vec<u8>) -> (String, std::thread::JoinHandle<()>) {
    use axum::http::{header, HeaderMap, StatusCode};
    use axum::response::IntoResponse;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let bytes = std::sync::Arc::new(bytes);
    let h = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let app = axum::Router::new().route(
                "/models/tiny-test.gguf",
                axum::routing::get(move |headers: HeaderMap| {
                    let bytes = bytes.clone();
                    async move {
                        let range = headers
                            .get(header::RANGE)
                            .and_then(|v| v.to_str().ok())
                            .and_then(|v| v.strip_prefix("bytes="))
                            .and_then(|v| v.split_once('-'))
                            .and_then(|(a, b)| {
                                let a: usize = a.parse().ok()?;
                                let b: usize = if b.is_empty() {
                                    bytes.len() - 1
                                } else {
                                    b.parse().ok()?
                                };
                                Some((a, b.min(bytes.len() - 1)))
                            });
                        match range {
                            Some((a, b)) => (
                                StatusCode::PARTIAL_CONTENT,
                                [(
                                    header::CONTENT_RANGE,
                                    format!("bytes {a}-{b}/{}", bytes.len()),
                                )],
                                bytes[a..=b].to_vec(),
                            )
                                .into_response(),
                            None => (StatusCode::OK, bytes.to_vec()).into_response(),
                        }
                    }
                }),
            );
            let l = tokio::net::TcpListener::from_std(listener).unwrap();
            let _ = tokio::time::timeout(Duration::from_secs(60), axum::serve(l, app)).await;
        });
    });
    (format!("http://{addr}/models/tiny-test.gguf"), h)
}

#[test]
fn pull_streams_ndjson_progress_and_the_model_then_lists() {
    let tiny = llamay_testdata::tiny_models()
        .into_iter()
        .find(|p| p.to_string_lossy().contains("llama"))
        .unwrap_or_else(|| llamay_testdata::tiny_models().remove(0));
    let (url, _server) = file_server(std::fs::read(&tiny).unwrap());
    // The file server is plain http on loopback (see serve_pull.rs for the refusals).
    let s = Server::start(&["-allow-private-pulls", "-insecure"]);
    let c = client();
    let r = c
        .post(s.url("/api/pull"))
        .json(&json!({"model": url}))
        .send()
        .unwrap();
    assert_eq!(r.headers()["content-type"], "application/x-ndjson");
    let body = r.text().unwrap();
    let lines: Vec<Value> = body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.last().unwrap()["status"], "success", "{body}");
    let progress: Vec<&Value> = lines.iter().filter(|l| l["total"].is_u64()).collect();
    assert!(!progress.is_empty(), "{body}");
    let done = progress.last().unwrap();
    assert_eq!(done["completed"], done["total"]);
    assert_eq!(
        done["total"].as_u64().unwrap(),
        std::fs::metadata(&tiny).unwrap().len()
    );
    let tags: Value = c.get(s.url("/api/tags")).send().unwrap().json().unwrap();
    assert!(
        tags["models"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["name"].as_str().unwrap().contains("tiny-test")),
        "{tags}"
    );
    // Non-streaming: one JSON object.
    let (st, v) = post(
        &c,
        &s.url("/api/pull"),
        &json!({"model": url, "stream": false}),
    );
    assert_eq!((st, v["status"].as_str()), (200, Some("success")), "{v}");
}

#[test]
fn serve_grammar_file_constrains_requests_that_bring_none() {
    let g = std::env::temp_dir().join(format!("llamay-serve-yesno-{}.gbnf", std::process::id()));
    std::fs::write(&g, "root ::= (\"yes\" | \"no\") \"!\"\n").unwrap();
    let s = Server::start(&["-grammar-file", g.to_str().unwrap()]);
    let c = client();
    let (st, v) = post(
        &c,
        &s.url("/v1/chat/completions"),
        &json!({"model": s.model, "max_tokens": 10, "messages": [{"role": "user", "content": "Is the sky blue?"}]}),
    );
    assert_eq!(st, 200, "{v}");
    let text = v["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(text == "yes!" || text == "no!", "{text:?}");
    assert_eq!(v["llamay"]["constraint"], "grammar");
    // A request's own constraint replaces it.
    let (_, v) = post(
        &c,
        &s.url("/api/generate"),
        &json!({"model": s.model, "prompt": "A JSON number:", "format": "json", "stream": false, "options": {"num_predict": 20}}),
    );
    assert_eq!(v["llamay"]["constraint"], "json", "{v}");
    // JSON mode is an object even where the prompt invites a number.
    assert!(
        v["response"]
            .as_str()
            .unwrap()
            .trim_start()
            .starts_with('{'),
        "{v}"
    );
    let _ = std::fs::remove_file(&g);
}
