//! `parked`: 100,000 goroutines (quick 10,000) each blocked on a receive
//! from one shared channel; the figure is the growth of resident memory
//! (from /proc/self/statm) per parked goroutine, in bytes. The answer also
//! carries spawn+park and wake-all times (ns per goroutine). Wake-up: the
//! channel is closed (tokio: a watch channel's send; may: the last sender
//! dropped).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::{ours_run, per, tokio_run, Cfg, Figure};

fn n(c: Cfg) -> u64 {
    c.size(100_000, 10_000)
}

/// Resident bytes of this process, from the OS.
pub fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("statm");
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    // SAFETY: sysconf has no preconditions.
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64
}

struct Times {
    rss: u64,
    park: std::time::Duration,
    wake: std::time::Duration,
}

fn figure(n: u64, woke: u64, t: Times) -> Figure {
    assert_eq!(woke, n, "parked: not every goroutine woke");
    Figure {
        value: t.rss as f64 / n as f64,
        unit: "B/parked",
        answer: format!(
            "{n} woke; spawn+park {:.0} ns, wake {:.0} ns per goroutine",
            per(t.park, n),
            per(t.wake, n)
        ),
    }
}

/// Yields (through `yield_now`) until `count` reaches `n`.
fn wait_for(count: &AtomicU64, n: u64, yield_now: impl Fn()) {
    while count.load(Ordering::Acquire) < n {
        yield_now();
    }
}

pub fn ours(c: Cfg) -> Figure {
    let n = n(c);
    ours_run(c.procs, move || {
        let parked = Arc::new(AtomicU64::new(0));
        let (tx, rx) = goroutine::chan::<()>(0);
        let before = rss_bytes();
        let start = Instant::now();
        let hs: Vec<_> = (0..n)
            .map(|_| {
                let (rx, parked) = (rx.clone(), parked.clone());
                goroutine::go(move || {
                    parked.fetch_add(1, Ordering::AcqRel);
                    assert!(rx.recv().is_err(), "parked: got a value");
                    1u64
                })
            })
            .collect();
        wait_for(&parked, n, goroutine::yield_now);
        let park = start.elapsed();
        let rss = rss_bytes().saturating_sub(before);
        let start = Instant::now();
        drop(tx);
        let woke = hs.into_iter().map(|h| h.join().unwrap()).sum();
        figure(
            n,
            woke,
            Times {
                rss,
                park,
                wake: start.elapsed(),
            },
        )
    })
}

pub fn tokio(c: Cfg) -> Figure {
    let n = n(c);
    tokio_run(c.procs, async move {
        let parked = Arc::new(AtomicU64::new(0));
        let (tx, rx) = tokio::sync::watch::channel(false);
        let before = rss_bytes();
        let start = Instant::now();
        let hs: Vec<_> = (0..n)
            .map(|_| {
                let (mut rx, parked) = (rx.clone(), parked.clone());
                tokio::spawn(async move {
                    parked.fetch_add(1, Ordering::AcqRel);
                    rx.changed().await.expect("parked: sender gone");
                    1u64
                })
            })
            .collect();
        while parked.load(Ordering::Acquire) < n {
            tokio::task::yield_now().await;
        }
        let park = start.elapsed();
        let rss = rss_bytes().saturating_sub(before);
        let start = Instant::now();
        tx.send(true).expect("parked: no receivers");
        let mut woke = 0;
        for h in hs {
            woke += h.await.unwrap();
        }
        figure(
            n,
            woke,
            Times {
                rss,
                park,
                wake: start.elapsed(),
            },
        )
    })
}

pub fn may(c: Cfg) -> Figure {
    let n = n(c);
    super::may_run(c.procs, move || {
        let parked = Arc::new(AtomicU64::new(0));
        let (tx, rx) = may::sync::mpmc::channel::<()>();
        let before = rss_bytes();
        let start = Instant::now();
        let hs: Vec<_> = (0..n)
            .map(|_| {
                let (rx, parked) = (rx.clone(), parked.clone());
                super::may_go(move || {
                    parked.fetch_add(1, Ordering::AcqRel);
                    assert!(rx.recv().is_err(), "parked: got a value");
                    1u64
                })
            })
            .collect();
        // A yield loop starves the spawned coroutines on one may worker.
        wait_for(&parked, n, || {
            may::coroutine::sleep(std::time::Duration::from_micros(100))
        });
        let park = start.elapsed();
        let rss = rss_bytes().saturating_sub(before);
        let start = Instant::now();
        drop(tx);
        let woke = hs.into_iter().map(|h| h.join().unwrap()).sum();
        figure(
            n,
            woke,
            Times {
                rss,
                park,
                wake: start.elapsed(),
            },
        )
    })
}

pub fn go(c: Cfg) -> (&'static str, Vec<String>) {
    ("parked", vec![n(c).to_string()])
}
