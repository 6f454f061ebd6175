//! sysmon: the system monitor (Go's sysmon), a dedicated thread without a P.
//!
//! Each cycle it
//! - polls the network if nobody has for 10 ms, injecting what is ready;
//! - starts an M when a timer is overdue and no M is looking; if every P
//!   runs a goroutine, preempts one that has run for 100 us on a P holding a
//!   due timer (`preempt_for_timers`), and while every P is busy it naps no
//!   longer than until the next timer is due (`timer_nap`); a timer started
//!   during such a nap that is due before it ends wakes sysmon
//!   (`timer_started`);
//! - releases the goroutine stacks that the pool keeps warm past its bound
//!   (`g::stack::release_excess`), so that no goroutine exit holds its P
//!   through those `madvise` calls: paced while exits stream in, a chunk
//!   per cycle without naps once they stop (`g::stack`'s note, "Giving
//!   memory back after a burst");
//! - `retake`s: a P whose goroutine has run for 10 ms without a scheduling
//!   point gets `preempt` set (cooperative preemption: the goroutine yields
//!   at its next runtime call or `preempt_point()`, to the global queue),
//!   and if that goroutine is in a preemptible region its thread also gets
//!   `SIGURG` (asynchronous preemption, `asyncpreempt.rs`);
//!   a P that has stayed in one system call for a whole sysmon tick, or is
//!   in a system call after 10 ms with one G (Go's `sysretake`: a G that
//!   loops on short calls), is taken (`Syscall -> Idle` CAS) and given a P
//!   handoff (`syscall::handoffp`), unless it has no work and other Ms are idle or spinning, in which
//!   case it waits 10 ms;
//!   a P in `Running` state whose M is blocked in the kernel outside the
//!   runtime (a plain `std` or C call) is taken from it the same way
//!   (`retake.rs`).
//!
//! Sleep: 20 us per cycle; after 50 cycles with nothing to do the sleep
//! doubles each cycle up to 10 ms. When every P is idle (or the world is
//! stopped) sysmon sleeps on its note until the next timer (at most 60 s,
//! or a back-off from 20 ms while only threads outside the runtime keep the
//! process alive: `checkdead::Verdict`);
//! system-call entry/exit wake it and reset its back-off (`wake_for_syscall`,
//! as Go); `startm` on an idle runtime wakes it without a reset
//! (`wake_if_waiting`), so a server that idles between requests does not
//! keep sysmon ticking every 20 us.
//!
//! sysmon's own view of each P (last schedtick/syscalltick seen and when)
//! is private to this thread: no other code reads it.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use super::{env, idle, sched, stats, syscall, timers};
use crate::p::PStatus;
use crate::sys::time::nanotime;

/// The longest deep sleep (every P idle, no timer pending).
const DEEP_SLEEP_MAX_NS: i64 = 60_000_000_000;

/// The first deep sleep while only threads outside the runtime keep the
/// process alive (`checkdead::Verdict::OutsideThreads`); it doubles up to
/// `DEEP_SLEEP_MAX_NS` while that lasts.
const OUTSIDE_BACKOFF_MIN_NS: i64 = 20_000_000;

/// A goroutine may run this long before sysmon asks it to yield (Go's
/// forcePreemptNS).
pub(crate) const FORCE_PREEMPT_NS: i64 = 10_000_000;

/// The slice in effect: `FORCE_PREEMPT_NS`, unless the undocumented test
/// knob `GOROUTINE_DEBUG_FORCEPREEMPTNS` (nanoseconds, at least 100 us)
/// shortens it so that preemption tests see thousands of preemptions per
/// second. Written once before sysmon starts.
static FORCE_PREEMPT: AtomicI64 = AtomicI64::new(FORCE_PREEMPT_NS);

pub(crate) fn force_preempt_ns() -> i64 {
    FORCE_PREEMPT.load(Ordering::Relaxed)
}

#[derive(Clone, Copy, Default)]
struct PView {
    schedtick: u32,
    schedwhen: i64,
    syscalltick: u32,
    syscallwhen: i64,
    /// The blocked-thread probe of this P's M (`retake.rs`).
    probe: super::retake::Probe,
}

