//! The execution tracer's cost on skynet (issue 41), measured in one
//! process: rounds alternate untraced and traced (to a file, or into a
//! flight recorder; which comes first alternates too), so the machine's drift and its neighbours' load fall
//! on both halves of each pair alike. Each pair gives the ratio of its
//! traced round's time to its untraced round's; the median of those ratios
//! is the cost. Starting and stopping the trace are outside the timed
//! rounds. Run it at `GOMAXPROCS=1`, the issue's configuration.
//!
//! ```text
//! GOMAXPROCS=1 cargo run --release --example trace_overhead -- file [PAIRS] [DIR]
//! GOMAXPROCS=1 cargo run --release --example trace_overhead -- flight [PAIRS]
//! ```

use std::time::{Duration, Instant};

use goroutine::trace::{FlightConfig, FlightRecorder};
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

/// One round of skynet (1,000,000 leaves), timed.
fn round() -> Duration {
    let start = Instant::now();
    let result = goroutine::run(|| {
        let (tx, rx) = chan::<u64>(0);
        go(move || skynet(tx, 0, 1_000_000));
        rx.recv().expect("skynet: no result")
    });
    let took = start.elapsed();
    assert_eq!(result, 499_999_500_000, "wrong skynet answer");
    took
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "file".to_owned());
    if mode != "file" && mode != "flight" {
        eprintln!("trace_overhead: mode must be `file` or `flight`, not {mode:?}");
        std::process::exit(2);
    }
    let pairs: usize = match args.next().map(|s| s.parse()) {
        None => 10,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("trace_overhead: PAIRS must be a positive number");
            std::process::exit(2);
        }
    };
    let dir = args
        .next()
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let path = dir.join(format!("trace_overhead-{}.trace", std::process::id()));
    println!(
        "skynet, GOMAXPROCS={}: {pairs} pairs of rounds, untraced then traced ({mode})",
        goroutine::max_procs()
    );
    // A warm-up round: stacks, Gs and the allocator's pools.
    round();
    let recorder = FlightRecorder::new(FlightConfig::default());
    let (mut plain, mut traced, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let traced_round = || {
        if mode == "file" {
            goroutine::trace::start(&path).expect("trace_overhead: cannot start the trace");
        } else {
            recorder
                .start()
                .expect("trace_overhead: cannot start the flight recorder");
        }
        let t = round();
        if mode == "file" {
            goroutine::trace::stop().expect("trace_overhead: cannot stop the trace");
        } else {
            recorder
                .stop()
                .expect("trace_overhead: cannot stop the flight recorder");
        }
        t
    };
    for pair in 1..=pairs {
        // Which half runs first alternates, so that a drift within a pair
        // (the allocator's, the machine's) does not favour either.
        let (p, t) = if pair % 2 == 1 {
            let p = round();
            (p, traced_round())
        } else {
            let t = traced_round();
            (round(), t)
        };
        let (p, t) = (p.as_secs_f64() * 1e3, t.as_secs_f64() * 1e3);
        println!(
            "pair {pair}: untraced {p:.0} ms, traced {t:.0} ms ({:+.1}%)",
            (t / p - 1.0) * 100.0
        );
        plain.push(p);
        traced.push(t);
        ratios.push(t / p);
    }
    let _ = std::fs::remove_file(&path);
    println!(
        "median: untraced {:.0} ms, traced {:.0} ms; median of the pairs' ratios {:+.1}%",
        median(&mut plain),
        median(&mut traced),
        (median(&mut ratios) - 1.0) * 100.0
    );
}
