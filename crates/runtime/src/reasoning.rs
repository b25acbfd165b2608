//! Reasoning models: "free to think, strict to answer".
//!
//! A family's thinking convention (its markers, and the template variable that turns
//! thinking off) is kept in [`CONVENTIONS`], the one table to extend for a new family.
//! A loaded model whose chat template and vocabulary follow a convention gets
//! [`ThinkingFacts`]; a request's [`ThinkingAsk`] (the toggles and budgets of every API
//! shape) is checked against them before any model work, and becomes a [`ThinkPlan`]
//! the decoder runs as one automaton: the opening marker (forced when the prompt did
//! not write it), free text (control tokens excluded) until the closing marker (forced
//! once the budget is spent), then the answer under the request's constraint, where
//! the closing marker can never be written again, as a token or spelled out in bytes
//! ([`MarkerGuard`]).

use std::sync::Arc;

use llamay_engine::Tokenizer;
use serde_json::Value;

use crate::error::Error;

/// One family's thinking convention.
#[derive(Debug)]
pub struct Convention {
    pub family: &'static str,
    /// The markers around the thinking text (each one token in the vocabulary).
    pub open: &'static str,
    pub close: &'static str,
    /// The chat-template variable that turns thinking off when false (Qwen3's
    /// `enable_thinking`); `None`: the family always thinks.
    pub toggle: Option<&'static str>,
    /// Whether the family thinks when a request does not say (Qwen3 does; Gemma 4's
    /// template thinks only when `enable_thinking` is true).
    pub default_on: bool,
    /// Text the model writes right after the opening marker, before its thoughts
    /// (Gemma 4's channel name `thought\n`): forced, and not part of the reasoning.
    pub header: &'static str,
    /// Whether a chat template is this family's (given it mentions the markers).
    pub template_is: fn(&str) -> bool,
}

/// The known conventions, most specific first.
pub(crate) const CONVENTIONS: &[Convention] = &[
    Convention {
        family: "qwen3",
        open: "<think>",
        close: "</think>",
        toggle: Some("enable_thinking"),
        default_on: true,
        header: "",
        template_is: |t| t.contains("enable_thinking"),
    },
    Convention {
        family: "deepseek-r1",
        open: "<think>",
        close: "</think>",
        toggle: None,
        default_on: true,
        header: "",
        template_is: |t| t.contains("<｜Assistant｜>"),
    },
    // Gemma 4: thoughts are the `thought` channel, `<|channel>thought\n…<channel|>`;
    // its template asks for them with `<|think|>` in the system turn when
    // `enable_thinking` is true, and otherwise closes an empty channel itself.
    Convention {
        family: "gemma4",
        open: "<|channel>",
        close: "<channel|>",
        toggle: Some("enable_thinking"),
        default_on: false,
        header: "thought\n",
        template_is: |t| t.contains("<|channel>thought"),
    },
];

/// gpt-oss's harmony format: thinking is the `analysis` channel, which the model always
/// writes (harmony has no toggle; `reasoning_effort` goes to the system message). Not
/// in [`CONVENTIONS`]: a harmony model is known by its vocabulary's markers, and its
/// output runs as `crate::harmony` describes, not through [`ThinkingFacts`].
pub(crate) const HARMONY: Convention = Convention {
    family: "gpt-oss",
    open: "<|channel|>analysis<|message|>",
    close: "<|end|>",
    toggle: None,
    default_on: true,
    header: "",
    template_is: |_| false,
};

/// The convention a model follows, from its chat template and vocabulary.
pub(crate) fn convention_of(
    template: Option<&str>,
    token_id: impl Fn(&str) -> Option<u32>,
) -> Option<&'static Convention> {
    let t = template?;
    CONVENTIONS.iter().find(|c| {
        t.contains(c.close)
            && (c.template_is)(t)
            && token_id(c.open).is_some()
            && token_id(c.close).is_some()
    })
}

/// What a loaded model's convention comes to for its vocabulary.
#[derive(Debug)]
pub struct ThinkingFacts {
    pub convention: &'static Convention,
    pub open: u32,
    pub close: u32,
    /// The convention's header as token ids, forced after the opening marker.
    pub header: Vec<u32>,
    /// Tokens allowed while thinking: all but control tokens and the opening marker.
    pub free: Vec<u64>,
    pub guard: MarkerGuard,
}

