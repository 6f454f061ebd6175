//! The global run queue (Go's `sched.runq`): a FIFO of G pointers under the
//! sched lock, with its length mirrored in `Sched::runqsize` so that the fast
//! paths can skip the lock when it is empty. Go links the queue through the
//! Gs; we keep the pointers in an array, so moving a batch between the ring
//! and the global queue never dereferences (cache-misses on) a cold G.
//!
//! Who puts here: goroutines spawned or readied from outside the runtime,
//! the overflow half of a full P ring (one batch), the run queues of Ps
//! removed by `set_max_procs`. Who takes: `find_runnable`, one G every 61st
//! schedule tick (fairness) and a batch when the local queue is empty.
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
//!   other CPU (133 ns per yield with 1,000 yielders at P=2, 50 ns local).
//! - **The ring is full** (more yielders than a ring holds): the yielder
//!   goes to its P's `yieldq`, and the buffer is appended to the global
//!   tail in one locked operation: when it holds `YIELD_BATCH` Gs, and
//!   whenever this P takes from the global queue (`get`, including the
//!   1-in-61 check) or stops. The lock is then taken once per batch
//!   instead of once per yield (both Ps of a 2-P machine yielding through
//!   one lock cost 250 ns per yield).
//!
//! Where this parts from Go: with more runnable goroutines than a ring
//! holds, those on the global queue get a turn every 61 ticks (and when a
//! ring drains) rather than in strict FIFO with the ring's, as in tokio.
//! Preempted goroutines still go to the global tail (`Preempt`), so CPU
//! hogs share the processors as in Go.
//!
//! # Woken goroutines first
//! Goroutines woken from outside every P (`put_woken`: a plain thread's
//! send, the signal thread, the netpoller's injection, a system call or a
//! revoked stretch that ends without a P) wait in a queue of their own
//! beside the rest (spawns from outside, overflow, preempted and yielding
//! goroutines). Takers alternate between the two while both hold Gs, so
//! neither can starve the other; and a P also serves the global queue at
//! its next scheduling point once a woken G has waited there for
//! `WOKEN_OVERDUE_MS` of the coarse clock (`woken_overdue`), not only every
//! 61st tick. Why: behind 10,000 channel ping-pong pairs, each pair keeping
//! a 10 ms slice through runnext, the global queue holds thousands of Gs
//! and is served once per 61 slices; a goroutine readied from outside
//! there (a signal's handler, beside 4,000 channel churners: 1.1-1.9 s)
//! waited behind all of them, past 45 s (Go 1.19: past 120 s).

/// How long (coarse ms) a woken goroutine may wait on the global queue
/// before a P serves it at its next scheduling point.
const WOKEN_OVERDUE_MS: u32 = 2;

use std::collections::VecDeque;
use std::ptr::NonNull;
use std::sync::atomic::Ordering;

use super::{sched, Locked};
use crate::g::G;
use crate::p::runq::RUNQ_SIZE;
use crate::p::PHandle;

/// The global run queue's contents. Arrays of pointers, not lists linked
/// through the Gs: grabbing a batch must not touch (cache-miss on) each G.
/// Only this file touches the deques, so every change republishes
/// `Sched::runqsize` (`set_size`).
pub(crate) struct GlobalQueue {
    /// Woken from outside every P (module note, "Woken goroutines first").
    woken: VecDeque<&'static G>,
    /// Everything else, in FIFO order (Go's queue).
    rest: VecDeque<&'static G>,
    /// The last take with both non-empty came from `woken`.
    took_woken: bool,
    /// The coarse clock when `woken` last became non-empty (0: empty).
    woken_since: u32,
}

impl GlobalQueue {
    pub(crate) const fn new() -> GlobalQueue {
        GlobalQueue {
            woken: VecDeque::new(),
            rest: VecDeque::new(),
            took_woken: false,
            woken_since: 0,
        }
    }

    fn len(&self) -> usize {
        self.woken.len() + self.rest.len()
    }

    /// The next G: from `woken` and `rest` in turn while both hold Gs.
    fn pop(&mut self) -> Option<&'static G> {
        let from_woken = match (self.woken.is_empty(), self.rest.is_empty()) {
            (true, true) => return None,
            (false, true) => true,
            (true, false) => false,
            (false, false) => !self.took_woken,
        };
        if from_woken {
            self.took_woken = true;
            self.woken.pop_front()
        } else {
            self.took_woken = false;
            self.rest.pop_front()
        }
    }
}

