//! The per-P counters of the scheduler statistics: data of the P, so they
//! are defined here. The scheduler writes them and `runtime/stats.rs` sums
//! them; its note says who writes each counter and how (the P's owner only,
//! a relaxed load and store; `timers_fired` is the exception).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Per-P counters and gauges, written by the P's owner only (the note of
/// `runtime/stats.rs`, where they are summed).
/// On a cache line of its own so that readers do not disturb the P's hot
/// fields.
#[repr(align(64))]
#[derive(Default)]
pub(crate) struct PCounters {
    pub(crate) spawns: AtomicU64,
    /// Successful steals by this P, and the goroutines they took.
    pub(crate) steals: AtomicU64,
    pub(crate) stolen: AtomicU64,
    /// Batches taken from the global queue.
    pub(crate) global_grabs: AtomicU64,
    /// Goroutines run from runnext (inheriting the time slice). Also read
    /// by thieves: a count that moves while one waits to take this P's
    /// runnext means the P is handing goroutines over through it
    /// (`runtime::steal`, `RunQueue::steal_into_counted`).
    pub(crate) runnext_hits: AtomicU64,
    /// Times an M holding this P became spinning.
    pub(crate) spins: AtomicU64,
    /// System calls that handed this P off as they began
    /// (`syscall_blocking`, and calls predicted to block: `runtime::syscall`).
    pub(crate) blocking_handoffs: AtomicU64,
    /// Goroutines that yielded because sysmon asked them to.
    pub(crate) preempt_yields: AtomicU64,
    /// Gauge: dead Gs on this P's free list (Go's gfreecnt).
    pub(crate) gfree: AtomicU64,
    /// Gauge: goroutines in this P's yield buffer (runnable, but in no
    /// queue that others can see).
    pub(crate) yieldq: AtomicU64,
    /// Timers fired from this P's heap. The exception: any M may run the
    /// heap, so this one is a `fetch_add` (only when timers fired).
    pub(crate) timers_fired: AtomicU64,
}

/// Buckets of the scheduling-latency histogram: `[0, 256 ns)`, then four
/// per power of two from 2^8 ns to 2^38 ns (about 275 s), then one for
/// everything longer (`runtime::metrics`' note, "Scheduling latency").
pub(crate) const LATENCY_BUCKETS: usize = 2 + (LATENCY_MAX_BITS - LATENCY_MIN_BITS) * LATENCY_SUB;
/// log2 of the first bucket's upper bound, in ns.
pub(crate) const LATENCY_MIN_BITS: usize = 8;
/// log2 of the overflow bucket's lower bound, in ns.
pub(crate) const LATENCY_MAX_BITS: usize = 38;
/// Sub-buckets per power of two.
pub(crate) const LATENCY_SUB: usize = 4;

/// The bucket of a latency of `ns` nanoseconds.
#[inline]
pub(crate) fn latency_bucket(ns: u64) -> usize {
    if ns < 1 << LATENCY_MIN_BITS {
        return 0;
    }
    let b = 63 - ns.leading_zeros() as usize;
    if b >= LATENCY_MAX_BITS {
        return LATENCY_BUCKETS - 1;
    }
    // The two bits below the leading one pick the sub-bucket.
    let sub = (ns >> (b - 2)) as usize & (LATENCY_SUB - 1);
    1 + (b - LATENCY_MIN_BITS) * LATENCY_SUB + sub
}

/// The lower bound of bucket `i`, in ns (`latency_bucket`'s inverse).
pub(crate) fn latency_bucket_lo(i: usize) -> u64 {
    if i == 0 {
        return 0;
    }
    let k = (i - 1) / LATENCY_SUB;
    let sub = ((i - 1) % LATENCY_SUB) as u64;
    let base = 1u64 << (LATENCY_MIN_BITS + k);
    base + sub * (base / LATENCY_SUB as u64)
}

/// This P's share of the scheduling-latency histogram and its sampling
/// countdown (`runtime::metrics`' note). Written by the P's owner only (a
/// load and a store), summed by readers.
#[repr(align(64))]
pub(crate) struct SchedLatency {
    /// Runnable transitions left before the next sampled one.
    pub(crate) countdown: AtomicU32,
    /// Sum of the recorded latencies, in ns.
    pub(crate) sum_ns: AtomicU64,
    pub(crate) counts: [AtomicU64; LATENCY_BUCKETS],
}

impl Default for SchedLatency {
    fn default() -> Self {
        SchedLatency {
            countdown: AtomicU32::new(1),
            sum_ns: AtomicU64::new(0),
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl SchedLatency {
    /// Restarts the countdown after a sampled transition, at 4 to 11
    /// transitions chosen by `seed`'s bits 4-6: one in 7.5 on average, and
    /// not a fixed period, so that goroutines readied in a fixed rotation
    /// (two in a ping-pong) are all sampled.
    #[inline]
    pub(crate) fn restart(&self, seed: u64) {
        self.countdown
            .store(4 + ((seed >> 4) & 7) as u32, Ordering::Relaxed);
    }

    /// Records one latency of `ns` nanoseconds.
    #[inline]
    pub(crate) fn record(&self, ns: u64) {
        let c = &self.counts[latency_bucket(ns)];
        c.store(c.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
        let s = &self.sum_ns;
        s.store(
            s.load(Ordering::Relaxed).wrapping_add(ns),
            Ordering::Relaxed,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_buckets_are_contiguous_and_exponential() {
        assert_eq!(latency_bucket(0), 0);
        assert_eq!(latency_bucket(255), 0);
        assert_eq!(latency_bucket(256), 1);
        assert_eq!(latency_bucket(320), 2);
        assert_eq!(latency_bucket(511), 4);
        assert_eq!(latency_bucket(512), 5);
        assert_eq!(latency_bucket(u64::MAX), LATENCY_BUCKETS - 1);
        for i in 1..LATENCY_BUCKETS {
            let lo = latency_bucket_lo(i);
            assert_eq!(latency_bucket(lo), i, "bucket {i} starts at {lo}");
            assert_eq!(latency_bucket(lo - 1), i - 1, "bucket {i} ends at {lo}");
        }
        assert_eq!(
            latency_bucket_lo(LATENCY_BUCKETS - 1),
            1 << LATENCY_MAX_BITS
        );
    }
}
