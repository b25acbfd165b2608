//! Tool calls through the real `llamay serve` (SmolLM2): forced calls match their
//! tool's schema on every API shape, named choices hold, `none` offers nothing,
//! single-call choices make one call, streams carry a call piece by piece (whole
//! with `whole_tool_calls`), and earlier calls and their results go back into the
//! prompt. Refused tools are tested in-process (crates/server/tests/http/refusals.rs).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

use common::serve::{client, openai_chunks, post, sse_events, Server};
use serde_json::{json, Value};

fn weather_params() -> Value {
    json!({"type": "object",
        "properties": {"location": {"type": "string", "maxLength": 24}, "unit": {"enum": ["c", "f"]}},
        "required": ["location", "unit"]})
}

fn time_params() -> Value {
    json!({"type": "object",
        "properties": {"tz": {"type": "string", "pattern": "^[A-Za-z/_]{1,20}$"}},
        "required": ["tz"]})
}

fn openai_tool(name: &str, params: Value) -> Value {
    json!({"type": "function", "function": {"name": name, "parameters": params}})
}

fn user(text: &str) -> Value {
    json!([{"role": "user", "content": text}])
}

/// Asserts `args` validates against `schema`.
fn assert_valid(schema: &Value, args: &Value) {
    let v = jsonschema::validator_for(schema).unwrap();
    let errors: Vec<String> = v.iter_errors(args).map(|e| e.to_string()).collect();
    assert!(
        errors.is_empty(),
        "{args} does not fit {schema}: {errors:?}"
    );
}

fn assert_call_id(id: &Value) {
    let id = id.as_str().unwrap();
    assert!(
        id.len() == 17 && id.starts_with("call_") && id[5..].bytes().all(|b| b.is_ascii_hexdigit()),
        "{id}"
    );
}

/// The calls of an OpenAI chat answer, arguments parsed from their JSON string.
fn openai_calls(v: &Value) -> Vec<(String, Value)> {
    let choice = &v["choices"][0];
    let Some(calls) = choice["message"]["tool_calls"].as_array() else {
        return Vec::new();
    };
    assert_eq!(choice["finish_reason"], "tool_calls", "{v}");
    assert!(choice["message"]["content"].is_null(), "{v}");
    calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            assert_eq!(c["type"], "function");
            assert_eq!(c["index"], i);
            assert_call_id(&c["id"]);
            let args: Value =
                serde_json::from_str(c["function"]["arguments"].as_str().unwrap()).unwrap();
            (c["function"]["name"].as_str().unwrap().to_string(), args)
        })
        .collect()
}

/// Runs `n` jobs on `threads` threads, results in job order.
fn concurrently<T: Send>(n: usize, threads: usize, job: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let next = AtomicUsize::new(0);
    let mut out: Vec<(usize, T)> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= n {
                            return mine;
                        }
                        mine.push((i, job(i)));
                    }
                })
            })
            .collect();
        hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, t)| t).collect()
}

