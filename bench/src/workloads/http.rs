//! `http`: a minimal HTTP/1.1 keep-alive "hello" server loaded by `wrk`
//! (benchmarks.md #14): `wrk -t1 -c100 -d5s --latency` (quick `-d1s`), one
//! wrk thread, 100 keep-alive connections. The figure is wrk's requests per
//! second, with rows `.p50_us` and `.p99_us` from its latency distribution.
//!
//! Servers (see [`super::net`] for how they run), every one answering any
//! request with `200 OK`, `Content-Type: text/plain`, body `Hello, World!\n`,
//! one goroutine / task / coroutine per connection, TCP_NODELAY:
//! - ours: `examples/http_hello.rs`'s handler (`serve`, compiled in here
//!   from the example's file) on `goroutine::net`, without its deadlines
//!   (`NoDeadline`, as for may: every server does the same work per
//!   request, and Go's `net/http` sets no deadline by default either);
//! - Go: `net/http` (bench/go/http_server.go), which also sends a `Date`
//!   header;
//! - tokio: hyper 1 (`http1` server connection, `service_fn`);
//! - may: the same handler as ours, on `may::net` (its streams are
//!   blocking `Read + Write` inside a coroutine);
//! - OS threads: not run (thread per connection is in `echo_100`).
//!
//! The load generator (`bench __client`, the same for every server) first
//! checks the server: two requests on one connection, each answered `200`
//! with exactly the hello body and the connection kept open; then it runs
//! wrk, whose output must show no non-2xx answer and no socket error.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use super::net::{announce, raise_fd_limit, BIND};
use super::{may_go, may_run, ours_run, tokio_run_net, Cfg, Extra, Figure};

#[allow(dead_code)]
#[path = "../../../examples/http_hello.rs"]
mod http_hello;

/// What every server answers.
pub const BODY: &[u8] = b"Hello, World!\n";

/// wrk's connections and threads.
const CONNS: u32 = 100;

pub fn ours(c: Cfg) -> Figure {
    raise_fd_limit();
    ours_run(c.procs, || {
        let l = goroutine::net::TcpListener::bind(BIND).expect("http: bind");
        announce(l.local_addr().expect("local_addr").port());
        loop {
            match l.accept() {
                Ok((conn, _)) => {
                    goroutine::go(move || {
                        let _ = conn.set_nodelay(true);
                        let _ = http_hello::serve(http_hello::NoDeadline(&conn));
                    });
                }
                Err(e) => {
                    eprintln!("http: accept: {e}");
                    goroutine::time::sleep(Duration::from_millis(5));
                }
            }
        }
    })
}

async fn hello(
    _: hyper::Request<hyper::body::Incoming>,
) -> Result<hyper::Response<http_body_util::Full<hyper::body::Bytes>>, std::convert::Infallible> {
    Ok(hyper::Response::builder()
        .header("Content-Type", "text/plain")
        .body(http_body_util::Full::new(hyper::body::Bytes::from_static(
            BODY,
        )))
        .expect("response"))
}

