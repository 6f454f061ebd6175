//! Ps taken from threads blocked in the kernel outside the runtime: the
//! policy half of P revocation (the handshake is `m::revoke`).
//!
//! Ordinary Rust blocks in the kernel without telling anyone: `std::fs`,
//! `std::net`, `std::thread::sleep`, `std::sync::Mutex`, `getaddrinfo`, any
//! C library. Go never stalls on such calls because all of them go through
//! `entersyscall`; here they do not, so sysmon notices them after the fact
//! and does what its retake does for a P in a system call: revokes the P and
//! gives it a P handoff (`syscall::handoffp`). The thread keeps running the
//! goroutine's code without a P when the kernel returns, and re-acquires one
//! at its next runtime call (`entry::settle`, then `syscall::exit_revoked`,
//! which does what `exitsyscall` does: an idle P, else the goroutine goes to
//! the global queue and the M parks).
//!
//! # Which thread is blocked ([`Probe`], one per P, sysmon's own)
//! A P in `Running` state is taken from its M only when all of these hold:
//! 1. **Same user stretch.** The M's handshake word is even (the goroutine's
//!    own code) and has not changed since sysmon's previous look, so the
//!    goroutine has made no runtime call for at least a whole sysmon tick
//!    (20 us, backing off to 10 ms as sysmon idles: Go's retake delay).
//!    This is two plain loads per P per tick: the common case (goroutines
//!    calling into the runtime) costs no system call.
//! 2. **Go's retake conditions**, as for a P in a system call: the P has
//!    work, or no M is spinning or idle, or the stretch has lasted 10 ms.
//! 3. **Mostly off the CPU.** The thread's CPU clock
//!    (`pthread_getcpuclockid`) advanced by less than half the time between
//!    two looks: a goroutine computing without runtime calls is not blocked
//!    (cooperative and asynchronous preemption deal with it), while one that
//!    loops on short blocking calls without ever calling the runtime (sleep
//!    1 ms, a few us of work, sleep again) is. Only threads that passed rule
//!    1 pay this one system call.
//! 4. **Not runnable.** `/proc/self/task/TID/stat` says the thread is not
//!    `R`. A thread that is runnable but descheduled (an overloaded machine)
//!    uses no CPU either, but is *not* blocked: taking its P would only add
//!    a thread to a machine that has too many already. Checking `R` is what
//!    keeps an overloaded machine from churning threads; measured cost: one
//!    small read, only for threads that passed rule 3. The file is opened
//!    once per M and kept until its thread ends (`M::thread_state`): sysmon
//!    never opens and closes a descriptor per look, which would make a slot
//!    of a full descriptor table come free under the program. At most
//!    `m::STAT_FILES_MAX` (32) are held at once. Where the file cannot be
//!    opened (the table is full, that cap, no `/proc`), rule 3 alone
//!    decides: a P stalled behind a blocked thread is worse than a thread
//!    too many.
//!
//! A stop-the-world (`procresize`) uses [`take_for_stw`]: every M in the
//! same user stretch for 100 us counts as stopped (it will not touch its P
//! before its next runtime call), whether blocked or computing, as Go counts
//! a P in a system call; except a goroutine computing in a preemptible
//! region, which the stop-the-world's signals stop instead.
//!
//! # Visibility
//! `stats().blocked_handoffs` and `blocked_threads`, schedtrace's
//! `blockedthreads=`, the trace event `ProcRevoke`, and with
//! `GODEBUG=blockwarn=1` a one-time warning naming the goroutine and its
//! system call. `GODEBUG=blockrevoke=0` turns revocation off. The system
//! call is read (`/proc/self/task/TID/syscall`, a short-lived descriptor)
//! only for those two opt-in views, never on the default path.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::{env, sched, stats};
use crate::m::M;
use crate::p::{PHandle, PStatus, P};
use crate::sys::{procfs, thread};

/// Ms whose P was taken and that have not noticed yet.
static BLOCKED_THREADS: AtomicUsize = AtomicUsize::new(0);
/// `blockwarn` printed its warning.
static WARNED: AtomicBool = AtomicBool::new(false);

/// How long a stretch may last with no work waiting before a P is taken
/// anyway (Go's 10 ms for a P in a system call).
const IDLE_RETAKE_NS: i64 = 10_000_000;

/// The gauge of `stats().blocked_threads`.
pub(crate) fn blocked_threads() -> usize {
    BLOCKED_THREADS.load(Ordering::Relaxed)
}

/// A revoked M re-entered the runtime.
pub(crate) fn returned() {
    BLOCKED_THREADS.fetch_sub(1, Ordering::Relaxed);
}

/// sysmon's view of one P's M (module note, rules 1, 3 and 4).
#[derive(Clone, Copy, Default)]
pub(crate) struct Probe {
    /// The M seen (its address; 0: none).
    m: usize,
    word: u32,
    /// When this stretch was first seen.
    since: i64,
    /// The thread's CPU time at the previous look in this stretch, and when.
    cpu: Option<(u64, i64)>,
}

