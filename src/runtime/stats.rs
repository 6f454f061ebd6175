//! Scheduler statistics: the counters behind [`crate::stats`], the
//! goroutine-by-status snapshot, and sysmon's coarse clock.
//!
//! # Where each counter lives (who writes it)
//! Counters are plain relaxed atomics, each written by exactly one thread at
//! a time, so an increment is a load and a store (no locked instruction),
//! and summed by readers:
//! - per P (`p::counters::PCounters`, its own cache line in the P): written only by the
//!   P's owner (ownership moves with the P's handle, through the
//!   release/acquire edges that hand the P over, so no increment is lost):
//!   spawns, steals, stolen goroutines, global-queue grabs, runnext hits,
//!   spins, `syscall_blocking` P handoffs, preemption yields; plus two gauges
//!   that other threads cannot see otherwise (free Gs, yield buffer);
//! - per M (`crate::m::M`): written by the M's own thread, which holds no P
//!   when it parks: parks and wakes;
//! - per P but written by any M that runs the P's timer heap (a real
//!   `fetch_add`, once per check that fired timers): timers fired;
//! - sysmon's own ([`SYSMON`]): written only by the sysmon thread: syscall
//!   retakes and preemption requests;
//! - global, for the rare paths with no owner: spawns from outside the
//!   runtime (the scheduler's `ngoroutine_ext`, which only grows: their
//!   exits are counted on the P they end on), goroutines readied by the
//!   netpoller (once per non-empty poll).
//!
//! Reading walks all Ps and Ms: O(GOMAXPROCS + threads), about 0.1 us at
//! GOMAXPROCS 2 to 8 (three uncontended locks, one small allocation),
//! cheap enough to call every millisecond.
//!
//! # Goroutines by status
//! Derived, not counted: `running` and `syscall` from the Ms' current
//! goroutines, `runnable` from the queue lengths (global queue, every P's
//! ring, runnext and yield buffer), and `waiting` as the rest of the live
//! goroutines (`num_goroutine`). This costs the hot paths nothing (no
//! counter per status transition) and the reader O(Ps + Ms), where walking
//! the G arena would cost O(every G ever allocated) (1M goroutines: ~128 MB
//! of G records to read). The price: the snapshot is not atomic; a goroutine
//! in transit between a queue and an M (a few instructions) is briefly
//! counted as waiting.
//!
//! # The coarse clock
//! [`coarse_ms`] is the time since runtime start in ms (plus one) that
//! sysmon refreshes every cycle (at most 10 ms apart while any P is busy)
//! and Ms refresh when they wake. `park` stamps it into the G (`waitsince`)
//! for the dump's "N minutes": a load and a store instead of a clock read on
//! every park (a `clock_gettime` would cost about as much as the park
//! itself). Go itself only stamps `waitsince` during garbage collections.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering};

use super::sched;
use crate::cacheline::CacheLine;
use crate::g::{Status, G};
use crate::m::M;
use crate::p::P;
use crate::sys::time::{
    nanotime, refresh_ticks_mult, ticks, ticks_mult, ticks_mult_cached, ticks_to_ns,
};

/// Adds `n` to a counter that only the calling thread writes (module
/// note): a relaxed load and store, no read-modify-write.
#[inline(always)]
pub(crate) fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

/// Counters written only by the sysmon thread.
pub(crate) struct SysmonCounters {
    pub(crate) retakes: AtomicU64,
    pub(crate) preempt_requests: AtomicU64,
    /// Ps taken from Ms blocked in the kernel outside the runtime, by
    /// sysmon or a stop-the-world (`retake.rs`).
    pub(crate) blocked_handoffs: AtomicU64,
    /// Ps taken from threads computing without runtime calls (`retake.rs`,
    /// rule 5).
    pub(crate) hog_handoffs: AtomicU64,
}

pub(crate) static SYSMON: SysmonCounters = SysmonCounters {
    retakes: AtomicU64::new(0),
    preempt_requests: AtomicU64::new(0),
    blocked_handoffs: AtomicU64::new(0),
    hog_handoffs: AtomicU64::new(0),
};

/// Goroutines readied by the netpoller.
pub(crate) static NETPOLL_READY: CacheLine<AtomicU64> = CacheLine::new(AtomicU64::new(0));

/// Read at every park, written by sysmon: on lines of its own.
static COARSE_MS: CacheLine<AtomicU32> = CacheLine::new(AtomicU32::new(1));

/// The coarse clock (module note): ms since runtime start plus one, at
/// most ~10 ms old while goroutines run.
#[inline]
pub(crate) fn coarse_ms() -> u32 {
    COARSE_MS.load(Ordering::Relaxed)
}

