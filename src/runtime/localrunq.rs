//! A P's local run queue, seen from the scheduler: putting a goroutine on
//! its ring (with the overflow of a full ring to the global queue, Go's
//! runqput + runqputslow), and yields (Go's Gosched) with the per-P yield
//! buffer. The ring itself is `p/runq.rs`; the global queue,
//! `globrunq.rs`.
//!
//! # Yields (Go's Gosched) and the per-P yield buffer
//! A goroutine that yields must let the runnable goroutines go first. Go
//! puts it at the global queue's tail, behind everything; so does
//! `schedule::execute` when the global queue is empty, by putting it at its
//! P's local tail (the same order, no lock). When the global queue is not
//! empty (`put_yield`):
//! - **The ring has room:** a share of the global queue (what `get` would
//!   take, as far as the ring has room for it and the yielder) moves into
//!   the ring, and the yielder goes to the ring's tail, behind its P's
//!   goroutines and that share. A lone yielder thus lets the global queue
//!   go first, as in Go, but a P's yielders stay on their P: sending each
//!   through the global queue handed it to whichever P grabbed next, and
//!   on 2 Ps half the switches then landed on a stack last touched by the
//!   other CPU (more than twice the cost of a local yield: the history in
//!   docs/bench/history.md, fourth stop).
//! - **The ring is full** (more yielders than a ring holds): the yielder
//!   goes to its P's `yieldq`, and the buffer is appended to the global
//!   tail in one locked operation: when it holds `YIELD_BATCH` Gs, and
//!   whenever this P takes from the global queue (`get`, including the
//!   1-in-61 check) or stops. The lock is then taken once per batch
//!   instead of once per yield (both Ps of a 2-P machine yielding through
//!   one lock made the lock the cost of a yield).
//!
//! Where this parts from Go: with more runnable goroutines than a ring
//! holds, those on the global queue get a turn every 61 ticks (and when a
//! ring drains) rather than in strict FIFO with the ring's, as in tokio.
//! Preempted goroutines still go to the global tail (`Preempt`), so CPU
//! hogs share the processors as in Go.

use std::sync::atomic::Ordering;

use super::globrunq::{move_to_ring, put_batch, put_list_locked, share};
use super::{sched, Locked};
use crate::g::G;
use crate::p::PHandle;

/// A goroutine yielded (Go's Gosched) while the global queue was non-empty
/// (module note, "Yields"): a share of the global queue moves into the
/// ring ahead of it and it goes to the ring's tail, or, with the ring full,
/// to the global tail through the yield buffer. `to_global`: take the
/// second path whatever the ring holds (randomized scheduling). Inline:
/// with more goroutines than the ring holds, every yield takes it.
#[inline]
pub(crate) fn put_yield(pp: &PHandle, g: &'static G, to_global: bool) {
    let room = pp.runq_room();
    if room == 0 || to_global {
        buffer_yield(pp, g);
        return;
    }
    if room > 1 {
        let mut l = sched().lock();
        flush_yields_locked(&mut l, pp);
        let n = share(&l, room - 1);
        if n > 0 {
            super::stats::bump(&pp.counters.global_grabs, 1);
            move_to_ring(&mut l, pp, n);
        }
    }
    // At least one slot is left: thieves only shrink the ring.
    runqput(pp, g, false);
}

/// How many yielders a P buffers before appending them to the global queue.
const YIELD_BATCH: usize = 32;

/// Is there anything for `pp` on the global queue (or in its yield buffer,
/// which goes there first)?
#[inline]
pub(crate) fn has_work(pp: &PHandle) -> bool {
    // SAFETY: short exclusive borrow of our own P's local state.
    sched().runqsize.load(Ordering::Relaxed) != 0 || !unsafe { pp.local() }.yieldq.is_empty()
}

/// Buffers a yielder for the global tail (module note).
fn buffer_yield(pp: &PHandle, g: &'static G) {
    let full = {
        // SAFETY: short exclusive borrow of our own P's local state.
        let local = unsafe { pp.local() };
        local.yieldq.push(g);
        pp.counters
            .yieldq
            .store(local.yieldq.len() as u64, Ordering::Relaxed);
        local.yieldq.len() >= YIELD_BATCH
    };
    if full {
        let mut l = sched().lock();
        flush_yields_locked(&mut l, pp);
    }
}

/// Appends `pp`'s yield buffer to the global queue. Sched lock held.
pub(crate) fn flush_yields_locked(l: &mut Locked, pp: &PHandle) {
    // SAFETY: short exclusive borrow of our own P's local state.
    let local = unsafe { pp.local() };
    if !local.yieldq.is_empty() {
        put_list_locked(l, &mut local.yieldq);
        pp.counters.yieldq.store(0, Ordering::Relaxed);
    }
}

/// Puts `g` on `pp`'s local queue (`next`: into runnext); a full ring sends
/// half of itself to the global queue (Go's runqput + runqputslow).
#[inline]
pub(crate) fn runqput(pp: &PHandle, g: &'static G, next: bool) {
    // Randomized scheduling (tests only, `--cfg goroutine_randomize`, Go's
    // randomizeScheduler under -race): half the time a G meant for runnext
    // goes to the ring's tail instead, so tests cannot depend on runnext.
    #[cfg(goroutine_randomize)]
    let next = next && super::randomize::coin();
    if let Err(g) = pp.runq_try_put(g, next) {
        runqput_slow(pp, g);
    }
}

/// `runqput` found the ring full. Out of line so that the 1 KiB overflow
/// batch sits in this frame only, not in the frames of `newproc`, `ready`
/// and the wake paths, which run on goroutines' own stacks (each such
/// frame pushed a goroutine that spawns or wakes into a second stack page).
#[cold]
#[inline(never)]
fn runqput_slow(pp: &PHandle, g: &'static G) {
    if let Some(overflow) = pp.runq_put_overflow(g) {
        put_batch(overflow);
    }
}
