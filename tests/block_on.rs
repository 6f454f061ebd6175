//! The bridge to async code: `block_on`, `JoinHandle` as a future,
//! `recv_async` / `send_async`, from goroutines, plain threads, tokio
//! (current-thread and multi-thread) and `futures`' thread executor.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use goroutine::{block_on, chan, go, RecvError};

/// A future woken from a plain thread after `delay`, resolving to `v`.
fn woken_later(v: u64, delay: Duration) -> impl Future<Output = u64> {
    let (tx, rx) = futures::channel::oneshot::channel();
    std::thread::spawn(move || {
        std::thread::sleep(delay);
        let _ = tx.send(v);
    });
    async move { rx.await.unwrap() }
}

#[test]
fn block_on_a_ready_future_and_outside_the_runtime() {
    assert_eq!(block_on(async { 5 }), 5);
    // On a plain thread: blocks the thread until another thread wakes it.
    assert_eq!(block_on(woken_later(9, Duration::from_millis(5))), 9);
    // In a goroutine.
    let h = go(|| block_on(woken_later(11, Duration::from_millis(5))));
    assert_eq!(h.join().unwrap(), 11);
}

isolated_test! {
    /// With one P, a goroutine in `block_on` parks: a 1 ms ticker goroutine
    /// keeps ticking while the future waits 300 ms.
    fn block_on_does_not_stall_the_processor() ["GOMAXPROCS" = "1"] {
        goroutine::run(|| {
            let stop = Arc::new(AtomicBool::new(false));
            let ticks = Arc::new(AtomicUsize::new(0));
            let ticker = {
                let (stop, ticks) = (stop.clone(), ticks.clone());
                go(move || {
                    while !stop.load(Ordering::Relaxed) {
                        goroutine::time::sleep(Duration::from_millis(1));
                        ticks.fetch_add(1, Ordering::Relaxed);
                    }
                })
            };
            assert_eq!(block_on(woken_later(1, Duration::from_millis(300))), 1);
            stop.store(true, Ordering::Relaxed);
            ticker.join().unwrap();
            let n = ticks.load(Ordering::Relaxed);
            // 300 ticks if nothing else ran; a loaded 2-core box may lose many.
            assert!(n >= 20, "the ticker ran only {n} times in 300 ms");
        });
    }
}

#[test]
fn two_thousand_goroutines_woken_from_plain_threads() {
    const N: u64 = 2000;
    // A few plain threads wake everyone: each future is a oneshot whose
    // sender a waker thread fires.
    let mut senders = Vec::new();
    let mut handles = Vec::new();
    for i in 0..N {
        let (tx, rx) = futures::channel::oneshot::channel::<u64>();
        senders.push((i, tx));
        handles.push(go(move || block_on(rx).unwrap()));
    }
    let mut parts: Vec<Vec<_>> = (0..4).map(|_| Vec::new()).collect();
    for (k, s) in senders.into_iter().enumerate() {
        parts[k % 4].push(s);
    }
    let threads: Vec<_> = parts
        .into_iter()
        .map(|part| {
            std::thread::spawn(move || {
                for (i, tx) in part {
                    tx.send(i * 3).unwrap();
                }
            })
        })
        .collect();
    let sum: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(sum, 3 * N * (N - 1) / 2);
}

/// A waker that counts its wakes, and a future that hands its waker out so
/// a test can wake it at chosen moments.
struct Handout {
    slot: Arc<std::sync::Mutex<Option<Waker>>>,
    ready: Arc<AtomicBool>,
}

impl Future for Handout {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.ready.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        *self.slot.lock().unwrap() = Some(cx.waker().clone());
        // Wake before returning Pending (before the park): must not be lost.
        cx.waker().wake_by_ref();
        self.ready.store(true, Ordering::Release);
        Poll::Pending
    }
}

