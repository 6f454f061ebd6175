//! Runtime metrics ([`crate::metrics`]): Go 1.26's scheduler metrics under
//! Go's names, the scheduling-latency histogram, and CPU time per
//! goroutine. The hot paths this note describes (sampling, switch-in and
//! switch-out, calibration) live at the end of `runtime::stats`, a module
//! the scheduler already uses: this one, the reader, is used only by the
//! public API, and stays outside the runtime's import cycle.
//!
//! # Reading
//! [`read`] fills caller-owned samples by name, as Go's `runtime/metrics`
//! does, so an exporter needs no type of ours beyond `Sample` and `Value`.
//! Gauges and counters are gathered the way `stats()` gathers them
//! (`runtime::stats`' note): one walk of the Ps (queue lengths, per-P
//! counters, histogram shares) and one of the Ms (running and syscall
//! goroutines, live threads), each value a relaxed load, no stop of the
//! world. So the goroutine counts by state are not one atomic snapshot:
//! each is exact for its instant, the sum is `/sched/goroutines` by
//! construction (waiting is derived as the rest), and a goroutine in
//! transit between a queue and an M (a few instructions) is counted as
//! waiting. A histogram's buckets and counts go into the sample's own
//! vectors, which are reused: after the first read, a read allocates
//! nothing.
//!
//! # Scheduling latency
//! The time from a goroutine becoming runnable (a ready, a spawn, a yield,
//! a preemption) to its running. Go samples one transition in 8 per
//! goroutine (`gTrackingPeriod`). Here each P counts the transitions it
//! makes (`p::counters::SchedLatency`, owner-only, a load and a store) and
//! samples one after 4 to 11 of them (on average one in 7.5; the period
//! varies so that goroutines readied in a fixed rotation are all sampled);
//! transitions made without a P (the global queue, the netpoller, a
//! system call's return) are all sampled: they are rare next to the cost
//! they come with. A sampled transition reads the cheap clock
//! (`sys::time::ticks`: the TSC where usable) once and marks the G
//! (`g`'s note, "Metrics fields"); `execute`, which reads the clock at
//! every switch-in for the CPU time anyway, records the difference in the
//! P's histogram. Unsampled transitions read no clock.
//!
//! Buckets (`p::counters::latency_bucket`): `[0, 256 ns)`, then four per
//! power of two (bounds `2^k`, `1.25 * 2^k`, `1.5 * 2^k`, `1.75 * 2^k`
//! ns) up to 2^38 ns (about 275 s), then `[2^38 ns, +Inf)`: relative
//! resolution 25% or better, 122 buckets. Go's time histogram has 16
//! sub-buckets per power of two; 4 are enough for percentiles of a
//! latency and keep a P's share in two kilobytes. Ticks become
//! nanoseconds with a factor calibrated against the monotonic clock since
//! runtime start (refreshed by sysmon, or by the first sample that finds
//! none); samples taken in the first 100 us, before there can be a
//! factor, are dropped.
//!
//! # CPU time per goroutine
//! Measured only with `GODEBUG=cputime=1`: it costs a clock read at every
//! switch, a share of a switch's cost that ping-pong and yield loops can
//! see (BENCHMARKS.md), where the latency histogram reads the clock on
//! sampled transitions only. Off, a switch pays one load and one branch
//! for it.
//!
//! `execute` reads the cheap clock when a goroutine switches out and adds
//! the time since its switch-in to the G (owner only). The switch-in time
//! is kept in the M (for a reader asking about a running goroutine); on
//! the scheduler's quick path (the next G found in this P's queue on the
//! first look, `Found::quick`, the case of every channel hand-off) it is
//! the previous goroutine's switch-out time, kept in the M, so a switch
//! reads the clock once. The M drops that time wherever it may wait
//! before the next switch-in (a system call's return without a P, a
//! locked-M switch; every other wait leaves the quick path), so the
//! scheduler's own work between two goroutines on the quick path is
//! charged to the one switching in, and a wait never is.
//!
//! It is wall time between switch-in and switch-out, not what the kernel
//! accounts: it includes time the OS took the thread away (preemption by
//! other processes, page faults) and time blocked in the kernel while the
//! goroutine kept its thread (`goroutine::syscall`, plain blocking
//! calls). A running goroutine's time is its total so far plus the time
//! since its switch-in, read without stopping it: a goroutine switching
//! at that instant may be read a switch's worth off.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::stats::{self, cpu_time_on, SYSMON};
use crate::g::{Status, G};
use crate::p::counters::{latency_bucket_lo, LATENCY_BUCKETS};
use crate::sys::time::{ticks, ticks_mult, ticks_mult_cached, ticks_to_ns};

