//! One sequence's per-step decoding logic: mask, sample, commit to the constraint,
//! watch for stop conditions, release text. It owns no model state, so the
//! single-sequence loop (`generate`) and the server's batching scheduler drive the
//! same code; they differ only in how they obtain the logits.
//!
//! Budget-aware closing: a constrained sequence keeps the constraint's distance to
//! acceptance (the fewest bytes that complete the output) within the tokens it has left.
//! Counting one token per byte is conservative (a token is at least one byte, and the
//! closing mask's tokens each shorten the distance by their full length), so while the
//! distance fits the budget the output can always be finished, and it is: a sampled token
//! after which the distance would no longer fit is refused and the sampler asked again
//! (sampling from the mask minus the refused tokens); when the distance takes the whole
//! budget, or after a few refusals, the step samples from the closing mask (only tokens on
//! a shortest completion). The model keeps its freedom until the budget is tight, and an
//! output that could be finished within `max_tokens` is.

use llamay_constrain::{Constraint, Matcher, MatcherStats, TokenMask};
use llamay_engine::Tokenizer;
use llamay_engine::{Sampler, StopConditions, StopReason};

use super::calls::{absorb, CallTriggers, CallWatch, Watched};
use super::harmony::{HarmonyPlan, HarmonyState, Phase};
use super::thinking::ThinkState;
use super::{forced, Finish, GenerateError, GenerationParams, Utf8Assembler};
use crate::reasoning::ThinkPlan;

/// Sampled tokens refused for overrunning the budget before a step falls back to the
/// closing mask (each refusal costs a sampling pass over the logits).
const MAX_BUDGET_REFUSALS: usize = 8;

mod channels;

/// What to do after one decoding step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Feed these tokens (the sampled one, then any fast-forwarded) to the model and
    /// call [`Decoder::step`] with the logits after the last.
    Continue(Vec<u32>),
    /// Generation is over.
    Done(Finish),
}

/// The decoding state of one sequence.
pub(crate) struct Decoder {
    sampler: Sampler,
    stop: StopConditions,
    matcher: Option<Matcher>,
    mask: TokenMask,
    text: Utf8Assembler,
    history: Vec<u32>,
    tokens: Vec<u32>,
    /// The tokens the last step wrote, the one that ended generation included (an
    /// end-of-generation token is not among `tokens`): what drafts are matched to.
    written: Vec<u32>,
    forced: usize,
    fast_forwarded: usize,
    fast_forward: bool,
    /// Time spent looking for forced bytes (constraint work, reported as mask time).
    fast_forward_time: std::time::Duration,
    /// Tokens that may still be sampled (the limit, bounded by context room).
    remaining: usize,
    /// Index of the stop string that ended generation.
    stop_index: Option<usize>,
    /// A reasoning model's thinking block, before the answer.
    thinking: Option<ThinkState>,
    /// Strict `auto` tool calls: openers watched for in free text.
    calls: Option<CallWatch>,
    /// A harmony model's channels (its thinking, answer and calls).
    harmony: Option<HarmonyState>,
    /// Free tokens refused for completing an opener the call could not continue.
    refused: Vec<u64>,
}

/// What a finished [`Decoder`] leaves behind.
pub(crate) struct Decoded {
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
    /// The thinking text (markers excluded) and its tokens (markers included).
    pub reasoning: String,
    pub reasoning_tokens: usize,
    /// Under strict `auto`: the tool calls the model opened.
    pub calls_opened: Option<usize>,
}

