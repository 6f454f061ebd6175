//! The model: slices, time accounting, wakeups and odd event sequences.

use goroutine_trace::decode::{decode, DecodeOptions, Trace};
use goroutine_trace::format::Event;
use goroutine_trace::gen::{generate, Scenario};
use goroutine_trace::model::{self, EndReason, MarkKind, Model, SysEnd};
use goroutine_trace::writer::TraceWriter;
use std::collections::HashMap;

fn load(bytes: &[u8]) -> (Trace, Model) {
    let t = decode(bytes, DecodeOptions::default(), &mut |_, _| {}).unwrap();
    let m = model::build(&t, &mut |_, _| {});
    (t, m)
}

#[test]
fn generated_trace_model_is_consistent() {
    let sc = Scenario {
        procs: 6,
        goroutines: 700,
        seed: 9,
        ..Scenario::default()
    };
    let g = generate(&sc);
    let (_, m) = load(&g.bytes);
    assert_eq!(m.lanes.len(), 6);
    assert_eq!(m.slice_count(), g.slices);
    assert_eq!(m.duration, g.end_ns);
    let mut run_by_g: HashMap<u64, u64> = HashMap::new();
    for lane in &m.lanes {
        for w in lane.slices.windows(2) {
            assert!(
                w[0].end <= w[1].start,
                "P{}: overlapping slices {w:?}",
                lane.p
            );
        }
        for s in &lane.slices {
            assert!(s.start <= s.end);
            assert_ne!(
                s.reason,
                EndReason::Replaced,
                "the generator loses no events"
            );
            assert_ne!(s.reason, EndReason::TraceEnd);
            *run_by_g.entry(s.g).or_default() += s.end - s.start;
        }
        for w in lane.syscalls.windows(2) {
            assert!(w[0].end <= w[1].start);
        }
        assert_eq!(
            lane.busy,
            lane.slices.iter().map(|s| s.end - s.start).sum::<u64>()
        );
    }
    let handoffs = m
        .lanes
        .iter()
        .flat_map(|l| &l.syscalls)
        .filter(|s| s.how == SysEnd::Handoff)
        .count();
    assert_eq!(handoffs as u64, m.event_counts[14]);
    for gi in &m.goroutines {
        assert_eq!(
            gi.running,
            run_by_g.get(&gi.id).copied().unwrap_or(0),
            "G{}",
            gi.id
        );
        let (c, e) = (gi.created.unwrap(), gi.ended.unwrap());
        assert!(c <= e);
        assert_eq!(
            gi.total(),
            e - c,
            "G{}: every ns of its life is in one state",
            gi.id
        );
    }
    for w in &m.wakeups {
        let (ts, p) = w.to.expect("every woken goroutine runs again");
        assert!(ts >= w.ts);
        assert!(m.lane_index(p).is_some());
    }
    assert_eq!(m.goroutines[0].name.as_deref(), Some("main"));
    assert!(!m.counts_derived);
    assert!(m.counts.iter().all(|c| c.running <= 6));
}

#[test]
fn counts_are_derived_without_gocount() {
    let g = generate(&Scenario::default());
    let (mut t, with) = load(&g.bytes);
    t.events.retain(|e| !matches!(e.ev, Event::GoCount { .. }));
    let m = model::build(&t, &mut |_, _| {});
    assert!(m.counts_derived && !with.counts_derived);
    assert!(m.counts.len() > 1000);
    assert!(m.counts.iter().all(|c| c.running <= 4));
    assert!(m.counts.iter().any(|c| c.running == 4));
    let last = m.counts.last().unwrap();
    assert_eq!(
        (last.runnable, last.running, last.waiting, last.syscall),
        (0, 0, 0, 0)
    );
    // Derived and sampled counts agree at the sample times (both count every
    // goroutine of the trace; the sample at ts sees events up to ts).
    let peak_sampled = with
        .counts
        .iter()
        .map(|c| c.runnable + c.running + c.waiting + c.syscall)
        .max();
    let peak_derived = m
        .counts
        .iter()
        .map(|c| c.runnable + c.running + c.waiting + c.syscall)
        .max();
    let (a, b) = (peak_sampled.unwrap() as f64, peak_derived.unwrap() as f64);
    assert!(
        (a - b).abs() <= a * 0.25 + 2.0,
        "sampled peak {a}, derived peak {b}"
    );
}

