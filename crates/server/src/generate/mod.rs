//! The generation loop: prompt → forward passes → (mask) → sample → text.
//!
//! Written once and shared by `llamay run` and `llamay serve`. It is where the engine
//! and the constraint meet: the constraint's matcher fills a plain token bitset, and
//! the engine's sampler only ever sees that bitset.

mod forced;
mod stats;
mod utf8;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use llamay_constrain::{Constraint, Matcher, TokenMask};
use llamay_engine::batch::{BatchItem, LogitsWanted};
use llamay_engine::model::{Model, ModelError};
use llamay_engine::sampler::{Sampler, SamplerConfig, StopConditions, StopReason};
use llamay_engine::tokenizer::Tokenizer;

pub use stats::{format_duration, GenerationStats};
pub use utf8::Utf8Assembler;

/// Why generation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finish {
    /// The model wrote an end-of-generation token.
    Eog,
    /// The token limit was reached.
    Length,
    /// The constraint accepted and allows nothing more.
    Grammar,
    /// A stop string was written.
    Stop,
    /// The caller cancelled (Ctrl-C, a client that went away).
    Cancelled,
}

impl Finish {
    /// The word the `run` statistics line uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Finish::Eog => "eog",
            Finish::Length => "length",
            Finish::Grammar => "grammar",
            Finish::Stop => "stop",
            Finish::Cancelled => "cancelled",
        }
    }
}

/// What to generate.
#[derive(Clone, Debug)]
pub struct GenerationParams {
    pub max_tokens: usize,
    pub sampler: SamplerConfig,
    pub stop: Vec<String>,
    /// Feed the constraint's forced continuations without sampling, several tokens
    /// per forward pass, where the tokenizer makes that safe (see `forced.rs`).
    pub fast_forward: bool,
}

impl Default for GenerationParams {
    fn default() -> Self {
        GenerationParams {
            max_tokens: 256,
            sampler: SamplerConfig::default(),
            stop: Vec::new(),
            fast_forward: true,
        }
    }
}

/// A finished generation.
#[derive(Clone, Debug)]
pub struct Generation {
    /// The output text (never ends inside a UTF-8 character unless the model wrote
    /// invalid bytes).
    pub text: Vec<u8>,
    /// The generated token ids, EOG excluded.
    pub tokens: Vec<u32>,
    pub finish: Finish,
    pub stats: GenerationStats,
}

#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    #[error("the prompt has {prompt} tokens, but the context holds {ctx}")]
    PromptTooLong { prompt: usize, ctx: usize },
    #[error("the prompt is empty")]
    EmptyPrompt,
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(
        "the constraint allows no token here (this is a bug in llamay: please report the grammar)"
    )]
    DeadEnd,
    #[error("the constraint refused a token it had allowed: {0}")]
    Constraint(#[from] llamay_constrain::Error),
}

