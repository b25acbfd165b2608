//! `generate_pieces`: a prompt of text ids and a picture's rows, prefilled piece by
//! piece, then decoded as any prompt. Checked against llama.cpp's libmtmd
//! (`scripts/vision-generate-reference`): the greedy ids equal llama.cpp's wherever
//! its margin is ≥ 2·atol (as the engine's `vision_generate` decides), for Gemma 3's
//! one run of rows and Idefics3's tiles with text between them; a schema holds over
//! an image prompt as over text.

use std::sync::atomic::AtomicBool;

use llamay_constrain::Constraint;
use llamay_engine::{DecodedImage, LoadOptions, ProjectorType, SamplerConfig, VisionEncoder};
use llamay_runtime::{
    generate_pieces, split_media, Finish, GenerationParams, LoadedModel, MediaChunk, PromptPiece,
    MEDIA_MARKER,
};
use llamay_testdata::{
    bytes_from_base64, idefics3_model, tiny_chat_model, vision_generate_reference, vision_model,
    vision_reference, vision_text_model,
};
use serde_json::Value;

/// Gemma 3's projector with tiny-gemma3-Q6_K: the file's atol (shared/ref table A).
const ATOL: f32 = 7.5e-2;
const PROJECTOR: &str = "gemma3-F32";
/// Idefics3's projector with its F32 text model: F32's atol.
const IDEFICS3: (&str, f32) = ("idefics3-F32", 2e-3);

/// A projector file of either script.
fn projector_file(name: &str) -> std::path::PathBuf {
    match name.starts_with("idefics3") {
        true => idefics3_model(name),
        false => vision_model(name),
    }
}

fn json(path: std::path::PathBuf) -> Value {
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

struct Setup {
    lm: LoadedModel,
    enc: VisionEncoder,
    reference: Value,
    pixels: Value,
}

fn setup() -> Setup {
    setup_of(PROJECTOR)
}

fn setup_of(file: &str) -> Setup {
    let opts = LoadOptions {
        n_threads: Some(2),
        ..Default::default()
    };
    let reference = json(vision_generate_reference().join(format!("{file}.json")));
    let text = vision_text_model(reference["text_model"].as_str().unwrap());
    Setup {
        lm: LoadedModel::load(&text, &opts).unwrap(),
        enc: VisionEncoder::load(projector_file(file), &opts).unwrap(),
        pixels: json(vision_reference().join(format!("{file}.json"))),
        reference,
    }
}

/// The case's picture as libmtmd decoded it.
fn picture(s: &Setup, case: &Value) -> DecodedImage {
    let name = case["image"].as_str().unwrap();
    let im = s.pixels["images"]
        .as_array()
        .unwrap()
        .iter()
        .find(|im| im["image"].as_str().unwrap().split('.').next() == Some(name))
        .unwrap();
    DecodedImage {
        width: im["width"].as_u64().unwrap() as u32,
        height: im["height"].as_u64().unwrap() as u32,
        rgb: bytes_from_base64(im["rgb"].as_str().unwrap()),
        format: "raw",
    }
}

/// The case's chunks in libmtmd's order, as llama.cpp made them.
fn reference_chunks(case: &Value) -> Vec<MediaChunk> {
    let mut parts = 0..;
    case["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| match p.get("text") {
            Some(ids) => MediaChunk::Tokens(serde_json::from_value(ids.clone()).unwrap()),
            None => MediaChunk::Image {
                image: 0,
                part: parts.next().unwrap(),
            },
        })
        .collect()
}

fn run(
    s: &Setup,
    case: &Value,
    params: &GenerationParams,
    constraint: Option<&Constraint>,
) -> llamay_runtime::Generation {
    // Our encoder on libmtmd's pixels, cut into the picture's runs of rows.
    let image = picture(s, case);
    let layout = s.enc.layout(image.width, image.height).unwrap();
    let parts = s.enc.encode(&image).unwrap().split(&layout);
    // Our own layout of the prompt's text (checked against llama.cpp's below).
    let prompt = case["prompt"].as_str().unwrap();
    let chunks = split_media(&s.lm.tokenizer, prompt, s.enc.projector(), &[layout]).unwrap();
    let pieces: Vec<PromptPiece> = chunks
        .iter()
        .map(|c| match c {
            MediaChunk::Tokens(ids) => PromptPiece::Tokens(ids),
            MediaChunk::Image { part, .. } => PromptPiece::Image(&parts[*part], s.enc.projector()),
        })
        .collect();
    generate_pieces(
        &s.lm.model,
        &s.lm.tokenizer,
        &pieces,
        (params, constraint),
        &AtomicBool::new(false),
        &mut |_| {},
    )
    .unwrap()
}

