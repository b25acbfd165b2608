//! The tensors of a model, located and shape-checked at load time.

use super::arena::Arena;
use super::hparams::{ExpertShape, HParams, LinearShape};
use super::linear::{arena_footprint, load_table, load_vector, opt_table, opt_vector, Weight};
use super::per_layer::{LayerInput, PerLayerInputs};
use super::ModelError;
use crate::gguf::GgufFile;

/// Query, key and value projections: separate, or one fused matrix (phi3).
// One per layer, never moved after loading: boxing would buy nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Qkv {
    Separate {
        q: Weight,
        k: Weight,
        v: Weight,
    },
    Fused(Weight),
    /// A layer attending to an earlier layer's keys and values (Gemma 4's shared-KV
    /// layers): its queries only.
    QueryOnly(Weight),
}

/// Feed-forward input projections: separate gate and up, or fused (phi3: gate rows first).
pub(crate) enum GateUp {
    Separate { gate: Weight, up: Weight },
    Fused(Weight),
}

/// A layer's feed-forward block.
// One per layer, never moved after loading: boxing would buy nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Ffn {
    Dense { gate_up: GateUp, down: Weight },
    Experts(Experts),
}

/// A mixture of experts: a router choosing each token's experts among `experts`.
pub(crate) struct Experts {
    /// `n_expert` rows: one logit per expert.
    pub router: Weight,
    /// Added to the router's logits before the choice (gpt-oss).
    pub router_bias: Option<Vec<f32>>,
    pub experts: Vec<Expert>,
    /// An expert every token runs through, added to the chosen ones' output.
    pub shared: Option<SharedExpert>,
}

/// One expert: a SwiGLU feed-forward block of its own.
pub(crate) struct Expert {
    pub gate: Weight,
    pub up: Weight,
    pub down: Weight,
    /// Biases of its gate, up and down products (gpt-oss).
    pub bias: Option<[Vec<f32>; 3]>,
}

pub(crate) struct SharedExpert {
    pub mlp: Expert,
    /// Scales its output per token by `sigmoid(gate · x)` (Qwen 2 MoE); `None`: by 1.
    pub gate: Option<Vec<f32>>,
}

pub(crate) struct Layer {
    pub attn_norm: Vec<f32>,
    /// What mixes the positions: attention, or a Gated DeltaNet layer.
    pub mixer: Mixer,
    /// Norm applied to the attention output before the residual add (gemma).
    pub post_attn_norm: Option<Vec<f32>>,
    pub ffn_norm: Vec<f32>,
    pub ffn: Ffn,
    pub post_ffn_norm: Option<Vec<f32>>,
    /// Its per-layer input's gate, projection and norm (Gemma 4).
    pub per_layer: Option<LayerInput>,
    /// Multiplies the layer's output (Gemma 4's `layer_output_scale`).
    pub out_scale: Option<f32>,
}

impl Layer {
    /// The layer's attention weights; `None` for a linear-attention layer.
    pub(crate) fn attention(&self) -> Option<&Attention> {
        match &self.mixer {
            Mixer::Attention(a) => Some(a),
            Mixer::DeltaNet(_) | Mixer::ShortConv(_) => None,
        }
    }
}

/// A layer's token mixer.
// One per layer, never moved after loading: boxing would buy nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Mixer {
    Attention(Attention),
    DeltaNet(DeltaNet),
    ShortConv(ShortConv),
}

/// Softmax attention over the sequence's cached keys and values.
pub(crate) struct Attention {
    /// With the family's `q_gate`, the query rows hold each head's query then its gate.
    pub qkv: Qkv,
    /// Q, K, V biases (qwen2).
    pub qkv_bias: Option<[Vec<f32>; 3]>,
    /// Per-head RMS norms of Q and K (qwen3, gemma3).
    pub q_norm: Option<Vec<f32>>,
    pub k_norm: Option<Vec<f32>>,
    pub attn_out: Weight,
    /// Added to the attention output (gpt-oss).
    pub attn_out_bias: Option<Vec<f32>>,
    /// A sink logit per head (gpt-oss).
    pub attn_sinks: Option<Vec<f32>>,
}

/// A gated short convolution (llama.cpp's `lfm2` conv layers).
pub(crate) struct ShortConv {
    /// `shortconv.in_proj`: B, C and x, `n_embd` rows each.
    pub in_proj: Weight,
    /// `shortconv.conv`: `l_cache` taps per channel, channel after channel.
    pub conv: Vec<f32>,
    pub out_proj: Weight,
}

