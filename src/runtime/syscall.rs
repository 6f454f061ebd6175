//! Blocking system calls (Go's entersyscall / exitsyscall / entersyscallblock
//! and handoffp).
//!
//! # Protocol
//! - **Enter** (cheap, nothing handed off): the G becomes `Syscall`; its M
//!   bumps the P's `syscalltick`, dissolves its handle and leaves the P in
//!   `Syscall` state, owned by nobody, remembered as the M's `oldp`.
//! - **sysmon** (`sysmon.rs`, `retake`) takes a P that has stayed in the
//!   same syscall for a whole sysmon tick (>= 20 us) by CASing it
//!   `Syscall -> Idle`, and hands it off ([`handoffp`]) so the P's other
//!   goroutines keep running on another M. A stop-the-world CASes it to
//!   `Stopped` instead.
//! - **Exit**: fast path 1, CAS the old P `Syscall -> Running` (nobody took
//!   it); fast path 2, any idle P; slow path, switch to the M's scheduler,
//!   which puts the G on the global queue and parks the M (`stopm`).
//! - `syscall_blocking` (Go's entersyscallblock) hands the P off at once.
//!
//! # Hand-off at entry (beyond Go)
//! A P left in `Syscall` state runs nothing until sysmon takes it, and
//! sysmon looks twice, a tick apart, before it does: at least 20 us, and up
//! to 10 ms once it has backed off, which it does whenever it found nothing
//! to take for a while (as Go's sysmon does). Goroutines queued on that P
//! wait all that time, and a goroutine that makes blocking calls in a loop
//! (a sleep, a slow read) keeps finding its P still there on exit, so it
//! holds the P for the whole call, every call. With 100 such goroutines
//! beside 2 busy ones at GOMAXPROCS=1, the process was idle 56% of the time
//! (the `syscalls` row: 5-7x slowdown, Go's too).
//!
//! So each call is timed with the CPU's counter (two `cputicks` reads: the
//! TSC on x86-64, `CNTVCT_EL0` on aarch64; none where there is none, which
//! leaves Go's behaviour), and a goroutine whose last `LONG_STREAK` calls
//! each lasted `long_syscall_ticks()` or more hands its P off when it
//! enters the next one, as `syscall_blocking` does, but only if other
//! goroutines are waiting to run (its P's queue or the global queue): with
//! nothing waiting the P has nothing to do, and handing it off would only
//! cost a thread wake-up. A prediction that turns out wrong (a short call
//! after long ones) costs what sysmon's retake would have cost: the call's
//! exit finds its P gone and takes an idle one or queues the goroutine. One
//! short call resets the streak. `GODEBUG=syscallhandoff=0` turns it off.
//!
//! The exactly-one-owner rule of `PHandle` holds throughout: the only ways
//! out of `Syscall` state are CASes, and each winner gets the one handle.
//! Code inside the closure runs without a P. If it blocks on a runtime
//! object (a channel, a mutex, a join), `park` leaves the system call first
//! (re-acquiring a P as on exit), parks normally, and re-enters the call
//! once woken.

use std::sync::atomic::Ordering;

use super::entry;
use super::{globrunq, idle, localrunq, sched, stats, throw};
use crate::g::switch::Action;
use crate::g::Status;
use crate::m::{self, M};
use crate::p::{PHandle, PStatus};
use crate::sys::time::cputicks;
use crate::tracer;

/// Runs `f` as a blocking system call (see `crate::syscall`).
pub(crate) fn syscall<R>(block: bool, f: impl FnOnce() -> R) -> R {
    // Guarded in two parts: `f` is the caller's code, and runs with the G in
    // `Syscall` status, where no signal preempts it anyway.
    let entered = entry::call(|| match m::current() {
        // SAFETY: m is the calling thread's own M. Without a P (a nested
        // call) there is nothing to hand off.
        Some(m) if m.curg().is_some() && unsafe { m.p() }.is_some() => {
            entersyscall(m, block);
            true
        }
        _ => false,
    });
    if !entered {
        return f();
    }
    struct Exit;
    impl Drop for Exit {
        fn drop(&mut self) {
            entry::call(exitsyscall);
        }
    }
    let guard = Exit;
    let r = f();
    drop(guard);
    r
}

/// A system call that lasted this many counter ticks (`cputicks`) counts
/// as long: about 32 us (on x86-64 2^17 TSC ticks, 26-130 us at 5-1 GHz),
/// past sysmon's first tick.
fn long_syscall_ticks() -> u64 {
    static TICKS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    // Relaxed: a value computed again by a racing thread is the same.
    match TICKS.load(Ordering::Relaxed) {
        0 => {
            let t = crate::sys::time::ticks_for_us(32);
            TICKS.store(t, Ordering::Relaxed);
            t
        }
        t => t,
    }
}

/// Long calls in a row after which the next call hands its P off at entry
/// if goroutines are waiting (module note).
const LONG_STREAK: u8 = 2;

