//! The GPU backend's device layer: adapters, buffers, and the compute kernels (WGSL,
//! run through wgpu on Vulkan, Metal or DX12), recorded into one submission per step.
//!
//! It knows nothing of models: `model::device` drives it with a model's weights and
//! shapes. Weights stay in their GGUF block formats and are decoded inside the
//! kernels.

mod context;
mod kernels;
mod record;

pub(crate) use context::{adapters, Gpu, GpuError};
pub(crate) use kernels::{decodes, Kernel};
pub(crate) use record::{grid, Recorder, P};