impl Probe {
    /// Looks at `p`'s M; returns it and its stretch if the thread is
    /// blocked in the kernel by rules 1, 3 and 4, with how long the stretch
    /// has been seen.
    pub(crate) fn look(&mut self, p: &'static P, now: i64) -> Option<(&'static M, u32, i64)> {
        if !enabled() {
            return None;
        }
        let m = p.m()?;
        let word = m.revoke.word();
        let key = m as *const M as usize;
        if word & 1 == 1 || key != self.m || word != self.word {
            *self = Probe {
                m: key,
                word,
                since: now,
                cpu: None,
            };
            return None;
        }
        if now == self.since {
            return None;
        }
        let cpu = thread::cpu_time_ns(m.cpu_clock()?)?;
        let (cpu0, t0) = self.cpu.replace((cpu, now))?;
        // Mostly off the CPU since the previous look: a goroutine looping on
        // short blocking calls (a 1 ms sleep, then a few us of its own
        // code) never makes a runtime call and never shows a still clock.
        if cpu.saturating_sub(cpu0).saturating_mul(2) >= (now - t0).max(0) as u64 {
            return None;
        }
        // An unreadable state (no descriptor left, the cap on held files:
        // `M::thread_state`) counts as not runnable: rule 3 alone then
        // decides, since a stalled P is worse than a thread too many.
        if m.thread_state() == Some(b'R') {
            return None;
        }
        Some((m, word, now - self.since))
    }
}

/// Whether revocation is on: `GODEBUG=blockrevoke=0` turns it off, and so
/// does a kernel without `membarrier`.
fn enabled() -> bool {
    env::godebug().blockrevoke
}

/// sysmon: takes `p` from its blocked M `m` (stretch `seen`, lasting
/// `lasted` ns) if Go's retake conditions hold (module note, rule 2), and
/// gives it a P handoff. True if it did.
pub(crate) fn retake(p: &'static P, m: &'static M, seen: u32, lasted: i64) -> bool {
    let s = sched();
    if p.runq.is_empty()
        && s.runqsize.load(Ordering::Relaxed) == 0
        && s.spin.nmspinning() + s.spin.npidle() > 0
        && lasted < IDLE_RETAKE_NS
    {
        return false;
    }
    let Some(pp) = take(p, m, seen) else {
        return false;
    };
    super::syscall::handoffp(pp);
    true
}

/// A stop-the-world: takes `p` from its M if that M is in the same user
/// stretch as at the previous call (`seen`, updated), so the P counts as
/// stopped. Returns the P, its status to be set by the caller.
pub(crate) fn take_for_stw(p: &'static P, seen: &mut Option<(usize, u32)>) -> Option<PHandle> {
    if !enabled() {
        return None;
    }
    let m = p.m()?;
    let word = m.revoke.word();
    let now = (m as *const M as usize, word);
    if word & 1 == 1 || *seen != Some(now) {
        *seen = Some(now);
        return None;
    }
    // A goroutine computing in a preemptible region is stopped by signal
    // (which keeps its stack readable for a dump); only take its P if the
    // thread is blocked in the kernel.
    if m.curg().is_some_and(|g| g.region_depth() > 0) && m.thread_state().is_none_or(|s| s == b'R')
    {
        return None;
    }
    take(p, m, word)
}

/// The handshake (`m::revoke`): the P if `m` is still in stretch `seen`
/// and holds `p`.
fn take(p: &'static P, m: &'static M, seen: u32) -> Option<PHandle> {
    if !m.revoke.begin(seen, || {
        if !thread::heavy_barrier() {
            // Unreachable in practice: the probe needs the same kernel
            // facilities. Without the barrier the handshake is unsound.
            super::throw("P revocation without membarrier");
        }
    }) {
        return None;
    }
    // The M cannot enter the runtime now, and the barrier made all it did
    // before visible: if it records itself as `p`'s M, it holds `p`.
    if p.m().map(|x| x as *const M) != Some(m as *const M) || p.status() != PStatus::Running {
        m.revoke.abort();
        return None;
    }
    // SAFETY: we won the handshake for `m`, which holds `p` (checked above
    // with the M frozen out of the runtime).
    let pp = unsafe { PHandle::claim_revoked(p) };
    pp.set_m(None);
    m.mark_p_revoked();
    BLOCKED_THREADS.fetch_add(1, Ordering::Relaxed);
    stats::bump(&stats::SYSMON.blocked_handoffs, 1);
    let g = m.curg();
    // The system call is read only for the opt-in views (module note).
    let nr = || procfs::blocked_syscall(m.tid());
    if crate::trace::on() {
        crate::trace::proc_revoke(g.map_or(0, |g| g.id()), pp.id, nr().unwrap_or(-1));
    }
    if env::godebug().blockwarn && !WARNED.swap(true, Ordering::Relaxed) {
        warn(g, nr());
    }
    m.revoke.finish();
    Some(pp)
}

/// `GODEBUG=blockwarn=1`: the first revocation is reported on stderr.
#[cold]
fn warn(g: Option<&'static crate::g::G>, nr: Option<i64>) {
    let what = match nr {
        Some(nr) => match procfs::syscall_name(nr) {
            Some(name) => format!("in system call {name} ({nr})"),
            None => format!("in system call {nr}"),
        },
        None => "in the kernel".to_string(),
    };
    let who = match g {
        Some(g) => match crate::g::names().into_iter().find(|(id, _)| *id == g.id()) {
            Some((_, name)) => format!("goroutine {} ({name})", g.id()),
            None => format!("goroutine {}", g.id()),
        },
        None => "a goroutine".to_string(),
    };
    eprintln!(
        "goroutine: {who} blocked {what} outside the runtime; its P was handed to another \
         thread. Wrap such calls in goroutine::syscall_blocking (or use goroutine::net, \
         goroutine::time, goroutine::sync) to avoid the detour. (GODEBUG=blockwarn=1: \
         reported once)"
    );
}
