//! Go's concurrent prime sieve (the example from the Go tour and the Go
//! spec): a generator goroutine feeds 2, 3, 4, ... into a chain of filter
//! goroutines, one per prime found so far, linked by unbuffered channels.
//! Finds the first 10,000 primes (the last is 104729).
//!
//! ```text
//! cargo run --release --example prime_sieve [COUNT]    # default 10000
//! ```
//!
//! When main has its primes it drops the end of the chain; each filter's
//! next send then fails (no receiver left), so the chain shuts itself down
//! from the end, and the generator last.

use std::time::Instant;

use goroutine::{chan, go, Receiver, Sender};

fn generate(out: Sender<u64>) {
    let mut i = 2;
    while out.send(i).is_ok() {
        i += 1;
    }
}

fn filter(input: Receiver<u64>, out: Sender<u64>, prime: u64) {
    for i in input {
        if i % prime != 0 && out.send(i).is_err() {
            return;
        }
    }
}

fn main() {
    let count: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000);
    println!(
        "prime sieve: first {count} primes, GOMAXPROCS={}",
        goroutine::max_procs()
    );
    let start = Instant::now();
    let (n, last) = goroutine::run(move || {
        let (tx, mut rx) = chan::<u64>(0);
        go(move || generate(tx));
        let mut last = 0;
        for _ in 0..count {
            last = rx.recv().expect("sieve: chain broken");
            let (tx1, rx1) = chan::<u64>(0);
            let input = std::mem::replace(&mut rx, rx1);
            go(move || filter(input, tx1, last));
        }
        (count, last)
    });
    let took = start.elapsed();
    if count == 10_000 {
        assert_eq!(last, 104_729, "wrong 10,000th prime");
    }
    println!("{n} primes, the last is {last}, in {} ms", took.as_millis());
}
