//! How fast this machine streams memory into its cores: every thread reads its own
//! buffer from end to end, repeatedly, and the total is printed in GB/s. A decoding step
//! reads every weight once, so this is the roof of single-sequence decode (weights ÷
//! bandwidth), and it tells a batch's compute-bound steps from its bandwidth-bound ones.
//!
//! Buffers larger than the L3 measure DRAM; smaller ones, the caches. A weight file
//! shared by the threads is not modelled: each thread has its own buffer.
//!
//! `cargo run --release -p llamay-engine --example read_bandwidth [-- MB [THREADS [PASSES]]]`
//! (defaults: 97 MB, the size of SmolLM2's weights; 1 and 2 threads; 20 passes)

use std::time::Instant;

/// Sums every 8-byte word of `buf` (the sum keeps the reads from being optimised away;
/// eight running sums let the loop vectorise).
fn read_all(buf: &[u64]) -> u64 {
    let mut lanes = [0u64; 8];
    for chunk in buf.chunks_exact(8) {
        for (l, &v) in lanes.iter_mut().zip(chunk) {
            *l = l.wrapping_add(v);
        }
    }
    lanes.iter().fold(0, |a, &b| a.wrapping_add(b))
}

/// GB/s of `threads` threads each reading its own `mb`-MB buffer `passes` times.
fn bandwidth(mb: usize, threads: usize, passes: usize) -> f64 {
    let words = mb << 17;
    // Written once, so every page is backed before the clock starts.
    let buffers: Vec<Vec<u64>> = (0..threads)
        .map(|t| (0..words as u64).map(|i| i ^ t as u64).collect())
        .collect();
    let start = Instant::now();
    let sums: Vec<u64> = std::thread::scope(|s| {
        let handles: Vec<_> = buffers
            .iter()
            .map(|b| {
                // Hidden from the optimiser, so that every pass reads the buffer again.
                let pass = move |_| read_all(std::hint::black_box(b));
                s.spawn(move || (0..passes).map(pass).fold(0u64, u64::wrapping_add))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let secs = start.elapsed().as_secs_f64();
    std::hint::black_box(sums);
    (words * 8 * threads * passes) as f64 / secs / 1e9
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| {
            a.parse()
                .expect("arguments are whole numbers: MB THREADS PASSES")
        })
        .collect();
    let mb = args.first().copied().unwrap_or(97);
    let threads: Vec<usize> = match args.get(1) {
        Some(&t) => vec![t],
        None => vec![1, 2],
    };
    let passes = args.get(2).copied().unwrap_or(20);
    for t in threads {
        // The best of three: a shared machine only ever makes a run slower.
        let best = (0..3).map(|_| bandwidth(mb, t, passes)).fold(0.0, f64::max);
        println!("{mb} MB per thread, {t} thread(s): {best:.1} GB/s");
    }
}
