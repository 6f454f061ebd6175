//! Channels and select: ports of Go's runtime/chan_test.go (the behaviour
//! each Go test asserts, named after it), and the Rust-side semantics
//! (errors that give values back, closing by drop, nil-channel arms, plain
//! threads). Tests that need a GOMAXPROCS of their own run in a child
//! process. No test asserts on timing: where Go sleeps to let another
//! goroutine get somewhere, these tests only use the pause to make a
//! negative check stronger (it can never fail spuriously).

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use goroutine::{
    chan, go, run, select, yield_now, CloseError, JoinHandle, Receiver, RecvError, SendError,
    Sender, TryRecvError, TrySendError,
};

/// Gives other goroutines and threads a chance to run (used only before
/// checks that hold whatever the schedule was).
fn settle() {
    for _ in 0..20 {
        yield_now();
    }
    std::thread::sleep(Duration::from_millis(1));
    for _ in 0..20 {
        yield_now();
    }
}

fn join_all<T>(hs: Vec<JoinHandle<T>>) -> Vec<T> {
    hs.into_iter().map(|h| h.join().unwrap()).collect()
}

/// Go's TestChan, one capacity.
fn test_chan_cap(cap: usize) {
    {
        // A receive from an empty channel blocks.
        let (tx, rx) = chan::<i32>(cap);
        let recv1 = Arc::new(AtomicBool::new(false));
        let recv2 = Arc::new(AtomicBool::new(false));
        let hs: Vec<_> = [recv1.clone(), recv2.clone()]
            .into_iter()
            .map(|flag| {
                let rx = rx.clone();
                go(move || {
                    rx.recv().unwrap();
                    flag.store(true, Ordering::SeqCst);
                })
            })
            .collect();
        settle();
        assert!(
            !recv1.load(Ordering::SeqCst) && !recv2.load(Ordering::SeqCst),
            "chan[{cap}]: receive from empty chan"
        );
        // A non-blocking receive does not block.
        select! {
            recv(rx) -> _ => panic!("chan[{cap}]: receive from empty chan"),
            default => {}
        }
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
        tx.send(0).unwrap();
        tx.send(0).unwrap();
        join_all(hs);
    }

    {
        // A send to a full channel blocks.
        let (tx, rx) = chan::<i32>(cap);
        for i in 0..cap {
            tx.send(i as i32).unwrap();
        }
        let sent = Arc::new(AtomicBool::new(false));
        let h = {
            let (tx, sent) = (tx.clone(), sent.clone());
            go(move || {
                tx.send(0).unwrap();
                sent.store(true, Ordering::SeqCst);
            })
        };
        settle();
        assert!(
            !sent.load(Ordering::SeqCst),
            "chan[{cap}]: send to full chan"
        );
        // A non-blocking send does not block.
        select! {
            send(tx, 0) -> _ => panic!("chan[{cap}]: send to full chan"),
            default => {}
        }
        assert!(matches!(tx.try_send(0), Err(TrySendError::Full(0))));
        rx.recv().unwrap();
        h.join().unwrap();
    }

    {
        // A closed channel yields its buffer, then fails.
        let (tx, rx) = chan::<i32>(cap);
        for i in 0..cap {
            tx.send(i as i32).unwrap();
        }
        tx.close().unwrap();
        for i in 0..cap {
            assert_eq!(rx.recv(), Ok(i as i32), "chan[{cap}]");
        }
        assert_eq!(rx.recv(), Err(RecvError));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Closed));
        let r = select! {
            recv(rx) -> v => v,
            default => Ok(-1),
        };
        assert_eq!(r, Err(RecvError), "chan[{cap}]: select on a closed chan");
    }

    {
        // Close unblocks a receive.
        let (tx, rx) = chan::<i32>(cap);
        let (done_tx, done_rx) = chan::<bool>(0);
        let h = go(move || {
            let r = rx.recv();
            done_tx.send(r == Err(RecvError)).unwrap();
        });
        settle();
        tx.close().unwrap();
        assert!(
            done_rx.recv().unwrap(),
            "chan[{cap}]: received a value from a closed chan"
        );
        h.join().unwrap();
    }

    {
        // 100 values arrive uncorrupted and in FIFO order.
        let (tx, rx) = chan::<i32>(cap);
        let h = {
            let tx = tx.clone();
            go(move || {
                for i in 0..100 {
                    tx.send(i).unwrap();
                }
            })
        };
        for i in 0..100 {
            assert_eq!(rx.recv(), Ok(i), "chan[{cap}]");
        }
        h.join().unwrap();

        // 4 senders x 1000 values, 4 receivers: every value arrives P times.
        const P: usize = 4;
        const L: i32 = 1000;
        let senders: Vec<_> = (0..P)
            .map(|_| {
                let tx = tx.clone();
                go(move || {
                    for i in 0..L {
                        tx.send(i).unwrap();
                    }
                })
            })
            .collect();
        let receivers: Vec<_> = (0..P)
            .map(|_| {
                let rx = rx.clone();
                go(move || {
                    let mut got: HashMap<i32, usize> = HashMap::new();
                    for _ in 0..L {
                        *got.entry(rx.recv().unwrap()).or_default() += 1;
                    }
                    got
                })
            })
            .collect();
        join_all(senders);
        let mut total: HashMap<i32, usize> = HashMap::new();
        for got in join_all(receivers) {
            for (k, v) in got {
                *total.entry(k).or_default() += v;
            }
        }
        assert_eq!(total.len(), L as usize, "chan[{cap}]: distinct values");
        assert!(total.values().all(|&v| v == P), "chan[{cap}]: counts");
    }

    {
        // len / capacity.
        let (tx, rx) = chan::<i32>(cap);
        assert_eq!((rx.len(), rx.capacity()), (0, cap));
        assert!(tx.is_empty());
        for i in 0..cap {
            tx.send(i as i32).unwrap();
        }
        assert_eq!((tx.len(), tx.capacity()), (cap, cap));
        assert_eq!(rx.len(), cap);
    }
}

