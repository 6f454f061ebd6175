//! From the event list to what the views draw: per-P lanes of goroutine run
//! slices, syscall spans, instant marks, wakeups, M lanes, per-goroutine time
//! accounting and the sampled series.
//!
//! A slice is the time a goroutine runs on a P: it opens at GoStart (or at a
//! fast SyscallExit, after which the goroutine keeps running on its P) and
//! closes at the goroutine's GoStop / GoBlock / GoEnd / SyscallEnter, at the
//! P's ProcStop, when another goroutine starts on the same P (the trace lost
//! an event: `Replaced`), or at the end of the trace. A GoStart for the
//! goroutine that is already running on that P continues the open slice.
//!
//! A ProcRevoke (sysmon took the P of a thread blocked in the kernel outside
//! the runtime) closes the goroutine's slice with [`EndReason::Revoked`] and
//! puts a [`MarkKind::Revoke`] on the P; the goroutine is then counted as in
//! a syscall, on its M but without a P, until it gets a P back at its next
//! runtime call: a fast SyscallExit, or a ProcStart on its M (the runtime
//! takes an idle P there and keeps running the goroutine: a new slice opens),
//! or a slow SyscallExit and a later GoStart.
//!
//! The model accepts any event sequence: a trace that starts in the middle of
//! a program (goroutines first seen running or blocked), events for unknown
//! goroutines, or inconsistent sequences from a damaged file are absorbed,
//! never a panic. Time accounting for a goroutine starts at its first event.

use crate::decode::Trace;
use crate::format::{stop_reason_name, wait_reason_name, Event, GLOBAL_QUEUE, MAX_EVENT_TYPE};
use std::collections::{BTreeMap, HashMap};

/// Why a slice ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndReason {
    /// GoStop with its reason (0 yield, 1 preempted, 2 yield-local).
    Stop(u64),
    /// GoBlock with its wait reason.
    Block(u64),
    End,
    Syscall,
    ProcStop,
    /// Another goroutine started on the P (the trace lost an event).
    Replaced,
    TraceEnd,
    /// Sysmon took the P while the goroutine was blocked in the kernel
    /// outside the runtime (ProcRevoke).
    Revoked,
}

impl EndReason {
    /// The compact code the HTML page decodes (`REASONS` in view.js):
    /// 0..=2 stop reasons, 3 end, 4 syscall, 5 proc stop, 6 replaced,
    /// 7 trace end, 8 other stop reason, 9 revoked, 100 + w blocked with
    /// wait reason w.
    pub fn code(self) -> u64 {
        match self {
            EndReason::Stop(r) if r <= 2 => r,
            EndReason::Stop(_) => 8,
            EndReason::End => 3,
            EndReason::Syscall => 4,
            EndReason::ProcStop => 5,
            EndReason::Replaced => 6,
            EndReason::TraceEnd => 7,
            EndReason::Revoked => 9,
            EndReason::Block(w) => 100 + w.min(1 << 20),
        }
    }

