//! Speculative decoding never changes the output: `generate` with drafts (prompt
//! lookup, up to 8 a pass) gives the text, tokens and ending it gives without them,
//! greedy and sampled (same seed), free and under a schema or a grammar, on the three
//! real test models; and the drafts are taken often enough to matter.
//!
//! CI runs 4 prompts × 3 constraints × 2 samplers per model (72 pairs);
//! `LLAMAY_SPEC_PROMPTS=N` adds N seeded prompts (lists to repeat, sequences to go on,
//! records to extract) and `LLAMAY_SPEC_ROUNDS=N` gives the sampled runs N seeds each:
//! `LLAMAY_SPEC_PROMPTS=48` checks 504 greedy and 504 sampled requests.
//!
//! The batching scheduler (`llamay serve`) drafts the same way: its outputs, one
//! request at a time and eight together, are those of a scheduler that never drafts,
//! and the counts reach the outcome and `/v1/stats`.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use llamay_constrain::Constraint;
use llamay_engine::SamplerConfig;
use llamay_runtime::{generate, ChatMessage, DraftModel, GenerationParams, LoadedModel};
use llamay_runtime::{GenEvent, Job, Outcome, Scheduler, SchedulerConfig, Stats};
use llamay_testdata::{RealModel, XorShift};

mod common;

const PROMPTS: [&str; 8] = [
    "Repeat this list twice: apple, banana, cherry, date, elderberry, fig, grape.",
    "Copy the sentence exactly: The quick brown fox jumps over the lazy dog near the river bank.",
    "Write the numbers from 1 to 30 separated by commas.",
    "Write a Python function that adds two numbers, then the same function again with type hints.",
    "Extract the name and city as JSON: Maria Lopez lives in Valencia and works as a nurse.",
    "Say hello.",
    "List three colours, then list them again in reverse order.",
    "Invoice 2291 from Acme Tools: 3 hammers at 12.50, 2 saws at 30.00. Total 97.50. Give the invoice number and total.",
];

const WORDS: [&str; 16] = [
    "apple", "river", "stone", "cloud", "maple", "tiger", "lemon", "piano", "ocean", "candle",
    "forest", "silver", "rocket", "garden", "winter", "copper",
];

/// `n` more prompts, seeded: lists to repeat, sequences to go on, records to extract.
fn more_prompts(n: usize) -> Vec<String> {
    let mut r = XorShift::new(49);
    (0..n)
        .map(|i| {
            let words: Vec<&str> = (0..4 + r.below(8)).map(|_| *r.pick(&WORDS)).collect();
            match i % 3 {
                0 => format!("Repeat exactly, twice: {}.", words.join(", ")),
                1 => {
                    let (a, d) = (r.below(50), 1 + r.below(9));
                    let seq: Vec<String> = (0..6).map(|k| (a + k * d).to_string()).collect();
                    format!("Continue the sequence: {}, ...", seq.join(", "))
                }
                _ => format!(
                    "Extract the name and items as JSON: {} bought {}.",
                    words[0],
                    words[1..].join(" and ")
                ),
            }
        })
        .collect()
}

fn params(draft: usize, sampler: SamplerConfig) -> GenerationParams {
    GenerationParams {
        max_tokens: 32,
        sampler,
        draft,
        ..GenerationParams::default()
    }
}

/// A record of a name and a few items, the schema every constrained run here uses.
fn record_schema(lm: &LoadedModel) -> Constraint {
    let schema = serde_json::json!({"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 24}, "items": {"type": "array",
        "items": {"type": "string", "maxLength": 12}, "maxItems": 6}},
        "required": ["name", "items"]});
    let (g, _) = llamay_constrain::schema_grammar(&schema).unwrap();
    Constraint::from_grammar(&g, lm.vocab.clone()).unwrap()
}