/// What a metric is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Kind {
    /// Only grows (since the runtime started); a [`Value::U64`].
    Counter,
    /// An instantaneous value; a [`Value::U64`] (or [`Value::F64`]).
    Gauge,
    /// A distribution; a [`Value::Histogram`].
    Histogram,
}

/// One supported metric (see `goroutine::metrics::all`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Description {
    /// Go's form: `/path:unit`, e.g. `/sched/latencies:seconds`.
    pub name: &'static str,
    pub kind: Kind,
    /// One sentence, for an exporter's help text.
    pub description: &'static str,
}

/// A metric's value, as `goroutine::metrics::read` fills it.
#[derive(Clone, Debug, PartialEq, Default)]
#[non_exhaustive]
pub enum Value {
    /// The sample's name is not a supported metric.
    #[default]
    Unknown,
    U64(u64),
    F64(f64),
    /// `counts[i]` values lay in `[buckets[i], buckets[i + 1])`, so there is
    /// one more bound than counts; the last bound is `+Inf`. `sum` is the
    /// sum of the values (beyond Go, whose histograms have none; a
    /// Prometheus histogram needs it).
    Histogram {
        buckets: Vec<f64>,
        counts: Vec<u64>,
        sum: f64,
    },
}

/// A metric to read: the caller sets `name`, `goroutine::metrics::read` sets `value`.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Sample {
    pub name: String,
    pub value: Value,
}

impl Sample {
    /// A sample of metric `name`, not read yet.
    // entry: builds a plain value; touches no runtime state
    pub fn new(name: impl Into<String>) -> Sample {
        Sample {
            name: name.into(),
            value: Value::Unknown,
        }
    }
}

/// The metrics, in [`all`]'s order.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Id {
    Gomaxprocs,
    Goroutines,
    NotInGo,
    Runnable,
    Running,
    Waiting,
    Created,
    Latencies,
    Threads,
    Steals,
    Stolen,
    PreemptRequests,
    SyscallHandoffs,
    BlockedHandoffs,
    TimersFired,
    NetpollReady,
}

