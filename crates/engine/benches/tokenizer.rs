//! Tokenizer speed: loading the 262,144-token Gemma 3 vocabulary, and encoding about
//! 1 MB of English with both real tokenizers.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use llamay_engine::{GgufFile, Tokenizer};
use llamay_testdata::{real_model, ref_path, RealModel};

/// About 1 MB of English: the reference corpus's prose and long documents, repeated
/// in a shifting order so that consecutive copies do not line up.
fn english_megabyte() -> Vec<u8> {
    let p = ref_path("tokenize/SmolLM2-135M-Instruct.Q4_1.json");
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
    let docs: Vec<&str> = r["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| matches!(c["category"].as_str(), Some("prose" | "long")))
        .filter_map(|c| c["text"].as_str())
        .collect();
    let mut out = Vec::with_capacity(1 << 20);
    let mut round = 0;
    while out.len() < 1 << 20 {
        for i in 0..docs.len() {
            out.extend_from_slice(docs[(i * 7 + round) % docs.len()].as_bytes());
            out.extend_from_slice(if i % 5 == 4 { b"\n\n" } else { b" " });
        }
        round += 1;
    }
    out
}

fn load(c: &mut Criterion) {
    let gemma = real_model(RealModel::Gemma3);
    let mut g = c.benchmark_group("load");
    g.sample_size(10).measurement_time(Duration::from_secs(8));
    g.bench_function("gemma3_262k_open_and_build", |b| {
        b.iter(|| {
            let f = GgufFile::open(&gemma).unwrap();
            Tokenizer::from_gguf(&f).unwrap()
        })
    });
    g.finish();
}

fn encode(c: &mut Criterion) {
    let text = english_megabyte();
    let mut g = c.benchmark_group("encode_english_1MB");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    g.throughput(Throughput::Bytes(text.len() as u64));
    for m in RealModel::ALL {
        let f = GgufFile::open(real_model(m)).unwrap();
        let tok = Tokenizer::from_gguf(&f).unwrap();
        g.bench_function(m.stem(), |b| {
            b.iter_batched(
                || (),
                |_| tok.encode(&text, false, false),
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, load, encode);
criterion_main!(benches);
