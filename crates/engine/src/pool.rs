//! A persistent thread pool for the forward pass.
//!
//! Workers are started once and live as long as the pool. Each job is a borrowed
//! closure called with task indices `0..n_tasks`; the caller runs tasks too and returns
//! only when every task has finished, so the closure may borrow the caller's stack.
//! Between jobs, workers spin for a short while (decode steps follow each other within
//! microseconds) and then park on a condition variable so an idle model costs no CPU.
//!
//! A decode step is hundreds of short jobs, so what a job costs besides its tasks is
//! mostly cache lines moving between cores (60 ns a round trip when two cores share an
//! L3, over 300 ns when they do not). Each thread therefore claims tasks from a counter
//! of its own, on its own line: task `i` belongs to thread `i mod n_threads`, and a
//! thread steals from the others only once its own are gone. Fields written by
//! different threads sit on different lines.
//!
//! Built with `--cfg loom`, the pool synchronises through the loom model checker's
//! types instead (see `sync`), and `tests/pool_loom.rs` checks it under the
//! interleavings loom explores (`scripts/test-loom`).
// Under loom the poll limits are 0 (see `SPIN_POLLS`).
#![cfg_attr(loom, allow(clippy::absurd_extreme_comparisons))]

use std::cell::Cell;

use sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use sync::thread::{self, JoinHandle};
use sync::{hint, Arc, Condvar, Mutex};

/// What the pool synchronises with: the standard library's types, or under `cfg(loom)`
/// loom's models of them, which it can pause, interleave and check. Re-exports only, so
/// the normal build is the same code.
mod sync {
    #[cfg(not(loom))]
    pub(super) use std::{
        hint,
        sync::{atomic, Arc, Condvar, Mutex},
        thread,
    };

    #[cfg(loom)]
    pub(super) use loom::{
        hint,
        sync::{atomic, Arc, Condvar, Mutex},
        thread,
    };
}

/// Polls an idle worker (or the waiting caller) spins before it starts yielding its
/// time slice: a few microseconds, the gap between two matmuls of one step.
#[cfg(not(loom))]
const SPIN_POLLS: u32 = 2_000;
/// Yields an idle worker makes before it parks. Yielding, not spinning, keeps a busy
/// machine (more runnable threads than cores) from starving the thread doing the work.
#[cfg(not(loom))]
const YIELD_POLLS: u32 = 2_000;
/// Under loom an idle worker parks at once. Loom takes a poll for a yield to its
/// scheduler, after which the worker's loads must see another thread's progress: with
/// polls, a worker in a loom model only parks once everything it could miss has happened,
/// and lost wake-ups (a shutdown stored outside the lock, say) go unseen. The caller's
/// wait for the workers still yields: it must, for loom to run them.
#[cfg(loom)]
const SPIN_POLLS: u32 = 0;
#[cfg(loom)]
const YIELD_POLLS: u32 = 0;

/// Keeps a value on cache lines of its own (128 bytes: adjacent-line prefetchers pull
/// lines in pairs).
#[repr(align(128))]
struct Padded<T>(T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// The job being run, on the caller's stack for the length of [`ThreadPool::run`].
struct JobRef {
    /// The caller's closure, its lifetime erased (see `ThreadPool::run`).
    func: *const (dyn Fn(usize) + Sync),
    n_tasks: usize,
}

/// `Shared::state` bit set while a job accepts workers; the other bits count the
/// workers inside the job.
const OPEN: usize = 1 << (usize::BITS - 1);

/// What the caller publishes for each job; workers only read it.
struct Announce {
    /// Incremented for every job: the signal idle workers watch.
    generation: AtomicUsize,
    /// The open job (valid for a worker that has joined it).
    job: AtomicPtr<JobRef>,
}

struct Shared {
    announce: Padded<Announce>,
    /// `OPEN` | workers inside the current job.
    state: Padded<AtomicUsize>,
    /// Per thread (0 = the caller): how many of its own tasks have been claimed.
    claimed: Box<[Padded<AtomicUsize>]>,
    /// A task panicked; `run` re-raises it on the caller's thread.
    panicked: Padded<AtomicBool>,
    /// Workers parked on `wake`, and the lock they park under.
    sleepers: AtomicUsize,
    park: Mutex<()>,
    wake: Condvar,
    shutdown: AtomicBool,
}

/// A fixed set of worker threads that split loops of independent tasks.
pub struct ThreadPool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    /// Serialises jobs: one `run` at a time (several sequences' forward steps may share
    /// one model from different threads).
    run_lock: Mutex<()>,
}

impl std::fmt::Debug for ThreadPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadPool")
            .field("threads", &self.n_threads())
            .finish()
    }
}

