//! Adapters and the opened device.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::kernels::{self, Kernel};
use crate::device::{pick_adapter, AdapterPick, GpuAdapter};

/// Why the GPU could not be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GpuError {
    #[error("no GPU adapter found{0}")]
    NoAdapter(String),
    #[error("the GPU adapter {adapter} could not be opened: {reason}")]
    Open { adapter: String, reason: String },
    #[error("the GPU cannot run this model: {0}")]
    Unsupported(String),
    #[error("the GPU failed: {0}")]
    Device(String),
}

fn instance() -> wgpu::Instance {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = wgpu::Backends::VULKAN | wgpu::Backends::METAL | wgpu::Backends::DX12;
    wgpu::Instance::new(desc)
}

fn describe(info: &wgpu::AdapterInfo) -> GpuAdapter {
    use wgpu::DeviceType as T;
    let name_says_software = ["llvmpipe", "lavapipe", "swiftshader", "basic render"]
        .iter()
        .any(|s| info.name.to_lowercase().contains(s));
    GpuAdapter {
        name: info.name.clone(),
        kind: match info.device_type {
            T::DiscreteGpu => "discrete",
            T::IntegratedGpu => "integrated",
            T::VirtualGpu => "virtual",
            T::Cpu => "cpu",
            T::Other => "other",
        },
        backend: match info.backend {
            wgpu::Backend::Vulkan => "vulkan",
            wgpu::Backend::Metal => "metal",
            wgpu::Backend::Dx12 => "dx12",
            _ => "other",
        },
        software: info.device_type == T::Cpu || name_says_software,
    }
}

fn enumerate() -> Vec<wgpu::Adapter> {
    let instance = instance();
    pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()))
}

/// The adapters the system offers, in its order.
pub(crate) fn adapters() -> Vec<GpuAdapter> {
    enumerate()
        .iter()
        .map(|a| describe(&a.get_info()))
        .collect()
}

/// An opened GPU: device, queue and the kernels compiled so far.
pub(crate) struct Gpu {
    pub(super) device: wgpu::Device,
    pub(super) queue: wgpu::Queue,
    pub(crate) adapter: GpuAdapter,
    /// The largest buffer one binding may see.
    pub(crate) max_binding: u64,
    pipelines: Mutex<HashMap<Kernel, wgpu::ComputePipeline>>,
    /// The first error the device reported since the last [`Gpu::check`] (wgpu
    /// reports them here, not at the call: out of memory, a lost device).
    failure: Arc<Mutex<Option<String>>>,
}

impl Gpu {
    /// Opens the adapter `pick` names.
    pub(crate) fn open(pick: &AdapterPick) -> Result<Gpu, GpuError> {
        let all = enumerate();
        let described: Vec<GpuAdapter> = all.iter().map(|a| describe(&a.get_info())).collect();
        let Some(i) = pick_adapter(&described, pick) else {
            let seen = if described.is_empty() {
                String::new()
            } else {
                let names: Vec<String> = described.iter().map(|a| a.to_string()).collect();
                format!(
                    " matching the request (present: {}; software adapters are chosen only by name, e.g. -device gpu:llvmpipe)",
                    names.join(", ")
                )
            };
            return Err(GpuError::NoAdapter(seen));
        };
        let adapter = &all[i];
        let limits = adapter.limits();
        let desc = wgpu::DeviceDescriptor {
            label: Some("llamay"),
            required_limits: limits.clone(),
            ..Default::default()
        };
        let (device, queue) =
            pollster::block_on(adapter.request_device(&desc)).map_err(|e| GpuError::Open {
                adapter: described[i].to_string(),
                reason: e.to_string(),
            })?;
        let failure: Arc<Mutex<Option<String>>> = Arc::default();
        let slot = failure.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            let mut f = slot.lock().unwrap_or_else(|e| e.into_inner());
            f.get_or_insert_with(|| e.to_string());
        }));
        Ok(Gpu {
            failure,
            device,
            queue,
            adapter: described[i].clone(),
            max_binding: limits
                .max_storage_buffer_binding_size
                .min(limits.max_buffer_size),
            pipelines: Mutex::default(),
        })
    }

    /// The compiled pipeline of `k`, compiled on first use.
    pub(super) fn pipeline(&self, k: Kernel) -> wgpu::ComputePipeline {
        let mut map = self.pipelines.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(k)
            .or_insert_with(|| {
                let module = self
                    .device
                    .create_shader_module(wgpu::ShaderModuleDescriptor {
                        label: Some(k.name()),
                        source: wgpu::ShaderSource::Wgsl(kernels::source(k).into()),
                    });
                self.device
                    .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                        label: Some(k.name()),
                        layout: None,
                        module: &module,
                        entry_point: Some("main"),
                        compilation_options: Default::default(),
                        cache: None,
                    })
            })
            .clone()
    }

    /// A device buffer of `bytes` (rounded up to 4), zeroed.
    pub(crate) fn buffer(&self, bytes: u64, label: &str) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: bytes.max(4).next_multiple_of(4),
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_DST
                | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        })
    }

    /// A device buffer holding `data` (padded with zeros to a multiple of 4 bytes).
    pub(crate) fn upload(&self, data: &[u8], label: &str) -> wgpu::Buffer {
        let buf = self.buffer(data.len() as u64, label);
        self.write(&buf, 0, data);
        buf
    }

    /// Writes `data` at `offset` of `buf` before the next submission runs.
    pub(crate) fn write(&self, buf: &wgpu::Buffer, offset: u64, data: &[u8]) {
        let whole = data.len() / 4 * 4;
        if whole > 0 {
            self.queue.write_buffer(buf, offset, &data[..whole]);
        }
        if whole < data.len() {
            let mut tail = [0u8; 4];
            tail[..data.len() - whole].copy_from_slice(&data[whole..]);
            self.queue.write_buffer(buf, offset + whole as u64, &tail);
        }
    }

    /// The error the device reported since the last check, if any.
    pub(crate) fn check(&self) -> Result<(), GpuError> {
        let mut f = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        match f.take() {
            Some(e) => Err(GpuError::Device(e)),
            None => Ok(()),
        }
    }

    /// Waits for the submitted work and checks the device is still sound.
    pub(crate) fn wait(&self) -> Result<(), GpuError> {
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: None,
                timeout: None,
            })
            .map(|_| ())
            .map_err(|e| GpuError::Device(e.to_string()))
    }

    /// `n` f32 values at byte `offset` of `buf`, read back after the work submitted
    /// so far.
    pub(crate) fn read_f32(
        &self,
        buf: &wgpu::Buffer,
        offset: u64,
        n: usize,
    ) -> Result<Vec<f32>, GpuError> {
        let bytes = (n as u64 * 4).max(4);
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("readback"),
            size: bytes,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut enc = self.device.create_command_encoder(&Default::default());
        enc.copy_buffer_to_buffer(buf, offset, &staging, 0, bytes);
        self.queue.submit([enc.finish()]);
        let (tx, rx) = std::sync::mpsc::channel();
        staging.map_async(wgpu::MapMode::Read, .., move |r| {
            let _ = tx.send(r);
        });
        self.wait()?;
        rx.recv()
            .map_err(|e| GpuError::Device(e.to_string()))?
            .map_err(|e| GpuError::Device(e.to_string()))?;
        let view = staging
            .get_mapped_range(..)
            .map_err(|e| GpuError::Device(e.to_string()))?;
        let out = view[..n * 4]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        drop(view);
        staging.unmap();
        Ok(out)
    }
}
