//! A P's cache of channel timer kits: the parts of a dropped `time::Timer`
//! or `time::Ticker` (its timer record and its channel's receiver), kept
//! whole for the next one, as a P keeps dead Gs and stacks. Why and when a
//! kit may be kept is `time::kit`'s business; the P only stores kits. The
//! receiver is type-erased here (a raw pointer and the function that drops
//! it), so that this layer names no channel type.
//!
//! # Invariants
//! - Only the P's owner touches its cache (it is in `PLocal`).
//! - A cached kit passed `time::kit`'s checks when it was kept: nobody else
//!   can reach its timer or its channel, so it may be handed out as new.
//! - A kit owns its receiver: it is turned back into a channel end once,
//!   by whoever takes the kit out ([`Kit::into_raw_parts`]), or dropped
//!   once, by the kit's own drop function, when a kit is dropped (a P
//!   removed by `set_max_procs` drops its kits, outside the borrow of
//!   `PLocal`).

use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::Arc;

use super::timerheap::Timer;

/// Channel timer kits a P keeps.
pub(crate) const CAP: usize = 16;

/// A kept channel timer: its record and its channel's receiver, erased.
pub(crate) struct Kit {
    timer: Arc<Timer>,
    rx: NonNull<()>,
    /// Drops `rx` (dropped first: the receiver goes before the sender in
    /// `timer`, as a `time::Timer`'s parts do).
    drop_rx: unsafe fn(NonNull<()>),
}

// SAFETY: a kit's receiver is owned by the kit alone (`from_raw_parts`'
// contract) and may move to another thread with it.
unsafe impl Send for Kit {}

impl Kit {
    /// A kit of `timer` and the receiver `rx`.
    ///
    /// # Safety
    /// `rx` is owned by the kit from now on; `drop_rx(rx)` drops it, and it
    /// may move to another thread.
    pub(crate) unsafe fn from_raw_parts(
        timer: Arc<Timer>,
        rx: NonNull<()>,
        drop_rx: unsafe fn(NonNull<()>),
    ) -> Kit {
        Kit { timer, rx, drop_rx }
    }

    /// Takes the kit apart: the caller owns the receiver from now on.
    pub(crate) fn into_raw_parts(self) -> (Arc<Timer>, NonNull<()>) {
        let this = ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped or used again, so the Arc is moved
        // out exactly once.
        (unsafe { std::ptr::read(&this.timer) }, this.rx)
    }
}

impl Drop for Kit {
    fn drop(&mut self) {
        // SAFETY: the kit owns `rx`, dropped once, here (`from_raw_parts`).
        unsafe { (self.drop_rx)(self.rx) }
    }
}

/// A P's kept channel timer kits (module note).
pub(crate) struct ChanTimerCache {
    free: Vec<Kit>,
}

impl ChanTimerCache {
    pub(crate) const fn new() -> ChanTimerCache {
        ChanTimerCache { free: Vec::new() }
    }

    /// A kept kit, if there is one.
    #[inline]
    pub(crate) fn take(&mut self) -> Option<Kit> {
        self.free.pop()
    }

    /// Whether the cache holds [`CAP`] kits already.
    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        self.free.len() >= CAP
    }

    /// Keeps `kit`; the caller checked that it may be reused and that the
    /// cache is not full.
    pub(crate) fn push(&mut self, kit: Kit) {
        debug_assert!(!self.is_full());
        if self.free.capacity() == 0 {
            self.free.reserve_exact(CAP);
        }
        self.free.push(kit);
    }

    /// Empties the cache (a P being destroyed); the caller drops the kits.
    pub(crate) fn drain(&mut self) -> Vec<Kit> {
        std::mem::take(&mut self.free)
    }
}
