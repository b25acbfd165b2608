//! The HTTP server and the generation loop.
//!
//! Each API shape (OpenAI, Anthropic, Ollama) lives in its own module and translates
//! its requests into one internal request type; the generation loop that joins the
//! engine's sampler to the constraint's masks is written once and serves both
//! `llamay run` and `llamay serve`.

pub mod chat;
pub mod generate;
pub mod loaded;
