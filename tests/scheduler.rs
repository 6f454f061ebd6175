//! Scheduler behaviour: ports of Go's proc_test.go where they apply, and the
//! runtime-core acceptance tests. Tests that need a runtime of their own
//! (GOMAXPROCS, goroutine ids, all Ps busy) run in a child process.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use goroutine::{go, run, yield_now, Builder};

fn spin_until(cond: impl Fn() -> bool) {
    while !cond() {
        std::hint::spin_loop();
    }
}

// Go's TestGoroutineParallelism: P goroutines busy-wait in round robin on an
// atomic. It can only finish if all P goroutines run at the same time, on P
// different Ms (none of them ever yields).
isolated_test! {
    fn goroutine_parallelism() ["GOMAXPROCS" = "4"] {
        const P: u32 = 4;
        const N: usize = 10;
        assert_eq!(goroutine::max_procs(), P as usize);
        run(|| {
            for _ in 0..N {
                let x = Arc::new(AtomicU32::new(0));
                let hs: Vec<_> = (0..P)
                    .map(|p| {
                        let x = x.clone();
                        go(move || {
                            for i in 0..3 {
                                let expected = P * i + p;
                                spin_until(|| x.load(Ordering::SeqCst) == expected);
                                x.store(expected + 1, Ordering::SeqCst);
                            }
                        })
                    })
                    .collect();
                for h in hs {
                    h.join().unwrap();
                }
            }
        });
    }
}

// Go's TestGoroutineParallelism2 (the nested-spawn variant, with and without
// a preceding load that leaves Ms parking).
isolated_test! {
    fn goroutine_parallelism2() ["GOMAXPROCS" = "4"] {
        const P: u32 = 4;
        run(|| {
            for load in [false, true] {
                for _ in 0..5 {
                    if load {
                        let x = Arc::new(AtomicU32::new(0));
                        let hs: Vec<_> = (0..P)
                            .map(|_| {
                                let x = x.clone();
                                go(move || {
                                    x.fetch_add(1, Ordering::SeqCst);
                                    spin_until(|| x.load(Ordering::SeqCst) == P);
                                })
                            })
                            .collect();
                        hs.into_iter().for_each(|h| h.join().unwrap());
                    }
                    let x = Arc::new(AtomicU32::new(0));
                    let outer: Vec<_> = (0..P / 2)
                        .map(|p| {
                            let x = x.clone();
                            go(move || {
                                (0..2)
                                    .map(|p2| {
                                        let x = x.clone();
                                        go(move || {
                                            for i in 0..3 {
                                                let expected = P * i + p * 2 + p2;
                                                spin_until(|| x.load(Ordering::SeqCst) == expected);
                                                x.store(expected + 1, Ordering::SeqCst);
                                            }
                                        })
                                    })
                                    .collect::<Vec<_>>()
                            })
                        })
                        .collect();
                    for o in outer {
                        for h in o.join().unwrap() {
                            h.join().unwrap();
                        }
                    }
                }
            }
        });
    }
}

// Go's TestYieldProgress: a goroutine that keeps yielding must let the other
// runnable goroutines of its P make progress (GOMAXPROCS=1).
isolated_test! {
    fn yield_progress() ["GOMAXPROCS" = "1"] {
        run(|| {
            let flag = Arc::new(AtomicBool::new(false));
            let ack = Arc::new(AtomicBool::new(false));
            let yielder = {
                let (flag, ack) = (flag.clone(), ack.clone());
                go(move || {
                    while !flag.load(Ordering::SeqCst) {
                        yield_now();
                    }
                    ack.store(true, Ordering::SeqCst);
                })
            };
            // Let the yielder start spinning, then send the "message" from
            // another goroutine on the same P.
            for _ in 0..100 {
                yield_now();
            }
            let sender = {
                let flag = flag.clone();
                go(move || flag.store(true, Ordering::SeqCst))
            };
            sender.join().unwrap();
            yielder.join().unwrap();
            assert!(ack.load(Ordering::SeqCst));
        });
    }
}

