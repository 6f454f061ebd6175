//! The channel lock: Go's `lock_futex` (runtime/lock_futex.go), one `u32`.
//!
//! # Why not `std::sync::Mutex`
//! A blocked `select` must hold the locks of all its channels at once and
//! release them from the scheduler after the goroutine is parked (see
//! `wait.rs`). That needs a lock that is released by a plain call, not by
//! dropping a guard: a guard per channel would need a variable-length list
//! of guards (an allocation per select). The algorithm is the one `std`'s
//! futex mutex and Go's runtime lock both use.
//!
//! # Protocol (Drepper's "mutex 2" with Go's spinning)
//! `key` is `UNLOCKED`, `LOCKED` (held, nobody sleeps) or `SLEEPING` (held,
//! and some thread may sleep on the futex).
//! - `lock`: one CAS `UNLOCKED -> LOCKED` on the fast path. Otherwise spin
//!   briefly (4 rounds of 30 pause instructions, then one `sched_yield`):
//!   the critical sections are a few dozen instructions (a queue pop, a
//!   buffer slot copy), so the holder normally releases the lock within the
//!   spin, and the waiter does not pay for a futex sleep and wakeup. Only
//!   then swap in `SLEEPING` and sleep on the futex. A thread that has slept
//!   takes the lock as `SLEEPING` (never `LOCKED`), so the other sleepers
//!   still get their wakeup when it unlocks.
//! - `unlock`: swap in `UNLOCKED`; if the old value was `SLEEPING`, wake one
//!   sleeper.
//!
//! The lock never parks a goroutine: a goroutine that holds a channel lock
//! never blocks (it either finishes its operation or parks, and parking
//! releases the lock from the scheduler), so waiting is always short and
//! blocking the M for it, as Go does with its runtime locks, is right.
//!
//! Under loom the spinning is cut to one try and the futex sleep is a
//! `yield_now` (a futex may return spuriously, so the loop is unchanged).

use crate::loom::atomic::{AtomicU32, Ordering};

const UNLOCKED: u32 = 0;
const LOCKED: u32 = 1;
const SLEEPING: u32 = 2;

/// Spin rounds before yielding the thread, and pause instructions per round
/// (Go's `active_spin` and `active_spin_cnt`).
#[cfg(not(loom))]
const ACTIVE_SPIN: u32 = 4;
#[cfg(not(loom))]
const ACTIVE_SPIN_CNT: u32 = 30;
#[cfg(loom)]
const ACTIVE_SPIN: u32 = 1;
#[cfg(loom)]
const ACTIVE_SPIN_CNT: u32 = 1;

pub(crate) struct Lock {
    key: AtomicU32,
}

impl Lock {
    pub(crate) fn new() -> Lock {
        Lock {
            key: AtomicU32::new(UNLOCKED),
        }
    }

    #[inline]
    pub(crate) fn lock(&self) {
        // Acquire: pairs with the Release swap in `unlock`, so the previous
        // holder's writes to the protected state are visible.
        if self
            .key
            .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_slow();
        }
    }

    #[cold]
    fn lock_slow(&self) {
        // What to store when we take the lock: LOCKED until we have slept,
        // then SLEEPING (other sleepers may remain).
        let mut wait = LOCKED;
        loop {
            for _ in 0..ACTIVE_SPIN {
                if self.try_take(wait) {
                    return;
                }
                for _ in 0..ACTIVE_SPIN_CNT {
                    crate::loom::hint::spin_loop();
                }
            }
            if self.try_take(wait) {
                return;
            }
            crate::loom::thread::yield_now();
            if self.try_take(wait) {
                return;
            }
            // Acquire: as in `lock` (we may take the lock here).
            if self.key.swap(SLEEPING, Ordering::Acquire) == UNLOCKED {
                return;
            }
            wait = SLEEPING;
            futex_wait(&self.key, SLEEPING);
        }
    }

    #[inline]
    fn try_take(&self, wait: u32) -> bool {
        self.key.load(Ordering::Relaxed) == UNLOCKED
            // Acquire: as in `lock`.
            && self
                .key
                .compare_exchange(UNLOCKED, wait, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
    }

    /// Releases the lock.
    ///
    /// # Safety
    /// The caller holds the lock (took it with `lock`, on any thread: a
    /// parked goroutine's lock is released by its M's scheduler).
    #[inline]
    pub(crate) unsafe fn unlock(&self) {
        // Release: pairs with the Acquire in `lock`/`lock_slow`; publishes our
        // writes to the protected state to the next holder.
        if self.key.swap(UNLOCKED, Ordering::Release) == SLEEPING {
            futex_wake(&self.key);
        }
    }
}

#[cfg(not(loom))]
#[inline]
fn futex_wait(key: &AtomicU32, expected: u32) {
    crate::sys::futex::wait(key, expected);
}

#[cfg(not(loom))]
#[cold]
fn futex_wake(key: &AtomicU32) {
    crate::sys::futex::wake(key, 1);
}

// A futex may wake spuriously, so a yield is a faithful model of the wait.
#[cfg(loom)]
fn futex_wait(_key: &AtomicU32, _expected: u32) {
    crate::loom::thread::yield_now();
}

#[cfg(loom)]
fn futex_wake(_key: &AtomicU32) {}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::cell::UnsafeCell;
    use std::sync::Arc;

    struct Counter {
        lock: Lock,
        n: UnsafeCell<u64>,
    }
    // SAFETY: `n` is only touched with `lock` held.
    unsafe impl Sync for Counter {}

    #[test]
    fn lock_excludes_under_contention() {
        const THREADS: u64 = 4;
        const ITERS: u64 = 200_000;
        let c = Arc::new(Counter {
            lock: Lock::new(),
            n: UnsafeCell::new(0),
        });
        let hs: Vec<_> = (0..THREADS)
            .map(|_| {
                let c = c.clone();
                std::thread::spawn(move || {
                    for _ in 0..ITERS {
                        c.lock.lock();
                        // SAFETY: we hold the lock.
                        unsafe { *c.n.get() += 1 };
                        // SAFETY: we hold the lock.
                        unsafe { c.lock.unlock() };
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        // SAFETY: all threads joined.
        assert_eq!(unsafe { *c.n.get() }, THREADS * ITERS);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;
    use loom::thread;

    /// Two threads increment a counter under the lock, twice each: no
    /// interleaving loses an increment or overlaps two critical sections
    /// (loom's cell checks the latter), and the second round exercises the
    /// SLEEPING hand-back.
    #[test]
    fn lock_is_mutual_exclusion() {
        loom::model(|| {
            let lock = Arc::new(Lock::new());
            let n = Arc::new(UnsafeCell::new(0u32));
            let bump = |lock: &Lock, n: &UnsafeCell<u32>| {
                lock.lock();
                // SAFETY: we hold the lock.
                n.with_mut(|p| unsafe { *p += 1 });
                // SAFETY: we hold the lock.
                unsafe { lock.unlock() };
            };
            let h = {
                let (lock, n) = (lock.clone(), n.clone());
                thread::spawn(move || {
                    bump(&lock, &n);
                    bump(&lock, &n);
                })
            };
            bump(&lock, &n);
            bump(&lock, &n);
            h.join().unwrap();
            // SAFETY: all threads joined.
            assert_eq!(n.with(|p| unsafe { *p }), 4);
        });
    }
}
