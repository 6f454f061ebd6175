//! The per-P counters of the scheduler statistics: data of the P, so they
//! are defined here. The scheduler writes them and `runtime/stats.rs` sums
//! them; its note says who writes each counter and how (the P's owner only,
//! a relaxed load and store; `timers_fired` is the exception).

use std::sync::atomic::AtomicU64;

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