/// Starts the sysmon thread (once, at runtime start).
pub(crate) fn start() {
    if let Some(ns) = std::env::var("GOROUTINE_DEBUG_FORCEPREEMPTNS")
        .ok()
        .and_then(|v| v.trim().parse::<i64>().ok())
    {
        FORCE_PREEMPT.store(ns.clamp(100_000, FORCE_PREEMPT_NS), Ordering::Relaxed);
    }
    let r = std::thread::Builder::new()
        .name("goroutine-sysmon".into())
        .stack_size(128 * 1024)
        .spawn(sysmon);
    if r.is_ok() {
        super::checkdead::internal_thread_started();
    }
    if let Err(e) = r {
        eprintln!("goroutine: cannot start sysmon ({e}): no preemption or syscall handoff");
    }
}

/// A system call started or ended: wake sysmon from its deep sleep (if it
/// is in one) and make it tick fast again, as Go's entersyscall does: a P
/// may need retaking within a tick.
#[inline]
pub(crate) fn wake_for_syscall() {
    // SeqCst load; pairs with sysmon's `sysmonwait` store before its deep
    // sleep, made under the sched lock (`sysmon` below). A stale false is
    // harmless: sysmon decides to sleep under that lock only when every P is
    // idle (or a stop-the-world is on, when it sleeps by design), and this M
    // took its P from the idle list under the same lock after that decision
    // (then it sees true) or held it before (then sysmon saw a busy P).
    if sched().sysmonwait.load(Ordering::SeqCst) {
        SYSCALL_WAKE.store(true, Ordering::Relaxed);
        wake_if_waiting();
    }
}

/// Set by `wake_for_syscall`: the wake-up resets sysmon's back-off.
static SYSCALL_WAKE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Wakes sysmon from its deep sleep, if it is in one, keeping its back-off:
/// work arriving on an idle runtime (`startm`) needs sysmon watching (to
/// preempt a goroutine that then runs for 10 ms), not ticking every 20 us.
/// A request/response server goes idle and busy thousands of times a
/// second; resetting the back-off on each of those cost it ~8% of its CPU.
#[inline]
pub(crate) fn wake_if_waiting() {
    let s = sched();
    // The unlocked load is a fast-path hint (the reasoning in
    // `wake_for_syscall`); the re-check and the store are under the sched
    // lock, as are sysmon's own stores, so the lock orders them (SeqCst adds
    // nothing to it).
    if s.sysmonwait.load(Ordering::SeqCst) {
        let _l = s.lock();
        if s.sysmonwait.load(Ordering::SeqCst) {
            s.sysmonwait.store(false, Ordering::SeqCst);
            s.sysmonnote.wakeup();
        }
    }
}

