//! Prompt processing (512 tokens in one batch) and decode (128 single-token steps)
//! throughput of the real test models at 2 threads. Criterion reports elements/s,
//! i.e. tokens per second.
//!
//! `cargo bench -p llamay-engine --bench forward`

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use llamay_engine::{BatchItem, LoadOptions, LogitsWanted, Model};
use llamay_testdata::RealModel;

const PROMPT: usize = 512;
const DECODE: usize = 128;

/// Deterministic token ids spread over the vocabulary (the content does not matter
/// for speed; special ids are avoided by staying above 1000).
fn tokens(n: usize, n_vocab: usize) -> Vec<u32> {
    (0..n)
        .map(|i| (1000 + (i * 7919) % (n_vocab.min(30_000) - 1000)) as u32)
        .collect()
}

fn bench_model(c: &mut Criterion, which: RealModel) {
    let model = Model::load(
        llamay_testdata::real_model(which),
        &LoadOptions {
            n_threads: Some(2),
            n_ctx: Some(1024),
            ..Default::default()
        },
    )
    .expect("model loads");
    let prompt = tokens(PROMPT, model.n_vocab());
    let mut g = c.benchmark_group(which.stem());
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(5));

    g.throughput(Throughput::Elements(PROMPT as u64));
    g.bench_function("prompt_512", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let mut seq = model.new_sequence();
                let t = Instant::now();
                model
                    .forward(&mut [BatchItem {
                        seq: &mut seq,
                        tokens: &prompt,
                        want_logits: LogitsWanted::Last,
                    }])
                    .expect("forward");
                total += t.elapsed();
            }
            total
        })
    });

    g.throughput(Throughput::Elements(DECODE as u64));
    g.bench_function("decode_128", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let mut seq = model.new_sequence();
                model
                    .forward(&mut [BatchItem {
                        seq: &mut seq,
                        tokens: &prompt[..16],
                        want_logits: LogitsWanted::Last,
                    }])
                    .expect("forward");
                let t = Instant::now();
                for &tok in &prompt[16..16 + DECODE] {
                    model
                        .forward(&mut [BatchItem {
                            seq: &mut seq,
                            tokens: &[tok],
                            want_logits: LogitsWanted::Last,
                        }])
                        .expect("forward");
                }
                total += t.elapsed();
            }
            total
        })
    });
    g.finish();
}

fn forward(c: &mut Criterion) {
    bench_model(c, RealModel::SmolLM2);
    bench_model(c, RealModel::Gemma3);
}

criterion_group!(benches, forward);
criterion_main!(benches);