/// Runs one generation on one sequence. `on_text` receives the output as it becomes
/// final (whole UTF-8 characters, stop strings held back until they are ruled out).
pub fn generate(
    model: &Model,
    tokenizer: &Tokenizer,
    prompt: &[u32],
    params: &GenerationParams,
    constraint: Option<&Constraint>,
    cancel: &AtomicBool,
    on_text: &mut dyn FnMut(&str),
) -> Result<Generation, GenerateError> {
    if prompt.is_empty() {
        return Err(GenerateError::EmptyPrompt);
    }
    if prompt.len() >= model.n_ctx() {
        return Err(GenerateError::PromptTooLong {
            prompt: prompt.len(),
            ctx: model.n_ctx(),
        });
    }
    let mut seq = model.new_sequence();
    let t0 = Instant::now();
    let mut logits = step(model, &mut seq, prompt)?;
    let prompt_time = t0.elapsed();

    let mut sampler = Sampler::new(params.sampler.clone());
    let mut stop = StopConditions::new(tokenizer.eog_ids().iter().copied().collect(), &params.stop);
    let mut matcher: Option<Matcher> = constraint.map(Constraint::matcher);
    let mut mask = TokenMask::new(model.n_vocab());
    let mut text = Utf8Assembler::default();
    let mut history: Vec<u32> = prompt.to_vec();
    let mut out_tokens = Vec::new();
    let mut forced = 0usize;
    let mut finish = Finish::Length;
    let decode_start = Instant::now();

    let limit = params.max_tokens.min(model.n_ctx() - prompt.len());
    let mut fast_forwarded = 0usize;
    let mut fast_forward_time = std::time::Duration::ZERO;
    'decode: while out_tokens.len() < limit {
        if cancel.load(Ordering::Relaxed) {
            finish = Finish::Cancelled;
            break;
        }
        if let Some(m) = matcher.as_mut() {
            if m.is_finished() {
                finish = Finish::Grammar;
                break;
            }
            m.mask(&mut mask);
        }
        let allowed = matcher.as_ref().map(|_| mask.words());
        let token = match allowed.map(|_| single_allowed(&mask)) {
            // One legal token: no need to sample (counted as forced).
            Some(Some(t)) => {
                forced += 1;
                t
            }
            _ => sampler
                .sample(&logits, &history, allowed)
                .ok_or(GenerateError::DeadEnd)?,
        };
        if let Some(m) = matcher.as_mut() {
            m.commit(token)?;
        }
        let mut feed = vec![token];
        if let (Some(m), true) = (matcher.as_mut(), params.fast_forward) {
            // The output's tail is all the tokenizer check looks at.
            let mut so_far = out_tokens[out_tokens.len().saturating_sub(8)..].to_vec();
            so_far.push(token);
            let left = limit - out_tokens.len() - 1;
            let t = Instant::now();
            let run = forced::fast_forward(tokenizer, m, &so_far, left);
            fast_forward_time += t.elapsed();
            forced += run.len();
            fast_forwarded += run.len();
            feed.extend(run);
        }
        for &t in &feed {
            history.push(t);
            let step_out = stop.push(t, tokenizer.token_bytes(t));
            on_text_bytes(&mut text, &step_out.emit, on_text);
            match step_out.stop {
                Some(StopReason::Eog(_)) => {
                    finish = Finish::Eog;
                    break 'decode;
                }
                Some(StopReason::String(_)) => {
                    out_tokens.push(t);
                    finish = Finish::Stop;
                    break 'decode;
                }
                None => out_tokens.push(t),
            }
        }
        if matcher.as_mut().is_some_and(Matcher::is_finished) {
            finish = Finish::Grammar;
            break;
        }
        if out_tokens.len() < limit {
            logits = step(model, &mut seq, &feed)?;
        }
    }
    if finish != Finish::Stop {
        on_text_bytes(&mut text, &stop.flush(), on_text);
    }
    if let Some(rest) = text.finish() {
        on_text(&rest);
    }
    let stats = GenerationStats {
        prompt_tokens: prompt.len(),
        prompt_time,
        generated_tokens: out_tokens.len(),
        decode_time: decode_start.elapsed(),
        forced_tokens: forced,
        fast_forwarded_tokens: fast_forwarded,
        // Looking for forced bytes is constraint work too: it counts as mask time.
        mask: matcher.as_ref().map(|m| {
            let mut s = m.stats();
            s.mask_time += fast_forward_time;
            s
        }),
    };
    Ok(Generation {
        text: text.into_bytes(),
        tokens: out_tokens,
        finish,
        stats,
    })
}

fn on_text_bytes(text: &mut Utf8Assembler, bytes: &[u8], on_text: &mut dyn FnMut(&str)) {
    if let Some(s) = text.push(bytes) {
        on_text(&s);
    }
}

/// Feeds tokens and returns the next-token logits.
fn step(
    model: &Model,
    seq: &mut llamay_engine::kv_cache::SeqState,
    tokens: &[u32],
) -> Result<Vec<f32>, GenerateError> {
    let mut batch = [BatchItem {
        seq,
        tokens,
        want_logits: LogitsWanted::Last,
    }];
    let out = model.forward(&mut batch)?;
    Ok(out
        .into_iter()
        .next()
        .and_then(|l| l.last().map(<[f32]>::to_vec))
        .unwrap_or_default())
}

/// The only allowed token, if exactly one is.
fn single_allowed(mask: &TokenMask) -> Option<u32> {
    let mut it = mask.allowed();
    let first = it.next()?;
    it.next().is_none().then_some(first)
}
