//! Asynchronous preemption of preemptible regions (Go's `preemptM` /
//! `doSigPreempt` / `asyncPreempt`, restricted to code that promised to be
//! interruptible). The design, and why it is limited to regions, is in
//! `docs/preemption.md`; the OS half (signal handler, frame copy,
//! `rt_sigreturn`) is `sys::preempt`.
//!
//! # State
//! - `REGIONS_USED`: set once, when the first region is entered (after the
//!   `SIGURG` handler is installed). Until then every runtime call's
//!   [`entry::call`](super::entry::call) is one relaxed load of it and a branch, and sysmon sends
//!   no signal.
//! - Per G (both written only by the G itself, read by the handler on the
//!   same thread, so plain loads and stores ordered by signal fences):
//!   `region_depth` (nesting of [`region`]) and `in_runtime` (nesting of
//!   runtime calls: every public runtime entry point and the `Drop` of every
//!   runtime type that does work runs its body in [`entry::call`](super::entry::call), which
//!   holds an [`InRuntime`] guard once regions exist).
//! - Finding "the running G" from code that may itself be preempted needs
//!   care: see `m::current_g_checked`.
//! - Per M: `async_preempt`, set by sysmon just before `tgkill(SIGURG)`,
//!   consumed (swap) by the handler: a `SIGURG` that finds it clear is not
//!   ours and goes to the previous handler.
//!
//! # Protocol
//! 1. sysmon's `retake` sees a P whose goroutine ran a whole slice (10 ms)
//!    and sets `P::preempt` (cooperative). If the P's M (`P::m`) runs a
//!    goroutine whose `region_depth > 0`, it also calls [`preempt_m`]: flag
//!    the M, signal its thread.
//! 2. The handler ([`on_signal`], async-signal-safe: a const thread-local,
//!    atomics, no locks, no allocation) preempts only if the M runs a G
//!    that is `Running`, in a region, in no runtime call, not panicking,
//!    at a PC in the runtime's own object (not libc, the vDSO or another
//!    shared library), with the thread's normal signal mask (not inside
//!    another signal handler), on the G's stack with room for the save area,
//!    and with the handler itself on the alternate stack. Otherwise it does
//!    nothing: sysmon asks again next tick, and cooperative preemption
//!    still applies at the G's next runtime call.
//!    A goroutine whose P was taken while it blocked in the kernel
//!    (`runtime::retake`) and that computes again in its region is
//!    signalled too ([`preempt_revoked`], by sysmon and stop-the-world):
//!    it runs without a P, so no P's retake would reach it.
//! 3. To preempt, it raises the G's `in_runtime` (the trampoline is runtime
//!    code from its first instruction) and redirects the thread to
//!    [`trampoline`], which switches to the scheduler with
//!    `Action::Preempt`, exactly as cooperative preemption does: the G goes
//!    to the global queue.
//! 4. When the G runs again, maybe on another thread, the trampoline hands
//!    the saved context to `sys::preempt::resume`, whose stub drops
//!    `in_runtime` and `rt_sigreturn`s into the interrupted code.
//!
//! Counters ([`stats`]) are kept for tests and tuning.

pub(crate) use imp::{preempt_m, preempt_revoked, region};

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::g::G;
use crate::m;

/// Set once the first region is entered and the handler is installed.
static REGIONS_USED: AtomicBool = AtomicBool::new(false);

/// Whether any preemptible region was ever entered (so signals may come):
/// until then no goroutine can be stopped between two instructions, so
/// lookups need not guard against it (`crate::local`).
#[inline(always)]
pub(crate) fn regions_used() -> bool {
    // Relaxed: a G that entered a region set the flag itself (program
    // order); other Gs cannot be in a region while the flag reads false.
    REGIONS_USED.load(Ordering::Relaxed)
}

