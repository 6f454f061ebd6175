//! Cancel safety of the channel operations that can give up: the futures
//! (`send_async`, `recv_async`), the calls with a timeout (`send_timeout`,
//! `recv_timeout`), `select!` arms, and `block_on` racing futures.
//!
//! The rule each one documents ("# Cancel safety"), as tokio's channels
//! give it: an operation that did not report success did not happen. A
//! send future dropped before it returned `Ready` sent nothing; a send that
//! timed out sent nothing and gave the value back; a receive that gave up
//! lost no value. Each stress test counts what was reported sent against
//! what arrived, value by value, and the two must agree exactly.

mod common;

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use goroutine::{
    block_on, chan, go, select, RecvError, RecvTimeoutError, SendTimeoutError, TryRecvError,
};

#[derive(Default)]
struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl CountingWaker {
    fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }

    /// Waits (up to 10 s) until woken at least `n` times.
    fn wait_for(&self, n: usize) {
        let start = Instant::now();
        while self.count() < n {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "the future was never woken"
            );
            std::thread::yield_now();
        }
    }
}

fn poll_once<F: Future + Unpin>(f: &mut F, w: &Arc<CountingWaker>) -> Poll<F::Output> {
    let waker = Waker::from(w.clone());
    Pin::new(f).poll(&mut Context::from_waker(&waker))
}

/// Checks that `got` holds each value of `sent` exactly once, and nothing
/// else.
fn assert_exactly_once(what: &str, sent: &[u64], got: &[u64]) {
    let mut counts: HashMap<u64, i64> = HashMap::new();
    for v in sent {
        *counts.entry(*v).or_default() += 1;
    }
    for v in got {
        *counts.entry(*v).or_default() -= 1;
    }
    let wrong: Vec<(u64, i64)> = counts.into_iter().filter(|&(_, n)| n != 0).collect();
    assert!(
        wrong.is_empty(),
        "{what}: {} values reported sent, {} received; (value, sent - received) \
         off for {} values, e.g. {:?}",
        sent.len(),
        got.len(),
        wrong.len(),
        &wrong[..wrong.len().min(8)]
    );
}

/// The reproduction: a send future polled once on an unbuffered
/// channel, then a receiver arrives, then the future is dropped without
/// another poll. It never returned `Ready`, so its value must not arrive:
/// the receiver is still waiting and takes the next value sent instead.
#[test]
fn a_send_future_dropped_after_a_receiver_arrived_sent_nothing() {
    const SENTINEL: u64 = u64::MAX;
    common::within_thread(120, || {
        let (tx, rx) = chan::<u64>(0);
        let mut delivered = 0;
        for i in 0..2000u64 {
            let w = Arc::new(CountingWaker::default());
            let mut f = tx.send_async(i);
            assert!(poll_once(&mut f, &w).is_pending());
            let rx2 = rx.clone();
            let receiver = go(move || rx2.recv().unwrap());
            // The receiver has met the pending send: it woke the future.
            w.wait_for(1);
            drop(f);
            // The receiver, if it still waits, takes this instead.
            // (It woke the future after queueing itself, so if it waits, it
            // is queued by now: `Full` means it took the future's value.)
            let _ = tx.try_send(SENTINEL);
            let got = receiver.join().unwrap();
            if got != SENTINEL {
                assert_eq!(got, i);
                delivered += 1;
            }
        }
        assert_eq!(
            delivered, 0,
            "{delivered} of 2000 dropped send futures delivered their value"
        );
    });
}