impl ThinkingFacts {
    pub fn new(tok: &Tokenizer, n_vocab: usize, template: Option<&str>) -> Option<ThinkingFacts> {
        let convention = convention_of(template, |s| tok.token_id(s))?;
        let open = tok.token_id(convention.open)?;
        let close = tok.token_id(convention.close)?;
        let mut free = vec![u64::MAX; n_vocab.div_ceil(64)];
        let words = free.len();
        let mut clear = |t: u32| free[(t >> 6) as usize] &= !(1u64 << (t & 63));
        for t in n_vocab as u32..(words * 64) as u32 {
            clear(t);
        }
        for t in tok.control_ids() {
            if (t as usize) < n_vocab {
                clear(t);
            }
        }
        clear(open);
        let pieces: Vec<&[u8]> = (0..n_vocab as u32).map(|t| tok.token_bytes(t)).collect();
        let guard = MarkerGuard::new(convention.close.as_bytes(), &pieces, &[open, close]);
        Some(ThinkingFacts {
            convention,
            open,
            close,
            header: tok.encode(convention.header.as_bytes(), false, false),
            free,
            guard,
        })
    }
}

/// Keeps a marker out of an answer: a KMP automaton over the answer's bytes, and per
/// state the tokens that would complete the marker from there (a whole marker token,
/// or `</th` + `ink>`).
#[derive(Debug)]
pub struct MarkerGuard {
    marker: Vec<u8>,
    /// KMP failure function of `marker`.
    fail: Vec<usize>,
    /// `banned[k]`: tokens that complete the marker from state `k`.
    banned: Vec<Vec<u32>>,
}

impl MarkerGuard {
    /// `always` are banned in every state (the marker tokens themselves).
    pub fn new(marker: &[u8], pieces: &[&[u8]], always: &[u32]) -> MarkerGuard {
        let mut fail = vec![0; marker.len()];
        let mut k = 0;
        for i in 1..marker.len() {
            while k > 0 && marker[i] != marker[k] {
                k = fail[k - 1];
            }
            if marker[i] == marker[k] {
                k += 1;
            }
            fail[i] = k;
        }
        let mut g = MarkerGuard {
            marker: marker.to_vec(),
            fail,
            banned: vec![Vec::new(); marker.len()],
        };
        for (t, bytes) in pieces.iter().enumerate() {
            // Only a token holding the marker's last byte can complete it.
            if !bytes.contains(marker.last().unwrap_or(&0)) {
                continue;
            }
            for k in 0..marker.len() {
                if g.completes(k, bytes) {
                    g.banned[k].push(t as u32);
                }
            }
        }
        for list in &mut g.banned {
            list.extend_from_slice(always);
            list.sort_unstable();
            list.dedup();
        }
        g
    }

    fn completes(&self, mut k: usize, bytes: &[u8]) -> bool {
        for &b in bytes {
            k = self.next(k, b);
            if k == self.marker.len() {
                return true;
            }
        }
        false
    }

    fn next(&self, mut k: usize, b: u8) -> usize {
        while k > 0 && self.marker[k] != b {
            k = self.fail[k - 1];
        }
        if self.marker[k] == b {
            k + 1
        } else {
            0
        }
    }

    /// The state after `bytes` (which must not complete the marker).
    pub fn advance(&self, mut k: usize, bytes: &[u8]) -> usize {
        for &b in bytes {
            k = self.next(k, b);
            if k == self.marker.len() {
                // Only reachable through forced bytes; start over rather than panic.
                k = 0;
            }
        }
        k
    }

    /// Tokens that must not come next in state `k`.
    pub fn banned(&self, k: usize) -> &[u32] {
        &self.banned[k.min(self.banned.len() - 1)]
    }
}

/// What a request asked of thinking, by the field that asked (named in refusals).
#[derive(Clone, Debug, Default)]
pub struct ThinkingAsk {
    /// `Some(false)`: thinking off; `Some(true)`: on; `None`: the model's default.
    pub enabled: Option<bool>,
    /// Most tokens of thinking.
    pub budget: Option<usize>,
    /// The field that asked (`reasoning_effort`, `think`, `thinking`…).
    pub field: &'static str,
    /// An effort level asked by name, as harmony's system message says it (`low`,
    /// `medium`, `high`).
    pub effort: Option<&'static str>,
}

