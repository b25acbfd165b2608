//! Model loading and the forward pass.
//!
//! A [`Model`] holds the GGUF mapping, the hyper-parameters, the located weights and a
//! thread pool; it is shared read-only (`Arc<Model>`). Each sequence's mutable state
//! is a [`SeqState`]; [`Model::forward`] feeds several sequences in one step.

pub(crate) mod arena;
mod attention;
mod delta_net;
mod delta_rule;
#[cfg(feature = "gpu")]
mod device;
mod embd_input;
mod encoder;
mod exact_rows;
mod experts;
mod family;
mod forward;
mod heads;
mod hparams;
mod layer;
pub(crate) mod linear;
pub(crate) mod ops;
mod per_layer;
mod rope;
mod short_conv;
mod split;
mod weights;

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

pub use encoder::{l2_normalize, Encoder, Pooling};
pub use exact_rows::EXACT_PASS_TOKENS;
pub use forward::MAX_STEP_TOKENS;
pub use split::BatchSplit;

use crate::device::{DeviceChoice, GpuAdapter};
use crate::facts::ModelFacts;
use crate::ggml_type::GgmlType;
use crate::gguf::{GgufError, GgufFile};
use crate::kv_cache::{
    KvBlock, KvCache, KvType, Layout, RecurrentLayout, RecurrentState, SeqState, KV_BLOCK_TOKENS,
};
use crate::pool::{physical_cores, ThreadPool};
use crate::quant::QuantError;
use hparams::HParams;
use weights::Weights;

/// The architectures a file may name, generation families then encoders, for the
/// error that refuses another.
fn known_architectures() -> String {
    let mut names = family::names();
    names.extend(encoder::family_names());
    names.join(", ")
}

/// Why a model could not be loaded or run.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error(transparent)]
    Gguf(#[from] GgufError),
    #[error("architecture {0:?} is not supported (llamay runs {known})", known = known_architectures())]
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
    #[error("KV blocks do not fit this model: {0}")]
    ForeignBlocks(String),
    #[error("{0}")]
    Device(String),
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
    /// Where the forward pass runs (default: the CPU).
    pub device: DeviceChoice,
}

