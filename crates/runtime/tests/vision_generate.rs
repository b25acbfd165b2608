//! `generate_pieces`: a prompt of text ids and a picture's rows, prefilled piece by
//! piece, then decoded as any prompt. Checked against llama.cpp's libmtmd
//! (`scripts/vision-generate-reference`): the greedy ids equal llama.cpp's wherever
//! its margin is ≥ 2·atol (as the engine's `vision_generate` decides); a schema
//! holds over an image prompt as over text.

use std::sync::atomic::AtomicBool;

use llamay_constrain::Constraint;
use llamay_engine::{
    DecodedImage, ImageEmbeddings, LoadOptions, ProjectorType, SamplerConfig, VisionEncoder,
};
use llamay_runtime::{
    generate_pieces, split_media, Finish, GenerationParams, LoadedModel, MediaChunk, PromptPiece,
    MEDIA_MARKER,
};
use llamay_testdata::{
    bytes_from_base64, ref_path, tiny_chat_model, vision_generate_reference, vision_model,
    vision_reference,
};
use serde_json::Value;

/// Gemma 3's projector with tiny-gemma3-Q6_K: the file's atol (shared/ref table A).
const ATOL: f32 = 7.5e-2;
const PROJECTOR: &str = "gemma3-F32";

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
    let opts = LoadOptions {
        n_threads: Some(2),
        ..Default::default()
    };
    let reference = json(vision_generate_reference().join(format!("{PROJECTOR}.json")));
    let text = ref_path(&format!(
        "tiny/{}",
        reference["text_model"].as_str().unwrap()
    ));
    Setup {
        lm: LoadedModel::load(&text, &opts).unwrap(),
        enc: VisionEncoder::load(vision_model(PROJECTOR), &opts).unwrap(),
        pixels: json(vision_reference().join(format!("{PROJECTOR}.json"))),
        reference,
    }
}

/// The case's picture encoded by our encoder (on libmtmd's own pixels).
fn rows(s: &Setup, case: &Value) -> ImageEmbeddings {
    let name = case["image"].as_str().unwrap();
    let im = s.pixels["images"]
        .as_array()
        .unwrap()
        .iter()
        .find(|im| im["image"].as_str().unwrap().split('.').next() == Some(name))
        .unwrap();
    let image = DecodedImage {
        width: im["width"].as_u64().unwrap() as u32,
        height: im["height"].as_u64().unwrap() as u32,
        rgb: bytes_from_base64(im["rgb"].as_str().unwrap()),
        format: "raw",
    };
    s.enc.encode(&image).unwrap()
}

/// The case's chunks in libmtmd's order, as llama.cpp made them.
fn reference_chunks(case: &Value) -> Vec<MediaChunk> {
    let mut images = 0..;
    case["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| match p.get("text") {
            Some(ids) => MediaChunk::Tokens(serde_json::from_value(ids.clone()).unwrap()),
            None => MediaChunk::Image(images.next().unwrap()),
        })
        .collect()
}

fn run(
    s: &Setup,
    case: &Value,
    params: &GenerationParams,
    constraint: Option<&Constraint>,
) -> llamay_runtime::Generation {
    let image = rows(s, case);
    // Our own layout of the prompt's text (checked against llama.cpp's below).
    let prompt = case["prompt"].as_str().unwrap();
    let chunks = split_media(&s.lm.tokenizer, prompt, s.enc.projector(), 1).unwrap();
    let pieces: Vec<PromptPiece> = chunks
        .iter()
        .map(|c| match c {
            MediaChunk::Tokens(ids) => PromptPiece::Tokens(ids),
            MediaChunk::Image(_) => PromptPiece::Image(&image, s.enc.projector()),
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

#[test]
fn greedy_ids_over_an_image_match_llamacpp() {
    let s = setup();
    let eog = s.lm.tokenizer.eog_ids();
    let mut compared = 0;
    for case in s.reference["cases"].as_array().unwrap() {
        let steps = case["steps"].as_array().unwrap();
        let ids: Vec<u32> = steps
            .iter()
            .map(|st| st["id"].as_u64().unwrap() as u32)
            .collect();
        let sure = steps
            .iter()
            .take_while(|st| st["margin"].as_f64().unwrap() as f32 >= 2.0 * ATOL)
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
        assert_eq!(gen.tokens, want, "{}", case["image"]);
        compared += want.len();
    }
    assert!(compared > 0, "no step sure enough to compare");
    eprintln!("{PROJECTOR}: {compared} greedy ids compared");
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
    assert!(gen.stats.prompt_tokens > rows(&s, case).n_tokens);
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
/// ids (Gemma 3's image wrapped in `<start_of_image>`/`<end_of_image>`, the BOS),
/// for both projector types; a marker count that is not the image count is refused.
#[test]
fn prompts_split_as_libmtmd_splits_them() {
    let opts = LoadOptions {
        n_threads: Some(1),
        ..Default::default()
    };
    for (file, projector) in [
        ("gemma3-F32", ProjectorType::Gemma3),
        ("mlp-F32", ProjectorType::Mlp),
    ] {
        let reference = json(vision_generate_reference().join(format!("{file}.json")));
        let text = ref_path(&format!(
            "tiny/{}",
            reference["text_model"].as_str().unwrap()
        ));
        let lm = LoadedModel::load(&text, &opts).unwrap();
        for case in reference["cases"].as_array().unwrap() {
            let prompt = case["prompt"].as_str().unwrap();
            let ours = split_media(&lm.tokenizer, prompt, projector, 1).unwrap();
            assert_eq!(ours, reference_chunks(case), "{file}: {prompt:?}");
        }
        let err = split_media(&lm.tokenizer, MEDIA_MARKER, projector, 2).unwrap_err();
        assert!(err.contains("1 image place"), "{err}");
    }
}
