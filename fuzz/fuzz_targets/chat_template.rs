//! Chat templates on arbitrary template text: compile, then render a fixed
//! conversation (system, user, an assistant tool call, a tool result) with tools.
//! Must not panic. A template may legitimately take long (loops): run with
//! `-timeout=`, see docs/fuzzing.md.
#![no_main]

use libfuzzer_sys::fuzz_target;
use llamay_runtime::chat::{
    ChatMessage, ChatTemplate, RenderOptions, ToolCallFunction, ToolCallMessage,
};
use std::sync::OnceLock;

fn conversation() -> &'static (Vec<ChatMessage>, serde_json::Value) {
    static C: OnceLock<(Vec<ChatMessage>, serde_json::Value)> = OnceLock::new();
    C.get_or_init(|| {
        let call = ChatMessage {
            role: "assistant".into(),
            content: None,
            tool_calls: vec![ToolCallMessage {
                id: "call_1".into(),
                kind: "function".into(),
                function: ToolCallFunction {
                    name: "weather".into(),
                    arguments: serde_json::json!({"city": "Paris"}),
                },
            }],
            ..ChatMessage::default()
        };
        let result = ChatMessage {
            role: "tool".into(),
            content: Some("{\"c\": 21}".into()),
            tool_call_id: Some("call_1".into()),
            name: Some("weather".into()),
            ..ChatMessage::default()
        };
        let messages = vec![
            ChatMessage::new("system", "Be brief."),
            ChatMessage::new("user", "Weather in Paris? ü 😀"),
            call,
            result,
            ChatMessage::new("assistant", "21 °C."),
            ChatMessage::new("user", "Thanks"),
        ];
        let tools = serde_json::json!([{"type": "function", "function": {
            "name": "weather", "description": "Current weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]);
        (messages, tools)
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(source) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(t) = ChatTemplate::new(source) else {
        return;
    };
    let (messages, tools) = conversation();
    for with_tools in [false, true] {
        let opts = RenderOptions {
            add_generation_prompt: true,
            bos_token: "<s>",
            eos_token: "</s>",
            tools: with_tools.then_some(tools),
            kwargs: None,
        };
        let _ = t.render(messages, &opts);
    }
});
