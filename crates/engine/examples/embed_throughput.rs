//! Encoder throughput: tokenizes and embeds every line of a file in one `encode` call
//! and prints `{"sentences", "tokens", "seconds", "sentences_per_s"}` (tokenizing and
//! pooling included, loading not). Driven by `scripts/bench-embed` beside llama.cpp.
//!
//! Usage: embed_throughput MODEL.gguf SENTENCES.txt [THREADS]

use std::time::Instant;

use llamay_engine::{l2_normalize, Encoder, GgufFile, LoadOptions, Tokenizer};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (model, file) = (&args[1], &args[2]);
    let threads = args.get(3).map(|t| t.parse().expect("threads"));
    let opts = LoadOptions {
        n_threads: threads,
        ..Default::default()
    };
    let enc = Encoder::load(model, &opts).expect("load");
    let tok = Tokenizer::from_gguf(&GgufFile::open(model).expect("open")).expect("tokenizer");
    let text = std::fs::read_to_string(file).expect("sentences");
    let lines: Vec<&str> = text.lines().collect();
    let t0 = Instant::now();
    let ids: Vec<Vec<u32>> = lines
        .iter()
        .map(|l| tok.encode(l.as_bytes(), true, false))
        .collect();
    let refs: Vec<&[u32]> = ids.iter().map(Vec::as_slice).collect();
    let mut out = enc.encode(&refs, enc.pooling()).expect("encode");
    out.iter_mut().for_each(|v| l2_normalize(v));
    let s = t0.elapsed().as_secs_f64();
    let tokens: usize = ids.iter().map(Vec::len).sum();
    println!(
        "{{\"sentences\": {}, \"tokens\": {tokens}, \"seconds\": {s:.4}, \"sentences_per_s\": {:.2}}}",
        out.len(),
        out.len() as f64 / s
    );
}
