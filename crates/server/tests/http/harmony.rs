//! gpt-oss's harmony channels on every API shape, in-process: the tiny random-weight
//! gpt-oss over the real o200k_harmony vocabulary (`scripts/make-moe-models`'s
//! `gpt-oss-harmony`). Its text is noise; what is checked is where each channel lands
//! (analysis as reasoning, `final` as the answer, `commentary to=functions.NAME` as a
//! call), that no harmony marker leaks into either, and that the constrained parts hold.

use crate::common::{user, App, Setup};
use serde_json::{json, Value};

fn app() -> App {
    App::with(Setup {
        model: Some(llamay_testdata::moe_model("gpt-oss-harmony")),
        ..Setup::default()
    })
}

const MARKERS: [&str; 7] = [
    "<|channel|>",
    "<|message|>",
    "<|end|>",
    "<|start|>",
    "<|call|>",
    "<|return|>",
    "<|constrain|>",
];

fn clean(what: &str, text: &str) {
    for m in MARKERS {
        assert!(!text.contains(m), "{what} holds {m}: {text:?}");
    }
}

fn schema() -> Value {
    json!({"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 12},
        "n": {"type": "integer"}}, "required": ["name", "n"]})
}

fn tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {
                "city": {"type": "string", "maxLength": 8},
                "unit": {"enum": ["c", "f"]}},
            "required": ["city", "unit"]}}},
        {"type": "function", "function": {"name": "get_time"}}
    ])
}