/// The coarse clock's value for nanotime `now`.
pub(crate) fn ms_since_start(now: i64) -> u32 {
    (((now - super::start_time()).max(0) / 1_000_000) as u32).wrapping_add(1)
}

/// Refreshes the coarse clock from the real one; returns the nanotime read.
pub(crate) fn refresh_coarse_now() -> i64 {
    let now = nanotime();
    COARSE_MS.store(ms_since_start(now), Ordering::Relaxed);
    now
}

/// A snapshot of the scheduler (see [`crate::stats`]).
///
/// Gauges are instantaneous and not taken atomically together (each is
/// read once, while goroutines keep running); counters are cumulative since
/// the runtime started and never go down.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// GOMAXPROCS.
    pub gomaxprocs: usize,
    /// Live goroutines (as [`crate::num_goroutine`]).
    pub goroutines: usize,
    /// Goroutines waiting in a run queue (global, a P's ring or runnext, a
    /// P's yield buffer), spawned ones that have not run yet included.
    pub runnable: usize,
    /// Goroutines running on an M.
    pub running: usize,
    /// Goroutines parked (channel, mutex, join, sleep, I/O...). Derived:
    /// the live goroutines that are in none of the other states.
    pub waiting: usize,
    /// Goroutines inside `goroutine::syscall`.
    pub syscall: usize,
    /// Run queue length of each P (ring plus runnext), indexed by P id.
    pub local_runq: Vec<usize>,
    /// Global run queue length.
    pub global_runq: usize,
    /// Ps on the idle list.
    pub idle_procs: usize,
    /// OS threads running the scheduler (live Ms; sysmon not included).
    pub threads: usize,
    /// Ms parked on the idle list.
    pub idle_threads: usize,
    /// Ms looking for work.
    pub spinning_threads: usize,

    /// Goroutines spawned.
    pub spawns: u64,
    /// Successful steals, and the goroutines they moved.
    pub steals: u64,
    pub stolen: u64,
    /// Batches taken from the global run queue.
    pub global_grabs: u64,
    /// Goroutines run from a P's runnext slot.
    pub runnext_hits: u64,
    /// Times an M started spinning (looking for work to steal).
    pub spins: u64,
    /// Times an M parked (idle), and was woken.
    pub m_parks: u64,
    pub m_wakes: u64,
    /// OS threads created for Ms (including those that ended with a
    /// goroutine locked to them).
    pub threads_created: u64,
    /// P handoffs because the P's M was in a system call: sysmon retakes,
    /// `syscall_blocking` calls, and calls handed off at entry because the
    /// goroutine's last calls blocked long while others waited to run.
    pub syscall_handoffs: u64,
    /// Of those, the handoffs made as the call began (the last two kinds),
    /// with no wait for sysmon.
    pub syscall_entry_handoffs: u64,
    /// Ps taken from threads whose goroutine blocked in the kernel outside
    /// the runtime (a plain `std` or C call, not `goroutine::syscall`): P
    /// revocations, each followed by a P handoff (see the README's "Blocking calls outside the
    /// runtime").
    pub blocked_handoffs: u64,
    /// Ps taken from threads whose goroutine computed for a whole slice
    /// (10 ms) without a runtime call while others waited: the thread goes
    /// on as a plain OS thread and takes a P back at its next runtime call
    /// (see the README's "Asynchronous preemption"). Counted apart from
    /// `blocked_handoffs`.
    pub hog_handoffs: u64,
    /// Gauge: threads running a goroutine without a P because their P was
    /// taken that way; each re-acquires one at its next runtime call.
    pub blocked_threads: usize,
    /// Preemption requests by sysmon (a goroutine ran 10 ms without a
    /// scheduling point).
    pub preempt_requests: u64,
    /// Goroutines that yielded because of such a request.
    pub preempt_yields: u64,
    /// Timers that fired (sleeps, channel timers, deadlines, `after_func`).
    pub timers_fired: u64,
    /// Pending timers, on every P's heap (a gauge: sleeps, channel timers,
    /// tickers, deadlines, `after_func`).
    pub timers: usize,
    /// Goroutines readied by the netpoller.
    pub netpoll_ready: u64,
}

/// Goroutine counts by status (see the module note), shared by `stats`,
/// the tracer's GoCount samples and schedtrace.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct GCounts {
    pub(crate) runnable: usize,
    pub(crate) running: usize,
    pub(crate) waiting: usize,
    pub(crate) syscall: usize,
    /// Live Ms (the same walk of `allm`).
    pub(crate) threads: usize,
}

