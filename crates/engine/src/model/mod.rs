//! Model loading and the forward pass.
//!
//! A [`Model`] holds the GGUF mapping, the hyper-parameters, the located weights and a
//! thread pool; it is shared read-only (`Arc<Model>`). Each sequence's mutable state
//! is a [`SeqState`]; [`Model::forward`] feeds several sequences in one step.

mod arena;
mod attention;
mod encoder;
mod forward;
mod heads;
mod hparams;
mod layer;
mod linear;
mod ops;
mod split;
mod weights;

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

pub use encoder::{l2_normalize, Encoder, Pooling};
pub use forward::MAX_STEP_TOKENS;
pub use split::BatchSplit;

use crate::facts::ModelFacts;
use crate::ggml_type::GgmlType;
use crate::gguf::{GgufError, GgufFile};
use crate::kv_cache::{KvCache, KvType, SeqState};
use crate::pool::{physical_cores, ThreadPool};
use crate::quant::QuantError;
use hparams::HParams;
use weights::Weights;

/// Why a model could not be loaded or run.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error(transparent)]
    Gguf(#[from] GgufError),
    #[error("architecture {0:?} is not supported (llamay runs llama, qwen2, qwen3, gemma2, gemma3, phi3)")]
    UnsupportedArch(String),
    #[error("tensor {tensor:?} has type {ty}, which llamay cannot compute with")]
    UnsupportedType { tensor: String, ty: GgmlType },
    #[error("invalid model: {0}")]
    Invalid(String),
    #[error(transparent)]
    Kernel(#[from] QuantError),
    #[error("token id {token} is outside the vocabulary of {n_vocab}")]
    BadToken { token: u32, n_vocab: usize },
    #[error("sequence would hold {needed} positions, more than its context of {n_ctx}")]
    ContextFull { needed: usize, n_ctx: usize },
    #[error("a sequence was used with a model other than the one that created it")]
    ForeignSequence,
}

/// How to load a model.
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// Threads for the forward pass (default: the number of physical cores).
    pub n_threads: Option<usize>,
    /// Positions per sequence (default: the model's training context).
    pub n_ctx: Option<usize>,
    /// KV cache element type (default f32).
    pub kv_type: KvType,
    /// How steps of many short sequences are split over the threads (default:
    /// measured as they run).
    pub batch_split: BatchSplit,
}

/// A loaded model: read-only and shareable between threads.
pub struct Model {
    file: GgufFile,
    hp: HParams,
    weights: Weights,
    pool: ThreadPool,
    n_ctx: usize,
    kv_type: KvType,
    id: usize,
    facts: ModelFacts,
    scratch: forward::Scratch,
    split: split::SplitChooser,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model").field("facts", &self.facts).finish()
    }
}

static NEXT_MODEL_ID: AtomicUsize = AtomicUsize::new(1);

impl Model {
    /// Opens, validates and prepares the GGUF model at `path`.
    pub fn load(path: impl AsRef<Path>, opts: &LoadOptions) -> Result<Arc<Model>, ModelError> {
        Self::from_gguf(GgufFile::open(path)?, opts)
    }

    /// Prepares a model from an already opened file.
    pub fn from_gguf(file: GgufFile, opts: &LoadOptions) -> Result<Arc<Model>, ModelError> {
        let hp = HParams::from_gguf(&file)?;
        let weights = Weights::load(&file, &hp)?;
        let facts = loaded_facts(&file, &hp)?;
        let n_threads = opts.n_threads.unwrap_or_else(physical_cores).max(1);
        let n_ctx = opts.n_ctx.unwrap_or(hp.n_ctx_train).max(1);
        Ok(Arc::new(Model {
            file,
            hp,
            weights,
            pool: ThreadPool::new(n_threads),
            n_ctx,
            kv_type: opts.kv_type,
            id: NEXT_MODEL_ID.fetch_add(1, Ordering::Relaxed),
            facts,
            scratch: Default::default(),
            split: split::SplitChooser::new(opts.batch_split),
        }))
    }

    pub fn n_vocab(&self) -> usize {
        self.hp.n_vocab
    }

    pub fn n_ctx_train(&self) -> usize {
        self.hp.n_ctx_train
    }

    /// Positions each new sequence may hold.
    pub fn n_ctx(&self) -> usize {
        self.n_ctx
    }

    pub fn n_threads(&self) -> usize {
        self.pool.n_threads()
    }

    /// The forward pass's threads, for per-step work between passes (sampling, masks):
    /// they are awake then, where threads started for the purpose would not be.
    pub fn pool(&self) -> &ThreadPool {
        &self.pool
    }

    /// What the model is (`llamay show`, the server's model listings).
    pub fn facts(&self) -> &ModelFacts {
        &self.facts
    }

    /// The underlying file (tokenizer metadata, chat template).
    pub fn gguf(&self) -> &GgufFile {
        &self.file
    }

    /// A new, empty sequence with this model's default KV type and context size.
    pub fn new_sequence(&self) -> SeqState {
        self.new_sequence_with(self.kv_type, self.n_ctx)
    }

    /// A new, empty sequence with its own KV type and context size.
    pub fn new_sequence_with(&self, kv_type: KvType, n_ctx: usize) -> SeqState {
        let windows: Vec<Option<usize>> = self
            .hp
            .swa_layers
            .iter()
            .map(|&swa| if swa { self.hp.sliding_window } else { None })
            .collect();
        SeqState {
            kv: KvCache::new(kv_type, &windows, self.hp.k_width(), self.hp.v_width()),
            n_past: 0,
            n_ctx: n_ctx.max(1),
            model_id: self.id,
        }
    }
}

/// The facts of `file`, loaded with hyper-parameters `hp`: the shape figures as the
/// engine resolved them, not only as the file states them.
fn loaded_facts(file: &GgufFile, hp: &HParams) -> Result<ModelFacts, GgufError> {
    Ok(ModelFacts {
        context_length: Some(hp.n_ctx_train as u64),
        embedding_length: Some(hp.n_embd as u64),
        block_count: Some(hp.n_layer as u64),
        head_count: Some(hp.n_head as u64),
        head_count_kv: Some(hp.n_head_kv as u64),
        vocab_size: hp.n_vocab as u64,
        ..ModelFacts::from_gguf(file)?
    })
}