async fn tokio_server() -> Figure {
    let l = tokio::net::TcpListener::bind(BIND)
        .await
        .expect("http: bind");
    announce(l.local_addr().expect("local_addr").port());
    loop {
        match l.accept().await {
            Ok((s, _)) => {
                let _ = s.set_nodelay(true);
                tokio::spawn(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(
                            hyper_util::rt::TokioIo::new(s),
                            hyper::service::service_fn(hello),
                        )
                        .await;
                });
            }
            Err(e) => {
                eprintln!("http: accept: {e}");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
}

pub fn tokio(c: Cfg) -> Figure {
    raise_fd_limit();
    tokio_run_net(c.procs, tokio_server())
}

pub fn may(c: Cfg) -> Figure {
    raise_fd_limit();
    may_run(c.procs, || {
        let l = ::may::net::TcpListener::bind(BIND).expect("http: bind");
        announce(l.local_addr().expect("local_addr").port());
        loop {
            match l.accept() {
                Ok((s, _)) => {
                    may_go(move || {
                        let _ = s.set_nodelay(true);
                        let _ = http_hello::serve(http_hello::NoDeadline(s));
                    });
                }
                Err(e) => {
                    eprintln!("http: accept: {e}");
                    ::may::coroutine::sleep(Duration::from_millis(5));
                }
            }
        }
    })
}

pub fn go(_: Cfg) -> (&'static str, Vec<String>) {
    ("http_server", Vec::new())
}

/// Why the workload cannot run here, if wrk is missing.
pub fn wrk_missing() -> Option<&'static str> {
    not_installed(&Command::new("wrk").arg("--version").output())
        .then_some("wrk not installed: apt-get install -y wrk")
}

/// Whether a spawn's result says its program is not installed: the spawn
/// failed with `NotFound`, or, under qemu-user (the emulated bench run),
/// where such a spawn does not fail, its child exited 127, the shell's
/// "not found" (glibc's posix_spawn cannot hand the exec's error back
/// through the emulated vfork). wrk itself never exits 127.
fn not_installed(spawned: &std::io::Result<std::process::Output>) -> bool {
    match spawned {
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
        Ok(out) => out.status.code() == Some(127),
    }
}

/// One parsed response: its status and body, and its length in the buffer.
#[derive(Debug, PartialEq)]
struct Response {
    status: u16,
    body: Vec<u8>,
    len: usize,
}

/// Parses the response at the start of `data`: `Ok(None)` while incomplete.
/// Needs `Content-Length` (every server here sends it for its short body)
/// and a connection kept alive.
fn parse_response(data: &[u8]) -> Result<Option<Response>, String> {
    let Some(head_len) = data.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Ok(None);
    };
    let head = std::str::from_utf8(&data[..head_len]).map_err(|_| "head is not UTF-8")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let status = match status_line.split(' ').collect::<Vec<_>>()[..] {
        ["HTTP/1.1", code, ..] => code
            .parse::<u16>()
            .map_err(|_| format!("bad status line {status_line:?}"))?,
        _ => return Err(format!("bad status line {status_line:?}")),
    };
    let mut body_len = None;
    for line in lines {
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| format!("bad header {line:?}"))?;
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            body_len = Some(
                value
                    .parse::<usize>()
                    .map_err(|_| format!("bad Content-Length {value:?}"))?,
            );
        } else if name.eq_ignore_ascii_case("connection") && value.eq_ignore_ascii_case("close") {
            return Err("the server closes the connection (no keep-alive)".into());
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(format!("unexpected Transfer-Encoding {value:?}"));
        }
    }
    let body_len = body_len.ok_or("no Content-Length")?;
    let len = head_len + 4 + body_len;
    if data.len() < len {
        return Ok(None);
    }
    Ok(Some(Response {
        status,
        body: data[head_len + 4..len].to_vec(),
        len,
    }))
}

/// Sends two requests on one connection and checks both answers: `200`,
/// the hello body, the connection kept open for the second.
fn check_server(port: u16) -> Result<(), String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    for k in 1..=2 {
        s.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .map_err(|e| format!("request {k}: write: {e}"))?;
        let r = loop {
            if let Some(r) = parse_response(&buf).map_err(|e| format!("response {k}: {e}"))? {
                break r;
            }
            let mut chunk = [0u8; 4096];
            match s.read(&mut chunk) {
                Ok(0) => return Err(format!("response {k}: connection closed")),
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e) => return Err(format!("response {k}: read: {e}")),
            }
        };
        if r.status != 200 {
            return Err(format!("response {k}: status {}", r.status));
        }
        if r.body != BODY {
            return Err(format!(
                "response {k}: body {:?}, not {:?}",
                String::from_utf8_lossy(&r.body),
                String::from_utf8_lossy(BODY)
            ));
        }
        buf.drain(..r.len);
    }
    if !buf.is_empty() {
        return Err(format!("{} bytes after the answers", buf.len()));
    }
    Ok(())
}

/// What a wrk run reported.
#[derive(Debug, PartialEq)]
pub struct Wrk {
    pub requests: u64,
    pub req_per_s: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub non_2xx: u64,
    pub socket_errors: u64,
}

/// A wrk duration (`812.00us`, `1.20ms`, `2.00s`, `1.00m`) in µs.
fn wrk_time_us(s: &str) -> Option<f64> {
    let split = s.find(|c: char| c.is_ascii_alphabetic())?;
    let v: f64 = s[..split].parse().ok()?;
    let scale = match &s[split..] {
        "us" => 1.0,
        "ms" => 1e3,
        "s" => 1e6,
        "m" => 60e6,
        "h" => 3600e6,
        _ => return None,
    };
    Some(v * scale)
}

