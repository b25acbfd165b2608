//! The feed-forward block, added to the layer's input: GELU over one product (BERT) or
//! SwiGLU over two (nomic-bert).

use super::super::linear::{matmul_many, ActsCache, Product};
use super::super::ops::{gelu_ggml as gelu, silu_gate};
use super::super::ModelError;
use super::add;
use super::weights::EncoderLayer;
use super::Encoder;

/// The block's intermediate values (`tokens × n_ff`): the up product, and the gate's.
#[derive(Default)]
pub(super) struct FfnBuffers {
    up: Vec<f32>,
    gate: Vec<f32>,
}

impl Encoder {
    /// `x += down·act(x) + b` for the `t` rows of `x`.
    pub(super) fn feed_forward(
        &self,
        acts: &mut ActsCache,
        l: &EncoderLayer,
        x: &mut [f32],
        t: usize,
        b: &mut FfnBuffers,
    ) -> Result<(), ModelError> {
        let ff = self.hp.n_ff;
        b.up.resize(t * ff, 0.0);
        let hidden: &[f32] = match &l.gate {
            None => {
                let bias_gelu = |v: &mut [f32], bias: &[f32]| {
                    for (x, &b) in v.iter_mut().zip(bias) {
                        *x = gelu(*x + b);
                    }
                };
                self.affine(acts, &l.up, x, t, &mut b.up, &bias_gelu)?;
                &b.up
            }
            Some(gate) => {
                b.gate.resize(t * ff, 0.0);
                acts.invalidate();
                acts.prepare(&self.pool, &gate.w, x, t)?;
                acts.prepare(&self.pool, &l.up.w, x, t)?;
                matmul_many(
                    &self.pool,
                    &self.file,
                    acts,
                    vec![
                        Product::new(&gate.w, &mut b.gate),
                        Product::new(&l.up.w, &mut b.up),
                    ],
                )?;
                // silu(gate) * up, in the gate's buffer.
                let up = &b.up;
                self.rows_parallel(&mut b.gate, ff, &|r, row| {
                    silu_gate(row, &up[r * ff..(r + 1) * ff])
                });
                &b.gate
            }
        };
        acts.invalidate();
        acts.prepare(&self.pool, &l.down.w, hidden, t)?;
        let bd = |_t: usize, r0: usize, o: &mut [f32]| add(o, &l.down.b[r0..r0 + o.len()]);
        matmul_many(
            &self.pool,
            &self.file,
            acts,
            vec![Product::adding(&l.down.w, x).then(1, &bd)],
        )
    }
}
