//! `pingpong`: two goroutines bounce a value over a pair of unbuffered
//! channels, 2M round trips (quick 20,000; OS threads at most 100,000) after
//! 10,000 warm-up trips (quick: 1,000); ns per round trip. tokio:
//! bounded(1); may: its only channel, unbounded. The pair runs where the
//! scheduler puts it (at 2 workers usually the same one, as each side
//! blocks while the other runs); `pingpong_cross` forces the sides apart.

use std::time::Instant;

use super::{ours_run, per, tokio_run, Cfg, Figure};

pub(super) fn trips(c: Cfg) -> u64 {
    c.size(2_000_000, 20_000)
}

/// Warm-up round trips (stacks, the second worker).
pub(super) fn warm(c: Cfg) -> u64 {
    c.size(10_000, 1_000)
}

/// The figure of `n` timed round trips whose last value was `last` (also
/// used by `pingpong_cross`).
pub(super) fn figure(took: std::time::Duration, n: u64, last: u64) -> Figure {
    assert_eq!(last, n - 1, "pingpong: wrong last value");
    Figure {
        value: per(took, n),
        unit: "ns/round trip",
        answer: format!("{n} round trips"),
        extra: Vec::new(),
    }
}

pub fn ours(c: Cfg) -> Figure {
    let (n, warm) = (trips(c), warm(c));
    ours_run(c.procs, move || {
        let (ping_tx, ping_rx) = goroutine::chan::<u64>(0);
        let (pong_tx, pong_rx) = goroutine::chan::<u64>(0);
        let echo = goroutine::go(move || {
            for v in ping_rx {
                pong_tx.send(v).expect("pong");
            }
        });
        for i in 0..warm {
            ping_tx.send(i).expect("ping");
            pong_rx.recv().expect("pong");
        }
        let start = Instant::now();
        let mut last = 0;
        for i in 0..n {
            ping_tx.send(i).expect("ping");
            last = pong_rx.recv().expect("pong");
            assert_eq!(last, i, "pingpong: wrong value");
        }
        let took = start.elapsed();
        drop(ping_tx);
        echo.join().expect("echo");
        figure(took, n, last)
    })
}

pub fn tokio(c: Cfg) -> Figure {
    let (n, warm) = (trips(c), warm(c));
    tokio_run(c.procs, async move {
        let (ping_tx, mut ping_rx) = tokio::sync::mpsc::channel::<u64>(1);
        let (pong_tx, mut pong_rx) = tokio::sync::mpsc::channel::<u64>(1);
        let echo = tokio::spawn(async move {
            while let Some(v) = ping_rx.recv().await {
                pong_tx.send(v).await.expect("pong");
            }
        });
        for i in 0..warm {
            ping_tx.send(i).await.expect("ping");
            pong_rx.recv().await.expect("pong");
        }
        let start = Instant::now();
        let mut last = 0;
        for i in 0..n {
            ping_tx.send(i).await.expect("ping");
            last = pong_rx.recv().await.expect("pong");
            assert_eq!(last, i, "pingpong: wrong value");
        }
        let took = start.elapsed();
        drop(ping_tx);
        echo.await.expect("echo");
        figure(took, n, last)
    })
}

pub fn may(c: Cfg) -> Figure {
    let (n, warm) = (trips(c), warm(c));
    super::may_run(c.procs, move || {
        let (ping_tx, ping_rx) = may::sync::mpsc::channel::<u64>();
        let (pong_tx, pong_rx) = may::sync::mpsc::channel::<u64>();
        let echo = super::may_go(move || {
            for v in ping_rx {
                pong_tx.send(v).expect("pong");
            }
        });
        for i in 0..warm {
            ping_tx.send(i).expect("ping");
            pong_rx.recv().expect("pong");
        }
        let start = Instant::now();
        let mut last = 0;
        for i in 0..n {
            ping_tx.send(i).expect("ping");
            last = pong_rx.recv().expect("pong");
            assert_eq!(last, i, "pingpong: wrong value");
        }
        let took = start.elapsed();
        drop(ping_tx);
        echo.join().expect("echo");
        figure(took, n, last)
    })
}

pub fn threads(c: Cfg) -> Figure {
    super::pin_threads(c.procs);
    let (n, warm) = (trips(c).min(100_000), warm(c));
    let (ping_tx, ping_rx) = std::sync::mpsc::sync_channel::<u64>(0);
    let (pong_tx, pong_rx) = std::sync::mpsc::sync_channel::<u64>(0);
    let echo = std::thread::spawn(move || {
        for v in ping_rx {
            pong_tx.send(v).expect("pong");
        }
    });
    for i in 0..warm {
        ping_tx.send(i).expect("ping");
        pong_rx.recv().expect("pong");
    }
    let start = Instant::now();
    let mut last = 0;
    for i in 0..n {
        ping_tx.send(i).expect("ping");
        last = pong_rx.recv().expect("pong");
        assert_eq!(last, i, "pingpong: wrong value");
    }
    let took = start.elapsed();
    drop(ping_tx);
    echo.join().expect("echo");
    figure(took, n, last)
}

pub fn go(c: Cfg) -> (&'static str, Vec<String>) {
    ("pingpong", vec![trips(c).to_string()])
}
