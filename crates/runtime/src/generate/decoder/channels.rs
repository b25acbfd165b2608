//! The decoder's step for a harmony model (see `generate::harmony`): the token its
//! channels allow, then what it does (thinking, the answer, a call's text), with the
//! forced bytes of the answer's or the call's constraint fed in the same pass.

use llamay_constrain::Matcher;
use llamay_engine::{StopReason, Tokenizer};

use super::super::harmony::{Next, Phase, Pushed};
use super::super::{forced, Finish, GenerateError};
use super::{choose_within_budget, emit_answer, nothing_sampled, Decoder, Step};

impl Decoder {
    pub(super) fn harmony_step(
        &mut self,
        tokenizer: &Tokenizer,
        logits: &[f32],
        on_text: &mut dyn FnMut(&str),
    ) -> Result<Step, GenerateError> {
        if self.remaining == 0 {
            return Ok(Step::Done(self.out_of_budget()));
        }
        let Some(h) = self.harmony.as_mut() else {
            return Ok(Step::Done(Finish::Length));
        };
        let (token, phase) = match h.next(self.remaining, self.matcher.is_none()) {
            Next::Force(t) => (t, None),
            Next::Sample(mask) => {
                let t = self
                    .sampler
                    .sample(logits, &self.history, Some(mask))
                    .ok_or_else(|| nothing_sampled(logits))?;
                (t, None)
            }
            Next::Match(phase) => {
                let banned = h.banned(phase);
                let m = match phase {
                    Phase::Answer => self.matcher.as_mut(),
                    _ => h.matcher(),
                };
                let m = m.ok_or(GenerateError::DeadEnd)?;
                let (t, forced) = choose_within_budget(
                    m,
                    &mut self.sampler,
                    &mut self.mask,
                    logits,
                    &self.history,
                    self.remaining,
                    &banned,
                )?;
                self.forced += usize::from(forced);
                m.commit(t)?;
                (t, Some(phase))
            }
        };
        let mut feed = vec![token];
        if let Some(end) = self.take_harmony(tokenizer, token, on_text) {
            return Ok(Step::Done(end));
        }
        if let (Some(phase), true) = (phase, self.fast_forward && self.remaining > 0) {
            let run = self.forced_run(tokenizer, phase);
            for &t in &run {
                if let Some(end) = self.take_harmony(tokenizer, t, on_text) {
                    return Ok(Step::Done(end));
                }
            }
            feed.extend(run);
        }
        if self.remaining == 0 {
            return Ok(Step::Done(self.out_of_budget()));
        }
        Ok(Step::Continue(feed))
    }

    /// The tokens the constraint of `phase` forces next, committed to it.
    fn forced_run(&mut self, tokenizer: &Tokenizer, phase: Phase) -> Vec<u32> {
        let m = match phase {
            Phase::Answer => self.matcher.as_mut(),
            _ => self.harmony.as_mut().and_then(|h| h.matcher()),
        };
        let Some(m) = m else {
            return Vec::new();
        };
        // The message's own tail is all the tokenizer check looks at (a marker
        // re-tokenized as text would never match).
        let tail = &self.tokens[self.tokens.len().saturating_sub(8)..];
        let from = tail
            .iter()
            .rposition(|&t| tokenizer.is_control(t))
            .map_or(0, |i| i + 1);
        let so_far = &tail[from..];
        let t = std::time::Instant::now();
        let run = forced::fast_forward(tokenizer, m, so_far, self.remaining);
        self.fast_forward_time += t.elapsed();
        self.forced += run.len();
        self.fast_forwarded += run.len();
        run
    }

    /// Takes one chosen token: counts it, and sends on what it shows. `Some`: the
    /// generation ended with it.
    fn take_harmony(
        &mut self,
        tokenizer: &Tokenizer,
        token: u32,
        on_text: &mut dyn FnMut(&str),
    ) -> Option<Finish> {
        let h = self.harmony.as_mut()?;
        self.remaining -= 1;
        self.history.push(token);
        let bytes = tokenizer.token_bytes(token);
        match h.push(token, bytes) {
            Pushed::Quiet => self.tokens.push(token),
            Pushed::Call(text) => {
                self.tokens.push(token);
                emit_answer(&mut self.text, None, &text, on_text);
            }
            Pushed::End(finish, text) => {
                if finish == Finish::Grammar {
                    self.tokens.push(token);
                }
                emit_answer(&mut self.text, None, &text, on_text);
                return Some(finish);
            }
            Pushed::Answer => {
                let out = self.stop.push(token, bytes);
                emit_answer(&mut self.text, None, &out.emit, on_text);
                self.tokens.push(token);
                match out.stop {
                    Some(StopReason::Eog(_)) => return Some(Finish::Eog),
                    Some(StopReason::String(i)) => {
                        self.stop_index = Some(i);
                        return Some(Finish::Stop);
                    }
                    None => {}
                }
                if self.matcher.as_mut().is_some_and(Matcher::is_finished) {
                    return Some(Finish::Grammar);
                }
            }
        }
        None
    }
}
