//! Thread ring (the Computer Language Benchmarks Game): 503 goroutines in a
//! ring of unbuffered channels pass a token N times; each hop decrements it,
//! and the goroutine that receives 0 reports its number, (N mod 503) + 1.
//!
//! ```text
//! cargo run --release --example thread_ring [N]    # default 5,000,000 -> 181
//! ```

use std::time::Instant;

use goroutine::{chan, go, Receiver, Sender};

const RING: usize = 503;

fn member(id: usize, input: Receiver<u64>, next: Sender<u64>, done: Sender<usize>) {
    for token in &input {
        if token == 0 {
            done.send(id).expect("thread ring: main gone");
            return;
        }
        if next.send(token - 1).is_err() {
            return;
        }
    }
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5_000_000);
    println!(
        "thread ring: {RING} goroutines, {n} hops, GOMAXPROCS={}",
        goroutine::max_procs()
    );
    let (winner, took) = goroutine::run(move || {
        let (done_tx, done_rx) = chan::<usize>(0);
        let (first_tx, mut input) = chan::<u64>(0);
        for id in 1..RING {
            let (tx, rx) = chan::<u64>(0);
            let my_input = std::mem::replace(&mut input, rx);
            let done = done_tx.clone();
            go(move || member(id, my_input, tx, done));
        }
        let last = first_tx.clone();
        go(move || member(RING, input, last, done_tx));
        let start = Instant::now();
        first_tx.send(n).expect("thread ring: ring broken");
        let winner = done_rx.recv().expect("thread ring: no winner");
        (winner, start.elapsed())
    });
    println!("{winner}");
    println!(
        "{:.1} ns per hop ({} ms)",
        took.as_nanos() as f64 / n.max(1) as f64,
        took.as_millis()
    );
}
