//! A harmony vocabulary's markers and the masks its channels are written with (the
//! output side of the format; `generate::harmony` runs it).

use llamay_engine::{TokenType, Tokenizer};

/// Harmony's header markers: a vocabulary with all of them is a harmony model's.
pub(crate) const HARMONY_MARKERS: [&str; 5] = [
    "<|start|>",
    "<|channel|>",
    "<|message|>",
    "<|constrain|>",
    "<|call|>",
];

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
