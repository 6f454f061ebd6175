//! `Mutex<T>`: Go's `sync.Mutex` around the data it protects.
//!
//! The protocol (state word, normal and starvation modes) is in
//! `rawmutex.rs`; this file only ties the lock to the data: the guard owns
//! the lock, and `Deref`/`DerefMut` are sound because only the guard's
//! holder can reach the data while `LOCKED` is set.

use std::cell::UnsafeCell;
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};

use super::rawmutex::RawMutex;
use super::waitcell::WaitReason;

/// A mutual exclusion lock that parks goroutines, not threads (Go's
/// `sync.Mutex`, holding its data like `std::sync::Mutex`).
///
/// - Uncontended `lock` and unlock are one atomic operation each.
/// - A goroutine that has to wait is parked; its OS thread runs other
///   goroutines. A plain OS thread outside the runtime blocks. Goroutines and
///   threads can share one mutex.
/// - Fairness (Go's two modes): normally a woken waiter competes with new
///   arrivals and may lose (it then waits at the front of the queue); once a
///   waiter has waited over 1 ms the mutex switches to starvation mode, in
///   which unlock hands it straight to the first waiter (a direct grant,
///   HACKING.md), until the queue
///   drains or a waiter got it quickly.
/// - No poisoning: a panic while the guard is held unlocks the mutex (as in
///   Go, where the unlock is usually deferred).
/// - Not reentrant: locking it again from the goroutine that holds it
///   deadlocks, as in Go.
///
/// ```
/// use goroutine::sync::{Mutex, WaitGroup};
/// use std::sync::Arc;
///
/// let n = goroutine::run(|| {
///     let m = Arc::new(Mutex::new(0));
///     let wg = WaitGroup::new();
///     for _ in 0..10 {
///         let (m, wg) = (m.clone(), wg.clone());
///         wg.add(1);
///         goroutine::go(move || {
///             *m.lock() += 1;
///             wg.done();
///         });
///     }
///     wg.wait();
///     let n = *m.lock();
///     n
/// });
/// assert_eq!(n, 10);
/// ```
pub struct Mutex<T: ?Sized> {
    raw: RawMutex,
    data: UnsafeCell<T>,
}

// SAFETY: the mutex hands out access to `T` to one holder at a time, from
// any thread: `T: Send` suffices, as for `std::sync::Mutex`.
unsafe impl<T: ?Sized + Send> Send for Mutex<T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send> Sync for Mutex<T> {}

/// Exclusive access to a [`Mutex`]'s data; unlocks when dropped.
///
/// Unlike `std`'s guard it is `Send` (for `T: Send`): this mutex belongs to
/// no thread (a goroutine's code may resume on another thread anyway), and,
/// as in Go, it may be unlocked by another goroutine than the one that
/// locked it.
#[must_use = "if unused the Mutex will immediately unlock"]
pub struct MutexGuard<'a, T: ?Sized> {
    mutex: &'a Mutex<T>,
    /// Not `Sync` through the auto trait (we implement it for `T: Sync`).
    _marker: PhantomData<*const ()>,
}

// SAFETY: moving the guard moves the exclusive access to `T` (and the duty
// to unlock, which any thread may do) to another thread: needs `T: Send`.
unsafe impl<T: ?Sized + Send> Send for MutexGuard<'_, T> {}
// SAFETY: sharing the guard only shares `&T`.
unsafe impl<T: ?Sized + Sync> Sync for MutexGuard<'_, T> {}

impl<T> Mutex<T> {
    /// A new, unlocked mutex.
    // entry: a constructor; no runtime state
    pub const fn new(value: T) -> Mutex<T> {
        Mutex {
            raw: RawMutex::new(),
            data: UnsafeCell::new(value),
        }
    }

    /// Consumes the mutex and returns the data.
    // entry: unique access to the data; no lock, no runtime state
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Locks the mutex, parking the calling goroutine (or blocking the
    /// calling thread) until it is available.
    #[inline]
    pub fn lock(&self) -> MutexGuard<'_, T> {
        crate::runtime::entry::call(move || {
            crate::runtime::coop_preempt::check();
            self.raw.lock(WaitReason::SyncMutexLock);
            MutexGuard {
                mutex: self,
                _marker: PhantomData,
            }
        })
    }

    /// Locks the mutex if that is possible without waiting (Go's
    /// `TryLock`). Fails while it is locked, and also while it is in
    /// starvation mode (it is promised to a waiter).
    #[inline]
    // entry: one CAS on the lock word; a failed attempt wakes nobody
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        self.raw.try_lock().then(|| MutexGuard {
            mutex: self,
            _marker: PhantomData,
        })
    }

    /// The data, through a unique borrow (no locking needed).
    // entry: unique access to the data; no lock, no runtime state
    pub fn get_mut(&mut self) -> &mut T {
        self.data.get_mut()
    }
}

impl<'a, T: ?Sized> MutexGuard<'a, T> {
    /// The mutex this guard locks (for `Condvar::wait`).
    pub(crate) fn mutex(&self) -> &'a Mutex<T> {
        self.mutex
    }
}

impl<T: ?Sized> Deref for MutexGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock, so nobody else accesses the data.
        unsafe { &*self.mutex.data.get() }
    }
}

impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock, and `&mut self` makes this
        // borrow unique.
        unsafe { &mut *self.mutex.data.get() }
    }
}

impl<T: ?Sized> Drop for MutexGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        crate::runtime::entry::call(move || {
            self.mutex.raw.unlock();
        })
    }
}

impl<T: Default> Default for Mutex<T> {
    fn default() -> Mutex<T> {
        Mutex::new(T::default())
    }
}

impl<T> From<T> for Mutex<T> {
    fn from(value: T) -> Mutex<T> {
        Mutex::new(value)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Mutex");
        match self.try_lock() {
            Some(g) => d.field("data", &&*g),
            None => d.field("data", &format_args!("<locked>")),
        };
        d.finish_non_exhaustive()
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized + fmt::Display> fmt::Display for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, f)
    }
}
