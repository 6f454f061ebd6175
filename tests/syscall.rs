//! Blocking system calls (entersyscall/exitsyscall, handoff by sysmon),
//! cooperative preemption, and the thread cap.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::within;
use goroutine::{go, run};

fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

// A goroutine in a blocking system call does not stall the others at
// GOMAXPROCS=1: sysmon hands its P to another M. Without the handoff the
// counter could not move while the call sleeps.
isolated_test! {
    fn blocking_syscall_does_not_stall_others() ["GOMAXPROCS" = "1"] {
        within(60, || {
            let counter = Arc::new(AtomicU64::new(0));
            let stop = Arc::new(AtomicBool::new(false));
            let (c, s) = (counter.clone(), stop.clone());
            let ticker = go(move || {
                while !s.load(Ordering::Relaxed) {
                    c.fetch_add(1, Ordering::Relaxed);
                    goroutine::yield_now();
                }
            });
            let mut advanced = 0;
            for _ in 0..5 {
                let before = counter.load(Ordering::Relaxed);
                goroutine::syscall(|| std::thread::sleep(Duration::from_millis(30)));
                if counter.load(Ordering::Relaxed) > before {
                    advanced += 1;
                }
            }
            stop.store(true, Ordering::Relaxed);
            ticker.join().unwrap();
            assert!(advanced >= 4, "others ran during only {advanced} of 5 syscalls");
        });
    }
}

/// Makes `calls` blocking system calls of 2 ms each, beside a spinning
/// goroutine if `beside` (runnable throughout: it waits for the P whenever
/// the caller holds it); returns how many were handed off at entry.
fn entry_handoffs(calls: usize, beside: bool) -> u64 {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let spinner = beside.then(|| {
        go(move || {
            while !s.load(Ordering::Relaxed) {
                spin(Duration::from_micros(50));
                goroutine::preempt_point();
            }
        })
    });
    let before = goroutine::stats().syscall_entry_handoffs;
    for _ in 0..calls {
        goroutine::syscall(|| std::thread::sleep(Duration::from_millis(2)));
    }
    let handed = goroutine::stats().syscall_entry_handoffs - before;
    stop.store(true, Ordering::Relaxed);
    if let Some(h) = spinner {
        h.join().unwrap();
    }
    handed
}

// A goroutine whose system calls keep blocking long hands its P off as the
// next one begins, when another goroutine waits for that P, instead of
// leaving the P idle until sysmon takes it (up to two of its naps, 10 ms
// each once it has backed off). Its first two calls teach the runtime; the
// rest must each be handed off at entry. Its calls made while nothing
// waits must not be.
isolated_test! {
    fn blocking_syscalls_hand_off_at_entry() ["GOMAXPROCS" = "1"] {
        within(60, || {
            let handed = entry_handoffs(10, true);
            assert!(handed >= 7, "{handed} of the last 8 calls handed off at entry");
            // Alone now: long calls, but nobody waits, so the P stays put.
            assert_eq!(entry_handoffs(5, false), 0);
        });
    }
}

// GODEBUG=syscallhandoff=0: the same calls are left to sysmon, as in Go.
isolated_test! {
    fn syscall_handoff_off() ["GOMAXPROCS" = "1", "GODEBUG" = "syscallhandoff=0"] {
        within(60, || assert_eq!(entry_handoffs(10, true), 0));
    }
}

// Goroutines looping on short system calls do not starve a CPU-bound one
// at GOMAXPROCS=1. Each exit re-takes the P left in system-call state by
// whichever looper entered last, so the P's system-call tick changes
// faster than sysmon looks and only Go's `sysretake` (a P that has had one
// G for 10 ms is taken even so) lets the other goroutine in. Without it,
// 50 ms of work beside 100 loopers took minutes.
isolated_test! {
    fn syscall_loopers_do_not_starve_others() ["GOMAXPROCS" = "1"] {
        within(60, || {
            let stop = Arc::new(AtomicBool::new(false));
            let loopers: Vec<_> = (0..100)
                .map(|_| {
                    let stop = stop.clone();
                    go(move || {
                        while !stop.load(Ordering::Relaxed) {
                            goroutine::syscall(|| std::thread::sleep(Duration::from_millis(1)));
                        }
                    })
                })
                .collect();
            goroutine::time::sleep(Duration::from_millis(20));
            let worker = go(|| {
                for _ in 0..50 {
                    spin(Duration::from_millis(1));
                    goroutine::preempt_point();
                }
            });
            worker.join().unwrap();
            stop.store(true, Ordering::Relaxed);
            for l in loopers {
                l.join().unwrap();
            }
        });
    }
}

