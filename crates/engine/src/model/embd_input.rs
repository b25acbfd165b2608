//! Steps fed rows in the model's embedding space instead of token ids: an image's
//! rows from a [`crate::VisionEncoder`], each taking one position, as llama.cpp's
//! `llama_batch.embd` does for models without M-RoPE.

use super::forward::{StepInput, MAX_STEP_TOKENS};
use super::{Model, ModelError};
use crate::batch::{BatchItem, ItemLogits, LogitsWanted};
use crate::kv_cache::SeqState;

impl Model {
    /// Appends `rows` (`n × n_embd` values, row-major) to `seq` at positions
    /// `seq.n_past..`, one row a position, and returns the logits `want` asks for.
    /// The rows are used as given: llama.cpp applies a family's embedding scale
    /// (Gemma's √n_embd) to looked-up tokens only.
    ///
    /// `non_causal`: the rows see each other whatever their order (llama.cpp's mtmd
    /// decodes a Gemma 3 image so, `mtmd_decode_use_non_causal`); they are then one
    /// step, so at most [`MAX_STEP_TOKENS`] of them. Causal rows are split into steps
    /// of that many. Checked first: on an error `seq` is unchanged.
    pub fn forward_embeddings(
        &self,
        seq: &mut SeqState,
        rows: &[f32],
        non_causal: bool,
        want: LogitsWanted,
    ) -> Result<ItemLogits, ModelError> {
        let e = self.hp.n_embd;
        if !rows.len().is_multiple_of(e) {
            return Err(ModelError::Invalid(format!(
                "{} embedding values are not whole rows of {e}",
                rows.len()
            )));
        }
        let n = rows.len() / e;
        if non_causal && n > MAX_STEP_TOKENS {
            return Err(ModelError::Invalid(format!(
                "{n} rows seeing each other are more than one step takes ({MAX_STEP_TOKENS})"
            )));
        }
        if self.weights.per_layer.is_some() {
            // Gemma 3n's per-layer inputs are looked up by token id.
            return Err(ModelError::Invalid(
                "this model's per-layer inputs need token ids: embedding rows cannot be fed".into(),
            ));
        }
        #[cfg(feature = "gpu")]
        if self.device.is_some() {
            return Err(ModelError::Device(
                "embedding rows are fed on the CPU only for now".into(),
            ));
        }
        // Placeholder ids: they size each item's span and pass the id checks; nothing
        // else of the step reads them once `per_layer` is ruled out.
        let ids = vec![0u32; n.min(MAX_STEP_TOKENS)];
        self.validate(&[BatchItem {
            seq,
            tokens: &ids[..0],
            want_logits: LogitsWanted::None,
        }])?;
        let needed = seq.n_past + n;
        if needed > seq.n_ctx {
            return Err(ModelError::ContextFull {
                needed,
                n_ctx: seq.n_ctx,
            });
        }
        let mut data = Vec::new();
        let n_steps = n.div_ceil(MAX_STEP_TOKENS);
        for (i, chunk) in rows.chunks(MAX_STEP_TOKENS * e).enumerate() {
            let want = match want {
                LogitsWanted::Last if i + 1 < n_steps => LogitsWanted::None,
                w => w,
            };
            let mut batch = [BatchItem {
                seq,
                tokens: &ids[..chunk.len() / e],
                want_logits: want,
            }];
            let input = StepInput {
                rows: Some(chunk),
                non_causal,
            };
            let mut hidden = self.step_layers(&mut batch, input)?;
            let out = self.logits(&mut [(&batch[..], hidden.as_mut())]);
            self.give_back(hidden);
            data.append(&mut out?.remove(0).data);
        }
        Ok(ItemLogits {
            n_vocab: self.hp.n_vocab,
            data,
        })
    }
}
