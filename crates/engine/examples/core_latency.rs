//! Round trip of a cache line between two threads (which, spinning on a 2-core machine,
//! run on the two cores): the cost of every hand-over between the pool's threads. On the
//! project's VM it is bimodal, about 60 ns or about 340 ns, as the host places the two
//! vCPUs in one L3 domain or in two; batched decode is about 30% slower in the second
//! case, so benchmark scripts print it beside their figures.
//!
//! `cargo run --release -p llamay-engine --example core_latency`

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

const TRIPS: u64 = 100_000;

/// Nanoseconds per round trip: this thread writes an odd value, the other answers with
/// the next even one.
fn round_trip_ns() -> f64 {
    let flag = AtomicU64::new(0);
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..TRIPS {
                while flag.load(Ordering::Acquire) != 2 * i + 1 {
                    std::hint::spin_loop();
                }
                flag.store(2 * i + 2, Ordering::Release);
            }
        });
        let t = Instant::now();
        for i in 0..TRIPS {
            flag.store(2 * i + 1, Ordering::Release);
            while flag.load(Ordering::Acquire) != 2 * i + 2 {
                std::hint::spin_loop();
            }
        }
        t.elapsed().as_nanos() as f64 / TRIPS as f64
    })
}

fn main() {
    let mut runs: Vec<f64> = (0..5).map(|_| round_trip_ns()).collect();
    runs.sort_by(f64::total_cmp);
    println!("core-to-core round trip: {:.0} ns (median of 5)", runs[2]);
}
