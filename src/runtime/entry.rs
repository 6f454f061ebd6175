//! The entry gate of runtime calls: the one construct every public runtime
//! entry point (and the `Drop` of every runtime type that does work) runs
//! its body through, [`call`] (or [`call_here`], which hands the body the
//! M it looked up).
//!
//! It has two duties, both about the M's thread crossing from a goroutine's
//! own code into runtime code:
//! 1. **P revocation** (`m::revoke`, `runtime::retake`): the outermost call
//!    makes the M's handshake word odd on the way in and even on the way
//!    out. If sysmon (or a stop-the-world) took the P while the goroutine
//!    was blocked in the kernel, the entry notices here, before any runtime
//!    code touches the P, and re-acquires one as `exitsyscall` would
//!    ([`settle`]). Nested calls see the word already odd and do nothing.
//!    Cost on the fast path: one thread-local lookup of the M (handed to
//!    the body as a `Here`, so the body need not look it up again), two
//!    plain stores (the way out's a Release, which on x86-64 is a plain
//!    `mov`: `m::revoke`, invariant 5), three plain loads, no locked
//!    instruction and no fence.
//! 2. **Asynchronous preemption** (`asyncpreempt`): once preemptible regions
//!    exist, the goroutine's `in_runtime` count is raised so no signal stops
//!    it inside runtime code.
//!
//! The goroutine's own closure runs through [`user`], the mirror image:
//! word even while it runs, odd again (with the same check) when it
//! returns or panics.
//!
//! # Invariants
//! - Runtime code on an M runs with the M's word odd: the scheduler loop
//!   (an M starts odd), every gate body, the asynchronous-preemption
//!   trampoline (which enters by hand).
//! - A goroutine's own code runs with the word even, except after a panic
//!   unwound out of a gate body (then the word stays odd until the
//!   goroutine's next outermost call returns on another stretch: that
//!   goroutine is merely not revocable meanwhile).
//! - After `leave` the thread touches no runtime state until the next
//!   `enter`. The word is per M, not per goroutine: a call that parks and
//!   resumes on another M leaves through that M (whose scheduler made its
//!   word odd), so on the way out the gate finds the M again (`leave_from`).
//!
//! Debug builds check the gate where it matters: `M::p` asserts that the
//! calling M's word is odd (runtime code), so a runtime path reached from a
//! public function that bypasses the gate fails the debug test suite the
//! first time it touches its P.
//! `tests/entry_gate.rs` checks statically that every public function passes
//! through [`call`] or says why it need not (`// entry: <reason>`).

use std::panic::{self, AssertUnwindSafe};

use super::asyncpreempt;
use crate::m::{self, revoke::Entry, Here, M};

/// Runs `f`, the body of a runtime call (one that touches scheduler state
/// or takes a runtime lock), behind the gate (module note): the body of
/// every public entry point and of the `Drop` of every runtime type that
/// does work.
///
/// Before any preemptible region exists, the asynchronous-preemption half
/// is one relaxed load and a branch, with `f` inlined. (A guard value in
/// each entry point instead costs an unwind landing pad per entry point,
/// which cost instructions on every channel operation of the `pingpong`
/// example, through lost inlining.)
///
/// No closure of the user may run inside `f`: it would be neither
/// preemptible nor revocable.
#[inline(always)]
pub(crate) fn call<R>(f: impl FnOnce() -> R) -> R {
    call_here(|_| f())
}

/// [`call`], handing the body the M the gate looked up ([`Here`]), so the
/// hot paths below it (preemption check, channel operation, `ready`,
/// `park`) do not look it up again.
///
/// On the way out the gate needs the M the goroutine runs on *now*, which
/// differs from the one it entered on only if the body parked or yielded.
/// It checks that without a thread-local lookup: if the entry M's `curg`
/// is still the goroutine that entered, the goroutine is still on that M.
/// (A goroutine runs on one M at a time; an M clears `curg` when the
/// goroutine switches out, before anything can resume it elsewhere, so a
/// goroutine resumed on another M reads `None` or a later goroutine there,
/// never itself: the clearing happens-before the resumption through the
/// run queue or wait queue that handed the goroutine over.)
#[inline(always)]
pub(crate) fn call_here<R>(f: impl FnOnce(Here) -> R) -> R {
    if asyncpreempt::regions_used() {
        return call_guarded(f);
    }
    // One call site of `f`, so LLVM inlines large bodies (spawn's) too.
    // The M is looked up through the out-of-line `m::current`, never an
    // inlined thread-local read: `f` may switch, and this function goes on
    // after it (docs/soundness.md, "The compiler's side").
    let m = m::current();
    let g = m.and_then(|m| m.curg());
    let outer = match m.map(|m| (m, m.revoke.enter())) {
        None | Some((_, Entry::Nested)) => None,
        Some((m, Entry::Entered)) => Some(m),
        Some((m, Entry::Contended)) => return call_settled(m, f),
    };
    let r = f(Here::of(m));
    if let Some(m) = outer {
        leave_from(m, g);
    }
    r
}

