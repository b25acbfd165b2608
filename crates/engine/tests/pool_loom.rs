//! The thread pool's `unsafe` under the loom model checker: `ThreadPool::run` erases
//! its closure's lifetime and hands workers a pointer to a `JobRef` on its own stack,
//! which is sound only if no worker touches either once `run` has returned.
//!
//! Each model runs the pool's real code with loom's atomics, locks and threads (the pool
//! is built on them under `cfg(loom)`), and loom runs it under every interleaving and
//! every value a load may see, up to a preemption bound. Tasks write slots of an array
//! on the caller's stack through loom's `UnsafeCell`, which fails the model on any access
//! not ordered after the ones before it: a worker's write not visible to the caller when
//! `run` returns, or a late worker still writing once the caller is using the slots
//! again. A worker that calls through a `JobRef` of a `run` that has returned reads a
//! dead stack frame: the test binary fails, with a causality violation or a crash.
//!
//! Each of these breakages of `pool.rs`, tried by hand, fails the run at the default
//! bound: no wait for the workers before `run` returns; a worker leaving or joining with
//! relaxed orderings; the job opened with a relaxed store; joining by load and store
//! instead of compare-exchange; a worker reading the job pointer before it joins; the
//! shutdown flag stored outside the park lock, or not rechecked under it.
//!
//! Run with `scripts/test-loom` (`RUSTFLAGS="--cfg loom"`); without that cfg this file
//! is empty.
#![cfg(loom)]

use std::panic::{catch_unwind, AssertUnwindSafe};
// The model's own bookkeeping, outside what loom checks.
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use llamay_engine::ThreadPool;
use loom::cell::UnsafeCell;
use loom::sync::Arc;

/// Interleavings with more preemptions than this are not explored unless
/// `LOOM_MAX_PREEMPTIONS` says otherwise (bugs need few; the count grows fast with it).
const PREEMPTION_BOUND: usize = 2;

/// Runs `f` under loom and says how many executions it explored (see `--nocapture`).
fn check(name: &str, f: impl Fn() + Sync + Send + 'static) {
    let executions = std::sync::Arc::new(AtomicUsize::new(0));
    let mut model = loom::model::Builder::new();
    model.preemption_bound = model.preemption_bound.or(Some(PREEMPTION_BOUND));
    let start = Instant::now();
    let counter = std::sync::Arc::clone(&executions);
    model.check(move || {
        counter.fetch_add(1, Ordering::Relaxed);
        f()
    });
    eprintln!(
        "{name}: {} executions in {:.1?} (preemption bound {:?})",
        executions.load(Ordering::Relaxed),
        start.elapsed(),
        model.preemption_bound,
    );
}

/// Slots on the caller's stack that tasks write through the closure `run` lifetime-erases,
/// one slot each (the pattern of `SyncPtr`).
struct Slots([UnsafeCell<u32>; 3]);

// SAFETY: tasks write disjoint slots; loom checks the accesses are ordered.
unsafe impl Sync for Slots {}

impl Slots {
    fn new() -> Slots {
        Slots([UnsafeCell::new(0), UnsafeCell::new(0), UnsafeCell::new(0)])
    }

    /// A task's write: one increment of slot `i`.
    fn hit(&self, i: usize) {
        // SAFETY: only task `i` touches slot `i` while the job runs.
        self.0[i].with_mut(|p| unsafe { *p += 1 });
    }

    /// The caller's reads after `run` returned, then a write of its own to every slot, so
    /// a worker still running a task of the finished job fails the model.
    fn take(&self) -> Vec<u32> {
        let hits = self.0.iter().map(|c| c.with(|p| unsafe { *p })).collect();
        for c in &self.0 {
            c.with_mut(|p| unsafe { *p = u32::MAX });
        }
        hits
    }
}

/// A job of 3 tasks on 2 threads (the caller's 0 and 2, the worker's 1, each stolen by
/// the other thread when it is late), then a job of 2 on the same pool, then shutdown.
#[test]
fn every_task_runs_once_and_its_writes_are_the_callers_when_run_returns() {
    check("two jobs then drop", || {
        let pool = ThreadPool::new(2);
        for n_tasks in [3, 2] {
            let slots = Slots::new();
            pool.run(n_tasks, &|i| slots.hit(i));
            let want: Vec<u32> = (0..3).map(|i| u32::from(i < n_tasks)).collect();
            assert_eq!(slots.take(), want, "job of {n_tasks} tasks");
        }
        // Drop sets `shutdown` and joins the worker, wherever it is (parked, about to
        // park, still in the job's last moments): loom fails a model whose threads are
        // all blocked.
        drop(pool);
    });
}

/// Two workers: both may be inside the job at once, each with its own task, and any
/// thread may steal from the other two.
#[test]
fn two_workers_share_a_job_and_steal() {
    check("two workers", || {
        let pool = ThreadPool::new(3);
        let slots = Slots::new();
        pool.run(3, &|i| slots.hit(i));
        assert_eq!(slots.take(), [1, 1, 1]);
        drop(pool);
    });
}

/// Two callers on two threads share one pool (`run_lock` lets one job in at a time), so
/// jobs follow each other with their `JobRef`s and closures on different stacks: a worker
/// holding on to the previous job's pointer would call a closure whose `run` returned.
#[test]
fn jobs_from_two_callers_on_two_threads_each_run_once() {
    check("two callers", || {
        let pool = Arc::new(ThreadPool::new(2));
        let other = {
            let pool = Arc::clone(&pool);
            loom::thread::spawn(move || {
                let slots = Slots::new();
                pool.run(2, &|i| slots.hit(i));
                assert_eq!(slots.take(), [1, 1, 0], "the spawned caller's job");
            })
        };
        let slots = Slots::new();
        pool.run(2, &|i| slots.hit(i));
        assert_eq!(slots.take(), [1, 1, 0], "the first caller's job");
        other.join().unwrap();
    });
}

/// A task panicking on either thread is re-raised on the caller, after the other tasks
/// have finished, and the pool still shuts down.
///
/// That the pool runs jobs after a panic is left to the unit test
/// `a_panicking_task_is_reported_and_the_pool_survives`: the re-raise unwinds through
/// `run`'s guard of `run_lock`, and loom's `Mutex` does not model poisoning (its next
/// `lock` panics on the poisoned `std` mutex inside it).
#[test]
fn a_panicking_task_is_re_raised_on_the_caller_after_the_others_finish() {
    quiet_expected_panics();
    check("a panicking task", || {
        let pool = ThreadPool::new(2);
        let slots = Slots::new();
        let r = catch_unwind(AssertUnwindSafe(|| {
            pool.run(3, &|i| {
                if i == 1 {
                    panic!("{EXPECTED}");
                }
                slots.hit(i);
            })
        }));
        assert!(r.is_err(), "the panic reached the caller");
        assert_eq!(slots.take(), [1, 0, 1]);
        drop(pool);
    });
}

/// A pool dropped straight away: its worker may not have run a line yet.
#[test]
fn a_pool_dropped_before_any_job_joins_its_worker() {
    check("drop at once", || drop(ThreadPool::new(2)));
}

const EXPECTED: &str = "task 1 fails (expected)";

/// Leaves out the panic messages the model provokes in every execution (the task's and
/// the pool's re-raise); any other panic is reported as usual.
fn quiet_expected_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let msg = info
                .payload()
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| info.payload().downcast_ref::<&str>().copied())
                .unwrap_or("");
            if msg != EXPECTED && msg != "a forward-pass task panicked" {
                default(info);
            }
        }));
    });
}
