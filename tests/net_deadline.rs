//! Deadlines that act at once (Go's `net.Conn` contract), ported from Go's
//! net/timeout_test.go where they apply: a deadline set while an operation
//! is parked re-arms it; a past one wakes it with `TimedOut`
//! (TestReadTimeoutUnblocksRead, TestVariousDeadlines' "set in the past");
//! extending one keeps it waiting (TestReadTimeoutMustNotReturn); `None`
//! cancels the timer. Listener deadlines (TestAcceptTimeout,
//! TestAcceptTimeoutMustNotReturn); std timeouts report `WouldBlock`; 2,000
//! parked readers all woken by past deadlines set from one goroutine.
//!
//! Every test runs under a generous time limit ([`within`]), so a lost
//! wakeup fails instead of hanging. "Still waiting" is checked by a channel
//! that has not received after a short pause: it cannot give a false
//! failure on a slow machine, only miss a bug on one.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::time::{Duration, Instant};

use common::within;
use goroutine::net::{TcpListener, TcpStream, UdpSocket, UnixListener, UnixStream};
use goroutine::{chan, go, TryRecvError};

fn pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (s, _) = l.accept().unwrap();
    (c, s)
}

/// Lets a goroutine that was just started reach its park.
fn settle() {
    goroutine::time::sleep(Duration::from_millis(50));
}

fn far() -> Option<Instant> {
    Some(Instant::now() + Duration::from_secs(3600))
}

/// A read parked with no deadline is woken by a deadline in the past set
/// from another goroutine, with TimedOut; the stream works after clearing it.
#[test]
fn past_read_deadline_wakes_parked_read() {
    within(60, || {
        let (c, mut s) = pair();
        let c = std::sync::Arc::new(c);
        let c2 = c.clone();
        let (tx, rx) = chan(1);
        go(move || {
            let r = (&*c2).read(&mut [0; 8]);
            tx.send(r.map_err(|e| e.kind())).unwrap();
        });
        settle();
        assert!(matches!(rx.try_recv(), Err(TryRecvError::Empty)));
        let t = Instant::now();
        c.set_read_deadline(Some(Instant::now() - Duration::from_millis(1)));
        assert_eq!(rx.recv().unwrap(), Err(ErrorKind::TimedOut));
        assert!(t.elapsed() < Duration::from_secs(10));
        // Cleared: reads work again.
        c.set_read_deadline(None);
        s.write_all(b"hi").unwrap();
        let mut buf = [0; 2];
        (&*c).read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"hi");
    });
}

/// A deadline moved from far away to soon fires at the new time; a short
/// one moved far away (Go's TestReadTimeoutMustNotReturn) or cleared keeps
/// the read waiting until data comes.
#[test]
fn deadline_rearms_parked_read() {
    within(60, || {
        let (c, mut s) = pair();
        let c = std::sync::Arc::new(c);

        // Far -> 100 ms: fires.
        c.set_read_deadline(far());
        let c2 = c.clone();
        let (tx, rx) = chan(1);
        go(move || {
            let r = (&*c2).read(&mut [0; 8]);
            tx.send(r.map_err(|e| e.kind())).unwrap();
        });
        settle();
        let t = Instant::now();
        c.set_read_deadline(Some(t + Duration::from_millis(100)));
        assert_eq!(rx.recv().unwrap(), Err(ErrorKind::TimedOut));
        assert!(t.elapsed() >= Duration::from_millis(100));

        // 100 ms -> far, and 100 ms -> None: keeps waiting, then reads.
        for later in [far(), None] {
            c.set_read_deadline(Some(Instant::now() + Duration::from_millis(100)));
            let c2 = c.clone();
            let (tx, rx) = chan(1);
            go(move || {
                let mut buf = [0; 2];
                let r = (&*c2).read(&mut buf).map(|n| buf[..n].to_vec());
                tx.send(r.map_err(|e| e.kind())).unwrap();
            });
            settle();
            c.set_read_deadline(later);
            goroutine::time::sleep(Duration::from_millis(300));
            assert!(
                matches!(rx.try_recv(), Err(TryRecvError::Empty)),
                "read returned although its deadline was moved to {later:?}"
            );
            s.write_all(b"ok").unwrap();
            assert_eq!(rx.recv().unwrap(), Ok(b"ok".to_vec()));
        }
    });
}

/// A write parked on a full send buffer is woken by a past write deadline.
#[test]
fn past_write_deadline_wakes_parked_write() {
    within(60, || {
        let (c, _s) = pair();
        let c = std::sync::Arc::new(c);
        let c2 = c.clone();
        let (tx, rx) = chan(1);
        go(move || {
            let chunk = vec![1u8; 64 * 1024];
            loop {
                if let Err(e) = (&*c2).write(&chunk) {
                    tx.send(e.kind()).unwrap();
                    return;
                }
            }
        });
        // Wait until the writer is parked (the buffers are full).
        goroutine::time::sleep(Duration::from_millis(200));
        c.set_write_deadline(Some(Instant::now()));
        assert_eq!(rx.recv().unwrap(), ErrorKind::TimedOut);
    });
}

/// A deadline set on a clone wakes a read parked on the original (they are
/// one socket).
#[test]
fn deadline_on_clone_wakes_original() {
    within(60, || {
        let (c, _s) = pair();
        let clone = c.try_clone().unwrap();
        let (tx, rx) = chan(1);
        go(move || {
            let r = (&c).read(&mut [0; 8]);
            tx.send(r.map_err(|e| e.kind())).unwrap();
        });
        settle();
        clone.set_deadline(Some(Instant::now()));
        assert_eq!(rx.recv().unwrap(), Err(ErrorKind::TimedOut));
    });
}

