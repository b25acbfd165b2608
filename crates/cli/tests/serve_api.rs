//! `llamay serve` as clients see it: structured output and streaming as SmolLM2
//! writes them, the API key and the body limit on a real socket. Refusals and error
//! shapes are tested in-process (crates/server/tests/http/refusals.rs).

mod common;

use common::serve::{check_order, client, openai_chunks, order_schema, post, sse_events, Server};
use serde_json::{json, Value};

fn user(text: &str) -> Value {
    json!([{"role": "user", "content": text}])
}

#[test]
fn structured_output_holds_on_every_shape() {
    let s = Server::start(&[]);
    let c = client();
    let prompt = "Order 7 from Acme: 3 widgets at 4.50 EUR each, ship to Lyon, postcode 69001.";
    let (st, v) = post(
        &c,
        &s.url("/v1/chat/completions"),
        &json!({"model": s.model, "temperature": 0, "max_tokens": 200, "messages": user(prompt),
            "response_format": {"type": "json_schema", "json_schema": {"name": "order", "schema": order_schema()}}}),
    );
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["choices"][0]["finish_reason"], "stop", "{v}");
    assert_eq!(v["llamay"]["constraint"], "schema");
    check_order(
        &serde_json::from_str(v["choices"][0]["message"]["content"].as_str().unwrap()).unwrap(),
    );

    // llamay_schema wins over response_format.
    let small =
        json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]});
    let (st, v) = post(
        &c,
        &s.url("/v1/chat/completions"),
        &json!({"model": s.model, "temperature": 0, "max_tokens": 30, "messages": user("Is water wet?"),
            "response_format": {"type": "json_schema", "json_schema": {"name": "order", "schema": order_schema()}},
            "llamay_schema": small}),
    );
    assert_eq!(st, 200, "{v}");
    let doc: Value =
        serde_json::from_str(v["choices"][0]["message"]["content"].as_str().unwrap()).unwrap();
    assert!(
        doc["ok"].is_boolean() && doc.as_object().unwrap().len() == 1,
        "{doc}"
    );

    // The seed's chess-move grammar, on all three shapes.
    let grammar = "root ::= piece square square\npiece ::= \"K\" | \"Q\" | \"R\" | \"B\" | \"N\" | \"\"\nsquare ::= [a-h] [1-8]\n";
    let is_move = |t: &str| {
        let b = t.as_bytes();
        let rest = if b.first().is_some_and(|c| b"KQRBN".contains(c)) {
            &b[1..]
        } else {
            b
        };
        rest.len() == 4
            && (b'a'..=b'h').contains(&rest[0])
            && (b'1'..=b'8').contains(&rest[1])
            && (b'a'..=b'h').contains(&rest[2])
            && (b'1'..=b'8').contains(&rest[3])
    };
    let (_, v) = post(
        &c,
        &s.url("/v1/completions"),
        &json!({"model": s.model, "prompt": "White's best opening move:", "llamay_grammar": grammar, "max_tokens": 10}),
    );
    assert!(is_move(v["choices"][0]["text"].as_str().unwrap()), "{v}");
    let (_, v) = post(
        &c,
        &s.url("/v1/messages"),
        &json!({"model": s.model, "max_tokens": 10, "messages": user("White's best opening move?"), "grammar": grammar}),
    );
    assert!(is_move(v["content"][0]["text"].as_str().unwrap()), "{v}");
    assert_eq!(v["stop_reason"], "end_turn");
    let (_, v) = post(
        &c,
        &s.url("/api/generate"),
        &json!({"model": s.model, "prompt": "White's best opening move?", "grammar": grammar, "stream": false}),
    );
    assert!(is_move(v["response"].as_str().unwrap()), "{v}");
    assert_eq!(v["llamay"]["constraint"], "grammar");

    // Ollama format "json" and llamay_format on OpenAI / Anthropic.
    let (_, v) = post(
        &c,
        &s.url("/api/chat"),
        &json!({"model": s.model, "messages": user("Give me a JSON object with keys name, port and tls for a local server."), "format": "json", "stream": false, "options": {"temperature": 0, "num_predict": 80}}),
    );
    assert_eq!(v["done_reason"], "stop", "{v}");
    let doc: Value = serde_json::from_str(v["message"]["content"].as_str().unwrap()).unwrap();
    assert!(doc.is_object(), "JSON mode answered {doc}");
    let (_, v) = post(
        &c,
        &s.url("/v1/messages"),
        &json!({"model": s.model, "max_tokens": 80, "temperature": 0, "messages": user("Give me a JSON object with keys name, port and tls for a local server."), "llamay_format": "json"}),
    );
    assert_eq!(v["stop_reason"], "end_turn", "{v}");
    let doc: Value = serde_json::from_str(v["content"][0]["text"].as_str().unwrap()).unwrap();
    assert!(doc.is_object(), "llamay_format json answered {doc}");
    // Any JSON value is a format of its own.
    let (_, v) = post(
        &c,
        &s.url("/v1/messages"),
        &json!({"model": s.model, "max_tokens": 12, "temperature": 0, "messages": user("How many legs has a spider? Answer with the number."), "llamay_format": "json_value"}),
    );
    assert_eq!(v["llamay"]["constraint"], "json_value", "{v}");

    // The order schema again, on Ollama's shape and another prompt: its grammar IR is
    // found by the runtime's resolver, not compiled again.
    let constraints = || -> Value {
        c.get(s.url("/v1/stats"))
            .send()
            .unwrap()
            .json::<Value>()
            .unwrap()["constraints"]
            .clone()
    };
    let before = constraints();
    let (st, v) = post(
        &c,
        &s.url("/api/chat"),
        &json!({"model": s.model, "messages": user(&format!("{prompt} Urgent.")), "format": order_schema(),
            "stream": false, "options": {"temperature": 0, "num_predict": 8}}),
    );
    assert_eq!(
        (st, &v["llamay"]["constraint"]),
        (200, &json!("schema")),
        "{v}"
    );
    let after = constraints();
    let n = |v: &Value, k: &str| v[k].as_u64().unwrap();
    assert_eq!(
        n(&after, "schema_lookups"),
        n(&before, "schema_lookups") + 1,
        "{after}"
    );
    assert_eq!(
        n(&after, "schema_hits"),
        n(&before, "schema_hits") + 1,
        "{after}"
    );
    // An unknown format, a grammar beside a schema and an invalid grammar are 400s
    // before any model work: crates/server/tests/http/refusals.rs, in-process.
}

