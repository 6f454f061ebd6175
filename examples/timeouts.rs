//! Timeouts as Go code writes them, and what they cost.
//!
//! 1. A worker takes 1M jobs from a buffered channel in a `select!` with a
//!    timeout arm. Each select makes a timer and drops it; the dropped
//!    timers' parts go back to the P's cache (`p/chantimers.rs`), so the
//!    next select reuses them.
//! 2. The same with `time::after` in the select: the arm that loses drops
//!    the channel, and with it the timer, so no timer is left pending
//!    (`stats().timers` before and after).
//! 3. A timeout that fires.
//!
//! `cargo run --release --example timeouts`

use std::time::{Duration, Instant};

use goroutine::{chan, go, select, time};

const JOBS: u64 = 1_000_000;

#[goroutine::main]
fn main() {
    // 1. select! with a timeout arm.
    let (tx, rx) = chan::<u64>(64);
    let producer = go(move || {
        for i in 0..JOBS {
            tx.send(i).unwrap();
        }
    });
    let t0 = Instant::now();
    let (mut sum, mut timeouts) = (0u64, 0u64);
    let mut got = 0;
    while got < JOBS {
        select! {
            recv(rx) -> v => { sum += v.unwrap(); got += 1; }
            default(Duration::from_millis(50)) => timeouts += 1,
        }
    }
    let took = t0.elapsed();
    producer.join().unwrap();
    assert_eq!(sum, JOBS * (JOBS - 1) / 2);
    println!(
        "select! with a 50 ms timeout arm: {JOBS} jobs, {timeouts} timeouts, {:.1} ns per select",
        took.as_nanos() as f64 / JOBS as f64
    );

    // 2. time::after in the select: nothing left pending.
    let (tx, rx) = chan::<u64>(1);
    let before = goroutine::stats().timers;
    let t0 = Instant::now();
    for i in 0..100_000u64 {
        tx.send(i).unwrap();
        select! {
            recv(rx) -> v => assert_eq!(v.unwrap(), i),
            recv(time::after(Duration::from_secs(3600))) -> _ => unreachable!("an hour passed"),
        }
    }
    println!(
        "time::after(1 h) in 100,000 selects: {:.1} ns per select; pending timers {} before, {} after",
        t0.elapsed().as_nanos() as f64 / 100_000.0,
        before,
        goroutine::stats().timers
    );

    // 3. A timeout that fires.
    let (_keep, idle) = chan::<u64>(0);
    let t0 = Instant::now();
    select! {
        recv(idle) -> _ => unreachable!("nobody sends"),
        default(Duration::from_millis(20)) => {}
    }
    println!("a 20 ms timeout fired after {:?}", t0.elapsed());
}
