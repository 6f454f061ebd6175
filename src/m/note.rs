//! A one-shot sleep/wakeup event on a futex (Go's `note`): an M parks on its
//! note in `stopm` and whoever hands it a P wakes it.
//!
//! Invariants: `clear` is called only by the sleeper, while nobody can wake it
//! (the M is on no idle list); `wakeup` at most once per `clear`. The Release
//! store in `wakeup` pairs with the Acquire load in `sleep`, so everything the
//! waker wrote before (the M's `nextp`) is visible to the woken M.

use std::sync::atomic::{AtomicU32, Ordering};

use crate::sys::futex;

pub(crate) struct Note {
    key: AtomicU32,
}

impl Note {
    pub(crate) const fn new() -> Note {
        Note {
            key: AtomicU32::new(0),
        }
    }

    pub(crate) fn clear(&self) {
        self.key.store(0, Ordering::Relaxed);
    }

    pub(crate) fn wakeup(&self) {
        // Release: pairs with the Acquire load in `sleep`.
        if self.key.swap(1, Ordering::Release) == 0 {
            futex::wake(&self.key, 1);
        }
    }

    pub(crate) fn sleep(&self) {
        // Acquire: pairs with the Release swap in `wakeup`.
        while self.key.load(Ordering::Acquire) == 0 {
            futex::wait(&self.key, 0);
        }
    }

    /// Sleeps until woken or until `ns` nanoseconds have passed; true if
    /// woken (Go's notetsleep).
    pub(crate) fn sleep_timeout(&self, ns: i64) -> bool {
        let deadline = crate::sys::time::nanotime().saturating_add(ns);
        loop {
            if self.key.load(Ordering::Acquire) != 0 {
                return true;
            }
            let left = deadline - crate::sys::time::nanotime();
            if left <= 0 {
                return false;
            }
            futex::wait_timeout(&self.key, 0, left);
        }
    }
}