/// The same on a buffered channel: a receiver that makes room wakes the
/// pending send future, and the future dropped then leaves nothing in the
/// buffer. The room it was offered goes to the next blocked sender.
#[test]
fn a_send_future_dropped_after_room_was_made_sent_nothing() {
    common::within_thread(60, || {
        for cap in [1usize, 3] {
            for round in 0..200u64 {
                let (tx, rx) = chan::<u64>(cap);
                for k in 0..cap as u64 {
                    tx.send(k).unwrap();
                }
                let w = Arc::new(CountingWaker::default());
                let mut f = tx.send_async(1000);
                assert!(poll_once(&mut f, &w).is_pending());
                // A goroutine blocks behind the future.
                let (ready_tx, ready_rx) = chan::<()>(0);
                let tx2 = tx.clone();
                let blocked = go(move || {
                    ready_tx.send(()).unwrap();
                    tx2.send(2000).unwrap();
                });
                ready_rx.recv().unwrap();
                // Give it time to queue (not needed for correctness: if it
                // has not queued yet it finds the room itself).
                if round % 2 == 0 {
                    std::thread::sleep(Duration::from_micros(200));
                }
                assert_eq!(rx.recv(), Ok(0));
                w.wait_for(1);
                drop(f);
                let rest: Vec<u64> = (0..cap).map(|_| rx.recv().unwrap()).collect();
                let mut expect: Vec<u64> = (1..cap as u64).collect();
                expect.push(2000);
                assert_eq!(rest, expect, "cap {cap} round {round}");
                blocked.join().unwrap();
                assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
            }
        }
    });
}

/// A pending send future that a receiver woke, polled again, sends: the
/// wake is a promise kept on the next poll, on either kind of channel.
#[test]
fn a_woken_send_future_sends_on_its_next_poll() {
    for cap in [0usize, 1] {
        let (tx, rx) = chan::<u64>(cap);
        if cap == 1 {
            tx.send(1).unwrap();
        }
        let w = Arc::new(CountingWaker::default());
        let mut f = tx.send_async(7);
        assert!(poll_once(&mut f, &w).is_pending());
        let receiver = go(move || {
            let mut got = Vec::new();
            for _ in 0..cap + 1 {
                got.push(rx.recv().unwrap());
            }
            got
        });
        w.wait_for(1);
        assert!(matches!(poll_once(&mut f, &w), Poll::Ready(Ok(()))));
        let mut expect = if cap == 1 { vec![1] } else { vec![] };
        expect.push(7);
        assert_eq!(receiver.join().unwrap(), expect, "cap {cap}");
    }
}

/// The receiver that woke a send future gives up (a receive with a
/// timeout): the woken future, polled, finds nobody and waits again, and
/// the next receiver gets its value.
#[test]
fn a_woken_send_future_whose_receiver_left_waits_again() {
    let (tx, rx) = chan::<u64>(0);
    let w = Arc::new(CountingWaker::default());
    let mut f = tx.send_async(5);
    assert!(poll_once(&mut f, &w).is_pending());
    let rx2 = rx.clone();
    let gave_up = go(move || rx2.recv_timeout(Duration::from_millis(20)));
    w.wait_for(1);
    assert_eq!(gave_up.join().unwrap(), Err(RecvTimeoutError::Timeout));
    assert!(poll_once(&mut f, &w).is_pending());
    let receiver = go(move || rx.recv().unwrap());
    w.wait_for(2);
    assert!(matches!(poll_once(&mut f, &w), Poll::Ready(Ok(()))));
    assert_eq!(receiver.join().unwrap(), 5);
}

/// A woken send future dropped unpolled passes the receiver on to the next
/// pending send future, which then sends (no receiver is left waiting
/// while a sender could serve it).
#[test]
fn a_dropped_woken_send_future_passes_the_receiver_on() {
    let (tx, rx) = chan::<u64>(0);
    let (w1, w2) = (
        Arc::new(CountingWaker::default()),
        Arc::new(CountingWaker::default()),
    );
    let mut f1 = tx.send_async(1);
    let mut f2 = tx.send_async(2);
    assert!(poll_once(&mut f1, &w1).is_pending());
    assert!(poll_once(&mut f2, &w2).is_pending());
    let receiver = go(move || rx.recv().unwrap());
    w1.wait_for(1);
    assert_eq!(w2.count(), 0, "one receiver wakes one sender");
    drop(f1);
    w2.wait_for(1);
    assert!(matches!(poll_once(&mut f2, &w2), Poll::Ready(Ok(()))));
    assert_eq!(receiver.join().unwrap(), 2);
}

