//! A layer's queries, keys and values: three products or one fused one, then, under
//! rotary positions, every head of the queries and keys turned by its token's position
//! (the keys are rotated once here; attention reads them as they are).

use super::super::linear::{matmul_many, ActsCache, Product};
use super::super::rope::RopeStyle;
use super::super::ModelError;
use super::add;
use super::weights::{EncoderLayer, Qkv};
use super::Encoder;

/// One pass's Q, K and V (`tokens × n_embd` each), and the fused product's output.
pub(super) struct QkvBuffers {
    pub q: Vec<f32>,
    pub k: Vec<f32>,
    pub v: Vec<f32>,
    fused: Vec<f32>,
}

impl QkvBuffers {
    pub(super) fn new(n_tokens: usize, n_embd: usize) -> QkvBuffers {
        let len = n_tokens * n_embd;
        QkvBuffers {
            q: vec![0.0; len],
            k: vec![0.0; len],
            v: vec![0.0; len],
            fused: Vec::new(),
        }
    }
}

impl Encoder {
    /// Q, K and V of `x` (one row per token; `positions[r]` is row r's position in
    /// its text) into `b`.
    pub(super) fn project_qkv(
        &self,
        acts: &mut ActsCache,
        l: &EncoderLayer,
        x: &[f32],
        positions: &[usize],
        b: &mut QkvBuffers,
    ) -> Result<(), ModelError> {
        let (t, e) = (positions.len(), self.hp.n_embd);
        match &l.qkv {
            Qkv::Separate { q, k, v } => {
                acts.invalidate();
                acts.prepare(&self.pool, &q.w, x, t)?;
                let (bq, bk, bv) = (
                    |_t: usize, r0: usize, o: &mut [f32]| add(o, &q.b[r0..r0 + o.len()]),
                    |_t: usize, r0: usize, o: &mut [f32]| add(o, &k.b[r0..r0 + o.len()]),
                    |_t: usize, r0: usize, o: &mut [f32]| add(o, &v.b[r0..r0 + o.len()]),
                );
                matmul_many(
                    &self.pool,
                    &self.file,
                    acts,
                    vec![
                        Product::new(&q.w, &mut b.q).then(1, &bq),
                        Product::new(&k.w, &mut b.k).then(1, &bk),
                        Product::new(&v.w, &mut b.v).then(1, &bv),
                    ],
                )?;
            }
            Qkv::Fused(qkv) => {
                b.fused.resize(t * 3 * e, 0.0);
                self.affine(acts, qkv, x, t, &mut b.fused, &|o, bias| add(o, bias))?;
                for (r, row) in b.fused.chunks_exact(3 * e).enumerate() {
                    let at = r * e..(r + 1) * e;
                    b.q[at.clone()].copy_from_slice(&row[..e]);
                    b.k[at.clone()].copy_from_slice(&row[e..2 * e]);
                    b.v[at].copy_from_slice(&row[2 * e..]);
                }
            }
        }
        if let Some(table) = &self.rope {
            let d = e / self.hp.n_head;
            let rotate = |r: usize, row: &mut [f32]| {
                for head in row.chunks_exact_mut(d) {
                    table.apply(head, positions[r], RopeStyle::Neox);
                }
            };
            self.rows_parallel(&mut b.q, e, &rotate);
            self.rows_parallel(&mut b.k, e, &rotate);
        }
        Ok(())
    }
}
