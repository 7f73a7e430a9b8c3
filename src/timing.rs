//! Where a launch spends its time: `-v` prints one line per phase, milliseconds since jail's
//! `main`, from each of the processes a run forks (supervisor, init, command), so start-up can be
//! read without a profiler. Off, a mark costs one relaxed load.
//!
//! The clock is CLOCK_MONOTONIC, which forked processes share (jail makes no time namespace), so
//! the lines of init and the command line up with the supervisor's.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

static START: OnceLock<Instant> = OnceLock::new();
static ON: AtomicBool = AtomicBool::new(false);

/// Sets the origin of the marks; the first call wins.
pub fn start() {
    START.get_or_init(Instant::now);
}

/// Prints the marks from now on (`-v`).
pub fn enable() {
    start();
    ON.store(true, Ordering::Relaxed);
}

/// One phase ended: `what` is a constant chosen by jail, never a name from the command line.
pub fn mark(what: &'static str) {
    if !ON.load(Ordering::Relaxed) {
        return;
    }
    let Some(start) = START.get() else { return };
    let ms = start.elapsed().as_secs_f64() * 1e3;
    // One write: init and the command print while the supervisor does, and eprintln! writes
    // piece by piece, so lines would interleave.
    let line = format!(
        "jail: timing: {ms:8.3} ms  {what} (pid {})\n",
        std::process::id()
    );
    let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
}
