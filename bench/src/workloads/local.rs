//! `local`: the cost of one goroutine-local access. One goroutine per
//! worker each increments its own counter K times (10M; quick 200K)
//! through the runtime's per-task storage: ours `goroutine::local!`, tokio
//! `task_local!`, may `coroutine_local!`, OS threads `thread_local!`. ns per
//! access: the CPU time of the worker's thread over its loop / K, averaged
//! over the workers (the loops make no runtime call, so each stays on its
//! thread; CPU time, unlike wall time, does not count the time a loaded
//! machine keeps the thread off the CPU). Row `.thread_local`:
//! ours' goroutines doing the same through a std `thread_local!` (which may
//! not be held across a runtime call: docs/soundness.md), the figure
//! `goroutine::local!` is meant to stay within a few ns of.
//!
//! Each access reads and writes the value in memory (`black_box` on the
//! read keeps the compiler from folding the loop into one add); the
//! storage's address may be hoisted out of the loop where the compiler can
//! (std's `thread_local!`), as it is in real code.

use std::cell::Cell;
use std::hint::black_box;

use super::{ours_run, tokio_run, Cfg, Extra, Figure};

fn k(c: Cfg) -> u64 {
    c.size(10_000_000, 200_000)
}

fn figure(runs: &[(u64, f64)], k: u64) -> Figure {
    let total: u64 = runs.iter().map(|r| r.0).sum();
    assert_eq!(total, runs.len() as u64 * k, "local: wrong count");
    let ns = runs.iter().map(|r| r.1).sum::<f64>() / runs.len() as f64;
    Figure {
        value: ns / k as f64,
        unit: "ns/access",
        answer: format!("{total} accesses"),
        extra: Vec::new(),
    }
}

/// CPU time of the calling thread, in ns.
fn thread_cpu_ns() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we own.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64
}

/// Runs `f(k)` (a loop without runtime calls) and returns its answer and
/// the thread CPU time it took.
fn timed(k: u64, f: impl FnOnce(u64) -> u64) -> (u64, f64) {
    let start = thread_cpu_ns();
    let n = f(k);
    (n, thread_cpu_ns() - start)
}

goroutine::local! {
    static OURS: Cell<u64> = const { Cell::new(0) };
}

thread_local! {
    static STD: Cell<u64> = const { Cell::new(0) };
}

/// K increments through `goroutine::local!`; returns the final count.
#[inline(never)]
fn count_local(k: u64) -> u64 {
    for _ in 0..k {
        OURS.with(|c| c.set(black_box(c.get()) + 1));
    }
    OURS.get()
}

/// K increments through `thread_local!` (no runtime call in between, so
/// the goroutine stays on its thread); returns the count.
#[inline(never)]
fn count_std(k: u64) -> u64 {
    STD.with(|c| c.set(0));
    for _ in 0..k {
        STD.with(|c| c.set(black_box(c.get()) + 1));
    }
    STD.with(Cell::get)
}

/// Runs `f(k)` on one goroutine per worker, started together.
fn ours_round(procs: usize, k: u64, f: fn(u64) -> u64) -> Vec<(u64, f64)> {
    let (start_tx, start_rx) = goroutine::chan::<()>(0);
    let hs: Vec<_> = (0..procs)
        .map(|_| {
            let rx = start_rx.clone();
            goroutine::go(move || {
                let _ = rx.recv();
                timed(k, f)
            })
        })
        .collect();
    drop(start_tx);
    hs.into_iter().map(|h| h.join().unwrap()).collect()
}

pub fn ours(c: Cfg) -> Figure {
    let k = k(c);
    let procs = c.procs;
    ours_run(procs, move || {
        let mut f = figure(&ours_round(procs, k, count_local), k);
        let std = figure(&ours_round(procs, k, count_std), k);
        f.extra.push(Extra {
            name: "thread_local",
            value: std.value,
            unit: "ns/access",
        });
        f
    })
}

tokio::task_local! {
    static TOKIO: Cell<u64>;
}

pub fn tokio(c: Cfg) -> Figure {
    let k = k(c);
    let procs = c.procs;
    tokio_run(procs, async move {
        let hs: Vec<_> = (0..procs)
            .map(|_| {
                tokio::spawn(TOKIO.scope(Cell::new(0), async move {
                    timed(k, |k| {
                        for _ in 0..k {
                            TOKIO.with(|c| c.set(black_box(c.get()) + 1));
                        }
                        TOKIO.with(Cell::get)
                    })
                }))
            })
            .collect();
        let mut runs = Vec::new();
        for h in hs {
            runs.push(h.await.unwrap());
        }
        figure(&runs, k)
    })
}

may::coroutine_local! {
    static MAY: Cell<u64> = Cell::new(0)
}

pub fn may(c: Cfg) -> Figure {
    let k = k(c);
    let procs = c.procs;
    super::may_run(procs, move || {
        let hs: Vec<_> = (0..procs)
            .map(|_| {
                super::may_go(move || {
                    timed(k, |k| {
                        for _ in 0..k {
                            MAY.with(|c| c.set(black_box(c.get()) + 1));
                        }
                        MAY.with(Cell::get)
                    })
                })
            })
            .collect();
        let runs: Vec<_> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        figure(&runs, k)
    })
}

pub fn threads(c: Cfg) -> Figure {
    super::pin_threads(c.procs);
    let k = k(c);
    let hs: Vec<_> = (0..c.procs)
        .map(|_| std::thread::spawn(move || timed(k, count_std)))
        .collect();
    let runs: Vec<_> = hs.into_iter().map(|h| h.join().unwrap()).collect();
    figure(&runs, k)
}
