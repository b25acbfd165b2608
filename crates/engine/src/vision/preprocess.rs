//! A picture fitted to the encoder's square input exactly as llama.cpp's fixed-size
//! preprocessor does (`tools/mtmd/mtmd-image.cpp`): scaled to fit with its aspect ratio
//! kept (the scaled size rounded up), resampled as Pillow resamples (separable filters,
//! weights in 22-bit fixed point), centred on a band colour, then each channel scaled
//! to [0, 1] and normalised by the file's mean and std. Idefics3's tiles (`slices`)
//! use the same resampling and normalisation.

use super::image::DecodedImage;
use super::params::{ResizeFilter, VisionParams};

/// Bits of the fixed-point resampling weights (Pillow's `PRECISION_BITS`).
const PRECISION_BITS: u32 = 32 - 8 - 2;

/// An RGB picture, 8 bits a channel, pixels row after row.
pub(super) struct Rgb {
    pub width: usize,
    pub height: usize,
    pub px: Vec<u8>,
}

impl Rgb {
    pub(super) fn of(img: &DecodedImage) -> Rgb {
        Rgb {
            width: img.width as usize,
            height: img.height as usize,
            px: img.rgb.clone(),
        }
    }
}

/// The normalised `size × size` input: 3 values a pixel (R, G, B), rows top to bottom.
pub(super) fn preprocess(img: &DecodedImage, hp: &VisionParams) -> Vec<f32> {
    let fitted = letterbox(Rgb::of(img), hp.image_size, hp.filter, hp.pad_color);
    normalize(&fitted, hp)
}

/// Each channel scaled to [0, 1], less the file's mean, over its std.
pub(super) fn normalize(img: &Rgb, hp: &VisionParams) -> Vec<f32> {
    img.px
        .chunks_exact(3)
        .flat_map(|p| (0..3).map(move |c| (p[c] as f32 / 255.0 - hp.mean[c]) / hp.std[c]))
        .collect()
}

/// `src` scaled into a `size × size` square, centred on `pad` (llama.cpp's `PAD_CEIL`).
fn letterbox(src: Rgb, size: usize, filter: ResizeFilter, pad: [u8; 3]) -> Rgb {
    if src.width == size && src.height == size {
        return src;
    }
    // In f32, as llama.cpp computes it: the rounding decides a pixel of width.
    let scale = (size as f32 / src.width as f32).min(size as f32 / src.height as f32);
    let new_w = ((src.width as f32 * scale).ceil() as usize).min(size);
    let new_h = ((src.height as f32 * scale).ceil() as usize).min(size);
    let scaled = resize(&src, new_w.max(1), new_h.max(1), filter);
    let mut out = Rgb {
        width: size,
        height: size,
        px: pad.iter().copied().cycle().take(size * size * 3).collect(),
    };
    let (ox, oy) = ((size - scaled.width) / 2, (size - scaled.height) / 2);
    for y in 0..scaled.height {
        let from = &scaled.px[y * scaled.width * 3..(y + 1) * scaled.width * 3];
        let at = ((oy + y) * size + ox) * 3;
        out.px[at..at + from.len()].copy_from_slice(from);
    }
    out
}

/// Pillow's separable resampling: a horizontal pass, then a vertical one, each only
/// when that side changes.
pub(super) fn resize(src: &Rgb, width: usize, height: usize, filter: ResizeFilter) -> Rgb {
    let mut cur = Rgb {
        width: src.width,
        height: src.height,
        px: src.px.clone(),
    };
    if width != cur.width {
        let k = Kernel::new(cur.width, width, filter);
        let mut px = vec![0u8; width * cur.height * 3];
        for y in 0..cur.height {
            let row = &cur.px[y * cur.width * 3..(y + 1) * cur.width * 3];
            for x in 0..width {
                let (start, w) = k.taps(x);
                let mut acc = [1i32 << (PRECISION_BITS - 1); 3];
                for (i, &wt) in w.iter().enumerate() {
                    let p = &row[(start + i) * 3..(start + i) * 3 + 3];
                    for c in 0..3 {
                        acc[c] += p[c] as i32 * wt;
                    }
                }
                for c in 0..3 {
                    px[(y * width + x) * 3 + c] = clip8(acc[c]);
                }
            }
        }
        cur = Rgb {
            width,
            height: cur.height,
            px,
        };
    }
    if height != cur.height {
        let k = Kernel::new(cur.height, height, filter);
        let row_len = cur.width * 3;
        let mut px = vec![0u8; row_len * height];
        let mut acc = vec![0i32; row_len];
        for y in 0..height {
            let (start, w) = k.taps(y);
            acc.iter_mut().for_each(|a| *a = 1 << (PRECISION_BITS - 1));
            for (i, &wt) in w.iter().enumerate() {
                let row = &cur.px[(start + i) * row_len..(start + i + 1) * row_len];
                for (a, &p) in acc.iter_mut().zip(row) {
                    *a += p as i32 * wt;
                }
            }
            for (o, &a) in px[y * row_len..(y + 1) * row_len].iter_mut().zip(&acc) {
                *o = clip8(a);
            }
        }
        cur = Rgb {
            width: cur.width,
            height,
            px,
        };
    }
    cur
}

fn clip8(acc: i32) -> u8 {
    (acc >> PRECISION_BITS).clamp(0, 255) as u8
}

/// The fixed-point taps of every output pixel along one side.
struct Kernel {
    /// Per output pixel: the first input pixel and the number of taps.
    bounds: Vec<(usize, usize)>,
    ksize: usize,
    weights: Vec<i32>,
}