/// A Gated DeltaNet layer (llama.cpp's `qwen35` linear attention).
pub(crate) struct DeltaNet {
    /// `attn_qkv`: the conv's input, queries then keys then values.
    pub qkv: Weight,
    /// `attn_gate`: z, the output norm's SiLU gate.
    pub gate: Weight,
    /// `ssm_conv1d`: `conv` taps per channel, channel after channel.
    pub conv: Vec<f32>,
    /// `ssm_dt.bias`, added to alpha before the softplus (per value head).
    pub dt_bias: Vec<f32>,
    /// `ssm_a`: -exp(A_log) per value head, as the converter stores it.
    pub a: Vec<f32>,
    /// `ssm_beta` and `ssm_alpha`: one row per value head.
    pub beta: Weight,
    pub alpha: Weight,
    /// `ssm_norm`: the gated RMS norm of each head's output.
    pub norm: Vec<f32>,
    /// `ssm_out`: the output projection.
    pub out: Weight,
}

/// A multi-token-prediction block (`blk.{n_layer + i}`): a full-attention layer fed
/// the normed next-token embedding and the trunk's normed hidden state, projected
/// together by `eh_proj`. Loaded and kept for speculative decoding; never run yet.
#[allow(dead_code)]
pub(crate) struct Mtp {
    pub layer: Layer,
    pub eh_proj: Weight,
    pub enorm: Vec<f32>,
    pub hnorm: Vec<f32>,
    /// Its own head norm and head, when the file has them (else the trunk's).
    pub head_norm: Option<Vec<f32>>,
    pub head: Option<Weight>,
    /// Its own token embeddings, when the file has them.
    pub embed: Option<Weight>,
}

pub(crate) struct Weights {
    pub token_embd: Weight,
    pub layers: Vec<Layer>,
    pub output_norm: Vec<f32>,
    /// `None`: tied to `token_embd`.
    pub output: Option<Weight>,
    /// Multi-token-prediction blocks (Qwen 3.5), kept for speculative decoding.
    #[allow(dead_code)]
    pub mtp: Vec<Mtp>,
    /// The per-layer input tables (Gemma 4).
    pub per_layer: Option<PerLayerInputs>,
}