impl ThinkingAsk {
    /// An OpenAI `reasoning_effort` / `reasoning.effort`: `none` turns thinking off;
    /// `minimal`, `low`, `medium`, `high` (`xhigh`) give a budget of an eighth, a
    /// quarter, half, three quarters of the token limit.
    pub fn from_effort(
        field: &'static str,
        effort: &str,
        max_tokens: usize,
    ) -> Result<ThinkingAsk, Error> {
        let share = match effort {
            "none" => {
                return Ok(ThinkingAsk {
                    enabled: Some(false),
                    budget: None,
                    field,
                    effort: None,
                })
            }
            "minimal" => 1.0 / 8.0,
            "low" => 0.25,
            "medium" => 0.5,
            "high" | "xhigh" => 0.75,
            other => {
                return Err(Error::bad_request(format!(
                    "{field} must be one of none, minimal, low, medium, high, not {other:?}"
                )))
            }
        };
        Ok(ThinkingAsk {
            enabled: Some(true),
            budget: Some(((max_tokens as f64 * share) as usize).max(1)),
            field,
            // Harmony knows three levels: the nearest one.
            effort: Some(match effort {
                "minimal" | "low" => "low",
                "medium" => "medium",
                _ => "high",
            }),
        })
    }

    /// Reads `chat_template_kwargs.enable_thinking`, which is also a toggle.
    pub fn from_template_kwargs(kwargs: Option<&serde_json::Map<String, Value>>) -> ThinkingAsk {
        ThinkingAsk {
            enabled: kwargs
                .and_then(|k| k.get("enable_thinking"))
                .and_then(Value::as_bool),
            budget: None,
            field: "chat_template_kwargs.enable_thinking",
            effort: None,
        }
    }

    /// `self`, unless it asks nothing and `other` does.
    pub fn or(self, other: ThinkingAsk) -> ThinkingAsk {
        if self.enabled.is_some() || self.budget.is_some() {
            self
        } else {
            other
        }
    }

    fn asks(&self) -> bool {
        self.enabled.is_some() || self.budget.is_some()
    }
}

/// How a generation starts, for a model with a thinking convention.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThinkStart {
    /// The opening marker is forced first, then thinking.
    Open,
    /// The prompt opened thinking already.
    Thinking,
    /// No thinking: the answer from the first token (the prompt closed thinking).
    Answer,
}

/// A generation's thinking, as the decoder runs it.
#[derive(Clone, Debug)]
pub struct ThinkPlan {
    pub facts: Arc<ThinkingFacts>,
    pub start: ThinkStart,
    /// Tokens of thinking before the closing marker is forced (the opening marker
    /// counts, the closing one does not).
    pub budget: usize,
}

