//! `hog_fairness` (benchmarks.md #9), two parts in one run.
//!
//! 1. Go's `BenchmarkPingPongHog` (runtime/proc_test.go): a hog goroutine
//!    spins on `for { select { case <-stop: done <- true; return; default: } }`
//!    beside a ping-pong pair on unbuffered channels; 1M round trips
//!    (quick 50,000); the figure is ns per round trip. At 1 worker this is
//!    Go's benchmark (which sets GOMAXPROCS=1); at 2 the hog can have a
//!    worker of its own. The value passed is counted up at each hop; the
//!    last (2N) is checked. Ours mirrors Go's program line by line, its hog
//!    being `select! { recv(stop) -> _ => ..., default => {} }`; a `select!`
//!    is a preemption check in ours (sysmon asks a goroutine running > 10
//!    ms to yield at its next runtime call), whereas Go's non-blocking
//!    select is not, and Go preempts the hog asynchronously.
//! 2. P hogs (P = the worker count) spin until told to stop, beside a probe
//!    that sleeps 1 ms in a loop for 5 s (quick 0.3 s); rows
//!    `hog_fairness.probe_p99` and `hog_fairness.probe_max`: the probe's
//!    lateness (time slept less 1 ms; nearest-rank p99, and max; ms).
//!    Checked: the probe never woke early, and every hog spun. Go's hogs
//!    are plain tight loops (an atomic load of the stop flag and a count),
//!    preempted asynchronously; ours are the same plain loops inside
//!    `goroutine::preemptible` (asynchronous preemption by `SIGURG`, see
//!    docs/preemption.md): no preemption point in the loop.
//!
//! Peers: OS threads, the process pinned to P CPUs (the kernel preempts;
//! the probe is `std::thread::sleep`); the ping-pong is capped at 100,000
//! round trips (quick 5,000). tokio has no preemption; its hogs await
//! `task::coop::consume_budget()` each iteration, tokio's cooperative
//! budget (the task yields every 128 calls), the nearest it has to a
//! preemption point; its unbuffered channel is `mpsc::channel(1)` and the
//! stop signal a `watch`. may has neither preemption nor a budget: a
//! spinning coroutine keeps its worker for good (yielding each iteration
//! would be another workload), so n/a.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use goroutine::select;

use super::latency::{lateness_ns, summarize};
use super::{ours_run, per, Cfg, Extra, Figure};

fn trips(c: Cfg) -> u64 {
    c.size(1_000_000, 50_000)
}

fn probe_for(c: Cfg) -> Duration {
    Duration::from_millis(c.size(5000, 300))
}

const PROBE_SLEEP: Duration = Duration::from_millis(1);

/// What the two parts gave.
struct Outcome {
    took: Duration,
    trips: u64,
    last: u64,
    hog_spins: u64,
    /// The probe's lateness samples, ns.
    late: Vec<i64>,
    /// Iterations of each probe-part hog.
    hogs: Vec<u64>,
}

fn figure(o: Outcome) -> Figure {
    assert_eq!(o.last, 2 * o.trips, "hog_fairness: wrong ping-pong value");
    let never = o.hogs.iter().filter(|&&n| n == 0).count();
    assert_eq!(never, 0, "hog_fairness: {never} hogs never ran");
    let s = summarize("hog_fairness probe", &o.late);
    Figure {
        value: per(o.took, o.trips),
        unit: "ns/round trip",
        answer: format!(
            "{} round trips (hog spun {}); probe slept {} times, p50 {:.3} ms late",
            o.trips, o.hog_spins, s.n, s.p50
        ),
        extra: vec![
            Extra {
                name: "probe_p99",
                value: s.p99,
                unit: "ms",
            },
            Extra {
                name: "probe_max",
                value: s.max,
                unit: "ms",
            },
        ],
    }
}

/// What the probe part's hogs share.
#[derive(Clone, Default)]
struct Hogs {
    stop: Arc<AtomicBool>,
    started: Arc<AtomicU64>,
}

impl Hogs {
    /// A hog's loop: counts until stopped, calling `check` each iteration.
    fn spin(&self, check: impl Fn()) -> u64 {
        self.started.fetch_add(1, Ordering::AcqRel);
        let mut n = 0u64;
        while !self.stop.load(Ordering::Relaxed) {
            n += 1;
            check();
        }
        n
    }

    fn all_started(&self, p: usize) -> bool {
        self.started.load(Ordering::Acquire) >= p as u64
    }
}

