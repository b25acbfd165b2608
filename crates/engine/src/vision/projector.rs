//! The projectors: what turns the ViT's hidden states into rows of the language model's
//! embedding space (llama.cpp's `models/llava.cpp` for `mlp`, `models/siglip.cpp` for
//! `gemma3` and `idefics3`).

use super::encoder::VisionEncoder;
use super::vit::add;
use super::weights::ProjectorWeights;
use crate::model::linear::ActsCache;
use crate::model::ops::{gelu_ggml, rms_norm_inplace};
use crate::model::ModelError;

impl VisionEncoder {
    /// The output rows (`n_tokens × n_out`) from the ViT's `hidden` states.
    pub(super) fn project(&self, hidden: &[f32]) -> Result<Vec<f32>, ModelError> {
        let e = self.hp.n_embd;
        let side = self.hp.patches_per_side();
        let n_patches = side * side;
        let mut acts = ActsCache::default();
        match &self.weights.projector {
            ProjectorWeights::Mlp { mm0, mm2 } => {
                // llama.cpp takes rows 1..=n_patches when there is a class token: with
                // the class token concatenated after the patches, that drops the first
                // patch and keeps the class token's row last.
                let offset = usize::from(self.weights.class.is_some());
                let rows = &hidden[offset * e..(offset + n_patches) * e];
                let mut y = vec![0f32; n_patches * mm0.w.rows];
                let bias_gelu = |v: &mut [f32], bias: &[f32]| {
                    for (x, &b) in v.iter_mut().zip(bias) {
                        *x = gelu_ggml(*x + b);
                    }
                };
                self.affine(&mut acts, (mm0, None), rows, &mut y, false, &bias_gelu)?;
                let Some(mm2) = mm2 else {
                    return Ok(y);
                };
                let mut z = vec![0f32; n_patches * mm2.w.rows];
                self.affine(&mut acts, (mm2, None), &y, &mut z, false, &|o, b| add(o, b))?;
                Ok(z)
            }
            ProjectorWeights::Gemma3 { soft_norm, proj } => {
                // Average pooling, k × k patches a token, tokens row after row.
                let k = self.hp.merge;
                let out_side = side / k;
                let mut pooled = vec![0f32; out_side * out_side * e];
                for (t, row) in pooled.chunks_exact_mut(e).enumerate() {
                    let (oy, ox) = (t / out_side, t % out_side);
                    for ky in 0..k {
                        for kx in 0..k {
                            let p = (oy * k + ky) * side + ox * k + kx;
                            add(row, &hidden[p * e..(p + 1) * e]);
                        }
                    }
                    let inv = 1.0 / (k * k) as f32;
                    row.iter_mut().for_each(|v| *v *= inv);
                }
                let eps = self.hp.eps;
                self.rows_parallel(&mut pooled, e, &|_, row| {
                    rms_norm_inplace(row, soft_norm, eps)
                });
                let mut out = vec![0f32; out_side * out_side * proj.rows];
                self.dense_product(proj, &pooled, &mut out);
                Ok(out)
            }
            ProjectorWeights::Idefics3 { fc } => {
                let shuffled = pixel_shuffle(hidden, side, self.hp.merge, e);
                let mut out = vec![0f32; shuffled.len() / fc.w.cols * fc.w.rows];
                self.affine(
                    &mut acts,
                    (fc, None),
                    &shuffled,
                    &mut out,
                    false,
                    &|o, b| add(o, b),
                )?;
                Ok(out)
            }
        }
    }
}

/// llama.cpp's pixel shuffle (`build_patch_merge_permute`) of a `side × side` grid
/// of `e`-wide patches: each `k × k` block becomes one row, blocks row after row;
/// the row is the block's patches one after another, top row first, left to right.
fn pixel_shuffle(hidden: &[f32], side: usize, k: usize, e: usize) -> Vec<f32> {
    let out_side = side / k;
    let mut out = Vec::with_capacity(side * side * e);
    for oy in 0..out_side {
        for ox in 0..out_side {
            for dy in 0..k {
                for dx in 0..k {
                    let p = (oy * k + dy) * side + ox * k + dx;
                    out.extend_from_slice(&hidden[p * e..(p + 1) * e]);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pixel_shuffle_takes_each_block_top_row_first() {
        // A 4 x 4 grid of 1-wide patches numbered row after row, blocks of 2 x 2.
        let hidden: Vec<f32> = (0..16).map(|v| v as f32).collect();
        let out = pixel_shuffle(&hidden, 4, 2, 1);
        assert_eq!(
            out,
            [0., 1., 4., 5., 2., 3., 6., 7., 8., 9., 12., 13., 10., 11., 14., 15.]
        );
    }
}
