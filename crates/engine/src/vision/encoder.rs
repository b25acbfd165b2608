//! A loaded projector file: the ViT and its projector, run on one picture at a time.

use std::path::Path;

use super::image::DecodedImage;
use super::params::{ProjectorType, VisionParams};
use super::preprocess::preprocess;
use super::weights::VisionWeights;
use crate::gguf::GgufFile;
use crate::model::{LoadOptions, ModelError};
use crate::pool::{physical_cores, ThreadPool};

/// A picture's rows in the language model's embedding space: `n_tokens` rows of
/// `n_embd` values, row after row, in the order they take the prompt's places.
#[derive(Clone, Debug, PartialEq)]
pub struct ImageEmbeddings {
    pub n_tokens: usize,
    pub n_embd: usize,
    pub values: Vec<f32>,
}

/// A vision encoder and projector from an `mmproj` GGUF file (llama.cpp's layout):
/// read-only and shareable between threads.
pub struct VisionEncoder {
    pub(super) file: GgufFile,
    pub(super) hp: VisionParams,
    pub(super) weights: VisionWeights,
    pub(super) pool: ThreadPool,
}

impl std::fmt::Debug for VisionEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VisionEncoder")
            .field("projector", &self.hp.projector)
            .field("image_size", &self.hp.image_size)
            .field("n_tokens", &self.n_tokens())
            .field("n_embd", &self.n_embd())
            .finish()
    }
}

impl VisionEncoder {
    /// Opens and checks the projector file at `path`; `n_threads` of `opts` (all
    /// physical cores when unset) run the encoder.
    pub fn load(path: impl AsRef<Path>, opts: &LoadOptions) -> Result<VisionEncoder, ModelError> {
        let file = GgufFile::open(path)?;
        let hp = VisionParams::from_gguf(&file)?;
        let weights = VisionWeights::load(&file, &hp)?;
        let n_threads = opts.n_threads.unwrap_or_else(physical_cores).max(1);
        Ok(VisionEncoder {
            file,
            hp,
            weights,
            pool: ThreadPool::new(n_threads),
        })
    }

    pub fn projector(&self) -> ProjectorType {
        self.hp.projector
    }

    /// Rows every picture becomes (the encoder's input has one size).
    pub fn n_tokens(&self) -> usize {
        let side = self.hp.patches_per_side();
        match self.hp.projector {
            ProjectorType::Mlp => side * side,
            ProjectorType::Gemma3 => (side / self.hp.merge).pow(2),
        }
    }

    /// The width of a row: the language model's embedding width it must match.
    pub fn n_embd(&self) -> usize {
        self.weights.n_out()
    }

    /// The picture's rows: fitted to the encoder's input, encoded and projected.
    pub fn encode(&self, image: &DecodedImage) -> Result<ImageEmbeddings, ModelError> {
        let expected = image.width as usize * image.height as usize * 3;
        if image.width == 0 || image.height == 0 || image.rgb.len() != expected {
            return Err(ModelError::Invalid(format!(
                "a {} x {} picture needs {expected} RGB bytes, not {}",
                image.width,
                image.height,
                image.rgb.len()
            )));
        }
        let pixels = preprocess(image, &self.hp);
        let hidden = self.vit(&pixels)?;
        let values = self.project(&hidden)?;
        Ok(ImageEmbeddings {
            n_tokens: self.n_tokens(),
            n_embd: self.n_embd(),
            values,
        })
    }
}
