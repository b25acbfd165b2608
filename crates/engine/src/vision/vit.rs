//! The ViT as llama.cpp's clip graphs run it (`build_vit`, and LLaVA's own copy in
//! `models/llava.cpp`): patch embedding, the class token after the patches, position
//! embeddings, an optional pre-LayerNorm, pre-norm blocks with full attention, an
//! optional post-LayerNorm. One picture is one sequence.

use super::act;
use super::attention::{attention, PackedKv, Shape};
use super::encoder::VisionEncoder;
use super::gemm::Panels;
use super::weights::{Dense, VitLayer};
use crate::model::linear::{matmul_many, ActsCache, Product};
use crate::model::linear::{Affine, Norm};
use crate::model::ops::layer_norm;
use crate::model::ModelError;
use crate::pool::SyncPtr;

/// Rows per task of the row-wise steps.
const ROWS_PER_TASK: usize = 16;

impl VisionEncoder {
    /// Runs `f(row, values)` on each `width`-wide row of `x` on the pool.
    pub(super) fn rows_parallel(
        &self,
        x: &mut [f32],
        width: usize,
        f: &(dyn Fn(usize, &mut [f32]) + Sync),
    ) {
        self.pool.run_rows(x, width, ROWS_PER_TASK, f);
    }

    /// `out = m·x` for the `n` rows of `x` (a small f32 matrix; llama.cpp rounds the
    /// input to f16 for an f16 one).
    pub(super) fn dense_product(&self, m: &Dense, x: &[f32], out: &mut [f32]) {
        if let Some(p) = &m.panels {
            let mut input = x.to_vec();
            if m.input_f16 {
                input
                    .iter_mut()
                    .for_each(|v| *v = half::f16::from_f32(*v).to_f32());
            }
            return p.matmul(&self.pool, &input, out, false, &|_, _| {});
        }
        let n = x.len() / m.cols;
        let ptr = SyncPtr::new(out);
        self.pool.run(n.div_ceil(ROWS_PER_TASK), &|task| {
            let mut input = vec![0f32; m.cols];
            for r in task * ROWS_PER_TASK..((task + 1) * ROWS_PER_TASK).min(n) {
                input.copy_from_slice(&x[r * m.cols..(r + 1) * m.cols]);
                if m.input_f16 {
                    input
                        .iter_mut()
                        .for_each(|v| *v = half::f16::from_f32(*v).to_f32());
                }
                // SAFETY: row r of the output belongs to this task alone.
                let o = unsafe { ptr.slice(r * m.rows, m.rows) };
                for (o, w) in o.iter_mut().zip(m.values.chunks_exact(m.cols)) {
                    *o = w.iter().zip(&input).map(|(a, b)| a * b).sum();
                }
            }
        });
    }

