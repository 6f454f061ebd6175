//! The execution tracer's cost (issue 41), measured in one process:
//! spells alternate untraced and traced (to a file, or into a flight
//! recorder; which comes first alternates too), so the machine's drift and
//! its neighbours' load fall on both halves of each pair alike. Each pair
//! gives the ratio of its traced spell's figure to its untraced one's; the
//! median of those ratios is the cost. Starting and stopping the trace are
//! outside the measured spells. Run it at `GOMAXPROCS=1`, the issue's
//! configuration.
//!
//! The mode `none` leaves both halves untraced: the spread of its ratios
//! is the measurement's own noise, the floor under any figure of the
//! other two modes.
//!
//! Three workloads:
//! - `skynet`: a spell is one round (1,000,000 leaf goroutines), timed.
//! - `echo`: an echo server (a goroutine per connection, 64-byte
//!   messages) under 100 connections of a load generator on four plain
//!   threads outside the runtime, each keeping one request in flight per
//!   connection, as the bench's `echo_100`; a spell is half a second, and
//!   its figures are requests a second and the 99th percentile latency.
//! - `http`: the bench's `http` server (`examples/http_hello.rs`'s
//!   handler, a goroutine per keep-alive connection, without deadlines)
//!   under the same load generator sending `GET /` and reading each whole
//!   response, instead of wrk, so that it runs where wrk is not
//!   installed and the spells alternate in one process; the same figures.
//!
//! ```text
//! GOMAXPROCS=1 cargo run --release --example trace_overhead -- skynet file [PAIRS] [DIR]
//! GOMAXPROCS=1 cargo run --release --example trace_overhead -- echo flight [PAIRS]
//! GOMAXPROCS=1 cargo run --release --example trace_overhead -- http file [PAIRS]
//! GOMAXPROCS=1 cargo run --release --example trace_overhead -- echo none [PAIRS]
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

/// A 90% confidence interval of the median of `v` (sorted), free of any
/// assumption on the distribution: the order statistics `k` from either
/// end, `k` from the normal approximation of the binomial (n/2 - 1.645
/// sqrt(n)/2). With fewer than 10 values it spans them all.
fn median_interval(v: &[f64]) -> (f64, f64) {
    let n = v.len();
    let k = (n as f64 / 2.0 - 1.645 * (n as f64).sqrt() / 2.0).floor();
    let k = if n < 10 || k < 1.0 { 0 } else { k as usize - 1 };
    (v[k], v[n - 1 - k])
}

#[allow(dead_code)]
#[path = "http_hello.rs"]
mod http_hello;

/// A server workload's load generator: its shared counters (requests
/// done, and the latencies of the spell under way).
struct Load {
    done: AtomicU64,
    /// The spell under way, bumped (under `lat`'s lock) as each spell
    /// begins and ends. A client thread keeps a round's latencies only if
    /// the round began and ended in one spell, and hands them over only
    /// while that spell lasts: a spell's p99 is of its own rounds, never
    /// of a trace's start or stop just before it.
    spell: AtomicU64,
    /// The latencies of the spell under way.
    lat: Mutex<Vec<u32>>,
    stop: AtomicBool,
}

/// How many latencies a client thread gathers before it hands them over:
/// a few milliseconds' worth, the part of a spell's end it misses.
const HAND_OVER: usize = 256;

const CONNS: usize = 100;
const CLIENT_THREADS: usize = 4;
const MSG: usize = 64;

/// A server on a free port of 127.0.0.1: a goroutine per connection
/// (TCP_NODELAY), which runs `serve` on it.
fn server(serve: fn(goroutine::net::TcpStream)) -> std::net::SocketAddr {
    let listener = goroutine::net::TcpListener::bind("127.0.0.1:0").expect("server: bind");
    let addr = listener.local_addr().expect("server: local_addr");
    goroutine::go(move || loop {
        let Ok((conn, _)) = listener.accept() else {
            return;
        };
        goroutine::go(move || {
            let _ = conn.set_nodelay(true);
            serve(conn);
        });
    });
    addr
}

/// The echo server's connection: its bytes copied back.
fn echo(conn: goroutine::net::TcpStream) {
    let _ = std::io::copy(&mut &conn, &mut &conn);
}

/// The bench's `http` server's connection: keep-alive requests answered.
fn http(conn: goroutine::net::TcpStream) {
    let _ = http_hello::serve(http_hello::NoDeadline(&conn));
}

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";

