//! Skynet: a 10-ary tree of goroutines, 1,000,000 leaves (atemerev/skynet).
//! Each leaf sends its number up an unbuffered channel; each node makes one
//! unbuffered channel for its 10 children, spawns them, receives their 10
//! values and sends the sum up.
//!
//! ```text
//! cargo run --release --example skynet [ROUNDS]    # default 3 rounds
//! ```

use std::time::Instant;

use goroutine::{chan, go, Sender};

fn skynet(up: Sender<u64>, num: u64, size: u64) {
    if size == 1 {
        up.send(num).expect("skynet: parent gone");
        return;
    }
    let sub = size / 10;
    let (tx, rx) = chan::<u64>(0);
    for i in 0..9 {
        let tx = tx.clone();
        go(move || skynet(tx, num + i * sub, sub));
    }
    go(move || skynet(tx, num + 9 * sub, sub));
    let sum: u64 = (0..10)
        .map(|_| rx.recv().expect("skynet: child gone"))
        .sum();
    up.send(sum).expect("skynet: parent gone");
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    println!(
        "skynet: 1,000,000 leaf goroutines, GOMAXPROCS={}",
        goroutine::max_procs()
    );
    for round in 1..=rounds {
        let start = Instant::now();
        let result = goroutine::run(|| {
            let (tx, rx) = chan::<u64>(0);
            go(move || skynet(tx, 0, 1_000_000));
            rx.recv().expect("skynet: no result")
        });
        let took = start.elapsed();
        assert_eq!(result, 499_999_500_000, "wrong skynet answer");
        println!("round {round}: Result: {result} in {} ms", took.as_millis());
    }
}
