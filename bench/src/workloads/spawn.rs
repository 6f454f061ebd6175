//! `spawn`: one goroutine spawns N goroutines, each counts a shared counter
//! down; ns per goroutine (spawn + run + exit). OS threads: at most 100,000.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::{ours_run, per, tokio_run, Cfg, Figure};

/// Tasks per run (also used by `spawn_remote`).
pub(super) fn n(c: Cfg) -> u64 {
    c.size(1_000_000, 20_000)
}

/// The figure of a count-down run named `name` (also used by `spawn_remote`).
pub(super) fn counted_down(
    name: &str,
    took: std::time::Duration,
    n: u64,
    left: &AtomicUsize,
) -> Figure {
    let left = left.load(Ordering::Acquire);
    assert_eq!(left, 0, "{name}: {left} tasks did not count down");
    Figure {
        value: per(took, n),
        unit: "ns/task",
        answer: format!("{n} counted down"),
        extra: Vec::new(),
    }
}

pub fn ours(c: Cfg) -> Figure {
    let n = n(c);
    ours_run(c.procs, move || {
        let left = Arc::new(AtomicUsize::new(n as usize));
        let wg = Arc::new(goroutine::sync::WaitGroup::new());
        wg.add(n as isize);
        let start = Instant::now();
        for _ in 0..n {
            let (left, wg) = (left.clone(), wg.clone());
            goroutine::go(move || {
                left.fetch_sub(1, Ordering::AcqRel);
                wg.done();
            });
        }
        wg.wait();
        counted_down("spawn", start.elapsed(), n, &left)
    })
}

pub fn tokio(c: Cfg) -> Figure {
    let n = n(c);
    tokio_run(c.procs, async move {
        let left = Arc::new(AtomicUsize::new(n as usize));
        let done = Arc::new(tokio::sync::Notify::new());
        let start = Instant::now();
        for _ in 0..n {
            let (left, done) = (left.clone(), done.clone());
            tokio::spawn(async move {
                if left.fetch_sub(1, Ordering::AcqRel) == 1 {
                    done.notify_one();
                }
            });
        }
        done.notified().await;
        counted_down("spawn", start.elapsed(), n, &left)
    })
}

pub fn may(c: Cfg) -> Figure {
    let n = n(c);
    super::may_run(c.procs, move || {
        let left = Arc::new(AtomicUsize::new(n as usize));
        let wg = may::sync::WaitGroup::new();
        let start = Instant::now();
        for _ in 0..n {
            let (left, wg) = (left.clone(), wg.clone());
            super::may_go(move || {
                left.fetch_sub(1, Ordering::AcqRel);
                drop(wg);
            });
        }
        wg.wait();
        counted_down("spawn", start.elapsed(), n, &left)
    })
}

pub fn threads(c: Cfg) -> Figure {
    super::pin_threads(c.procs);
    let n = n(c).min(100_000);
    let left = Arc::new(AtomicUsize::new(n as usize));
    let pair = Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
    let start = Instant::now();
    for _ in 0..n {
        let (left, pair) = (left.clone(), pair.clone());
        std::thread::spawn(move || {
            if left.fetch_sub(1, Ordering::AcqRel) == 1 {
                *pair.0.lock().unwrap() = true;
                pair.1.notify_one();
            }
        });
    }
    let mut done = pair.0.lock().unwrap();
    while !*done {
        done = pair.1.wait(done).unwrap();
    }
    drop(done);
    counted_down("spawn", start.elapsed(), n, &left)
}

pub fn go(c: Cfg) -> (&'static str, Vec<String>) {
    ("spawn", vec!["1".into(), n(c).to_string()])
}
