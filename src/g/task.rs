//! The task cell: a goroutine's closure, then its result, and the join
//! protocol between the goroutine and its `JoinHandle`. One allocation per
//! spawn holds all of it (the G record itself is recycled).
//!
//! # Join protocol (invariants)
//! `state` holds two bits, `COMPLETE` and `WAITER`.
//! - The joiner (the one `JoinHandle`, consumed by `join`) writes `waiter`
//!   *before* publishing it with a CAS `0 -> WAITER` (Release); if that CAS
//!   fails the task is complete and the joiner clears `waiter` itself. After a
//!   successful CAS the joiner never touches `waiter` again.
//! - The goroutine writes `stage = Done(..)` and then sets `COMPLETE` with an
//!   AcqRel `fetch_or`: the Release half publishes `stage` to the joiner, the
//!   Acquire half pairs with the joiner's CAS so that, when `WAITER` was set,
//!   `waiter` is visible and is taken and woken exactly once.
//! - Whoever observes `COMPLETE` (Acquire) may read `stage`; only the joiner
//!   does, once.

use std::any::Any;
use std::cell::UnsafeCell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::runtime::park::Waiter;
use crate::spawn::JoinError;

const COMPLETE: usize = 1;
const WAITER: usize = 2;

/// The type-erased half the G holds: run the closure once.
pub(crate) trait Runnable: Send + Sync {
    /// Runs the closure on the current goroutine, stores the result and wakes
    /// the joiner. `id` and `name` label a panic.
    fn run(self: Arc<Self>, id: u64, name: Option<&str>);
    /// Completes the task without running it (the goroutine could not start).
    fn fail(self: Arc<Self>, err: JoinError);
}

/// The typed half the `JoinHandle` holds.
pub(crate) trait JoinTarget<T>: Send + Sync {
    fn header(&self) -> &Header;
    /// Takes the result. Call only once, after `header().is_complete()`.
    fn take_output(&self) -> Result<T, JoinError>;
}

pub(crate) struct Header {
    state: AtomicUsize,
    waiter: UnsafeCell<Option<Waiter>>,
}

impl Header {
    #[inline]
    pub(crate) fn is_complete(&self) -> bool {
        // Acquire: pairs with the fetch_or(COMPLETE) in `complete`.
        self.state.load(Ordering::Acquire) & COMPLETE != 0
    }

    /// Registers `w` as the joiner. Returns false if the task completed first
    /// (then `w` is dropped and the caller must not wait).
    ///
    /// # Safety
    /// Only the single joiner may call this, once.
    pub(crate) unsafe fn register(&self, w: Waiter) -> bool {
        // SAFETY: before WAITER is published only the joiner touches `waiter`.
        unsafe { *self.waiter.get() = Some(w) };
        // Release: publishes `waiter`; pairs with the AcqRel fetch_or in
        // `complete`. Acquire on failure: pairs with the same fetch_or so the
        // result is visible.
        match self
            .state
            .compare_exchange(0, WAITER, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => true,
            Err(_) => {
                // SAFETY: WAITER was not published, so the slot is still ours.
                unsafe { *self.waiter.get() = None };
                false
            }
        }
    }

    fn complete(&self) {
        // AcqRel: Release publishes the stage to the joiner; Acquire pairs with
        // the joiner's CAS that published `waiter`.
        let prev = self.state.fetch_or(COMPLETE, Ordering::AcqRel);
        if prev & WAITER != 0 {
            // SAFETY: WAITER is set, so the joiner has handed `waiter` over and
            // will not touch it again; we are the only completer.
            let w = unsafe { (*self.waiter.get()).take() };
            if let Some(w) = w {
                w.wake();
            }
        }
    }
}

enum Stage<F, T> {
    Pending(F),
    Done(Result<T, JoinError>),
    Taken,
}

pub(crate) struct Task<F, T> {
    header: Header,
    stage: UnsafeCell<Stage<F, T>>,
}

// SAFETY: `stage` is accessed by the goroutine until COMPLETE is published and
// by the joiner after observing it (Release/Acquire on `state`); F and T are
// Send, so moving them between those threads is sound. `waiter` follows the
// join protocol in the module note.
unsafe impl<F: Send, T: Send> Sync for Task<F, T> {}
// SAFETY: as above.
unsafe impl<F: Send, T: Send> Send for Task<F, T> {}

impl<F, T> Task<F, T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    pub(crate) fn new(f: F) -> Arc<Self> {
        Arc::new(Task {
            header: Header {
                state: AtomicUsize::new(0),
                waiter: UnsafeCell::new(None),
            },
            stage: UnsafeCell::new(Stage::Pending(f)),
        })
    }

    fn finish(&self, out: Result<T, JoinError>) {
        // SAFETY: until COMPLETE is published only the goroutine (or the
        // scheduler failing it) touches `stage`.
        unsafe { *self.stage.get() = Stage::Done(out) };
        self.header.complete();
    }
}

impl<F, T> Runnable for Task<F, T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    fn run(self: Arc<Self>, id: u64, name: Option<&str>) {
        // SAFETY: the task runs once, on its goroutine, before COMPLETE.
        let stage = unsafe { std::mem::replace(&mut *self.stage.get(), Stage::Taken) };
        let f = match stage {
            Stage::Pending(f) => f,
            _ => crate::runtime::throw("goroutine task ran twice"),
        };
        let out = panic::catch_unwind(AssertUnwindSafe(f))
            .map_err(|payload| JoinError::panicked(id, name, payload));
        self.finish(out);
    }

    fn fail(self: Arc<Self>, err: JoinError) {
        // SAFETY: the task never ran; we are its only user before COMPLETE.
        unsafe { *self.stage.get() = Stage::Taken };
        self.finish(Err(err));
    }
}

impl<F, T> JoinTarget<T> for Task<F, T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    fn header(&self) -> &Header {
        &self.header
    }

    fn take_output(&self) -> Result<T, JoinError> {
        debug_assert!(self.header.is_complete());
        // SAFETY: COMPLETE was observed with Acquire by the caller, so the
        // goroutine is done with `stage`; the single JoinHandle takes it once.
        match unsafe { std::mem::replace(&mut *self.stage.get(), Stage::Taken) } {
            Stage::Done(out) => out,
            _ => crate::runtime::throw("join of a goroutine whose result was already taken"),
        }
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
