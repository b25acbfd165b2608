//! The vision encoders against llama.cpp's libmtmd (`scripts/vision-reference`): each
//! random-weight projector file of `scripts/make-vision-models` (and of
//! `scripts/make-idefics3-models`, whose pictures become tiles and an overview)
//! encodes 24 pictures of varied size, aspect ratio and format.
//!
//! - On the pixels libmtmd decoded (stb_image), every picture's rows must point where
//!   llama.cpp's do: cosine ≥ 0.9999 over the whole picture and over each row.
//! - From the file's bytes through llamay's own decoder, the same holds for every
//!   lossless picture (PNG, WebP, GIF: both decoders' pixels checked equal); JPEGs,
//!   which stb_image and the `image` crate decode a few levels apart (IDCT rounding,
//!   and chroma upsampling in 4:2:0 colour), must still reach 0.999.

use llamay_engine::{decode_image, DecodedImage, LoadOptions, ProjectorType, VisionEncoder};
use llamay_testdata::{
    bytes_from_base64, cosine, f32s_from_base64, idefics3_model, vision_model, vision_reference,
};
use serde_json::Value;

fn threads(n: usize) -> LoadOptions {
    LoadOptions {
        n_threads: Some(n),
        ..Default::default()
    }
}

/// One picture's comparison: cosine over all its rows, and the lowest of one row.
#[derive(Debug)]
struct Agreement {
    image: String,
    whole: f64,
    worst_row: f64,
}

fn agreement(image: &str, ours: &[f32], theirs: &[f32], n_embd: usize) -> Agreement {
    assert_eq!(ours.len(), theirs.len(), "{image}");
    Agreement {
        image: image.to_string(),
        whole: cosine(ours, theirs),
        worst_row: ours
            .chunks_exact(n_embd)
            .zip(theirs.chunks_exact(n_embd))
            .map(|(a, b)| cosine(a, b))
            .fold(f64::INFINITY, f64::min),
    }
}

/// llama.cpp's pixels (as an image) from the reference entry.
fn their_pixels(im: &Value) -> DecodedImage {
    let rgb = bytes_from_base64(im["rgb"].as_str().unwrap());
    DecodedImage {
        width: im["width"].as_u64().unwrap() as u32,
        height: im["height"].as_u64().unwrap() as u32,
        rgb,
        format: "raw",
    }
}

/// Per picture: the agreement on llama.cpp's pixels, the agreement from the file's
/// bytes, and whether the two decoders gave the same pixels.
fn compare(model: &str, projector: ProjectorType) -> Vec<(Agreement, Agreement, bool)> {
    let path = match projector {
        ProjectorType::Idefics3 => idefics3_model(model),
        _ => vision_model(model),
    };
    let enc = VisionEncoder::load(path, &threads(2)).expect("projector loads");
    assert_eq!(enc.projector(), projector);
    let dir = vision_reference();
    let reference: Value =
        serde_json::from_slice(&std::fs::read(dir.join(format!("{model}.json"))).unwrap()).unwrap();
    let images = reference["images"].as_array().unwrap();
    assert!(images.len() >= 20, "{} pictures", images.len());
    let mut out = Vec::new();
    for im in images {
        let name = im["image"].as_str().unwrap();
        let theirs = f32s_from_base64(im["embd"].as_str().unwrap());
        let n_tokens = im["n_tokens"].as_u64().unwrap() as usize;
        let n_embd = im["n_embd"].as_u64().unwrap() as usize;
        let pixels = their_pixels(im);
        let on_pixels = enc
            .encode(&pixels)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            (on_pixels.n_tokens, on_pixels.n_embd),
            (n_tokens, n_embd),
            "{name}"
        );
        // libmtmd's image chunks: one, or a tile each and the overview.
        let layout = enc.layout(pixels.width, pixels.height).unwrap();
        let chunks: Vec<u64> = im["parts"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| p["image"].as_u64())
            .collect();
        assert_eq!(
            chunks,
            vec![layout.rows_per_part as u64; layout.n_parts()],
            "{name}"
        );
        let bytes = std::fs::read(dir.join("images").join(name)).unwrap();
        let decoded = decode_image(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        let same_pixels = (decoded.width, decoded.height, &decoded.rgb)
            == (pixels.width, pixels.height, &pixels.rgb);
        let from_file = enc
            .encode(&decoded)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        out.push((
            agreement(name, &on_pixels.values, &theirs, n_embd),
            agreement(name, &from_file.values, &theirs, n_embd),
            same_pixels,
        ));
    }
    for (p, f, same) in &out {
        eprintln!(
            "{model} {:<22} on llama.cpp's pixels {:.7} (worst row {:.7})  from the file {:.7}{}",
            p.image,
            p.whole,
            p.worst_row,
            f.whole,
            if *same { "" } else { "  (decoders differ)" }
        );
    }
    out
}

