//! The `prodcons` workload (Go's BenchmarkChanProdCons0/10/100): GOMAXPROCS
//! producers and GOMAXPROCS consumers share one channel of capacity 0, 10 or
//! 100; producers take work in chunks of 1000 items from a shared counter.
//! Prints ns per item for each capacity.
//!
//! ```text
//! cargo run --release --example prodcons [items]    # default 4,000,000
//! ```

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use goroutine::{chan, go};

const CHUNK: i64 = 1000;

fn main() {
    let items: i64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(4_000_000);
    let procs = goroutine::max_procs();
    for cap in [0usize, 10, 100] {
        let took = goroutine::run(move || {
            let chunks = Arc::new(AtomicI64::new(items / CHUNK));
            let (tx, rx) = chan::<u32>(cap);
            let start = Instant::now();
            let mut hs = Vec::new();
            for _ in 0..procs {
                let (tx, chunks) = (tx.clone(), chunks.clone());
                hs.push(go(move || {
                    while chunks.fetch_sub(1, Ordering::Relaxed) > 0 {
                        for _ in 0..CHUNK {
                            tx.send(1).expect("send");
                        }
                    }
                    tx.send(0).expect("send end marker");
                    0u64
                }));
                let rx = rx.clone();
                hs.push(go(move || {
                    let mut got = 0u64;
                    while rx.recv().expect("recv") != 0 {
                        got += 1;
                    }
                    got
                }));
            }
            let total: u64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
            assert_eq!(total, items as u64, "items lost or duplicated");
            start.elapsed()
        });
        println!(
            "prodcons{cap} procs={procs}: {:.1} ns/item",
            took.as_nanos() as f64 / items as f64
        );
    }
}
