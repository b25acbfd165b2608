//! An image prompt as the scheduler runs it: one flat id list in which each image's
//! rows take pseudo token ids made from the picture's content, so the prefix cache
//! (which files blocks by their ids) finds a prompt holding the same picture again
//! and never confuses two pictures; beside it, where each run of image rows sits and
//! its picture's pixels (encoded only if the cache does not already hold its rows,
//! and once for all the runs of one picture: Idefics3's tiles and overview).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use llamay_engine::{DecodedImage, ImageEmbeddings, ImageLayout, ProjectorType, VisionEncoder};

use crate::error::Error;
use crate::kv::PrefixCache;
use crate::loaded::LoadedModel;
use crate::media::{prompt_chunks, MediaChunk};

/// Pseudo ids have the top bit set: no vocabulary reaches 2^31 tokens, so an image
/// row never matches a real token (and [`is_image_id`] tells them apart).
const IMAGE_ID_BIT: u32 = 1 << 31;

/// Whether `id` stands for an image row rather than a token.
pub(crate) fn is_image_id(id: u32) -> bool {
    id & IMAGE_ID_BIT != 0
}

/// One picture of a queued prompt, shared by the places of its runs of rows.
struct Picture {
    pixels: Arc<DecodedImage>,
    layout: ImageLayout,
    /// Its rows cut into parts, once encoded (or why encoding failed).
    parts: OnceLock<Result<Vec<ImageEmbeddings>, String>>,
}

/// One run of image rows in a queued prompt ([`Job::images`](crate::Job)): the rows
/// take positions `start..start + len`. Only `Runtime::start` makes them.
pub struct ImagePlace {
    pub(crate) start: usize,
    pub(crate) len: usize,
    pub(crate) projector: ProjectorType,
    /// Which run of its picture's rows ([`ImageLayout`]'s parts).
    part: usize,
    /// The picture, until its rows are fed (or found cached).
    picture: Option<Arc<Picture>>,
}

impl ImagePlace {
    pub(crate) fn end(&self) -> usize {
        self.start + self.len
    }

    /// This run's rows, encoding the picture if no place of it has yet (heavy: the
    /// caller is a blocking or engine thread, never an async one).
    /// Each encoding counts in `encoded` (`/v1/stats` `images_encoded`).
    pub(crate) fn encode(
        &self,
        enc: &VisionEncoder,
        encoded: &AtomicU64,
    ) -> Result<&ImageEmbeddings, String> {
        let picture = self.picture.as_ref().ok_or("the image's pixels are gone")?;
        let parts = picture.parts.get_or_init(|| {
            encoded.fetch_add(1, Ordering::Relaxed);
            let rows = enc.encode(&picture.pixels).map_err(|e| e.to_string())?;
            Ok(rows.split(&picture.layout))
        });
        match parts {
            Ok(parts) => parts
                .get(self.part)
                .ok_or_else(|| "no such image part".into()),
            Err(e) => Err(e.clone()),
        }
    }

    /// The pixels and rows are no longer needed here (fed, or found in the cache);
    /// the picture goes when its last place lets go.
    pub(crate) fn release(&mut self) {
        self.picture = None;
    }
}