// The main goroutine is the first goroutine ever: id 1.
isolated_test! {
    fn main_goroutine_is_id_1() {
        assert_eq!(goroutine::current_id(), 0, "a plain thread has no goroutine id");
        let (id, child) = run(|| {
            let me = goroutine::current_id();
            let child = go(goroutine::current_id);
            let cid = child.id();
            assert_eq!(child.join().unwrap(), cid);
            (me, cid)
        });
        assert_eq!(id, 1);
        assert!(child > 1);
    }
}

// runnext: a new goroutine runs next on its P, and the one it displaces goes
// to the ring's tail (GOMAXPROCS=1, so the order is deterministic). This
// checks the policy itself, which the randomized mode deliberately breaks.
isolated_test! {
    #[cfg_attr(goroutine_randomize, ignore = "checks the exact runnext policy")]
    fn runnext_order() ["GOMAXPROCS" = "1"] {
        let order = run(|| {
            let order = Arc::new(Mutex::new(Vec::new()));
            let hs: Vec<_> = ['a', 'b', 'c']
                .into_iter()
                .map(|c| {
                    let order = order.clone();
                    go(move || order.lock().unwrap().push(c))
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            let v = order.lock().unwrap().clone();
            v
        });
        // c was in runnext when main parked; a and b were kicked to the ring.
        assert_eq!(order, vec!['c', 'a', 'b']);
    }
}

// An idle P takes a goroutine left in a running P's runnext: here the one
// that readied it keeps running (it spins until the other has run, which it
// never could on its own P). A thief leaves runnext alone only while the
// victim keeps running goroutines from it, so it must take this one after its
// grace wait. Each round, a ping-pong between two other goroutines first
// moves the victim's count of runnext hand-offs.
isolated_test! {
    fn runnext_of_a_goroutine_that_keeps_running_is_stolen() ["GOMAXPROCS" = "2"] {
        // Without the steal the readier spins forever (plain loops are not
        // preempted asynchronously): fail instead of hanging.
        common::within_thread(60, || run(|| {
            for _ in 0..20 {
                let (ping_tx, ping_rx) = goroutine::chan::<u32>(0);
                let (pong_tx, pong_rx) = goroutine::chan::<u32>(0);
                let echo = go(move || {
                    for v in ping_rx.iter() {
                        pong_tx.send(v).unwrap();
                    }
                });
                for i in 0..100 {
                    ping_tx.send(i).unwrap();
                    assert_eq!(pong_rx.recv().unwrap(), i);
                }
                drop(ping_tx);
                echo.join().unwrap();

                let ran = Arc::new(AtomicBool::new(false));
                let (tx, rx) = goroutine::chan::<()>(0);
                let r = ran.clone();
                let waiter = go(move || {
                    rx.recv().unwrap();
                    r.store(true, Ordering::SeqCst);
                });
                let r = ran.clone();
                let readier = go(move || {
                    // Once the waiter is blocked (a send to an unbuffered
                    // channel that needs no waiting), ready it into this P's
                    // runnext, then never yield until it has run elsewhere.
                    while tx.try_send(()).is_err() {
                        yield_now();
                    }
                    spin_until(|| r.load(Ordering::SeqCst));
                });
                readier.join().unwrap();
                waiter.join().unwrap();
            }
        }));
    }
}

// The 1-in-61 check: a goroutine on the global queue runs even while the
// only P's local queue never drains (two goroutines yielding forever).
isolated_test! {
    fn global_queue_is_not_starved() ["GOMAXPROCS" = "1"] {
        let flag = Arc::new(AtomicBool::new(false));
        let f2 = flag.clone();
        run(move || {
            let hs: Vec<_> = (0..2)
                .map(|_| {
                    let flag = f2.clone();
                    go(move || {
                        while !flag.load(Ordering::SeqCst) {
                            yield_now();
                        }
                    })
                })
                .collect();
            // Spawned from a plain thread: goes to the global queue.
            let flag = f2.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                go(move || flag.store(true, Ordering::SeqCst));
            });
            for h in hs {
                h.join().unwrap();
            }
        });
        assert!(flag.load(Ordering::SeqCst));
    }
}

