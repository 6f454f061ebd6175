//! `goroutine::net`: TCP, UDP and Unix sockets whose blocking calls park
//! goroutines. An echo server with 1,000 concurrent clients, timeouts and
//! deadlines, the std error kinds (refused, in use, timed out), shutdown,
//! UDP and Unix round trips, use from plain threads, one stream read and
//! written by two goroutines at once, `EMFILE` on accept, and the handlers
//! of the `echo_server` and `http_hello` examples.
//!
//! Every test runs under a time limit ([`within`]) so that a lost wakeup
//! fails the test instead of hanging it. Timing verdicts are only "at
//! least the timeout elapsed, and not absurdly more (< 5 s)".

mod common;

#[allow(dead_code)]
#[path = "../examples/echo_server.rs"]
mod echo_server;
#[allow(dead_code)]
#[path = "../examples/http_hello.rs"]
mod http_hello;

use std::io::{ErrorKind, Read, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::{within, within_thread};
use goroutine::net::{Shutdown, TcpListener, TcpStream, UdpSocket, UnixListener, UnixStream};
use goroutine::{chan, go};

/// A listener on a free loopback port, and its address.
fn listener() -> (TcpListener, std::net::SocketAddr) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap();
    (l, a)
}

/// `len` bytes that differ from client to client and from byte to byte.
fn pattern(client: usize, len: usize) -> Vec<u8> {
    let mut v: Vec<u8> = (client as u32).to_le_bytes().to_vec();
    v.extend((0..len).map(|j| (client.wrapping_mul(131) ^ j.wrapping_mul(7) ^ (j >> 8)) as u8));
    v
}

/// Asserts that `d` is at least `min` and not absurdly more.
fn assert_waited(d: Duration, min: Duration) {
    assert!(d >= min, "returned after {d:?}, before the timeout {min:?}");
    assert!(
        d < Duration::from_secs(5),
        "returned after {d:?}, timeout was {min:?}"
    );
}

/// A fresh path for a Unix socket.
fn socket_path(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("goroutine-net-{}-{name}.sock", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

/// Raises the soft open-file limit to the hard one (Go does this at start).
fn raise_nofile() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a live rlimit for both calls.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim), 0);
        lim.rlim_cur = lim.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
    }
}

// ---------------------------------------------------------------------------
// Echo server, 1,000 clients

/// 1,000 client goroutines connect at once to an echo server (one goroutine
/// per connection); each sends its own data (4 to 8 KiB), shuts down its
/// write side and checks every byte that comes back.
fn echo_clients(n: usize) {
    raise_nofile();
    within(240, move || {
        let (l, addr) = listener();
        let server = go(move || {
            for conn in l.incoming().take(n) {
                let conn = conn.expect("accept");
                go(move || echo_server::echo(&conn).expect("echo"));
            }
        });
        let clients: Vec<_> = (0..n)
            .map(|i| {
                go(move || {
                    let data = pattern(i, 4096 + (i * 37) % 4096);
                    let mut s = TcpStream::connect(addr).expect("connect");
                    s.write_all(&data).expect("write");
                    s.shutdown(Shutdown::Write).expect("shutdown");
                    let mut back = Vec::with_capacity(data.len());
                    s.read_to_end(&mut back).expect("read");
                    assert!(back == data, "client {i}: echoed data differs");
                    back.len()
                })
            })
            .collect();
        let total: usize = clients.into_iter().map(|h| h.join().unwrap()).sum();
        server.join().unwrap();
        assert!(total >= n * 4096);
    });
}

isolated_test! {
    fn echo_1000_clients() ["GOMAXPROCS" = "4"] {
        echo_clients(1000);
    }
}

isolated_test! {
    fn echo_1000_clients_one_proc() ["GOMAXPROCS" = "1"] {
        echo_clients(1000);
    }
}

// ---------------------------------------------------------------------------
// Timeouts and deadlines

