//! A global allocator that counts live bytes for Monty's memory limit, armed only in
//! the sandbox worker.
//!
//! Monty 0.0.23 reads the process's live allocator bytes from
//! [`monty_types::LIVE_MEMORY`] to enforce `ResourceLimits::max_memory`. The binary
//! installs [`WorkerAlloc`] as its `#[global_allocator]`; until [`arm`] is called (the
//! worker does so first thing) it forwards to mimalloc after one relaxed
//! load, so the workbench itself is neither counted nor capped. Once armed it counts
//! every allocation and refuses any that would take the live total past the hard cap
//! (the process then aborts, which the host reports as a lost session).

use std::alloc::{GlobalAlloc, Layout};

use mimalloc::MiMalloc as Inner;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use monty_types::{BASELINE_MEMORY, LIVE_MEMORY};

static ARMED: AtomicBool = AtomicBool::new(false);
static HARD_CAP: AtomicUsize = AtomicUsize::new(usize::MAX);

/// mimalloc plus live-byte counting once armed.
pub struct WorkerAlloc;

/// mimalloc 3's `mi_option_purge_delay` (`mimalloc.h`; libmimalloc-sys names only the
/// options of older versions).
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// The purge delay that never gives freed memory back to the OS.
pub const NEVER_PURGE: std::ffi::c_long = -1;

/// Keeps the memory a short-lived command frees for the rest of the process instead of
/// giving it back to the OS, unless `MIMALLOC_PURGE_DELAY` says otherwise. A question
/// frees what it read a session with (the file's text, what the threads that parsed it
/// allocated) and then allocates as much again for its requests and its commit; given
/// back (mimalloc purges a thread's freed pages when the thread ends, and any after a
/// second), that memory is taken from the OS again, and every page of it zeroed again
/// on first touch. Call it in `main` before any other thread runs (mimalloc's options
/// are not thread-safe), and only for commands that end soon: the workbench and long
/// batches keep mimalloc's default.
pub fn keep_freed_memory() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: sets one of mimalloc's option values; no other thread runs yet.
    unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, NEVER_PURGE) }
}

/// Starts counting (from zero) and refuses allocations beyond `hard_cap` live bytes.
pub fn arm(hard_cap: usize) {
    LIVE_MEMORY.store(0, Ordering::Relaxed);
    BASELINE_MEMORY.store(0, Ordering::Relaxed);
    HARD_CAP.store(hard_cap, Ordering::Relaxed);
    ARMED.store(true, Ordering::Release);
}

/// Whether counting is on (only in the worker).
pub fn armed() -> bool {
    ARMED.load(Ordering::Relaxed)
}

/// Live bytes counted since arming.
pub fn live() -> usize {
    LIVE_MEMORY.load(Ordering::Relaxed)
}

fn add(size: usize) -> bool {
    let before = LIVE_MEMORY.fetch_add(size, Ordering::Relaxed);
    if before.saturating_add(size) > HARD_CAP.load(Ordering::Relaxed) {
        LIVE_MEMORY.fetch_sub(size, Ordering::Relaxed);
        return false;
    }
    true
}

fn sub(size: usize) {
    // Memory allocated before arming may be freed after: never wrap below zero.
    let _ = LIVE_MEMORY.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
        Some(v.saturating_sub(size))
    });
}

// SAFETY: every call forwards to mimalloc with the caller's layout; the counting
// touches only atomics and never allocates.
unsafe impl GlobalAlloc for WorkerAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if ARMED.load(Ordering::Relaxed) && !add(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: same contract as ours.
        unsafe { Inner.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if ARMED.load(Ordering::Relaxed) && !add(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: same contract as ours.
        unsafe { Inner.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if ARMED.load(Ordering::Relaxed) {
            sub(layout.size());
        }
        // SAFETY: same contract as ours.
        unsafe { Inner.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if ARMED.load(Ordering::Relaxed) {
            if new_size > layout.size() {
                if !add(new_size - layout.size()) {
                    return std::ptr::null_mut();
                }
            } else {
                sub(layout.size() - new_size);
            }
        }
        // SAFETY: same contract as ours.
        unsafe { Inner.realloc(ptr, layout, new_size) }
    }
}

/// Moves the hard cap (live bytes) while armed.
pub fn arm_cap(hard_cap: usize) {
    HARD_CAP.store(hard_cap, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    /// mimalloc's current purge delay (milliseconds; [`super::NEVER_PURGE`]: never).
    fn purge_delay() -> std::ffi::c_long {
        // SAFETY: reads one of mimalloc's option values.
        unsafe { libmimalloc_sys::mi_option_get(super::PURGE_DELAY) }
    }

    /// The option set is mimalloc's purge delay: it starts at mimalloc 3's default
    /// (1000 ms, `src/options.c`; no other option of mimalloc 3 does), and takes the
    /// value asked.
    #[test]
    fn freed_memory_is_kept_through_the_purge_delay() {
        if let Some(theirs) = std::env::var_os("MIMALLOC_PURGE_DELAY") {
            // The user's setting wins: it is left as mimalloc read it.
            let before = purge_delay();
            super::keep_freed_memory();
            assert_eq!(purge_delay(), before, "{theirs:?}");
            return;
        }
        assert_eq!(purge_delay(), 1000);
        super::keep_freed_memory();
        assert_eq!(purge_delay(), super::NEVER_PURGE);
    }
}
