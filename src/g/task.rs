//! The task cell: a goroutine's closure, then its result, and the join
//! protocol between the goroutine and its `JoinHandle`. One block per spawn
//! holds all of it (the G record itself is recycled), taken from the P's
//! block cache (`taskcache.rs`) when it fits a size class.
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
use std::any::Any;
use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::taskcache;
use crate::runtime::park::Waiter;
use crate::spawn::JoinError;

const COMPLETE: usize = 1;
const WAITER: usize = 2;
const REF_ONE: usize = 4;

struct VTable {
    /// Runs the closure and stores its result (does not complete).
    run: unsafe fn(NonNull<Header>, u64, Option<&str>),
    /// Stores `Err(err)` without running the closure (does not complete).
    fail: unsafe fn(NonNull<Header>, JoinError),
    /// Moves the result into `*out` (a `MaybeUninit<Result<T, JoinError>>`).
    take_output: unsafe fn(NonNull<Header>, *mut ()),
    /// Drops the stage and frees the block.
    dealloc: unsafe fn(NonNull<Header>),
    /// The stage is final: report it if it is a panic (nobody will join).
    report_unjoined: unsafe fn(NonNull<Header>),
}

#[repr(C)]
pub(crate) struct Header {
    state: AtomicUsize,
    waiter: UnsafeCell<Option<Waiter>>,
    vtable: &'static VTable,
    /// Where the goroutine was spawned (`traceback`), written once here.
    spawn: crate::traceback::Spawn,
}

enum Stage<F, T> {
    Pending(F),
    Done(Result<T, JoinError>),
    Taken,
}

#[repr(C)]
struct Cell<F, T> {
    header: Header,
    stage: UnsafeCell<Stage<F, T>>,
}

impl Header {
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
    /// If the JoinHandle was already gone, reports a panic result.
    fn complete(&self) -> Option<Waiter> {
        // AcqRel: Release publishes the stage to the joiner; Acquire pairs
        // with the joiner's CAS that published `waiter`.
        let prev = self.state.fetch_or(COMPLETE, Ordering::AcqRel);
        if prev >> 2 == 1 {
            // Only our (the G's) reference is left: nobody can join.
            // SAFETY: we hold a reference and the stage is final.
            unsafe { (self.vtable.report_unjoined)(NonNull::from(self)) };
        }
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
    /// Where the goroutine was spawned.
    pub(crate) fn spawn(&self) -> crate::traceback::Spawn {
        // SAFETY: the G's reference keeps the header alive; `spawn` is
        // never written after `new_task`.
        unsafe { self.0.as_ref() }.spawn
    }

    /// Runs the closure on the current goroutine, stores the result, wakes
    /// the joiner. `id` and `name` label a panic.
    pub(crate) fn run(self, id: u64, name: Option<&str>) {
        let h = self.0;
        // SAFETY: we own the G's reference; `run` is called once.
        unsafe { (h.as_ref().vtable.run)(h, id, name) };
        self.finish();
    }

    /// Completes the task without running it (the goroutine could not start).
    pub(crate) fn fail(self, err: JoinError) {
        let h = self.0;
        // SAFETY: we own the G's reference; the closure never ran.
        unsafe { (h.as_ref().vtable.fail)(h, err) };
        self.finish();
    }

    fn finish(self) {
        let h = self.0;
        std::mem::forget(self);
        // SAFETY: we hold the G's reference until `release`.
        let waiter = unsafe { h.as_ref() }.complete();
        // SAFETY: we give up the G's reference, once.
        unsafe { release(h) };
        if let Some(w) = waiter {
            w.wake();
        }
    }
}

impl Drop for TaskRef {
    /// A task dropped without running (never happens in the runtime, which
    /// always runs or fails it) still completes its joiner.
    fn drop(&mut self) {
        let h = self.0;
        // SAFETY: we own the G's reference.
        unsafe {
            (h.as_ref().vtable.fail)(
                h,
                JoinError::start_failed(
                    0,
                    std::io::Error::other("goroutine dropped before it ran"),
                ),
            )
        };
        // SAFETY: we hold the G's reference until `release`.
        let waiter = unsafe { h.as_ref() }.complete();
        // SAFETY: we give up the G's reference, once.
        unsafe { release(h) };
        if let Some(w) = waiter {
            w.wake();
        }
    }
}

/// The `JoinHandle`'s reference.
pub(crate) struct JoinRef<T> {
    cell: NonNull<Header>,
    _t: PhantomData<T>,
}

// SAFETY: T: Send is required to move the result to another thread; the
// header is synchronised by the protocol in the module note.
unsafe impl<T: Send> Send for JoinRef<T> {}
// SAFETY: `&JoinRef` only reads the atomic state.
unsafe impl<T: Send> Sync for JoinRef<T> {}

impl<T> JoinRef<T> {
    #[inline]
    pub(crate) fn header(&self) -> &Header {
        // SAFETY: our reference keeps the cell alive.
        unsafe { self.cell.as_ref() }
    }