/// The length of the server's whole answer to `GET` (headers and the
/// body its Content-Length gives), read on a connection of its own.
fn http_reply_len(addr: std::net::SocketAddr) -> usize {
    let mut c = std::net::TcpStream::connect(addr).expect("http: connect");
    c.write_all(GET).expect("http: write");
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        let n = c.read(&mut buf).expect("http: read");
        assert!(n > 0, "http: the server closed the connection");
        got.extend_from_slice(&buf[..n]);
        let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
        assert!(head.starts_with("http/1.1 200"), "http: answered {head:?}");
        let body: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("http: no Content-Length");
        if got.len() >= end + 4 + body {
            assert_eq!(got.len(), end + 4 + body, "http: more than one answer");
            return got.len();
        }
    }
}

/// The CPU time (ns) the trace writer's thread (`goroutine-trace`) has
/// used so far, from Linux's `/proc/self/task/*/schedstat`; `None` where
/// there is no such thread or no such file.
fn writer_cpu_ns() -> Option<u64> {
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let dir = task.path();
        match std::fs::read_to_string(dir.join("comm")) {
            Ok(comm) if comm.trim_end() == "goroutine-trace" => {}
            _ => continue,
        }
        let stat = std::fs::read_to_string(dir.join("schedstat")).ok()?;
        return stat.split_whitespace().next()?.parse().ok();
    }
    None
}

/// The CPUs this process may run on.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is an empty set, filled by the call for
    // this thread (pid 0); CPU_ISSET reads within the set's size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// Binds the calling thread (and the threads it starts after) to `cpus`.
fn pin(cpus: &[usize]) {
    // SAFETY: as `allowed_cpus`; CPU_SET writes within the set.
    let r = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    assert_eq!(
        r,
        0,
        "sched_setaffinity: {}",
        std::io::Error::last_os_error()
    );
}

/// Starts the load generator on `addr`: `CONNS` connections over
/// `CLIENT_THREADS` plain threads, each keeping one `request` in flight
/// on every connection and reading its `reply_len` bytes.
/// With `client_cpus`, its threads run only there.
fn load_start(
    addr: std::net::SocketAddr,
    request: &'static [u8],
    reply_len: usize,
    client_cpus: Option<Vec<usize>>,
) -> Arc<Load> {
    let load = Arc::new(Load {
        done: AtomicU64::new(0),
        spell: AtomicU64::new(0),
        lat: Mutex::new(Vec::new()),
        stop: AtomicBool::new(false),
    });
    for _ in 0..CLIENT_THREADS {
        let load = load.clone();
        let conns: Vec<std::net::TcpStream> = (0..CONNS / CLIENT_THREADS)
            .map(|_| {
                let c = std::net::TcpStream::connect(addr).expect("load: connect");
                c.set_nodelay(true).expect("load: nodelay");
                c
            })
            .collect();
        let cpus = client_cpus.clone();
        std::thread::spawn(move || {
            if let Some(cpus) = cpus {
                pin(&cpus);
            }
            let mut buf = vec![0u8; reply_len];
            let (mut lat, mut round) = (Vec::with_capacity(HAND_OVER), Vec::new());
            let mut spell = 0;
            while !load.stop.load(Ordering::Relaxed) {
                // One request in flight on every connection, then each
                // reply; a request's latency is from the round's writes
                // to its reply.
                let began = load.spell.load(Ordering::Acquire);
                let t0 = Instant::now();
                for mut c in &conns {
                    c.write_all(request).expect("load: write");
                }
                for mut c in &conns {
                    c.read_exact(&mut buf).expect("load: read");
                    round.push(t0.elapsed().as_micros() as u32);
                }
                load.done.fetch_add(conns.len() as u64, Ordering::Relaxed);
                if load.spell.load(Ordering::Acquire) != began {
                    // Across a spell's start or end: dropped.
                    round.clear();
                    continue;
                }
                if began != spell {
                    // Latencies of an earlier spell, not yet handed over.
                    lat.clear();
                    spell = began;
                }
                lat.append(&mut round);
                if lat.len() >= HAND_OVER {
                    let mut shared = load.lat.lock().unwrap();
                    if load.spell.load(Ordering::Acquire) == spell {
                        shared.append(&mut lat);
                    } else {
                        lat.clear();
                    }
                }
            }
        });
    }
    load
}

