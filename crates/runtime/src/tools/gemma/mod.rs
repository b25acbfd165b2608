//! Gemma 4's call form ([`CallBody::Gemma`]), as its chat template writes earlier
//! calls:
//!
//! ```text
//! <|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:3}<tool_call|>
//! ```
//!
//! The arguments are an object in Gemma's own notation: keys bare (sorted, as the
//! template's `dictsort` writes them), strings between `<|"|>` tokens, numbers and
//! booleans as in JSON, nested objects and lists the same way. [`read_call`] reads a
//! block's inside back into JSON arguments; [`grammar`] holds forced calls to it.
//!
//! [`CallBody::Gemma`]: crate::chat::CallBody::Gemma

pub(crate) mod grammar;

use serde_json::{Map, Value};

use super::{ToolCall, ToolSet};

pub(crate) const OPEN: &str = "<|tool_call>";
pub(crate) const CLOSE: &str = "<tool_call|>";
/// What a call's inside starts with, before the tool's name.
pub(crate) const CALL: &str = "call:";
/// The quote around a string.
pub(crate) const QUOTE: &str = "<|\"|>";

/// The call a `<|tool_call>` block's inside holds; why not, when it holds none.
pub(crate) fn read_call(inner: &str, set: &ToolSet) -> Result<ToolCall, String> {
    let body = inner
        .trim()
        .strip_prefix(CALL)
        .ok_or_else(|| format!("a call starts with {CALL:?}"))?;
    let brace = body.find('{').ok_or("no '{' opens the arguments")?;
    let name = &body[..brace];
    if set.get(name).is_none() {
        return Err(format!("tool {name:?} was not offered"));
    }
    let mut p = Parser {
        text: &body[brace..],
        at: 0,
    };
    let args = p.value(0)?;
    if p.at != p.text.len() {
        return Err(format!("text after the arguments: {:?}", &p.text[p.at..]));
    }
    let Value::Object(_) = args else {
        return Err("the arguments are not an object".into());
    };
    Ok(ToolCall::new(name, args))
}

/// Deepest nesting read: deeper arguments are refused, never a stack overflow.
const MAX_DEPTH: usize = 64;

struct Parser<'a> {
    text: &'a str,
    at: usize,
}

