//! What offered tools do to a request's constraint, decided once the model (and so
//! its [`Convention`]) is known:
//! - a forced choice: the output is calls, in the model's convention;
//! - `auto` beside a response constraint (a schema, JSON, a grammar): calls or an
//!   answer in that constraint's language, whichever the model starts;
//! - `auto` alone: free text, with every call the model opens held to the offered
//!   tools and their schemas from its opener on (strict `auto`).

use std::sync::Arc;

use llamay_constrain::{
    ByteDfa, Constraint, Grammar, GrammarBuilder, Lexicon, SchemaReport, Symbol,
};

use super::grammar::{beside, forced, one_call, Opener};
use super::ToolSet;
use crate::chat::CallConvention as Convention;
use crate::constraint::{AnswerKind, ConstraintSpec, SchemaGrammar};
use crate::error::Error;
use crate::generate::calls::{CallTriggers, Trigger};
use crate::loaded::LoadedModel;

/// The constraint a generation with tools runs under, and the call openers its free
/// text is watched for.
pub(crate) fn apply(
    set: &ToolSet,
    conv: Convention,
    asked: ConstraintSpec,
    lm: &LoadedModel,
) -> Result<(ConstraintSpec, Option<CallTriggers>), Error> {
    match (set.is_forced(), asked) {
        (false, ConstraintSpec::None) => Ok((ConstraintSpec::None, Some(triggers(set, conv, lm)?))),
        (_, asked) => Ok((set.shape(conv, asked)?, None)),
    }
}

impl ToolSet {
    /// What the tools make of a request's constraint in `conv`, before any model
    /// work: a forced choice's calls, or under `auto` calls-or-the-asked-answer (an
    /// `auto` request that asked for nothing stays unconstrained here: its calls are
    /// held from their opener on, by the decoder).
    pub fn shape(&self, conv: Convention, asked: ConstraintSpec) -> Result<ConstraintSpec, Error> {
        if self.is_forced() {
            return Ok(ConstraintSpec::Tools(Arc::new(forced(self, conv)?)));
        }
        let answer = |kind, grammar: &Grammar, key: &str, r: &SchemaReport| {
            let calls = beside(self, conv, grammar, key, r)?;
            Ok::<_, Error>(ConstraintSpec::ToolsOr(kind, Arc::new(calls)))
        };
        let bad = |e: llamay_constrain::Error| {
            Error::bad_request(format!("the constraint could not be compiled: {e}"))
        };
        let lexicon_answer = |l: &Lexicon, served: bool| {
            // A served lexicon is the same for the runtime's life; a request's own terms
            // are not worth a cache entry (an empty key: built, not cached).
            let key = if served {
                format!("lexicon {}", l.name())
            } else {
                String::new()
            };
            let g = dfa_grammar(l.dfa().clone()).map_err(bad)?;
            answer(AnswerKind::Lexicon, &g, &key, &SchemaReport::default())
        };
        Ok(match asked {
            ConstraintSpec::Schema(s) => answer(AnswerKind::Schema, &s.grammar, &s.key, &s.report)?,
            // The kind is also the cache key: the grammar is the same for every request.
            ConstraintSpec::Json => answer(
                AnswerKind::Json,
                &Grammar::json_object().map_err(bad)?,
                "json",
                &SchemaReport::default(),
            )?,
            ConstraintSpec::JsonValue => {
                let g = Grammar::any_json().map_err(bad)?;
                answer(
                    AnswerKind::JsonValue,
                    &g,
                    "json_value",
                    &SchemaReport::default(),
                )?
            }
            ConstraintSpec::Grammar(g) => answer(
                AnswerKind::Grammar,
                &g.grammar,
                &g.text,
                &SchemaReport::default(),
            )?,
            ConstraintSpec::Regex(pattern) => {
                let dfa = ByteDfa::shared(&pattern).map_err(bad)?;
                let key = format!("regex {pattern}");
                answer(
                    AnswerKind::Regex,
                    &dfa_grammar(dfa).map_err(bad)?,
                    &key,
                    &SchemaReport::default(),
                )?
            }
            ConstraintSpec::Choice(l) => lexicon_answer(&l, false)?,
            ConstraintSpec::Lexicon { lexicon, served } => lexicon_answer(&lexicon, served)?,
            other @ (ConstraintSpec::None
            | ConstraintSpec::Tools(_)
            | ConstraintSpec::ToolsOr(..)) => other,
        })
    }
}

