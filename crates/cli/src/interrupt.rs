//! Ctrl-C. One handler for the process (a second `set_handler` would fail): it asks
//! the current generation to stop. In a one-shot run a second Ctrl-C ends the process
//! at once; in the interactive chat every Ctrl-C only stops the reply being written
//! (at the prompt the line editor reads Ctrl-C itself, as a key).

use std::sync::atomic::{AtomicBool, Ordering};

static CANCEL: AtomicBool = AtomicBool::new(false);
static INTERACTIVE: AtomicBool = AtomicBool::new(false);

pub fn install(interactive: bool) {
    INTERACTIVE.store(interactive, Ordering::SeqCst);
    let _ = ctrlc::set_handler(|| {
        if CANCEL.swap(true, Ordering::SeqCst) && !INTERACTIVE.load(Ordering::SeqCst) {
            std::process::exit(130);
        }
    });
}

/// The flag a generation polls.
pub fn cancel_flag() -> &'static AtomicBool {
    &CANCEL
}

/// Before each turn: a Ctrl-C pressed earlier must not stop the next reply.
pub fn reset() {
    CANCEL.store(false, Ordering::SeqCst);
}
