//! LockOSThread (Go's lockOSThread / unlockOSThread, startlockedm,
//! stoplockedm, and the thread exit of a goroutine that dies locked).
//!
//! # Protocol
//! - `lock_os_thread` wires the running G and its M together (`G::lockedm`,
//!   in the G's owner-only `Inner`, and `M::lockedg`, own thread only) and
//!   counts nesting; `unlock_os_thread` unwires when the count drops to 0.
//! - While wired, the G runs only on its M. When it stops running (parks,
//!   yields, is preempted, leaves a system call without a P), its M finds
//!   `lockedg` set at the top of `schedule`, gives its P a P handoff
//!   (`handoffp`) and sleeps on its note, on no idle list ([`stoplockedm`]).
//! - Whoever takes the runnable G off a run queue sees `lockedm`, hands *its
//!   own* P to that M through `nextp` and wakes it, then parks itself on the
//!   idle list ([`startlockedm`]: the locked-M switch). The woken M runs its G.
//! - A G that exits still locked takes its thread with it: the M hands off
//!   its P and its thread ends ([`mexit`]), as Go does, since the goroutine
//!   may have left the thread in a state no one else should inherit.
//!
//! - A goroutine spawned pinned (`Builder::lock_os_thread(true)`) locks
//!   itself before the first instruction of its closure ([`pin`]), on the
//!   M that first runs it, with one level `unlock_os_thread` never removes
//!   (the `PINNED` bit of `locked`; `gdestroy` clears it with the rest):
//!   it never changes thread, and its thread ends with it.
//!
//! # Unwinding
//! std counts panics per thread (`std::thread::panicking`, and the count a
//! `MutexGuard` reads to decide whether to poison). A goroutine whose
//! unwinding parks (a `Drop` that sends, receives or sleeps) must therefore
//! come back on the thread whose count it raised, and no other goroutine
//! may run there meanwhile: it would see `panicking() == true`, and the
//! unwinding one, resumed elsewhere, would lower a count it never raised.
//! So every switch out of a goroutine goes through [`switch_out`], which
//! wires a goroutine that is unwinding to its M (the `UNWINDING` bit of
//! `Inner::locked`, one level besides the user's), and unwires it at the
//! first switch out after its unwinding ended. While wired it is a locked
//! goroutine like any other (the rules above), except that exiting wired
//! only by `UNWINDING` does not end the thread: the panic is over, and the
//! thread's count is back to what it was ([`exit_ends_thread`]). When no
//! thread of the process is panicking, the check costs one load of std's
//! global panic count and one of `Inner::locked`.
//!
//! # Spans (feature `tracing`)
//! A `tracing` subscriber keeps the entered spans per OS thread, so the
//! spans a goroutine entered must leave the thread with it. [`switch_out`]
//! being the one way out of a goroutine, it calls the two hooks the `spans`
//! module registers ([`set_span_hooks`]; it lives above this layer): the
//! suspend hook before the switch, on the old thread, and the resume hook
//! after it, on the thread the goroutine resumed on, told whether the
//! suspend hook took any span off the old thread. Both run on the
//! goroutine's stack, as the goroutine, inside the entry gate. Until a
//! dispatcher has been set anywhere in the process the switch pays one
//! relaxed load (`tracing_core::dispatcher::has_been_set`); the resume hook
//! runs exactly when the suspend hook ran.
//!
//! Ownership of the P moves only through `nextp` + note wakeup (the same
//! edge `startm` uses) or `handoffp`, so the one-owner rule holds. A locked
//! M's note is woken at most once per sleep: only the single M that popped
//! its runnable G calls `startlockedm`.

use super::{idle, syscall};
use crate::g::G;
use crate::m::{self, M};

/// The bit of `Inner::locked` that marks a pinned goroutine (the rest is
/// the nesting depth, which includes the pin's own level).
pub(crate) const PINNED: u32 = 1 << 31;

/// The bit of `Inner::locked` held while the goroutine unwinds a panic
/// (module note, "Unwinding").
const UNWINDING: u32 = 1 << 30;

/// The nesting depth's bits of `Inner::locked`.
const DEPTH: u32 = !(PINNED | UNWINDING);

/// See `crate::lock_os_thread`.
pub(crate) fn lock_os_thread() {
    let Some(m) = m::current() else { return };
    let Some(g) = m.curg() else { return };
    // SAFETY: the running G owns its Inner.
    let inner = unsafe { g.inner() };
    let depth = inner.locked & DEPTH;
    if depth == DEPTH {
        super::throw("lock_os_thread nesting overflow");
    }
    inner.locked += 1;
    inner.lockedm = Some(m);
    m.set_lockedg(Some(g));
}

/// See `crate::unlock_os_thread`.
pub(crate) fn unlock_os_thread() {
    let Some(m) = m::current() else { return };
    let Some(g) = m.curg() else { return };
    // SAFETY: the running G owns its Inner.
    let inner = unsafe { g.inner() };
    // A pinned goroutine's own level stays (module note).
    let floor = u32::from(inner.locked & PINNED != 0);
    if inner.locked & DEPTH <= floor {
        return;
    }
    inner.locked -= 1;
    if inner.locked == 0 {
        inner.lockedm = None;
        m.set_lockedg(None);
    }
}

/// Locks the goroutine being started to its thread for life (module note).
/// Called first thing on the goroutine's stack, before its closure.
pub(crate) fn pin() {
    lock_os_thread();
    let Some(g) = m::current().and_then(|m| m.curg()) else {
        return;
    };
    // SAFETY: the running G owns its Inner.
    unsafe { g.inner() }.locked |= PINNED;
}