/// Per case, greedy `generate_pieces` for as many steps as llama.cpp's margin stays
/// ≥ 2·atol: llama.cpp's ids. The ids compared (those of them whose margin reaches
/// the 0.75 are counted in the output: few, for random tiny models).
fn greedy_matches(file: &str, atol: f32) -> usize {
    let s = setup_of(file);
    let eog = s.lm.tokenizer.eog_ids();
    let (mut compared, mut wide) = (0, 0);
    for case in s.reference["cases"].as_array().unwrap() {
        let steps = case["steps"].as_array().unwrap();
        let ids: Vec<u32> = steps
            .iter()
            .map(|st| st["id"].as_u64().unwrap() as u32)
            .collect();
        let sure = steps
            .iter()
            .take_while(|st| st["margin"].as_f64().unwrap() as f32 >= 2.0 * atol)
            .count();
        if sure == 0 {
            continue;
        }
        let params = GenerationParams {
            max_tokens: sure,
            sampler: SamplerConfig::greedy(),
            ..GenerationParams::default()
        };
        let gen = run(&s, case, &params, None);
        // llama.cpp's ids up to the first end-of-generation (which ours leaves out).
        let want: Vec<u32> = ids[..sure]
            .iter()
            .take_while(|id| !eog.contains(id))
            .copied()
            .collect();
        assert_eq!(gen.tokens, want, "{file} {}", case["image"]);
        compared += want.len();
        wide += steps[..want.len()]
            .iter()
            .filter(|st| st["margin"].as_f64().unwrap() >= 0.75)
            .count();
    }
    eprintln!("{file}: {compared} greedy ids compared, {wide} of them at a margin >= 0.75");
    compared
}

#[test]
fn greedy_ids_over_an_image_match_llamacpp() {
    let compared = greedy_matches(PROJECTOR, ATOL);
    assert!(compared > 0, "no step sure enough to compare");
}

#[test]
fn greedy_ids_over_a_tiled_picture_match_llamacpp() {
    let (file, atol) = IDEFICS3;
    let compared = greedy_matches(file, atol);
    assert!(compared > 0, "no step sure enough to compare");
}

#[test]
fn a_schema_holds_over_an_image_prompt() {
    let s = setup();
    let schema = serde_json::json!({"type": "object", "properties": {
        "n": {"type": "integer", "minimum": 0, "maximum": 99}},
        "required": ["n"], "additionalProperties": false});
    let (g, _) = llamay_constrain::schema_grammar(&schema).unwrap();
    let constraint = Constraint::from_grammar(&g, s.lm.vocab.clone()).unwrap();
    let params = GenerationParams {
        max_tokens: 64,
        sampler: SamplerConfig::greedy(),
        ..GenerationParams::default()
    };
    let case = &s.reference["cases"][0];
    let gen = run(&s, case, &params, Some(&constraint));
    assert_eq!(
        gen.finish,
        Finish::Grammar,
        "{:?}",
        String::from_utf8_lossy(&gen.text)
    );
    let v: Value = serde_json::from_slice(&gen.text).unwrap();
    assert!(v["n"].as_u64().unwrap() <= 99, "{v}");
    // The image's rows take positions: counted as prompt.
    assert!(gen.stats.prompt_tokens > s.enc.n_tokens());
}

#[test]
fn a_projector_of_another_width_is_refused() {
    let opts = LoadOptions {
        n_threads: Some(2),
        ..Default::default()
    };
    let s = setup();
    assert!(s.lm.vision().is_none());
    // Gemma 3's projector on tiny-gemma3: its width.
    let lm = s.lm.with_vision(&vision_model(PROJECTOR), &opts).unwrap();
    assert_eq!(lm.vision().unwrap().n_embd(), lm.model.n_embd());
    // Gemma 3's projector on the 64-wide tiny chat model: both widths named.
    let narrow = LoadedModel::load(&tiny_chat_model(), &opts).unwrap();
    assert_ne!(
        narrow.model.n_embd(),
        lm.model.n_embd(),
        "the test needs two widths"
    );
    let err = narrow
        .with_vision(&vision_model(PROJECTOR), &opts)
        .err()
        .unwrap()
        .to_string();
    let widths = [lm.model.n_embd(), 64].map(|w| w.to_string());
    assert!(widths.iter().all(|w| err.contains(w.as_str())), "{err}");
    let text = tiny_chat_model();
    // A file that is not a projector: an error, not a panic.
    let err = LoadedModel::load(&text, &opts)
        .unwrap()
        .with_vision(&text, &opts)
        .err()
        .unwrap();
    assert!(err.to_string().contains("projector"), "{err}");
}

/// The prompt's text split at the marker as libmtmd splits it: the same chunks and
/// ids (Gemma 3's image wrapped in `<start_of_image>`/`<end_of_image>`, Idefics3's
/// tiles each after its `<row_R_col_C>` and the overview after `<global-img>`, the
/// BOS), for every projector type; a marker count that is not the image count is
/// refused.
#[test]
fn prompts_split_as_libmtmd_splits_them() {
    for (file, projector) in [
        ("gemma3-F32", ProjectorType::Gemma3),
        ("mlp-F32", ProjectorType::Mlp),
        ("idefics3-F32", ProjectorType::Idefics3),
    ] {
        let s = setup_of(file);
        assert_eq!(s.enc.projector(), projector);
        let mut tiled = 0;
        for case in s.reference["cases"].as_array().unwrap() {
            let image = picture(&s, case);
            let layout = s.enc.layout(image.width, image.height).unwrap();
            tiled += usize::from(layout.grid.is_some_and(|(r, c)| r * c > 1));
            let prompt = case["prompt"].as_str().unwrap();
            let ours = split_media(&s.lm.tokenizer, prompt, projector, &[layout]).unwrap();
            assert_eq!(ours, reference_chunks(case), "{file}: {prompt:?}");
        }
        if projector == ProjectorType::Idefics3 {
            assert!(tiled >= 10, "{tiled} pictures of several tiles");
        }
        let layout = s.enc.layout(48, 48).unwrap();
        let err = split_media(&s.lm.tokenizer, MEDIA_MARKER, projector, &[layout; 2]).unwrap_err();
        assert!(err.contains("1 image place"), "{err}");
    }
}