    pub fn describe(self) -> String {
        match self {
            EndReason::Stop(r) => stop_reason_name(r).to_string(),
            EndReason::Block(w) => format!("blocked: {}", wait_reason_name(w)),
            EndReason::End => "goroutine end".into(),
            EndReason::Syscall => "syscall".into(),
            EndReason::ProcStop => "P stopped".into(),
            EndReason::Replaced => "replaced (lost event)".into(),
            EndReason::TraceEnd => "trace end".into(),
            EndReason::Revoked => "P revoked (blocked in the kernel)".into(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slice {
    pub start: u64,
    pub end: u64,
    pub g: u64,
    pub reason: EndReason,
}

/// How a syscall span on a P lane ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SysEnd {
    Exit,
    Handoff,
    ProcStop,
    TraceEnd,
}

/// A P held in the Syscall state by a goroutine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SysSpan {
    pub start: u64,
    pub end: u64,
    pub g: u64,
    pub how: SysEnd,
}

#[derive(Clone, Debug, Default)]
pub struct Lane {
    pub p: u64,
    pub slices: Vec<Slice>,
    pub syscalls: Vec<SysSpan>,
    /// Sum of slice durations.
    pub busy: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkKind {
    Steal {
        victim: u64,
        count: u64,
    },
    Preempt {
        g: u64,
    },
    SyscallEnter {
        g: u64,
    },
    SyscallExit {
        g: u64,
        fast: bool,
    },
    Handoff,
    Timer {
        count: u64,
    },
    Netpoll {
        count: u64,
    },
    /// ProcRevoke: `syscall_nr` as on the wire (`format::syscall_label`).
    Revoke {
        g: u64,
        syscall_nr: u64,
    },
}

impl MarkKind {
    /// Code used by the HTML page (`MARKS` in view.js).
    pub fn code(self) -> u64 {
        match self {
            MarkKind::Steal { .. } => 0,
            MarkKind::Preempt { .. } => 1,
            MarkKind::SyscallEnter { .. } => 2,
            MarkKind::SyscallExit { fast: true, .. } => 3,
            MarkKind::SyscallExit { fast: false, .. } => 4,
            MarkKind::Handoff => 5,
            MarkKind::Timer { .. } => 6,
            MarkKind::Netpoll { .. } => 7,
            MarkKind::Revoke { .. } => 8,
        }
    }
}

/// An instant event drawn on a P lane (`p`: None for events of an M
/// without a P, drawn on the runtime lane).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mark {
    pub ts: u64,
    pub p: Option<u64>,
    pub kind: MarkKind,
}

/// A GoUnblock: from the waker's lane to the woken goroutine's next start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wakeup {
    pub ts: u64,
    pub g: u64,
    pub by_g: u64,
    /// The lane of the waker (the P running `by_g`, else the P of the M that
    /// emitted the event), None when the waker had no P.
    pub from_p: Option<u64>,
    /// The queue it went to (`GLOBAL_QUEUE` for the global queue).
    pub queued: u64,
    /// (time, P) of the woken goroutine's next GoStart.
    pub to: Option<(u64, u64)>,
}

/// What an M was doing over a span of time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MSpan {
    pub start: u64,
    pub end: u64,
    /// Some(p): holding p; None: parked.
    pub p: Option<u64>,
}

#[derive(Clone, Debug, Default)]
pub struct MLane {
    pub m: u32,
    pub spans: Vec<MSpan>,
}

/// Per-goroutine accounting (ns in each state over the trace).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GInfo {
    pub id: u64,
    pub name: Option<String>,
    pub parent: Option<u64>,
    pub created: Option<u64>,
    pub ended: Option<u64>,
    pub running: u64,
    pub runnable: u64,
    pub blocked: u64,
    pub syscall: u64,
    pub slices: u64,
}

