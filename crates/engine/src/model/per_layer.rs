//! Gemma 4's per-layer inputs: every token brings, besides its embedding, a small
//! vector per layer (a row of `per_layer_token_embd`, plus a projection of its scaled
//! embedding, normed). After its feed-forward block each layer gates its slice by a
//! GELU of a projection of the residual stream, projects it back to the embedding
//! width, norms it and adds it (llama.cpp's `build_inp_per_layer`,
//! `project_per_layer_inputs` and the end of each layer of `gemma4.cpp`).

use super::arena::Arena;
use super::hparams::HParams;
use super::linear::{load_vector, matmul_many, ActsCache, Product, Weight};
use super::ops::{gelu_ggml, rms_norm_inplace};
use super::{Model, ModelError};
use crate::gguf::GgufFile;

/// The tables every layer's inputs come from.
pub(crate) struct PerLayerInputs {
    /// A row of `n_layer × width` per token.
    token_embd: Weight,
    /// The scaled token embedding's share: `n_layer × width` rows of `n_embd`.
    model_proj: Weight,
    /// Norms each layer's slice of the projection.
    proj_norm: Vec<f32>,
    width: usize,
}

/// A step's per-layer inputs and the scratch of their products.
#[derive(Default)]
pub(super) struct PerLayerScratch {
    /// Per token, `n_layer` slices of the width.
    inputs: Vec<f32>,
    /// The projection of the embeddings, then each layer's gate.
    work: Vec<f32>,
    /// A layer's projection back to the embedding width.
    out: Vec<f32>,
}

/// One layer's use of its input.
pub(crate) struct LayerInput {
    /// `width` rows of `n_embd`: the gate, from the residual stream.
    inp_gate: Weight,
    /// `n_embd` rows of `width`: back to the embedding width.
    proj: Weight,
    post_norm: Vec<f32>,
}

impl PerLayerInputs {
    pub(super) fn load(
        file: &GgufFile,
        arena: &Arena,
        hp: &HParams,
        width: usize,
    ) -> Result<PerLayerInputs, ModelError> {
        let all = width * hp.n_layer;
        Ok(PerLayerInputs {
            token_embd: Weight::load_rows(file, "per_layer_token_embd.weight", all, hp.n_vocab)?,
            model_proj: Weight::load(file, arena, "per_layer_model_proj.weight", hp.n_embd, all)?,
            proj_norm: load_vector(file, "per_layer_proj_norm.weight", width)?,
            width,
        })
    }
}

impl LayerInput {
    pub(super) fn load(
        file: &GgufFile,
        arena: &Arena,
        e: usize,
        width: usize,
        il: usize,
    ) -> Result<LayerInput, ModelError> {
        let n = |s: &str| format!("blk.{il}.{s}");
        Ok(LayerInput {
            inp_gate: Weight::load(file, arena, &n("inp_gate.weight"), e, width)?,
            proj: Weight::load(file, arena, &n("proj.weight"), width, e)?,
            post_norm: load_vector(file, &n("post_norm.weight"), e)?,
        })
    }
}

impl Model {
    /// Every layer's input for the step's `tokens`, from their scaled embeddings `x`.
    pub(super) fn per_layer_inputs(
        &self,
        tokens: impl Iterator<Item = u32>,
        x: &[f32],
        acts: &mut ActsCache,
        sc: &mut PerLayerScratch,
    ) -> Result<(), ModelError> {
        let Some(p) = &self.weights.per_layer else {
            return Ok(());
        };
        let hp = &self.hp;
        let total = x.len() / hp.n_embd;
        let all = p.width * hp.n_layer;
        sc.inputs.resize(total * all, 0.0);
        sc.work.resize(total * all, 0.0);
        let table_scale = (p.width as f32).sqrt();
        for (row, tok) in sc.inputs.chunks_exact_mut(all).zip(tokens) {
            p.token_embd.row_f32(&self.file, tok as usize, row)?;
            row.iter_mut().for_each(|v| *v *= table_scale);
        }
        acts.invalidate();
        acts.prepare(&self.pool, &p.model_proj, x, total)?;
        let product = Product::new(&p.model_proj, &mut sc.work);
        matmul_many(&self.pool, &self.file, acts, vec![product])?;
        let proj_scale = 1.0 / (hp.n_embd as f32).sqrt();
        let input_scale = 1.0 / 2f32.sqrt();
        let slices = sc.work.chunks_exact_mut(p.width);
        for (proj, inp) in slices.zip(sc.inputs.chunks_exact_mut(p.width)) {
            proj.iter_mut().for_each(|v| *v *= proj_scale);
            rms_norm_inplace(proj, &p.proj_norm, hp.rms_eps);
            for (i, v) in inp.iter_mut().zip(proj.iter()) {
                *i = (*v + *i) * input_scale;
            }
        }
        Ok(())
    }

    /// Layer `il`'s per-layer input added to the residual stream `x`.
    pub(super) fn per_layer_block(
        &self,
        il: usize,
        input: &LayerInput,
        x: &mut [f32],
        acts: &mut ActsCache,
        sc: &mut PerLayerScratch,
    ) -> Result<(), ModelError> {
        let (hp, e) = (&self.hp, self.hp.n_embd);
        let Some(p) = &self.weights.per_layer else {
            return Ok(());
        };
        let (width, total) = (p.width, x.len() / e);
        let all = width * hp.n_layer;
        let gate = &mut sc.work[..total * width];
        acts.invalidate();
        acts.prepare(&self.pool, &input.inp_gate, x, total)?;
        let product = Product::new(&input.inp_gate, gate);
        matmul_many(&self.pool, &self.file, acts, vec![product])?;
        let gate = &mut sc.work[..total * width];
        for (t, g) in gate.chunks_exact_mut(width).enumerate() {
            let inp = &sc.inputs[t * all + il * width..t * all + (il + 1) * width];
            for (g, &i) in g.iter_mut().zip(inp) {
                // `ggml_gelu`: llama.cpp's f16 table, which its CPU backend reads.
                *g = gelu_ggml(*g) * i;
            }
        }
        acts.invalidate();
        acts.prepare(&self.pool, &input.proj, &sc.work[..total * width], total)?;
        sc.out.resize(total * e, 0.0);
        let product = Product::new(&input.proj, &mut sc.out);
        matmul_many(&self.pool, &self.file, acts, vec![product])?;
        for (x, y) in x.chunks_exact_mut(e).zip(sc.out.chunks_exact_mut(e)) {
            rms_norm_inplace(y, &input.post_norm, hp.rms_eps);
            x.iter_mut().zip(y.iter()).for_each(|(x, y)| *x += y);
        }
        Ok(())
    }
}