/// The probe's loop: sleeps 1 ms through `sleep` until `dur` has passed.
fn probe(dur: Duration, sleep: impl Fn(Duration)) -> Vec<i64> {
    let start = Instant::now();
    let mut late = Vec::new();
    while start.elapsed() < dur {
        let t = Instant::now();
        sleep(PROBE_SLEEP);
        late.push(lateness_ns(t.elapsed(), PROBE_SLEEP));
    }
    late
}

pub fn ours(c: Cfg) -> Figure {
    let (n, procs, dur) = (trips(c), c.procs, probe_for(c));
    ours_run(procs, move || {
        use goroutine::chan;
        // Part 1: BenchmarkPingPongHog.
        let (stop_tx, stop) = chan::<bool>(0);
        let (done_tx, done) = chan::<u64>(0);
        {
            let (stop, done_tx) = (stop.clone(), done_tx.clone());
            goroutine::go(move || {
                let mut spins = 0;
                loop {
                    select! {
                        recv(stop) -> _ => {
                            done_tx.send(spins).unwrap();
                            return;
                        },
                        default => spins += 1,
                    }
                }
            });
        }
        let (ping_tx, ping) = chan::<u64>(0);
        let (pong_tx, pong) = chan::<u64>(0);
        {
            let (ping, pong_tx, done_tx) = (ping.clone(), pong_tx.clone(), done_tx.clone());
            goroutine::go(move || {
                for _ in 0..n {
                    pong_tx.send(ping.recv().unwrap() + 1).unwrap();
                }
                drop(stop_tx); // close(stop)
                done_tx.send(0).unwrap();
            });
        }
        {
            let (ping_tx, done_tx) = (ping_tx.clone(), done_tx.clone());
            goroutine::go(move || {
                for _ in 0..n {
                    ping_tx.send(pong.recv().unwrap() + 1).unwrap();
                }
                done_tx.send(0).unwrap();
            });
        }
        drop(pong_tx);
        let start = Instant::now();
        ping_tx.send(0).unwrap(); // start ping-pong
        assert!(stop.recv().is_err(), "hog_fairness: a value on stop");
        let took = start.elapsed();
        let last = ping.recv().unwrap(); // let the last ponger exit
        let hog_spins: u64 = (0..3).map(|_| done.recv().unwrap()).sum();

        // Part 2: P hogs and a probe.
        let hogs = Hogs::default();
        let hs: Vec<_> = (0..procs)
            .map(|_| {
                let h = hogs.clone();
                goroutine::go(move || goroutine::preemptible(|| h.spin(|| {})))
            })
            .collect();
        while !hogs.all_started(procs) {
            goroutine::time::sleep(PROBE_SLEEP);
        }
        let late = probe(dur, goroutine::time::sleep);
        hogs.stop.store(true, Ordering::Release);
        let hogs = hs.into_iter().map(|h| h.join().unwrap()).collect();
        figure(Outcome {
            took,
            trips: n,
            last,
            hog_spins,
            late,
            hogs,
        })
    })
}

pub fn tokio(c: Cfg) -> Figure {
    use tokio::sync::{mpsc, watch};
    use tokio::task::coop::consume_budget;
    let (n, procs, dur) = (trips(c), c.procs, probe_for(c));
    super::tokio_run_timed(procs, async move {
        // Part 1.
        let (stop_tx, mut stop) = watch::channel(false);
        let hog = {
            let stop = stop.clone();
            tokio::spawn(async move {
                let mut spins = 0u64;
                while !*stop.borrow() {
                    spins += 1;
                    consume_budget().await;
                }
                spins
            })
        };
        let (ping_tx, mut ping) = mpsc::channel::<u64>(1);
        let (pong_tx, mut pong) = mpsc::channel::<u64>(1);
        let a = tokio::spawn(async move {
            for _ in 0..n {
                let v = ping.recv().await.unwrap();
                pong_tx.send(v + 1).await.unwrap();
            }
            stop_tx.send(true).unwrap();
            ping // main takes the last value
        });
        let b = {
            let ping_tx = ping_tx.clone();
            tokio::spawn(async move {
                for _ in 0..n {
                    let v = pong.recv().await.unwrap();
                    ping_tx.send(v + 1).await.unwrap();
                }
            })
        };
        let start = Instant::now();
        ping_tx.send(0).await.unwrap();
        stop.wait_for(|s| *s).await.unwrap();
        let took = start.elapsed();
        let mut ping = a.await.unwrap();
        let last = ping.recv().await.unwrap();
        b.await.unwrap();
        let hog_spins = hog.await.unwrap();

        // Part 2.
        let hogs = Hogs::default();
        let hs: Vec<_> = (0..procs)
            .map(|_| {
                let h = hogs.clone();
                tokio::spawn(async move {
                    h.started.fetch_add(1, Ordering::AcqRel);
                    let mut n = 0u64;
                    while !h.stop.load(Ordering::Relaxed) {
                        n += 1;
                        consume_budget().await;
                    }
                    n
                })
            })
            .collect();
        while !hogs.all_started(procs) {
            tokio::time::sleep(PROBE_SLEEP).await;
        }
        let start = Instant::now();
        let mut late = Vec::new();
        while start.elapsed() < dur {
            let t = Instant::now();
            tokio::time::sleep(PROBE_SLEEP).await;
            late.push(lateness_ns(t.elapsed(), PROBE_SLEEP));
        }
        hogs.stop.store(true, Ordering::Release);
        let mut spins = Vec::new();
        for h in hs {
            spins.push(h.await.unwrap());
        }
        figure(Outcome {
            took,
            trips: n,
            last,
            hog_spins,
            late,
            hogs: spins,
        })
    })
}

