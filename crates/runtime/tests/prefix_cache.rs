//! The prefix cache and named contexts change speed, never text: on the real
//! SmolLM2 and Gemma 3 models (Gemma 3 past its 512-position sliding window), greedy
//! outputs with cached prefixes, context continuations and forks are exactly those
//! of the same requests on a scheduler that caches nothing; and a pool bound smaller
//! than the prefixes served keeps the KV bytes within it. The tiny hybrid (Qwen 3.5)
//! files resume from recurrent-state checkpoints the same way.

use std::sync::Arc;
use std::time::Instant;

use llamay_engine::{SamplerConfig, KV_BLOCK_TOKENS};
use llamay_runtime::{
    GenEvent, GenerationParams, Job, LoadedModel, Scheduler, SchedulerConfig, Stats,
};
use llamay_runtime::{Prefix, CHECKPOINT_TOKENS};
use llamay_testdata::RealModel;

mod common;

/// 2,048 positions: Gemma 3's prompts here go past its 512-position sliding window.
fn load(which: RealModel) -> Arc<LoadedModel> {
    Arc::new(common::load(which, 2048, Some(2)))
}

fn scheduler(lm: &Arc<LoadedModel>, kv_cache_bytes: Option<usize>) -> Scheduler {
    Scheduler::start(
        "test",
        lm.clone(),
        SchedulerConfig {
            kv_cache_bytes,
            ..SchedulerConfig::default()
        },
        Arc::new(Stats::default()),
    )
}

fn greedy(max_tokens: usize) -> GenerationParams {
    GenerationParams {
        max_tokens,
        sampler: SamplerConfig::greedy(),
        stop: Vec::new(),
        fast_forward: false,
        draft: 0,
        draft_model: None,
    }
}

fn job(
    prompt: Vec<u32>,
    max_tokens: usize,
    context: Option<Prefix>,
) -> (Job, tokio::sync::mpsc::UnboundedReceiver<GenEvent>) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let job = Job {
        context,
        ..Job::new(prompt, greedy(max_tokens), tx)
    };
    (job, rx)
}

/// The text and the cached prompt tokens of a finished generation.
fn wait(mut rx: tokio::sync::mpsc::UnboundedReceiver<GenEvent>) -> (String, usize) {
    let mut text = String::new();
    loop {
        match rx.blocking_recv().expect("the engine hung up") {
            GenEvent::Text(t) => text.push_str(&t),
            GenEvent::Reasoning(_) | GenEvent::CallStart { .. } | GenEvent::CallArgs { .. } => {}
            GenEvent::Done(o) => return (text, o.cached_tokens),
            GenEvent::Error(e) => panic!("{}", e.message),
        }
    }
}

