//! What a goroutine dump shows of goroutines in particular places: a
//! function that ends by calling a runtime call that waits (a tail call),
//! and a goroutine whose thread is blocked outside the runtime.

use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use goroutine::net::{TcpListener, TcpStream};
use goroutine::sync::{Semaphore, WaitGroup};
use goroutine::{go, run};

fn dump_string() -> String {
    let mut v = Vec::new();
    goroutine::dump(&mut v).unwrap();
    String::from_utf8(v).unwrap()
}

/// Dumps until every needle shows (goroutines park asynchronously).
fn dump_until(needles: &[&str]) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let d = dump_string();
        if needles.iter().all(|n| d.contains(n)) || Instant::now() > deadline {
            return d;
        }
        goroutine::time::sleep(Duration::from_millis(10));
    }
}

// Each ends with the call, so the compiler would make it a jump into the
// runtime (a tail call) that leaves no frame of the function behind.

#[inline(never)]
fn tail_sleep() {
    goroutine::time::sleep(Duration::from_secs(3600))
}

#[inline(never)]
fn tail_sleep_until() {
    goroutine::time::sleep_until(Instant::now() + Duration::from_secs(3600))
}

#[inline(never)]
fn tail_wait(wg: &WaitGroup) {
    wg.wait()
}

#[inline(never)]
fn tail_acquire(s: &Semaphore) {
    s.acquire(1)
}

#[inline(never)]
fn tail_accept(l: &TcpListener) -> std::io::Result<(TcpStream, std::net::SocketAddr)> {
    l.accept()
}

#[inline(never)]
fn tail_read(s: &mut TcpStream, buf: &mut [u8]) -> std::io::Result<usize> {
    s.read(buf)
}

#[inline(never)]
fn tail_yield() {
    goroutine::yield_now()
}

/// A goroutine parked in a runtime call its function tail-called still
/// shows that function: it showed no frame at all (the jump had replaced
/// the function's frame with the runtime's).
#[test]
fn tail_called_waits_keep_the_callers_frame() {
    if cfg!(any(
        goroutine_sanitize = "address",
        goroutine_sanitize = "thread"
    )) {
        return; // sanitizer builds record no contexts: no frames
    }
    run(|| {
        let wg = Arc::new(WaitGroup::new());
        wg.add(1);
        let sem = Arc::new(Semaphore::new(1));
        sem.acquire(1);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let idle = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));

        go(tail_sleep);
        go(tail_sleep_until);
        let w = wg.clone();
        go(move || tail_wait(&w));
        let s = sem.clone();
        go(move || tail_acquire(&s));
        let accepted = go(move || tail_accept(&idle).is_ok());
        let read = go(move || {
            let mut b = [0u8; 1];
            tail_read(&mut server, &mut b).unwrap()
        });
        let st = stop.clone();
        let yielder = go(move || {
            while !st.load(std::sync::atomic::Ordering::Relaxed) {
                tail_yield();
            }
        });
        let want = [
            "dump_frames::tail_sleep(...)",
            "dump_frames::tail_sleep_until(...)",
            "dump_frames::tail_wait(...)",
            "dump_frames::tail_acquire(...)",
            "dump_frames::tail_accept(...)",
            "dump_frames::tail_read(...)",
        ];
        let d = dump_until(&want);
        for w in want {
            assert!(d.contains(w), "no {w:?} in:\n{d}");
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        yielder.join().unwrap();
        wg.done();
        sem.release(1);
        client.write_all(b"x").unwrap();
        assert_eq!(read.join().unwrap(), 1);
        drop(accepted);
    });
}

#[inline(never)]
fn plain_sleep(stop: &std::sync::atomic::AtomicBool) {
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A goroutine blocked in a plain `std` call (its thread in the kernel,
/// outside the runtime) shows as such in `dump()`, with the system call its
/// thread is in, not as `[running]`. (SIGQUIT's dump also gives its
/// frames: tests/gotraceback.rs.)
#[test]
fn dump_names_the_system_call_of_a_goroutine_blocked_outside_the_runtime() {
    run(|| {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s = stop.clone();
        let h = go(move || plain_sleep(&s));
        let d = dump_until(&["[syscall, blocked outside the runtime: "]);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        h.join().unwrap();
        let block = d
            .split("\n\n")
            .find(|b| b.contains("blocked outside the runtime"))
            .unwrap_or_else(|| panic!("no blocked goroutine in:\n{d}"));
        // qemu-user: /proc/<tid>/syscall gives the host's system call
        // number, which the header prints as a number (README, "Supported
        // platforms").
        if !cfg!(goroutine_qemu) {
            assert!(block.contains("nanosleep]:\n"), "{block}");
        }
        assert!(
            block.contains("\tgoroutine blocked on other thread; stack unavailable"),
            "{block}"
        );
    });
}