/// One spell of a server workload: requests a second and the p99 latency
/// (us) over half a second.
fn load_spell(load: &Load) -> (f64, f64) {
    let d0 = load.done.load(Ordering::Relaxed);
    {
        let mut lat = load.lat.lock().unwrap();
        lat.clear();
        load.spell.fetch_add(1, Ordering::Release);
    }
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_millis(500));
    let done = load.done.load(Ordering::Relaxed) - d0;
    let secs = t0.elapsed().as_secs_f64();
    let mut lat = {
        let mut lat = load.lat.lock().unwrap();
        load.spell.fetch_add(1, Ordering::Release);
        std::mem::take(&mut *lat)
    };
    lat.sort_unstable();
    let p99 = lat.get(lat.len() * 99 / 100).copied().unwrap_or(0) as f64;
    (done as f64 / secs, p99)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let workload = args.next().unwrap_or_else(|| "skynet".to_owned());
    if !["skynet", "echo", "http"].contains(&workload.as_str()) {
        eprintln!("trace_overhead: workload must be `skynet`, `echo` or `http`, not {workload:?}");
        std::process::exit(2);
    }
    let mode = args.next().unwrap_or_else(|| "file".to_owned());
    if !["file", "flight", "none"].contains(&mode.as_str()) {
        eprintln!("trace_overhead: mode must be `file`, `flight` or `none`, not {mode:?}");
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
    // A server and its load generator on CPUs of their own, where there
    // are two or more: the server's process (its Ms, sysmon, the trace
    // writer: every thread started after this) on the first, the load
    // generator's threads on the rest. Left to the kernel, the four
    // client threads and the server's thread moved across both CPUs of a
    // 2-CPU machine, and a spell's rate moved 25% from one to the next.
    let cpus = allowed_cpus();
    let client_cpus = (workload != "skynet" && cpus.len() >= 2).then(|| {
        pin(&cpus[..1]);
        cpus[1..].to_vec()
    });
    println!(
        "{workload}, GOMAXPROCS={}: {pairs} pairs of spells, untraced and traced ({mode}){}",
        goroutine::max_procs(),
        match &client_cpus {
            Some(c) => format!("; the server on CPU {}, its load on {c:?}", cpus[0]),
            None => String::new(),
        }
    );
    // A spell's figures: skynet's round time (ms); a server's requests a
    // second and p99 latency (us).
    let load = match workload.as_str() {
        "echo" => Some(load_start(server(echo), &[7u8; MSG], MSG, client_cpus)),
        "http" => {
            let addr = server(http);
            Some(load_start(addr, GET, http_reply_len(addr), client_cpus))
        }
        _ => None,
    };
    let spell = || -> Vec<f64> {
        match &load {
            None => vec![round().as_secs_f64() * 1e3],
            Some(l) => {
                let (rps, p99) = load_spell(l);
                vec![rps, p99]
            }
        }
    };
    let names: &[&str] = if load.is_some() {
        &["req/s", "p99 us"]
    } else {
        &["ms"]
    };
    // A warm-up spell: stacks, Gs, connections and the allocator's pools.
    spell();
    let recorder = FlightRecorder::new(FlightConfig::default());
    // The trace writer's CPU time in the traced spells (to a file), and
    // their length: what the writer takes from the server's CPU.
    let (writer_ns, traced_ns) = (AtomicU64::new(0), AtomicU64::new(0));
    let traced_spell = || {
        if mode == "file" {
            goroutine::trace::start(&path).expect("trace_overhead: cannot start the trace");
        } else if mode == "flight" {
            recorder
                .start()
                .expect("trace_overhead: cannot start the flight recorder");
        }
        let t0 = Instant::now();
        let t = spell();
        if mode == "file" {
            // Since the trace's start; a writer that never ran has no
            // name yet, and no time.
            writer_ns.fetch_add(writer_cpu_ns().unwrap_or(0), Ordering::Relaxed);
            traced_ns.fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
        if mode == "file" {
            goroutine::trace::stop().expect("trace_overhead: cannot stop the trace");
        } else if mode == "flight" {
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
    if let Some(l) = &load {
        l.stop.store(true, Ordering::Relaxed);
    }
    for i in 0..n {
        let m = median(&mut ratios[i]);
        let (lo, hi) = median_interval(&ratios[i]);
        println!(
            "{}: median untraced {:.0}, traced {:.0}; median of the pairs' ratios {:+.1}% \
             (90% interval {:+.1}% to {:+.1}%)",
            names[i],
            median(&mut plain[i]),
            median(&mut traced[i]),
            (m - 1.0) * 100.0,
            (lo - 1.0) * 100.0,
            (hi - 1.0) * 100.0
        );
    }
    let (w, t) = (writer_ns.into_inner(), traced_ns.into_inner());
    if t > 0 {
        println!(
            "the trace writer's CPU time: {:.2} ms in {:.1} s of traced spells ({:.3}% of a CPU)",
            w as f64 / 1e6,
            t as f64 / 1e9,
            w as f64 / t as f64 * 100.0
        );
    }
}
