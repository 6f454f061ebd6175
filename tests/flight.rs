//! The flight recorder (`goroutine::trace::FlightRecorder`): its snapshots
//! open in the trace tool, hold the recent window and not what came before,
//! stay within the byte bound over a long run, and are written on an abort
//! and SIGQUIT, from the API or from `GOROUTINE_TRACE=flight:...` (the
//! deadlock report's is in tests/deadlock.rs, whose children run without
//! the test harness's threads).

mod common;

use common::skynet;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use goroutine::trace::{FlightConfig, FlightRecorder};
use goroutine::{chan, go, Builder};
use goroutine_trace::decode::{decode, decode_in_file_order, DecodeOptions};
use goroutine_trace::format::{Event as Ev, BATCH_SIZE, HEADER_LEN, TRAILER_LEN};

/// Opens a snapshot as the tool does (decode, then the model every view
/// is drawn from) and returns its events (absolute ns) and trailer's end.
fn open(bytes: &[u8]) -> (Vec<(u64, u32, Ev)>, u64) {
    let t = decode(bytes, DecodeOptions::default(), &mut |_, _| {})
        .unwrap_or_else(|e| panic!("the tool cannot read the snapshot: {e}"));
    let _ = goroutine_trace::model::build(&t, &mut |_, _| {});
    let f = decode_in_file_order(bytes).unwrap();
    let start = f.header.start_ns;
    let end = u64::from_le_bytes(
        bytes[bytes.len() - TRAILER_LEN + 1..][..8]
            .try_into()
            .unwrap(),
    );
    let evs = f
        .batches
        .into_iter()
        .flat_map(|b| b.events.into_iter().map(move |e| (start + e.ts, e.m, e.ev)))
        .collect();
    (evs, end)
}

/// The goroutines an event is about (created, started, ended...).
fn gs_of(ev: &Ev) -> Option<u64> {
    match *ev {
        Ev::GoCreate { g, .. }
        | Ev::GoStart { g, .. }
        | Ev::GoStop { g, .. }
        | Ev::GoBlock { g, .. }
        | Ev::GoUnblock { g, .. }
        | Ev::GoEnd { g, .. } => Some(g),
        _ => None,
    }
}

/// Runs `n` goroutines that each yield once and end; returns their ids.
fn burst(n: usize) -> HashSet<u64> {
    let hs: Vec<_> = (0..n).map(|_| go(goroutine::yield_now)).collect();
    let ids = hs.iter().map(|h| h.id()).collect();
    for h in hs {
        h.join().unwrap();
    }
    ids
}

fn snapshot(fr: &FlightRecorder) -> Vec<u8> {
    let mut v = Vec::new();
    let n = fr.write_to(&mut v).unwrap();
    assert_eq!(n as usize, v.len());
    v
}

