//! A token limit that cuts a character: the text stops before it, on every shape,
//! instead of ending in U+FFFD. (A limit below one is refused in-process:
//! crates/server/tests/http/refusals.rs.)

mod common;

use common::serve::{client, post, Server};
use llamay_engine::{GgufFile, Tokenizer};
use llamay_testdata::{real_model, RealModel};
use serde_json::json;

const LLAMAS: &str = "🦙🦙🦙🦙";

#[test]
fn a_token_limit_inside_an_emoji_ends_the_text_before_it() {
    // The precondition that makes this a test: some token boundary of the forced
    // text falls inside a character.
    let tok =
        Tokenizer::from_gguf(&GgufFile::open(real_model(RealModel::SmolLM2)).unwrap()).unwrap();
    let ids = tok.encode(LLAMAS.as_bytes(), false, false);
    let mut end = 0;
    let mut inside = false;
    for &id in &ids {
        end += tok.token_bytes(id).len();
        inside |= !LLAMAS.is_char_boundary(end);
    }
    assert!(inside, "no token of {ids:?} ends inside a character");

    let s = Server::start(&[]);
    let c = client();
    let grammar = format!("root ::= \"{LLAMAS}\"");
    let user = json!([{"role": "user", "content": "Llamas, please."}]);
    for n in 1..=ids.len() as i64 {
        let shapes = [
            (
                "/v1/chat/completions",
                json!({"model": s.model, "messages": user, "max_tokens": n, "llamay_grammar": grammar}),
            ),
            (
                "/v1/completions",
                json!({"model": s.model, "prompt": "x", "max_tokens": n, "llamay_grammar": grammar}),
            ),
            (
                "/v1/messages",
                json!({"model": s.model, "messages": user, "max_tokens": n, "llamay_grammar": grammar}),
            ),
            (
                "/api/generate",
                json!({"model": s.model, "prompt": "x", "stream": false, "options": {"num_predict": n}, "grammar": grammar}),
            ),
        ];
        for (path, body) in shapes {
            let (st, v) = post(&c, &s.url(path), &body);
            assert_eq!(st, 200, "{path}: {v}");
            let text = match path {
                "/v1/chat/completions" => v["choices"][0]["message"]["content"].as_str(),
                "/v1/completions" => v["choices"][0]["text"].as_str(),
                "/v1/messages" => v["content"][0]["text"].as_str().or(Some("")),
                _ => v["response"].as_str(),
            }
            .unwrap_or_else(|| panic!("{path}: {v}"));
            assert!(
                !text.contains('\u{FFFD}'),
                "{path} with {n} tokens: {text:?}"
            );
            assert!(LLAMAS.starts_with(text), "{path} with {n} tokens: {text:?}");
        }
        // Streams too: the pieces joined are a prefix of the text.
        let r = c
            .post(s.url("/v1/chat/completions"))
            .json(&json!({"model": s.model, "messages": user, "max_tokens": n, "stream": true, "llamay_grammar": grammar}))
            .send()
            .unwrap();
        let body = r.text().unwrap();
        let text: String = common::serve::openai_chunks(&body)
            .iter()
            .filter_map(|ch| {
                ch["choices"][0]["delta"]["content"]
                    .as_str()
                    .map(str::to_string)
            })
            .collect();
        assert!(
            !text.contains('\u{FFFD}') && LLAMAS.starts_with(&text),
            "stream with {n}: {text:?}"
        );
    }
}
