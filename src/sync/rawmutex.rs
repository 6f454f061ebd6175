//! The mutex state machine (Go's sync/mutex.go), without the data: used by
//! [`Mutex`](super::Mutex), and inside `RwLock` (the writers' lock) and
//! `Once`.
//!
//! # The state word (`state: i32`)
//! ```text
//!   31 ..................... 3    2          1        0
//!  [ waiters (blocked in sema) ][ STARVING ][ WOKEN ][ LOCKED ]
//! ```
//! - `LOCKED`: somebody owns the mutex. Set only by the CAS that acquires it
//!   (the fast path, a `lock_slow` round, `try_lock`) or, in starvation
//!   mode, by the woken waiter it was handed to; cleared only by `unlock`.
//! - `WOKEN`: a waiter is awake and competing (a spinner that announced
//!   itself, or the waiter `unlock` just woke), so `unlock` must not wake
//!   another. Set by a spinner's CAS or by `unlock_slow`'s CAS that also
//!   takes one waiter off the count; cleared by that waiter's next CAS
//!   (`awoke`): exactly one party owns the bit.
//! - `STARVING`: a waiter has waited more than [`STARVATION_THRESHOLD`]
//!   (1 ms). Set by a woken waiter that is starving and finds the mutex
//!   locked; cleared by the waiter that takes ownership in starvation mode
//!   when it is the last waiter or waited less than the threshold.
//! - waiters: goroutines/threads counted as blocked in `sema`; incremented
//!   by the CAS that precedes `semacquire`, decremented by `unlock_slow`
//!   when it wakes one (normal mode) or by the handed-to waiter (starvation
//!   mode).
//!
//! # Normal and starvation modes
//! Normal mode: waiters queue FIFO in the runtime sema, but a woken waiter
//! does not own the mutex: it competes with new arrivals, which have the
//! advantage of already running (and may spin briefly first). A woken waiter
//! that loses is requeued at the *front* (`semacquire` with `lifo`). Once a
//! waiter has waited over 1 ms it sets `STARVING`: `unlock` then hands the
//! mutex directly to the first waiter (a direct grant: `semrelease` with
//! `handoff`; the
//! releaser yields so the waiter runs at once on its time slice), and new
//! arrivals neither spin nor try to grab it; they queue at the tail. The
//! waiter that receives ownership switches back to normal mode if it is the
//! last waiter or did not itself wait 1 ms.
//!
//! # No lost wakeup, no double ownership
//! Every decision is one CAS on the word, re-read on failure. A waiter is
//! counted in the word before it sleeps in the sema, and `unlock` wakes only
//! through `semrelease`, which leaves a token even when the counted waiter
//! has not reached the sema queue yet (the sema's own protocol). In
//! starvation mode `unlock` leaves `LOCKED` clear but `STARVING` set, which
//! no one but the handed-to waiter may act on: new arrivals see `STARVING`
//! and queue, so ownership passes exactly once.
//!
//! # Memory ordering
//! `unlock`'s `fetch_sub` is Release; every CAS that may take the lock
//! (the fast path, `try_lock`, each `lock_slow` round) and the
//! starvation-mode handover add are Acquire: critical sections are ordered
//! through the release sequence of the word (later RMWs extend it). The
//! spinner's `WOKEN` CAS and `unlock_slow`'s wake CAS are Relaxed: they
//! publish nothing, and a woken waiter is ordered after its waker by the
//! sema.

use super::sema;
use super::waitcell::{self, WaitReason};
use crate::loom::atomic::{AtomicI32, AtomicU32, Ordering};

const LOCKED: i32 = 1;
const WOKEN: i32 = 2;
const STARVING: i32 = 4;
const WAITER_SHIFT: u32 = 3;

/// Waiting longer than this makes a waiter switch the mutex to starvation
/// mode (Go's `starvationThresholdNs`).
#[cfg(not(loom))]
const STARVATION_THRESHOLD: std::time::Duration = std::time::Duration::from_millis(1);

/// Spin rounds before queueing (Go's `active_spin`) and pause instructions
/// per round (Go's `active_spin_cnt`).
#[cfg(not(loom))]
const ACTIVE_SPIN: u32 = 4;
#[cfg(not(loom))]
const ACTIVE_SPIN_CNT: u32 = 30;