    /// Takes the result. Call once, after `header().is_complete()`.
    pub(crate) fn take_output(&self) -> Result<T, JoinError> {
        debug_assert!(self.header().is_complete());
        let mut out = MaybeUninit::<Result<T, JoinError>>::uninit();
        // SAFETY: COMPLETE was observed (Acquire) by the caller, so the stage
        // is final; the vtable's T is ours (typed at creation).
        unsafe {
            (self.header().vtable.take_output)(self.cell, out.as_mut_ptr().cast());
            out.assume_init()
        }
    }
}

impl<T> Drop for JoinRef<T> {
    /// A handle dropped without `join`: if the goroutine already finished,
    /// report a panic result now; otherwise the goroutine will (it sees
    /// our reference gone when it completes). The CAS orders the two cases
    /// against the completer's `fetch_or` on the same word.
    /// Inline: a `go` statement drops its handle at once, and the common
    /// case is then one CAS; the rest is out of line (`drop_last`).
    #[inline]
    fn drop(&mut self) {
        let header = self.header();
        let mut cur = header.state.load(Ordering::Acquire);
        loop {
            // COMPLETE: the result may be an unjoined panic to report. Last
            // reference and not complete: the task was dropped unrun (the
            // release below frees it).
            if cur & COMPLETE != 0 || cur >> 2 == 1 {
                break;
            }
            // Release: as in `release`. Not the last reference (checked).
            // Giving up the reference touches no runtime state: no gate.
            match header.state.compare_exchange(
                cur,
                cur - REF_ONE,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return,
                Err(now) => cur = now,
            }
        }
        // SAFETY: `cur` was read last (Acquire) and is complete or shows
        // ours as the last reference; we give it up once.
        unsafe { drop_last(self.cell, cur) }
    }
}

/// The rest of `JoinRef::drop`: the task completed (`cur` has COMPLETE) or
/// ours is the last reference. Reporting an unjoined panic (printing) and
/// freeing the cell (into the P's task cache) are runtime work: behind the
/// entry gate.
///
/// # Safety
/// The caller owns the JoinHandle's reference to `cell` and gives it up.
#[inline(never)]
unsafe fn drop_last(cell: NonNull<Header>, cur: usize) {
    crate::runtime::asyncpreempt::in_runtime(move || {
        if cur & COMPLETE != 0 {
            // SAFETY: COMPLETE observed (Acquire): the stage is final;
            // our reference keeps the cell alive. After `join` the stage
            // is `Taken` and nothing is reported.
            unsafe { (cell.as_ref().vtable.report_unjoined)(cell) };
        }
        // SAFETY: we give up the JoinHandle's reference, once.
        unsafe { release(cell) }
    })
}

/// Allocates the cell for `f`: the G's reference and the JoinHandle's.
///
/// `here` is the spawner's M (its entry gate's lookup).
pub(crate) fn new_task<F, T>(
    f: F,
    spawn: crate::traceback::Spawn,
    here: crate::m::Here,
) -> (TaskRef, JoinRef<T>)
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let layout = Layout::new::<Cell<F, T>>();
    let mem = alloc_block(layout, here);
    let cell = mem.cast::<Cell<F, T>>();
    // SAFETY: `mem` is a fresh block of at least `layout`'s size and align.
    unsafe {
        cell.as_ptr().write(Cell {
            header: Header {
                state: AtomicUsize::new(2 * REF_ONE),
                waiter: UnsafeCell::new(None),
                vtable: &VTableOf::<F, T>::VTABLE,
                spawn,
            },
            stage: UnsafeCell::new(Stage::Pending(f)),
        })
    };
    let h = cell.cast::<Header>();
    (
        TaskRef(h),
        JoinRef {
            cell: h,
            _t: PhantomData,
        },
    )
}

struct VTableOf<F, T>(PhantomData<(F, T)>);

impl<F, T> VTableOf<F, T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    const VTABLE: VTable = VTable {
        run: run::<F, T>,
        fail: fail::<F, T>,
        take_output: take_output::<F, T>,
        dealloc: dealloc::<F, T>,
        report_unjoined: report_unjoined::<F, T>,
    };
}