/// A trace that starts in the middle of a program and loses events.
#[test]
fn odd_sequences() {
    let mut w = TraceWriter::new(1000, 0, 2);
    let ev = |w: &mut TraceWriter, m: u32, ts: u64, e: Event| w.event(m, ts, &e);
    // G7 was created before tracing started; it is already running on P0.
    ev(&mut w, 1, 10, Event::GoStart { g: 7, p: 0 });
    // A second GoStart of the same goroutine continues the slice.
    ev(&mut w, 1, 15, Event::GoStart { g: 7, p: 0 });
    // Another goroutine starts on P0 without G7 stopping: a lost event.
    ev(&mut w, 1, 20, Event::GoStart { g: 8, p: 0 });
    // A fast syscall exit keeps running (a new slice), then the P stops.
    ev(&mut w, 1, 30, Event::SyscallEnter { g: 8, p: 0 });
    ev(
        &mut w,
        1,
        40,
        Event::SyscallExit {
            g: 8,
            p: 0,
            fast: 1,
        },
    );
    ev(&mut w, 1, 45, Event::GoStart { g: 8, p: 0 });
    ev(&mut w, 1, 50, Event::ProcStop { p: 0 });
    // Events about goroutines and Ps nobody has seen.
    ev(
        &mut w,
        2,
        55,
        Event::GoStop {
            g: 99,
            p: 1,
            reason: 7,
        },
    );
    ev(
        &mut w,
        2,
        56,
        Event::GoUnblock {
            g: 100,
            by_g: 12345,
            p: u32::MAX as u64,
        },
    );
    ev(
        &mut w,
        2,
        57,
        Event::SyscallExit {
            g: 101,
            p: 1,
            fast: 0,
        },
    );
    ev(
        &mut w,
        2,
        58,
        Event::Steal {
            thief_p: 1,
            victim_p: 1 << 40,
            count: 1,
        },
    );
    ev(&mut w, 2, 59, Event::GoStart { g: 9, p: 1 });
    let (_, m) = load(&w.finish(100, 0));
    let p0 = &m.lanes[m.lane_index(0).unwrap()];
    let got: Vec<(u64, u64, u64, EndReason)> = p0
        .slices
        .iter()
        .map(|s| (s.g, s.start, s.end, s.reason))
        .collect();
    assert_eq!(
        got,
        vec![
            (7, 10, 20, EndReason::Replaced),
            (8, 20, 30, EndReason::Syscall),
            (8, 40, 50, EndReason::ProcStop),
        ]
    );
    assert_eq!(p0.syscalls.len(), 1);
    assert_eq!(p0.syscalls[0].how, SysEnd::Exit);
    let p1 = &m.lanes[m.lane_index(1).unwrap()];
    assert_eq!(p1.slices.len(), 1);
    assert_eq!(p1.slices[0].reason, EndReason::TraceEnd);
    assert_eq!(p1.slices[0].end, 100);
    // The huge victim P id gets no lane.
    assert_eq!(m.lanes.len(), 2);
    let g7 = m.goroutines.iter().find(|g| g.id == 7).unwrap();
    assert_eq!((g7.created, g7.running), (None, 10));
}

