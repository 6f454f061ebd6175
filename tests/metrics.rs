//! `goroutine::metrics` (Go's scheduler metrics), the scheduling-latency
//! histogram and CPU time per goroutine. Behaviour only: loose bounds.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use goroutine::chan;
use goroutine::metrics::{self, Kind, Sample, Value};

fn read_all() -> Vec<Sample> {
    let mut s: Vec<Sample> = metrics::all().iter().map(|d| Sample::new(d.name)).collect();
    metrics::read(&mut s);
    s
}

fn u64_of(samples: &[Sample], name: &str) -> u64 {
    match samples.iter().find(|s| s.name == name).map(|s| &s.value) {
        Some(Value::U64(v)) => *v,
        other => panic!("{name}: {other:?}"),
    }
}

/// Polls `f` until it holds, for at most 10 s (from a goroutine).
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < end, "never: {what}");
        goroutine::time::sleep(Duration::from_millis(2));
    }
}

#[test]
fn go_names_are_listed_with_their_kinds() {
    let all = metrics::all();
    let kind = |n: &str| all.iter().find(|d| d.name == n).map(|d| d.kind);
    for n in [
        "/sched/goroutines/not-in-go:goroutines",
        "/sched/goroutines/runnable:goroutines",
        "/sched/goroutines/running:goroutines",
        "/sched/goroutines/waiting:goroutines",
        "/sched/goroutines:goroutines",
        "/sched/threads/total:threads",
        "/sched/gomaxprocs:threads",
    ] {
        assert_eq!(kind(n), Some(Kind::Gauge), "{n}");
    }
    assert_eq!(
        kind("/sched/goroutines-created:goroutines"),
        Some(Kind::Counter)
    );
    assert_eq!(kind("/sched/latencies:seconds"), Some(Kind::Histogram));
    assert!(all.iter().all(|d| !d.description.is_empty()));
    let mut s = [Sample::new("/no/such:metric")];
    metrics::read(&mut s);
    assert_eq!(s[0].value, Value::Unknown);
}

isolated_test! {
    /// N goroutines created, M of them parked on a channel: the counts say so.
    fn counts_match_a_known_program() ["GOMAXPROCS" = "2"] {
        const N: usize = 40;
        const M: usize = 25;
        goroutine::run(|| {
            let before = read_all();
            let created0 = u64_of(&before, "/sched/goroutines-created:goroutines");
            let live0 = u64_of(&before, "/sched/goroutines:goroutines");
            assert_eq!(u64_of(&before, "/sched/gomaxprocs:threads"), 2);
            // The reader itself runs (or, its P just taken back by the
            // runtime on a loaded box, counts as outside it).
            // Eventually: under randomized scheduling the first read can
            // come while the reader's M is still being recorded as its
            // thread's current one.
            eventually("the reader counts as running", || {
                let s = read_all();
                u64_of(&s, "/sched/goroutines/running:goroutines")
                    + u64_of(&s, "/sched/goroutines/not-in-go:goroutines")
                    >= 1
            });
            // The M running this goroutine, and sysmon's thread (Go counts
            // every thread the runtime owns).
            assert!(u64_of(&before, "/sched/threads/total:threads") >= 2);

            let (tx, rx) = chan::<()>(0);
            let parked: Vec<_> = (0..M)
                .map(|_| {
                    let rx = rx.clone();
                    goroutine::go(move || while rx.recv().is_ok() {})
                })
                .collect();
            let done: Vec<_> = (0..N - M).map(|_| goroutine::go(|| ())).collect();
            for h in done {
                h.join().unwrap();
            }
            // The M receivers park (they may need a moment to run first),
            // and the joined ones finish exiting (a joined goroutine's
            // record is freed just after its result is published).
            eventually("M goroutines waiting, the others gone", || {
                let s = read_all();
                u64_of(&s, "/sched/goroutines/waiting:goroutines") >= M as u64
                    && u64_of(&s, "/sched/goroutines/runnable:goroutines") == 0
                    && u64_of(&s, "/sched/goroutines:goroutines") == live0 + M as u64
            });
            let s = read_all();
            assert_eq!(
                u64_of(&s, "/sched/goroutines-created:goroutines") - created0,
                N as u64
            );
            assert_eq!(u64_of(&s, "/sched/goroutines:goroutines"), live0 + M as u64);
            let by_state: u64 = [
                "/sched/goroutines/not-in-go:goroutines",
                "/sched/goroutines/runnable:goroutines",
                "/sched/goroutines/running:goroutines",
                "/sched/goroutines/waiting:goroutines",
            ]
            .iter()
            .map(|n| u64_of(&s, n))
            .sum();
            assert_eq!(by_state, live0 + M as u64, "the states add up");

            drop(tx);
            for h in parked {
                h.join().unwrap();
            }
            // A joined goroutine's record is freed just after its result
            // is published: its exit may still be under way.
            eventually("the receivers' exits are counted", || {
                let s = read_all();
                u64_of(&s, "/sched/goroutines:goroutines") == live0
            });
        });
    }
}

