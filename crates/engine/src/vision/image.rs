//! Image bytes to RGB pixels: PNG, JPEG, WebP and GIF (its first frame), grayscale
//! and alpha included, within size limits read from the header before any pixel is
//! decoded, so a small file declaring a huge picture (a decompression bomb) costs
//! nothing.

use std::io::Cursor;

use image::{ImageFormat, ImageReader, Limits};

/// Longest side an image may have, in pixels.
pub const MAX_IMAGE_SIDE: u32 = 16_384;
/// Most pixels an image may have (64 Mi): far above what any encoder's tiling reads,
/// far below what a hostile header can ask for.
pub const MAX_IMAGE_PIXELS: u64 = 64 << 20;

/// A decoded image: 8-bit RGB, rows top to bottom (alpha dropped, gray replicated,
/// as llama.cpp's loader gives them).
#[derive(Clone, PartialEq, Eq)]
pub struct DecodedImage {
    pub width: u32,
    pub height: u32,
    /// `width * height * 3` bytes.
    pub rgb: Vec<u8>,
    /// The container's format, lower case (`png`, `jpeg`, `webp`, `gif`).
    pub format: &'static str,
}

impl std::fmt::Debug for DecodedImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}x{}", self.format, self.width, self.height)
    }
}

/// Why bytes are not an image llamay reads.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ImageError {
    #[error("the image is empty")]
    Empty,
    #[error("the image is not PNG, JPEG, WebP or GIF ({0})")]
    Unsupported(String),
    #[error(
        "the image is {width}x{height} pixels; the limit is {MAX_IMAGE_SIDE} a side and \
         {MAX_IMAGE_PIXELS} pixels in all"
    )]
    TooLarge { width: u32, height: u32 },
    #[error("the {format} image is corrupt: {reason}")]
    Corrupt {
        format: &'static str,
        reason: String,
    },
}