/// Pending send futures are served in order, and a plain blocked send
/// behind them waits its turn only as long as a receiver is there to take
/// values: a receive that cannot wait (`try_recv`) takes the plain send's
/// value, which needs no poll.
#[test]
fn try_recv_takes_a_blocked_send_past_a_pending_future() {
    let (tx, rx) = chan::<u64>(0);
    let w = Arc::new(CountingWaker::default());
    let mut f = tx.send_async(1);
    assert!(poll_once(&mut f, &w).is_pending());
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    let tx2 = tx.clone();
    let blocked = go(move || tx2.send(2).unwrap());
    let start = Instant::now();
    let got = loop {
        match rx.try_recv() {
            Ok(v) => break v,
            Err(TryRecvError::Empty) => {
                assert!(start.elapsed() < Duration::from_secs(10));
                std::thread::yield_now();
            }
            Err(e) => panic!("{e:?}"),
        }
    };
    assert_eq!(got, 2);
    blocked.join().unwrap();
    assert_eq!(w.count(), 0, "a receive that does not wait wakes no future");
    drop(f);
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
}

/// The select: tokio tasks send with `send_async` raced against a
/// short sleep, retrying on timeout, to a slow receiver. A send that lost
/// the race must not have happened, or the retry sends a duplicate.
#[test]
fn send_async_in_tokio_select_against_a_sleep_sends_exactly_once() {
    for cap in [0usize, 1, 4] {
        common::within_thread(120, move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            let (tx, rx) = chan::<u64>(cap);
            let cancelled = Arc::new(AtomicUsize::new(0));
            let receiver = go(move || {
                let mut got = Vec::new();
                let mut i = 0u64;
                while let Ok(v) = rx.recv() {
                    got.push(v);
                    i += 1;
                    // Slow now and then, so that sends wait and time out.
                    if i % 8 == 0 {
                        goroutine::time::sleep(Duration::from_micros(300 + (i % 5) * 400));
                    }
                }
                got
            });
            let sent: Vec<u64> = rt.block_on({
                let cancelled = cancelled.clone();
                async move {
                    let mut tasks = Vec::new();
                    for t in 0..3u64 {
                        let (tx, cancelled) = (tx.clone(), cancelled.clone());
                        tasks.push(tokio::spawn(async move {
                            let mut sent = Vec::new();
                            for i in 0..400u64 {
                                let v = t * 1_000_000 + i;
                                loop {
                                    tokio::select! {
                                        r = tx.send_async(v) => {
                                            r.unwrap();
                                            sent.push(v);
                                            break;
                                        }
                                        _ = tokio::time::sleep(Duration::from_micros(10)) => {
                                            cancelled.fetch_add(1, Ordering::Relaxed);
                                        }
                                    }
                                }
                            }
                            sent
                        }));
                    }
                    drop(tx);
                    let mut all = Vec::new();
                    for t in tasks {
                        all.extend(t.await.unwrap());
                    }
                    all
                }
            });
            let got = receiver.join().unwrap();
            assert_exactly_once(&format!("cap {cap}"), &sent, &got);
            assert!(
                cancelled.load(Ordering::Relaxed) > 0,
                "cap {cap}: no send timed out: the test tests nothing"
            );
        });
    }
}

