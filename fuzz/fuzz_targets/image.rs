//! Image decoding on arbitrary bytes (what every API shape's image parts reach). Must
//! not panic, hang or allocate past the limits; an accepted image's pixels must be
//! whole and within the limits.
#![no_main]

use libfuzzer_sys::fuzz_target;
use llamay_engine::{decode_image, MAX_IMAGE_PIXELS, MAX_IMAGE_SIDE};

fuzz_target!(|data: &[u8]| {
    if let Ok(img) = decode_image(data) {
        assert!(img.width <= MAX_IMAGE_SIDE && img.height <= MAX_IMAGE_SIDE);
        assert!(img.width as u64 * img.height as u64 <= MAX_IMAGE_PIXELS);
        assert_eq!(img.rgb.len() as u64, img.width as u64 * img.height as u64 * 3);
    }
});
