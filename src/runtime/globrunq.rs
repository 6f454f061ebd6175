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
//! The local side (a P's ring, and the yield buffer that feeds the
//! global tail) is `localrunq.rs`.
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
//!
//! Invariants of the overdue turn:
//! - The age is the oldest woken G's: each entry keeps the coarse clock of
//!   its queueing, and `woken_since` is the head's. (It was the time the
//!   woken part last became non-empty, so under a steady stream of wake-ups
//!   that never let it drain, every G looked overdue however fresh.)
//! - An overdue turn never directly follows another turn of the global
//!   queue taken first thing on the same P (`find_runnable`, step 3; a pick
//!   from the P's own queue must come between): the P's ring gets every
//!   other pick. Without it, a stream of wake-ups faster than the P serves
//!   them keeps the head overdue for good, and a goroutine in the ring
//!   starved: at GOMAXPROCS=1, 100 goroutines looping 1 ms sleeps in
//!   `goroutine::syscall` kept a freshly spawned goroutine from its first
//!   run for 388 ms of a 460 ms run (bench `syscalls --quick`, 72x instead
//!   of 1.5-3x, about 1 run in 20 natively; under qemu past 300 s).

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
    /// Woken from outside every P (module note, "Woken goroutines first"),
    /// each with the coarse clock when it was queued.
    woken: VecDeque<(&'static G, u32)>,
    /// Everything else, in FIFO order (Go's queue).
    rest: VecDeque<&'static G>,
    /// The last take with both non-empty came from `woken`.
    took_woken: bool,
    /// The coarse clock when `woken`'s head was queued (0: empty).
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
            self.woken.pop_front().map(|(g, _)| g)
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
    let since = l.runq.woken.front().map_or(0, |&(_, t)| t);
    if since != l.runq.woken_since {
        l.runq.woken_since = since;
        // Relaxed: a hint for `woken_overdue`; the queue is read under the
        // lock.
        s.woken_since.store(since, Ordering::Relaxed);
    }
    s.runqsize.store(l.runq.len() as u32, Ordering::SeqCst);
}

/// The coarse clock as a woken G's queueing time: never 0 (0 says empty).
#[inline]
fn woken_now() -> u32 {
    super::stats::coarse_ms().max(1)
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
    l.runq.woken.push_back((g, woken_now()));
    set_size(l);
}

/// Appends `list`, woken from outside every P (the netpoller's), to the
/// woken part, emptying it. Sched lock held.
pub(crate) fn put_woken_list_locked(l: &mut Locked, list: &mut Vec<&'static G>) {
    let now = woken_now();
    l.runq.woken.extend(list.drain(..).map(|g| (g, now)));
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
    super::localrunq::flush_yields_locked(l, pp);
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
pub(super) fn share(l: &Locked, max: usize) -> usize {
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
pub(super) fn move_to_ring(l: &mut Locked, pp: &PHandle, n: usize) {
    let mut rest = std::iter::from_fn(|| l.runq.pop().map(NonNull::from)).take(n);
    pp.runq_push_back_batch(&mut rest);
    set_size(l);
}
