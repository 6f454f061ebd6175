//! `WaitGroup`: Go's sync/waitgroup.go.
//!
//! # The state word (`state: u64`)
//! High 32 bits: the counter (signed, changed by `add`); bit 31: [`BOUND`]
//! (synctest, below); low 31 bits: the number of waiters blocked (or
//! about to block) in `sema`.
//!
//! # Protocol
//! - `add(delta)`: one atomic add on the high half. If the counter becomes
//!   zero with waiters, the caller is the one that releases them: it resets
//!   the whole word to 0 and releases `sema` once per waiter. Before that
//!   it checks the word did not change since its add: once the counter is
//!   zero with waiters, the only legal operation is this reset ("Add called
//!   concurrently with Wait" otherwise, as in Go).
//! - `wait()`: return if the counter is zero; otherwise CAS the waiter count
//!   up and sleep on `sema`. A waiter that wakes expects the word to be 0 (a
//!   new round started before it returned is Go's "reused before previous
//!   Wait has returned").
//!
//! No lost wakeup: a waiter is counted by a CAS that also checks the counter
//! is non-zero, so the `add` that brings the counter to zero sees it; the
//! sema keeps the release even if the waiter has not slept yet.
//!
//! # Memory ordering
//! `add` is AcqRel: each `done` releases what its goroutine did, and the add
//! that reaches zero acquires all of them (the adds form one release
//! sequence) before releasing the sema, which the waiters acquire. A waiter
//! that finds the counter already zero pairs by its Acquire load with those
//! adds, or with the Release reset to 0 of the add that released waiters
//! (a plain store ends the release sequence, so it must release itself:
//! the loom model found that).
//!
//! # synctest bubbles (Go 1.25's rules)
//! A group whose counter a member of a synctest bubble raises from zero
//! is *bound* to that bubble ([`BOUND`] in the word, the bubble's number
//! in `owner`) until the counter is back at zero (the `add` that gets it
//! there clears the bit with the waiters, or with a CAS from exactly
//! `BOUND` when there are none). While bound:
//! - an `add` (or `done`) from outside the bubble panics (`sync:
//!   WaitGroup.Add called from inside and outside synctest bubble`), as
//!   does an `add` in a bubble on a group whose counter was raised outside
//!   any bubble, and an `add` from another bubble (`... from multiple
//!   synctest bubbles`). Go makes these fatal errors; here they are
//!   misuse panics, raised before the word changes (an `add` from outside
//!   made while no bubble exists takes its add back first).
//! - a member's `wait` is durable: only the bubble's goroutines can bring
//!   the counter to zero. A member's `wait` on a group that is not bound
//!   to its bubble is not (`runtime::bubble::not_durable_begin`): the
//!   bubble's clock waits for it, as for a channel made outside.
//!
//! An `add` in a bubble checks and changes the word in one CAS, so a
//! group cannot be unbound between the check and the add. `owner` is
//! written only while the word is 0, under [`BIND`], before the CAS that
//! sets [`BOUND`] (Release), and read after a load that saw it (Acquire).
//! Outside bubbles the cost is one relaxed load of a global (no bubble
//! exists) and a test of the bit in the word the add returns.

use std::sync::Arc;

use super::sema;
use super::waitcell::{self, WaitReason};
use crate::loom::atomic::{AtomicU32, AtomicU64, Ordering};

/// The bit of the state word that binds a group to a synctest bubble
/// (module note; Go's `waitGroupBubbleFlag`).
const BOUND: u64 = 0x8000_0000;
/// The waiter count's bits.
const WAITERS: u64 = 0x7fff_ffff;

/// Serializes the binding of groups to bubbles (the first `add` in a
/// bubble: rare), so that two bubbles cannot both write `owner`.
#[cfg(not(loom))]
static BIND: std::sync::Mutex<()> = std::sync::Mutex::new(());

const INSIDE_AND_OUTSIDE: &str =
    "sync: WaitGroup.Add called from inside and outside synctest bubble";
const MULTIPLE_BUBBLES: &str = "sync: WaitGroup.Add called from multiple synctest bubbles";