const TABLE: &[(Id, Description)] = &[
    (Id::Gomaxprocs, d("/sched/gomaxprocs:threads", Kind::Gauge,
        "The current GOMAXPROCS: the number of Ps, goroutines that may run at once.")),
    (Id::Goroutines, d("/sched/goroutines:goroutines", Kind::Gauge,
        "Live goroutines.")),
    (Id::NotInGo, d("/sched/goroutines/not-in-go:goroutines", Kind::Gauge,
        "Goroutines in a system call (goroutine::syscall) or blocked in the kernel outside the runtime after their P was taken.")),
    (Id::Runnable, d("/sched/goroutines/runnable:goroutines", Kind::Gauge,
        "Goroutines in a run queue, ready to run.")),
    (Id::Running, d("/sched/goroutines/running:goroutines", Kind::Gauge,
        "Goroutines running on a thread, at most GOMAXPROCS.")),
    (Id::Waiting, d("/sched/goroutines/waiting:goroutines", Kind::Gauge,
        "Goroutines parked (channel, lock, sleep, I/O, join): the live ones in no other state.")),
    (Id::Created, d("/sched/goroutines-created:goroutines", Kind::Counter,
        "Goroutines created since the runtime started.")),
    (Id::Latencies, d("/sched/latencies:seconds", Kind::Histogram,
        "Time goroutines spent runnable before they ran (sampled: about one in 8 transitions to runnable).")),
    (Id::Threads, d("/sched/threads/total:threads", Kind::Gauge,
        "Live OS threads owned by the runtime: Ms, sysmon and the runtime's other threads.")),
    (Id::Steals, d("/goroutine/sched/steals:steals", Kind::Counter,
        "Successful steals of goroutines from another P's run queue.")),
    (Id::Stolen, d("/goroutine/sched/stolen:goroutines", Kind::Counter,
        "Goroutines moved by steals.")),
    (Id::PreemptRequests, d("/goroutine/sched/preempt-requests:requests", Kind::Counter,
        "Preemption requests by sysmon (a goroutine ran a whole time slice).")),
    (Id::SyscallHandoffs, d("/goroutine/sched/syscall-handoffs:handoffs", Kind::Counter,
        "P handoffs because their thread was in a system call.")),
    (Id::BlockedHandoffs, d("/goroutine/sched/blocked-handoffs:handoffs", Kind::Counter,
        "Ps taken from threads blocked in the kernel or computing outside the runtime.")),
    (Id::TimersFired, d("/goroutine/sched/timers-fired:timers", Kind::Counter,
        "Timers that fired (sleeps, timer channels, deadlines).")),
    (Id::NetpollReady, d("/goroutine/sched/netpoll-ready:goroutines", Kind::Counter,
        "Goroutines readied by the network poller.")),
];

const fn d(name: &'static str, kind: Kind, description: &'static str) -> Description {
    Description {
        name,
        kind,
        description,
    }
}

/// See [`crate::metrics::all`].
pub fn all() -> Vec<Description> {
    TABLE.iter().map(|(_, d)| *d).collect()
}

/// What one read gathers (module note, "Reading").
#[derive(Default)]
struct Gathered {
    counts: stats::GCounts,
    gomaxprocs: u64,
    goroutines: u64,
    created: u64,
    steals: u64,
    stolen: u64,
    syscall_handoffs: u64,
    timers_fired: u64,
    blocked_threads: u64,
}

fn gather(s: &super::Sched) -> Gathered {
    let mut g = Gathered {
        counts: stats::gcounts(),
        gomaxprocs: s.gomaxprocs() as u64,
        goroutines: s.num_goroutine() as u64,
        created: s.ngoroutine_ext.load(Ordering::Relaxed) as u64,
        blocked_threads: super::retake::blocked_threads() as u64,
        ..Gathered::default()
    };
    let get = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    for id in 0..s.allp_created.load(Ordering::Acquire) as usize {
        let Some(p) = s.allp(id) else { continue };
        let c = &p.counters;
        g.created += get(&c.spawns);
        g.steals += get(&c.steals);
        g.stolen += get(&c.stolen);
        g.syscall_handoffs += get(&c.blocking_handoffs);
        g.timers_fired += get(&c.timers_fired);
    }
    g.syscall_handoffs += SYSMON.retakes.load(Ordering::Relaxed);
    g
}

/// Sums every P's share of the latency histogram into `buckets`/`counts`
/// (reusing their memory) and returns the sum in seconds.
fn latencies(s: &super::Sched, buckets: &mut Vec<f64>, counts: &mut Vec<u64>) -> f64 {
    if buckets.len() != LATENCY_BUCKETS + 1 {
        buckets.clear();
        buckets.extend((0..LATENCY_BUCKETS).map(|i| latency_bucket_lo(i) as f64 / 1e9));
        buckets.push(f64::INFINITY);
    }
    counts.clear();
    counts.resize(LATENCY_BUCKETS, 0);
    let mut sum_ns = 0u64;
    for id in 0..s.allp_created.load(Ordering::Acquire) as usize {
        let Some(p) = s.allp(id) else { continue };
        for (c, b) in counts.iter_mut().zip(p.latency.counts.iter()) {
            *c += b.load(Ordering::Relaxed);
        }
        sum_ns = sum_ns.wrapping_add(p.latency.sum_ns.load(Ordering::Relaxed));
    }
    sum_ns as f64 / 1e9
}

