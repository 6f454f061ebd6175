//! Deadlock detection (Go's checkdead): when no goroutine can ever run
//! again, print `fatal error: all goroutines are asleep - deadlock!` and
//! every goroutine with its wait reason, and exit with status 2.
//!
//! # When the process is dead
//! Go decides from its own state alone, because every line of a Go program
//! runs on a goroutine. Here plain OS threads may hold channel ends, mutexes
//! or join handles and wake a goroutine at any time, so the runtime only
//! declares a deadlock when *every thread of the process* is accounted for:
//! - every P is idle and no stop-the-world is in progress;
//! - every M is parked: on the idle list, or locked to a goroutine that is
//!   blocked (`stoplockedm`); none is running, spinning, in a system call or
//!   blocked in the netpoller;
//! - no run queue holds a goroutine, no P has a timer, no goroutine waits in
//!   the netpoller (an I/O wait can always complete);
//! - at least one goroutine exists (all of them are then parked);
//! - the process's thread count (`/proc/self/status`, held open: see
//!   `sys::procfs`) equals the runtime's own threads (live Ms, sysmon and
//!   other internal threads) plus the plain threads blocked inside a
//!   runtime wait (a join, a channel operation, a sync primitive:
//!   [`thread_blocked`] counts them). Any other thread might still send on
//!   a channel, so its presence means "not dead".
//!
//! The report carries every goroutine's frames (`traceback`), as Go's
//! does, under every `GOTRACEBACK` but `none` (Go's deadlock is a fatal
//! error, which prints every goroutine even under `single`), with the
//! runtime's frames under `system` and `crash`; `crash` then raises
//! `SIGABRT` instead of exiting with status 2 (measured with Go 1.19).
//!
//! sysmon checks this each time it is about to deep-sleep (every P idle),
//! and confirms it 50 ms later with the [`progress`] counter unchanged (it
//! counts goroutine wakeups and thread wakeups), which covers a thread that
//! has been woken but not yet run. Only then does it report.
//!
//! # When the check runs (Go's rule)
//! Go runs checkdead whenever an M parks and when the last pending timer
//! fires or is stopped. Here the check itself is sysmon's (it sleeps 50 ms
//! to confirm), so those events only *ask* for it: [`m_parked`] and
//! [`timers_drained`] bump [`RECHECK`] and, if the cheap half of the test
//! passes (every P idle, no timer pending, no I/O waiter), wake sysmon from
//! its deep sleep. Invariant: sysmon never deep-sleeps across a recheck
//! request made after its last check began: it reads `RECHECK` before the
//! check, publishes `sysmonwait` (SeqCst), then reads `RECHECK` again and
//! skips the sleep if it moved; a requester bumps `RECHECK` (SeqCst) before
//! reading `sysmonwait`, so one of the two sees the other. A deadlock is
//! thus reported about 50-60 ms after the last M parks, whatever timers
//! came before: stopped and fired timers leave their heap at once
//! (`p/timerheap.rs`), so they never count as pending. A plain thread that
//! starts waiting in the runtime ([`thread_blocked`]) asks too, after its
//! count moved: it may be the last thing a check saw alive.
//!
//! Threads outside the runtime can end, or block in the kernel, without
//! telling it. While a check finds the runtime all asleep and only such
//! threads alive (`Verdict::OutsideThreads`), sysmon's deep sleep is a
//! back-off (20 ms, doubling up to the usual 60 s) instead of 60 s, so a
//! deadlock left behind by an exiting thread is reported in about the time
//! the thread took, not a minute later.

use std::io::Write;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use super::{sched, timers};
use crate::g::Status;
use crate::p::PStatus;

/// Plain (non-runtime) threads blocked in a runtime wait.
static THREADS_BLOCKED: AtomicUsize = AtomicUsize::new(0);
/// Runtime threads that are not Ms (sysmon, tracer writer, signal thread).
static INTERNAL_THREADS: AtomicUsize = AtomicUsize::new(0);
/// Ms sleeping in `stoplockedm`.
pub(crate) static IDLE_LOCKED_MS: AtomicUsize = AtomicUsize::new(0);
/// Bumped on every wakeup (goroutine or thread).
static PROGRESS: AtomicU64 = AtomicU64::new(0);
/// Bumped by each request for a check (see the module note).
static RECHECK: AtomicU64 = AtomicU64::new(0);

