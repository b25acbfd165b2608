//! Mat-vec and 8-token matmul of a 576×1536 weight (SmolLM2's attention/FFN widths) in
//! Q4_1, Q4_K and Q8_0, for each backend this CPU runs, in the GGUF layout and, where
//! the backend has group kernels, interleaved. Includes activation quantization (also
//! timed alone). The weight fits in L2, so this measures the kernels' arithmetic, not
//! the memory a decode step streams.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use llamay_engine::internals::{
    interleave_rows, interleaved_row_bytes, quantize_acts, quantize_acts_as, QMatrix, QuantizedActs,
};
use llamay_engine::{Backend, GgmlType};

const ROWS: usize = 576;
const COLS: usize = 1536;

/// Deterministic pseudo-random weight bytes with small finite f16 scales.
fn weights(ty: GgmlType) -> Vec<u8> {
    let len = ty.bytes_for((ROWS * COLS) as u64).unwrap() as usize;
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut data: Vec<u8> = (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    let scale = half::f16::from_f32(0.01).to_bits().to_le_bytes();
    let min = half::f16::from_f32(-0.05).to_bits().to_le_bytes();
    for b in data.chunks_exact_mut(ty.block_bytes() as usize) {
        b[0..2].copy_from_slice(&scale);
        // Q8_0 has no minimum: its quants start at byte 2.
        if ty != GgmlType::Q8_0 {
            b[2..4].copy_from_slice(&min);
        }
    }
    data
}

fn bench(c: &mut Criterion) {
    for ty in [GgmlType::Q4_1, GgmlType::Q4_K, GgmlType::Q8_0] {
        let data = weights(ty);
        let w = QMatrix::new(ty, &data, ROWS, COLS).unwrap();
        let packed = interleaved_row_bytes(ty, COLS).map(|row| {
            let mut p = vec![0u8; row * ROWS];
            interleave_rows(ty, &data, COLS, &mut p).unwrap();
            p
        });
        let interleaved = match &packed {
            Some(p) => QMatrix::new_interleaved(ty, p, ROWS, COLS).unwrap(),
            None => w,
        };
        let mut group = c.benchmark_group(format!("{ty} {ROWS}x{COLS}"));
        for n_tokens in [1usize, 8] {
            let x: Vec<f32> = (0..n_tokens * COLS)
                .map(|i| ((i % 97) as f32 - 48.0) / 50.0)
                .collect();
            let mut acts = QuantizedActs::new();
            let mut out = vec![0f32; n_tokens * ROWS];
            group.throughput(Throughput::Elements((n_tokens * ROWS * COLS) as u64));
            group.bench_function(
                BenchmarkId::new("quantize_acts only", format!("{n_tokens} tok")),
                |b| b.iter(|| quantize_acts(ty, black_box(&x), n_tokens, COLS, &mut acts).unwrap()),
            );
            for backend in Backend::available() {
                let id =
                    BenchmarkId::new(format!("{:?}", backend.set()), format!("{n_tokens} tok"));
                group.bench_function(id, |b| {
                    b.iter(|| {
                        quantize_acts(ty, black_box(&x), n_tokens, COLS, &mut acts).unwrap();
                        backend.matmul_rows(&w, &acts, &mut out, 0..ROWS).unwrap();
                        black_box(&out);
                    })
                });
                if !backend.interleaves(ty) {
                    continue;
                }
                let wi = &interleaved;
                let id = BenchmarkId::new(
                    format!("{:?} interleaved", backend.set()),
                    format!("{n_tokens} tok"),
                );
                group.bench_function(id, |b| {
                    b.iter(|| {
                        quantize_acts_as(
                            wi.act_format().unwrap(),
                            black_box(&x),
                            n_tokens,
                            COLS,
                            &mut acts,
                        )
                        .unwrap();
                        backend.matmul_rows(wi, &acts, &mut out, 0..ROWS).unwrap();
                        black_box(&out);
                    })
                });
            }
        }
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
