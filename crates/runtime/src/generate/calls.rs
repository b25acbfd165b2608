//! Strict `auto` tool calls: the answer is free text until the model opens a call in
//! its convention, then the call is held to the offered tools and their schemas until
//! it closes, then the text is free again.
//!
//! The opener is watched for in the bytes the model writes, not in tokens: a token
//! may end the opener and begin the call (`<tool_call>\n{`), or the opener may span
//! tokens (`<tool` `_call>`). When a sampled token completes an opener, the call's
//! matcher takes every byte from the opener's first on; a token whose bytes after the
//! opener the call cannot continue with is refused and the step samples again without
//! it, so the first byte of a call is already a valid one. Free text costs nothing:
//! no mask is computed until a call opens.

use llamay_constrain::{Constraint, Matcher, MatcherStats};

/// Where calls open in free text.
#[derive(Clone)]
pub struct CallTriggers {
    /// An opener anywhere in the answer (Hermes `<tool_call>`, Mistral `[TOOL_CALLS]`).
    pub anywhere: Option<Trigger>,
    /// An opener that must be the answer's first bytes after whitespace (a bare JSON
    /// call); its call is the whole answer.
    pub at_start: Option<Trigger>,
    /// Whether the answer may hold more than one call.
    pub parallel: bool,
}

/// One opener and the constraint its call is held to from the opener on (the
/// opener's bytes included).
#[derive(Clone)]
pub struct Trigger {
    pub opener: Vec<u8>,
    pub constraint: Constraint,
    /// The answer ends when this call closes (it holds every call, or is the answer).
    pub ends_answer: bool,
}

/// A call the model has opened.
pub(super) struct OpenCall {
    pub matcher: Matcher,
    /// The answer ends when this call closes.
    pub ends_answer: bool,
}

/// One sequence's watch for call openers.
pub(super) struct CallWatch {
    triggers: CallTriggers,
    /// Free answer bytes not yet ruled out as the start of an opener.
    tail: Vec<u8>,
    /// Only whitespace answered so far: an `at_start` opener may still come.
    blank: bool,
    pub open: Option<OpenCall>,
    /// Calls opened so far.
    pub calls: usize,
    /// The closed calls' matcher statistics, summed.
    stats: Option<MatcherStats>,
}

/// What a free token did to the watch.
pub(super) enum Watched {
    /// No call opened.
    Free,
    /// A call opened and took the token's bytes.
    Opened,
    /// The token completes an opener with bytes the call cannot take: sample again
    /// without it.
    Refused,
}

impl CallWatch {
    pub(super) fn new(triggers: CallTriggers) -> CallWatch {
        CallWatch {
            triggers,
            tail: Vec::new(),
            blank: true,
            open: None,
            calls: 0,
            stats: None,
        }
    }

    /// Whether another call may still open.
    fn may_open(&self) -> bool {
        self.calls == 0 || self.triggers.parallel
    }

    /// Looks at a free token's bytes: a call opens, or the text stays free. Nothing
    /// changes when the token is refused. A call that could not be finished in the
    /// `room` tokens left after this one (at a token per byte, the decoder's
    /// conservative count) is not opened: a cut-off call is no call.
    pub(super) fn watch(&mut self, bytes: &[u8], room: usize) -> Watched {
        if !self.may_open() {
            return Watched::Free;
        }
        let mut seen = self.tail.clone();
        seen.extend_from_slice(bytes);
        if self.blank {
            if let Some(t) = &self.triggers.at_start {
                let start = seen
                    .iter()
                    .position(|b| !b.is_ascii_whitespace())
                    .unwrap_or(seen.len());
                let rest = &seen[start..];
                if rest.starts_with(&t.opener) {
                    return self.open_at(&t.clone(), rest, room);
                }
                if !t.opener.starts_with(rest) {
                    self.blank = false;
                }
            } else if seen.iter().any(|b| !b.is_ascii_whitespace()) {
                self.blank = false;
            }
        }
        if let Some(t) = &self.triggers.anywhere {
            if let Some(at) = seen.windows(t.opener.len()).position(|w| w == t.opener) {
                return self.open_at(&t.clone(), &seen[at..], room);
            }
        }
        // Keep what could still begin an opener: the last bytes, one short of the
        // longest opener, and the whole answer while it may begin a bare call.
        let keep = if self.blank {
            seen.len()
        } else {
            let longest = self
                .triggers
                .anywhere
                .as_ref()
                .map_or(0, |t| t.opener.len());
            longest.saturating_sub(1).min(seen.len())
        };
        self.tail = seen[seen.len() - keep..].to_vec();
        Watched::Free
    }

    fn open_at(&mut self, t: &Trigger, bytes: &[u8], room: usize) -> Watched {
        let mut matcher = t.constraint.matcher();
        if matcher.commit_bytes(bytes).is_err()
            || matcher.min_bytes_to_accept().is_none_or(|n| n > room)
        {
            return Watched::Refused;
        }
        self.open = Some(OpenCall {
            matcher,
            ends_answer: t.ends_answer,
        });
        self.calls += 1;
        self.blank = false;
        self.tail.clear();
        Watched::Opened
    }