#[test]
fn streams_are_well_formed_and_match_the_whole_answer() {
    let s = Server::start(&[]);
    let c = client();
    let text = |path: &str, body: Value| {
        c.post(s.url(path))
            .json(&body)
            .send()
            .unwrap()
            .text()
            .unwrap()
    };

    // OpenAI chat: role first, deltas, a finish chunk, a usage chunk, [DONE].
    let whole: Value = serde_json::from_str(&text("/v1/chat/completions",
        json!({"model": s.model, "messages": user("Name three colours."), "max_tokens": 20, "seed": 3}))).unwrap();
    let body = text(
        "/v1/chat/completions",
        json!({"model": s.model, "messages": user("Name three colours."),
        "max_tokens": 20, "seed": 3, "stream": true, "stream_options": {"include_usage": true}}),
    );
    let chunks = openai_chunks(&body);
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let streamed: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(
        streamed,
        whole["choices"][0]["message"]["content"].as_str().unwrap()
    );
    let n = chunks.len();
    // Whether the model stops by itself within 20 tokens is its choice; the stream must
    // say what the whole answer says.
    assert_eq!(
        chunks[n - 2]["choices"][0]["finish_reason"],
        whole["choices"][0]["finish_reason"]
    );
    assert_eq!(chunks[n - 1]["choices"], json!([]));
    // The same counts; the second request may find the first's prompt in the cache.
    let (su, wu) = (&chunks[n - 1]["usage"], &whole["usage"]);
    for k in ["prompt_tokens", "completion_tokens", "total_tokens"] {
        assert_eq!(su[k], wu[k], "{k}");
    }
    assert!(
        su["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap()
            <= su["prompt_tokens"].as_u64().unwrap()
    );
    assert!(chunks
        .iter()
        .all(|c| c["object"] == "chat.completion.chunk" && c["id"] == chunks[0]["id"]));

    // Anthropic: the exact event order.
    let body = text(
        "/v1/messages",
        json!({"model": s.model, "max_tokens": 15, "messages": user("Name three colours."), "stream": true, "seed": 3}),
    );
    let events = sse_events(&body);
    let names: Vec<&str> = events.iter().map(|(e, _)| e.as_deref().unwrap()).collect();
    assert_eq!(names[..3], ["message_start", "content_block_start", "ping"]);
    assert_eq!(
        names[names.len() - 3..],
        ["content_block_stop", "message_delta", "message_stop"]
    );
    assert!(names[3..names.len() - 3]
        .iter()
        .all(|&n| n == "content_block_delta"));
    for (e, d) in &events {
        let v: Value = serde_json::from_str(d).unwrap();
        assert_eq!(v["type"].as_str(), e.as_deref());
    }
    let delta: Value = serde_json::from_str(&events[events.len() - 2].1).unwrap();
    // The model may end its turn before the limit: the reason must match the count.
    match delta["delta"]["stop_reason"].as_str().unwrap() {
        "max_tokens" => assert_eq!(delta["usage"]["output_tokens"], 15),
        "end_turn" => assert!(delta["usage"]["output_tokens"].as_u64().unwrap() < 15),
        other => panic!("stop_reason {other}"),
    }

    // Ollama: NDJSON, only the last line done, with its counts.
    let body = text(
        "/api/generate",
        json!({"model": s.model, "prompt": "Name three colours.", "options": {"num_predict": 12}}),
    );
    let lines: Vec<Value> = body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines[..lines.len() - 1]
        .iter()
        .all(|l| l["done"] == false && l["response"].is_string()));
    let last = lines.last().unwrap();
    assert_eq!(last["done"], true);
    match last["done_reason"].as_str().unwrap() {
        "length" => assert_eq!(last["eval_count"], 12),
        "stop" => assert!(last["eval_count"].as_u64().unwrap() < 12),
        other => panic!("done_reason {other}"),
    }

    // Stop strings: OpenAI finish "stop", Anthropic "stop_sequence" naming it.
    let (_, v) = post(
        &c,
        &s.url("/v1/messages"),
        &json!({"model": s.model, "max_tokens": 60, "temperature": 0,
        "messages": user("Write two sentences about cats."), "stop_sequences": ["."]}),
    );
    assert_eq!(v["stop_reason"], "stop_sequence", "{v}");
    assert_eq!(v["stop_sequence"], ".");
    assert!(!v["content"][0]["text"].as_str().unwrap().contains('.'));
}

