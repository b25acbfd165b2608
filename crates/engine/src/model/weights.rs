//! The tensors of a model, located and shape-checked at load time.

use super::arena::Arena;
use super::hparams::HParams;
use super::linear::{interleaved_len, load_vector, opt_vector, Weight};
use super::ModelError;
use crate::gguf::GgufFile;

/// Query, key and value projections: separate, or one fused matrix (phi3).
// One per layer, never moved after loading: boxing would buy nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Qkv {
    Separate { q: Weight, k: Weight, v: Weight },
    Fused(Weight),
}

/// Feed-forward input projections: separate gate and up, or fused (phi3: gate rows first).
pub(crate) enum GateUp {
    Separate { gate: Weight, up: Weight },
    Fused(Weight),
}

pub(crate) struct Layer {
    pub attn_norm: Vec<f32>,
    pub qkv: Qkv,
    /// Q, K, V biases (qwen2).
    pub qkv_bias: Option<[Vec<f32>; 3]>,
    /// Per-head RMS norms of Q and K (qwen3, gemma3).
    pub q_norm: Option<Vec<f32>>,
    pub k_norm: Option<Vec<f32>>,
    pub attn_out: Weight,
    /// Norm applied to the attention output before the residual add (gemma).
    pub post_attn_norm: Option<Vec<f32>>,
    pub ffn_norm: Vec<f32>,
    pub gate_up: GateUp,
    pub down: Weight,
    pub post_ffn_norm: Option<Vec<f32>>,
}

pub(crate) struct Weights {
    pub token_embd: Weight,
    pub layers: Vec<Layer>,
    pub output_norm: Vec<f32>,
    /// `None`: tied to `token_embd`.
    pub output: Option<Weight>,
}

impl Weights {
    pub(super) fn load(file: &GgufFile, hp: &HParams) -> Result<Weights, ModelError> {
        let e = hp.n_embd;
        // Room for every interleaved copy the file's tensors may need (an overestimate
        // only reserves address space).
        let arena = Arena::with_capacity(
            file.tensors()
                .iter()
                .filter_map(interleaved_len)
                .map(Arena::footprint)
                .sum(),
        );
        let tied = file.tensor("output.weight").is_none();
        let token_embd = if tied {
            Weight::load(file, &arena, "token_embd.weight", e, hp.n_vocab)?
        } else {
            Weight::load_rows(file, "token_embd.weight", e, hp.n_vocab)?
        };
        let layers = (0..hp.n_layer)
            .map(|il| load_layer(file, &arena, hp, il))
            .collect::<Result<_, _>>()?;
        let output = if tied {
            None
        } else {
            Some(Weight::load(file, &arena, "output.weight", e, hp.n_vocab)?)
        };
        Ok(Weights {
            token_embd,
            layers,
            output_norm: load_vector(file, "output_norm.weight", e)?,
            output,
        })
    }

    /// The matrix producing logits.
    pub(super) fn output(&self) -> &Weight {
        self.output.as_ref().unwrap_or(&self.token_embd)
    }
}

fn load_layer(
    file: &GgufFile,
    arena: &Arena,
    hp: &HParams,
    il: usize,
) -> Result<Layer, ModelError> {
    let n = |s: &str| format!("blk.{il}.{s}");
    let load = |name: &str, cols, rows| Weight::load(file, arena, &n(name), cols, rows);
    let e = hp.n_embd;
    let (qw, kw, vw) = (hp.q_width(), hp.k_width(), hp.v_width());
    let layout = &hp.family.tensors;
    let qkv = if layout.fused {
        Qkv::Fused(load("attn_qkv.weight", e, qw + kw + vw)?)
    } else {
        Qkv::Separate {
            q: load("attn_q.weight", e, qw)?,
            k: load("attn_k.weight", e, kw)?,
            v: load("attn_v.weight", e, vw)?,
        }
    };
    let qkv_bias = match (
        opt_vector(file, &n("attn_q.bias"), qw)?,
        opt_vector(file, &n("attn_k.bias"), kw)?,
        opt_vector(file, &n("attn_v.bias"), vw)?,
    ) {
        (Some(q), Some(k), Some(v)) => Some([q, k, v]),
        (None, None, None) => None,
        _ => {
            return Err(ModelError::Invalid(format!(
                "layer {il} has some but not all of the q/k/v biases"
            )))
        }
    };
    let gate_up = if layout.fused {
        GateUp::Fused(load("ffn_up.weight", e, 2 * hp.n_ff)?)
    } else {
        GateUp::Separate {
            gate: load("ffn_gate.weight", e, hp.n_ff)?,
            up: load("ffn_up.weight", e, hp.n_ff)?,
        }
    };
    let qk_norm = |s: &str| -> Result<Option<Vec<f32>>, ModelError> {
        if layout.qk_norm {
            load_vector(file, &n(s), hp.head_dim_k).map(Some)
        } else {
            Ok(None)
        }
    };
    let post = |s: &str| -> Result<Option<Vec<f32>>, ModelError> {
        if layout.post_norms {
            load_vector(file, &n(s), e).map(Some)
        } else {
            Ok(None)
        }
    };
    Ok(Layer {
        attn_norm: load_vector(file, &n("attn_norm.weight"), e)?,
        qkv,
        qkv_bias,
        q_norm: qk_norm("attn_q_norm.weight")?,
        k_norm: qk_norm("attn_k_norm.weight")?,
        attn_out: load("attn_output.weight", hp.n_head * hp.head_dim_v, e)?,
        post_attn_norm: post("post_attention_norm.weight")?,
        ffn_norm: load_vector(file, &n("ffn_norm.weight"), e)?,
        gate_up,
        down: load("ffn_down.weight", hp.n_ff, e)?,
        post_ffn_norm: post("post_ffw_norm.weight")?,
    })
}
