//! The encoders against llama.cpp (`scripts/embed-reference`): all-MiniLM-L6-v2 as
//! converted by `scripts/convert-bert-gguf`, the random-weight cross-encoder, and the
//! random-weight `nomic-bert` of `scripts/make-nomic-bert`.

use llamay_engine::{Encoder, LoadOptions, Model, Pooling, Tokenizer};
use llamay_testdata::{
    cosine, embed_model, embed_reference, f32s_from_base64, real_model, RealModel,
};
use serde_json::Value;

mod common;

fn reference(name: &str) -> Value {
    serde_json::from_slice(&std::fs::read(embed_reference(name)).expect("reference")).unwrap()
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

fn load(name: &str) -> (std::sync::Arc<Encoder>, Tokenizer) {
    let path = embed_model(name);
    let tok = common::tokenizer::load(&path);
    let opts = LoadOptions {
        n_threads: Some(2),
        ..Default::default()
    };
    (Encoder::load(&path, &opts).expect("encoder"), tok)
}

/// Every sentence: llama.cpp's token ids, and an embedding of cosine >= 0.9999 with
/// llama.cpp's. All sentences go through one `encode` call (packed passes).
#[test]
fn minilm_matches_llama_cpp() {
    let worst = embeddings_match("minilm", 384, 200);
    assert!(worst >= 0.9999, "worst cosine {worst}");
}

/// The same for `nomic-bert` (rotary positions, fused Q/K/V, SwiGLU).
#[test]
fn nomic_bert_matches_llama_cpp() {
    let worst = embeddings_match("nomic", 128, 200);
    assert!(worst >= 0.9999, "worst cosine {worst}");
}

/// The check can fail: mean pooling of a model blind to positions would not change
/// when two tokens trade places, so the rotary positions alone must move a short
/// text's vector below the cosine the reference test asks for (in a long text one swap
/// is lost in the mean).
#[test]
fn nomic_bert_reference_sees_token_order() {
    let r = reference("nomic");
    let (enc, _) = load("nomic");
    let mut checked = 0;
    for c in r["cases"].as_array().unwrap() {
        let mut ids = ids(&c["ids"]);
        if !(8..=40).contains(&ids.len()) || ids[1] == ids[2] {
            continue;
        }
        ids.swap(1, 2);
        let want = f32s_from_base64(c["embedding"].as_str().unwrap());
        let got = enc.encode(&[&ids], Pooling::Mean).unwrap();
        let cos = cosine(&got[0], &want);
        assert!(cos < 0.9995, "{:?}: {cos}", c["text"]);
        checked += 1;
    }
    assert!(checked >= 100, "{checked}");
}

/// Encodes every sentence of reference `name` and returns the worst cosine with
/// llama.cpp's embedding, having checked the token ids, the width and the sentences.
fn embeddings_match(name: &str, n_embd: usize, min_cases: usize) -> f64 {
    let r = reference(name);
    let (enc, tok) = load(name);
    assert_eq!(enc.pooling(), Pooling::Mean);
    assert_eq!(enc.n_embd(), n_embd);
    let cases = r["cases"].as_array().unwrap();
    assert!(cases.len() >= min_cases);
    let mut texts = Vec::new();
    for c in cases {
        let text = c["text"].as_str().unwrap();
        let got = tok.encode(text.as_bytes(), true, false);
        assert_eq!(got, ids(&c["ids"]), "token ids of {text:?}");
        texts.push(got);
    }
    assert!(
        texts.iter().any(|t| t.len() == enc.n_ctx()),
        "a text at the context limit"
    );
    assert!(
        texts.iter().any(|t| t.len() == 2),
        "a text empty after normalisation"
    );
    let refs: Vec<&[u32]> = texts.iter().map(Vec::as_slice).collect();
    let got = enc.encode(&refs, enc.pooling()).expect("encode");
    let mut worst = (1.0f64, "");
    for (c, v) in cases.iter().zip(&got) {
        let want = f32s_from_base64(c["embedding"].as_str().unwrap());
        let cos = cosine(v, &want);
        if cos < worst.0 {
            worst = (cos, c["text"].as_str().unwrap());
        }
    }
    let text: String = worst.1.chars().take(60).collect();
    eprintln!(
        "{name}: {} sentences, worst cosine {:.9} (1 - cos = {:.1e}, {text:?})",
        cases.len(),
        worst.0,
        1.0 - worst.0
    );
    worst.0
}

/// Each (query, document) pair, as llama.cpp's server builds it, scores within 1e-3
/// of llama.cpp's rank pooling.
#[test]
fn reranker_matches_llama_cpp() {
    let r = reference("reranker");
    let (enc, tok) = load("reranker");
    assert_eq!(enc.pooling(), Pooling::Rank);
    assert!(enc.can_rank());
    let sets = r["sets"].as_array().unwrap();
    assert!(sets.len() >= 50);
    let (cls, sep) = (tok.bos().unwrap(), tok.special_ids().sep.unwrap());
    let mut worst = 0f64;
    for s in sets {
        let q = tok.encode(s["query"].as_str().unwrap().as_bytes(), false, false);
        let mut pairs = Vec::new();
        for (d, want) in s["documents"]
            .as_array()
            .unwrap()
            .iter()
            .zip(s["results"].as_array().unwrap())
        {
            let dt = tok.encode(d.as_str().unwrap().as_bytes(), false, false);
            let pair: Vec<u32> = [cls]
                .into_iter()
                .chain(q.iter().copied())
                .chain([sep])
                .chain(dt)
                .collect();
            assert_eq!(pair, ids(&want["ids"]));
            pairs.push(pair);
        }
        let refs: Vec<&[u32]> = pairs.iter().map(Vec::as_slice).collect();
        let got = enc.encode(&refs, Pooling::Rank).expect("rank");
        for (g, want) in got.iter().zip(s["results"].as_array().unwrap()) {
            assert_eq!(g.len(), 1);
            worst = worst.max((g[0] as f64 - want["score"].as_f64().unwrap()).abs());
        }
    }
    eprintln!("worst score difference {worst:.2e}");
    assert!(worst <= 1e-3, "worst score difference {worst}");
}

/// Texts are refused, not run, when empty or longer than the context.
#[test]
fn bad_texts_are_refused() {
    let (enc, _) = load("reranker");
    assert!(enc.encode(&[&[]], Pooling::Cls).is_err());
    let long = vec![101u32; enc.n_ctx() + 1];
    assert!(enc.encode(&[&long], Pooling::Cls).is_err());
    assert!(enc.encode(&[&[u32::MAX]], Pooling::Cls).is_err());
}

/// A decoder's final normed hidden states, pooled by the last token and by the mean,
/// against llama.cpp's embeddings of SmolLM2 (Q4_1: cosine >= 0.999).
#[test]
fn smollm2_hidden_states_pool_like_llama_cpp() {
    let r = reference("smollm2");
    let path = real_model(RealModel::SmolLM2);
    let tok = common::tokenizer::load(&path);
    let opts = LoadOptions {
        n_threads: Some(2),
        n_ctx: Some(512),
        ..Default::default()
    };
    let m = Model::load(&path, &opts).unwrap();
    let e = m.facts().embedding_length.unwrap() as usize;
    let mut worst = 1f64;
    for (pooling, cases) in [("last", &r["last"]), ("mean", &r["mean"])] {
        for c in cases.as_array().unwrap() {
            let ids = tok.encode(c["text"].as_str().unwrap().as_bytes(), true, false);
            assert_eq!(ids, self::ids(&c["ids"]));
            let h = m.hidden_states(&ids).unwrap();
            assert_eq!(h.len(), ids.len() * e);
            let v: Vec<f32> = if pooling == "last" {
                h[h.len() - e..].to_vec()
            } else {
                (0..e)
                    .map(|j| h.chunks_exact(e).map(|r| r[j]).sum::<f32>() / ids.len() as f32)
                    .collect()
            };
            let cos = cosine(&v, &f32s_from_base64(c["embedding"].as_str().unwrap()));
            worst = worst.min(cos);
        }
    }
    eprintln!("worst cosine {worst:.6}");
    assert!(worst >= 0.999, "worst cosine {worst}");
}