fn assert_matches(model: &str, rows: &[(Agreement, Agreement, bool)]) {
    let bad: Vec<_> = rows
        .iter()
        .filter(|(p, _, _)| p.whole < 0.9999 || p.worst_row < 0.9999)
        .collect();
    assert!(
        bad.is_empty(),
        "{model}: on llama.cpp's pixels, below 0.9999: {bad:?}"
    );
    for (_, f, same) in rows {
        assert!(
            *same || f.image.ends_with(".jpeg"),
            "{model} {}: the decoders disagree on a lossless picture",
            f.image
        );
        let floor = if *same { 0.9999 } else { 0.999 };
        assert!(
            f.whole >= floor,
            "{model} {}: from the file {}",
            f.image,
            f.whole
        );
    }
}

#[test]
fn mlp_projector_matches_llamacpp_on_every_picture() {
    let rows = compare("mlp-F32", ProjectorType::Mlp);
    assert_matches("mlp-F32", &rows);
}

#[test]
fn gemma3_projector_matches_llamacpp_on_every_picture() {
    let rows = compare("gemma3-F32", ProjectorType::Gemma3);
    assert_matches("gemma3-F32", &rows);
}

#[test]
fn f16_projector_files_match_llamacpp_on_every_picture() {
    for (model, projector) in [
        ("mlp-F16", ProjectorType::Mlp),
        ("gemma3-F16", ProjectorType::Gemma3),
    ] {
        let rows = compare(model, projector);
        assert_matches(model, &rows);
    }
}

#[test]
fn idefics3_projector_matches_llamacpp_on_every_picture() {
    for model in ["idefics3-F32", "idefics3-F16"] {
        let rows = compare(model, ProjectorType::Idefics3);
        assert_matches(model, &rows);
    }
}

#[test]
fn broken_projector_files_are_refused_naming_what_is_wrong() {
    for (model, needle) in [
        ("mlp-bad-type", "\"resampler2\""),
        ("mlp-bad-missing", "v.blk.1.attn_q.weight"),
        ("mlp-bad-shape", "mm.0.weight"),
    ] {
        let err = VisionEncoder::load(vision_model(model), &threads(1)).expect_err(model);
        let msg = err.to_string();
        assert!(msg.contains(needle), "{model}: {msg}");
    }
    for (model, needle) in [
        ("idefics3-bad-scale", "clip.vision.projector.scale_factor 1"),
        (
            "idefics3-bad-edge",
            "clip.vision.preproc_image_size is missing",
        ),
    ] {
        let err = VisionEncoder::load(idefics3_model(model), &threads(1)).expect_err(model);
        let msg = err.to_string();
        assert!(msg.contains(needle), "{model}: {msg}");
    }
    // A language model is not a projector file.
    let text = llamay_testdata::tiny_models()[0].clone();
    let err = VisionEncoder::load(&text, &threads(1)).expect_err("a text model");
    assert!(err.to_string().contains("clip.projector_type"), "{err}");
}
