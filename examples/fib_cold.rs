//! Where the benchmark's `fib` row spends its first run: fib(30) as a spawn
//! tree (cutoff 15, 2,583 spawns, up to ~340 goroutines alive at once), run
//! RUNS times in one fresh process; with PREWARM > 0, that many goroutines
//! are parked at once and released first, so that the stacks the tree needs
//! are already carved and warm.
//!
//! The benchmark times one run per process (the first). Comparing the first
//! run with and without PREWARM separates the cost of carving fresh stacks
//! from the rest of a cold start; the later runs show the warm cost.
//!
//! Usage: cargo run --release --example fib_cold [GOMAXPROCS] [PREWARM] [RUNS]

use std::time::{Duration, Instant};

fn serial(n: u64) -> u64 {
    if n < 2 {
        n
    } else {
        serial(n - 1) + serial(n - 2)
    }
}

fn fib(n: u64) -> u64 {
    if n < 15 {
        return serial(n);
    }
    let child = goroutine::go(move || fib(n - 1));
    let b = fib(n - 2);
    child.join().expect("fib: child panicked") + b
}

fn arg(i: usize, default: usize) -> usize {
    match std::env::args().nth(i) {
        None => default,
        Some(a) => a.parse().unwrap_or_else(|_| {
            eprintln!("fib_cold: expected a number, got {a:?}");
            std::process::exit(2)
        }),
    }
}

fn main() {
    let (procs, prewarm, runs) = (arg(1, 1), arg(2, 0), arg(3, 3));
    goroutine::set_max_procs(procs);
    goroutine::run(move || {
        if prewarm > 0 {
            let (tx, rx) = goroutine::chan::<()>(0);
            let wg = goroutine::sync::WaitGroup::new();
            wg.add(prewarm as isize);
            for _ in 0..prewarm {
                let (rx, wg) = (rx.clone(), wg.clone());
                goroutine::go(move || {
                    assert!(rx.recv().is_err(), "fib_cold: got a value");
                    wg.done();
                });
            }
            // Let every one of them run and park before the close.
            goroutine::time::sleep(Duration::from_millis(30));
            drop(tx);
            wg.wait();
        }
        for run in 0..runs {
            let t = Instant::now();
            let got = fib(std::hint::black_box(30));
            assert_eq!(got, 832_040, "fib_cold: wrong answer");
            println!(
                "run {run}: {:.2} ms{}",
                t.elapsed().as_secs_f64() * 1e3,
                if run == 0 && prewarm > 0 {
                    format!(" ({prewarm} stacks warmed first)")
                } else {
                    String::new()
                }
            );
        }
    });
}