#[test]
fn a_wake_before_the_park_is_not_lost_and_double_wakes_are_harmless() {
    let slot = Arc::new(std::sync::Mutex::new(None::<Waker>));
    let h = {
        let slot = slot.clone();
        go(move || {
            for _ in 0..1000 {
                block_on(Handout {
                    slot: slot.clone(),
                    ready: Arc::new(AtomicBool::new(false)),
                });
            }
            7
        })
    };
    // Stale wakers woken again, from here, while the goroutine runs more
    // block_on calls: harmless.
    let stop = Instant::now() + Duration::from_secs(60);
    while !h.is_finished() && Instant::now() < stop {
        if let Some(w) = slot.lock().unwrap().clone() {
            w.wake_by_ref();
            w.wake();
        }
        std::thread::yield_now();
    }
    assert_eq!(h.join().unwrap(), 7);
}

#[test]
fn join_handle_is_a_future() {
    let h = go(|| {
        goroutine::time::sleep(Duration::from_millis(5));
        40 + 2
    });
    assert_eq!(futures::executor::block_on(h).unwrap(), 42);
    // A panic comes back as a JoinError.
    let h = go(|| -> u32 { panic!("boom") });
    let e = futures::executor::block_on(h).unwrap_err();
    assert!(e.is_panic());
    assert_eq!(e.message(), "boom");
    // Polled once, then joined: the poll's registration is taken back.
    let (tx, rx) = chan::<()>(0);
    let mut h = go(move || {
        rx.recv().unwrap();
        5
    });
    let waker = Waker::from(Arc::new(CountingWaker::default()));
    assert!(Pin::new(&mut h)
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    tx.send(()).unwrap();
    assert_eq!(h.join().unwrap(), 5);
}

#[derive(Default)]
struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn poll_once<F: Future + Unpin>(f: &mut F, w: &Arc<CountingWaker>) -> Poll<F::Output> {
    let waker = Waker::from(w.clone());
    Pin::new(f).poll(&mut Context::from_waker(&waker))
}

#[test]
fn plain_thread_executor_awaits_a_goroutine_and_drains_a_channel() {
    let (tx, rx) = chan::<u64>(4);
    let producer = go(move || {
        for i in 1..=1000 {
            tx.send(i).unwrap();
        }
        "done"
    });
    let sum = futures::executor::block_on(async {
        let mut sum = 0;
        while let Ok(v) = rx.recv_async().await {
            sum += v;
        }
        assert_eq!(producer.await.unwrap(), "done");
        sum
    });
    assert_eq!(sum, 500_500);
}

#[test]
fn tokio_current_thread_and_multi_thread() {
    let current = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let multi = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    for rt in [&current, &multi] {
        let (tx, rx) = chan::<u64>(0);
        let (back_tx, back_rx) = chan::<u64>(0);
        // A goroutine echoes doubled values; tokio tasks send and receive
        // through the async methods.
        let echo = go(move || {
            let mut n = 0;
            for v in rx.iter() {
                back_tx.send(v * 2).unwrap();
                n += 1;
            }
            n
        });
        let total = rt.block_on(async move {
            let sender = tokio::spawn(async move {
                for i in 0..500u64 {
                    tx.send_async(i).await.unwrap();
                }
            });
            let mut total = 0;
            for _ in 0..500 {
                total += back_rx.recv_async().await.unwrap();
            }
            sender.await.unwrap();
            total
        });
        assert_eq!(total, 2 * 499 * 500 / 2);
        assert_eq!(rt.block_on(echo).unwrap(), 500);
    }
}

#[test]
fn many_tokio_tasks_against_many_goroutines() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let (tx, rx) = chan::<u64>(0);
    let sum = Arc::new(AtomicU64::new(0));
    let goroutines: Vec<_> = (0..50)
        .map(|_| {
            let (rx, sum) = (rx.clone(), sum.clone());
            go(move || {
                for v in rx.iter() {
                    sum.fetch_add(v, Ordering::Relaxed);
                }
            })
        })
        .collect();
    drop(rx);
    rt.block_on(async move {
        let tasks: Vec<_> = (0..100u64)
            .map(|t| {
                let tx = tx.clone();
                tokio::spawn(async move {
                    for i in 0..100 {
                        tx.send_async(t * 100 + i).await.unwrap();
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
    for g in goroutines {
        g.join().unwrap();
    }
    assert_eq!(sum.load(Ordering::Relaxed), 9999 * 10000 / 2);
}

#[test]
fn a_dropped_pending_recv_leaves_no_waiter() {
    let (tx, rx) = chan::<u32>(0);
    let w = Arc::new(CountingWaker::default());
    let mut f = rx.recv_async();
    assert!(poll_once(&mut f, &w).is_pending());
    // A receiver is waiting: an unbuffered try_send would succeed now; after
    // the drop it must find nobody.
    drop(f);
    assert!(matches!(
        tx.try_send(1),
        Err(goroutine::TrySendError::Full(1))
    ));
    assert_eq!(w.0.load(Ordering::SeqCst), 0);
}

#[test]
fn a_dropped_pending_send_leaves_no_waiter_and_sends_nothing() {
    let (tx, rx) = chan::<u32>(0);
    let w = Arc::new(CountingWaker::default());
    let mut f = tx.send_async(1);
    assert!(poll_once(&mut f, &w).is_pending());
    drop(f);
    assert_eq!(rx.try_recv(), Err(goroutine::TryRecvError::Empty));
}

#[test]
fn a_recv_future_dropped_after_the_handoff_gives_the_value_back() {
    // Unbuffered: the handoff makes the future's value; dropped unpolled,
    // the value must reach the next receiver.
    let (tx, rx) = chan::<u32>(0);
    let w = Arc::new(CountingWaker::default());
    let mut f = rx.recv_async();
    assert!(poll_once(&mut f, &w).is_pending());
    tx.send(77).unwrap(); // handed to the future's record
    assert_eq!(w.0.load(Ordering::SeqCst), 1);
    let rx2 = rx.clone();
    let h = go(move || rx2.recv().unwrap());
    drop(f); // the value goes back: to `h` or as a detached send
    assert_eq!(h.join().unwrap(), 77);

    // Buffered, the buffer refilled meanwhile: the value waits as a
    // detached sender behind the buffer.
    let (tx, rx) = chan::<u32>(1);
    let mut f = rx.recv_async();
    assert!(poll_once(&mut f, &w).is_pending());
    tx.send(1).unwrap();
    tx.send(2).unwrap();
    drop(f);
    assert_eq!(rx.recv(), Ok(2));
    assert_eq!(rx.recv(), Ok(1));
    drop(tx);
    assert_eq!(rx.recv(), Err(RecvError));
}

// A value given back by a dropped receive future waits as a detached
// sender; when every handle is then gone, in either order, it is dropped
// exactly once, as are the buffered values (the last handle's work is
// skipped only when nothing is queued).
#[test]
fn a_given_back_value_is_dropped_once_when_every_handle_goes() {
    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    for sender_first in [true, false] {
        let dropped = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = chan::<Counted>(1);
        let w = Arc::new(CountingWaker::default());
        let mut f = rx.recv_async();
        assert!(poll_once(&mut f, &w).is_pending());
        tx.send(Counted(dropped.clone())).unwrap(); // handed to the future
        tx.send(Counted(dropped.clone())).unwrap(); // buffered
        drop(f); // the buffer is full: the value waits as a detached send
        assert_eq!(dropped.load(Ordering::SeqCst), 0);
        if sender_first {
            drop(tx);
            drop(rx);
        } else {
            drop(rx);
            drop(tx);
        }
        assert_eq!(
            dropped.load(Ordering::SeqCst),
            2,
            "sender first: {sender_first}"
        );
    }
}

#[test]
fn dropped_futures_under_a_race_lose_no_value() {
    // Receivers that give up at random against senders: every value is
    // received exactly once.
    let (tx, rx) = chan::<u64>(0);
    let got = Arc::new(AtomicU64::new(0));
    let count = Arc::new(AtomicU64::new(0));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let senders: Vec<_> = (0..4u64)
        .map(|s| {
            let tx = tx.clone();
            go(move || {
                for i in 0..250 {
                    tx.send(s * 1000 + i).unwrap();
                }
            })
        })
        .collect();
    drop(tx);
    rt.block_on({
        let (got, count) = (got.clone(), count.clone());
        async move {
            let mut tasks = Vec::new();
            for _ in 0..8 {
                let (rx, got, count) = (rx.clone(), got.clone(), count.clone());
                tasks.push(tokio::spawn(async move {
                    loop {
                        tokio::select! {
                            r = rx.recv_async() => match r {
                                Ok(v) => {
                                    got.fetch_add(v, Ordering::Relaxed);
                                    count.fetch_add(1, Ordering::Relaxed);
                                }
                                Err(RecvError) => break,
                            },
                            _ = tokio::time::sleep(Duration::from_micros(50)) => {}
                        }
                    }
                }));
            }
            for t in tasks {
                t.await.unwrap();
            }
        }
    });
    for s in senders {
        s.join().unwrap();
    }
    let expect: u64 = (0..4u64)
        .flat_map(|s| (0..250).map(move |i| s * 1000 + i))
        .sum();
    assert_eq!(count.load(Ordering::Relaxed), 1000);
    assert_eq!(got.load(Ordering::Relaxed), expect);
}

#[test]
fn futures_needing_a_tokio_reactor_run_on_a_runtime_thread() {
    // The recipe of `block_on`'s documentation.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let handle = rt.handle().clone();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let rt_thread = std::thread::spawn(move || rt.block_on(async { stop_rx.await.ok() }));
    let h = go(move || {
        block_on(handle.spawn(async {
            tokio::time::sleep(Duration::from_millis(10)).await;
            "done"
        }))
        .unwrap()
    });
    assert_eq!(h.join().unwrap(), "done");
    stop_tx.send(()).unwrap();
    rt_thread.join().unwrap();
}

#[test]
fn select_with_async_waiters_on_the_same_channel() {
    // A goroutine selecting on the channel and async receivers share it:
    // every value goes to exactly one of them.
    let (tx, rx) = chan::<u64>(0);
    let (done_tx, done_rx) = chan::<()>(0);
    let sel_sum = {
        let rx = rx.clone();
        go(move || {
            let mut sum = 0;
            loop {
                goroutine::select! {
                    recv(rx) -> v => match v {
                        Ok(v) => sum += v,
                        Err(_) => return sum,
                    },
                    recv(done_rx) -> _ => return sum,
                }
            }
        })
    };
    let async_sum = std::thread::spawn(move || {
        futures::executor::block_on(async move {
            let mut sum = 0;
            while let Ok(v) = rx.recv_async().await {
                sum += v;
            }
            sum
        })
    });
    for i in 1..=2000u64 {
        tx.send(i).unwrap();
    }
    drop(tx);
    let a = async_sum.join().unwrap();
    drop(done_tx);
    let s = sel_sum.join().unwrap();
    assert_eq!(a + s, 2000 * 2001 / 2);
}

#[test]
fn value_handed_to_a_dropped_future_survives_the_close() {
    // A receive future is handed a value, the last sender then closes the
    // channel, and only then is the future dropped unpolled: the value was
    // sent, so it must still reach a receiver, before the close is seen.
    for cap in [0usize, 1] {
        let (tx, rx) = chan::<u64>(cap);
        let mut waiting = Box::pin(rx.recv_async());
        let mut cx = Context::from_waker(Waker::noop());
        assert!(waiting.as_mut().poll(&mut cx).is_pending(), "cap {cap}");
        // The goroutine's send goes straight to the queued future; its
        // Sender, the last one, closes the channel when it ends.
        go(move || tx.send(7).unwrap()).join().unwrap();
        assert!(rx.is_closed(), "cap {cap}");
        drop(waiting);
        assert_eq!(rx.recv(), Ok(7), "cap {cap}: the value was lost");
        assert_eq!(rx.recv(), Err(RecvError), "cap {cap}");
    }
}
