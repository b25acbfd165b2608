//! One sequence's per-step decoding logic: mask, sample, commit to the constraint,
//! watch for stop conditions, release text. It owns no model state, so the
//! single-sequence loop (`generate`) and the server's batching scheduler drive the
//! same code; they differ only in how they obtain the logits.

use llamay_constrain::{Constraint, Matcher, MatcherStats, TokenMask};
use llamay_engine::sampler::{Sampler, StopConditions, StopReason};
use llamay_engine::tokenizer::Tokenizer;

use super::{forced, Finish, GenerateError, GenerationParams, Utf8Assembler};

/// What to do after one decoding step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Feed these tokens (the sampled one, then any fast-forwarded) to the model and
    /// call [`Decoder::step`] with the logits after the last.
    Continue(Vec<u32>),
    /// Generation is over.
    Done(Finish),
}

/// The decoding state of one sequence.
pub struct Decoder {
    sampler: Sampler,
    stop: StopConditions,
    matcher: Option<Matcher>,
    mask: TokenMask,
    text: Utf8Assembler,
    history: Vec<u32>,
    tokens: Vec<u32>,
    forced: usize,
    fast_forwarded: usize,
    fast_forward: bool,
    /// Time spent looking for forced bytes (constraint work, reported as mask time).
    fast_forward_time: std::time::Duration,
    /// Tokens that may still be sampled (the limit, bounded by context room).
    remaining: usize,
    /// Index of the stop string that ended generation.
    stop_index: Option<usize>,
}

/// What a finished [`Decoder`] leaves behind.
pub struct Decoded {
    pub text: Vec<u8>,
    /// Generated token ids, EOG excluded.
    pub tokens: Vec<u32>,
    /// Tokens taken without sampling because the constraint allowed only one.
    pub forced: usize,
    /// Of those, the ones found as forced bytes and fed in one forward pass.
    pub fast_forwarded: usize,
    pub mask: Option<MatcherStats>,
    /// Index (in the request's list) of the stop string that matched.
    pub stop_index: Option<usize>,
}

impl Decoder {
    /// A decoder for a sequence whose prompt is `prompt`, in a context of `n_ctx`
    /// positions, over a vocabulary of `n_vocab` tokens.
    pub fn new(
        tokenizer: &Tokenizer,
        n_vocab: usize,
        n_ctx: usize,
        prompt: &[u32],
        params: &GenerationParams,
        constraint: Option<&Constraint>,
    ) -> Decoder {
        Decoder {
            sampler: Sampler::new(params.sampler.clone()),
            stop: StopConditions::new(tokenizer.eog_ids().iter().copied().collect(), &params.stop),
            matcher: constraint.map(Constraint::matcher),
            mask: TokenMask::new(n_vocab),
            text: Utf8Assembler::default(),
            history: prompt.to_vec(),
            tokens: Vec::new(),
            forced: 0,
            fast_forwarded: 0,
            fast_forward: params.fast_forward,
            fast_forward_time: std::time::Duration::ZERO,
            remaining: params.max_tokens.min(n_ctx.saturating_sub(prompt.len())),
            stop_index: None,
        }
    }

    /// Chooses the next token from `logits` (the distribution after the last token
    /// fed). Text that became final goes to `on_text`.
    pub fn step(
        &mut self,
        tokenizer: &Tokenizer,
        logits: &[f32],
        on_text: &mut dyn FnMut(&str),
    ) -> Result<Step, GenerateError> {
        if self.remaining == 0 {
            return Ok(Step::Done(Finish::Length));
        }
        if let Some(m) = self.matcher.as_mut() {
            if m.is_finished() {
                return Ok(Step::Done(Finish::Grammar));
            }
            m.mask(&mut self.mask);
        }
        let constrained = self.matcher.is_some();
        let token = match constrained.then(|| single_allowed(&self.mask)) {
            // One legal token: no need to sample (counted as forced).
            Some(Some(t)) => {
                self.forced += 1;
                t
            }
            _ => self
                .sampler
                .sample(
                    logits,
                    &self.history,
                    constrained.then(|| self.mask.words()),
                )
                .ok_or(GenerateError::DeadEnd)?,
        };
        self.remaining -= 1;
        let mut feed = vec![token];
        if let Some(m) = self.matcher.as_mut() {
            m.commit(token)?;
            if self.fast_forward {
                // The output's tail is all the tokenizer check looks at.
                let mut so_far = self.tokens[self.tokens.len().saturating_sub(8)..].to_vec();
                so_far.push(token);
                let t = std::time::Instant::now();
                let run = forced::fast_forward(tokenizer, m, &so_far, self.remaining);
                self.fast_forward_time += t.elapsed();
                self.forced += run.len();
                self.fast_forwarded += run.len();
                self.remaining -= run.len();
                feed.extend(run);
            }
        }
        for &t in &feed {
            self.history.push(t);
            let out = self.stop.push(t, tokenizer.token_bytes(t));
            emit(&mut self.text, &out.emit, on_text);
            match out.stop {
                Some(StopReason::Eog(_)) => return Ok(Step::Done(Finish::Eog)),
                Some(StopReason::String(i)) => {
                    self.stop_index = Some(i);
                    self.tokens.push(t);
                    return Ok(Step::Done(Finish::Stop));
                }
                None => self.tokens.push(t),
            }
        }
        if self.matcher.as_mut().is_some_and(Matcher::is_finished) {
            return Ok(Step::Done(Finish::Grammar));
        }
        if self.remaining == 0 {
            return Ok(Step::Done(Finish::Length));
        }
        Ok(Step::Continue(feed))
    }

    /// Ends decoding: releases held-back text (unless a stop string matched) and
    /// returns the result.
    pub fn finish(mut self, finish: Finish, on_text: &mut dyn FnMut(&str)) -> Decoded {
        if finish != Finish::Stop {
            let rest = self.stop.flush();
            emit(&mut self.text, &rest, on_text);
        }
        if let Some(rest) = self.text.finish() {
            on_text(&rest);
        }
        Decoded {
            text: self.text.into_bytes(),
            tokens: self.tokens,
            forced: self.forced,
            fast_forwarded: self.fast_forwarded,
            // Looking for forced bytes is constraint work too: it counts as mask time.
            mask: self.matcher.as_ref().map(|m| {
                let mut s = m.stats();
                s.mask_time += self.fast_forward_time;
                s
            }),
            stop_index: self.stop_index,
        }
    }

    /// Tokens generated so far.
    pub fn generated(&self) -> usize {
        self.tokens.len()
    }
}

fn emit(text: &mut Utf8Assembler, bytes: &[u8], on_text: &mut dyn FnMut(&str)) {
    if let Some(s) = text.push(bytes) {
        on_text(&s);
    }
}

/// The only allowed token, if exactly one is.
fn single_allowed(mask: &TokenMask) -> Option<u32> {
    let mut it = mask.allowed();
    let first = it.next()?;
    it.next().is_none().then_some(first)
}