impl GInfo {
    pub fn total(&self) -> u64 {
        self.running + self.runnable + self.blocked + self.syscall
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CountSample {
    pub ts: u64,
    pub runnable: u64,
    pub running: u64,
    pub waiting: u64,
    pub syscall: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunqSample {
    pub ts: u64,
    pub p: u64,
    pub local: u64,
    pub global: u64,
}

/// The analysed trace.
#[derive(Clone, Debug, Default)]
pub struct Model {
    pub duration: u64,
    pub gomaxprocs: u32,
    /// One per P, sorted by P id.
    pub lanes: Vec<Lane>,
    /// Sorted by time.
    pub marks: Vec<Mark>,
    /// Sorted by time.
    pub wakeups: Vec<Wakeup>,
    /// Sorted by M id.
    pub ms: Vec<MLane>,
    /// Sorted by id.
    pub goroutines: Vec<GInfo>,
    pub counts: Vec<CountSample>,
    /// True when `counts` was derived from the events (the trace has no GoCount).
    pub counts_derived: bool,
    pub runq: Vec<RunqSample>,
    /// Events by type number.
    pub event_counts: [u64; MAX_EVENT_TYPE as usize + 1],
    pub total_events: u64,
    /// Highest number of goroutines alive at once (created or seen, not ended).
    pub max_alive: u64,
}

impl Model {
    pub fn lane_index(&self, p: u64) -> Option<usize> {
        self.lanes.binary_search_by_key(&p, |l| l.p).ok()
    }
    pub fn slice_count(&self) -> usize {
        self.lanes.iter().map(|l| l.slices.len()).sum()
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum GState {
    Runnable,
    Running,
    Waiting,
    Syscall,
    Dead,
}

struct GAcc {
    info: GInfo,
    state: Option<GState>,
    since: u64,
}

/// Sampled series longer than this are thinned (per time bucket, the sample
/// with the highest value is kept, so spikes survive). Sysmon samples every
/// 10 ms: a trace would have to be 8 minutes long to reach it.
pub const MAX_SAMPLES: usize = 50_000;

/// Keeps at most about `cap` of the time-sorted `v`: per bucket of
/// `duration / cap`, the element with the largest `weight`.
fn thin<T: Copy>(
    v: Vec<T>,
    cap: usize,
    duration: u64,
    ts: fn(&T) -> u64,
    weight: fn(&T) -> u64,
) -> Vec<T> {
    if v.len() <= cap {
        return v;
    }
    let width = duration / cap as u64 + 1;
    let mut out: Vec<T> = Vec::with_capacity(cap + 1);
    let mut bucket = u64::MAX;
    for x in v {
        let b = ts(&x) / width;
        match out.last_mut() {
            Some(last) if b == bucket => {
                if weight(&x) > weight(last) {
                    *last = x;
                }
            }
            _ => {
                bucket = b;
                out.push(x);
            }
        }
    }
    out
}

/// More Ps than this in a (damaged) trace are not given lanes.
const MAX_LANES: u64 = 4096;
/// Points of the derived goroutine-count series.
const DERIVED_POINTS: u64 = 4000;

struct Builder {
    lanes: BTreeMap<u64, Lane>,
    open: HashMap<u64, (u64, u64)>,
    g_on: HashMap<u64, u64>,
    sys_open: HashMap<u64, (u64, u64)>,
    g_sys_p: HashMap<u64, u64>,
    m_p: HashMap<u32, u64>,
    p_m: HashMap<u64, u32>,
    m_open: HashMap<u32, (u64, Option<u64>)>,
    /// Ms whose P was revoked, with the goroutine they keep running.
    revoked: HashMap<u32, u64>,
    ms: BTreeMap<u32, MLane>,
    gs: HashMap<u64, GAcc>,
    pending_wake: HashMap<u64, usize>,
    marks: Vec<Mark>,
    wakeups: Vec<Wakeup>,
    counts: [u64; 4],
    alive: u64,
    max_alive: u64,
    derived: Vec<CountSample>,
    grid_step: u64,
    next_grid: u64,
}

impl Builder {
    fn lane(&mut self, p: u64) -> Option<&mut Lane> {
        if p >= MAX_LANES {
            return None;
        }
        Some(self.lanes.entry(p).or_insert_with(|| Lane {
            p,
            ..Lane::default()
        }))
    }

    fn g(&mut self, g: u64) -> &mut GAcc {
        let alive = &mut self.alive;
        let max_alive = &mut self.max_alive;
        self.gs.entry(g).or_insert_with(|| {
            *alive += 1;
            *max_alive = (*max_alive).max(*alive);
            GAcc {
                info: GInfo {
                    id: g,
                    ..GInfo::default()
                },
                state: None,
                since: 0,
            }
        })
    }

    fn state_index(s: GState) -> Option<usize> {
        match s {
            GState::Runnable => Some(0),
            GState::Running => Some(1),
            GState::Waiting => Some(2),
            GState::Syscall => Some(3),
            GState::Dead => None,
        }
    }

    /// Moves g to `new` at `ts`, charging the time since its last transition
    /// to the old state.
    fn transition(&mut self, g: u64, ts: u64, new: GState) {
        if g == 0 {
            return;
        }
        let acc = self.g(g);
        let old = acc.state;
        if old == Some(GState::Dead) {
            return;
        }
        let d = ts.saturating_sub(acc.since);
        match old {
            Some(GState::Runnable) => acc.info.runnable += d,
            Some(GState::Running) => acc.info.running += d,
            Some(GState::Waiting) => acc.info.blocked += d,
            Some(GState::Syscall) => acc.info.syscall += d,
            Some(GState::Dead) | None => {}
        }
        acc.state = Some(new);
        acc.since = ts;
        if new == GState::Dead {
            acc.info.ended = Some(ts);
            self.alive = self.alive.saturating_sub(1);
        }
        if let Some(i) = old.and_then(Self::state_index) {
            self.counts[i] = self.counts[i].saturating_sub(1);
        }
        if let Some(i) = Self::state_index(new) {
            self.counts[i] += 1;
        }
    }

    fn sample_to(&mut self, ts: u64) {
        while self.next_grid <= ts {
            let c = self.counts;
            self.derived.push(CountSample {
                ts: self.next_grid,
                runnable: c[0],
                running: c[1],
                waiting: c[2],
                syscall: c[3],
            });
            self.next_grid += self.grid_step;
        }
    }

    /// Closes the slice open on `p`, if any.
    fn close_p(&mut self, p: u64, ts: u64, reason: EndReason) -> Option<u64> {
        let (g, start) = self.open.remove(&p)?;
        self.g_on.remove(&g);
        if let Some(lane) = self.lane(p) {
            lane.slices.push(Slice {
                start,
                end: ts.max(start),
                g,
                reason,
            });
            lane.busy += ts.saturating_sub(start);
        }
        if let Some(acc) = self.gs.get_mut(&g) {
            acc.info.slices += 1;
        }
        Some(g)
    }

    /// Closes g's slice wherever it runs (the event's `p` first).
    fn close_g(&mut self, g: u64, p: u64, ts: u64, reason: EndReason) {
        let on = match self.open.get(&p) {
            Some(&(og, _)) if og == g => Some(p),
            _ => self.g_on.get(&g).copied(),
        };
        if let Some(on) = on {
            self.close_p(on, ts, reason);
        }
    }

    fn open_slice(&mut self, g: u64, p: u64, ts: u64) {
        if self.open.get(&p).is_some_and(|&(og, _)| og == g) {
            return;
        }
        if let Some(old) = self.close_p(p, ts, EndReason::Replaced) {
            // We do not know what happened to it; runnable is the least wrong guess.
            self.transition(old, ts, GState::Runnable);
        }
        if let Some(&other) = self.g_on.get(&g) {
            self.close_p(other, ts, EndReason::Replaced);
        }
        if p < MAX_LANES {
            self.open.insert(p, (g, ts));
            self.g_on.insert(g, p);
        }
    }

    fn close_sys(&mut self, p: u64, ts: u64, how: SysEnd) {
        if let Some((g, start)) = self.sys_open.remove(&p) {
            self.g_sys_p.remove(&g);
            if let Some(lane) = self.lane(p) {
                lane.syscalls.push(SysSpan {
                    start,
                    end: ts.max(start),
                    g,
                    how,
                });
            }
        }
    }

    fn m_switch(&mut self, m: u32, ts: u64, next: Option<Option<u64>>) {
        if let Some((start, p)) = self.m_open.remove(&m) {
            let lane = self.ms.entry(m).or_insert_with(|| MLane {
                m,
                ..MLane::default()
            });
            lane.spans.push(MSpan {
                start,
                end: ts.max(start),
                p,
            });
        }
        self.ms.entry(m).or_insert_with(|| MLane {
            m,
            ..MLane::default()
        });
        if let Some(state) = next {
            self.m_open.insert(m, (ts, state));
        }
    }

    fn bind(&mut self, m: u32, p: u64) {
        if let Some(old) = self.p_m.insert(p, m) {
            if old != m {
                self.m_p.remove(&old);
            }
        }
        if let Some(oldp) = self.m_p.insert(m, p) {
            if oldp != p {
                self.p_m.remove(&oldp);
            }
        }
    }

    fn unbind_p(&mut self, p: u64) -> Option<u32> {
        let m = self.p_m.remove(&p)?;
        self.m_p.remove(&m);
        Some(m)
    }

    fn mark(&mut self, ts: u64, p: Option<u64>, kind: MarkKind) {
        let p = p.filter(|&p| p < MAX_LANES);
        if let Some(p) = p {
            self.lane(p);
        }
        self.marks.push(Mark { ts, p, kind });
    }
}

/// Analyses a decoded trace. `progress(done, total)` is called every million events.
pub fn build(trace: &Trace, progress: &mut dyn FnMut(u64, u64)) -> Model {
    let duration = trace.duration();
    let mut b = Builder {
        lanes: BTreeMap::new(),
        open: HashMap::new(),
        g_on: HashMap::new(),
        sys_open: HashMap::new(),
        g_sys_p: HashMap::new(),
        m_p: HashMap::new(),
        p_m: HashMap::new(),
        m_open: HashMap::new(),
        revoked: HashMap::new(),
        ms: BTreeMap::new(),
        gs: HashMap::new(),
        pending_wake: HashMap::new(),
        marks: Vec::new(),
        wakeups: Vec::new(),
        counts: [0; 4],
        alive: 0,
        max_alive: 0,
        derived: Vec::new(),
        grid_step: (duration / DERIVED_POINTS).max(1),
        next_grid: 0,
    };
    for p in 0..u64::from(trace.header.gomaxprocs).min(MAX_LANES) {
        b.lane(p);
    }
    let mut event_counts = [0u64; MAX_EVENT_TYPE as usize + 1];
    let mut counts = Vec::new();
    let mut runq = Vec::new();
    let total = trace.events.len() as u64;

    for (i, e) in trace.events.iter().enumerate() {
        if i % (1 << 20) == 0 && i > 0 {
            progress(i as u64, total);
        }
        let ts = e.ts;
        let m = e.m;
        event_counts[e.ev.ty() as usize] += 1;
        b.sample_to(ts);
        match e.ev {
            Event::GoCreate { g, parent, p } => {
                let acc = b.g(g);
                acc.info.created = Some(ts);
                acc.info.parent = Some(parent);
                b.transition(g, ts, GState::Runnable);
                if p < MAX_LANES {
                    b.lane(p);
                }
            }
            Event::GoStart { g, p } => {
                if b.sys_open.contains_key(&p) {
                    b.close_sys(p, ts, SysEnd::Handoff);
                }
                b.open_slice(g, p, ts);
                b.bind(m, p);
                b.transition(g, ts, GState::Running);
                b.revoked.retain(|_, &mut rg| rg != g);
                if let Some(idx) = b.pending_wake.remove(&g) {
                    b.wakeups[idx].to = Some((ts, p));
                }
                b.lane(p);
            }
            Event::GoStop { g, p, reason } => {
                b.close_g(g, p, ts, EndReason::Stop(reason));
                b.transition(g, ts, GState::Runnable);
            }
            Event::GoBlock { g, p, wait_reason } => {
                b.close_g(g, p, ts, EndReason::Block(wait_reason));
                b.transition(g, ts, GState::Waiting);
            }
            Event::GoUnblock { g, by_g, p } => {
                b.transition(g, ts, GState::Runnable);
                let from_p = if by_g != 0 {
                    b.g_on.get(&by_g).copied()
                } else {
                    None
                }
                .or_else(|| b.m_p.get(&m).copied());
                b.pending_wake.insert(g, b.wakeups.len());
                b.wakeups.push(Wakeup {
                    ts,
                    g,
                    by_g,
                    from_p,
                    queued: p,
                    to: None,
                });
            }
            Event::GoEnd { g, p } => {
                b.close_g(g, p, ts, EndReason::End);
                b.transition(g, ts, GState::Dead);
                b.pending_wake.remove(&g);
            }
            Event::Steal {
                thief_p,
                victim_p,
                count,
            } => {
                b.lane(victim_p);
                b.mark(
                    ts,
                    Some(thief_p),
                    MarkKind::Steal {
                        victim: victim_p,
                        count,
                    },
                );
            }
            Event::ProcStart { p } => {
                b.bind(m, p);
                b.m_switch(m, ts, Some(Some(p)));
                b.lane(p);
                if let Some(g) = b.revoked.remove(&m) {
                    // The revoked M took an idle P at its next runtime call
                    // and goes on running its goroutine.
                    b.open_slice(g, p, ts);
                    b.transition(g, ts, GState::Running);
                }
            }
            Event::ProcStop { p } => {
                if let Some(g) = b.close_p(p, ts, EndReason::ProcStop) {
                    b.transition(g, ts, GState::Runnable);
                }
                b.close_sys(p, ts, SysEnd::ProcStop);
                if let Some(holder) = b.unbind_p(p) {
                    b.m_switch(holder, ts, None);
                } else {
                    b.m_switch(m, ts, None);
                }
            }
            Event::MPark => {
                b.m_switch(m, ts, Some(None));
            }
            Event::MWake => {
                b.m_switch(m, ts, None);
            }
            Event::SyscallEnter { g, p } => {
                b.close_g(g, p, ts, EndReason::Syscall);
                b.transition(g, ts, GState::Syscall);
                b.close_sys(p, ts, SysEnd::Handoff);
                if p < MAX_LANES {
                    b.sys_open.insert(p, (g, ts));
                    b.g_sys_p.insert(g, p);
                }
                b.mark(ts, Some(p), MarkKind::SyscallEnter { g });
            }
            Event::SyscallExit { g, p, fast } => {
                b.revoked.retain(|_, &mut rg| rg != g);
                if let Some(p0) = b.g_sys_p.get(&g).copied() {
                    b.close_sys(p0, ts, SysEnd::Exit);
                }
                b.mark(ts, Some(p), MarkKind::SyscallExit { g, fast: fast != 0 });
                if fast != 0 {
                    b.open_slice(g, p, ts);
                    b.bind(m, p);
                    b.transition(g, ts, GState::Running);
                } else {
                    b.transition(g, ts, GState::Runnable);
                }
            }
            Event::SyscallHandoff { p } => {
                b.close_sys(p, ts, SysEnd::Handoff);
                if let Some(holder) = b.unbind_p(p) {
                    b.m_switch(holder, ts, None);
                }
                b.mark(ts, Some(p), MarkKind::Handoff);
            }
            Event::ProcRevoke { g, p, syscall_nr } => {
                b.close_g(g, p, ts, EndReason::Revoked);
                b.close_sys(p, ts, SysEnd::Handoff);
                b.transition(g, ts, GState::Syscall);
                if let Some(holder) = b.unbind_p(p) {
                    b.m_switch(holder, ts, None);
                    if g != 0 {
                        b.revoked.insert(holder, g);
                    }
                }
                b.mark(ts, Some(p), MarkKind::Revoke { g, syscall_nr });
            }
            Event::Preempt { g, p } => b.mark(ts, Some(p), MarkKind::Preempt { g }),
            Event::TimerFire { p, count } => b.mark(ts, Some(p), MarkKind::Timer { count }),
            Event::NetpollReady { count } => {
                let p = b.m_p.get(&m).copied();
                b.mark(ts, p, MarkKind::Netpoll { count });
            }
            Event::GoName { g, ref name } => {
                b.g(g).info.name = Some(name.clone());
            }
            Event::RunqSample {
                p,
                local_len,
                global_len,
            } => runq.push(RunqSample {
                ts,
                p,
                local: local_len,
                global: global_len,
            }),
            Event::GoCount {
                runnable,
                running,
                waiting,
                syscall,
            } => counts.push(CountSample {
                ts,
                runnable,
                running,
                waiting,
                syscall,
            }),
        }
    }
    progress(total, total);

    // Close everything still open at the end of the trace.
    let open_ps: Vec<u64> = b.open.keys().copied().collect();
    for p in open_ps {
        b.close_p(p, duration, EndReason::TraceEnd);
    }
    let sys_ps: Vec<u64> = b.sys_open.keys().copied().collect();
    for p in sys_ps {
        b.close_sys(p, duration, SysEnd::TraceEnd);
    }
    let open_ms: Vec<u32> = b.m_open.keys().copied().collect();
    for m in open_ms {
        b.m_switch(m, duration, None);
    }
    b.sample_to(duration);
    let mut goroutines: Vec<GInfo> =
        b.gs.into_values()
            .map(|mut acc| {
                let d = duration.saturating_sub(acc.since);
                match acc.state {
                    Some(GState::Runnable) => acc.info.runnable += d,
                    Some(GState::Running) => acc.info.running += d,
                    Some(GState::Waiting) => acc.info.blocked += d,
                    Some(GState::Syscall) => acc.info.syscall += d,
                    Some(GState::Dead) | None => {}
                }
                acc.info
            })
            .collect();
    goroutines.sort_by_key(|g| g.id);

    let mut lanes: Vec<Lane> = b.lanes.into_values().collect();
    for lane in &mut lanes {
        // Slices close in time order except the ones closed at the end; keep
        // the invariant the viewers rely on: sorted by start.
        lane.slices.sort_by_key(|s| (s.start, s.end));
        lane.syscalls.sort_by_key(|s| (s.start, s.end));
    }
    let mut ms: Vec<MLane> = b.ms.into_values().collect();
    for m in &mut ms {
        m.spans.sort_by_key(|s| (s.start, s.end));
    }
    let counts_derived = counts.is_empty();
    let counts = thin(
        counts,
        MAX_SAMPLES,
        duration,
        |c| c.ts,
        |c| c.runnable + c.running + c.waiting + c.syscall,
    );
    let mut by_p: BTreeMap<u64, Vec<RunqSample>> = BTreeMap::new();
    for r in runq {
        by_p.entry(r.p).or_default().push(r);
    }
    let mut runq: Vec<RunqSample> = by_p
        .into_values()
        .flat_map(|v| thin(v, MAX_SAMPLES, duration, |r| r.ts, |r| r.local))
        .collect();
    runq.sort_by_key(|r| (r.ts, r.p));
    Model {
        duration,
        gomaxprocs: trace.header.gomaxprocs,
        lanes,
        marks: b.marks,
        wakeups: b.wakeups,
        ms,
        goroutines,
        counts: if counts_derived { b.derived } else { counts },
        counts_derived,
        runq,
        event_counts,
        total_events: total,
        max_alive: b.max_alive,
    }
}

/// Turns a P id from an event into a display name.
pub fn queue_name(p: u64) -> String {
    if p == GLOBAL_QUEUE {
        "global queue".into()
    } else {
        format!("P{p}")
    }
}
