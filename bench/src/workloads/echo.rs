//! `echo_*`: TCP echo over loopback, closed loop, fixed duration
//! (benchmarks.md #12). `echo_100`: 100 connections; `echo_10k`: 10,000
//! (quick: 1,000); 64 B messages, and 512 B in `echo_100_512b`.
//!
//! Server (see [`super::net`] for how it runs): one goroutine per
//! connection (Go: goroutine; tokio: task; may: coroutine; OS threads: a
//! thread per connection, 100 connections only), each reading into a 4 KiB
//! heap buffer and writing back what it read until end of file; TCP_NODELAY
//! on every socket (Go's default).
//!
//! Load generator (`bench __client`, its own process, the same for every
//! server): a tokio current-thread runtime (one thread, to leave the CPUs to
//! the server) opens the connections, 64 at a time, each making one
//! untimed round trip before it counts as open (warm-up: every connection
//! accepted and served once; the server's accept queue never holds more
//! than 64, so a small listen backlog such as tokio's 128 never overflows
//! into SYN-ACK retransmits a second later), then runs one task per
//! connection for a fixed time (5 s; quick 0.2 s): send a message, wait for
//! the whole echo, check every byte, repeat. A message's bytes depend on the connection,
//! its sequence number and the position. The figure is completed round
//! trips per second (elapsed time up to the last reply, after the deadline
//! stops new sends), with rows `.p50_us` and `.p99_us`: the round-trip
//! time's percentiles (nearest rank) over every message. With one client
//! thread, the load generator itself bounds the rate where the server is
//! faster than it.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use super::latency::percentile;
use super::net::{announce, raise_fd_limit, BIND};
use super::{may_go, may_run, ours_run, pin_threads, tokio_run_net, Cfg, Extra, Figure};

/// Each server's read buffer.
const BUF: usize = 4096;

/// Connects in flight at once while the client opens its connections.
const CONNECTING: usize = 64;

/// The message sizes and connection counts of the rows.
pub const SMALL: usize = 64;
pub const LARGE: usize = 512;

/// Connections of `echo_10k` (quick: 1,000).
pub fn conns_10k(c: Cfg) -> usize {
    c.size(10_000, 1_000) as usize
}

/// Copies what `s` receives back to it until end of file or an error.
fn echo_conn<S: Read + Write>(mut s: S) {
    let mut buf = vec![0u8; BUF];
    loop {
        let n = match s.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if s.write_all(&buf[..n]).is_err() {
            return;
        }
    }
}

pub fn ours(c: Cfg) -> Figure {
    raise_fd_limit();
    ours_run(c.procs, || {
        let l = goroutine::net::TcpListener::bind(BIND).expect("echo: bind");
        announce(l.local_addr().expect("local_addr").port());
        loop {
            match l.accept() {
                Ok((conn, _)) => {
                    goroutine::go(move || {
                        let _ = conn.set_nodelay(true);
                        echo_conn(&conn);
                    });
                }
                Err(e) => {
                    eprintln!("echo: accept: {e}");
                    goroutine::time::sleep(Duration::from_millis(5));
                }
            }
        }
    })
}

