//! The wake/park protocol of one `block_on` call (see `block_on/mod.rs`).
//!
//! # States
//! - `EMPTY`: no wake since the waiter last looked, and the waiter is not
//!   parked (it is polling, or about to park).
//! - `PARKED`: the waiter is parked and waits for exactly one ready. Only
//!   the waiter's park commit (`try_park`, run by the scheduler after the
//!   goroutine is switched out) sets it, and only from `EMPTY`.
//! - `NOTIFIED`: a wake came. Every wake stores it.
//!
//! # Invariants
//! - A wake that finds `PARKED` (its `swap` returns `PARKED`) is the one
//!   party that readies the waiter: the swap leaves `NOTIFIED`, so a second
//!   wake finds `NOTIFIED` and does nothing. Waking twice is harmless.
//! - A wake before the park is never lost: it leaves `NOTIFIED`, the park
//!   commit's CAS `EMPTY -> PARKED` fails and the waiter does not park.
//! - The waiter clears the state (`take`, a swap to `EMPTY`) *before* each
//!   poll, so a wake that happens during the poll is seen by the commit.
//! - Memory: a waker's writes before its wake (the value that makes the
//!   future ready) are published by the Release half of its `swap`; the
//!   waiter's `take` (Acquire) or failed commit (Acquire) pairs with it, and
//!   a parked waiter is resumed through the run queue (Release/Acquire).

use crate::loom::atomic::{AtomicU8, Ordering};

const EMPTY: u8 = 0;
const PARKED: u8 = 1;
const NOTIFIED: u8 = 2;

pub(crate) struct Signal {
    state: AtomicU8,
}

impl Signal {
    pub(crate) fn new() -> Signal {
        Signal {
            state: AtomicU8::new(EMPTY),
        }
    }

    /// The waker's side. Returns true when the waiter is parked and this
    /// caller must ready it (exactly one caller per park gets true).
    pub(crate) fn notify(&self) -> bool {
        // AcqRel: Release publishes what made the future ready (pairs with
        // `take` / the failed CAS of `try_park`); Acquire pairs with the
        // `PARKED` store of `try_park`, which the ready that follows needs.
        self.state.swap(NOTIFIED, Ordering::AcqRel) == PARKED
    }

    /// The waiter, before each poll: consumes a pending wake. Returns
    /// whether there was one.
    pub(crate) fn take(&self) -> bool {
        // Acquire: pairs with the Release of `notify`.
        self.state.swap(EMPTY, Ordering::Acquire) == NOTIFIED
    }

    /// The park commit, after the waiter is switched out: false if a wake
    /// came since `take` (then the waiter must not wait).
    pub(crate) fn try_park(&self) -> bool {
        // Release: pairs with the Acquire of `notify`. Acquire on failure:
        // pairs with its Release (the waiter polls again at once).
        self.state
            .compare_exchange(EMPTY, PARKED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! The waiter is a loom thread whose "park" waits for a `readied` count
    //! (what `park::ready` does to a parked goroutine); wakers are loom
    //! threads that make the "future" ready (a flag) and then wake.
    use super::*;
    use crate::loom::atomic::{AtomicBool, AtomicUsize};
    use loom::sync::Arc;
    use loom::thread;

    struct Model {
        signal: Signal,
        ready: AtomicBool,
        readied: AtomicUsize,
    }

    impl Model {
        fn new() -> Arc<Model> {
            Arc::new(Model {
                signal: Signal::new(),
                ready: AtomicBool::new(false),
                readied: AtomicUsize::new(0),
            })
        }
    }

    fn wake(m: &Model) {
        if m.signal.notify() {
            m.readied.fetch_add(1, Ordering::Release);
        }
    }

    /// Runs the waiter loop; returns how many times it parked.
    fn block_on(m: &Model) -> usize {
        let mut parks = 0;
        loop {
            m.signal.take();
            // "poll": Relaxed, the signal must carry the ordering.
            if m.ready.load(Ordering::Relaxed) {
                return parks;
            }
            if m.signal.try_park() {
                parks += 1;
                while m.readied.load(Ordering::Acquire) < parks {
                    thread::yield_now();
                }
            }
        }
    }

    /// One waker racing the waiter's poll and park: the waiter always
    /// finishes (no lost wake) and is readied once per park.
    #[test]
    fn a_wake_before_or_after_the_park_is_never_lost() {
        loom::model(|| {
            let m = Model::new();
            let waker = {
                let m = m.clone();
                thread::spawn(move || {
                    m.ready.store(true, Ordering::Relaxed);
                    wake(&m);
                })
            };
            let parks = block_on(&m);
            waker.join().unwrap();
            assert_eq!(m.readied.load(Ordering::Relaxed), parks);
        });
    }

    /// A spurious wake (before the value), then the real one twice, all
    /// racing the waiter's polls and parks: never more readies than parks,
    /// and the waiter finishes.
    #[test]
    fn waking_twice_readies_at_most_once_per_park() {
        loom::model(|| {
            let m = Model::new();
            let waker = {
                let m = m.clone();
                thread::spawn(move || {
                    wake(&m);
                    m.ready.store(true, Ordering::Relaxed);
                    wake(&m);
                    wake(&m);
                })
            };
            let parks = block_on(&m);
            waker.join().unwrap();
            assert_eq!(m.readied.load(Ordering::Relaxed), parks);
        });
    }
}