/// Send futures polled by a plain executor and dropped at random points
/// (after one poll, after a wake, never polled again) beside blocking
/// receivers and plain senders: every value whose future returned
/// `Ready(Ok)` arrived once, and no other future's value arrived.
#[test]
fn randomly_dropped_send_futures_account_exactly() {
    for cap in [0usize, 2] {
        common::within_thread(120, move || {
            let (tx, rx) = chan::<u64>(cap);
            let receivers: Vec<_> = (0..3)
                .map(|_| {
                    let rx = rx.clone();
                    go(move || {
                        let mut got = Vec::new();
                        while let Ok(v) = rx.recv() {
                            got.push(v);
                        }
                        got
                    })
                })
                .collect();
            drop(rx);
            // Plain senders beside the futures.
            let plain: Vec<_> = (0..2u64)
                .map(|p| {
                    let tx = tx.clone();
                    go(move || {
                        let sent: Vec<u64> = (0..500).map(|i| 900_000_000 + p * 1000 + i).collect();
                        for v in &sent {
                            tx.send(*v).unwrap();
                        }
                        sent
                    })
                })
                .collect();
            let threads: Vec<_> = (0..2u64)
                .map(|t| {
                    let tx = tx.clone();
                    std::thread::spawn(move || {
                        let mut sent = Vec::new();
                        let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ t;
                        for i in 0..3000u64 {
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                            let v = t * 1_000_000 + i;
                            let w = Arc::new(CountingWaker::default());
                            let mut f = tx.send_async(v);
                            let mut polls = x % 4;
                            loop {
                                if let Poll::Ready(r) = poll_once(&mut f, &w) {
                                    r.unwrap();
                                    sent.push(v);
                                    break;
                                }
                                if polls == 0 {
                                    break; // dropped pending
                                }
                                polls -= 1;
                                // Wait a little for a wake, then poll again.
                                let start = Instant::now();
                                while w.count() == 0 && start.elapsed() < Duration::from_micros(50)
                                {
                                    std::hint::spin_loop();
                                }
                            }
                        }
                        sent
                    })
                })
                .collect();
            let mut sent = Vec::new();
            for t in threads {
                sent.extend(t.join().unwrap());
            }
            for p in plain {
                sent.extend(p.join().unwrap());
            }
            drop(tx);
            let mut got = Vec::new();
            for r in receivers {
                got.extend(r.join().unwrap());
            }
            assert_exactly_once(&format!("cap {cap}"), &sent, &got);
        });
    }
}

/// `recv_async` raced against a sleep in `tokio::select!`, on buffered and
/// unbuffered channels: a receive that lost the race lost no value, and
/// values from one sender keep their order.
#[test]
fn recv_async_in_tokio_select_loses_no_value() {
    for cap in [0usize, 1, 8] {
        common::within_thread(120, move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            let (tx, rx) = chan::<u64>(cap);
            let sender = go(move || {
                let sent: Vec<u64> = (0..3000).collect();
                for (k, v) in sent.iter().enumerate() {
                    tx.send(*v).unwrap();
                    if k % 16 == 0 {
                        goroutine::time::sleep(Duration::from_micros(200));
                    }
                }
                sent
            });
            let got = rt.block_on(async move {
                let mut got = Vec::new();
                loop {
                    tokio::select! {
                        r = rx.recv_async() => match r {
                            Ok(v) => got.push(v),
                            Err(RecvError) => break,
                        },
                        _ = tokio::time::sleep(Duration::from_micros(10)) => {}
                    }
                }
                got
            });
            let sent = sender.join().unwrap();
            assert_exactly_once(&format!("cap {cap}"), &sent, &got);
        });
    }
}

