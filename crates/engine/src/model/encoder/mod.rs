//! Encoder models (llama.cpp's `bert` and `nomic-bert` architectures, see `family`):
//! every token attends to every other token of its text, and a text becomes one vector
//! (pooling), or, for a cross-encoder, one relevance score.
//!
//! An [`Encoder`] has no KV cache: [`Encoder::encode`] runs whole texts, many packed into
//! one forward pass (no padding: each text's attention reads only its own rows), on the
//! same kind of thread pool and matrix kernels as the decoders.

mod family;

pub(super) use family::names as family_names;
mod ffn;
mod forward;
mod qkv;
mod weights;

use std::path::Path;
use std::sync::Arc;

use super::rope::{Rope, RopeScaling, RopeTable};
use super::{LoadOptions, ModelError};
use crate::facts::ModelFacts;
use crate::gguf::GgufFile;
use crate::pool::{physical_cores, ThreadPool};
use family::{EncoderFamily, Positions};
use weights::EncoderWeights;

/// How token outputs become one vector per text (llama.cpp's `pooling_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pooling {
    /// Every token's vector (no pooling).
    None,
    /// The average over the text's tokens.
    Mean,
    /// The first token's (`[CLS]`).
    Cls,
    /// The last token's.
    Last,
    /// The first token through the classification head: relevance scores.
    Rank,
}

impl Pooling {
    /// llama.cpp's enum value (`LLAMA_POOLING_TYPE_*`).
    pub fn from_llama(v: u32) -> Option<Pooling> {
        Some(match v {
            0 => Pooling::None,
            1 => Pooling::Mean,
            2 => Pooling::Cls,
            3 => Pooling::Last,
            4 => Pooling::Rank,
            _ => return None,
        })
    }

    /// The name llama.cpp's `--pooling` takes.
    pub fn name(self) -> &'static str {
        match self {
            Pooling::None => "none",
            Pooling::Mean => "mean",
            Pooling::Cls => "cls",
            Pooling::Last => "last",
            Pooling::Rank => "rank",
        }
    }

    /// The pooling named `s` (as [`Pooling::name`] spells it).
    pub fn from_name(s: &str) -> Option<Pooling> {
        [
            Pooling::None,
            Pooling::Mean,
            Pooling::Cls,
            Pooling::Last,
            Pooling::Rank,
        ]
        .into_iter()
        .find(|p| p.name() == s)
    }
}

/// The shape of an encoder.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct EncoderParams {
    family: &'static EncoderFamily,
    pub n_layer: usize,
    pub n_embd: usize,
    pub n_ff: usize,
    pub n_head: usize,
    pub n_vocab: usize,
    pub n_ctx_train: usize,
    pub eps: f32,
    pub pooling: Pooling,
    /// Scores of the classification head (rank pooling).
    pub n_cls_out: usize,
    /// The rotation of queries and keys ([`Positions::Rotary`]).
    pub rope: Option<Rope>,
}

