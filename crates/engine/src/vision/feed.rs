//! Feeding an image's rows to a language model: here, not in `model`, since the
//! vision room already reads the model room (its ViT runs on `model`'s matmuls).

use super::{ImageEmbeddings, ProjectorType};
use crate::batch::{ItemLogits, LogitsWanted};
use crate::kv_cache::SeqState;
use crate::model::{Model, ModelError};

impl Model {
    /// Appends an image's rows from a projector of type `projector` (see
    /// [`Model::forward_embeddings`]), causal or not as llama.cpp decodes that type's.
    pub fn forward_image(
        &self,
        seq: &mut SeqState,
        image: &ImageEmbeddings,
        projector: ProjectorType,
        want: LogitsWanted,
    ) -> Result<ItemLogits, ModelError> {
        if image.n_embd != self.n_embd() || image.values.len() != image.n_tokens * image.n_embd {
            return Err(ModelError::Invalid(format!(
                "the projector's rows are {} wide, this model's embeddings {}",
                image.n_embd,
                self.n_embd()
            )));
        }
        self.forward_embeddings(seq, &image.values, projector.non_causal(), want)
    }
}
