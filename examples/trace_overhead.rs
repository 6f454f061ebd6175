//! The execution tracer's cost (issue 41), measured in one process:
//! spells alternate untraced and traced (to a file, or into a flight
//! recorder; which comes first alternates too), so the machine's drift and
//! its neighbours' load fall on both halves of each pair alike. Each pair
//! gives the ratio of its traced spell's figure to its untraced one's; the
//! median of those ratios is the cost. Starting and stopping the trace are
//! outside the measured spells. Run it at `GOMAXPROCS=1`, the issue's
//! configuration.
//!
//! Two workloads:
//! - `skynet`: a spell is one round (1,000,000 leaf goroutines), timed.
//! - `echo`: an echo server (a goroutine per connection, 64-byte
//!   messages) under 100 connections of a load generator on four plain
//!   threads outside the runtime, each keeping one request in flight per
//!   connection, as the bench's `echo_100`; a spell is half a second, and
//!   its figures are requests a second and the 99th percentile latency.
//!
//! ```text
//! GOMAXPROCS=1 cargo run --release --example trace_overhead -- skynet file [PAIRS] [DIR]
//! GOMAXPROCS=1 cargo run --release --example trace_overhead -- echo flight [PAIRS]
//! ```

use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
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

/// The echo workload: the server, and the load generator's shared
/// counters (requests done, and the latencies of the spell under way).
struct Echo {
    done: AtomicU64,
    lat: Mutex<Vec<u32>>,
    stop: AtomicBool,
}

const CONNS: usize = 100;
const CLIENT_THREADS: usize = 4;
const MSG: usize = 64;

fn echo_start() -> Arc<Echo> {
    let listener = goroutine::net::TcpListener::bind("127.0.0.1:0").expect("echo: bind");
    let addr = listener.local_addr().expect("echo: local_addr");
    // The server: a goroutine per connection, copying its bytes back.
    goroutine::go(move || loop {
        let Ok((conn, _)) = listener.accept() else {
            return;
        };
        let _ = conn.set_nodelay(true);
        goroutine::go(move || {
            let _ = std::io::copy(&mut &conn, &mut &conn);
        });
    });
    let echo = Arc::new(Echo {
        done: AtomicU64::new(0),
        lat: Mutex::new(Vec::new()),
        stop: AtomicBool::new(false),
    });
    for _ in 0..CLIENT_THREADS {
        let echo = echo.clone();
        let conns: Vec<std::net::TcpStream> = (0..CONNS / CLIENT_THREADS)
            .map(|_| {
                let c = std::net::TcpStream::connect(addr).expect("echo: connect");
                c.set_nodelay(true).expect("echo: nodelay");
                c
            })
            .collect();
        std::thread::spawn(move || {
            let msg = [7u8; MSG];
            let mut buf = [0u8; MSG];
            let mut lat = Vec::with_capacity(4096);
            while !echo.stop.load(Ordering::Relaxed) {
                // One request in flight on every connection, then each
                // reply; a request's latency is from the round's writes
                // to its reply.
                let t0 = Instant::now();
                for mut c in &conns {
                    c.write_all(&msg).expect("echo: write");
                }
                for mut c in &conns {
                    c.read_exact(&mut buf).expect("echo: read");
                    lat.push(t0.elapsed().as_micros() as u32);
                }
                echo.done.fetch_add(conns.len() as u64, Ordering::Relaxed);
                if lat.len() >= 4096 {
                    echo.lat.lock().unwrap().append(&mut lat);
                }
            }
        });
    }
    echo
}

/// One spell of the echo workload: requests a second and the p99 latency
/// (us) over half a second.
fn echo_spell(echo: &Echo) -> (f64, f64) {
    let d0 = echo.done.load(Ordering::Relaxed);
    echo.lat.lock().unwrap().clear();
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_millis(500));
    let done = echo.done.load(Ordering::Relaxed) - d0;
    let secs = t0.elapsed().as_secs_f64();
    let mut lat = std::mem::take(&mut *echo.lat.lock().unwrap());
    lat.sort_unstable();
    let p99 = lat.get(lat.len() * 99 / 100).copied().unwrap_or(0) as f64;
    (done as f64 / secs, p99)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let workload = args.next().unwrap_or_else(|| "skynet".to_owned());
    if workload != "skynet" && workload != "echo" {
        eprintln!("trace_overhead: workload must be `skynet` or `echo`, not {workload:?}");
        std::process::exit(2);
    }
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
        "{workload}, GOMAXPROCS={}: {pairs} pairs of spells, untraced and traced ({mode})",
        goroutine::max_procs()
    );
    // A spell's figures: skynet's round time (ms); echo's requests a
    // second and p99 latency (us).
    let echo = (workload == "echo").then(echo_start);
    let spell = || -> Vec<f64> {
        match &echo {
            None => vec![round().as_secs_f64() * 1e3],
            Some(e) => {
                let (rps, p99) = echo_spell(e);
                vec![rps, p99]
            }
        }
    };
    let names: &[&str] = if echo.is_some() {
        &["req/s", "p99 us"]
    } else {
        &["ms"]
    };
    // A warm-up spell: stacks, Gs, connections and the allocator's pools.
    spell();
    let recorder = FlightRecorder::new(FlightConfig::default());
    let traced_spell = || {
        if mode == "file" {
            goroutine::trace::start(&path).expect("trace_overhead: cannot start the trace");
        } else {
            recorder
                .start()
                .expect("trace_overhead: cannot start the flight recorder");
        }
        let t = spell();
        if mode == "file" {
            goroutine::trace::stop().expect("trace_overhead: cannot stop the trace");
        } else {
            recorder
                .stop()
                .expect("trace_overhead: cannot stop the flight recorder");
        }
        t
    };
    let n = names.len();
    let (mut plain, mut traced, mut ratios) = (vec![vec![]; n], vec![vec![]; n], vec![vec![]; n]);
    for pair in 1..=pairs {
        // Which half runs first alternates, so that a drift within a pair
        // (the allocator's, the machine's) does not favour either.
        let (p, t) = if pair % 2 == 1 {
            let p = spell();
            (p, traced_spell())
        } else {
            let t = traced_spell();
            (spell(), t)
        };
        let mut line = format!("pair {pair}:");
        for i in 0..n {
            line += &format!(
                " {} {:.0} -> {:.0} ({:+.1}%)",
                names[i],
                p[i],
                t[i],
                (t[i] / p[i] - 1.0) * 100.0
            );
            plain[i].push(p[i]);
            traced[i].push(t[i]);
            ratios[i].push(t[i] / p[i]);
        }
        println!("{line}");
    }
    let _ = std::fs::remove_file(&path);
    if let Some(e) = &echo {
        e.stop.store(true, Ordering::Relaxed);
    }
    for i in 0..n {
        println!(
            "{}: median untraced {:.0}, traced {:.0}; median of the pairs' ratios {:+.1}%",
            names[i],
            median(&mut plain[i]),
            median(&mut traced[i]),
            (median(&mut ratios[i]) - 1.0) * 100.0
        );
    }
}