/// A 64-bit FNV-1a over the picture's size and pixels: what the encoder sees, so
/// the same picture sent as PNG or as WebP shares its rows.
fn content_hash(im: &DecodedImage) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |b: &[u8]| {
        for &x in b {
            h ^= x as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    eat(&im.width.to_le_bytes());
    eat(&im.height.to_le_bytes());
    eat(&im.rgb);
    h
}

/// The pseudo id of row `row` of a picture hashed `hash`: 31 bits of a mix of both
/// (a splitmix64 finaliser), so rows differ from each other and pictures from
/// pictures.
pub(crate) fn image_id(hash: u64, row: usize) -> u32 {
    let mut z = hash ^ (row as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    IMAGE_ID_BIT | (z as u32 & !IMAGE_ID_BIT)
}

/// `chunks` (from `prompt_chunks`) as one id list and the places of `images`' runs
/// of rows in it (each picture with its layout).
pub(crate) fn lay_out(
    chunks: &[MediaChunk],
    images: &[(Arc<DecodedImage>, ImageLayout)],
    enc: &VisionEncoder,
) -> (Vec<u32>, Vec<ImagePlace>) {
    let pictures: Vec<_> = images
        .iter()
        .map(|(pixels, layout)| {
            let picture = Picture {
                pixels: pixels.clone(),
                layout: *layout,
                parts: OnceLock::new(),
            };
            (content_hash(pixels), Arc::new(picture))
        })
        .collect();
    let mut ids = Vec::new();
    let mut places = Vec::new();
    for c in chunks {
        match c {
            MediaChunk::Tokens(t) => ids.extend_from_slice(t),
            MediaChunk::Image { image, part } => {
                let (hash, picture) = &pictures[*image];
                let start = ids.len();
                let len = picture.layout.rows_per_part;
                // Numbered across the picture's parts: every row of it differs.
                let first = part * len;
                ids.extend((first..first + len).map(|r| image_id(*hash, r)));
                places.push(ImagePlace {
                    start,
                    len,
                    projector: enc.projector(),
                    part: *part,
                    picture: Some(picture.clone()),
                });
            }
        }
    }
    (ids, places)
}

/// A rendered chat prompt holding `images` at its markers, as the scheduler runs
/// it: the ids (pseudo ids for image rows) and the images' places. The pictures
/// whose rows the prefix cache does not hold now are encoded here (the caller's
/// blocking thread), so the engine thread seldom has to.
pub(crate) fn image_prompt(
    lm: &LoadedModel,
    enc: &VisionEncoder,
    text: &str,
    images: &[Arc<DecodedImage>],
    (cache, encoded): (&PrefixCache, &AtomicU64),
) -> Result<(Vec<u32>, Vec<ImagePlace>), Error> {
    let images = images
        .iter()
        .map(|im| {
            let layout = enc
                .layout(im.width, im.height)
                .map_err(|e| Error::bad_request(e.to_string()).at("messages"))?;
            Ok((im.clone(), layout))
        })
        .collect::<Result<Vec<_>, Error>>()?;
    let layouts: Vec<_> = images.iter().map(|(_, l)| *l).collect();
    let chunks = prompt_chunks(&lm.tokenizer, text, enc.projector(), &layouts)
        .map_err(|e| Error::bad_request(e).at("messages"))?;
    let (ids, places) = lay_out(&chunks, &images, enc);
    let hit = cache.cached_len(&ids, ids.len().saturating_sub(1));
    for im in places.iter().filter(|im| im.end() > hit) {
        im.encode(enc, encoded)
            .map_err(|e| Error::internal(format!("encoding an image failed: {e}")))?;
    }
    Ok((ids, places))
}

/// Where a sequence may start from a cached prefix of `n` positions: never inside
/// an image (its rows are one step, non-causal for Gemma 3), so a hit ending inside
/// one is cut back to the image's start.
pub(crate) fn usable_prefix(n: usize, places: &[ImagePlace]) -> usize {
    places
        .iter()
        .find(|p| p.start < n && n < p.end())
        .map_or(n, |p| p.start)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn picture(v: u8) -> DecodedImage {
        DecodedImage {
            width: 2,
            height: 1,
            rgb: vec![v; 6],
            format: "raw",
        }
    }

    #[test]
    fn ids_are_not_tokens_and_follow_the_content() {
        let (a, b) = (content_hash(&picture(1)), content_hash(&picture(2)));
        assert_ne!(a, b);
        assert_eq!(a, content_hash(&picture(1)));
        let rows: Vec<u32> = (0..256).map(|r| image_id(a, r)).collect();
        assert!(rows.iter().all(|&id| is_image_id(id)));
        let distinct: std::collections::HashSet<_> = rows.iter().collect();
        assert_eq!(distinct.len(), 256, "rows of one picture differ");
        assert!((0..256).all(|r| image_id(a, r) != image_id(b, r)));
        assert!(!is_image_id(262_143));
    }

    #[test]
    fn a_prefix_never_stops_inside_an_image() {
        let place = |start, len| ImagePlace {
            start,
            len,
            projector: ProjectorType::Gemma3,
            part: 0,
            picture: None,
        };
        let places = [place(5, 16), place(30, 16)];
        assert_eq!(usable_prefix(3, &places), 3);
        assert_eq!(usable_prefix(5, &places), 5);
        assert_eq!(usable_prefix(6, &places), 5);
        assert_eq!(usable_prefix(20, &places), 5);
        assert_eq!(usable_prefix(21, &places), 21);
        assert_eq!(usable_prefix(45, &places), 30);
        assert_eq!(usable_prefix(46, &places), 46);
    }
}
