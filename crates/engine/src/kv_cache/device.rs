//! A sequence's KV cache on the device: per layer one key and one value buffer of
//! `cap` positions, grown by doubling up to the sequence's context. A forked sequence
//! shares them until either writes: the writer copies first, as CPU blocks do.

use std::sync::Arc;

use crate::gpu::{Gpu, Recorder};

struct Buffers {
    k: Vec<wgpu::Buffer>,
    v: Vec<wgpu::Buffer>,
    /// Positions each buffer holds.
    cap: usize,
}

/// One sequence's keys and values on the device.
#[derive(Clone)]
pub(crate) struct DeviceKv {
    bufs: Arc<Buffers>,
    /// Bytes of one element: 2 (f16 pairs) or 4.
    elem: usize,
    k_width: usize,
    v_width: usize,
}

impl std::fmt::Debug for DeviceKv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceKv")
            .field("cap", &self.bufs.cap)
            .field("elem", &self.elem)
            .finish()
    }
}

impl DeviceKv {
    pub(crate) fn new(k_width: usize, v_width: usize, f16: bool) -> DeviceKv {
        DeviceKv {
            bufs: Arc::new(Buffers {
                k: Vec::new(),
                v: Vec::new(),
                cap: 0,
            }),
            elem: if f16 { 2 } else { 4 },
            k_width,
            v_width,
        }
    }

    pub(crate) fn f16(&self) -> bool {
        self.elem == 2
    }

    pub(crate) fn keys(&self, il: usize) -> &wgpu::Buffer {
        &self.bufs.k[il]
    }

    pub(crate) fn values(&self, il: usize) -> &wgpu::Buffer {
        &self.bufs.v[il]
    }

    /// Makes positions `..need` writable, keeping positions `..keep`: grown (to at
    /// most `n_ctx`), or copied when shared with a fork.
    pub(crate) fn make_room(
        &mut self,
        gpu: &Gpu,
        rec: &mut Recorder,
        n_layer: usize,
        (keep, need, n_ctx): (usize, usize, usize),
    ) {
        let shared = Arc::strong_count(&self.bufs) > 1;
        if self.bufs.cap >= need && !shared && self.bufs.k.len() == n_layer {
            return;
        }
        let mut cap = self.bufs.cap.max(256);
        while cap < need {
            cap *= 2;
        }
        let cap = cap.min(n_ctx.max(need));
        let alloc = |width: usize, what: &str| -> Vec<wgpu::Buffer> {
            (0..n_layer)
                .map(|_| gpu.buffer((cap * width * self.elem) as u64, what))
                .collect()
        };
        let fresh = Buffers {
            k: alloc(self.k_width, "kv keys"),
            v: alloc(self.v_width, "kv values"),
            cap,
        };
        let old = &self.bufs;
        for il in 0..old.k.len().min(n_layer) {
            let kb = (keep * self.k_width * self.elem) as u64;
            let vb = (keep * self.v_width * self.elem) as u64;
            if kb > 0 {
                rec.copy(&old.k[il], 0, &fresh.k[il], 0, kb.next_multiple_of(4));
                rec.copy(&old.v[il], 0, &fresh.v[il], 0, vb.next_multiple_of(4));
            }
        }
        self.bufs = Arc::new(fresh);
    }

    /// Bytes the device holds for this sequence.
    pub(crate) fn bytes(&self) -> usize {
        self.bufs.k.len() * self.bufs.cap * (self.k_width + self.v_width) * self.elem
    }
}
