//! The spinning-M protocol: how many Ms are looking for work, and how work
//! submitters and giving-up spinners avoid a lost wakeup.
//!
//! # Counters
//! - `nmspinning`: Ms that hold a P and are looking for work (stealing).
//! - `npidle`: Ps on the idle list (changed under the sched lock, read
//!   without it).
//!
//! # Policy (Go's "Worker thread parking/unparking")
//! - Spin only if this M is already spinning or `2 * nmspinning < gomaxprocs -
//!   npidle`: at most half of the busy Ps have a spinning M.
//! - A submitter that made work runnable calls `wakep`: if some P is idle and
//!   nobody spins, claim the spinning slot (CAS `nmspinning` 0 -> 1) and start
//!   an M on an idle P in spinning state. At most one M is woken per
//!   submission, and none while another is already searching.
//! - A spinning M that finds work stops spinning and calls `wakep`, so while
//!   work may be queued there is always one searcher, and never more than
//!   needed.
//!
//! # The delicate dance (no lost wakeup)
//! The race: a submitter queues a G and sees `nmspinning != 0`, so it wakes
//! nobody; meanwhile the only spinner gives up. Both sides therefore order a
//! store before a load with a StoreLoad barrier (SeqCst):
//! - submitter: publish the work with a SeqCst RMW (the runnext swap in
//!   `RunQueue::try_put`, or the SeqCst `runqsize` store under the sched lock),
//!   then load `npidle`/`nmspinning` with SeqCst (`try_claim_wake`);
//! - spinner: release its P to the idle list, decrement `nmspinning` with a
//!   SeqCst RMW followed by a SeqCst fence (`stop_spinning_for_recheck`),
//!   then re-check every P's run queue and the global queue.
//!
//! In the single total order of SeqCst operations either the submitter's
//! publish precedes the spinner's fence (the spinner's re-check sees the
//! work), or the spinner's decrement precedes the submitter's load (the
//! submitter sees `nmspinning == 0` and an idle P, and wakes an M). The loom
//! model at the bottom checks exactly this with the real run queue. (loom
//! weakens SeqCst accesses to AcqRel, so under loom only, `try_claim_wake`
//! adds a SeqCst fence in place of the submitter's SeqCst store-load pair;
//! the spinner side is checked as written.)

use crate::loom::atomic::{fence, AtomicU32, Ordering};

pub(crate) struct Spinning {
    nmspinning: AtomicU32,
    npidle: AtomicU32,
}

impl Spinning {
    #[cfg(not(loom))]
    pub(crate) const fn new() -> Spinning {
        Spinning {
            nmspinning: AtomicU32::new(0),
            npidle: AtomicU32::new(0),
        }
    }

    #[cfg(loom)]
    pub(crate) fn new() -> Spinning {
        Spinning {
            nmspinning: AtomicU32::new(0),
            npidle: AtomicU32::new(0),
        }
    }

    #[inline]
    pub(crate) fn nmspinning(&self) -> u32 {
        self.nmspinning.load(Ordering::SeqCst)
    }

    #[inline]
    pub(crate) fn npidle(&self) -> u32 {
        self.npidle.load(Ordering::SeqCst)
    }