/// The running G's in-runtime count, raised while this is held. Tied to the
/// G, not the thread: a call that parks and resumes elsewhere drops the
/// right counter.
#[must_use]
pub(crate) struct InRuntime(Option<&'static G>);

impl InRuntime {
    /// Enters a runtime call that never returns, or a test's (for returning
    /// ones, [`entry::call`](super::entry::call) is cheaper).
    #[inline(always)]
    pub(crate) fn enter() -> InRuntime {
        // Relaxed: as in `in_runtime`.
        if !REGIONS_USED.load(Ordering::Relaxed) {
            return InRuntime(None);
        }
        InRuntime(enter_slow())
    }
}

#[inline(never)]
fn enter_slow() -> Option<&'static G> {
    // Not yet protected: the lookup itself may be preempted.
    let g = m::current_g_checked()?;
    g.runtime_enter().then_some(g)
}

impl Drop for InRuntime {
    #[inline(always)]
    fn drop(&mut self) {
        if let Some(g) = self.0 {
            g.runtime_exit();
        }
    }
}

/// Debug builds: panics if the running goroutine is in a region but not in
/// a runtime call, i.e. some runtime path lacks its [`entry::call`](super::entry::call).
/// Called where the runtime switches or takes its locks.
#[inline]
pub(crate) fn debug_check_guarded() {
    #[cfg(debug_assertions)]
    if REGIONS_USED.load(Ordering::Relaxed) {
        if let Some(g) = m::current_g() {
            g.debug_check_guarded();
        }
    }
}

/// Counters of asynchronous preemption (not a stable API: for tests and
/// tuning).
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AsyncPreemptStats {
    /// `SIGURG`s sent by sysmon.
    pub signals: u64,
    /// Goroutines stopped by a signal (the trampoline ran).
    pub preemptions: u64,
    /// Signals refused because the goroutine was inside a runtime call.
    pub refused_in_runtime: u64,
    /// Signals refused because the PC was outside the runtime's object
    /// (libc, the vDSO, ...).
    pub refused_pc: u64,
    /// Signals refused for another reason (no longer in a region, not
    /// running, panicking, inside another signal handler, stack).
    pub refused_other: u64,
    /// From sysmon's `tgkill` to the trampoline: total and maximum.
    pub latency_total_ns: u64,
    pub latency_max_ns: u64,
}

static SIGNALS: AtomicU64 = AtomicU64::new(0);
static PREEMPTIONS: AtomicU64 = AtomicU64::new(0);
static REFUSED_IN_RUNTIME: AtomicU64 = AtomicU64::new(0);
static REFUSED_PC: AtomicU64 = AtomicU64::new(0);
static REFUSED_OTHER: AtomicU64 = AtomicU64::new(0);
static LATENCY_TOTAL: AtomicU64 = AtomicU64::new(0);
static LATENCY_MAX: AtomicU64 = AtomicU64::new(0);

/// A snapshot of the counters (each read on its own, relaxed).
pub(crate) fn stats() -> AsyncPreemptStats {
    AsyncPreemptStats {
        signals: SIGNALS.load(Ordering::Relaxed),
        preemptions: PREEMPTIONS.load(Ordering::Relaxed),
        refused_in_runtime: REFUSED_IN_RUNTIME.load(Ordering::Relaxed),
        refused_pc: REFUSED_PC.load(Ordering::Relaxed),
        refused_other: REFUSED_OTHER.load(Ordering::Relaxed),
        latency_total_ns: LATENCY_TOTAL.load(Ordering::Relaxed),
        latency_max_ns: LATENCY_MAX.load(Ordering::Relaxed),
    }
}

#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
mod imp {
    /// Nothing to signal elsewhere.
    pub(crate) fn preempt_m(_p: &'static crate::p::P, _now: i64) {}

    /// Nothing to signal elsewhere.
    pub(crate) fn preempt_revoked(_now: i64) {}

    /// Elsewhere a region is just a call: cooperative preemption only.
    #[inline]
    pub(crate) fn region<R>(f: impl FnOnce() -> R) -> R {
        f()
    }
}

#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod imp {
    use std::sync::atomic::Ordering;
    use std::sync::Once;