/// Parses the output of `wrk --latency`.
pub fn parse_wrk(out: &str) -> Result<Wrk, String> {
    let (mut requests, mut req_per_s, mut p50, mut p99) = (None, None, None, None);
    let (mut non_2xx, mut socket_errors) = (0, 0);
    let bad = |l: &str| format!("wrk: cannot read {:?}", l.trim());
    for line in out.lines() {
        let t = line.trim();
        let words: Vec<&str> = t.split_whitespace().collect();
        if let Some(v) = t.strip_prefix("Requests/sec:") {
            req_per_s = Some(v.trim().parse::<f64>().map_err(|_| bad(line))?);
        } else if let ["50%" | "99%", time] = words[..] {
            let us = wrk_time_us(time).ok_or_else(|| bad(line))?;
            if words[0] == "50%" {
                p50 = Some(us);
            } else {
                p99 = Some(us);
            }
        } else if let [n, "requests", "in", ..] = words[..] {
            requests = Some(n.parse::<u64>().map_err(|_| bad(line))?);
        } else if let Some(v) = t.strip_prefix("Non-2xx or 3xx responses:") {
            non_2xx = v.trim().parse().map_err(|_| bad(line))?;
        } else if let Some(v) = t.strip_prefix("Socket errors:") {
            // "connect 0, read 0, write 0, timeout 0"
            for part in v.split(',') {
                let n = part.split_whitespace().nth(1).ok_or_else(|| bad(line))?;
                socket_errors += n.parse::<u64>().map_err(|_| bad(line))?;
            }
        }
    }
    let missing = |what: &str| format!("wrk: no {what} in its output: {}", out.trim());
    Ok(Wrk {
        requests: requests.ok_or_else(|| missing("request count"))?,
        req_per_s: req_per_s.ok_or_else(|| missing("Requests/sec"))?,
        p50_us: p50.ok_or_else(|| missing("50% latency (--latency)"))?,
        p99_us: p99.ok_or_else(|| missing("99% latency (--latency)"))?,
        non_2xx,
        socket_errors,
    })
}

/// Checks a wrk report: requests made, none answered other than 2xx, no
/// socket error.
fn check_wrk(w: &Wrk) -> Result<(), String> {
    if w.requests == 0 {
        return Err("wrk: no request completed".into());
    }
    if w.non_2xx != 0 {
        return Err(format!("wrk: {} non-2xx answers", w.non_2xx));
    }
    if w.socket_errors != 0 {
        return Err(format!("wrk: {} socket errors", w.socket_errors));
    }
    Ok(())
}