isolated_test! {
    fn test_chan() ["GOMAXPROCS" = "4"] {
        run(|| {
            for cap in 0..200 {
                test_chan_cap(cap);
            }
        });
    }
}

// Go's TestNonblockRecvRace: a non-blocking receive racing with close and a
// drain always finds the value or the close, never "not ready".
#[test]
fn test_nonblock_recv_race() {
    run(|| {
        for _ in 0..10_000 {
            let (tx, rx) = chan::<i32>(1);
            tx.send(1).unwrap();
            let h = {
                let rx = rx.clone();
                go(move || {
                    select! {
                        recv(rx) -> _ => true,
                        default => false,
                    }
                })
            };
            tx.close().unwrap();
            let _ = rx.recv();
            assert!(h.join().unwrap(), "chan is not ready");
        }
    });
}

// Go's TestNonblockSelectRace: c2 receives a value while a select with a
// default polls c1 and c2; c1 is drained concurrently. One of them is
// always ready, so default must never fire.
#[test]
fn test_nonblock_select_race() {
    run(|| {
        let (done_tx, done_rx) = chan::<bool>(1);
        for _ in 0..100_000 {
            let (c1_tx, c1_rx) = chan::<i32>(1);
            let (c2_tx, c2_rx) = chan::<i32>(1);
            c1_tx.send(1).unwrap();
            let done_tx = done_tx.clone();
            let (r1, r2) = (c1_rx.clone(), c2_rx.clone());
            go(move || {
                let ok = select! {
                    recv(r1) -> _ => true,
                    recv(r2) -> _ => true,
                    default => false,
                };
                done_tx.send(ok).unwrap();
            });
            c2_tx.send(1).unwrap();
            select! {
                recv(c1_rx) -> _ => {},
                default => {},
            }
            assert!(done_rx.recv().unwrap(), "no chan is ready");
        }
    });
}

// Go's TestNonblockSelectRace2: as above, with c2 closed instead of sent to.
#[test]
fn test_nonblock_select_race2() {
    run(|| {
        let (done_tx, done_rx) = chan::<bool>(1);
        for _ in 0..100_000 {
            let (c1_tx, c1_rx) = chan::<i32>(1);
            let (c2_tx, c2_rx) = chan::<i32>(0);
            c1_tx.send(1).unwrap();
            let done_tx = done_tx.clone();
            let (r1, r2) = (c1_rx.clone(), c2_rx.clone());
            go(move || {
                let ok = select! {
                    recv(r1) -> _ => true,
                    recv(r2) -> _ => true,
                    default => false,
                };
                done_tx.send(ok).unwrap();
            });
            c2_tx.close().unwrap();
            select! {
                recv(c1_rx) -> _ => {},
                default => {},
            }
            assert!(done_rx.recv().unwrap(), "no chan is ready");
        }
    });
}

// Go's TestSelfSelect: two goroutines each select over a send and a receive
// on the same channel; nobody deadlocks, and on an unbuffered channel
// nobody receives its own value.
isolated_test! {
    fn test_self_select() ["GOMAXPROCS" = "2"] {
        run(|| {
            for cap in [0usize, 10] {
                let (tx, rx) = chan::<usize>(cap);
                let hs: Vec<_> = (0..2usize)
                    .map(|p| {
                        let (tx, rx) = (tx.clone(), rx.clone());
                        go(move || {
                            for i in 0..1000 {
                                let got = if p == 0 || i % 2 == 0 {
                                    select! {
                                        send(tx, p) -> r => { r.unwrap(); None },
                                        recv(rx) -> v => Some(v.unwrap()),
                                    }
                                } else {
                                    select! {
                                        recv(rx) -> v => Some(v.unwrap()),
                                        send(tx, p) -> r => { r.unwrap(); None },
                                    }
                                };
                                if let Some(v) = got {
                                    assert!(!(cap == 0 && v == p), "self receive");
                                }
                            }
                        })
                    })
                    .collect();
                join_all(hs);
            }
        });
    }
}

// Go's TestSelectStress: 4 channels (2 unbuffered, caps 2 and 3); per
// channel one sender and one receiver goroutine, plus one goroutine sending
// and one receiving on all four in a single select, each dropping a channel
// from its select (Go's nil channel) once it moved N values on it. Nothing
// deadlocks and every count comes out exact.
isolated_test! {
    fn test_select_stress() ["GOMAXPROCS" = "10"] {
        const N: usize = 100_000;
        run(|| {
            let chans: Vec<(Sender<i32>, Receiver<i32>)> =
                [0, 0, 2, 3].into_iter().map(chan::<i32>).collect();
            let mut hs = Vec::new();
            for (tx, rx) in &chans {
                let tx = tx.clone();
                hs.push(go(move || {
                    for _ in 0..N {
                        tx.send(0).unwrap();
                    }
                }));
                let rx = rx.clone();
                hs.push(go(move || {
                    for _ in 0..N {
                        rx.recv().unwrap();
                    }
                }));
            }
            let txs: Vec<Sender<i32>> = chans.iter().map(|c| c.0.clone()).collect();
            hs.push(go(move || {
                let mut n = [0usize; 4];
                let live = |n: &[usize; 4], k: usize| (n[k] < N).then_some(&txs[k]);
                for _ in 0..4 * N {
                    let k = select! {
                        send(live(&n, 3), 0) -> r => { r.unwrap(); 3 },
                        send(live(&n, 2), 0) -> r => { r.unwrap(); 2 },
                        send(live(&n, 0), 0) -> r => { r.unwrap(); 0 },
                        send(live(&n, 1), 0) -> r => { r.unwrap(); 1 },
                    };
                    n[k] += 1;
                }
                assert_eq!(n, [N; 4]);
            }));
            let rxs: Vec<Receiver<i32>> = chans.iter().map(|c| c.1.clone()).collect();
            hs.push(go(move || {
                let mut n = [0usize; 4];
                let live = |n: &[usize; 4], k: usize| (n[k] < N).then_some(&rxs[k]);
                for _ in 0..4 * N {
                    let k = select! {
                        recv(live(&n, 0)) -> r => { r.unwrap(); 0 },
                        recv(live(&n, 1)) -> r => { r.unwrap(); 1 },
                        recv(live(&n, 2)) -> r => { r.unwrap(); 2 },
                        recv(live(&n, 3)) -> r => { r.unwrap(); 3 },
                    };
                    n[k] += 1;
                }
                assert_eq!(n, [N; 4]);
            }));
            join_all(hs);
        });
    }
}