/// The recheck epoch: sysmon reads it before a check, and again after
/// publishing `sysmonwait`.
pub(crate) fn recheck_epoch() -> u64 {
    RECHECK.load(Ordering::SeqCst)
}

/// An M parked (Go's mput runs checkdead): ask for a check.
#[inline]
pub(crate) fn m_parked() {
    request_check();
}

/// A P's timer heap became empty (a timer fired or was stopped): if it was
/// the last pending timer, ask for a check. (A poller that blocked for it
/// and missed this wake-up is woken by the check itself: `looks_dead`.)
#[inline]
pub(crate) fn timers_drained() {
    let s = sched();
    // An M blocked in the netpoller until that timer's time: wake it, so
    // that it parks now rather than in an hour.
    if s.lastpoll.load(Ordering::SeqCst) == 0
        && !crate::netpoll::any_waiters()
        && timers::next_when() == 0
    {
        crate::netpoll::netpoll_break();
    }
    request_check();
}

/// Asks sysmon for a deadlock check if the runtime may be dead: every P
/// idle, no timer pending, nobody waiting for I/O (else something will run
/// again, and its M will ask when it parks). A few atomic loads otherwise.
fn request_check() {
    let s = sched();
    if s.spin.npidle() != s.gomaxprocs()
        || crate::netpoll::any_waiters()
        || timers::next_when() != 0
    {
        return;
    }
    RECHECK.fetch_add(1, Ordering::SeqCst);
    super::sysmon::wake_if_waiting();
}

/// Records progress (a wakeup happened).
#[inline]
pub(crate) fn progress() {
    PROGRESS.fetch_add(1, Ordering::Relaxed);
}

/// A runtime-internal thread started (counts toward "accounted for").
pub(crate) fn internal_thread_started() {
    INTERNAL_THREADS.fetch_add(1, Ordering::Relaxed);
}

/// A runtime-internal thread ended (the tracer's writer, at `trace::stop`).
pub(crate) fn internal_thread_exited() {
    INTERNAL_THREADS.fetch_sub(1, Ordering::Relaxed);
}

/// The runtime's own threads alive now that are not Ms (sysmon, the
/// tracer's writer...): `/sched/threads/total` counts them, as Go's does.
pub(crate) fn internal_threads() -> usize {
    INTERNAL_THREADS.load(Ordering::Relaxed)
}

/// Marks the calling plain thread as blocked in a runtime wait until the
/// guard drops.
pub(crate) fn thread_blocked() -> ThreadBlocked {
    THREADS_BLOCKED.fetch_add(1, Ordering::SeqCst);
    // This thread may be the last one that was keeping the process alive:
    // a check that ran just before this count moved saw one thread too
    // many, so ask for another (a plain wake would be lost if sysmon is
    // between that check and its deep sleep).
    request_check();
    ThreadBlocked
}

pub(crate) struct ThreadBlocked;

impl Drop for ThreadBlocked {
    fn drop(&mut self) {
        THREADS_BLOCKED.fetch_sub(1, Ordering::SeqCst);
        progress();
    }
}

/// Opens the thread count's file when the runtime starts (`sys::procfs`
/// keeps it open), so that a program that later fills its descriptor table
/// still gets its deadlock reported.
pub(crate) fn init() {
    let _ = crate::sys::procfs::process_threads();
}

/// Why the process is not dead: what [`looks_dead`] and a [`check`] that
/// did not report say.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Verdict {
    /// Not dead: something in the runtime may run again, and it will ask
    /// for a check when its M parks.
    Alive,
    /// The runtime is all asleep and only threads outside it keep the
    /// process alive. Nothing tells the runtime when such a thread exits,
    /// so sysmon checks again after a back-off instead of sleeping long.
    OutsideThreads,
}