/// The shared state of a [`WaitGroup`] (Go's `WaitGroup` struct).
pub(crate) struct RawWaitGroup {
    state: AtomicU64,
    sema: AtomicU32,
    /// The synctest bubble the group is bound to, while [`BOUND`] is set.
    #[cfg(not(loom))]
    owner: std::sync::atomic::AtomicU64,
}

impl RawWaitGroup {
    waitcell::loom_const_fn! {
        pub(crate) fn new() -> RawWaitGroup {
            RawWaitGroup {
                state: AtomicU64::new(0),
                sema: AtomicU32::new(0),
                #[cfg(not(loom))]
                owner: std::sync::atomic::AtomicU64::new(0),
            }
        }
    }

    pub(crate) fn add(&self, delta: isize) {
        let delta = i32::try_from(delta)
            .unwrap_or_else(|_| panic!("sync: WaitGroup delta {delta} out of range"));
        let d = (delta as i64 as u64) << 32;
        // A member of a synctest bubble adds with its check (module note).
        #[cfg(not(loom))]
        let bubble = if crate::runtime::bubble::virtual_active() {
            crate::runtime::bubble::current_id()
        } else {
            None
        };
        #[cfg(loom)]
        let bubble: Option<u64> = None;
        let state = match bubble {
            #[cfg(not(loom))]
            Some(id) => self.add_in_bubble(id, d),
            _ => {
                // AcqRel: see the module note (release our work, and for
                // the add that reaches zero, acquire everybody's).
                let state = self.state.fetch_add(d, Ordering::AcqRel).wrapping_add(d);
                if state & BOUND != 0 {
                    // Bound to a bubble, and we are not in it: take the add
                    // back (Relaxed: a misuse path), then panic.
                    self.state.fetch_sub(d, Ordering::Relaxed);
                    panic!("{INSIDE_AND_OUTSIDE}");
                }
                state
            }
        };
        let v = (state >> 32) as i32;
        let w = (state & WAITERS) as u32;
        if v < 0 {
            panic!("sync: negative WaitGroup counter");
        }
        if w != 0 && delta > 0 && v == delta {
            // The first add of a new round raced with a Wait.
            panic!("sync: WaitGroup misuse: Add called concurrently with Wait");
        }
        if v > 0 {
            return;
        }
        if w == 0 {
            if state & BOUND != 0 {
                // Back at zero with no waiter: unbound, unless an add from
                // zero in the same bubble came first (it keeps the bit).
                // Relaxed: the bit is read with the word's other changes.
                let _ = self
                    .state
                    .compare_exchange(BOUND, 0, Ordering::Relaxed, Ordering::Relaxed);
            }
            return;
        }
        // The counter is zero and there are waiters: nobody may change the
        // word now but us. Relaxed: a misuse check on a word we just read.
        if self.state.load(Ordering::Relaxed) != state {
            panic!("sync: WaitGroup misuse: Add called concurrently with Wait");
        }
        // Release: a `wait` that starts now and reads this 0 returns without
        // the sema; it must still see every `done`'s work, which our AcqRel
        // add acquired (the sleeping waiters get it through the sema). A
        // bound group is unbound with it.
        self.state.store(0, Ordering::Release);
        for _ in 0..w {
            sema::semrelease(&self.sema, false);
        }
    }