pub(crate) struct RawMutex {
    state: AtomicI32,
    /// The runtime semaphore waiters sleep on (tokens = wakeups).
    sema: AtomicU32,
    /// Loom has no clock: models choose whether every wait counts as
    /// starving (threshold 0) or none does (threshold infinite).
    #[cfg(loom)]
    starve: bool,
}

impl RawMutex {
    #[cfg(not(loom))]
    pub(crate) const fn new() -> RawMutex {
        RawMutex {
            state: AtomicI32::new(0),
            sema: AtomicU32::new(0),
        }
    }

    #[cfg(loom)]
    pub(crate) fn new() -> RawMutex {
        RawMutex::with_starvation(false)
    }

    /// A mutex whose waiters all count as starving (`true`) or never do.
    #[cfg(loom)]
    pub(crate) fn with_starvation(starve: bool) -> RawMutex {
        RawMutex {
            state: AtomicI32::new(0),
            sema: AtomicU32::new(0),
            starve,
        }
    }

    /// Locks, parking the caller (with `reason`) while it cannot.
    #[inline]
    pub(crate) fn lock(&self, reason: WaitReason) {
        // Acquire: pairs with the Release fetch_sub in `unlock`.
        if self
            .state
            .compare_exchange(0, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_slow(reason);
        }
    }

