//! llamay's inference engine, in pure Rust.
//!
//! GGUF files, tokenizers rebuilt from their metadata, tensors and quantized kernels,
//! model architectures, the KV cache, sampling and batched forward steps. It knows
//! nothing of constraints: the sampler takes a plain allowed-token bitset.
//!
//! Other crates use the names re-exported here, at the root; the modules are the
//! engine's own.

// Every `pub` item is reachable from outside (unreachable_pub), and every type that a
// public signature shows can be named there (unnameable_types): the door is all there
// is, and it is whole.
#![warn(unreachable_pub, unnameable_types)]

mod batch;
mod device;
mod facts;
mod ggml_type;
mod gguf;
#[cfg(feature = "gpu")]
mod gpu;
mod kv_cache;
mod model;
mod pool;
mod quant;
mod sampler;
mod tokenizer;
mod vision;

// The engine's door: what the other crates use, named from the root.
pub use batch::{BatchItem, ItemLogits, LogitsWanted};
pub use device::{AdapterPick, BadDeviceChoice, DeviceChoice, GpuAdapter};
pub use facts::ModelFacts;
pub use ggml_type::GgmlType;
pub use gguf::{
    ArrayIter, ArrayValue, GgufError, GgufFile, StrIter, TensorInfo, Value, ValueType, What,
};
pub use kv_cache::{KvBlock, KvType, RecurrentState, SeqState, KV_BLOCK_TOKENS};
pub use model::{
    gpu_adapters, l2_normalize, resolve_device, BatchSplit, Encoder, LoadOptions, Model,
    ModelError, Pooling, EXACT_PASS_TOKENS, MAX_STEP_TOKENS,
};
pub use pool::ThreadPool;
pub use quant::{Backend, KernelSet, QuantError};
pub use sampler::{mask_allows, Rng, Sampler, SamplerConfig, StopConditions, StopReason, StopStep};
pub use tokenizer::{
    PreTokenizer, SpecialIds, StreamDecoder, TokenAttr, TokenType, Tokenizer, TokenizerError,
    TokenizerKind,
};
pub use vision::{
    decode_image, DecodedImage, ImageEmbeddings, ImageError, ImageLayout, ProjectorType,
    VisionEncoder, MAX_IMAGE_PIXELS, MAX_IMAGE_SIDE,
};

/// The quantized kernels and their buffers, for the engine's own integration tests,
/// benchmarks and examples, which drive them directly. Not the API: other crates use
/// the root names, and what is here may change with any commit.
#[doc(hidden)]
pub mod internals {
    pub use crate::quant::interleave::{
        deinterleave_row, interleavable, interleave_rows, interleaved_row_bytes,
    };
    pub use crate::quant::{
        dequantize_row, matmul_rows, matmul_view, quantize_acts, quantize_acts_as, serial,
        ActFormat, ActSource, OutView, ParallelFor, Q8Block, Q8KBlock, QMatrix, QuantizedActs,
        RowTable,
    };
}
