//! Blocking calls that bypass the runtime (plain `std` and C calls inside
//! goroutines): sysmon takes the P of a thread blocked in the kernel and
//! hands it to another M; the thread gets a P back at its next runtime call.

mod common;

use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::within;
use goroutine::{go, run};

fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

/// A goroutine that sleeps 1 ms (a runtime sleep) in a loop until `stop`,
/// returning its worst gap between wake-ups.
fn ticker(stop: Arc<AtomicBool>) -> goroutine::JoinHandle<Duration> {
    go(move || {
        let mut worst = Duration::ZERO;
        let mut last = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            goroutine::time::sleep(Duration::from_millis(1));
            let now = Instant::now();
            worst = worst.max(now - last);
            last = now;
        }
        worst
    })
}

fn sleepers_do_not_stall_a_ticker() {
    within(60, sleepers_beside_a_ticker);
}

/// Two goroutines sleep in `std::thread::sleep` 5 x 100 ms while a ticker
/// runs: the ticker must never wait long, and the P must have been handed
/// off.
fn sleepers_beside_a_ticker() {
    let stop = Arc::new(AtomicBool::new(false));
    let t = ticker(stop.clone());
    let sleepers: Vec<_> = (0..2)
        .map(|_| {
            go(|| {
                for _ in 0..5 {
                    std::thread::sleep(Duration::from_millis(100));
                }
            })
        })
        .collect();
    for s in sleepers {
        s.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let worst = t.join().unwrap();
    // Nothing else could run for 500 ms without the handoff; on a loaded
    // machine allow a generous margin above the ~20 us-10 ms detection
    // delay.
    assert!(worst < Duration::from_millis(150), "worst gap {worst:?}");
    let st = goroutine::stats();
    assert!(st.blocked_handoffs > 0, "{st:?}");
}

isolated_test! {
    /// With the descriptor table full, a thread blocked outside the runtime
    /// still gives up its P (sysmon's probe needs no new descriptor), and
    /// the runtime never frees a slot under the program: every open keeps
    /// failing with EMFILE until the program closes something.
    fn full_descriptor_table_neither_stalls_nor_frees_a_slot() ["GOMAXPROCS" = "1"] {
        within(60, full_table_body);
    }
}

/// Lowers the descriptor limit to 256, fills the table, runs the sleepers
/// beside a ticker, then checks that no slot came free meanwhile.
fn full_table_body() {
    let (hog, full) = common::fill_descriptor_table(256);
    assert_eq!(full.raw_os_error(), Some(libc::EMFILE), "{full}");
    sleepers_beside_a_ticker();
    for _ in 0..50 {
        let e = std::fs::File::open("/dev/null").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EMFILE), "{e}");
        goroutine::time::sleep(Duration::from_millis(1));
    }
    drop(hog);
    std::fs::File::open("/dev/null").unwrap();
}

isolated_test! {
    /// sysmon keeps each probed thread's `/proc` stat file open, but at most
    /// 32 of them however many threads block: 64 goroutines sleep in
    /// `std::thread::sleep` at once.
    fn probe_files_are_bounded() ["GOMAXPROCS" = "2"] {
        within(60, || {
            let sleepers: Vec<_> = (0..64)
                .map(|_| go(|| std::thread::sleep(Duration::from_millis(300))))
                .collect();
            for s in sleepers {
                s.join().unwrap();
            }
            let st = goroutine::stats();
            assert!(st.blocked_handoffs >= 10, "{st:?}");
            let stat_files = std::fs::read_dir("/proc/self/fd")
                .unwrap()
                .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter(|l| {
                    let l = l.to_string_lossy();
                    l.contains("/task/") && l.ends_with("/stat")
                })
                .count();
            assert!((1..=32).contains(&stat_files), "{stat_files} stat files open");
        });
    }
}

// The first program, at GOMAXPROCS 1 and 2.
isolated_test! {
    fn std_sleep_does_not_stall_others_p1() ["GOMAXPROCS" = "1"] {
        sleepers_do_not_stall_a_ticker();
    }
}
isolated_test! {
    fn std_sleep_does_not_stall_others_p2() ["GOMAXPROCS" = "2"] {
        sleepers_do_not_stall_a_ticker();
    }
}