#[test]
fn read_timeout_then_stream_still_works() {
    within(60, || {
        let (l, addr) = listener();
        let mut c = TcpStream::connect(addr).unwrap();
        let (mut s, _) = l.accept().unwrap();
        let d = Duration::from_millis(100);
        assert_eq!(c.read_timeout().unwrap(), None);
        c.set_read_timeout(Some(d)).unwrap();
        assert_eq!(c.read_timeout().unwrap(), Some(d));
        let t = Instant::now();
        let e = c.read(&mut [0; 16]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::WouldBlock, "{e}");
        assert_waited(t.elapsed(), d);
        // The stream still works after the timeout.
        s.write_all(b"hello").unwrap();
        let mut buf = [0; 5];
        c.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"hello");
        // std's rules for the setters.
        let e = c.set_read_timeout(Some(Duration::ZERO)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
        let e = c.set_write_timeout(Some(Duration::ZERO)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
        assert_eq!(c.read_timeout().unwrap(), Some(d));
        assert_eq!(c.write_timeout().unwrap(), None);
        c.set_read_timeout(None).unwrap();
        assert_eq!(c.read_timeout().unwrap(), None);
    });
}

#[test]
fn deadlines() {
    within(60, || {
        let (l, addr) = listener();
        let mut c = TcpStream::connect(addr).unwrap();
        let (mut s, _) = l.accept().unwrap();
        let d = Duration::from_millis(100);

        // An absolute deadline bounds a read.
        let t = Instant::now();
        c.set_read_deadline(Some(t + d));
        let e = c.read(&mut [0; 16]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut, "{e}");
        assert_waited(t.elapsed(), d);

        // A passed deadline fails reads at once, even with data ready (Go).
        s.write_all(b"data").unwrap();
        c.set_read_deadline(Some(Instant::now()));
        for _ in 0..3 {
            assert_eq!(c.read(&mut [0; 4]).unwrap_err().kind(), ErrorKind::TimedOut);
        }
        c.set_read_deadline(None);
        let mut buf = [0; 4];
        c.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"data");

        // The earlier of deadline and now + timeout wins, either way round;
        // a deadline reports TimedOut (Go), a std timeout WouldBlock (std).
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let t = Instant::now();
        c.set_read_deadline(Some(t + d));
        assert_eq!(c.read(&mut buf).unwrap_err().kind(), ErrorKind::TimedOut);
        assert_waited(t.elapsed(), d);
        c.set_read_timeout(Some(d)).unwrap();
        c.set_read_deadline(Some(Instant::now() + Duration::from_secs(30)));
        let t = Instant::now();
        assert_eq!(c.read(&mut buf).unwrap_err().kind(), ErrorKind::WouldBlock);
        assert_waited(t.elapsed(), d);

        // Write deadlines; set_deadline sets both.
        c.set_write_deadline(Some(Instant::now()));
        assert_eq!(c.write(b"x").unwrap_err().kind(), ErrorKind::TimedOut);
        c.set_deadline(None);
        c.set_read_timeout(None).unwrap();
        c.write_all(b"ok").unwrap();
        s.read_exact(&mut buf[..2]).unwrap();
        assert_eq!(&buf[..2], b"ok");
    });
}

#[test]
fn write_timeout_with_full_buffer() {
    within(60, || {
        let (l, addr) = listener();
        let mut c = TcpStream::connect(addr).unwrap();
        let (s, _) = l.accept().unwrap();
        // The peer drains only when told to, after the timeout.
        let (drain_tx, drain_rx) = chan::<()>(0);
        let peer = go(move || {
            drain_rx.recv().unwrap();
            let mut n = 0u64;
            let mut buf = vec![0; 64 * 1024];
            loop {
                match (&s).read(&mut buf).unwrap() {
                    0 => return n,
                    k => n += k as u64,
                }
            }
        });
        let d = Duration::from_millis(100);
        c.set_write_timeout(Some(d)).unwrap();
        assert_eq!(c.write_timeout().unwrap(), Some(d));
        let chunk = vec![7u8; 64 * 1024];
        let mut written = 0u64;
        let mut timed_out = None;
        for _ in 0..100_000 {
            let t = Instant::now();
            match c.write(&chunk) {
                Ok(n) => written += n as u64,
                Err(e) => {
                    assert_eq!(e.kind(), ErrorKind::WouldBlock, "{e}");
                    timed_out = Some(t.elapsed());
                    break;
                }
            }
        }
        let took = timed_out.expect("the socket buffers never filled");
        assert_waited(took, d);
        // A timed-out write wrote nothing: the peer gets exactly the rest.
        drain_tx.send(()).unwrap();
        c.set_write_timeout(None).unwrap();
        c.write_all(&chunk).unwrap();
        written += chunk.len() as u64;
        c.shutdown(Shutdown::Write).unwrap();
        assert_eq!(peer.join().unwrap(), written);
    });
}

