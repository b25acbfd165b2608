//! An encoder's tensors, located and shape-checked at load time (llama.cpp's names).

use super::super::arena::Arena;
use super::super::linear::{interleaved_len, load_vector, opt_vector, Affine, Norm, Weight};
use super::super::ModelError;
use super::family::{FeedForward, Positions};
use super::EncoderParams;
use crate::gguf::GgufFile;

/// The query, key and value projections (one per layer: their size does not matter).
#[allow(clippy::large_enum_variant)]
pub(super) enum Qkv {
    Separate {
        q: Affine,
        k: Affine,
        v: Affine,
    },
    /// One `attn_qkv` product whose output rows are Q, then K, then V.
    Fused(Affine),
}

pub(super) struct EncoderLayer {
    pub qkv: Qkv,
    pub out: Affine,
    pub attn_norm: Norm,
    pub up: Affine,
    /// The SwiGLU gate ([`FeedForward::SwiGlu`]).
    pub gate: Option<Affine>,
    pub down: Affine,
    pub out_norm: Norm,
}

pub(super) struct EncoderWeights {
    pub token_embd: Weight,
    /// Row 0 of the token-type embeddings: llama.cpp gives every token type 0.
    pub type0: Vec<f32>,
    /// `n_ctx_train × n_embd` absolute position embeddings ([`Positions::Table`]).
    pub positions: Option<Vec<f32>>,
    pub embd_norm: Norm,
    pub layers: Vec<EncoderLayer>,
    /// The pooler (`cls`, tanh after it) and the classifier (`cls.output`).
    pub cls: Option<Affine>,
    pub cls_out: Option<Affine>,
}

impl EncoderWeights {
    pub(super) fn load(file: &GgufFile, hp: &EncoderParams) -> Result<EncoderWeights, ModelError> {
        let e = hp.n_embd;
        let arena = Arena::with_capacity(
            file.tensors()
                .iter()
                .filter_map(interleaved_len)
                .map(Arena::footprint)
                .sum(),
        );
        let weight = |name: &str, cols, rows| Weight::load(file, &arena, name, cols, rows);
        // Embedding tables are read row by row, in the file's layout.
        let table = |name: &str, cols, rows| Weight::load_rows(file, name, cols, rows);
        let affine = |name: &str, cols, rows| -> Result<Affine, ModelError> {
            Ok(Affine {
                w: weight(&format!("{name}.weight"), cols, rows)?,
                b: opt_vector(file, &format!("{name}.bias"), rows)?.unwrap_or(vec![0.0; rows]),
            })
        };
        let norm = |name: &str| -> Result<Norm, ModelError> {
            Ok(Norm {
                w: load_vector(file, &format!("{name}.weight"), e)?,
                b: load_vector(file, &format!("{name}.bias"), e)?,
            })
        };
        let token_embd = table("token_embd.weight", e, hp.n_vocab)?;
        let type0 = match file.tensor("token_types.weight") {
            Some(t) => {
                let n_types = t.dims.get(1).copied().unwrap_or(0) as usize;
                let w = table("token_types.weight", e, n_types.max(1))?;
                let mut row = vec![0.0; e];
                w.row_f32(file, 0, &mut row)?;
                row
            }
            None => vec![0.0; e],
        };
        let positions = match hp.family.positions {
            Positions::Rotary => None,
            Positions::Table => {
                let pos = table("position_embd.weight", e, hp.n_ctx_train)?;
                let mut positions = vec![0.0; hp.n_ctx_train * e];
                for (p, row) in positions.chunks_exact_mut(e).enumerate() {
                    pos.row_f32(file, p, row)?;
                }
                Some(positions)
            }
        };
        // A projection whose biases llama.cpp's graph does not add.
        let unbiased = |name: &str, cols, rows| -> Result<Affine, ModelError> {
            Ok(Affine {
                w: weight(&format!("{name}.weight"), cols, rows)?,
                b: vec![0.0; rows],
            })
        };
        let layers = (0..hp.n_layer)
            .map(|il| {
                let n = |s: &str| format!("blk.{il}.{s}");
                let (up, gate, down) = match hp.family.ffn {
                    FeedForward::Gelu => (
                        affine(&n("ffn_up"), e, hp.n_ff)?,
                        None,
                        affine(&n("ffn_down"), hp.n_ff, e)?,
                    ),
                    FeedForward::SwiGlu => (
                        unbiased(&n("ffn_up"), e, hp.n_ff)?,
                        Some(unbiased(&n("ffn_gate"), e, hp.n_ff)?),
                        unbiased(&n("ffn_down"), hp.n_ff, e)?,
                    ),
                };
                Ok(EncoderLayer {
                    qkv: qkv(file, &affine, &n, e)?,
                    out: affine(&n("attn_output"), e, e)?,
                    attn_norm: norm(&n("attn_output_norm"))?,
                    up,
                    gate,
                    down,
                    out_norm: norm(&n("layer_output_norm"))?,
                })
            })
            .collect::<Result<_, ModelError>>()?;
        let cls = match file.tensor("cls.weight") {
            Some(_) => Some(affine("cls", e, e)?),
            None => None,
        };
        let cls_out = match file.tensor("cls.output.weight") {
            Some(_) => Some(affine("cls.output", e, hp.n_cls_out)?),
            None => None,
        };
        Ok(EncoderWeights {
            token_embd,
            type0,
            positions,
            embd_norm: norm("token_embd_norm")?,
            layers,
            cls,
            cls_out,
        })
    }

    /// Whether rank pooling has a head to score with.
    pub(super) fn has_classifier(&self) -> bool {
        self.cls.is_some() || self.cls_out.is_some()
    }
}

/// A layer's Q/K/V as llama.cpp finds them: `attn_qkv` when the file has it (its bias,
/// or else the separate biases joined when all three are there), else `attn_q`,
/// `attn_k` and `attn_v`.
fn qkv(
    file: &GgufFile,
    affine: &dyn Fn(&str, usize, usize) -> Result<Affine, ModelError>,
    n: &dyn Fn(&str) -> String,
    e: usize,
) -> Result<Qkv, ModelError> {
    if file.tensor(&format!("{}.weight", n("attn_qkv"))).is_none() {
        return Ok(Qkv::Separate {
            q: affine(&n("attn_q"), e, e)?,
            k: affine(&n("attn_k"), e, e)?,
            v: affine(&n("attn_v"), e, e)?,
        });
    }
    let mut fused = affine(&n("attn_qkv"), e, 3 * e)?;
    if file.tensor(&format!("{}.bias", n("attn_qkv"))).is_none() {
        let mut joined = Vec::with_capacity(3 * e);
        for p in ["attn_q", "attn_k", "attn_v"] {
            match opt_vector(file, &format!("{}.bias", n(p)), e)? {
                Some(b) => joined.extend(b),
                None => break,
            }
        }
        if joined.len() == 3 * e {
            fused.b = joined;
        }
    }
    Ok(Qkv::Fused(fused))
}
