//! `parked` and `parked_1m`: 100,000 (quick 10,000) and 1,000,000 (quick
//! 100,000) goroutines, spawned from one, each blocked on a receive from one
//! shared channel. The figure is the growth of resident memory plus page
//! tables (`VmRSS + VmPTE` from /proc/self/status) per parked goroutine, in
//! bytes, once all have parked: a runtime that spreads its stacks over
//! address space pays for the page tables that map them, which RSS alone
//! does not show.
//! Two secondary figures of the same run get rows of their own:
//! `spawn_park`, ns per goroutine from the first spawn until all have
//! parked, and `wake_all`, ms from the wake-up until every goroutine has
//! run to its end; the answer also gives the wake-up in ns per goroutine.
//! Wake-up: the channel is closed (tokio: a watch channel's send; may: the
//! last sender dropped). The spawner keeps no handles: the goroutines count
//! themselves parked and woken in shared atomics, and the last one to wake
//! signals a WaitGroup (ours, Go) or a Notify (tokio); may has neither, so
//! it keeps and joins its `JoinHandle`s (counted in its figure). may maps a
//! stack per coroutine and cannot go beyond vm.max_map_count (65,530 by
//! default): it fails at 100,000 and more, and its cell shows the error.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::{ms, ours_run, per, tokio_run, Cfg, Extra, Figure};

/// Goroutines of `parked`: full and quick.
pub const SMALL: (u64, u64) = (100_000, 10_000);
/// Goroutines of `parked_1m`: full and quick.
pub const BIG: (u64, u64) = (1_000_000, 100_000);

fn n(c: Cfg, (full, quick): (u64, u64)) -> u64 {
    c.size(full, quick)
}

/// Resident bytes of this process plus its page tables (`VmRSS + VmPTE`
/// from /proc/self/status).
pub fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    rss_pte_from_status(&status).expect("no VmRSS: line in /proc/self/status")
}

/// `VmRSS + VmPTE` in bytes from a /proc/<pid>/status text (`VmPTE` counts
/// as 0 where the kernel does not report it); `None` without `VmRSS`.
fn rss_pte_from_status(status: &str) -> Option<u64> {
    let kb = |key: &str| {
        status.lines().find_map(|l| {
            let v = l.strip_prefix(key)?.trim().strip_suffix("kB")?;
            v.trim().parse::<u64>().ok()
        })
    };
    Some((kb("VmRSS:")? + kb("VmPTE:").unwrap_or(0)) * 1024)
}

struct Times {
    rss: u64,
    park: std::time::Duration,
    wake: std::time::Duration,
}

fn figure(n: u64, woke: u64, t: Times) -> Figure {
    assert_eq!(woke, n, "parked: {woke} of {n} goroutines woke");
    Figure {
        value: t.rss as f64 / n as f64,
        unit: "B/parked",
        answer: format!(
            "{n} woke; spawn+park {:.0} ns, wake {:.0} ns per goroutine",
            per(t.park, n),
            per(t.wake, n)
        ),
        extra: vec![
            Extra {
                name: "spawn_park",
                value: per(t.park, n),
                unit: "ns/goroutine",
            },
            Extra {
                name: "wake_all",
                value: ms(t.wake),
                unit: "ms",
            },
        ],
    }
}

/// What the parked goroutines share (one `Arc` each): how many have parked
/// and woken, and what tells the spawner that all have woken (ours: a
/// WaitGroup, like Go's; tokio: a Notify). may has neither and joins.
struct Counts<W> {
    n: u64,
    parked: AtomicU64,
    woke: AtomicU64,
    all_woke: W,
}

impl<W> Counts<W> {
    fn new(n: u64, all_woke: W) -> Arc<Self> {
        Arc::new(Counts {
            n,
            parked: AtomicU64::new(0),
            woke: AtomicU64::new(0),
            all_woke,
        })
    }
}

