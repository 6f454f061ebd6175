//! The std/loom switch for the plain (non-atomic) fields of the wait-queue
//! protocol.
//!
//! Under `--cfg loom` a [`Slot`] is a `loom::cell::UnsafeCell`, so the model
//! checker sees every read and write of a sudog's links, a wait's outcome
//! and the waiter handle, and reports any access that is not ordered by the
//! protocol (the channel lock, or the `woken` flag). Without loom it is a
//! plain `UnsafeCell` and every access compiles to a load or a store.

#[cfg(loom)]
use loom::cell::UnsafeCell as UnsafeInner;
#[cfg(not(loom))]
use std::cell::UnsafeCell as UnsafeInner;

/// A field whose accesses are synchronised by a protocol, not by its type.
/// Every accessor is `unsafe`: the caller names the protocol rule that gives
/// it exclusive (for writes) or ordered (for reads) access.
pub(crate) struct Slot<T>(UnsafeInner<T>);

impl<T> Slot<T> {
    pub(crate) fn new(v: T) -> Slot<T> {
        Slot(UnsafeInner::new(v))
    }

    /// Reads the value.
    ///
    /// # Safety
    /// No write may race with this read (the protocol orders them).
    #[inline]
    pub(crate) unsafe fn get(&self) -> T
    where
        T: Copy,
    {
        #[cfg(not(loom))]
        // SAFETY: no racing write (caller's contract).
        return unsafe { *self.0.get() };
        #[cfg(loom)]
        // SAFETY: as above; loom checks the claim.
        return self.0.with(|p| unsafe { *p });
    }

    /// Replaces the value, returning the old one.
    ///
    /// # Safety
    /// The caller has exclusive access (no other read or write may race).
    #[inline]
    pub(crate) unsafe fn replace(&self, v: T) -> T {
        #[cfg(not(loom))]
        // SAFETY: exclusive access (caller's contract).
        return unsafe { std::ptr::replace(self.0.get(), v) };
        #[cfg(loom)]
        // SAFETY: as above; loom checks the claim.
        return self.0.with_mut(|p| unsafe { std::ptr::replace(p, v) });
    }

    /// Writes the value (dropping the old one).
    ///
    /// # Safety
    /// As for [`Slot::replace`].
    #[inline]
    pub(crate) unsafe fn set(&self, v: T) {
        // SAFETY: forwarded contract.
        drop(unsafe { self.replace(v) });
    }
}
