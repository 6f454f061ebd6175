//! The `yield` workload: G goroutines (default 1000) each yield 1,000,000/G
//! times; prints ns per yield.
//!
//! ```text
//! cargo run --release --example yield [goroutines] [rounds]
//! ```

use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let g: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(1000);
    let rounds: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(5);
    let per = 1_000_000 / g;
    let procs = goroutine::max_procs();
    for _ in 0..rounds {
        let took = goroutine::run(move || {
            let start = Instant::now();
            let hs: Vec<_> = (0..g)
                .map(|_| {
                    goroutine::go(move || {
                        for _ in 0..per {
                            goroutine::yield_now();
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            start.elapsed()
        });
        println!(
            "yield procs={procs} goroutines={g}: {:.1} ns/yield",
            took.as_nanos() as f64 / (g * per) as f64
        );
    }
}