/// `send_timeout`: a timeout means the value was not sent, and it comes
/// back in the error; retried, each value arrives exactly once.
#[test]
fn send_timeout_sends_exactly_once_and_gives_the_value_back() {
    for cap in [0usize, 2] {
        common::within_thread(120, move || {
            let (tx, rx) = chan::<u64>(cap);
            let receiver = go(move || {
                let mut got = Vec::new();
                let mut i = 0u64;
                while let Ok(v) = rx.recv() {
                    got.push(v);
                    i += 1;
                    if i % 8 == 0 {
                        goroutine::time::sleep(Duration::from_micros(200));
                    }
                }
                got
            });
            let timeouts = Arc::new(AtomicUsize::new(0));
            let senders: Vec<_> = (0..3u64)
                .map(|s| {
                    let (tx, timeouts) = (tx.clone(), timeouts.clone());
                    go(move || {
                        let mut sent = Vec::new();
                        for i in 0..400u64 {
                            let mut v = s * 1_000_000 + i;
                            loop {
                                match tx.send_timeout(v, Duration::from_micros(20)) {
                                    Ok(()) => break,
                                    Err(SendTimeoutError::Timeout(back)) => {
                                        assert_eq!(back, s * 1_000_000 + i);
                                        timeouts.fetch_add(1, Ordering::Relaxed);
                                        v = back;
                                    }
                                    Err(e) => panic!("{e:?}"),
                                }
                            }
                            sent.push(s * 1_000_000 + i);
                        }
                        sent
                    })
                })
                .collect();
            let mut sent = Vec::new();
            for s in senders {
                sent.extend(s.join().unwrap());
            }
            drop(tx);
            let got = receiver.join().unwrap();
            assert_exactly_once(&format!("cap {cap}"), &sent, &got);
            assert!(
                timeouts.load(Ordering::Relaxed) > 0,
                "cap {cap}: no timeout"
            );
        });
    }
}

/// `recv_timeout`: a timeout took no value; receivers that time out at
/// random together receive every value exactly once.
#[test]
fn recv_timeout_loses_no_value() {
    for cap in [0usize, 2] {
        common::within_thread(120, move || {
            let (tx, rx) = chan::<u64>(cap);
            let timeouts = Arc::new(AtomicUsize::new(0));
            let receivers: Vec<_> = (0..4)
                .map(|_| {
                    let (rx, timeouts) = (rx.clone(), timeouts.clone());
                    go(move || {
                        let mut got = Vec::new();
                        loop {
                            match rx.recv_timeout(Duration::from_micros(20)) {
                                Ok(v) => got.push(v),
                                Err(RecvTimeoutError::Timeout) => {
                                    timeouts.fetch_add(1, Ordering::Relaxed);
                                }
                                Err(RecvTimeoutError::Closed) => return got,
                            }
                        }
                    })
                })
                .collect();
            drop(rx);
            let sent: Vec<u64> = (0..4000).collect();
            for (k, v) in sent.iter().enumerate() {
                tx.send(*v).unwrap();
                if k % 32 == 0 {
                    goroutine::time::sleep(Duration::from_micros(100));
                }
            }
            drop(tx);
            let mut got = Vec::new();
            for r in receivers {
                got.extend(r.join().unwrap());
            }
            assert_exactly_once(&format!("cap {cap}"), &sent, &got);
            assert!(
                timeouts.load(Ordering::Relaxed) > 0,
                "cap {cap}: no timeout"
            );
        });
    }
}

