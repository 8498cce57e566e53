//! Where a command's time goes: [`mark`] logs a phase, at debug level under the
//! `groundwork::timing` target, with the milliseconds since the process started
//! ([`start`], the first thing `main` does). Off unless that target is enabled, e.g.
//! `GROUNDWORK_LOG=warn,groundwork::timing=debug`; the log then holds one line per phase:
//! for `ask`, the session read and parsed (history, Groundwork's section and journal on
//! threads of their own), the agent built, each request prepared, compacted, estimated,
//! written and answered, each search's legs (the query embedded, the full-text and
//! vector legs, the documents read, pictures attached, context expanded), the commit and
//! the save; each line also gives the minor page faults so far and the allocator's
//! committed memory (`faults`, `committed_kib`). This is how the figures of
//! `benches/ask.rs` are taken apart phase by phase.

use std::sync::OnceLock;
use std::time::Instant;

/// The process's minor page faults so far and the memory the allocator has committed:
/// the memory a phase touches for the first time costs a fault and the kernel's zeroing
/// of each page, which is most of what a long session adds to an `ask` (README,
/// "Performance").
fn memory() -> (i64, usize) {
    // SAFETY: `getrusage` writes the struct it is given; `mi_process_info` accepts null
    // for every figure not wanted.
    unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        let faults = if libc::getrusage(libc::RUSAGE_SELF, &mut usage) == 0 {
            usage.ru_minflt
        } else {
            -1
        };
        let mut committed = 0usize;
        let null = std::ptr::null_mut();
        libmimalloc_sys::mi_process_info(null, null, null, null, null, &mut committed, null, null);
        (faults, committed)
    }
}

/// The target the marks are logged under.
pub const TARGET: &str = "groundwork::timing";

static START: OnceLock<Instant> = OnceLock::new();

/// Starts the clock the marks count from (later calls keep the first start).
pub fn start() {
    START.get_or_init(Instant::now);
}

/// Logs `phase` with the milliseconds since [`start`] (since the first mark, if the clock
/// was not started), when [`TARGET`] is enabled at debug level.
pub fn mark(phase: &'static str) {
    if tracing::enabled!(target: TARGET, tracing::Level::DEBUG) {
        let ms = START.get_or_init(Instant::now).elapsed().as_secs_f64() * 1000.0;
        let (faults, committed) = memory();
        tracing::debug!(
            target: TARGET,
            phase,
            ms = (ms * 100.0).round() / 100.0,
            faults,
            committed_kib = committed / 1024
        );
    }
}
