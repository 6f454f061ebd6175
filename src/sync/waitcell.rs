//! The wait cell: how a goroutine or an OS thread blocks on a wait queue of
//! the sync primitives, and how a waker releases it (the part of Go's
//! `sudog` + `gopark`/`goready` that every queue here shares), plus the
//! std/loom switch for the pieces the runtime's `crate::loom` does not cover.
//!
//! # Protocol (no lost wakeup, no use after return)
//! A wait record (a `sema::Sudog`, a `notify` waiter, a `semaphore` waiter)
//! lives on the waiter's stack and embeds one [`WaitCell`].
//! 1. Holding the queue's lock, the waiter calls [`WaitCell::prepare`]
//!    (records `Waiter::Goroutine(g)` or `Waiter::Thread(current)`), links
//!    the record into the queue, then calls [`WaitCell::block`] with the lock
//!    guard.
//! 2. `block` releases the guard only once the waiter is committed to wait:
//!    for a goroutine in the park's `unlock` step, which runs on the M's
//!    scheduler after the G's stack is switched out and its status is
//!    `Waiting` (so a waker can never ready a G that is still running); for a
//!    thread right away, after which it sleeps in `thread::park` until
//!    `woken` is set (spurious unparks just loop).
//! 3. A waker that unlinked the record under the lock owns it until it wakes
//!    it, exactly once, with [`WaitCell::wake`]: take the `Waiter` out, write
//!    any result into the record (e.g. the sema handoff ticket), then set
//!    `woken` (Release), then call `Waiter::wake`. After the `woken` store the
//!    waker touches nothing in the record: the waiter may return and its
//!    stack frame be reused. `woken` is read with Acquire by the waiter, so
//!    everything the waker wrote into the record is visible to it.
//!
//! A goroutine is never woken spuriously (it is readied once, by the one
//! party that unlinked it), so for it `woken` is only a debug check; a thread
//! needs it because `thread::park` may return at any time.

use std::marker::PhantomData;

use crate::loom::atomic::{AtomicBool, Ordering};

/// The cell for the fields of wait records (tokio's loom facade): outside
/// loom a thin wrapper over `std::cell::UnsafeCell`; under loom,
/// `loom::cell::UnsafeCell`, which checks that every access is ordered
/// after the previous conflicting one, so the handovers of record fields
/// between waiter and waker are model-checked too.
#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

#[cfg(not(loom))]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    #[inline]
    pub(crate) const fn new(v: T) -> UnsafeCell<T> {
        UnsafeCell(std::cell::UnsafeCell::new(v))
    }

    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    #[inline]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

/// The short internal lock that guards a wait queue (Go's runtime `mutex`,
/// which spins briefly and then sleeps on a futex: std's Linux mutex does
/// the same). It is only ever held for a few pointer updates, and the one
/// place a goroutine holds it across a switch is the park itself, where the
/// scheduler releases it on the same OS thread right after the switch.
#[cfg(not(loom))]
pub(crate) use std::sync::{Mutex as Lock, MutexGuard as LockGuard};

#[cfg(loom)]
pub(crate) use loom::sync::{Mutex as Lock, MutexGuard as LockGuard};

/// Takes `l`. Nothing panics while holding one of these locks, so a poisoned
/// lock can only come from a bug elsewhere in the same critical section;
/// the queue state itself is never left half-updated by a panic.
#[inline]
pub(crate) fn lock<T>(l: &Lock<T>) -> LockGuard<'_, T> {
    l.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(not(loom))]
pub(crate) use crate::g::WaitReason;
#[cfg(not(loom))]
use crate::runtime::park::Waiter;

/// Under loom the runtime is not compiled: a stand-in for the reasons the
/// sync primitives park with.
#[cfg(loom)]
#[derive(Clone, Copy, Debug)]
pub(crate) enum WaitReason {
    SyncMutexLock,
    SyncRWMutexRLock,
    SyncRWMutexLock,
    SyncCondWait,
    SyncWaitGroupWait,
    SyncOnceDo,
    Semacquire,
}

/// Under loom every waiter is a loom thread.
#[cfg(loom)]
pub(crate) enum Waiter {
    Thread(loom::thread::Thread),
}

#[cfg(loom)]
impl Waiter {
    fn wake(self) {
        match self {
            Waiter::Thread(t) => t.unpark(),
        }
    }
}

