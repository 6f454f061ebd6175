//! Parking and readying goroutines: the primitive under every blocking
//! operation (join, channels, mutexes, sleeps, I/O).
//!
//! # Protocol (Go's gopark / goready)
//! 1. The goroutine decides to wait while holding whatever protects the thing
//!    it waits on (a lock, or nothing for a lock-free cell), and calls
//!    [`park`] with an `unlock` step.
//! 2. `park` switches to the M's scheduler context. Only there, with the G's
//!    stack fully switched out and its status already `Waiting`, the
//!    scheduler runs `unlock(g)`: this is the step that makes the G findable
//!    by a waker (publishes it in a wait list, or releases the lock that
//!    guards the list). If `unlock` returns false the wait is abandoned and
//!    the G runs again at once.
//! 3. A waker that finds the G calls [`ready`] exactly once: `Waiting ->
//!    Runnable` (a CAS that catches double wakeups) and into the waker's P
//!    `runnext` (so the woken G runs next on the waker's P and inherits its
//!    time slice), then `wakep`.
//!
//! Because step 2 runs after the switch, a waker can never resume a G that
//! is still executing on its stack.
//!
//! A [`Waiter`] abstracts over a parked goroutine and a blocked OS thread, so
//! every primitive also works from plain threads outside the runtime.

use super::{globrunq, idle, localrunq};
use crate::g::switch::Action;
use crate::g::{WaitReason, G};
use crate::m;
use crate::tracer;

pub(crate) use crate::g::Waiter;

impl Waiter {
    /// Wakes the waiter. Call exactly once per registration.
    pub(crate) fn wake(self) {
        self.wake_here(m::Here::lookup())
    }

    /// [`wake`](Self::wake) with the M the caller's entry gate looked up.
    #[inline]
    pub(crate) fn wake_here(self, here: m::Here) {
        match self {
            Waiter::Goroutine(g) => ready_here(g, here),
            Waiter::Thread(t) => {
                super::checkdead::progress();
                t.unpark()
            }
            Waiter::Waker(w) => {
                super::checkdead::progress();
                w.wake()
            }
        }
    }

    /// [`wake_here`](Self::wake_here) for one of a batch woken in a row: a
    /// goroutine goes to the tail of this P's ring ([`ready_queued`],
    /// looking for an idle P if `wake`); threads and tasks as `wake_here`.
    #[inline]
    pub(crate) fn wake_queued(self, here: m::Here, wake: bool) {
        match self {
            Waiter::Goroutine(g) => ready_queued(g, here, wake),
            w => w.wake_here(here),
        }
    }
}

