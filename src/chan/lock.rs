//! The channel lock: a test-and-test-and-set spinlock that spins briefly,
//! then yields the thread, with a release-store unlock.
//!
//! # Why not `std::sync::Mutex`
//! A blocked `select` holds the locks of all its channels at once and
//! releases them from the scheduler after the goroutine is parked (see
//! `select.rs`). That needs a lock released by a plain call, not by dropping
//! a guard: a guard per channel would need a variable-length list of guards
//! (an allocation per select).
//!
//! # Why a spinlock and not a futex lock (Go's `lock_futex`)
//! A futex lock must learn at unlock whether someone sleeps, so its unlock
//! is an atomic swap. Here unlock is one release store, which saves an
//! atomic read-modify-write on every channel operation: with a direct send
//! costing a few of them, that is worth about 6-8% of an unbuffered
//! ping-pong round trip (measured). Spinning is right because of how the
//! lock is used:
//! - critical sections are a few dozen instructions (a queue pop, a slot
//!   copy, a ring index update), never a system call or an allocation, and
//!   run no user code (no `Drop` of a value runs under a channel lock);
//! - a goroutine never parks or blocks while holding one: a blocking
//!   operation parks first and its M's scheduler releases the lock right
//!   after the switch, on the same thread.
//!
//! So the lock is normally free again within the spin. Only when the OS
//! preempts a holder does a waiter wait longer; then it yields its thread
//! (letting the holder run if they share a CPU), and after many yields it
//! sleeps in short naps, so that a long-descheduled holder does not cost a
//! whole CPU.
//!
//! Measured on a 16-core machine with 64 workers selecting on one channel
//! (fanout64), a Go-style futex lock was slower than this one at every
//! worker count from 2 to 16, and so was pingpong (BENCHMARKS.md,
//! 2026-11-27 third stop).
//!
//! # Protocol
//! `key` is `UNLOCKED` or `LOCKED`. `lock`: CAS `UNLOCKED -> LOCKED`
//! (Acquire); on failure spin on plain loads until the lock looks free and
//! retry (test-and-test-and-set: waiters do not bounce the cache line with
//! RMWs). `unlock`: store `UNLOCKED` (Release).
//! `lock_or(check)`: the same, but before each wait step it runs `check`
//! and returns its answer instead of the lock once it has one (the
//! non-blocking channel operations: their lock-free check may decide while
//! the holder works, see `fast.rs`).
//!
//! Under loom every wait step is a `yield_now`.

use crate::loom::atomic::{AtomicU32, Ordering};

const UNLOCKED: u32 = 0;
const LOCKED: u32 = 1;

/// Spin rounds, and pause instructions per round (Go's `active_spin` and
/// `active_spin_cnt`), before the first yield.
#[cfg(not(loom))]
const ACTIVE_SPIN: u32 = 4;
#[cfg(not(loom))]
const ACTIVE_SPIN_CNT: u32 = 30;
#[cfg(loom)]
const ACTIVE_SPIN: u32 = 0;
#[cfg(loom)]
const ACTIVE_SPIN_CNT: u32 = 0;