/// Strict `auto`'s openers in `conv`: its own opener anywhere (when it has one), and a
/// bare JSON call at the answer's start.
fn triggers(set: &ToolSet, conv: Convention, lm: &LoadedModel) -> Result<CallTriggers, Error> {
    let build = |opener: Opener, ends_answer: bool| -> Result<Trigger, Error> {
        let g = one_call(set, conv, opener)?;
        Ok(Trigger {
            opener: opener.text().as_bytes().to_vec(),
            constraint: cached(lm, &g)?,
            ends_answer,
        })
    };
    let anywhere = match conv.opener() {
        Some(tag) => Some(build(Opener::Tag(tag), !conv.form().blocks)?),
        None => None,
    };
    Ok(CallTriggers {
        anywhere,
        at_start: Some(build(Opener::Bare, true)?),
        parallel: set.parallel,
    })
}

fn cached(lm: &LoadedModel, g: &SchemaGrammar) -> Result<Constraint, Error> {
    lm.constraints
        .get_or_build("tools", &g.key, |v| Constraint::from_grammar(&g.grammar, v))
        .map_err(|e| {
            Error::bad_request(format!("the tool call grammar could not be compiled: {e}"))
        })
}

/// A whole output matched by one automaton (a regex, a lexicon's trie) as a grammar.
fn dfa_grammar(dfa: Arc<ByteDfa>) -> llamay_constrain::Result<Grammar> {
    let mut b = GrammarBuilder::new();
    let root = b.rule("answer", vec![vec![Symbol::Regex(dfa)]]);
    b.build(root)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use llamay_constrain::{Constraint, Vocabulary};

    use super::super::{ToolChoice, ToolDef};
    use super::*;

    fn accepts(spec: &ConstraintSpec, text: &str) -> bool {
        let ConstraintSpec::ToolsOr(_, s) = spec else {
            panic!("{spec:?}")
        };
        let toks: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        let vocab = Arc::new(Vocabulary::new(toks, &[], &[]));
        let mut m = Constraint::from_grammar(&s.grammar, vocab)
            .unwrap()
            .matcher();
        m.commit_bytes(text.as_bytes()).is_ok() && m.is_accepting()
    }

    #[test]
    fn auto_tools_beside_a_regex_or_a_choice() {
        let set = ToolSet::new(
            vec![ToolDef::new("f", None, None).unwrap()],
            ToolChoice::Auto,
            false,
        )
        .unwrap()
        .unwrap();
        let call = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
        let regex = set
            .shape(Convention::Hermes, ConstraintSpec::Regex("[0-9]{3}".into()))
            .unwrap();
        assert_eq!(regex.kind(), "tools_or_regex");
        assert!(accepts(&regex, "123") && accepts(&regex, call));
        assert!(!accepts(&regex, "12") && !accepts(&regex, "abc"));
        let terms = ["yes".to_string(), "no".to_string()];
        let choice = llamay_constrain::Lexicon::from_terms("llamay_choice", &terms).unwrap();
        let choice = set
            .shape(Convention::Hermes, ConstraintSpec::Choice(Arc::new(choice)))
            .unwrap();
        assert!(accepts(&choice, "no") && accepts(&choice, call) && !accepts(&choice, "maybe"));
        // A request's own terms are not cached under a key another request could hit.
        let ConstraintSpec::ToolsOr(_, s) = &choice else {
            unreachable!()
        };
        assert!(s.key.is_empty());
    }
}