// syscall_blocking hands the P off at once.
isolated_test! {
    fn syscall_blocking_hands_off_at_once() ["GOMAXPROCS" = "1"] {
        within(60, || {
            let counter = Arc::new(AtomicU64::new(0));
            let stop = Arc::new(AtomicBool::new(false));
            let (c, s) = (counter.clone(), stop.clone());
            let ticker = go(move || {
                while !s.load(Ordering::Relaxed) {
                    c.fetch_add(1, Ordering::Relaxed);
                    goroutine::yield_now();
                }
            });
            goroutine::yield_now();
            let before = counter.load(Ordering::Relaxed);
            let v = goroutine::syscall_blocking(|| {
                std::thread::sleep(Duration::from_millis(30));
                42
            });
            assert_eq!(v, 42);
            assert!(counter.load(Ordering::Relaxed) > before);
            stop.store(true, Ordering::Relaxed);
            ticker.join().unwrap();
        });
    }
}

// Go's TestPreemptionAfterSyscall: goroutines looping enter/exit syscall
// around short spins all finish, at 1, 2, 4 and 8 Ps.
#[test]
fn preemption_after_syscall() {
    within(120, || {
        for procs in [1usize, 2, 4, 8] {
            let prev = goroutine::set_max_procs(procs);
            let hs: Vec<_> = (0..8)
                .map(|_| {
                    go(|| {
                        for _ in 0..100 {
                            // SAFETY: getpid has no preconditions.
                            let pid = goroutine::syscall(|| unsafe { libc::getpid() });
                            assert!(pid > 0);
                            spin(Duration::from_micros(20));
                            goroutine::preempt_point();
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            goroutine::set_max_procs(prev);
        }
    });
}

// A CPU-bound goroutine that reaches runtime calls (here preempt_point) is
// preempted after its 10 ms slice at GOMAXPROCS=1, so a sleeper gets to
// run. Without preemption the hog would spin forever.
isolated_test! {
    fn cpu_bound_goroutine_is_preempted_at_runtime_calls() ["GOMAXPROCS" = "1"] {
        within(60, || {
            let flag = Arc::new(AtomicBool::new(false));
            let f = flag.clone();
            let hog = go(move || {
                let mut n = 0u64;
                while !f.load(Ordering::Relaxed) {
                    n = n.wrapping_add(1);
                    goroutine::preempt_point();
                }
                n
            });
            let f = flag.clone();
            let setter = go(move || {
                goroutine::time::sleep(Duration::from_millis(5));
                f.store(true, Ordering::Relaxed);
            });
            setter.join().unwrap();
            assert!(hog.join().unwrap() > 0);
        });
    }
}

// The same with a channel operation as the runtime call in the hot loop.
isolated_test! {
    fn hog_with_channel_ops_lets_others_run() ["GOMAXPROCS" = "1"] {
        within(60, || {
            let flag = Arc::new(AtomicBool::new(false));
            let f = flag.clone();
            let (tx, rx) = goroutine::chan::<u64>(1);
            let started = Arc::new(AtomicBool::new(false));
            let st = started.clone();
            let hog = go(move || {
                st.store(true, Ordering::Relaxed);
                let mut n = 0u64;
                while !f.load(Ordering::Relaxed) {
                    tx.send(n).unwrap();
                    assert_eq!(rx.recv().unwrap(), n);
                    n += 1;
                }
                n
            });
            // The hog runs first and keeps the only P until preempted.
            while !started.load(Ordering::Relaxed) {
                goroutine::yield_now();
            }
            let f = flag.clone();
            go(move || f.store(true, Ordering::Relaxed)).join().unwrap();
            assert!(hog.join().unwrap() > 0);
        });
    }
}

#[test]
fn syscall_result_and_panic() {
    within(30, || {
        assert_eq!(goroutine::syscall(|| 7), 7);
        let h = go(|| {
            goroutine::syscall(|| panic!("inside the syscall"));
        });
        let e = h.join().unwrap_err();
        assert!(e.message().contains("inside the syscall"));
        // The runtime keeps working after the panic unwound out of a syscall.
        assert_eq!(go(|| 5).join().unwrap(), 5);
        // Outside the runtime, syscall just runs the closure.
    });
    assert_eq!(goroutine::syscall(|| 3), 3);
    assert_eq!(goroutine::syscall_blocking(|| 4), 4);
}

// Blocking on a channel inside syscall() leaves the system call while
// parked, and comes back into it.
#[test]
fn blocking_on_a_channel_inside_syscall() {
    within(30, || {
        let (tx, rx) = goroutine::chan::<i32>(0);
        let h = go(move || {
            goroutine::syscall(|| {
                let v = rx.recv().unwrap();
                // SAFETY: getpid has no preconditions.
                let pid = unsafe { libc::getpid() };
                (v, pid > 0)
            })
        });
        goroutine::time::sleep(Duration::from_millis(5));
        tx.send(9).unwrap();
        assert_eq!(h.join().unwrap(), (9, true));
    });
}

/// Child of `thread_cap_is_a_clear_fatal_error`.
#[test]
fn thread_cap_child() {
    if !common::is_child("thread_cap_child") {
        return;
    }
    run(|| {
        let hs: Vec<_> = (0..64)
            .map(|_| {
                go(|| goroutine::syscall_blocking(|| std::thread::sleep(Duration::from_secs(5))))
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
    });
    println!("all joined: the cap did not trigger");
}

#[test]
fn thread_cap_is_a_clear_fatal_error() {
    let out = common::spawn(
        "thread_cap_child",
        &[("GOROUTINE_MAX_THREADS", "6"), ("GOMAXPROCS", "2")],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "stderr: {stderr}");
    assert!(
        stderr.contains("runtime: program exceeds 6-thread limit"),
        "{stderr}"
    );
    assert!(
        stderr.contains("fatal error: thread exhaustion"),
        "{stderr}"
    );
    // Go's exit status for a fatal error; SIGABRT only with
    // GOTRACEBACK=crash.
    assert_eq!(out.status.code(), Some(2), "{:?}: {stderr}", out.status);
    let out = common::spawn(
        "thread_cap_child",
        &[
            ("GOROUTINE_MAX_THREADS", "6"),
            ("GOMAXPROCS", "2"),
            ("GOTRACEBACK", "crash"),
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("fatal error: thread exhaustion"),
        "{stderr}"
    );
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{:?}", out.status);
}

/// Child of `no_netpoller_is_a_fatal_error_with_status_2`: the runtime
/// starts with a full descriptor table, so epoll cannot be created.
#[test]
fn no_netpoller_child() {
    if !common::is_child("no_netpoller_child") {
        return;
    }
    let (_files, e) = common::fill_descriptor_table(64);
    assert_eq!(e.raw_os_error(), Some(libc::EMFILE), "{e}");
    run(|| ());
    println!("the runtime started without a netpoller");
}

/// A fatal error exits with Go's status 2, not SIGABRT (Go's `throw`;
/// SIGABRT only with GOTRACEBACK=crash).
#[test]
fn no_netpoller_is_a_fatal_error_with_status_2() {
    let out = common::spawn("no_netpoller_child", &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("fatal error: cannot create the netpoller"),
        "{stderr}"
    );
    assert_eq!(out.status.code(), Some(2), "{:?}: {stderr}", out.status);
}

#[test]
fn bad_max_threads_is_reported_and_ignored() {
    let out = common::spawn("max_threads_child", &[("GOROUTINE_MAX_THREADS", "lots")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("GOROUTINE_MAX_THREADS=\"lots\""),
        "{stderr}"
    );
}

/// Child of `bad_max_threads_is_reported_and_ignored`.
#[test]
fn max_threads_child() {
    if !common::is_child("max_threads_child") {
        return;
    }
    assert_eq!(run(|| go(|| 1).join().unwrap()), 1);
    assert_eq!(goroutine::set_max_threads(100), 10_000);
}