/// A loaded model: read-only and shareable between threads.
pub struct Model {
    file: GgufFile,
    hp: HParams,
    weights: Weights,
    pool: ThreadPool,
    n_ctx: usize,
    /// Per-pair RoPE frequency divisors (Llama 3's, or LongRoPE's for `n_ctx`).
    rope_factors: Option<Vec<f32>>,
    kv_type: KvType,
    id: usize,
    facts: ModelFacts,
    scratch: forward::Scratch,
    split: split::SplitChooser,
    /// Bytes held by this model's live KV blocks, whoever holds them.
    kv_live: Arc<AtomicUsize>,
    /// The weights on a GPU, when the forward pass runs there.
    #[cfg(feature = "gpu")]
    device: Option<device::DeviceModel>,
    /// Why a GPU that `auto` would have used is not used.
    device_note: Option<String>,
    /// Whether a pass's rows are the bits of one-token steps (see `exact_rows`).
    rows_exact: std::sync::OnceLock<bool>,
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
        let rope_factors = rope::freq_factors(
            &file,
            &hp.family.rope_factors,
            &hp.rope,
            &hp.rope_scaling,
            n_ctx,
        )?;
        let (device, device_note) = open_device(&opts.device, &file, &hp, &weights)?;
        #[cfg(not(feature = "gpu"))]
        let () = device;
        Ok(Arc::new(Model {
            #[cfg(feature = "gpu")]
            device,
            device_note,
            rows_exact: std::sync::OnceLock::new(),
            file,
            hp,
            weights,
            pool: ThreadPool::new(n_threads),
            n_ctx,
            rope_factors,
            kv_type: opts.kv_type,
            id: NEXT_MODEL_ID.fetch_add(1, Ordering::Relaxed),
            facts,
            scratch: Default::default(),
            split: split::SplitChooser::new(opts.batch_split),
            kv_live: Arc::default(),
        }))
    }

    pub fn n_vocab(&self) -> usize {
        self.hp.n_vocab
    }

    /// The width of an embedding row ([`Model::forward_embeddings`]' input).
    pub fn n_embd(&self) -> usize {
        self.hp.n_embd
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

    /// The GPU adapter the forward pass runs on; `None` on the CPU.
    pub fn device(&self) -> Option<&GpuAdapter> {
        #[cfg(feature = "gpu")]
        if let Some(d) = &self.device {
            return Some(d.adapter());
        }
        None
    }

    /// Why `-device auto` stayed on the CPU although an adapter was present (a model
    /// the GPU cannot hold or run), as one line.
    pub fn device_note(&self) -> Option<&str> {
        self.device_note.as_deref()
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
        SeqState {
            kv: KvCache::new(self.kv_layout(kv_type), self.kv_live.clone()),
            n_past: 0,
            n_ctx: n_ctx.max(1),
            model_id: self.id,
            recurrent: self
                .recurrent_layout()
                .map(|l| RecurrentState::new(l, &self.kv_live)),
            #[cfg(feature = "gpu")]
            device: None,
        }
    }

    /// The shape of a sequence's recurrent state, for a hybrid model.
    fn recurrent_layout(&self) -> Option<RecurrentLayout> {
        let (conv_len, matrix_len) = match (&self.hp.linear, self.hp.short_conv) {
            (Some(shape), _) => (shape.conv_state_len(), shape.matrix_state_len()),
            // LFM2 keeps the last `taps - 1` products of every channel, no matrix.
            (None, Some(taps)) => ((taps - 1) * self.hp.n_embd, 0),
            (None, None) => return None,
        };
        Some(RecurrentLayout {
            model_id: self.id,
            n_layers: self.hp.recurrent_layers.iter().filter(|r| **r).count(),
            conv_len,
            matrix_len,
        })
    }

    /// Bytes of one sequence's recurrent state (0 for a model without one): a
    /// fixed size per sequence beside its KV blocks.
    pub fn recurrent_bytes(&self) -> usize {
        self.recurrent_layout().map_or(0, |l| l.bytes())
    }

    /// A recurrent state of this model after `positions` tokens from
    /// [`RecurrentState::to_le_bytes`]'s output: a snapshot's checkpoint read back.
    pub fn recurrent_from_bytes(
        &self,
        bytes: &[u8],
        positions: usize,
    ) -> Result<RecurrentState, ModelError> {
        let layout = self.recurrent_layout().ok_or_else(|| {
            ModelError::ForeignBlocks("this model keeps no recurrent state".into())
        })?;
        RecurrentState::from_le_bytes(layout, &self.kv_live, positions, bytes).ok_or_else(|| {
            ModelError::ForeignBlocks(format!(
                "a recurrent state of {} bytes where this model's holds {}",
                bytes.len(),
                layout.bytes()
            ))
        })
    }

    fn kv_layout(&self, ty: KvType) -> Layout {
        Layout {
            model_id: self.id,
            // Linear-attention layers and shared-KV layers keep no keys and values.
            n_layer: self.hp.n_kv_layers(),
            k_width: self.hp.k_width(),
            v_width: self.hp.v_width(),
            ty,
        }
    }

    /// The model's default KV element type.
    pub fn kv_type(&self) -> KvType {
        self.kv_type
    }

    /// Bytes of one KV block (of [`KV_BLOCK_TOKENS`] positions) of the default type.
    pub fn kv_block_bytes(&self) -> usize {
        KV_BLOCK_TOKENS
            * self.hp.n_kv_layers()
            * (self.hp.k_width() + self.hp.v_width())
            * self.kv_type.element_bytes()
    }

    /// Bytes held now by this model's KV blocks, by sequences and by whoever else
    /// keeps blocks (a prefix cache, named contexts).
    pub fn kv_bytes_live(&self) -> usize {
        self.kv_live.load(Ordering::Relaxed)
    }

    /// A sequence of `n` positions held by `blocks` (shared, not copied), with the
    /// model's default context size: a cached prefix continued, a context forked.
    /// The blocks must be this model's, of its default KV type, and hold exactly the
    /// positions `..n` (the last one may be partly filled). A hybrid model's sequence
    /// also needs its recurrent state at `n` ([`Model::sequence_from_parts`]).
    pub fn sequence_from_blocks(
        &self,
        blocks: &[Arc<KvBlock>],
        n: usize,
    ) -> Result<SeqState, ModelError> {
        if self.recurrent_layout().is_some() && n > 0 {
            return Err(ModelError::ForeignBlocks(
                "a hybrid model's sequence needs its recurrent state beside its blocks".into(),
            ));
        }
        self.sequence_from_blocks_unchecked(blocks, n)
    }

    /// [`Model::sequence_from_blocks`] for a hybrid model: the blocks of positions
    /// `..n` and the recurrent state taken after exactly `n` tokens.
    pub fn sequence_from_parts(
        &self,
        blocks: &[Arc<KvBlock>],
        state: RecurrentState,
    ) -> Result<SeqState, ModelError> {
        let n = state.positions();
        match self.recurrent_layout() {
            Some(l) if l == state.layout() => {}
            _ => {
                return Err(ModelError::ForeignBlocks(
                    "a recurrent state of another model".into(),
                ))
            }
        }
        let mut seq = self.sequence_from_blocks_unchecked(blocks, n)?;
        seq.recurrent = Some(state);
        Ok(seq)
    }

    fn sequence_from_blocks_unchecked(
        &self,
        blocks: &[Arc<KvBlock>],
        n: usize,
    ) -> Result<SeqState, ModelError> {
        let layout = self.kv_layout(self.kv_type);
        if let Some(b) = blocks.iter().find(|b| b.layout() != layout) {
            return Err(ModelError::ForeignBlocks(format!(
                "a block of {:?} where this model's are {layout:?}",
                b.layout()
            )));
        }
        if self.device().is_some() && n > 0 {
            return Err(ModelError::Device(
                "the GPU backend keeps each sequence's KV on the device: shared prefixes, contexts and snapshots run on the CPU engine".into(),
            ));
        }
        if blocks.len() != n.div_ceil(KV_BLOCK_TOKENS) {
            return Err(ModelError::ForeignBlocks(format!(
                "{} blocks cannot hold exactly {n} positions",
                blocks.len()
            )));
        }
        if n > self.n_ctx {
            return Err(ModelError::ContextFull {
                needed: n,
                n_ctx: self.n_ctx,
            });
        }
        let mut seq = self.new_sequence();
        seq.kv.set_blocks(blocks.to_vec());
        seq.n_past = n;
        Ok(seq)
    }

    /// A KV block of this model (default KV type) from [`KvBlock::to_le_bytes`]'s
    /// output: a snapshot read back.
    pub fn block_from_bytes(&self, bytes: &[u8]) -> Result<Arc<KvBlock>, ModelError> {
        let layout = self.kv_layout(self.kv_type);
        KvBlock::from_le_bytes(layout, &self.kv_live, bytes)
            .map(Arc::new)
            .ok_or_else(|| {
                ModelError::ForeignBlocks(format!(
                    "a block of {} bytes where this model's hold {}",
                    bytes.len(),
                    self.kv_block_bytes()
                ))
            })
    }
}