// Go's TestSelectFairness: two always-ready arms (and two never-ready ones)
// are chosen within 10 sigma of 50/50.
#[test]
fn test_select_fairness() {
    const TRIALS: usize = 10_000;
    run(|| {
        let (c1_tx, c1) = chan::<u8>(TRIALS + 1);
        let (c2_tx, c2) = chan::<u8>(TRIALS + 1);
        for _ in 0..TRIALS + 1 {
            c1_tx.send(1).unwrap();
            c2_tx.send(2).unwrap();
        }
        let (_c3_tx, c3) = chan::<u8>(0);
        let (_c4_tx, c4) = chan::<u8>(0);
        let (out_tx, out) = chan::<u8>(0);
        let (done_tx, done) = chan::<()>(0);
        let h = go(move || loop {
            let b = select! {
                recv(c3) -> b => b.unwrap(),
                recv(c4) -> b => b.unwrap(),
                recv(c1) -> b => b.unwrap(),
                recv(c2) -> b => b.unwrap(),
            };
            select! {
                send(out_tx, b) -> r => r.unwrap(),
                recv(done) -> _ => return,
            }
        });
        let (mut cnt1, mut cnt2) = (0usize, 0usize);
        for _ in 0..TRIALS {
            match out.recv().unwrap() {
                1 => cnt1 += 1,
                2 => cnt2 += 1,
                b => panic!("unexpected value {b} on channel"),
            }
        }
        let r = cnt1 as f64 / TRIALS as f64;
        let e = (r - 0.5).abs();
        let sigma = (0.25 / TRIALS as f64).sqrt();
        assert!(
            e <= 10.0 * sigma,
            "unfair select: in {TRIALS} trials, results were {cnt1}, {cnt2}"
        );
        done_tx.close().unwrap();
        h.join().unwrap();
    });
}

// A select whose arms are ready in every way at once (a buffered value, a
// closed channel, room in a buffer, a blocked receiver to hand a value to)
// picks each of them about equally often, and never an arm that is not
// ready; every value sent reaches its receiver. The arms are tried one at
// a time, each under its own lock, before the all-locks pass.
#[test]
fn select_chooses_evenly_among_arms_ready_in_every_way() {
    const TRIALS: usize = 8_000;
    run(|| {
        let (full_tx, full) = chan::<u32>(TRIALS);
        for _ in 0..TRIALS {
            full_tx.send(1).unwrap();
        }
        let (closed_tx, closed) = chan::<u32>(0);
        closed_tx.close().unwrap();
        let (room, room_rx) = chan::<u32>(TRIALS);
        let (peer, peer_rx) = chan::<u32>(0);
        let (_idle_tx, idle) = chan::<u32>(0);
        let received = go(move || peer_rx.iter().count());
        let mut counts = [0usize; 4];
        for _ in 0..TRIALS {
            // Let the receiver block on `peer` before each select, so that
            // arm is ready too (best effort: how often it is depends on the
            // schedule, so its count is only checked against the receiver's).
            for _ in 0..4 {
                yield_now();
            }
            let k = select! {
                recv(full) -> v => { assert_eq!(v, Ok(1)); 0 },
                recv(closed) -> v => { assert_eq!(v, Err(RecvError)); 1 },
                send(room, 3) -> r => { r.unwrap(); 2 },
                send(peer, 4) -> r => { r.unwrap(); 3 },
                recv(idle) -> _ => unreachable!("an arm that was never ready fired"),
            };
            counts[k] += 1;
        }
        drop(peer);
        assert_eq!(received.join().unwrap(), counts[3]);
        assert_eq!(room_rx.len(), counts[2]);
        assert_eq!(full.len(), TRIALS - counts[0]);
        // The three arms that are always ready: each about a third of what
        // the peer arm (ready only when the receiver is already blocked,
        // which depends on the schedule) leaves; a loose bound that a broken
        // order (always the first arm, or never one kind) cannot meet.
        for (k, &c) in counts[..3].iter().enumerate() {
            assert!(
                c > TRIALS / 10,
                "arm {k} fired {c} times of {TRIALS}: {counts:?}"
            );
        }
    });
}

// Go's TestPseudoRandomSend: a select with two send arms on one channel
// sends both values, not always the first.
#[test]
fn test_pseudo_random_send() {
    const N: usize = 100;
    run(|| {
        for cap in [0, N] {
            let (tx, rx) = chan::<usize>(cap);
            let h = go(move || {
                (0..N)
                    .map(|_| {
                        yield_now();
                        rx.recv().unwrap()
                    })
                    .collect::<Vec<_>>()
            });
            for _ in 0..N {
                select! {
                    send(tx, 1) -> r => r.unwrap(),
                    send(tx, 0) -> r => r.unwrap(),
                }
            }
            let l = h.join().unwrap();
            let n1: usize = l.iter().sum();
            let n0 = N - n1;
            assert!(
                n0 > N / 10 && n1 > N / 10,
                "want pseudorandom, got {n0} zeros and {n1} ones (chan cap {cap})"
            );
        }
    });
}