/// Publishes the new length, and when the oldest woken G began to wait.
/// SeqCst: pairs with the spinning protocol's fence (a giving-up spinner
/// re-reads `runqsize` after it).
#[inline]
fn set_size(l: &mut Locked) {
    let s = sched();
    let since = if l.runq.woken.is_empty() {
        0
    } else if l.runq.woken_since == 0 {
        super::stats::coarse_ms().max(1)
    } else {
        l.runq.woken_since
    };
    if since != l.runq.woken_since {
        l.runq.woken_since = since;
        // Relaxed: a hint for `woken_overdue`; the queue is read under the
        // lock.
        s.woken_since.store(since, Ordering::Relaxed);
    }
    s.runqsize.store(l.runq.len() as u32, Ordering::SeqCst);
}

/// A woken G has waited on the global queue for `WOKEN_OVERDUE_MS` or more
/// (module note): `find_runnable` serves the global queue now. One relaxed
/// load when none waits.
#[inline]
pub(crate) fn woken_overdue() -> bool {
    let since = sched().woken_since.load(Ordering::Relaxed);
    since != 0 && super::stats::coarse_ms().wrapping_sub(since) >= WOKEN_OVERDUE_MS
}

/// Puts `g` at the tail of the global queue.
pub(crate) fn put(g: &'static G) {
    let mut l = sched().lock();
    l.runq.rest.push_back(g);
    set_size(&mut l);
}

/// Puts `g`, woken from outside every P, at the tail of the global queue's
/// woken part (module note).
pub(crate) fn put_woken(g: &'static G) {
    let mut l = sched().lock();
    put_woken_locked(&mut l, g);
}

/// [`put_woken`] with the sched lock held.
pub(crate) fn put_woken_locked(l: &mut Locked, g: &'static G) {
    l.runq.woken.push_back(g);
    set_size(l);
}

/// Appends `list`, woken from outside every P (the netpoller's), to the
/// woken part, emptying it. Sched lock held.
pub(crate) fn put_woken_list_locked(l: &mut Locked, list: &mut Vec<&'static G>) {
    l.runq.woken.extend(list.drain(..));
    set_size(l);
}

/// Puts a batch at the tail of the global queue in one locked operation.
pub(crate) fn put_batch(batch: impl IntoIterator<Item = NonNull<G>>) {
    let mut l = sched().lock();
    // SAFETY: run queues only hold leaked, never-freed Gs.
    l.runq
        .rest
        .extend(batch.into_iter().map(|g| unsafe { &*g.as_ptr() }));
    set_size(&mut l);
}

/// Puts `list` at the head of the global queue, in order, emptying it
/// (goroutines that were next in line elsewhere). Sched lock held.
pub(crate) fn put_front_list_locked(l: &mut Locked, list: &mut Vec<&'static G>) {
    for g in list.drain(..).rev() {
        l.runq.rest.push_front(g);
    }
    set_size(l);
}

/// Appends `list` to the global queue, emptying it. Sched lock held.
pub(crate) fn put_list_locked(l: &mut Locked, list: &mut Vec<&'static G>) {
    l.runq.rest.extend(list.drain(..));
    set_size(l);
}

/// Takes a batch from the global queue for `pp` (Go's globrunqget): returns
/// one G to run and moves up to `n - 1` more into `pp`'s ring (`share`).
/// Sched lock held.
pub(crate) fn get(l: &mut Locked, pp: &PHandle, max: usize) -> Option<&'static G> {
    flush_yields_locked(l, pp);
    let n = share(l, max);
    if n == 0 {
        return None;
    }
    let first = l.runq.pop();
    super::stats::bump(&pp.counters.global_grabs, 1);
    move_to_ring(l, pp, n - 1);
    first
}

/// How many Gs one P takes from the global queue at a time:
/// `min(len, len / gomaxprocs + 1, max (if > 0), RUNQ_SIZE / 2)`.
fn share(l: &Locked, max: usize) -> usize {
    let len = l.runq.len();
    let procs = sched().gomaxprocs().max(1) as usize;
    let mut n = len.min(len / procs + 1);
    if max > 0 {
        n = n.min(max);
    }
    n.min(RUNQ_SIZE / 2)
}

/// Moves up to `n` Gs from the global queue's head to `pp`'s ring, in one
/// publication (Go's runqputbatch). It only pulls while the ring has room,
/// so what does not fit stays on the global queue untouched.
fn move_to_ring(l: &mut Locked, pp: &PHandle, n: usize) {
    let mut rest = std::iter::from_fn(|| l.runq.pop().map(NonNull::from)).take(n);
    pp.runq_push_back_batch(&mut rest);
    set_size(l);
}

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
