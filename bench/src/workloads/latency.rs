//! Helpers shared by the latency workloads (`timers`, `hog_fairness`,
//! `latency_*`) and `syscalls`: lateness samples and their percentiles, and
//! the thread count of this process from /proc/self/status.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A lateness slot that nobody filled (its goroutine never woke).
pub const NEVER: i64 = i64::MIN;

/// `n` lateness slots, all [`NEVER`].
pub fn slots(n: u64) -> Vec<AtomicI64> {
    (0..n).map(|_| AtomicI64::new(NEVER)).collect()
}

/// How much longer than `asked` the wait `took`, in ns (negative: early).
pub fn lateness_ns(took: Duration, asked: Duration) -> i64 {
    took.as_nanos() as i64 - asked.as_nanos() as i64
}

/// Nearest-rank percentile `p` (0 < p <= 100) of sorted values (the same
/// rule as the Go peers: the value at rank ceil(p/100 * n)).
pub fn percentile(sorted: &[i64], p: f64) -> i64 {
    assert!(!sorted.is_empty(), "percentile of nothing");
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// p50, p99 and max of a set of lateness samples, in ms.
#[derive(Debug, PartialEq)]
pub struct Summary {
    pub n: usize,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

/// Checks the samples of `what` (every one filled, none early) and
/// summarizes them; panics naming what is wrong.
pub fn summarize(what: &str, samples: &[i64]) -> Summary {
    assert!(!samples.is_empty(), "{what}: no samples");
    let never = samples.iter().filter(|&&s| s == NEVER).count();
    assert_eq!(never, 0, "{what}: {never} of {} never woke", samples.len());
    let mut v = samples.to_vec();
    v.sort_unstable();
    assert!(v[0] >= 0, "{what}: woke {} ns early", -v[0]);
    let ms = |ns: i64| ns as f64 / 1e6;
    Summary {
        n: v.len(),
        p50: ms(percentile(&v, 50.0)),
        p99: ms(percentile(&v, 99.0)),
        max: ms(*v.last().unwrap()),
    }
}

/// The values of the slots.
pub fn collect(slots: &[AtomicI64]) -> Vec<i64> {
    slots.iter().map(|s| s.load(Ordering::Acquire)).collect()
}

/// The `Threads:` line of a /proc/<pid>/status text.
pub fn parse_threads(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
}

/// OS threads of this process now.
pub fn threads_now() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    parse_threads(&s).expect("no Threads: line in /proc/self/status")
}

/// Samples the thread count every 2 ms from a thread of its own (not
/// counted) until [`ThreadSampler::peak`].
pub struct ThreadSampler {
    stop: Arc<AtomicBool>,
    h: std::thread::JoinHandle<u64>,
}

impl ThreadSampler {
    pub fn start() -> ThreadSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let h = std::thread::spawn(move || {
            let mut peak = 0;
            while !s.load(Ordering::Acquire) {
                peak = peak.max(threads_now());
                std::thread::sleep(Duration::from_millis(2));
            }
            peak.max(threads_now())
        });
        ThreadSampler { stop, h }
    }

    /// The most threads seen, the sampler itself not counted.
    pub fn peak(self) -> u64 {
        self.stop.store(true, Ordering::Release);
        self.h.join().expect("thread sampler") - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles() {
        let v: Vec<i64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), 50);
        assert_eq!(percentile(&v, 99.0), 99);
        assert_eq!(percentile(&v, 100.0), 100);
        assert_eq!(percentile(&[7], 99.0), 7);
        assert_eq!(percentile(&[1, 2, 3], 50.0), 2);
        assert_eq!(percentile(&[1, 2, 3], 99.0), 3);
        assert_eq!(percentile(&[1, 2, 3, 4], 50.0), 2);
    }

    #[test]
    fn summaries() {
        let mut v: Vec<i64> = (0..1000).map(|i| i * 1000).collect();
        v.reverse();
        let s = summarize("t", &v);
        assert_eq!(s.n, 1000);
        assert_eq!(s.p50, 0.499);
        assert_eq!(s.p99, 0.989);
        assert_eq!(s.max, 0.999);
    }

    #[test]
    #[should_panic(expected = "t: woke 5 ns early")]
    fn early() {
        summarize("t", &[3, -5, 10]);
    }

    #[test]
    #[should_panic(expected = "t: 1 of 3 never woke")]
    fn never_woke() {
        summarize("t", &[3, NEVER, 10]);
    }

    #[test]
    fn lateness() {
        let ms = Duration::from_millis;
        assert_eq!(lateness_ns(ms(3), ms(1)), 2_000_000);
        assert_eq!(lateness_ns(ms(1), ms(3)), -2_000_000);
        let s = slots(2);
        s[1].store(4, Ordering::Release);
        assert_eq!(collect(&s), [NEVER, 4]);
    }

    #[test]
    fn thread_counts() {
        let status = "Name:\tbench\nTgid:\t12\nThreads:\t105\nSigQ:\t0/1\n";
        assert_eq!(parse_threads(status), Some(105));
        assert_eq!(parse_threads("Name:\tx\n"), None);
        assert!(threads_now() >= 1);
        let s = ThreadSampler::start();
        let hs: Vec<_> = (0..3)
            .map(|_| std::thread::spawn(|| std::thread::sleep(Duration::from_millis(30))))
            .collect();
        std::thread::sleep(Duration::from_millis(15));
        let peak = s.peak();
        hs.into_iter().for_each(|h| h.join().unwrap());
        // The test thread and the 3 sleepers at least (the harness may run
        // other tests beside).
        assert!(peak >= 4, "{peak}");
    }
}