// A snapshot holds the last `age` of events: the goroutines of a burst
// before a pause longer than `age` are gone, those of the burst just
// before the snapshot are there, and no event is older than `age` before
// the snapshot's end.
isolated_test! {
    fn snapshot_holds_the_recent_window_only() ["GOMAXPROCS" = "2"] {
        let age = common::scaled(Duration::from_secs(1));
        let fr = FlightRecorder::new(FlightConfig {
            age,
            ..FlightConfig::default()
        });
        fr.start().unwrap();
        assert!(fr.is_running());
        // One session at a time.
        assert!(goroutine::trace::start(std::env::temp_dir().join("flight-never.trace")).is_err());
        assert!(FlightRecorder::new(FlightConfig::default()).start().is_err());
        let (old, new) = goroutine::run(move || {
            let old = burst(500);
            goroutine::time::sleep(age + age / 2);
            let new = Builder::new()
                .name("recent-burst")
                .spawn(|| burst(500))
                .unwrap()
                .join()
                .unwrap();
            (old, new)
        });
        let bytes = snapshot(&fr);
        let (evs, end) = open(&bytes);
        // The recorder ran for the old burst and a sleep of 1.5 windows
        // before the snapshot: its clock says so, give or take a few
        // percent (a clock scaled wrong once read 4.9 s for 15 under
        // qemu).
        let age_ns = age.as_nanos() as u64;
        assert!(end >= age_ns * 7 / 5, "the snapshot ends at {end} ns, after a sleep of {} ns", age_ns * 3 / 2);
        // The window is the last `age`, or all if the recorder is younger.
        let cutoff = end.saturating_sub(age_ns);
        if let Some(e) = evs.iter().find(|(ts, _, _)| *ts < cutoff) {
            panic!(
                "an event before the window: {e:?}, window from {cutoff} to {end}; the first events: {:?}",
                &evs[..evs.len().min(8)]
            );
        }
        let seen: HashSet<u64> = evs.iter().filter_map(|(_, _, e)| gs_of(e)).collect();
        assert!(old.iter().all(|g| !seen.contains(g)), "an old goroutine's event");
        assert!(new.iter().all(|g| seen.contains(g)), "a recent goroutine missing");
        assert!(evs.iter().any(|(_, _, e)| matches!(e, Ev::GoCreate { g, .. } if new.contains(g))));
        // Recording goes on after a snapshot; stop ends it.
        let later = goroutine::run(|| burst(50));
        let (evs, _) = open(&snapshot(&fr));
        let seen: HashSet<u64> = evs.iter().filter_map(|(_, _, e)| gs_of(e)).collect();
        assert!(later.iter().all(|g| seen.contains(g)), "no events after a snapshot");
        fr.stop().unwrap();
        assert!(!fr.is_running());
        assert!(fr.write_to(&mut Vec::new()).is_err());
        // A trace file may start now.
        let path = std::env::temp_dir().join(format!("flight-{}.trace", std::process::id()));
        goroutine::trace::start(&path).unwrap();
        goroutine::trace::stop().unwrap();
        let _ = std::fs::remove_file(&path);
    }
}

// Over a long run (many times the byte bound of events), every snapshot
// stays within the bound plus one batch in the making per thread, and
// holds the last round's goroutines but not the first's.
isolated_test! {
    fn memory_stays_bounded_over_a_long_run() ["GOMAXPROCS" = "2"] {
        let max_bytes = 256 << 10;
        let fr = FlightRecorder::new(FlightConfig {
            age: Duration::from_secs(3600),
            max_bytes,
            dir: None,
        });
        fr.start().unwrap();
        let mut first: Option<HashSet<u64>> = None;
        for round in 0..6 {
            let ids = goroutine::run(|| {
                let ids = burst(100);
                for _ in 0..4 {
                    let (tx, rx) = chan(1);
                    go(move || skynet(tx, 0, 10_000));
                    assert_eq!(rx.recv().unwrap(), 49_995_000);
                }
                ids
            });
            let bytes = snapshot(&fr);
            let f = decode_in_file_order(&bytes).unwrap();
            let threads: HashSet<u32> = f.batches.iter().map(|b| b.m).collect();
            let bound =
                HEADER_LEN + TRAILER_LEN + max_bytes + (threads.len() + 1) * (BATCH_SIZE + 9);
            assert!(
                bytes.len() <= bound,
                "round {round}: {} bytes over the bound {bound}",
                bytes.len()
            );
            let (evs, _) = open(&bytes);
            let seen: HashSet<u64> = evs.iter().filter_map(|(_, _, e)| gs_of(e)).collect();
            match &first {
                None => first = Some(ids),
                Some(first) => {
                    assert!(first.iter().all(|g| !seen.contains(g)), "round {round}: round 0 kept");
                }
            }
        }
        fr.stop().unwrap();
    }
}