impl ThreadPool {
    /// Runs `f(row, values)` on each `width`-wide row of `x`, `per_task` rows a task:
    /// the row-wise steps (norms, rotations, activations) of the encoders.
    pub(crate) fn run_rows(
        &self,
        x: &mut [f32],
        width: usize,
        per_task: usize,
        f: &(dyn Fn(usize, &mut [f32]) + Sync),
    ) {
        let n_rows = x.len() / width;
        let ptr = SyncPtr::new(x);
        self.run(n_rows.div_ceil(per_task), &|task| {
            let r0 = task * per_task;
            for r in r0..(r0 + per_task).min(n_rows) {
                // SAFETY: each row belongs to exactly one task.
                f(r, unsafe { ptr.slice(r * width, width) });
            }
        });
    }

    /// A pool of `n_threads` threads in all, counting the caller (so `n_threads - 1`
    /// workers are spawned; 0 is treated as 1).
    pub fn new(n_threads: usize) -> ThreadPool {
        let n_threads = n_threads.max(1);
        let shared = Arc::new(Shared {
            announce: Padded(Announce {
                generation: AtomicUsize::new(0),
                job: AtomicPtr::new(std::ptr::null_mut()),
            }),
            state: Padded(AtomicUsize::new(0)),
            claimed: (0..n_threads)
                .map(|_| Padded(AtomicUsize::new(0)))
                .collect(),
            panicked: Padded(AtomicBool::new(false)),
            sleepers: AtomicUsize::new(0),
            park: Mutex::new(()),
            wake: Condvar::new(),
            shutdown: AtomicBool::new(false),
        });
        let workers = (1..n_threads)
            .map(|i| {
                let shared = Arc::clone(&shared);
                thread::Builder::new()
                    .name(format!("llamay-worker-{i}"))
                    .spawn(move || worker_loop(&shared, i))
                    .expect("spawning a worker thread")
            })
            .collect();
        ThreadPool {
            shared,
            workers,
            run_lock: Mutex::new(()),
        }
    }

    /// Threads that run tasks, the caller included.
    pub fn n_threads(&self) -> usize {
        self.workers.len() + 1
    }

    /// Calls `f(i)` for every `i` in `0..n_tasks`, spread over the pool, and returns
    /// when all calls have returned. A panic in a task is re-raised here.
    ///
    /// The caller works through the tasks itself; workers join if they wake in time.
    /// It never waits for a worker that has not started, so a descheduled worker on a
    /// busy machine costs nothing but its share of the work.
    ///
    /// Called from inside a task (of any pool), it runs every task on the calling
    /// thread: the work was already split at a higher level (one forward step per
    /// thread, say).
    pub fn run(&self, n_tasks: usize, f: &(dyn Fn(usize) + Sync)) {
        if n_tasks == 0 {
            return;
        }
        if self.workers.is_empty() || n_tasks == 1 || IN_TASK.with(Cell::get) {
            (0..n_tasks).for_each(f);
            return;
        }
        let _serial = self.run_lock.lock().unwrap_or_else(|e| e.into_inner());
        let s = &*self.shared;
        // SAFETY: erasing the lifetime is sound because this function does not return
        // before the job is closed and every worker that joined it has left.
        let func: *const (dyn Fn(usize) + Sync) = unsafe { std::mem::transmute(f) };
        let job = JobRef { func, n_tasks };
        s.announce
            .job
            .store(&job as *const JobRef as *mut JobRef, Ordering::Relaxed);
        s.claimed.iter().for_each(|c| c.store(0, Ordering::Relaxed));
        s.panicked.store(false, Ordering::Relaxed);
        // Publishes the stores above to every worker that joins.
        s.state.store(OPEN, Ordering::SeqCst);
        s.announce.generation.fetch_add(1, Ordering::SeqCst);
        if s.sleepers.load(Ordering::SeqCst) > 0 {
            let _guard = s.park.lock().unwrap_or_else(|e| e.into_inner());
            s.wake.notify_all();
        }
        let caller_ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            take_tasks(s, f, n_tasks, 0)
        }))
        .is_ok();
        // Close the job, then wait for the workers inside to finish their tasks.
        s.state.fetch_and(!OPEN, Ordering::SeqCst);
        let mut polls = 0u32;
        while s.state.load(Ordering::SeqCst) != 0 {
            if polls < SPIN_POLLS {
                polls += 1;
                hint::spin_loop();
            } else {
                thread::yield_now();
            }
        }
        s.announce
            .job
            .store(std::ptr::null_mut(), Ordering::Relaxed);
        if !caller_ok || s.panicked.load(Ordering::SeqCst) {
            panic!("a forward-pass task panicked");
        }
    }
}