impl Decoder {
    /// A decoder for a sequence whose prompt is `prompt`, in a context of `n_ctx`
    /// positions, over a vocabulary of `n_vocab` tokens.
    pub(crate) fn new(
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
            written: Vec::new(),
            forced: 0,
            fast_forwarded: 0,
            fast_forward: params.fast_forward,
            fast_forward_time: std::time::Duration::ZERO,
            remaining: params.max_tokens.min(n_ctx.saturating_sub(prompt.len())),
            stop_index: None,
            thinking: None,
            calls: None,
            harmony: None,
            refused: Vec::new(),
        }
    }

    /// Watches the answer for tool calls opened in free text (strict `auto`): each is
    /// held to its constraint from its opener until it closes.
    pub(crate) fn with_call_triggers(mut self, triggers: Option<CallTriggers>) -> Decoder {
        self.calls = triggers.map(CallWatch::new);
        self
    }

    /// Runs the generation as a reasoning model's: thinking first, then the answer
    /// under the constraint, with the closing marker kept out of it.
    pub(crate) fn with_thinking(mut self, plan: Option<ThinkPlan>) -> Decoder {
        let n_vocab = self.mask.len();
        self.thinking = plan.map(|p| ThinkState::new(p, n_vocab));
        self
    }

    /// Runs the generation in harmony's channels: the request's constraint holds the
    /// `final` message only.
    pub(crate) fn with_harmony(mut self, plan: Option<HarmonyPlan>) -> Decoder {
        self.harmony = plan.map(HarmonyState::new);
        self
    }

    /// Thinking text decoded since the last call.
    pub(crate) fn take_reasoning(&mut self) -> Option<String> {
        match self.harmony.as_mut() {
            Some(h) => h.take(),
            None => self.thinking.as_mut().and_then(ThinkState::take),
        }
    }

    /// One token of the thinking block: forced markers, else free (no control token).
    fn think_step(&mut self, tokenizer: &Tokenizer, logits: &[f32]) -> Result<Step, GenerateError> {
        let Some(th) = self.thinking.as_mut() else {
            return Ok(Step::Done(Finish::Length));
        };
        // The answer keeps room for its shortest completion (bytes: at least tokens).
        let room = self
            .matcher
            .as_mut()
            .and_then(Matcher::min_bytes_to_accept)
            .unwrap_or(1);
        let token = match th.forced(self.remaining, room) {
            Some(t) => t,
            None => self
                .sampler
                .sample(logits, &self.history, Some(th.free_mask()))
                .ok_or_else(|| nothing_sampled(logits))?,
        };
        self.remaining -= 1;
        self.history.push(token);
        if tokenizer.is_eog(token) {
            return Ok(Step::Done(Finish::Eog));
        }
        self.tokens.push(token);
        th.push(token, tokenizer.token_bytes(token));
        if self.remaining == 0 {
            return Ok(Step::Done(self.out_of_budget()));
        }
        Ok(Step::Continue(vec![token]))
    }

    /// Chooses the next token from `logits` (the distribution after the last token
    /// fed). Text that became final goes to `on_text`.
    pub(crate) fn step(
        &mut self,
        tokenizer: &Tokenizer,
        logits: &[f32],
        on_text: &mut dyn FnMut(&str),
    ) -> Result<Step, GenerateError> {
        self.written.clear();
        if self.harmony.is_some() {
            return self.harmony_step(tokenizer, logits, on_text);
        }
        if self.matcher.as_mut().is_some_and(Matcher::is_finished) {
            return Ok(Step::Done(Finish::Grammar));
        }
        if self.remaining == 0 {
            return Ok(Step::Done(self.out_of_budget()));
        }
        if self.thinking.as_ref().is_some_and(ThinkState::thinking) {
            return self.think_step(tokenizer, logits);
        }
        // An open call's constraint, else the request's.
        let active = match self.calls.as_mut().and_then(|w| w.open.as_mut()) {
            Some(call) => Some(&mut call.matcher),
            None => self.matcher.as_mut(),
        };
        let mut feed = Vec::with_capacity(1);
        match active {
            None => feed.push(self.free_token(tokenizer, logits)?),
            Some(m) => {
                let (token, forced) = choose_within_budget(
                    m,
                    &mut self.sampler,
                    &mut self.mask,
                    logits,
                    &self.history,
                    self.remaining,
                    self.thinking.as_ref().map_or(&[], ThinkState::banned),
                )?;
                self.forced += usize::from(forced);
                m.commit(token)?;
                feed.push(token);
                if self.fast_forward {
                    // The output's tail is all the tokenizer check looks at.
                    let mut so_far = self.tokens[self.tokens.len().saturating_sub(8)..].to_vec();
                    so_far.push(token);
                    let t = std::time::Instant::now();
                    let run = forced::fast_forward(tokenizer, m, &so_far, self.remaining - 1);
                    self.fast_forward_time += t.elapsed();
                    self.forced += run.len();
                    self.fast_forwarded += run.len();
                    feed.extend(run);
                }
            }
        }
        self.remaining -= feed.len();
        for &t in &feed {
            self.written.push(t);
            self.history.push(t);
            if let Some(th) = self.thinking.as_mut() {
                th.answered(tokenizer.token_bytes(t));
            }
            let out = self.stop.push(t, tokenizer.token_bytes(t));
            emit_answer(&mut self.text, self.thinking.as_mut(), &out.emit, on_text);
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
        if self.calls.as_mut().and_then(CallWatch::closed) == Some(true) {
            return Ok(Step::Done(Finish::Grammar));
        }
        if self.matcher.as_mut().is_some_and(Matcher::is_finished) {
            return Ok(Step::Done(Finish::Grammar));
        }
        if self.remaining == 0 {
            return Ok(Step::Done(self.out_of_budget()));
        }
        Ok(Step::Continue(feed))
    }

    /// How many of `drafts`, from the front, the constraint at this point would take
    /// in turn: a draft it refuses could never be chosen, so neither it nor what
    /// follows it is worth a row. All of them where nothing constrains the next
    /// token (free text, thinking, harmony's channels, which decide for themselves).
    pub(crate) fn drafts_allowed(&mut self, drafts: &[u32]) -> usize {
        if self.harmony.is_some() || self.thinking.as_ref().is_some_and(ThinkState::thinking) {
            return drafts.len();
        }
        let active = match self.calls.as_mut().and_then(|w| w.open.as_mut()) {
            Some(call) => Some(&mut call.matcher),
            None => self.matcher.as_mut(),
        };
        let Some(m) = active else {
            return drafts.len();
        };
        let n = drafts.iter().take_while(|&&t| m.commit(t).is_ok()).count();
        // Drafts are fewer than the matcher's rollback window, so this cannot fail;
        // were it to, the matcher would be left ahead of the output: refuse then.
        m.rollback(n)
            .expect("drafts fit the matcher's rollback window");
        n
    }

    /// The constraint's mask once `drafts` are written (committed, then undone), for
    /// a draft model to draft within; `None` where nothing constrains the next token,
    /// and an empty mask (nothing allowed) past a draft the constraint refuses.
    pub(crate) fn mask_after(&mut self, drafts: &[u32]) -> Option<&[u64]> {
        if self.harmony.is_some() || self.thinking.as_ref().is_some_and(ThinkState::thinking) {
            return None;
        }
        let m = match self.calls.as_mut().and_then(|w| w.open.as_mut()) {
            Some(call) => &mut call.matcher,
            None => self.matcher.as_mut()?,
        };
        let n = drafts.iter().take_while(|&&t| m.commit(t).is_ok()).count();
        let whole = n == drafts.len();
        if whole {
            m.mask(&mut self.mask);
        }
        m.rollback(n)
            .expect("drafts fit the matcher's rollback window");
        Some(if whole { self.mask.words() } else { &[] })
    }

    /// The tokens fast-forward would feed after `drafts` when the last of them is
    /// chosen (forced bytes, spelled as [`forced::fast_forward`] spells them): the
    /// drafts that follow a chosen token for free. Empty where nothing is forced.
    pub(crate) fn forced_after(&mut self, tokenizer: &Tokenizer, drafts: &[u32]) -> Vec<u32> {
        let free =
            self.harmony.is_some() || self.thinking.as_ref().is_some_and(ThinkState::thinking);
        if !self.fast_forward || free || drafts.is_empty() {
            return Vec::new();
        }
        let m = match self.calls.as_mut().and_then(|w| w.open.as_mut()) {
            Some(call) => &mut call.matcher,
            None => match self.matcher.as_mut() {
                Some(m) => m,
                None => return Vec::new(),
            },
        };
        let n = drafts.iter().take_while(|&&t| m.commit(t).is_ok()).count();
        let mut run = Vec::new();
        if n == drafts.len() {
            let mut so_far = self.tokens[self.tokens.len().saturating_sub(8)..].to_vec();
            so_far.extend_from_slice(drafts);
            let left = self.remaining.saturating_sub(drafts.len());
            run = forced::fast_forward(tokenizer, m, &so_far, left);
        }
        m.rollback(n + run.len())
            .expect("drafts fit the matcher's rollback window");
        run
    }

    /// The tokens the last [`step`](Self::step) wrote (see `written`).
    pub(crate) fn written(&self) -> &[u32] {
        &self.written
    }

    /// A token of free text (no constraint, or strict `auto` between calls). A token
    /// that opens a call must begin it validly: one that cannot is refused and the
    /// step samples again without it.
    fn free_token(&mut self, tokenizer: &Tokenizer, logits: &[f32]) -> Result<u32, GenerateError> {
        let mut refusing = false;
        loop {
            let mask = match (refusing, self.thinking.as_mut()) {
                (true, _) => Some(&self.refused[..]),
                (false, Some(th)) => Some(th.answer_mask()),
                (false, None) => None,
            };
            let token = self
                .sampler
                .sample(logits, &self.history, mask)
                .ok_or_else(|| nothing_sampled(logits))?;
            let Some(watch) = self.calls.as_mut() else {
                return Ok(token);
            };
            // This step's token is one of the remaining ones.
            let room = self.remaining.saturating_sub(1);
            match watch.watch(tokenizer.token_bytes(token), room) {
                Watched::Free | Watched::Opened => return Ok(token),
                Watched::Refused => {
                    if !refusing {
                        refusing = true;
                        self.refused.clear();
                        match self.thinking.as_mut() {
                            Some(th) => self.refused.extend_from_slice(th.answer_mask()),
                            None => {
                                let n = self.mask.len();
                                self.refused.resize(n.div_ceil(64), u64::MAX);
                                if !n.is_multiple_of(64) {
                                    self.refused[n / 64] = (1u64 << (n % 64)) - 1;
                                }
                            }
                        }
                    }
                    self.refused[(token >> 6) as usize] &= !(1u64 << (token & 63));
                }
            }
        }
    }

    /// How a sequence that used its whole budget ends: by the grammar if its output is
    /// complete (budget-aware closing saw to it), else at the length limit.
    fn out_of_budget(&self) -> Finish {
        if self.calls.as_ref().is_some_and(|w| w.open.is_some()) {
            return Finish::Length;
        }
        if let Some(h) = &self.harmony {
            return match h.phase {
                Phase::Call if h.call_complete() => Finish::Grammar,
                Phase::Answer if self.matcher.as_ref().is_some_and(Matcher::is_accepting) => {
                    Finish::Grammar
                }
                _ => Finish::Length,
            };
        }
        match &self.matcher {
            Some(m) if m.is_accepting() => Finish::Grammar,
            _ => Finish::Length,
        }
    }

    /// Ends decoding: releases held-back text (unless a stop string matched) and
    /// returns the result.
    pub(crate) fn finish(mut self, finish: Finish, on_text: &mut dyn FnMut(&str)) -> Decoded {
        if finish != Finish::Stop {
            let rest = self.stop.flush();
            emit_answer(&mut self.text, self.thinking.as_mut(), &rest, on_text);
        }
        if let Some(h) = &self.harmony {
            // A call the token limit cut after its arguments is still whole.
            emit_answer(&mut self.text, None, h.closing(), on_text);
        }
        self.text.finish();
        let reasoning = match self.harmony.as_mut() {
            Some(h) => Some(h.finish()),
            None => self.thinking.as_mut().map(ThinkState::finish),
        };
        Decoded {
            reasoning: reasoning.unwrap_or_default(),
            reasoning_tokens: match &self.harmony {
                Some(h) => h.tokens,
                None => self.thinking.as_ref().map_or(0, |t| t.tokens),
            },
            calls_opened: self.calls.as_ref().map(|w| w.calls),
            text: self.text.into_bytes(),
            tokens: self.tokens,
            forced: self.forced,
            fast_forwarded: self.fast_forwarded,
            // Looking for forced bytes is constraint work too: it counts as mask time.
            mask: {
                let mut stats = self.matcher.as_ref().map(Matcher::stats);
                if let Some(calls) = self.calls.as_ref().and_then(CallWatch::stats) {
                    absorb(&mut stats, calls);
                }
                if let Some(call) = self.harmony.as_ref().and_then(HarmonyState::stats) {
                    absorb(&mut stats, call);
                }
                if let Some(s) = stats.as_mut() {
                    s.mask_time += self.fast_forward_time;
                }
                stats
            },
            stop_index: self.stop_index,
        }
    }
}