impl Parser<'_> {
    fn rest(&self) -> &str {
        &self.text[self.at..]
    }

    fn eat(&mut self, s: &str) -> bool {
        let found = self.rest().starts_with(s);
        if found {
            self.at += s.len();
        }
        found
    }

    fn value(&mut self, depth: usize) -> Result<Value, String> {
        if depth > MAX_DEPTH {
            return Err("the arguments nest too deep".into());
        }
        if self.eat(QUOTE) {
            return Ok(Value::String(self.string()?));
        }
        if self.eat("{") {
            let mut map = Map::new();
            if self.eat("}") {
                return Ok(Value::Object(map));
            }
            loop {
                let key = match self.eat(QUOTE) {
                    true => self.string()?,
                    false => {
                        let end = self.rest().find(':').ok_or("a key without ':'")?;
                        let key = self.rest()[..end].to_string();
                        self.at += end;
                        key
                    }
                };
                if !self.eat(":") {
                    return Err(format!("expected ':' after the key {key:?}"));
                }
                let v = self.value(depth + 1)?;
                map.insert(key, v);
                if self.eat("}") {
                    return Ok(Value::Object(map));
                }
                if !self.eat(",") {
                    return Err("expected ',' or '}'".into());
                }
            }
        }
        if self.eat("[") {
            let mut items = Vec::new();
            if self.eat("]") {
                return Ok(Value::Array(items));
            }
            loop {
                items.push(self.value(depth + 1)?);
                if self.eat("]") {
                    return Ok(Value::Array(items));
                }
                if !self.eat(",") {
                    return Err("expected ',' or ']'".into());
                }
            }
        }
        // A number or a literal, up to what ends a value.
        let end = self
            .rest()
            .find([',', '}', ']'])
            .unwrap_or(self.rest().len());
        let text = self.text;
        let word = text[self.at..self.at + end].trim();
        self.at += end;
        // Python's and minijinja's spellings of none, as a template writes them.
        if matches!(word, "None" | "none") {
            return Ok(Value::Null);
        }
        serde_json::from_str::<Value>(word)
            .ok()
            .filter(|v| !v.is_object() && !v.is_array() && !v.is_string())
            .ok_or_else(|| format!("{word:?} is not a value"))
    }

    /// A string's text, after its opening quote, up to and past its closing one.
    fn string(&mut self) -> Result<String, String> {
        let end = self.rest().find(QUOTE).ok_or("a string is not closed")?;
        let s = self.rest()[..end].to_string();
        self.at += end + QUOTE.len();
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::{parse, ToolChoice, ToolDef};
    use super::*;
    use crate::chat::{
        ChatMessage, ChatTemplate, RenderOptions, ToolCallFunction, ToolCallMessage,
    };

    fn set() -> std::sync::Arc<ToolSet> {
        let t = ToolDef::new("get_weather", None, None).unwrap();
        ToolSet::new(vec![t], ToolChoice::Auto, true)
            .unwrap()
            .unwrap()
    }

    /// Gemma 4's own template, from llama.cpp's Gemma 4 vocabulary file.
    fn real_template() -> String {
        let path = llamay_testdata::llamacpp_vocab("gemma-4");
        let file = llamay_engine::GgufFile::open(&path).unwrap();
        file.opt_str("tokenizer.chat_template")
            .unwrap()
            .expect("the Gemma 4 vocabulary carries its template")
            .to_string()
    }

    #[test]
    fn calls_the_real_template_writes_read_back_as_the_same_arguments() {
        let src = real_template();
        assert_eq!(
            crate::chat::CallConvention::of_template(Some(&src)),
            crate::chat::CallConvention::Gemma4
        );
        let args = json!({"city": "Saint-Étienne, <b>: {x}", "days": 3, "metric": true,
            "at": {"lat": 45.4, "tags": ["a", "b"]}, "Zone": "z", "empty": {}, "list": []});
        let mut turn = ChatMessage::new("assistant", "");
        let call = |arguments: &Value| ToolCallMessage {
            id: "call_1".into(),
            kind: "function".into(),
            function: ToolCallFunction {
                name: "get_weather".into(),
                arguments: arguments.clone(),
            },
        };
        turn.tool_calls = vec![call(&args), call(&json!({"days": -1.5}))];
        let t = ChatTemplate::new(&src).unwrap();
        let text = t
            .render(
                &[ChatMessage::new("user", "Weather?"), turn],
                &RenderOptions::default(),
            )
            .unwrap();
        let reply = text
            .split("<|turn>model\n")
            .nth(1)
            .and_then(|r| r.strip_suffix("<turn|>\n"))
            .unwrap_or_else(|| panic!("{text}"));
        assert!(
            reply.starts_with("<|tool_call>call:get_weather{at:{lat:45.4,tags:[<|\"|>a<|\"|>,<|\"|>b<|\"|>]},city:<|\"|>Saint"),
            "{reply}"
        );
        let p = parse(reply, &set());
        assert_eq!(p.content, None);
        assert_eq!(p.calls.len(), 2, "{reply}");
        assert_eq!(p.calls[0].arguments, args);
        assert_eq!(p.calls[1].arguments, json!({"days": -1.5}));
    }

    #[test]
    fn a_forced_call_writes_gemmas_own_tokens() {
        use llamay_constrain::{Constraint, TokenMask, Vocabulary};
        let path = llamay_testdata::llamacpp_vocab("gemma-4");
        let tok =
            llamay_engine::Tokenizer::from_gguf(&llamay_engine::GgufFile::open(&path).unwrap())
                .unwrap();
        let vocab = Vocabulary::new(tok.vocab_bytes(), tok.eog_ids(), &tok.control_ids());
        let params = json!({"type": "object", "properties": {"city": {"type": "string"}},
            "required": ["city"]});
        let t = ToolDef::new("get_weather", None, Some(params)).unwrap();
        let set = ToolSet::new(vec![t], ToolChoice::Required, false)
            .unwrap()
            .unwrap();
        let g = super::super::grammar::forced(&set, crate::chat::CallConvention::Gemma4).unwrap();
        let mut m = Constraint::from_grammar(&g.grammar, std::sync::Arc::new(vocab))
            .unwrap()
            .matcher();
        let mut mask = TokenMask::new(tok.n_vocab());
        // The call opens with the `<|tool_call>` token and a string with `<|"|>`'s.
        for (text, then) in [("", OPEN), ("call:get_weather{city:", QUOTE)] {
            for id in tok.encode(text.as_bytes(), false, false) {
                m.commit(id).unwrap();
            }
            m.mask(&mut mask);
            let id = tok.token_id(then).unwrap();
            assert!(mask.allowed().any(|a| a == id), "{then} after {text:?}");
            m.commit(id).unwrap();
        }
    }

    #[test]
    fn what_is_not_a_call_is_an_error() {
        let s = set();
        for bad in [
            "get_weather{}",
            "call:get_weather",
            "call:rm_rf{}",
            "call:get_weather{a:<|\"|>open}",
            "call:get_weather{a:1",
            "call:get_weather{a 1}",
            "call:get_weather{a:one}",
            "call:get_weather{}x",
            "call:get_weather[1]",
        ] {
            assert!(read_call(bad, &s).is_err(), "{bad}");
        }
        assert_eq!(
            read_call("call:get_weather{a:None,b:null}", &s)
                .unwrap()
                .arguments,
            json!({"a": null, "b": null})
        );
        let deep = format!(
            "call:get_weather{{a:{}1{}}}",
            "[".repeat(100),
            "]".repeat(100)
        );
        assert!(read_call(&deep, &s).unwrap_err().contains("deep"));
        // In a whole answer: dropped, text around kept, a cut block no content.
        let p = parse("Sure.<|tool_call>call:rm_rf{}<tool_call|>", &s);
        assert_eq!((p.content.as_deref(), p.calls.len()), (Some("Sure."), 0));
        let p = parse("Sure.<|tool_call>call:get_wea", &s);
        assert_eq!((p.content.as_deref(), p.calls.len()), (Some("Sure."), 0));
    }
}