    /// After the open call took a token: when its call is complete, the watch goes
    /// back to free text. Returns whether the answer is over (the call was the whole
    /// answer, or no further call may open and the call was the point).
    pub(super) fn closed(&mut self) -> Option<bool> {
        let open = self.open.as_mut()?;
        if !open.matcher.is_finished() {
            return None;
        }
        let open = self.open.take().expect("checked above");
        absorb(&mut self.stats, open.matcher.stats());
        Some(open.ends_answer || !self.may_open())
    }

    /// Every call's matcher statistics, summed (the open one's included).
    pub(super) fn stats(&self) -> Option<MatcherStats> {
        let mut total = self.stats.clone();
        if let Some(open) = &self.open {
            absorb(&mut total, open.matcher.stats());
        }
        total
    }
}

/// Adds one matcher's counts to a running total (the cache figures are the latest's).
pub(super) fn absorb(total: &mut Option<MatcherStats>, s: MatcherStats) {
    match total {
        None => *total = Some(s),
        Some(t) => {
            let (steps, time, hits) = (t.steps, t.mask_time, t.cache_hits);
            let (wanting, closing) = (t.states_wanting_mask, t.closing_steps);
            *t = MatcherStats {
                steps: steps + s.steps,
                mask_time: time + s.mask_time,
                cache_hits: hits + s.cache_hits,
                states_wanting_mask: wanting + s.states_wanting_mask,
                closing_steps: closing + s.closing_steps,
                ..s
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use llamay_constrain::{Constraint, Vocabulary};

    use super::*;

    fn call() -> Constraint {
        let toks: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        let vocab = Arc::new(Vocabulary::new(toks, &[], &[]));
        Constraint::from_gbnf(r#"root ::= "<call>" [a-z]+ "</call>""#, vocab).unwrap()
    }

    fn trigger(ends_answer: bool) -> Trigger {
        Trigger {
            opener: b"<call>".to_vec(),
            constraint: call(),
            ends_answer,
        }
    }

    fn watch(parallel: bool) -> CallWatch {
        CallWatch::new(CallTriggers {
            anywhere: Some(trigger(false)),
            at_start: None,
            parallel,
        })
    }

    #[test]
    fn an_opener_split_over_tokens_opens_the_call_with_its_first_bytes() {
        let mut w = watch(true);
        assert!(matches!(w.watch(b"Let me look. <ca", 64), Watched::Free));
        assert!(w.open.is_none());
        assert!(matches!(w.watch(b"ll>ab", 64), Watched::Opened));
        let m = &mut w.open.as_mut().unwrap().matcher;
        assert!(m.commit_bytes(b"c</call>").is_ok());
        assert_eq!(w.closed(), Some(false));
        assert!(w.open.is_none());
        assert_eq!(w.calls, 1);
        // Free again: text that merely looks like the tag's start stays free.
        assert!(matches!(w.watch(b" a < b, <c", 64), Watched::Free));
        assert!(matches!(w.watch(b"at", 64), Watched::Free));
        assert!(w.stats().is_some(), "the closed call's statistics are kept");
    }

    #[test]
    fn a_token_whose_bytes_break_the_call_is_refused_and_changes_nothing() {
        let mut w = watch(true);
        assert!(matches!(w.watch(b"<call>9", 64), Watched::Refused));
        assert!(w.open.is_none());
        assert_eq!(w.calls, 0);
        assert!(
            matches!(w.watch(b"<call>x", 6), Watched::Refused),
            "no room to close"
        );
        assert!(matches!(w.watch(b"<call>x", 64), Watched::Opened));
    }

    #[test]
    fn without_parallel_calls_one_call_ends_the_answer() {
        let mut w = watch(false);
        assert!(matches!(w.watch(b"<call>", 64), Watched::Opened));
        w.open
            .as_mut()
            .unwrap()
            .matcher
            .commit_bytes(b"x</call>")
            .unwrap();
        assert_eq!(w.closed(), Some(true));
    }

    #[test]
    fn a_bare_call_opens_only_at_the_answer_start() {
        let mk = || {
            CallWatch::new(CallTriggers {
                anywhere: None,
                at_start: Some(trigger(true)),
                parallel: true,
            })
        };
        let mut w = mk();
        assert!(matches!(w.watch(b"  <ca", 64), Watched::Free));
        assert!(matches!(w.watch(b"ll>", 64), Watched::Opened));
        assert!(w.open.as_ref().unwrap().ends_answer);
        let mut w = mk();
        assert!(matches!(w.watch(b"Sure: ", 64), Watched::Free));
        assert!(matches!(w.watch(b"<call>", 64), Watched::Free));
        assert!(w.open.is_none());
    }
}
