//! No web page can drive the server, in-process (see `common`): a foreign `Origin`, a
//! foreign `Host` (DNS rebinding) or a page's body not declared JSON is refused before
//! any handler runs, so a pull a page asks for never reaches the network. The SDKs'
//! requests (no `Origin`, a loopback `Host`, JSON) and `curl -d` still pass. (Moved
//! from the binary test `crates/cli/tests/serve_boundary.rs`, which keeps what needs
//! the process: the CLI's refusal to listen beyond loopback without a key, and a
//! connection that never finishes its headers.)

use std::net::TcpListener;
use std::time::Duration;

use crate::common::{App, Reply, Setup};
use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use serde_json::{json, Value};

/// The `Host` a client of `llamay serve` on its default port sends.
const HOST: &str = "127.0.0.1:11434";

/// Sends `body` with `headers` (a `host` among them replaces [`HOST`]).
async fn send(
    app: &App,
    method: &Method,
    path: &str,
    body: &Value,
    headers: &[(&str, String)],
    content_type: &str,
) -> Reply {
    let mut req = Request::builder()
        .method(method.clone())
        .uri(path)
        .header(header::CONTENT_TYPE, content_type);
    if !headers.iter().any(|(k, _)| *k == "host") {
        req = req.header(header::HOST, HOST);
    }
    for (k, v) in headers {
        req = req.header(*k, v);
    }
    app.request(req.body(Body::from(body.to_string())).unwrap())
        .await
}

/// What a page could send, and the status each must get.
fn attacks(model: &str, pull_url: &str) -> Vec<(Method, &'static str, Value)> {
    vec![
        (
            Method::POST,
            "/api/pull",
            json!({"model": pull_url, "insecure": true}),
        ),
        (
            Method::POST,
            "/api/copy",
            json!({"source": model, "destination": "stolen:1"}),
        ),
        (Method::DELETE, "/api/delete", json!({"model": model})),
        (
            Method::POST,
            "/v1/chat/completions",
            json!({"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_and_rebound_names_are_refused_and_nothing_is_fetched() {
    // A store of its own, as `llamay serve` has: a pull, copy or delete that got past
    // the boundary would reach it.
    let app = App::with(Setup {
        store: true,
        ..Setup::default()
    });
    // A registry a page would like the server to fetch from: it must see nothing.
    let trap = TcpListener::bind("127.0.0.1:0").unwrap();
    trap.set_nonblocking(true).unwrap();
    let pull_url = format!("http://{}/evil.gguf", trap.local_addr().unwrap());
    let port = HOST.rsplit(':').next().unwrap();
    for (method, path, body) in attacks(&app.model, &pull_url) {
        let status = |r: &Reply| -> (u16, Value) {
            (
                r.status.as_u16(),
                serde_json::from_str(&r.text).unwrap_or(Value::Null),
            )
        };
        let (st, v) = status(
            &send(
                &app,
                &method,
                path,
                &body,
                &[("origin", "https://evil.example".into())],
                "application/json",
            )
            .await,
        );
        assert_eq!(st, 403, "{method} {path} from a foreign origin: {v}");
        assert!(v.to_string().contains("origin"), "{v}");
        let (st, v) = status(
            &send(
                &app,
                &method,
                path,
                &body,
                &[("host", format!("evil.example:{port}"))],
                "application/json",
            )
            .await,
        );
        assert_eq!(st, 403, "{method} {path} for a foreign host: {v}");
        // A form post from a page, even a loopback one: browsers mark it with
        // Origin and Sec-Fetch-Site.
        let page = [
            ("origin", "http://localhost:5173".to_string()),
            ("sec-fetch-site", "same-site".to_string()),
        ];
        let (st, v) = status(&send(&app, &method, path, &body, &page, "text/plain").await);
        assert_eq!(st, 415, "{method} {path} as text/plain: {v}");
        let r = send(
            &app,
            &method,
            path,
            &body,
            &page,
            "application/x-www-form-urlencoded",
        )
        .await;
        assert_eq!(r.status.as_u16(), 415, "{method} {path} as a form");
        let r = send(
            &app,
            &method,
            path,
            &body,
            &[("sec-fetch-site", "cross-site".into())],
            "multipart/form-data",
        )
        .await;
        assert_eq!(
            r.status.as_u16(),
            415,
            "{method} {path} as a cross-site multipart form"
        );
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        trap.accept().is_err(),
        "a refused pull still connected to the registry"
    );
    // The model is still there, under its name only.
    let tags = app.get("/api/tags").await.json();
    assert!(!tags.to_string().contains("stolen"), "{tags}");
    let r = app
        .post(
            "/v1/chat/completions",
            json!({"model": app.model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loopback_page_is_answered_with_cors_and_an_allowed_origin_too() {
    // `llamay serve -allow-origin https://app.example`.
    let app = App::with(Setup {
        allowed_origins: vec!["https://app.example".into()],
        ..Setup::default()
    });
    let get_tags = |origin: &str| {
        Request::get("/api/tags")
            .header(header::HOST, HOST)
            .header(header::ORIGIN, origin)
            .body(Body::empty())
            .unwrap()
    };
    for origin in ["http://localhost:5173", "https://app.example"] {
        let r = app.request(get_tags(origin)).await;
        assert_eq!(r.status.as_u16(), 200, "{origin}");
        assert_eq!(r.headers[header::ACCESS_CONTROL_ALLOW_ORIGIN], origin);
        let pre = app
            .request(
                Request::options("/v1/chat/completions")
                    .header(header::HOST, HOST)
                    .header(header::ORIGIN, origin)
                    .header(header::ACCESS_CONTROL_REQUEST_METHOD, "POST")
                    .body(Body::empty())
                    .unwrap(),
            )
            .await;
        assert_eq!(pre.status.as_u16(), 204, "{origin}");
        assert!(pre
            .headers
            .contains_key(header::ACCESS_CONTROL_ALLOW_HEADERS));
    }
    let r = app.request(get_tags("https://other.example")).await;
    assert_eq!(r.status.as_u16(), 403);
}

/// Ollama's API documentation drives the server with `curl … -d '{…}'`, which sends
/// JSON typed as a form and no `Origin`; each example works as written (only the
/// model name is ours).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ollamas_curl_examples_are_read_as_json() {
    // A 256-position context: the tiny Qwen3's noise rarely ends by itself, so the
    // unbounded examples run to the context's end (SmolLM2 answered and stopped).
    let app = App::with(Setup {
        n_ctx: 256,
        ..Setup::default()
    });
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
        // curl's own request: its Host, no Origin, the form type of `-d`.
        let r = app
            .request(
                Request::post(path)
                    .header(header::HOST, HOST)
                    .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                    .body(Body::from(body.replace("MODEL", &app.model)))
                    .unwrap(),
            )
            .await;
        assert_eq!(r.status.as_u16(), 200, "{path}: {}", r.text);
        // Generation streams NDJSON by default; its last line says it is done.
        let last: Value = serde_json::from_str(r.text.lines().last().unwrap()).unwrap();
        match path {
            "/api/embed" => assert!(last["embeddings"][0].as_array().unwrap().len() > 8),
            _ => assert_eq!(last["done"], true, "{path}: {last}"),
        }
        assert!(r.text.lines().count() > 1 || path == "/api/embed", "{path}");
    }
}