    /// The add of a member of synctest bubble `id` (module note): checks
    /// the binding and adds `d` in one CAS, binding the group if its word
    /// is 0. Returns the new word.
    #[cfg(not(loom))]
    #[cold]
    #[inline(never)]
    fn add_in_bubble(&self, id: u64, d: u64) -> u64 {
        // Acquire: pairs with the binder's Release CAS, for `owner`.
        let mut s = self.state.load(Ordering::Acquire);
        loop {
            let new = if s & BOUND != 0 {
                // Relaxed: ordered by the Acquire load of the word.
                if self.owner.load(std::sync::atomic::Ordering::Relaxed) != id {
                    panic!("{MULTIPLE_BUBBLES}");
                }
                s.wrapping_add(d)
            } else if s != 0 {
                // Raised (or waited on) outside any bubble.
                panic!("{INSIDE_AND_OUTSIDE}");
            } else {
                let _bind = BIND.lock().unwrap_or_else(|e| e.into_inner());
                // Relaxed: `owner` is published by the CAS below.
                self.owner.store(id, std::sync::atomic::Ordering::Relaxed);
                // AcqRel: the add's own ordering (module note), and Release
                // for `owner`.
                match self.state.compare_exchange(
                    0,
                    BOUND.wrapping_add(d),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => return BOUND.wrapping_add(d),
                    Err(cur) => {
                        s = cur;
                        continue;
                    }
                }
            };
            // AcqRel as the plain add; Acquire on failure, for `owner`.
            match self
                .state
                .compare_exchange_weak(s, new, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return new,
                Err(cur) => s = cur,
            }
        }
    }

    /// Whether a member of a synctest bubble waiting on this group (word
    /// `state`) waits durably: the group is bound to its bubble. If not,
    /// it is marked as not durably blocked (module note); returns whether
    /// it was, for the unmark after the wait.
    #[cfg(not(loom))]
    #[cold]
    #[inline(never)]
    fn mark_wait(&self, state: u64) -> bool {
        let Some(id) = crate::runtime::bubble::current_id() else {
            return false;
        };
        // Relaxed: `state` was loaded with Acquire.
        if state & BOUND != 0 && self.owner.load(std::sync::atomic::Ordering::Relaxed) == id {
            return false;
        }
        crate::runtime::bubble::not_durable_begin()
    }

    pub(crate) fn wait(&self) {
        // Acquire: pairs with the AcqRel adds (module note).
        let mut state = self.state.load(Ordering::Acquire);
        loop {
            if (state >> 32) as i32 == 0 {
                return;
            }
            // Count ourselves as a waiter. Acquire on failure: we may return
            // on the value we read.
            match self.state.compare_exchange_weak(
                state,
                state + 1,
                Ordering::Relaxed,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    #[cfg(not(loom))]
                    let marked = crate::runtime::bubble::virtual_active() && self.mark_wait(state);
                    sema::semacquire(&self.sema, false, WaitReason::SyncWaitGroupWait);
                    #[cfg(not(loom))]
                    if marked {
                        crate::runtime::bubble::chan_op_done();
                    }
                    // Relaxed: a misuse check.
                    if self.state.load(Ordering::Relaxed) != 0 {
                        panic!("sync: WaitGroup is reused before previous Wait has returned");
                    }
                    return;
                }
                Err(cur) => state = cur,
            }
        }
    }

    /// The counter (for the loom model).
    #[cfg(all(test, loom))]
    fn counter(&self) -> i32 {
        (self.state.load(Ordering::SeqCst) >> 32) as i32
    }
}

/// Waits for a collection of goroutines (or threads) to finish (Go's
/// `sync.WaitGroup`). `Clone` gives another handle to the same group.
///
/// The counter starts at zero: [`add`](WaitGroup::add) the number of tasks
/// before starting them, call [`done`](WaitGroup::done) as each finishes,
/// and [`wait`](WaitGroup::wait) parks (a goroutine) or blocks (a thread)
/// until the counter is zero. A negative counter panics with Go's message
/// `sync: negative WaitGroup counter`. A group may be reused once the
/// previous `wait`s have returned.
///
/// `add` and `done` are one atomic operation unless they release waiters.
///
/// ```
/// use goroutine::sync::WaitGroup;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
///
/// goroutine::run(|| {
///     let wg = WaitGroup::new();
///     let n = Arc::new(AtomicUsize::new(0));
///     for _ in 0..8 {
///         wg.add(1);
///         let (wg, n) = (wg.clone(), n.clone());
///         goroutine::go(move || {
///             n.fetch_add(1, Ordering::Relaxed);
///             wg.done();
///         });
///     }
///     wg.wait();
///     assert_eq!(n.load(Ordering::Relaxed), 8);
/// });
/// ```
#[derive(Clone)]
pub struct WaitGroup {
    inner: Arc<RawWaitGroup>,
}