/// See [`crate::metrics::read`].
pub(crate) fn read(samples: &mut [Sample]) {
    let s = super::start();
    let mut gathered: Option<Gathered> = None;
    for sample in samples.iter_mut() {
        let Some(&(id, _)) = TABLE.iter().find(|(_, d)| d.name == sample.name) else {
            sample.value = Value::Unknown;
            continue;
        };
        if id == Id::Latencies {
            if !matches!(sample.value, Value::Histogram { .. }) {
                sample.value = Value::Histogram {
                    buckets: Vec::new(),
                    counts: Vec::new(),
                    sum: 0.0,
                };
            }
            if let Value::Histogram {
                buckets,
                counts,
                sum,
            } = &mut sample.value
            {
                *sum = latencies(s, buckets, counts);
            }
            continue;
        }
        let g = gathered.get_or_insert_with(|| gather(s));
        let c = &g.counts;
        let v = match id {
            Id::Gomaxprocs => g.gomaxprocs,
            Id::Goroutines => g.goroutines,
            Id::NotInGo => (c.syscall as u64) + g.blocked_threads,
            Id::Runnable => c.runnable as u64,
            Id::Running => (c.running as u64).saturating_sub(g.blocked_threads),
            Id::Waiting => c.waiting as u64,
            Id::Created => g.created,
            Id::Threads => (c.threads + super::checkdead::internal_threads()) as u64,
            Id::Steals => g.steals,
            Id::Stolen => g.stolen,
            Id::PreemptRequests => SYSMON.preempt_requests.load(Ordering::Relaxed),
            Id::SyscallHandoffs => g.syscall_handoffs,
            Id::BlockedHandoffs => {
                SYSMON.blocked_handoffs.load(Ordering::Relaxed)
                    + SYSMON.hog_handoffs.load(Ordering::Relaxed)
            }
            Id::TimersFired => g.timers_fired,
            Id::NetpollReady => stats::NETPOLL_READY.load(Ordering::Relaxed),
            Id::Latencies => unreachable!("handled above"),
        };
        sample.value = Value::U64(v);
    }
}

/// The CPU time of `g` in ticks: its total, plus the time since its
/// switch-in if it runs now (module note).
fn cpu_ticks_of(s: &super::Sched, g: &'static G) -> u64 {
    let mut t = g.cpu_ticks();
    if matches!(g.status(), Status::Running | Status::Syscall) {
        let allm = s.allm.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = allm
            .iter()
            .find(|m| m.curg_from_outside().is_some_and(|c| std::ptr::eq(c, g)))
        {
            t += (ticks().wrapping_sub(m.switch_in()) as i64).max(0) as u64;
        }
    }
    t
}

fn to_duration(t: u64) -> Duration {
    let mult = match ticks_mult() {
        0 => ticks_mult_cached(),
        m => m,
    };
    Duration::from_nanos(ticks_to_ns(t, mult))
}

/// See [`crate::cpu_time`]: walks every G record (O(goroutines ever
/// allocated)).
pub(crate) fn cpu_time(id: u64) -> Option<Duration> {
    if id == 0 || !cpu_time_on() {
        return None;
    }
    let s = super::start();
    let mut found = None;
    G::for_each(|g| {
        if found.is_none() && g.id() == id && !matches!(g.status(), Status::Idle | Status::Dead) {
            found = Some(g);
        }
    });
    found.map(|g| to_duration(cpu_ticks_of(s, g)))
}

/// See [`crate::current_cpu_time`].
pub(crate) fn current_cpu_time() -> Option<Duration> {
    if !cpu_time_on() {
        return None;
    }
    let m = crate::m::current()?;
    let g = m.curg()?;
    let t = g.cpu_ticks() + (ticks().wrapping_sub(m.switch_in()) as i64).max(0) as u64;
    Some(to_duration(t))
}