/// A GPU request in a build without the backend.
const NO_GPU_BACKEND: &str =
    "this build of llamay has no GPU backend (built without the gpu feature)";

#[cfg(feature = "gpu")]
type OpenedDevice = Option<device::DeviceModel>;
#[cfg(not(feature = "gpu"))]
type OpenedDevice = ();

/// The device `choice` names, with the model's weights uploaded: `None` for the CPU,
/// and for `auto` where no hardware adapter is present or it cannot hold the model
/// (then with a note saying why).
fn open_device(
    choice: &DeviceChoice,
    file: &GgufFile,
    hp: &HParams,
    weights: &Weights,
) -> Result<(OpenedDevice, Option<String>), ModelError> {
    #[cfg(feature = "gpu")]
    {
        use crate::device::AdapterPick;
        use crate::gpu::{Gpu, GpuError};
        let (pick, required) = match choice {
            DeviceChoice::Cpu => return Ok((None, None)),
            DeviceChoice::Auto => (AdapterPick::First, false),
            DeviceChoice::Gpu(p) => (p.clone(), true),
        };
        let gpu = match Gpu::open(&pick) {
            Ok(g) => g,
            Err(GpuError::NoAdapter(_)) if !required => return Ok((None, None)),
            Err(e) if !required => return Ok((None, Some(format!("{e}; running on the CPU")))),
            Err(e) => return Err(e.into()),
        };
        let name = gpu.adapter.to_string();
        match device::DeviceModel::load(gpu, file, hp, weights) {
            Ok(d) => Ok((Some(d), None)),
            Err(e) if !required => Ok((None, Some(format!("{name}: {e}; running on the CPU")))),
            Err(e) => Err(e),
        }
    }
    #[cfg(not(feature = "gpu"))]
    {
        let _ = (file, hp, weights);
        match choice {
            DeviceChoice::Gpu(_) => Err(ModelError::Device(NO_GPU_BACKEND.into())),
            _ => Ok(((), None)),
        }
    }
}

/// The adapters the system offers (`llamay show`, `-device` errors); empty in a build
/// without the GPU backend.
pub fn gpu_adapters() -> Vec<GpuAdapter> {
    #[cfg(feature = "gpu")]
    return crate::gpu::adapters();
    #[cfg(not(feature = "gpu"))]
    Vec::new()
}

/// The adapter `choice` would run on: `None` for the CPU (`cpu`, or `auto` without a
/// hardware adapter), an error naming what is present when a `gpu…` request names
/// none. Opens nothing: for checking a flag before a model loads, and `llamay show`.
pub fn resolve_device(choice: &DeviceChoice) -> Result<Option<GpuAdapter>, ModelError> {
    use crate::device::{pick_adapter, AdapterPick};
    let pick = match choice {
        DeviceChoice::Cpu => return Ok(None),
        DeviceChoice::Auto => AdapterPick::First,
        DeviceChoice::Gpu(p) => p.clone(),
    };
    let all = gpu_adapters();
    match pick_adapter(&all, &pick) {
        Some(i) => Ok(Some(all[i].clone())),
        None if *choice == DeviceChoice::Auto => Ok(None),
        None if cfg!(not(feature = "gpu")) => Err(ModelError::Device(NO_GPU_BACKEND.into())),
        None => {
            let present: Vec<String> = all.iter().map(|a| a.to_string()).collect();
            Err(ModelError::Device(if present.is_empty() {
                format!("-device {choice}: no GPU adapter found")
            } else {
                format!(
                    "-device {choice}: no such GPU adapter (present: {}; software adapters are chosen only by name, as gpu:NAME)",
                    present.join(", ")
                )
            }))
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
