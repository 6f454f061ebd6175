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
//! - the process's thread count (`/proc/self/status`) equals the runtime's
//!   own threads (live Ms, sysmon and other internal threads) plus the plain
//!   threads blocked inside a runtime wait (a join, a channel operation, a
//!   sync primitive: [`thread_blocked`] counts them). Any other thread might
//!   still send on a channel, so its presence means "not dead".
//!
//! The report carries every goroutine's frames (`traceback`), as Go's
//! does, unless `GOTRACEBACK` is `none` or `single`.
//!
//! sysmon checks this each time it is about to deep-sleep (every P idle),
//! and confirms it 50 ms later with the [`progress`] counter unchanged (it
//! counts goroutine wakeups and thread wakeups), which covers a thread that
//! has been woken but not yet run. Only then does it report.

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

/// Marks the calling plain thread as blocked in a runtime wait until the
/// guard drops.
pub(crate) fn thread_blocked() -> ThreadBlocked {
    THREADS_BLOCKED.fetch_add(1, Ordering::SeqCst);
    super::sysmon::wake_if_waiting();
    ThreadBlocked
}

pub(crate) struct ThreadBlocked;

impl Drop for ThreadBlocked {
    fn drop(&mut self) {
        THREADS_BLOCKED.fetch_sub(1, Ordering::SeqCst);
        progress();
    }
}

/// The number of threads in this process, from /proc.
fn process_threads() -> Option<usize> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Does the runtime look dead right now? Returns the progress counter seen.
fn looks_dead() -> Option<u64> {
    let s = sched();
    let seen = PROGRESS.load(Ordering::SeqCst);
    if s.stw_waiting.load(Ordering::SeqCst) {
        return None;
    }
    let n = s.gomaxprocs();
    if s.spin.npidle() != n || s.spin.nmspinning() != 0 {
        return None;
    }
    if s.runqsize.load(Ordering::SeqCst) != 0 {
        return None;
    }
    for id in 0..n as usize {
        let p = s.allp(id)?;
        if p.status() != PStatus::Idle || !p.runq.is_empty() {
            return None;
        }
    }
    if timers::next_when() != 0 || crate::netpoll::any_waiters() {
        return None;
    }
    if s.lastpoll.load(Ordering::SeqCst) == 0 {
        return None; // an M is blocked in the netpoller
    }
    if s.num_goroutine() == 0 {
        return None;
    }
    let live_ms = {
        let all = s.allm.lock().ok()?;
        all.iter().filter(|m| !m.is_dead()).count()
    };
    let idle_ms = s.lock().midle.len() + IDLE_LOCKED_MS.load(Ordering::SeqCst);
    if idle_ms < live_ms {
        return None;
    }
    let accounted =
        live_ms + INTERNAL_THREADS.load(Ordering::SeqCst) + THREADS_BLOCKED.load(Ordering::SeqCst);
    // ThreadSanitizer's runtime starts a background thread of its own when
    // the process creates its first thread (sysmon's, at the latest).
    #[cfg(goroutine_sanitize = "thread")]
    let accounted = accounted + 1;
    if process_threads()? != accounted {
        return None;
    }
    Some(seen)
}

/// sysmon's check (see the module note); reports and exits if dead.
pub(crate) fn check() {
    let Some(seen) = looks_dead() else { return };
    std::thread::sleep(std::time::Duration::from_millis(50));
    match looks_dead() {
        Some(again) if again == seen && PROGRESS.load(Ordering::SeqCst) == seen => report(),
        _ => {}
    }
}

#[cold]
fn report() -> ! {
    // Every M is parked and every P idle: nothing can run, so every stack
    // is pinned (`traceback`'s module note) without stopping the world.
    let level = crate::traceback::level(crate::traceback::Level::All);
    let text = if level >= crate::traceback::Level::All {
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
    std::process::exit(2)
}