/// Drafted and taken tokens over `lm`'s runs, after checking every pair equal.
fn check(lm: &LoadedModel, name: &str, prompts: &[String], rounds: u64) -> (usize, usize) {
    let schema = record_schema(lm);
    let list = lm
        .constraints
        .gbnf("root ::= item (\", \" item){0,9}\nitem ::= [a-z]{1,10}")
        .unwrap();
    let constraints: [Option<&Constraint>; 3] = [None, Some(&schema), Some(&list)];
    let (mut drafted, mut taken) = (0, 0);
    for (p, text) in prompts.iter().enumerate() {
        let prompt = lm
            .encode_chat(&[ChatMessage::new("user", text)], None)
            .unwrap();
        for (c, constraint) in constraints.iter().enumerate() {
            let mut samplers = vec![SamplerConfig::greedy()];
            samplers.extend((0..rounds).map(|r| SamplerConfig {
                temperature: 0.9,
                seed: 1000 * r + 10 * p as u64 + c as u64,
                ..SamplerConfig::default()
            }));
            for sampler in samplers {
                let run = |draft| {
                    let mut streamed = String::new();
                    let g = generate(
                        &lm.model,
                        &lm.tokenizer,
                        &prompt,
                        &params(draft, sampler.clone()),
                        *constraint,
                        &AtomicBool::new(false),
                        &mut |s| streamed.push_str(s),
                    )
                    .unwrap();
                    (g, streamed)
                };
                let (plain, plain_streamed) = run(0);
                let (spec, spec_streamed) = run(8);
                let what = format!("{name} prompt {p} constraint {c} seed {}", sampler.seed);
                assert_eq!(spec.tokens, plain.tokens, "{what}");
                assert_eq!(spec.text, plain.text, "{what}");
                assert_eq!(spec.finish, plain.finish, "{what}");
                assert_eq!(spec_streamed, plain_streamed, "{what}");
                assert_eq!(plain.stats.drafted_tokens, 0);
                drafted += spec.stats.drafted_tokens;
                taken += spec.stats.accepted_tokens;
            }
        }
    }
    (drafted, taken)
}

#[test]
fn drafts_never_change_the_output() {
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse().ok());
    let rounds = env("LLAMAY_SPEC_ROUNDS").unwrap_or(1);
    let extra = env("LLAMAY_SPEC_PROMPTS").unwrap_or(0) as usize;
    // CI takes every other prompt (a list, numbers, a record, an invoice: each kind of
    // span the lookup drafts from); asking for more prompts takes all eight first.
    let step = if extra == 0 { 2 } else { 1 };
    let mut prompts: Vec<String> = PROMPTS
        .iter()
        .step_by(step)
        .map(|p| p.to_string())
        .collect();
    prompts.extend(more_prompts(extra));
    for which in [RealModel::SmolLM2, RealModel::Qwen25, RealModel::Gemma3] {
        let lm = common::load(which, 1024, Some(2));
        let (drafted, taken) = check(&lm, &format!("{which:?}"), &prompts, rounds);
        eprintln!("{which:?}: {drafted} tokens drafted, {taken} taken");
        // The lookup finds spans to copy in these prompts: some drafts are taken.
        assert!(
            taken * 10 >= drafted.max(1),
            "{which:?}: {taken} of {drafted}"
        );
    }
}

/// A job's text and outcome.
fn wait(mut rx: tokio::sync::mpsc::UnboundedReceiver<GenEvent>) -> (String, Box<Outcome>) {
    let mut text = String::new();
    loop {
        match rx.blocking_recv().expect("the engine hung up") {
            GenEvent::Text(t) => text.push_str(&t),
            GenEvent::Reasoning(_) | GenEvent::CallStart { .. } | GenEvent::CallArgs { .. } => {}
            GenEvent::Done(o) => return (text, o),
            GenEvent::Error(e) => panic!("{}", e.message),
        }
    }
}