/// Runs tasks until none is left unclaimed: thread `me`'s own first (`me`,
/// `me + n_threads`, ...; tasks come largest first, so each thread starts with a large
/// one), then the others'.
fn take_tasks(s: &Shared, f: &(dyn Fn(usize) + Sync), n_tasks: usize, me: usize) {
    // Restores the flag even when a task panics (the pool survives panics).
    struct InTask;
    impl Drop for InTask {
        fn drop(&mut self) {
            IN_TASK.with(|t| t.set(false));
        }
    }
    IN_TASK.with(|t| t.set(true));
    let _in_task = InTask;
    let n_threads = s.claimed.len();
    for k in 0..n_threads {
        let slot = (me + k) % n_threads;
        let claimed = &s.claimed[slot];
        // A read first: a finished victim's line is shared, not pulled away from it.
        if k > 0 && slot + n_threads * claimed.load(Ordering::Relaxed) >= n_tasks {
            continue;
        }
        loop {
            let i = slot + n_threads * claimed.fetch_add(1, Ordering::Relaxed);
            if i >= n_tasks {
                break;
            }
            f(i);
        }
    }
}

#[cfg(not(loom))]
std::thread_local! {
    /// This thread is running a pool task.
    static IN_TASK: Cell<bool> = const { Cell::new(false) };
}
// A loom model's threads are its own: each has its own copy (and loom's macro takes no
// `const` block).
#[cfg(loom)]
loom::thread_local! {
    static IN_TASK: Cell<bool> = Cell::new(false);
}

/// Enters the open job, if there is one.
fn try_join(s: &Shared) -> bool {
    let mut cur = s.state.load(Ordering::SeqCst);
    loop {
        if cur & OPEN == 0 {
            return false;
        }
        match s
            .state
            .compare_exchange_weak(cur, cur + 1, Ordering::SeqCst, Ordering::SeqCst)
        {
            Ok(_) => return true,
            Err(now) => cur = now,
        }
    }
}

fn worker_loop(s: &Shared, me: usize) {
    let mut seen = 0usize;
    let generation = &s.announce.generation;
    loop {
        // Wait for a new generation: spin, then yield, then park.
        let mut polls = 0u32;
        while generation.load(Ordering::SeqCst) == seen && !s.shutdown.load(Ordering::SeqCst) {
            if polls < SPIN_POLLS {
                polls += 1;
                hint::spin_loop();
            } else if polls < SPIN_POLLS + YIELD_POLLS {
                polls += 1;
                thread::yield_now();
            } else {
                let guard = s.park.lock().unwrap_or_else(|e| e.into_inner());
                s.sleepers.fetch_add(1, Ordering::SeqCst);
                if generation.load(Ordering::SeqCst) == seen && !s.shutdown.load(Ordering::SeqCst) {
                    drop(s.wake.wait(guard).unwrap_or_else(|e| e.into_inner()));
                } else {
                    drop(guard);
                }
                s.sleepers.fetch_sub(1, Ordering::SeqCst);
            }
        }
        if s.shutdown.load(Ordering::SeqCst) {
            return;
        }
        seen = generation.load(Ordering::SeqCst);
        if !try_join(s) {
            continue;
        }
        // Joined: the job cannot end (nor its closure or `JobRef` die) until this
        // worker leaves, and the pointer read is the joined job's (it was stored before
        // the job opened, and the next job cannot open while this worker is inside).
        let job = s.announce.job.load(Ordering::Relaxed);
        // SAFETY: see above.
        if let Some(job) = unsafe { job.as_ref() } {
            // SAFETY: `run` keeps the closure alive while a joined worker is inside.
            let f = unsafe { &*job.func };
            let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                take_tasks(s, f, job.n_tasks, me)
            }))
            .is_ok();
            if !ok {
                s.panicked.store(true, Ordering::SeqCst);
            }
        }
        s.state.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        {
            let _guard = self.shared.park.lock().unwrap_or_else(|e| e.into_inner());
            self.shared.shutdown.store(true, Ordering::SeqCst);
        }
        self.shared.wake.notify_all();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

/// The number of physical cores, falling back to the logical count.
pub(crate) fn physical_cores() -> usize {
    let logical = std::thread::available_parallelism().map_or(1, |n| n.get());
    linux_physical_cores().unwrap_or(logical).clamp(1, logical)
}

