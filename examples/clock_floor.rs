//! The floor under the tracer's per-event cost: what one time-stamp read
//! costs on this machine. Every traced event reads the clock once (the TSC
//! where it is usable, else `clock_gettime`), so N events cost at least N
//! reads, whatever else the tracer does.
//!
//! ```text
//! cargo run --release --example clock_floor [READS]   # default 20,000,000
//! ```

use std::time::Instant;

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000_000);
    let mut sink = 0u64;
    for round in 1..=3 {
        let t = Instant::now();
        for _ in 0..n {
            sink = sink.wrapping_add(tsc());
        }
        let tsc_ns = t.elapsed().as_nanos() as f64 / n as f64;
        let t = Instant::now();
        for _ in 0..n {
            sink = sink.wrapping_add(Instant::now().elapsed().as_nanos() as u64);
        }
        // Two clock reads per iteration (`now` and `elapsed`).
        let mono_ns = t.elapsed().as_nanos() as f64 / n as f64 / 2.0;
        println!(
            "round {round}: TSC read {tsc_ns:.1} ns, clock_gettime(MONOTONIC) {mono_ns:.1} ns"
        );
    }
    std::hint::black_box(sink);
}

#[cfg(target_arch = "x86_64")]
fn tsc() -> u64 {
    // SAFETY: RDTSC exists on every x86-64 CPU and has no memory effects.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
fn tsc() -> u64 {
    0
}
