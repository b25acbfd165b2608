//! Each model family's way of writing a tool call, in one table.
//!
//! A model is trained to call tools in one written form, and its chat template says
//! which: the form a forced call is constrained to, the opener a strict `auto` call
//! is recognised by, and what the tool-call parser reads back. A template that does
//! not render tools gets our Hermes prompt, so its model is asked for Hermes calls.
//!
//! | family | a call | between calls |
//! |---|---|---|
//! | Hermes (Qwen 2.5, Qwen3, Hermes, SmolLM) | `<tool_call>\n{"name": …, "arguments": …}\n</tool_call>` | `\n` |
//! | Llama 3.1/3.2 | `{"name": …, "parameters": …}` (the whole answer) | `\n` |
//! | Mistral | `[TOOL_CALLS]` then `[{"name": …, "arguments": …}, …]` | `, ` inside the list |
//! | Gemma 4 | `<\|tool_call>call:NAME{key:value,…}<tool_call\|>`, strings between `<\|"\|>` | none |
//! | Qwen3-Coder XML (Qwen3-Coder, Qwen 3.5, Qwen 3.6) | `<tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n…</function>\n</tool_call>` | `\n` |
//!
//! In the XML form a string value is raw text (which cannot hold `</parameter>`),
//! any other value JSON; the parser reads each value back as its parameter's schema
//! types it (`3` for an integer is the number 3).
//!
//! Mistral's `[TOOL_CALLS]` and Llama's `<|python_tag|>` are control tokens, which a
//! grammar over text cannot write (the constraint's vocabulary leaves control tokens
//! out): a forced Mistral call is constrained from its list on, and the parser skips
//! either marker when the model writes it.

/// A family's tool-call form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallConvention {
    /// `<tool_call>` blocks holding `{"name": …, "arguments": …}`.
    Hermes,
    /// The answer is a JSON call, `{"name": …, "parameters": …}`.
    Llama3,
    /// `[TOOL_CALLS]` and a JSON list of `{"name": …, "arguments": …}`.
    Mistral,
    /// `<tool_call>` blocks holding `<function=NAME>` and one `<parameter=KEY>` per
    /// argument (Qwen3-Coder, Qwen 3.5).
    QwenXml,
    /// `<|tool_call>call:NAME{…}<tool_call|>` blocks, the arguments in Gemma's
    /// notation (Gemma 4).
    Gemma4,
}

/// How one convention's calls are written: what the call grammar emits.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CallForm {
    /// Written before the first call (and, for block forms, before each call).
    pub open: &'static str,
    /// Written after the last call (block forms: after each call).
    pub close: &'static str,
    /// Between two calls.
    pub between: &'static str,
    /// The arguments' key in the call object.
    pub args_key: &'static str,
    /// Every call sits in its own open…close block (else one list holds them all).
    pub blocks: bool,
    /// What a call's body is between open and close.
    pub body: CallBody,
}

/// The body of one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CallBody {
    /// `{"name": …, "<args_key>": {…}}`.
    Json,
    /// `<function=NAME>\n` and `<parameter=KEY>\nVALUE\n</parameter>\n` per argument,
    /// then `</function>`.
    Xml,
    /// `call:NAME{key:value,…}`, strings between `<|"|>`.
    Gemma,
}

/// Control-token markers that may precede calls in a model's output; the parser
/// skips them.
pub(crate) const MARKERS: [&str; 2] = ["[TOOL_CALLS]", "<|python_tag|>"];

impl CallConvention {
    /// The convention a chat template's text asks its model for; Hermes when it
    /// names none (our own tool prompt is Hermes).
    pub fn of_template(template: Option<&str>) -> CallConvention {
        let Some(t) = template else {
            return CallConvention::Hermes;
        };
        if t.contains("[TOOL_CALLS]") {
            CallConvention::Mistral
        } else if t.contains("<|tool_call>call:") {
            CallConvention::Gemma4
        } else if t.contains("<function=") {
            // Checked before Hermes: the XML form sits inside `<tool_call>` too.
            CallConvention::QwenXml
        } else if t.contains("<tool_call>") {
            CallConvention::Hermes
        } else if t.contains("<|python_tag|>")
            || (t.contains("<|start_header_id|>") && t.contains("\"parameters\""))
        {
            CallConvention::Llama3
        } else {
            CallConvention::Hermes
        }
    }