// Go's TestMultiConsumer: 23 workers ranging over a work channel and
// feeding a result channel; 271828 items; count and sum come out exact.
#[test]
fn test_multi_consumer() {
    const NWORK: usize = 23;
    const NITER: usize = 271_828;
    const PN: [usize; 10] = [2, 3, 7, 11, 13, 17, 19, 23, 27, 31];
    run(|| {
        let (q_tx, q) = chan::<usize>(NWORK * 3);
        let (r_tx, r) = chan::<usize>(NWORK * 3);
        let workers: Vec<_> = (0..NWORK)
            .map(|w| {
                let (q, r_tx) = (q.clone(), r_tx.clone());
                go(move || {
                    for v in &q {
                        // Mess with the FIFO-ish nature of the range.
                        if PN[w % PN.len()] == v {
                            yield_now();
                        }
                        r_tx.send(v).unwrap();
                    }
                })
            })
            .collect();
        drop((q, r_tx));
        let feeder = go(move || {
            let mut expect = 0;
            for i in 0..NITER {
                let v = PN[i % PN.len()];
                expect += v;
                q_tx.send(v).unwrap();
            }
            q_tx.close().unwrap(); // no more work
            join_all(workers); // workers done: their result senders are dropped
            expect
        });
        let (mut n, mut s) = (0, 0);
        for v in r {
            n += 1;
            s += v;
        }
        let expect = feeder.join().unwrap();
        assert_eq!((n, s), (NITER, expect));
    });
}

// Go's TestSelectDuplicateChannel: a select queued twice on the same
// channel dequeues both sudogs when another channel wakes it, so the next
// waiter on that channel is the one woken. GOMAXPROCS=1 makes Go's sleeps
// into deterministic yields.
isolated_test! {
    fn test_select_duplicate_channel() ["GOMAXPROCS" = "1"] {
        run(|| {
            let (c_tx, c) = chan::<i32>(0);
            let (d_tx, d) = chan::<i32>(0);
            let (e_tx, e) = chan::<i32>(0);
            let a = {
                let c = c.clone();
                go(move || {
                    let got = select! {
                        recv(c) -> v => ('c', v.unwrap()),
                        recv(c) -> v => ('c', v.unwrap()),
                        recv(d) -> v => ('d', v.unwrap()),
                    };
                    e_tx.send(9).unwrap();
                    got
                })
            };
            settle(); // A queues on c (twice) and d
            let b = go(move || c.recv().unwrap());
            settle(); // B queues on c behind A
            d_tx.send(7).unwrap(); // wakes A, which removes itself from c
            assert_eq!(e.recv(), Ok(9));
            c_tx.send(8).unwrap(); // must wake B, not A's stale sudogs
            assert_eq!(a.join().unwrap(), ('d', 7));
            assert_eq!(b.join().unwrap(), 8);
        });
    }
}

// Go's nil channel: an arm whose channel is None never fires, in a select
// with default, with other arms, and with the same channel present.
#[test]
fn nil_channel_arms_never_fire() {
    run(|| {
        let (tx, rx) = chan::<i32>(1);
        let no_rx: Option<&Receiver<i32>> = None;
        let no_tx: Option<&Sender<i32>> = None;
        for _ in 0..1000 {
            let r = select! {
                recv(no_rx) -> _ => "nil recv",
                send(no_tx, 1) -> _ => "nil send",
                default => "default",
            };
            assert_eq!(r, "default");
        }
        tx.send(5).unwrap();
        for _ in 0..1000 {
            let r = select! {
                recv(no_rx) -> _ => unreachable!("nil recv fired"),
                send(no_tx, 1) -> _ => unreachable!("nil send fired"),
                recv(Some(&rx)) -> v => v.unwrap(),
            };
            assert_eq!(r, 5);
            tx.send(5).unwrap();
        }
        // A blocking select with nil arms waits for the live one.
        let h = {
            let tx = tx.clone();
            go(move || {
                settle();
                tx.send(6).unwrap();
            })
        };
        assert_eq!(rx.recv(), Ok(5));
        let r = select! {
            recv(no_rx) -> _ => unreachable!("nil recv fired"),
            recv(rx) -> v => v.unwrap(),
        };
        assert_eq!(r, 6);
        h.join().unwrap();
    });
}

// A select whose arms are all nil, and `select! {}`, block forever: the
// goroutines stay parked (counted, not running) and the thread stays
// blocked while everything else runs on.
isolated_test! {
    fn select_with_no_live_arms_blocks_forever() ["GOMAXPROCS" = "2"] {
        run(|| {
            let started = Arc::new(AtomicUsize::new(0));
            let returned = Arc::new(AtomicBool::new(false));
            let before = goroutine::num_goroutine();
            {
                let started = started.clone();
                go(move || -> () {
                    started.fetch_add(1, Ordering::SeqCst);
                    select! {}
                });
            }
            {
                let (started, returned) = (started.clone(), returned.clone());
                go(move || {
                    started.fetch_add(1, Ordering::SeqCst);
                    let nil: Option<Receiver<u8>> = None;
                    select! {
                        recv(nil) -> _ => {},
                    }
                    returned.store(true, Ordering::SeqCst);
                });
            }
            {
                let started = started.clone();
                std::thread::spawn(move || -> () {
                    started.fetch_add(1, Ordering::SeqCst);
                    select! {}
                });
            }
            while started.load(Ordering::SeqCst) < 3 {
                settle();
            }
            for _ in 0..10 {
                settle();
            }
            assert!(!returned.load(Ordering::SeqCst), "a nil-only select returned");
            assert_eq!(goroutine::num_goroutine(), before + 2);
            // The runtime still runs other goroutines.
            let (tx, rx) = chan::<i32>(0);
            go(move || tx.send(1).unwrap());
            assert_eq!(rx.recv(), Ok(1));
        });
    }
}

#[test]
fn close_twice_is_an_error() {
    let (tx, rx) = chan::<i32>(3);
    assert!(!tx.is_closed());
    tx.send(1).unwrap();
    assert_eq!(tx.close(), Ok(()));
    assert!(tx.is_closed() && rx.is_closed());
    assert_eq!(tx.close(), Err(CloseError));
    assert_eq!(CloseError.to_string(), "close of closed channel");
    let tx2 = tx.clone();
    assert_eq!(tx2.close(), Err(CloseError));
    // Sends fail and give the value back; the buffer still drains.
    assert_eq!(tx.send(2), Err(SendError(2)));
    assert!(matches!(tx.try_send(3), Err(TrySendError::Closed(3))));
    assert_eq!(rx.recv(), Ok(1));
    assert_eq!(rx.recv(), Err(RecvError));
    drop((tx, tx2)); // dropping the senders of a closed channel is fine
}