#[test]
fn the_scheduler_drafts_without_changing_the_output() {
    let lm = Arc::new(common::load(RealModel::SmolLM2, 1024, Some(2)));
    let schema = record_schema(&lm);
    let stats = Arc::new(Stats::default());
    let start = |max_draft| {
        let cfg = SchedulerConfig {
            max_draft,
            ..SchedulerConfig::default()
        };
        Scheduler::start("test", lm.clone(), cfg, stats.clone())
    };
    let (drafting, plain) = (start(8), start(0));
    let mut jobs = Vec::new();
    for (p, text) in PROMPTS.iter().enumerate() {
        let prompt = lm
            .encode_chat(&[ChatMessage::new("user", text)], None)
            .unwrap();
        for constraint in [None, Some(schema.clone())] {
            let seeded = SamplerConfig {
                temperature: 0.9,
                seed: 7 + p as u64,
                ..SamplerConfig::default()
            };
            for sampler in [SamplerConfig::greedy(), seeded] {
                jobs.push((prompt.clone(), constraint.clone(), sampler));
            }
        }
    }
    let submit =
        |s: &Scheduler,
         (prompt, constraint, sampler): &(Vec<u32>, Option<Constraint>, SamplerConfig)| {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            let job = Job {
                constraint: constraint.clone(),
                ..Job::new(prompt.clone(), params(8, sampler.clone()), tx)
            };
            s.submit(job).unwrap();
            rx
        };
    let (mut drafted, mut taken) = (0, 0);
    let mut expected = Vec::new();
    for (i, j) in jobs.iter().enumerate() {
        let (want, base) = wait(submit(&plain, j));
        let (got, o) = wait(submit(&drafting, j));
        assert_eq!(got, want, "job {i}");
        assert_eq!(o.finish, base.finish, "job {i}");
        assert_eq!(o.completion_tokens, base.completion_tokens, "job {i}");
        assert_eq!(base.drafted_tokens, 0, "job {i}");
        drafted += o.drafted_tokens;
        taken += o.accepted_tokens;
        expected.push(want);
    }
    eprintln!("one at a time: {drafted} tokens drafted, {taken} taken");
    assert!(taken > 0 && taken * 10 >= drafted, "{taken} of {drafted}");
    // Eight at a time: the step's drafts are shared out, and joins stop them.
    for (k, chunk) in jobs.chunks(8).enumerate() {
        let rxs: Vec<_> = chunk.iter().map(|j| submit(&drafting, j)).collect();
        for (i, rx) in rxs.into_iter().enumerate() {
            let (got, o) = wait(rx);
            assert_eq!(got, expected[8 * k + i], "job {} together", 8 * k + i);
            drafted += o.drafted_tokens;
            taken += o.accepted_tokens;
        }
    }
    let v = stats.to_json();
    assert_eq!(v["speculation"]["drafted_tokens"], drafted as u64);
    assert_eq!(v["speculation"]["accepted_tokens"], taken as u64);
}

#[test]
fn a_model_drafting_for_itself_is_always_right() {
    for which in [RealModel::SmolLM2, RealModel::Gemma3] {
        let lm = common::load(which, 1024, Some(2));
        let itself = DraftModel(lm.model.clone());
        let json = lm
            .constraints
            .gbnf(r#"root ::= "{\"a\": " [0-9]{1,4} "}""#)
            .unwrap();
        let (mut drafted, mut taken) = (0, 0);
        for (p, text) in PROMPTS.iter().enumerate() {
            let prompt = lm
                .encode_chat(&[ChatMessage::new("user", text)], None)
                .unwrap();
            for constraint in [None, Some(&json)] {
                let run = |draft, draft_model: Option<DraftModel>| {
                    let params = GenerationParams {
                        draft_model,
                        ..params(draft, SamplerConfig::greedy())
                    };
                    let cancel = AtomicBool::new(false);
                    generate(
                        &lm.model,
                        &lm.tokenizer,
                        &prompt,
                        &params,
                        constraint,
                        &cancel,
                        &mut |_| {},
                    )
                    .unwrap()
                };
                let (plain, spec) = (run(0, None), run(8, Some(itself.clone())));
                let what = format!("{which:?} prompt {p} constrained {}", constraint.is_some());
                assert_eq!(spec.tokens, plain.tokens, "{what}");
                assert_eq!(spec.finish, plain.finish, "{what}");
                if constraint.is_none() {
                    // Greedy and unconstrained: the draft is the target's own choice.
                    assert_eq!(
                        spec.stats.accepted_tokens, spec.stats.drafted_tokens,
                        "{what}"
                    );
                    drafted += spec.stats.drafted_tokens;
                    taken += spec.stats.accepted_tokens;
                }
            }
        }
        eprintln!("{which:?} drafting for itself: {drafted} drafted, {taken} taken");
        assert!(drafted > 100, "{which:?}: {drafted}");
    }
}
