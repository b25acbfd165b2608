//! One folder per API shape, each translating its wire format to the runtime's
//! request type and back; what two shapes spell alike is written once here.

pub(crate) mod anthropic;
pub(crate) mod catalog;
pub(crate) mod constraint_wire;
pub(crate) mod contexts;
pub(crate) mod embeddings;
pub(crate) mod image_links;
pub(crate) mod image_wire;
pub(crate) mod ollama;
pub(crate) mod openai;
pub(crate) mod reasoning_wire;
pub(crate) mod rerank;
pub(crate) mod responses;
pub(crate) mod sampling;
pub(crate) mod tool_wire;