#[test]
fn the_latency_histogram_gets_samples() {
    let mut s = [Sample::new("/sched/latencies:seconds")];
    metrics::read(&mut s);
    let count0: u64 = match &s[0].value {
        Value::Histogram { counts, .. } => counts.iter().sum(),
        v => panic!("{v:?}"),
    };
    goroutine::run(|| {
        let (a_tx, a_rx) = chan::<u32>(0);
        let (b_tx, b_rx) = chan::<u32>(0);
        let h = goroutine::go(move || {
            while let Ok(v) = a_rx.recv() {
                b_tx.send(v).unwrap();
            }
        });
        for i in 0..2000 {
            a_tx.send(i).unwrap();
            b_rx.recv().unwrap();
        }
        drop(a_tx);
        h.join().unwrap();
    });
    metrics::read(&mut s);
    let Value::Histogram {
        buckets,
        counts,
        sum,
    } = &s[0].value
    else {
        panic!("{:?}", s[0].value)
    };
    assert_eq!(buckets.len(), counts.len() + 1);
    assert_eq!(buckets[0], 0.0);
    assert_eq!(*buckets.last().unwrap(), f64::INFINITY);
    assert!(buckets.windows(2).all(|w| w[0] < w[1]), "bounds increase");
    let count: u64 = counts.iter().sum();
    // 4000 readies, one in about 8 sampled: loosely, some hundreds.
    assert!(count - count0 >= 100, "{} samples", count - count0);
    assert!(*sum > 0.0 && sum.is_finite());
}

