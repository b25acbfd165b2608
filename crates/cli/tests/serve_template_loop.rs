//! A chat template that loops (it comes from the model file, which anyone can
//! publish) ends its request with a clear error in bounded time: the core is freed
//! for the next request, and shutdown is not held up.

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::serve::{post, Server};
use llamay_engine::GgufFile;
use llamay_testdata::{real_model, RealModel};
use serde_json::json;

/// 27 billion iterations that write nothing.
const LOOP: &str = "{% for a in range(3000) %}{% for b in range(3000) %}{% for c in range(3000) %}{% endfor %}{% endfor %}{% endfor %}";

/// The test model with its chat template replaced in place by [`LOOP`] (padded with
/// a Jinja comment to the same length, so no offset in the file moves).
fn looping_model() -> PathBuf {
    let src = real_model(RealModel::SmolLM2);
    let template = GgufFile::open(&src)
        .unwrap()
        .opt_str("tokenizer.chat_template")
        .unwrap()
        .expect("the test model has a chat template")
        .to_string();
    let pad = template
        .len()
        .checked_sub(LOOP.len() + 4)
        .expect("the template is long enough to hold the loop");
    let replacement = format!("{LOOP}{{#{}#}}", " ".repeat(pad));
    assert_eq!(replacement.len(), template.len());
    let mut bytes = std::fs::read(&src).unwrap();
    let at = bytes
        .windows(template.len())
        .position(|w| w == template.as_bytes())
        .unwrap();
    bytes[at..at + template.len()].copy_from_slice(replacement.as_bytes());
    let dst = std::env::temp_dir().join(format!("llamay-looping-{}.gguf", std::process::id()));
    std::fs::write(&dst, bytes).unwrap();
    dst
}

#[test]
fn a_looping_template_ends_its_request_and_holds_up_nothing() {
    let model = looping_model();
    let mut s = Server::start_model(&model, &["-timeout", "20"], &[]);
    let c = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let chat =
        json!({"model": s.model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4});
    for route in ["/v1/chat/completions", "/api/chat"] {
        let t0 = Instant::now();
        let body = if route == "/api/chat" {
            json!({"model": s.model, "messages": [{"role": "user", "content": "hi"}], "stream": false})
        } else {
            chat.clone()
        };
        let (st, v) = post(&c, &s.url(route), &body);
        assert_eq!(st, 400, "{route}: {v}");
        assert!(v.to_string().contains("instructions"), "{route}: {v}");
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "{route} outlived its timeout: {:?}",
            t0.elapsed()
        );
    }
    // The core is free: a request that needs no template is answered.
    let (st, v) = post(
        &c,
        &s.url("/v1/completions"),
        &json!({"model": s.model, "prompt": "Hello", "max_tokens": 4}),
    );
    assert_eq!(st, 200, "{v}");
    // The engine thread counts its slots after each step: give it that step.
    let t0 = Instant::now();
    loop {
        let stats: serde_json::Value = c.get(s.url("/v1/stats")).send().unwrap().json().unwrap();
        if stats["active"] == 0 {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "a slot stayed busy: {stats}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let (status, took) = s.terminate(Duration::from_secs(10));
    assert!(status.expect("still running after SIGTERM").success());
    assert!(took < Duration::from_secs(3), "shutdown took {took:?}");
    let _ = std::fs::remove_file(model);
}
