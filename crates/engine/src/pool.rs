//! A persistent thread pool for the forward pass.
//!
//! Workers are started once and live as long as the pool. Each job is a borrowed
//! closure called with task indices `0..n_tasks`; the caller runs tasks too and returns
//! only when every task has finished, so the closure may borrow the caller's stack.
//! Between jobs, workers spin for a short while (decode steps follow each other within
//! microseconds) and then park on a condition variable so an idle model costs no CPU.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

/// Polls an idle worker (or the waiting caller) spins before it starts yielding its
/// time slice: a few microseconds, the gap between two matmuls of one step.
const SPIN_POLLS: u32 = 2_000;
/// Yields an idle worker makes before it parks. Yielding, not spinning, keeps a busy
/// machine (more runnable threads than cores) from starving the thread doing the work.
const YIELD_POLLS: u32 = 2_000;

/// The job being run: a type-erased pointer to the caller's closure.
#[derive(Clone, Copy)]
struct JobRef {
    /// Points to a `&(dyn Fn(usize) + Sync)` that outlives the job (see `ThreadPool::run`).
    func: *const (dyn Fn(usize) + Sync),
    n_tasks: usize,
}

// SAFETY: the closure is `Sync`, and `run` keeps it alive until every worker is done.
unsafe impl Send for JobRef {}

/// `Shared::state` bit set while a job accepts workers; the other bits count the
/// workers inside the job.
const OPEN: usize = 1 << (usize::BITS - 1);

struct Shared {
    /// Incremented for every job: the signal idle workers watch.
    generation: AtomicUsize,
    job: Mutex<Option<JobRef>>,
    wake: Condvar,
    /// Workers parked on `wake`.
    sleepers: AtomicUsize,
    /// `OPEN` | workers inside the current job.
    state: AtomicUsize,
    /// Next task index to hand out.
    next_task: AtomicUsize,
    shutdown: AtomicBool,
    /// A task panicked; `run` re-raises it on the caller's thread.
    panicked: AtomicBool,
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
    /// A pool of `n_threads` threads in all, counting the caller (so `n_threads - 1`
    /// workers are spawned; 0 is treated as 1).
    pub fn new(n_threads: usize) -> ThreadPool {
        let shared = Arc::new(Shared {
            generation: AtomicUsize::new(0),
            job: Mutex::new(None),
            wake: Condvar::new(),
            sleepers: AtomicUsize::new(0),
            state: AtomicUsize::new(0),
            next_task: AtomicUsize::new(0),
            shutdown: AtomicBool::new(false),
            panicked: AtomicBool::new(false),
        });
        let workers = (1..n_threads.max(1))
            .map(|i| {
                let shared = Arc::clone(&shared);
                std::thread::Builder::new()
                    .name(format!("llamay-worker-{i}"))
                    .spawn(move || worker_loop(&shared))
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
    pub fn run(&self, n_tasks: usize, f: &(dyn Fn(usize) + Sync)) {
        if n_tasks == 0 {
            return;
        }
        if self.workers.is_empty() || n_tasks == 1 {
            (0..n_tasks).for_each(f);
            return;
        }
        let _serial = self.run_lock.lock().unwrap_or_else(|e| e.into_inner());
        let s = &*self.shared;
        // SAFETY: erasing the lifetime is sound because this function does not return
        // before the job is closed and every worker that joined it has left.
        let func: *const (dyn Fn(usize) + Sync) = unsafe { std::mem::transmute(f) };
        *s.job.lock().unwrap_or_else(|e| e.into_inner()) = Some(JobRef { func, n_tasks });
        s.next_task.store(0, Ordering::SeqCst);
        s.panicked.store(false, Ordering::SeqCst);
        s.state.store(OPEN, Ordering::SeqCst);
        s.generation.fetch_add(1, Ordering::SeqCst);
        if s.sleepers.load(Ordering::SeqCst) > 0 {
            let _guard = s.job.lock().unwrap_or_else(|e| e.into_inner());
            s.wake.notify_all();
        }
        let caller_ok =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| take_tasks(s, f, n_tasks)))
                .is_ok();
        // Close the job, then wait for the workers inside to finish their tasks.
        s.state.fetch_and(!OPEN, Ordering::SeqCst);
        let mut polls = 0u32;
        while s.state.load(Ordering::SeqCst) != 0 {
            if polls < SPIN_POLLS {
                polls += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        if !caller_ok || s.panicked.load(Ordering::SeqCst) {
            panic!("a forward-pass task panicked");
        }
    }
}

fn take_tasks(s: &Shared, f: &(dyn Fn(usize) + Sync), n_tasks: usize) {
    loop {
        let i = s.next_task.fetch_add(1, Ordering::Relaxed);
        if i >= n_tasks {
            break;
        }
        f(i);
    }
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

fn worker_loop(s: &Shared) {
    let mut seen = 0usize;
    loop {
        // Wait for a new generation: spin, then yield, then park.
        let mut polls = 0u32;
        while s.generation.load(Ordering::SeqCst) == seen && !s.shutdown.load(Ordering::SeqCst) {
            if polls < SPIN_POLLS {
                polls += 1;
                std::hint::spin_loop();
            } else if polls < SPIN_POLLS + YIELD_POLLS {
                polls += 1;
                std::thread::yield_now();
            } else {
                let guard = s.job.lock().unwrap_or_else(|e| e.into_inner());
                s.sleepers.fetch_add(1, Ordering::SeqCst);
                if s.generation.load(Ordering::SeqCst) == seen && !s.shutdown.load(Ordering::SeqCst)
                {
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
        seen = s.generation.load(Ordering::SeqCst);
        if !try_join(s) {
            continue;
        }
        // Joined: the job cannot end (nor its closure die) until this worker leaves.
        let job = *s.job.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(job) = job {
            // SAFETY: `run` keeps the closure alive while a joined worker is inside.
            let f = unsafe { &*job.func };
            let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                take_tasks(s, f, job.n_tasks)
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
            let _guard = self.shared.job.lock().unwrap_or_else(|e| e.into_inner());
            self.shared.shutdown.store(true, Ordering::Relaxed);
        }
        self.shared.wake.notify_all();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

/// The number of physical cores, falling back to the logical count.
pub fn physical_cores() -> usize {
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

#[cfg(test)]
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
