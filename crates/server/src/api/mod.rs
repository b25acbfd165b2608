//! One folder per API shape, each translating its wire format to the runtime's
//! request type and back; what two shapes spell alike is written once here.

pub mod anthropic;
pub mod catalog;
pub(crate) mod constraint_wire;
pub mod contexts;
pub mod embeddings;
pub mod ollama;
pub mod openai;
pub(crate) mod reasoning_wire;
pub mod rerank;
pub mod responses;
pub(crate) mod sampling;
pub(crate) mod tool_wire;
