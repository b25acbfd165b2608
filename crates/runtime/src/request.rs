//! The one internal request every API shape translates into, and the events a
//! generation sends back. No API module sees another's wire format: they meet here.

use std::sync::Arc;
use std::time::Duration;

use llamay_constrain::MatcherStats;

use crate::chat::ChatMessage;
use crate::constraint::{EnforcementReport, Surfaces};
use crate::generate::{Finish, GenerationParams};
use crate::reasoning::ThinkingAsk;
use crate::tools::{ToolCall, ToolSet};

/// What the model is given.
#[derive(Clone, Debug)]
pub enum Prompt {
    /// A conversation, rendered with the model's chat template.
    Chat(Vec<ChatMessage>),
    /// Text fed as it is (with the BOS the model wants).
    Raw(String),
}

impl Prompt {
    /// The text an `x-llamay-quote: true` must quote: the user messages' text, one
    /// message a line, or the raw prompt.
    pub fn user_text(&self) -> String {
        match self {
            Prompt::Raw(text) => text.clone(),
            Prompt::Chat(msgs) => msgs
                .iter()
                .filter(|m| m.role == "user")
                .filter_map(|m| m.content.as_deref())
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

/// One generation request, whatever API it came from: what the client asked, as it
/// asked it. [`crate::Runtime::start`] checks and resolves it (the constraint among
/// the rest). Built with [`GenRequest::new`], then the fields a shape reads.
#[derive(Clone, Debug)]
pub struct GenRequest {
    /// The model name as the client wrote it (empty: the server's default model).
    pub model: String,
    /// What the model is given: a conversation or raw text.
    pub prompt: Prompt,
    /// Token limit, sampler and stop strings (from the API's knobs, usually through
    /// [`crate::SamplingAsk::into_params`]).
    pub params: GenerationParams,
    /// The output constraint's surfaces as the request used them (none: the server's
    /// default grammar, if any). `constraint.whole_tool_calls`: with tools offered, a
    /// stream carries each call whole at the end instead of piece by piece
    /// (`llamay_options.whole_tool_calls`, and Ollama's shape, whose server sends
    /// calls whole).
    pub constraint: Surfaces,
    /// Send text as it is decoded; otherwise all of it comes in one `Text` event just
    /// before `Done`.
    pub stream: bool,
    /// How long the model stays loaded after this request (Ollama's `keep_alive`).
    pub keep_alive: Option<Duration>,
    /// The tools offered (`None`: none, or `tool_choice: "none"`).
    pub tools: Option<Arc<ToolSet>>,
    /// Thinking toggles and budget (reasoning models; see `reasoning`).
    pub thinking: ThinkingAsk,
    /// Extra chat-template variables (`chat_template_kwargs`).
    pub template_kwargs: Option<serde_json::Map<String, serde_json::Value>>,
    /// Return the rendered prompt in the enforcement report (`llamay_echo_prompt`).
    pub echo_prompt: bool,
    /// A named context the prompt continues (`llamay_context`): its messages (or
    /// tokens) come first, and its computed blocks are reused as they are.
    pub context: Option<String>,
}

impl GenRequest {
    /// A request for `prompt` on `model` with `params`: no constraint, not streamed,
    /// no tools, thinking as the model's template decides, no context.
    pub fn new(model: String, prompt: Prompt, params: GenerationParams) -> GenRequest {
        GenRequest {
            model,
            prompt,
            params,
            constraint: Surfaces::default(),
            stream: false,
            keep_alive: None,
            tools: None,
            thinking: ThinkingAsk::default(),
            template_kwargs: None,
            echo_prompt: false,
            context: None,
        }
    }
}

/// What a generation sends back, in order: any number of `Reasoning` (a reasoning
/// model's thinking), any number of `Text` (the answer), then one `Done` or one
/// `Error`. A stream with tools offered also sends its calls as they are written: a
/// `CallStart`, then that call's `CallArgs`; `Done` then carries every call, those
/// already sent included (same index, id and arguments text).
#[derive(Clone, Debug)]
pub enum GenEvent {
    /// More of the thinking text, markers excluded (streamed requests only: the
    /// outcome's `reasoning` has all of it).
    Reasoning(String),
    /// More of the answer text (for a request that does not stream, all of it at once).
    Text(String),
    /// Call `index` (0-based, among the answer's calls) opened.
    CallStart {
        /// The call's place among the answer's calls.
        index: usize,
        /// The id given to the call (`call_…`), which `Done` repeats.
        id: String,
        /// The name of the tool called.
        name: String,
    },
    /// More of call `index`'s arguments text.
    CallArgs {
        /// The call's place, as its `CallStart` gave it.
        index: usize,
        /// The next piece of the arguments' JSON text, as written.
        delta: String,
    },
    /// The generation ended; the last event.
    Done(Box<Outcome>),
    /// The generation failed (before or while decoding); the last event.
    Error(crate::error::Error),
}

/// How a generation ended and what it cost.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Why generation ended.
    pub finish: Finish,
    /// Which stop string matched, when `finish` is `Stop`.
    pub stop_sequence: Option<String>,
    /// The prompt's length in tokens, cached ones included.
    pub prompt_tokens: usize,
    /// Prompt tokens whose keys and values were reused (a cached prefix or the
    /// request's context), not computed again.
    pub cached_tokens: usize,
    /// Tokens generated (thinking included), EOG excluded.
    pub completion_tokens: usize,
    /// Time from joining the batch to the end of the prompt's prefill (steps shared
    /// with the other sequences).
    pub prompt_time: Duration,
    /// Time from the end of the prefill to the last token.
    pub decode_time: Duration,
    /// Time from the request's arrival to its first decoding step (queue, load).
    pub queue_time: Duration,
    /// The constraint's mask work; `None` when nothing was constrained.
    pub mask: Option<MatcherStats>,
    /// What the constraint was and did not enforce, as resolved before decoding.
    pub report: EnforcementReport,
    /// The calls the model made (filled in when tools were offered).
    pub tool_calls: Vec<ToolCall>,
    /// Under strict `auto`: how many calls the model opened (each was held to the
    /// offered tools, so each is among `tool_calls` unless cut off by the token limit).
    pub calls_opened: Option<usize>,
    /// The thinking text (without its markers), also streamed as `Reasoning` events.
    pub reasoning: String,
    /// Tokens of thinking, both markers included (a part of `completion_tokens`).
    pub reasoning_tokens: usize,
    /// The rendered prompt, when the request asked for it.
    pub prompt_text: Option<String>,
    /// Tokens drafted ahead (speculative decoding), and how many of them the model's
    /// own choices took.
    pub drafted_tokens: usize,
    /// See `drafted_tokens`.
    pub accepted_tokens: usize,
}

impl Outcome {
    /// The `llamay` object every response carries next to its usage: what the
    /// constraint was, what it did not enforce, and what it cost.
    pub fn llamay_json(&self) -> serde_json::Value {
        let mask = self.mask.as_ref();
        let mut v = serde_json::json!({
            "constraint": self.report.kind,
            "not_enforced": self.report.not_enforced,
            "enforced": self.report.enforced,
            "compile_ms": (self.report.compile_time.as_secs_f64() * 1e6).round() / 1e3,
            "mask_us_per_token": mask.map(|m| (m.mean_mask_us() * 10.0).round() / 10.0),
            "mask_steps": mask.map(|m| m.steps),
            "mask_cache_hits": mask.map(|m| m.cache_hits),
            "finish": self.finish.as_str(),
            "reasoning_tokens": self.reasoning_tokens,
            "cached_tokens": self.cached_tokens,
            "speculation": {
                "drafted_tokens": self.drafted_tokens,
                "accepted_tokens": self.accepted_tokens,
            },
        });
        if let Some(p) = &self.prompt_text {
            v["prompt"] = serde_json::Value::String(p.clone());
        }
        if let Some(n) = self.calls_opened {
            v["tool_calls_opened"] = n.into();
        }
        v
    }
}
