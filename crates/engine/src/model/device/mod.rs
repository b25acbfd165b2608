//! The forward pass on a GPU: the model's weights uploaded once in their GGUF block
//! formats, activations and the KV cache on the device, and per step only the token
//! ids (with the step's RoPE table) going up and the wanted logits coming back.
//!
//! It mirrors the CPU engine's order of operations (`forward`, `layer`, `heads`), which
//! stays the reference; activations stay in f32 (no quantized activations).

mod step;
mod upload;

pub(crate) use crate::kv_cache::DeviceKv;
use upload::{DevLayer, DevMatrix};

use super::hparams::HParams;
use super::weights::Weights;
use super::ModelError;
use crate::device::GpuAdapter;
use crate::gguf::GgufFile;
use crate::gpu::{Gpu, GpuError};

/// A model's weights on a GPU.
pub(super) struct DeviceModel {
    gpu: Gpu,
    token_embd: DevMatrix,
    /// `None`: tied to the embedding table.
    output: Option<DevMatrix>,
    output_norm: wgpu::Buffer,
    layers: Vec<DevLayer>,
    /// Bound where a kernel's optional input is absent.
    dummy: wgpu::Buffer,
    /// One step at a time: a step's buffers are the device's.
    steps: std::sync::Mutex<()>,
}

impl From<GpuError> for ModelError {
    fn from(e: GpuError) -> Self {
        ModelError::Device(e.to_string())
    }
}

impl DeviceModel {
    /// Opens the adapter and uploads the weights.
    pub(super) fn load(
        gpu: Gpu,
        file: &GgufFile,
        hp: &HParams,
        weights: &Weights,
    ) -> Result<DeviceModel, ModelError> {
        if hp.head_dim_k > 256 || hp.head_dim_v > 256 {
            return Err(GpuError::Unsupported(format!(
                "heads of {} values (the kernels take at most 256)",
                hp.head_dim_k.max(hp.head_dim_v)
            ))
            .into());
        }
        // The kernels have no expert routing (refused per layer), sinks or output bias.
        if hp.residual_scale.is_some() || hp.logit_scale.is_some() {
            return Err(GpuError::Unsupported(
                "Granite's residual and logit scales run on the CPU engine only".into(),
            )
            .into());
        }
        // Gemma 4's blocks have no kernels yet: it runs on the CPU engine.
        if hp.n_embd_per_layer > 0
            || hp.swa_head_dim.is_some()
            || (0..hp.n_layer).any(|il| hp.kv_layer[il] != il)
        {
            return Err(GpuError::Unsupported(
                "per-layer inputs, shared KV layers and per-layer head sizes (Gemma 4) run on the CPU engine only".into(),
            )
            .into());
        }
        if hp.ff_layers.iter().any(|&f| f != hp.n_ff)
            || hp.kv_heads.iter().any(|&h| h != hp.n_head_kv)
        {
            return Err(GpuError::Unsupported(
                "feed-forward widths or KV head counts that differ by layer run on the CPU engine only".into(),
            )
            .into());
        }
        if hp.family.tensors.v_norm {
            return Err(GpuError::Unsupported(
                "value norms (Gemma 4) run on the CPU engine only".into(),
            )
            .into());
        }
        if hp.family.tensors.sinks.is_some() {
            return Err(
                GpuError::Unsupported("attention sinks run on the CPU engine only".into()).into(),
            );
        }
        if hp.family.tensors.q_gate || hp.has_recurrent_state() {
            return Err(GpuError::Unsupported(
                "gated queries, linear-attention and short-conv layers (Qwen 3.5, LFM2) run on the CPU engine only"
                    .into(),
            )
            .into());
        }
        let up = upload::Uploader { gpu: &gpu, file };
        let layers = weights
            .layers
            .iter()
            .map(|l| up.layer(l))
            .collect::<Result<_, _>>()?;
        Ok(DeviceModel {
            token_embd: up.matrix(&weights.token_embd)?,
            output: weights.output.as_ref().map(|w| up.matrix(w)).transpose()?,
            output_norm: up.vector(&weights.output_norm),
            layers,
            dummy: gpu.buffer(16, "dummy"),
            steps: Default::default(),
            gpu,
        })
    }

    pub(super) fn adapter(&self) -> &GpuAdapter {
        &self.gpu.adapter
    }

    fn output(&self) -> &DevMatrix {
        self.output.as_ref().unwrap_or(&self.token_embd)
    }
}
