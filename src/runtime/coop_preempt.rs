//! Cooperative preemption (Go's `g.preempt` checked in function prologues).
//!
//! sysmon sets `P::preempt` when the goroutine on that P has run for 10 ms
//! without a scheduling point (`sysmon.rs`). The running goroutine checks the
//! flag at runtime calls (spawning, channel and mutex operations, sleeps,
//! system-call exits, socket I/O) and at `goroutine::preempt_point()`, and if
//! set, yields to the global queue (`Action::Preempt`). The flag is cleared
//! whenever a G starts running (`execute`, also for a G that inherits the
//! slice through runnext) and when the P goes idle, so a request aimed at
//! one goroutine is never served by the next (Go's flag is per G).
//!
//! A loop that never makes a runtime call cannot be stopped this way; that
//! is what asynchronous preemption is for.

use std::sync::atomic::Ordering;

use crate::g::switch::Action;
use crate::m;

/// Yields if sysmon asked the running goroutine to; a no-op outside one.
#[inline]
pub(crate) fn check() {
    let _ = check_here(m::Here::lookup());
}

/// [`check`] with the M the entry gate looked up. Returns where the
/// goroutine runs afterwards: `here` itself, or, if it yielded (and may
/// have resumed on another M), a fresh lookup. Callers go on with the
/// returned `Here` only.
#[inline]
#[must_use]
pub(crate) fn check_here(here: m::Here) -> m::Here {
    let Some(m) = here.m() else { return here };
    // SAFETY: m is the calling thread's own M.
    let Some(pp) = (unsafe { m.p() }) else {
        return here;
    };
    if pp.preempt.load(Ordering::Relaxed) {
        preempt(m);
        return m::Here::lookup();
    }
    here
}

#[cold]
fn preempt(m: &'static m::M) {
    let Some(g) = m.curg() else { return };
    // SAFETY: m is the calling thread's own M, holding a P.
    if let Some(pp) = unsafe { m.p() } {
        pp.preempt.store(false, Ordering::Relaxed);
    }
    // SAFETY: g is the goroutine running on this thread, on its own stack.
    unsafe { super::lockosthread::switch_out(g, Action::Preempt) };
}
