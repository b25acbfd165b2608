//! What the fuzz targets share: a small vocabulary, a bounded walk through a
//! constraint that checks the matcher's invariants at every step, and the
//! conversation the template targets render.

use llamay_constrain::{Constraint, TokenMask, Vocabulary};
use llamay_runtime::{ChatMessage, ToolCallFunction, ToolCallMessage};
use std::sync::{Arc, OnceLock};

/// System, user, an assistant tool call, a tool result, and tools to offer.
pub fn conversation() -> &'static (Vec<ChatMessage>, serde_json::Value) {
    static C: OnceLock<(Vec<ChatMessage>, serde_json::Value)> = OnceLock::new();
    C.get_or_init(|| {
        let call = ChatMessage {
            role: "assistant".into(),
            content: None,
            tool_calls: vec![ToolCallMessage {
                id: "call_1".into(),
                kind: "function".into(),
                function: ToolCallFunction {
                    name: "weather".into(),
                    arguments: serde_json::json!({"city": "Paris"}),
                },
            }],
            ..ChatMessage::default()
        };
        let result = ChatMessage {
            role: "tool".into(),
            content: Some("{\"c\": 21}".into()),
            tool_call_id: Some("call_1".into()),
            name: Some("weather".into()),
            ..ChatMessage::default()
        };
        let messages = vec![
            ChatMessage::new("system", "Be brief."),
            ChatMessage::new("user", "Weather in Paris? ü 😀"),
            call,
            result,
            ChatMessage::new("assistant", "21 °C."),
            ChatMessage::new("user", "Thanks"),
        ];
        let tools = serde_json::json!([{"type": "function", "function": {
            "name": "weather", "description": "Current weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]);
        (messages, tools)
    })
}

/// Multi-byte tokens beside the 256 single bytes: JSON structure, escapes, UTF-8,
/// words, whitespace runs (so masks have tokens that cross terminals).
const MULTI: &[&str] = &[
    "{\"", "\":", "\": ", "\",", "\"}", "},", "],", "[{", "}]", "true", "false", "null", "\\u00",
    "\\n", "\\\"", "12", "0.5", "-1", "1e", "é", "😀", "  ", "\n  ", " the", "name", "\"\"", "{}",
    "[]", "::=", "ab",
];

/// The 256 single bytes, [`MULTI`], then the end-of-generation token.
pub fn vocab() -> &'static Arc<Vocabulary> {
    static VOCAB: OnceLock<Arc<Vocabulary>> = OnceLock::new();
    VOCAB.get_or_init(|| {
        let mut toks: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        toks.extend(MULTI.iter().map(|t| t.as_bytes().to_vec()));
        let eog = toks.len() as u32;
        toks.push(b"</s>".to_vec());
        Arc::new(Vocabulary::new(toks, &[eog], &[]))
    })
}

/// The end-of-generation token of [`vocab`].
pub fn eog() -> u32 {
    vocab().len() as u32 - 1
}

/// Splits a fuzz input at its first NUL byte: the text before it (a schema, a grammar:
/// text where a raw NUL means nothing) and the walk's choices after it.
pub fn split_input(data: &[u8]) -> (&[u8], &[u8]) {
    match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[]),
    }
}

/// Where a walk got to.
pub struct Walk {
    /// The text committed.
    pub bytes: Vec<u8>,
    /// Ended by the end token (so `bytes` is a whole document).
    pub finished: bool,
}

/// Walks `c` for at most `steps` tokens, each picked among the allowed ones by the next
/// byte of `choices` (the end token as soon as allowed once they run out). Panics on a
/// broken invariant: a state that allows nothing, the end token allowed when not
/// accepting (or refused when accepting), an allowed token whose commit fails, or a
/// finished text that a fresh matcher fed byte by byte does not accept.
pub fn walk(c: &Constraint, choices: &[u8], steps: usize) -> Walk {
    let vocab = c.vocab();
    let mut m = c.matcher();
    let mut mask = TokenMask::new(vocab.len());
    let mut bytes = Vec::new();
    let mut choices = choices.iter().copied();
    for _ in 0..steps {
        m.mask(&mut mask);
        let shown = || String::from_utf8_lossy(&bytes).into_owned();
        let allowed: Vec<u32> = mask.allowed().collect();
        assert!(!allowed.is_empty(), "dead end after {:?}", shown());
        assert_eq!(
            mask.is_allowed(eog()),
            m.is_accepting(),
            "end token allowed != accepting after {:?}",
            shown()
        );
        let pick = match choices.next() {
            Some(b) => allowed[b as usize % allowed.len()],
            None if mask.is_allowed(eog()) => eog(),
            // Out of choices: the shortest way out is not known here, so the first
            // allowed token (bytes come first, so usually a closing byte).
            None => allowed[0],
        };
        m.commit(pick)
            .unwrap_or_else(|e| panic!("allowed token {pick} refused after {:?}: {e}", shown()));
        if pick == eog() {
            assert!(m.is_finished(), "not finished after the end token");
            let mut fresh = c.matcher();
            fresh
                .commit_bytes(&bytes)
                .unwrap_or_else(|e| panic!("{:?} refused byte by byte: {e}", shown()));
            assert!(
                fresh.is_accepting(),
                "{:?} not accepted byte by byte",
                shown()
            );
            return Walk {
                bytes,
                finished: true,
            };
        }
        bytes.extend_from_slice(vocab.token_bytes(pick).unwrap());
    }
    Walk {
        bytes,
        finished: false,
    }
}

/// Whether every number outside strings in JSON text has at most 15 significant digits
/// and a one-digit exponent, so an `f64` (serde_json's number) holds it exactly enough
/// for bounds and integrality.
pub fn numbers_fit_f64(doc: &[u8]) -> bool {
    let (mut in_string, mut escaped) = (false, false);
    let (mut digits, mut exponent, mut in_exponent) = (0, 0, false);
    for &b in doc {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'0'..=b'9' if in_exponent => exponent += 1,
            b'0'..=b'9' => digits += 1,
            b'e' | b'E' => in_exponent = true,
            b'.' | b'-' | b'+' => {}
            _ => (digits, exponent, in_exponent) = (0, 0, false),
        }
        if digits > 15 || exponent > 1 {
            return false;
        }
    }
    true
}
