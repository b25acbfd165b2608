//! A model ready to generate: weights, tokenizer, the constraint vocabulary and the
//! prompt format, loaded once and shared by every request.

use std::path::Path;
use std::sync::Arc;

use llamay_constrain::{ConstraintCache, Vocabulary};
use llamay_engine::GgufFile;
use llamay_engine::Tokenizer;
use llamay_engine::{LoadOptions, Model};

use crate::chat::{Builtin, ChatMessage, ChatTemplate, RenderOptions};
use crate::reasoning::ThinkingFacts;

/// Bytes of compiled constraints kept per model unless told otherwise (the
/// vocabulary decides the masks, so each model has its own cache).
pub const DEFAULT_CONSTRAINT_CACHE_BYTES: usize = 256 << 20;

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot open {path}: {source}")]
    Open {
        path: String,
        #[source]
        source: llamay_engine::GgufError,
    },
    #[error("cannot build the tokenizer: {0}")]
    Tokenizer(#[from] llamay_engine::TokenizerError),
    #[error("cannot load the model: {0}")]
    Model(#[from] llamay_engine::ModelError),
    #[error(transparent)]
    Template(#[from] crate::chat::TemplateError),
}

/// Where a chat prompt's format comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TemplateSource {
    /// The GGUF's own `tokenizer.chat_template`.
    File,
    /// A built-in template chosen from the vocabulary's turn markers.
    Builtin(Builtin),
}

pub struct LoadedModel {
    pub model: Arc<Model>,
    pub tokenizer: Arc<Tokenizer>,
    pub vocab: Arc<Vocabulary>,
    pub constraints: ConstraintCache,
    template: ChatTemplate,
    pub template_source: TemplateSource,
    /// The thinking convention the model follows, if any (see `reasoning`).
    pub thinking: Option<Arc<ThinkingFacts>>,
}

impl LoadedModel {
    pub fn load(path: &Path, opts: &LoadOptions) -> Result<LoadedModel, LoadError> {
        Self::load_with_cache(path, opts, DEFAULT_CONSTRAINT_CACHE_BYTES)
    }

    /// [`Self::load`], keeping at most `cache_bytes` of compiled constraints.
    pub fn load_with_cache(
        path: &Path,
        opts: &LoadOptions,
        cache_bytes: usize,
    ) -> Result<LoadedModel, LoadError> {
        let file = GgufFile::open(path).map_err(|source| LoadError::Open {
            path: path.display().to_string(),
            source,
        })?;
        let tokenizer = Tokenizer::from_gguf(&file)?;
        let own_template = file.opt_str("tokenizer.chat_template").ok().flatten();
        let (template, template_source) = match own_template {
            Some(src) => (ChatTemplate::new(src)?, TemplateSource::File),
            _ => {
                let b = Builtin::detect(|t| tokenizer.token_id(t).is_some());
                (ChatTemplate::new(b.source())?, TemplateSource::Builtin(b))
            }
        };
        let own_template = own_template.map(str::to_string);
        let model = Model::from_gguf(file, opts)?;
        let thinking =
            ThinkingFacts::new(&tokenizer, model.n_vocab(), own_template.as_deref()).map(Arc::new);
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
        })
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
        let text = self.template.render(
            messages,
            &RenderOptions {
                add_generation_prompt: true,
                bos_token: &bos,
                eos_token: &eos,
                tools,
                kwargs,
            },
        )?;
        let mut ids = tok.encode(text.as_bytes(), false, true);
        if let Some(b) = tok.bos().filter(|_| tok.add_bos()) {
            if ids.first() != Some(&b) {
                ids.insert(0, b);
            }
        }
        Ok((ids, text))
    }
}
