//! The vision room: what turns a picture into embeddings the language model reads.
//! [`decode_image`] checks and decodes a picture (every API shape refuses a bad one the
//! same way before any model work); a [`VisionEncoder`] (a projector file in
//! llama.cpp's `mmproj` layout) fits it to its input (`preprocess`, or Idefics3's
//! tiles: `slices`), runs the ViT (`vit`) and its projector (`projector`) into
//! [`ImageEmbeddings`].

mod act;
mod attention;
mod encoder;
mod feed;
mod gemm;
mod image;
mod params;
mod preprocess;
mod projector;
mod slices;
mod tiles;
mod vit;
mod weights;

pub use encoder::{ImageEmbeddings, ImageLayout, VisionEncoder};
pub use image::{decode_image, DecodedImage, ImageError, MAX_IMAGE_PIXELS, MAX_IMAGE_SIDE};
pub use params::ProjectorType;
