//! The task cell: a goroutine's closure, then its result, and the join
//! protocol between the goroutine and its `JoinHandle`. One block per spawn
//! holds all of it (the G record itself is recycled), taken from the P's
//! block cache (`taskcache.rs`) when it fits a size class.
//!
//! This file holds what the scheduler sees: the untyped [`Header`], the
//! G's reference ([`TaskRef`]) and the join protocol. The typed half (the
//! closure and result, the `JoinHandle`'s reference, the vtable's code,
//! `JoinError`) is the spawn layer's, in `spawn/cell.rs`. Waking the joiner
//! is the runtime's: [`TaskRef::run`] and [`TaskRef::fail`] hand the waiter
//! back to their caller, and `TaskRef`'s `Drop` is in `runtime/proc.rs`.
//!
//! # Layout and references
//! A cell is a `#[repr(C)]` [`Header`] followed by the typed stage (the
//! closure, then the result). Two references exist: the G's ([`TaskRef`],
//! untyped, runs the closure once) and the `JoinHandle`'s ([`JoinRef<T>`],
//! typed). They are counted in `state` (units of `REF_ONE`); the last one to
//! go drops the stage and frees the block. The vtable carries the typed code.
//!
//! # Join protocol (invariants)
//! `state` holds two flag bits, `COMPLETE` and `WAITER`, under the count.
//! - The joiner (the `JoinHandle`, consumed by `join`) writes `waiter`
//!   *before* publishing it by CAS-ing `WAITER` in (Release). If `COMPLETE`
//!   is already set it clears `waiter` itself and does not wait. After a
//!   successful CAS the joiner never touches `waiter` again.
//! - The goroutine writes the stage `Done(..)`, then sets `COMPLETE` with an
//!   AcqRel `fetch_or`: Release publishes the stage; Acquire pairs with the
//!   joiner's CAS so `waiter` is visible. If `WAITER` was set it takes the
//!   waiter *while still holding its reference* (a joining thread may wake
//!   spuriously, see `COMPLETE`, drop its reference; the cell must outlive
//!   our read), then drops its reference, then wakes the waiter.
//! - Whoever observes `COMPLETE` (Acquire) may read the stage; only the
//!   joiner does, once.
//! - A joiner that polls the `JoinHandle` as a future registers again on
//!   every pending poll (its waker may change): it first takes the slot
//!   back by CAS-ing `WAITER` out while `COMPLETE` is clear, which the
//!   completer then sees in its `fetch_or` result and leaves `waiter`
//!   alone. So `WAITER` set always means "the completer owns `waiter`".
//!   A waiter left in the slot when the cell is freed is dropped with it.

use std::alloc::{self, Layout};
use std::cell::UnsafeCell;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::taskcache;
use super::Waiter;

const COMPLETE: usize = 1;
const WAITER: usize = 2;
const REF_ONE: usize = 4;

/// The typed code of a cell (`spawn/cell.rs`).
pub(crate) struct VTable {
    /// Runs the closure and stores its result (does not complete).
    pub(crate) run: unsafe fn(NonNull<Header>, u64, Option<&str>),
    /// Stores the failure to start goroutine `id` (`cause`) without running
    /// the closure (does not complete).
    pub(crate) fail: unsafe fn(NonNull<Header>, u64, std::io::Error),
    /// Moves the result of goroutine `id` (the third argument) into `*out`
    /// (a `MaybeUninit<Result<T, JoinError>>`).
    pub(crate) take_output: unsafe fn(NonNull<Header>, *mut (), u64),
    /// Drops the stage and frees the block.
    pub(crate) dealloc: unsafe fn(NonNull<Header>),
}

#[repr(C)]
pub(crate) struct Header {
    state: AtomicUsize,
    waiter: UnsafeCell<Option<Waiter>>,
    vtable: &'static VTable,
    /// Where the goroutine was spawned (`traceback`), written once here.
    spawn: crate::traceback::Spawn,
}

impl Header {
    /// The header of a new cell: two references (the G's and the
    /// `JoinHandle`'s), no waiter.
    pub(crate) fn new(vtable: &'static VTable, spawn: crate::traceback::Spawn) -> Header {
        Header {
            state: AtomicUsize::new(2 * REF_ONE),
            waiter: UnsafeCell::new(None),
            vtable,
            spawn,
        }
    }

