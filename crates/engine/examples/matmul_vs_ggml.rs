//! One matrix product timed the way `scripts/bench-matmul-vs-ggml` compares it with
//! ggml's `ggml_mul_mat`: GGUF-layout weights of one type and f32 activations read from
//! files, the activations quantized and the product computed by a pool of `THREADS`
//! threads, the weights interleaved first where the active kernels run them so (as
//! the model loader does). Prints the fastest call's wall time after a warm-up,
//! and writes the last product (token-major f32) to `OUT` for the script to compare.
//!
//! `matmul_vs_ggml TYPE_ID ROWS COLS TOKENS WEIGHTS X OUT CALLS THREADS`

use std::time::Instant;

use llamay_engine::internals::{
    interleave_rows, interleaved_row_bytes, OutView, QMatrix, QuantizedActs,
};
use llamay_engine::{Backend, GgmlType, ThreadPool};

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    assert_eq!(
        a.len(),
        9,
        "matmul_vs_ggml TYPE_ID ROWS COLS TOKENS WEIGHTS X OUT CALLS THREADS"
    );
    let n = |i: usize| a[i].parse::<usize>().expect("a number");
    let ty = GgmlType::from_id(n(0) as u32).expect("a ggml type id");
    let (rows, cols, tokens, calls, threads) = (n(1), n(2), n(3), n(7), n(8));
    let file = std::fs::read(&a[4]).expect("weights file");
    let x: Vec<f32> = std::fs::read(&a[5])
        .expect("activations file")
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(x.len(), tokens * cols);
    let backend = Backend::active();
    let packed;
    // `LLAMAY_INTERLEAVE=0` keeps the file's layout, as it does for the model loader.
    let interleave = std::env::var("LLAMAY_INTERLEAVE").map_or(true, |v| v != "0");
    let w = if interleave && backend.interleaves(ty) && rows % 8 == 0 {
        let mut p = vec![0u8; rows * interleaved_row_bytes(ty, cols).unwrap()];
        interleave_rows(ty, &file, cols, &mut p).unwrap();
        packed = p;
        QMatrix::new_interleaved(ty, &packed, rows, cols).unwrap()
    } else {
        QMatrix::new(ty, &file, rows, cols).unwrap()
    };
    let pool = ThreadPool::new(threads);
    let par = |n: usize, f: &(dyn Fn(usize) + Sync)| pool.run(n, f);
    let mut acts = QuantizedActs::new();
    let mut out = vec![0f32; tokens * rows];
    let align = if w.is_interleaved() { 8 } else { 1 };
    let mut times = Vec::with_capacity(calls);
    for _ in 0..calls + 1 {
        let t0 = Instant::now();
        backend
            .quantize_acts(ty, &x, tokens, cols, &mut acts, &par)
            .unwrap();
        let parts = OutView::new(&mut out, tokens, rows)
            .unwrap()
            .split_tapered(4 * threads, align);
        let parts: Vec<_> = parts.into_iter().map(std::sync::Mutex::new).collect();
        pool.run(parts.len(), &|i| {
            let mut v = parts[i].lock().unwrap();
            if !v.rows().is_empty() {
                backend.matmul_view(&w, &acts, &mut v).unwrap();
            }
        });
        times.push(t0.elapsed().as_secs_f64());
    }
    times.remove(0);
    times.sort_by(f64::total_cmp);
    // The fastest call: on a shared machine it is the least disturbed one.
    let bytes: Vec<u8> = out.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(&a[6], bytes).expect("output file");
    println!(
        "{ty} {rows}x{cols} {tokens} tok {:?} interleaved={}: {:.3} ms",
        backend.set(),
        w.is_interleaved(),
        times[0] * 1e3
    );
}
