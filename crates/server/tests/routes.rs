//! Every route of the server, in-process (see `common`): each answers its success
//! shape, and its errors in its API's own shape (OpenAI's `{"error": {message, type,
//! param, code}}`, Anthropic's `{"type": "error", "error": {type, message}}`,
//! Ollama's `{"error": "..."}`).

mod common;

use axum::http::StatusCode;
use common::{user, App};
use serde_json::{json, Value};

fn openai_error(r: &common::Reply, status: u16, kind: &str) -> Value {
    assert_eq!(r.status.as_u16(), status, "{}", r.text);
    let v = r.json();
    let e = &v["error"];
    assert_eq!(e["type"], kind, "{v}");
    assert!(e["message"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
    assert!(e.get("param").is_some() && e.get("code").is_some(), "{v}");
    v
}

fn anthropic_error(r: &common::Reply, status: u16, kind: &str) {
    assert_eq!(r.status.as_u16(), status, "{}", r.text);
    let v = r.json();
    assert_eq!(v["type"], "error", "{v}");
    assert_eq!(v["error"]["type"], kind, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{v}"
    );
}

fn ollama_error(r: &common::Reply, status: u16) -> String {
    assert_eq!(r.status.as_u16(), status, "{}", r.text);
    let v = r.json();
    v["error"]
        .as_str()
        .unwrap_or_else(|| panic!("{v}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_chat_and_completions() {
    let app = App::new();
    let choice = json!(["yes", "no"]);
    let r = app
        .post(
            "/v1/chat/completions",
            json!({"model": app.model, "messages": user("Yes or no?"), "max_tokens": 8,
                   "llamay_choice": choice, "seed": 1}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let v = r.json();
    assert_eq!(v["object"], "chat.completion");
    let content = v["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(["yes", "no"].contains(&content), "{v}");
    assert_eq!(v["llamay"]["constraint"], "choice");
    assert!(v["usage"]["prompt_tokens"].as_u64().unwrap() > 0);

    // Streamed: chunks of one id, then the usage chunk asked for.
    let r = app
        .post(
            "/v1/chat/completions",
            json!({"model": app.model, "messages": user("Count."), "max_tokens": 6, "stream": true,
                   "stream_options": {"include_usage": true}, "llamay_regex": "[0-9]{6}"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert!(
        r.content_type.starts_with("text/event-stream"),
        "{}",
        r.content_type
    );
    assert!(r.text.trim_end().ends_with("data: [DONE]"), "{}", r.text);
    let chunks = r.sse();
    assert!(chunks
        .iter()
        .all(|c| c["object"] == "chat.completion.chunk" && c["id"] == chunks[0]["id"]));
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert!(
        text.len() <= 6 && text.bytes().all(|b| b.is_ascii_digit()),
        "{text:?}"
    );
    assert_eq!(chunks.last().unwrap()["usage"]["completion_tokens"], 6);

    let r = app
        .post(
            "/v1/completions",
            json!({"model": app.model, "prompt": "Code:", "max_tokens": 4, "llamay_regex": "[a-f]{4}"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let v = r.json();
    assert_eq!(v["object"], "text_completion");
    let text = v["choices"][0]["text"].as_str().unwrap();
    assert!(
        text.len() == 4 && text.bytes().all(|b| (b'a'..=b'f').contains(&b)),
        "{v}"
    );

    let r = app.get("/v1/models").await;
    assert_eq!(r.status, StatusCode::OK);
    let v = r.json();
    assert_eq!(v["object"], "list");
    assert!(
        v["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["id"] == app.model.as_str()),
        "{v}"
    );

    // Errors, in OpenAI's shape.
    openai_error(
        &app.post("/v1/chat/completions", json!({"messages": "hi"}))
            .await,
        400,
        "invalid_request_error",
    );
    openai_error(
        &app.post(
            "/v1/chat/completions",
            json!({"model": "no-such-model", "messages": user("x")}),
        )
        .await,
        404,
        "not_found_error",
    );
    openai_error(
        &app.post(
            "/v1/completions",
            json!({"prompt": "x", "llamay_regex": "("}),
        )
        .await,
        400,
        "invalid_request_error",
    );
    let v = openai_error(
        &app.post(
            "/v1/chat/completions",
            json!({"messages": user("x"), "max_tokens": 2,
                  "llamay_schema": {"type": "object", "properties": {"a": {"not": {}}}}}),
        )
        .await,
        400,
        "invalid_request_error",
    );
    assert_eq!(v["error"]["code"], "unsupported_schema", "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_messages() {
    let app = App::new();
    let r = app
        .post(
            "/v1/messages",
            json!({"model": app.model, "max_tokens": 6, "messages": user("Say a number."),
                   "llamay_regex": "[0-9]+"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let v = r.json();
    assert_eq!(
        (v["type"].as_str(), v["role"].as_str()),
        (Some("message"), Some("assistant")),
        "{v}"
    );
    // The tiny Qwen3 thinks first (its template's default); the answer is the text block.
    let text = v["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["type"] == "text")
        .unwrap_or_else(|| panic!("{v}"));
    assert!(
        text["text"]
            .as_str()
            .unwrap()
            .bytes()
            .all(|b| b.is_ascii_digit()),
        "{v}"
    );
    assert!(
        ["end_turn", "max_tokens"].contains(&v["stop_reason"].as_str().unwrap()),
        "{v}"
    );

    let r = app
        .post(
            "/v1/messages",
            json!({"model": app.model, "max_tokens": 4, "messages": user("Hi."), "stream": true}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let events: Vec<&str> = r
        .text
        .lines()
        .filter_map(|l| l.strip_prefix("event: "))
        .collect();
    assert_eq!(events.first(), Some(&"message_start"), "{}", r.text);
    assert_eq!(events.last(), Some(&"message_stop"), "{}", r.text);

    anthropic_error(
        &app.post("/v1/messages", json!({"messages": user("x")}))
            .await,
        400,
        "invalid_request_error",
    );
    anthropic_error(
        &app.post(
            "/v1/messages",
            json!({"model": "no-such-model", "max_tokens": 2, "messages": user("x")}),
        )
        .await,
        404,
        "not_found_error",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_create_fetch_delete() {
    let app = App::new();
    let r = app
        .post(
            "/v1/responses",
            json!({"model": app.model, "input": "Yes or no?", "max_output_tokens": 4,
                   "text": {"format": {"type": "json_schema", "name": "a",
                            "schema": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}}}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let v = r.json();
    assert_eq!(v["object"], "response", "{v}");
    let id = v["id"].as_str().unwrap().to_string();
    assert_eq!(v["output"][0]["type"], "message", "{v}");

    let got = app.get(&format!("/v1/responses/{id}")).await;
    assert_eq!(got.status, StatusCode::OK, "{}", got.text);
    assert_eq!(got.json()["id"], id.as_str());
    let gone = app.delete(&format!("/v1/responses/{id}")).await;
    assert_eq!(gone.status, StatusCode::OK, "{}", gone.text);
    assert_eq!(gone.json()["deleted"], true);
    openai_error(
        &app.get(&format!("/v1/responses/{id}")).await,
        404,
        "not_found_error",
    );
    openai_error(
        &app.post("/v1/responses", json!({"model": app.model})).await,
        400,
        "invalid_request_error",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ollama_generation_and_models() {
    let app = App::new();
    let r = app
        .post(
            "/api/chat",
            json!({"model": app.model, "messages": user("Hi."), "stream": false,
                   "format": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
                   "options": {"num_predict": 12}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let v = r.json();
    assert_eq!(
        (v["done"].as_bool(), v["message"]["role"].as_str()),
        (Some(true), Some("assistant")),
        "{v}"
    );
    assert!(
        v["message"]["content"].as_str().unwrap().starts_with('{'),
        "{v}"
    );

    let r = app
        .post(
            "/api/generate",
            json!({"model": app.model, "prompt": "Hi", "options": {"num_predict": 3}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert!(
        r.content_type.starts_with("application/x-ndjson"),
        "{}",
        r.content_type
    );
    let lines = r.ndjson();
    assert_eq!(lines.last().unwrap()["done"], true, "{}", r.text);
    assert!(lines[..lines.len() - 1]
        .iter()
        .all(|l| l["done"] == false && l["response"].is_string()));

    let tags = app.get("/api/tags").await;
    assert_eq!(tags.status, StatusCode::OK);
    assert!(tags.json()["models"].is_array(), "{}", tags.text);
    let show = app.post("/api/show", json!({"model": app.model})).await;
    assert_eq!(show.status, StatusCode::OK, "{}", show.text);
    let v = show.json();
    assert!(
        v["template"].is_string() && v["capabilities"].is_array(),
        "{v}"
    );
    let ps = app.get("/api/ps").await;
    assert_eq!(ps.status, StatusCode::OK);
    assert!(
        ps.json()["models"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["name"] == app.model.as_str()),
        "{}",
        ps.text
    );
    let version = app.get("/api/version").await;
    assert!(version.json()["version"].is_string(), "{}", version.text);

    // Errors, in Ollama's shape.
    ollama_error(
        &app.post("/api/chat", json!({"model": app.model, "messages": "x"}))
            .await,
        400,
    );
    ollama_error(
        &app.post(
            "/api/generate",
            json!({"model": "no-such-model", "prompt": "x"}),
        )
        .await,
        404,
    );
    ollama_error(
        &app.post("/api/show", json!({"model": "no-such-model"}))
            .await,
        404,
    );
    ollama_error(
        &app.post("/api/pull", json!({"model": "bad name!"})).await,
        400,
    );
    ollama_error(
        &app.post(
            "/api/copy",
            json!({"source": "no-such-model", "destination": "x"}),
        )
        .await,
        // This server has no store to copy in.
        400,
    );
    assert!(app.delete("/api/delete").await.status.is_client_error());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contexts_lifecycle() {
    let app = App::new();
    let r = app
        .post(
            "/v1/contexts",
            json!({"prompt": "A report about rivers. ".repeat(8)}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let v = r.json();
    let id = v["id"].as_str().unwrap().to_string();
    assert!(v["tokens"].as_u64().unwrap() > 32, "{v}");
    let listed = app.get("/v1/contexts").await.json();
    assert!(
        listed["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["id"] == id.as_str()),
        "{listed}"
    );
    assert_eq!(
        app.get(&format!("/v1/contexts/{id}")).await.json()["id"],
        id.as_str()
    );
    let forks = app
        .post(&format!("/v1/contexts/{id}/fork?n=2"), json!({}))
        .await;
    assert_eq!(forks.status, StatusCode::OK, "{}", forks.text);
    // A continuation reuses the context's blocks.
    let r = app
        .post(
            "/v1/completions",
            json!({"prompt": " Next:", "max_tokens": 2, "llamay_context": id}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert!(
        r.json()["usage"]["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap()
            > 32,
        "{}",
        r.text
    );
    let gone = app.delete(&format!("/v1/contexts/{id}")).await;
    assert_eq!(gone.status, StatusCode::OK, "{}", gone.text);
    openai_error(
        &app.get(&format!("/v1/contexts/{id}")).await,
        404,
        "not_found_error",
    );
    openai_error(
        &app.post("/v1/contexts", json!({"prompt": "a", "messages": []}))
            .await,
        400,
        "invalid_request_error",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn encoders_catalog_health_stats_and_unknown_paths() {
    let app = App::new();
    // No encoder is served: the generation model embeds (its pooled hidden states).
    let r = app
        .post(
            "/v1/embeddings",
            json!({"model": app.model, "input": ["a", "b"]}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let v = r.json();
    assert_eq!(
        (v["object"].as_str(), v["data"].as_array().map(Vec::len)),
        (Some("list"), Some(2)),
        "{v}"
    );
    assert!(
        v["data"][1]["embedding"].as_array().unwrap().len() > 8,
        "{v}"
    );
    let r = app
        .post("/api/embed", json!({"model": app.model, "input": "a"}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(
        r.json()["embeddings"].as_array().map(Vec::len),
        Some(1),
        "{}",
        r.text
    );
    let r = app
        .post(
            "/api/embeddings",
            json!({"model": app.model, "prompt": "a"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert!(r.json()["embedding"].is_array(), "{}", r.text);
    openai_error(
        &app.post("/v1/embeddings", json!({"model": app.model}))
            .await,
        400,
        "invalid_request_error",
    );
    ollama_error(
        &app.post(
            "/api/embed",
            json!({"model": "no-such-model", "input": "a"}),
        )
        .await,
        404,
    );
    // Reranking wants a reranker (llama.cpp's error shape).
    for path in ["/rerank", "/v1/rerank", "/reranking", "/v1/reranking"] {
        let r = app
            .post(
                path,
                json!({"model": app.model, "query": "q", "documents": ["a"]}),
            )
            .await;
        assert!(r.status.is_client_error(), "{path}: {}", r.text);
        assert!(
            r.json()["error"]["message"].is_string(),
            "{path}: {}",
            r.text
        );
    }

    let r = app.get("/v1/catalog/models").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert!(r.json()["data"].is_array(), "{}", r.text);
    assert_eq!(app.get("/health").await.json()["status"], "ok");
    let stats = app.get("/v1/stats").await.json();
    assert!(stats["constraints"]["schema_lookups"].is_u64(), "{stats}");
    assert_eq!(
        app.get("/v1/no-such-route").await.status,
        StatusCode::NOT_FOUND
    );
    ollama_error(&app.get("/api/no-such-route").await, 404);
}

/// A `nomic-bert` encoder served as `-embed` (the random-weight file of
/// `scripts/make-nomic-bert`): `/v1/embeddings` (no model named) and `/api/embed` (by
/// its name) give llama.cpp's vectors of a sample of the reference sentences, unit
/// length.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nomic_bert_serves_openai_and_ollama_embeddings() {
    use llamay_testdata::{cosine, embed_model, embed_reference, f32s_from_base64};
    let app = App::with(common::Setup {
        embed: Some(embed_model("nomic")),
        ..common::Setup::default()
    });
    let r: Value =
        serde_json::from_slice(&std::fs::read(embed_reference("nomic")).unwrap()).unwrap();
    let cases: Vec<(&str, Vec<f32>)> = r["cases"]
        .as_array()
        .unwrap()
        .iter()
        .step_by(10)
        .map(|c| {
            let want = f32s_from_base64(c["embedding"].as_str().unwrap());
            (c["text"].as_str().unwrap(), want)
        })
        .collect();
    assert!(cases.len() >= 20);
    let texts: Vec<&str> = cases.iter().map(|(t, _)| *t).collect();
    let check = |got: &Value, (text, want): &(&str, Vec<f32>)| {
        let got: Vec<f32> = got
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect();
        assert_eq!(got.len(), 128);
        let norm = got.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "{text:?}: norm {norm}");
        let cos = cosine(&got, want);
        assert!(cos >= 0.9999, "{text:?}: cosine {cos}");
    };
    let v = app.post("/v1/embeddings", json!({"input": texts})).await;
    assert_eq!(v.status, StatusCode::OK, "{}", v.text);
    let data = v.json()["data"].as_array().unwrap().clone();
    assert_eq!(data.len(), cases.len());
    for (d, case) in data.iter().zip(&cases) {
        check(&d["embedding"], case);
    }
    let name = app.runtime.encoders.embed_model().unwrap().name.clone();
    let v = app
        .post("/api/embed", json!({"model": name, "input": texts}))
        .await;
    assert_eq!(v.status, StatusCode::OK, "{}", v.text);
    let embeddings = v.json()["embeddings"].as_array().unwrap().clone();
    assert_eq!(embeddings.len(), cases.len());
    for (e, case) in embeddings.iter().zip(&cases) {
        check(e, case);
    }
}
