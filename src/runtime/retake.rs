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
//! # Goroutines that compute without runtime calls (rule 5, hogs)
//! 5. **A slice, others waiting.** A P in `Running` whose M passed rule 1
//!    for half a slice as sysmon saw it (`sysmon::force_preempt_ns` / 2,
//!    5 ms), on the CPU for at least half of it (it computes; a thread the
//!    kernel keeps waiting is no hog), is taken too when work waits for
//!    that P (its run queue, the global queue, or a due timer of its heap),
//!    the goroutine is not in a `preemptible` region (signals stop those),
//!    `GODEBUG=hogrevoke=0` is not set, and fewer than GOMAXPROCS Ms run
//!    hogs without a P already.
//!
//! Why: at GOMAXPROCS=1, one goroutine looping for 300 ms kept every other
//! goroutine off the CPU for 300 ms (Go preempts it by signal after about
//! 10 ms; signal preemption of arbitrary Rust code is unsound here, see
//! docs/preemption.md). Revocation is sound for it as it is for a blocked
//! thread: the same handshake, and the M touches no runtime state until its
//! next runtime call, where it takes a P back (or queues its goroutine and
//! parks) like a returning system call. The cost: the hog's thread runs on
//! beside the Ps as a plain OS thread, scheduled by the kernel, so the
//! process may use up to GOMAXPROCS more CPUs than GOMAXPROCS while hogs
//! run (at most one extra thread per P, `HOG_THREADS`), the same bargain
//! as Go's Ms in system calls. `stats().hog_handoffs` counts these.
//!
//! Why half a slice: sysmon measures a stretch from its first look at it,
//! and while Ps go idle between ticks it naps up to 10 ms (Go's back-off),
//! so a stretch may be that old when first seen. Go's own 10 ms then reads
//! 10-20 ms (its 22-33 ms beside a 300 ms hog at GOMAXPROCS=1); half a
//! slice keeps the ready goroutine's wait under about 16 ms, and a hog
//! still computes at least 5 ms before its P moves.
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
/// Of those, the Ms taken as hogs (rule 5): at most GOMAXPROCS.
static HOG_THREADS: AtomicUsize = AtomicUsize::new(0);
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
pub(crate) fn returned(m: &M) {
    BLOCKED_THREADS.fetch_sub(1, Ordering::Relaxed);
    if m.revoked_hog.swap(false, Ordering::Relaxed) {
        HOG_THREADS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What [`Probe::look`] found: an M whose P may be taken.
#[derive(Clone, Copy)]
pub(crate) struct Look {
    m: &'static M,
    /// The stretch seen (its even word).
    word: u32,
    /// How long the stretch has been seen.
    lasted: i64,
    /// It computes (rule 5), rather than blocks (rules 3 and 4).
    hog: bool,
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
    /// The same at the first look that read it (rule 5's evidence).
    cpu_first: Option<(u64, i64)>,
}

impl Probe {
    /// Looks at `p`'s M; returns it and its stretch if the thread is
    /// blocked in the kernel by rules 1, 3 and 4, or computes by rules 1
    /// and 5, with how long the stretch has been seen.
    pub(crate) fn look(&mut self, p: &'static P, now: i64) -> Option<Look> {
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
                cpu_first: None,
            };
            return None;
        }
        if now == self.since {
            return None;
        }
        let lasted = now - self.since;
        let look = |hog| Look {
            m,
            word,
            lasted,
            hog,
        };
        let cpu = thread::cpu_time_ns(m.cpu_clock()?)?;
        let (cpu1, t1) = *self.cpu_first.get_or_insert((cpu, now));
        let (cpu0, t0) = self.cpu.replace((cpu, now))?;
        // Mostly off the CPU since the previous look: a goroutine looping on
        // short blocking calls (a 1 ms sleep, then a few us of its own
        // code) never makes a runtime call and never shows a still clock.
        if cpu.saturating_sub(cpu0).saturating_mul(2) < (now - t0).max(0) as u64 {
            // An unreadable state (no descriptor left, the cap on held
            // files: `M::thread_state`) counts as not runnable: rule 3
            // alone then decides, since a stalled P is worse than a thread
            // too many. A runnable thread off the CPU is neither blocked
            // nor computing: the kernel has it waiting (rule 4).
            return (m.thread_state() != Some(b'R')).then(|| look(false));
        }
        // Rule 5: on the CPU since the previous look, and for at least half
        // of the stretch since the first reading. A thread that an
        // overloaded machine keeps waiting is no hog, and taking its P
        // would queue its goroutine behind all the others at its next
        // runtime call (a 1 ms ticker, so taken, waited 1.2 s behind 1,000
        // goroutines at GOMAXPROCS=1 with the cores shared 3 ways).
        let computing = cpu.saturating_sub(cpu1).saturating_mul(2) >= (now - t1).max(0) as u64;
        (computing && lasted >= super::sysmon::force_preempt_ns() / 2 && hog_waits_for(p, m, now))
            .then(|| look(true))
    }
}

