//! The context switch: goroutine <-> its M's scheduler context (Go's g0).
//!
//! Every goroutine runs as a corosensei coroutine on its own [`Stack`]. The
//! scheduler loop of an M runs on the M's OS-thread stack and `resume`s the
//! chosen G; the G comes back only through [`switch_to_scheduler`] with an
//! [`Action`] that the scheduler carries out *after* the G's stack is fully
//! switched out (Go's `mcall`). That ordering is what makes parking safe: a
//! waker can only find a parked G after the park's `unlock` step ran on g0, by
//! which time nothing runs on the G's stack any more.
//!
//! Why a goroutine's stack may move between threads: corosensei's `Coroutine`
//! is `!Send` because code on its stack might hold `!Send` data (an `Rc`, a
//! `thread_local!` reference). The goroutine's closure is `Send`, so it
//! starts with only `Send` data; what it creates on its stack afterwards is
//! Rust code the user wrote, and the crate documentation states the hazard:
//! a value borrowed from a `thread_local!` must not be held across a runtime
//! call (yield, join, channel operation), since the goroutine may resume on
//! another thread. The runtime itself never caches its thread-local M/P/G
//! across a switch: every access goes through `m::current()`, an out-of-line
//! function, so the compiler cannot reuse a thread-local address computed
//! before the switch.
//!
//! # Returns after a switch
//!
//! The CPU predicts each `ret` from its return-address stack, which the two
//! sides of a switch share. corosensei keeps its own switch balanced (the
//! resume is a `call` that the goroutine's suspend answers with a `ret`),
//! but a function entered before a switch and left after it returns to an
//! address the other side's calls pushed: a mispredicted return. A bare
//! coroutine pair (`examples/switch_returns.rs`) measures it: each frame
//! between a loop and its switch, on either side, multiplies the cost of
//! a resume and suspend. So:
//!
//! - the scheduler's side has none: `schedule::execute`, which resumes, is
//!   inlined into the M's loop, and after the switch back only calls (and
//!   returns from) functions entered after it;
//! - the goroutine's side has the frames between its own code and the
//!   suspend. A channel send or receive has one: the generic operation is
//!   inlined into the caller and calls out only to try without waiting (a
//!   call that returns before any switch) and to wait (`RawChan::block`,
//!   not generic, with the park and the switch inlined into it). Measured
//!   per ping-pong round trip at GOMAXPROCS=1: 123 ns with the resume in
//!   its own frame and two frames on the goroutine's side, 109 with the
//!   resume in the loop, 99 with one frame on the goroutine's side.
//! - corosensei's suspend is generic: instantiated in another crate (a
//!   generic wait inlined into the user's code) it may be compiled as a
//!   frame of its own. So the switch is inlined only into non-generic
//!   functions of this crate (`park::park_inline`); a generic wait
//!   (`block_on`'s) calls the out-of-line `park`.
//!
//! # Sanitizers
//!
//! A sanitizer must be told about every stack switch (README, "Sanitizers"):
//!
//! - AddressSanitizer: corosensei's `sanitizer` feature, switched on in
//!   Cargo.toml for `cfg(sanitize = "address")` builds only, calls
//!   `__sanitizer_start_switch_fiber` / `__sanitizer_finish_switch_fiber`
//!   around each switch and unpoisons a stack before it is reused. Nothing
//!   here.
//! - ThreadSanitizer (`--cfg goroutine_sanitize="thread"`): each goroutine
//!   is a TSan fiber, created on its first resume and destroyed when it
//!   exits. Both switches are announced from the scheduler side of
//!   [`resume`]: to the G's fiber just before `Coroutine::resume`, back to
//!   the M's own fiber just after it returns. That way corosensei's
//!   instrumented frames between the annotation and the real switch are
//!   entered and left on the same fiber's shadow (call) stack, which would
//!   otherwise drift by a frame or two per switch; the few instructions of
//!   corosensei's epilogue that run on the scheduler's stack under the G's
//!   fiber are harmless because every switch synchronises (flags 0: a
//!   happens-before edge from the fiber switched away from to the one
//!   switched to, like a real context switch). A fiber can be switched to
//!   from any thread, so a G that moves between Ms keeps its fiber.

use corosensei::{Coroutine, CoroutineResult, Yielder};

use super::stack::Stack;
use super::G;
#[cfg(not(any(goroutine_sanitize = "address", goroutine_sanitize = "thread")))]
use crate::traceback::StackHeader;

