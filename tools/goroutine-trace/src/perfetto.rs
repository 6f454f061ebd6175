//! Chrome / Perfetto Trace Event Format output (the JSON object form:
//! `{"traceEvents": [...], "displayTimeUnit": "ns"}`), loadable in
//! ui.perfetto.dev and chrome://tracing.
//!
//! Process 1 "Ps" has one thread per P (tid = P + 1) carrying complete
//! events (`X`) for goroutine slices and syscall spans, instant events (`i`)
//! for steals, preemptions, syscalls, handoffs, timer fires and netpoll
//! readies, and counters (`C`) for goroutine counts and run-queue lengths;
//! tid 0 "runtime" takes instants of Ms without a P. Wakeups become flow
//! events (`s` bound to the waker's slice, `f` with `bp:"e"` to the woken
//! goroutine's next slice) when the waker was running in a slice. Process 2
//! "Ms" shows which P each M held and when it was parked. Times are
//! microseconds with three decimals, so nanoseconds survive exactly.

use crate::json::{string, write_str, write_us};
use crate::model::{MarkKind, Model, SysEnd};
use std::collections::HashMap;
use std::io::{self, Write};

#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Emit flow events for wakeups.
    pub flows: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options { flows: true }
    }
}

/// What was written (for tests and the command's summary line).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Written {
    pub slices: u64,
    pub syscalls: u64,
    pub instants: u64,
    pub counters: u64,
    pub flows: u64,
    pub m_spans: u64,
}

const PID_PS: u32 = 1;
const PID_MS: u32 = 2;

fn tid(p: Option<u64>) -> u64 {
    p.map_or(0, |p| p + 1)
}

struct Out<'a, W: Write> {
    w: &'a mut W,
    first: bool,
}

impl<W: Write> Out<'_, W> {
    /// Starts a new event object (writes the separating comma).
    fn begin(&mut self) -> io::Result<()> {
        if self.first {
            self.first = false;
            self.w.write_all(b"\n{")
        } else {
            self.w.write_all(b",\n{")
        }
    }

    fn meta(&mut self, pid: u32, tid: u64, name: &str, arg: &str) -> io::Result<()> {
        self.begin()?;
        write!(
            self.w,
            "\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"name\":\"{name}\",\"args\":{{{arg}}}}}"
        )
    }

    fn instant(&mut self, tid: u64, ts: u64, name: &str, args: &str) -> io::Result<()> {
        self.begin()?;
        write!(
            self.w,
            "\"ph\":\"i\",\"s\":\"t\",\"pid\":{PID_PS},\"tid\":{tid},\"ts\":"
        )?;
        write_us(self.w, ts)?;
        write!(
            self.w,
            ",\"name\":\"{name}\",\"cat\":\"{name}\",\"args\":{{{args}}}}}"
        )
    }

    /// A complete event on thread `(pid, tid)` over `(start, end)`.
    fn complete(
        &mut self,
        (pid, tid): (u32, u64),
        (start, end): (u64, u64),
        name: &str,
        cat: &str,
        args: &str,
    ) -> io::Result<()> {
        self.begin()?;
        write!(self.w, "\"ph\":\"X\",\"pid\":{pid},\"tid\":{tid},\"ts\":")?;
        write_us(self.w, start)?;
        self.w.write_all(b",\"dur\":")?;
        write_us(self.w, end.saturating_sub(start))?;
        self.w.write_all(b",\"name\":")?;
        write_str(self.w, name)?;
        write!(self.w, ",\"cat\":\"{cat}\",\"args\":{{{args}}}}}")
    }
}

