//! A request's [`HarmonyPlan`] (see `generate::harmony`): the header alternatives its
//! tool choice allows, each callable tool's argument constraint, and the room
//! thinking leaves them.

use std::sync::Arc;

use llamay_constrain::{Constraint, GrammarBuilder};
use serde_json::json;

use super::grammar::head;
use super::ToolSet;
use crate::chat::HarmonyFacts;
use crate::error::Error;
use crate::generate::HarmonyPlan;
use crate::loaded::LoadedModel;

/// The channels of a chat on `lm` without tools (`llamay run`), for
/// [`generate_continuing`](crate::generate_continuing): thinking within half of
/// `max_tokens`, then the answer under `answer`. `None` unless `lm` is a harmony model.
pub fn chat_channels(
    lm: &LoadedModel,
    answer: Option<&Constraint>,
    max_tokens: usize,
) -> Result<Option<HarmonyPlan>, Error> {
    let Some(facts) = lm.harmony.clone() else {
        return Ok(None);
    };
    plan(facts, lm, None, answer, (max_tokens / 2).max(1)).map(Some)
}

/// The prefix of a call's header, before the tool's name.
pub(crate) const CALL_HEADER: &str = "commentary to=functions.";

/// The plan for a request: its answer under `answer` (or free), the calls `tools`
/// allows, thinking within `budget` tokens. The argument constraints are cached by
/// the model; a schema a tool's arguments cannot use is a refusal naming the tool.
pub(crate) fn plan(
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
        let c =
            lm.constraints
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
        let opening = format!("<tool_call>\n{}", head(&t.name, "arguments"));
        args.push((opening.into_bytes(), c));
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
