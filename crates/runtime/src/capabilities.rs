//! What a model can do, read from its file's header (no weights loaded), for the
//! capability catalog (`/v1/catalog/models`), Ollama's `capabilities`, and the 400s
//! a request gets for asking what its model cannot do.

use std::path::Path;

use std::sync::Arc;

use llamay_engine::{DecodedImage, GgufFile};

use crate::chat::HARMONY_MARKERS;
use crate::error::Error;
use crate::reasoning::{convention_of, Convention, HARMONY};

/// Encoder architectures: embeddings, no generation.
const ENCODERS: &[&str] = &["bert", "nomic-bert", "jina-bert-v2"];

/// What one model file can do, read from its header alone.
#[derive(Clone, Debug)]
pub struct Capabilities {
    /// `general.architecture` (`llama`, `qwen3`, `bert`…); `unknown` when the file
    /// names none.
    pub architecture: String,
    /// The context length the model was trained for, in tokens
    /// (`<arch>.context_length`); `None` when the header lacks the key.
    pub context_length: Option<u64>,
    /// The file carries its own chat template, or its vocabulary is harmony's, whose
    /// format llamay renders itself (tool calling rides on it; a base model without
    /// either gets a built-in turn format, and no tools).
    pub own_template: bool,
    /// The thinking convention, for a reasoning model.
    pub thinking: Option<&'static Convention>,
    /// An encoder-only architecture (BERT family): embeddings and no generation.
    pub embedding: bool,
    /// A vision projector is served beside the model (`serve -mmproj`, a store
    /// model's projector layer): it reads images. `of_file` alone says false.
    pub vision: bool,
}

impl Capabilities {
    /// Reads the header of the GGUF at `path` (no weights are loaded); an unreadable
    /// file is an internal error.
    pub fn of_file(path: &Path) -> Result<Capabilities, Error> {
        let f = GgufFile::open(path)
            .map_err(|e| Error::internal(format!("cannot read {}: {e}", path.display())))?;
        let architecture = f.architecture().unwrap_or("unknown").to_string();
        let template = f.opt_str("tokenizer.chat_template").ok().flatten();
        let has_token = |text: &str| {
            let mut tokens = f.array_strings("tokenizer.ggml.tokens").ok()?;
            tokens.position(|t| t == text.as_bytes()).map(|i| i as u32)
        };
        let harmony = HARMONY_MARKERS.iter().all(|m| has_token(m).is_some());
        let thinking = match harmony {
            true => Some(&HARMONY),
            false => convention_of(template, has_token),
        };
        let context_length = f
            .arch_key("context_length")
            .ok()
            .and_then(|k| f.opt_u64(&k).ok().flatten());
        Ok(Capabilities {
            embedding: ENCODERS.contains(&architecture.as_str()),
            architecture,
            context_length,
            own_template: template.is_some() || harmony,
            thinking,
            vision: false,
        })
    }

    /// [`Capabilities::of_file`] for a served model (`ModelSpec`'s `path` and
    /// `projector`), with `vision` when it is served with a projector.
    pub fn of_model(path: &Path, projector: Option<&Path>) -> Result<Capabilities, Error> {
        Ok(Capabilities {
            vision: projector.is_some(),
            ..Capabilities::of_file(path)?
        })
    }

    /// Whether the model generates text (chat, completion): every model but an encoder.
    pub fn completion(&self) -> bool {
        !self.embedding
    }

    /// Whether the model can be offered tools: it generates, and its file carries its
    /// own chat template to describe them with.
    pub fn tools(&self) -> bool {
        self.completion() && self.own_template
    }

    /// Whether the model's thinking can be turned off (its convention has a template
    /// variable for it, like Qwen3's `enable_thinking`); false for a model that always
    /// thinks or never does.
    pub fn thinking_toggle(&self) -> bool {
        self.thinking.is_some_and(|c| c.toggle.is_some())
    }

    /// Ollama's words: `completion`, `tools`, `thinking`, `embedding`, `vision`.
    pub fn ollama_names(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.completion() {
            v.push("completion");
        }
        if self.tools() {
            v.push("tools");
        }
        if self.thinking.is_some() {
            v.push("thinking");
        }
        if self.embedding {
            v.push("embedding");
        }
        if self.vision {
            v.push("vision");
        }
        v
    }
}

/// The 400 for a request that offers tools to a model without tool support.
pub(crate) fn no_tools(model: &str) -> Error {
    Error::bad_request(format!(
        "model {model} has no tool support (capability \"tools\"): its file carries no chat \
         template to describe tools with; see /v1/catalog/models"
    ))
}

/// The 400 for a request that shows images to a model that cannot see them.
pub(crate) fn no_vision(model: &str) -> Error {
    Error::bad_request(format!(
        "model {model} has no vision support (capability \"vision\"): it reads text only, \
         so the request's images cannot reach it; see /v1/catalog/models"
    ))
    .at("messages")
}

/// Most images one request may carry.
pub(crate) const MAX_IMAGES: usize = 16;

/// Decodes every image of `prompt` off the async threads, refusing a request with
/// too many or with one that is not a picture llamay reads (each named by its
/// message and place); the pictures, in the prompt's order.
pub(crate) async fn check_images(
    prompt: &crate::request::Prompt,
) -> Result<Vec<Arc<DecodedImage>>, Error> {
    let crate::request::Prompt::Chat(messages) = prompt else {
        return Ok(Vec::new());
    };
    let images: Vec<(usize, usize, crate::chat::ImageInput)> = messages
        .iter()
        .enumerate()
        .flat_map(|(m, msg)| {
            msg.images
                .iter()
                .enumerate()
                .map(move |(i, im)| (m, i, im.clone()))
        })
        .collect();
    if images.len() > MAX_IMAGES {
        return Err(Error::bad_request(format!(
            "the request carries {} images; at most {MAX_IMAGES} are read",
            images.len()
        ))
        .at("messages"));
    }
    if images.is_empty() {
        return Ok(Vec::new());
    }
    tokio::task::spawn_blocking(move || {
        images
            .into_iter()
            .map(|(m, i, im)| {
                llamay_engine::decode_image(&im.0)
                    .map(Arc::new)
                    .map_err(|e| {
                        Error::bad_request(format!("message {m}, image {i}: {e}")).at("messages")
                    })
            })
            .collect::<Result<Vec<_>, Error>>()
    })
    .await
    .map_err(|e| Error::internal(format!("checking the images: {e}")))?
}

/// A generation request (chat, completion) to an encoder-only model.
pub(crate) fn cannot_generate(name: &str) -> Error {
    Error::bad_request(format!(
        "model {name:?} is an embedding model (encoder only): it has no generation (chat or \
         completion) capability; use /v1/embeddings, /api/embed or /rerank with it"
    ))
    .at("model")
}