/// The model's live KV bytes once the engine thread has settled (it drops a
/// finished sequence and evicts just after sending the outcome).
fn settled_live(lm: &LoadedModel, ok: impl Fn(usize) -> bool) -> usize {
    let t0 = Instant::now();
    loop {
        let live = lm.model.kv_bytes_live();
        if ok(live) || t0.elapsed().as_secs() >= 5 {
            return live;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Runs the prompts one after the other (each sees the cache the ones before left).
fn run_each(s: &Scheduler, prompts: &[Vec<u32>], n: usize) -> Vec<(String, usize)> {
    prompts
        .iter()
        .map(|p| {
            let (j, rx) = job(p.clone(), n, None);
            s.submit(j).unwrap();
            wait(rx)
        })
        .collect()
}

/// Runs the prompts all at once.
fn run_together(
    s: &Scheduler,
    jobs: Vec<(Vec<u32>, Option<Prefix>)>,
    n: usize,
) -> Vec<(String, usize)> {
    let rxs: Vec<_> = jobs
        .into_iter()
        .map(|(p, c)| {
            let (j, rx) = job(p, n, c);
            s.submit(j).unwrap();
            rx
        })
        .collect();
    rxs.into_iter().map(wait).collect()
}

/// A long shared prefix (`words` words of a made-up report) and questions after it.
fn prompts(lm: &LoadedModel, words: usize) -> (Vec<u32>, Vec<Vec<u32>>) {
    let body: String = (0..words)
        .map(|i| {
            [
                "the", "river", "station", "recorded", "a", "level", "of", "metres",
            ][i % 8]
        })
        .enumerate()
        .map(|(i, w)| {
            if i % 13 == 12 {
                format!("{w} {i}.")
            } else {
                w.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" ");
    let prefix = lm.encode_raw(&format!("Report:\n{body}\n"));
    let questions = [
        "Question: what was recorded?",
        "Question: which station?",
        "Question: how many metres?",
    ];
    let full = questions
        .iter()
        .map(|q| {
            [
                prefix.clone(),
                lm.encode_raw(q)[1.min(prefix.len())..].to_vec(),
            ]
            .concat()
        })
        .collect();
    (prefix, full)
}

fn same_text_with_and_without_the_cache(which: RealModel, words: usize, min_prefix: usize) {
    cache_keeps_text(load(which), words, min_prefix);
}

fn cache_keeps_text(lm: Arc<LoadedModel>, words: usize, min_prefix: usize) {
    let (prefix, full) = prompts(&lm, words);
    assert!(prefix.len() >= min_prefix, "{} tokens", prefix.len());
    let n = 12;
    // Bound 0: every block is evicted as soon as no sequence holds it.
    let uncached = scheduler(&lm, Some(0));
    let want: Vec<String> = run_each(&uncached, &full, n)
        .into_iter()
        .map(|(t, c)| {
            assert_eq!(c, 0, "nothing is cached under a bound of 0");
            t
        })
        .collect();
    assert!(want.iter().all(|t| !t.is_empty()));
    assert_eq!(
        settled_live(&lm, |b| b == 0),
        0,
        "no block outlives its sequence"
    );

    let cached = scheduler(&lm, None);
    let first = run_each(&cached, &full, n);
    let again = run_each(&cached, &full, n);
    for (i, ((t1, c1), (t2, c2))) in first.iter().zip(&again).enumerate() {
        assert_eq!(t1, &want[i], "prompt {i}, first pass");
        assert_eq!(t2, &want[i], "prompt {i}, second pass");
        // The later prompts share the whole prefix, its partly filled last block
        // included; a second pass finds all of the prompt but the token fed for the
        // logits (the prompt and the reply were filed, partial blocks too).
        if i > 0 {
            assert!(
                *c1 >= prefix.len(),
                "prompt {i}: {c1} cached of {}",
                prefix.len()
            );
        }
        assert_eq!(*c2, full[i].len() - 1, "prompt {i}");
    }
    // All at once, with the cache warm: the same texts.
    let together = run_together(&cached, full.iter().map(|p| (p.clone(), None)).collect(), n);
    let texts: Vec<String> = together.into_iter().map(|t| t.0).collect();
    assert_eq!(texts, want);
}

#[test]
fn smollm2_cached_prefixes_change_speed_not_text() {
    same_text_with_and_without_the_cache(RealModel::SmolLM2, 400, 530);
}

/// Gemma 3's sliding layers attend to the last 512 positions only: a prefix past
/// the window, shared block by block, must still give the uncached text.
#[test]
fn gemma3_cached_prefixes_past_the_window_change_speed_not_text() {
    same_text_with_and_without_the_cache(RealModel::Gemma3, 450, 560);
}

/// Mixture-of-experts models keep no state beyond their KV: cached prefixes (past
/// gpt-oss's 8-position window on the tiny file), contexts and forks keep the text.
#[test]
fn expert_models_cached_prefixes_and_contexts_change_speed_not_text() {
    for name in ["qwen3moe-Q8_0", "gpt-oss-Q8_0"] {
        let path = llamay_testdata::moe_model(name);
        let lm = Arc::new(common::load_path(&path, 2048, Some(2)));
        cache_keeps_text(lm.clone(), 150, 200);
        continuations_match_fresh_runs(&lm, name, 160);
    }
}

/// A context prefilled once (a prefill-only job), then continued by several
/// requests at once through its blocks (each copies at most the shared, partly
/// filled last block): the texts of the same prompts computed from scratch.
#[test]
fn context_continuations_and_forks_match_fresh_runs() {
    for which in [RealModel::Gemma3, RealModel::SmolLM2] {
        continuations_match_fresh_runs(&load(which), &format!("{which:?}"), 420);
    }
}

fn continuations_match_fresh_runs(lm: &Arc<LoadedModel>, which: &str, words: usize) {
    {
        let (prefix, full) = prompts(lm, words);
        assert!(
            prefix.len() % KV_BLOCK_TOKENS != 0,
            "the last block is shared partly filled"
        );
        let n = 8;
        let uncached = scheduler(lm, Some(0));
        let want: Vec<String> = run_each(&uncached, &full, n)
            .into_iter()
            .map(|t| t.0)
            .collect();
        drop(uncached);

        let s = scheduler(lm, None);
        let (mut j, _rx) = job(prefix.clone(), 1, None);
        let (tx, rx) = tokio::sync::oneshot::channel();
        j.keep = Some(tx);
        s.submit(j).unwrap();
        let ctx = rx.blocking_recv().expect("the prefill's blocks");
        assert_eq!(&*ctx.tokens, &prefix[..]);
        assert_eq!(ctx.blocks.len(), prefix.len().div_ceil(KV_BLOCK_TOKENS));
        let one_context = settled_live(lm, |_| true);
        // Six continuations at once (the questions, twice), all through the context.
        let jobs: Vec<_> = (0..6)
            .map(|i| (full[i % full.len()].clone(), Some(ctx.clone())))
            .collect();
        let got = run_together(&s, jobs, n);
        for (i, (text, cached)) in got.iter().enumerate() {
            assert_eq!(text, &want[i % full.len()], "{which} continuation {i}");
            assert_eq!(*cached, prefix.len(), "{which} continuation {i}");
        }
        // The context's blocks are shared, not copied: what is live beyond them is
        // the continuations' own blocks, now cached (at most their questions and
        // replies, plus the copied last block each).
        let per_continuation = (full[0].len() - prefix.len() + n).div_ceil(KV_BLOCK_TOKENS) + 2;
        let extra = settled_live(lm, |b| {
            b <= one_context + 6 * per_continuation * lm.model.kv_block_bytes()
        }) - one_context;
        assert!(
            extra <= 6 * per_continuation * lm.model.kv_block_bytes(),
            "{which}: {extra} bytes beyond the context's {one_context}"
        );
    }
}

/// A tiny hybrid file (`scripts/make-hybrid-models`), with room for a ~1,500-token
/// prefix.
fn load_hybrid(name: &str) -> Arc<LoadedModel> {
    let path = llamay_testdata::hybrid_model(name);
    Arc::new(common::load_path(&path, 2048, Some(2)))
}

/// Qwen 3.5's linear layers (and LFM2's short convs) keep a recurrent state that cannot be cut back: a request
/// sharing a ~1,500-token prefix with an earlier one starts from the deepest
/// checkpoint that one left (its prompt was fed in pieces ending every
/// `CHECKPOINT_TOKENS`) and computes only the rest, with the text of a scheduler that
/// caches nothing.
#[test]
fn hybrid_models_resume_shared_prefixes_from_checkpoints() {
    for name in ["qwen35-F32", "qwen35moe-Q8_0", "lfm2-F32"] {
        let lm = load_hybrid(name);
        let (prefix, full) = prompts(&lm, 450);
        assert!((1500..1800).contains(&prefix.len()), "{}", prefix.len());
        let n = 12;
        let uncached = scheduler(&lm, Some(0));
        let want: Vec<String> = run_each(&uncached, &full, n)
            .into_iter()
            .map(|(t, c)| {
                assert_eq!(c, 0, "{name}: nothing is cached under a bound of 0");
                t
            })
            .collect();
        drop(uncached);
        let s = scheduler(&lm, None);
        let got = run_each(&s, &full, n);
        for (i, (text, cached)) in got.iter().enumerate() {
            assert_eq!(text, &want[i], "{name}: prompt {i}");
            // The deepest checkpoint an earlier prompt left within what they share
            // (at least one token is fed, for the logits).
            let deepest = (0..i)
                .map(|j| {
                    let common = full[i].iter().zip(&full[j]).take_while(|(a, b)| a == b);
                    common.count().min(full[i].len() - 1) / CHECKPOINT_TOKENS * CHECKPOINT_TOKENS
                })
                .max()
                .unwrap_or(0);
            assert_eq!(*cached, deepest, "{name}: prompt {i}");
            if i > 0 {
                let computed = full[i].len() - cached;
                assert!(
                    computed <= full[i].len() - prefix.len() + CHECKPOINT_TOKENS,
                    "{name}: prompt {i} computed {computed} of {} tokens",
                    full[i].len()
                );
            }
        }
        // The same prompts again: the same texts, from their own checkpoints.
        for (i, (text, cached)) in run_each(&s, &full, n).iter().enumerate() {
            assert_eq!(text, &want[i], "{name}: prompt {i} again");
            assert!(*cached >= (full[i].len() - 1) / CHECKPOINT_TOKENS * CHECKPOINT_TOKENS);
        }
        assert!(s.kv_cache().checkpoints() > 0);
    }
}

/// More distinct prefixes than the pool holds: each request's text is still the
/// uncached one, and once idle the model's KV bytes are within the bound (a hybrid
/// model's checkpoints counted with its blocks).
#[test]
fn a_small_pool_evicts_and_stays_within_its_bound() {
    small_pool_evicts(load(RealModel::SmolLM2), "SmolLM2");
    small_pool_evicts(load_hybrid("qwen35-F32"), "qwen35");
}

fn small_pool_evicts(lm: Arc<LoadedModel>, which: &str) {
    let block = lm.model.kv_block_bytes();
    let bound = 12 * block;
    let s = scheduler(&lm, Some(bound));
    let uncached = scheduler(&lm, Some(0));
    for round in 0..1 {
        for i in 0..5 {
            let p = lm.encode_raw(&format!(
                "Document {i}: {}\nSummary:",
                "numbers and letters and words ".repeat(20 + i)
            ));
            let (got, _) = run_each(&s, std::slice::from_ref(&p), 8).remove(0);
            let (want, _) = run_each(&uncached, std::slice::from_ref(&p), 8).remove(0);
            assert_eq!(got, want, "{which}: round {round}, document {i}");
            let live = settled_live(&lm, |b| b <= bound);
            assert!(
                live <= bound,
                "{which}: {live} live bytes past the bound of {bound}"
            );
        }
    }
    let (cached, free) = s.kv_cache().blocks();
    assert!(
        cached > 0 && cached <= 12 && free == cached,
        "{which}: {cached} cached, {free} free"
    );
}

#[test]
fn running_sequences_wait_for_room_in_a_small_pool() {
    wait_for_room(load(RealModel::SmolLM2), "SmolLM2");
    wait_for_room(load_hybrid("qwen35-F32"), "qwen35");
}

fn wait_for_room(lm: Arc<LoadedModel>, which: &str) {
    let block = lm.model.kv_block_bytes();
    let prompts: Vec<Vec<u32>> = (0..4)
        .map(|i| {
            lm.encode_raw(&format!(
                "Report {i}: {}\nSummary:",
                "apples pears plums figs ".repeat(24 + i)
            ))
        })
        .collect();
    let reply = 16;
    // Room for two and a half of the largest job (its blocks, and a hybrid model's
    // state and checkpoints): some must wait for others to finish.
    let largest = prompts.iter().map(|p| p.len()).max().unwrap_or(0);
    let job = (largest + reply).div_ceil(KV_BLOCK_TOKENS) * block + 3 * lm.model.recurrent_bytes();
    let bound = job * 5 / 2;
    let needed: usize = prompts
        .iter()
        .map(|p| (p.len() + reply).div_ceil(KV_BLOCK_TOKENS))
        .sum();
    assert!(
        needed * block > bound,
        "{which}: the four jobs ({needed} blocks) would fit anyway"
    );
    let uncached = scheduler(&lm, Some(0));
    let want = run_each(&uncached, &prompts, reply);
    drop(uncached);
    settled_live(&lm, |b| b == 0);

    let s = scheduler(&lm, Some(bound));
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watch = {
        let (lm, done) = (lm.clone(), done.clone());
        std::thread::spawn(move || {
            let mut peak = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(lm.model.kv_bytes_live());
                std::thread::yield_now();
            }
            peak
        })
    };
    let got = run_together(&s, prompts.into_iter().map(|p| (p, None)).collect(), reply);
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let peak = watch.join().unwrap();
    let texts = |v: &[(String, usize)]| v.iter().map(|(t, _)| t.clone()).collect::<Vec<_>>();
    assert_eq!(texts(&got), texts(&want), "{which}");
    assert!(
        peak <= bound,
        "{which}: {peak} live bytes while running, past the bound of {bound}"
    );
}

/// `llamay run -prompt-cache` with a hybrid model: the file carries the recurrent
/// state after its tokens, so a prompt that extends all of them resumes there (the
/// next logits are the bits of the same passes run without the file), and a prompt
/// that leaves the cached tokens earlier starts afresh (the state holds nowhere else).
#[test]
fn hybrid_prompt_cache_files_resume_past_all_their_tokens_only() {
    use llamay_engine::{BatchItem, LogitsWanted, SeqState};
    use llamay_runtime::snapshot;
    let lm = load_hybrid("qwen35-F32");
    let model = &lm.model;
    let (prefix, full) = prompts(&lm, 60);
    let feed = |seq: &mut SeqState, tokens: &[u32]| -> Vec<f32> {
        let mut batch = [BatchItem {
            seq,
            tokens,
            want_logits: LogitsWanted::Last,
        }];
        model.forward(&mut batch).unwrap().remove(0).data
    };
    let mut seq = model.new_sequence();
    feed(&mut seq, &prefix);
    let file = snapshot::of_sequence(model, "sha256:test", &seq, &prefix);
    let want = feed(&mut seq, &full[0][prefix.len()..]);

    let mut resumed = snapshot::resume(model, "sha256:test", &file, &full[0]).unwrap();
    assert_eq!(resumed.len(), prefix.len());
    assert_eq!(feed(&mut resumed, &full[0][prefix.len()..]), want);

    let mut early = prefix[..prefix.len() - 5].to_vec();
    early.push(prefix[prefix.len() - 1]);
    let fresh = snapshot::resume(model, "sha256:test", &file, &early).unwrap();
    assert_eq!(
        fresh.len(),
        0,
        "the state is after all of the file's tokens only"
    );
    // Another model's file is refused by name.
    let other = snapshot::resume(model, "sha256:other", &file, &full[0]).unwrap_err();
    assert!(other.contains("model file"), "{other}");
}