// The second program: a goroutine holds a std Mutex while parked on
// a channel; two others block in `lock()` (a futex outside the runtime).
// Without the handoff nobody is left to send to the holder.
isolated_test! {
    fn std_mutex_held_across_a_park() ["GOMAXPROCS" = "2"] {
        within(60, || {
            let m = Arc::new(Mutex::new(0u32));
            let (tx, rx) = goroutine::chan::<()>(0);
            let (locked_tx, locked_rx) = goroutine::chan::<()>(0);
            let m1 = m.clone();
            let holder = go(move || {
                let mut g = m1.lock().unwrap();
                locked_tx.send(()).unwrap();
                rx.recv().unwrap();
                *g += 1;
            });
            locked_rx.recv().unwrap();
            let waiters: Vec<_> = (0..2)
                .map(|_| {
                    let m = m.clone();
                    go(move || {
                        *m.lock().unwrap() += 1;
                    })
                })
                .collect();
            // Let both waiters block in the kernel, then wake the holder.
            goroutine::time::sleep(Duration::from_millis(50));
            tx.send(()).unwrap();
            holder.join().unwrap();
            for w in waiters {
                w.join().unwrap();
            }
            assert_eq!(*m.lock().unwrap(), 3);
        });
    }
}

// The third program: opening a FIFO blocks until a writer appears.
isolated_test! {
    fn fifo_open_does_not_stall_p1() ["GOMAXPROCS" = "1"] {
        within(60, || {
            let dir = std::env::temp_dir().join(format!("goroutine-fifo-{}", std::process::id()));
            let _ = std::fs::create_dir(&dir);
            let path = dir.join("fifo");
            let _ = std::fs::remove_file(&path);
            let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
            // SAFETY: a valid C string path.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
            let p2 = path.clone();
            let reader = go(move || {
                let mut f = std::fs::File::open(&p2).unwrap();
                let mut s = String::new();
                f.read_to_string(&mut s).unwrap();
                s
            });
            // Other goroutines still run while the reader blocks in open().
            let ran = go(|| 42).join().unwrap();
            assert_eq!(ran, 42);
            goroutine::time::sleep(Duration::from_millis(20));
            let mut w = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            w.write_all(b"hello").unwrap();
            drop(w);
            assert_eq!(reader.join().unwrap(), "hello");
            let _ = std::fs::remove_dir_all(&dir);
        });
    }
}