#[test]
fn nested_spawning_ten_levels_deep() {
    fn nest(level: u32) -> u32 {
        if level == 10 {
            return 1;
        }
        let a = go(move || nest(level + 1));
        let b = go(move || nest(level + 1));
        a.join().unwrap() + b.join().unwrap()
    }
    assert_eq!(run(|| nest(0)), 1024);
}

#[test]
fn hundred_thousand_goroutines_joined_from_a_plain_thread() {
    let counter = Arc::new(AtomicUsize::new(0));
    let hs: Vec<_> = (0..100_000u64)
        .map(|i| {
            let counter = counter.clone();
            go(move || {
                counter.fetch_add(1, Ordering::Relaxed);
                i * 2
            })
        })
        .collect();
    let mut sum = 0u64;
    for h in hs {
        sum += h.join().unwrap();
    }
    assert_eq!(counter.load(Ordering::Relaxed), 100_000);
    assert_eq!(sum, 99_999 * 100_000);
}

#[test]
fn panics_are_caught_and_reported() {
    let ok = go(|| 5);
    let bad = Builder::new()
        .name("boom-worker")
        .spawn(|| -> u32 { panic!("boom {}", 42) })
        .unwrap();
    let bad_id = bad.id();
    let err = bad.join().unwrap_err();
    assert!(err.is_panic());
    assert_eq!(err.id(), bad_id);
    assert_eq!(err.message(), "boom 42");
    let shown = err.to_string();
    assert!(shown.contains(&format!("goroutine {bad_id}")), "{shown}");
    assert!(shown.contains("boom-worker"), "{shown}");
    assert!(shown.contains("boom 42"), "{shown}");
    // The worker thread and the other goroutines are fine.
    assert_eq!(ok.join().unwrap(), 5);
    let after: Vec<_> = (0..100).map(|i| go(move || i)).collect();
    assert_eq!(
        after.into_iter().map(|h| h.join().unwrap()).sum::<i32>(),
        4950
    );
    // The payload can be resumed.
    let e = go(|| std::panic::panic_any(7u8)).join().unwrap_err();
    assert_eq!(*e.into_panic().downcast::<u8>().unwrap(), 7);
}

#[test]
fn run_resumes_a_panic_on_the_calling_thread() {
    let r = std::panic::catch_unwind(|| run(|| -> u32 { panic!("from main goroutine") }));
    let payload = r.unwrap_err();
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"from main goroutine"));
}

#[test]
fn run_from_many_threads_at_once() {
    let ths: Vec<_> = (0..8u64)
        .map(|t| {
            std::thread::spawn(move || {
                run(move || {
                    let hs: Vec<_> = (0..1000u64).map(|i| go(move || i + t)).collect();
                    hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
                })
            })
        })
        .collect();
    for (t, th) in ths.into_iter().enumerate() {
        assert_eq!(th.join().unwrap(), 499_500 + 1000 * t as u64);
    }
}

#[test]
fn yield_outside_the_runtime_is_harmless() {
    yield_now();
    assert_eq!(goroutine::current_id(), 0);
}

#[test]
fn builder_rejects_bad_stack_sizes() {
    let e = Builder::new().stack_size(1).spawn(|| ()).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    let e = Builder::new().stack_size(1 << 40).spawn(|| ()).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    // A deep-recursion goroutine with a big stack works.
    let h = Builder::new().stack_size(8 << 20).spawn(|| {
        fn deep(n: u64) -> u64 {
            let pad = std::hint::black_box([n; 64]);
            if n == 0 {
                0
            } else {
                pad[3] + deep(n - 1) - n + 1
            }
        }
        deep(5_000)
    });
    assert_eq!(h.unwrap().join().unwrap(), 5_000);
}

isolated_test! {
    fn num_goroutine_counts_live_goroutines() ["GOMAXPROCS" = "2"] {
        run(|| {
            assert_eq!(goroutine::num_goroutine(), 1);
            let release = Arc::new(AtomicBool::new(false));
            let hs: Vec<_> = (0..10)
                .map(|_| {
                    let r = release.clone();
                    go(move || {
                        while !r.load(Ordering::SeqCst) {
                            yield_now();
                        }
                    })
                })
                .collect();
            assert_eq!(goroutine::num_goroutine(), 11);
            release.store(true, Ordering::SeqCst);
            for h in hs {
                h.join().unwrap();
            }
            // Exit bookkeeping happens just after the joiner is woken.
            let deadline = Instant::now() + Duration::from_secs(10);
            while goroutine::num_goroutine() != 1 {
                assert!(Instant::now() < deadline, "num_goroutine stuck at {}", goroutine::num_goroutine());
                yield_now();
            }
        });
    }
}