isolated_test! {
    /// With `GODEBUG=cputime=1`.
    fn cpu_time_grows_for_a_spinning_goroutine_and_not_for_a_parked_one() ["GODEBUG" = "cputime=1"] {
    goroutine::run(|| {
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let spinner = goroutine::go(move || {
            while !stop2.load(Ordering::Relaxed) {
                goroutine::preempt_point();
                std::hint::spin_loop();
            }
        });
        let (tx, rx) = chan::<()>(0);
        let parked = goroutine::go(move || {
            let _ = rx.recv();
        });
        let (sid, pid) = (spinner.id(), parked.id());
        eventually("the parked goroutine parks", || {
            let a = goroutine::cpu_time(pid).unwrap();
            goroutine::time::sleep(Duration::from_millis(5));
            a > Duration::ZERO && goroutine::cpu_time(pid) == Some(a)
        });
        let p0 = goroutine::cpu_time(pid).unwrap();
        let s0 = goroutine::cpu_time(sid).unwrap();
        goroutine::time::sleep(Duration::from_millis(200));
        let p1 = goroutine::cpu_time(pid).unwrap();
        let s1 = goroutine::cpu_time(sid).unwrap();
        // Its ticks stand still; their conversion to time is refined once
        // a second (`cpu_time`'s doc), which may move it by a hair.
        let drift = p1.abs_diff(p0);
        assert!(
            drift <= p0 / 100 + Duration::from_nanos(1),
            "a parked goroutine's CPU time stands still: {p0:?} -> {p1:?}"
        );
        // The spinner shares the CPUs with the rest of the box: loosely.
        assert!(s1 - s0 >= Duration::from_millis(10), "{s0:?} -> {s1:?}");
        assert!(s1 - s0 <= Duration::from_secs(5), "{s0:?} -> {s1:?}");

        // The caller's own, read cheaply.
        let me0 = goroutine::current_cpu_time().unwrap();
        let t = Instant::now();
        while t.elapsed() < Duration::from_millis(30) {
            std::hint::spin_loop();
        }
        assert!(goroutine::current_cpu_time().unwrap() > me0);

        // The JSON dump carries it.
        let mut out = Vec::new();
        goroutine::dump_json(&mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let spin = v["goroutines"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["id"] == sid)
            .expect("the spinner is in the dump");
        assert!(spin["cpu_time_ns"].as_u64().unwrap() >= s1.as_nanos() as u64 / 2);

        stop.store(true, Ordering::Relaxed);
        drop(tx);
        spinner.join().unwrap();
        parked.join().unwrap();
        assert_eq!(goroutine::cpu_time(sid), None, "ended");
    });
    assert_eq!(goroutine::current_cpu_time(), None, "not a goroutine");
}
}

#[test]
fn cpu_time_is_off_by_default() {
    goroutine::run(|| {
        assert_eq!(goroutine::current_cpu_time(), None);
        assert_eq!(goroutine::cpu_time(goroutine::current_id()), None);
        let mut out = Vec::new();
        goroutine::dump_json(&mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert!(v["goroutines"][0]["cpu_time_ns"].is_null());
    });
}

#[test]
fn a_read_allocates_nothing_the_second_time() {
    let mut s = read_all();
    let ptr = |s: &[Sample]| match &s
        .iter()
        .find(|x| x.name == "/sched/latencies:seconds")
        .unwrap()
        .value
    {
        Value::Histogram { counts, .. } => counts.as_ptr(),
        _ => unreachable!(),
    };
    let p = ptr(&s);
    metrics::read(&mut s);
    assert_eq!(ptr(&s), p, "the histogram's vectors are reused");
}

isolated_test! {
    /// A goroutine readied and then kept waiting 2 ms by its waker (one P)
    /// shows up in the histogram at about 2 ms: the samples measure ready
    /// to running.
    fn a_known_wait_lands_in_its_bucket() ["GOMAXPROCS" = "1"] {
        goroutine::run(|| {
            let hist = || {
                let mut s = [Sample::new("/sched/latencies:seconds")];
                metrics::read(&mut s);
                match std::mem::take(&mut s[0].value) {
                    Value::Histogram { buckets, counts, .. } => (buckets, counts),
                    v => panic!("{v:?}"),
                }
            };
            let (tx, rx) = chan::<()>(0);
            let h = goroutine::go(move || while rx.recv().is_ok() {});
            let (bounds, before) = hist();
            for _ in 0..128 {
                // The parked receiver is readied into runnext, then waits
                // while this goroutine keeps the only P for 2 ms (until
                // its next send parks it).
                tx.send(()).unwrap();
                let t = Instant::now();
                while t.elapsed() < Duration::from_millis(2) {
                    std::hint::spin_loop();
                }
            }
            drop(tx);
            h.join().unwrap();
            let (_, after) = hist();
            let at_least = |secs: f64| -> u64 {
                (0..after.len())
                    .filter(|&i| bounds[i] >= secs)
                    .map(|i| after[i] - before[i])
                    .sum()
            };
            // About 128 / 7.5 of the receiver's readies are sampled, each
            // waiting 2 ms or more (more when the box is loaded).
            assert!(at_least(0.0015) >= 2, "{:?}", after);
            assert_eq!(at_least(5.0), 0, "no wait near seconds");
        });
    }
}
