//! One generation as `llamay run` asks for it, whoever does the work: the model
//! loaded in this process, or a running server.

use std::sync::atomic::AtomicBool;

use llamay_runtime::{ChatMessage, GenerationParams};

use super::constraint::{Constraint, QuoteSources};

/// The text a model continues.
pub enum Input {
    /// The prompt as written (no chat template).
    Raw(String),
    /// A conversation, rendered with the model's chat template.
    Chat(Vec<ChatMessage>),
}

impl Input {
    /// The text an `x-llamay-quote: true` quotes: the runtime's own rule
    /// ([`llamay_runtime::Prompt::user_text`]), so a local run and a server agree.
    pub fn user_text(&self) -> String {
        match self {
            Input::Raw(text) => llamay_runtime::Prompt::Raw(text.clone()),
            Input::Chat(msgs) => llamay_runtime::Prompt::Chat(msgs.clone()),
        }
        .user_text()
    }
}

/// What one generation wrote and cost.
pub struct Reply {
    pub text: String,
    /// Stopped by Ctrl-C.
    pub cancelled: bool,
    /// The statistics lines every one-shot run prints (`prompt … · generated …` and,
    /// when constrained, the mask line).
    pub stats: Vec<String>,
    /// The lines `-stats`/`--verbose` adds.
    pub details: Vec<String>,
}

pub trait Backend {
    /// Generates, handing text to `on_text` as it comes, until done or `cancel`.
    /// `params` are `run`'s flags as the chat's `/set parameter` left them.
    fn generate(
        &mut self,
        input: &Input,
        constraint: &Constraint,
        sources: &QuoteSources,
        params: &GenerationParams,
        cancel: &AtomicBool,
        on_text: &mut dyn FnMut(&str),
    ) -> anyhow::Result<Reply>;

    /// The chat's `/show info`.
    fn describe(&self) -> anyhow::Result<String>;
}
