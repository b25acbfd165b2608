//! gpt-oss's harmony output: what the model writes after the prompt's
//! `<|start|>assistant`, run as one automaton (the prompt side is `chat::harmony`,
//! the plan of a request is built by `tools::harmony`).
//!
//! ```text
//! <|channel|>analysis<|message|> free text <|end|>               thinking (forced open)
//! <|start|>assistant<|channel|> HEADER                          forced, then the header
//!   final<|message|> answer <|return|>                          the answer
//!   commentary to=functions.NAME <|constrain|>json<|message|> ARGS <|call|>   a call
//! ```
//!
//! The analysis message is free text (control tokens excluded) within the thinking
//! budget; its `<|end|>` is forced when the budget is spent or only the answer still
//! fits. The header is a choice among token sequences, each alternative tokenized as
//! the prompt's own headers are (a model spelling `commentary` letter by letter would
//! be off its training): the answer (unless a call is forced) and a call to each
//! callable tool, so a forced choice can only call and a named one only that tool; a
//! token shared by every alternative left is forced. The answer runs under the
//! request's constraint (a schema, a grammar…) or is free text; a call's arguments run
//! under its tool's schema. Harmony ends a turn at a call: one call per generation.
//! The decoder sends the analysis text as reasoning and the answer as text; a call
//! goes out in the Hermes form (`<tool_call>` blocks) that `tools::parse` and
//! `tools::stream` read, so every API shape reports it the way it reports any model's
//! calls.
//!
//! [`HarmonyState`] is one sequence's place in it: the forced markers still to feed,
//! the phase, the header chosen so far and the call's matcher.

use std::collections::VecDeque;
use std::sync::Arc;

use llamay_constrain::{Constraint, Matcher, MatcherStats};

use super::thinking::ReasoningText;
use super::Finish;
use crate::chat::HarmonyFacts;

/// One generation's harmony automaton, as the decoder runs it.
#[derive(Clone, Debug)]
pub struct HarmonyPlan {
    pub(crate) facts: Arc<HarmonyFacts>,
    /// Tokens of thinking before `<|end|>` is forced (its opening counts).
    pub(crate) budget: usize,
    /// What may follow `<|channel|>` after thinking, as tokens: `final` (`None`), or
    /// the header of a call to `tools[i]` (`Some(i)`).
    pub(crate) headers: Arc<[(Vec<u32>, Option<usize>)]>,
    /// Per callable tool: the Hermes text that opens a call to it (up to its
    /// arguments), and its arguments' constraint.
    pub(crate) tools: Arc<[(Vec<u8>, Constraint)]>,
    /// Tokens thinking leaves for the header and the shortest answer or call.
    pub(crate) room: usize,
}

impl HarmonyPlan {
    /// What the enforcement report says of the channels.
    pub(crate) fn enforced(&self, constrained_answer: bool) -> Vec<String> {
        let mut lines = vec![format!(
            "harmony: analysis free within {} tokens",
            self.budget
        )];
        let answers = self.headers.iter().any(|(_, called)| called.is_none());
        if answers && constrained_answer {
            lines.push("harmony: the final message under the constraint".into());
        }
        if !self.tools.is_empty() {
            lines.push(format!(
                "harmony: calls to {} {} under their schemas{}",
                self.tools.len(),
                if self.tools.len() == 1 {
                    "tool"
                } else {
                    "tools"
                },
                if answers { "" } else { " (a call is required)" }
            ));
        }
        lines
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    Analysis,
    Header,
    Answer,
    Call,
}

/// How the next token is chosen.
pub(super) enum Next<'a> {
    /// A marker the format forces.
    Force(u32),
    /// Sampled from this mask.
    Sample(&'a [u64]),
    /// Under a matcher: the call's ([`HarmonyState::matcher`]), or for
    /// [`Phase::Answer`] the request's.
    Match(Phase),
}

/// What a token did.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Pushed {
    /// Nothing to show (a marker, the header, thinking).
    Quiet,
    /// A token of the answer.
    Answer,
    /// Text of a call, in the Hermes form.
    Call(Vec<u8>),
    /// The generation is over; the call's last text, if any.
    End(Finish, Vec<u8>),
}

