//! Images through a model served with a projector (the tiny random-weight Gemma 3
//! text model with the random `gemma3` projector of `scripts/make-vision-models`):
//! a schema holds over an image on every shape, streamed or not; a second request
//! about the same picture finds its rows in the prefix cache (cached prompt tokens,
//! no second encoding) and a different picture does not; the greedy text equals the
//! runtime's `generate_pieces` (itself checked against llama.cpp's libmtmd in
//! `runtime/tests/vision_generate.rs`); `vision` is listed as a capability.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use base64::Engine;
use llamay_runtime::{
    generate_pieces, split_media, ChatMessage, GenerationParams, ImageInput, LoadedModel,
    MediaChunk, PromptPiece,
};
use serde_json::{json, Value};

use crate::common::{App, Setup};

fn app() -> App {
    app_of(512)
}

/// The vision server with a context of `n_ctx` positions.
fn app_of(n_ctx: usize) -> App {
    App::with(Setup {
        model: Some(llamay_testdata::ref_path("tiny/tiny-gemma3-Q6_K.gguf")),
        projector: Some(llamay_testdata::vision_model("gemma3-F32")),
        n_ctx,
        ..Setup::default()
    })
}

/// A picture of `scripts/vision-reference`'s set, as its file's bytes.
pub(crate) fn picture(name: &str) -> Vec<u8> {
    std::fs::read(
        llamay_testdata::vision_reference()
            .join("images")
            .join(name),
    )
    .unwrap()
}

pub(crate) fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

pub(crate) const QUESTION: &str = "How many things are in this picture?";

fn schema() -> Value {
    json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 99}},
           "required": ["n"], "additionalProperties": false})
}

/// One request per shape: the picture first, then the question (so every shape
/// renders the same prompt), answered under `schema()`.
pub(crate) fn requests(png: &[u8], stream: bool) -> Vec<(&'static str, Value)> {
    let url = format!("data:image/png;base64,{}", b64(png));
    vec![
        (
            "/v1/chat/completions",
            json!({"max_tokens": 48, "stream": stream, "messages": [{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": url}},
                {"type": "text", "text": QUESTION}]}],
             "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": schema()}}}),
        ),
        (
            "/v1/responses",
            json!({"max_output_tokens": 48, "stream": stream, "input": [{"role": "user", "content": [
                {"type": "input_image", "image_url": url},
                {"type": "input_text", "text": QUESTION}]}],
             "text": {"format": {"type": "json_schema", "name": "n", "schema": schema()}}}),
        ),
        (
            "/v1/messages",
            json!({"max_tokens": 48, "stream": stream, "messages": [{"role": "user", "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(png)}},
                {"type": "text", "text": QUESTION}]}],
             "output_format": {"type": "json_schema", "schema": schema()}}),
        ),
        (
            "/api/chat",
            json!({"stream": stream, "options": {"num_predict": 48}, "format": schema(),
                   "messages": [{"role": "user", "content": QUESTION, "images": [b64(png)]}]}),
        ),
    ]
}