#[test]
fn dropping_the_last_sender_closes() {
    run(|| {
        for cap in [0usize, 1, 5] {
            let (tx, rx) = chan::<usize>(cap);
            let txs: Vec<_> = (0..4).map(|_| tx.clone()).collect();
            drop(tx);
            let hs: Vec<_> = txs
                .into_iter()
                .enumerate()
                .map(|(i, tx)| go(move || tx.send(i).unwrap()))
                .collect();
            let mut got: Vec<usize> = rx.iter().collect(); // ends when the last sender is gone
            got.sort_unstable();
            assert_eq!(got, vec![0, 1, 2, 3]);
            assert!(rx.is_closed());
            assert_eq!(rx.recv(), Err(RecvError));
            join_all(hs);
        }
        // A receiver blocked when the last sender goes is woken.
        let (tx, rx) = chan::<i32>(0);
        let h = go(move || rx.recv());
        settle();
        drop(tx);
        assert_eq!(h.join().unwrap(), Err(RecvError));
    });
}

#[test]
fn dropping_every_receiver_fails_sends_with_the_value() {
    run(|| {
        // Future sends.
        let (tx, rx) = chan::<String>(1);
        let rx2 = rx.clone();
        drop(rx);
        tx.send("kept".into()).unwrap();
        drop(rx2);
        let e = tx.send("back".into()).unwrap_err();
        assert_eq!(e.to_string(), "sending on a closed channel");
        assert_eq!(e.into_inner(), "back");
        match tx.try_send("again".into()) {
            Err(TrySendError::Closed(v)) => assert_eq!(v, "again"),
            r => panic!("{r:?}"),
        }
        let r = select! {
            send(tx, "sel".to_string()) -> r => r,
            default => Ok(()),
        };
        assert_eq!(r.unwrap_err().into_inner(), "sel");
        assert!(!tx.is_closed(), "no receivers is not close");

        // Senders blocked at the time, plain and in a select.
        for cap in [0usize, 2] {
            let (tx, rx) = chan::<String>(cap);
            for i in 0..cap {
                tx.send(format!("buffered {i}")).unwrap();
            }
            let plain = {
                let tx = tx.clone();
                go(move || tx.send("plain".into()))
            };
            let selecting = {
                let tx = tx.clone();
                go(move || {
                    select! {
                        send(tx, "select".to_string()) -> r => r,
                    }
                })
            };
            settle();
            drop(rx);
            assert_eq!(plain.join().unwrap().unwrap_err().into_inner(), "plain");
            assert_eq!(
                selecting.join().unwrap().unwrap_err().into_inner(),
                "select"
            );
        }
    });
}

/// Counts live values, to check that every value sent is dropped once.
struct Tracked(Arc<AtomicUsize>);