/// Decodes `bytes` (the format is read from the bytes, not from any name or media
/// type) into RGB pixels, refusing an unsupported format, a corrupt file and a
/// picture past the limits.
pub fn decode_image(bytes: &[u8]) -> Result<DecodedImage, ImageError> {
    if bytes.is_empty() {
        return Err(ImageError::Empty);
    }
    let format = match image::guess_format(bytes) {
        Ok(f @ (ImageFormat::Png | ImageFormat::Jpeg | ImageFormat::WebP | ImageFormat::Gif)) => f,
        Ok(other) => return Err(ImageError::Unsupported(format!("{other:?}").to_lowercase())),
        Err(_) => return Err(ImageError::Unsupported("unknown bytes".into())),
    };
    let name = match format {
        ImageFormat::Png => "png",
        ImageFormat::Jpeg => "jpeg",
        ImageFormat::WebP => "webp",
        _ => "gif",
    };
    let corrupt = |e: image::ImageError| ImageError::Corrupt {
        format: name,
        reason: e.to_string(),
    };
    let reader = || ImageReader::with_format(Cursor::new(bytes), format);
    let (width, height) = reader().into_dimensions().map_err(corrupt)?;
    if width == 0 || height == 0 {
        return Err(ImageError::Corrupt {
            format: name,
            reason: format!("it declares {width}x{height} pixels"),
        });
    }
    if width > MAX_IMAGE_SIDE
        || height > MAX_IMAGE_SIDE
        || width as u64 * height as u64 > MAX_IMAGE_PIXELS
    {
        return Err(ImageError::TooLarge { width, height });
    }
    let mut r = reader();
    let mut limits = Limits::default();
    limits.max_image_width = Some(MAX_IMAGE_SIDE);
    limits.max_image_height = Some(MAX_IMAGE_SIDE);
    // The decoded RGBA at most, with room for a decoder's own buffers.
    limits.max_alloc = Some(MAX_IMAGE_PIXELS * 4 * 2);
    r.limits(limits);
    let img = r.decode().map_err(corrupt)?;
    let rgb = img.to_rgb8();
    Ok(DecodedImage {
        width: rgb.width(),
        height: rgb.height(),
        rgb: rgb.into_raw(),
        format: name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use image::{DynamicImage, ImageBuffer, Luma, LumaA, Rgba};

    fn encode(img: DynamicImage, format: ImageFormat) -> Vec<u8> {
        let mut out = Cursor::new(Vec::new());
        img.write_to(&mut out, format).unwrap();
        out.into_inner()
    }

    #[test]
    fn every_format_decodes_to_the_same_rgb() {
        let rgba = ImageBuffer::from_fn(7, 5, |x, y| Rgba([x as u8 * 30, y as u8 * 40, 200, 128]));
        let want: Vec<u8> = rgba
            .pixels()
            .flat_map(|p| [p.0[0], p.0[1], p.0[2]])
            .collect();
        for format in [ImageFormat::Png, ImageFormat::WebP, ImageFormat::Gif] {
            let img = match format {
                // GIF keeps a palette: give it few colours, opaque.
                ImageFormat::Gif => DynamicImage::ImageRgba8(ImageBuffer::from_fn(7, 5, |x, _| {
                    Rgba([if x % 2 == 0 { 255 } else { 0 }, 0, 0, 255])
                })),
                _ => DynamicImage::ImageRgba8(rgba.clone()),
            };
            let d = decode_image(&encode(img, format)).unwrap();
            assert_eq!(
                (d.width, d.height, d.rgb.len()),
                (7, 5, 7 * 5 * 3),
                "{format:?}"
            );
            match format {
                ImageFormat::Gif => assert_eq!(&d.rgb[..6], &[255, 0, 0, 0, 0, 0]),
                // Lossless WebP and PNG keep the colours; alpha is dropped, not mixed in.
                _ => assert_eq!(d.rgb, want, "{format:?}"),
            }
        }
        let jpeg = encode(
            DynamicImage::ImageRgb8(ImageBuffer::from_pixel(16, 8, image::Rgb([90, 140, 30]))),
            ImageFormat::Jpeg,
        );
        let d = decode_image(&jpeg).unwrap();
        assert_eq!((d.format, d.width, d.height), ("jpeg", 16, 8));
        assert!(d.rgb.chunks(3).all(|p| p
            .iter()
            .zip([90u8, 140, 30])
            .all(|(a, b)| a.abs_diff(b) <= 3)));
        // Gray (with and without alpha) is replicated into the three channels.
        for img in [
            DynamicImage::ImageLuma8(ImageBuffer::from_pixel(3, 3, Luma([77]))),
            DynamicImage::ImageLumaA8(ImageBuffer::from_pixel(3, 3, LumaA([77, 10]))),
        ] {
            let d = decode_image(&encode(img, ImageFormat::Png)).unwrap();
            assert!(d.rgb.iter().all(|&v| v == 77));
        }
    }

    #[test]
    fn bad_bytes_are_named() {
        assert_eq!(decode_image(b""), Err(ImageError::Empty));
        assert!(matches!(
            decode_image(b"hello, not an image"),
            Err(ImageError::Unsupported(_))
        ));
        let mut bmp = b"BM".to_vec();
        bmp.resize(64, 0);
        assert_eq!(
            decode_image(&bmp),
            Err(ImageError::Unsupported("bmp".into()))
        );
        let mut png = encode(
            DynamicImage::ImageRgb8(ImageBuffer::from_pixel(32, 32, image::Rgb([1, 2, 3]))),
            ImageFormat::Png,
        );
        png.truncate(png.len() / 2);
        assert!(matches!(
            decode_image(&png),
            Err(ImageError::Corrupt { format: "png", .. })
        ));
    }

    #[test]
    fn a_header_declaring_a_huge_picture_is_refused_before_decoding() {
        // A PNG whose header says 60,000 x 60,000 (a decompression bomb's header).
        assert_eq!(
            decode_image(&llamay_testdata::png_declaring(60_000)),
            Err(ImageError::TooLarge {
                width: 60_000,
                height: 60_000
            })
        );
        assert_eq!(decode_image(llamay_testdata::PNG_1X1).unwrap().rgb.len(), 3);
    }
}