pub fn threads(c: Cfg) -> Figure {
    use std::sync::mpsc::sync_channel;
    super::pin_threads(c.procs);
    let (n, procs, dur) = (trips(c).min(c.size(100_000, 5_000)), c.procs, probe_for(c));
    // Part 1.
    let stop = Arc::new(AtomicBool::new(false));
    let hog = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut spins = 0u64;
            while !stop.load(Ordering::Relaxed) {
                spins += 1;
            }
            spins
        })
    };
    let (ping_tx, ping) = sync_channel::<u64>(0);
    let (pong_tx, pong) = sync_channel::<u64>(0);
    let (stopped_tx, stopped) = sync_channel::<()>(0);
    let a = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            for _ in 0..n {
                pong_tx.send(ping.recv().unwrap() + 1).unwrap();
            }
            stop.store(true, Ordering::Release);
            drop(stopped_tx);
            ping
        })
    };
    let b = {
        let ping_tx = ping_tx.clone();
        std::thread::spawn(move || {
            for _ in 0..n {
                ping_tx.send(pong.recv().unwrap() + 1).unwrap();
            }
        })
    };
    let start = Instant::now();
    ping_tx.send(0).unwrap();
    assert!(stopped.recv().is_err(), "hog_fairness: a value on stop");
    let took = start.elapsed();
    let ping = a.join().unwrap();
    let last = ping.recv().unwrap();
    b.join().unwrap();
    let hog_spins = hog.join().unwrap();

    // Part 2.
    let hogs = Hogs::default();
    let hs: Vec<_> = (0..procs)
        .map(|_| {
            let h = hogs.clone();
            std::thread::spawn(move || h.spin(|| ()))
        })
        .collect();
    while !hogs.all_started(procs) {
        std::thread::sleep(PROBE_SLEEP);
    }
    let late = probe(dur, std::thread::sleep);
    hogs.stop.store(true, Ordering::Release);
    let hogs = hs.into_iter().map(|h| h.join().unwrap()).collect();
    figure(Outcome {
        took,
        trips: n,
        last,
        hog_spins,
        late,
        hogs,
    })
}

pub fn go(c: Cfg) -> (&'static str, Vec<String>) {
    (
        "hog_fairness",
        vec![trips(c).to_string(), probe_for(c).as_millis().to_string()],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome() -> Outcome {
        Outcome {
            took: Duration::from_millis(3),
            trips: 1000,
            last: 2000,
            hog_spins: 5,
            late: vec![2_000_000, 1_000_000, 3_000_000],
            hogs: vec![1, 2],
        }
    }

    #[test]
    fn figures() {
        let f = figure(outcome());
        assert_eq!(f.value, 3000.0);
        assert_eq!(f.extra[0].name, "probe_p99");
        assert_eq!(f.extra[0].value, 3.0);
        assert_eq!(f.extra[1].name, "probe_max");
        assert_eq!(f.extra[1].value, 3.0);
    }

    #[test]
    #[should_panic(expected = "wrong ping-pong value")]
    fn lost_hop() {
        figure(Outcome {
            last: 1999,
            ..outcome()
        });
    }

    #[test]
    #[should_panic(expected = "1 hogs never ran")]
    fn idle_hog() {
        figure(Outcome {
            hogs: vec![3, 0],
            ..outcome()
        });
    }

    #[test]
    #[should_panic(expected = "probe: woke 1 ns early")]
    fn early_probe() {
        figure(Outcome {
            late: vec![5, -1],
            ..outcome()
        });
    }

    #[test]
    fn probe_loop() {
        let late = probe(Duration::from_millis(5), std::thread::sleep);
        assert!(!late.is_empty());
        assert!(late.iter().all(|&l| l >= 0));
    }
}
