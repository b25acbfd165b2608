//! Weights going up: each matrix in its file encoding, split by rows into buffers no
//! larger than one binding may see; norms and biases as f32.

use super::super::linear::Weight;
use super::super::weights::{Ffn, GateUp, Layer, Qkv};
use super::super::ModelError;
use crate::ggml_type::GgmlType;
use crate::gguf::GgufFile;
use crate::gpu::{decodes, Gpu, GpuError};
use crate::quant::ActFormat;

/// A weight matrix on the device: `parts` hold consecutive row ranges.
pub(super) struct DevMatrix {
    pub ty: GgmlType,
    pub cols: usize,
    pub row_bytes: usize,
    /// Values per block its activations are rounded in (the CPU engine's Q8 or Q8_K
    /// blocks); `None` for float weights, whose activations stay f32.
    pub act_block: Option<usize>,
    /// (buffer, its first row, its rows).
    pub parts: Vec<(wgpu::Buffer, usize, usize)>,
}

pub(super) enum DevQkv {
    Separate {
        q: DevMatrix,
        k: DevMatrix,
        v: DevMatrix,
    },
    Fused(DevMatrix),
}

pub(super) enum DevGateUp {
    Separate { gate: DevMatrix, up: DevMatrix },
    Fused(DevMatrix),
}

pub(super) struct DevLayer {
    pub attn_norm: wgpu::Buffer,
    pub qkv: DevQkv,
    pub qkv_bias: Option<[wgpu::Buffer; 3]>,
    pub q_norm: Option<wgpu::Buffer>,
    pub k_norm: Option<wgpu::Buffer>,
    pub attn_out: DevMatrix,
    pub post_attn_norm: Option<wgpu::Buffer>,
    pub ffn_norm: wgpu::Buffer,
    pub gate_up: DevGateUp,
    pub down: DevMatrix,
    pub post_ffn_norm: Option<wgpu::Buffer>,
}

pub(super) struct Uploader<'a> {
    pub gpu: &'a Gpu,
    pub file: &'a GgufFile,
}

impl Uploader<'_> {
    pub(super) fn vector(&self, v: &[f32]) -> wgpu::Buffer {
        let bytes: Vec<u8> = v.iter().flat_map(|f| f.to_le_bytes()).collect();
        self.gpu.upload(&bytes, "vector")
    }

    pub(super) fn matrix(&self, w: &Weight) -> Result<DevMatrix, ModelError> {
        let info = w.info();
        let ty = info.ggml_type;
        if !decodes(ty) {
            return Err(GpuError::Unsupported(format!(
                "tensor {:?} has type {ty}, which the GPU kernels do not decode",
                info.name
            ))
            .into());
        }
        if !w.cols.is_multiple_of(32) {
            return Err(GpuError::Unsupported(format!(
                "tensor {:?} has rows of {} values (the kernels take multiples of 32)",
                info.name, w.cols
            ))
            .into());
        }
        let data = self.file.tensor_data(info);
        let row_bytes = data.len() / w.rows;
        let per_part = ((self.gpu.max_binding as usize / row_bytes).max(1)).min(w.rows);
        let parts = (0..w.rows)
            .step_by(per_part)
            .map(|r0| {
                let n = per_part.min(w.rows - r0);
                let bytes = &data[r0 * row_bytes..(r0 + n) * row_bytes];
                (self.gpu.upload(bytes, &info.name), r0, n)
            })
            .collect();
        let act_block = match w.act_format() {
            ActFormat::F32 => None,
            f => Some(f.block_elems()),
        };
        Ok(DevMatrix {
            ty,
            act_block,
            cols: w.cols,
            row_bytes,
            parts,
        })
    }

    pub(super) fn layer(&self, l: &Layer) -> Result<DevLayer, ModelError> {
        let Some(a) = l.attention() else {
            return Err(GpuError::Unsupported(
                "linear-attention (Gated DeltaNet) layers run on the CPU engine only".into(),
            )
            .into());
        };
        if a.attn_out_bias.is_some() {
            return Err(GpuError::Unsupported(
                "an attention output bias runs on the CPU engine only".into(),
            )
            .into());
        }
        let opt = |v: &Option<Vec<f32>>| v.as_deref().map(|v| self.vector(v));
        Ok(DevLayer {
            attn_norm: self.vector(&l.attn_norm),
            qkv: match &a.qkv {
                Qkv::Separate { q, k, v } => DevQkv::Separate {
                    q: self.matrix(q)?,
                    k: self.matrix(k)?,
                    v: self.matrix(v)?,
                },
                Qkv::Fused(w) => DevQkv::Fused(self.matrix(w)?),
                Qkv::QueryOnly(_) => {
                    return Err(GpuError::Unsupported(
                        "shared KV layers run on the CPU engine only".into(),
                    )
                    .into())
                }
            },
            qkv_bias: a
                .qkv_bias
                .as_ref()
                .map(|[q, k, v]| [self.vector(q), self.vector(k), self.vector(v)]),
            q_norm: opt(&a.q_norm),
            k_norm: opt(&a.k_norm),
            attn_out: self.matrix(&a.attn_out)?,
            post_attn_norm: opt(&l.post_attn_norm),
            ffn_norm: self.vector(&l.ffn_norm),
            gate_up: match dense_ffn(l)?.0 {
                GateUp::Separate { gate, up } => DevGateUp::Separate {
                    gate: self.matrix(gate)?,
                    up: self.matrix(up)?,
                },
                GateUp::Fused(w) => DevGateUp::Fused(self.matrix(w)?),
            },
            down: self.matrix(dense_ffn(l)?.1)?,
            post_ffn_norm: opt(&l.post_ffn_norm),
        })
    }
}

/// A dense layer's feed-forward weights; the GPU kernels have no expert routing.
fn dense_ffn(l: &Layer) -> Result<(&GateUp, &Weight), ModelError> {
    match &l.ffn {
        Ffn::Dense { gate_up, down } => Ok((gate_up, down)),
        Ffn::Experts(_) => Err(GpuError::Unsupported(
            "mixture-of-experts layers run on the CPU engine only".into(),
        )
        .into()),
    }
}