impl WaitGroup {
    /// A new group with the counter at zero.
    // entry: a constructor; no runtime state
    pub fn new() -> WaitGroup {
        WaitGroup {
            inner: Arc::new(RawWaitGroup::new()),
        }
    }

    /// Adds `delta` (which may be negative) to the counter; at zero, every
    /// waiter is released.
    ///
    /// # Panics
    /// If the counter goes negative (`sync: negative WaitGroup counter`),
    /// if `delta` does not fit the 32-bit counter, or on Go's detected
    /// misuses (a positive `add` from zero racing with `wait`; a group
    /// used both inside and outside a synctest bubble, or in two bubbles,
    /// while its counter is not zero: `crate::synctest`'s note, "Misuse").
    #[inline]
    pub fn add(&self, delta: isize) {
        #[cfg(not(loom))]
        crate::runtime::entry::call(|| self.inner.add(delta));
        #[cfg(loom)]
        self.inner.add(delta);
    }

    /// Decrements the counter by one (`add(-1)`).
    #[inline]
    pub fn done(&self) {
        #[cfg(not(loom))]
        crate::runtime::entry::call(|| self.inner.add(-1));
        #[cfg(loom)]
        self.inner.add(-1);
    }

    /// Waits until the counter is zero.
    #[inline(always)]
    pub fn wait(&self) {
        self.wait_zero();
        // A caller that ends with `wait` keeps its frame in dumps.
        #[cfg(not(loom))]
        crate::traceback::keep_caller_frame();
    }

    /// The body of [`wait`](Self::wait), out of line.
    #[inline(never)]
    fn wait_zero(&self) {
        #[cfg(not(loom))]
        crate::runtime::entry::call(|| self.inner.wait());
        #[cfg(loom)]
        self.inner.wait();
    }
}

impl Default for WaitGroup {
    fn default() -> WaitGroup {
        WaitGroup::new()
    }
}

impl std::fmt::Debug for WaitGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Relaxed: a snapshot for display.
        let s = self.inner.state.load(Ordering::Relaxed);
        f.debug_struct("WaitGroup")
            .field("counter", &((s >> 32) as i32))
            .field("waiters", &((s & WAITERS) as u32))
            .finish()
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Loom model (`RUSTFLAGS="--cfg loom" cargo test --release --lib waitgroup`).
    use super::*;
    use crate::sync::waitcell::model;
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;
    use loom::thread;

    struct Shared {
        wg: RawWaitGroup,
        out: [UnsafeCell<u32>; 2],
    }

    // SAFETY: each `out` cell is written by one worker before its `done`
    // and read by the waiters after `wait` (which loom checks).
    unsafe impl Sync for Shared {}

    /// Two workers `done` while two threads wait: both waiters return, and
    /// both see both workers' writes (loom checks the cells' ordering).
    #[test]
    fn done_releases_all_waiters() {
        model(Some(3), || {
            let s = Arc::new(Shared {
                wg: RawWaitGroup::new(),
                out: [UnsafeCell::new(0), UnsafeCell::new(0)],
            });
            s.wg.add(2);
            let workers: Vec<_> = (0..2)
                .map(|i| {
                    let s = s.clone();
                    thread::spawn(move || {
                        // SAFETY: only this worker writes out[i] before done.
                        s.out[i].with_mut(|p| unsafe { *p = 1 });
                        s.wg.add(-1);
                    })
                })
                .collect();
            let waiter = {
                let s = s.clone();
                thread::spawn(move || {
                    s.wg.wait();
                    // SAFETY: after wait, the workers are done writing.
                    let sum: u32 = s.out.iter().map(|c| c.with(|p| unsafe { *p })).sum();
                    assert_eq!(sum, 2);
                })
            };
            s.wg.wait();
            // SAFETY: as above.
            let sum: u32 = s.out.iter().map(|c| c.with(|p| unsafe { *p })).sum();
            assert_eq!(sum, 2);
            for w in workers {
                w.join().unwrap();
            }
            waiter.join().unwrap();
            assert_eq!(s.wg.counter(), 0);
        });
    }
}
