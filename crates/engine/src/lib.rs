//! llamay's inference engine, in pure Rust.
//!
//! GGUF files, tokenizers rebuilt from their metadata, tensors and quantized kernels,
//! model architectures, the KV cache, sampling and batched forward steps. It knows
//! nothing of constraints: the sampler takes a plain allowed-token bitset.

pub mod batch;
pub mod ggml_type;
pub mod gguf;
pub mod info;
pub mod kv_cache;
pub mod model;
pub mod pool;
pub mod quant;
pub mod sampler;
pub mod tokenizer;