fn sysmon() {
    let s = sched();
    crate::tracer::set_sysmon_thread();
    // Excess warm stacks are released here from now on, off any P.
    crate::g::stack::release_in_background(wake_from_nap);
    if env::godebug().blockrevoke || env::godebug().hogrevoke {
        prepare_revocation();
    }
    let mut views: Vec<PView> = Vec::new();
    let mut idle_cycles = 0u32;
    let mut delay_us = 20u64;
    let schedtrace_ns = env::godebug().schedtrace_ms.saturating_mul(1_000_000);
    let mut last_schedtrace = nanotime();
    let mut last_sample = 0i64;
    let mut last_cgroup = nanotime();
    // The deep sleep's bound while only threads outside the runtime keep
    // the process alive (0: not in that state, or something woke sysmon
    // since). See `checkdead::Verdict`.
    let mut outside_backoff_ns = 0i64;
    // At most one slice between looks at the Ps (10 ms, Go's cap).
    let max_delay_us = (force_preempt_ns() as u64 / 1_000).min(10_000);
    loop {
        if idle_cycles == 0 {
            delay_us = 20;
        } else if idle_cycles > 50 {
            delay_us *= 2;
        }
        delay_us = delay_us.min(max_delay_us);
        nap(timer_nap(s, delay_us));
        crate::g::stack::release_excess();
        let mut now = stats::refresh_coarse_now();
        stats::sysmon_calibrate(now);

        // `stw_waiting`: pairs with its stores in `stop_the_world` /
        // `start_the_world` (procresize.rs), made under the sched lock. The
        // first load is a hint; the re-checks are under the same lock.
        if s.stw_waiting.load(Ordering::SeqCst) || s.spin.npidle() == s.gomaxprocs() {
            let l = s.lock();
            if s.stw_waiting.load(Ordering::SeqCst) || s.spin.npidle() == s.gomaxprocs() {
                drop(l);
                // Every P is idle: maybe nothing can ever run again.
                let epoch = super::checkdead::recheck_epoch();
                let verdict = super::checkdead::check();
                now = stats::refresh_coarse_now();
                let l = s.lock();
                // Deep sleep, unless schedtrace or the tracer want their
                // lines and samples on time (Go: only if schedtrace <= 0),
                // or stacks wait for their release (one chunk per cycle).
                let still_idle = schedtrace_ns == 0
                    && !crate::tracer::on()
                    && !crate::g::stack::release_pending()
                    && (s.stw_waiting.load(Ordering::SeqCst) || s.spin.npidle() == s.gomaxprocs());
                let next = timers::next_when();
                let mut deep = still_idle && (next == 0 || next > now);
                if deep {
                    s.sysmonnote.clear();
                    // Under the sched lock; pairs with the loads in
                    // `wake_for_syscall` and `wake_if_waiting`.
                    s.sysmonwait.store(true, Ordering::SeqCst);
                    // An M parked or the last timer went since the check
                    // began: check again instead (checkdead's note).
                    if super::checkdead::recheck_epoch() != epoch {
                        s.sysmonwait.store(false, Ordering::SeqCst);
                        deep = false;
                    }
                }
                if deep {
                    drop(l);
                    let mut sleep = DEEP_SLEEP_MAX_NS;
                    if next != 0 {
                        sleep = sleep.min(next - now);
                    }
                    // Nothing tells the runtime when a thread outside it
                    // exits or blocks outside its waits, which may leave the
                    // process dead: look again after 20 ms, doubling to the
                    // cap while that state lasts.
                    if verdict == super::checkdead::Verdict::OutsideThreads {
                        outside_backoff_ns = if outside_backoff_ns == 0 {
                            OUTSIDE_BACKOFF_MIN_NS
                        } else {
                            (outside_backoff_ns * 2).min(DEEP_SLEEP_MAX_NS)
                        };
                        sleep = sleep.min(outside_backoff_ns);
                    } else {
                        outside_backoff_ns = 0;
                    }
                    let woken = s.sysmonnote.sleep_timeout(sleep);
                    if woken {
                        // Something ran (a wakeup, a park): the back-off is
                        // for an idle spell that lasts, so it starts afresh.
                        outside_backoff_ns = 0;
                    }
                    let _l = s.lock();
                    // Under the lock; pairs with `wake_if_waiting`'s loads.
                    s.sysmonwait.store(false, Ordering::SeqCst);
                    if woken && SYSCALL_WAKE.swap(false, Ordering::Relaxed) {
                        idle_cycles = 0;
                        delay_us = 20;
                    }
                    now = stats::refresh_coarse_now();
                }
            }
        }

        // Poll the network if nobody has for 10 ms. `lastpoll`: the load and
        // the CAS pair with find_runnable's step 10 (schedule.rs), which
        // swaps it to 0 while an M blocks in the poller and stores the time
        // after: the CAS (one RMW order with that swap) succeeds only if no
        // M has started blocking since the load, and a 0 is never replaced.
        let lastpoll = s.lastpoll.load(Ordering::SeqCst);
        if lastpoll != 0
            && lastpoll + 10_000_000 < now
            && s.lastpoll
                .compare_exchange(lastpoll, now, Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
        {
            let list = crate::netpoll::netpoll(0);
            if !list.is_empty() {
                super::schedule::inject(list);
            }
        }

        // An overdue timer that no M looks at.
        let next = timers::next_when();
        if next != 0 && next < now {
            idle::startm(None, false);
            preempt_for_timers(s, now, &views);
        }

        if retake(s, now, &mut views) > 0 {
            idle_cycles = 0;
        } else {
            idle_cycles += 1;
        }
        // Goroutines in regions computing on threads whose P was taken.
        super::asyncpreempt::preempt_revoked(now);

        if schedtrace_ns > 0 && now - last_schedtrace >= schedtrace_ns {
            last_schedtrace = now;
            super::schedtrace::print(env::godebug().scheddetail, now);
        }
        if crate::tracer::on() && now - last_sample >= SAMPLE_NS {
            last_sample = now;
            trace_sample();
        }
        if now - last_cgroup >= CGROUP_POLL_NS {
            last_cgroup = now;
            super::procresize::follow_cgroup();
        }
    }
}

/// How often sysmon re-reads the cgroup CPU limit (`procresize::
/// follow_cgroup`), as Go 1.25's sysmon does about once a second.
const CGROUP_POLL_NS: i64 = 1_000_000_000;

/// Registers the barrier P revocation issues (`sys::thread::heavy_barrier`)
/// ahead of the first revocation, on a short-lived thread of its own: the
/// kernel takes tens of milliseconds to register, which on sysmon's thread
/// delayed its first looks at the Ps by as much (a loop of a few slices at
/// GOMAXPROCS=1 was then never asked to yield), and on the first
/// revocation kept the goroutines
/// waiting for that P as long. A revoker that comes first waits for the
/// registration as before. The thread counts as the runtime's own for the
/// deadlock detector while it lives.
fn prepare_revocation() {
    super::checkdead::internal_thread_started();
    let spawned = std::thread::Builder::new()
        .name("goroutine-membarrier".into())
        .stack_size(64 * 1024)
        .spawn(|| {
            crate::sys::thread::prepare_heavy_barrier();
            super::checkdead::internal_thread_exited();
        });
    if spawned.is_err() {
        // No thread: the first revocation registers, as before.
        super::checkdead::internal_thread_exited();
    }
}

/// A goroutine that sysmon has seen running this long may be preempted at
/// once for a due timer (`preempt_for_timers`); while a timer is overdue
/// and every P runs a goroutine, sysmon naps no longer than this.
///
/// It bounds how late such a timer runs (about this much after sysmon
/// first sees the goroutine that holds its P) and how often a goroutine is
/// stepped aside for timers: at most once per 100 us of its run, each a
/// signal and two switches, and only while a timer waits. At 1 ms a sleep
/// beside CPU-bound goroutines woke late by about that much at the median
/// (hog_fairness's probe; docs/bench/history.md, fifteenth stop).
const TIMER_PREEMPT_NS: i64 = 100_000;

/// When sysmon's current nap ends (nanotime), while it naps with every P
/// busy and no M spinning; 0 otherwise. A timer started during such a nap
/// that is due before the nap ends (less `TIMER_PREEMPT_NS`) cuts it short
/// (`timer_started`): without that, a timer armed just after sysmon chose
/// a long nap (10 ms at full back-off, no timer pending then) waited for
/// the nap to end before `preempt_for_timers` could act.
///
/// Protocol: sysmon clears `NAP_NOTE`, then publishes the end; a starter
/// that swaps the end back to 0 (at most one per nap) wakes the note. A
/// wake-up that comes before sysmon sleeps leaves the note set, so the nap
/// returns at once. sysmon stores 0 when the nap is over, so a later
/// starter's CAS fails and wakes nothing; a starter whose CAS won just as
/// the nap timed out wakes the note late, which at worst ends sysmon's next
/// nap early.
/// So `NAP_NOTE` may be woken more than once per `clear` (that late
/// wake-up, one for the new nap, and one from `wake_from_nap`), which
/// `m::note`'s rule "at most once per clear" does not allow for the Ms'
/// notes. Here it is harmless: `wakeup` is a swap, so a second call finds
/// the key set and does nothing.
static NAP_UNTIL: AtomicI64 = AtomicI64::new(0);
static NAP_NOTE: crate::m::note::Note = crate::m::note::Note::new();

/// Set while sysmon naps (any nap, see `nap`); the first
/// `wake_from_nap` of a nap swaps it off and wakes `NAP_NOTE`.
static NAP_WAKEABLE: AtomicBool = AtomicBool::new(false);

/// sysmon's nap of `us` microseconds, cut short by `timer_started` (see
/// `NAP_UNTIL`) or by `wake_from_nap`.
fn nap(us: u64) {
    let s = sched();
    NAP_NOTE.clear();
    // Dekker with `wake_from_nap`'s caller: it publishes its work (a
    // SeqCst RMW), then swaps `NAP_WAKEABLE`; here the store comes first,
    // then the check of that work. Either the waker sees the nap armed
    // and wakes it, or the check sees the work and the nap is skipped.
    NAP_WAKEABLE.store(true, Ordering::SeqCst);
    // A release waiting for its pace (exits still streaming in) does not
    // cut the nap: the next chunk is due in a millisecond at the soonest.
    if crate::g::stack::release_pending() && !crate::g::stack::release_paced() {
        NAP_WAKEABLE.store(false, Ordering::SeqCst);
        return;
    }
    let ns = us as i64 * 1_000;
    // Long, with every P busy and no M spinning: a new timer due before
    // the nap ends must cut it short. Otherwise an idle P's M polls the
    // network until the next timer, and a new earlier timer wakes it
    // (`timers::wake_netpoller`).
    let for_timers = us >= 2 * TIMER_PREEMPT_NS as u64 / 1_000
        && s.spin.npidle() == 0
        && s.spin.nmspinning() == 0;
    if for_timers {
        NAP_UNTIL.store(nanotime() + ns, Ordering::SeqCst);
    }
    NAP_NOTE.sleep_timeout(ns);
    if for_timers {
        NAP_UNTIL.store(0, Ordering::SeqCst);
    }
    NAP_WAKEABLE.store(false, Ordering::SeqCst);
}

/// Ends sysmon's current nap, if it is in one, so that it sees work that
/// the caller published before this call (with a SeqCst RMW): today, warm
/// goroutine stacks to release (`g::stack::release_excess`). At most one
/// wake-up per nap; nothing if sysmon is awake (it checks that work after
/// its nap) or in its deep sleep (every P idle: nothing is spilling).
#[cold]
pub(crate) fn wake_from_nap() {
    if NAP_WAKEABLE.swap(false, Ordering::SeqCst) {
        NAP_NOTE.wakeup();
    }
}

/// A timer due at `when` became the earliest of its P's heap: if sysmon
/// naps with every P busy and would wake too late to preempt for it, wake
/// it now (its next nap is then capped by `timer_nap`).
#[inline]
pub(crate) fn timer_started(when: i64) {
    let until = NAP_UNTIL.load(Ordering::Relaxed);
    if until != 0
        && when.saturating_add(TIMER_PREEMPT_NS) < until
        && NAP_UNTIL
            .compare_exchange(until, 0, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok()
    {
        NAP_NOTE.wakeup();
    }
}

/// sysmon's nap: its back-off `delay_us`, but while every P runs a
/// goroutine and a timer is pending, no longer than until it is due (at
/// least 20 us), and while one is overdue no longer than
/// `TIMER_PREEMPT_NS`, so that `preempt_for_timers` acts on time.
fn timer_nap(s: &'static super::Sched, delay_us: u64) -> u64 {
    if s.spin.npidle() != 0 || s.spin.nmspinning() != 0 {
        return delay_us;
    }
    let next = timers::next_when();
    if next == 0 {
        return delay_us;
    }
    let until_us = (next - nanotime()) / 1_000;
    let cap = if until_us <= 0 {
        TIMER_PREEMPT_NS as u64 / 1_000
    } else {
        (until_us as u64).max(20)
    };
    delay_us.min(cap)
}

/// A timer is due and no P is free to run it: every P runs a goroutine and
/// no M spins. Rather than leave the timer until some goroutine's slice
/// ends (10 ms, seen up to a sysmon tick later), preempt a goroutine that
/// sysmon has seen running for `TIMER_PREEMPT_NS` on a P whose heap holds a
/// due timer: its M runs that P's timers first thing in `find_runnable`.
/// Short-lived goroutines (the scheduler's tick moves between two looks)
/// are left alone: their P reaches the timers soon anyway. Goes beyond Go,
/// which waits for the slice.
fn preempt_for_timers(s: &'static super::Sched, now: i64, views: &[PView]) {
    if s.spin.npidle() != 0 || s.spin.nmspinning() != 0 {
        return;
    }
    for (id, pd) in views.iter().enumerate().take(s.gomaxprocs() as usize) {
        let Some(p) = s.allp(id) else { continue };
        let next = p.timers.next();
        if next == 0 || next > now || p.status() != PStatus::Running {
            continue;
        }
        if pd.schedtick != p.schedtick() || pd.schedwhen + TIMER_PREEMPT_NS > now {
            continue;
        }
        if !p.preempt.load(Ordering::Relaxed) {
            // Set before `preempt`, so the goroutine that sees the request
            // normally sees its reason too. The loads are relaxed: a missed
            // or stale reason only changes where the preempted goroutine
            // goes (the global queue or this P's tail), never whether it
            // runs. A request already pending (a used-up slice) keeps its
            // own reason.
            p.preempt_for_timer.store(true, Ordering::Relaxed);
        }
        if !p.preempt.swap(true, Ordering::Release) {
            stats::bump(&stats::SYSMON.preempt_requests, 1);
        }
        super::asyncpreempt::preempt_m(p, now);
    }
}

/// How often sysmon samples the run queues and goroutine counts into a
/// running trace.
const SAMPLE_NS: i64 = 10_000_000;

/// The goroutine running on P `id`, if any (the M holding it, its curg).
fn curg_of_p(s: &'static super::Sched, id: u32) -> Option<&'static crate::g::G> {
    let allm = s.allm.lock().unwrap_or_else(|e| e.into_inner());
    allm.iter()
        .find(|m| m.p_id() == Some(id))
        .and_then(|m| m.curg_from_outside())
}

/// Preempts long-running goroutines and takes Ps back from system calls;
/// returns how many Ps it took.
fn retake(s: &'static super::Sched, now: i64, views: &mut Vec<PView>) -> u32 {
    let n = s.gomaxprocs() as usize;
    if views.len() < n {
        views.resize(n, PView::default());
    }
    let mut taken = 0;
    for (id, pd) in views.iter_mut().enumerate().take(n) {
        let Some(p) = s.allp(id) else { continue };
        let status = p.status();
        // Go's sysretake: the P has had one G for 10 ms. If that G is in a
        // system call now, take the P even though it has entered a new one
        // since sysmon last looked: a G looping on short system calls
        // re-takes its P on every exit, and would otherwise hold it (and
        // starve the P's other goroutines) for as long as it loops.
        let mut sysretake = false;
        if status == PStatus::Running || status == PStatus::Syscall {
            let t = p.schedtick();
            if pd.schedtick != t {
                pd.schedtick = t;
                pd.schedwhen = now;
            } else if pd.schedwhen + force_preempt_ns() <= now {
                if !p.preempt.load(Ordering::Relaxed) {
                    stats::bump(&stats::SYSMON.preempt_requests, 1);
                    if crate::tracer::on() {
                        let g = curg_of_p(s, p.id).map_or(0, |g| g.id());
                        crate::tracer::preempt(g, p.id);
                    }
                }
                // Release, though nothing needs it here: the goroutines'
                // checks (coop_preempt.rs) load Relaxed, as the flag is a
                // request that carries no data; `execute`'s Acquire load
                // pairs with a stop-the-world's store (procresize.rs).
                p.preempt.store(true, Ordering::Release);
                sysretake = true;
                if status == PStatus::Running {
                    super::asyncpreempt::preempt_m(p, now);
                }
            }
        }
        if status == PStatus::Running {
            // An M blocked in the kernel outside the runtime (`retake.rs`).
            if let Some(look) = pd.probe.look(p, now) {
                if super::retake::retake(p, look) {
                    taken += 1;
                }
            }
            continue;
        }
        if status != PStatus::Syscall {
            continue;
        }
        let t = p.syscalltick();
        if !sysretake && pd.syscalltick != t {
            pd.syscalltick = t;
            pd.syscallwhen = now;
            continue;
        }
        // Nothing to do for it and others are looking: leave it 10 ms.
        if p.runq_is_empty()
            && s.spin.nmspinning() + s.spin.npidle() > 0
            && pd.syscallwhen + 10_000_000 > now
        {
            continue;
        }
        if let Some(pp) = p.cas_from_syscall(PStatus::Idle) {
            pp.bump_syscalltick();
            taken += 1;
            stats::bump(&stats::SYSMON.retakes, 1);
            if crate::tracer::on() {
                crate::tracer::syscall_handoff(pp.id);
            }
            syscall::handoffp(pp);
        }
    }
    taken
}

/// sysmon's samples every 10 ms while tracing: each P's run queue length
/// with the global one, and the goroutine counts.
fn trace_sample() {
    let s = sched();
    let global = s.runqsize.load(Ordering::Relaxed) as u64;
    for id in 0..s.gomaxprocs() as usize {
        if let Some(p) = s.allp(id) {
            crate::tracer::runq_sample(p.id, p.runq_len() as u64, global);
        }
    }
    let c = stats::gcounts();
    crate::tracer::go_count(
        c.runnable as u64,
        c.running as u64,
        c.waiting as u64,
        c.syscall as u64,
    );
}
