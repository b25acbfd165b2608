//! The shared per-step decoder, checked two ways on the real SmolLM2 model:
//! `generate` (which `llamay run` uses) gives exactly what the loop it replaced gave,
//! and the batching scheduler gives each request exactly what `generate` gives it
//! alone.

use std::collections::HashSet;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use llamay_constrain::{Constraint, Matcher, TokenMask};
use llamay_engine::{
    BatchItem, LogitsWanted, Model, Sampler, SamplerConfig, StopConditions, StopReason, Tokenizer,
};
use llamay_runtime::ChatMessage;
use llamay_runtime::{
    generate, Finish, GenEvent, GenerationParams, Job, LoadedModel, Scheduler, SchedulerConfig,
    Stats,
};
use llamay_testdata::RealModel;

mod common;

fn load() -> LoadedModel {
    common::load(RealModel::SmolLM2, 512, None)
}

fn step(model: &Model, seq: &mut llamay_engine::SeqState, tokens: &[u32]) -> Vec<f32> {
    let mut batch = [BatchItem {
        seq,
        tokens,
        want_logits: LogitsWanted::Last,
    }];
    model.forward(&mut batch).unwrap()[0]
        .last()
        .unwrap()
        .to_vec()
}

/// The generation loop as it was before the decoder was factored out (kept here
/// as the reference the refactor must match).
fn reference(
    model: &Model,
    tok: &Tokenizer,
    prompt: &[u32],
    params: &GenerationParams,
    constraint: Option<&Constraint>,
) -> (Vec<u8>, Vec<u32>, Finish) {
    let mut seq = model.new_sequence();
    let mut logits = step(model, &mut seq, prompt);
    let mut sampler = Sampler::new(params.sampler.clone());
    let mut stop = StopConditions::new(
        tok.eog_ids().iter().copied().collect::<HashSet<_>>(),
        &params.stop,
    );
    let mut matcher: Option<Matcher> = constraint.map(Constraint::matcher);
    let mut mask = TokenMask::new(model.n_vocab());
    let mut text = Vec::new();
    let mut history = prompt.to_vec();
    let mut out = Vec::new();
    let mut finish = Finish::Length;
    for _ in 0..params.max_tokens.min(model.n_ctx() - prompt.len()) {
        if let Some(m) = matcher.as_mut() {
            if m.is_finished() {
                finish = Finish::Grammar;
                break;
            }
            m.mask(&mut mask);
        }
        let single = matcher.as_ref().and_then(|_| {
            let mut it = mask.allowed();
            let f = it.next()?;
            it.next().is_none().then_some(f)
        });
        let token = match single {
            Some(t) => t,
            None => sampler
                .sample(&logits, &history, matcher.as_ref().map(|_| mask.words()))
                .unwrap(),
        };
        if let Some(m) = matcher.as_mut() {
            m.commit(token).unwrap();
        }
        history.push(token);
        let s = stop.push(token, tok.token_bytes(token));
        text.extend_from_slice(&s.emit);
        match s.stop {
            Some(StopReason::Eog(_)) => {
                finish = Finish::Eog;
                break;
            }
            Some(StopReason::String(_)) => {
                out.push(token);
                finish = Finish::Stop;
                break;
            }
            None => out.push(token),
        }
        if matcher.as_mut().is_some_and(Matcher::is_finished) {
            finish = Finish::Grammar;
            break;
        }
        logits = step(model, &mut seq, &[token]);
    }
    if finish != Finish::Stop {
        text.extend_from_slice(&stop.flush());
    }
    (text, out, finish)
}

fn params(max: usize, sampler: SamplerConfig, stop: &[&str]) -> GenerationParams {
    GenerationParams {
        max_tokens: max,
        sampler,
        stop: stop.iter().map(|s| s.to_string()).collect(),
        // The loop this is compared with sampled every token.
        fast_forward: false,
        draft: 0,
        draft_model: None,
    }
}

