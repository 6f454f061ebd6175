//! `Condvar`: Go's sync/cond.go on the ticket notify list (`notify.rs`).
//!
//! `wait(guard)`: take a ticket while still holding the mutex, unlock, wait
//! for the ticket, lock again. Because the ticket is taken before the
//! unlock, a `notify_*` made by anyone who locked the mutex after us counts
//! for us (no lost wakeup), and tickets make wakeup FIFO in the order the
//! waiters released the mutex.

use super::mutex::MutexGuard;
use super::notify::NotifyList;

/// A condition variable for [`Mutex`](super::Mutex) (Go's `sync.Cond`).
///
/// Waiters park (goroutines) or block (threads); wakeups are FIFO in the
/// order the waiters called [`wait`](Condvar::wait). There are no spurious
/// wakeups from the condition variable itself, but as in Go a woken waiter
/// competes for the mutex, so the condition may have changed again: wait in
/// a loop, or use [`wait_while`](Condvar::wait_while).
///
/// ```
/// use goroutine::sync::{Condvar, Mutex};
/// use std::sync::Arc;
///
/// goroutine::run(|| {
///     let pair = Arc::new((Mutex::new(false), Condvar::new()));
///     let p2 = pair.clone();
///     goroutine::go(move || {
///         *p2.0.lock() = true;
///         p2.1.notify_one();
///     });
///     let (m, c) = &*pair;
///     let ready = c.wait_while(m.lock(), |ready| !*ready);
///     assert!(*ready);
/// });
/// ```
pub struct Condvar {
    notify: NotifyList,
}

impl Condvar {
    /// A new condition variable.
    // entry: a constructor; no runtime state
    pub const fn new() -> Condvar {
        Condvar {
            notify: NotifyList::new(),
        }
    }

    /// Unlocks the guard's mutex, waits for a notification, and locks the
    /// mutex again before returning (Go's `Cond.Wait`).
    pub fn wait<'a, T: ?Sized>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        crate::runtime::entry::call(move || {
            let mutex = guard.mutex();
            let t = self.notify.add();
            drop(guard);
            self.notify.wait(t);
            mutex.lock()
        })
    }

    /// Waits while `condition` holds (re-checked under the lock after each
    /// wakeup).
    pub fn wait_while<'a, T: ?Sized>(
        &self,
        mut guard: MutexGuard<'a, T>,
        mut condition: impl FnMut(&mut T) -> bool,
    ) -> MutexGuard<'a, T> {
        while condition(&mut guard) {
            guard = self.wait(guard);
        }
        guard
    }

    /// Wakes the longest-waiting waiter, if any (Go's `Cond.Signal`).
    #[inline]
    pub fn notify_one(&self) {
        crate::runtime::entry::call(move || {
            self.notify.notify_one();
        })
    }

    /// Wakes every current waiter (Go's `Cond.Broadcast`).
    #[inline]
    pub fn notify_all(&self) {
        crate::runtime::entry::call(move || {
            self.notify.notify_all();
        })
    }
}

impl Default for Condvar {
    fn default() -> Condvar {
        Condvar::new()
    }
}

impl std::fmt::Debug for Condvar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Condvar").finish_non_exhaustive()
    }
}
