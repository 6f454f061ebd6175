//! `RwLock<T>`: Go's `sync.RWMutex` around the data it protects. The
//! protocol (writer preference, the reader/writer handover) is in
//! `rawrwlock.rs`; this file ties it to the data through guards.

use std::cell::UnsafeCell;
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};

use super::rawrwlock::RawRwLock;

/// A reader/writer lock that parks goroutines, not threads (Go's
/// `sync.RWMutex`, holding its data like `std::sync::RwLock`).
///
/// - Any number of readers, or one writer.
/// - Writer preference: once a writer is waiting, new readers wait until it
///   has had the lock, so a steady stream of readers cannot starve writers.
///   A consequence, as in Go: a goroutine that already holds a read lock
///   must not take another one (it could deadlock behind a waiting writer).
/// - Uncontended `read` and its unlock are one atomic operation each.
/// - Goroutines park; plain OS threads block; both can share one lock.
/// - No poisoning.
///
/// ```
/// use goroutine::sync::RwLock;
///
/// let l = RwLock::new(5);
/// {
///     let a = l.read();
///     let b = l.read();
///     assert_eq!(*a + *b, 10);
/// }
/// *l.write() += 1;
/// assert_eq!(*l.read(), 6);
/// ```
pub struct RwLock<T: ?Sized> {
    raw: RawRwLock,
    data: UnsafeCell<T>,
}

// SAFETY: the lock gives `&mut T` to one writer at a time (needs `T: Send`)
// and `&T` to many readers at once (needs `T: Sync`), as std's RwLock.
unsafe impl<T: ?Sized + Send> Send for RwLock<T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send + Sync> Sync for RwLock<T> {}

/// Shared access to an [`RwLock`]'s data; unlocks when dropped. `Send` for
/// `T: Sync`: as in Go, any goroutine or thread may release it.
#[must_use = "if unused the RwLock will immediately unlock"]
pub struct RwLockReadGuard<'a, T: ?Sized> {
    lock: &'a RwLock<T>,
    _marker: PhantomData<*const ()>,
}

// SAFETY: the guard only gives `&T`, so sending or sharing it needs
// `T: Sync`; the unlock may run on any thread.
unsafe impl<T: ?Sized + Sync> Send for RwLockReadGuard<'_, T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Sync> Sync for RwLockReadGuard<'_, T> {}

/// Exclusive access to an [`RwLock`]'s data; unlocks when dropped. `Send`
/// for `T: Send`, like [`MutexGuard`](super::MutexGuard).
#[must_use = "if unused the RwLock will immediately unlock"]
pub struct RwLockWriteGuard<'a, T: ?Sized> {
    lock: &'a RwLock<T>,
    _marker: PhantomData<*const ()>,
}

// SAFETY: moving the guard moves exclusive access (needs `T: Send`); the
// unlock may run on any thread.
unsafe impl<T: ?Sized + Send> Send for RwLockWriteGuard<'_, T> {}
// SAFETY: sharing the guard only shares `&T`.
unsafe impl<T: ?Sized + Sync> Sync for RwLockWriteGuard<'_, T> {}

impl<T> RwLock<T> {
    /// A new, unlocked lock.
    // entry: a constructor; no runtime state
    pub const fn new(value: T) -> RwLock<T> {
        RwLock {
            raw: RawRwLock::new(),
            data: UnsafeCell::new(value),
        }
    }

    /// Consumes the lock and returns the data.
    // entry: unique access to the data; no lock, no runtime state
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }
}

impl<T: ?Sized> RwLock<T> {
    /// Locks for reading, waiting while a writer holds the lock or is
    /// waiting for it (Go's `RLock`).
    #[inline]
    pub fn read(&self) -> RwLockReadGuard<'_, T> {
        crate::runtime::entry::call(move || {
            self.raw.read();
            RwLockReadGuard {
                lock: self,
                _marker: PhantomData,
            }
        })
    }

    /// Locks for reading if no writer holds or waits for the lock.
    #[inline]
    // entry: one CAS on the reader count; a failed attempt wakes nobody
    pub fn try_read(&self) -> Option<RwLockReadGuard<'_, T>> {
        self.raw.try_read().then(|| RwLockReadGuard {
            lock: self,
            _marker: PhantomData,
        })
    }

    /// Locks for writing, waiting for other writers and for the readers
    /// inside; new readers queue behind us meanwhile (Go's `Lock`).
    pub fn write(&self) -> RwLockWriteGuard<'_, T> {
        crate::runtime::entry::call(move || {
            self.raw.write();
            RwLockWriteGuard {
                lock: self,
                _marker: PhantomData,
            }
        })
    }

    /// Locks for writing if nobody holds the lock.
    pub fn try_write(&self) -> Option<RwLockWriteGuard<'_, T>> {
        // A failed attempt unlocks the writer mutex, which may wake a
        // waiter: a runtime call.
        let locked = crate::runtime::entry::call(|| self.raw.try_write());
        locked.then(|| RwLockWriteGuard {
            lock: self,
            _marker: PhantomData,
        })
    }

    /// The data, through a unique borrow (no locking needed).
    // entry: unique access to the data; no lock, no runtime state
    pub fn get_mut(&mut self) -> &mut T {
        self.data.get_mut()
    }
}

impl<T: ?Sized> Deref for RwLockReadGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: read-locked: no writer can access the data.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T: ?Sized> Drop for RwLockReadGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        crate::runtime::entry::call(move || {
            self.lock.raw.read_unlock();
        })
    }
}

impl<T: ?Sized> Deref for RwLockWriteGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: write-locked: nobody else can access the data.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T: ?Sized> DerefMut for RwLockWriteGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: write-locked, and `&mut self` makes this borrow unique.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T: ?Sized> Drop for RwLockWriteGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        crate::runtime::entry::call(move || {
            self.lock.raw.write_unlock();
        })
    }
}

impl<T: Default> Default for RwLock<T> {
    fn default() -> RwLock<T> {
        RwLock::new(T::default())
    }
}

impl<T> From<T> for RwLock<T> {
    fn from(value: T) -> RwLock<T> {
        RwLock::new(value)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("RwLock");
        match self.try_read() {
            Some(g) => d.field("data", &&*g),
            None => d.field("data", &format_args!("<locked>")),
        };
        d.finish_non_exhaustive()
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLockReadGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLockWriteGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}
