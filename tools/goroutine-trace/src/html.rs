//! `goroutine-trace view`: one self-contained HTML page (inline CSS and JS,
//! no network) drawing the trace on a `<canvas>`.
//!
//! The data is embedded as one JSON document of *columns*: each series is an
//! array of numbers, times delta-encoded against the previous element of the
//! same array (so a million slices cost a few bytes each instead of an object
//! per event). `assets/view.js` documents the same layout where it decodes it;
//! the two must change together.
//!
//! ```text
//! meta    {title, duration, gomaxprocs, unixStart (string), events, dropped,
//!          batches, bytes, goroutines, slices, maxAlive, countsDerived, warning}
//! procs   [P id per lane]
//! lanes   [{s: start deltas, d: durations, g: goroutines, r: end-reason codes}]  per lane
//! sys     [{s, d, g, k: 0 exit 1 handoff 2 P stopped 3 trace end}]            per lane
//! marks   {t: deltas, l: lane (-1: runtime lane), k: MarkKind code, a, b}
//!         (steal: a = victim lane, b = count; preempt/syscall: a = g; timer/netpoll: b = count;
//!          revoke: a = g, b = index into syscalls)
//! syscalls [labels of the revoked marks' system calls: "nanosleep", "syscall 999", ...]
//! wake    {t: deltas, l: waker lane (-1), w: woken lane, e: start - t, g: goroutine}
//! ms      [{m: id, s: deltas, d: durations, p: lane held (-1: parked)}]
//! counts  {t: deltas, r: runnable, n: running, w: waiting, y: syscall}
//! runq    [{t: deltas, n: local length}] per lane;  grunq {t, n}
//! names   {g: ids, n: names}                       (named goroutines)
//! top     {g, run, rbl, blk, sys, sl, c, e}        (top N goroutines by total time; c/e -1 = none)
//! util    [busy ns per lane]
//! ```

use crate::decode::Trace;
use crate::json::{string, write_inums, write_nums, write_str};
use crate::model::{Model, SysEnd};
use std::io::{self, Write};

const CSS: &str = include_str!("../assets/view.css");
const BODY: &str = include_str!("../assets/view.html");
const JS: &str = include_str!("../assets/view.js");

#[derive(Clone, Debug)]
pub struct Options {
    /// Rows of the per-goroutine table.
    pub top: usize,
    /// Shown in the title bar and the page header.
    pub title: String,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            top: 500,
            title: "trace".into(),
        }
    }
}