impl Kernel {
    fn new(in_size: usize, out_size: usize, filter: ResizeFilter) -> Kernel {
        let support_of = match filter {
            ResizeFilter::Bilinear => 1.0,
            ResizeFilter::Bicubic => 2.0,
            ResizeFilter::Lanczos => 3.0,
        };
        let scale = in_size as f64 / out_size as f64;
        // Downscaling widens the filter (no aliasing); upscaling keeps it.
        let filterscale = scale.max(1.0);
        let support = support_of * filterscale;
        let ksize = support.ceil() as usize * 2 + 1;
        let mut bounds = Vec::with_capacity(out_size);
        let mut weights = vec![0i32; out_size * ksize];
        let mut pre = vec![0f64; ksize];
        for xx in 0..out_size {
            let center = (xx as f64 + 0.5) * scale;
            let ss = 1.0 / filterscale;
            // Truncation toward zero, as the C casts do.
            let xmin = ((center - support + 0.5) as i64).max(0) as usize;
            let xmax = ((center + support + 0.5) as i64).min(in_size as i64) as usize;
            let n = xmax.saturating_sub(xmin);
            let mut total = 0.0;
            for (x, p) in pre.iter_mut().enumerate().take(n) {
                *p = filter_weight(filter, (x as f64 + xmin as f64 - center + 0.5) * ss);
                total += *p;
            }
            for (x, p) in pre.iter().enumerate().take(n) {
                let v = if total != 0.0 { p / total } else { *p };
                // Pillow adds ±0.5 and truncates (rounding half away from zero).
                let fx = v * (1u64 << PRECISION_BITS) as f64;
                weights[xx * ksize + x] = (fx + if v < 0.0 { -0.5 } else { 0.5 }) as i32;
            }
            bounds.push((xmin, n));
        }
        Kernel {
            bounds,
            ksize,
            weights,
        }
    }

    fn taps(&self, out: usize) -> (usize, &[i32]) {
        let (start, n) = self.bounds[out];
        (start, &self.weights[out * self.ksize..out * self.ksize + n])
    }
}

/// The filter at distance `x` (in input pixels, scaled): a triangle, Pillow's cubic
/// with `a = -0.5`, or Lanczos over three lobes.
fn filter_weight(filter: ResizeFilter, x: f64) -> f64 {
    match filter {
        ResizeFilter::Bilinear => (1.0 - x.abs()).max(0.0),
        ResizeFilter::Bicubic => {
            const A: f64 = -0.5;
            let x = x.abs();
            if x < 1.0 {
                ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
            } else if x < 2.0 {
                (((x - 5.0) * x + 8.0) * x - 4.0) * A
            } else {
                0.0
            }
        }
        // On the signed distance, as Pillow bounds it: [-3, 3).
        ResizeFilter::Lanczos if (-3.0..3.0).contains(&x) => sinc(x) * sinc(x / 3.0),
        ResizeFilter::Lanczos => 0.0,
    }
}

fn sinc(x: f64) -> f64 {
    if x == 0.0 {
        1.0
    } else {
        let px = x * std::f64::consts::PI;
        px.sin() / px
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gradient(width: usize, height: usize) -> Rgb {
        let px = (0..width * height)
            .flat_map(|i| {
                let (x, y) = (i % width, i / width);
                [(x * 255 / width) as u8, (y * 255 / height) as u8, 77]
            })
            .collect();
        Rgb { width, height, px }
    }

    #[test]
    fn a_flat_colour_stays_flat_under_either_filter() {
        for filter in [
            ResizeFilter::Bilinear,
            ResizeFilter::Bicubic,
            ResizeFilter::Lanczos,
        ] {
            let src = Rgb {
                width: 13,
                height: 7,
                px: [10, 200, 33].repeat(13 * 7),
            };
            for (w, h) in [(5, 3), (40, 21), (13, 30)] {
                let out = resize(&src, w, h, filter);
                assert_eq!((out.width, out.height), (w, h));
                assert!(
                    out.px.chunks(3).all(|p| p == [10, 200, 33]),
                    "{filter:?} {w}x{h}"
                );
            }
        }
    }

    #[test]
    fn a_wide_picture_is_letterboxed_top_and_bottom_in_the_pad_colour() {
        let out = letterbox(gradient(40, 10), 16, ResizeFilter::Bicubic, [1, 2, 3]);
        assert_eq!((out.width, out.height), (16, 16));
        // 40 x 10 scales to 16 x 4 (ceil), centred: rows 6..10 hold the picture.
        let row = |y: usize| &out.px[y * 16 * 3..(y + 1) * 16 * 3];
        assert!(row(5).chunks(3).all(|p| p == [1, 2, 3]));
        assert!(row(10).chunks(3).all(|p| p == [1, 2, 3]));
        assert!(row(6).chunks(3).any(|p| p != [1, 2, 3]));
        assert!(row(9).chunks(3).any(|p| p != [1, 2, 3]));
    }

    #[test]
    fn downscaling_by_two_with_the_triangle_averages_pairs() {
        // Pillow's bilinear over a factor of two weighs taps 1/8, 3/8, 3/8, 1/8.
        let src = Rgb {
            width: 4,
            height: 1,
            px: [0, 0, 0, 80, 80, 80, 160, 160, 160, 240, 240, 240].to_vec(),
        };
        let out = resize(&src, 2, 1, ResizeFilter::Bilinear);
        // (0·3 + 80·3 + 160·1) / 7 at the left edge (the tap outside is dropped and
        // the rest renormalised), and symmetrically at the right.
        assert_eq!(out.px[0], 57);
        assert_eq!(out.px[3], 183);
    }
}