fn entersyscall(m: &'static M, block: bool) {
    let s = sched();
    let g = m.curg().expect("entersyscall outside a goroutine");
    // SAFETY: own thread, holding a P (checked by the caller).
    let pp = unsafe { m.releasep() };
    pp.bump_syscalltick();
    g.set_status(Status::Syscall);
    if tracer::on() {
        tracer::syscall_enter(g.id(), pp.id);
    }
    // Predicted to block, and goroutines wait for this P (module note).
    let handoff = block
        || (g.syscall_long() >= LONG_STREAK
            && (!pp.runq_is_empty() || localrunq::has_work(&pp))
            && super::env::godebug().syscallhandoff);
    m.set_syscall_tsc(cputicks());
    if handoff {
        m.set_oldp(Some(pp.get()));
        stats::bump(&pp.counters.blocking_handoffs, 1);
        if tracer::on() {
            tracer::syscall_handoff(pp.id);
        }
        handoffp(pp);
    } else {
        let p = pp.enter_syscall();
        m.set_oldp(Some(p));
        // Meant as the M's half of a store-load pair with `stop_the_world`
        // (procresize.rs), which stores `stw_waiting` (SeqCst) and then CASes
        // every `Syscall` P to `Stopped`: we store `Syscall`, then load the
        // flag. Only the flag's side is SeqCst: `enter_syscall`'s status
        // store is Release (p/mod.rs), which may pass this load (x86's store
        // buffer allows it). Both sides can then miss each other: the stop
        // reads the P as still `Running`; its 100 us rounds then find the P
        // in `Syscall` and stop it (no fence needed on this path).
        if s.stw_waiting.load(Ordering::SeqCst) {
            // A stop-the-world is waiting for this P: stop it now (Go's
            // entersyscall_gcwait).
            if let Some(pp) = p.cas_from_syscall(PStatus::Stopped) {
                stop_for_stw(pp);
            }
        }
    }
    super::sysmon::wake_for_syscall();
}

/// Counts `pp` (owned by the caller, held by no M) as stopped for the
/// stop-the-world in progress (Go's `entersyscall_gcwait` and handoffp's
/// stop). The caller saw the stop, under the sched lock or as a hint while
/// it owned the uncounted P, so the stop is still active (`stw.rs`,
/// invariant 2); were it not, the P goes to the idle list.
pub(crate) fn stop_for_stw(pp: PHandle) {
    let mut l = sched().lock();
    stop_for_stw_locked(&mut l, pp);
}

/// [`stop_for_stw`] with the sched lock held.
pub(crate) fn stop_for_stw_locked(l: &mut super::Locked, pp: PHandle) {
    pp.set_status(PStatus::Stopped);
    localrunq::flush_yields_locked(l, &pp);
    match l.stw.stop(pp) {
        super::stw::Offer::Counted { last } => {
            if last {
                sched().stopnote.wakeup();
            }
        }
        super::stw::Offer::NotStopping(pp) => idle::pidleput(l, pp),
    }
}

/// Re-enters a system call after a park inside one (see `park`).
pub(crate) fn reentersyscall() {
    let m = m::current().expect("reentersyscall off an M");
    entersyscall(m, false);
}

pub(crate) fn exitsyscall() {
    let m = m::current().expect("exitsyscall off an M");
    let g = m.curg().expect("exitsyscall outside a goroutine");
    // The call's length feeds the hand-off at entry (module note).
    let long = cputicks().wrapping_sub(m.syscall_tsc()) >= long_syscall_ticks();
    g.set_syscall_long(if long {
        (g.syscall_long() + 1).min(LONG_STREAK)
    } else {
        0
    });
    let oldp = m.take_oldp();
    if let Some(p) = oldp {
        if let Some(pp) = p.cas_from_syscall(PStatus::Running) {
            // `stw_waiting` pairs with `stop_the_world`'s store. A miss is
            // covered from the other side: we won the CAS, so that
            // stop-the-world's later CAS on this P fails, it finds the P
            // `Running` and sets `preempt` itself. `preempt`: Release,
            // though no load pairs with it (its readers load Relaxed: a
            // request carries no data).
            if sched().stw_waiting.load(Ordering::SeqCst) {
                // A stop-the-world counted this P as running: stop soon.
                pp.preempt.store(true, Ordering::Release);
            }
            if tracer::on() {
                tracer::syscall_exit(g.id(), pp.id, true);
            }
            // SAFETY: own thread, holding no P (released at entry).
            unsafe { m.acquirep(pp) };
            g.set_status(Status::Running);
            super::sysmon::wake_for_syscall();
            return;
        }
    }
    if let Some(pp) = {
        let mut l = sched().lock();
        idle::pidleget(&mut l)
    } {
        if tracer::on() {
            tracer::syscall_exit(g.id(), pp.id, true);
        }
        // SAFETY: own thread, holding no P.
        unsafe { m.acquirep(pp) };
        g.set_status(Status::Running);
        super::sysmon::wake_for_syscall();
        return;
    }
    // Slow path: no P. The scheduler queues this G and parks the M.
    // SAFETY: g runs on this thread, on its own stack.
    unsafe { super::lockosthread::switch_out(g, Action::ExitSyscall) };
}