// 200 goroutines hold one std Mutex across a runtime sleep.
isolated_test! {
    fn many_goroutines_share_a_std_mutex() ["GOMAXPROCS" = "2"] {
        within(120, || {
            let m = Arc::new(Mutex::new(0u32));
            let hs: Vec<_> = (0..200)
                .map(|_| {
                    let m = m.clone();
                    go(move || {
                        let mut g = m.lock().unwrap();
                        goroutine::time::sleep(Duration::from_micros(200));
                        *g += 1;
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            assert_eq!(*m.lock().unwrap(), 200);
        });
    }
}

// Child processes and a C call with a timeout do not stall a ticker at
// GOMAXPROCS=1.
isolated_test! {
    fn child_process_and_c_poll_do_not_stall_p1() ["GOMAXPROCS" = "1"] {
        within(60, || {
            let stop = Arc::new(AtomicBool::new(false));
            let t = ticker(stop.clone());
            let child = go(|| {
                for _ in 0..3 {
                    let out = std::process::Command::new("sleep").arg("0.1").output().unwrap();
                    assert!(out.status.success());
                }
            });
            let poller = go(|| {
                for _ in 0..3 {
                    // SAFETY: no descriptors; poll just sleeps 100 ms.
                    let r = unsafe { libc::poll(std::ptr::null_mut(), 0, 100) };
                    assert_eq!(r, 0);
                }
            });
            child.join().unwrap();
            poller.join().unwrap();
            stop.store(true, Ordering::Relaxed);
            let worst = t.join().unwrap();
            assert!(worst < Duration::from_millis(150), "worst gap {worst:?}");
        });
    }
}

// A blocking std::net read does not stall the others.
isolated_test! {
    fn std_tcp_read_does_not_stall_p1() ["GOMAXPROCS" = "1"] {
        within(60, || {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let reader = go(move || {
                let (mut s, _) = l.accept().unwrap();
                let mut b = [0u8; 4];
                s.read_exact(&mut b).unwrap();
                b
            });
            let mut c = std::net::TcpStream::connect(addr).unwrap();
            let counter = Arc::new(AtomicU64::new(0));
            let c2 = counter.clone();
            go(move || {
                for _ in 0..100 {
                    c2.fetch_add(1, Ordering::Relaxed);
                    goroutine::yield_now();
                }
            })
            .join()
            .unwrap();
            assert_eq!(counter.load(Ordering::Relaxed), 100);
            c.write_all(b"ping").unwrap();
            assert_eq!(&reader.join().unwrap(), b"ping");
        });
    }
}

// set_max_procs (a stop-the-world) does not wait forever for a goroutine
// blocked in a plain read, nor for one computing without runtime calls.
isolated_test! {
    fn set_max_procs_beside_blocked_and_busy_goroutines() ["GOMAXPROCS" = "2"] {
        within(60, || {
            let (mut a, b) = std::os::unix::net::UnixStream::pair().unwrap();
            let reader = go(move || {
                let mut b = b;
                let mut x = [0u8; 1];
                b.read_exact(&mut x).unwrap();
                x[0]
            });
            let stop = Arc::new(AtomicBool::new(false));
            let s2 = stop.clone();
            let busy = go(move || {
                let mut n = 0u64;
                while !s2.load(Ordering::Relaxed) {
                    n = n.wrapping_add(1);
                    std::hint::spin_loop();
                }
                n
            });
            goroutine::time::sleep(Duration::from_millis(50));
            goroutine::set_max_procs(3);
            goroutine::set_max_procs(2);
            assert_eq!(goroutine::stats().gomaxprocs, 2);
            stop.store(true, Ordering::Relaxed);
            a.write_all(&[7]).unwrap();
            assert_eq!(reader.join().unwrap(), 7);
            busy.join().unwrap();
        });
    }
}

// A goroutine locked to its thread gets the same handoff.
isolated_test! {
    fn locked_goroutine_blocking_p1() ["GOMAXPROCS" = "1"] {
        within(60, || {
            let stop = Arc::new(AtomicBool::new(false));
            let t = ticker(stop.clone());
            let locked = go(|| {
                goroutine::lock_os_thread();
                let tid = gettid();
                for _ in 0..2 {
                    std::thread::sleep(Duration::from_millis(300));
                    goroutine::yield_now();
                    assert_eq!(gettid(), tid);
                }
                goroutine::unlock_os_thread();
            });
            locked.join().unwrap();
            stop.store(true, Ordering::Relaxed);
            let worst = t.join().unwrap();
            assert!(worst < Duration::from_millis(150), "worst gap {worst:?}");
        });
    }
}

// A goroutine computing without runtime calls is never taken for blocked
// (its CPU clock advances), so it costs no handoffs.
isolated_test! {
    fn busy_goroutine_is_not_revoked() ["GOMAXPROCS" = "2"] {
        within(60, || {
            let before = goroutine::stats().blocked_handoffs;
            go(|| {
                let t = Instant::now();
                let mut x = 0u64;
                while t.elapsed() < Duration::from_millis(300) {
                    x = x.wrapping_add(std::hint::black_box(1));
                }
                x
            })
            .join()
            .unwrap();
            let after = goroutine::stats().blocked_handoffs;
            // A descheduled thread on a loaded box reads R, not blocked; a
            // few page faults (D) could still be seen: allow one.
            assert!(after - before <= 1, "busy goroutine revoked {} times", after - before);
        });
    }
}

// GODEBUG=blockwarn=1 names the goroutine and its system call, once.
#[test]
fn blockwarn_names_goroutine_and_syscall() {
    if common::is_child("blockwarn_names_goroutine_and_syscall") {
        run(|| {
            let hs: Vec<_> = (0..2)
                .map(|_| go(|| std::thread::sleep(Duration::from_millis(200))))
                .collect();
            for h in hs {
                h.join().unwrap();
            }
        });
        return;
    }
    let out = common::spawn(
        "blockwarn_names_goroutine_and_syscall",
        &[("GODEBUG", "blockwarn=1"), ("GOMAXPROCS", "1")],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let lines: Vec<_> = err
        .lines()
        .filter(|l| l.contains("outside the runtime"))
        .collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains("goroutine "), "{err}");
    // qemu-user: /proc/<tid>/syscall gives the host's system call number,
    // which the warning prints as a number (README, "Supported platforms").
    if !cfg!(goroutine_qemu) {
        assert!(
            lines[0].contains("clock_nanosleep") || lines[0].contains("nanosleep"),
            "{err}"
        );
    }
}

// GODEBUG=blockrevoke=0 turns it off: nothing is revoked.
isolated_test! {
    fn blockrevoke_off() ["GODEBUG" = "blockrevoke=0", "GOMAXPROCS" = "2"] {
        within(60, || {
            go(|| std::thread::sleep(Duration::from_millis(100))).join().unwrap();
            assert_eq!(goroutine::stats().blocked_handoffs, 0);
        });
    }
}
