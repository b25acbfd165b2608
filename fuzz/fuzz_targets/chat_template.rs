//! Chat templates on arbitrary template text: compile, then render a fixed
//! conversation (system, user, an assistant tool call, a tool result) with tools.
//! Must not panic. A template may legitimately take long (loops): run with
//! `-timeout=`, see docs/fuzzing.md.
#![no_main]

use libfuzzer_sys::fuzz_target;
use llamay_fuzz::conversation;
use llamay_runtime::{ChatTemplate, RenderOptions};

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
