//! Ollama template layers (Go `text/template`) on arbitrary text: parse, then render
//! the shared conversation with and without tools, with a system layer and without.
//! Must not panic, and must end: the renderer's fuel bounds every loop.
#![no_main]

use libfuzzer_sys::fuzz_target;
use llamay_fuzz::conversation;
use llamay_runtime::OllamaTemplate;

fuzz_target!(|data: &[u8]| {
    let Ok(source) = std::str::from_utf8(data) else {
        return;
    };
    let (messages, tools) = conversation();
    for system in [None, Some("You are terse.")] {
        let Ok(t) = OllamaTemplate::new(source, system) else {
            return;
        };
        let _ = t.render(messages, None);
        let _ = t.render(messages, Some(tools));
        let _ = t.render(&messages[1..2], None);
    }
});