/// The load generator: checks the server at 127.0.0.1:`port`, then runs
/// wrk against it for 5 s (quick 1 s).
pub fn client(c: Cfg, port: u16) -> Figure {
    check_server(port).unwrap_or_else(|e| panic!("http: {e}"));
    let url = format!("http://127.0.0.1:{port}/");
    let out = Command::new("wrk")
        .args([
            "-t1".to_string(),
            format!("-c{CONNS}"),
            format!("-d{}s", c.size(5, 1)),
            "--latency".to_string(),
            url,
        ])
        .output();
    let out = match out {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            panic!("wrk not installed: apt-get install -y wrk")
        }
        Err(e) => panic!("wrk: {e}"),
    };
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        panic!(
            "wrk: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let w = parse_wrk(&text).unwrap_or_else(|e| panic!("{e}"));
    check_wrk(&w).unwrap_or_else(|e| panic!("{e}"));
    Figure {
        value: w.req_per_s,
        unit: "req/s",
        answer: format!(
            "{} requests on {CONNS} connections, all 2xx; hello body checked",
            w.requests
        ),
        extra: vec![
            Extra {
                name: "p50_us",
                value: w.p50_us,
                unit: "us",
            },
            Extra {
                name: "p99_us",
                value: w.p99_us,
                unit: "us",
            },
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WRK: &str = "\
Running 1s test @ http://127.0.0.1:40123/
  1 threads and 100 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.23ms  456.00us  10.00ms   80.00%
    Req/Sec    80.00k     5.00k   90.00k    70.00%
  Latency Distribution
     50%  812.00us
     75%    1.30ms
     90%    1.60ms
     99%    3.05ms
  81234 requests in 1.00s, 9.50MB read
Requests/sec:  81234.56
Transfer/sec:      9.50MB
";

    /// A missing wrk is told apart natively (`NotFound`) and under
    /// qemu-user (exit 127), not from wrk's own exits.
    #[test]
    fn a_missing_wrk_is_told_apart() {
        use std::os::unix::process::ExitStatusExt;
        let exited = |code: i32| {
            Ok(std::process::Output {
                status: std::process::ExitStatus::from_raw(code << 8),
                stdout: Vec::new(),
                stderr: Vec::new(),
            })
        };
        let failed = |kind| Err(std::io::Error::from(kind));
        assert!(not_installed(&failed(std::io::ErrorKind::NotFound)));
        assert!(not_installed(&exited(127)));
        assert!(!not_installed(&exited(1)));
        assert!(!not_installed(&exited(0)));
        assert!(!not_installed(&failed(
            std::io::ErrorKind::PermissionDenied
        )));
    }

    #[test]
    fn wrk_output() {
        let w = parse_wrk(WRK).unwrap();
        assert_eq!(
            w,
            Wrk {
                requests: 81234,
                req_per_s: 81234.56,
                p50_us: 812.0,
                p99_us: 3050.0,
                non_2xx: 0,
                socket_errors: 0,
            }
        );
        assert_eq!(check_wrk(&w), Ok(()));
        let errs = WRK.replace(
            "Requests/sec",
            "  Socket errors: connect 0, read 2, write 0, timeout 1\n  Non-2xx or 3xx responses: 7\nRequests/sec",
        );
        let w = parse_wrk(&errs).unwrap();
        assert_eq!((w.non_2xx, w.socket_errors), (7, 3));
        assert!(check_wrk(&w).unwrap_err().contains("7 non-2xx"));
        let w = Wrk {
            non_2xx: 0,
            ..parse_wrk(&errs).unwrap()
        };
        assert!(check_wrk(&w).unwrap_err().contains("3 socket errors"));
        let no_latency: Vec<&str> = WRK.lines().filter(|l| !l.contains("99%")).collect();
        let no_latency = no_latency.join("\n");
        assert!(parse_wrk(&no_latency).unwrap_err().contains("99%"));
        assert!(parse_wrk("").is_err());
        assert!(parse_wrk(&WRK.replace("81234.56", "fast")).is_err());
    }

    #[test]
    fn wrk_times() {
        assert_eq!(wrk_time_us("812.00us"), Some(812.0));
        assert_eq!(wrk_time_us("1.50ms"), Some(1500.0));
        assert_eq!(wrk_time_us("2.00s"), Some(2e6));
        assert_eq!(wrk_time_us("1.00m"), Some(60e6));
        assert_eq!(wrk_time_us("12"), None);
        assert_eq!(wrk_time_us("1.0xs"), None);
    }

    #[test]
    fn responses() {
        let ok = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 14\r\n\r\nHello, World!\n";
        let r = parse_response(ok).unwrap().unwrap();
        assert_eq!((r.status, r.body.as_slice(), r.len), (200, BODY, ok.len()));
        assert_eq!(parse_response(&ok[..ok.len() - 1]), Ok(None));
        assert_eq!(parse_response(&ok[..20]), Ok(None));
        let mut two = ok.to_vec();
        two.extend_from_slice(ok);
        assert_eq!(parse_response(&two).unwrap().unwrap().len, ok.len());
        let not_found = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(parse_response(not_found).unwrap().unwrap().status, 404);
        let close = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
        assert!(parse_response(close).unwrap_err().contains("keep-alive"));
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert!(parse_response(chunked).is_err());
        assert!(parse_response(b"HTTP/1.1 200 OK\r\n\r\n").is_err());
        assert!(parse_response(b"SSH-2.0\r\n\r\n").is_err());
    }

    /// Serves `answer` to every request on a thread of this process.
    fn fake_server(answer: &'static [u8]) -> u16 {
        let l = std::net::TcpListener::bind(BIND).unwrap();
        let port = l.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let mut s = s.unwrap();
                std::thread::spawn(move || {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 1024];
                    while let Ok(n @ 1..) = s.read(&mut chunk) {
                        buf.extend_from_slice(&chunk[..n]);
                        while let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            buf.drain(..i + 4);
                            if s.write_all(answer).is_err() {
                                return;
                            }
                        }
                    }
                });
            }
        });
        port
    }

    #[test]
    fn server_checks() {
        let good = fake_server(
            b"HTTP/1.1 200 OK\r\nContent-Length: 14\r\nDate: now\r\n\r\nHello, World!\n",
        );
        assert_eq!(check_server(good), Ok(()));
        let wrong = fake_server(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nHello\n");
        assert!(check_server(wrong).unwrap_err().contains("body"));
        let status = fake_server(b"HTTP/1.1 500 Oops\r\nContent-Length: 14\r\n\r\nHello, World!\n");
        assert!(check_server(status).unwrap_err().contains("status 500"));
    }

    /// The handler compiled in from examples/http_hello.rs answers the
    /// checks, on plain threads.
    #[test]
    fn example_handler() {
        let l = std::net::TcpListener::bind(BIND).unwrap();
        let port = l.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let s = s.unwrap();
                std::thread::spawn(move || http_hello::serve(http_hello::NoDeadline(s)));
            }
        });
        assert_eq!(check_server(port), Ok(()));
    }
}