pub(super) struct HarmonyState {
    plan: HarmonyPlan,
    queue: VecDeque<u32>,
    pub(super) phase: Phase,
    /// The header's tokens so far, and the mask of the tokens that may extend it.
    header: Vec<u32>,
    header_mask: Vec<u64>,
    call: Option<Matcher>,
    text: ReasoningText,
    /// Thinking tokens so far (its opening included).
    used: usize,
    /// Every token of the analysis message, its markers included.
    pub(super) tokens: usize,
}

/// What closes a call's Hermes block after its arguments.
const CALL_CLOSE: &[u8] = b"}\n</tool_call>";

impl HarmonyState {
    pub(super) fn new(plan: HarmonyPlan) -> HarmonyState {
        let f = &plan.facts;
        let mut queue = VecDeque::from([f.channel]);
        queue.extend(&f.analysis);
        queue.push_back(f.message);
        HarmonyState {
            header_mask: vec![0; f.analysis_mask.len()],
            plan,
            queue,
            phase: Phase::Analysis,
            header: Vec::new(),
            call: None,
            text: ReasoningText::default(),
            used: 0,
            tokens: 0,
        }
    }

    /// How to choose the next token with `remaining` tokens left (this one included);
    /// `free_answer`: the request put no constraint on the answer.
    pub(super) fn next(&mut self, remaining: usize, free_answer: bool) -> Next<'_> {
        if let Some(&t) = self.queue.front() {
            return Next::Force(t);
        }
        if self.phase == Phase::Header {
            return self.header_next();
        }
        let f = &self.plan.facts;
        match self.phase {
            Phase::Analysis if self.used >= self.plan.budget || remaining <= self.plan.room + 1 => {
                Next::Force(f.end)
            }
            Phase::Analysis => Next::Sample(&f.analysis_mask),
            Phase::Answer if free_answer => Next::Sample(&f.answer_mask),
            phase => Next::Match(phase),
        }
    }

    /// The header's next token: the one every alternative left agrees on, else a
    /// choice among theirs.
    fn header_next(&mut self) -> Next<'_> {
        let at = self.header.len();
        let mut next = self
            .plan
            .headers
            .iter()
            .filter(|(h, _)| h.len() > at && h.starts_with(&self.header))
            .map(|(h, _)| h[at]);
        let Some(first) = next.next() else {
            // Unreachable: a whole header moves on to its message.
            return Next::Force(self.plan.facts.message);
        };
        self.header_mask.fill(0);
        self.header_mask[(first >> 6) as usize] |= 1u64 << (first & 63);
        let mut one = true;
        for t in next {
            one &= t == first;
            self.header_mask[(t >> 6) as usize] |= 1u64 << (t & 63);
        }
        match one {
            true => Next::Force(first),
            false => Next::Sample(&self.header_mask),
        }
    }

    /// The open call's matcher.
    pub(super) fn matcher(&mut self) -> Option<&mut Matcher> {
        self.call.as_mut()
    }

    /// The end marker a matcher of `phase` must not choose: an answer ends with
    /// `<|return|>`, a call with `<|call|>`.
    pub(super) fn banned(&self, phase: Phase) -> [u32; 1] {
        let f = &self.plan.facts;
        match phase {
            Phase::Call => [f.ret],
            _ => [f.call],
        }
    }

    /// Takes the chosen token (already committed to its matcher).
    pub(super) fn push(&mut self, t: u32, bytes: &[u8]) -> Pushed {
        let f = &self.plan.facts;
        if self.queue.front() == Some(&t) {
            self.queue.pop_front();
            if self.phase == Phase::Analysis {
                self.used += 1;
                self.tokens += 1;
            }
            return Pushed::Quiet;
        }
        match self.phase {
            Phase::Analysis if t == f.end => {
                self.tokens += 1;
                self.text.end();
                self.queue.push_back(f.start);
                self.queue.extend(&f.assistant);
                self.queue.push_back(f.channel);
                self.phase = Phase::Header;
                Pushed::Quiet
            }
            Phase::Analysis => {
                self.used += 1;
                self.tokens += 1;
                self.text.push(bytes);
                Pushed::Quiet
            }
            Phase::Header => {
                self.header.push(t);
                let whole = self.plan.headers.iter().find(|(h, _)| *h == self.header);
                let Some((_, called)) = whole else {
                    return Pushed::Quiet;
                };
                match *called {
                    None => {
                        self.queue.push_back(f.message);
                        self.phase = Phase::Answer;
                        Pushed::Quiet
                    }
                    Some(i) => {
                        let (opening, args) = &self.plan.tools[i];
                        self.queue.push_back(f.constrain);
                        self.queue.extend(&f.json);
                        self.queue.push_back(f.message);
                        self.call = Some(args.matcher());
                        self.phase = Phase::Call;
                        Pushed::Call(opening.clone())
                    }
                }
            }
            Phase::Answer if t == f.ret || t == f.end => Pushed::End(Finish::Eog, Vec::new()),
            Phase::Answer => Pushed::Answer,
            Phase::Call if t == f.call => Pushed::End(Finish::Eog, CALL_CLOSE.to_vec()),
            Phase::Call => {
                let mut text = bytes.to_vec();
                if self.call.as_mut().is_some_and(Matcher::is_finished) {
                    text.extend_from_slice(CALL_CLOSE);
                    return Pushed::End(Finish::Grammar, text);
                }
                Pushed::Call(text)
            }
        }
    }

    /// Whether the output so far is a whole answer or call: where a generation cut by
    /// the token limit still ends by the grammar.
    pub(super) fn call_complete(&self) -> bool {
        self.phase == Phase::Call && self.call.as_ref().is_some_and(Matcher::is_accepting)
    }

    /// What closes a call the token limit cut once its arguments were whole.
    pub(super) fn closing(&self) -> &'static [u8] {
        if self.call_complete() {
            CALL_CLOSE
        } else {
            b""
        }
    }

    /// The call matcher's work.
    pub(super) fn stats(&self) -> Option<MatcherStats> {
        self.call.as_ref().map(Matcher::stats)
    }

    /// Thinking text not yet taken.
    pub(super) fn take(&mut self) -> Option<String> {
        self.text.take()
    }

    /// All the thinking text.
    pub(super) fn finish(&mut self) -> String {
        if self.phase == Phase::Analysis {
            self.text.end();
        }
        self.text.all.clone()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use llamay_constrain::{Constraint, Vocabulary};

    use super::*;

    // Byte tokens 0..=255, then harmony's markers and a few words.
    const START: u32 = 256;
    const CHANNEL: u32 = 257;
    const MESSAGE: u32 = 258;
    const END: u32 = 259;
    const CONSTRAIN: u32 = 260;
    const CALL: u32 = 261;
    const RETURN: u32 = 262;
    const WORDS: [&str; 5] = [
        "analysis",
        "assistant",
        "json",
        "final",
        "commentary to=functions.f ",
    ];
    const ANALYSIS: u32 = 263;
    const ASSISTANT: u32 = 264;
    const JSON: u32 = 265;
    const FINAL: u32 = 266;
    const CALL_F: u32 = 267;

    fn plan(budget: usize, headers: Vec<(Vec<u32>, Option<usize>)>) -> HarmonyPlan {
        let mut toks: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        for m in ["<|start|>", "<|channel|>", "<|message|>", "<|end|>"] {
            toks.push(m.as_bytes().to_vec());
        }
        for m in ["<|constrain|>", "<|call|>", "<|return|>"] {
            toks.push(m.as_bytes().to_vec());
        }
        toks.extend(WORDS.map(|w| w.as_bytes().to_vec()));
        let n = toks.len();
        let control: Vec<u32> = (START..=RETURN).collect();
        let vocab = Arc::new(Vocabulary::new(toks, &[CALL, RETURN], &control));
        let words = n.div_ceil(64);
        let mask = |extra: &[u32]| {
            let mut m = vec![0u64; words];
            for t in (0..256)
                .chain(ANALYSIS..n as u32)
                .chain(extra.iter().copied())
            {
                m[(t >> 6) as usize] |= 1 << (t & 63);
            }
            m
        };
        let facts = HarmonyFacts {
            start: START,
            channel: CHANNEL,
            message: MESSAGE,
            end: END,
            constrain: CONSTRAIN,
            call: CALL,
            ret: RETURN,
            assistant: vec![ASSISTANT],
            analysis: vec![ANALYSIS],
            json: vec![JSON],
            analysis_mask: mask(&[END]),
            answer_mask: mask(&[END, RETURN]),
        };
        let schema = serde_json::json!({"type": "object",
            "properties": {"a": {"type": "integer"}}, "required": ["a"]});
        let (g, _) = llamay_constrain::schema_grammar(&schema).unwrap();
        let args = Constraint::from_grammar(&g, vocab).unwrap();
        HarmonyPlan {
            facts: Arc::new(facts),
            budget,
            headers: headers.into(),
            tools: vec![(
                b"<tool_call>\n{\"name\": \"f\", \"arguments\": ".to_vec(),
                args,
            )]
            .into(),
            room: 5,
        }
    }

    /// Feeds the forced tokens, checking each is `want`'s next.
    fn forced(s: &mut HarmonyState, want: &[u32]) {
        for &w in want {
            assert!(matches!(s.next(100, true), Next::Force(t) if t == w), "{w}");
            assert_eq!(s.push(w, b""), Pushed::Quiet);
        }
    }

    #[test]
    fn think_within_the_budget_then_choose_the_header_then_call() {
        let both = vec![(vec![CALL_F], Some(0)), (vec![FINAL], None)];
        let mut s = HarmonyState::new(plan(3, both));
        forced(&mut s, &[CHANNEL, ANALYSIS, MESSAGE]);
        assert!(
            matches!(s.next(100, true), Next::Force(END)),
            "the budget is spent"
        );
        assert_eq!(s.push(END, b"<|end|>"), Pushed::Quiet);
        forced(&mut s, &[START, ASSISTANT, CHANNEL]);
        let Next::Sample(mask) = s.next(100, true) else {
            panic!("two headers: a choice")
        };
        let allowed: Vec<u32> = (0..300u32)
            .filter(|&t| mask[(t / 64) as usize] >> (t % 64) & 1 == 1)
            .collect();
        assert_eq!(allowed, [FINAL, CALL_F]);
        let Pushed::Call(mut text) = s.push(CALL_F, WORDS[4].as_bytes()) else {
            panic!("a call header")
        };
        forced(&mut s, &[CONSTRAIN, JSON, MESSAGE]);
        assert_eq!(s.banned(Phase::Call), [RETURN]);
        for b in *b"{\"a\":1}" {
            assert!(matches!(s.next(100, true), Next::Match(Phase::Call)));
            s.matcher().unwrap().commit(u32::from(b)).unwrap();
            match s.push(u32::from(b), &[b]) {
                Pushed::Call(t) => text.extend(t),
                Pushed::End(Finish::Grammar, t) => text.extend(t),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(
            String::from_utf8(text).unwrap(),
            "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\":1}}\n</tool_call>"
        );
        assert_eq!(s.tokens, 4, "the analysis message, both markers");
    }

    #[test]
    fn thinking_ends_where_only_the_answer_fits_and_one_header_is_forced() {
        let mut s = HarmonyState::new(plan(50, vec![(vec![FINAL], None)]));
        forced(&mut s, &[CHANNEL, ANALYSIS, MESSAGE]);
        assert!(matches!(s.next(7, true), Next::Sample(_)));
        s.push(u32::from(b'x'), b"x");
        assert_eq!(s.take().as_deref(), Some("x"));
        // Room 5: six tokens left is the header, the answer and its end.
        assert!(matches!(s.next(6, true), Next::Force(END)));
        s.push(END, b"");
        forced(&mut s, &[START, ASSISTANT, CHANNEL, FINAL, MESSAGE]);
        assert!(matches!(s.next(100, false), Next::Match(Phase::Answer)));
        assert_eq!(s.banned(Phase::Answer), [CALL]);
        let Next::Sample(free) = s.next(100, true) else {
            panic!("a free answer samples")
        };
        assert_eq!(free[(RETURN / 64) as usize] >> (RETURN % 64) & 1, 1);
        assert_eq!(s.push(u32::from(b'y'), b"y"), Pushed::Answer);
        assert_eq!(s.push(RETURN, b""), Pushed::End(Finish::Eog, Vec::new()));
        assert_eq!(s.finish(), "x");
    }
}
