//! The compile budget: a schema's compile (tree and lowering) stops with an error
//! naming the part it was on once its time runs out, instead of holding a thread.
//! The deadline lives on the compiling thread for the duration of one compile, so the
//! recursive compiler checks it without threading it through every call.

use std::cell::Cell;
use std::time::{Duration, Instant};

use super::error::SchemaError;

/// How much a schema's compile may take (`serve -compile-budget-ms`), so a hostile
/// schema cannot hold a thread; over it, the compile is refused naming where it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CompileBudget {
    /// Wall time for the whole compile (`None`: unbounded).
    pub time: Option<Duration>,
    /// Nodes of the normalized schema (what expanding `$ref`s and `anyOf`s makes).
    pub nodes: usize,
}

/// Most nodes one schema may compile to, by default.
pub(super) const MAX_NODES: usize = 100_000;

/// The default: 5 s and 100,000 nodes.
impl Default for CompileBudget {
    fn default() -> Self {
        CompileBudget {
            time: Some(Duration::from_secs(5)),
            nodes: MAX_NODES,
        }
    }
}

thread_local! {
    static DEADLINE: Cell<Option<(Instant, Duration)>> = const { Cell::new(None) };
}

/// Runs `f` with `budget`'s time as this thread's deadline.
pub(crate) fn within<T>(budget: &CompileBudget, f: impl FnOnce() -> T) -> T {
    let before = DEADLINE.get();
    DEADLINE.set(budget.time.map(|t| (Instant::now() + t, t)));
    let out = f();
    DEADLINE.set(before);
    out
}

/// An error naming `at` (and `what` was being compiled there) once the deadline has passed.
pub(crate) fn check(at: &str, what: &str) -> Result<(), SchemaError> {
    match DEADLINE.get() {
        Some((deadline, budget)) if Instant::now() > deadline => Err(SchemaError::new(
            "",
            at,
            format!(
                "compiling {at} ({what}) ran past the compile budget of {} ms; llamay stopped \
                 rather than stall: simplify that part of the schema",
                budget.as_millis()
            ),
        )),
        _ => Ok(()),
    }
}
