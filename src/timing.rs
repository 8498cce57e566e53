//! Where a command's time goes: [`mark`] logs a phase, at debug level under the
//! `groundwork::timing` target, with the milliseconds since the process started
//! ([`start`], the first thing `main` does). Off unless that target is enabled, e.g.
//! `GROUNDWORK_LOG=warn,groundwork::timing=debug`; the log then holds one line per phase:
//! for `ask`, the session read and parsed (history, Groundwork's section and journal on
//! threads of their own), the agent built, each request prepared, compacted, estimated,
//! written and answered, the commit and the save. This is how the figures of
//! `benches/ask.rs` are taken apart phase by phase.

use std::sync::OnceLock;
use std::time::Instant;

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
        tracing::debug!(target: TARGET, phase, ms = (ms * 100.0).round() / 100.0);
    }
}
