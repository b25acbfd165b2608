//! Requests the server refuses, in-process (see `common`): each with its status and
//! its API's own error shape and words, before any model work where the refusal can
//! be made from the request alone. Moved from the binary tests
//! (`crates/cli/tests/serve_{api,text_end,tools,limits}.rs`), whose assertions they
//! keep; where the tiny Qwen3 answers differently from SmolLM2, a comment says so.

use crate::common::{user, App, Reply, Setup};
use axum::http::{Method, StatusCode};
use serde_json::{json, Value};

/// The status and the body as JSON, as the binary tests' `post` gave them.
fn parts(r: &Reply) -> (u16, Value) {
    (r.status.as_u16(), r.json())
}

const REFUSED: [(&str, &str); 4] = [
    (
        "not",
        r#"{"type":"object","properties":{"a":{"not":{"type":"string"}}}}"#,
    ),
    (
        "if",
        r#"{"type":"object","if":{"required":["a"]},"then":{"required":["b"]}}"#,
    ),
    ("then", r#"{"type":"object","then":{"required":["b"]}}"#),
    (
        "patternProperties",
        r#"{"type":"object","patternProperties":{"^x":{"type":"string"}}}"#,
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_keywords_get_the_seeds_400_on_every_shape_before_inference() {
    let app = App::new();
    let model = app.model.as_str();
    for (kw, schema) in REFUSED {
        let schema: Value = serde_json::from_str(schema).unwrap();
        let needle = format!("uses \"{kw}\", which llamay's constraint cannot honour");
        let bodies = [
            (
                "/v1/chat/completions",
                json!({"model": model, "messages": user("x"),
                "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}}),
            ),
            (
                "/v1/chat/completions",
                json!({"model": model, "messages": user("x"), "llamay_schema": schema}),
            ),
            (
                "/v1/completions",
                json!({"model": model, "prompt": "x", "llamay_schema": schema}),
            ),
            (
                "/v1/messages",
                json!({"model": model, "max_tokens": 5, "messages": user("x"), "llamay_schema": schema}),
            ),
            (
                "/v1/messages",
                json!({"model": model, "max_tokens": 5, "messages": user("x"),
                "output_config": {"format": {"type": "json_schema", "schema": schema}}}),
            ),
            (
                "/api/chat",
                json!({"model": model, "messages": user("x"), "format": schema}),
            ),
            (
                "/api/generate",
                json!({"model": model, "prompt": "x", "format": schema}),
            ),
        ];
        for (path, body) in bodies {
            let (status, v) = parts(&app.post(path, body).await);
            assert_eq!(status, 400, "{path} {kw}: {v}");
            let message = if path.starts_with("/api/") {
                v["error"].as_str()
            } else if path == "/v1/messages" {
                assert_eq!(v["type"], "error");
                assert_eq!(v["error"]["type"], "invalid_request_error");
                v["error"]["message"].as_str()
            } else {
                assert_eq!(v["error"]["type"], "invalid_request_error");
                assert_eq!(v["error"]["code"], "unsupported_schema");
                assert!(v["error"]["param"].is_string(), "{v}");
                v["error"]["message"].as_str()
            };
            assert!(message.unwrap().contains(&needle), "{path}: {v}");
        }
    }
    // The seed's message for its example, in the shape OpenAI's clients read
    // (`invalid_request_error`, not the seed's "Bad Request"), naming the field.
    let (status, v) = parts(
        &app.post(
            "/v1/chat/completions",
            json!({"model": model, "messages": user("x"),
                "llamay_schema": {"properties": {"a": {"not": {}}}}}),
        )
        .await,
    );
    assert_eq!(status, 400);
    assert_eq!(
        v,
        json!({"error": {"message": "properties.a uses \"not\", which llamay's constraint cannot honour; send a schema without it rather than one that is silently not enforced", "type": "invalid_request_error", "param": "llamay_schema", "code": "unsupported_schema"}})
    );
    // Nothing was decoded for any of them.
    let stats = app.get("/v1/stats").await.json();
    assert_eq!(stats["tokens"]["prompt"], 0, "{stats}");
    assert_eq!(stats["completed"], 0, "{stats}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_4xx_in_each_apis_shape() {
    // A store of its own, as `llamay serve` has: copy and delete then answer 404 for
    // an absent model (without one they answer 400, "no model store").
    let app = App::with(Setup {
        store: true,
        ..Setup::default()
    });
    for path in [
        "/v1/chat/completions",
        "/v1/completions",
        "/v1/messages",
        "/api/chat",
        "/api/generate",
        "/api/show",
    ] {
        for body in [
            "{",
            "[]",
            "\"x\"",
            "{\"messages\": 5, \"prompt\": 5}",
            "{\"model\": 3, \"messages\": []}",
            "",
        ] {
            let (st, v) = parts(&app.send_bytes(Method::POST, path, body).await);
            assert!((400..500).contains(&st), "{path} {body}: {st} {v}");
            if path.starts_with("/api/") {
                assert!(v["error"].is_string(), "{v}");
            } else if path == "/v1/messages" {
                assert_eq!(v["type"], "error", "{v}");
            } else {
                assert!(v["error"]["message"].is_string(), "{v}");
            }
        }
    }
    let (st, v) = parts(
        &app.post(
            "/v1/chat/completions",
            json!({"model": "no-such-model", "messages": user("x")}),
        )
        .await,
    );
    assert_eq!(
        (st, v["error"]["code"].as_str()),
        (404, Some("model_not_found")),
        "{v}"
    );
    let r = app
        .post(
            "/api/chat",
            json!({"model": "no-such-model", "messages": user("x")}),
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    let (st, v) = parts(
        &app.post(
            "/v1/chat/completions",
            json!({"messages": user("x"),
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
            "tool_choice": {"type": "function", "function": {"name": "g"}}}),
        )
        .await,
    );
    assert_eq!(st, 400);
    assert_eq!(
        v["error"]["message"],
        "tool_choice names \"g\", which is not among the tools offered"
    );
    let r = app
        .post(
            "/v1/chat/completions",
            json!({"messages": user("x"), "temperature": -1}),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    let r = app
        .post("/v1/messages", json!({"messages": user("x")}))
        .await;
    assert_eq!(
        r.status,
        StatusCode::BAD_REQUEST,
        "max_tokens is required on the Anthropic route"
    );
    assert_eq!(app.get("/v1/nothing").await.status, StatusCode::NOT_FOUND);
    let r = app.send(Method::PUT, "/api/chat", None).await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(r.json()["error"].is_string(), "{}", r.text);
    // The model routes.
    assert!(app.get("/api/version").await.json()["version"].is_string());
    let v = app.get("/api/tags").await.json();
    assert_eq!(v["models"][0]["name"], app.model.as_str(), "{v}");
    let (st, v) = parts(&app.post("/api/show", json!({"model": app.model})).await);
    assert_eq!(st, 200);
    // SmolLM2 is a "llama"; the tiny model is a Qwen3.
    assert_eq!(v["details"]["family"], "qwen3", "{v}");
    let r = app
        .send(
            Method::DELETE,
            "/api/delete",
            Some(&json!({"model": "absent:latest"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    let r = app
        .post(
            "/api/copy",
            json!({"source": "absent:latest", "destination": "b:latest"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    let r = app
        .post("/api/pull", json!({"model": "/etc/passwd.gguf"}))
        .await;
    assert_eq!(
        r.status,
        StatusCode::BAD_REQUEST,
        "a path is never pulled: {}",
        r.text
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_limit_below_one_is_refused_on_every_shape() {
    let app = App::new();
    let model = app.model.as_str();
    let user = user("x");
    for (path, body) in [
        (
            "/v1/chat/completions",
            json!({"model": model, "messages": user, "max_tokens": -1}),
        ),
        (
            "/v1/chat/completions",
            json!({"model": model, "messages": user, "max_completion_tokens": 0}),
        ),
        (
            "/v1/completions",
            json!({"model": model, "prompt": "x", "max_tokens": -5}),
        ),
        (
            "/v1/messages",
            json!({"model": model, "messages": user, "max_tokens": 0}),
        ),
        (
            "/v1/messages",
            json!({"model": model, "messages": user, "max_tokens": -1}),
        ),
        (
            "/api/generate",
            json!({"model": model, "prompt": "x", "stream": false, "options": {"num_predict": 0}}),
        ),
    ] {
        let (st, v) = parts(&app.post(path, body.clone()).await);
        assert_eq!(st, 400, "{path} {body}: {v}");
    }
    // Ollama's own spelling of "no limit" keeps its meaning. (`think: false`: the
    // tiny Qwen3 would otherwise think first, unbounded, until its context is full;
    // SmolLM2 has no thinking mode.)
    let (st, v) = parts(
        &app.post(
            "/api/generate",
            json!({"model": model, "prompt": "x", "stream": false, "think": false,
                   "options": {"num_predict": -1}, "grammar": "root ::= \"ok\""}),
        )
        .await,
    );
    assert_eq!((st, v["response"].as_str()), (200, Some("ok")), "{v}");
}

fn openai_tool(name: &str, params: Value) -> Value {
    json!({"type": "function", "function": {"name": name, "parameters": params}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_tools_get_400_before_inference() {
    let app = App::new();
    let bad = json!({"type": "object", "properties": {"q": {"type": "string"}},
        "patternProperties": {"^x": {"type": "string"}}});
    let ask = user("Hi");
    let cases = [
        (
            "/v1/chat/completions",
            json!({"messages": ask, "tools": [openai_tool("lookup", bad.clone())]}),
        ),
        (
            "/api/chat",
            json!({"messages": ask, "tools": [openai_tool("lookup", bad.clone())]}),
        ),
        (
            "/v1/messages",
            json!({"max_tokens": 8, "messages": ask,
            "tools": [{"name": "lookup", "input_schema": bad}]}),
        ),
    ];
    for (path, body) in cases {
        let (status, v) = parts(&app.post(path, body).await);
        assert_eq!(status, 400, "{path}: {v}");
        let text = v.to_string();
        assert!(
            text.contains("tool lookup: the schema uses \\\"patternProperties\\\""),
            "{path}: {text}"
        );
    }
    let hosted = [
        (
            "/v1/chat/completions",
            json!({"messages": ask, "tools": [{"type": "web_search_preview"}]}),
            "web_search_preview",
        ),
        (
            "/v1/chat/completions",
            json!({"messages": ask, "tools": [{"type": "code_interpreter"}]}),
            "code_interpreter",
        ),
        (
            "/api/chat",
            json!({"messages": ask, "tools": [{"type": "web_search"}]}),
            "web_search",
        ),
        (
            "/v1/messages",
            json!({"max_tokens": 8, "messages": ask,
            "tools": [{"type": "web_search_20250305", "name": "web_search"}]}),
            "web_search_20250305",
        ),
        (
            "/v1/messages",
            json!({"max_tokens": 8, "messages": ask,
            "tools": [{"type": "computer_20250124", "name": "computer"}]}),
            "computer_20250124",
        ),
        (
            "/v1/messages",
            json!({"max_tokens": 8, "messages": ask,
            "tools": [{"type": "code_execution_20250522", "name": "code_execution"}]}),
            "code_execution_20250522",
        ),
    ];
    for (path, body, kind) in hosted {
        let (status, v) = parts(&app.post(path, body).await);
        assert_eq!(status, 400, "{path}: {v}");
        assert!(
            v.to_string()
                .contains(&format!("tool type \\\"{kind}\\\" is a hosted tool")),
            "{v}"
        );
    }
    // A named choice must name an offered tool.
    let weather = json!({"type": "object",
        "properties": {"location": {"type": "string", "maxLength": 24}, "unit": {"enum": ["c", "f"]}},
        "required": ["location", "unit"]});
    let (status, v) = parts(
        &app.post(
            "/v1/chat/completions",
            json!({"messages": ask,
            "tools": [openai_tool("get_weather", weather)],
            "tool_choice": {"type": "function", "function": {"name": "launch"}}}),
        )
        .await,
    );
    assert_eq!(status, 400, "{v}");
    let stats = app.get("/v1/stats").await.json();
    assert_eq!(
        stats["tokens"]["completion"], 0,
        "refusals decoded tokens: {stats}"
    );
}

/// A prompt past the context is told apart from any other bad request, in each
/// shape's own words: the clients' context-overflow handling (LiteLLM's
/// `ContextWindowExceededError`, LangChain's `ContextOverflowError`, pydantic-ai's)
/// looks for OpenAI's `code` and wording, Anthropic's "prompt is too long", Ollama's
/// "exceeds the context length".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_past_the_context_is_named_as_such_in_each_shape() {
    // `llamay serve -ctx 64`.
    let app = App::with(Setup {
        n_ctx: 64,
        ..Setup::default()
    });
    let model = app.model.as_str();
    let long = "the quick brown fox jumps over the lazy dog ".repeat(40);
    let chat = json!([{"role": "user", "content": long}]);
    let cases = [
        (
            "/v1/chat/completions",
            json!({"model": model, "messages": chat}),
        ),
        ("/v1/completions", json!({"model": model, "prompt": long})),
        ("/v1/responses", json!({"model": model, "input": long})),
        (
            "/v1/messages",
            json!({"model": model, "max_tokens": 8, "messages": chat}),
        ),
        (
            "/api/chat",
            json!({"model": model, "messages": chat, "stream": false}),
        ),
        (
            "/api/generate",
            json!({"model": model, "prompt": long, "stream": false}),
        ),
    ];
    for (path, body) in cases {
        let (st, v) = parts(&app.post(path, body).await);
        assert_eq!(st, 400, "{path}: {v}");
        let numbers = |m: &str| {
            m.contains("64")
                && m.split(|c: char| !c.is_ascii_digit())
                    .any(|n| n.parse::<usize>().is_ok_and(|n| n > 300))
        };
        match path {
            "/v1/messages" => {
                assert_eq!(v["error"]["type"], "invalid_request_error", "{v}");
                let m = v["error"]["message"].as_str().unwrap();
                assert!(m.starts_with("prompt is too long: ") && numbers(m), "{m}");
            }
            "/api/chat" | "/api/generate" => {
                let m = v["error"].as_str().unwrap();
                assert!(
                    m.contains("exceeds the context length") && numbers(m),
                    "{m}"
                );
            }
            _ => {
                assert_eq!(v["error"]["code"], "context_length_exceeded", "{path}: {v}");
                assert_eq!(v["error"]["type"], "invalid_request_error", "{v}");
                let m = v["error"]["message"].as_str().unwrap();
                assert!(numbers(m), "{m}");
                if path != "/v1/responses" {
                    assert!(
                        m.starts_with("This model's maximum context length is 64 tokens"),
                        "{m}"
                    );
                }
            }
        }
    }
    // Any other bad request keeps code null.
    let (st, v) = parts(
        &app.post(
            "/v1/chat/completions",
            json!({"model": model, "messages": []}),
        )
        .await,
    );
    assert_eq!(st, 400, "{v}");
    assert!(v["error"]["code"].is_null(), "{v}");
}

/// Constraints that cannot be honoured as asked: an unknown format, a grammar and a
/// schema together, a grammar that does not compile. (The refusals of the binary
/// test `serve_api.rs::structured_output_holds_on_every_shape`, which keeps what
/// SmolLM2 writes under each constraint.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflicting_or_invalid_constraints_get_400_on_each_shape() {
    let app = App::new();
    let r = app
        .post(
            "/v1/messages",
            json!({"model": app.model, "max_tokens": 4, "messages": user("x"), "llamay_format": "yaml"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    // A grammar and a schema together: 400, on each shape.
    let grammar = "root ::= piece square square\npiece ::= \"K\" | \"Q\" | \"R\" | \"B\" | \"N\" | \"\"\nsquare ::= [a-h] [1-8]\n";
    let small =
        json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]});
    for (path, body) in [
        (
            "/v1/chat/completions",
            json!({"messages": user("x"), "grammar": grammar, "llamay_schema": small}),
        ),
        (
            "/v1/messages",
            json!({"max_tokens": 5, "messages": user("x"), "llamay_grammar": grammar, "llamay_schema": small}),
        ),
        (
            "/api/chat",
            json!({"messages": user("x"), "grammar": grammar, "format": small}),
        ),
    ] {
        let (st, v) = parts(&app.post(path, body).await);
        assert_eq!(st, 400, "{path}: {v}");
    }
    // An invalid grammar is a 400 too.
    let (st, v) = parts(
        &app.post(
            "/api/generate",
            json!({"prompt": "x", "grammar": "root ::= root \"a\""}),
        )
        .await,
    );
    assert_eq!(st, 400, "{v}");
    assert!(v["error"].as_str().unwrap().contains("left"), "{v}");
}
