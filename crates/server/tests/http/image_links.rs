//! Linked images (`serve -allow-image-urls`). Without the flag a link is refused on
//! every shape that takes one, naming the flag. With it, a link to a loopback,
//! link-local or private address is refused, by its literal address or by what its
//! name resolves to, unless private pulls are allowed; a picture fetched from a
//! link answers exactly as the same picture sent inline and is found in the prefix
//! cache by its pixels; a file too large, too slow or missing is a 400 naming the
//! URL; and the server keeps serving.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::routing::get;
use llamay_store::FetchLimits;
use serde_json::{json, Value};

use crate::common::{App, Setup};
use crate::vision::{answer, b64, picture, requests, QUESTION};

/// One request per shape that takes a link, linking `url`.
fn linking(url: &str) -> Vec<(&'static str, Value)> {
    vec![
        (
            "/v1/chat/completions",
            json!({"max_tokens": 4, "messages": [{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": url}},
                {"type": "text", "text": QUESTION}]}]}),
        ),
        (
            "/v1/responses",
            json!({"max_output_tokens": 4, "input": [{"role": "user", "content": [
                {"type": "input_image", "image_url": url},
                {"type": "input_text", "text": QUESTION}]}]}),
        ),
        (
            "/v1/messages",
            json!({"max_tokens": 4, "messages": [{"role": "user", "content": [
                {"type": "image", "source": {"type": "url", "url": url}},
                {"type": "text", "text": QUESTION}]}]}),
        ),
        (
            "/api/chat",
            json!({"stream": false, "messages": [
                {"role": "user", "content": QUESTION, "images": [url]}]}),
        ),
        (
            "/api/generate",
            json!({"stream": false, "prompt": QUESTION, "images": [url]}),
        ),
    ]
}

async fn refused(app: &App, url: &str, wanted: &str) {
    for (path, body) in linking(url) {
        let r = app.post(path, body).await;
        assert_eq!(r.status, 400, "{path} {url}: {}", r.text);
        assert!(
            r.text.contains(wanted),
            "{path} {url}: {wanted:?} not in {}",
            r.text
        );
    }
}

const LIMITS: FetchLimits = FetchLimits {
    max_bytes: 100_000,
    timeout: Duration::from_secs(2),
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn links_are_refused_without_the_flag_and_private_ones_with_it() {
    let app = App::new();
    refused(&app, "https://images.example/cat.png", "-allow-image-urls").await;

    let app = App::with(Setup {
        image_urls: Some(LIMITS),
        ..Setup::default()
    });
    // Literal addresses are judged before anything is sent, names after DNS.
    for (url, wanted) in [
        ("https://127.0.0.1:9/a.png", "a loopback address"),
        ("https://[::1]:9/a.png", "a loopback address"),
        (
            "https://169.254.169.254/latest/meta-data",
            "a link-local address",
        ),
        ("https://10.1.2.3/a.png", "a private address"),
        ("https://192.168.0.1/a.png", "a private address"),
        ("https://localhost:9/a.png", "resolves to"),
        ("http://images.example/cat.png", "plain http"),
    ] {
        refused(&app, url, wanted).await;
    }
    // Not a link: each shape's own refusal of what is not an inline image.
    let r = app
        .post(
            "/v1/chat/completions",
            linking("ftp://images.example/cat.png").swap_remove(0).1,
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(r.text.contains("data URL"), "{}", r.text);
    let many: Vec<Value> = (0..17)
        .map(|i| json!(format!("https://10.0.0.1/{i}.png")))
        .collect();
    let r = app
        .post(
            "/api/chat",
            json!({"stream": false, "messages": [{"role": "user", "content": "x", "images": many}]}),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(r.text.contains("at most 16 are fetched"), "{}", r.text);
    let r = app
        .post(
            "/v1/chat/completions",
            json!({"max_tokens": 2, "messages": [{"role": "user", "content": "see https://10.0.0.1/"}]}),
        )
        .await;
    assert_eq!(r.status, 200, "a link in text is only text: {}", r.text);
}

/// A host on loopback serving `png` at `/pic.png`, a file past [`LIMITS`] at
/// `/big`, one slower than them at `/slow`.
async fn image_host(png: Vec<u8>) -> SocketAddr {
    let routes = axum::Router::new()
        .route("/pic.png", get(move || std::future::ready(png.clone())))
        .route("/big", get(|| async { vec![7u8; 300_000] }))
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(60)).await;
                "late"
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, routes).await });
    addr
}

/// `body` with the picture (`b64`, inline in each shape's way) linked instead.
fn link_instead(v: &mut Value, b64: &str, link: &str) {
    match v {
        Value::String(s) if s == b64 || s.strip_prefix("data:image/png;base64,") == Some(b64) => {
            *s = link.to_string()
        }
        Value::Object(o) if o.get("type") == Some(&json!("base64")) => {
            *v = json!({"type": "url", "url": link})
        }
        Value::Object(o) => o.values_mut().for_each(|c| link_instead(c, b64, link)),
        Value::Array(a) => a.iter_mut().for_each(|c| link_instead(c, b64, link)),
        _ => {}
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_linked_picture_answers_as_the_same_picture_inline() {
    let app = App::with(Setup {
        model: Some(llamay_testdata::ref_path("tiny/tiny-gemma3-Q6_K.gguf")),
        projector: Some(llamay_testdata::vision_model("gemma3-F32")),
        n_ctx: 512,
        image_urls: Some(LIMITS),
        private_addresses: true,
        ..Setup::default()
    });
    let png = picture("square-rgb.png");
    let host = image_host(png.clone()).await;
    let link = format!("http://{host}/pic.png");
    let encoded = || app.runtime.stats.images_encoded.load(Ordering::Relaxed);
    for (path, inline) in requests(&png, false) {
        // Greedy, so the two answers may be compared.
        let mut inline = inline;
        match path {
            "/api/chat" => inline["options"]["temperature"] = json!(0),
            _ => inline["temperature"] = json!(0),
        }
        let mut linked = inline.clone();
        link_instead(&mut linked, &b64(&png), &link);
        assert!(
            !linked.to_string().contains(&b64(&png)[..64]),
            "{path}: {linked}"
        );
        let a = app.post(path, inline).await;
        let b = app.post(path, linked).await;
        assert_eq!(a.status, 200, "{path}: {}", a.text);
        assert_eq!(b.status, 200, "{path}: {}", b.text);
        assert_eq!(answer(path, &a, false), answer(path, &b, false), "{path}");
    }
    assert_eq!(
        encoded(),
        1,
        "the linked picture is the inline one, by its pixels"
    );

    for (file, wanted) in [
        ("big", "larger than 100000 bytes"),
        ("slow", "did not answer in full within"),
        ("missing", "HTTP 404"),
    ] {
        let url = format!("http://{host}/{file}");
        let r = app
            .post("/v1/chat/completions", linking(&url).swap_remove(0).1)
            .await;
        assert_eq!(r.status, 400, "{file}: {}", r.text);
        assert!(
            r.text.contains(wanted) && r.text.contains(&url),
            "{file}: {}",
            r.text
        );
    }
    let r = app
        .post("/v1/chat/completions", linking(&link).swap_remove(0).1)
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
}