    /// Its name, as the enforcement report and cache keys spell it.
    pub fn name(self) -> &'static str {
        match self {
            CallConvention::Hermes => "hermes",
            CallConvention::Llama3 => "llama3",
            CallConvention::Mistral => "mistral",
            CallConvention::QwenXml => "qwen3-coder",
            CallConvention::Gemma4 => "gemma4",
        }
    }

    pub(crate) fn form(self) -> CallForm {
        match self {
            CallConvention::Hermes => CallForm {
                open: "<tool_call>\n",
                close: "\n</tool_call>",
                between: "\n",
                args_key: "arguments",
                blocks: true,
                body: CallBody::Json,
            },
            CallConvention::QwenXml => CallForm {
                open: "<tool_call>\n",
                close: "\n</tool_call>",
                between: "\n",
                args_key: "arguments",
                blocks: true,
                body: CallBody::Xml,
            },
            CallConvention::Gemma4 => CallForm {
                open: "<|tool_call>",
                close: "<tool_call|>",
                between: "",
                args_key: "arguments",
                blocks: true,
                body: CallBody::Gemma,
            },
            CallConvention::Llama3 => CallForm {
                open: "",
                close: "",
                between: "\n",
                args_key: "parameters",
                blocks: true,
                body: CallBody::Json,
            },
            CallConvention::Mistral => CallForm {
                open: "[",
                close: "]",
                between: ", ",
                args_key: "arguments",
                blocks: false,
                body: CallBody::Json,
            },
        }
    }

    /// The text that opens a call anywhere in a free answer, for strict `auto`; a
    /// convention whose calls are the whole answer has none (every family's calls are
    /// also found at the answer's start, see [`BARE_OPENER`]).
    pub(crate) fn opener(self) -> Option<&'static str> {
        match self {
            CallConvention::Hermes | CallConvention::QwenXml => Some("<tool_call>"),
            // The control token's text, as the tokenizer spells it.
            CallConvention::Mistral => Some("[TOOL_CALLS]"),
            CallConvention::Gemma4 => Some("<|tool_call>"),
            CallConvention::Llama3 => None,
        }
    }
}

/// How an answer that is a bare JSON call starts (after leading whitespace): small
/// models of every family write calls this way.
pub(crate) const BARE_OPENER: &str = "{\"name\"";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_name_their_family() {
        assert_eq!(CallConvention::of_template(None), CallConvention::Hermes);
        let qwen = "{%- if tools %}<tools></tools> <tool_call>\n{\"name\": <function-name>}</tool_call>{% endif %}";
        assert_eq!(
            CallConvention::of_template(Some(qwen)),
            CallConvention::Hermes
        );
        let mistral = "{%- if message.tool_calls %}[TOOL_CALLS] [{% for c in message.tool_calls %}";
        assert_eq!(
            CallConvention::of_template(Some(mistral)),
            CallConvention::Mistral
        );
        // Qwen3-Coder's and Qwen 3.5's: XML calls, inside `<tool_call>` too.
        let qwen_xml = "If you choose to call a function ONLY reply in the following format with NO suffix:\n\n<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n</function>\n</tool_call>";
        assert_eq!(
            CallConvention::of_template(Some(qwen_xml)),
            CallConvention::QwenXml
        );
        let chatml = "<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>";
        assert_eq!(
            CallConvention::of_template(Some(chatml)),
            CallConvention::Hermes
        );
    }

    #[test]
    fn real_templates_are_recognised() {
        // Qwen3's renders tools and asks for Hermes blocks; the Llama 3.1 config npm
        // carries is the tool-less Llama 3 template (so our Hermes prompt is used).
        for (name, want) in [
            ("qwen3", CallConvention::Hermes),
            ("llama3_1", CallConvention::Hermes),
        ] {
            let path = llamay_testdata::hf_tokenizer_config(name);
            let config: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            let src = config["chat_template"].as_str().unwrap();
            assert_eq!(CallConvention::of_template(Some(src)), want, "{name}");
        }
        // The tool turn of Meta's Llama 3.1 template, as published.
        let llama31 = "{%- if builtin_tools is defined or tool_choice is defined %}{{- \"<|python_tag|>\" }}{%- endif %}<|start_header_id|>user<|end_header_id|>\n\nRespond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}.";
        assert_eq!(
            CallConvention::of_template(Some(llama31)),
            CallConvention::Llama3
        );
    }
}
