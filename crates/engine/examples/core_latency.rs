//! Round trip of a cache line between two threads (which, spinning on a 2-core machine,
//! run on the two cores): the cost of every hand-over between the pool's threads. On the
//! project's VM it is bimodal, about 60 ns or about 340 ns, as the host places the two
//! vCPUs in one L3 domain or in two; batched decode is about 30% slower in the second
//! case, so benchmark scripts print it beside their figures.
//!
//! It also times the thread pool's own cost per job (`-- --pool`): a decode step is
//! hundreds of jobs, each paying a few of those hand-overs.
//!
//! `cargo run --release -p llamay-engine --example core_latency [-- --pool]`

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use llamay_engine::ThreadPool;

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

/// Nanoseconds per pool job of `tasks` tasks, each `spins` dependent multiply-adds.
fn pool_job_ns(pool: &ThreadPool, tasks: usize, spins: u64) -> f64 {
    const JOBS: u32 = 20_000;
    let t = Instant::now();
    for _ in 0..JOBS {
        pool.run(tasks, &|i| {
            let mut x = i as u64;
            for _ in 0..spins {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
            std::hint::black_box(x);
        });
    }
    t.elapsed().as_nanos() as f64 / JOBS as f64
}

fn median_of_5(f: impl Fn() -> f64) -> f64 {
    let mut runs: Vec<f64> = (0..5).map(|_| f()).collect();
    runs.sort_by(f64::total_cmp);
    runs[2]
}

fn main() {
    println!(
        "core-to-core round trip: {:.0} ns (median of 5)",
        median_of_5(round_trip_ns)
    );
    if std::env::args().any(|a| a == "--pool") {
        let pool = ThreadPool::new(2);
        for (tasks, spins) in [(2, 0), (16, 0), (16, 200)] {
            let ns = median_of_5(|| pool_job_ns(&pool, tasks, spins));
            println!("pool job of {tasks} tasks × {spins} multiply-adds: {ns:.0} ns");
        }
    }
}
