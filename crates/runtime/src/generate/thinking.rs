//! The thinking part of one sequence's automaton (see `crate::reasoning`): the
//! opening marker, free text within the budget, the closing marker; then, while the
//! answer is written, the guard state that keeps the closing marker out of it.

use llamay_constrain::TokenMask;

use super::Utf8Assembler;
use crate::reasoning::{ThinkPlan, ThinkStart};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    Open,
    /// The `n`-th token of the convention's header comes next.
    Header(usize),
    Thinking,
    Answer,
}

impl Phase {
    /// Where the opening marker leaves a sequence: at its convention's header if it
    /// has one.
    fn after_open(header: &[u32]) -> Phase {
        match header.is_empty() {
            true => Phase::Thinking,
            false => Phase::Header(0),
        }
    }
}

pub(super) struct ThinkState {
    pub(super) plan: ThinkPlan,
    pub(super) phase: Phase,
    /// Thinking tokens so far (the opening marker included, the closing one not).
    pub(super) used: usize,
    /// Every token of the thinking block, both markers included.
    pub(super) tokens: usize,
    text: ReasoningText,
    /// The marker guard's state over the answer's bytes.
    pub(super) guard: usize,
    /// For an unconstrained answer: every token, minus the banned ones each step.
    answer_mask: TokenMask,
    /// The guard state whose banned tokens `answer_mask` has cleared.
    masked: Option<usize>,
    /// The free-thinking mask of this step (the closing marker is its token only:
    /// never spelled out in bytes).
    think_mask: Vec<u64>,
    /// Whether the answer has shown a character yet (the newlines a model writes
    /// after its closing marker are not part of the answer).
    pub(super) answer_started: bool,
}

impl ThinkState {
    pub(super) fn new(plan: ThinkPlan, n_vocab: usize) -> ThinkState {
        let phase = match plan.start {
            ThinkStart::Open => Phase::Open,
            ThinkStart::Thinking => Phase::after_open(&plan.facts.header),
            ThinkStart::Answer => Phase::Answer,
        };
        ThinkState {
            plan,
            phase,
            used: 0,
            tokens: 0,
            text: ReasoningText::default(),
            guard: 0,
            answer_mask: {
                let mut m = TokenMask::new(n_vocab);
                for t in 0..n_vocab as u32 {
                    m.allow(t);
                }
                m
            },
            masked: None,
            think_mask: Vec::new(),
            answer_started: false,
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
            Phase::Header(i) => Some(f.header[i]),
            _ if self.used >= self.plan.budget || remaining <= answer_room + 1 => Some(f.close),
            _ => None,
        }
    }

    pub(super) fn free_mask(&mut self) -> &[u64] {
        let f = &self.plan.facts;
        self.think_mask.clear();
        self.think_mask.extend_from_slice(&f.free);
        for &t in f.guard.banned(self.guard) {
            if t != f.close {
                self.think_mask[(t >> 6) as usize] &= !(1u64 << (t & 63));
            }
        }
        &self.think_mask
    }

