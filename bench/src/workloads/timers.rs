//! `timers`: 100,000 goroutines (quick 10,000), spawned from one, goroutine
//! i sleeping 1 s + (i mod 1000) ms (quick: 100 ms + (i mod 100) ms). Each
//! takes the time just before its sleep and just after; its oversleep is
//! the difference less what it asked for. The figure is the p99 oversleep
//! (ms; nearest rank), with rows `timers.p50` and `timers.max`; peak RSS is
//! the table's. Checked: every sleeper woke, none early. Ours:
//! `goroutine::time::sleep`; Go: `time.Sleep`; tokio: `tokio::time::sleep`
//! (a runtime with the time driver enabled); may: `may::coroutine::sleep`
//! (its stack mappings fail from ~65,000 coroutines on, as in `parked`).
//!
//! `timers_churn`: one goroutine keeps 1,000 timers pending (1 h) and does
//! 333,334 rounds (quick 33,334) of start, reset, stop on a fresh timer, so
//! about 1M operations (quick 100K); ns per operation. Checked: every reset
//! and stop found its timer pending, and none of the 1,000 fired. Ours:
//! `Timer::new`, `reset`, `stop`; Go: `time.NewTimer`, `Reset`, `Stop`;
//! tokio: `tokio::time::sleep` boxed and polled once (tokio registers a
//! timer only on its first poll), `Sleep::reset`, and drop (tokio's only
//! way to cancel a timer); may has no timer object (only
//! `coroutine::sleep` and timeouts on its blocking calls).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::latency::{collect, lateness_ns, slots, summarize};
use super::{ours_run, per, Cfg, Extra, Figure};

/// Sleepers, base sleep (ms) and the modulus of the spread (ms).
#[derive(Clone, Copy)]
struct Plan {
    n: u64,
    base_ms: u64,
    spread: u64,
}

impl Plan {
    fn sleep(&self, i: u64) -> Duration {
        Duration::from_millis(self.base_ms + i % self.spread)
    }
}

fn plan(c: Cfg) -> Plan {
    Plan {
        n: c.size(100_000, 10_000),
        base_ms: c.size(1000, 100),
        spread: c.size(1000, 100),
    }
}

fn figure(samples: &[i64]) -> Figure {
    let s = summarize("timers", samples);
    Figure {
        value: s.p99,
        unit: "ms oversleep p99",
        answer: format!("{} sleepers woke, none early", s.n),
        extra: vec![
            Extra {
                name: "p50",
                value: s.p50,
                unit: "ms",
            },
            Extra {
                name: "max",
                value: s.max,
                unit: "ms",
            },
        ],
    }
}

pub fn ours(c: Cfg) -> Figure {
    let p = plan(c);
    ours_run(c.procs, move || {
        let late = Arc::new(slots(p.n));
        let wg = Arc::new(goroutine::sync::WaitGroup::new());
        wg.add(p.n as isize);
        for i in 0..p.n {
            let (late, wg) = (late.clone(), wg.clone());
            goroutine::go(move || {
                let d = p.sleep(i);
                let t = Instant::now();
                goroutine::time::sleep(d);
                late[i as usize].store(lateness_ns(t.elapsed(), d), Ordering::Release);
                wg.done();
            });
        }
        wg.wait();
        figure(&collect(&late))
    })
}

pub fn tokio(c: Cfg) -> Figure {
    let p = plan(c);
    super::tokio_run_timed(c.procs, async move {
        let late = Arc::new(slots(p.n));
        let hs: Vec<_> = (0..p.n)
            .map(|i| {
                let late = late.clone();
                tokio::spawn(async move {
                    let d = p.sleep(i);
                    let t = Instant::now();
                    tokio::time::sleep(d).await;
                    late[i as usize].store(lateness_ns(t.elapsed(), d), Ordering::Release);
                })
            })
            .collect();
        for h in hs {
            h.await.expect("timers: sleeper panicked");
        }
        figure(&collect(&late))
    })
}

pub fn may(c: Cfg) -> Figure {
    let p = plan(c);
    super::may_run(c.procs, move || {
        let late = Arc::new(slots(p.n));
        let hs: Vec<_> = (0..p.n)
            .map(|i| {
                let late = late.clone();
                super::may_go(move || {
                    let d = p.sleep(i);
                    let t = Instant::now();
                    may::coroutine::sleep(d);
                    late[i as usize].store(lateness_ns(t.elapsed(), d), Ordering::Release);
                })
            })
            .collect();
        for h in hs {
            h.join().expect("timers: sleeper panicked");
        }
        figure(&collect(&late))
    })
}

pub fn go(c: Cfg) -> (&'static str, Vec<String>) {
    let p = plan(c);
    (
        "timers",
        vec![p.n.to_string(), p.base_ms.to_string(), p.spread.to_string()],
    )
}

