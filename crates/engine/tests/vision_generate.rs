//! Generation from a prompt holding a picture against llama.cpp's libmtmd
//! (`scripts/vision-generate-reference`): per projector file (f32 and f16), 12 (picture, prompt) pairs
//! whose text chunks are fed as token ids and whose picture as our encoder's rows
//! (`Model::forward_image`, at the positions libmtmd gave them; non-causal for
//! Gemma 3 as there; Idefics3's tiles and overview each its own run), then
//! llama.cpp's greedy ids.
//!
//! shared/ref/README.md's table A: every logit of the first step within the file
//! type's atol, and at each teacher-forced step llama.cpp's top 10; the argmax equal
//! wherever llama.cpp's margin is ≥ 2·atol (≤ 0.15, under the 0.75); our own
//! free-running greedy ids equal to llama.cpp's up to the first step below that.

use llamay_engine::{
    BatchItem, DecodedImage, ImageEmbeddings, ItemLogits, LoadOptions, LogitsWanted, Model,
    ProjectorType, SeqState, VisionEncoder,
};
use llamay_testdata::{
    bytes_from_base64, f32s_from_base64, idefics3_model, ref_path, vision_generate_reference,
    vision_model, vision_reference, vision_text_model,
};
use serde_json::Value;

fn threads() -> LoadOptions {
    LoadOptions {
        n_threads: Some(2),
        ..Default::default()
    }
}