    /// The answer's text as shown: leading newlines dropped until it starts.
    pub(super) fn shown<'s>(&mut self, s: &'s str) -> &'s str {
        if self.answer_started {
            return s;
        }
        let t = s.trim_start_matches('\n');
        self.answer_started = !t.is_empty();
        t
    }

    /// Takes a thinking token.
    pub(super) fn push(&mut self, t: u32, bytes: &[u8]) {
        let f = &self.plan.facts;
        self.tokens += 1;
        if t == f.close {
            self.phase = Phase::Answer;
            self.guard = 0;
            self.text.end();
            return;
        }
        self.guard = f.guard.advance(self.guard, bytes);
        self.used += 1;
        match self.phase {
            Phase::Open => self.phase = Phase::after_open(&f.header),
            // The header is the channel's name, not a thought.
            Phase::Header(i) if i + 1 < f.header.len() => self.phase = Phase::Header(i + 1),
            Phase::Header(_) => self.phase = Phase::Thinking,
            _ => self.text.push(bytes),
        }
    }

    /// Thinking text not yet taken.
    pub(super) fn take(&mut self) -> Option<String> {
        self.text.take()
    }

    /// Ends the block (a generation that stopped while thinking) and returns all of
    /// its text.
    pub(super) fn finish(&mut self) -> String {
        if self.thinking() {
            self.text.end();
        }
        self.text.all.clone()
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

/// Thinking text as it is decoded: all of it, and the part not yet sent on.
#[derive(Default)]
pub(super) struct ReasoningText {
    bytes: Utf8Assembler,
    pub(super) all: String,
    pending: String,
}

impl ReasoningText {
    pub(super) fn push(&mut self, bytes: &[u8]) {
        if let Some(s) = self.bytes.push(bytes) {
            self.all.push_str(&s);
            self.pending.push_str(&s);
        }
    }

    /// Ends the text: a character the closing marker cut is dropped.
    pub(super) fn end(&mut self) {
        self.bytes.finish();
    }

    /// Text not yet taken.
    pub(super) fn take(&mut self) -> Option<String> {
        (!self.pending.is_empty()).then(|| std::mem::take(&mut self.pending))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::reasoning::{MarkerGuard, ThinkingFacts, CONVENTIONS};

    const PIECES: [&[u8]; 6] = [b"a", b"<think>", b"</think>", b"</th", b"ink>", b"\n"];

    fn state(budget: usize) -> ThinkState {
        let guard = MarkerGuard::new(b"</think>", &PIECES, &[1, 2]);
        let facts = ThinkingFacts {
            convention: &CONVENTIONS[0],
            open: 1,
            close: 2,
            header: Vec::new(),
            free: vec![0b111101],
            guard,
        };
        let plan = ThinkPlan {
            facts: Arc::new(facts),
            start: ThinkStart::Open,
            budget,
        };
        ThinkState::new(plan, PIECES.len())
    }

    fn allowed(words: &[u64]) -> Vec<u32> {
        (0..PIECES.len() as u32)
            .filter(|t| words[0] >> t & 1 == 1)
            .collect()
    }

    #[test]
    fn open_think_within_the_budget_close_then_guard_the_answer() {
        let mut s = state(3);
        assert_eq!(s.forced(100, 1), Some(1), "the opening marker first");
        s.push(1, PIECES[1]);
        assert_eq!(s.forced(100, 1), None);
        assert_eq!(allowed(s.free_mask()), [0, 2, 3, 4, 5]);
        s.push(3, PIECES[3]);
        // `</th` + `ink>` would spell the marker: only its own token may close.
        assert_eq!(allowed(s.free_mask()), [0, 2, 3, 5]);
        s.push(0, PIECES[0]);
        assert_eq!(s.forced(100, 1), Some(2), "the budget is spent");
        s.push(2, PIECES[2]);
        assert!(!s.thinking());
        assert_eq!((s.used, s.tokens), (3, 4));
        assert_eq!(s.take().as_deref(), Some("</tha"));
        assert_eq!(s.banned(), &[1, 2]);
        s.answered(b"</th");
        assert_eq!(s.banned(), &[1, 2, 4]);
        assert_eq!(allowed(s.answer_mask()), [0, 3, 5]);
        s.answered(b"a");
        assert_eq!(allowed(s.answer_mask()), [0, 3, 4, 5]);
        assert_eq!(s.shown("\n\n"), "");
        assert_eq!(s.shown("\n{"), "{");
        assert_eq!(s.shown("\n"), "\n");
    }

    /// Gemma 4's `<|channel>thought\n`: the header's tokens are forced after the
    /// opening marker, count against the budget, and are not reasoning text.
    #[test]
    fn a_header_is_forced_after_the_opening_marker_and_kept_out_of_the_text() {
        let mut s = state(10);
        Arc::get_mut(&mut s.plan.facts).unwrap().header = vec![0, 5];
        s.push(1, PIECES[1]);
        assert_eq!(s.forced(100, 1), Some(0));
        s.push(0, PIECES[0]);
        assert_eq!(s.forced(100, 1), Some(5));
        s.push(5, PIECES[5]);
        assert_eq!(s.forced(100, 1), None);
        s.push(0, PIECES[0]);
        s.push(2, PIECES[2]);
        assert_eq!(s.finish(), "a");
        assert_eq!((s.used, s.tokens), (4, 5));
    }

    #[test]
    fn the_marker_is_forced_when_only_the_answer_still_fits() {
        let mut s = state(50);
        s.push(1, PIECES[1]);
        assert_eq!(s.forced(12, 10), None);
        assert_eq!(s.forced(11, 10), Some(2));
    }
}