/// Why the sampler found no token: the model's logits, or else the constraint.
fn nothing_sampled(logits: &[f32]) -> GenerateError {
    if logits.iter().any(|l| !l.is_finite()) {
        GenerateError::NonFiniteLogits
    } else {
        GenerateError::DeadEnd
    }
}

fn emit_answer(
    text: &mut Utf8Assembler,
    thinking: Option<&mut ThinkState>,
    bytes: &[u8],
    on_text: &mut dyn FnMut(&str),
) {
    if let Some(s) = text.push(bytes) {
        let shown = match thinking {
            Some(th) => th.shown(&s),
            None => &s,
        };
        if !shown.is_empty() {
            on_text(shown);
        }
    }
}

/// Chooses a constrained token that keeps the output closable within `remaining`
/// tokens (this one included; see the module docs), and whether it was forced (the
/// only one allowed, so not sampled).
fn choose_within_budget(
    m: &mut Matcher,
    sampler: &mut Sampler,
    mask: &mut TokenMask,
    logits: &[f32],
    history: &[u32],
    remaining: usize,
    banned: &[u32],
) -> Result<(u32, bool), GenerateError> {
    let distance = m.min_bytes_to_accept();
    // The distance takes the whole budget: every token must close by a shortest way.
    let tight = distance.is_some_and(|d| d >= remaining);
    if tight {
        m.closing_mask(mask);
    } else {
        m.mask(mask);
    }
    for &t in banned {
        mask.disallow(t);
    }
    if let Some(t) = single_allowed(mask) {
        return Ok((t, true));
    }
    let sample = |sampler: &mut Sampler, mask: &TokenMask| {
        sampler
            .sample(logits, history, Some(mask.words()))
            .ok_or_else(|| nothing_sampled(logits))
    };
    if tight || distance.is_none() {
        return Ok((sample(sampler, mask)?, false));
    }
    for _ in 0..MAX_BUDGET_REFUSALS {
        let t = sample(sampler, mask)?;
        // What follows `t` must fit in the tokens left after it.
        if m.min_bytes_after(t).is_some_and(|d| d < remaining) {
            return Ok((t, false));
        }
        mask.disallow(t);
        if mask.count() == 0 {
            break;
        }
    }
    // The closing mask's tokens shorten the distance, which fits: they all fit.
    m.closing_mask(mask);
    for &t in banned {
        mask.disallow(t);
    }
    Ok((sample(sampler, mask)?, false))
}