/// Parks the running goroutine (see the module note). `unlock` runs on the
/// scheduler after the switch; returning false cancels the park.
///
/// # Panics
/// Outside a goroutine (callers check `m::current_g()` first).
pub(crate) fn park(reason: WaitReason, unlock: &mut dyn FnMut(&'static G) -> bool) {
    park_inline(m::Here::lookup(), reason, unlock)
}

/// [`park`] with the M the caller's entry gate looked up (its last use of
/// that `Here`: the goroutine may resume on another M), inlined into the
/// caller. For the non-generic waits of this crate, whose own frame should
/// hold the switch (`RawChan::block`, `selectgo`, `spawn::wait_complete`,
/// `time::sleep`, the netpoller's `wait`, the sync primitives'
/// `WaitCell::block`). Not for generic code: instantiated in another
/// crate, the coroutine's suspend inside it would be a frame of its own
/// again (`g::switch`'s note, "Returns after a switch").
#[inline(always)]
pub(crate) fn park_inline(
    here: m::Here,
    reason: WaitReason,
    unlock: &mut dyn FnMut(&'static G) -> bool,
) {
    let m = here.m().expect("park called outside a goroutine");
    let g = m.curg().expect("park called outside a goroutine");
    // SAFETY: m is the calling thread's own M.
    if unsafe { m.p() }.is_none() {
        park_in_syscall(reason, unlock);
        return;
    }
    g.set_wait_reason(reason);
    g.set_waitsince(super::stats::coarse_ms());
    // SAFETY: erasing the lifetime is sound because the closure lives on this
    // goroutine's stack, which stays intact until the scheduler has finished
    // calling it (it calls `unlock` before anything can resume this G).
    let unlock: *mut (dyn FnMut(&'static G) -> bool + 'static) =
        unsafe { std::mem::transmute(unlock as *mut (dyn FnMut(&'static G) -> bool + '_)) };
    // SAFETY: `g` is the goroutine running on this thread, and we are on its
    // stack.
    unsafe { super::lockosthread::switch_out(g, Action::Park(unlock)) };
    g.set_wait_reason(WaitReason::None);
}

/// Blocking on a runtime object inside `goroutine::syscall`: leaves the
/// system call for the duration of the park, then re-enters it.
#[cold]
#[inline(never)]
fn park_in_syscall(reason: WaitReason, unlock: &mut dyn FnMut(&'static G) -> bool) {
    super::syscall::exitsyscall();
    park(reason, unlock);
    super::syscall::reentersyscall();
}

/// Go's Gosched for runtime code already inside the entry gate: the
/// running goroutine yields (`Action::Yield`, the order `yield_now`
/// documents); without a goroutine or a P (inside `syscall`), the OS
/// thread yields. `crate::yield_now` is this behind the gate.
pub(crate) fn gosched(here: m::Here) {
    if let Some(m) = here.m() {
        // SAFETY: m is the calling thread's own M. Without a P (inside
        // `syscall`) the goroutine cannot be rescheduled: yield the thread.
        if let (Some(g), Some(_)) = (m.curg(), unsafe { m.p() }) {
            // SAFETY: `g` is the goroutine running on this thread, on its stack.
            unsafe { super::lockosthread::switch_out(g, Action::Yield) };
            return;
        }
    }
    std::thread::yield_now()
}

/// Lets the goroutine just readied into this P's runnext run now, and puts
/// the caller at the tail of the local ring (Go's goyield, as `semrelease`
/// does after a direct grant). No-op outside a goroutine.
pub(crate) fn goyield() {
    if let Some(g) = m::current_g() {
        // SAFETY: `g` is the goroutine running on this thread, on its stack.
        unsafe { super::lockosthread::switch_out(g, Action::YieldLocal) };
    }
}

/// Makes a parked goroutine runnable (Go's goready): into the current P's
/// runnext when called on an M, else onto the global queue.
///
/// The deadlock detector's progress counter is bumped only when the readier
/// holds no P (a plain thread, or an M in a system call): a ready from a
/// goroutine running on a P happens while that P is busy, which the
/// detector sees directly (it only reports when every P is idle and stays
/// idle; leaving that state needs a wakeup from outside a P, which is
/// counted). This keeps a global read-modify-write off the wake-up path
/// (every direct send and direct grant ends here), where at GOMAXPROCS > 1
/// every P would bounce its cache line.
pub(crate) fn ready(g: &'static G) {
    ready_here(g, m::Here::lookup())
}

/// [`ready`] with the M the caller's entry gate looked up.
#[inline]
pub(crate) fn ready_here(g: &'static G, here: m::Here) {
    ready_with(g, here, true, true)
}

/// One goroutine of a batch readied in a row (a close that wakes every
/// waiter, `chan::wait::complete_all`): onto the tail of this P's ring
/// rather than into runnext. Go readies each into runnext, which only
/// pushes the one before to the ring's tail: the queue ends up the same
/// when the batch's last goroutine goes through [`ready_here`], but each
/// `runnext` swap is a full barrier, and in a batch of cold records every
/// barrier waits for the stores that missed before it. With `wake`, the
/// caller asks for an idle P's M as [`ready_here`] does, after a `SeqCst`
/// fence (the ring publish is only a release store: `RunQueue::try_put`); a
/// batch does so at its first goroutine and then every few, so that an idle
/// P starts helping at once and the goroutines published in between wait at
/// most until the next one.
#[inline]
pub(crate) fn ready_queued(g: &'static G, here: m::Here, wake: bool) {
    ready_with(g, here, false, wake)
}

#[inline(always)]
fn ready_with(g: &'static G, here: m::Here, next: bool, wake: bool) {
    g.cas_waiting_to_runnable();
    // Randomized scheduling (tests only): sometimes make a woken goroutine
    // wait behind the global queue, as if readied from another thread.
    #[cfg(goroutine_randomize)]
    if super::randomize::one_in(4) {
        super::checkdead::progress();
        if tracer::on() {
            tracer::go_unblock_by(here.m(), g, tracer::GLOBAL);
        }
        globrunq::put_woken(g);
        idle::wakep();
        return;
    }
    let m = here.m();
    // SAFETY: m is the calling thread's own M.
    match m.and_then(|m| unsafe { m.p() }) {
        Some(pp) => {
            if tracer::on() {
                tracer::go_unblock_by(m, g, pp.id);
            }
            super::stats::metrics_runnable(pp, g);
            localrunq::runqput(pp, g, next);
            if !wake {
                return;
            }
            if !next {
                // StoreLoad between the ring publish and wakep's loads
                // (`spinning::try_claim_wake`; the runnext swap is one).
                std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
            }
        }
        None => ready_global(g, m),
    }
    idle::wakep();
}

/// `ready` from a thread holding no P: onto the global queue.
#[cold]
fn ready_global(g: &'static G, m: Option<&'static m::M>) {
    super::checkdead::progress();
    // The event first: the sample takes the word that holds the GoBlock's
    // time, which the GoUnblock reads (`G::trace_block_ts`).
    if tracer::on() {
        tracer::go_unblock_by(m, g, tracer::GLOBAL);
    }
    super::stats::metrics_runnable_unowned(g);
    globrunq::put_woken(g)
}
