//! Skynet: a 10-ary tree of goroutines, 1,000,000 leaves; each leaf returns
//! its number and each node sums its children (atemerev/skynet).
//!
//! This version uses `JoinHandle::join`; the channel version replaces it when
//! channels land.
//!
//! ```text
//! cargo run --release --example skynet
//! ```

use std::time::Instant;

fn skynet(num: u64, size: u64) -> u64 {
    if size == 1 {
        return num;
    }
    let sub = size / 10;
    let children: [goroutine::JoinHandle<u64>; 10] =
        std::array::from_fn(|i| goroutine::go(move || skynet(num + i as u64 * sub, sub)));
    children
        .into_iter()
        .map(|h| h.join().expect("skynet child"))
        .sum()
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
        let result = goroutine::run(|| skynet(0, 1_000_000));
        let took = start.elapsed();
        assert_eq!(result, 499_999_500_000, "wrong skynet answer");
        println!("round {round}: Result: {result} in {} ms", took.as_millis());
    }
}
