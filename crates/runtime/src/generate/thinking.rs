//! The thinking part of one sequence's automaton (see `crate::reasoning`): the
//! opening marker, free text within the budget, the closing marker; then, while the
//! answer is written, the guard state that keeps the closing marker out of it.

use llamay_constrain::TokenMask;
use llamay_engine::Tokenizer;

use super::Utf8Assembler;
use crate::reasoning::{ThinkPlan, ThinkStart};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    Open,
    Thinking,
    Answer,
}

pub(super) struct ThinkState {
    pub(super) plan: ThinkPlan,
    pub(super) phase: Phase,
    /// Thinking tokens so far (the opening marker included, the closing one not).
    pub(super) used: usize,
    /// Every token of the thinking block, both markers included.
    pub(super) tokens: usize,
    text: Utf8Assembler,
    /// All the thinking text, and the part not yet taken by [`Self::take`].
    all: String,
    pending: String,
    /// The marker guard's state over the answer's bytes.
    pub(super) guard: usize,
    /// For an unconstrained answer: every token, minus the banned ones each step.
    answer_mask: TokenMask,
    /// The guard state whose banned tokens `answer_mask` has cleared.
    masked: Option<usize>,
}

impl ThinkState {
    pub(super) fn new(plan: ThinkPlan, n_vocab: usize) -> ThinkState {
        let phase = match plan.start {
            ThinkStart::Open => Phase::Open,
            ThinkStart::Thinking => Phase::Thinking,
            ThinkStart::Answer => Phase::Answer,
        };
        ThinkState {
            plan,
            phase,
            used: 0,
            tokens: 0,
            text: Utf8Assembler::default(),
            all: String::new(),
            pending: String::new(),
            guard: 0,
            answer_mask: {
                let mut m = TokenMask::new(n_vocab);
                for t in 0..n_vocab as u32 {
                    m.allow(t);
                }
                m
            },
            masked: None,
        }
    }

    pub(super) fn thinking(&self) -> bool {
        self.phase != Phase::Answer
    }

    /// The next thinking token: the forced opening marker, the forced closing one
    /// (budget spent, or only `answer_room` tokens left), or `None` to sample from
    /// [`Self::free_mask`].
    pub(super) fn forced(&self, remaining: usize, answer_room: usize) -> Option<u32> {
        let f = &self.plan.facts;
        match self.phase {
            Phase::Open => Some(f.open),
            _ if self.used >= self.plan.budget || remaining <= answer_room + 1 => Some(f.close),
            _ => None,
        }
    }

    pub(super) fn free_mask(&self) -> &[u64] {
        &self.plan.facts.free
    }

    /// Takes a thinking token.
    pub(super) fn push(&mut self, tokenizer: &Tokenizer, t: u32) {
        let f = &self.plan.facts;
        self.tokens += 1;
        if t == f.close {
            self.phase = Phase::Answer;
            self.flush();
            return;
        }
        self.used += 1;
        if t == f.open {
            self.phase = Phase::Thinking;
            return;
        }
        if let Some(s) = self.text.push(tokenizer.token_bytes(t)) {
            self.all.push_str(&s);
            self.pending.push_str(&s);
        }
    }

    /// Ends the thinking text: a character the marker cut is dropped.
    fn flush(&mut self) {
        self.text.finish();
    }

    /// Thinking text not yet taken.
    pub(super) fn take(&mut self) -> Option<String> {
        (!self.pending.is_empty()).then(|| std::mem::take(&mut self.pending))
    }

    /// Ends the block (a generation that stopped while thinking) and returns all of
    /// its text.
    pub(super) fn finish(&mut self) -> String {
        if self.thinking() {
            self.flush();
        }
        self.all.clone()
    }

    /// The answer's tokens that must not come next.
    pub(super) fn banned(&self) -> &[u32] {
        self.plan.facts.guard.banned(self.guard)
    }

    /// Moves the guard over an answer token.
    pub(super) fn answered(&mut self, bytes: &[u8]) {
        self.guard = self.plan.facts.guard.advance(self.guard, bytes);
    }

    /// The mask for an unconstrained answer token: everything but the banned.
    pub(super) fn answer_mask(&mut self) -> &[u64] {
        let guard = &self.plan.facts.guard;
        let m = &mut self.answer_mask;
        if let Some(k) = self.masked {
            for &t in guard.banned(k) {
                m.allow(t);
            }
        }
        for &t in guard.banned(self.guard) {
            m.disallow(t);
        }
        self.masked = Some(self.guard);
        m.words()
    }
}
