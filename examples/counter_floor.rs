//! The floor under the `spawn` and `parked.wake_all` benchmarks at
//! GOMAXPROCS=2: what their shared counters cost when two CPUs write them,
//! with no runtime at all.
//!
//! # spawn
//!
//! Each of `spawn`'s goroutines is handed two `Arc` clones by the spawner
//! (a shared count-down and a `WaitGroup`), counts both down, and drops
//! both: two atomic increments on the spawner's CPU and four atomic
//! read-modify-writes on the CPU that runs the goroutine, all on two cache
//! lines. Go's version of the benchmark makes one (`wg.Done`): its closure
//! captures the `WaitGroup` by reference, with no count to keep.
//!
//! This program does only that traffic, for N items:
//! - on one thread (what GOMAXPROCS=1 pays: the lines stay in one cache);
//! - on two threads at once, the "spawner" making the increments and the
//!   "runner" the four other writes, each thread on its own CPU: what each
//!   goroutine run on the other P costs at GOMAXPROCS=2, whatever the
//!   scheduler does.
//!
//! # parked.wake_all
//!
//! Each woken goroutine of `parked` counts itself woken, counts the
//! `WaitGroup` down, and drops its receiver (the channel's receiver count
//! and its `Arc`) and its `Arc` of the shared counts: five atomic
//! read-modify-writes. Go's makes one (`wg.Done`). At GOMAXPROCS=2 both Ps
//! run woken goroutines at once, so both CPUs write the same lines. This
//! program does those five writes per item on one thread, and on two
//! threads at once (each doing half the items).
//!
//! ```text
//! cargo run --release --example counter_floor [ITEMS]   # default 1,000,000
//! ```

use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Instant;

/// What the workload's two `Arc`s point at: the count-down and the
/// WaitGroup's counter (each in its own allocation, next to its `Arc`
/// counts, as in the workload).
struct Shared {
    left: Arc<AtomicUsize>,
    wg: Arc<AtomicUsize>,
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    for round in 1..=3 {
        let one = one_thread(n);
        let (spawner, runner) = two_threads(n);
        let (wake_one, wake_two) = (wake_all(n, 1), wake_all(n, 2));
        println!(
            "round {round}: spawn: one thread {one:.1} ns/item; two threads: spawner \
             {spawner:.1}, runner {runner:.1} ns/item. wake_all: one thread {wake_one:.1}, \
             two threads {wake_two:.1} ns/item"
        );
    }
}

fn shared(n: usize) -> Shared {
    Shared {
        left: Arc::new(AtomicUsize::new(n)),
        wg: Arc::new(AtomicUsize::new(n)),
    }
}

/// Clone both, count both down, drop both: the whole item on one thread.
fn one_thread(n: usize) -> f64 {
    let s = shared(n);
    let t = Instant::now();
    for _ in 0..n {
        let (left, wg) = (black_box(s.left.clone()), black_box(s.wg.clone()));
        left.fetch_sub(1, Ordering::AcqRel);
        wg.fetch_sub(1, Ordering::AcqRel);
        drop((left, wg));
    }
    assert_eq!(s.left.load(Ordering::Acquire), 0);
    t.elapsed().as_nanos() as f64 / n as f64
}

/// The spawner's two increments on one thread, the runner's four writes on
/// another, at the same time. Returns each thread's ns per item.
fn two_threads(n: usize) -> (f64, f64) {
    let s = Arc::new(shared(n));
    // The runner's decrements must never take a strong count to zero
    // before the spawner's matching increment: give each `Arc` n counts
    // up front, and take them back at the end.
    for _ in 0..n {
        std::mem::forget(s.left.clone());
        std::mem::forget(s.wg.clone());
    }
    let start = Arc::new(Barrier::new(2));
    let runner = {
        let (s, start) = (s.clone(), start.clone());
        std::thread::spawn(move || {
            let (left, wg) = (Arc::as_ptr(&s.left), Arc::as_ptr(&s.wg));
            start.wait();
            let t = Instant::now();
            for _ in 0..n {
                s.left.fetch_sub(1, Ordering::AcqRel);
                s.wg.fetch_sub(1, Ordering::AcqRel);
                // SAFETY: each pointer came from a live `Arc`, and the
                // counts forgotten above keep it above zero.
                unsafe {
                    Arc::decrement_strong_count(black_box(left));
                    Arc::decrement_strong_count(black_box(wg));
                }
            }
            t.elapsed().as_nanos() as f64 / n as f64
        })
    };
    start.wait();
    let t = Instant::now();
    for _ in 0..n {
        std::mem::forget(black_box(s.left.clone()));
        std::mem::forget(black_box(s.wg.clone()));
    }
    let spawner = t.elapsed().as_nanos() as f64 / n as f64;
    let runner = runner.join().expect("runner thread");
    // Give back the spawner's n counts: what is left is the `Shared`'s own.
    let (left, wg) = (Arc::as_ptr(&s.left), Arc::as_ptr(&s.wg));
    for _ in 0..n {
        // SAFETY: n counts were added by the spawner loop and never dropped.
        unsafe {
            Arc::decrement_strong_count(left);
            Arc::decrement_strong_count(wg);
        }
    }
    assert_eq!(Arc::strong_count(&s.left), 1);
    assert_eq!(s.left.load(Ordering::Acquire), 0);
    (spawner, runner)
}

/// What a woken `parked` goroutine writes: its woken count, the
/// `WaitGroup`'s counter, the channel's receiver count and `Arc`, and the
/// shared counts' `Arc`. `threads` threads do `n` items between them at
/// once; returns the wall time per item.
fn wake_all(n: usize, threads: usize) -> f64 {
    struct Counts {
        woke: AtomicUsize,
        wg: AtomicUsize,
    }
    struct Chan {
        receivers: AtomicUsize,
    }
    let counts = Arc::new(Counts {
        woke: AtomicUsize::new(0),
        wg: AtomicUsize::new(n),
    });
    let chan = Arc::new(Chan {
        receivers: AtomicUsize::new(n + 1),
    });
    // One `Arc` count of each per item, as the spawner's clones made them.
    for _ in 0..n {
        std::mem::forget(counts.clone());
        std::mem::forget(chan.clone());
    }
    let start = Arc::new(Barrier::new(threads + 1));
    let workers: Vec<_> = (0..threads)
        .map(|i| {
            let (counts, chan, start) = (counts.clone(), chan.clone(), start.clone());
            let items = n / threads + usize::from(i < n % threads);
            std::thread::spawn(move || {
                let (cp, chp) = (Arc::as_ptr(&counts), Arc::as_ptr(&chan));
                start.wait();
                for _ in 0..items {
                    counts.woke.fetch_add(1, Ordering::AcqRel);
                    counts.wg.fetch_sub(1, Ordering::AcqRel);
                    chan.receivers.fetch_sub(1, Ordering::AcqRel);
                    // SAFETY: the pointers came from live `Arc`s, and each
                    // item's count was added (and forgotten) above.
                    unsafe {
                        Arc::decrement_strong_count(black_box(chp));
                        Arc::decrement_strong_count(black_box(cp));
                    }
                }
            })
        })
        .collect();
    start.wait();
    let t = Instant::now();
    for w in workers {
        w.join().expect("worker thread");
    }
    let took = t.elapsed().as_nanos() as f64 / n as f64;
    assert_eq!(counts.woke.load(Ordering::Acquire), n);
    assert_eq!(Arc::strong_count(&counts), 1);
    took
}