/// ProcRevoke: sysmon takes P0 from M1, whose goroutine G5 is blocked in the
/// kernel outside the runtime; M2 gets P0. G5 later takes the idle P1 at its
/// next runtime call (only a ProcStart on M1, as the runtime writes it). G6,
/// revoked in turn on P0, finds no P: a slow SyscallExit to the global queue
/// and a GoStart later.
#[test]
fn proc_revoke_ends_the_slice_and_the_goroutine_goes_on() {
    let mut w = TraceWriter::new(1000, 0, 2);
    let ev = |w: &mut TraceWriter, m: u32, ts: u64, e: Event| w.event(m, ts, &e);
    ev(&mut w, 1, 10, Event::GoStart { g: 5, p: 0 });
    ev(
        &mut w,
        u32::MAX,
        30,
        Event::ProcRevoke {
            g: 5,
            p: 0,
            syscall_nr: 35, // nanosleep on x86_64
        },
    );
    ev(&mut w, 2, 31, Event::ProcStart { p: 0 });
    ev(&mut w, 2, 32, Event::GoStart { g: 6, p: 0 });
    ev(&mut w, 1, 50, Event::ProcStart { p: 1 });
    ev(&mut w, 1, 60, Event::GoEnd { g: 5, p: 1 });
    ev(
        &mut w,
        u32::MAX,
        70,
        Event::ProcRevoke {
            g: 6,
            p: 0,
            syscall_nr: u64::MAX, // unknown
        },
    );
    ev(&mut w, 3, 71, Event::ProcStart { p: 0 });
    ev(
        &mut w,
        2,
        80,
        Event::SyscallExit {
            g: 6,
            p: u32::MAX as u64,
            fast: 0,
        },
    );
    ev(&mut w, 2, 80, Event::MPark);
    ev(&mut w, 3, 90, Event::GoStart { g: 6, p: 0 });
    let bytes = w.finish(100, 0);
    let (t, m) = load(&bytes);
    let slices = |p: u64| -> Vec<(u64, u64, u64, EndReason)> {
        m.lanes[m.lane_index(p).unwrap()]
            .slices
            .iter()
            .map(|s| (s.g, s.start, s.end, s.reason))
            .collect()
    };
    assert_eq!(
        slices(0),
        vec![
            (5, 10, 30, EndReason::Revoked),
            (6, 32, 70, EndReason::Revoked),
            (6, 90, 100, EndReason::TraceEnd),
        ]
    );
    assert_eq!(slices(1), vec![(5, 50, 60, EndReason::End)]);
    let revokes: Vec<_> = m
        .marks
        .iter()
        .filter_map(|mk| match mk.kind {
            MarkKind::Revoke { g, syscall_nr } => Some((mk.ts, mk.p, g, syscall_nr)),
            _ => None,
        })
        .collect();
    assert_eq!(
        revokes,
        vec![(30, Some(0), 5, 35), (70, Some(0), 6, u64::MAX)]
    );
    // Blocked in the kernel counts as syscall time; then runnable, running.
    let g = |id: u64| m.goroutines.iter().find(|g| g.id == id).unwrap().clone();
    assert_eq!((g(5).running, g(5).syscall), (20 + 10, 20));
    assert_eq!(
        (g(6).running, g(6).syscall, g(6).runnable),
        (38 + 10, 10, 10)
    );
    assert_eq!(m.event_counts[21], 2);
    // M1 held P0 until the revocation, then P1.
    let m1 = m.ms.iter().find(|l| l.m == 1).unwrap();
    let spans: Vec<_> = m1.spans.iter().map(|s| (s.start, s.end, s.p)).collect();
    assert_eq!(spans, vec![(50, 100, Some(1))]);

    // The views: the HTML page carries the syscall labels, the Perfetto
    // export a named instant.
    let mut html = Vec::new();
    goroutine_trace::html::write(
        &mut html,
        &t,
        &m,
        &goroutine_trace::html::Options::default(),
        &mut |_, _| {},
    )
    .unwrap();
    let html = String::from_utf8(html).unwrap();
    assert!(html.contains("\"syscalls\":[\""), "no syscall labels");
    assert!(html.contains("\"unknown syscall\""));
    if cfg!(target_arch = "x86_64") {
        assert!(html.contains("\"nanosleep\""));
    }
    let mut json = Vec::new();
    goroutine_trace::perfetto::write(
        &mut json,
        &m,
        goroutine_trace::perfetto::Options::default(),
        &mut |_, _| {},
    )
    .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
    let revoked: Vec<_> = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "P revoked")
        .collect();
    assert_eq!(revoked.len(), 2);
    assert_eq!(revoked[1]["args"]["syscall"], "unknown syscall");
    assert_eq!(revoked[0]["args"]["g"], 5);
}

#[test]
fn syscall_labels() {
    use goroutine_trace::format::{syscall_label, syscall_nr};
    assert_eq!(syscall_nr(u64::MAX), None);
    assert_eq!(syscall_nr(7), Some(7));
    assert_eq!(syscall_label(u64::MAX), "unknown syscall");
    assert_eq!(syscall_label(99_999), "syscall 99999");
    if cfg!(target_arch = "x86_64") {
        assert_eq!(syscall_label(230), "clock_nanosleep");
        assert_eq!(syscall_label(0), "read");
    }
}
