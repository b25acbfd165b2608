//! llamay's runtime: everything between the engine and an API shape, and nothing of
//! HTTP.
//!
//! Loaded models and their registry (names, keep-alive, max-loaded), chat templates,
//! the one internal request type ([`GenRequest`]), sampling settings, the output
//! constraint ([`ConstraintSpec`], decided in one place), tool calls, the per-step
//! decoder that joins the engine's sampler to the constraint's masks, and the
//! batched scheduler. `llamay run` drives [`generate`] directly; the server drives
//! [`Runtime::start`], which queues a request on its model's scheduler.
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod capabilities;
mod chat;
mod compile_key;
mod constraint;
mod context_service;
mod embed;
mod error;
mod generate;
mod hold;
mod ids;
mod image_rows;
mod kv;
mod loaded;
mod media;
mod params;
mod reasoning;
mod registry;
mod request;
mod resolver;
mod retrieval;
mod scheduler;
mod service;
mod settings;
mod stats;
mod tools;

pub use capabilities::Capabilities;
pub use chat::{
    Builtin, CallConvention, ChatMessage, ChatTemplate, ImageInput, OllamaTemplate, RenderOptions,
    TemplateError, ToolCallFunction, ToolCallMessage,
};
pub use constraint::{
    checked_grammar, AnswerKind, ConstraintSpec, EnforcementReport, Gbnf, LexiconAsk,
    SchemaGrammar, Surfaces,
};
pub use context_service::{ContextRequest, Snapshotted};
pub use embed::{
    embed_blocking, EmbedInput, EmbedOptions, EmbedRequest, Embedded, Encoders, LoadedEncoder,
    Purpose, RerankRequest, Reranked,
};
pub use error::{ContextOverflow, Error, ErrorKind};
pub use generate::{
    check_prompt, generate, generate_continuing, generate_pieces, DraftModel, Finish,
    GenerateError, Generation, GenerationParams, GenerationStats, HarmonyPlan, PromptPiece,
    DEFAULT_DRAFT,
};
pub use ids::{call_id, fresh_seed, short_id};
pub use image_rows::ImagePlace;
pub use kv::{snapshot, ContextInfo, Contexts, Prefix, PrefixCache, CHECKPOINT_TOKENS};
pub use llamay_constrain::{
    schema_limits, CompileBudget, SchemaLimits, ENFORCED_FORMATS, MAX_QUOTE_SOURCE_BYTES,
};
pub use loaded::{
    LoadError, LoadedModel, PromptLayers, TemplateSource, DEFAULT_CONSTRAINT_CACHE_BYTES,
};
pub use media::{prompt_chunks, split_media, MediaChunk, MediaPrompt, MEDIA_MARKER};
pub use params::{SamplingAsk, DEFAULT_MAX_TOKENS};
pub use reasoning::ThinkingAsk;
pub use registry::{same_name, Instance, ModelSpec, Registry, RegistryConfig, MAX_LISTED_NAMES};
pub use request::{GenEvent, GenRequest, Outcome, Prompt};
pub use resolver::{Resolver, DEFAULT_MEMO_BYTES};
pub use scheduler::{Counts, Job, Scheduler, SchedulerConfig};
pub use service::{collect, Runtime, Started};
pub use settings::{load_lexicon, ConstraintSettings};
pub use stats::Stats;
pub use tools::{chat_channels, hosted_tool, ToolCall, ToolChoice, ToolDef, ToolSet};