/// Writes the whole JSON document. `progress(done, total)` counts slices.
pub fn write<W: Write>(
    w: &mut W,
    model: &Model,
    opts: Options,
    progress: &mut dyn FnMut(u64, u64),
) -> io::Result<Written> {
    let mut n = Written::default();
    let names: HashMap<u64, &str> = model
        .goroutines
        .iter()
        .filter_map(|g| g.name.as_deref().map(|s| (g.id, s)))
        .collect();
    let label = |g: u64| match names.get(&g) {
        Some(name) => format!("G{g} {name}"),
        None => format!("G{g}"),
    };
    write!(
        w,
        "{{\"displayTimeUnit\":\"ns\",\"otherData\":{{\"generator\":\"goroutine-trace\",\"gomaxprocs\":\"{}\",\"duration_ns\":\"{}\"}},\"traceEvents\":[",
        model.gomaxprocs, model.duration
    )?;
    let mut out = Out { w, first: true };

    out.meta(PID_PS, 0, "process_name", "\"name\":\"Ps\"")?;
    out.meta(PID_PS, 0, "process_sort_index", "\"sort_index\":0")?;
    out.meta(PID_PS, 0, "thread_name", "\"name\":\"runtime\"")?;
    out.meta(PID_PS, 0, "thread_sort_index", "\"sort_index\":-1")?;
    for lane in &model.lanes {
        let t = tid(Some(lane.p));
        out.meta(
            PID_PS,
            t,
            "thread_name",
            &format!("\"name\":\"P{}\"", lane.p),
        )?;
        out.meta(
            PID_PS,
            t,
            "thread_sort_index",
            &format!("\"sort_index\":{}", lane.p),
        )?;
    }
    if !model.ms.is_empty() {
        out.meta(PID_MS, 0, "process_name", "\"name\":\"Ms\"")?;
        out.meta(PID_MS, 0, "process_sort_index", "\"sort_index\":1")?;
        for m in &model.ms {
            out.meta(
                PID_MS,
                u64::from(m.m),
                "thread_name",
                &format!("\"name\":\"M{}\"", m.m),
            )?;
        }
    }

    let total = model.slice_count() as u64;
    for lane in &model.lanes {
        let t = tid(Some(lane.p));
        for s in &lane.slices {
            let args = format!("\"g\":{},\"end\":{}", s.g, string(&s.reason.describe()));
            out.complete(
                (PID_PS, t),
                (s.start, s.end),
                &label(s.g),
                "goroutine",
                &args,
            )?;
            n.slices += 1;
            if n.slices % (1 << 18) == 0 {
                progress(n.slices, total);
            }
        }
        for s in &lane.syscalls {
            let how = match s.how {
                SysEnd::Exit => "exit",
                SysEnd::Handoff => "handoff",
                SysEnd::ProcStop => "P stopped",
                SysEnd::TraceEnd => "trace end",
            };
            let args = format!("\"g\":{},\"end\":\"{how}\"", s.g);
            out.complete((PID_PS, t), (s.start, s.end), "syscall", "syscall", &args)?;
            n.syscalls += 1;
        }
    }
    progress(total, total);

    for mk in &model.marks {
        let t = tid(mk.p);
        let (name, args) = match mk.kind {
            MarkKind::Steal { victim, count } => (
                "steal",
                format!("\"victim\":\"P{victim}\",\"count\":{count}"),
            ),
            MarkKind::Preempt { g } => ("preempt", format!("\"g\":{g}")),
            MarkKind::SyscallEnter { g } => ("syscall enter", format!("\"g\":{g}")),
            MarkKind::SyscallExit { g, fast } => {
                ("syscall exit", format!("\"g\":{g},\"fast\":{fast}"))
            }
            MarkKind::Handoff => ("syscall handoff", String::new()),
            MarkKind::Timer { count } => ("timer fire", format!("\"count\":{count}")),
            MarkKind::Netpoll { count } => ("netpoll ready", format!("\"count\":{count}")),
            MarkKind::Revoke { g, syscall_nr } => (
                "P revoked",
                format!(
                    "\"g\":{g},\"syscall\":{}",
                    crate::json::string(&crate::format::syscall_label(syscall_nr))
                ),
            ),
        };
        out.instant(t, mk.ts, name, &args)?;
        n.instants += 1;
    }

    for c in &model.counts {
        out.begin()?;
        write!(
            out.w,
            "\"ph\":\"C\",\"pid\":{PID_PS},\"name\":\"goroutines\",\"ts\":"
        )?;
        write_us(out.w, c.ts)?;
        write!(
            out.w,
            ",\"args\":{{\"runnable\":{},\"running\":{},\"waiting\":{},\"syscall\":{}}}}}",
            c.runnable, c.running, c.waiting, c.syscall
        )?;
        n.counters += 1;
    }
    let mut last_global = None;
    for r in &model.runq {
        out.begin()?;
        write!(
            out.w,
            "\"ph\":\"C\",\"pid\":{PID_PS},\"name\":\"runq P{}\",\"ts\":",
            r.p
        )?;
        write_us(out.w, r.ts)?;
        write!(out.w, ",\"args\":{{\"local\":{}}}}}", r.local)?;
        n.counters += 1;
        if last_global != Some(r.ts) {
            last_global = Some(r.ts);
            out.begin()?;
            write!(
                out.w,
                "\"ph\":\"C\",\"pid\":{PID_PS},\"name\":\"global runq\",\"ts\":"
            )?;
            write_us(out.w, r.ts)?;
            write!(out.w, ",\"args\":{{\"len\":{}}}}}", r.global)?;
            n.counters += 1;
        }
    }

    if opts.flows {
        for wk in &model.wakeups {
            let (Some(from), Some((to_ts, to_p))) = (wk.from_p, wk.to) else {
                continue;
            };
            // A flow start binds to the slice enclosing it: only draw wakeups
            // issued from inside a running goroutine.
            let Some(lane) = model.lane_index(from).map(|i| &model.lanes[i]) else {
                continue;
            };
            let i = lane.slices.partition_point(|s| s.start <= wk.ts);
            if i == 0 || lane.slices[i - 1].end < wk.ts {
                continue;
            }
            let id = n.flows;
            for (ph, t, ts, extra) in [
                ("s", tid(Some(from)), wk.ts, ""),
                ("f", tid(Some(to_p)), to_ts, ",\"bp\":\"e\""),
            ] {
                out.begin()?;
                write!(
                    out.w,
                    "\"ph\":\"{ph}\",\"id\":{id},\"pid\":{PID_PS},\"tid\":{t},\"name\":\"wakeup\",\"cat\":\"wakeup\"{extra},\"ts\":"
                )?;
                write_us(out.w, ts)?;
                out.w.write_all(b"}")?;
            }
            n.flows += 1;
        }
    }

    for m in &model.ms {
        for s in &m.spans {
            let name = match s.p {
                Some(p) => format!("P{p}"),
                None => "parked".into(),
            };
            out.complete((PID_MS, u64::from(m.m)), (s.start, s.end), &name, "m", "")?;
            n.m_spans += 1;
        }
    }
    out.w.write_all(b"\n]}\n")?;
    Ok(n)
}
