//! Images on every API shape: OpenAI chat `image_url` parts, Responses `input_image`,
//! Anthropic `image` blocks, Ollama `images` (chat and generate) are read, checked and
//! refused the same way, each as a 400 in its shape, and the server keeps serving.
//! The tiny Qwen3 reads text only, so a good image is refused naming the `vision`
//! capability; a bad one is refused for what is wrong with it first.

use base64::Engine;
use serde_json::{json, Value};

use crate::common::App;
use llamay_testdata::{png_declaring, PNG_1X1};

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// One request per shape carrying `data` (base64 text) as its image, or `url` where
/// the shape takes a URL.
fn requests(data: &str, url: &str) -> Vec<(&'static str, Value)> {
    vec![
        (
            "/v1/chat/completions",
            json!({"max_tokens": 4, "messages": [{"role": "user", "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": url}}]}]}),
        ),
        (
            "/v1/responses",
            json!({"max_output_tokens": 4, "input": [{"role": "user", "content": [
            {"type": "input_text", "text": "What is this?"},
            {"type": "input_image", "image_url": url}]}]}),
        ),
        (
            "/v1/messages",
            json!({"max_tokens": 4, "messages": [{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}},
            {"type": "text", "text": "What is this?"}]}]}),
        ),
        (
            "/api/chat",
            json!({"stream": false, "messages": [
            {"role": "user", "content": "What is this?", "images": [data]}]}),
        ),
        (
            "/api/generate",
            json!({"stream": false, "prompt": "What is this?", "images": [data]}),
        ),
    ]
}

async fn refused_everywhere(app: &App, data: &str, url: &str, wanted: &str) {
    for (path, body) in requests(data, url) {
        let r = app.post(path, body).await;
        assert_eq!(r.status, 400, "{path}: {}", r.text);
        assert!(
            r.text.contains(wanted),
            "{path}: {wanted:?} not in {}",
            r.text
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn images_are_read_on_every_shape_and_refused_for_what_is_wrong() {
    let app = App::new();
    let ok = b64(PNG_1X1);
    let url = |d: &str| format!("data:image/png;base64,{d}");
    // A picture the model cannot see: the capability is named.
    refused_everywhere(&app, &ok, &url(&ok), "capability \\\"vision\\\"").await;
    // Bad base64.
    refused_everywhere(
        &app,
        "@@not base64@@",
        &url("@@not base64@@"),
        "not valid base64",
    )
    .await;
    // Corrupt bytes: a PNG cut in half.
    let cut = b64(&PNG_1X1[..40]);
    refused_everywhere(&app, &cut, &url(&cut), "corrupt").await;
    // An unsupported format.
    let text = b64(b"just some text, not a picture");
    refused_everywhere(&app, &text, &url(&text), "not PNG, JPEG, WebP or GIF").await;
    // A decompression bomb's header: refused before any pixel is decoded.
    let bomb = b64(&png_declaring(60_000));
    refused_everywhere(&app, &bomb, &url(&bomb), "60000x60000").await;
    // URLs are not fetched (where a shape takes one).
    for path in ["/v1/chat/completions", "/v1/responses"] {
        let body = requests(&ok, "http://169.254.169.254/latest/meta-data")
            .into_iter()
            .find(|(p, _)| *p == path)
            .unwrap()
            .1;
        let r = app.post(path, body).await;
        assert_eq!(r.status, 400, "{path}: {}", r.text);
        assert!(
            r.text.contains("does not fetch image URLs"),
            "{path}: {}",
            r.text
        );
    }
    // Too many images.
    let many: Vec<Value> = (0..17).map(|_| json!(ok)).collect();
    let r = app
        .post(
            "/api/chat",
            json!({"stream": false, "messages": [
            {"role": "user", "content": "x", "images": many}]}),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(r.text.contains("at most 16"), "{}", r.text);
    // A raw prompt has no template to place images with.
    let r = app
        .post(
            "/api/generate",
            json!({"stream": false, "raw": true, "prompt": "x", "images": [ok]}),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text);
    // And the server still answers.
    let r = app
        .post(
            "/v1/chat/completions",
            json!({"max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
}