fn json(path: std::path::PathBuf) -> Value {
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

fn argmax(v: &[f32]) -> u32 {
    (0..v.len()).fold(0, |b, i| if v[i] > v[b] { i } else { b }) as u32
}

/// Feeds one case's prompt (text ids and the picture's rows) into a fresh sequence:
/// the sequence and the last position's logits.
fn prefill(
    model: &Model,
    case: &Value,
    image: &ImageEmbeddings,
    projector: ProjectorType,
) -> (SeqState, Vec<f32>) {
    let mut seq = model.new_sequence();
    let parts = case["parts"].as_array().unwrap();
    let mut last: Option<ItemLogits> = None;
    // The picture's rows, a run per image chunk (one, or each tile and the overview).
    let mut rows = 0;
    for (i, part) in parts.iter().enumerate() {
        let want = match i + 1 == parts.len() {
            true => LogitsWanted::Last,
            false => LogitsWanted::None,
        };
        last = Some(if let Some(ids) = part.get("text") {
            let ids: Vec<u32> = serde_json::from_value(ids.clone()).unwrap();
            let mut batch = [BatchItem {
                seq: &mut seq,
                tokens: &ids,
                want_logits: want,
            }];
            model.forward(&mut batch).unwrap().remove(0)
        } else {
            let n = part["image"].as_u64().unwrap() as usize;
            let e = image.n_embd;
            let run = ImageEmbeddings {
                n_tokens: n,
                n_embd: e,
                values: image.values[rows * e..(rows + n) * e].to_vec(),
            };
            rows += n;
            model
                .forward_image(&mut seq, &run, projector, want)
                .unwrap()
        });
    }
    assert_eq!(rows, image.n_tokens, "image rows");
    (seq, last.unwrap().last().unwrap().to_vec())
}

fn step(model: &Model, seq: &mut SeqState, id: u32) -> Vec<f32> {
    let mut batch = [BatchItem {
        seq,
        tokens: &[id],
        want_logits: LogitsWanted::Last,
    }];
    model.forward(&mut batch).unwrap().remove(0).data
}

/// Per case: the worst first-step and top-10 logit gaps, and the steps compared.
fn check(projector: &str, kind: ProjectorType, atol: f32) -> Vec<(String, f32, usize)> {
    let reference = json(vision_generate_reference().join(format!("{projector}.json")));
    let pixels = json(vision_reference().join(format!("{projector}.json")));
    let model = Model::load(
        vision_text_model(reference["text_model"].as_str().unwrap()),
        &threads(),
    )
    .unwrap();
    let file = match kind {
        ProjectorType::Idefics3 => idefics3_model(projector),
        _ => vision_model(projector),
    };
    let enc = VisionEncoder::load(file, &threads()).unwrap();
    assert_eq!(enc.projector(), kind);
    let cases = reference["cases"].as_array().unwrap();
    assert!(cases.len() >= 10, "{} cases", cases.len());
    let mut out = Vec::new();
    for case in cases {
        let name = case["image"].as_str().unwrap();
        let im = pixels["images"]
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
        let rows = enc.encode(&image).unwrap();
        let steps = case["steps"].as_array().unwrap();
        let ids: Vec<u32> = steps
            .iter()
            .map(|s| s["id"].as_u64().unwrap() as u32)
            .collect();
        let margin = |s: usize| steps[s]["margin"].as_f64().unwrap() as f32;
        // Teacher-forced on llama.cpp's ids.
        let (mut seq, mut logits) = prefill(&model, case, &rows, kind);
        let theirs = f32s_from_base64(case["first_logits"].as_str().unwrap());
        let mut worst = (logits.iter().zip(&theirs)).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        for (s, st) in steps.iter().enumerate() {
            for t in st["top"].as_array().unwrap() {
                let (id, l) = (
                    t[0].as_u64().unwrap() as usize,
                    t[1].as_f64().unwrap() as f32,
                );
                worst = worst.max((logits[id] - l).abs());
            }
            if margin(s) >= 2.0 * atol {
                assert_eq!(argmax(&logits), ids[s], "{projector} {name}: step {s}");
            }
            logits = step(&model, &mut seq, ids[s]);
        }
        assert!(worst <= atol, "{projector} {name}: a logit {worst} off");
        // Free-running: our own greedy ids.
        let (mut seq, mut logits) = prefill(&model, case, &rows, kind);
        let sure = (0..ids.len())
            .take_while(|&s| margin(s) >= 2.0 * atol)
            .count();
        for (s, &id) in ids.iter().enumerate().take(sure) {
            let ours = argmax(&logits);
            assert_eq!(ours, id, "{projector} {name}: greedy step {s}");
            logits = step(&model, &mut seq, ours);
        }
        out.push((name.to_string(), worst, sure));
    }
    eprintln!("{projector}: (picture, worst |Δlogit|, greedy steps compared) {out:?}");
    out
}

#[test]
fn mlp_generation_matches_llamacpp() {
    // tiny-llama is F32: atol 2e-3. The f16 projector file's rows differ a little
    // from the f32 one's, in both engines alike.
    for file in ["mlp-F32", "mlp-F16"] {
        check(file, ProjectorType::Mlp, 2e-3);
    }
}

#[test]
fn gemma3_generation_matches_llamacpp() {
    // llama.cpp's `mtmd_decode_use_non_causal`: Gemma 3's images only.
    assert!(ProjectorType::Gemma3.non_causal() && !ProjectorType::Mlp.non_causal());
    // tiny-gemma3 is Q6_K: atol 7.5e-2.
    for file in ["gemma3-F32", "gemma3-F16"] {
        let cases = check(file, ProjectorType::Gemma3, 7.5e-2);
        // Some free-running steps are compared at all.
        assert!(cases.iter().any(|c| c.2 > 0), "{file}: no step sure enough");
    }
}

#[test]
fn idefics3_generation_matches_llamacpp() {
    // Its text model is F32: atol 2e-3.
    for file in ["idefics3-F32", "idefics3-F16"] {
        let cases = check(file, ProjectorType::Idefics3, 2e-3);
        assert!(cases.iter().any(|c| c.2 > 0), "{file}: no step sure enough");
    }
}

/// Rows of the wrong width, rows seeing each other past one step, and a full
/// context are errors that leave the sequence as it was.
#[test]
fn bad_embedding_input_is_refused() {
    let model = Model::load(ref_path("tiny/tiny-llama-F32.gguf"), &threads()).unwrap();
    let e = model.n_embd();
    let mut seq = model.new_sequence_with(llamay_engine::KvType::F32, 4);
    let err = model
        .forward_embeddings(&mut seq, &vec![0.0; e + 1], false, LogitsWanted::Last)
        .unwrap_err();
    assert!(err.to_string().contains("whole rows"), "{err}");
    let err = model
        .forward_embeddings(&mut seq, &vec![0.0; 5 * e], false, LogitsWanted::Last)
        .unwrap_err();
    assert!(err.to_string().contains("context"), "{err}");
    let big = vec![0.0; (llamay_engine::MAX_STEP_TOKENS + 1) * e];
    let err = model
        .forward_embeddings(&mut seq, &big, true, LogitsWanted::Last)
        .unwrap_err();
    assert!(err.to_string().contains("one step"), "{err}");
    let wide = ImageEmbeddings {
        n_tokens: 1,
        n_embd: 2 * e,
        values: vec![0.0; 2 * e],
    };
    let err = model
        .forward_image(&mut seq, &wide, ProjectorType::Mlp, LogitsWanted::Last)
        .unwrap_err();
    assert!(err.to_string().contains("wide"), "{err}");
    assert_eq!(seq.len(), 0);
    let out = model
        .forward_embeddings(&mut seq, &vec![0.1; 4 * e], false, LogitsWanted::All)
        .unwrap();
    assert_eq!((out.n_rows(), seq.len()), (4, 4));
}

/// Rows fed non-causally see the later rows of their step: the first row's logits
/// change with the second row, which causal rows' do not.
#[test]
fn non_causal_rows_see_later_rows() {
    let model = Model::load(ref_path("tiny/tiny-gemma3-Q6_K.gguf"), &threads()).unwrap();
    let e = model.n_embd();
    let rows = |second: f32| -> Vec<f32> {
        (0..2 * e)
            .map(|i| {
                if i < e {
                    (i as f32 * 0.37).sin()
                } else {
                    second * (i as f32 * 0.11).cos()
                }
            })
            .collect()
    };
    let first_row = |second: f32, non_causal: bool| -> Vec<f32> {
        let mut seq = model.new_sequence();
        let out = model
            .forward_embeddings(&mut seq, &rows(second), non_causal, LogitsWanted::All)
            .unwrap();
        out.row(0).to_vec()
    };
    assert_eq!(first_row(1.0, false), first_row(-2.0, false));
    let (a, b) = (first_row(1.0, true), first_row(-2.0, true));
    let gap = a
        .iter()
        .zip(&b)
        .fold(0f32, |m, (x, y)| m.max((x - y).abs()));
    assert!(gap > 1e-3, "the first row did not see the second ({gap})");
    // One row alone is the same either way.
    let alone = |non_causal: bool| {
        let mut seq = model.new_sequence();
        model
            .forward_embeddings(&mut seq, &rows(1.0)[..e], non_causal, LogitsWanted::Last)
            .unwrap()
            .data
    };
    assert_eq!(alone(false), alone(true));
}

/// Causal rows past one step are split into steps: the same logits as feeding the
/// steps one call each, and `Last` asks for the last row only.
#[test]
fn causal_rows_past_one_step_are_split() {
    let model = Model::load(ref_path("tiny/tiny-llama-F32.gguf"), &threads()).unwrap();
    let (e, max) = (model.n_embd(), llamay_engine::MAX_STEP_TOKENS);
    let rows: Vec<f32> = (0..(max + 5) * e)
        .map(|i| (i as f32 * 0.013).sin())
        .collect();
    let fresh = || model.new_sequence_with(llamay_engine::KvType::F32, max + 5);
    let mut whole = fresh();
    let all = model
        .forward_embeddings(&mut whole, &rows, false, LogitsWanted::All)
        .unwrap();
    let mut split = fresh();
    let mut parts = model
        .forward_embeddings(&mut split, &rows[..max * e], false, LogitsWanted::All)
        .unwrap()
        .data;
    parts.extend(
        model
            .forward_embeddings(&mut split, &rows[max * e..], false, LogitsWanted::All)
            .unwrap()
            .data,
    );
    assert_eq!((all.n_rows(), whole.len()), (max + 5, max + 5));
    assert!(all.data == parts, "one call and two calls differ");
    let mut last = fresh();
    let out = model
        .forward_embeddings(&mut last, &rows, false, LogitsWanted::Last)
        .unwrap();
    // Within rounding: `All` runs attention a token per tile (`AttnArgs::token_tiles`).
    assert_eq!(out.n_rows(), 1);
    let gap = (out.data.iter().zip(all.row(max + 4))).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
    assert!(gap < 1e-4, "the last row {gap} off");
}
