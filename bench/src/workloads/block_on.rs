//! `block_on`: the bridge from goroutines to futures.
//!
//! - `block_on_ready`: `block_on` of an already-ready future, 1M times
//!   (quick 100K), from a goroutine (ours) and from a plain thread (tokio's
//!   `Handle::block_on`); ns per call.
//! - `block_on_wake`: a cross-thread wake round trip, 100K times (quick
//!   10K): a plain thread wakes a task that waits in `block_on` (ours: a
//!   goroutine on `recv_async`; tokio: a task awaiting an mpsc), and the
//!   task answers; ns per round trip. Both directions are channels of
//!   capacity 1 for both runtimes (tokio's mpsc has no capacity 0), so the
//!   thread's send never waits for the task to take the value.
//!
//! may has no `block_on`; Go has no futures.

use std::hint::black_box;
use std::time::Instant;

use super::{ours_run, per, Cfg, Figure};

fn figure(took: std::time::Duration, n: u64, unit: &'static str, sum: u64, want: u64) -> Figure {
    assert_eq!(sum, want, "block_on: wrong answer");
    Figure {
        value: per(took, n),
        unit,
        answer: format!("sum {sum}"),
        extra: Vec::new(),
    }
}

pub fn ready_ours(c: Cfg) -> Figure {
    let n = c.size(1_000_000, 100_000);
    ours_run(c.procs, move || {
        let start = Instant::now();
        let mut sum = 0u64;
        for i in 0..n {
            sum += goroutine::block_on(async move { black_box(i) });
        }
        figure(start.elapsed(), n, "ns/call", sum, n * (n - 1) / 2)
    })
}

pub fn ready_tokio(c: Cfg) -> Figure {
    let n = c.size(1_000_000, 100_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(c.procs)
        .build()
        .expect("tokio runtime");
    let h = rt.handle().clone();
    let start = Instant::now();
    let mut sum = 0u64;
    for i in 0..n {
        sum += h.block_on(async move { black_box(i) });
    }
    figure(start.elapsed(), n, "ns/call", sum, n * (n - 1) / 2)
}

pub fn wake_ours(c: Cfg) -> Figure {
    let n = c.size(100_000, 10_000);
    ours_run(c.procs, move || {
        let (ping_tx, ping_rx) = goroutine::chan::<u64>(1);
        let (pong_tx, pong_rx) = goroutine::chan::<u64>(1);
        let echo = goroutine::go(move || {
            let mut sum = 0;
            // Each receive parks in block_on until the thread's send wakes it.
            while let Ok(v) = goroutine::block_on(ping_rx.recv_async()) {
                sum += v;
                pong_tx.send(v).unwrap();
            }
            sum
        });
        let start = Instant::now();
        let thread = std::thread::spawn(move || {
            for i in 0..n {
                ping_tx.send(i).unwrap();
                assert_eq!(pong_rx.recv().unwrap(), i);
            }
        });
        // A std join blocks the OS thread: hand the P off meanwhile (with
        // one P the echo goroutine would never run otherwise).
        goroutine::syscall_blocking(|| thread.join()).unwrap();
        let sum = echo.join().unwrap();
        figure(start.elapsed(), n, "ns/round trip", sum, n * (n - 1) / 2)
    })
}

pub fn wake_tokio(c: Cfg) -> Figure {
    let n = c.size(100_000, 10_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(c.procs)
        .build()
        .expect("tokio runtime");
    let (ping_tx, mut ping_rx) = tokio::sync::mpsc::channel::<u64>(1);
    let (pong_tx, mut pong_rx) = tokio::sync::mpsc::channel::<u64>(1);
    let echo = rt.spawn(async move {
        let mut sum = 0;
        while let Some(v) = ping_rx.recv().await {
            sum += v;
            pong_tx.send(v).await.unwrap();
        }
        sum
    });
    let start = Instant::now();
    let thread = std::thread::spawn(move || {
        for i in 0..n {
            ping_tx.blocking_send(i).unwrap();
            assert_eq!(pong_rx.blocking_recv().unwrap(), i);
        }
    });
    thread.join().unwrap();
    let sum = rt.block_on(echo).unwrap();
    figure(start.elapsed(), n, "ns/round trip", sum, n * (n - 1) / 2)
}