fn valid(schema: &Value, doc: &Value) -> bool {
    jsonschema::validator_for(schema).unwrap().is_valid(doc)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_keeps_the_analysis_apart_and_the_schema_on_the_final_message() {
    let app = app();
    let schema = schema();
    for seed in 0..4 {
        let body = json!({"model": app.model, "seed": seed, "temperature": 1.0, "max_tokens": 64,
            "messages": user("Name and number, please."),
            "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}});
        let r = app.post("/v1/chat/completions", body).await;
        assert_eq!(r.status.as_u16(), 200, "{}", r.text);
        let v = r.json();
        let m = &v["choices"][0]["message"];
        let content = m["content"].as_str().unwrap();
        let reasoning = m["reasoning_content"].as_str().unwrap();
        clean("content", content);
        clean("reasoning", reasoning);
        assert!(!reasoning.is_empty(), "seed {seed}: no analysis");
        let doc: Value = serde_json::from_str(content)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}: {content:?}"));
        assert!(valid(&schema, &doc), "seed {seed}: {doc}");
        let used = &v["usage"]["completion_tokens_details"]["reasoning_tokens"];
        assert!(used.as_u64().unwrap() >= 4, "{used}");
        let enforced = v["llamay"]["enforced"].to_string();
        assert!(
            enforced.contains("the final message under the constraint"),
            "{enforced}"
        );
    }
    // Free text: thinking, then the answer, both without markers.
    let body = json!({"model": app.model, "seed": 7, "max_tokens": 40, "messages": user("hi")});
    let v = app.post("/v1/chat/completions", body).await.json();
    let m = &v["choices"][0]["message"];
    clean("content", m["content"].as_str().unwrap());
    assert!(!m["reasoning_content"].as_str().unwrap().is_empty(), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forced_calls_are_commentary_messages_under_their_schemas() {
    let app = app();
    let weather = tools()[0]["function"]["parameters"].clone();
    let named = json!({"type": "function", "function": {"name": "get_weather"}});
    for (choice, seeds) in [(json!("required"), 0..3), (named.clone(), 0..3)] {
        for seed in seeds {
            let body = json!({"model": app.model, "seed": seed, "temperature": 1.0,
                "max_tokens": 60, "messages": user("Weather in Oslo?"),
                "tools": tools(), "tool_choice": choice});
            let v = app.post("/v1/chat/completions", body).await.json();
            let c = &v["choices"][0];
            assert_eq!(
                c["finish_reason"], "tool_calls",
                "{choice} seed {seed}: {v}"
            );
            assert!(c["message"]["content"].is_null(), "{v}");
            let calls = c["message"]["tool_calls"].as_array().unwrap();
            assert_eq!(calls.len(), 1, "{v}");
            let f = &calls[0]["function"];
            let args: Value = serde_json::from_str(f["arguments"].as_str().unwrap()).unwrap();
            match f["name"].as_str().unwrap() {
                "get_weather" => assert!(valid(&weather, &args), "{args}"),
                "get_time" => assert!(choice == "required" && args == json!({}), "{args}"),
                other => panic!("a call to {other}"),
            }
            assert_eq!(v["llamay"]["constraint"], "tools", "{v}");
        }
    }
    // Streamed: the reasoning as deltas, then the call's name, then its arguments.
    let body = json!({"model": app.model, "seed": 5, "max_tokens": 60, "stream": true,
        "messages": user("Weather in Oslo?"), "tools": tools(), "tool_choice": named});
    let r = app.post("/v1/chat/completions", body).await;
    let (mut reasoning, mut args, mut names) = (String::new(), String::new(), Vec::new());
    for chunk in r.sse() {
        let d = &chunk["choices"][0]["delta"];
        reasoning.push_str(d["reasoning_content"].as_str().unwrap_or(""));
        for call in d["tool_calls"].as_array().into_iter().flatten() {
            if let Some(n) = call["function"]["name"].as_str() {
                names.push(n.to_string());
            }
            args.push_str(call["function"]["arguments"].as_str().unwrap_or(""));
        }
        if let Some(c) = d["content"].as_str() {
            clean("streamed content", c);
        }
    }
    assert!(!reasoning.is_empty());
    clean("streamed reasoning", &reasoning);
    assert_eq!(names, ["get_weather"]);
    let args: Value = serde_json::from_str(&args).unwrap_or_else(|e| panic!("{e}: {args}"));
    assert!(valid(&weather, &args), "{args}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_anthropic_and_ollama_carry_the_analysis_as_thinking() {
    let app = app();
    let body = json!({"model": app.model, "input": "hi", "max_output_tokens": 40,
        "reasoning": {"effort": "low"}});
    let v = app.post("/v1/responses", body).await.json();
    let kinds: Vec<&str> = v["output"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.first(), Some(&"reasoning"), "{v}");
    let thought = v["output"][0]["content"][0]["text"].as_str().unwrap();
    assert!(!thought.is_empty());
    clean("reasoning item", thought);

    let body = json!({"model": app.model, "max_tokens": 40, "messages": user("hi"),
        "thinking": {"type": "enabled", "budget_tokens": 10}});
    let v = app.post("/v1/messages", body).await.json();
    assert_eq!(v["content"][0]["type"], "thinking", "{v}");
    let thinking = v["content"][0]["thinking"].as_str().unwrap();
    assert!(!thinking.is_empty());
    clean("thinking block", thinking);
    assert!(
        v["llamay"]["reasoning_tokens"].as_u64().unwrap() <= 11,
        "{v}"
    );

    let schema = schema();
    let body = json!({"model": app.model, "stream": false, "think": "high", "format": schema,
        "options": {"num_predict": 64, "seed": 3}, "messages": user("Name and number.")});
    let v = app.post("/api/chat", body).await.json();
    let m = &v["message"];
    assert!(!m["thinking"].as_str().unwrap().is_empty(), "{v}");
    let content = m["content"].as_str().unwrap();
    let doc: Value = serde_json::from_str(content).unwrap_or_else(|e| panic!("{e}: {v}"));
    assert!(valid(&schema, &doc), "{doc}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn effort_goes_to_the_system_message_and_the_catalog_says_what_it_can() {
    let app = app();
    let body = json!({"model": app.model, "max_tokens": 8, "messages": user("hi"),
        "reasoning_effort": "high", "llamay_echo_prompt": true});
    let v = app.post("/v1/chat/completions", body).await.json();
    let prompt = v["llamay"]["prompt"].as_str().unwrap();
    assert!(prompt.contains("\n\nReasoning: high\n\n"), "{prompt}");
    assert!(prompt.ends_with("<|start|>assistant"), "{prompt}");

    let body = json!({"model": app.model, "max_tokens": 8, "messages": user("hi"),
        "reasoning_effort": "none"});
    let r = app.post("/v1/chat/completions", body).await;
    assert_eq!(r.status.as_u16(), 400, "{}", r.text);
    assert!(r.text.contains("always thinks"), "{}", r.text);

    // A raw completion is the caller's own: no channels are imposed on it.
    let body = json!({"model": app.model, "max_tokens": 8, "prompt": "hello", "seed": 1});
    let v = app.post("/v1/completions", body).await.json();
    assert!(
        v["llamay"]["enforced"].as_array().unwrap().is_empty(),
        "{v}"
    );

    let v = app.get("/v1/catalog/models").await.json();
    let m = &v["data"][0];
    assert_eq!(m["reasoning"]["convention"], "gpt-oss", "{m}");
    let caps = m["capabilities"].to_string();
    assert!(
        caps.contains("thinking") && caps.contains("tools"),
        "{caps}"
    );
    assert_eq!(m["reasoning_controls"]["thinking_toggle"], false);
    assert!(!m["reasoning_controls"]["effort"]
        .to_string()
        .contains("none"));
}