    /// The cell's typed code.
    #[inline]
    pub(crate) fn vtable(&self) -> &'static VTable {
        self.vtable
    }

    #[inline]
    pub(crate) fn is_complete(&self) -> bool {
        // Acquire: pairs with the fetch_or(COMPLETE) in `complete`.
        self.state.load(Ordering::Acquire) & COMPLETE != 0
    }

    /// Registers `w` as the joiner. Returns false if the task completed first
    /// (then `w` is dropped and the caller must not wait). A later call
    /// replaces the waiter of an earlier one (a `JoinHandle` polled as a
    /// future, each time with the poller's waker; then joined).
    ///
    /// # Safety
    /// Only the single joiner (the `JoinHandle`) may call this.
    pub(crate) unsafe fn register(&self, w: Waiter) -> bool {
        if !self.reclaim_waiter() {
            return false;
        }
        // SAFETY: WAITER is clear (never published, or taken back by
        // `reclaim_waiter`): only the joiner touches `waiter`.
        unsafe { *self.waiter.get() = Some(w) };
        let mut cur = self.state.load(Ordering::Acquire);
        loop {
            if cur & COMPLETE != 0 {
                // SAFETY: WAITER was not published, so the slot is still ours.
                unsafe { *self.waiter.get() = None };
                return false;
            }
            // Release: publishes `waiter`; pairs with the AcqRel fetch_or in
            // `complete`. Acquire on failure: pairs with the same fetch_or.
            match self.state.compare_exchange(
                cur,
                cur | WAITER,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
    }

    /// Takes back the `waiter` slot handed over by an earlier `register`:
    /// clears `WAITER` unless the task completed (then returns false, and
    /// the completer owns the slot). Joiner only.
    fn reclaim_waiter(&self) -> bool {
        let mut cur = self.state.load(Ordering::Acquire);
        loop {
            if cur & COMPLETE != 0 {
                return false;
            }
            if cur & WAITER == 0 {
                return true;
            }
            // Clearing WAITER before the completer's fetch_or(COMPLETE)
            // means it will not touch `waiter` (it tests WAITER in the value
            // its fetch_or returns). Acquire: pairs with that fetch_or when
            // the CAS fails because of it.
            match self.state.compare_exchange(
                cur,
                cur & !WAITER,
                Ordering::Acquire,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
    }

    /// Sets COMPLETE and returns the waiter to wake, if any (module note).
    fn complete(&self) -> Option<Waiter> {
        // AcqRel: Release publishes the stage to the joiner; Acquire pairs
        // with the joiner's CAS that published `waiter`.
        let prev = self.state.fetch_or(COMPLETE, Ordering::AcqRel);
        if prev & WAITER != 0 {
            // SAFETY: WAITER is set, so the joiner handed `waiter` over and
            // will not touch it again; we are the only completer, and we still
            // hold a reference, so the cell is alive.
            unsafe { (*self.waiter.get()).take() }
        } else {
            None
        }
    }
}

/// Drops one reference; the last one frees the cell.
///
/// # Safety
/// The caller owns one reference to the live cell `h` and gives it up.
unsafe fn release(h: NonNull<Header>) {
    // SAFETY: we hold a reference, so the cell is alive.
    let header = unsafe { h.as_ref() };
    // Release: our uses of the cell happen before the free; the last owner's
    // Acquire fence pairs with it.
    if header.state.fetch_sub(REF_ONE, Ordering::Release) >> 2 == 1 {
        // ThreadSanitizer does not model fences: there, an Acquire load of
        // the same word stands in (as in std's Arc).
        #[cfg(not(goroutine_sanitize = "thread"))]
        std::sync::atomic::fence(Ordering::Acquire);
        #[cfg(goroutine_sanitize = "thread")]
        header.state.load(Ordering::Acquire);
        // SAFETY: that was the last reference.
        unsafe { (header.vtable.dealloc)(h) }
    }
}

/// The G's reference: runs the task once.
pub(crate) struct TaskRef(NonNull<Header>);

// SAFETY: the closure and result inside are Send (`new_task`'s bounds); the
// header is synchronised by the protocol in the module note.
unsafe impl Send for TaskRef {}

impl TaskRef {
    /// The G's reference to a new cell.
    ///
    /// # Safety
    /// `h` is a cell just made with [`Header::new`], whose G's reference
    /// nobody else holds.
    pub(crate) unsafe fn from_new(h: NonNull<Header>) -> TaskRef {
        TaskRef(h)
    }

    /// Where the goroutine was spawned.
    pub(crate) fn spawn(&self) -> crate::traceback::Spawn {
        // SAFETY: the G's reference keeps the header alive; `spawn` is
        // never written after `new_task`.
        unsafe { self.0.as_ref() }.spawn
    }

    /// Runs the closure on the current goroutine, stores the result and
    /// completes the task; returns the joiner, for the caller to wake. `id`
    /// and `name` label a panic.
    #[must_use]
    pub(crate) fn run(self, id: u64, name: Option<&str>) -> Option<Waiter> {
        let h = self.0;
        // SAFETY: we own the G's reference; `run` is called once.
        unsafe { (h.as_ref().vtable.run)(h, id, name) };
        self.finish()
    }

    /// Completes the task of goroutine `id` without running it (it could
    /// not start, for `cause`); returns the joiner, for the caller to wake.
    #[must_use]
    pub(crate) fn fail(self, id: u64, cause: std::io::Error) -> Option<Waiter> {
        let h = self.0;
        // SAFETY: we own the G's reference; the closure never ran.
        unsafe { (h.as_ref().vtable.fail)(h, id, cause) };
        self.finish()
    }

    fn finish(self) -> Option<Waiter> {
        let h = self.0;
        std::mem::forget(self);
        // SAFETY: we hold the G's reference until `release`.
        let waiter = unsafe { h.as_ref() }.complete();
        // SAFETY: we give up the G's reference, once.
        unsafe { release(h) };
        waiter
    }

    /// What `Drop` does (`runtime/proc.rs`): completes a task dropped
    /// without running (never happens in the runtime, which always runs or
    /// fails it) and returns the joiner to wake.
    ///
    /// # Safety
    /// Only from `TaskRef`'s `Drop`, once: it gives up the G's reference.
    pub(crate) unsafe fn drop_unrun(&mut self) -> Option<Waiter> {
        let h = self.0;
        // SAFETY: we own the G's reference.
        unsafe {
            (h.as_ref().vtable.fail)(
                h,
                0,
                std::io::Error::other("goroutine dropped before it ran"),
            )
        };
        // SAFETY: we hold the G's reference until `release`.
        let waiter = unsafe { h.as_ref() }.complete();
        // SAFETY: we give up the G's reference, once (the caller's contract).
        unsafe { release(h) };
        waiter
    }
}

/// The common case of dropping a `JoinHandle`: ours is not the last
/// reference, so giving it up is one CAS and touches no runtime state (no
/// entry gate needed). Returns false, having done nothing, when the caller
/// must call [`drop_joiner`] instead (behind the gate): ours is the last
/// reference (the cell is freed into the P's cache).
///
/// # Safety
/// As for [`drop_joiner`]; on true, the reference is given up.
#[inline]
pub(crate) unsafe fn try_drop_joiner(h: NonNull<Header>) -> bool {
    // SAFETY: the caller holds the `JoinHandle`'s reference.
    let header = unsafe { h.as_ref() };
    let mut cur = header.state.load(Ordering::Acquire);
    loop {
        // Final: no reference is ever added, so `drop_joiner` finds the
        // same state.
        if cur >> 2 == 1 {
            return false;
        }
        // Release: as in `release`. Not the last reference (checked).
        match header
            .state
            .compare_exchange(cur, cur - REF_ONE, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => return true,
            Err(now) => cur = now,
        }
    }
}

/// Gives up the `JoinHandle`'s reference (a handle dropped, joined or
/// not), freeing the cell if it was the last.
///
/// # Safety
/// The caller owns the `JoinHandle`'s reference to the live cell `h` and
/// gives it up.
pub(crate) unsafe fn drop_joiner(h: NonNull<Header>) {
    // SAFETY: we give up the JoinHandle's reference, once.
    unsafe { release(h) }
}

/// A block for a task cell of `layout`; `None` out of memory (the caller
/// reports it: `arena`'s note, "Out of memory").
pub(crate) fn alloc_block(layout: Layout, here: crate::m::Here) -> Option<NonNull<u8>> {
    match taskcache::class_of(layout) {
        Some(c) => match here.p_local(|l| l.tasks.alloc(c)) {
            Some(p) => p,
            None => taskcache::alloc_global(c),
        },
        None => {
            // SAFETY: a cell has a non-zero size (its header).
            let p = unsafe { alloc::alloc(layout) };
            NonNull::new(p)
        }
    }
}

/// # Safety
/// `p` came from `alloc_block(layout)` and is no longer used.
pub(crate) unsafe fn free_block(p: NonNull<u8>, layout: Layout) {
    match taskcache::class_of(layout) {
        Some(c) => {
            // SAFETY: forwarded from the caller.
            let freed = crate::m::current_p_local(|l| unsafe { l.tasks.free(c, p) });
            if freed.is_none() {
                // SAFETY: forwarded from the caller.
                unsafe { taskcache::free_global(c, p) };
            }
        }
        // SAFETY: allocated with `alloc::alloc(layout)` in `alloc_block`.
        None => unsafe { alloc::dealloc(p.as_ptr(), layout) },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_keeps_small_spawns_in_the_smallest_class() {
        // The spawn record (traceback) must not push the common spawn (a
        // closure capturing a word, returning a word) out of the 64-byte
        // block class (`spawn/cell.rs` checks the whole cell).
        assert_eq!(std::mem::size_of::<Header>(), 48);
    }
}