/// Timers kept pending during the churn.
const BACKGROUND: u64 = 1000;
const HOUR: Duration = Duration::from_secs(3600);

fn rounds(c: Cfg) -> u64 {
    c.size(333_334, 33_334)
}

/// A long timeout, different per round (a timer heap sorts them).
fn far(i: u64) -> Duration {
    HOUR + Duration::from_micros(i % 1000)
}

/// The figure of `rounds` rounds of 3 operations; `pending` counts the
/// resets and stops that found their timer pending, `background` the
/// background timers still pending at the end.
fn churn_figure(took: Duration, rounds: u64, pending: u64, background: u64) -> Figure {
    assert_eq!(
        pending,
        2 * rounds,
        "timers_churn: a reset or stop found its timer not pending"
    );
    assert_eq!(
        background, BACKGROUND,
        "timers_churn: a background timer fired"
    );
    Figure {
        value: per(took, 3 * rounds),
        unit: "ns/op",
        answer: format!("{} ops, all timers pending until stopped", 3 * rounds),
        extra: Vec::new(),
    }
}

pub fn churn_ours(c: Cfg) -> Figure {
    let n = rounds(c);
    ours_run(c.procs, move || {
        use goroutine::time::Timer;
        let bg: Vec<Timer> = (0..BACKGROUND).map(|i| Timer::new(far(i))).collect();
        let mut pending = 0;
        let start = Instant::now();
        for i in 0..n {
            let t = Timer::new(far(i));
            pending += t.reset(far(i + 1) + HOUR) as u64;
            pending += t.stop() as u64;
        }
        let took = start.elapsed();
        let still = bg
            .iter()
            .filter(|t| t.c().try_recv().is_err() && t.stop())
            .count() as u64;
        churn_figure(took, n, pending, still)
    })
}

pub fn churn_tokio(c: Cfg) -> Figure {
    use std::future::{poll_fn, Future};
    use std::pin::Pin;
    use std::task::Poll;
    use tokio::time::Sleep;

    /// Polls once (which registers the timer); true if still pending.
    async fn poll_once(s: &mut Pin<Box<Sleep>>) -> bool {
        poll_fn(|cx| Poll::Ready(s.as_mut().poll(cx).is_pending())).await
    }

    let n = rounds(c);
    super::tokio_run_timed(c.procs, async move {
        let mut bg = Vec::new();
        for i in 0..BACKGROUND {
            let mut s = Box::pin(tokio::time::sleep(far(i)));
            assert!(poll_once(&mut s).await, "timers_churn: fired at once");
            bg.push(s);
        }
        let mut pending = 0;
        let start = Instant::now();
        for i in 0..n {
            let mut s = Box::pin(tokio::time::sleep(far(i)));
            let armed = poll_once(&mut s).await;
            s.as_mut()
                .reset(tokio::time::Instant::now() + far(i + 1) + HOUR);
            pending += armed as u64 + !s.is_elapsed() as u64;
            drop(s);
        }
        let took = start.elapsed();
        let mut still = 0;
        for s in bg.iter_mut() {
            still += (!s.is_elapsed() && poll_once(s).await) as u64;
        }
        churn_figure(took, n, pending, still)
    })
}

pub fn churn_go(c: Cfg) -> (&'static str, Vec<String>) {
    ("timers_churn", vec![rounds(c).to_string()])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans() {
        let full = plan(Cfg {
            procs: 1,
            quick: false,
        });
        assert_eq!(full.n, 100_000);
        assert_eq!(full.sleep(0), Duration::from_secs(1));
        assert_eq!(full.sleep(1999), Duration::from_millis(1999));
        let quick = plan(Cfg {
            procs: 1,
            quick: true,
        });
        assert_eq!(quick.sleep(250), Duration::from_millis(150));
    }

    #[test]
    fn figures() {
        let samples: Vec<i64> = (1..=100).map(|i| i * 1_000_000).collect();
        let f = figure(&samples);
        assert_eq!(f.value, 99.0);
        assert_eq!(f.extra[0].value, 50.0);
        assert_eq!(f.extra[1].value, 100.0);
        let f = churn_figure(Duration::from_micros(300), 100, 200, BACKGROUND);
        assert_eq!(f.value, 1000.0);
    }

    #[test]
    #[should_panic(expected = "timers: woke 1 ns early")]
    fn early_sleeper() {
        figure(&[5, -1]);
    }

    #[test]
    #[should_panic(expected = "found its timer not pending")]
    fn fired_timer() {
        churn_figure(Duration::ZERO, 100, 199, BACKGROUND);
    }

    #[test]
    #[should_panic(expected = "a background timer fired")]
    fn fired_background() {
        churn_figure(Duration::ZERO, 100, 200, BACKGROUND - 1);
    }
}