impl Tracked {
    fn new(live: &Arc<AtomicUsize>) -> Tracked {
        live.fetch_add(1, Ordering::SeqCst);
        Tracked(live.clone())
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[test]
fn buffered_values_are_dropped_exactly_once() {
    let live = Arc::new(AtomicUsize::new(0));
    // Dropped with the last receiver (the senders live on).
    let (tx, rx) = chan::<Tracked>(8);
    for _ in 0..5 {
        tx.send(Tracked::new(&live)).unwrap();
    }
    drop(rx.recv().unwrap());
    assert_eq!(live.load(Ordering::SeqCst), 4);
    drop(rx);
    assert_eq!(live.load(Ordering::SeqCst), 0);
    assert!(tx.send(Tracked::new(&live)).is_err());
    assert_eq!(live.load(Ordering::SeqCst), 0);
    drop(tx);
    // Dropped with the channel (the ring wrapped around).
    let (tx, rx) = chan::<Tracked>(4);
    for round in 0..3 {
        for _ in 0..3 {
            tx.send(Tracked::new(&live)).unwrap();
        }
        for _ in 0..2 + round % 2 {
            drop(rx.recv().unwrap());
        }
    }
    assert_eq!(live.load(Ordering::SeqCst), rx.len());
    assert!(!rx.is_empty());
    drop((tx, rx));
    assert_eq!(live.load(Ordering::SeqCst), 0);
    // A capacity-1 channel keeps its slot inline: the same, with the
    // last receiver and with the channel.
    for last_receiver_first in [true, false] {
        let (tx, rx) = chan::<Tracked>(1);
        for _ in 0..3 {
            tx.send(Tracked::new(&live)).unwrap();
            drop(rx.recv().unwrap());
        }
        tx.send(Tracked::new(&live)).unwrap();
        assert!(matches!(
            tx.try_send(Tracked::new(&live)),
            Err(TrySendError::Full(_))
        ));
        assert_eq!((live.load(Ordering::SeqCst), tx.capacity()), (1, 1));
        if last_receiver_first {
            drop(rx);
            assert_eq!(live.load(Ordering::SeqCst), 0);
            drop(tx);
        } else {
            drop((tx, rx));
        }
        assert_eq!(live.load(Ordering::SeqCst), 0);
    }
    // A value whose Drop uses the same channel: no deadlock (nothing is
    // dropped under the channel lock).
    struct Reentrant(Sender<u8>);
    impl Drop for Reentrant {
        fn drop(&mut self) {
            let _ = self.0.try_send(1);
            let _ = self.0.len();
        }
    }
    let (tx, rx) = chan::<Reentrant>(2);
    let (btx, brx) = chan::<u8>(1);
    tx.send(Reentrant(btx.clone())).unwrap();
    drop(rx);
    assert_eq!(brx.try_recv(), Ok(1));
    drop((tx, btx));
}

#[test]
fn try_send_and_try_recv() {
    run(|| {
        let (tx, rx) = chan::<i32>(1);
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
        tx.try_send(1).unwrap();
        let e = tx.try_send(2).unwrap_err();
        assert!(e.is_full());
        assert_eq!(e.to_string(), "sending on a full channel");
        assert_eq!(e.into_inner(), 2);
        assert_eq!(rx.try_recv(), Ok(1));

        // Unbuffered: try_send succeeds only with a receiver blocked.
        let (tx, rx) = chan::<i32>(0);
        assert!(matches!(tx.try_send(1), Err(TrySendError::Full(1))));
        let h = go(move || rx.recv().unwrap());
        let mut v = 2;
        loop {
            match tx.try_send(v) {
                Ok(()) => break,
                Err(TrySendError::Full(back)) => {
                    v = back;
                    yield_now();
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(h.join().unwrap(), 2);
        // try_recv takes from a blocked sender.
        let (tx, rx) = chan::<i32>(0);
        let h = go(move || tx.send(3));
        let got = loop {
            match rx.try_recv() {
                Ok(v) => break v,
                Err(TryRecvError::Empty) => yield_now(),
                Err(e) => panic!("{e}"),
            }
        };
        assert_eq!(got, 3);
        h.join().unwrap().unwrap();
        assert_eq!(rx.try_recv(), Err(TryRecvError::Closed));
        assert!(TryRecvError::Closed.is_closed() && TryRecvError::Empty.is_empty());
    });
}

#[test]
fn iterators() {
    run(|| {
        let (tx, rx) = chan::<u32>(4);
        let h = go(move || {
            for i in 0..100 {
                tx.send(i).unwrap();
            }
        });
        let mut n = 0;
        for v in &rx {
            assert_eq!(v, n);
            n += 1;
        }
        assert_eq!(n, 100);
        h.join().unwrap();

        let (tx, rx) = chan::<u32>(4);
        for i in 0..3 {
            tx.send(i).unwrap();
        }
        assert_eq!(rx.try_iter().collect::<Vec<_>>(), vec![0, 1, 2]);
        tx.send(9).unwrap();
        drop(tx);
        assert_eq!(rx.into_iter().collect::<Vec<_>>(), vec![9]);
    });
}

#[test]
fn errors_display_debug_and_source() {
    fn is_error<E: std::error::Error + Send + Sync + 'static>(_: &E) {}
    struct NoDebug;
    let e = SendError(NoDebug);
    is_error(&e);
    assert_eq!(format!("{e:?}"), "SendError { .. }");
    let e = TrySendError::Full(NoDebug);
    is_error(&e);
    assert_eq!(format!("{e:?}"), "Full(..)");
    assert_eq!(
        TrySendError::Closed(NoDebug).to_string(),
        "sending on a closed channel"
    );
    is_error(&RecvError);
    is_error(&TryRecvError::Empty);
    is_error(&CloseError);
    assert_eq!(
        RecvError.to_string(),
        "receiving on a closed and empty channel"
    );
    let (tx, rx) = chan::<i32>(2);
    assert!(format!("{tx:?}").starts_with("Sender"));
    assert!(format!("{rx:?}").starts_with("Receiver"));
}

/// Compile-time checks: handles are Send + Sync + Clone for Send values.
#[test]
fn handles_are_send_sync_clone() {
    fn check<T: Send + Sync + Clone>() {}
    check::<Sender<String>>();
    check::<Receiver<String>>();
    check::<Sender<std::cell::Cell<u8>>>(); // Cell is Send but not Sync
}

// The unbuffered handoff readies the receiver into the sender's runnext
// (Go's goready): with one P, the receiver runs before a goroutine that was
// already waiting in runnext.
isolated_test! {
    #[cfg_attr(goroutine_randomize, ignore = "checks the exact runnext policy")]
    fn handoff_readies_receiver_into_runnext() ["GOMAXPROCS" = "1"] {
        let order = run(|| {
            let order = Arc::new(Mutex::new(Vec::new()));
            let (tx, rx) = chan::<i32>(0);
            let (done_tx, done_rx) = chan::<()>(0);
            let r = {
                let (order, done_tx) = (order.clone(), done_tx.clone());
                go(move || {
                    rx.recv().unwrap();
                    order.lock().unwrap().push("receiver");
                    done_tx.send(()).unwrap();
                })
            };
            yield_now(); // the receiver runs and parks in recv
            let x = {
                let order = order.clone();
                go(move || {
                    order.lock().unwrap().push("spawned");
                    done_tx.send(()).unwrap();
                })
            }; // in runnext now
            tx.send(1).unwrap(); // readies the receiver into runnext
            done_rx.recv().unwrap();
            done_rx.recv().unwrap();
            r.join().unwrap();
            x.join().unwrap();
            let v = order.lock().unwrap().clone();
            v
        });
        assert_eq!(order, vec!["receiver", "spawned"]);
    }
}

// Channels between plain OS threads and goroutines, both directions, and
// between threads alone; a thread blocks where a goroutine parks.
#[test]
fn threads_and_goroutines_talk_both_ways() {
    const N: u64 = 10_000;
    for cap in [0usize, 3] {
        // thread -> goroutine
        let (tx, rx) = chan::<u64>(cap);
        let g = go(move || rx.iter().sum::<u64>());
        let t = std::thread::spawn(move || {
            for i in 0..N {
                tx.send(i).unwrap();
            }
        });
        t.join().unwrap();
        assert_eq!(g.join().unwrap(), N * (N - 1) / 2);

        // goroutine -> thread
        let (tx, rx) = chan::<u64>(cap);
        let g = go(move || {
            for i in 0..N {
                tx.send(i).unwrap();
            }
        });
        let t = std::thread::spawn(move || rx.iter().sum::<u64>());
        assert_eq!(t.join().unwrap(), N * (N - 1) / 2);
        g.join().unwrap();

        // ping-pong between a thread and a goroutine
        let (ping_tx, ping_rx) = chan::<u64>(cap);
        let (pong_tx, pong_rx) = chan::<u64>(cap);
        let g = go(move || {
            for v in ping_rx {
                pong_tx.send(v + 1).unwrap();
            }
        });
        for i in 0..1000 {
            ping_tx.send(i).unwrap();
            assert_eq!(pong_rx.recv(), Ok(i + 1));
        }
        drop(ping_tx);
        g.join().unwrap();

        // thread <-> thread, no runtime involved
        let (tx, rx) = chan::<u64>(cap);
        let t = std::thread::spawn(move || {
            for i in 0..N {
                tx.send(i).unwrap();
            }
        });
        assert_eq!(rx.iter().sum::<u64>(), N * (N - 1) / 2);
        t.join().unwrap();
    }
}

// A select on a plain thread blocks the thread until a goroutine or another
// thread completes one arm; the choice among the arms is still a fair one.
#[test]
fn select_on_plain_threads() {
    let (a_tx, a) = chan::<i32>(0);
    let (b_tx, b) = chan::<i32>(0);
    let g = go(move || {
        for i in 0..500 {
            a_tx.send(i).unwrap();
        }
    });
    let t = std::thread::spawn(move || {
        for i in 0..500 {
            b_tx.send(1000 + i).unwrap();
        }
    });
    let (mut na, mut nb) = (0, 0);
    let (mut a_open, mut b_open) = (true, true);
    while a_open || b_open {
        select! {
            recv(a_open.then_some(&a)) -> v => match v {
                Ok(v) => { assert_eq!(v, na); na += 1; }
                Err(_) => a_open = false,
            },
            recv(b_open.then_some(&b)) -> v => match v {
                Ok(v) => { assert_eq!(v, 1000 + nb); nb += 1; }
                Err(_) => b_open = false,
            },
        }
    }
    assert_eq!((na, nb), (500, 500));
    g.join().unwrap();
    t.join().unwrap();
}

// Many goroutines and threads hammer one channel with sends, receives,
// selects and try-operations at once; every value is delivered once.
#[test]
fn mixed_operations_deliver_every_value_once() {
    const PER: usize = 20_000;
    for cap in [0usize, 1, 16] {
        let (tx, rx) = chan::<usize>(cap);
        let (side_tx, side_rx) = chan::<usize>(cap);
        let mut producers: Vec<JoinHandle<()>> = Vec::new();
        for p in 0..4 {
            let (tx, side_tx) = (tx.clone(), side_tx.clone());
            producers.push(go(move || {
                for i in 0..PER {
                    let v = p * PER + i;
                    match i % 3 {
                        0 => tx.send(v).unwrap(),
                        1 => select! {
                            send(tx, v) -> r => r.unwrap(),
                            send(side_tx, v) -> r => r.unwrap(),
                        },
                        _ => {
                            let mut v = v;
                            loop {
                                match tx.try_send(v) {
                                    Ok(()) => break,
                                    Err(TrySendError::Full(back)) => {
                                        v = back;
                                        yield_now();
                                    }
                                    Err(e) => panic!("{e}"),
                                }
                            }
                        }
                    }
                }
            }));
        }
        drop((tx, side_tx));
        let consumers: Vec<_> = (0..3)
            .map(|c| {
                let (rx, side_rx) = (rx.clone(), side_rx.clone());
                let body = move || {
                    let mut got = Vec::new();
                    let (mut open, mut side_open) = (true, true);
                    while open || side_open {
                        if c == 2 && open {
                            match rx.recv() {
                                Ok(v) => got.push(v),
                                Err(_) => open = false,
                            }
                            continue;
                        }
                        select! {
                            recv(open.then_some(&rx)) -> v => match v {
                                Ok(v) => got.push(v),
                                Err(_) => open = false,
                            },
                            recv(side_open.then_some(&side_rx)) -> v => match v {
                                Ok(v) => got.push(v),
                                Err(_) => side_open = false,
                            },
                        }
                    }
                    got
                };
                if c == 0 {
                    Err(std::thread::spawn(body))
                } else {
                    Ok(go(body))
                }
            })
            .collect();
        drop((rx, side_rx));
        join_all(producers);
        let mut all: Vec<usize> = consumers
            .into_iter()
            .flat_map(|c| match c {
                Ok(g) => g.join().unwrap(),
                Err(t) => t.join().unwrap(),
            })
            .collect();
        all.sort_unstable();
        assert_eq!(all, (0..4 * PER).collect::<Vec<_>>(), "cap {cap}");
    }
}

// A goroutine's plain send or receive keeps its sudog in the goroutine's
// record, so the same record serves its next wait at once. Here one close
// wakes 1,000 blocked receivers and one dropped receiver fails 1,000
// blocked senders (values given back); each then blocks again, on a plain
// receive, a plain send and a select, and every value arrives once.
#[test]
fn goroutines_woken_by_a_close_block_again_at_once() {
    const N: usize = 1000;
    run(|| {
        let (gate_tx, gate_rx) = chan::<usize>(0);
        let (full_tx, full_rx) = chan::<usize>(0);
        let (back_tx, back_rx) = chan::<usize>(0);
        let mut hs: Vec<JoinHandle<usize>> = Vec::new();
        let mut inputs = Vec::new();
        for i in 0..N {
            let (gate, back) = (gate_rx.clone(), back_tx.clone());
            let (in_tx, in_rx) = chan::<usize>(0);
            inputs.push(in_tx);
            hs.push(go(move || {
                assert_eq!(gate.recv(), Err(RecvError));
                let v = in_rx.recv().unwrap();
                back.send(v).unwrap();
                select! {
                    recv(in_rx) -> w => w.unwrap() + i,
                }
            }));
            let (full, back) = (full_tx.clone(), back_tx.clone());
            hs.push(go(move || {
                let SendError(v) = full.send(N + i).unwrap_err();
                back.send(v).unwrap();
                v
            }));
        }
        drop((gate_rx, back_tx, full_tx));
        // Let them block first (a best effort: other tests' goroutines count
        // too). One that has not blocked yet finds the channel closed, or
        // its receivers gone, and gets the same answer: the check holds for
        // every schedule, only the path differs.
        while goroutine::stats().waiting < 2 * N {
            yield_now();
        }
        drop(gate_tx);
        drop(full_rx);
        for (i, tx) in inputs.iter().enumerate() {
            tx.send(2 * N + i).unwrap();
        }
        let mut got: Vec<usize> = (0..2 * N).map(|_| back_rx.recv().unwrap()).collect();
        for (i, tx) in inputs.iter().enumerate() {
            tx.send(3 * N + i).unwrap();
        }
        let mut results = join_all(hs);
        got.sort_unstable();
        let want: Vec<usize> = (N..3 * N).collect();
        assert_eq!(got, want);
        results.sort_unstable();
        let mut want: Vec<usize> = (0..N).flat_map(|i| [3 * N + 2 * i, N + i]).collect();
        want.sort_unstable();
        assert_eq!(results, want);
    });
}

// The macro's syntax: block bodies without commas, default first, a trailing
// comma or none, control flow out of a body, only a default, patterns.
#[test]
fn select_macro_forms() {
    let (tx, rx) = chan::<i32>(4);
    let only_default = select! { default => 5 };
    assert_eq!(only_default, 5);

    tx.send(1).unwrap();
    let r = select! {
        default => 0,
        recv(rx) -> m => { m.unwrap() + 10 }
        send(None::<&Sender<i32>>, 3) -> _ => { -1 }
    };
    assert_eq!(r, 11);

    let r = select! {
        send(&tx, 2) -> res => res.map(|()| "sent"),
        recv(None::<Receiver<i32>>) -> _ => Ok("nil")
    };
    assert_eq!(r, Ok("sent"));

    let mut seen = Vec::new();
    for i in 0..10 {
        tx.send(i).unwrap();
        select! {
            recv(rx) -> m => {
                let v = m.unwrap();
                if v == 2 {
                    continue;
                }
                if v == 5 {
                    break;
                }
                seen.push(v);
            }
        }
    }
    assert_eq!(seen, vec![0, 1, 3, 4]);

    fn first_ready(rx: &Receiver<i32>) -> Option<i32> {
        select! {
            recv(rx) -> m => return m.ok(),
            default => {}
        }
        None
    }
    let (tx2, rx2) = chan::<i32>(1);
    assert_eq!(first_ready(&rx2), None);
    tx2.send(8).unwrap();
    assert_eq!(first_ready(&rx2), Some(8));

    // Patterns, and operands given as expressions (evaluated once).
    let pair = (tx2.clone(), rx2.clone());
    let mut evaluated = 0;
    let r = select! {
        send({ evaluated += 1; &pair.0 }, 4) -> _res => "sent",
        recv({ evaluated += 1; &pair.1 }) -> (Ok(_) | Err(_)) => "received",
    };
    assert_eq!(r, "sent");
    assert_eq!(evaluated, 2);
    drop(tx);
}

/// The lock-free fast paths (chan/fast.rs) answer the same as the locked
/// operations: a full or empty channel, a closed one (drained or not), an
/// unbuffered one with every receiver gone, and one-arm selects with a
/// default.
#[test]
fn non_blocking_answers_agree_with_the_channel_state() {
    run(|| {
        let (tx, rx) = chan::<i32>(2);
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
        assert_eq!((tx.len(), rx.is_empty(), rx.is_closed()), (0, true, false));
        tx.try_send(1).unwrap();
        tx.try_send(2).unwrap();
        assert!(matches!(tx.try_send(3), Err(TrySendError::Full(3))));
        let full = select! { send(tx, 3) -> _ => false, default => true };
        assert!(full);
        assert_eq!(tx.len(), 2);
        tx.close().unwrap();
        assert!(rx.is_closed() && tx.is_closed());
        // Closed with values buffered: they come out first.
        assert_eq!(rx.try_recv(), Ok(1));
        let got = select! { recv(rx) -> v => v, default => Err(RecvError) };
        assert_eq!(got, Ok(2));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Closed));
        let closed = select! { recv(rx) -> v => v.is_err(), default => false };
        assert!(closed, "a closed channel is ready, default must not fire");
        assert!(matches!(tx.try_send(4), Err(TrySendError::Closed(4))));

        // Unbuffered, every receiver gone: Closed, not Full.
        let (tx, rx) = chan::<i32>(0);
        assert!(matches!(tx.try_send(5), Err(TrySendError::Full(5))));
        let empty = select! { recv(rx) -> _ => false, default => true };
        assert!(empty);
        drop(rx);
        assert!(matches!(tx.try_send(6), Err(TrySendError::Closed(6))));
    });
}

/// pingpong_cross on plain threads: both sides only poll with try_send and
/// try_recv (never block), every value arrives once and in order. With the
/// fast paths a poller only reads the channel while the other side sends.
#[test]
fn polling_threads_bounce_values_in_order() {
    const TRIPS: u64 = 20_000;
    let (ping_tx, ping_rx) = chan::<u64>(1);
    let (pong_tx, pong_rx) = chan::<u64>(1);
    fn poll<T>(mut f: impl FnMut() -> Option<T>) -> T {
        loop {
            if let Some(v) = f() {
                return v;
            }
            std::hint::spin_loop();
            // On a loaded machine the other side may be descheduled.
            std::thread::yield_now();
        }
    }
    let echo = std::thread::spawn(move || {
        for _ in 0..TRIPS {
            let v = poll(|| ping_rx.try_recv().ok());
            let mut v = Some(v);
            poll(|| match pong_tx.try_send(v.take().unwrap()) {
                Ok(()) => Some(()),
                Err(TrySendError::Full(back)) => {
                    v = Some(back);
                    None
                }
                Err(e) => panic!("{e}"),
            });
        }
    });
    for i in 0..TRIPS {
        let mut v = Some(i);
        poll(|| match ping_tx.try_send(v.take().unwrap()) {
            Ok(()) => Some(()),
            Err(TrySendError::Full(back)) => {
                v = Some(back);
                None
            }
            Err(e) => panic!("{e}"),
        });
        assert_eq!(poll(|| pong_rx.try_recv().ok()), i);
    }
    echo.join().unwrap();
    assert_eq!(pong_rx.try_recv(), Err(TryRecvError::Closed));
}