    use super::*;
    use crate::g::switch::Action;
    use crate::g::Status;
    use crate::m::M;
    use crate::p::P;
    use crate::sys::preempt::{self as sys, Interrupted, SavedContext};
    use crate::sys::time::nanotime;

    /// Stack the trampoline may use below the save area: its own frame, the
    /// context switch, the two system calls of `resume`, and a signal frame
    /// of another signal delivered meanwhile without `SA_ONSTACK`.
    const TRAMPOLINE_STACK: usize = 8 * 1024;

    /// Runs `f` as a preemptible region of the calling goroutine (see
    /// `crate::preemptible`).
    #[inline]
    pub(crate) fn region<R>(f: impl FnOnce() -> R) -> R {
        let _region = Region::enter();
        f()
    }

    /// The region's nesting level on its G, undone on drop (also when `f`
    /// unwinds).
    struct Region(Option<&'static G>);

    impl Region {
        /// The lookup and the first region's set-up run behind the entry
        /// gate, as a runtime call: if the goroutine's P was taken while
        /// it ran its own code before (`runtime::retake`: it blocked in the
        /// kernel, or computed for half a slice), the gate gets a P back
        /// first (`entry::settle`). Without that the goroutine would enter
        /// the region on a thread without a P, where no signal is ever
        /// sent (`preempt_m` signals the Ms of running Ps), and a region
        /// that never calls the runtime would run unstoppable beside the
        /// Ps for as long as it loops. The set-up (`enable`: finding the
        /// code ranges, `sigaction`) is then runtime code too, never taken
        /// for a blocked thread, and the region starts a fresh stretch.
        /// Only the depth is raised after the gate, so no signal finds the
        /// goroutine in a region while it is still inside runtime code.
        #[inline]
        fn enter() -> Region {
            let g = crate::runtime::entry::call(|| {
                let g = m::current_g_checked()?;
                if !REGIONS_USED.load(Ordering::Relaxed) {
                    enable();
                }
                Some(g)
            });
            let Some(g) = g else {
                return Region(None);
            };
            Region(g.region_enter().then_some(g))
        }
    }

    impl Drop for Region {
        #[inline]
        fn drop(&mut self) {
            if let Some(g) = self.0 {
                g.region_exit();
            }
        }
    }

    /// Installs the handler and turns the guards on (once).
    #[cold]
    fn enable() {
        static ONCE: Once = Once::new();
        ONCE.call_once(|| match sys::install(on_signal, trampoline_addr()) {
            // Relaxed: the entering G reads it in program order; sysmon's
            // reads are hints (the handler re-checks everything).
            Ok(()) => REGIONS_USED.store(true, Ordering::Relaxed),
            Err(e) => eprintln!("goroutine: no asynchronous preemption: {e}"),
        });
    }

    /// sysmon (and stop-the-world): asks the goroutine running on `p` to
    /// stop, by signal (Go's preemptone). Called after setting
    /// `P::preempt`, for a P in `Running` state. Only a goroutine in a region is signalled; everything else is
    /// decided by the handler on the target thread.
    pub(crate) fn preempt_m(p: &'static P, now: i64) {
        if !REGIONS_USED.load(Ordering::Relaxed) {
            return;
        }
        let Some(m) = p.m() else { return };
        if m.is_dead() {
            return;
        }
        let Some(g) = m.curg() else { return };
        if g.region_depth() == 0 {
            return;
        }
        signal(m, now);
    }

    /// How often at most a thread without a P is signalled back (below).
    const REVOKED_RESIGNAL_NS: i64 = 1_000_000;

    /// sysmon (each tick) and stop-the-world: signals the threads whose P
    /// was taken (`runtime::retake`: they blocked in the kernel) and whose
    /// goroutine, in a preemptible region, is on the CPU again. Such a
    /// goroutine runs beside the Ps without one until its next runtime
    /// call, and a region may never make one: no `preempt_m` reaches it
    /// (it signals the Ms of running Ps), so it would exceed GOMAXPROCS
    /// and, to a dump, stay "running on other thread" for as long as it
    /// loops. The signal stops it as any other (the handler refuses only
    /// while a revoker is deciding), and the trampoline's entry through
    /// the gate gets it a P back, or queues it, as a runtime call would
    /// (`entry::settle`). A thread still blocked in the kernel (not `R`)
    /// is left alone: a signal would only interrupt its system call.
    /// Costs nothing while no thread is without its P.
    pub(crate) fn preempt_revoked(now: i64) {
        if !REGIONS_USED.load(Ordering::Relaxed) || crate::runtime::retake::blocked_threads() == 0 {
            return;
        }
        let allm = crate::runtime::sched()
            .allm
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for &m in allm.iter() {
            if m.is_dead() || !m.revoke.taken() {
                continue;
            }
            if m.curg_from_outside().is_none_or(|g| g.region_depth() == 0) {
                continue;
            }
            if now - m.preempt_sent_at.load(Ordering::Relaxed) < REVOKED_RESIGNAL_NS {
                continue;
            }
            if m.thread_state() != Some(b'R') {
                continue;
            }
            signal(m, now);
        }
    }

    /// Flags `m` and sends its thread `SIGURG` (the handler decides).
    fn signal(m: &'static M, now: i64) {
        let tid = m.tid();
        if tid == 0 {
            return;
        }
        // Still set: the last signal is pending (its thread has not run
        // since, e.g. descheduled by the OS); one is enough.
        if m.async_preempt.load(Ordering::Relaxed) {
            return;
        }
        m.preempt_sent_at.store(now, Ordering::Relaxed);
        // Release: pairs with the handler's Acquire swap (the send time is
        // visible to the trampoline).
        m.async_preempt.store(true, Ordering::Release);
        if sys::signal_thread(tid) {
            SIGNALS.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Why a signal did not preempt.
    enum Refusal {
        InRuntime,
        Pc,
        Other,
    }

    /// The signal handler's decision (see the module note). Runs in signal
    /// context, on the M's alternate stack: async-signal-safe.
    fn on_signal(it: &mut Interrupted) -> bool {
        let Some(m) = m::current_in_signal() else {
            return false;
        };
        // Acquire: pairs with sysmon's Release store.
        if !m.async_preempt.swap(false, Ordering::Acquire) {
            return false;
        }
        let counter = match decide(m, it) {
            Ok(()) => return true,
            Err(Refusal::InRuntime) => &REFUSED_IN_RUNTIME,
            Err(Refusal::Pc) => &REFUSED_PC,
            Err(Refusal::Other) => &REFUSED_OTHER,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        true
    }

    fn decide(m: &'static M, it: &mut Interrupted) -> Result<(), Refusal> {
        let g = m.curg().ok_or(Refusal::Other)?;
        // A thread whose P is being taken (`runtime::retake`) waits for
        // the decision; one whose P was taken is stopped as any other: the
        // trampoline's entry gets a P back first (`preempt_revoked`).
        if m.revoke.pending() {
            return Err(Refusal::Other);
        }
        if g.region_depth() == 0 || g.status() != Status::Running {
            return Err(Refusal::Other);
        }
        if g.in_runtime() != 0 {
            return Err(Refusal::InRuntime);
        }
        if !sys::preemptible_pc(it.pc()) {
            return Err(Refusal::Pc);
        }
        // A mask other than the thread's usual one: the interrupted code is
        // itself a signal handler (its signal is blocked), or changed the
        // mask. Either is thread-bound state.
        if it.sigmask() != m.sigmask.load(Ordering::Relaxed) {
            return Err(Refusal::Other);
        }
        // The panic machinery keeps thread-local counts (a const
        // thread-local read; the handler may read it).
        if std::thread::panicking() {
            return Err(Refusal::Other);
        }
        let (lo, hi) = g.stack_range().ok_or(Refusal::Other)?;
        let sp = it.sp();
        // Not on the goroutine's stack: the M's scheduler (g0), or another
        // signal handler's alternate stack.
        if sp <= lo || sp > hi {
            return Err(Refusal::Other);
        }
        // The handler must not itself run on the goroutine's stack (a thread
        // without an alternate stack): the save area would overlap it.
        let here = std::hint::black_box(&sp) as *const usize as usize;
        if here >= lo && here < hi {
            return Err(Refusal::Other);
        }
        let plan = it.plan().ok_or(Refusal::Other)?;
        if plan.entry_sp < lo + TRAMPOLINE_STACK {
            return Err(Refusal::Other);
        }
        // in_runtime is 0 (checked above), so this cannot saturate.
        if !g.runtime_enter() {
            return Err(Refusal::Other);
        }
        // SAFETY: [entry_sp, sp) lies in the goroutine's own stack, below
        // the interrupted SP's red zone, above the trampoline's reserve:
        // unused memory of the stack the interrupted code runs on. The
        // trampoline never returns.
        unsafe { it.redirect(&plan, trampoline, g as *const G as usize) };
        PREEMPTIONS.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Where a preempted goroutine continues after the handler returns: on
    /// its own stack, in normal context, inside a runtime call (the
    /// handler raised its `in_runtime`). Switches to the scheduler as a
    /// cooperative preemption does; when resumed (maybe on another thread),
    /// restores the interrupted context.
    /// The trampoline's address, registered with the handler
    /// (`sys::preempt::trampoline_addr`): tracebacks continue through its
    /// save area into the interrupted code (`traceback::unwind`).
    fn trampoline_addr() -> usize {
        trampoline as *const () as usize
    }

    extern "C" fn trampoline(saved: *mut SavedContext, g: usize) -> ! {
        // SAFETY: the handler passed the G running on this thread (a leaked,
        // never freed record).
        let g: &'static G = unsafe { &*(g as *const G) };
        // Runtime code from here on: through the gate by hand (the word was
        // even: the goroutine's own code was interrupted).
        let outer = crate::runtime::entry::enter();
        if let Some(m) = m::current() {
            let sent = m.preempt_sent_at.load(Ordering::Relaxed);
            if sent != 0 {
                let lat = (nanotime() - sent).max(0) as u64;
                LATENCY_TOTAL.fetch_add(lat, Ordering::Relaxed);
                LATENCY_MAX.fetch_max(lat, Ordering::Relaxed);
            }
            // SAFETY: m is the calling thread's own M; a Running G holds a P.
            if let Some(pp) = unsafe { m.p() } {
                pp.preempt.store(false, Ordering::Relaxed);
            }
        }
        // SAFETY: g is the goroutine running on this thread and we are on
        // its stack (the handler checked the interrupted SP).
        unsafe { crate::runtime::lockosthread::switch_out(g, Action::Preempt) };
        debug_assert_eq!(g.in_runtime(), 1, "the handler raised it from 0");
        if outer {
            // Back to the goroutine's own code: nothing below touches the P.
            crate::runtime::entry::leave();
        }
        // SAFETY: `saved` is the save area the handler wrote for g, above
        // this frame on g's stack; nothing below it is used again.
        unsafe { sys::resume(saved, g.in_runtime_counter()) }
    }
}

/// Test hook: runs `f` as if it were runtime code (through the entry
/// gate), so tests can check that no signal stops a goroutine there.
pub(crate) fn as_runtime_call<R>(f: impl FnOnce() -> R) -> R {
    super::entry::call(f)
}
