//! Exports every runtime metric (`goroutine::metrics`) in the Prometheus
//! text format on `GET /metrics`, over `goroutine::net`, knowing none of
//! the runtime's types beyond `Sample` and `Value`. Names are turned into
//! Prometheus names the way Go's Prometheus client turns Go's
//! `runtime/metrics` names: `go_` plus the name with every character
//! outside `[a-zA-Z0-9_]` made `_` (`/sched/latencies:seconds` becomes
//! `go_sched_latencies_seconds`), `_total` after a counter's; a histogram
//! gives cumulative `_bucket{le="..."}` lines, `_sum` and `_count`.
//!
//! ```text
//! cargo run --release --example metrics_exporter [ADDR]    # default 127.0.0.1:9090
//! curl http://127.0.0.1:9090/metrics
//! cargo run --release --example metrics_exporter -- --measure   # ns per metrics::read
//! ```
//!
//! A few goroutines keep the scheduler busy (a ping-pong pair, sleepers) so
//! that the latency histogram has something to show.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

use goroutine::metrics::{self, Description, Kind, Sample, Value};
use goroutine::net::{TcpListener, TcpStream};

/// Go's Prometheus client's name for a `runtime/metrics` name.
fn prometheus_name(d: &Description) -> String {
    let mut n = String::from("go_");
    n.extend(d.name.trim_start_matches('/').chars().map(|c| {
        if c.is_ascii_alphanumeric() {
            c
        } else {
            '_'
        }
    }));
    if d.kind == Kind::Counter {
        n.push_str("_total");
    }
    n
}

/// A float as Prometheus writes it.
fn float(v: f64) -> String {
    if v == f64::INFINITY {
        "+Inf".to_string()
    } else {
        format!("{v:e}")
    }
}

/// The whole exposition: every metric of `descs`, read into `samples`.
fn render(descs: &[Description], samples: &mut [Sample]) -> String {
    metrics::read(samples);
    let mut out = String::new();
    for (d, s) in descs.iter().zip(samples.iter()) {
        let name = prometheus_name(d);
        let kind = match d.kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
            _ => "untyped",
        };
        let _ = writeln!(out, "# HELP {name} {}", d.description);
        let _ = writeln!(out, "# TYPE {name} {kind}");
        match &s.value {
            Value::U64(v) => {
                let _ = writeln!(out, "{name} {v}");
            }
            Value::F64(v) => {
                let _ = writeln!(out, "{name} {}", float(*v));
            }
            Value::Histogram {
                buckets,
                counts,
                sum,
            } => {
                // counts[i] lies in [buckets[i], buckets[i + 1]): cumulative
                // counts under each upper bound.
                let mut total = 0u64;
                for (i, c) in counts.iter().enumerate() {
                    total += c;
                    let le = float(buckets[i + 1]);
                    let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {total}");
                }
                let _ = writeln!(out, "{name}_sum {}", float(*sum));
                let _ = writeln!(out, "{name}_count {total}");
            }
            _ => {}
        }
    }
    out
}

/// Answers one connection: `GET /metrics` gets the exposition, anything
/// else a 404; one request per connection.
fn serve(mut c: &TcpStream, descs: &[Description], samples: &mut [Sample]) {
    c.set_read_deadline(Some(Instant::now() + Duration::from_secs(10)));
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
        match c.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let (status, body) = if head.starts_with(b"GET /metrics ") {
        ("200 OK", render(descs, samples))
    } else {
        ("404 Not Found", "not found: try /metrics\n".to_string())
    };
    let _ = write!(
        c,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// Background work for the histogram: a ping-pong pair and some sleepers.
fn load() {
    let (tx, rx) = goroutine::chan::<u64>(0);
    goroutine::go(move || {
        for v in rx {
            goroutine::time::sleep(Duration::from_micros(v % 500));
        }
    });
    goroutine::go(move || {
        for i in 0.. {
            if tx.send(i).is_err() {
                break;
            }
        }
    });
}

/// `--measure`: the cost of one `metrics::read` of every metric.
fn measure() {
    goroutine::run(|| {
        load();
        let mut samples: Vec<Sample> = metrics::all().iter().map(|d| Sample::new(d.name)).collect();
        metrics::read(&mut samples);
        let n = 200_000;
        let t = Instant::now();
        for _ in 0..n {
            metrics::read(&mut samples);
        }
        let all = t.elapsed().as_nanos() as f64 / n as f64;
        let mut one = [Sample::new("/sched/goroutines/runnable:goroutines")];
        let t = Instant::now();
        for _ in 0..n {
            metrics::read(&mut one);
        }
        let single = t.elapsed().as_nanos() as f64 / n as f64;
        println!(
            "GOMAXPROCS={}: metrics::read of all {} metrics: {all:.0} ns; of one gauge: {single:.0} ns",
            goroutine::max_procs(),
            samples.len()
        );
    });
}

fn main() {
    if std::env::args().nth(1).as_deref() == Some("--measure") {
        return measure();
    }
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:9090".into());
    goroutine::run(move || {
        let l = TcpListener::bind(addr.as_str()).expect("bind");
        println!("serving http://{}/metrics", l.local_addr().expect("addr"));
        load();
        let descs = metrics::all();
        loop {
            let (c, _) = match l.accept() {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("accept: {e}");
                    continue;
                }
            };
            let descs = descs.clone();
            goroutine::go(move || {
                // Each connection reads into samples of its own (a
                // long-lived exporter would keep one set and reuse it).
                let mut samples: Vec<Sample> = descs.iter().map(|d| Sample::new(d.name)).collect();
                serve(&c, &descs, &mut samples);
            });
        }
    });
}
