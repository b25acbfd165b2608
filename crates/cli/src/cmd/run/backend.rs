//! One generation as `llamay run` asks for it, whoever does the work: the model
//! loaded in this process, or a running server.

use std::sync::atomic::AtomicBool;

use llamay_runtime::{ChatMessage, GenerationParams, ImageInput, MEDIA_MARKER};

use super::constraint::{Constraint, QuoteSources};

/// The text a model continues.
pub enum Input {
    /// The prompt as written (no chat template), and the images its
    /// [`MEDIA_MARKER`]s stand for.
    Raw(String, Vec<ImageInput>),
    /// A conversation, rendered with the model's chat template.
    Chat(Vec<ChatMessage>),
}

impl Input {
    /// The text an `x-llamay-quote: true` quotes: the runtime's own rule
    /// ([`llamay_runtime::Prompt::user_text`]), so a local run and a server agree.
    pub fn user_text(&self) -> String {
        match self {
            Input::Raw(text, _) => llamay_runtime::Prompt::Raw(text.clone()),
            Input::Chat(msgs) => llamay_runtime::Prompt::Chat(msgs.clone()),
        }
        .user_text()
    }

    /// The images the input carries, in prompt order.
    pub fn images(&self) -> Vec<ImageInput> {
        match self {
            Input::Raw(_, images) => images.clone(),
            Input::Chat(msgs) => msgs.iter().flat_map(|m| m.images.clone()).collect(),
        }
    }

    /// A plain prompt with `images`: where the text names no place for them, they go
    /// before it, one marker each, as llama.cpp's `mtmd-cli` puts them (most models
    /// expect the picture before the question).
    pub fn raw(text: String, images: Vec<ImageInput>) -> Input {
        let text = match images.is_empty() || text.contains(MEDIA_MARKER) {
            true => text,
            false => MEDIA_MARKER.repeat(images.len()) + &text,
        };
        Input::Raw(text, images)
    }
}

/// The user turn `text` with `images` (the chat's rendering places them).
pub fn user_turn(text: &str, images: Vec<ImageInput>) -> ChatMessage {
    ChatMessage {
        images,
        ..ChatMessage::new("user", text)
    }
}

/// Reads `-image FILE`s (the format is read from the bytes when the model sees them).
pub fn read_images(paths: &[std::path::PathBuf]) -> anyhow::Result<Vec<ImageInput>> {
    paths
        .iter()
        .map(|p| {
            std::fs::read(p)
                .map(|b| ImageInput(b.into()))
                .map_err(|e| anyhow::anyhow!("cannot read the image {}: {e}", p.display()))
        })
        .collect()
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
