//! The global run queue (Go's `sched.runq`): an intrusive FIFO of Gs under
//! the sched lock, with its length mirrored in `Sched::runqsize` so that the
//! fast paths can skip the lock when it is empty.
//!
//! Who puts here: goroutines spawned or readied from outside the runtime,
//! the overflow half of a full P ring (one batch), the run queues of Ps
//! removed by `set_max_procs`. Who takes: `find_runnable`, one G every 61st
//! schedule tick (fairness) and a batch when the local queue is empty.

use std::ptr::NonNull;
use std::sync::atomic::Ordering;

use super::{sched, Locked};
use crate::g::{GList, G};
use crate::p::runq::RUNQ_SIZE;
use crate::p::PHandle;

/// Publishes the new length. SeqCst: pairs with the spinning protocol's
/// fence (a giving-up spinner re-reads `runqsize` after it).
#[inline]
fn set_size(l: &Locked) {
    sched()
        .runqsize
        .store(l.runq.len() as u32, Ordering::SeqCst);
}

/// Puts `g` at the tail of the global queue.
pub(crate) fn put(g: &'static G) {
    let mut l = sched().lock();
    l.runq.push_back(g);
    set_size(&l);
}

/// Puts a batch at the tail of the global queue in one locked operation.
pub(crate) fn put_batch(batch: impl IntoIterator<Item = NonNull<G>>) {
    let mut list = GList::new();
    for g in batch {
        // SAFETY: run queues only hold leaked, never-freed Gs.
        list.push_back(unsafe { &*g.as_ptr() });
    }
    let mut l = sched().lock();
    put_list_locked(&mut l, &mut list);
}

/// Appends `list` to the global queue. Sched lock held.
pub(crate) fn put_list_locked(l: &mut Locked, list: &mut GList) {
    l.runq.append(list);
    set_size(l);
}

/// Takes a batch from the global queue for `pp` (Go's globrunqget): returns
/// one G to run and moves up to `n - 1` more into `pp`'s ring, where
/// `n = min(len, len / gomaxprocs + 1, max (if > 0), RUNQ_SIZE / 2)`.
/// Sched lock held.
pub(crate) fn get(l: &mut Locked, pp: &PHandle, max: usize) -> Option<&'static G> {
    let len = l.runq.len();
    if len == 0 {
        return None;
    }
    let procs = sched().gomaxprocs().max(1) as usize;
    let mut n = len.min(len / procs + 1);
    if max > 0 {
        n = n.min(max);
    }
    n = n.min(RUNQ_SIZE / 2);
    let first = l.runq.pop_front();
    // The rest go to the local ring in one publication (Go's runqputbatch);
    // it only pulls while the ring has room, so what does not fit stays on
    // the global queue untouched.
    let mut rest = std::iter::from_fn(|| l.runq.pop_front().map(NonNull::from)).take(n - 1);
    // SAFETY: we own `pp` (we hold its handle).
    unsafe { pp.runq.push_back_batch(&mut rest) };
    set_size(l);
    first
}

/// Puts `g` on `pp`'s local queue (`next`: into runnext); a full ring sends
/// half of itself to the global queue (Go's runqput + runqputslow).
#[inline]
pub(crate) fn runqput(pp: &PHandle, g: &'static G, next: bool) {
    // SAFETY: we own `pp` (we hold its handle).
    if let Some(overflow) = unsafe { pp.runq.put(NonNull::from(g), next) } {
        put_batch(overflow);
    }
}