/// The span hooks (module note, "Spans").
#[cfg(feature = "tracing")]
#[derive(Clone, Copy)]
struct SpanHooks {
    /// Before the switch; returns whether it took any span off the thread.
    suspend: fn() -> bool,
    /// After the switch, told what `suspend` returned.
    resume: fn(bool),
}

#[cfg(feature = "tracing")]
static SPAN_HOOKS: std::sync::OnceLock<SpanHooks> = std::sync::OnceLock::new();

/// Registers the span hooks (module note, "Spans"); the first registration
/// wins. Called by `spans` before any goroutine it follows runs.
#[cfg(feature = "tracing")]
pub(crate) fn set_span_hooks(suspend: fn() -> bool, resume: fn(bool)) {
    let _ = SPAN_HOOKS.set(SpanHooks { suspend, resume });
}

/// Switches the running goroutine `g` out to its M's scheduler with
/// `action`, keeping an unwinding goroutine on its thread (module note,
/// "Unwinding"). Every switch out of a goroutine goes through here.
///
/// # Safety
/// As `context::switch_to_scheduler`: `g` runs on the calling thread, and
/// the call is made from its own stack.
#[inline(always)]
pub(crate) unsafe fn switch_out(g: &'static G, action: crate::g::switch::Action) {
    // SAFETY: the running G owns its Inner (caller's contract).
    if std::thread::panicking() || unsafe { g.inner() }.locked & UNWINDING != 0 {
        rewire_for_unwinding(g);
    }
    // Module note, "Spans": one relaxed load while no dispatcher is set.
    #[cfg(feature = "tracing")]
    let hooks = if tracing_core::dispatcher::has_been_set() {
        SPAN_HOOKS.get().copied()
    } else {
        None
    };
    #[cfg(feature = "tracing")]
    let carried = hooks.is_some_and(|h| (h.suspend)());
    // SAFETY: the caller's contract.
    unsafe { crate::g::switch::switch_to_scheduler(g, action) };
    #[cfg(feature = "tracing")]
    if let Some(h) = hooks {
        (h.resume)(carried);
    }
}

/// Wires `g` to its M while its thread is panicking; unwires it once that
/// is over (module note, "Unwinding").
#[cold]
#[inline(never)]
fn rewire_for_unwinding(g: &'static G) {
    let Some(m) = m::current() else { return };
    // SAFETY: the running G owns its Inner.
    let inner = unsafe { g.inner() };
    if std::thread::panicking() {
        if inner.locked & UNWINDING == 0 {
            inner.locked |= UNWINDING;
            inner.lockedm = Some(m);
            m.set_lockedg(Some(g));
        }
    } else if inner.locked & UNWINDING != 0 {
        inner.locked &= !UNWINDING;
        if inner.locked == 0 {
            inner.lockedm = None;
            m.set_lockedg(None);
        }
    }
}

/// Whether the exit of `g`, locked to its M, ends the M's thread: yes when
/// the program locked it (or spawned it pinned), not when only its
/// unwinding did (module note). Called by its M, on g0, after it exited.
pub(crate) fn exit_ends_thread(g: &'static G) -> bool {
    // SAFETY: the G exited; its M owns it.
    unsafe { g.inner() }.locked & !UNWINDING != 0
}

/// The M locked to `g`, if any (read by the M that owns `g`: its runner or
/// the one that popped it off a run queue).
pub(crate) fn lockedm(g: &'static G) -> Option<&'static M> {
    // SAFETY: the caller owns the G (module note).
    unsafe { g.inner() }.lockedm
}

/// The M's locked G stopped running: give the P a P handoff and sleep until
/// a locked-M switch hands us a P to run it again (Go's stoplockedm).
pub(crate) fn stoplockedm(m: &'static M) {
    // SAFETY: own thread, holding a P.
    if let Some(pp) = unsafe { m.p() }.is_some().then(|| unsafe { m.releasep() }) {
        // Our G may have just yielded into this P's yield buffer: handoffp
        // moves the buffer to the global queue first.
        syscall::handoffp(pp);
    }
    super::stats::bump(&m.parks, 1);
    if crate::tracer::on() {
        crate::tracer::m_park();
    }
    super::checkdead::IDLE_LOCKED_MS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    super::checkdead::m_parked();
    m.park.sleep();
    super::checkdead::IDLE_LOCKED_MS.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    m.park.clear();
    super::stats::bump(&m.wakes, 1);
    super::stats::refresh_coarse_now();
    if crate::tracer::on() {
        crate::tracer::m_wake();
    }
    // SAFETY: own thread, after the wakeup that published nextp.
    unsafe {
        let pp = m.take_nextp().expect("stoplockedm: woken without a P");
        m.acquirep(pp);
    }
}

/// This M popped `g`, which is locked to another M: hand our P to that M
/// and park (Go's startlockedm).
pub(crate) fn startlockedm(m: &'static M, target: &'static M) {
    // SAFETY: own thread, holding a P.
    let pp = unsafe { m.releasep() };
    // SAFETY: `target` sleeps in stoplockedm (its G was runnable, so it has
    // stopped running it), off every list; only we, who popped its G, wake it.
    unsafe { target.set_nextp(pp, false) };
    target.park.wakeup();
    idle::stopm(m);
}

/// The locked G exited: hand off the P; the caller ends the thread.
pub(crate) fn mexit(m: &'static M) {
    m.set_lockedg(None);
    // SAFETY: own thread, holding a P.
    let pp = unsafe { m.releasep() };
    syscall::handoffp(pp);
    m.set_dead();
}