/// [`call_here`] after a contended entry: the P may have been taken and
/// the goroutine moved to another M by [`settle`], so the M is looked up
/// again.
#[cold]
#[inline(never)]
fn call_settled<R>(m: &'static M, f: impl FnOnce(Here) -> R) -> R {
    settle(m);
    let r = f(Here::lookup());
    leave();
    r
}

/// [`call`] once preemptible regions exist: the goroutine's `in_runtime`
/// is raised *first* (by a lookup that is itself safe against preemption),
/// so no signal can move the goroutine to another thread between reading
/// its M and writing that M's word.
#[inline(never)]
fn call_guarded<R>(f: impl FnOnce(Here) -> R) -> R {
    let _rt = asyncpreempt::InRuntime::enter();
    let outer = enter();
    let r = f(Here::lookup());
    if outer {
        leave();
    }
    r
}

/// Leaves runtime code after an outermost entry on `m` by goroutine `g`
/// (None: the scheduler's own context, which never changes M).
#[inline(always)]
fn leave_from(m: &'static M, g: Option<&'static crate::g::G>) {
    let still_here = match g {
        None => true,
        Some(g) => m.curg().is_some_and(|c| std::ptr::eq(c, g)),
    };
    debug_assert_eq!(
        still_here,
        m::current().is_some_and(|now| std::ptr::eq(now, m)),
        "the entry gate's curg test disagrees with the thread's M"
    );
    if still_here {
        m.revoke.leave();
    } else {
        leave();
    }
}

/// Enters runtime code on this thread; true if this was the outermost
/// entry (the caller must [`leave`]).
#[inline(always)]
pub(crate) fn enter() -> bool {
    let Some(m) = m::current() else {
        return false;
    };
    match m.revoke.enter() {
        Entry::Nested => false,
        Entry::Entered => true,
        Entry::Contended => {
            settle(m);
            true
        }
    }
}

/// Leaves runtime code (after an outermost [`enter`]), on whatever M the
/// goroutine runs now.
#[inline(always)]
pub(crate) fn leave() {
    if let Some(m) = m::current() {
        m.revoke.leave();
    }
}

/// Runs a goroutine's own closure with the word even, catching its panic.
///
/// In the crate's own unit tests goroutine bodies call internal runtime
/// functions directly (no public entry point around them), so there the
/// whole body counts as runtime code and is never revoked; the integration
/// tests (`tests/`) exercise revocation through the real API.
pub(crate) fn user<R>(f: impl FnOnce() -> R) -> std::thread::Result<R> {
    if cfg!(test) {
        return panic::catch_unwind(AssertUnwindSafe(f));
    }
    let m = m::current();
    let g = m.and_then(|m| m.curg());
    if let Some(m) = m {
        m.revoke.leave();
    }
    let r = panic::catch_unwind(AssertUnwindSafe(f));
    // Back into runtime code on the M the goroutine runs on now: the same
    // one unless the closure was moved (`leave_from`'s argument).
    match (m, g) {
        (Some(m), Some(g)) if m.curg().is_some_and(|c| std::ptr::eq(c, g)) => {
            if let Entry::Contended = m.revoke.enter() {
                settle(m);
            }
        }
        _ => {
            enter();
        }
    }
    r
}

/// A revoker is deciding about this M's P: wait, and if the P was taken,
/// get one back (`syscall::exit_revoked`) before the runtime call goes on.
#[cold]
#[inline(never)]
fn settle(m: &'static M) {
    if !m.revoke.wait_decision() {
        return;
    }
    // SAFETY: own thread; the handshake reported the P taken.
    unsafe { m.forget_revoked_p() };
    m.revoke.acknowledge();
    super::retake::returned(m);
    super::syscall::exit_revoked(m);
}
