//! Speculative drafts in the server change speed, never output: on the three real test
//! models, each prompt under each kind of request (plain, `json_schema`, GBNF, a
//! forced tool call where the model's template takes tools (not Gemma 3's), an
//! `x-llamay-quote` schema) gives the same greedy answer with
//! drafts (the default) and with `llamay_speculate: false`, and the drafts show in
//! each answer's `llamay.speculation` and in `/v1/stats`.
//!
//! CI runs 4 prompts × 14 model-kind pairs (56 pairs); `LLAMAY_SPEC_PROMPTS=N` adds
//! the other 4 and N seeded prompts (`LLAMAY_SPEC_PROMPTS=30`: 532 pairs).

use serde_json::{json, Value};

use crate::common::{App, Setup};
use llamay_testdata::{real_model, RealModel, XorShift};

const PROMPTS: [&str; 8] = [
    "Repeat this list twice: apple, banana, cherry, date, elderberry, fig, grape.",
    "Copy the sentence exactly: The quick brown fox jumps over the lazy dog near the river bank.",
    "Write the numbers from 1 to 30 separated by commas.",
    "What is the weather like in Paris today? Use the tool.",
    "Extract the name and city as JSON: Maria Lopez lives in Valencia and works as a nurse.",
    "Say hello.",
    "Invoice 2291 from Acme Tools: 3 hammers at 12.50, 2 saws at 30.00. Total 97.50. Quote the total.",
    "List three colours, then list them again in reverse order.",
];

const WORDS: [&str; 12] = [
    "apple", "river", "stone", "cloud", "maple", "tiger", "lemon", "piano", "ocean", "candle",
    "Lisbon", "Oslo",
];

fn prompts() -> Vec<String> {
    let extra = std::env::var("LLAMAY_SPEC_PROMPTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut r = XorShift::new(4949);
    // CI's share: the first four (a list to repeat, a sentence to copy, numbers, a tool).
    let mut all: Vec<String> = PROMPTS[..4].iter().map(|p| p.to_string()).collect();
    all.extend(
        PROMPTS[4..]
            .iter()
            .filter(|_| extra > 0)
            .map(|p| p.to_string()),
    );
    all.extend((0..extra).map(|i| {
        let words: Vec<&str> = (0..3 + r.below(6)).map(|_| *r.pick(&WORDS)).collect();
        match i % 2 {
            0 => format!("Repeat exactly, twice: {}.", words.join(", ")),
            _ => format!(
                "{} wrote to {} about {}. Who wrote?",
                words[0],
                words[1],
                words[2..].join(" and ")
            ),
        }
    }));
    all
}

/// The request of `kind` for `prompt`, greedy.
fn request(kind: usize, prompt: &str) -> Value {
    let mut r = json!({"messages": [{"role": "user", "content": prompt}],
                       "max_tokens": 40, "temperature": 0});
    match kind {
        0 => {}
        1 => {
            r["response_format"] = json!({"type": "json_schema", "json_schema": {"name": "r",
                "schema": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                "items": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 5}},
                "required": ["name", "items"]}}});
        }
        2 => r["llamay_grammar"] = json!("root ::= item (\", \" item){0,7}\nitem ::= [a-z]{1,10}"),
        3 => {
            r["tools"] = json!([{"type": "function", "function": {"name": "get_weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}},
                "required": ["city"]}}}]);
            r["tool_choice"] = json!("required");
        }
        _ => {
            r["llamay_schema"] = json!({"type": "object", "properties": {"quote": {"type": "string",
                "maxLength": 40, "x-llamay-quote": true}}, "required": ["quote"]});
        }
    }
    r
}