/// The answer's text of a whole reply or of a stream, per shape.
pub(crate) fn answer(path: &str, r: &crate::common::Reply, stream: bool) -> String {
    let join = |v: Vec<Value>, f: &dyn Fn(&Value) -> Option<String>| -> String {
        v.iter().filter_map(f).collect()
    };
    let s = |v: &Value| v.as_str().map(str::to_string);
    match (path, stream) {
        ("/v1/chat/completions", false) => r.json()["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .into(),
        ("/v1/chat/completions", true) => {
            join(r.sse(), &|c| s(&c["choices"][0]["delta"]["content"]))
        }
        ("/v1/responses", false) => r.json()["output"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|o| o["type"] == "message")
            .flat_map(|o| o["content"].as_array().unwrap().iter())
            .filter_map(|c| c["text"].as_str())
            .collect(),
        ("/v1/responses", true) => join(r.sse(), &|e| match e["type"]
            == "response.output_text.delta"
        {
            true => s(&e["delta"]),
            false => None,
        }),
        ("/v1/messages", false) => r.json()["content"][0]["text"].as_str().unwrap().into(),
        ("/v1/messages", true) => join(r.sse(), &|e| s(&e["delta"]["text"])),
        ("/api/chat", false) => r.json()["message"]["content"].as_str().unwrap().into(),
        ("/api/chat", true) => join(r.ndjson(), &|l| s(&l["message"]["content"])),
        _ => unreachable!(),
    }
}

#[tokio::test]
async fn a_schema_holds_over_an_image_on_every_shape_streamed_or_not() {
    let app = app();
    let validator = jsonschema::validator_for(&schema()).unwrap();
    for stream in [false, true] {
        for (path, body) in requests(&picture("square-rgb.png"), stream) {
            let r = app.post(path, body).await;
            assert_eq!(r.status, 200, "{path} (stream {stream}): {}", r.text);
            let text = answer(path, &r, stream);
            let doc: Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{path} (stream {stream}): not JSON ({e}): {text:?}"));
            assert!(validator.is_valid(&doc), "{path} (stream {stream}): {doc}");
        }
    }
}

/// `cached_tokens` of an OpenAI chat reply (and its prompt's size).
fn cached(r: &crate::common::Reply) -> (u64, u64) {
    let u = &r.json()["usage"];
    (
        u["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap(),
        u["prompt_tokens"].as_u64().unwrap(),
    )
}

#[tokio::test]
async fn the_same_image_is_found_in_the_cache_and_another_is_not() {
    let app = app();
    let encoded = || app.runtime.stats.images_encoded.load(Ordering::Relaxed);
    let (a, b) = (picture("square-rgb.png"), picture("wide-rgb.png"));
    let chat = |png: &[u8]| requests(png, false).swap_remove(0).1;
    let first = app.post("/v1/chat/completions", chat(&a)).await;
    assert_eq!(first.status, 200, "{}", first.text);
    let (c0, prompt) = cached(&first);
    assert_eq!((c0, encoded()), (0, 1));
    // The text after the picture: the rows end `tail` positions before the end.
    let lm = app.runtime.registry.loaded()[0].lm.clone();
    let enc = lm.vision().unwrap();
    let decoded = llamay_engine::decode_image(&a).unwrap();
    let layout = enc.layout(decoded.width, decoded.height).unwrap();
    let n_rows = layout.n_rows() as u64;
    let tail = match split_media(
        &lm.tokenizer,
        &rendered(&lm, &a),
        enc.projector(),
        &[layout],
    )
    .unwrap()
    .last()
    {
        Some(MediaChunk::Tokens(t)) => t.len() as u64,
        other => panic!("the prompt ends with {other:?}"),
    };
    let image_end = prompt - tail;
    let image_start = image_end - n_rows;

    let again = app.post("/v1/chat/completions", chat(&a)).await;
    let (c1, _) = cached(&again);
    assert!(
        c1 >= image_end,
        "cached {c1} of {prompt}: the picture ends at {image_end}"
    );
    assert_eq!(encoded(), 1, "a cached picture is not encoded again");
    // Every shape reports the hit in its own usage field.
    let responses = app
        .post("/v1/responses", requests(&a, false).swap_remove(1).1)
        .await;
    let hit = responses.json()["usage"]["input_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap();
    assert!(hit >= image_end, "responses: cached {hit}");
    let messages = app
        .post("/v1/messages", requests(&a, false).swap_remove(2).1)
        .await;
    let hit = messages.json()["usage"]["cache_read_input_tokens"]
        .as_u64()
        .unwrap();
    assert!(hit >= image_end, "messages: cached {hit}");
    assert_eq!(encoded(), 1);

    // Another picture shares the text before it, never its rows.
    let other = app.post("/v1/chat/completions", chat(&b)).await;
    let (c2, _) = cached(&other);
    assert!(
        c2 <= image_start,
        "another picture: cached {c2}, its rows start at {image_start}"
    );
    assert_eq!(encoded(), 2);
}

/// The prompt the server renders for one user turn holding `png` then [`QUESTION`].
fn rendered(lm: &LoadedModel, png: &[u8]) -> String {
    let turn = ChatMessage {
        images: vec![ImageInput(png.to_vec().into())],
        image_at: vec![0],
        ..ChatMessage::new("user", QUESTION)
    };
    lm.render_chat(&[turn.with_markers()], None, None)
        .unwrap()
        .1
}

#[tokio::test]
async fn greedy_text_through_the_server_equals_generate_pieces() {
    let app = app();
    let png = picture("square-rgb.png");
    let body = json!({"max_tokens": 12, "temperature": 0, "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{}", b64(&png))}},
        {"type": "text", "text": QUESTION}]}]});
    let r = app.post("/v1/chat/completions", body).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let v = r.json();
    let served = v["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_string();

    let lm: Arc<LoadedModel> = app.runtime.registry.loaded()[0].lm.clone();
    let enc = lm.vision().unwrap();
    let decoded = llamay_engine::decode_image(&png).unwrap();
    let layout = enc.layout(decoded.width, decoded.height).unwrap();
    let rows = enc.encode(&decoded).unwrap();
    let mut chunks = split_media(
        &lm.tokenizer,
        &rendered(&lm, &png),
        enc.projector(),
        &[layout],
    )
    .unwrap();
    // The template writes the BOS itself: one BOS, as for a text prompt.
    let bos = lm.tokenizer.bos().unwrap();
    if let Some(MediaChunk::Tokens(t)) = chunks.first_mut() {
        if t.starts_with(&[bos, bos]) {
            t.remove(0);
        }
    }
    let pieces: Vec<PromptPiece> = chunks
        .iter()
        .map(|c| match c {
            MediaChunk::Tokens(ids) => PromptPiece::Tokens(ids),
            MediaChunk::Image { .. } => PromptPiece::Image(&rows, enc.projector()),
        })
        .collect();
    let mut params = GenerationParams {
        max_tokens: 12,
        ..GenerationParams::default()
    };
    params.sampler.temperature = 0.0;
    let g = generate_pieces(
        &lm.model,
        &lm.tokenizer,
        &pieces,
        (&params, None),
        &AtomicBool::new(false),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(served, String::from_utf8_lossy(&g.text));
    assert_eq!(
        v["usage"]["completion_tokens"].as_u64().unwrap(),
        g.tokens.len() as u64
    );
    assert!(!g.tokens.is_empty());
}

#[tokio::test]
async fn vision_is_listed_for_a_model_with_a_projector_only() {
    let app = app();
    let caps = |r: crate::common::Reply| r.json()["capabilities"].to_string();
    let show = app.post("/api/show", json!({"model": app.model})).await;
    assert!(caps(show).contains("\"vision\""));
    let text_only = App::new();
    let show = text_only
        .post("/api/show", json!({"model": text_only.model}))
        .await;
    let listed = caps(show);
    assert!(
        listed.contains("completion") && !listed.contains("vision"),
        "{listed}"
    );
}

/// A prompt of sixteen pictures (the most a request takes), then the same prompt
/// again: the second finds every picture's rows in the cache (asserted) and is
/// neither encoded nor prefilled again. The times to the one token are printed for
/// docs/benchmarks.md, not asserted (speed on a shared machine is no test).
#[tokio::test]
async fn a_repeated_prompt_of_sixteen_pictures_skips_them() {
    let app = app_of(1024);
    // The model loads before the clock starts.
    let warm = json!({"max_tokens": 1, "messages": crate::common::user("hi")});
    assert_eq!(app.post("/v1/chat/completions", warm).await.status, 200);
    let names = [
        "exact-gemma3.png",
        "exact-mlp.png",
        "gif-tall.gif",
        "gif.gif",
        "gray-alpha.png",
        "gray.png",
        "half.png",
        "odd.png",
        "palette.png",
        "wide-rgb.png",
        "photo.jpeg",
        "rgba.png",
        "small-tall-rgb.png",
        "square-big-rgb.png",
        "square-rgb.png",
        "tall-rgb.png",
    ];
    let mut content: Vec<Value> = names
        .iter()
        .map(|n| {
            let url = format!("data:image/png;base64,{}", b64(&picture(n)));
            json!({"type": "image_url", "image_url": {"url": url}})
        })
        .collect();
    content.push(json!({"type": "text", "text": QUESTION}));
    let body = json!({"max_tokens": 1, "messages": [{"role": "user", "content": content}]});
    let mut runs = Vec::new();
    for _ in 0..2 {
        let t = std::time::Instant::now();
        let r = app.post("/v1/chat/completions", body.clone()).await;
        assert_eq!(r.status, 200, "{}", r.text);
        runs.push((t.elapsed(), cached(&r)));
    }
    let (c, prompt) = runs[1].1;
    assert_eq!(c, prompt - 1, "all but the last token found");
    assert_eq!(app.runtime.stats.images_encoded.load(Ordering::Relaxed), 16);
    eprintln!(
        "16 pictures, {prompt} prompt tokens: first {:?}, repeated {:?} (cached {c}): ratio {:.3}",
        runs[0].0,
        runs[1].0,
        runs[1].0.as_secs_f64() / runs[0].0.as_secs_f64()
    );
}

/// What images cannot reach yet is refused with a 400 saying so, and the server
/// serves on: a named context made of a message with an image, and an image sent
/// with `llamay_context`.
#[tokio::test]
async fn images_with_named_contexts_are_refused() {
    let app = app();
    let png = picture("square-rgb.png");
    let mut chat = requests(&png, false).swap_remove(0).1;
    let r = app
        .post(
            "/v1/contexts",
            json!({"messages": chat["messages"].clone()}),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(
        r.text.contains("named contexts do not take images"),
        "{}",
        r.text
    );

    let r = app
        .post(
            "/v1/contexts",
            json!({"messages": crate::common::user("A report.")}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    chat["llamay_context"] = r.json()["id"].clone();
    let r = app.post("/v1/chat/completions", chat).await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(r.text.contains("do not take images"), "{}", r.text);
    let plain = requests(&png, false).swap_remove(0).1;
    assert_eq!(app.post("/v1/chat/completions", plain).await.status, 200);
}

/// Where a shape's request keeps its turns.
fn turns(path: &str) -> &'static str {
    match path {
        "/v1/responses" => "input",
        _ => "messages",
    }
}

/// `x-llamay-quote` quotes the input's text: over an image with no text there is
/// nothing to quote from (a 400 saying so, on every shape); with text beside the
/// image the quote comes from that text.
#[tokio::test]
async fn a_quote_over_an_image_alone_is_refused() {
    let app = app();
    let png = picture("square-rgb.png");
    let quote = json!({"type": "object", "properties": {"q": {"type": "string", "x-llamay-quote": true}},
                       "required": ["q"], "additionalProperties": false});
    for (path, mut body) in requests(&png, false) {
        // Only the picture: the question's text part (or Ollama's content) goes.
        let msg = &mut body[turns(path)][0];
        match msg["content"].as_array_mut() {
            Some(parts) => parts.retain(|p| !p["type"].as_str().unwrap().ends_with("text")),
            None => msg["content"] = json!(""),
        }
        let ask = |body: &mut Value, schema: &Value| match path {
            "/v1/chat/completions" => {
                body["response_format"]["json_schema"]["schema"] = schema.clone()
            }
            "/v1/responses" => body["text"]["format"]["schema"] = schema.clone(),
            "/v1/messages" => body["output_format"]["schema"] = schema.clone(),
            _ => body["format"] = schema.clone(),
        };
        ask(&mut body, &quote);
        let r = app.post(path, body).await;
        assert_eq!(r.status, 400, "{path}: {}", r.text);
        assert!(r.text.contains("no input text"), "{path}: {}", r.text);
    }
    let (path, mut body) = requests(&png, false).swap_remove(0);
    body["response_format"]["json_schema"]["schema"] = quote;
    let r = app.post(path, body).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let q: Value = serde_json::from_str(&answer(path, &r, false)).unwrap();
    assert!(QUESTION.contains(q["q"].as_str().unwrap()), "{q}");
}

/// More pictures than the context holds: a 400 in each shape's own overflow words
/// (with the token counts), and the server serves on.
#[tokio::test]
async fn more_pictures_than_the_context_holds_are_refused() {
    let app = app_of(128);
    let png = picture("square-rgb.png");
    let words = [
        (
            "/v1/chat/completions",
            "maximum context length is 128 tokens",
        ),
        ("/v1/responses", "exceeds the context window"),
        ("/v1/messages", "prompt is too long"),
        ("/api/chat", "exceeds the context length"),
    ];
    for ((path, mut body), (p, wanted)) in requests(&png, false).into_iter().zip(words) {
        assert_eq!(path, p);
        // Eight copies of the picture's part (Ollama: of its `images`).
        let msg = &mut body[turns(path)][0];
        match msg["content"].as_array_mut() {
            Some(parts) => {
                let image = parts[0].clone();
                parts.splice(0..0, std::iter::repeat_n(image, 7));
            }
            None => {
                let one = msg["images"][0].clone();
                msg["images"] = json!(vec![one; 8]);
            }
        }
        let r = app.post(path, body).await;
        assert_eq!(r.status, 400, "{path}: {}", r.text);
        assert!(r.text.contains(wanted), "{path}: {}", r.text);
    }
    let r = app
        .post(
            "/v1/chat/completions",
            requests(&png, false).swap_remove(0).1,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
}