/// The only allowed token, if exactly one is.
fn single_allowed(mask: &TokenMask) -> Option<u32> {
    let mut it = mask.allowed();
    let first = it.next()?;
    it.next().is_none().then_some(first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use llamay_constrain::Vocabulary;
    use llamay_engine::SamplerConfig;
    use std::sync::Arc;

    /// A model that always wants more array items: `1` and `,` far ahead of `]`.
    fn eager_logits(vocab: &Vocabulary) -> Vec<f32> {
        (0..vocab.len() as u32)
            .map(|t| match vocab.token_bytes(t) {
                Some(b"1") | Some(b",") => 10.0,
                Some(b", ") | Some(b"1,") => 9.0,
                Some(b"[") => 5.0,
                Some(b"]") => -5.0,
                _ => -10.0,
            })
            .collect()
    }

    #[test]
    fn an_eager_array_is_closed_within_every_budget() {
        let mut toks: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        toks.extend([", ", "1,", "[1", "]]"].map(|s| s.as_bytes().to_vec()));
        toks.push(b"</s>".to_vec());
        let eog = toks.len() as u32 - 1;
        let vocab = Arc::new(Vocabulary::new(toks, &[eog], &[]));
        let schema = serde_json::json!({"type": "array", "items": {"type": "integer"}});
        let (g, _) = llamay_constrain::schema_grammar(&schema).unwrap();
        let c = Constraint::from_grammar(&g, vocab.clone()).unwrap();
        let logits = eager_logits(&vocab);
        for budget in 2..40 {
            let mut m = c.matcher();
            let mut sampler = Sampler::new(SamplerConfig::greedy());
            let mut mask = TokenMask::new(vocab.len());
            let mut text = Vec::new();
            let mut used = 0;
            while used < budget && !m.is_finished() {
                let (t, _) = choose_within_budget(
                    &mut m,
                    &mut sampler,
                    &mut mask,
                    &logits,
                    &[],
                    budget - used,
                    &[],
                )
                .unwrap();
                m.commit(t).unwrap();
                used += 1;
                if t == eog {
                    break;
                }
                text.extend_from_slice(vocab.token_bytes(t).unwrap());
            }
            assert!(
                m.is_accepting() || m.is_finished(),
                "budget {budget}: {text:?}"
            );
            let doc: serde_json::Value = serde_json::from_slice(&text).unwrap_or_else(|e| {
                panic!("budget {budget}: {e}: {:?}", String::from_utf8_lossy(&text))
            });
            // The model's eagerness filled the budget rather than closing early.
            let items = doc.as_array().unwrap().len();
            assert!(
                budget < 6 || items >= (budget - 3) / 3,
                "budget {budget}: {doc}"
            );
        }
    }

    #[test]
    fn no_token_from_non_finite_logits_blames_the_model_not_the_constraint() {
        assert!(matches!(
            nothing_sampled(&[0.0, f32::NAN, 1.0]),
            GenerateError::NonFiniteLogits
        ));
        assert!(matches!(
            nothing_sampled(&[0.0, f32::INFINITY]),
            GenerateError::NonFiniteLogits
        ));
        assert!(matches!(
            nothing_sampled(&[0.0, 1.0]),
            GenerateError::DeadEnd
        ));
        let nan = GenerateError::NonFiniteLogits.to_string();
        assert!(
            nan.contains("non-finite") && !nan.contains("grammar"),
            "{nan}"
        );
    }
}