impl EncoderParams {
    fn from_gguf(f: &GgufFile) -> Result<EncoderParams, ModelError> {
        let arch = f.architecture()?;
        let family =
            family::find(arch).ok_or_else(|| ModelError::UnsupportedArch(arch.to_string()))?;
        let key = |s: &str| format!("{arch}.{s}");
        let dim = |s: &str| -> Result<usize, ModelError> {
            let k = key(s);
            let v = f.get_u32(&k)?;
            if v == 0 || v > 1 << 24 {
                return Err(ModelError::Invalid(format!(
                    "metadata {k} = {v} is out of range"
                )));
            }
            Ok(v as usize)
        };
        let n_embd = dim("embedding_length")?;
        let n_head = dim("attention.head_count")?;
        if n_embd % n_head != 0 {
            return Err(ModelError::Invalid(format!(
                "embedding_length {n_embd} is not a multiple of head_count {n_head}"
            )));
        }
        if f.opt_bool(&key("attention.causal"))? == Some(true) {
            return Err(ModelError::Invalid(format!(
                "a causal {arch} model is not an encoder llamay runs"
            )));
        }
        let pooling = match f.opt_u32(&key("pooling_type"))? {
            None => Pooling::Cls,
            Some(v) => Pooling::from_llama(v)
                .ok_or_else(|| ModelError::Invalid(format!("unknown pooling_type {v}")))?,
        };
        let n_cls_out = match f.get(&key("classifier.output_labels")) {
            Some(_) => f
                .array_strings(&key("classifier.output_labels"))?
                .count()
                .max(1),
            None => 1,
        };
        let n_vocab = f
            .require_tensor("token_embd.weight")?
            .dims
            .get(1)
            .copied()
            .unwrap_or(0) as usize;
        let n_ctx_train = dim("context_length")?;
        let rope = match family.positions {
            Positions::Table => None,
            Positions::Rotary => {
                // llama.cpp's defaults: the whole head rotated, base 10,000.
                let head_dim = n_embd / n_head;
                let dims = match f.opt_u32(&key("rope.dimension_count"))? {
                    Some(d) => d as usize,
                    None => head_dim,
                };
                if dims == 0 || dims > head_dim || dims % 2 != 0 {
                    return Err(ModelError::Invalid(format!(
                        "rope.dimension_count {dims} does not fit heads of {head_dim}"
                    )));
                }
                let base = f.opt_f32(&key("rope.freq_base"))?.unwrap_or(10_000.0);
                if !base.is_finite() || base <= 1.0 {
                    return Err(ModelError::Invalid(format!(
                        "rope.freq_base {base} must be a number above 1"
                    )));
                }
                let scaling = RopeScaling::from_gguf(f, arch, n_ctx_train, None, false)?;
                Some(Rope::new(dims, base, scaling.freq_scale, &scaling))
            }
        };
        Ok(EncoderParams {
            family,
            n_layer: dim("block_count")?,
            n_embd,
            n_ff: dim("feed_forward_length")?,
            n_head,
            n_vocab,
            n_ctx_train,
            eps: f.get_f32(&key("attention.layer_norm_epsilon"))?,
            pooling,
            n_cls_out,
            rope,
        })
    }
}

/// A loaded encoder: read-only and shareable between threads.
pub struct Encoder {
    file: GgufFile,
    hp: EncoderParams,
    weights: EncoderWeights,
    /// Cosines and sines of every position of the context, under rotary positions.
    rope: Option<RopeTable>,
    pool: ThreadPool,
    facts: ModelFacts,
}

impl std::fmt::Debug for Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encoder")
            .field("facts", &self.facts)
            .finish()
    }
}

impl Encoder {
    /// Whether `file` holds an architecture that [`Encoder`] runs (and [`super::Model`]
    /// does not).
    pub fn is_encoder(file: &GgufFile) -> bool {
        file.architecture().is_ok_and(|a| family::find(a).is_some())
    }

    /// Opens, validates and prepares the GGUF encoder at `path` (`n_threads` of `opts`
    /// is used; an encoder keeps no KV cache).
    pub fn load(path: impl AsRef<Path>, opts: &LoadOptions) -> Result<Arc<Encoder>, ModelError> {
        Self::from_gguf(GgufFile::open(path)?, opts)
    }

    /// Prepares an encoder from an already opened file.
    pub fn from_gguf(file: GgufFile, opts: &LoadOptions) -> Result<Arc<Encoder>, ModelError> {
        let hp = EncoderParams::from_gguf(&file)?;
        let weights = EncoderWeights::load(&file, &hp)?;
        let rope = hp
            .rope
            .as_ref()
            .map(|r| RopeTable::new(0..hp.n_ctx_train, r, None));
        let facts = ModelFacts {
            context_length: Some(hp.n_ctx_train as u64),
            embedding_length: Some(hp.n_embd as u64),
            block_count: Some(hp.n_layer as u64),
            head_count: Some(hp.n_head as u64),
            head_count_kv: Some(hp.n_head as u64),
            vocab_size: hp.n_vocab as u64,
            ..ModelFacts::from_gguf(&file)?
        };
        let n_threads = opts.n_threads.unwrap_or_else(physical_cores).max(1);
        Ok(Arc::new(Encoder {
            file,
            hp,
            weights,
            rope,
            pool: ThreadPool::new(n_threads),
            facts,
        }))
    }

