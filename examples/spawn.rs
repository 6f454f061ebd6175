//! The `spawn` workload: one goroutine spawns 1,000,000 goroutines, each
//! counts a shared counter down; prints ns per goroutine (spawn + run + exit).
//!
//! ```text
//! cargo run --release --example spawn [rounds]
//! ```

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

const N: usize = 1_000_000;
static LEFT: AtomicUsize = AtomicUsize::new(0);
static DONE: AtomicBool = AtomicBool::new(false);

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let procs = goroutine::max_procs();
    for _ in 0..rounds {
        let took = goroutine::run(|| {
            LEFT.store(N, Ordering::SeqCst);
            DONE.store(false, Ordering::SeqCst);
            let start = Instant::now();
            for _ in 0..N {
                goroutine::go(|| {
                    if LEFT.fetch_sub(1, Ordering::AcqRel) == 1 {
                        DONE.store(true, Ordering::Release);
                    }
                });
            }
            while !DONE.load(Ordering::Acquire) {
                goroutine::yield_now();
            }
            start.elapsed()
        });
        println!(
            "spawn procs={procs}: {:.1} ns/goroutine",
            took.as_nanos() as f64 / N as f64
        );
    }
}
