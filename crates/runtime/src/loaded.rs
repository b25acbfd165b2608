//! A model ready to generate: weights, tokenizer, the constraint vocabulary and the
//! prompt format, loaded once and shared by every request.

use std::path::Path;
use std::sync::Arc;

use llamay_constrain::{ConstraintCache, Vocabulary};
use llamay_engine::GgufFile;
use llamay_engine::Tokenizer;
use llamay_engine::{LoadOptions, Model, VisionEncoder};

use crate::chat::CallConvention;
use crate::chat::{render_harmony, HarmonyOptions};
use crate::chat::{Builtin, ChatMessage, ChatTemplate, OllamaTemplate, RenderOptions};
use crate::chat::{HarmonyFacts, HARMONY_MARKERS};
use crate::reasoning::ThinkingFacts;

/// Bytes of compiled constraints kept per model unless told otherwise (the
/// vocabulary decides the masks, so each model has its own cache).
pub const DEFAULT_CONSTRAINT_CACHE_BYTES: usize = 256 << 20;

/// Why [`LoadedModel::load`] (or one of its variants) failed.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The GGUF file cannot be opened or its header read.
    #[error("cannot open {path}: {source}")]
    Open {
        /// The file's path, as displayed.
        path: String,
        /// What the GGUF reader said.
        #[source]
        source: llamay_engine::GgufError,
    },
    /// The file's tokenizer metadata does not make a tokenizer.
    #[error("cannot build the tokenizer: {0}")]
    Tokenizer(#[from] llamay_engine::TokenizerError),
    /// The weights cannot be loaded (an unsupported architecture or tensor type, an
    /// invalid file, a device error).
    #[error("cannot load the model: {0}")]
    Model(#[from] llamay_engine::ModelError),
    /// The file's own (or the built-in) chat template does not compile. A broken Ollama
    /// layer is not this error: it is set aside with a warning.
    #[error(transparent)]
    Template(#[from] crate::chat::TemplateError),
    /// The draft model (`serve -draft`) cannot be loaded, or its tokens are not the
    /// model's.
    #[error("cannot use the draft model {path}: {reason}")]
    Draft {
        /// The draft model file's path, as displayed.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The projector file (`-mmproj`) cannot be read, or writes rows of another
    /// width than the model reads.
    #[error("cannot use the projector {path}: {reason}")]
    Projector {
        /// The projector file's path, as displayed.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// Where a chat prompt's format comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TemplateSource {
    /// The GGUF's own `tokenizer.chat_template`.
    File,
    /// A built-in template chosen from the vocabulary's turn markers.
    Builtin(Builtin),
    /// The template layer of the model's Ollama manifest (Go `text/template`).
    OllamaLayer,
    /// gpt-oss's harmony format, rendered as OpenAI's renderer does (its vocabulary has
    /// harmony's markers), whatever template the file or a layer carries.
    Harmony,
}

/// The text layers an Ollama manifest puts beside the weights.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PromptLayers {
    /// The Go template Ollama prompts the model with.
    pub template: Option<String>,
    /// The default system message.
    pub system: Option<String>,
    /// Default parameters (`stop`, `temperature`, …), a JSON object.
    pub params: Option<serde_json::Value>,
}

impl PromptLayers {
    /// The layers a resolved store entry carries (all `None` for a bare GGUF).
    pub fn of(r: &llamay_store::ResolvedModel) -> PromptLayers {
        PromptLayers {
            template: r.template.clone(),
            system: r.system.clone(),
            params: r.params.clone(),
        }
    }

    /// The params layer's `stop` strings (Ollama applies them when a request names
    /// none).
    pub fn stop(&self) -> Vec<String> {
        match self.params.as_ref().and_then(|p| p.get("stop")) {
            Some(serde_json::Value::Array(a)) => a
                .iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect(),
            Some(serde_json::Value::String(s)) => vec![s.clone()],
            _ => Vec::new(),
        }
    }
}

/// How a conversation becomes the prompt.
enum Prompting {
    Jinja(ChatTemplate),
    Ollama(OllamaTemplate),
    Harmony,
}

impl Prompting {
    fn renders_tools(&self) -> bool {
        match self {
            Prompting::Jinja(t) => t.renders_tools(),
            Prompting::Ollama(t) => t.renders_tools(),
            Prompting::Harmony => true,
        }
    }
}

/// A model loaded for generation: shared (in an `Arc`) by its registry entry, its
/// scheduler and every request on it.
pub struct LoadedModel {
    /// The weights and the forward pass (on the device the load options chose).
    pub model: Arc<Model>,
    /// The tokenizer read from the GGUF.
    pub tokenizer: Arc<Tokenizer>,
    /// The vocabulary as the constraint compiler sees it (token bytes,
    /// end-of-generation and control ids): what a constraint's masks are made over.
    pub vocab: Arc<Vocabulary>,
    /// Compiled constraints for this model's vocabulary, kept across requests up to the
    /// byte budget given at load.
    pub constraints: ConstraintCache,
    template: Prompting,
    /// Where the prompt format came from (the file, a built-in, an Ollama layer).
    pub template_source: TemplateSource,
    /// The thinking convention the model follows, if any (see `reasoning`).
    pub thinking: Option<Arc<ThinkingFacts>>,
    /// A harmony model's markers (gpt-oss): it chats in harmony's channels.
    pub harmony: Option<Arc<HarmonyFacts>>,
    /// How the model writes tool calls, read off the template it is prompted with.
    pub tool_convention: CallConvention,
    /// The vision encoder of a projector file given beside the model (`-mmproj`).
    vision: Option<Arc<VisionEncoder>>,
}

impl LoadedModel {
    /// Loads the GGUF at `path`, with [`DEFAULT_CONSTRAINT_CACHE_BYTES`] for compiled
    /// constraints and no Ollama layers.
    pub fn load(path: &Path, opts: &LoadOptions) -> Result<LoadedModel, LoadError> {
        Self::load_with_cache(path, opts, DEFAULT_CONSTRAINT_CACHE_BYTES)
    }

    /// [`Self::load`], keeping at most `cache_bytes` of compiled constraints.
    pub fn load_with_cache(
        path: &Path,
        opts: &LoadOptions,
        cache_bytes: usize,
    ) -> Result<LoadedModel, LoadError> {
        Self::load_with_layers(path, opts, cache_bytes, &PromptLayers::default())
    }

    /// [`Self::load_with_cache`] for a model of an Ollama store: its template layer,
    /// when it has one, is the prompt format (as Ollama prompts it), with its system
    /// layer as the default system message. A layer our Go-template engine cannot
    /// parse is set aside for the GGUF's own template, with a warning in the log.
    pub fn load_with_layers(
        path: &Path,
        opts: &LoadOptions,
        cache_bytes: usize,
        layers: &PromptLayers,
    ) -> Result<LoadedModel, LoadError> {
        let file = GgufFile::open(path).map_err(|source| LoadError::Open {
            path: path.display().to_string(),
            source,
        })?;
        let tokenizer = Tokenizer::from_gguf(&file)?;
        let own_template = file.opt_str("tokenizer.chat_template").ok().flatten();
        let layer = layers.template.as_deref().and_then(|src| {
            OllamaTemplate::new(src, layers.system.as_deref())
                .map_err(|e| {
                    tracing::warn!(path = %path.display(), error = %e, "the Ollama template layer is not used")
                })
                .ok()
        });
        let harmony = HARMONY_MARKERS
            .iter()
            .all(|m| tokenizer.token_id(m).is_some());
        let (template, template_source) = match (layer, own_template) {
            _ if harmony => (Prompting::Harmony, TemplateSource::Harmony),
            (Some(t), _) => (Prompting::Ollama(t), TemplateSource::OllamaLayer),
            (None, Some(src)) => (
                Prompting::Jinja(ChatTemplate::new(src)?),
                TemplateSource::File,
            ),
            (None, None) => {
                let b = Builtin::detect(|t| tokenizer.token_id(t).is_some());
                (
                    Prompting::Jinja(ChatTemplate::new(b.source())?),
                    TemplateSource::Builtin(b),
                )
            }
        };
        let prompted_with = match template_source {
            TemplateSource::OllamaLayer => layers.template.as_deref(),
            TemplateSource::File => own_template,
            TemplateSource::Builtin(_) | TemplateSource::Harmony => None,
        };
        // A template that does not render tools gets our Hermes tool prompt.
        let tool_convention = match template.renders_tools() {
            true => CallConvention::of_template(prompted_with),
            false => CallConvention::Hermes,
        };
        let own_template = own_template.map(str::to_string);
        let model = Model::from_gguf(file, opts)?;
        let thinking =
            ThinkingFacts::new(&tokenizer, model.n_vocab(), own_template.as_deref()).map(Arc::new);
        let harmony = match harmony {
            true => HarmonyFacts::new(&tokenizer, model.n_vocab()).map(Arc::new),
            false => None,
        };
        let vocab = Arc::new(Vocabulary::new(
            tokenizer.vocab_bytes(),
            tokenizer.eog_ids(),
            &tokenizer.control_ids(),
        ));
        Ok(LoadedModel {
            constraints: ConstraintCache::new(vocab.clone(), cache_bytes),
            model,
            tokenizer: Arc::new(tokenizer),
            vocab,
            template,
            template_source,
            thinking,
            harmony,
            tool_convention,
            vision: None,
        })
    }

    /// The model with the projector file at `path` as its eyes: refused when the
    /// projector's rows are not as wide as the model's embeddings.
    pub fn with_vision(mut self, path: &Path, opts: &LoadOptions) -> Result<Self, LoadError> {
        let refuse = |reason: String| LoadError::Projector {
            path: path.display().to_string(),
            reason,
        };
        let enc = VisionEncoder::load(path, opts).map_err(|e| refuse(e.to_string()))?;
        if enc.n_embd() != self.model.n_embd() {
            return Err(refuse(format!(
                "its rows are {} wide, but the model's embeddings (n_embd) are {}",
                enc.n_embd(),
                self.model.n_embd()
            )));
        }
        self.vision = Some(Arc::new(enc));
        Ok(self)
    }

    /// The vision encoder, when a projector was loaded ([`Self::with_vision`]): the
    /// model then has the capability `vision`.
    pub fn vision(&self) -> Option<&Arc<VisionEncoder>> {
        self.vision.as_ref()
    }

    /// Whether the model's chat template renders tools itself.
    pub fn template_renders_tools(&self) -> bool {
        self.template.renders_tools()
    }

    /// Token ids of plain text, with the BOS/EOS the model's metadata asks for.
    pub fn encode_raw(&self, text: &str) -> Vec<u32> {
        self.tokenizer.encode(text.as_bytes(), true, false)
    }

    /// Renders a conversation with the model's template and tokenizes it. Turn
    /// markers in the rendered text are special tokens; the BOS is added only if the
    /// template did not already write it.
    pub fn encode_chat(
        &self,
        messages: &[ChatMessage],
        tools: Option<&serde_json::Value>,
    ) -> Result<Vec<u32>, crate::chat::TemplateError> {
        self.render_chat(messages, tools, None).map(|(ids, _)| ids)
    }

    /// [`Self::encode_chat`] with extra template variables (`chat_template_kwargs`,
    /// `enable_thinking`), returning the rendered text too.
    pub fn render_chat(
        &self,
        messages: &[ChatMessage],
        tools: Option<&serde_json::Value>,
        kwargs: Option<&serde_json::Map<String, serde_json::Value>>,
    ) -> Result<(Vec<u32>, String), crate::chat::TemplateError> {
        let tok = &self.tokenizer;
        let text_of = |id: Option<u32>| {
            id.map(|i| String::from_utf8_lossy(tok.token_bytes(i)).into_owned())
                .unwrap_or_default()
        };
        let bos = text_of(tok.bos());
        let eos = text_of(tok.eos());
        let text = match &self.template {
            Prompting::Jinja(t) => t.render(
                messages,
                &RenderOptions {
                    add_generation_prompt: true,
                    bos_token: &bos,
                    eos_token: &eos,
                    tools,
                    kwargs,
                },
            )?,
            // Ollama's values have no template kwargs: its templates read `.Think`.
            Prompting::Ollama(t) => t.render(messages, tools)?,
            // The kwargs the HF template of gpt-oss reads.
            Prompting::Harmony => {
                let kw = |k: &str| kwargs.and_then(|m| m.get(k)).and_then(|v| v.as_str());
                render_harmony(
                    messages,
                    &HarmonyOptions {
                        tools,
                        reasoning_effort: kw("reasoning_effort"),
                        current_date: kw("current_date"),
                        model_identity: kw("model_identity"),
                    },
                )
            }
        };
        let mut ids = tok.encode(text.as_bytes(), false, true);
        if let Some(b) = tok.bos().filter(|_| tok.add_bos()) {
            if ids.first() != Some(&b) {
                ids.insert(0, b);
            }
        }
        Ok((ids, text))
    }
}
