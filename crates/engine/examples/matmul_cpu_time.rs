//! On-CPU time per matmul, for every kernel set this CPU runs, at 1 and 8 tokens.
//! Measures this thread's own run time from /proc/thread-self/schedstat, so the figures
//! hold on a machine shared with other jobs, where criterion's wall-clock times do not.
//!
//! `cargo run --release -p llamay-engine --example matmul_cpu_time`

use llamay_engine::internals::{quantize_acts, QMatrix, QuantizedActs};
use llamay_engine::{Backend, GgmlType};

fn cpu_ns() -> u64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").expect("Linux schedstat");
    s.split_whitespace().next().unwrap().parse().unwrap()
}

fn main() {
    let (rows, cols) = (576usize, 1536usize);
    for ty in [
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q8_0,
        GgmlType::Q4_K,
        GgmlType::Q6_K,
        GgmlType::F32,
    ] {
        let len = ty.bytes_for((rows * cols) as u64).unwrap() as usize;
        let mut data: Vec<u8> = (0..len)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        let f16_at = if ty == GgmlType::Q6_K { 208 } else { 0 };
        if ty != GgmlType::F32 {
            for b in data.chunks_exact_mut(ty.block_bytes() as usize) {
                let scale = half::f16::from_f32(0.01).to_bits().to_le_bytes();
                b[f16_at..f16_at + 2].copy_from_slice(&scale);
                if matches!(ty, GgmlType::Q4_1 | GgmlType::Q4_K) {
                    b[2..4].copy_from_slice(&scale); // the min / dmin
                }
            }
        } else {
            data.chunks_exact_mut(4)
                .for_each(|b| b.copy_from_slice(&0.01f32.to_le_bytes()));
        }
        let w = QMatrix::new(ty, &data, rows, cols).unwrap();
        for n_tokens in [1usize, 8] {
            let x: Vec<f32> = (0..n_tokens * cols)
                .map(|i| ((i % 97) as f32 - 48.0) / 50.0)
                .collect();
            let mut acts = QuantizedActs::new();
            let mut out = vec![0f32; n_tokens * rows];
            for backend in Backend::available() {
                let iters = 200;
                let t0 = cpu_ns();
                for _ in 0..iters {
                    quantize_acts(ty, &x, n_tokens, cols, &mut acts).unwrap();
                    backend.matmul_rows(&w, &acts, &mut out, 0..rows).unwrap();
                }
                let per = (cpu_ns() - t0) as f64 / iters as f64 / 1000.0;
                println!(
                    "{ty} {rows}x{cols} {n_tokens} tok {:?}: {per:.1} us",
                    backend.set()
                );
                assert!(out.iter().all(|v| v.is_finite()));
            }
        }
    }
}