// set_max_procs up and down while 10,000 goroutines run: every goroutine
// finishes, with the right result, and GOMAXPROCS reads back.
isolated_test! {
    fn set_max_procs_while_goroutines_run() ["GOMAXPROCS" = "2"] {
        let done = Arc::new(AtomicU64::new(0));
        let d2 = done.clone();
        let workers = std::thread::spawn(move || {
            run(move || {
                let hs: Vec<_> = (0..10_000u64)
                    .map(|i| {
                        let done = d2.clone();
                        go(move || {
                            for _ in 0..(i % 7) {
                                yield_now();
                            }
                            let inner = go(move || i * 3).join().unwrap();
                            done.fetch_add(1, Ordering::SeqCst);
                            inner
                        })
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
            })
        });
        let mut sizes = [1usize, 4, 3, 8, 2, 1, 6, 2].into_iter().cycle();
        let mut prev = 2;
        while !workers.is_finished() {
            let n = sizes.next().unwrap();
            assert_eq!(goroutine::set_max_procs(n), prev);
            assert_eq!(goroutine::max_procs(), n);
            prev = n;
            std::thread::sleep(Duration::from_millis(2));
        }
        // Also from inside a goroutine (its own P may be destroyed).
        let from_g = run(|| {
            let a = goroutine::set_max_procs(1);
            let b = goroutine::set_max_procs(3);
            (a, b, goroutine::max_procs())
        });
        assert_eq!((from_g.1, from_g.2), (1, 3));
        let sum = workers.join().unwrap();
        assert_eq!(sum, 3 * (9_999 * 10_000 / 2));
        assert_eq!(done.load(Ordering::SeqCst), 10_000);
        assert_eq!(goroutine::set_max_procs(0), 3, "0 only queries");
    }
}

// set_max_procs every 1-2 ms from a plain thread beside 10,000 goroutines
// that sleep, stop and reset timers, or receive with a timeout, in rounds.
// Before the stop-the-world count ended in the same critical section that
// idles the restarted Ps (runtime/stw.rs, invariant 4), an M that took an
// idle P in the gap (back from the netpoller for a due timer) counted it
// into a finished stop; the next stop then waited forever for it. That hung
// most runs of this load; each round now must finish within its limit.
isolated_test! {
    fn set_max_procs_beside_timer_sleepers() ["GOMAXPROCS" = "2"] {
        // Debug builds run the same load, smaller; ThreadSanitizer's
        // smaller still: there, beside the spinners, the debug load
        // outlasts a round's limit (schedtrace shows the queues moving).
        // Under qemu-user (`--cfg goroutine_qemu`) as under ThreadSanitizer:
        // the emulated load outlasts a round's limit several times over.
        let (n, reps) = if cfg!(goroutine_sanitize = "thread") || cfg!(goroutine_qemu) {
            (1_000u64, 10)
        } else if cfg!(debug_assertions) {
            (4_000u64, 40)
        } else {
            (10_000u64, 300)
        };
        // Plain threads that keep both cores busy: the kernel then
        // preempts the resizer inside its critical stretches, as it does
        // on a loaded machine, where the hang showed most.
        let busy = Arc::new(AtomicBool::new(true));
        let spinners: Vec<_> = (0..3)
            .map(|_| {
                let busy = busy.clone();
                std::thread::spawn(move || {
                    while busy.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        for round in 0..6u64 {
            let variant = round % 3;
            let stop = Arc::new(AtomicBool::new(false));
            let st = stop.clone();
            let resizer = std::thread::spawn(move || {
                let mut i = 0usize;
                while !st.load(Ordering::Relaxed) {
                    goroutine::set_max_procs(1 + i % 4);
                    i += 1;
                    std::thread::sleep(Duration::from_micros(1_000 + (i as u64 * 7919) % 1_000));
                }
                i
            });
            let finished = common::within(60, move || {
                let wg = goroutine::sync::WaitGroup::new();
                let done = Arc::new(AtomicU64::new(0));
                for k in 0..n {
                    wg.add(1);
                    let (wg, done) = (wg.clone(), done.clone());
                    go(move || {
                        let mut x = (k + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                        for _ in 0..reps {
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                            let d = Duration::from_micros(x % 2_000);
                            match variant {
                                0 => goroutine::time::sleep(d),
                                1 => {
                                    let t = goroutine::time::Timer::new(d);
                                    t.stop();
                                    t.reset(d);
                                    t.c().recv().unwrap();
                                }
                                _ => {
                                    let (_tx, rx) = goroutine::chan::<u8>(0);
                                    assert!(rx.recv_timeout(d).is_err());
                                }
                            }
                        }
                        done.fetch_add(1, Ordering::Relaxed);
                        wg.done();
                    });
                }
                wg.wait();
                done.load(Ordering::Relaxed)
            });
            stop.store(true, Ordering::Relaxed);
            let resizes = resizer.join().unwrap();
            assert_eq!(finished, n, "round {round}");
            assert!(resizes > 0, "round {round}: no resize ran");
        }
        busy.store(false, Ordering::Relaxed);
        for t in spinners {
            t.join().unwrap();
        }
    }
}

// sysmon's preemption request is for the goroutine it was made for (Go's
// per-G `gp.preempt`, cleared by every `execute`). Goroutine A computes
// for 15 ms without a runtime call, so sysmon asks it to yield (hogrevoke=0
// keeps sysmon from taking its P as a hog first); before it makes a
// runtime call it blocks in the kernel, so sysmon revokes its P and hands
// it to another M, which runs B from runnext, inheriting A's slice. B must
// not honour A's request: before the fix it yielded to the global queue at
// its first check, about 1 us into its run (issue 38's lead). A request
// sysmon makes after B started is B's own (the inherited slice is used up,
// and Go asks again too), so a yield then is allowed.
isolated_test! {
    fn inherited_slice_does_not_honour_predecessors_request() ["GOMAXPROCS" = "1", "GODEBUG" = "hogrevoke=0"] {
        let (yields, new_requests) = run(|| {
            // The requests sysmon has made once A's own is in (A reads it
            // after its 15 ms, before it blocks).
            let seen = Arc::new(AtomicU64::new(u64::MAX));
            let seen_b = seen.clone();
            let a = go(move || {
                let b = go(move || {
                    let yields = goroutine::stats().preempt_yields;
                    goroutine::preempt_point();
                    let after = goroutine::stats();
                    let seen = seen_b.load(Ordering::SeqCst);
                    (after.preempt_yields - yields, after.preempt_requests.saturating_sub(seen))
                });
                let t = Instant::now();
                let mut x = 1u64;
                while t.elapsed() < Duration::from_millis(15) {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
                seen.store(goroutine::stats().preempt_requests, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(60));
                b
            });
            a.join().unwrap().join().unwrap()
        });
        assert!(
            yields == 0 || new_requests > 0,
            "a goroutine honoured a request made for another ({yields} yields, no new request)"
        );
    }
}

// A goroutine woken from outside every P (here by a plain thread's send;
// likewise a signal's handler, the netpoller's wake-ups) waits on the
// global queue. Behind 10,000 ping-pong pairs that each keep a 10 ms slice
// through runnext, that queue holds thousands of goroutines and is served
// once per 61 slices: the woken goroutine did not run within 45 s (Go
// 1.19: not within 120 s). Woken goroutines now wait in a part of the
// queue of their own, served in turn with the rest, and a P serves it at
// its next scheduling point once one has waited 2 ms.
isolated_test! {
    fn woken_goroutine_runs_behind_runnext_pingpong_pairs() ["GOMAXPROCS" = "1"] {
        let pairs = if cfg!(debug_assertions) { 2_000 } else { 10_000 };
        let stop = Arc::new(AtomicBool::new(false));
        let (mark_tx, mark_rx) = goroutine::chan::<Instant>(0);
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
        let (seen_tx, seen_rx) = std::sync::mpsc::channel::<Duration>();
        let st = stop.clone();
        let load = std::thread::spawn(move || {
            run(move || {
                let marker = go(move || {
                    ready_tx.send(()).unwrap();
                    let sent = mark_rx.recv().unwrap();
                    seen_tx.send(sent.elapsed()).unwrap();
                });
                // The marker parks on its channel before the pairs start.
                while goroutine::num_goroutine() < 2 {
                    yield_now();
                }
                yield_now();
                let mut hs = Vec::new();
                for _ in 0..pairs {
                    let (ping_tx, ping_rx) = goroutine::chan::<u64>(0);
                    let (pong_tx, pong_rx) = goroutine::chan::<u64>(0);
                    let st = st.clone();
                    hs.push(go(move || {
                        let mut n = 0u64;
                        while !st.load(Ordering::Relaxed) {
                            ping_tx.send(n).unwrap();
                            n = pong_rx.recv().unwrap() + 1;
                        }
                    }));
                    hs.push(go(move || {
                        while let Ok(v) = ping_rx.recv() {
                            if pong_tx.send(v).is_err() {
                                break;
                            }
                        }
                    }));
                }
                for h in hs {
                    h.join().unwrap();
                }
                marker.join().unwrap();
            })
        });
        ready_rx.recv_timeout(Duration::from_secs(30)).expect("the marker never started");
        // Let the pairs fill the queues, then wake the marker from here.
        std::thread::sleep(Duration::from_millis(300));
        mark_tx.send(Instant::now()).unwrap();
        let waited = seen_rx.recv_timeout(Duration::from_secs(30));
        stop.store(true, Ordering::Relaxed);
        let waited = waited.expect("the woken goroutine never ran (30 s)");
        eprintln!("the woken goroutine waited {waited:?} behind {pairs} pairs");
        assert!(waited < Duration::from_secs(5), "it waited {waited:?} behind the pairs");
        load.join().unwrap();
    }
}

// A goroutine waiting in its P's own queue runs while wake-ups from outside
// every P keep the global queue's woken part overdue. 100 goroutines loop a
// 1 ms sleep in `goroutine::syscall`, then 100 us of work: ten times what
// the one P can serve, so each returns from its call to the woken part
// (no P free) and the oldest there is always past the 2 ms overdue mark.
// The overdue turn took every pick: a goroutine in the ring (`a`, kicked
// there from runnext by `b`) never ran while the stream lasted (bench
// `syscalls --quick`: 388 ms of a 460 ms run), nor did sleepers not yet
// started. Counted in the sleepers' turns, not in time: the P's own queue
// gets every other pick now.
isolated_test! {
    fn a_queued_goroutine_runs_beside_a_stream_of_syscall_wakeups() ["GOMAXPROCS" = "1"] {
        const SLEEPERS: usize = 100;
        let stop = Arc::new(AtomicBool::new(false));
        let turns = Arc::new(AtomicU64::new(0));
        let started = Arc::new(AtomicUsize::new(0));
        // The stream ends by itself after 20 s (the failure: whatever
        // waits for a turn then runs only once the sleepers have left).
        let watchdog = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let end = Instant::now() + common::scaled(Duration::from_secs(20));
                while !stop.load(Ordering::SeqCst) && Instant::now() < end {
                    std::thread::sleep(Duration::from_millis(10));
                }
                stop.store(true, Ordering::SeqCst)
            })
        };
        let st = stop.clone();
        let seen = run(move || {
            let sleepers: Vec<_> = (0..SLEEPERS)
                .map(|_| {
                    let (stop, turns) = (st.clone(), turns.clone());
                    let started = started.clone();
                    go(move || {
                        started.fetch_add(1, Ordering::SeqCst);
                        while !stop.load(Ordering::SeqCst) {
                            goroutine::syscall(|| std::thread::sleep(Duration::from_millis(1)));
                            turns.fetch_add(1, Ordering::SeqCst);
                            let t = Instant::now();
                            while t.elapsed() < Duration::from_micros(100) {
                                std::hint::spin_loop();
                            }
                        }
                    })
                })
                .collect();
            let wait_for = |cond: &dyn Fn() -> bool| {
                while !cond() && !st.load(Ordering::SeqCst) {
                    goroutine::time::sleep(Duration::from_millis(1));
                }
            };
            // The stream is on: every sleeper has started (none waits in
            // the ring ahead of `a`), and the sleepers have since returned
            // from 200 more calls.
            wait_for(&|| started.load(Ordering::SeqCst) == SLEEPERS);
            let base = turns.load(Ordering::SeqCst);
            wait_for(&|| turns.load(Ordering::SeqCst) >= base + 2 * SLEEPERS as u64);
            let ready = !st.load(Ordering::SeqCst);
            let at_spawn = turns.load(Ordering::SeqCst);
            let first_run = |turns: Arc<AtomicU64>, stop: Arc<AtomicBool>| {
                move || (turns.load(Ordering::SeqCst) - at_spawn, stop.load(Ordering::SeqCst))
            };
            let a = go(first_run(turns.clone(), st.clone()));
            let b = go(first_run(turns.clone(), st.clone()));
            let seen = (ready, a.join().unwrap(), b.join().unwrap());
            st.store(true, Ordering::SeqCst);
            for h in sleepers {
                h.join().unwrap();
            }
            seen
        });
        watchdog.join().unwrap();
        let (ready, (a_turns, a_late), (b_turns, _)) = seen;
        eprintln!("sleepers' turns before a ran: {a_turns}, before b: {b_turns}");
        assert!(ready, "the sleepers did not all start within 20 s");
        assert!(!a_late, "a goroutine in the P's queue ran only after the stream ended");
        // Ahead of `a` in the ring wait at most the 100 sleepers (those that
        // found the P idle before the stream filled it), each followed by
        // at most one overdue turn: about 200 turns at most.
        assert!(
            a_turns < 4 * SLEEPERS as u64,
            "a goroutine in the P's queue waited {a_turns} sleepers' turns"
        );
    }
}

fn gomaxprocs_child(value: &str) -> std::process::Output {
    common::spawn("gomaxprocs_env_probe", &[("GOMAXPROCS", value)])
}

isolated_test! {
    fn gomaxprocs_env_probe() {
        // Child side of gomaxprocs_bad_values: report what the runtime chose.
        let n = run(goroutine::max_procs);
        println!("max_procs={n}");
        let hs: Vec<_> = (0..1000).map(|i| go(move || i)).collect();
        assert_eq!(hs.into_iter().map(|h| h.join().unwrap()).sum::<i32>(), 499_500);
    }
}

#[test]
fn gomaxprocs_bad_values() {
    let default = std::thread::available_parallelism().unwrap().get();
    for (value, want, warns) in [
        ("0", default, true),
        ("-1", default, true),
        ("abc", default, true),
        ("99999", 1024, true),
        ("3", 3, false),
    ] {
        let out = gomaxprocs_child(value);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "GOMAXPROCS={value}: {stderr}");
        assert!(
            stdout.contains(&format!("max_procs={want}")),
            "GOMAXPROCS={value}: {stdout}"
        );
        let warning: Vec<_> = stderr
            .lines()
            .filter(|l| l.contains("GOMAXPROCS"))
            .collect();
        if warns {
            assert_eq!(
                warning.len(),
                1,
                "GOMAXPROCS={value}: one line expected: {stderr}"
            );
            assert!(warning[0].contains(value), "{}", warning[0]);
        } else {
            assert!(warning.is_empty(), "{stderr}");
        }
    }
}

// Go's Gosched order: a yielding goroutine goes behind everything on the
// global queue. One yield must let a goroutine that waits there run first,
// even though the yielder is the only goroutine on its P's local queue.
isolated_test! {
    fn yield_goes_behind_the_global_queue() ["GOMAXPROCS" = "1"] {
        run(|| {
            // Goroutines spawned from a plain thread land on the global
            // queue. The main goroutine waits for each spawn by spinning,
            // and never blocks in the kernel meanwhile: sysmon would hand
            // the only P to another thread (P revocation), which would run
            // the goroutine. Hence one plain thread for all the spawns,
            // asked over a std channel: starting a thread per round blocked
            // the main goroutine in `pthread_create` (for milliseconds
            // under ThreadSanitizer, which waits there for the new thread),
            // as a `join` would.
            type Round = (Arc<AtomicBool>, Arc<AtomicBool>);
            let (rounds, asked) = std::sync::mpsc::channel::<Round>();
            let spawner = std::thread::spawn(move || {
                for (r, sp) in asked {
                    go(move || r.store(true, Ordering::SeqCst));
                    sp.store(true, Ordering::SeqCst);
                }
            });
            // A runtime call: back on a P if starting the thread lost it.
            yield_now();
            for _ in 0..100 {
                let ran = Arc::new(AtomicBool::new(false));
                let spawned = Arc::new(AtomicBool::new(false));
                rounds.send((ran.clone(), spawned.clone())).unwrap();
                while !spawned.load(Ordering::SeqCst) {
                    std::hint::spin_loop();
                }
                assert!(!ran.load(Ordering::SeqCst), "ran before the only P was free");
                yield_now();
                assert!(ran.load(Ordering::SeqCst), "a yield did not let the global queue go first");
            }
            drop(rounds);
            spawner.join().unwrap();
        });
    }
}

// Yielders stay on their P while its ring has room; with more of them than
// a ring holds, the rest wait on the global queue. Those must still get
// turns (the 1-in-61 check and ring drains), and so must a goroutine readied
// from outside the runtime behind them.
isolated_test! {
    fn yielders_beyond_the_ring_all_get_turns() ["GOMAXPROCS" = "1"] {
        const G: usize = 600;
        run(|| {
            let reached = Arc::new(AtomicUsize::new(0));
            let stop = Arc::new(AtomicBool::new(false));
            let hs: Vec<_> = (0..G)
                .map(|_| {
                    let (reached, stop) = (reached.clone(), stop.clone());
                    go(move || {
                        let mut n = 0;
                        while !stop.load(Ordering::Relaxed) {
                            yield_now();
                            n += 1;
                            if n == 3 {
                                reached.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    })
                })
                .collect();
            let outside = Arc::new(AtomicBool::new(false));
            let o = outside.clone();
            std::thread::spawn(move || go(move || o.store(true, Ordering::SeqCst)))
                .join()
                .unwrap();
            // Every yielder has yielded 3 times and the outside goroutine ran,
            // or this loop never ends (the test times out).
            while reached.load(Ordering::Relaxed) < G || !outside.load(Ordering::SeqCst) {
                yield_now();
            }
            stop.store(true, Ordering::Relaxed);
            for h in hs {
                h.join().unwrap();
            }
        });
    }
}

// Many more yielders than a ring holds (some live on the global queue and
// in the per-P yield buffers): every one of them finishes all its yields.
#[test]
fn many_yielders_all_finish() {
    const G: usize = 2000;
    const Y: usize = 100;
    let total = run(|| {
        let count = Arc::new(AtomicUsize::new(0));
        let hs: Vec<_> = (0..G)
            .map(|_| {
                let count = count.clone();
                go(move || {
                    for _ in 0..Y {
                        yield_now();
                        count.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        count.load(Ordering::Relaxed)
    });
    assert_eq!(total, G * Y);
}

fn process_cpu_ticks() -> u64 {
    // utime + stime of the whole process, in clock ticks.
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let after_comm = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after_comm.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

// Once the work is done every M parks on its futex: an idle runtime burns no
// CPU (a spinning M that never gives up would burn a whole core).
isolated_test! {
    fn idle_runtime_parks_every_m() ["GOMAXPROCS" = "4"] {
        let hs: Vec<_> = (0..10_000u64)
            .map(|i| go(move || {
                if i % 3 == 0 {
                    yield_now();
                }
                i
            }))
            .collect();
        assert_eq!(hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>(), 9_999 * 5_000);
        std::thread::sleep(Duration::from_millis(100));
        let before = process_cpu_ticks();
        std::thread::sleep(Duration::from_millis(500));
        let used = process_cpu_ticks() - before;
        // 500 ms of one spinning core would be ~50 ticks (at 100 Hz).
        assert!(used <= 5, "idle runtime used {used} ticks of CPU in 500 ms");
    }
}