fn deltas(it: impl IntoIterator<Item = u64>) -> Vec<u64> {
    let mut prev = 0;
    it.into_iter()
        .map(|t| {
            let d = t.saturating_sub(prev);
            prev = prev.max(t);
            d
        })
        .collect()
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Writes the page.
pub fn write<W: Write>(
    w: &mut W,
    trace: &Trace,
    model: &Model,
    opts: &Options,
    progress: &mut dyn FnMut(u64, u64),
) -> io::Result<()> {
    write!(
        w,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{} - goroutine trace</title>\n<style>\n{CSS}</style>\n</head>\n<body>\n{BODY}\n\
         <script id=\"trace-data\" type=\"application/json\">",
        html_escape(&opts.title)
    )?;
    write_data(w, trace, model, opts, progress)?;
    write!(w, "</script>\n<script>\n{JS}</script>\n</body></html>\n")
}

fn write_data<W: Write>(
    w: &mut W,
    trace: &Trace,
    model: &Model,
    opts: &Options,
    progress: &mut dyn FnMut(u64, u64),
) -> io::Result<()> {
    let lane_of =
        |p: Option<u64>| -> i64 { p.and_then(|p| model.lane_index(p)).map_or(-1, |i| i as i64) };

    w.write_all(b"{\"meta\":{\"title\":")?;
    write_str(w, &opts.title)?;
    write!(
        w,
        ",\"duration\":{},\"gomaxprocs\":{},\"unixStart\":\"{}\",\"events\":{},\"dropped\":{},\
         \"batches\":{},\"bytes\":{},\"goroutines\":{},\"slices\":{},\"maxAlive\":{},\"countsDerived\":{},\"warning\":{}}}",
        model.duration,
        model.gomaxprocs,
        trace.header.unix_start_ns,
        model.total_events,
        trace.dropped,
        trace.batches,
        trace.bytes,
        model.goroutines.len(),
        model.slice_count(),
        model.max_alive,
        model.counts_derived,
        trace.warning.as_deref().map_or("null".into(), string),
    )?;

    w.write_all(b",\n\"procs\":")?;
    write_nums(w, model.lanes.iter().map(|l| l.p))?;

    let total = model.slice_count() as u64;
    let mut done = 0;
    w.write_all(b",\n\"lanes\":[")?;
    for (i, lane) in model.lanes.iter().enumerate() {
        if i > 0 {
            w.write_all(b",\n")?;
        }
        w.write_all(b"{\"s\":")?;
        write_nums(w, deltas(lane.slices.iter().map(|s| s.start)))?;
        w.write_all(b",\"d\":")?;
        write_nums(w, lane.slices.iter().map(|s| s.end - s.start))?;
        w.write_all(b",\"g\":")?;
        write_nums(w, lane.slices.iter().map(|s| s.g))?;
        w.write_all(b",\"r\":")?;
        write_nums(w, lane.slices.iter().map(|s| s.reason.code()))?;
        w.write_all(b"}")?;
        done += lane.slices.len() as u64;
        progress(done, total);
    }

    w.write_all(b"],\n\"sys\":[")?;
    for (i, lane) in model.lanes.iter().enumerate() {
        if i > 0 {
            w.write_all(b",")?;
        }
        w.write_all(b"{\"s\":")?;
        write_nums(w, deltas(lane.syscalls.iter().map(|s| s.start)))?;
        w.write_all(b",\"d\":")?;
        write_nums(w, lane.syscalls.iter().map(|s| s.end - s.start))?;
        w.write_all(b",\"g\":")?;
        write_nums(w, lane.syscalls.iter().map(|s| s.g))?;
        w.write_all(b",\"k\":")?;
        write_nums(
            w,
            lane.syscalls.iter().map(|s| match s.how {
                SysEnd::Exit => 0,
                SysEnd::Handoff => 1,
                SysEnd::ProcStop => 2,
                SysEnd::TraceEnd => 3,
            }),
        )?;
        w.write_all(b"}")?;
    }

    use crate::model::MarkKind as K;
    let marks = &model.marks;
    w.write_all(b"],\n\"marks\":{\"t\":")?;
    write_nums(w, deltas(marks.iter().map(|m| m.ts)))?;
    w.write_all(b",\"l\":")?;
    write_inums(w, marks.iter().map(|m| lane_of(m.p)))?;
    w.write_all(b",\"k\":")?;
    write_nums(w, marks.iter().map(|m| m.kind.code()))?;
    w.write_all(b",\"a\":")?;
    write_inums(
        w,
        marks.iter().map(|m| match m.kind {
            K::Steal { victim, .. } => lane_of(Some(victim)),
            K::Preempt { g }
            | K::SyscallEnter { g }
            | K::SyscallExit { g, .. }
            | K::Revoke { g, .. } => g as i64,
            K::Handoff | K::Timer { .. } | K::Netpoll { .. } => 0,
        }),
    )?;
    // The system calls of the revoke marks, each label once.
    let mut syscalls: Vec<u64> = marks
        .iter()
        .filter_map(|m| match m.kind {
            K::Revoke { syscall_nr, .. } => Some(syscall_nr),
            _ => None,
        })
        .collect();
    syscalls.sort_unstable();
    syscalls.dedup();
    w.write_all(b",\"b\":")?;
    write_nums(
        w,
        marks.iter().map(|m| match m.kind {
            K::Steal { count, .. } | K::Timer { count } | K::Netpoll { count } => count,
            K::Revoke { syscall_nr, .. } => syscalls.binary_search(&syscall_nr).unwrap_or(0) as u64,
            _ => 0,
        }),
    )?;
    w.write_all(b"},\n\"syscalls\":[")?;
    for (i, &nr) in syscalls.iter().enumerate() {
        if i > 0 {
            w.write_all(b",")?;
        }
        write_str(w, &crate::format::syscall_label(nr))?;
    }
    w.write_all(b"]")?;

    let wakes: Vec<_> = model.wakeups.iter().filter(|w| w.to.is_some()).collect();
    w.write_all(b",\n\"wake\":{\"t\":")?;
    write_nums(w, deltas(wakes.iter().map(|k| k.ts)))?;
    w.write_all(b",\"l\":")?;
    write_inums(w, wakes.iter().map(|k| lane_of(k.from_p)))?;
    w.write_all(b",\"w\":")?;
    write_inums(w, wakes.iter().map(|k| lane_of(k.to.map(|t| t.1))))?;
    w.write_all(b",\"e\":")?;
    write_nums(
        w,
        wakes
            .iter()
            .map(|k| k.to.map_or(0, |t| t.0.saturating_sub(k.ts))),
    )?;
    w.write_all(b",\"g\":")?;
    write_nums(w, wakes.iter().map(|k| k.g))?;

    w.write_all(b"},\n\"ms\":[")?;
    for (i, m) in model.ms.iter().enumerate() {
        if i > 0 {
            w.write_all(b",")?;
        }
        write!(w, "{{\"m\":{},\"s\":", m.m)?;
        write_nums(w, deltas(m.spans.iter().map(|s| s.start)))?;
        w.write_all(b",\"d\":")?;
        write_nums(w, m.spans.iter().map(|s| s.end - s.start))?;
        w.write_all(b",\"p\":")?;
        write_inums(w, m.spans.iter().map(|s| lane_of(s.p)))?;
        w.write_all(b"}")?;
    }

    let c = &model.counts;
    w.write_all(b"],\n\"counts\":{\"t\":")?;
    write_nums(w, deltas(c.iter().map(|s| s.ts)))?;
    w.write_all(b",\"r\":")?;
    write_nums(w, c.iter().map(|s| s.runnable))?;
    w.write_all(b",\"n\":")?;
    write_nums(w, c.iter().map(|s| s.running))?;
    w.write_all(b",\"w\":")?;
    write_nums(w, c.iter().map(|s| s.waiting))?;
    w.write_all(b",\"y\":")?;
    write_nums(w, c.iter().map(|s| s.syscall))?;

    w.write_all(b"},\n\"runq\":[")?;
    for (i, lane) in model.lanes.iter().enumerate() {
        if i > 0 {
            w.write_all(b",")?;
        }
        let mine: Vec<_> = model.runq.iter().filter(|r| r.p == lane.p).collect();
        w.write_all(b"{\"t\":")?;
        write_nums(w, deltas(mine.iter().map(|r| r.ts)))?;
        w.write_all(b",\"n\":")?;
        write_nums(w, mine.iter().map(|r| r.local))?;
        w.write_all(b"}")?;
    }
    let mut global: Vec<(u64, u64)> = Vec::new();
    for r in &model.runq {
        if global.last().map(|g| g.0) != Some(r.ts) {
            global.push((r.ts, r.global));
        }
    }
    w.write_all(b"],\n\"grunq\":{\"t\":")?;
    write_nums(w, deltas(global.iter().map(|g| g.0)))?;
    w.write_all(b",\"n\":")?;
    write_nums(w, global.iter().map(|g| g.1))?;

    let named: Vec<_> = model
        .goroutines
        .iter()
        .filter(|g| g.name.is_some())
        .collect();
    w.write_all(b"},\n\"names\":{\"g\":")?;
    write_nums(w, named.iter().map(|g| g.id))?;
    w.write_all(b",\"n\":[")?;
    for (i, g) in named.iter().enumerate() {
        if i > 0 {
            w.write_all(b",")?;
        }
        write_str(w, g.name.as_deref().unwrap_or(""))?;
    }

    let mut top: Vec<_> = model.goroutines.iter().filter(|g| g.id != 0).collect();
    top.sort_by(|a, b| b.total().cmp(&a.total()).then(a.id.cmp(&b.id)));
    top.truncate(opts.top);
    w.write_all(b"]},\n\"top\":{\"g\":")?;
    write_nums(w, top.iter().map(|g| g.id))?;
    w.write_all(b",\"run\":")?;
    write_nums(w, top.iter().map(|g| g.running))?;
    w.write_all(b",\"rbl\":")?;
    write_nums(w, top.iter().map(|g| g.runnable))?;
    w.write_all(b",\"blk\":")?;
    write_nums(w, top.iter().map(|g| g.blocked))?;
    w.write_all(b",\"sys\":")?;
    write_nums(w, top.iter().map(|g| g.syscall))?;
    w.write_all(b",\"sl\":")?;
    write_nums(w, top.iter().map(|g| g.slices))?;
    w.write_all(b",\"c\":")?;
    write_inums(w, top.iter().map(|g| g.created.map_or(-1, |t| t as i64)))?;
    w.write_all(b",\"e\":")?;
    write_inums(w, top.iter().map(|g| g.ended.map_or(-1, |t| t as i64)))?;

    w.write_all(b"},\n\"util\":")?;
    write_nums(w, model.lanes.iter().map(|l| l.busy))?;
    w.write_all(b"}")
}
