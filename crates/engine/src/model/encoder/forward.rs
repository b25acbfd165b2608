//! One encoder pass over several packed texts: embeddings, the post-norm layers with
//! bidirectional attention inside each text (Q/K/V in `qkv`, the feed-forward block in
//! `ffn`), then pooling.

use super::super::linear::{matmul_many, ActsCache, Product};
use super::super::linear::{Affine, Norm};
use super::super::ops::softmax;
use super::super::ModelError;
use super::ffn::FfnBuffers;
use super::qkv::QkvBuffers;
use super::{add, Encoder, Pooling};
use crate::pool::SyncPtr;

/// Tokens per pass at most (a pass is one set of activation buffers; a longer list of
/// texts takes several).
pub(super) const PASS_TOKENS: usize = 4096;

/// Rows per task of the row-wise steps (LayerNorm, embeddings).
const ROWS_PER_TASK: usize = 32;

/// `x = (x - mean) / sqrt(var + eps) · w + b`, over one row.
fn layer_norm(x: &mut [f32], n: &Norm, eps: f32) {
    super::super::ops::layer_norm(x, &n.w, &n.b, eps);
}

impl Encoder {
    /// Runs `f(row, values)` on each `width`-wide row of `x` on the pool.
    pub(super) fn rows_parallel(
        &self,
        x: &mut [f32],
        width: usize,
        f: &(dyn Fn(usize, &mut [f32]) + Sync),
    ) {
        self.pool.run_rows(x, width, ROWS_PER_TASK, f);
    }

    /// `out = a·x + b` for `n` rows of `x` (the output overwritten).
    pub(super) fn affine(
        &self,
        acts: &mut ActsCache,
        a: &Affine,
        x: &[f32],
        n: usize,
        out: &mut [f32],
        then: &(dyn Fn(&mut [f32], &[f32]) + Sync),
    ) -> Result<(), ModelError> {
        acts.invalidate();
        acts.prepare(&self.pool, &a.w, x, n)?;
        let epi = |_t: usize, r0: usize, v: &mut [f32]| then(v, &a.b[r0..r0 + v.len()]);
        matmul_many(
            &self.pool,
            &self.file,
            acts,
            vec![Product::new(&a.w, out).then(1, &epi)],
        )
    }

    /// One pass over `texts` (each within the context, together within [`PASS_TOKENS`]
    /// unless there is only one).
    pub(super) fn pass(
        &self,
        texts: &[&[u32]],
        pooling: Pooling,
    ) -> Result<Vec<Vec<f32>>, ModelError> {
        let hp = &self.hp;
        let w = &self.weights;
        let e = hp.n_embd;
        let mut starts = Vec::with_capacity(texts.len() + 1);
        let mut t = 0;
        for text in texts {
            starts.push(t);
            t += text.len();
        }
        starts.push(t);
        // Token, type-0 and (in a position table) position embeddings, then their
        // LayerNorm.
        let tokens: Vec<(u32, usize)> = texts
            .iter()
            .flat_map(|text| text.iter().enumerate().map(|(p, &id)| (id, p)))
            .collect();
        let positions: Vec<usize> = tokens.iter().map(|&(_, p)| p).collect();
        let mut x = vec![0f32; t * e];
        let error = std::sync::Mutex::new(None);
        self.rows_parallel(&mut x, e, &|r, row| {
            let (id, p) = tokens[r];
            if let Err(err) = w.token_embd.row_f32(&self.file, id as usize, row) {
                *error.lock().unwrap_or_else(|e| e.into_inner()) = Some(err);
                return;
            }
            add(row, &w.type0);
            if let Some(table) = &w.positions {
                add(row, &table[p * e..(p + 1) * e]);
            }
            layer_norm(row, &w.embd_norm, hp.eps);
        });
        if let Some(err) = error.into_inner().unwrap_or_else(|e| e.into_inner()) {
            return Err(err);
        }

        let mut acts = ActsCache::default();
        let mut qkv = QkvBuffers::new(t, e);
        let mut ffn = FfnBuffers::default();
        let mut attn = vec![0f32; t * e];
        for l in &w.layers {
            self.project_qkv(&mut acts, l, &x, &positions, &mut qkv)?;
            self.attention(&starts, &qkv.q, &qkv.k, &qkv.v, &mut attn);
            // x += out·attn + b, then the attention LayerNorm.
            acts.invalidate();
            acts.prepare(&self.pool, &l.out.w, &attn, t)?;
            let bo = |_t: usize, r0: usize, o: &mut [f32]| add(o, &l.out.b[r0..r0 + o.len()]);
            matmul_many(
                &self.pool,
                &self.file,
                &acts,
                vec![Product::adding(&l.out.w, &mut x).then(1, &bo)],
            )?;
            self.rows_parallel(&mut x, e, &|_, row| layer_norm(row, &l.attn_norm, hp.eps));
            // x += the feed-forward block's output, then the output LayerNorm.
            self.feed_forward(&mut acts, l, &mut x, t, &mut ffn)?;
            self.rows_parallel(&mut x, e, &|_, row| layer_norm(row, &l.out_norm, hp.eps));
        }
        self.pool_outputs(&starts, &x, pooling, &mut acts)
    }