// ---------------------------------------------------------------------------
// Descriptors

/// (`O_NONBLOCK`, `FD_CLOEXEC`) of a descriptor.
fn fd_flags(fd: &impl std::os::fd::AsRawFd) -> (bool, bool) {
    let fd = fd.as_raw_fd();
    // SAFETY: fcntl's get commands only read the descriptor's flags.
    let (fl, fdfl) = unsafe {
        (
            libc::fcntl(fd, libc::F_GETFL),
            libc::fcntl(fd, libc::F_GETFD),
        )
    };
    assert!(fl >= 0 && fdfl >= 0, "fcntl failed");
    (fl & libc::O_NONBLOCK != 0, fdfl & libc::FD_CLOEXEC != 0)
}

/// Every socket the package makes is non-blocking (the netpoller waits,
/// not the kernel) and close-on-exec (a child process inherits none):
/// listeners, accepted and connected streams, UDP and Unix sockets,
/// IPv4 and IPv6 (where the machine has an IPv6 loopback), also on a
/// plain thread.
#[test]
fn sockets_are_nonblocking_and_cloexec() {
    fn check() {
        for local in ["127.0.0.1:0", "[::1]:0"] {
            let l = match TcpListener::bind(local) {
                Ok(l) => l,
                Err(e) if local.starts_with('[') => {
                    eprintln!("no IPv6 loopback ({e}): IPv4 only");
                    continue;
                }
                Err(e) => panic!("bind {local}: {e}"),
            };
            let addr = l.local_addr().unwrap();
            let c = TcpStream::connect(addr).unwrap();
            let (s, peer) = l.accept().unwrap();
            assert_eq!(peer, c.local_addr().unwrap());
            assert_eq!(s.local_addr().unwrap(), addr);
            for (what, flags) in [
                ("listener", fd_flags(&l)),
                ("connected", fd_flags(&c)),
                ("accepted", fd_flags(&s)),
            ] {
                assert_eq!(flags, (true, true), "{local} {what}: (nonblock, cloexec)");
            }
        }
        let u = UdpSocket::bind("127.0.0.1:0").unwrap();
        assert_eq!(fd_flags(&u), (true, true), "udp");
        let (a, b) = UnixStream::pair().unwrap();
        assert_eq!(fd_flags(&a), (true, true), "unix pair");
        assert_eq!(fd_flags(&b), (true, true), "unix pair");
    }
    within(60, check);
    within_thread(60, check);
}

// ---------------------------------------------------------------------------
// Errors

#[test]
fn connection_refused() {
    within(60, || {
        // A port bound but not listening: refused, and held (without
        // SO_REUSEADDR) so that no other test's listener can take it
        // meanwhile, as it could a port closed before the connect.
        use socket2::{Domain, Socket, Type};
        let held = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        let any: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
        held.bind(&any.into()).unwrap();
        let addr = held.local_addr().unwrap().as_socket().unwrap();
        let e = TcpStream::connect(addr).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionRefused, "{e}");
        let e = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionRefused, "{e}");
    });
}

#[test]
fn address_in_use() {
    within(60, || {
        let (_l, addr) = listener();
        let e = TcpListener::bind(addr).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::AddrInUse, "{e}");
        let u = UdpSocket::bind("127.0.0.1:0").unwrap();
        let e = UdpSocket::bind(u.local_addr().unwrap()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::AddrInUse, "{e}");
        let path = socket_path("inuse");
        let _ul = UnixListener::bind(&path).unwrap();
        let e = UnixListener::bind(&path).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::AddrInUse, "{e}");
        std::fs::remove_file(&path).unwrap();
    });
}

