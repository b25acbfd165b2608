//! `x-llamay-quote` over HTTP: `llamay_sources` on every route (the six that take a schema), `true` quoting the
//! request's own user text, the enforcement report, and a missing source as a 400 in
//! each API's shape, naming the keyword.

mod common;

use common::serve::{client, post, Server};
use serde_json::{json, Value};

const CONTRACT: &str =
    "Clause 4: the \"Supplier\" ships within 10 days.\nClause 9: fees are 1.250,00 € per year.";

fn quote_schema(source: Value) -> Value {
    json!({"type": "object", "additionalProperties": false, "required": ["q"],
           "properties": {"q": {"type": "string", "maxLength": 30, "x-llamay-quote": source}}})
}

fn content(route: &str, v: &Value) -> String {
    match route {
        "/v1/chat/completions" => v["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .into(),
        "/v1/completions" => v["choices"][0]["text"].as_str().unwrap().into(),
        "/v1/messages" => v["content"][0]["text"].as_str().unwrap().into(),
        "/api/chat" => v["message"]["content"].as_str().unwrap().into(),
        "/v1/responses" => v["output"][0]["content"][0]["text"]
            .as_str()
            .unwrap()
            .into(),
        _ => v["response"].as_str().unwrap().into(),
    }
}

fn body(
    route: &str,
    model: &str,
    schema: Value,
    user: &str,
    sources: Option<Value>,
    seed: i64,
) -> Value {
    let mut b = match route {
        "/v1/chat/completions" => {
            json!({"model": model, "seed": seed, "temperature": 0.8, "max_tokens": 40,
            "messages": [{"role": "user", "content": user}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "q", "schema": schema}}})
        }
        "/v1/completions" => {
            json!({"model": model, "seed": seed, "temperature": 0.8, "max_tokens": 40,
            "prompt": user, "llamay_schema": schema})
        }
        "/v1/messages" => {
            json!({"model": model, "max_tokens": 40, "temperature": 0.8, "seed": seed,
            "messages": [{"role": "user", "content": user}],
            "output_config": {"format": {"type": "json_schema", "schema": schema}}})
        }
        "/v1/responses" => {
            json!({"model": model, "seed": seed, "temperature": 0.8, "max_output_tokens": 40,
            "input": user,
            "text": {"format": {"type": "json_schema", "name": "q", "schema": schema}}})
        }
        "/api/chat" => json!({"model": model, "stream": false, "format": schema,
            "options": {"seed": seed, "temperature": 0.8, "num_predict": 40},
            "messages": [{"role": "user", "content": user}]}),
        _ => json!({"model": model, "stream": false, "format": schema, "prompt": user,
            "options": {"seed": seed, "temperature": 0.8, "num_predict": 40}}),
    };
    if let Some(s) = sources {
        b["llamay_sources"] = s;
    }
    b
}

const ROUTES: [&str; 6] = [
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/responses",
    "/v1/messages",
    "/api/chat",
    "/api/generate",
];

#[test]
fn every_route_quotes_its_sources_and_refuses_a_missing_one() {
    let s = Server::start(&[]);
    let c = client();
    let user = "Quote the delivery clause: Clause 4 says the goods ship within 10 days.";
    for route in ROUTES {
        for seed in 0..3 {
            // A named source.
            let b = body(
                route,
                &s.model,
                quote_schema(json!("contract")),
                "Quote the fees clause.",
                Some(json!({"contract": CONTRACT})),
                seed,
            );
            let (st, v) = post(&c, &s.url(route), &b);
            assert_eq!(st, 200, "{route}: {v}");
            let q: Value = serde_json::from_str(&content(route, &v)).unwrap();
            let q = q["q"].as_str().unwrap();
            assert!(
                CONTRACT.contains(q),
                "{route}: {q:?} is not a span of the contract"
            );
            if route.starts_with("/v1") {
                let enforced = v["llamay"]["enforced"].as_array().unwrap();
                assert_eq!(
                    enforced,
                    &[json!("quote: enforced at properties.q")],
                    "{route}: {v}"
                );
            }
            // `true`: the request's own user text.
            let b = body(route, &s.model, quote_schema(json!(true)), user, None, seed);
            let (st, v) = post(&c, &s.url(route), &b);
            assert_eq!(st, 200, "{route}: {v}");
            let q: Value = serde_json::from_str(&content(route, &v)).unwrap();
            let q = q["q"].as_str().unwrap();
            assert!(
                user.contains(q),
                "{route}: {q:?} is not a span of the user text"
            );
        }
        // A name the request did not send: a 400 naming the keyword, in the API's shape.
        let b = body(
            route,
            &s.model,
            quote_schema(json!("contract")),
            "x",
            Some(json!({"invoice": "y"})),
            0,
        );
        let (st, v) = post(&c, &s.url(route), &b);
        assert_eq!(st, 400, "{route}: {v}");
        let text = v.to_string();
        assert!(
            text.contains("x-llamay-quote")
                && text.contains("contract")
                && text.contains("properties.q"),
            "{route}: {v}"
        );
        // llamay_sources that is not an object of texts.
        let b = body(
            route,
            &s.model,
            quote_schema(json!(true)),
            "x",
            Some(json!({"a": 1})),
            0,
        );
        let (st, v) = post(&c, &s.url(route), &b);
        assert_eq!(st, 400, "{route}: {v}");
        let text = v.to_string();
        assert!(
            text.contains(
                r#"llamay_sources must be an object of source names to texts, e.g. {\"contract\": \"...\"}"#
            ),
            "{route}: {v}"
        );
    }
}