#[test]
fn openai_shape_forced_named_none_single_stream_and_loop() {
    let s = Server::start(&["-parallel", "12"]);
    let c = client();
    let url = s.url("/v1/chat/completions");
    let weather = openai_tool("get_weather", weather_params());
    let time = openai_tool("get_time", time_params());
    let ask = user("What is the weather in Paris and in Tokyo?");

    // The seed's example with `required`: every call is get_weather with valid arguments.
    let answers = concurrently(3, 3, |seed| {
        post(
            &c,
            &url,
            &json!({"model": s.model, "messages": ask, "tools": [weather],
            "tool_choice": "required", "max_tokens": 96, "seed": seed}),
        )
    });
    for (status, v) in &answers {
        assert_eq!(*status, 200, "{v}");
        let calls = openai_calls(v);
        assert!(!calls.is_empty(), "{v}");
        for (name, args) in calls {
            assert_eq!(name, "get_weather");
            assert_valid(&weather_params(), &args);
        }
    }

    // A named tool among two: the named one, 20 seeds out of 20.
    let named = concurrently(20, 12, |seed| {
        post(
            &c,
            &url,
            &json!({"model": s.model, "messages": ask, "tools": [weather, time],
            "tool_choice": {"type": "function", "function": {"name": "get_time"}},
            "parallel_tool_calls": false, "max_tokens": 64, "seed": 100 + seed}),
        )
    });
    for (status, v) in &named {
        assert_eq!(*status, 200, "{v}");
        let calls = openai_calls(v);
        assert_eq!(calls.len(), 1, "{v}");
        assert_eq!(calls[0].0, "get_time", "{v}");
        assert_valid(&time_params(), &calls[0].1);
    }

    // `parallel_tool_calls: false`: exactly one call, even with room for more.
    let single = concurrently(2, 2, |seed| {
        post(
            &c,
            &url,
            &json!({"model": s.model, "messages": ask, "tools": [weather],
            "tool_choice": "required", "parallel_tool_calls": false, "max_tokens": 120,
            "seed": 200 + seed}),
        )
    });
    for (_, v) in &single {
        assert_eq!(openai_calls(v).len(), 1, "{v}");
        assert_eq!(v["llamay"]["constraint"], "tools");
    }

    // `none`: text and no calls.
    let (status, v) = post(
        &c,
        &url,
        &json!({"model": s.model, "messages": ask,
        "tools": [weather], "tool_choice": "none", "max_tokens": 16, "seed": 1}),
    );
    assert_eq!(status, 200, "{v}");
    let m = &v["choices"][0]["message"];
    assert!(m.get("tool_calls").is_none(), "{v}");
    assert!(m["content"].as_str().is_some_and(|t| !t.is_empty()), "{v}");
    assert_ne!(v["choices"][0]["finish_reason"], "tool_calls");

    // A forced tool replaces a response_format on the same request.
    let (_, v) = post(
        &c,
        &url,
        &json!({"model": s.model, "messages": ask, "tools": [weather],
        "tool_choice": "required", "parallel_tool_calls": false, "max_tokens": 64, "seed": 7,
        "response_format": {"type": "json_object"}}),
    );
    assert_eq!(openai_calls(&v).len(), 1, "{v}");

    // Streaming: the call's id and name come first, then its arguments piece by
    // piece, each concatenation a prefix of the final text; with whole_tool_calls
    // the call arrives whole in one delta.
    for whole in [false, true] {
        let body = c
            .post(&url)
            .json(
                &json!({"model": s.model, "messages": ask, "tools": [weather],
                "tool_choice": "required", "parallel_tool_calls": false, "max_tokens": 64,
                "seed": 5, "stream": true, "llamay_options": {"whole_tool_calls": whole}}),
            )
            .send()
            .unwrap()
            .text()
            .unwrap();
        let chunks = openai_chunks(&body);
        let with_calls: Vec<&Value> = chunks
            .iter()
            .map(|c| &c["choices"][0]["delta"]["tool_calls"][0])
            .filter(|c| !c.is_null())
            .collect();
        let first = with_calls[0];
        assert_call_id(&first["id"]);
        assert_eq!(first["function"]["name"], "get_weather");
        assert!(with_calls[1..]
            .iter()
            .all(|c| c["id"].is_null() && c["index"] == 0));
        let pieces: Vec<&str> = with_calls
            .iter()
            .map(|c| c["function"]["arguments"].as_str().unwrap())
            .collect();
        let text = pieces.concat();
        let args: Value = serde_json::from_str(&text).unwrap();
        assert_valid(&weather_params(), &args);
        if whole {
            assert_eq!(with_calls.len(), 1, "{body}");
        } else {
            assert!(
                pieces.iter().filter(|p| !p.is_empty()).count() >= 5,
                "{pieces:?}"
            );
        }
        assert!(chunks.iter().all(|c| c["choices"][0]["delta"]["content"]
            .as_str()
            .unwrap_or("")
            .is_empty()));
        assert_eq!(
            chunks.last().unwrap()["choices"][0]["finish_reason"],
            "tool_calls"
        );
    }

    // The loop: the call and its result go back, and the next turn is produced.
    let (_, first) = post(
        &c,
        &url,
        &json!({"model": s.model, "messages": ask,
        "tools": [weather], "tool_choice": "required", "parallel_tool_calls": false,
        "max_tokens": 64, "seed": 9}),
    );
    let msg = &first["choices"][0]["message"];
    let id = msg["tool_calls"][0]["id"].clone();
    let mut history = ask.as_array().unwrap().clone();
    history.push(msg.clone());
    history.push(json!({"role": "tool", "tool_call_id": id, "content": "{\"temp\": 21}"}));
    let (status, next) = post(
        &c,
        &url,
        &json!({"model": s.model, "messages": history,
        "tools": [weather], "max_tokens": 24, "seed": 9}),
    );
    assert_eq!(status, 200, "{next}");
    assert!(
        next["choices"][0]["message"]["content"].is_string()
            || next["choices"][0]["message"]["tool_calls"].is_array(),
        "{next}"
    );
    assert!(
        next["usage"]["prompt_tokens"].as_u64().unwrap()
            > first["usage"]["prompt_tokens"].as_u64().unwrap()
    );
}