#[test]
fn api_key_guards_every_route_and_big_bodies_are_413() {
    let s = Server::start(&["-api-key", "sekrit"]);
    let c = client();
    let r = c.get(s.url("/v1/models")).send().unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert_eq!(
        r.json::<Value>().unwrap()["error"]["type"],
        "authentication_error"
    );
    let r = c
        .post(s.url("/v1/messages"))
        .json(&json!({}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert_eq!(r.json::<Value>().unwrap()["type"], "error");
    let r = c
        .get(s.url("/api/tags"))
        .header("authorization", "Bearer wrong")
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let r = c
        .get(s.url("/api/tags"))
        .header("authorization", "Bearer sekrit")
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let r = c
        .get(s.url("/v1/models"))
        .header("x-api-key", "sekrit")
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    // The server answers from the declared length without reading the body (a client
    // still writing 9 MiB would see its pipe closed), so speak HTTP by hand.
    let answer = oversized_request(&s.url("/api/generate"), 9 << 20, "sekrit");
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("larger than"), "{answer}");
}

/// Sends headers declaring a `len`-byte JSON body plus its first bytes, and returns
/// the raw response.
fn oversized_request(url: &str, len: usize, key: &str) -> String {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_at(rest.find('/').unwrap());
    let mut sock = std::net::TcpStream::connect(host).unwrap();
    sock.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    write!(
        sock,
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nx-api-key: {key}\r\n\
         content-type: application/json\r\ncontent-length: {len}\r\nconnection: close\r\n\r\n\
         {{\"prompt\": \"aaaa"
    )
    .unwrap();
    let mut out = Vec::new();
    let _ = sock.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}