#[test]
fn bad_addresses_are_errors() {
    within(60, || {
        assert!(TcpStream::connect("not an address").is_err());
        assert!(TcpListener::bind("300.1.2.3:0").is_err());
        let e = TcpStream::connect(&[][..] as &[std::net::SocketAddr]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
        let (_l, addr) = listener();
        let e = TcpStream::connect_timeout(&addr, Duration::ZERO).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
    });
}

isolated_test! {
    /// With the descriptor table full, `accept` returns EMFILE; once
    /// descriptors are freed, the same listener accepts the waiting
    /// connections.
    fn accept_emfile_then_recovers() {
        within(60, || {
            let (l, addr) = listener();
            let clients: Vec<_> = (0..2).map(|_| std::net::TcpStream::connect(addr).unwrap()).collect();
            let (mut hog, full) = common::fill_descriptor_table(256);
            assert_eq!(full.raw_os_error(), Some(libc::EMFILE), "{full}");
            let e = l.accept().unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EMFILE), "{e}");
            hog.truncate(hog.len().saturating_sub(8));
            for _ in &clients {
                let (s, peer) = l.accept().unwrap();
                assert_eq!(s.peer_addr().unwrap(), peer);
                assert!(clients.iter().any(|c| c.local_addr().unwrap() == peer));
            }
        });
    }
}

// ---------------------------------------------------------------------------
// Shutdown, concurrent use of one stream

#[test]
fn shutdown_write_gives_eof_to_peer() {
    within(60, || {
        let (l, addr) = listener();
        let peer = go(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut got = Vec::new();
            s.read_to_end(&mut got).unwrap(); // ends only at the FIN
            s.write_all(b"reply after eof").unwrap();
            got
        });
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(b"request").unwrap();
        c.shutdown(Shutdown::Write).unwrap();
        let mut back = Vec::new();
        c.read_to_end(&mut back).unwrap();
        assert_eq!(back, b"reply after eof");
        assert_eq!(peer.join().unwrap(), b"request");
        assert!(c.write(b"x").is_err(), "write after shutdown(Write)");
    });
}

#[test]
fn one_stream_read_and_written_by_two_goroutines() {
    within(120, || {
        const TOTAL: usize = 4 << 20;
        let (l, addr) = listener();
        go(move || {
            let (s, _) = l.accept().unwrap();
            echo_server::echo(&s).unwrap();
        });
        let c = Arc::new(TcpStream::connect(addr).unwrap());
        let data = Arc::new(pattern(7, TOTAL));
        // Without a concurrent reader the echo would stall once the socket
        // buffers fill: the writer and the reader must both make progress.
        let writer = {
            let (c, data) = (c.clone(), data.clone());
            go(move || {
                for chunk in data.chunks(8192) {
                    (&*c).write_all(chunk).unwrap();
                }
                c.shutdown(Shutdown::Write).unwrap();
            })
        };
        let mut back = Vec::with_capacity(data.len());
        (&*c).read_to_end(&mut back).unwrap();
        writer.join().unwrap();
        assert!(back == *data, "echoed data differs");
    });
}

// ---------------------------------------------------------------------------
// UDP, Unix

