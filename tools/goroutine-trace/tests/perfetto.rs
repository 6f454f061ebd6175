//! The Perfetto / Chrome JSON output parses as JSON and follows the Trace
//! Event Format: the expected number of complete events, instants, counters
//! and paired flows.

use goroutine_trace::decode::{decode, DecodeOptions};
use goroutine_trace::gen::{generate, Scenario};
use goroutine_trace::model::{self, Model};
use goroutine_trace::perfetto::{self, Options};
use serde_json::Value;
use std::collections::HashMap;

fn build(sc: &Scenario) -> (goroutine_trace::gen::Generated, Model) {
    let g = generate(sc);
    let t = decode(&g.bytes, DecodeOptions::default(), &mut |_, _| {}).unwrap();
    let m = model::build(&t, &mut |_, _| {});
    (g, m)
}

fn events(json: &[u8]) -> Vec<Value> {
    let v: Value = serde_json::from_slice(json).expect("the output is valid JSON");
    assert_eq!(v["displayTimeUnit"], "ns");
    v["traceEvents"]
        .as_array()
        .expect("traceEvents array")
        .clone()
}

fn us_to_ns(v: &Value) -> u64 {
    (v.as_f64().expect("a number") * 1000.0).round() as u64
}

#[test]
fn perfetto_json_is_valid_and_complete() {
    let (g, m) = build(&Scenario::default());
    let mut out = Vec::new();
    let n = perfetto::write(&mut out, &m, Options::default(), &mut |_, _| {}).unwrap();
    let evs = events(&out);

    let mut by_ph: HashMap<String, usize> = HashMap::new();
    for e in &evs {
        let ph = e["ph"].as_str().expect("every event has ph");
        *by_ph.entry(ph.to_string()).or_default() += 1;
        assert!(e["pid"].is_u64(), "pid: {e}");
        match ph {
            "X" => {
                assert!(e["ts"].is_number() && e["dur"].is_number(), "{e}");
                assert!(e["dur"].as_f64().unwrap() >= 0.0);
                assert!(e["tid"].is_u64() && e["name"].is_string(), "{e}");
            }
            "i" => {
                assert_eq!(e["s"], "t");
                assert!(e["ts"].is_number() && e["tid"].is_u64(), "{e}");
            }
            "C" => {
                let args = e["args"].as_object().expect("counter args");
                assert!(
                    !args.is_empty() && args.values().all(Value::is_number),
                    "{e}"
                );
            }
            "s" | "f" => assert!(e["id"].is_u64() && e["ts"].is_number(), "{e}"),
            "M" => assert!(e["args"].is_object(), "{e}"),
            other => panic!("unexpected phase {other}: {e}"),
        }
    }

    // One X event per goroutine slice, with exact nanosecond times.
    let slices: Vec<&Value> = evs
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == "goroutine")
        .collect();
    assert_eq!(slices.len(), g.slices);
    assert_eq!(n.slices as usize, g.slices);
    let mut starts: Vec<(u64, u64, u64)> = slices
        .iter()
        .map(|e| {
            (
                e["tid"].as_u64().unwrap() - 1,
                us_to_ns(&e["ts"]),
                us_to_ns(&e["dur"]),
            )
        })
        .collect();
    starts.sort();
    let mut want: Vec<(u64, u64, u64)> = m
        .lanes
        .iter()
        .flat_map(|l| {
            l.slices
                .iter()
                .map(move |s| (l.p, s.start, s.end - s.start))
        })
        .collect();
    want.sort();
    assert_eq!(starts, want);

    let syscalls = evs
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == "syscall")
        .count();
    assert_eq!(syscalls as u64, n.syscalls);
    assert!(syscalls > 0);
    assert_eq!(by_ph["i"], m.marks.len());
    for name in [
        "steal",
        "preempt",
        "syscall enter",
        "syscall exit",
        "syscall handoff",
        "timer fire",
        "netpoll ready",
    ] {
        assert!(
            evs.iter().any(|e| e["ph"] == "i" && e["name"] == name),
            "no {name} instant"
        );
    }
    assert!(by_ph["C"] >= m.counts.len() + m.runq.len());
    assert!(evs
        .iter()
        .any(|e| e["ph"] == "C" && e["name"] == "goroutines"));
    assert!(evs.iter().any(|e| e["ph"] == "C" && e["name"] == "runq P0"));

    // Flows come in pairs with matching ids, the start before the finish.
    assert!(n.flows > 0);
    assert_eq!(by_ph["s"], by_ph["f"]);
    let mut flow: HashMap<u64, (Option<u64>, Option<u64>)> = HashMap::new();
    for e in evs.iter().filter(|e| e["ph"] == "s" || e["ph"] == "f") {
        let slot = flow.entry(e["id"].as_u64().unwrap()).or_default();
        if e["ph"] == "s" {
            slot.0 = Some(us_to_ns(&e["ts"]));
        } else {
            assert_eq!(e["bp"], "e");
            slot.1 = Some(us_to_ns(&e["ts"]));
        }
    }
    for (id, (s, f)) in flow {
        let (s, f) = (s.expect("start"), f.expect("finish"));
        assert!(s <= f, "flow {id}: {s} > {f}");
    }

    // Thread names: one per P, plus the runtime thread, plus the Ms.
    let names = evs
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .count();
    assert_eq!(names, m.lanes.len() + 1 + m.ms.len());
    // The goroutine with the awkward name survives escaping.
    assert!(slices
        .iter()
        .any(|e| e["name"] == "G2 <script>\"quoted\" & ünïcode \\ </script>"));
}

#[test]
fn without_flows() {
    let (_, m) = build(&Scenario {
        goroutines: 50,
        ..Scenario::default()
    });
    let mut out = Vec::new();
    let n = perfetto::write(&mut out, &m, Options { flows: false }, &mut |_, _| {}).unwrap();
    assert_eq!(n.flows, 0);
    let evs = events(&out);
    assert!(!evs.iter().any(|e| e["ph"] == "s" || e["ph"] == "f"));
    assert_eq!(
        evs.iter()
            .filter(|e| e["ph"] == "X" && e["cat"] == "goroutine")
            .count(),
        m.slice_count()
    );
}

#[test]
fn empty_trace_is_valid_json() {
    let mut w = goroutine_trace::writer::TraceWriter::new(5, 0, 2);
    w.event(0, 1, &goroutine_trace::format::Event::MPark);
    let bytes = w.finish(10, 0);
    let t = decode(&bytes, DecodeOptions::default(), &mut |_, _| {}).unwrap();
    let m = model::build(&t, &mut |_, _| {});
    let mut out = Vec::new();
    perfetto::write(&mut out, &m, Options::default(), &mut |_, _| {}).unwrap();
    let evs = events(&out);
    assert!(!evs
        .iter()
        .any(|e| e["ph"] == "X" && e["cat"] == "goroutine"));
}