/// What a goroutine asks its M's scheduler to do once it is switched out.
pub(crate) enum Action {
    /// Yield with Go's Gosched order (behind the global queue; see
    /// `schedule::execute`).
    Yield,
    /// Go to the tail of the current P's ring (Go's goyield: used after a
    /// direct grant put the woken G in this P's runnext).
    YieldLocal,
    /// Preempted by sysmon (cooperatively, or by signal from a preemptible
    /// region): go to the global queue.
    Preempt,
    /// Back from a system call and no P was free: queue the G globally and
    /// park the M (Go's exitsyscall0).
    ExitSyscall,
    /// Park; then call `unlock(g)`: `false` means "do not park after all" and
    /// the G is resumed at once (Go's gopark unlockf).
    Park(*mut (dyn FnMut(&'static G) -> bool + 'static)),
}

/// A goroutine's execution context: its coroutine (and, under TSan, its
/// fiber).
pub(crate) struct GCoroutine {
    co: Coroutine<(), Action, (), Stack>,
    #[cfg(goroutine_sanitize = "thread")]
    fiber: crate::sys::tsan::Fiber,
}

/// The result of running a G until it switches out.
pub(crate) enum Switch {
    Action(Action),
    Exited(Stack),
}

/// Creates the coroutine of `g` on `stack`; `body` runs when it is first resumed.
pub(crate) fn new(stack: Stack, g: &'static G, body: fn(&'static G)) -> GCoroutine {
    let co = Coroutine::with_stack(stack, move |y: &Yielder<(), Action>, ()| {
        g.set_yielder(y as *const Yielder<(), Action> as *mut ());
        #[cfg(not(any(goroutine_sanitize = "address", goroutine_sanitize = "thread")))]
        {
            // The header sits right above corosensei's parent link (the
            // yielder): found from there, as `switch_to_scheduler` does,
            // without recomputing it from the stack's top (its colour).
            let h = (y as *const Yielder<(), Action> as usize + 16) as *mut StackHeader;
            debug_assert_eq!(
                g.stack_range().map(|(_, top)| StackHeader::at(top)),
                Some(h),
                "the stack header is not above the yielder"
            );
            // SAFETY: we are the goroutine, running: the owner of Inner.
            let spawn = unsafe { g.inner() }
                .task
                .as_ref()
                .map(|t| t.spawn())
                .unwrap_or_default();
            // SAFETY: our own stack's header.
            unsafe { StackHeader::set_site(h, spawn) };
        }
        body(g)
    });
    GCoroutine {
        co,
        #[cfg(goroutine_sanitize = "thread")]
        fiber: crate::sys::tsan::Fiber::new(),
    }
}

/// Runs `g` (which must own `co`) until it switches out or returns.
/// Inline: called from one place (the scheduler's `execute`), once per switch;
/// left to the compiler it is inlined or not depending on how unrelated code
/// falls into codegen units, which shows in the ping-pong round trip.
#[inline]
pub(crate) fn resume(co: &mut Option<GCoroutine>) -> Switch {
    let c = co
        .as_mut()
        .expect("resume of a goroutine without a context");
    #[cfg(goroutine_sanitize = "thread")]
    let back = c.fiber.switch_to();
    let r = c.co.resume(());
    #[cfg(goroutine_sanitize = "thread")]
    crate::sys::tsan::switch_back(back);
    match r {
        CoroutineResult::Yield(a) => Switch::Action(a),
        CoroutineResult::Return(()) => {
            let c = co.take().expect("coroutine vanished");
            Switch::Exited(c.co.into_stack())
        }
    }
}

/// Switches from the running goroutine `g` to its M's scheduler context with
/// `action`; returns when the G is next resumed (possibly on another thread).
/// The runtime calls it only through `runtime::lockosthread::switch_out`,
/// which keeps an unwinding goroutine on its thread.
///
/// # Safety
/// `g` must be the goroutine running on the calling thread, and the call
/// must be made from its own stack.
#[inline]
pub(crate) unsafe fn switch_to_scheduler(g: &'static G, action: Action) {
    g.debug_check_guarded();
    let y = g.yielder() as *const Yielder<(), Action>;
    // Record where this stack stops, for tracebacks (`traceback` module
    // note): the header sits right above the parent link `y` points at.
    // (Sanitizer builds put corosensei's fiber data there: no tracebacks.)
    #[cfg(not(any(goroutine_sanitize = "address", goroutine_sanitize = "thread")))]
    // SAFETY: our own stack's header (we run on it: caller's contract).
    unsafe {
        StackHeader::record((y as *mut u8).add(16) as *mut StackHeader)
    };
    // SAFETY: `yielder` was set by `new` from the coroutine's own yielder,
    // which lives as long as the coroutine; we are running on that
    // coroutine (caller's contract), so suspending through it is valid.
    unsafe { (*y).suspend(action) }
}
