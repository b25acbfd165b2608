//! The vision room: what turns a picture into embeddings the language model reads.
//! Today it decodes and checks images (every API shape refuses a bad one the same
//! way before any model work); the encoders and projectors join it here.

mod image;

pub use image::{decode_image, DecodedImage, ImageError, MAX_IMAGE_PIXELS, MAX_IMAGE_SIDE};