/// Yields before the waiter starts napping.
#[cfg(not(loom))]
const YIELDS: u32 = 100;
#[cfg(not(loom))]
const NAP: std::time::Duration = std::time::Duration::from_micros(20);

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
        #[cfg(not(loom))]
        crate::runtime::asyncpreempt::debug_check_guarded();
        if !self.try_lock() {
            self.lock_slow();
        }
    }

    #[inline]
    fn try_lock(&self) -> bool {
        // Acquire: pairs with the Release store in `unlock`, so the previous
        // holder's writes to the protected state are visible.
        self.key
            .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    #[inline]
    fn looks_free(&self) -> bool {
        self.key.load(Ordering::Relaxed) == UNLOCKED
    }

    /// Takes the lock, unless `give_up` returns an answer first: it is
    /// asked each time the lock is found taken, before each wait step, so a
    /// non-blocking channel operation whose lock-free check decides while
    /// the holder works returns that answer instead of waiting (`fast.rs`).
    #[inline]
    pub(crate) fn lock_or<R>(&self, give_up: impl FnMut() -> Option<R>) -> Result<(), R> {
        #[cfg(not(loom))]
        crate::runtime::asyncpreempt::debug_check_guarded();
        if self.try_lock() {
            return Ok(());
        }
        self.lock_slow_or(give_up)
    }

    #[cold]
    fn lock_slow(&self) {
        match self.lock_slow_or(|| None::<std::convert::Infallible>) {
            Ok(()) => {}
            Err(never) => match never {},
        }
    }

    #[cold]
    fn lock_slow_or<R>(&self, mut give_up: impl FnMut() -> Option<R>) -> Result<(), R> {
        for _ in 0..ACTIVE_SPIN {
            if let Some(r) = give_up() {
                return Err(r);
            }
            for _ in 0..ACTIVE_SPIN_CNT {
                crate::loom::hint::spin_loop();
            }
            if self.looks_free() && self.try_lock() {
                return Ok(());
            }
        }
        #[cfg(not(loom))]
        let mut yields = 0;
        loop {
            if let Some(r) = give_up() {
                return Err(r);
            }
            #[cfg(not(loom))]
            {
                if yields < YIELDS {
                    yields += 1;
                    std::thread::yield_now();
                } else {
                    std::thread::sleep(NAP);
                }
            }
            #[cfg(loom)]
            loom::thread::yield_now();
            if self.looks_free() && self.try_lock() {
                return Ok(());
            }
        }
    }

    /// Releases the lock.
    ///
    /// # Safety
    /// The caller holds the lock (took it with `lock`, on any thread: a
    /// parked goroutine's locks are released by its M's scheduler).
    #[inline]
    pub(crate) unsafe fn unlock(&self) {
        // Release: pairs with the Acquire CAS in `try_lock`; publishes our
        // writes to the protected state to the next holder.
        self.key.store(UNLOCKED, Ordering::Release);
    }
}

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

    /// More threads than CPUs, so holders get preempted and waiters go
    /// through the spin, yield and nap stages.
    #[test]
    fn lock_excludes_under_contention() {
        const THREADS: u64 = 8;
        const ITERS: u64 = 100_000;
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
    /// (loom's cell checks the latter, which needs the Acquire/Release
    /// pair).
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

    /// `lock_or` either takes the lock (and then excludes the holder) or
    /// gives up with the answer of its check, and only once the check
    /// decides: here a flag the holder sets under the lock. A waiter that
    /// gave up saw the flag; one that took the lock runs its critical
    /// section alone.
    #[test]
    fn lock_or_takes_the_lock_or_gives_up_on_its_check() {
        use loom::sync::atomic::AtomicBool;
        loom::model(|| {
            let lock = Arc::new(Lock::new());
            let n = Arc::new(UnsafeCell::new(0u32));
            let flag = Arc::new(AtomicBool::new(false));
            let holder = {
                let (lock, n, flag) = (lock.clone(), n.clone(), flag.clone());
                thread::spawn(move || {
                    lock.lock();
                    // SAFETY: we hold the lock.
                    n.with_mut(|p| unsafe { *p += 1 });
                    flag.store(true, Ordering::Relaxed);
                    // SAFETY: we hold the lock.
                    unsafe { lock.unlock() };
                })
            };
            let r = lock.lock_or(|| flag.load(Ordering::Relaxed).then_some(()));
            match r {
                Ok(()) => {
                    // SAFETY: we hold the lock.
                    n.with_mut(|p| unsafe { *p += 1 });
                    // SAFETY: we hold the lock.
                    unsafe { lock.unlock() };
                }
                Err(()) => assert!(flag.load(Ordering::Relaxed)),
            }
            holder.join().unwrap();
            // SAFETY: all threads joined.
            let total = n.with(|p| unsafe { *p });
            assert_eq!(total, if r.is_ok() { 2 } else { 1 });
        });
    }
}
