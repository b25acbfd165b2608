//! A projector file's tensors, located and shape-checked at load (llama.cpp's names:
//! `v.patch_embd.weight`, `v.blk.N.attn_q`, `mm.0`, ...).

use super::gemm::Panels;
use super::params::{ProjectorType, VisionParams};
use crate::ggml_type::GgmlType;
use crate::gguf::GgufFile;
use crate::model::arena::Arena;
use crate::model::linear::{
    interleaved_len, load_table, load_vector, opt_vector, Affine, Norm, Weight,
};
use crate::model::ModelError;

/// A small f32 matrix, `rows × cols` row after row, with the type the file stored it
/// in (llama.cpp rounds the input to f16 for an f16 one).
pub(super) struct Dense {
    pub rows: usize,
    pub cols: usize,
    pub values: Vec<f32>,
    pub input_f16: bool,
    /// The same values as panels, when they are f16 and the CPU runs panels.
    pub panels: Option<Panels>,
}

impl Dense {
    fn new(rows: usize, cols: usize, values: Vec<f32>, input_f16: bool) -> Dense {
        // The values came from f16, so packing them back as f16 loses nothing.
        let panels = (input_f16 && Panels::available()).then(|| {
            Panels::pack(rows, cols, |r, c| {
                half::f16::from_f32(values[r * cols + c]).to_bits()
            })
        });
        Dense {
            rows,
            cols,
            values,
            input_f16,
            panels,
        }
    }
}

/// A layer's six matrices as panels, when all are f16 and the CPU runs panels.
pub(super) struct LayerPanels {
    pub q: Panels,
    pub k: Panels,
    pub v: Panels,
    pub out: Panels,
    pub up: Panels,
    pub down: Panels,
}

impl LayerPanels {
    fn new(file: &GgufFile, l: &VitLayer) -> Result<Option<LayerPanels>, ModelError> {
        let one = |a: &Affine| -> Result<Option<Panels>, ModelError> {
            let m = a.w.matrix(file)?;
            if m.ty() != GgmlType::F16 || m.is_interleaved() || !Panels::available() {
                return Ok(None);
            }
            let (data, cols) = (m.data(), m.cols());
            Ok(Some(Panels::pack(m.rows(), cols, |r, c| {
                let i = 2 * (r * cols + c);
                u16::from_le_bytes([data[i], data[i + 1]])
            })))
        };
        let (Some(q), Some(k), Some(v), Some(out), Some(up), Some(down)) = (
            one(&l.q)?,
            one(&l.k)?,
            one(&l.v)?,
            one(&l.out)?,
            one(&l.up)?,
            one(&l.down)?,
        ) else {
            return Ok(None);
        };
        Ok(Some(LayerPanels {
            q,
            k,
            v,
            out,
            up,
            down,
        }))
    }
}

pub(super) struct VitLayer {
    pub q: Affine,
    pub k: Affine,
    pub v: Affine,
    pub out: Affine,
    pub ln1: Norm,
    pub ln2: Norm,
    pub up: Affine,
    pub down: Affine,
    pub panels: Option<LayerPanels>,
}

// One per file: the size of a variant does not matter.
#[allow(clippy::large_enum_variant)]
pub(super) enum ProjectorWeights {
    /// `mm.0`, GELU, then `mm.2` when the file has it.
    Mlp { mm0: Affine, mm2: Option<Affine> },
    /// The soft-embedding norm's scale and the input projection.
    Gemma3 { soft_norm: Vec<f32>, proj: Dense },
    /// `mm.model.fc` (no bias), over the pixel shuffle's `merge² × n_embd` rows.
    Idefics3 { fc: Affine },
}

pub(super) struct VisionWeights {
    /// The patch embedding as a matrix: one row per channel of the embedding, its
    /// columns (colour, y, x) of the patch.
    pub patch: Dense,
    pub patch_bias: Option<Vec<f32>>,
    pub class: Option<Vec<f32>>,
    /// One row per position (`n_pos × n_embd`).
    pub positions: Vec<f32>,
    pub pre_ln: Option<Norm>,
    pub layers: Vec<VitLayer>,
    pub post_ln: Option<Norm>,
    pub projector: ProjectorWeights,
}