/// Yields (through `yield_now`) until `count` reaches `n`.
fn wait_for(count: &AtomicU64, n: u64, yield_now: impl Fn()) {
    while count.load(Ordering::Acquire) < n {
        yield_now();
    }
}

pub fn ours(c: Cfg, size: (u64, u64)) -> Figure {
    let n = n(c, size);
    ours_run(c.procs, move || {
        let counts = Counts::new(n, goroutine::sync::WaitGroup::new());
        counts.all_woke.add(n as isize);
        let (tx, rx) = goroutine::chan::<()>(0);
        let before = rss_bytes();
        let start = Instant::now();
        for _ in 0..n {
            let (rx, counts) = (rx.clone(), counts.clone());
            goroutine::go(move || {
                counts.parked.fetch_add(1, Ordering::AcqRel);
                assert!(rx.recv().is_err(), "parked: got a value");
                counts.woke.fetch_add(1, Ordering::AcqRel);
                counts.all_woke.done();
            });
        }
        wait_for(&counts.parked, n, goroutine::yield_now);
        let park = start.elapsed();
        let rss = rss_bytes().saturating_sub(before);
        let start = Instant::now();
        drop(tx);
        counts.all_woke.wait();
        let woke = counts.woke.load(Ordering::Acquire);
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

pub fn tokio(c: Cfg, size: (u64, u64)) -> Figure {
    let n = n(c, size);
    tokio_run(c.procs, async move {
        let counts = Counts::new(n, tokio::sync::Notify::new());
        let (tx, rx) = tokio::sync::watch::channel(false);
        let before = rss_bytes();
        let start = Instant::now();
        for _ in 0..n {
            let (mut rx, counts) = (rx.clone(), counts.clone());
            tokio::spawn(async move {
                counts.parked.fetch_add(1, Ordering::AcqRel);
                rx.changed().await.expect("parked: sender gone");
                if counts.woke.fetch_add(1, Ordering::AcqRel) + 1 == counts.n {
                    counts.all_woke.notify_one();
                }
            });
        }
        while counts.parked.load(Ordering::Acquire) < n {
            tokio::task::yield_now().await;
        }
        let park = start.elapsed();
        let rss = rss_bytes().saturating_sub(before);
        let start = Instant::now();
        tx.send(true).expect("parked: no receivers");
        counts.all_woke.notified().await;
        let woke = counts.woke.load(Ordering::Acquire);
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

pub fn may(c: Cfg, size: (u64, u64)) -> Figure {
    let n = n(c, size);
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

pub fn go(c: Cfg, size: (u64, u64)) -> (&'static str, Vec<String>) {
    ("parked", vec![n(c, size).to_string()])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn figures() {
        let t = Times {
            rss: 4_000_000,
            park: Duration::from_millis(2),
            wake: Duration::from_millis(3),
        };
        let f = figure(1000, 1000, t);
        assert_eq!(f.value, 4000.0);
        assert_eq!(f.extra[0].name, "spawn_park");
        assert_eq!(f.extra[0].value, 2000.0);
        assert_eq!(f.extra[1].name, "wake_all");
        assert_eq!(f.extra[1].value, 3.0);
    }

    #[test]
    #[should_panic(expected = "999 of 1000 goroutines woke")]
    fn lost_goroutine() {
        let t = Times {
            rss: 0,
            park: Duration::ZERO,
            wake: Duration::ZERO,
        };
        figure(1000, 999, t);
    }

    #[test]
    fn rss_is_read() {
        assert!(rss_bytes() > 0);
    }

    #[test]
    fn rss_counts_page_tables() {
        let s = "Name:\tx\nVmRSS:\t    1000 kB\nRssAnon:\t 10 kB\nVmPTE:\t      24 kB\n";
        assert_eq!(rss_pte_from_status(s), Some(1024 * 1024));
        assert_eq!(rss_pte_from_status("VmRSS:\t 2 kB\n"), Some(2048));
        assert_eq!(rss_pte_from_status("VmPTE:\t 2 kB\n"), None);
    }
}