#[test]
fn udp_round_trip() {
    within(60, || {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = Arc::new(UdpSocket::bind("127.0.0.1:0").unwrap());
        let (a_addr, b_addr) = (a.local_addr().unwrap(), b.local_addr().unwrap());
        // The receiver waits first.
        let rx = {
            let b = b.clone();
            go(move || {
                let mut buf = [0; 64];
                let (n, from) = b.recv_from(&mut buf).unwrap();
                b.send_to(&buf[..n].to_ascii_uppercase(), from).unwrap();
                (buf[..n].to_vec(), from)
            })
        };
        a.send_to(b"ping", b_addr).unwrap();
        let mut buf = [0; 64];
        let (n, from) = a.recv_from(&mut buf).unwrap();
        assert_eq!((&buf[..n], from), (&b"PING"[..], b_addr));
        assert_eq!(rx.join().unwrap(), (b"ping".to_vec(), a_addr));

        // Connected sockets, peek, a name to resolve.
        a.connect(("localhost", b_addr.port())).unwrap();
        assert_eq!(a.peer_addr().unwrap(), b_addr);
        b.connect(a_addr).unwrap();
        a.send(b"one").unwrap();
        assert_eq!(b.peek(&mut buf).unwrap(), 3);
        assert_eq!(b.recv(&mut buf).unwrap(), 3);
        assert_eq!(&buf[..3], b"one");

        // A receive timeout.
        let d = Duration::from_millis(100);
        a.set_read_timeout(Some(d)).unwrap();
        assert_eq!(a.read_timeout().unwrap(), Some(d));
        let t = Instant::now();
        assert_eq!(a.recv(&mut buf).unwrap_err().kind(), ErrorKind::WouldBlock);
        assert_waited(t.elapsed(), d);
        assert!(a.take_error().unwrap().is_none());
    });
}

/// Linux's abstract names (no file) and unnamed peers, through
/// `bind_addr` and `connect_addr`.
#[test]
fn unix_abstract_and_unnamed_addresses() {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::SocketAddr;
    within(60, || {
        let name = format!("goroutine-test-{}-abstract", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let l = UnixListener::bind_addr(&addr).unwrap();
        assert_eq!(
            l.local_addr().unwrap().as_abstract_name(),
            Some(name.as_bytes())
        );
        // A second bind to the same name is in use, as for a path.
        let e = UnixListener::bind_addr(&addr).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::AddrInUse, "{e}");
        let server = go(move || {
            let (mut s, peer) = l.accept().unwrap();
            assert!(peer.is_unnamed(), "{peer:?}");
            let mut buf = [0; 4];
            s.read_exact(&mut buf).unwrap();
            s.write_all(&buf).unwrap();
        });
        let mut c = UnixStream::connect_addr(&addr).unwrap();
        assert!(c.local_addr().unwrap().is_unnamed());
        assert_eq!(
            c.peer_addr().unwrap().as_abstract_name(),
            Some(name.as_bytes())
        );
        c.write_all(b"ping").unwrap();
        let mut buf = [0; 4];
        c.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"ping");
        server.join().unwrap();
    });
}

#[test]
fn unix_stream_round_trip() {
    within(60, || {
        let path = socket_path("echo");
        let l = UnixListener::bind(&path).unwrap();
        assert_eq!(l.local_addr().unwrap().as_pathname(), Some(path.as_path()));
        let server = go(move || {
            let mut n = 0;
            for conn in l.incoming().take(2) {
                let mut conn = conn.unwrap();
                let mut got = Vec::new();
                conn.read_to_end(&mut got).unwrap();
                conn.write_all(&got).unwrap();
                n += got.len();
            }
            n
        });
        let mut total = 0;
        for i in 0..2 {
            let data = pattern(i, 100_000);
            let mut c = UnixStream::connect(&path).unwrap();
            let writer = {
                let c = c.try_clone().unwrap();
                let data = data.clone();
                go(move || {
                    (&c).write_all(&data).unwrap();
                    c.shutdown(Shutdown::Write).unwrap();
                })
            };
            let mut back = Vec::new();
            c.read_to_end(&mut back).unwrap();
            writer.join().unwrap();
            assert!(back == data);
            total += data.len();
        }
        assert_eq!(server.join().unwrap(), total);
        std::fs::remove_file(&path).unwrap();

        // A pair, with a read timeout.
        let (a, mut b) = UnixStream::pair().unwrap();
        let h = go(move || {
            let mut buf = [0; 5];
            b.read_exact(&mut buf).unwrap();
            b.write_all(&buf).unwrap();
        });
        (&a).write_all(b"hello").unwrap();
        let mut buf = [0; 5];
        (&a).read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"hello");
        h.join().unwrap();
        let d = Duration::from_millis(100);
        a.set_read_timeout(Some(d)).unwrap();
        let t = Instant::now();
        // The peer is gone: end of file, not a timeout.
        assert_eq!((&a).read(&mut buf).unwrap(), 0);
        assert!(t.elapsed() < Duration::from_secs(5));
    });
}