/// Rule 5 for a computing M that has held `p` for half a slice: work waits
/// for the P, the goroutine is not in a preemptible region, the knob is on,
/// and the hog budget (one extra thread per P) is not spent.
fn hog_waits_for(p: &'static P, m: &'static M, now: i64) -> bool {
    let s = sched();
    if !env::godebug().hogrevoke
        || HOG_THREADS.load(Ordering::Relaxed) >= s.gomaxprocs() as usize
        || m.curg_from_outside().is_none_or(|g| g.region_depth() > 0)
    {
        return false;
    }
    let next = p.timers.next();
    !p.runq_is_empty() || s.runqsize.load(Ordering::Relaxed) != 0 || (next != 0 && next <= now)
}

/// Whether revocation is on: `GODEBUG=blockrevoke=0` turns it off, and so
/// does a kernel without `membarrier`.
fn enabled() -> bool {
    env::godebug().blockrevoke
}

/// sysmon: takes `p` from the M `look` found (module note: rule 2 for a
/// blocked M, rule 5 for a hog, whose conditions `look` checked), and
/// gives it a P handoff. True if it did.
pub(crate) fn retake(p: &'static P, look: Look) -> bool {
    let s = sched();
    if !look.hog
        && p.runq_is_empty()
        && s.runqsize.load(Ordering::Relaxed) == 0
        && s.spin.nmspinning() + s.spin.npidle() > 0
        && look.lasted < IDLE_RETAKE_NS
    {
        return false;
    }
    let Some(pp) = take(p, look.m, look.word, look.hog) else {
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
    if m.curg_from_outside().is_some_and(|g| g.region_depth() > 0)
        && m.thread_state().is_none_or(|s| s == b'R')
    {
        return None;
    }
    take(p, m, word, false)
}

/// The handshake (`m::revoke`): the P if `m` is still in stretch `seen`
/// and holds `p`. `hog`: taken by rule 5 (counted against the budget until
/// the M notices, `returned`).
fn take(p: &'static P, m: &'static M, seen: u32, hog: bool) -> Option<PHandle> {
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
    if hog {
        // Before `finish`: the M reads it only after it saw `TAKEN`.
        m.revoked_hog.store(true, Ordering::Relaxed);
        HOG_THREADS.fetch_add(1, Ordering::Relaxed);
        stats::bump(&stats::SYSMON.hog_handoffs, 1);
    } else {
        stats::bump(&stats::SYSMON.blocked_handoffs, 1);
    }
    let g = m.curg_from_outside();
    // The system call is read only for the opt-in views (module note).
    let nr = || procfs::blocked_syscall(m.tid());
    if crate::tracer::on() {
        crate::tracer::proc_revoke(g.map_or(0, |g| g.id()), pp.id, nr().unwrap_or(-1));
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