/// Counts goroutines by status without walking the Gs (module note).
pub(crate) fn gcounts() -> GCounts {
    let s = sched();
    let mut c = GCounts::default();
    for m in s.allm.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        c.threads += usize::from(!m.is_dead());
        if let Some(g) = m.curg_from_outside() {
            match g.status() {
                Status::Running => c.running += 1,
                Status::Syscall => c.syscall += 1,
                _ => {}
            }
        }
    }
    c.runnable = s.runqsize.load(Ordering::Relaxed) as usize;
    for id in 0..s.allp_created.load(Ordering::Acquire) as usize {
        if let Some(p) = s.allp(id) {
            c.runnable += p.runq_len() + p.counters.yieldq.load(Ordering::Relaxed) as usize;
        }
    }
    let live = s.num_goroutine();
    c.waiting = live.saturating_sub(c.runnable + c.running + c.syscall);
    c
}

/// See [`crate::stats`].
pub(crate) fn stats() -> Stats {
    let s = super::start();
    let mut st = Stats {
        gomaxprocs: s.gomaxprocs() as usize,
        ..Stats::default()
    };
    for id in 0..s.allp_created.load(Ordering::Acquire) as usize {
        let Some(p) = s.allp(id) else { continue };
        let c = &p.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        st.spawns += get(&c.spawns);
        st.steals += get(&c.steals);
        st.stolen += get(&c.stolen);
        st.global_grabs += get(&c.global_grabs);
        st.runnext_hits += get(&c.runnext_hits);
        st.spins += get(&c.spins);
        st.syscall_handoffs += get(&c.blocking_handoffs);
        st.syscall_entry_handoffs += get(&c.blocking_handoffs);
        st.preempt_yields += get(&c.preempt_yields);
        st.timers_fired += get(&c.timers_fired);
        st.timers += p.timers.len();
        if id < st.gomaxprocs {
            st.local_runq.push(p.runq_len());
        }
    }
    {
        let allm = s.allm.lock().unwrap_or_else(|e| e.into_inner());
        st.threads = allm.iter().filter(|m| !m.is_dead()).count();
        st.threads_created = allm.len() as u64;
        for m in allm.iter() {
            st.m_parks += m.parks.load(Ordering::Relaxed);
            st.m_wakes += m.wakes.load(Ordering::Relaxed);
        }
    }
    // Goroutines spawned from outside the runtime: that count only grows
    // (their exits are counted on the P they end on).
    st.spawns += s.ngoroutine_ext.load(Ordering::Relaxed) as u64;
    st.syscall_handoffs += SYSMON.retakes.load(Ordering::Relaxed);
    st.preempt_requests = SYSMON.preempt_requests.load(Ordering::Relaxed);
    st.blocked_handoffs = SYSMON.blocked_handoffs.load(Ordering::Relaxed);
    st.hog_handoffs = SYSMON.hog_handoffs.load(Ordering::Relaxed);
    st.blocked_threads = super::retake::blocked_threads();
    st.netpoll_ready = NETPOLL_READY.load(Ordering::Relaxed);
    st.global_runq = s.runqsize.load(Ordering::Relaxed) as usize;
    st.idle_procs = s.spin.npidle() as usize;
    st.spinning_threads = s.spin.nmspinning() as usize;
    st.idle_threads = s.lock().midle.len();
    let c = gcounts();
    st.goroutines = s.num_goroutine();
    st.runnable = c.runnable;
    st.running = c.running;
    st.waiting = c.waiting;
    st.syscall = c.syscall;
    st
}

// ---------------------------------------------------------------------------
// The metrics' hot paths (`runtime::metrics`' note): here, in a module the
// scheduler already uses, so that `metrics` (the reader) stays outside the
// runtime's import cycle (`tests/layers.rs`).
// ---------------------------------------------------------------------------

/// A runnable transition made on `pp` (module note, "Scheduling
/// latency"): counts it, and samples one in about 8. The caller owns `pp`
/// and has made `g` runnable but not yet published it, and has written
/// the transition's GoUnblock if it traces one: a sample takes the word
/// that holds the GoBlock's time until then (`G::trace_block_ts`).
#[inline(always)]
pub(crate) fn metrics_runnable(pp: &P, g: &'static G) {
    let c = &pp.latency.countdown;
    let n = c.load(Ordering::Relaxed);
    if n > 1 {
        c.store(n - 1, Ordering::Relaxed);
    } else {
        sample(pp, g);
    }
}

#[inline(never)]
fn sample(pp: &P, g: &'static G) {
    let t = ticks();
    pp.latency.restart(t);
    g.mark_ready_sampled(t);
}

/// A runnable transition made without a P: always sampled. After the
/// GoUnblock, as [`metrics_runnable`].
#[inline]
pub(crate) fn metrics_runnable_unowned(g: &'static G) {
    g.mark_ready_sampled(ticks());
}

