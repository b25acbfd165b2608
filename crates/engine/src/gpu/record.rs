//! One step's work recorded, then submitted at once: every kernel's parameters go up
//! in one uniform buffer, and the dispatches and copies run in order (wgpu orders
//! dispatches that share a buffer).

use super::context::Gpu;
use super::kernels::Kernel;

/// Bytes between two kernels' parameters: the uniform-offset alignment every
/// adapter accepts.
const SLOT: usize = 256;
/// Bytes of parameters a kernel may take.
const PARAM_BYTES: u64 = 64;

enum Op {
    Dispatch {
        pipeline: wgpu::ComputePipeline,
        buffers: Vec<wgpu::Buffer>,
        slot: usize,
        groups: [u32; 3],
    },
    Copy {
        src: wgpu::Buffer,
        src_off: u64,
        dst: wgpu::Buffer,
        dst_off: u64,
        bytes: u64,
    },
}

/// The work of one step, in order.
pub(crate) struct Recorder<'g> {
    gpu: &'g Gpu,
    params: Vec<u8>,
    ops: Vec<Op>,
}

/// Workgroups covering `n` items laid out over x then y (a dimension holds at most
/// 65,535).
pub(crate) fn grid(n: u64) -> [u32; 2] {
    let x = n.clamp(1, 32_768);
    [x as u32, n.div_ceil(x).max(1) as u32]
}

/// A kernel parameter: a count or a float, as the WGSL struct declares it.
#[derive(Clone, Copy)]
pub(crate) enum P {
    U(u32),
    F(f32),
}

impl<'g> Recorder<'g> {
    pub(crate) fn new(gpu: &'g Gpu) -> Self {
        Recorder {
            gpu,
            params: Vec::new(),
            ops: Vec::new(),
        }
    }

    /// Runs `k` over `groups` workgroups; `buffers` are its storage bindings in
    /// binding order, its parameters the binding after them.
    pub(crate) fn dispatch(
        &mut self,
        k: Kernel,
        buffers: &[&wgpu::Buffer],
        params: &[P],
        groups: [u32; 3],
    ) {
        assert!(params.len() * 4 <= PARAM_BYTES as usize, "{k:?} parameters");
        let slot = self.params.len() / SLOT;
        let mut bytes = [0u8; SLOT];
        for (i, p) in params.iter().enumerate() {
            let word = match *p {
                P::U(u) => u,
                P::F(f) => f.to_bits(),
            };
            bytes[i * 4..i * 4 + 4].copy_from_slice(&word.to_le_bytes());
        }
        self.params.extend_from_slice(&bytes);
        self.ops.push(Op::Dispatch {
            pipeline: self.gpu.pipeline(k),
            buffers: buffers.iter().map(|&b| b.clone()).collect(),
            slot,
            groups,
        });
    }

    /// Runs a 64-thread kernel once per item of `n`, laid out by [`grid`].
    pub(crate) fn dispatch_items(
        &mut self,
        k: Kernel,
        buffers: &[&wgpu::Buffer],
        params: &[P],
        n: u64,
    ) {
        let [x, y] = grid(n.div_ceil(64));
        self.dispatch(k, buffers, params, [x, y, 1]);
    }

    /// Copies `bytes` (a multiple of 4) between buffers, in order with the kernels.
    pub(crate) fn copy(
        &mut self,
        src: &wgpu::Buffer,
        src_off: u64,
        dst: &wgpu::Buffer,
        dst_off: u64,
        bytes: u64,
    ) {
        self.ops.push(Op::Copy {
            src: src.clone(),
            src_off,
            dst: dst.clone(),
            dst_off,
            bytes,
        });
    }

    /// Submits everything recorded so far.
    pub(crate) fn submit(&mut self) {
        let gpu = self.gpu;
        if self.ops.is_empty() {
            return;
        }
        let ops = std::mem::take(&mut self.ops);
        let params = std::mem::take(&mut self.params);
        let uniforms = gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("params"),
            size: params.len().max(SLOT) as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        if !params.is_empty() {
            gpu.queue.write_buffer(&uniforms, 0, &params);
        }
        let mut enc = gpu.device.create_command_encoder(&Default::default());
        let mut ops = ops.iter().peekable();
        while let Some(op) = ops.next() {
            match op {
                Op::Copy {
                    src,
                    src_off,
                    dst,
                    dst_off,
                    bytes,
                } => enc.copy_buffer_to_buffer(src, *src_off, dst, *dst_off, *bytes),
                Op::Dispatch { .. } => {
                    let mut pass = enc.begin_compute_pass(&Default::default());
                    let mut next = Some(op);
                    while let Some(Op::Dispatch {
                        pipeline,
                        buffers,
                        slot,
                        groups,
                    }) = next
                    {
                        let mut entries: Vec<wgpu::BindGroupEntry> = buffers
                            .iter()
                            .enumerate()
                            .map(|(i, b)| wgpu::BindGroupEntry {
                                binding: i as u32,
                                resource: b.as_entire_binding(),
                            })
                            .collect();
                        entries.push(wgpu::BindGroupEntry {
                            binding: buffers.len() as u32,
                            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                                buffer: &uniforms,
                                offset: (*slot * SLOT) as u64,
                                size: wgpu::BufferSize::new(PARAM_BYTES),
                            }),
                        });
                        let bg = gpu.device.create_bind_group(&wgpu::BindGroupDescriptor {
                            label: None,
                            layout: &pipeline.get_bind_group_layout(0),
                            entries: &entries,
                        });
                        pass.set_pipeline(pipeline);
                        pass.set_bind_group(0, &bg, &[]);
                        pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
                        next = match ops.peek() {
                            Some(Op::Dispatch { .. }) => ops.next(),
                            _ => None,
                        };
                    }
                }
            }
        }
        gpu.queue.submit([enc.finish()]);
    }
}