/// `select!` with a send arm, a receive arm and a timeout: only the arm
/// that fired happened. Every value a select reports sent arrived once; no
/// other did; every value a select reports received was sent once.
#[test]
fn select_arms_only_the_chosen_one_happens() {
    for cap in [0usize, 1] {
        common::within_thread(120, move || {
            let (out_tx, out_rx) = chan::<u64>(cap);
            let (in_tx, in_rx) = chan::<u64>(cap);
            // Drains `out` slowly; feeds `in` now and then.
            let drain = go(move || {
                let mut got = Vec::new();
                let mut i = 0u64;
                while let Ok(v) = out_rx.recv() {
                    got.push(v);
                    i += 1;
                    if i % 8 == 0 {
                        goroutine::time::sleep(Duration::from_micros(150));
                    }
                }
                got
            });
            // The selectors may all be done (and `in` closed) before the
            // feeder is: a refused send hands its value back, unsent, and
            // ends the feeding. Only values whose send succeeded count.
            let feed = go(move || {
                let mut sent = Vec::new();
                for k in 0..1500u64 {
                    let v = 500_000_000 + k;
                    match in_tx.send(v) {
                        Ok(()) => sent.push(v),
                        Err(e) => {
                            assert_eq!(e.into_inner(), v, "a refused send gives its value back");
                            break;
                        }
                    }
                    if k % 8 == 0 {
                        goroutine::time::sleep(Duration::from_micros(100));
                    }
                }
                sent
            });
            let selectors: Vec<_> = (0..3u64)
                .map(|s| {
                    let (out_tx, in_rx) = (out_tx.clone(), in_rx.clone());
                    go(move || {
                        let (mut sent, mut received, mut timeouts) = (Vec::new(), Vec::new(), 0);
                        let mut next = s * 1_000_000;
                        let mut in_open = true;
                        while sent.len() < 500 {
                            let v = next;
                            let in_arm = if in_open { Some(&in_rx) } else { None };
                            select! {
                                send(out_tx, v) -> r => {
                                    r.unwrap();
                                    sent.push(v);
                                    next += 1;
                                },
                                recv(in_arm) -> r => match r {
                                    Ok(x) => received.push(x),
                                    Err(RecvError) => in_open = false,
                                },
                                default(Duration::from_micros(20)) => timeouts += 1,
                            }
                        }
                        (sent, received, timeouts)
                    })
                })
                .collect();
            drop(out_tx);
            drop(in_rx);
            let (mut sent, mut received, mut timeouts) = (Vec::new(), Vec::new(), 0);
            for s in selectors {
                let (a, b, t) = s.join().unwrap();
                sent.extend(a);
                received.extend(b);
                timeouts += t;
            }
            let fed = feed.join().unwrap();
            let got = drain.join().unwrap();
            assert_exactly_once(&format!("cap {cap}: sends"), &sent, &got);
            // The feeder may still have blocked on `in` after the selectors
            // left: it finishes once they are gone (in_rx dropped), its
            // last send refused.
            let mut fed_received = received.clone();
            fed_received.sort_unstable();
            fed_received.dedup();
            assert_eq!(
                fed_received.len(),
                received.len(),
                "cap {cap}: a value received twice"
            );
            for v in &received {
                assert!(fed.contains(v), "cap {cap}: received {v}, never sent");
            }
            assert!(timeouts > 0, "cap {cap}: no timeout fired");
        });
    }
}