/// Whether CPU time per goroutine is measured (`GODEBUG=cputime=1`, read
/// at runtime start by [`metrics_init`]).
static CPU_TIME: AtomicBool = AtomicBool::new(false);

/// Runtime start: reads `GODEBUG=cputime`.
pub(crate) fn metrics_init() {
    CPU_TIME.store(super::env::godebug().cputime, Ordering::Relaxed);
}

/// Whether CPU time per goroutine is measured (`GODEBUG=cputime=1`).
#[inline(always)]
pub(crate) fn cpu_time_on() -> bool {
    CPU_TIME.load(Ordering::Relaxed)
}

/// `execute`, as it switches `g` in on `m` holding `pp`: records the
/// latency if this runnable spell was sampled, and, when CPU time is
/// measured, notes the switch-in time. Returns that time (0 when it is not measured: a clock read is never 0), for
/// [`metrics_switch_out`]. With `quick` (found on the scheduler's quick path, no
/// wait since this M's last switch-out) the time is that switch-out's,
/// when the M kept it, with no clock read (module note, "CPU time per
/// goroutine").
#[inline(always)]
pub(crate) fn metrics_switch_in(m: &M, pp: &P, g: &'static G, quick: bool) -> u64 {
    if !cpu_time_on() {
        if let Some(since) = g.take_ready_sample() {
            record(pp, ticks(), since);
        }
        return 0;
    }
    let last = m.take_last_out();
    let t = if quick && last != 0 { last } else { ticks() };
    m.set_switch_in(t);
    if let Some(since) = g.take_ready_sample() {
        record(pp, t, since);
    }
    t
}

#[inline(never)]
fn record(pp: &P, now: u64, since: u64) {
    let mut mult = ticks_mult_cached();
    if mult == 0 {
        // Not calibrated yet (sysmon may not have run): try now.
        mult = refresh_ticks_mult();
        if mult == 0 {
            return;
        }
    }
    // Another CPU's counter may be a little behind: a negative difference
    // is zero.
    let d = (now.wrapping_sub(since) as i64).max(0) as u64;
    pp.latency.record(ticks_to_ns(d, mult));
}

/// `execute`, once `g` has switched out on `m`: adds its time on the CPU
/// since `t0` (from [`metrics_switch_in`]; 0 when CPU time is not
/// measured, so this tests a register, not the flag), and keeps the time
/// for the next switch-in on the quick path. `execute` drops it (`M::take_last_out`)
/// where the M may wait before its next switch-in outside the quick path's
/// reach (a system call's return without a P, a locked-M switch).
#[inline(always)]
pub(crate) fn metrics_switch_out(m: &M, g: &'static G, t0: u64) {
    if t0 == 0 {
        return;
    }
    let t = ticks();
    g.add_cpu_ticks((t.wrapping_sub(t0) as i64).max(0) as u64);
    m.set_last_out(t);
}

/// When sysmon last refreshed the tick factor (nanotime).
static LAST_CALIBRATION: AtomicI64 = AtomicI64::new(0);

/// sysmon, each cycle, with the nanotime it just read: refreshes the
/// tick factor while it has none, then once a second (the longer the
/// measure, the better the factor).
pub(crate) fn sysmon_calibrate(now: i64) {
    let last = LAST_CALIBRATION.load(Ordering::Relaxed);
    if ticks_mult_cached() == 0 || now - last >= 1_000_000_000 {
        LAST_CALIBRATION.store(now, Ordering::Relaxed);
        refresh_ticks_mult();
    }
}

/// The CPU time of every live goroutine, in nanoseconds by id
/// (`dump_json`): one walk of the Ms, one of the G records.
pub(crate) fn cpu_times_ns() -> std::collections::HashMap<u64, u64> {
    if !cpu_time_on() {
        return std::collections::HashMap::new();
    }
    let now = ticks();
    let running: Vec<(usize, u64)> = {
        let allm = super::sched()
            .allm
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        allm.iter()
            .filter_map(|m| {
                let g = m.curg_from_outside()?;
                Some((g as *const G as usize, m.switch_in()))
            })
            .collect()
    };
    let mult = match ticks_mult() {
        0 => ticks_mult_cached(),
        m => m,
    };
    let mut out = std::collections::HashMap::new();
    G::for_each(|g| {
        let status = g.status();
        if matches!(status, Status::Idle | Status::Dead) {
            return;
        }
        let mut t = g.cpu_ticks();
        if matches!(status, Status::Running | Status::Syscall) {
            if let Some(&(_, t0)) = running.iter().find(|(a, _)| *a == g as *const G as usize) {
                t += (now.wrapping_sub(t0) as i64).max(0) as u64;
            }
        }
        out.insert(g.id(), ticks_to_ns(t, mult));
    });
    out
}