/// The checked ask: whether to think, the budget, and the template variable to set.
pub(crate) struct Decided {
    pub enabled: bool,
    pub budget: usize,
    /// `(variable, value)` for the chat template.
    pub kwarg: Option<(&'static str, bool)>,
}

/// Checks `ask` against the model's convention: a toggle or budget for a model without
/// a thinking mode, or turning off a family that always thinks, is a 400 naming it.
pub(crate) fn decide(
    convention: Option<&Convention>,
    ask: &ThinkingAsk,
    model: &str,
    max_tokens: usize,
) -> Result<Option<Decided>, Error> {
    let Some(c) = convention else {
        if ask.asks() {
            return Err(Error::bad_request(format!(
                "model {model} has no thinking mode (capability \"thinking\"), so {} cannot \
                 be honoured; see /v1/catalog/models",
                ask.field
            )));
        }
        return Ok(None);
    };
    let enabled = ask.enabled.unwrap_or(c.default_on);
    if !enabled && c.toggle.is_none() {
        return Err(Error::bad_request(format!(
            "model {model} always thinks ({} convention): it has no thinking toggle \
             (capability \"thinking_toggle\"), so {} cannot turn it off",
            c.family, ask.field
        )));
    }
    if let Some(b) = ask.budget {
        if b == 0 || b >= max_tokens {
            return Err(Error::bad_request(format!(
                "{}: a thinking budget of {b} tokens must be at least 1 and below the token \
                 limit ({max_tokens})",
                ask.field
            )));
        }
    }
    Ok(Some(Decided {
        enabled,
        // By default half the limit: the rest is the answer's.
        budget: ask.budget.unwrap_or((max_tokens / 2).max(1)),
        kwarg: c.toggle.map(|v| (v, enabled)),
    }))
}

/// Where the rendered prompt leaves the model: after an opening marker (thinking
/// already), after a closing one (thinking off), or neither.
pub(crate) fn start_of(c: &Convention, rendered: &str, enabled: bool) -> ThinkStart {
    let tail = rendered.trim_end();
    if tail.ends_with(c.close) {
        ThinkStart::Answer
    } else if tail.ends_with(c.open) {
        ThinkStart::Thinking
    } else if enabled {
        ThinkStart::Open
    } else {
        ThinkStart::Answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guard_bans_every_way_to_complete_the_marker() {
        let pieces: Vec<&[u8]> = vec![b"</think>", b"</th", b"ink>", b"k>", b"x", b">", b"<"];
        let g = MarkerGuard::new(b"</think>", &pieces, &[0]);
        assert_eq!(g.banned(0), &[0]);
        let k = g.advance(0, b"</th");
        assert_eq!(g.banned(k), &[0, 2]);
        let k = g.advance(k, b"in");
        assert_eq!(g.banned(k), &[0, 3]);
        let k = g.advance(k, b"x");
        assert_eq!(k, 0);
        // A restart inside the marker: `<</think` then `>`.
        let k = g.advance(0, b"<</think");
        assert_eq!(g.banned(k), &[0, 5]);
    }

    #[test]
    fn conventions_and_asks() {
        let q = convention_of(
            Some("{%- if enable_thinking is false %}<think>\n\n</think>{% endif %}"),
            |_| Some(1),
        )
        .unwrap();
        assert_eq!(q.family, "qwen3");
        assert!(convention_of(Some("<|im_start|>"), |_| Some(1)).is_none());
        assert!(convention_of(Some("enable_thinking </think>"), |_| None).is_none());
        assert_eq!(
            start_of(q, "a<think>\n\n</think>\n\n", false),
            ThinkStart::Answer
        );
        assert_eq!(
            start_of(q, "assistant\n<think>\n", true),
            ThinkStart::Thinking
        );
        assert_eq!(start_of(q, "assistant\n", true), ThinkStart::Open);
        let e = ThinkingAsk::from_effort("reasoning_effort", "low", 100).unwrap();
        assert_eq!((e.enabled, e.budget), (Some(true), Some(25)));
        assert!(ThinkingAsk::from_effort("reasoning_effort", "max", 100).is_err());
        let off = ThinkingAsk::from_effort("reasoning_effort", "none", 100).unwrap();
        let e = decide(None, &off, "m", 100).err().unwrap();
        assert!(e.message.contains("reasoning_effort"), "{}", e.message);
        assert!(decide(None, &ThinkingAsk::default(), "m", 100)
            .unwrap()
            .is_none());
    }

    /// Gemma 4 (its template and vocabulary from llama.cpp's vocabulary file): known
    /// by its `thought` channel, off unless asked (its template's default), the
    /// channel name forced as a header; the template's renderings (checked against
    /// jinja2 in `tests/jinja_reference.rs`) leave the model where `start_of` says.
    #[test]
    fn gemma4_thinks_in_its_thought_channel_when_asked() {
        let f = llamay_engine::GgufFile::open(llamay_testdata::llamacpp_vocab("gemma-4")).unwrap();
        let template = f.get_str("tokenizer.chat_template").unwrap();
        let tok = Tokenizer::from_gguf(&f).unwrap();
        let facts = ThinkingFacts::new(&tok, tok.n_vocab(), Some(template)).unwrap();
        let c = facts.convention;
        assert_eq!(c.family, "gemma4");
        assert_eq!(tok.decode(&facts.header), b"thought\n");
        assert_eq!(tok.token_bytes(facts.open), b"<|channel>");
        let d = decide(Some(c), &ThinkingAsk::default(), "m", 100)
            .unwrap()
            .unwrap();
        assert_eq!(
            (d.enabled, d.kwarg),
            (false, Some(("enable_thinking", false)))
        );
        let on = ThinkingAsk::from_effort("reasoning_effort", "high", 100).unwrap();
        let d = decide(Some(c), &on, "m", 100).unwrap().unwrap();
        assert_eq!(d.kwarg, Some(("enable_thinking", true)));
        let reference: Value = serde_json::from_str(
            &std::fs::read_to_string(
                llamay_testdata::repo_root().join("crates/testdata/ref/jinja/gemma-4.json"),
            )
            .unwrap(),
        )
        .unwrap();
        for case in reference["cases"].as_array().unwrap() {
            let enabled = case["kwargs"]["enable_thinking"].as_bool().unwrap();
            let want = match enabled {
                true => ThinkStart::Open,
                false => ThinkStart::Answer,
            };
            let rendered = case["rendered"].as_str().unwrap();
            assert_eq!(start_of(c, rendered, enabled), want, "{}", case["name"]);
        }
    }
}