/// The M's goroutine was blocked in the kernel outside the runtime and its
/// P was taken (`runtime::retake`); it is now entering the runtime without
/// one (`entry::settle`). As `exitsyscall`: an idle P (the old one was
/// handed off, so any), else the slow path, where the scheduler queues the
/// G globally and parks the M. Returns holding a P.
pub(crate) fn exit_revoked(m: &'static M) {
    let g = m.curg().expect("exit_revoked outside a goroutine");
    if let Some(pp) = {
        let mut l = sched().lock();
        idle::pidleget(&mut l)
    } {
        // `stw_waiting` pairs with `stop_the_world`'s store, made under the
        // sched lock that `pidleget` just held: the lock orders them.
        // `preempt`: Release, no load pairs with it (readers load Relaxed).
        if sched().stw_waiting.load(Ordering::SeqCst) {
            pp.preempt.store(true, Ordering::Release);
        }
        // SAFETY: own thread, holding no P (it forgot the revoked one).
        unsafe { m.acquirep(pp) };
        super::sysmon::wake_for_syscall();
        return;
    }
    // SAFETY: g runs on this thread, on its own stack.
    unsafe { super::lockosthread::switch_out(g, Action::ExitSyscall) };
}

/// The scheduler side of the slow path (Go's exitsyscall0): on g0, no P.
pub(crate) fn exitsyscall0(m: &'static M, g: &'static crate::g::G) {
    g.set_status(Status::Runnable);
    super::stats::metrics_runnable_unowned(g);
    if m.lockedg().is_some() {
        // A locked G: queue it; the schedule loop's stoplockedm waits until
        // whoever picks it hands us a P (a locked-M switch, lockosthread.rs).
        globrunq::put_woken(g);
        idle::wakep();
        return;
    }
    let mut l = sched().lock();
    if let Some(pp) = idle::pidleget(&mut l) {
        drop(l);
        if tracer::on() {
            tracer::syscall_exit(g.id(), pp.id, false);
        }
        // SAFETY: own thread, holding no P.
        unsafe { m.acquirep(pp) };
        localrunq::runqput(
            // SAFETY: own thread, holding the P we just acquired.
            unsafe { m.p() }.expect("just acquired"),
            g,
            true,
        );
        return;
    }
    globrunq::put_woken_locked(&mut l, g);
    drop(l);
    if tracer::on() {
        tracer::syscall_exit(g.id(), tracer::GLOBAL, false);
    }
    idle::stopm(m);
}

/// Hands off a P that lost its M to a system call (Go's handoffp): start
/// an M for it if it has work or nobody is looking for work, else idle it.
pub(crate) fn handoffp(pp: PHandle) {
    let s = sched();
    // Goroutines in the P's yield buffer are runnable but in no queue the
    // checks below see (a locked G that just yielded, a revoked M's last
    // yielders): move them to the global queue first, or an idled P would
    // strand them.
    // SAFETY: we own `pp` (its handle was passed to us): a short borrow.
    if !unsafe { pp.local() }.yieldq.is_empty() {
        let mut l = s.lock();
        localrunq::flush_yields_locked(&mut l, &pp);
    }
    // Local or global work: run it. `runqsize` pairs with its stores under
    // the sched lock (`globrunq`); a hint here, re-checked under the lock.
    if !pp.runq_is_empty() || s.runqsize.load(Ordering::SeqCst) != 0 {
        idle::startm(Some(pp), false);
        return;
    }
    // No spinning or idle M-with-P: this one searches.
    if s.spin.nmspinning() + s.spin.npidle() == 0 && s.spin.try_claim_spin() {
        idle::startm(Some(pp), true);
        return;
    }
    let mut l = s.lock();
    // Under the sched lock, as `stop_the_world`'s store and the `runqsize`
    // stores: the lock orders them. The P reaches the idle list only after
    // these checks under the lock, so a stop-the-world counts it.
    if l.stw.is_active() {
        stop_for_stw_locked(&mut l, pp);
        return;
    }
    if s.runqsize.load(Ordering::SeqCst) != 0 {
        drop(l);
        idle::startm(Some(pp), false);
        return;
    }
    // The last running P, and nobody polls the network: someone must.
    // `lastpoll` pairs with find_runnable's step 10 swap and store.
    if s.spin.npidle() + 1 == s.gomaxprocs() && s.lastpoll.load(Ordering::SeqCst) != 0 {
        drop(l);
        idle::startm(Some(pp), false);
        return;
    }
    let when = pp.timers.next();
    idle::pidleput(&mut l, pp);
    drop(l);
    if when != 0 {
        super::timers::wake_netpoller(when);
    }
}

/// Checks the thread cap before creating an M.
pub(crate) fn check_thread_limit(nthreads: usize) {
    let max = super::MAX_THREADS.load(Ordering::Relaxed);
    if nthreads >= max {
        eprintln!("runtime: program exceeds {max}-thread limit");
        throw("thread exhaustion");
    }
}