impl VisionWeights {
    pub(super) fn load(file: &GgufFile, hp: &VisionParams) -> Result<VisionWeights, ModelError> {
        let e = hp.n_embd;
        let arena = Arena::with_capacity(
            file.tensors()
                .iter()
                .filter_map(interleaved_len)
                .map(Arena::footprint)
                .sum(),
        );
        let affine = |name: &str, cols, rows| -> Result<Affine, ModelError> {
            Ok(Affine {
                w: Weight::load(file, &arena, &format!("{name}.weight"), cols, rows)?,
                b: opt_vector(file, &format!("{name}.bias"), rows)?.unwrap_or(vec![0.0; rows]),
            })
        };
        let norm = |name: &str| -> Result<Norm, ModelError> {
            Ok(Norm {
                w: load_vector(file, &format!("{name}.weight"), e)?,
                b: opt_vector(file, &format!("{name}.bias"), e)?.unwrap_or(vec![0.0; e]),
            })
        };
        let opt_norm = |name: &str| -> Result<Option<Norm>, ModelError> {
            match file.tensor(&format!("{name}.weight")) {
                Some(_) => norm(name).map(Some),
                None => Ok(None),
            }
        };
        let p = hp.patch_size;
        let patch = dense(file, "v.patch_embd.weight", &[p, p, 3, e], e, 3 * p * p)?;
        let class = opt_vector(file, "v.class_embd", e)?;
        let n_pos = hp.patches_per_side().pow(2) + usize::from(class.is_some());
        let positions = load_table(file, "v.position_embd.weight", &[e, n_pos])?;
        let layers = (0..hp.layers_run())
            .map(|il| {
                let n = |s: &str| format!("v.blk.{il}.{s}");
                // Old LLaVA and Gemma 3 conversions swapped up and down: llama.cpp
                // swaps them back whenever `ffn_down` reads n_embd wide (so also
                // when n_ff is n_embd), and so does llamay.
                let swapped = file
                    .tensor(&n("ffn_down.weight"))
                    .is_some_and(|t| t.dims.first() == Some(&(e as u64)));
                let (up, down) = if swapped {
                    ("ffn_down", "ffn_up")
                } else {
                    ("ffn_up", "ffn_down")
                };
                let mut layer = VitLayer {
                    q: affine(&n("attn_q"), e, e)?,
                    k: affine(&n("attn_k"), e, e)?,
                    v: affine(&n("attn_v"), e, e)?,
                    out: affine(&n("attn_out"), e, e)?,
                    ln1: norm(&n("ln1"))?,
                    ln2: norm(&n("ln2"))?,
                    up: affine(&n(up), e, hp.n_ff)?,
                    down: affine(&n(down), hp.n_ff, e)?,
                    panels: None,
                };
                layer.panels = LayerPanels::new(file, &layer)?;
                Ok(layer)
            })
            .collect::<Result<_, ModelError>>()?;
        let projector = match hp.projector {
            ProjectorType::Mlp => {
                let mm0 = file.require_tensor("mm.0.weight")?;
                let out0 = mm0.dims.get(1).copied().unwrap_or(0) as usize;
                let mm2 = match file.tensor("mm.2.weight") {
                    Some(t) => {
                        let out2 = t.dims.get(1).copied().unwrap_or(0) as usize;
                        Some(affine("mm.2", out0, out2)?)
                    }
                    None => None,
                };
                ProjectorWeights::Mlp {
                    mm0: affine("mm.0", e, out0)?,
                    mm2,
                }
            }
            ProjectorType::Gemma3 => {
                let t = file.require_tensor("mm.input_projection.weight")?;
                let out = t.dims.first().copied().unwrap_or(0) as usize;
                // Stored [out, n_embd]: the transpose of a product's weight.
                let stored = dense(file, "mm.input_projection.weight", &[out, e], e, out)?;
                let mut values = vec![0.0; out * e];
                for i in 0..e {
                    for j in 0..out {
                        values[j * e + i] = stored.values[i * out + j];
                    }
                }
                ProjectorWeights::Gemma3 {
                    soft_norm: load_vector(file, "mm.soft_emb_norm.weight", e)?,
                    proj: Dense::new(out, e, values, stored.input_f16),
                }
            }
            ProjectorType::Idefics3 => {
                let t = file.require_tensor("mm.model.fc.weight")?;
                let out = t.dims.get(1).copied().unwrap_or(0) as usize;
                ProjectorWeights::Idefics3 {
                    fc: affine("mm.model.fc", e * hp.merge * hp.merge, out)?,
                }
            }
        };
        Ok(VisionWeights {
            patch,
            patch_bias: opt_vector(file, "v.patch_embd.bias", e)?,
            class,
            positions,
            pre_ln: opt_norm("v.pre_ln")?,
            layers,
            post_ln: opt_norm("v.post_ln")?,
            projector,
        })
    }

    /// The width of the output rows (the language model's embedding width).
    pub(super) fn n_out(&self) -> usize {
        match &self.projector {
            ProjectorWeights::Mlp { mm0, mm2 } => mm2.as_ref().unwrap_or(mm0).w.rows,
            ProjectorWeights::Gemma3 { proj, .. } => proj.rows,
            ProjectorWeights::Idefics3 { fc } => fc.w.rows,
        }
    }
}

/// Tensor `name` of GGUF shape `dims` as a `rows × cols` f32 matrix in file order.
fn dense(
    file: &GgufFile,
    name: &str,
    dims: &[usize],
    rows: usize,
    cols: usize,
) -> Result<Dense, ModelError> {
    let values = load_table(file, name, dims)?;
    let input_f16 = file.require_tensor(name)?.ggml_type == GgmlType::F16;
    Ok(Dense::new(rows, cols, values, input_f16))
}