    /// `out = a·x + b` (or `out += a·x + b` with `adding`) for the `n` rows of `x`,
    /// then `then` on each part of the output with its bias slice; by `panels` (the
    /// same matrix) when given.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn affine(
        &self,
        acts: &mut ActsCache,
        (a, panels): (&Affine, Option<&Panels>),
        x: &[f32],
        out: &mut [f32],
        adding: bool,
        then: &(dyn Fn(&mut [f32], &[f32]) + Sync),
    ) -> Result<(), ModelError> {
        if let Some(p) = panels {
            p.matmul(&self.pool, x, out, adding, &|v, r0| {
                then(v, &a.b[r0..r0 + v.len()])
            });
            return Ok(());
        }
        let n = x.len() / a.w.cols;
        acts.invalidate();
        acts.prepare(&self.pool, &a.w, x, n)?;
        let epi = |_t: usize, r0: usize, v: &mut [f32]| then(v, &a.b[r0..r0 + v.len()]);
        let product = if adding {
            Product::adding(&a.w, out)
        } else {
            Product::new(&a.w, out)
        };
        matmul_many(&self.pool, &self.file, acts, vec![product.then(1, &epi)])
    }

    /// The encoder's hidden states for the normalised `size × size` input `pixels`:
    /// `n_pos × n_embd` (the class token's row last, where llama.cpp concatenates it).
    pub(super) fn vit(&self, pixels: &[f32]) -> Result<Vec<f32>, ModelError> {
        let hp = &self.hp;
        let w = &self.weights;
        let e = hp.n_embd;
        let side = hp.patches_per_side();
        let n_patches = side * side;
        let n_pos = n_patches + usize::from(w.class.is_some());
        // Each patch's pixels as (colour, y, x), the patch kernel's column order.
        let p = hp.patch_size;
        let mut patches = vec![0f32; n_patches * 3 * p * p];
        for (i, patch) in patches.chunks_exact_mut(3 * p * p).enumerate() {
            let (py, px) = (i / side, i % side);
            for c in 0..3 {
                for ky in 0..p {
                    for kx in 0..p {
                        let (y, x) = (py * p + ky, px * p + kx);
                        patch[(c * p + ky) * p + kx] = pixels[(y * hp.image_size + x) * 3 + c];
                    }
                }
            }
        }
        let mut x = vec![0f32; n_pos * e];
        self.dense_product(&w.patch, &patches, &mut x[..n_patches * e]);
        if let Some(class) = &w.class {
            x[n_patches * e..].copy_from_slice(class);
        }
        let bias = w.patch_bias.as_deref();
        self.rows_parallel(&mut x, e, &|r, row| {
            if let (Some(b), true) = (bias, r < n_patches) {
                add(row, b);
            }
            add(row, &w.positions[r * e..(r + 1) * e]);
            if let Some(n) = &w.pre_ln {
                layer_norm(row, &n.w, &n.b, hp.eps);
            }
        });
        let mut acts = ActsCache::default();
        let mut bufs = Buffers::new(n_pos, e, hp.n_ff);
        for l in &w.layers {
            self.block(&mut acts, l, &mut x, &mut bufs)?;
        }
        if let Some(n) = &w.post_ln {
            self.rows_parallel(&mut x, e, &|_, row| layer_norm(row, &n.w, &n.b, hp.eps));
        }
        Ok(x)
    }

    /// One pre-norm block: `x += attn(ln1(x))`, then `x += ffn(ln2(x))`.
    fn block(
        &self,
        acts: &mut ActsCache,
        l: &VitLayer,
        x: &mut [f32],
        b: &mut Buffers,
    ) -> Result<(), ModelError> {
        let eps = self.hp.eps;
        let normed = |n: &Norm, x: &[f32], out: &mut Vec<f32>| {
            out.clear();
            out.extend_from_slice(x);
            self.rows_parallel(out, self.hp.n_embd, &|_, row| {
                layer_norm(row, &n.w, &n.b, eps)
            });
        };
        normed(&l.ln1, x, &mut b.normed);
        let panels = l.panels.as_ref();
        if let Some(p) = panels {
            let add_bias = |v: &mut [f32], bias: &[f32]| add(v, bias);
            self.affine(
                acts,
                (&l.q, Some(&p.q)),
                &b.normed,
                &mut b.q,
                false,
                &add_bias,
            )?;
            self.affine(
                acts,
                (&l.k, Some(&p.k)),
                &b.normed,
                &mut b.k,
                false,
                &add_bias,
            )?;
            self.affine(
                acts,
                (&l.v, Some(&p.v)),
                &b.normed,
                &mut b.v,
                false,
                &add_bias,
            )?;
        } else {
            self.qkv(acts, l, b)?;
        }
        let shape = Shape {
            n: b.n_pos,
            n_head: self.hp.n_head,
            d: self.hp.n_embd / self.hp.n_head,
        };
        attention(
            &self.pool,
            shape,
            (&b.q, &b.k, &b.v),
            &mut b.attn,
            &mut b.packed,
        );
        let out = (&l.out, panels.map(|p| &p.out));
        self.affine(acts, out, &b.attn, x, true, &|o, bias| add(o, bias))?;

        normed(&l.ln2, x, &mut b.normed);
        let act = self.hp.activation;
        let bias_act = |v: &mut [f32], bias: &[f32]| act::bias_act(act, v, bias);
        let (up, down) = (
            (&l.up, panels.map(|p| &p.up)),
            (&l.down, panels.map(|p| &p.down)),
        );
        self.affine(acts, up, &b.normed, &mut b.up, false, &bias_act)?;
        self.affine(acts, down, &b.up, x, true, &|o, bias| add(o, bias))
    }

    /// Queries, keys and values by the prompt kernels, one pool run for the three.
    fn qkv(&self, acts: &mut ActsCache, l: &VitLayer, b: &mut Buffers) -> Result<(), ModelError> {
        acts.invalidate();
        acts.prepare(&self.pool, &l.q.w, &b.normed, b.n_pos)?;
        let (bq, bk, bv) = (
            |_t: usize, r0: usize, o: &mut [f32]| add(o, &l.q.b[r0..r0 + o.len()]),
            |_t: usize, r0: usize, o: &mut [f32]| add(o, &l.k.b[r0..r0 + o.len()]),
            |_t: usize, r0: usize, o: &mut [f32]| add(o, &l.v.b[r0..r0 + o.len()]),
        );
        matmul_many(
            &self.pool,
            &self.file,
            acts,
            vec![
                Product::new(&l.q.w, &mut b.q).then(1, &bq),
                Product::new(&l.k.w, &mut b.k).then(1, &bk),
                Product::new(&l.v.w, &mut b.v).then(1, &bv),
            ],
        )
    }
}

/// One picture's intermediate values.
struct Buffers {
    n_pos: usize,
    normed: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    attn: Vec<f32>,
    up: Vec<f32>,
    packed: PackedKv,
}

impl Buffers {
    fn new(n_pos: usize, e: usize, n_ff: usize) -> Buffers {
        let z = || vec![0f32; n_pos * e];
        Buffers {
            n_pos,
            normed: z(),
            q: z(),
            k: z(),
            v: z(),
            attn: z(),
            up: vec![0f32; n_pos * n_ff],
            packed: PackedKv::default(),
        }
    }
}

/// `dst += src`, element by element.
pub(super) fn add(dst: &mut [f32], src: &[f32]) {
    dst.iter_mut().zip(src).for_each(|(d, &s)| *d += s);
}
