//! llamay's inference engine, in pure Rust.
//!
//! GGUF files, tokenizers rebuilt from their metadata, tensors and quantized kernels,
//! model architectures, the KV cache, sampling and batched forward steps. It knows
//! nothing of constraints: the sampler takes a plain allowed-token bitset.

pub mod batch;
pub mod facts;
pub mod ggml_type;
pub mod gguf;
pub mod kv_cache;
pub mod model;
pub mod pool;
pub mod quant;
pub mod sampler;
pub mod tokenizer;

// The engine's door: what the other crates use, named from the root.
pub use batch::{BatchItem, ItemLogits, LogitsWanted};
pub use facts::ModelFacts;
pub use ggml_type::GgmlType;
pub use gguf::{GgufError, GgufFile, TensorInfo, Value};
pub use kv_cache::{KvType, SeqState};
pub use model::{BatchSplit, LoadOptions, Model, ModelError, MAX_STEP_TOKENS};
pub use pool::ThreadPool;
pub use quant::Backend;
pub use sampler::{mask_allows, Rng, Sampler, SamplerConfig, StopConditions, StopReason};
pub use tokenizer::{PreTokenizer, TokenAttr, Tokenizer, TokenizerError, TokenizerKind};