    /// Locks if that is possible without waiting (Go's `TryLock`): fails
    /// while locked or in starvation mode (the mutex is promised to a
    /// waiter).
    #[inline]
    pub(crate) fn try_lock(&self) -> bool {
        let old = self.state.load(Ordering::Relaxed);
        if old & (LOCKED | STARVING) != 0 {
            return false;
        }
        // Acquire: pairs with the Release fetch_sub in `unlock`.
        self.state
            .compare_exchange(old, old | LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Unlocks. The caller must own the lock.
    #[inline]
    pub(crate) fn unlock(&self) {
        // Release: pairs with the Acquire of the next owner's CAS (or of
        // the handed-to waiter's fetch_add in starvation mode).
        let new = self.state.fetch_sub(LOCKED, Ordering::Release) - LOCKED;
        if new != 0 {
            self.unlock_slow(new);
        }
    }

    #[cold]
    #[inline(never)]
    fn lock_slow(&self, reason: WaitReason) {
        let mut waited = Waited::default();
        let mut starving = false;
        let mut awoke = false;
        let mut iter = 0;
        let mut old = self.state.load(Ordering::Relaxed);
        loop {
            // Spin only in normal mode while locked, and only while the
            // runtime says spinning can pay off (Go's runtime_canSpin).
            if old & (LOCKED | STARVING) == LOCKED && can_spin(iter) {
                // Announce ourselves (WOKEN) so that unlock does not wake a
                // sleeper that would only compete with us.
                if !awoke
                    && old & WOKEN == 0
                    && old >> WAITER_SHIFT != 0
                    && self
                        .state
                        .compare_exchange(old, old | WOKEN, Ordering::Relaxed, Ordering::Relaxed)
                        .is_ok()
                {
                    awoke = true;
                }
                do_spin();
                iter += 1;
                old = self.state.load(Ordering::Relaxed);
                continue;
            }
            let mut new = old;
            // Do not try to grab a starving mutex: it is promised to the
            // first waiter.
            if old & STARVING == 0 {
                new |= LOCKED;
            }
            if old & (LOCKED | STARVING) != 0 {
                new += 1 << WAITER_SHIFT;
            }
            // Switch to starvation mode, but only if the mutex is locked:
            // an unlocked mutex in starvation mode would have no one to
            // hand it over (unlock expects waiters when STARVING is set).
            if starving && old & LOCKED != 0 {
                new |= STARVING;
            }
            if awoke {
                // We own WOKEN (we set it, or unlock set it for us).
                if new & WOKEN == 0 {
                    waitcell::fatal("sync: inconsistent mutex state");
                }
                new &= !WOKEN;
            }
            // Acquire: when this CAS takes the lock it pairs with the
            // Release fetch_sub in `unlock`.
            match self
                .state
                .compare_exchange(old, new, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => {
                    if old & (LOCKED | STARVING) == 0 {
                        return; // locked with the CAS
                    }
                    // Woken before: go back to the front of the queue.
                    let lifo = waited.started();
                    sema::semacquire(&self.sema, lifo, reason);
                    starving = starving || self.waited_too_long(&waited);
                    old = self.state.load(Ordering::Relaxed);
                    if old & STARVING != 0 {
                        // Handed over: the mutex is ours, LOCKED is clear
                        // and we are still counted as a waiter.
                        if old & (LOCKED | WOKEN) != 0 || old >> WAITER_SHIFT == 0 {
                            waitcell::fatal("sync: inconsistent mutex state");
                        }
                        let mut delta = LOCKED - (1 << WAITER_SHIFT);
                        if !starving || old >> WAITER_SHIFT == 1 {
                            // Leave starvation mode: in it, every handover
                            // costs a context switch, and a last waiter
                            // leaving it set would stall the next arrival.
                            delta -= STARVING;
                        }
                        // Acquire: pairs with the Release fetch_sub of the
                        // unlock that handed the mutex over.
                        self.state.fetch_add(delta, Ordering::Acquire);
                        return;
                    }
                    awoke = true;
                    iter = 0;
                }
                Err(cur) => old = cur,
            }
        }
    }

    #[cold]
    #[inline(never)]
    fn unlock_slow(&self, new: i32) {
        if (new + LOCKED) & LOCKED == 0 {
            waitcell::fatal("sync: unlock of unlocked mutex");
        }
        if new & STARVING == 0 {
            let mut old = new;
            loop {
                // No waiters, or someone already locked it, or a waiter is
                // already awake (WOKEN), or it went to starvation mode (the
                // next unlock hands it over): nobody to wake.
                if old >> WAITER_SHIFT == 0 || old & (LOCKED | WOKEN | STARVING) != 0 {
                    return;
                }
                // Take one waiter off the count and give it WOKEN.
                let new = (old - (1 << WAITER_SHIFT)) | WOKEN;
                match self
                    .state
                    .compare_exchange(old, new, Ordering::Relaxed, Ordering::Relaxed)
                {
                    Ok(_) => {
                        sema::semrelease(&self.sema, false);
                        return;
                    }
                    Err(cur) => old = cur,
                }
            }
        } else {
            // Starvation mode: hand ownership to the first waiter, and let it
            // run now on our time slice. LOCKED stays clear; the waiter sets
            // it. STARVING keeps new arrivals away meanwhile.
            sema::semrelease(&self.sema, true);
        }
    }

    #[cfg(not(loom))]
    fn waited_too_long(&self, w: &Waited) -> bool {
        w.0.is_some_and(|t| t.elapsed() > STARVATION_THRESHOLD)
    }

    #[cfg(loom)]
    fn waited_too_long(&self, _w: &Waited) -> bool {
        self.starve
    }

    /// The state word (for the loom models).
    #[cfg(all(test, loom))]
    pub(crate) fn state(&self) -> i32 {
        self.state.load(Ordering::SeqCst)
    }
}

/// When a waiter first blocked (Go's `waitStartTime`).
#[derive(Default)]
struct Waited(
    #[cfg(not(loom))] Option<std::time::Instant>,
    #[cfg(loom)] bool,
);

impl Waited {
    /// Records the first wait; true if the caller had waited before.
    #[cfg(not(loom))]
    fn started(&mut self) -> bool {
        let before = self.0.is_some();
        self.0.get_or_insert_with(std::time::Instant::now);
        before
    }

    #[cfg(loom)]
    fn started(&mut self) -> bool {
        std::mem::replace(&mut self.0, true)
    }
}

/// Go's `sync_runtime_canSpin`: spin only a few rounds, only on a multicore
/// machine, only while another P is running goroutines (someone may unlock
/// soon) and nobody is idle or spinning (there is no better use of this P),
/// and only with an empty local run queue (work is waiting for this P). A
/// plain thread has no P to waste: the first two conditions apply.
#[cfg(not(loom))]
#[inline]
fn can_spin(iter: u32) -> bool {
    if iter >= ACTIVE_SPIN || ncpu() <= 1 {
        return false;
    }
    let Some(m) = crate::m::current() else {
        return true;
    };
    let s = crate::runtime::sched();
    if s.gomaxprocs() <= s.spin.npidle() + s.spin.nmspinning() + 1 {
        return false;
    }
    // SAFETY: `m` is the calling thread's own M.
    match unsafe { m.p() } {
        Some(pp) => pp.runq_is_empty(),
        None => false,
    }
}

/// Under loom: one round, so models see a spinner take `WOKEN`.
#[cfg(loom)]
#[inline]
fn can_spin(iter: u32) -> bool {
    iter < 1
}

/// Go's `procyield(active_spin_cnt)`: a short busy wait that never leaves
/// the OS thread.
#[cfg(not(loom))]
#[inline]
fn do_spin() {
    for _ in 0..ACTIVE_SPIN_CNT {
        std::hint::spin_loop();
    }
}

#[cfg(loom)]
#[inline]
fn do_spin() {
    loom::thread::yield_now();
}

/// CPUs available to the process, read once (Go's `ncpu`).
#[cfg(not(loom))]
fn ncpu() -> usize {
    use std::sync::atomic::AtomicUsize;
    static NCPU: AtomicUsize = AtomicUsize::new(0);
    // Relaxed: a cache of an immutable value; a racing first read computes
    // the same number.
    match NCPU.load(Ordering::Relaxed) {
        0 => {
            let n = crate::runtime::env::default_procs();
            NCPU.store(n, Ordering::Relaxed);
            n
        }
        n => n,
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Loom models of the state word with loom threads as waiters
    //! (`RUSTFLAGS="--cfg loom" cargo test --release --lib rawmutex`).
    use super::*;
    use crate::sync::waitcell::model;
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;
    use loom::thread;

    struct Counter {
        m: RawMutex,
        n: UnsafeCell<u32>,
    }

    // SAFETY: `n` is only accessed under `m` (which loom checks).
    unsafe impl Sync for Counter {}

    fn incr(c: &Counter, try_first: bool) {
        if !(try_first && c.m.try_lock()) {
            c.m.lock(WaitReason::SyncMutexLock);
        }
        // SAFETY: we hold the mutex; loom reports any unordered access.
        c.n.with_mut(|n| unsafe { *n += 1 });
        c.m.unlock();
    }

    /// `threads` threads (plus the main one) each increment under the lock
    /// `rounds` times. Loom checks mutual exclusion (the cell), and that no
    /// interleaving loses a wakeup (a deadlock fails the model); at the end
    /// the count is exact and the word is back to zero.
    fn counter_model(
        bound: Option<usize>,
        starve: bool,
        threads: usize,
        rounds: usize,
        try_first: bool,
    ) {
        model(bound, move || {
            let c = Arc::new(Counter {
                m: RawMutex::with_starvation(starve),
                n: UnsafeCell::new(0),
            });
            let ts: Vec<_> = (0..threads)
                .map(|_| {
                    let c = c.clone();
                    thread::spawn(move || {
                        for _ in 0..rounds {
                            incr(&c, try_first);
                        }
                    })
                })
                .collect();
            for _ in 0..rounds {
                incr(&c, false);
            }
            for t in ts {
                t.join().unwrap();
            }
            // SAFETY: all other threads have been joined.
            assert_eq!(
                c.n.with(|n| unsafe { *n }),
                (threads as u32 + 1) * rounds as u32
            );
            assert_eq!(c.m.state(), 0, "state word not back to idle");
        });
    }

    /// Normal mode: barging, spinners taking WOKEN, lifo requeue.
    #[test]
    fn normal_mode_two_threads() {
        counter_model(None, false, 1, 2, false);
    }

    /// Three contenders: a woken waiter competing with a spinner and a
    /// newcomer.
    #[test]
    fn normal_mode_three_threads() {
        counter_model(Some(4), false, 2, 1, true);
    }

    /// Every wait counts as starving: STARVING is set by a woken waiter,
    /// `unlock` hands over through the sema, the last waiter clears it.
    #[test]
    fn starvation_mode_handoff() {
        counter_model(Some(3), true, 2, 2, false);
    }
}
