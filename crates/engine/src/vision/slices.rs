//! Idefics3's cut of a picture into tiles plus an overview, as llama.cpp's
//! `mtmd_image_preprocessor_idefics3` makes it (its `longest_edge` path,
//! `tools/mtmd/mtmd-image.cpp`): the longer side scaled to `longest_edge` (the other
//! by the aspect ratio, truncated, then made even), that stretched up to whole tiles
//! of `image_size`, cut row by row into the tiles; the overview is the stretched
//! picture scaled down to one tile. Every resize is Lanczos, as there.

use super::image::DecodedImage;
use super::params::VisionParams;
use super::preprocess::{resize, Rgb};
use crate::model::ModelError;

/// Where a picture's tiles come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct SliceGrid {
    /// The picture scaled to the longest edge, aspect ratio kept.
    pub resized: (usize, usize),
    /// Tiles a row and tile rows.
    pub cols: usize,
    pub rows: usize,
}

/// The grid of a `width × height` picture; `longest_edge` is the file's
/// `clip.vision.preproc_image_size`.
pub(super) fn slice_grid(
    hp: &VisionParams,
    longest_edge: usize,
    (width, height): (usize, usize),
) -> Result<SliceGrid, ModelError> {
    // In f64 and truncated toward zero, as llama.cpp computes it.
    let aspect = width as f64 / height as f64;
    let (w, h) = if width >= height {
        let h = (longest_edge as f64 / aspect) as usize;
        (longest_edge, h + h % 2)
    } else {
        let w = (longest_edge as f64 * aspect) as usize;
        (w + w % 2, longest_edge)
    };
    if w == 0 || h == 0 {
        // llama.cpp's resize asserts here.
        return Err(ModelError::Invalid(format!(
            "a {width} x {height} picture scales to {w} x {h} pixels: too thin to encode"
        )));
    }
    let tile = hp.image_size;
    Ok(SliceGrid {
        resized: (w, h),
        cols: w.div_ceil(tile),
        rows: h.div_ceil(tile),
    })
}

/// The picture's tiles row after row, then the overview: `image_size` squares, in
/// the order libmtmd places their rows in the prompt.
pub(super) fn slices(
    img: &DecodedImage,
    hp: &VisionParams,
    longest_edge: usize,
) -> Result<Vec<Rgb>, ModelError> {
    let src = Rgb::of(img);
    let g = slice_grid(hp, longest_edge, (src.width, src.height))?;
    let tile = hp.image_size;
    let resized = resize(&src, g.resized.0, g.resized.1, hp.filter);
    let refined = resize(&resized, g.cols * tile, g.rows * tile, hp.filter);
    let mut out = Vec::with_capacity(g.rows * g.cols + 1);
    for ty in 0..g.rows {
        for tx in 0..g.cols {
            out.push(crop(&refined, tx * tile, ty * tile, tile));
        }
    }
    out.push(resize(&refined, tile, tile, hp.filter));
    Ok(out)
}

/// The `size × size` square of `src` whose top left is `(x, y)`.
fn crop(src: &Rgb, x: usize, y: usize, size: usize) -> Rgb {
    let px = (y..y + size)
        .flat_map(|row| {
            let at = (row * src.width + x) * 3;
            src.px[at..at + size * 3].iter().copied()
        })
        .collect();
    Rgb {
        width: size,
        height: size,
        px,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vision::params::{ProjectorType, ResizeFilter, VitActivation};

    fn params(tile: usize) -> VisionParams {
        VisionParams {
            projector: ProjectorType::Idefics3,
            image_size: tile,
            patch_size: 8,
            n_embd: 8,
            n_ff: 8,
            n_head: 1,
            n_layer: 1,
            eps: 1e-6,
            mean: [0.5; 3],
            std: [0.5; 3],
            activation: VitActivation::Gelu,
            filter: ResizeFilter::Lanczos,
            pad_color: [0; 3],
            merge: 2,
            longest_edge: Some(3 * tile),
        }
    }

    #[test]
    fn the_grid_follows_the_longer_side_and_rounds_the_other_up_to_even_then_tiles() {
        let hp = params(48);
        let g = |w, h| {
            let g = slice_grid(&hp, 144, (w, h)).unwrap();
            (g.resized, g.cols, g.rows)
        };
        // 301 x 97: 144 / (301 / 97) = 46.4 -> 46 (even): 3 x 1 tiles.
        assert_eq!(g(301, 97), ((144, 46), 3, 1));
        // 60 x 170: 144 * 60 / 170 = 50.8 -> 50: 2 x 3.
        assert_eq!(g(60, 170), ((50, 144), 2, 3));
        // 7 x 5 (upscaled): 144 / 1.4 = 102.86 -> 102: 3 x 3.
        assert_eq!(g(7, 5), ((144, 102), 3, 3));
        // An odd truncation is made even: 144 * 33 / 40 = 118.8 -> 118 -> 118;
        // 144 / (50 / 29) = 83.52 -> 83 -> 84.
        assert_eq!(g(33, 40), ((118, 144), 3, 3));
        assert_eq!(g(50, 29), ((144, 84), 3, 2));
        assert_eq!(g(48, 48), ((144, 144), 3, 3));
        assert!(slice_grid(&hp, 144, (1000, 1)).is_err());
    }

    #[test]
    fn tiles_are_cut_row_by_row_and_the_overview_comes_last() {
        let hp = params(8);
        // A 24 x 16 picture is already 3 x 2 tiles at a longest edge of 24: the
        // tiles are its squares, unresampled, each filled with its own index.
        let (w, h) = (24usize, 16usize);
        let rgb = (0..w * h)
            .flat_map(|i| {
                let (x, y) = (i % w, i / w);
                let t = (y / 8 * 3 + x / 8) as u8;
                [t * 30, t * 30, t * 30]
            })
            .collect();
        let img = DecodedImage {
            width: w as u32,
            height: h as u32,
            rgb,
            format: "raw",
        };
        let out = slices(&img, &hp, 24).unwrap();
        assert_eq!(out.len(), 7);
        for (t, tile) in out[..6].iter().enumerate() {
            assert_eq!((tile.width, tile.height), (8, 8));
            assert!(tile.px.iter().all(|&v| v == t as u8 * 30), "tile {t}");
        }
        // The overview spans every tile's shade.
        let ov = &out[6];
        assert_eq!((ov.width, ov.height), (8, 8));
        assert!(ov.px[0] < 30 && ov.px[ov.px.len() - 1] > 120);
    }
}
