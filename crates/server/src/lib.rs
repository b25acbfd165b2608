//! The HTTP server and the generation loop.
//!
//! Each API shape (OpenAI, Anthropic, Ollama) lives in its own module and translates
//! its requests into one internal request type ([`request::GenRequest`]); the
//! per-step decoding logic that joins the engine's sampler to the constraint's masks
//! is written once ([`generate::Decoder`]) and serves both `llamay run` and the
//! server's batching scheduler.

pub mod anthropic;
pub mod app;
pub mod banner;
pub mod chat;
pub mod constraint_spec;
pub mod error;
pub mod generate;
pub mod loaded;
pub mod models;
pub mod ollama;
pub mod openai;
pub mod params;
pub mod request;
pub mod scheduler;
pub mod service;
pub mod stats;
pub mod stream;
pub mod tools;