    /// Submitter side (`wakep`): true if the caller claimed the right to
    /// start a spinning M. Must follow the SeqCst publish of the work.
    #[inline]
    pub(crate) fn try_claim_wake(&self) -> bool {
        // loom models SeqCst loads and RMWs as AcqRel (loom README,
        // "Unsupported features") but models SeqCst fences exactly; the fence
        // stands in, under loom only, for the StoreLoad order that the SeqCst
        // publish and the SeqCst loads below give in C11 and on hardware.
        #[cfg(loom)]
        fence(Ordering::SeqCst);
        // SeqCst loads: pair with the spinner's decrement + fence (module note).
        if self.npidle.load(Ordering::SeqCst) == 0 {
            return false;
        }
        self.nmspinning.load(Ordering::SeqCst) == 0
            && self
                .nmspinning
                .compare_exchange(0, 1, Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
    }

    /// Claims the spinning slot if nobody spins (handoffp: a P given up by
    /// a system call searches for work when no one else does).
    pub(crate) fn try_claim_spin(&self) -> bool {
        self.nmspinning
            .compare_exchange(0, 1, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok()
    }

    /// Gives back a claim from `try_claim_wake` that found no P or M.
    pub(crate) fn undo_claim(&self) {
        self.nmspinning.fetch_sub(1, Ordering::SeqCst);
    }

    /// May a non-spinning M start spinning? (at most half the busy Ps)
    #[inline]
    pub(crate) fn may_spin(&self, gomaxprocs: u32) -> bool {
        let busy = gomaxprocs.saturating_sub(self.npidle.load(Ordering::SeqCst));
        2 * self.nmspinning.load(Ordering::SeqCst) < busy
    }

    pub(crate) fn start_spinning(&self) {
        self.nmspinning.fetch_add(1, Ordering::SeqCst);
    }

    /// A spinning M found work: it stops spinning (the caller then `wakep`s).
    pub(crate) fn stop_spinning_found_work(&self) {
        let prev = self.nmspinning.fetch_sub(1, Ordering::SeqCst);
        debug_assert!(prev > 0, "nmspinning underflow");
    }

    /// A spinning M gives up: decrement, then a StoreLoad barrier before the
    /// caller re-checks all run queues (the delicate dance).
    pub(crate) fn stop_spinning_for_recheck(&self) {
        let prev = self.nmspinning.fetch_sub(1, Ordering::SeqCst);
        debug_assert!(prev > 0, "nmspinning underflow");
        // Pairs with the submitter's SeqCst publish + SeqCst load.
        fence(Ordering::SeqCst);
    }

    /// A P went to the idle list (under the sched lock).
    pub(crate) fn p_idle(&self) {
        self.npidle.fetch_add(1, Ordering::SeqCst);
    }

    /// A P left the idle list (under the sched lock).
    pub(crate) fn p_busy(&self) {
        self.npidle.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::loom::atomic::AtomicBool;
    use crate::p::runq::RunQueue;
    use loom::sync::Arc;
    use loom::thread;
    use std::ptr::NonNull;

    /// One P (P0) runs a goroutine that spawns a G into its runnext and calls
    /// wakep; P1's M was spinning, found nothing, released P1 to the idle list
    /// and now gives up. No interleaving may leave the G queued with nobody
    /// woken and nobody having seen it.
    #[test]
    fn no_lost_wakeup_between_submitter_and_giving_up_spinner() {
        loom::model(|| {
            let spin = Arc::new(Spinning::new());
            let p0 = Arc::new(RunQueue::<usize>::new());
            // P1's M is spinning; P1 itself is already back on the idle list.
            spin.start_spinning();
            spin.p_idle();
            let woke = Arc::new(AtomicBool::new(false));

            let submitter = {
                let (spin, p0, woke) = (spin.clone(), p0.clone(), woke.clone());
                thread::spawn(move || {
                    let item = Box::leak(Box::new(7usize));
                    // SAFETY: this thread is P0's owner in the model.
                    let ov = unsafe { p0.put(NonNull::from(item), true) };
                    assert!(ov.is_none());
                    if spin.try_claim_wake() {
                        woke.store(true, Ordering::Relaxed);
                    }
                })
            };
            spin.stop_spinning_for_recheck();
            let saw_work = !p0.is_empty();
            submitter.join().unwrap();
            assert!(
                saw_work || woke.load(Ordering::Relaxed),
                "lost wakeup: work queued, spinner missed it and nobody was woken"
            );
            // SAFETY: all threads joined; this thread now owns P0.
            if let Some((item, _)) = unsafe { p0.get() } {
                // SAFETY: leaked above with Box::leak.
                drop(unsafe { Box::from_raw(item.as_ptr()) });
            }
        });
    }

    /// Two submitters racing to wake: at most one claims the spinning slot.
    #[test]
    fn at_most_one_claim_while_nobody_spins() {
        loom::model(|| {
            let spin = Arc::new(Spinning::new());
            spin.p_idle();
            spin.p_idle();
            let a = {
                let spin = spin.clone();
                thread::spawn(move || spin.try_claim_wake())
            };
            let b = spin.try_claim_wake();
            let a = a.join().unwrap();
            assert!(!(a && b), "two Ms woken for one spinning slot");
            assert!(a || b, "nobody woken although Ps are idle and nobody spins");
        });
    }
}