/// # Safety
/// `h` is a live `Cell<F, T>`; the caller holds the G's reference and the
/// stage is `Pending` (before COMPLETE nobody else touches it).
unsafe fn run<F, T>(h: NonNull<Header>, id: u64, name: Option<&str>)
where
    F: FnOnce() -> T,
{
    // SAFETY: per the contract.
    let cell = unsafe { h.cast::<Cell<F, T>>().as_ref() };
    // SAFETY: per the contract, we are the only user of the stage now.
    let stage = unsafe { std::mem::replace(&mut *cell.stage.get(), Stage::Taken) };
    let f = match stage {
        Stage::Pending(f) => f,
        _ => crate::runtime::throw("goroutine task ran twice"),
    };
    // The goroutine's own code: outside the entry gate (`runtime::entry`).
    let mut out =
        crate::runtime::entry::user(f).map_err(|payload| JoinError::panicked(id, name, payload));
    // The goroutine's locals go with it, returned or panicked, before its
    // result is published: `join` returns after their destructors. One that
    // panics is the goroutine's panic if it had none.
    if let Some(payload) = crate::local::goroutine_exit() {
        if out.is_ok() {
            out = Err(JoinError::panicked(id, name, payload));
        }
    }
    // SAFETY: still the only user until COMPLETE is published.
    unsafe { *cell.stage.get() = Stage::Done(out) };
}

/// # Safety
/// `h` is a live `Cell<F, T>` whose stage is final (COMPLETE published and
/// observed), and only one party calls this (module note on reporting).
unsafe fn report_unjoined<F, T>(h: NonNull<Header>) {
    // SAFETY: per the contract.
    let cell = unsafe { h.cast::<Cell<F, T>>().as_ref() };
    // SAFETY: the stage is final; nobody writes it any more (the joiner, the
    // only other reader, is gone or is us).
    if let Stage::Done(Err(e)) = unsafe { &*cell.stage.get() } {
        e.report_unjoined();
    }
}

/// # Safety
/// As for `run`.
unsafe fn fail<F, T>(h: NonNull<Header>, err: JoinError) {
    // SAFETY: per the contract.
    let cell = unsafe { h.cast::<Cell<F, T>>().as_ref() };
    // SAFETY: per the contract, we are the only user of the stage now.
    let old = unsafe { std::mem::replace(&mut *cell.stage.get(), Stage::Done(Err(err))) };
    // The closure's captures are dropped only once the stage is consistent:
    // if one of their destructors panics, the unwinding `TaskRef` still
    // finds a valid stage to complete.
    drop(old);
}

/// # Safety
/// `h` is a live `Cell<F, T>` whose COMPLETE the caller observed (Acquire);
/// `out` points to a `MaybeUninit<Result<T, JoinError>>`.
unsafe fn take_output<F, T>(h: NonNull<Header>, out: *mut ()) {
    // SAFETY: per the contract.
    let cell = unsafe { h.cast::<Cell<F, T>>().as_ref() };
    // SAFETY: the goroutine is done with the stage; the single JoinHandle
    // takes it once.
    let res = match unsafe { std::mem::replace(&mut *cell.stage.get(), Stage::Taken) } {
        Stage::Done(res) => res,
        _ => crate::runtime::throw("join of a goroutine whose result was already taken"),
    };
    // SAFETY: `out` is valid for a write of Result<T, JoinError>.
    unsafe { out.cast::<Result<T, JoinError>>().write(res) };
}

/// # Safety
/// `h` is a live `Cell<F, T>` and the last reference to it is gone.
unsafe fn dealloc<F, T>(h: NonNull<Header>) {
    let cell = h.cast::<Cell<F, T>>();
    // SAFETY: last reference: nobody else can see the cell.
    unsafe { std::ptr::drop_in_place(cell.as_ptr()) };
    // SAFETY: the block was allocated by `alloc_block` with this layout.
    unsafe { free_block(cell.cast(), Layout::new::<Cell<F, T>>()) };
}

fn alloc_block(layout: Layout, here: crate::m::Here) -> NonNull<u8> {
    match taskcache::class_of(layout) {
        Some(c) => match here.p_local(|l| l.tasks.alloc(c)) {
            Some(p) => p,
            None => taskcache::alloc_global(c),
        },
        None => {
            // SAFETY: a cell has a non-zero size (its header).
            let p = unsafe { alloc::alloc(layout) };
            NonNull::new(p).unwrap_or_else(|| alloc::handle_alloc_error(layout))
        }
    }
}

/// # Safety
/// `p` came from `alloc_block(layout)` and is no longer used.
unsafe fn free_block(p: NonNull<u8>, layout: Layout) {
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

/// The printable message of a panic payload.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "Box<dyn Any>".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell_size<F: FnOnce() -> T, T>(_f: &F) -> usize {
        Layout::new::<Cell<F, T>>().size()
    }

    #[test]
    fn a_small_closure_fits_the_smallest_class() {
        // The spawn record (traceback) must not push the common spawn (a
        // closure capturing a word, returning a word) out of the 64-byte
        // block class.
        assert_eq!(std::mem::size_of::<Header>(), 48);
        let x = 5u64;
        assert!(cell_size(&move || x) <= 64);
    }
}