/// UDP and Unix streams follow the same contract.
#[test]
fn udp_and_unix_deadlines_wake() {
    within(60, || {
        let u = std::sync::Arc::new(UdpSocket::bind("127.0.0.1:0").unwrap());
        let u2 = u.clone();
        let (tx, rx) = chan(1);
        go(move || {
            tx.send(u2.recv_from(&mut [0; 8]).map_err(|e| e.kind()).map(|_| ()))
                .unwrap();
        });
        settle();
        u.set_read_deadline(Some(Instant::now()));
        assert_eq!(rx.recv().unwrap(), Err(ErrorKind::TimedOut));

        let (a, _b) = UnixStream::pair().unwrap();
        let a = std::sync::Arc::new(a);
        let a2 = a.clone();
        let (tx, rx) = chan(1);
        go(move || {
            tx.send((&*a2).read(&mut [0; 8]).map_err(|e| e.kind()))
                .unwrap();
        });
        settle();
        a.set_read_deadline(Some(Instant::now()));
        assert_eq!(rx.recv().unwrap(), Err(ErrorKind::TimedOut));
    });
}

/// std timeouts: expiry is WouldBlock (EAGAIN, as std on Linux); a passed
/// Go-style deadline is TimedOut.
#[test]
fn std_timeout_is_would_block_deadline_is_timed_out() {
    within(60, || {
        let (c, _s) = pair();
        c.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let e = (&c).read(&mut [0; 8]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::WouldBlock);
        assert_eq!(e.raw_os_error(), Some(libc::EAGAIN));
        c.set_read_deadline(Some(Instant::now() + Duration::from_millis(50)));
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let e = (&c).read(&mut [0; 8]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut);
    });
    // The same from a plain thread, outside the runtime.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let _s = l.accept().unwrap();
    c.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    assert_eq!(
        (&c).read(&mut [0; 8]).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
}

/// Listener deadlines (Go's TestAcceptTimeout): a passed deadline fails
/// accept at once; one that passes while accept is parked, or is moved
/// into the past, wakes it with TimedOut; clearing it makes accept work.
#[test]
fn listener_deadlines() {
    within(60, || {
        let l = std::sync::Arc::new(TcpListener::bind("127.0.0.1:0").unwrap());
        let addr = l.local_addr().unwrap();

        l.set_deadline(Some(Instant::now()));
        assert_eq!(l.accept().unwrap_err().kind(), ErrorKind::TimedOut);

        let t = Instant::now();
        l.set_deadline(Some(t + Duration::from_millis(100)));
        assert_eq!(l.accept().unwrap_err().kind(), ErrorKind::TimedOut);
        assert!(t.elapsed() >= Duration::from_millis(100));

        // Parked with no deadline; another goroutine moves it to the past.
        l.set_deadline(None);
        let l2 = l.clone();
        let (tx, rx) = chan(1);
        go(move || {
            tx.send(l2.accept().map(|_| ()).map_err(|e| e.kind()))
                .unwrap();
        });
        settle();
        l.set_deadline(Some(Instant::now()));
        assert_eq!(rx.recv().unwrap(), Err(ErrorKind::TimedOut));

        // Cleared: accept works again (TestAcceptTimeoutMustNotReturn's
        // other half: a far deadline does not fire).
        l.set_deadline(far());
        let h = go(move || TcpStream::connect(addr).unwrap());
        let (_s, _) = l.accept().unwrap();
        h.join().unwrap();
        l.set_deadline(None);
        let h = go(move || TcpStream::connect(addr).unwrap());
        l.accept().unwrap();
        h.join().unwrap();

        // Unix listeners too.
        let path =
            std::env::temp_dir().join(format!("goroutine-deadline-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let ul = std::sync::Arc::new(UnixListener::bind(&path).unwrap());
        let ul2 = ul.clone();
        let (tx, rx) = chan(1);
        go(move || {
            tx.send(ul2.accept().map(|_| ()).map_err(|e| e.kind()))
                .unwrap();
        });
        settle();
        ul.set_deadline(Some(Instant::now()));
        assert_eq!(rx.recv().unwrap(), Err(ErrorKind::TimedOut));
        ul.set_deadline(None);
        let p2 = path.clone();
        let h = go(move || UnixStream::connect(&p2).unwrap());
        ul.accept().unwrap();
        h.join().unwrap();
        std::fs::remove_file(&path).unwrap();
    });
}

/// 2,000 goroutines parked in reads, all woken by past deadlines set from
/// one other goroutine.
#[test]
fn two_thousand_parked_reads_woken_by_past_deadlines() {
    const N: usize = 2000;
    within(120, || {
        let mut mine = Vec::with_capacity(N);
        let mut peers = Vec::with_capacity(N);
        for _ in 0..N {
            let (a, b) = UnixStream::pair().unwrap();
            mine.push(std::sync::Arc::new(a));
            peers.push(b);
        }
        let (tx, rx) = chan(N);
        let (parked_tx, parked_rx) = chan::<()>(N);
        for s in &mine {
            let s = s.clone();
            let tx = tx.clone();
            let parked_tx = parked_tx.clone();
            go(move || {
                parked_tx.send(()).unwrap();
                let r = (&*s).read(&mut [0; 8]);
                tx.send(r.map_err(|e| e.kind())).unwrap();
            });
        }
        for _ in 0..N {
            parked_rx.recv().unwrap();
        }
        settle();
        let setter = go(move || {
            let now = Instant::now();
            for s in &mine {
                s.set_read_deadline(Some(now));
            }
            mine
        });
        for _ in 0..N {
            assert_eq!(rx.recv().unwrap(), Err(ErrorKind::TimedOut));
        }
        drop(setter.join().unwrap());
        drop(peers);
    });
}
