//! Chat templates: turning a conversation into the prompt text a model was trained on.
//!
//! A GGUF usually carries its template (`tokenizer.chat_template`, Jinja). We render it
//! with minijinja plus the Python string methods and helpers that Hugging Face
//! templates call (`raise_exception`, `strftime_now`). A file without one gets the
//! built-in template of its family (ChatML, Llama 3 or Gemma), chosen by which
//! turn-marker tokens its vocabulary has. A model pulled from an Ollama registry
//! carries a Go `text/template` layer instead, which `ollama` renders with the values
//! Ollama gives it (`gotmpl` is the template engine).

mod builtin;
mod call_convention;
mod gotmpl;
mod harmony;
mod harmony_tokens;
mod message;
mod ollama;
mod pyjson;
mod template;

pub use builtin::Builtin;
pub use call_convention::CallConvention;
pub(crate) use call_convention::{CallBody, BARE_OPENER, MARKERS};
pub(crate) use harmony::{render_harmony, HarmonyOptions};
pub(crate) use harmony_tokens::{HarmonyFacts, HARMONY_MARKERS};
pub use message::{ChatMessage, ImageInput, ToolCallFunction, ToolCallMessage, MEDIA_MARKER};
pub use ollama::OllamaTemplate;
pub use template::{ChatTemplate, RenderOptions, TemplateError};