/// `block_on` of a race between a send future and a timer (our own
/// `time::after`, awaited with `recv_async`), from goroutines: the future
/// that loses is dropped, and a dropped send sent nothing.
#[test]
fn block_on_a_race_of_send_async_and_a_timer_sends_exactly_once() {
    for cap in [0usize, 1] {
        common::within_thread(120, move || {
            let (tx, rx) = chan::<u64>(cap);
            let receiver = go(move || {
                let mut got = Vec::new();
                let mut i = 0u64;
                while let Ok(v) = rx.recv() {
                    got.push(v);
                    i += 1;
                    if i % 8 == 0 {
                        goroutine::time::sleep(Duration::from_micros(300));
                    }
                }
                got
            });
            let lost = Arc::new(AtomicUsize::new(0));
            let senders: Vec<_> = (0..3u64)
                .map(|s| {
                    let (tx, lost) = (tx.clone(), lost.clone());
                    go(move || {
                        let mut sent = Vec::new();
                        for i in 0..300u64 {
                            let v = s * 1_000_000 + i;
                            loop {
                                let timer = goroutine::time::after(Duration::from_micros(20));
                                let send = tx.send_async(v);
                                let tick = timer.recv_async();
                                // The timer is polled first: once it has
                                // fired, the send future is dropped without
                                // another poll, whatever happened to it
                                // since its last one.
                                let won = block_on(async {
                                    futures::pin_mut!(send, tick);
                                    match futures::future::select(tick, send).await {
                                        futures::future::Either::Right((r, _)) => {
                                            r.unwrap();
                                            true
                                        }
                                        // The send future is dropped here.
                                        futures::future::Either::Left(_) => false,
                                    }
                                });
                                if won {
                                    sent.push(v);
                                    break;
                                }
                                lost.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        sent
                    })
                })
                .collect();
            let mut sent = Vec::new();
            for s in senders {
                sent.extend(s.join().unwrap());
            }
            drop(tx);
            let got = receiver.join().unwrap();
            assert_exactly_once(&format!("cap {cap}"), &sent, &got);
            assert!(lost.load(Ordering::Relaxed) > 0, "cap {cap}: no race lost");
        });
    }
}

/// A value given back by a dropped receive future goes to the front of the
/// buffer when there is room, so values from one sender keep their order.
#[test]
fn a_given_back_value_keeps_its_place() {
    let (tx, rx) = chan::<u64>(4);
    let w = Arc::new(CountingWaker::default());
    let mut f = rx.recv_async();
    assert!(poll_once(&mut f, &w).is_pending());
    tx.send(1).unwrap(); // handed to the future
    tx.send(2).unwrap(); // buffered
    tx.send(3).unwrap();
    drop(f);
    drop(tx);
    assert_eq!(rx.iter().collect::<Vec<_>>(), vec![1, 2, 3]);
}

/// A close fails every send future not yet `Ready`, queued or already
/// woken, with its value back.
#[test]
fn pending_and_woken_send_futures_fail_on_close_with_their_value() {
    for cap in [0usize, 1] {
        let (tx, rx) = chan::<u64>(cap);
        if cap == 1 {
            tx.send(0).unwrap();
        }
        let (w1, w2) = (
            Arc::new(CountingWaker::default()),
            Arc::new(CountingWaker::default()),
        );
        let mut f1 = tx.send_async(1);
        let mut f2 = tx.send_async(2);
        assert!(poll_once(&mut f1, &w1).is_pending());
        assert!(poll_once(&mut f2, &w2).is_pending());
        // Wake f1 (a waiting receiver, or room made), then close.
        let rx2 = rx.clone();
        let receiver = go(move || rx2.recv_timeout(Duration::from_millis(30)));
        w1.wait_for(1);
        let r = receiver.join().unwrap();
        assert_eq!(r.is_ok(), cap == 1, "cap {cap}: {r:?}");
        tx.close().unwrap();
        let seen: Vec<u64> = [&mut f1, &mut f2]
            .into_iter()
            .map(|f| match poll_once(f, &w2) {
                Poll::Ready(Err(goroutine::SendError(v))) => v,
                other => panic!("cap {cap}: {other:?}"),
            })
            .collect();
        assert_eq!(seen, vec![1, 2], "cap {cap}");
        assert_eq!(rx.try_recv(), Err(TryRecvError::Closed), "cap {cap}");
    }
}

/// A `JoinHandle` awaited by reference and given up (the other branch of
/// a select won) loses nothing: the handle joins afterwards, whether the
/// goroutine ended before or after the give-up.
#[test]
fn a_join_handle_awaited_and_given_up_still_joins() {
    for end_first in [false, true] {
        let (tx, rx) = chan::<()>(0);
        let mut h = go(move || {
            rx.recv().unwrap();
            42
        });
        let w = Arc::new(CountingWaker::default());
        assert!(poll_once(&mut h, &w).is_pending());
        if end_first {
            tx.send(()).unwrap();
            w.wait_for(1);
            assert_eq!(h.join().unwrap(), 42);
        } else {
            let sender = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(10));
                tx.send(()).unwrap();
            });
            assert_eq!(h.join().unwrap(), 42);
            sender.join().unwrap();
        }
    }
    // The same through tokio::select! and a sleep.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (tx, rx) = chan::<()>(0);
    let mut h = go(move || {
        rx.recv().unwrap();
        7
    });
    rt.block_on(async {
        tokio::select! {
            _ = &mut h => panic!("the goroutine cannot have ended"),
            _ = tokio::time::sleep(Duration::from_millis(5)) => {}
        }
    });
    tx.send(()).unwrap();
    assert_eq!(rt.block_on(async { (&mut h).await }).unwrap(), 7);
}