    /// Bidirectional attention inside each text: one task per (text, head).
    fn attention(&self, starts: &[usize], q: &[f32], k: &[f32], v: &[f32], out: &mut [f32]) {
        let hp = &self.hp;
        let (e, n_head) = (hp.n_embd, hp.n_head);
        let d = e / n_head;
        let scale = 1.0 / (d as f32).sqrt();
        let n_texts = starts.len() - 1;
        let ptr = SyncPtr::new(out);
        self.pool.run(n_texts * n_head, &|task| {
            let (ti, hd) = (task / n_head, task % n_head);
            let (r0, r1) = (starts[ti], starts[ti + 1]);
            let n = r1 - r0;
            // This head's keys and values, contiguous.
            let gather = |src: &[f32]| -> Vec<f32> {
                let mut g = Vec::with_capacity(n * d);
                for r in r0..r1 {
                    g.extend_from_slice(&src[r * e + hd * d..r * e + (hd + 1) * d]);
                }
                g
            };
            let (kh, vh) = (gather(k), gather(v));
            let mut scores = vec![0f32; n];
            let mut acc = vec![0f32; d];
            for i in r0..r1 {
                let qi = &q[i * e + hd * d..i * e + (hd + 1) * d];
                for (s, kj) in scores.iter_mut().zip(kh.chunks_exact(d)) {
                    let mut dot = 0f32;
                    for (a, b) in qi.iter().zip(kj) {
                        dot += a * b;
                    }
                    *s = dot * scale;
                }
                softmax(&mut scores);
                acc.iter_mut().for_each(|a| *a = 0.0);
                for (&p, vj) in scores.iter().zip(vh.chunks_exact(d)) {
                    for (a, &b) in acc.iter_mut().zip(vj) {
                        *a += p * b;
                    }
                }
                // SAFETY: row i's columns of head hd belong to this task alone.
                unsafe { ptr.slice(i * e + hd * d, d) }.copy_from_slice(&acc);
            }
        });
    }

    /// One vector per text from the final hidden states `x`.
    fn pool_outputs(
        &self,
        starts: &[usize],
        x: &[f32],
        pooling: Pooling,
        acts: &mut ActsCache,
    ) -> Result<Vec<Vec<f32>>, ModelError> {
        let e = self.hp.n_embd;
        let rows = |a: usize, b: usize| &x[a * e..b * e];
        let spans = starts.windows(2).map(|s| (s[0], s[1]));
        Ok(match pooling {
            Pooling::None => spans.map(|(a, b)| rows(a, b).to_vec()).collect(),
            Pooling::Mean => spans
                .map(|(a, b)| {
                    let mut m = vec![0f64; e];
                    for r in rows(a, b).chunks_exact(e) {
                        m.iter_mut().zip(r).for_each(|(m, &v)| *m += v as f64);
                    }
                    let inv = 1.0 / (b - a) as f64;
                    m.iter().map(|&v| (v * inv) as f32).collect()
                })
                .collect(),
            Pooling::Cls => spans.map(|(a, _)| rows(a, a + 1).to_vec()).collect(),
            Pooling::Last => spans.map(|(_, b)| rows(b - 1, b).to_vec()).collect(),
            Pooling::Rank => {
                let n = starts.len() - 1;
                let mut cur: Vec<f32> = spans.flat_map(|(a, _)| rows(a, a + 1).to_vec()).collect();
                if let Some(cls) = &self.weights.cls {
                    let mut y = vec![0f32; n * e];
                    let tanh = |v: &mut [f32], b: &[f32]| {
                        v.iter_mut().zip(b).for_each(|(x, &b)| *x = (*x + b).tanh())
                    };
                    self.affine(acts, cls, &cur, n, &mut y, &tanh)?;
                    cur = y;
                }
                let width = match &self.weights.cls_out {
                    Some(out) => {
                        let mut z = vec![0f32; n * out.w.rows];
                        self.affine(acts, out, &cur, n, &mut z, &|v, b| add(v, b))?;
                        cur = z;
                        out.w.rows
                    }
                    None => e,
                };
                cur.chunks_exact(width).map(<[f32]>::to_vec).collect()
            }
        })
    }
}
