//! Hugging Face chat templates (Qwen3's and Llama 3.1's own `tokenizer_config.json`,
//! Gemma 4's inside llama.cpp's vocabulary file) render, with tools and with thinking
//! on and off, exactly the text Python's jinja2 renders when set up as transformers
//! sets it up (`scripts/jinja-reference` wrote the references).

use llamay_runtime::{ChatMessage, ChatTemplate, RenderOptions};
use llamay_testdata::{hf_tokenizer_config, llamacpp_vocab, repo_root};
use serde_json::Value;

fn messages(v: &Value) -> Vec<ChatMessage> {
    serde_json::from_value::<Vec<Value>>(v.clone())
        .unwrap()
        .into_iter()
        .map(|m| {
            let mut msg = ChatMessage::new(
                m["role"].as_str().unwrap(),
                m["content"].as_str().unwrap_or(""),
            );
            msg.tool_call_id = m["tool_call_id"].as_str().map(str::to_string);
            msg.name = m["name"].as_str().map(str::to_string);
            if let Some(calls) = m["tool_calls"].as_array() {
                msg.tool_calls = calls
                    .iter()
                    .map(|c| llamay_runtime::ToolCallMessage {
                        id: c["id"].as_str().unwrap().to_string(),
                        kind: "function".into(),
                        function: llamay_runtime::ToolCallFunction {
                            name: c["function"]["name"].as_str().unwrap().to_string(),
                            arguments: c["function"]["arguments"].clone(),
                        },
                    })
                    .collect();
            }
            msg
        })
        .collect()
}

/// A tokenizer config's template.
fn hf_template(name: &str) -> String {
    let config: Value =
        serde_json::from_str(&std::fs::read_to_string(hf_tokenizer_config(name)).unwrap()).unwrap();
    config["chat_template"].as_str().unwrap().to_string()
}

/// The template inside llama.cpp's vocabulary file `vocab`.
fn gguf_template(vocab: &str) -> String {
    let f = llamay_engine::GgufFile::open(llamacpp_vocab(vocab)).unwrap();
    f.get_str("tokenizer.chat_template").unwrap().to_string()
}

fn check(name: &str, source: &str) {
    let reference: Value = serde_json::from_str(
        &std::fs::read_to_string(
            repo_root().join(format!("crates/testdata/ref/jinja/{name}.json")),
        )
        .unwrap(),
    )
    .unwrap();
    let t = ChatTemplate::new(source).unwrap();
    let cases = reference["cases"].as_array().unwrap();
    assert!(cases.len() >= 4);
    let mut failures = Vec::new();
    for case in cases {
        let tools = case["tools"].is_array().then_some(&case["tools"]);
        let kwargs = case["kwargs"].as_object().filter(|k| !k.is_empty());
        let got = t
            .render(
                &messages(&case["messages"]),
                &RenderOptions {
                    add_generation_prompt: true,
                    bos_token: reference["bos_token"].as_str().unwrap(),
                    eos_token: reference["eos_token"].as_str().unwrap(),
                    tools,
                    kwargs,
                },
            )
            .unwrap_or_else(|e| panic!("{name}/{}: {e}", case["name"]));
        let want = case["rendered"].as_str().unwrap();
        if got != want {
            failures.push(format!(
                "{name}/{}:\n--- want\n{want}\n--- got\n{got}",
                case["name"]
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn qwen3_renders_as_transformers_renders_it() {
    check("qwen3", &hf_template("qwen3"));
}

#[test]
fn llama3_1_renders_as_transformers_renders_it() {
    check("llama3_1", &hf_template("llama3_1"));
}

#[test]
fn gemma4_renders_as_transformers_renders_it() {
    check("gemma-4", &gguf_template("gemma-4"));
}