/// Counts distinct (physical id, core id) pairs in /proc/cpuinfo.
fn linux_physical_cores() -> Option<usize> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let mut cores = std::collections::HashSet::new();
    let mut phys = None;
    for line in info.lines() {
        let mut kv = line.splitn(2, ':').map(str::trim);
        match (kv.next(), kv.next()) {
            (Some("physical id"), Some(v)) => phys = Some(v.to_string()),
            (Some("core id"), Some(v)) => {
                cores.insert((phys.clone(), v.to_string()));
            }
            _ => {}
        }
    }
    (!cores.is_empty()).then_some(cores.len())
}

/// A raw pointer that tasks use to write disjoint parts of one output buffer.
#[derive(Clone, Copy)]
pub(crate) struct SyncPtr<T>(pub(crate) *mut T);

// SAFETY: users guarantee that concurrent tasks touch disjoint elements.
unsafe impl<T> Send for SyncPtr<T> {}
unsafe impl<T> Sync for SyncPtr<T> {}

impl<T> SyncPtr<T> {
    pub(crate) fn new(s: &mut [T]) -> Self {
        SyncPtr(s.as_mut_ptr())
    }

    /// # Safety
    /// `start..start + len` must lie inside the original slice and no other live
    /// reference may overlap it.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn slice(&self, start: usize, len: usize) -> &mut [T] {
        std::slice::from_raw_parts_mut(self.0.add(start), len)
    }
}

// Under `cfg(loom)` the pool's types are loom's, which work only inside a loom model.
#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn every_task_runs_exactly_once_across_many_jobs() {
        let pool = ThreadPool::new(3);
        for n in [1usize, 2, 7, 100] {
            let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
            pool.run(n, &|i| {
                hits[i].fetch_add(1, Ordering::Relaxed);
            });
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
        }
    }

    #[test]
    fn many_short_jobs_in_a_row_lose_and_repeat_nothing() {
        // Decode steps are thousands of tiny jobs: late workers must never run a task
        // of a finished job, nor miss one of the current job.
        let pool = ThreadPool::new(3);
        let total = AtomicUsize::new(0);
        for round in 0..20_000usize {
            let n = 1 + round % 5;
            let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
            pool.run(n, &|i| {
                hits[i].fetch_add(1, Ordering::Relaxed);
                total.fetch_add(1, Ordering::Relaxed);
            });
            assert!(
                hits.iter().all(|h| h.load(Ordering::Relaxed) == 1),
                "round {round}"
            );
        }
        assert_eq!(
            total.load(Ordering::Relaxed),
            (0..20_000).map(|r| 1 + r % 5).sum()
        );
    }

    #[test]
    fn idle_workers_park_and_wake_up() {
        let pool = ThreadPool::new(2);
        let count = AtomicUsize::new(0);
        pool.run(4, &|_| {
            count.fetch_add(1, Ordering::Relaxed);
        });
        // Long enough for the worker to stop spinning and yielding and park.
        std::thread::sleep(std::time::Duration::from_millis(200));
        let seen = std::sync::Mutex::new(std::collections::HashSet::new());
        for _ in 0..50 {
            pool.run(64, &|_| {
                seen.lock().unwrap().insert(std::thread::current().id());
                std::thread::sleep(std::time::Duration::from_micros(200));
            });
        }
        assert_eq!(
            seen.lock().unwrap().len(),
            2,
            "the parked worker took part again"
        );
    }

    #[test]
    fn a_job_started_inside_a_task_runs_on_that_thread() {
        let pool = ThreadPool::new(2);
        let outer: Vec<Mutex<Vec<(usize, std::thread::ThreadId)>>> =
            (0..2).map(|_| Mutex::new(Vec::new())).collect();
        pool.run(2, &|i| {
            let me = std::thread::current().id();
            pool.run(5, &|j| {
                outer[i]
                    .lock()
                    .unwrap()
                    .push((j, std::thread::current().id()))
            });
            let inner = outer[i].lock().unwrap();
            assert_eq!(
                inner.iter().map(|p| p.0).collect::<Vec<_>>(),
                [0, 1, 2, 3, 4]
            );
            assert!(inner.iter().all(|p| p.1 == me));
        });
        // Outside a task, jobs are spread again.
        let count = AtomicUsize::new(0);
        pool.run(3, &|_| {
            count.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(count.load(Ordering::Relaxed), 3);
        assert!(!IN_TASK.get());
    }

    #[test]
    fn a_panicking_task_is_reported_and_the_pool_survives() {
        let pool = ThreadPool::new(2);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pool.run(4, &|i| assert!(i != 2, "boom"))
        }));
        assert!(r.is_err());
        let count = AtomicUsize::new(0);
        pool.run(5, &|_| {
            count.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(count.load(Ordering::Relaxed), 5);
    }
}