// ---------------------------------------------------------------------------
// Outside the runtime

#[test]
fn plain_threads_behave_like_std() {
    within_thread(60, || {
        assert_eq!(goroutine::current_id(), 0);
        let (l, addr) = listener();
        let server = thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut buf = [0; 5];
            s.read_exact(&mut buf).unwrap();
            s.write_all(&buf).unwrap();
            // Read until the client hangs up.
            let mut rest = Vec::new();
            s.read_to_end(&mut rest).unwrap();
        });
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(b"hello").unwrap();
        let mut buf = [0; 5];
        c.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"hello");
        let d = Duration::from_millis(100);
        c.set_read_timeout(Some(d)).unwrap();
        let t = Instant::now();
        assert_eq!(c.read(&mut buf).unwrap_err().kind(), ErrorKind::WouldBlock);
        assert_waited(t.elapsed(), d);
        drop(c);
        server.join().unwrap();

        let u = UdpSocket::bind("127.0.0.1:0").unwrap();
        u.send_to(b"self", u.local_addr().unwrap()).unwrap();
        let mut buf = [0; 8];
        assert_eq!(u.recv_from(&mut buf).unwrap().0, 4);

        let (a, mut b) = UnixStream::pair().unwrap();
        let t = thread::spawn(move || (&a).write_all(b"unix"));
        b.read_exact(&mut buf[..4]).unwrap();
        assert_eq!(&buf[..4], b"unix");
        t.join().unwrap().unwrap();
    });
}

// ---------------------------------------------------------------------------
// The rest of the API

#[test]
fn options_clones_and_conversions() {
    within(60, || {
        let (l, addr) = listener();
        let c = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
        let (s, peer) = l.accept().unwrap();
        assert_eq!(c.local_addr().unwrap(), peer);
        assert_eq!(c.peer_addr().unwrap(), addr);
        assert_eq!(s.peer_addr().unwrap(), peer);

        c.set_nodelay(true).unwrap();
        assert!(c.nodelay().unwrap());
        c.set_ttl(42).unwrap();
        assert_eq!(c.ttl().unwrap(), 42);
        l.set_ttl(43).unwrap();
        assert_eq!(l.ttl().unwrap(), 43);
        assert!(c.take_error().unwrap().is_none());
        assert!(l.take_error().unwrap().is_none());

        // set_nonblocking: WouldBlock instead of waiting, then back.
        c.set_nonblocking(true).unwrap();
        assert_eq!(
            (&c).read(&mut [0; 4]).unwrap_err().kind(),
            ErrorKind::WouldBlock
        );
        l.set_nonblocking(true).unwrap();
        assert_eq!(l.accept().unwrap_err().kind(), ErrorKind::WouldBlock);
        l.set_nonblocking(false).unwrap();

        // A clone shares the settings and the connection.
        let c2 = c.try_clone().unwrap();
        c2.set_nonblocking(false).unwrap();
        c2.set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        assert_eq!(c.read_timeout().unwrap(), Some(Duration::from_millis(50)));
        (&s).write_all(b"abcd").unwrap();
        let mut buf = [0; 4];
        assert_eq!(c.peek(&mut buf).unwrap(), 4);
        (&c2).read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"abcd");
        drop(c2);
        (&c).write_all(b"still open").unwrap();

        // From std, AsRawFd, IntoRawFd, FromRawFd.
        use std::os::fd::{AsFd, AsRawFd, FromRawFd, IntoRawFd};
        let std_client = std::net::TcpStream::connect(addr).unwrap();
        let mut ours = TcpStream::from(std_client);
        let (mut s2, _) = l.accept().unwrap();
        s2.write_all(b"xy").unwrap();
        let mut buf = [0; 2];
        ours.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"xy");
        assert_eq!(ours.as_raw_fd(), ours.as_fd().as_raw_fd());
        let raw = ours.into_raw_fd();
        // SAFETY: `raw` came from into_raw_fd and nothing else owns it.
        let mut back = unsafe { TcpStream::from_raw_fd(raw) };
        back.write_all(b"z").unwrap();
        s2.read_exact(&mut buf[..1]).unwrap();
        assert_eq!(&buf[..1], b"z");

        let l2 = TcpListener::from(std::net::TcpListener::bind("127.0.0.1:0").unwrap());
        let a2 = l2.local_addr().unwrap();
        let l3 = l2.try_clone().unwrap();
        let h = go(move || l3.accept().map(|(s, _)| s.local_addr().unwrap()));
        let _c3 = TcpStream::connect(("localhost", a2.port())).unwrap();
        assert_eq!(h.join().unwrap().unwrap(), a2);
        assert!(format!("{c:?}").contains("TcpStream"));
    });
}

