//! Chat templates render exactly the prompts llama.cpp's reference was made from.

use llamay_runtime::{Builtin, ChatMessage, ChatTemplate, RenderOptions};
use llamay_testdata::{ref_path, RealModel};

fn reference_prompt(model: RealModel, name: &str) -> String {
    let path = ref_path(&format!("logits/{}.json", model.stem()));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    v["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap()["prompt"]
        .as_str()
        .unwrap()
        .to_string()
}

fn smollm2_template() -> String {
    let path = ref_path(&format!("tokenize/{}.json", RealModel::SmolLM2.stem()));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    v["vocab"]["chat_template"].as_str().unwrap().to_string()
}

const QUESTION: &str = "What is the tallest mountain in the world?";

#[test]
fn smollm2_own_template_renders_the_reference_prompt() {
    let t = ChatTemplate::new(&smollm2_template()).unwrap();
    let text = t
        .render(
            &[ChatMessage::new("user", QUESTION)],
            &RenderOptions {
                add_generation_prompt: true,
                ..RenderOptions::default()
            },
        )
        .unwrap();
    assert_eq!(text, reference_prompt(RealModel::SmolLM2, "chat_chatml"));
}

#[test]
fn builtin_gemma_renders_the_reference_prompt() {
    let t = ChatTemplate::new(Builtin::Gemma.source()).unwrap();
    let opts = RenderOptions {
        add_generation_prompt: true,
        bos_token: "",
        ..RenderOptions::default()
    };
    let text = t
        .render(&[ChatMessage::new("user", QUESTION)], &opts)
        .unwrap();
    assert_eq!(text, reference_prompt(RealModel::Gemma3, "chat_gemma"));
    // A system message folds into the first user turn; assistant turns are "model".
    let text = t
        .render(
            &[
                ChatMessage::new("system", "Be brief."),
                ChatMessage::new("user", "Hi"),
                ChatMessage::new("assistant", "Hello."),
            ],
            &RenderOptions {
                bos_token: "<bos>",
                ..opts
            },
        )
        .unwrap();
    assert_eq!(
        text,
        "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n<start_of_turn>model\n"
    );
}

#[test]
fn builtin_chatml_and_llama3() {
    let msgs = [
        ChatMessage::new("system", "S"),
        ChatMessage::new("user", "U"),
    ];
    let opts = RenderOptions {
        add_generation_prompt: true,
        bos_token: "<|begin_of_text|>",
        ..RenderOptions::default()
    };
    let chatml = ChatTemplate::new(Builtin::ChatMl.source()).unwrap();
    assert_eq!(
        chatml.render(&msgs, &opts).unwrap(),
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
    );
    let llama3 = ChatTemplate::new(Builtin::Llama3.source()).unwrap();
    assert_eq!(
        llama3.render(&msgs, &opts).unwrap(),
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|>\
         <|start_header_id|>user<|end_header_id|>\n\nU<|eot_id|>\
         <|start_header_id|>assistant<|end_header_id|>\n\n"
    );
}

#[test]
fn builtin_is_detected_from_the_vocabulary() {
    assert_eq!(
        Builtin::detect(|t| t == "<start_of_turn>" || t == "<end_of_turn>"),
        Builtin::Gemma
    );
    assert_eq!(
        Builtin::detect(|t| t == "<|start_header_id|>" || t == "<|eot_id|>"),
        Builtin::Llama3
    );
    assert_eq!(Builtin::detect(|_| false), Builtin::ChatMl);
}

#[test]
fn python_methods_and_helpers_work_and_errors_are_reported() {
    let t = ChatTemplate::new(
        "{{ messages[0]['content'].strip().upper() }}{% if messages[0]['content'].startswith(' x') %}!{% endif %}{{ strftime_now('%Y') | length }}",
    )
    .unwrap();
    assert_eq!(
        t.render(
            &[ChatMessage::new("user", " x y ")],
            &RenderOptions::default()
        )
        .unwrap(),
        "X Y!4"
    );
    let t = ChatTemplate::new("{{ raise_exception('roles must alternate') }}").unwrap();
    let e = t.render(&[], &RenderOptions::default()).unwrap_err();
    assert!(e.to_string().contains("roles must alternate"), "{e}");
    assert!(ChatTemplate::new("{% for %}").is_err());
}

#[test]
fn tools_reach_the_template() {
    let t =
        ChatTemplate::new("{% for tool in tools %}{{ tool.function.name }};{% endfor %}").unwrap();
    let tools = serde_json::json!([{"type": "function", "function": {"name": "get_weather"}}]);
    let out = t
        .render(
            &[],
            &RenderOptions {
                tools: Some(&tools),
                ..RenderOptions::default()
            },
        )
        .unwrap();
    assert_eq!(out, "get_weather;");
}
