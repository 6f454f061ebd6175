//! Ping-pong: two goroutines bounce a value over a pair of unbuffered
//! channels; prints the time per round trip (two handoffs, two parks, two
//! readies through `runnext`).
//!
//! ```text
//! cargo run --release --example pingpong [ROUND_TRIPS]    # default 2,000,000
//! ```

use std::time::Instant;

use goroutine::{chan, go};

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2_000_000);
    println!(
        "ping-pong: {n} round trips, GOMAXPROCS={}",
        goroutine::max_procs()
    );
    let took = goroutine::run(move || {
        let (ping_tx, ping_rx) = chan::<u64>(0);
        let (pong_tx, pong_rx) = chan::<u64>(0);
        let echo = go(move || {
            for v in ping_rx {
                pong_tx.send(v).expect("pong");
            }
        });
        // Warm up (stacks, the second M), then measure.
        for i in 0..10_000 {
            ping_tx.send(i).expect("ping");
            pong_rx.recv().expect("pong");
        }
        let start = Instant::now();
        for i in 0..n {
            ping_tx.send(i).expect("ping");
            assert_eq!(pong_rx.recv(), Ok(i));
        }
        let took = start.elapsed();
        drop(ping_tx);
        echo.join().expect("echo");
        took
    });
    println!(
        "{:.1} ns per round trip ({} ms)",
        took.as_nanos() as f64 / n as f64,
        took.as_millis()
    );
}
