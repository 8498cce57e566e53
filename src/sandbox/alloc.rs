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