/// A fresh directory for a child's snapshots.
fn fresh_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("flight-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The snapshot a child says it wrote (stderr's line), in `dir`, opened;
/// checks that goroutine `name` is in it.
fn expect_snapshot(stderr: &str, dir: &Path, why: &str, name: &str) {
    let line = stderr
        .lines()
        .find(|l| {
            l.starts_with(&format!(
                "goroutine: flight recorder ({why}): trace written to "
            ))
        })
        .unwrap_or_else(|| panic!("no snapshot line:\n{stderr}"));
    let path = PathBuf::from(line.rsplit_once(" to ").unwrap().1);
    assert_eq!(path.parent(), Some(dir), "{line}");
    let bytes = std::fs::read(&path).unwrap();
    let (evs, _) = open(&bytes);
    assert!(
        evs.iter()
            .any(|(_, _, e)| matches!(e, Ev::GoName { name: n, .. } if n == name)),
        "no {name} in the snapshot"
    );
    assert!(evs.iter().any(|(_, _, e)| matches!(e, Ev::GoStart { .. })));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn env_flight_recorder_writes_on_demand() {
    let dir = fresh_dir("env");
    let spec = format!("flight:30:{}", dir.display());
    let out = common::spawn("env_child", &[("GOROUTINE_TRACE", &spec)]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let bytes = std::fs::read(dir.join("on-demand.trace")).unwrap();
    let (evs, _) = open(&bytes);
    assert!(evs
        .iter()
        .any(|(_, _, e)| matches!(e, Ev::GoName { name, .. } if name == "env-worker")));
    let _ = std::fs::remove_dir_all(&dir);
    // A bad value is named, and the program runs on untraced.
    let out = common::spawn("env_child_bad", &[("GOROUTINE_TRACE", "flight:soon")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("GOROUTINE_TRACE=flight:soon"), "{stderr}");
}

#[test]
fn env_child() {
    if !common::is_child("env_child") {
        return;
    }
    let fr = FlightRecorder::new(FlightConfig::default());
    goroutine::run(|| {
        let h = Builder::new()
            .name("env-worker")
            .spawn(|| burst(100))
            .unwrap();
        goroutine::time::sleep(Duration::from_millis(5));
        h.join().unwrap();
    });
    assert!(
        fr.is_running(),
        "GOROUTINE_TRACE=flight:30 started no recorder"
    );
    let dir = PathBuf::from(
        std::env::var("GOROUTINE_TRACE")
            .unwrap()
            .splitn(3, ':')
            .nth(2)
            .unwrap(),
    );
    let mut f = std::fs::File::create(dir.join("on-demand.trace")).unwrap();
    fr.write_to(&mut f).unwrap();
}

#[test]
fn env_child_bad() {
    if !common::is_child("env_child_bad") {
        return;
    }
    goroutine::run(|| burst(10));
    assert!(!FlightRecorder::new(FlightConfig::default()).is_running());
}

#[test]
fn an_abort_writes_the_flight_recorder() {
    let dir = fresh_dir("abort");
    let spec = format!("flight:30:{}", dir.display());
    let out = common::spawn(
        "abort_child",
        &[("GOROUTINE_TRACE", &spec), ("GOROUTINE_PANIC", "abort")],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("panic: flight test"), "{stderr}");
    expect_snapshot(&stderr, &dir, "panic", "panicker");
}

#[test]
fn abort_child() {
    if !common::is_child("abort_child") {
        return;
    }
    goroutine::run(|| {
        burst(100);
        let h = Builder::new()
            .name("panicker")
            .spawn(|| panic!("flight test"))
            .unwrap();
        let _ = h.join();
    });
}

#[test]
fn sigquit_writes_the_flight_recorder() {
    let dir = fresh_dir("sigquit");
    let spec = format!("flight:30:{}", dir.display());
    let out = common::spawn("sigquit_child", &[("GOROUTINE_TRACE", &spec)]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.starts_with("SIGQUIT: quit"), "{stderr}");
    expect_snapshot(&stderr, &dir, "SIGQUIT", "quitter");
}

#[test]
fn sigquit_child() {
    if !common::is_child("sigquit_child") {
        return;
    }
    goroutine::run(|| {
        burst(100);
        let h = Builder::new()
            .name("quitter")
            .spawn(|| {
                // SAFETY: raising a signal has no preconditions; the
                // runtime's SIGQUIT handler reports and exits.
                unsafe { libc::raise(libc::SIGQUIT) };
                loop {
                    goroutine::time::sleep(Duration::from_millis(10));
                }
            })
            .unwrap();
        let _ = h.join();
    });
}