impl Weights {
    pub(super) fn load(file: &GgufFile, hp: &HParams) -> Result<Weights, ModelError> {
        let e = hp.n_embd;
        // Room for every interleaved copy the file's tensors may need (an overestimate
        // only reserves address space).
        let arena = Arena::with_capacity(file.tensors().iter().map(arena_footprint).sum());
        let tied = file.tensor("output.weight").is_none();
        let token_embd = if tied {
            Weight::load(file, &arena, "token_embd.weight", e, hp.n_vocab)?
        } else {
            Weight::load_rows(file, "token_embd.weight", e, hp.n_vocab)?
        };
        let layers = (0..hp.n_layer)
            .map(|il| load_layer(file, &arena, hp, il))
            .collect::<Result<_, _>>()?;
        // llama.cpp loads the prediction blocks only when asked (and files converted
        // without them may still count them): a block is loaded, whole, when its
        // `nextn.eh_proj` is there.
        let mtp = (hp.n_layer..hp.n_layer + hp.n_nextn)
            .filter(|il| {
                file.tensor(&format!("blk.{il}.nextn.eh_proj.weight"))
                    .is_some()
            })
            .map(|il| load_mtp(file, &arena, hp, il))
            .collect::<Result<_, _>>()?;
        let output = if tied {
            None
        } else {
            Some(Weight::load(file, &arena, "output.weight", e, hp.n_vocab)?)
        };
        Ok(Weights {
            token_embd,
            layers,
            output_norm: load_vector(
                file,
                &format!("{}.weight", hp.family.tensors.output_norm),
                e,
            )?,
            output,
            mtp,
            per_layer: match hp.n_embd_per_layer {
                0 => None,
                w => Some(PerLayerInputs::load(file, &arena, hp, w)?),
            },
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
    // A prediction block (after the trunk) has the trunk's last layer's shape: the
    // families with such blocks give every layer the same widths.
    let hl = il.min(hp.n_layer - 1);
    let layout = &hp.family.tensors;
    let mixer = match (hp.recurrent_layers.get(il), &hp.linear, hp.short_conv) {
        (Some(true), Some(shape), _) => Mixer::DeltaNet(load_delta_net(file, arena, shape, il, e)?),
        (Some(true), None, Some(taps)) => Mixer::ShortConv(ShortConv {
            in_proj: load("shortconv.in_proj.weight", e, 3 * e)?,
            conv: load_table(file, &n("shortconv.conv.weight"), &[taps, e])?,
            out_proj: load("shortconv.out_proj.weight", e, e)?,
        }),
        _ => Mixer::Attention(load_attention(file, arena, hp, il)?),
    };
    if hp.family.gemma4_keys && file.tensor(&n("ffn_gate_inp.weight")).is_some() {
        return Err(ModelError::Invalid(format!(
            "{}: Gemma 4's mixture-of-experts layers are not supported yet",
            n("ffn_gate_inp.weight")
        )));
    }
    let ff = hp.ff_layers[hl];
    let ffn = match &hp.experts {
        Some(shape) => Ffn::Experts(load_experts(file, arena, hp, shape, il)?),
        None if layout.fused_gate_up => Ffn::Dense {
            gate_up: GateUp::Fused(load("ffn_up.weight", e, 2 * ff)?),
            down: load("ffn_down.weight", ff, e)?,
        },
        None => Ffn::Dense {
            gate_up: GateUp::Separate {
                gate: load("ffn_gate.weight", e, ff)?,
                up: load("ffn_up.weight", e, ff)?,
            },
            down: load("ffn_down.weight", ff, e)?,
        },
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
        mixer,
        post_attn_norm: post("post_attention_norm.weight")?,
        ffn_norm: load_vector(file, &n(&format!("{}.weight", layout.ffn_norm)), e)?,
        ffn,
        post_ffn_norm: post("post_ffw_norm.weight")?,
        per_layer: match hp.n_embd_per_layer {
            0 => None,
            w => Some(LayerInput::load(file, arena, e, w, il)?),
        },
        out_scale: opt_vector(file, &n("layer_output_scale.weight"), 1)?.map(|s| s[0]),
    })
}

/// Layer `il`'s attention: Q (with its gate rows when the family has them), K, V; a
/// layer sharing an earlier layer's keys and values has its queries only.
fn load_attention(
    file: &GgufFile,
    arena: &Arena,
    hp: &HParams,
    il: usize,
) -> Result<Attention, ModelError> {
    let n = |s: &str| format!("blk.{il}.{s}");
    let load = |name: &str, cols, rows| Weight::load(file, arena, &n(name), cols, rows);
    let e = hp.n_embd;
    // A prediction block (after the trunk) has the trunk's last layer's shape.
    let hl = il.min(hp.n_layer - 1);
    let (qw, kw, vw) = hp.widths(hl);
    let (hk, hv) = hp.head_dims(hl);
    // The query projection's rows: with `q_gate`, each head's query then its gate.
    let qpw = if hp.family.tensors.q_gate { 2 * qw } else { qw };
    let layout = &hp.family.tensors;
    let own_kv = hp.kv_layer[hl] == hl;
    // llama.cpp's `create_tensor_qkv` takes a fused `attn_qkv` wherever one is stored
    // (GLM-4 and Qwen 3.5's full-attention layers may have either); Phi-3 always has one.
    let fused_qkv = layout.fused_qkv || file.tensor(&n("attn_qkv.weight")).is_some();
    let qkv = if !own_kv {
        // Never gated: `HParams` refuses gated queries with shared keys and values.
        Qkv::QueryOnly(load("attn_q.weight", e, qw)?)
    } else if fused_qkv {
        Qkv::Fused(load("attn_qkv.weight", e, qpw + kw + vw)?)
    } else {
        // Gemma 4's larger files give some layers no `attn_v`: their values are their
        // keys' product (normed and not rotated), as llama.cpp reads them.
        let keys_as_values = hp.family.gemma4_keys && kw == vw;
        let v_name = match file.tensor(&n("attn_v.weight")) {
            None if keys_as_values => "attn_k.weight",
            _ => "attn_v.weight",
        };
        Qkv::Separate {
            q: load("attn_q.weight", e, qpw)?,
            k: load("attn_k.weight", e, kw)?,
            v: load(v_name, e, vw)?,
        }
    };
    let qkv_bias = match (
        opt_vector(file, &n("attn_qkv.bias"), qw + kw + vw)?,
        opt_vector(file, &n("attn_q.bias"), qw)?,
        opt_vector(file, &n("attn_k.bias"), kw)?,
        opt_vector(file, &n("attn_v.bias"), vw)?,
    ) {
        // One fused bias, cut as the fused product's rows are.
        (Some(b), None, None, None) => Some([
            b[..qw].to_vec(),
            b[qw..qw + kw].to_vec(),
            b[qw + kw..].to_vec(),
        ]),
        (None, Some(q), Some(k), Some(v)) => Some([q, k, v]),
        (None, None, None, None) => None,
        _ => {
            return Err(ModelError::Invalid(format!(
                "layer {il} has some but not all of the q/k/v biases"
            )))
        }
    };
    let qk_norm = |s: &str| -> Result<Option<Vec<f32>>, ModelError> {
        if layout.qk_norm {
            load_vector(file, &n(s), hk).map(Some)
        } else {
            Ok(None)
        }
    };
    Ok(Attention {
        qkv,
        qkv_bias,
        q_norm: qk_norm("attn_q_norm.weight")?,
        // A layer reading another's keys has no key norm of its own.
        k_norm: match own_kv {
            true => qk_norm("attn_k_norm.weight")?,
            false => None,
        },
        attn_out: load(&format!("{}.weight", layout.attn_output), hp.n_head * hv, e)?,
        attn_out_bias: opt_vector(file, &n(&format!("{}.bias", layout.attn_output)), e)?,
        attn_sinks: match layout.sinks {
            Some(name) => Some(load_vector(file, &n(name), hp.n_head)?),
            None => None,
        },
    })
}

/// Layer `il`'s Gated DeltaNet tensors, every shape from the `ssm.*` keys (so a key
/// that disagrees with the tensors fails on the first tensor it shapes, by name).
fn load_delta_net(
    file: &GgufFile,
    arena: &Arena,
    shape: &LinearShape,
    il: usize,
    e: usize,
) -> Result<DeltaNet, ModelError> {
    let n = |s: &str| format!("blk.{il}.{s}");
    let load = |name: &str, cols, rows| Weight::load(file, arena, &n(name), cols, rows);
    let (vd, heads) = (shape.value_dim(), shape.n_v_heads);
    let net = DeltaNet {
        qkv: load("attn_qkv.weight", e, shape.conv_dim())?,
        gate: load("attn_gate.weight", e, vd)?,
        conv: load_table(
            file,
            &n("ssm_conv1d.weight"),
            &[shape.conv, shape.conv_dim()],
        )?,
        dt_bias: load_vector(file, &n("ssm_dt.bias"), heads)?,
        a: load_vector(file, &n("ssm_a"), heads)?,
        beta: load("ssm_beta.weight", e, heads)?,
        alpha: load("ssm_alpha.weight", e, heads)?,
        norm: load_vector(file, &n("ssm_norm.weight"), shape.d_state)?,
        out: load("ssm_out.weight", vd, e)?,
    };
    if shape.d_inner != vd {
        return Err(ModelError::Invalid(format!(
            "ssm.inner_size {} disagrees with {}: {} value heads of {} make {vd}",
            shape.d_inner,
            n("ssm_out.weight"),
            heads,
            shape.d_state
        )));
    }
    Ok(net)
}

/// Multi-token-prediction block `il` (after the trunk): a full-attention layer and
/// its `nextn.*` tensors.
fn load_mtp(file: &GgufFile, arena: &Arena, hp: &HParams, il: usize) -> Result<Mtp, ModelError> {
    let n = |s: &str| format!("blk.{il}.{s}");
    let e = hp.n_embd;
    let load = |name: &str, cols, rows| Weight::load(file, arena, &n(name), cols, rows);
    let opt_weight = |name: &str, cols, rows| match file.tensor(&n(name)) {
        Some(_) => load(name, cols, rows).map(Some),
        None => Ok(None),
    };
    Ok(Mtp {
        layer: load_layer(file, arena, hp, il)?,
        eh_proj: load("nextn.eh_proj.weight", 2 * e, e)?,
        enorm: load_vector(file, &n("nextn.enorm.weight"), e)?,
        hnorm: load_vector(file, &n("nextn.hnorm.weight"), e)?,
        head_norm: opt_vector(file, &n("nextn.shared_head_norm.weight"), e)?,
        head: opt_weight("nextn.shared_head_head.weight", e, hp.n_vocab)?,
        embed: match file.tensor(&n("nextn.embed_tokens.weight")) {
            Some(_) => Some(Weight::load_rows(
                file,
                &n("nextn.embed_tokens.weight"),
                e,
                hp.n_vocab,
            )?),
            None => None,
        },
    })
}

/// Layer `il`'s router, experts (3-D `_exps` tensors, one slab per expert) and shared
/// expert (`_shexp`, its width read from its tensors).
fn load_experts(
    file: &GgufFile,
    arena: &Arena,
    hp: &HParams,
    shape: &ExpertShape,
    il: usize,
) -> Result<Experts, ModelError> {
    let n = |s: &str| format!("blk.{il}.{s}");
    let (e, ff, count) = (hp.n_embd, shape.n_ff, shape.n_expert);
    let each = |s: &str, cols, rows| Weight::load_experts(file, arena, &n(s), (cols, rows, count));
    let gates = each("ffn_gate_exps.weight", e, ff)?;
    let ups = each("ffn_up_exps.weight", e, ff)?;
    let downs = each("ffn_down_exps.weight", ff, e)?;
    let biases = expert_biases(file, &n, (e, ff, count))?;
    let experts = gates
        .into_iter()
        .zip(ups)
        .zip(downs)
        .enumerate()
        .map(|(i, ((gate, up), down))| Expert {
            gate,
            up,
            down,
            bias: biases.as_ref().map(|[g, u, d]| {
                [
                    g[i * ff..(i + 1) * ff].to_vec(),
                    u[i * ff..(i + 1) * ff].to_vec(),
                    d[i * e..(i + 1) * e].to_vec(),
                ]
            }),
        })
        .collect();
    let shared = match file.tensor(&n("ffn_up_shexp.weight")) {
        None => None,
        Some(info) => {
            let width = info.dims.get(1).map_or(0, |&d| d as usize);
            let load = |s: &str, cols, rows| Weight::load(file, arena, &n(s), cols, rows);
            Some(SharedExpert {
                mlp: Expert {
                    gate: load("ffn_gate_shexp.weight", e, width)?,
                    up: load("ffn_up_shexp.weight", e, width)?,
                    down: load("ffn_down_shexp.weight", width, e)?,
                    bias: None,
                },
                gate: opt_vector(file, &n("ffn_gate_inp_shexp.weight"), e)?,
            })
        }
    };
    Ok(Experts {
        router: Weight::load(file, arena, &n("ffn_gate_inp.weight"), e, count)?,
        router_bias: opt_vector(file, &n("ffn_gate_inp.bias"), count)?,
        experts,
        shared,
    })
}

/// The experts' gate, up and down biases (2-D `[width, n_expert]` tensors, one row per
/// expert), all or none.
fn expert_biases(
    file: &GgufFile,
    n: &dyn Fn(&str) -> String,
    (e, ff, count): (usize, usize, usize),
) -> Result<Option<[Vec<f32>; 3]>, ModelError> {
    let read = |s: &str, width: usize| opt_table(file, &n(s), &[width, count]);
    match (
        read("ffn_gate_exps.bias", ff)?,
        read("ffn_up_exps.bias", ff)?,
        read("ffn_down_exps.bias", e)?,
    ) {
        (Some(g), Some(u), Some(d)) => Ok(Some([g, u, d])),
        (None, None, None) => Ok(None),
        _ => Err(ModelError::Invalid(format!(
            "{} has some but not all of the expert biases",
            n("")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use crate::model::{LoadOptions, Model};

    /// The hybrid files' linear layers (from the interval, or from the list where
    /// the file gives one that the interval would contradict), their KV-keeping layers,
    /// and the prediction block kept beside the trunk.
    #[test]
    fn hybrid_layers_and_prediction_blocks() {
        for name in ["qwen35-F32", "qwen35moe-F32"] {
            let path = llamay_testdata::hybrid_model(name);
            let m = Model::load(path, &LoadOptions::default()).unwrap();
            assert_eq!(m.hp.recurrent_layers, [true, false, true, false], "{name}");
            assert_eq!((m.hp.n_layer, m.hp.n_nextn, m.hp.n_kv_layers()), (4, 1, 2));
            assert_eq!((m.hp.kv_slot(3), m.hp.linear_slot(2)), (1, 1));
            assert_eq!(m.weights.mtp.len(), 1, "{name}");
            assert!(m.weights.mtp[0].layer.attention().is_some());
        }
    }
}
