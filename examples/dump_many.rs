//! Times `dump_grouped` and `dump` over 100,000 parked goroutines:
//! `cargo run --release --example dump_many`.

use std::time::Instant;

use goroutine::chan;

#[inline(never)]
fn parked(rx: goroutine::Receiver<u32>) -> u32 {
    rx.recv().unwrap_or(0)
}

#[goroutine::main]
fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let (tx, rx) = chan::<u32>(0);
    let hs: Vec<_> = (0..n)
        .map(|_| {
            let rx = rx.clone();
            goroutine::go(move || parked(rx))
        })
        .collect();
    while goroutine::stats().waiting < n {
        goroutine::time::sleep(std::time::Duration::from_millis(10));
    }
    for i in 0..3 {
        let mut sink = Vec::new();
        let t = Instant::now();
        goroutine::dump_grouped(&mut sink).unwrap();
        println!(
            "dump_grouped #{i} of {n} parked goroutines: {:?} ({} bytes)",
            t.elapsed(),
            sink.len()
        );
    }
    let mut sink = Vec::new();
    let t = Instant::now();
    goroutine::dump(&mut sink).unwrap();
    println!("dump of {n}: {:?} ({} bytes)", t.elapsed(), sink.len());
    drop(tx);
    for h in hs {
        h.join().unwrap();
    }
}