async fn tokio_server() -> Figure {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let l = tokio::net::TcpListener::bind(BIND)
        .await
        .expect("echo: bind");
    announce(l.local_addr().expect("local_addr").port());
    loop {
        match l.accept().await {
            Ok((mut s, _)) => {
                tokio::spawn(async move {
                    let _ = s.set_nodelay(true);
                    let mut buf = vec![0u8; BUF];
                    loop {
                        let n = match s.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => n,
                        };
                        if s.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                });
            }
            Err(e) => {
                eprintln!("echo: accept: {e}");
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
        let l = ::may::net::TcpListener::bind(BIND).expect("echo: bind");
        announce(l.local_addr().expect("local_addr").port());
        loop {
            match l.accept() {
                Ok((s, _)) => {
                    may_go(move || {
                        let _ = s.set_nodelay(true);
                        echo_conn(s);
                    });
                }
                Err(e) => {
                    eprintln!("echo: accept: {e}");
                    ::may::coroutine::sleep(Duration::from_millis(5));
                }
            }
        }
    })
}

pub fn threads(c: Cfg) -> Figure {
    raise_fd_limit();
    pin_threads(c.procs);
    let l = std::net::TcpListener::bind(BIND).expect("echo: bind");
    announce(l.local_addr().expect("local_addr").port());
    loop {
        match l.accept() {
            Ok((s, _)) => {
                let _ = s.set_nodelay(true);
                std::thread::Builder::new()
                    .stack_size(64 << 10)
                    .spawn(move || echo_conn(s))
                    .expect("echo: spawning a thread");
            }
            Err(e) => {
                eprintln!("echo: accept: {e}");
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
}

pub fn go(_: Cfg) -> (&'static str, Vec<String>) {
    ("echo_server", Vec::new())
}

/// Byte `i` of message `seq` on connection `conn`.
fn pattern(conn: usize, seq: u64, i: usize) -> u8 {
    (conn as u64)
        .wrapping_mul(7919)
        .wrapping_add(seq.wrapping_mul(31))
        .wrapping_add(i as u64) as u8
}

fn fill(msg: &mut [u8], conn: usize, seq: u64) {
    for (i, b) in msg.iter_mut().enumerate() {
        *b = pattern(conn, seq, i);
    }
}

/// Checks an echo against the message sent; the error names the first
/// wrong byte.
fn check(sent: &[u8], got: &[u8], conn: usize, seq: u64) -> Result<(), String> {
    match sent.iter().zip(got).position(|(a, b)| a != b) {
        None if sent.len() == got.len() => Ok(()),
        None => Err(format!(
            "echo: connection {conn}, message {seq}: {} bytes back for {}",
            got.len(),
            sent.len()
        )),
        Some(i) => Err(format!(
            "echo: connection {conn}, message {seq}: byte {i} came back as {} for {}",
            got[i], sent[i]
        )),
    }
}

/// One checked round trip: message `seq` on connection `id`.
async fn round_trip(
    s: &mut tokio::net::TcpStream,
    id: usize,
    seq: u64,
    msg: &mut [u8],
    got: &mut [u8],
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    fill(msg, id, seq);
    if let Err(e) = s.write_all(msg).await {
        panic!("echo: connection {id}, message {seq}: write: {e}");
    }
    if let Err(e) = s.read_exact(got).await {
        panic!("echo: connection {id}, message {seq}: read: {e}");
    }
    if let Err(e) = check(msg, got, id, seq) {
        panic!("{e}");
    }
}

/// One connection's closed loop until `deadline`, from message 1 on
/// (message 0 was the warm-up): its round-trip times, ns.
async fn client_conn(
    id: usize,
    mut s: tokio::net::TcpStream,
    size: usize,
    deadline: Instant,
) -> Vec<i64> {
    let (mut msg, mut got) = (vec![0u8; size], vec![0u8; size]);
    let mut rtt = Vec::new();
    for seq in 1.. {
        let t = Instant::now();
        if t >= deadline {
            break;
        }
        round_trip(&mut s, id, seq, &mut msg, &mut got).await;
        rtt.push(t.elapsed().as_nanos() as i64);
    }
    rtt
}

/// The load generator: `conns` connections to 127.0.0.1:`port`, `size`-byte
/// messages, for 5 s (quick 0.2 s).
pub fn client(c: Cfg, port: u16, conns: usize, size: usize) -> Figure {
    raise_fd_limit();
    let run_for = Duration::from_millis(c.size(5000, 200));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .expect("tokio runtime");
    let (count, secs, mut rtt) = rt.block_on(async move {
        // Open the connections, at most CONNECTING at once, each making
        // one untimed round trip (warm-up) before it counts as open: so
        // every connection is accepted and served once before the clock
        // starts, and at most CONNECTING wait in the server's accept queue
        // (a connect completes before the server accepts it; tokio's
        // listen backlog is 128).
        let mut streams = Vec::with_capacity(conns);
        let mut set = tokio::task::JoinSet::new();
        let mut joined = |r: Result<_, tokio::task::JoinError>| match r {
            Ok(s) => streams.push(s),
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        };
        for id in 0..conns {
            if set.len() >= CONNECTING {
                joined(set.join_next().await.unwrap());
            }
            set.spawn(async move {
                let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
                    .await
                    .unwrap_or_else(|e| panic!("echo: connect to port {port}: {e}"));
                s.set_nodelay(true).expect("set_nodelay");
                let (mut msg, mut got) = (vec![0u8; size], vec![0u8; size]);
                round_trip(&mut s, id, 0, &mut msg, &mut got).await;
                (id, s)
            });
        }
        while let Some(r) = set.join_next().await {
            joined(r);
        }
        let start = Instant::now();
        let deadline = start + run_for;
        let mut set = tokio::task::JoinSet::new();
        for (id, s) in streams {
            set.spawn(client_conn(id, s, size, deadline));
        }
        let mut rtt: Vec<i64> = Vec::new();
        let mut idle = 0;
        while let Some(r) = set.join_next().await {
            match r {
                Ok(v) => {
                    idle += usize::from(v.is_empty());
                    rtt.extend(v);
                }
                Err(e) => std::panic::resume_unwind(e.into_panic()),
            }
        }
        let secs = start.elapsed().as_secs_f64();
        assert_eq!(idle, 0, "echo: {idle} of {conns} connections got no echo");
        (rtt.len(), secs, rtt)
    });
    rtt.sort_unstable();
    let us = |p| percentile(&rtt, p) as f64 / 1e3;
    Figure {
        value: count as f64 / secs,
        unit: "req/s",
        answer: format!("{count} echoes of {size} B on {conns} connections checked"),
        extra: vec![
            Extra {
                name: "p50_us",
                value: us(50.0),
                unit: "us",
            },
            Extra {
                name: "p99_us",
                value: us(99.0),
                unit: "us",
            },
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages() {
        let (mut a, mut b) = (vec![0u8; 64], vec![0u8; 64]);
        fill(&mut a, 3, 7);
        fill(&mut b, 3, 8);
        assert_ne!(a, b, "messages differ from one to the next");
        fill(&mut b, 4, 7);
        assert_ne!(a, b, "and from one connection to the next");
        assert!(a.windows(2).all(|w| w[0] != w[1]), "and byte to byte");
        assert_eq!(check(&a, &a, 3, 7), Ok(()));
        let mut bad = a.clone();
        bad[10] ^= 1;
        let e = check(&a, &bad, 3, 7).unwrap_err();
        assert!(e.contains("connection 3, message 7: byte 10"), "{e}");
        let e = check(&a, &a[..10], 3, 7).unwrap_err();
        assert!(e.contains("10 bytes back for 64"), "{e}");
    }

    #[test]
    fn sizes() {
        let quick = Cfg {
            procs: 1,
            quick: true,
        };
        let full = Cfg {
            procs: 1,
            quick: false,
        };
        assert_eq!((conns_10k(full), conns_10k(quick)), (10_000, 1_000));
    }

    /// The client against a plain-thread echo server in this process.
    #[test]
    fn client_checks_echoes() {
        let l = std::net::TcpListener::bind(BIND).unwrap();
        let port = l.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let s = s.unwrap();
                std::thread::spawn(move || echo_conn(s));
            }
        });
        let quick = Cfg {
            procs: 1,
            quick: true,
        };
        let f = client(quick, port, 4, 100);
        assert!(f.value > 0.0);
        assert!(f.answer.ends_with("of 100 B on 4 connections checked"));
        assert_eq!(f.extra.len(), 2);
        assert!(f.extra[0].value <= f.extra[1].value);
    }

    /// A server that gets one byte wrong fails the client.
    #[test]
    #[should_panic(expected = "byte 5 came back as")]
    fn client_catches_a_wrong_byte() {
        let l = std::net::TcpListener::bind(BIND).unwrap();
        let port = l.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let mut s = s.unwrap();
                std::thread::spawn(move || {
                    let mut buf = [0u8; 16];
                    while let Ok(n @ 1..) = s.read(&mut buf) {
                        buf[5] = buf[5].wrapping_add(1);
                        if s.write_all(&buf[..n]).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        let quick = Cfg {
            procs: 1,
            quick: true,
        };
        client(quick, port, 1, 16);
    }
}