    /// The pooling the file asks for.
    pub fn pooling(&self) -> Pooling {
        self.hp.pooling
    }

    /// Whether the model has the classification head that rank pooling needs.
    pub fn can_rank(&self) -> bool {
        self.weights.has_classifier()
    }

    /// The longest text, in tokens (special tokens included).
    pub fn n_ctx(&self) -> usize {
        self.hp.n_ctx_train
    }

    /// Width of a pooled embedding.
    pub fn n_embd(&self) -> usize {
        self.hp.n_embd
    }

    /// Scores per text under rank pooling.
    pub fn n_cls_out(&self) -> usize {
        self.hp.n_cls_out
    }

    pub fn n_vocab(&self) -> usize {
        self.hp.n_vocab
    }

    pub fn n_threads(&self) -> usize {
        self.pool.n_threads()
    }

    pub fn facts(&self) -> &ModelFacts {
        &self.facts
    }

    /// The underlying file (tokenizer metadata).
    pub fn gguf(&self) -> &GgufFile {
        &self.file
    }

    /// Runs each text (token ids, special tokens included) and pools its outputs:
    /// one vector per text (`n_embd` values; `n_cls_out` scores under
    /// [`Pooling::Rank`]; every token's `n_embd` values, one after another, under
    /// [`Pooling::None`]). Vectors are not normalised. Texts are packed into passes of
    /// up to a few thousand tokens.
    pub fn encode(&self, texts: &[&[u32]], pooling: Pooling) -> Result<Vec<Vec<f32>>, ModelError> {
        for t in texts {
            if t.is_empty() {
                return Err(ModelError::Invalid(
                    "an empty text has nothing to encode".into(),
                ));
            }
            if t.len() > self.hp.n_ctx_train {
                return Err(ModelError::ContextFull {
                    needed: t.len(),
                    n_ctx: self.hp.n_ctx_train,
                });
            }
            if let Some(&bad) = t.iter().find(|&&id| id as usize >= self.hp.n_vocab) {
                return Err(ModelError::BadToken {
                    token: bad,
                    n_vocab: self.hp.n_vocab,
                });
            }
        }
        if pooling == Pooling::Rank && !self.can_rank() {
            return Err(ModelError::Invalid(
                "rank pooling needs a classification head (cls.output), which this model lacks"
                    .into(),
            ));
        }
        let mut out = Vec::with_capacity(texts.len());
        let mut start = 0;
        while start < texts.len() {
            let mut end = start;
            let mut tokens = 0;
            while end < texts.len()
                && (end == start || tokens + texts[end].len() <= forward::PASS_TOKENS)
            {
                tokens += texts[end].len();
                end += 1;
            }
            out.extend(self.pass(&texts[start..end], pooling)?);
            start = end;
        }
        Ok(out)
    }
}

/// `dst += src`, element by element (the residual adds of every block).
fn add(dst: &mut [f32], src: &[f32]) {
    dst.iter_mut().zip(src).for_each(|(d, &s)| *d += s);
}

/// `v` scaled to unit length (left as it is when it is all zeros).
pub fn l2_normalize(v: &mut [f32]) {
    let n = v
        .iter()
        .map(|&x| (x as f64) * (x as f64))
        .sum::<f64>()
        .sqrt();
    if n > 0.0 {
        let s = (1.0 / n) as f32;
        v.iter_mut().for_each(|x| *x *= s);
    }
}
