//! No web page can drive the server: a foreign `Origin`, a foreign `Host` (DNS
//! rebinding) or a page's body not declared JSON is refused before any handler runs, so a
//! pull a page asks for never reaches the network. The SDKs' requests (no `Origin`,
//! a loopback `Host`, JSON) still pass.

mod common;

use std::net::TcpListener;
use std::time::Duration;

use common::serve::{client, Server};
use serde_json::{json, Value};

/// What a page could send, and the status each must get.
fn attacks(model: &str, pull_url: &str) -> Vec<(&'static str, &'static str, Value)> {
    vec![
        (
            "POST",
            "/api/pull",
            json!({"model": pull_url, "insecure": true}),
        ),
        (
            "POST",
            "/api/copy",
            json!({"source": model, "destination": "stolen:1"}),
        ),
        ("DELETE", "/api/delete", json!({"model": model})),
        (
            "POST",
            "/v1/chat/completions",
            json!({"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}),
        ),
    ]
}

#[test]
fn pages_and_rebound_names_are_refused_and_nothing_is_fetched() {
    let s = Server::start(&[]);
    let c = client();
    // A registry a page would like the server to fetch from: it must see nothing.
    let trap = TcpListener::bind("127.0.0.1:0").unwrap();
    trap.set_nonblocking(true).unwrap();
    let pull_url = format!("http://{}/evil.gguf", trap.local_addr().unwrap());
    let port = s.base.rsplit(':').next().unwrap().to_string();
    for (method, path, body) in attacks(&s.model, &pull_url) {
        let send = |headers: &[(&str, String)], content_type: &str| {
            let mut r = c
                .request(method.parse().unwrap(), s.url(path))
                .header("content-type", content_type)
                .body(body.to_string());
            for (k, v) in headers {
                r = r.header(*k, v);
            }
            let r = r.send().unwrap();
            let status = r.status().as_u16();
            let v: Value = r.json().unwrap_or(Value::Null);
            (status, v)
        };
        let (st, v) = send(
            &[("origin", "https://evil.example".into())],
            "application/json",
        );
        assert_eq!(st, 403, "{method} {path} from a foreign origin: {v}");
        assert!(v.to_string().contains("origin"), "{v}");
        let (st, v) = send(
            &[("host", format!("evil.example:{port}"))],
            "application/json",
        );
        assert_eq!(st, 403, "{method} {path} for a foreign host: {v}");
        // A form post from a page, even a loopback one: browsers mark it with
        // Origin and Sec-Fetch-Site.
        let page = [
            ("origin", "http://localhost:5173".to_string()),
            ("sec-fetch-site", "same-site".to_string()),
        ];
        let (st, v) = send(&page, "text/plain");
        assert_eq!(st, 415, "{method} {path} as text/plain: {v}");
        let (st, _) = send(&page, "application/x-www-form-urlencoded");
        assert_eq!(st, 415, "{method} {path} as a form");
        let (st, _) = send(
            &[("sec-fetch-site", "cross-site".into())],
            "multipart/form-data",
        );
        assert_eq!(st, 415, "{method} {path} as a cross-site multipart form");
    }
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        trap.accept().is_err(),
        "a refused pull still connected to the registry"
    );
    // The model is still there, under its name only.
    let tags: Value = c.get(s.url("/api/tags")).send().unwrap().json().unwrap();
    assert!(!tags.to_string().contains("stolen"), "{tags}");
    let (st, v) = common::serve::post(
        &c,
        &s.url("/v1/chat/completions"),
        &json!({"model": s.model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}),
    );
    assert_eq!(st, 200, "{v}");
}

#[test]
fn a_loopback_page_is_answered_with_cors_and_an_allowed_origin_too() {
    let s = Server::start(&["-allow-origin", "https://app.example"]);
    let c = client();
    for origin in ["http://localhost:5173", "https://app.example"] {
        let r = c
            .get(s.url("/api/tags"))
            .header("origin", origin)
            .send()
            .unwrap();
        assert_eq!(r.status().as_u16(), 200, "{origin}");
        assert_eq!(r.headers()["access-control-allow-origin"], origin);
        let pre = c
            .request(reqwest::Method::OPTIONS, s.url("/v1/chat/completions"))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .send()
            .unwrap();
        assert_eq!(pre.status().as_u16(), 204, "{origin}");
        assert!(pre.headers().contains_key("access-control-allow-headers"));
    }
    let r = c
        .get(s.url("/api/tags"))
        .header("origin", "https://other.example")
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
}

#[test]
fn beyond_loopback_the_server_wants_a_key() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_llamay"))
        .args(["serve", "-m", "/nonexistent.gguf", "-addr", "0.0.0.0:0"])
        .env_remove("LLAMAY_API_KEY")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("-api-key") && err.contains("-insecure-no-key"),
        "{err}"
    );
}

#[test]
fn a_connection_that_never_finishes_its_headers_is_closed() {
    use std::io::{Read, Write};
    let s = Server::start(&[]);
    let addr = s.base.trim_start_matches("http://").to_string();
    let mut conn = std::net::TcpStream::connect(&addr).unwrap();
    conn.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let t0 = std::time::Instant::now();
    let mut buf = Vec::new();
    // Closed by the server (EOF, possibly after a 408), not by our read timeout.
    let r = conn.read_to_end(&mut buf);
    assert!(
        r.is_ok(),
        "the connection was still open after {:?}: {r:?}",
        t0.elapsed()
    );
    assert!(t0.elapsed() < Duration::from_secs(25), "{:?}", t0.elapsed());
}

/// Ollama's API documentation drives the server with `curl … -d '{…}'`, which sends
/// JSON typed as a form and no `Origin`; each example works as written (only the
/// model name is ours).
#[test]
fn ollamas_curl_examples_are_read_as_json() {
    let s = Server::start(&[]);
    let c = client();
    let examples = [
        (
            "/api/generate",
            r#"{
  "model": "MODEL",
  "prompt": "Why is the sky blue?"
}"#,
        ),
        (
            "/api/chat",
            r#"{
  "model": "MODEL",
  "messages": [
    {
      "role": "user",
      "content": "why is the sky blue?"
    }
  ]
}"#,
        ),
        (
            "/api/embed",
            r#"{
  "model": "MODEL",
  "input": "Why is the sky blue?"
}"#,
        ),
    ];
    for (path, body) in examples {
        let r = c
            .post(s.url(path))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body.replace("MODEL", &s.model))
            .send()
            .unwrap();
        assert_eq!(r.status().as_u16(), 200, "{path}");
        let text = r.text().unwrap();
        // Generation streams NDJSON by default; its last line says it is done.
        let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        match path {
            "/api/embed" => assert!(last["embeddings"][0].as_array().unwrap().len() > 8),
            _ => assert_eq!(last["done"], true, "{path}: {last}"),
        }
        assert!(text.lines().count() > 1 || path == "/api/embed", "{path}");
    }
}