#[test]
fn anthropic_and_ollama_shapes() {
    let s = Server::start(&[]);
    let c = client();
    let ask = user("What is the weather in Paris?");
    let tools = json!([{"name": "get_weather", "description": "Current weather for one city.",
        "input_schema": weather_params()}, {"name": "get_time", "input_schema": time_params()}]);
    let messages = s.url("/v1/messages");

    // any / tool / disable_parallel_tool_use.
    for (choice, name, single) in [
        (json!({"type": "any"}), None, false),
        (
            json!({"type": "tool", "name": "get_time"}),
            Some("get_time"),
            false,
        ),
        (
            json!({"type": "any", "disable_parallel_tool_use": true}),
            None,
            true,
        ),
    ] {
        let (status, v) = post(
            &c,
            &messages,
            &json!({"model": s.model, "max_tokens": 96,
            "messages": ask, "tools": tools, "tool_choice": choice, "seed": 4}),
        );
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["stop_reason"], "tool_use", "{v}");
        let uses: Vec<&Value> = v["content"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["type"] == "tool_use")
            .collect();
        assert!(!uses.is_empty(), "{v}");
        if single {
            assert_eq!(uses.len(), 1, "{v}");
        }
        for u in uses {
            assert_call_id(&u["id"]);
            let n = u["name"].as_str().unwrap();
            if let Some(want) = name {
                assert_eq!(n, want, "{v}");
            }
            let schema = if n == "get_time" {
                time_params()
            } else {
                weather_params()
            };
            assert_valid(&schema, &u["input"]);
        }
    }

    // Streaming: one tool_use block, its input in input_json_deltas whose
    // concatenation is the input; with whole_tool_calls, in one.
    for whole in [false, true] {
        let body = c
            .post(&messages)
            .json(
                &json!({"model": s.model, "max_tokens": 64, "messages": ask, "tools": tools,
                "tool_choice": {"type": "tool", "name": "get_weather"}, "stream": true, "seed": 2,
                "llamay_options": {"whole_tool_calls": whole}}),
            )
            .send()
            .unwrap()
            .text()
            .unwrap();
        let events = sse_events(&body);
        let names: Vec<&str> = events.iter().map(|(e, _)| e.as_deref().unwrap()).collect();
        let deltas = names.len() - 6;
        let expected: Vec<&str> = ["message_start", "ping", "content_block_start"]
            .into_iter()
            .chain(std::iter::repeat_n("content_block_delta", deltas))
            .chain(["content_block_stop", "message_delta", "message_stop"])
            .collect();
        assert_eq!(names, expected, "{body}");
        assert!(if whole { deltas == 1 } else { deltas >= 5 }, "{body}");
        let start: Value = serde_json::from_str(&events[2].1).unwrap();
        assert_eq!(start["content_block"]["type"], "tool_use");
        assert_eq!(start["content_block"]["name"], "get_weather");
        let mut partial = String::new();
        for (_, data) in &events[3..3 + deltas] {
            let delta: Value = serde_json::from_str(data).unwrap();
            assert_eq!(delta["delta"]["type"], "input_json_delta");
            partial.push_str(delta["delta"]["partial_json"].as_str().unwrap());
        }
        let input: Value = serde_json::from_str(&partial).unwrap();
        assert_valid(&weather_params(), &input);
        let md: Value = serde_json::from_str(&events[events.len() - 2].1).unwrap();
        assert_eq!(md["delta"]["stop_reason"], "tool_use");
    }

    // The loop: tool_use then tool_result go back; the next turn is produced.
    let (_, first) = post(
        &c,
        &messages,
        &json!({"model": s.model, "max_tokens": 64,
        "messages": ask, "tools": tools, "tool_choice": {"type": "any", "disable_parallel_tool_use": true}, "seed": 6}),
    );
    let call = first["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["type"] == "tool_use")
        .unwrap()
        .clone();
    let (status, next) = post(
        &c,
        &messages,
        &json!({"model": s.model, "max_tokens": 24, "seed": 6,
        "tools": tools, "messages": [ask[0], {"role": "assistant", "content": [call]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": "21 C"}]}]}),
    );
    assert_eq!(status, 200, "{next}");
    assert!(
        next["content"].as_array().is_some_and(|c| !c.is_empty()),
        "{next}"
    );

    // Ollama: a forced choice (llamay's extension, top level or in options) makes one
    // call, arguments as an object; streaming puts it on one line.
    let chat = s.url("/api/chat");
    let otools = json!([openai_tool("get_weather", weather_params())]);
    let (status, v) = post(
        &c,
        &chat,
        &json!({"model": s.model, "messages": ask, "tools": otools,
        "stream": false, "options": {"num_predict": 120, "seed": 3, "tool_choice": "required"}}),
    );
    assert_eq!(status, 200, "{v}");
    let calls = v["message"]["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{v}");
    assert_eq!(calls[0]["function"]["name"], "get_weather");
    assert_valid(&weather_params(), &calls[0]["function"]["arguments"]);
    let body = c
        .post(&chat)
        .json(
            &json!({"model": s.model, "messages": ask, "tools": otools, "tool_choice": "required",
            "options": {"num_predict": 64, "seed": 8}}),
        )
        .send()
        .unwrap()
        .text()
        .unwrap();
    let lines: Vec<Value> = body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let with_calls: Vec<&Value> = lines
        .iter()
        .filter(|l| l["message"]["tool_calls"].is_array())
        .collect();
    assert_eq!(with_calls.len(), 1, "{body}");
    assert_valid(
        &weather_params(),
        &with_calls[0]["message"]["tool_calls"][0]["function"]["arguments"],
    );
    assert!(lines.last().unwrap()["done"].as_bool().unwrap());
    // Ollama's history: the call, then a `tool` message with the result.
    let call = with_calls[0]["message"]["tool_calls"][0].clone();
    let (status, next) = post(
        &c,
        &chat,
        &json!({"model": s.model, "stream": false, "tools": otools,
        "messages": [ask[0], {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "content": "21 C", "tool_name": "get_weather"}],
        "options": {"num_predict": 16, "seed": 8}}),
    );
    assert_eq!(status, 200, "{next}");
    assert!(next["done"].as_bool().unwrap(), "{next}");
}

/// Three tools with nested objects, arrays, enums and numeric bounds.
fn hundred_call_tools() -> [(&'static str, Value); 3] {
    [
        (
            "move",
            json!({"type": "object", "properties": {
            "to": {"type": "object", "properties": {
                "x": {"type": "integer", "minimum": 0, "maximum": 9},
                "y": {"type": "integer", "minimum": -9, "maximum": 0}},
                "required": ["x", "y"]},
            "speed": {"enum": ["slow", "fast"]}},
            "required": ["to", "speed"]}),
        ),
        (
            "pick",
            json!({"type": "object", "properties": {
            "ids": {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 99},
                    "minItems": 1, "maxItems": 3},
            "all": {"type": "boolean"}},
            "required": ["ids"]}),
        ),
        (
            "rate",
            json!({"type": "object", "properties": {
            "score": {"type": "number", "minimum": 0, "exclusiveMaximum": 5},
            "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2},
            "meta": {"type": "object", "properties": {
                "n": {"type": "integer", "minimum": -3, "maximum": 3, "multipleOf": 3}},
                "required": ["n"]}},
            "required": ["score", "meta"]}),
        ),
    ]
}

#[test]
fn a_hundred_forced_calls_all_fit_their_schemas() {
    let s = Server::start(&["-parallel", "16"]);
    // Sixteen at a time on a small machine: each answer waits for its batch.
    let c = reqwest::blocking::Client::builder()
        .timeout(std::time::Duration::from_secs(600))
        .build()
        .unwrap();
    let url = s.url("/v1/chat/completions");
    let tools = hundred_call_tools();
    let validators: Vec<_> = tools
        .iter()
        .map(|(_, p)| jsonschema::validator_for(p).unwrap())
        .collect();
    let t0 = std::time::Instant::now();
    let answers = concurrently(100, 16, |i| {
        let (name, params) = &tools[i % 3];
        let seed = 0x5eed_u64.wrapping_mul(i as u64 + 1) % 1_000_003;
        post(
            &c,
            &url,
            &json!({"model": s.model, "messages": user("Go."),
            "tools": [openai_tool(name, params.clone())], "tool_choice": "required",
            "parallel_tool_calls": false, "max_tokens": 160, "seed": seed, "temperature": 1.0}),
        )
    });
    let mut valid = 0;
    for (i, (status, v)) in answers.iter().enumerate() {
        assert_eq!(*status, 200, "{v}");
        let calls = openai_calls(v);
        assert_eq!(calls.len(), 1, "request {i}: {v}");
        let (name, args) = &calls[0];
        assert_eq!(name, tools[i % 3].0);
        let errors: Vec<String> = validators[i % 3]
            .iter_errors(args)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "request {i}: {args}: {errors:?}");
        valid += 1;
    }
    assert_eq!(valid, 100);
    eprintln!("100 forced calls, 100 valid, in {:.1?}", t0.elapsed());
}