/// Does the runtime look dead right now? Returns the progress counter seen.
fn looks_dead() -> Result<u64, Verdict> {
    let s = sched();
    let seen = PROGRESS.load(Ordering::SeqCst);
    if s.stw_waiting.load(Ordering::SeqCst) {
        return Err(Verdict::Alive);
    }
    let n = s.gomaxprocs();
    if s.spin.npidle() != n || s.spin.nmspinning() != 0 {
        return Err(Verdict::Alive);
    }
    if s.runqsize.load(Ordering::SeqCst) != 0 {
        return Err(Verdict::Alive);
    }
    for id in 0..n as usize {
        let Some(p) = s.allp(id) else {
            return Err(Verdict::Alive);
        };
        if p.status() != PStatus::Idle || !p.runq_is_empty() {
            return Err(Verdict::Alive);
        }
    }
    // Timer heaps hold pending timers only (no stopped or fired entries).
    if timers::next_when() != 0 || crate::netpoll::any_waiters() {
        return Err(Verdict::Alive);
    }
    if s.lastpoll.load(Ordering::SeqCst) == 0 {
        // An M is blocked in the netpoller, though nobody waits for I/O and
        // no timer is pending: it blocked for a timer since stopped. Wake it
        // so that it parks (and asks for the check again).
        crate::netpoll::netpoll_break();
        return Err(Verdict::Alive);
    }
    if s.num_goroutine() == 0 {
        return Err(Verdict::Alive);
    }
    let live_ms = {
        let Ok(all) = s.allm.lock() else {
            return Err(Verdict::Alive);
        };
        all.iter().filter(|m| !m.is_dead()).count()
    };
    let idle_ms = s.lock().midle.len() + IDLE_LOCKED_MS.load(Ordering::SeqCst);
    if idle_ms < live_ms {
        return Err(Verdict::Alive);
    }
    let accounted =
        live_ms + INTERNAL_THREADS.load(Ordering::SeqCst) + THREADS_BLOCKED.load(Ordering::SeqCst);
    // ThreadSanitizer's runtime starts a background thread of its own when
    // the process creates its first thread (sysmon's, at the latest).
    #[cfg(goroutine_sanitize = "thread")]
    let accounted = accounted + 1;
    // qemu-user runs a thread of its own (its RCU thread) in every process
    // it emulates: builds for it (`--cfg goroutine_qemu`, README
    // "Supported platforms") count it.
    #[cfg(goroutine_qemu)]
    let accounted = accounted + 1;
    match crate::sys::procfs::process_threads() {
        Some(n) if n == accounted => Ok(seen),
        Some(_) => Err(Verdict::OutsideThreads),
        None => Err(Verdict::Alive),
    }
}

/// sysmon's check (see the module note); reports and exits if dead.
pub(crate) fn check() -> Verdict {
    let seen = match looks_dead() {
        Ok(seen) => seen,
        Err(why) => return why,
    };
    std::thread::sleep(std::time::Duration::from_millis(50));
    match looks_dead() {
        Ok(again) if again == seen && PROGRESS.load(Ordering::SeqCst) == seen => report(),
        Ok(_) => Verdict::Alive,
        Err(why) => why,
    }
}

#[cold]
fn report() -> ! {
    // Every M is parked and every P idle: nothing can run, so every stack
    // is pinned (`traceback`'s module note) without stopping the world.
    use crate::traceback::Level;
    // Go's fatal errors print every goroutine whenever GOTRACEBACK is not
    // none: `single` is `all` here (module note).
    let level = crate::traceback::level(Level::All);
    let text = if level >= Level::Single {
        let level = level.max(Level::All);
        let gs: Vec<_> = crate::traceback::collect(crate::traceback::Pinned::Yes, true)
            .into_iter()
            .filter(|g| g.status == Status::Waiting)
            .map(|mut g| {
                // Headers as before: no "N minutes" (a slow detection
                // would otherwise change them).
                g.waitsince = 0;
                g
            })
            .collect();
        super::dump::render(&gs, level)
    } else {
        String::new()
    };
    let stderr = std::io::stderr();
    let mut out = stderr.lock();
    let _ = writeln!(out, "fatal error: all goroutines are asleep - deadlock!\n");
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
    drop(out);
    crate::tracer::flight_dump("deadlock");
    crate::sys::exit_after_report()
}