#[test]
fn generate_matches_the_loop_it_replaced() {
    let lm = load();
    let chat = |t: &str| {
        lm.encode_chat(&[ChatMessage::new("user", t)], None)
            .unwrap()
    };
    let json = lm.constraints.any_json().unwrap();
    // Every sentence of this grammar fits the budget with room to spare, so the
    // budget-aware closing (which the old loop lacked) cannot engage whatever the model
    // samples; any JSON could run on to the limit (a seeded sample did, once the
    // engine's arithmetic changed).
    let record = lm
        .constraints
        .gbnf(r#"root ::= "{\"name\": \"" [a-z ]{1,12} "\", \"port\": " [0-9]{1,5} "}""#)
        .unwrap();
    let seeded = SamplerConfig {
        seed: 42,
        ..SamplerConfig::default()
    };
    let greedy = SamplerConfig::greedy;
    let cases: Vec<(Vec<u32>, GenerationParams, Option<&Constraint>)> = vec![
        (chat("Say hello."), params(30, greedy(), &[]), None),
        (chat("Write a poem."), params(40, seeded.clone(), &[]), None),
        // Room for the whole document: the old loop had no closing near the limit.
        (
            chat("Give me a JSON object with keys name and port."),
            params(150, seeded.clone(), &[]),
            Some(&record),
        ),
        (
            chat("Give me a JSON object with keys name and port."),
            params(60, greedy(), &[]),
            Some(&json),
        ),
        (
            chat("Write two sentences about cats."),
            params(60, greedy(), &["."]),
            None,
        ),
        (lm.encode_raw("1, 2, 3,"), params(5, greedy(), &[]), None),
    ];
    let mut finishes = HashSet::new();
    for (prompt, p, c) in cases {
        let (text, tokens, finish) = reference(&lm.model, &lm.tokenizer, &prompt, &p, c);
        let mut streamed = String::new();
        let g = generate(
            &lm.model,
            &lm.tokenizer,
            &prompt,
            &p,
            c,
            &AtomicBool::new(false),
            &mut |s| streamed.push_str(s),
        )
        .unwrap();
        assert_eq!(g.text, text);
        assert_eq!(g.tokens, tokens);
        assert_eq!(g.finish, finish);
        assert_eq!(streamed.as_bytes(), &text[..]);
        finishes.insert(finish.as_str());
    }
    // The cases reach several endings, not only the token limit.
    assert!(finishes.len() >= 2, "{finishes:?}");
}

#[test]
fn the_scheduler_gives_each_request_what_generate_gives_it_alone() {
    let lm = Arc::new(load());
    let prompts = [
        "Say hello.",
        "Name three colours.",
        "What is the capital of France?",
        "Give me a JSON object with keys name and port.",
        "Write a haiku about the sea.",
        "Count to five.",
    ];
    let json = lm.constraints.any_json().unwrap();
    let jobs: Vec<(Vec<u32>, Option<Constraint>)> = prompts
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let ids = lm
                .encode_chat(&[ChatMessage::new("user", p)], None)
                .unwrap();
            (ids, (i == 3).then(|| json.clone()))
        })
        .collect();
    let p = params(24, SamplerConfig::greedy(), &[]);

    let t0 = Instant::now();
    let alone: Vec<String> = jobs
        .iter()
        .map(|(ids, c)| {
            let g = generate(
                &lm.model,
                &lm.tokenizer,
                ids,
                &p,
                c.as_ref(),
                &AtomicBool::new(false),
                &mut |_| {},
            )
            .unwrap();
            String::from_utf8(g.text).unwrap()
        })
        .collect();
    let sequential = t0.elapsed();

    let stats = Arc::new(Stats::default());
    let sched = Scheduler::start(
        "smollm2",
        lm.clone(),
        SchedulerConfig::default(),
        stats.clone(),
    );
    let t0 = Instant::now();
    let mut receivers = Vec::new();
    for (ids, c) in &jobs {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        sched
            .submit(Job {
                constraint: c.clone(),
                ..Job::new(ids.clone(), p.clone(), tx)
            })
            .unwrap();
        receivers.push(rx);
    }
    let mut together = Vec::new();
    for mut rx in receivers {
        let mut text = String::new();
        loop {
            match rx.blocking_recv().expect("the engine hung up") {
                GenEvent::Text(t) => text.push_str(&t),
                GenEvent::Reasoning(t) => panic!("no thinking was asked for: {t}"),
                GenEvent::Done(_) => break,
                GenEvent::CallStart { .. } | GenEvent::CallArgs { .. } => {
                    panic!("no tools were offered")
                }
                GenEvent::Error(e) => panic!("{}", e.message),
            }
        }
        together.push(text);
    }
    let batched = t0.elapsed();
    assert_eq!(together, alone);
    let steps = stats.steps.load(std::sync::atomic::Ordering::Relaxed);
    let seqs = stats
        .step_sequences
        .load(std::sync::atomic::Ordering::Relaxed);
    eprintln!(
        "6 requests: one at a time {sequential:?}, batched {batched:?} ({:.2}x), {steps} steps, {:.2} sequences per step",
        sequential.as_secs_f64() / batched.as_secs_f64(),
        seqs as f64 / steps as f64
    );
    // All six share each step (the timings depend on the machine's load and are
    // only printed).
    assert!(seqs as f64 / steps as f64 > 3.0);
    assert!(steps <= 30, "{steps} steps for 6 x 24 tokens");
}
