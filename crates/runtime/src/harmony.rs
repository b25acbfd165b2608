//! gpt-oss's harmony output: what the model writes after the prompt's
//! `<|start|>assistant`, run as one automaton (the prompt side is `chat::harmony`).
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
//! token shared by every alternative left is forced. The answer runs under the request's constraint (a
//! schema, a grammar…) or is free text; a call's arguments run under its tool's schema.
//! Harmony ends a turn at a call: one call per generation. The decoder sends the
//! analysis text as reasoning and the answer as text; a call goes out in the Hermes
//! form (`<tool_call>` blocks) that `tools::parse` and `tools::stream` read, so every
//! API shape reports it the way it reports any model's calls.

use std::sync::Arc;

use llamay_constrain::{Constraint, GrammarBuilder};
use llamay_engine::{TokenType, Tokenizer};
use serde_json::json;

use crate::error::Error;
use crate::loaded::LoadedModel;
use crate::tools::ToolSet;

/// Harmony's header markers: a vocabulary with all of them is a harmony model's.
pub(crate) const HARMONY_MARKERS: [&str; 5] = [
    "<|start|>",
    "<|channel|>",
    "<|message|>",
    "<|constrain|>",
    "<|call|>",
];

/// The prefix of a call's header, before the tool's name.
const CALL_HEADER: &str = "commentary to=functions.";

/// A harmony vocabulary's markers and masks.
#[derive(Debug)]
pub struct HarmonyFacts {
    pub(crate) start: u32,
    pub(crate) channel: u32,
    pub(crate) message: u32,
    pub(crate) end: u32,
    pub(crate) constrain: u32,
    pub(crate) call: u32,
    pub(crate) ret: u32,
    /// Text tokens of `assistant`, `analysis` and `json`.
    pub(crate) assistant: Vec<u32>,
    pub(crate) analysis: Vec<u32>,
    pub(crate) json: Vec<u32>,
    /// Thinking: text tokens (no control or unused token) and `<|end|>`.
    pub(crate) analysis_mask: Vec<u64>,
    /// A free answer: text tokens, `<|return|>` and `<|end|>`.
    pub(crate) answer_mask: Vec<u64>,
}

impl HarmonyFacts {
    /// The facts of `tok`'s vocabulary, if it is harmony's.
    pub fn new(tok: &Tokenizer, n_vocab: usize) -> Option<HarmonyFacts> {
        let id = |s: &str| tok.token_id(s);
        let [start, channel, message, constrain, call] = HARMONY_MARKERS.map(id);
        let text = |s: &str| tok.encode(s.as_bytes(), false, false);
        let mut free = vec![0u64; n_vocab.div_ceil(64)];
        let allow = |m: &mut Vec<u64>, t: u32| m[(t >> 6) as usize] |= 1u64 << (t & 63);
        for t in 0..n_vocab as u32 {
            let unused = tok.token_type(t) == Some(TokenType::Unused);
            if !tok.is_control(t) && !unused && !tok.token_bytes(t).is_empty() {
                allow(&mut free, t);
            }
        }
        let (end, ret) = (id("<|end|>")?, id("<|return|>")?);
        let mut analysis_mask = free;
        allow(&mut analysis_mask, end);
        let mut answer_mask = analysis_mask.clone();
        allow(&mut answer_mask, ret);
        Some(HarmonyFacts {
            start: start?,
            channel: channel?,
            message: message?,
            end,
            constrain: constrain?,
            call: call?,
            ret,
            assistant: text("assistant"),
            analysis: text("analysis"),
            json: text("json"),
            analysis_mask,
            answer_mask,
        })
    }
}

/// One generation's harmony automaton, as the decoder runs it.
#[derive(Clone, Debug)]
pub struct HarmonyPlan {
    pub(crate) facts: Arc<HarmonyFacts>,
    /// Tokens of thinking before `<|end|>` is forced (its opening counts).
    pub(crate) budget: usize,
    /// What may follow `<|channel|>` after thinking, as tokens: `final` (`None`), or
    /// the header of a call to `tools[i]` (`Some(i)`).
    pub(crate) headers: Arc<[(Vec<u32>, Option<usize>)]>,
    /// The callable tools' names and argument constraints.
    pub(crate) tools: Arc<[(String, Constraint)]>,
    /// Tokens thinking leaves for the header and the shortest answer or call.
    pub(crate) room: usize,
}

impl HarmonyPlan {
    /// The plan for a request: its answer under `answer` (or free), the calls `tools`
    /// allows, thinking within `budget` tokens. The argument constraints are cached by
    /// the model; a schema a tool's arguments cannot use is a refusal naming the tool.
    pub(crate) fn new(
        facts: Arc<HarmonyFacts>,
        lm: &LoadedModel,
        tools: Option<&ToolSet>,
        answer: Option<&Constraint>,
        budget: usize,
    ) -> Result<HarmonyPlan, Error> {
        let callable: Vec<_> = tools.map(|s| s.callable().collect()).unwrap_or_default();
        let answers = !tools.is_some_and(ToolSet::is_forced);
        let text = |s: &str| lm.tokenizer.encode(s.as_bytes(), false, false);
        let mut headers: Vec<(Vec<u32>, Option<usize>)> = callable
            .iter()
            .enumerate()
            .map(|(i, t)| (text(&format!("{CALL_HEADER}{} ", t.name)), Some(i)))
            .collect();
        if answers {
            headers.push((text("final"), None));
        }
        let mut args = Vec::with_capacity(callable.len());
        for t in &callable {
            let key = json!([t.name, t.parameters]).to_string();
            let c = lm
                .constraints
                .get_or_build("harmony-arguments", &key, |v| {
                    let mut b = GrammarBuilder::new();
                    let object = t.schema.lower_into(&mut b).map_err(|e| {
                        llamay_constrain::Error::Grammar {
                            msg: e.message,
                            at: None,
                        }
                    })?;
                    let root = b.rule("arguments", vec![vec![object]]);
                    Constraint::from_grammar(&b.build(root)?, v)
                })
                .map_err(|e| Error::refusal(format!("tool {}: {e}", t.name)).at("tools"))?;
            args.push((t.name.clone(), c));
        }
        let shortest = |c: &Constraint| c.matcher().min_bytes_to_accept().unwrap_or(1);
        let longest_header = headers.iter().map(|h| h.0.len()).max().unwrap_or(0);
        let answer_min = match (answers, answer) {
            (true, Some(c)) => shortest(c),
            (true, None) => 1,
            (false, _) => 0,
        };
        let body = args
            .iter()
            .map(|(_, c)| shortest(c))
            .fold(answer_min, usize::max);
        // `<|end|><|start|>assistant<|channel|>`, the header, `<|constrain|>json
        // <|message|>`, the body (in bytes: at least its tokens) and its end.
        let room = 4 + facts.assistant.len() + longest_header + 2 + facts.json.len() + body + 1;
        Ok(HarmonyPlan {
            facts,
            budget,
            headers: headers.into(),
            tools: args.into(),
            room,
        })
    }

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