/// Defines a `const fn` outside loom and a plain `fn` under loom (loom's
/// atomics and cells are built at run time).
macro_rules! loom_const_fn {
    ($(#[$m:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty $body:block) => {
        #[cfg(not(loom))]
        $(#[$m])*
        $vis const fn $name($($arg: $ty),*) -> $ret $body
        #[cfg(loom)]
        $(#[$m])*
        $vis fn $name($($arg: $ty),*) -> $ret $body
    };
}
pub(crate) use loom_const_fn;

/// A fatal misuse of a primitive (Go's `fatal`: not recoverable).
#[cold]
pub(crate) fn fatal(msg: &str) -> ! {
    #[cfg(not(loom))]
    crate::runtime::throw(msg);
    #[cfg(loom)]
    panic!("fatal error: {msg}");
}

/// How the owner of a [`WaitCell`] waits: decided by [`WaitCell::prepare`],
/// used by [`WaitCell::block`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    Goroutine,
    Thread,
}

/// Who is waiting and whether they were woken (see the module note).
pub(crate) struct WaitCell {
    /// Written by the waiter before the record is published, taken by the
    /// waker that unlinked the record.
    waiter: UnsafeCell<Option<Waiter>>,
    /// Set (Release) by the waker as its last access to the record.
    woken: AtomicBool,
    /// A record is pinned to its owner's stack frame and shared through raw
    /// pointers only: neither `Send` nor `Sync` by itself.
    _not_send: PhantomData<*const ()>,
}

impl WaitCell {
    pub(crate) fn new() -> WaitCell {
        WaitCell {
            waiter: UnsafeCell::new(None),
            woken: AtomicBool::new(false),
            _not_send: PhantomData,
        }
    }

    /// Records the caller as the waiter and clears `woken`.
    ///
    /// # Safety
    /// The record must not be published (no waker can reach it), and a
    /// previous wait on it, if any, must have returned from [`block`].
    ///
    /// [`block`]: WaitCell::block
    pub(crate) unsafe fn prepare(&self) -> Mode {
        let (w, mode) = current_waiter();
        // SAFETY: unpublished, so nobody else accesses the slot (caller's
        // contract); the previous waker is done with it (it set `woken`,
        // which `block` observed with Acquire, after taking the waiter).
        self.waiter.with_mut(|p| unsafe { *p = Some(w) });
        // Relaxed: the record is published later by a lock release (or the
        // park's unlock step), which orders this store before any waker.
        self.woken.store(false, Ordering::Relaxed);
        mode
    }

    /// The goroutine waiting on this record, if a goroutine waits (the
    /// synctest checks of `notify.rs`).
    ///
    /// # Safety
    /// The record is linked into a queue whose lock the caller holds (so
    /// its waiter is recorded and nobody has taken it).
    #[cfg(not(loom))]
    pub(crate) unsafe fn goroutine(&self) -> Option<&'static crate::g::G> {
        // SAFETY: written before the record was published, taken only by
        // a waker that unlinked it under the lock the caller holds.
        self.waiter.with(|p| match unsafe { &*p } {
            Some(Waiter::Goroutine(g)) => Some(*g),
            _ => None,
        })
    }

    /// Blocks until a waker calls [`wake`](WaitCell::wake) on this record.
    /// `guard` is the lock of the queue the record was just linked into; it
    /// is released once the caller is committed to wait (module note).
    pub(crate) fn block<L>(&self, mode: Mode, guard: L, reason: WaitReason) {
        #[cfg(not(loom))]
        if mode == Mode::Goroutine {
            let mut guard = Some(guard);
            // The park inlined here (callers are not generic): `g::switch`'s
            // note, "Returns after a switch".
            crate::runtime::park::park_inline(crate::m::Here::lookup(), reason, &mut |_g| {
                // Runs on the scheduler after the switch: only now may a
                // waker find (and ready) this G.
                drop(guard.take());
                true
            });
            // Acquire: pairs with the waker's Release store in `wake` (the
            // run queue that carried us to this M orders it too).
            debug_assert!(self.woken.load(Ordering::Acquire));
            return;
        }
        let _ = (mode, reason);
        drop(guard);
        #[cfg(not(loom))]
        let _blocked = crate::runtime::checkdead::thread_blocked();
        // Acquire: pairs with the Release store in `wake`, so whatever the
        // waker wrote into the record is visible once we see `true`.
        while !self.woken.load(Ordering::Acquire) {
            crate::loom::thread::park();
        }
    }

    /// Wakes the waiter of `this`, exactly once. Results for the waiter
    /// (the sema handoff ticket) must be written into the record before
    /// this call: after it the waker may not touch the record.
    ///
    /// # Safety
    /// `this` is a prepared record that the caller unlinked from its queue
    /// (so no one else will wake it) and has not woken yet. After this call
    /// the record may no longer exist.
    pub(crate) unsafe fn wake(this: *const WaitCell) {
        // SAFETY: the caller owns the unlinked record until `woken` is set;
        // the waiter does not touch the slot while it waits.
        let w = unsafe { (*this).waiter.with_mut(|p| (*p).take()) };
        let w = w.unwrap_or_else(|| fatal("sync: wake of a wait record with no waiter"));
        // Release: pairs with the Acquire loads in `block`. This is the last
        // access to the record: the waiter may return as soon as it sees it.
        // SAFETY: the record is alive until the waiter sees this store, and
        // nothing after it touches the record. (The `&AtomicBool` the call
        // takes may outlive the memory by the last instant of the call: the
        // pattern of std's own `thread::scope`, rust-lang/rust#55005.)
        unsafe { (*this).woken.store(true, Ordering::Release) };
        // `w` is ours (moved out above), so waking it needs no record.
        w.wake();
    }
}

/// The waiter to record for the calling goroutine or thread.
#[cfg(not(loom))]
fn current_waiter() -> (Waiter, Mode) {
    match crate::m::current_g() {
        Some(g) => (Waiter::Goroutine(g), Mode::Goroutine),
        None => (Waiter::Thread(std::thread::current()), Mode::Thread),
    }
}

#[cfg(loom)]
fn current_waiter() -> (Waiter, Mode) {
    (Waiter::Thread(loom::thread::current()), Mode::Thread)
}

/// After a direct grant (the woken waiter already owns the resource and
/// sits in this P's `runnext`), let it run now: it inherits our time slice
/// (Go's `goyield` in `semrelease1`). A plain thread has no P to give.
#[inline]
pub(crate) fn yield_after_grant() {
    #[cfg(not(loom))]
    crate::runtime::park::goyield();
}

/// Runs a loom model, exhaustively (`None`) or with at most `preemptions`
/// preemptions per execution (tokio's practice for models too large to
/// exhaust: the bugs these protocols can have show up with few
/// preemptions, and the bound keeps each model to seconds).
/// `LOOM_MAX_PREEMPTIONS` overrides it.
#[cfg(all(test, loom))]
pub(crate) fn model(preemptions: Option<usize>, f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = preemptions;
    }
    b.check(f);
}
