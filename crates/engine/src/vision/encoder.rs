//! A loaded projector file: the ViT and its projector, run on one picture at a time
//! (one square, or Idefics3's tiles and overview one after another).

use std::path::Path;

use super::image::DecodedImage;
use super::params::{ProjectorType, VisionParams};
use super::preprocess::{normalize, preprocess};
use super::slices::{slice_grid, slices};
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

impl ImageEmbeddings {
    /// The rows cut into `layout`'s parts (each tile, then the overview), in order.
    pub fn split(&self, layout: &ImageLayout) -> Vec<ImageEmbeddings> {
        let width = layout.rows_per_part * self.n_embd;
        self.values
            .chunks(width.max(1))
            .map(|part| ImageEmbeddings {
                n_tokens: part.len() / self.n_embd.max(1),
                n_embd: self.n_embd,
                values: part.to_vec(),
            })
            .collect()
    }
}

/// How a picture's rows take their places in a prompt: one run of rows, or (Idefics3)
/// a run per tile, row after row, then the overview's, with libmtmd's text between
/// them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageLayout {
    /// Tile rows and tiles a row, for a sliced picture.
    pub grid: Option<(usize, usize)>,
    /// The rows of each part (the whole picture, or one tile or the overview).
    pub rows_per_part: usize,
}

impl ImageLayout {
    /// The runs of rows: tiles and overview, or the one picture.
    pub fn n_parts(&self) -> usize {
        self.grid.map_or(1, |(r, c)| r * c + 1)
    }

    /// All the picture's rows.
    pub fn n_rows(&self) -> usize {
        self.n_parts() * self.rows_per_part
    }
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

    /// Rows one encoded square becomes: a whole picture, or one of Idefics3's tiles.
    pub fn n_tokens(&self) -> usize {
        let side = self.hp.patches_per_side();
        match self.hp.projector {
            ProjectorType::Mlp => side * side,
            ProjectorType::Gemma3 | ProjectorType::Idefics3 => (side / self.hp.merge).pow(2),
        }
    }

    /// How a `width × height` picture's rows are laid out (an error for a picture
    /// Idefics3 cannot tile: one scaled to no pixels a side).
    pub fn layout(&self, width: u32, height: u32) -> Result<ImageLayout, ModelError> {
        let grid = match self.hp.longest_edge {
            Some(edge) => {
                let g = slice_grid(&self.hp, edge, (width as usize, height as usize))?;
                Some((g.rows, g.cols))
            }
            None => None,
        };
        Ok(ImageLayout {
            grid,
            rows_per_part: self.n_tokens(),
        })
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
        let inputs = match self.hp.longest_edge {
            Some(edge) => slices(image, &self.hp, edge)?
                .iter()
                .map(|part| normalize(part, &self.hp))
                .collect(),
            None => vec![preprocess(image, &self.hp)],
        };
        let mut values = Vec::with_capacity(inputs.len() * self.n_tokens() * self.n_embd());
        for pixels in &inputs {
            let hidden = self.vit(pixels)?;
            values.extend(self.project(&hidden)?);
        }
        Ok(ImageEmbeddings {
            n_tokens: inputs.len() * self.n_tokens(),
            n_embd: self.n_embd(),
            values,
        })
    }
}