// ---------------------------------------------------------------------------
// The examples' handlers

/// A client that trickles a request head one byte at a time, each within
/// the idle timeout, is cut off by the request deadline with a 408 (Go's
/// `ReadHeaderTimeout`); before, it held its connection forever.
#[test]
fn http_hello_bounds_a_trickled_request() {
    within(60, || {
        let (l, addr) = listener();
        let limits = http_hello::Limits {
            idle: Duration::from_secs(20),
            request: Duration::from_millis(300),
        };
        go(move || {
            for conn in l.incoming() {
                let conn = conn.unwrap();
                go(move || http_hello::serve_with(&conn, limits).unwrap());
            }
        });
        let mut c = TcpStream::connect(addr).unwrap();
        let head = b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: yes\r\n\r\n";
        // One byte every 20 ms for 500 ms, well past the deadline, without
        // reading. The bytes that arrive after the answer must be drained,
        // not answered with a reset: a reset fails these writes, and can
        // destroy the answer or end the read below with ECONNRESET. The
        // server closes lingering, as Go's `closeWriteAndWait` does.
        let start = Instant::now();
        let mut sent = 0;
        while start.elapsed() < Duration::from_millis(500) {
            c.write_all(&head[sent..sent + 1]).unwrap();
            sent += 1;
            goroutine::time::sleep(Duration::from_millis(20));
        }
        let mut got = Vec::new();
        c.read_to_end(&mut got).unwrap();
        let rest = String::from_utf8(got).unwrap();
        assert!(sent < head.len(), "the whole head went through");
        assert_eq!(
            rest,
            "HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
        // A prompt client on the same server is served as before.
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut rest = String::new();
        c.read_to_string(&mut rest).unwrap();
        assert!(rest.starts_with("HTTP/1.1 200 OK\r\n"), "{rest}");
    });
}

#[test]
fn http_hello_handler() {
    within(60, || {
        const OK: &str = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 14\r\n\r\nHello, World!\n";
        let (l, addr) = listener();
        go(move || {
            for conn in l.incoming() {
                let conn = conn.unwrap();
                go(move || http_hello::serve(&conn).unwrap());
            }
        });
        let mut c = TcpStream::connect(addr).unwrap();
        let read_n = |c: &mut TcpStream, n: usize| {
            let mut v = vec![0; n];
            c.read_exact(&mut v).unwrap();
            String::from_utf8(v).unwrap()
        };
        // Two pipelined requests in one write, then one split in three
        // writes, then a POST with a body: all on one connection.
        c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /again HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        assert_eq!(read_n(&mut c, 2 * OK.len()), OK.repeat(2));
        for part in [&b"GET /slow HT"[..], b"TP/1.1\r\nHost: x\r", b"\n\r\n"] {
            c.write_all(part).unwrap();
        }
        assert_eq!(read_n(&mut c, OK.len()), OK);
        c.write_all(b"POST /p HTTP/1.1\r\nContent-Length: 5\r\n\r\nhelloHEAD / HTTP/1.1\r\n\r\n")
            .unwrap();
        let head = OK.strip_suffix("Hello, World!\n").unwrap();
        assert_eq!(read_n(&mut c, OK.len() + head.len()), format!("{OK}{head}"));
        // Connection: close gets its answer, then end of file.
        c.write_all(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut rest = String::new();
        c.read_to_string(&mut rest).unwrap();
        assert_eq!(
            rest,
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 14\r\nConnection: close\r\n\r\nHello, World!\n"
        );
        // HTTP/1.0 closes unless asked to keep alive; garbage is a 400.
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET / HTTP/1.0\r\n\r\n")
            .unwrap();
        let mut rest = String::new();
        c.read_to_string(&mut rest).unwrap();
        assert_eq!(rest.matches("200 OK").count(), 2);
        assert!(rest.contains("Connection: keep-alive\r\n"));
        assert!(rest.ends_with("Connection: close\r\n\r\nHello, World!\n"));
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(b"nonsense\r\n\r\n").unwrap();
        let mut rest = String::new();
        c.read_to_string(&mut rest).unwrap();
        assert!(rest.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{rest}");
    });
}

#[test]
fn echo_server_handler() {
    within(60, || {
        let (l, addr) = listener();
        let server = go(move || {
            let (s, _) = l.accept().unwrap();
            echo_server::echo(&s).unwrap()
        });
        let mut c = TcpStream::connect(addr).unwrap();
        let data = pattern(3, 50_000);
        c.write_all(&data).unwrap();
        c.shutdown(Shutdown::Write).unwrap();
        let mut back = Vec::new();
        c.read_to_end(&mut back).unwrap();
        assert!(back == data);
        assert_eq!(server.join().unwrap(), data.len() as u64);
    });
}

// A P that keeps finding network work still runs goroutines queued on a P
// whose M does not come back to them (in a server, an M the kernel keeps
// off its CPU; here a goroutine that spins without a runtime call): before
// it takes new work from the netpoller it looks at the other Ps' queues
// (`steal::steal_queued`). Go polls first, and the queued goroutine waited
// until the network went quiet: with this test's ping-pong, to its end.
isolated_test! {
    fn queued_goroutines_run_before_new_network_work() ["GOMAXPROCS" = "2"] {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
        const ROUNDS: u64 = 100_000;
        within(120, || {
            let (a, b) = UnixStream::pair().unwrap();
            let rounds = Arc::new(AtomicU64::new(0));
            let r = rounds.clone();
            // One message in flight: each side's write readies the other in
            // the netpoller at once, so a poll always finds work.
            let pinger = go(move || {
                let mut buf = [0u8; 1];
                for _ in 0..ROUNDS {
                    (&a).write_all(&[1]).unwrap();
                    (&a).read_exact(&mut buf).unwrap();
                    r.fetch_add(1, SeqCst);
                }
            });
            let ponger = go(move || {
                let mut buf = [0u8; 1];
                while let Ok(1..) = (&b).read(&mut buf) {
                    (&b).write_all(&buf).unwrap();
                }
            });
            while rounds.load(SeqCst) < 1_000 {
                goroutine::time::sleep(Duration::from_millis(1));
            }
            let ran_at = Arc::new(AtomicU64::new(u64::MAX));
            let (ra, r) = (ran_at.clone(), rounds.clone());
            let hog = go(move || {
                let done = Arc::new(AtomicBool::new(false));
                // Two spawns: the second takes runnext and moves the first
                // into this P's ring, where another P may take it.
                for _ in 0..2 {
                    let (done, ra, r) = (done.clone(), ra.clone(), r.clone());
                    go(move || {
                        let _ = ra.compare_exchange(u64::MAX, r.load(SeqCst), SeqCst, SeqCst);
                        done.store(true, SeqCst);
                    });
                }
                // No runtime call: this P never schedules again until one
                // of them ran elsewhere (or the ping-pong ended and the
                // other P, idle, stole it).
                while !done.load(SeqCst) {
                    std::hint::spin_loop();
                }
            });
            hog.join().unwrap();
            pinger.join().unwrap();
            ponger.join().unwrap();
            let at = ran_at.load(SeqCst);
            assert!(
                at < ROUNDS,
                "the queued goroutine ran only after the ping-pong's {ROUNDS} rounds"
            );
        });
    }
}