/// What must not change: the text and the calls (names and arguments; ids are fresh).
fn answer(v: &Value) -> (Value, Vec<(Value, Value)>, Value) {
    let choice = &v["choices"][0];
    let calls = choice["message"]["tool_calls"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|c| {
                    (
                        c["function"]["name"].clone(),
                        c["function"]["arguments"].clone(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    (
        choice["message"]["content"].clone(),
        calls,
        choice["finish_reason"].clone(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drafts_never_change_an_answer() {
    let prompts = prompts();
    for which in [RealModel::SmolLM2, RealModel::Gemma3, RealModel::Qwen25] {
        let app = App::with(Setup {
            model: Some(real_model(which)),
            ..Setup::default()
        });
        let (mut drafted, mut taken, mut pairs) = (0u64, 0u64, 0);
        for (p, prompt) in prompts.iter().enumerate() {
            for kind in 0..5 {
                if kind == 3 && which == RealModel::Gemma3 {
                    continue; // its template has no tools
                }
                let mut off = request(kind, prompt);
                off["llamay_speculate"] = json!(false);
                let plain = app.post("/v1/chat/completions", off).await;
                let spec = app
                    .post("/v1/chat/completions", request(kind, prompt))
                    .await;
                let what = format!("{which:?} prompt {p} kind {kind}");
                assert_eq!(plain.status, 200, "{what}: {}", plain.text);
                assert_eq!(spec.status, 200, "{what}: {}", spec.text);
                let (plain, spec) = (plain.json(), spec.json());
                assert_eq!(answer(&spec), answer(&plain), "{what}");
                assert_eq!(
                    plain["llamay"]["speculation"]["drafted_tokens"], 0,
                    "{what}"
                );
                let s = &spec["llamay"]["speculation"];
                drafted += s["drafted_tokens"].as_u64().unwrap();
                taken += s["accepted_tokens"].as_u64().unwrap();
                pairs += 1;
            }
        }
        eprintln!("{which:?}: {pairs} pairs equal; {drafted} tokens drafted, {taken} taken");
        assert!(taken > 0, "{which:?}: no draft was taken");
        let stats = app.get("/v1/stats").await.json();
        assert_eq!(stats["speculation"]["drafted_tokens"], drafted, "{which:?}");
        assert_eq!(stats["speculation"]["accepted_tokens"], taken, "{which:?}");
    }
}

/// `serve -draft`: the model drafting for itself (the self-draft check) has every
/// draft of a greedy free answer taken, and answers as without drafts, free or
/// constrained; a draft model of other tokens is refused at load, naming them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_model_drafting_for_itself_is_always_right() {
    let model = real_model(RealModel::SmolLM2);
    let app = App::with(Setup {
        model: Some(model.clone()),
        draft: Some(model.clone()),
        ..Setup::default()
    });
    let (mut drafted, mut taken) = (0, 0);
    for prompt in &PROMPTS[..3] {
        for kind in [0, 1, 2] {
            let mut off = request(kind, prompt);
            off["llamay_speculate"] = json!(false);
            let plain = app.post("/v1/chat/completions", off).await.json();
            let spec = app
                .post("/v1/chat/completions", request(kind, prompt))
                .await
                .json();
            assert_eq!(answer(&spec), answer(&plain), "{prompt:?} kind {kind}");
            let s = &spec["llamay"]["speculation"];
            let (d, t) = (
                s["drafted_tokens"].as_u64().unwrap(),
                s["accepted_tokens"].as_u64().unwrap(),
            );
            if kind == 0 {
                assert_eq!(
                    d, t,
                    "{prompt:?}: a model drafting for itself is always right"
                );
                assert!(d >= 10, "{prompt:?}: {d} drafted of 40 tokens");
            }
            drafted += d;
            taken += t;
        }
    }
    eprintln!("self-draft: {taken} of {drafted} drafts taken");

    let other = App::with(Setup {
        model: Some(model),
        draft: Some(llamay_testdata::ref_path("tiny/tiny-llama-Q4_0.gguf")),
        ..Setup::default()
    });
    let r = other.post("/v1/chat/completions", request(0, "hi")).await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(r.text.contains("another vocabulary"), "{}", r.text);
}
