//! synctest bubbles: virtual time, durable blocking, `wait`, deadlocks.
//! Ports of Go's `internal/synctest` and `testing/synctest` tests carry
//! Go's names (`Go's TestX`).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use goroutine::{chan, go, select, synctest, time};

mod common;

/// A sanitizer build: it records no goroutine contexts, so dumps carry no
/// frames (README, "Sanitizers").
const SANITIZED: bool = cfg!(any(
    goroutine_sanitize = "address",
    goroutine_sanitize = "thread"
));

/// A bound on real time that virtual time must stay within: `d` on a
/// release build, longer where everything is slower (a debug build, a
/// sanitizer, emulation: `GOROUTINE_TEST_TIME_SCALE`). What it checks is
/// that nothing waits for real time, which would take the virtual
/// durations (an hour, a deadlock that never ends), not this.
fn real_bound(d: Duration) -> Duration {
    let mut d = common::scaled(d);
    if cfg!(debug_assertions) {
        d *= 5;
    }
    if SANITIZED {
        d *= 10;
    }
    d
}

/// 2000-01-01 00:00:00 UTC.
fn y2k() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(946_684_800)
}

fn since_y2k() -> Duration {
    time::now().duration_since(y2k()).unwrap()
}

fn panic_text(e: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = e.downcast_ref::<String>() {
        s.clone()
    } else if let Some(s) = e.downcast_ref::<&str>() {
        s.to_string()
    } else {
        String::new()
    }
}

/// Go's TestNow: the clock starts at 2000-01-01 UTC and moves by exactly
/// what the goroutines sleep.
#[test]
fn test_now() {
    synctest::test(|| {
        assert_eq!(time::now(), y2k());
        time::sleep(Duration::from_secs(1));
        assert_eq!(since_y2k(), Duration::from_secs(1));
        let h = go(|| {
            time::sleep(Duration::from_secs(1));
            since_y2k()
        });
        assert_eq!(h.join().unwrap(), Duration::from_secs(2));
    });
}

/// Go's TestRunEmpty: an empty bubble returns.
#[test]
fn test_run_empty() {
    synctest::test(|| {});
    assert_eq!(synctest::test(|| 7), 7);
}

/// Go's TestSimpleWait: `wait` with no other goroutine returns at once.
#[test]
fn test_simple_wait() {
    synctest::test(|| {
        synctest::wait();
        assert_eq!(time::now(), y2k(), "wait does not move the clock");
    });
}

/// Go's TestGoroutineWait: `wait` returns once the spawned goroutine is
/// durably blocked, after it did what it could.
#[test]
fn test_goroutine_wait() {
    synctest::test(|| {
        let (tx, rx) = chan::<i32>(0);
        let done = Arc::new(AtomicUsize::new(0));
        let d = done.clone();
        go(move || {
            d.store(1, Ordering::SeqCst);
            rx.recv().unwrap();
            d.store(2, Ordering::SeqCst);
        });
        synctest::wait();
        assert_eq!(done.load(Ordering::SeqCst), 1);
        tx.send(0).unwrap();
        synctest::wait();
        assert_eq!(done.load(Ordering::SeqCst), 2);
    });
}

/// Go's TestWait: `wait` sees each of many goroutines blocked, in turn.
#[test]
fn test_wait() {
    synctest::test(|| {
        let (tx, rx) = chan::<usize>(0);
        let seen = Arc::new(AtomicUsize::new(0));
        for _ in 0..8 {
            let rx = rx.clone();
            let seen = seen.clone();
            go(move || {
                while let Ok(v) = rx.recv() {
                    seen.fetch_add(v, Ordering::SeqCst);
                }
            });
        }
        for i in 1..=20 {
            tx.send(i).unwrap();
            synctest::wait();
            assert_eq!(seen.load(Ordering::SeqCst), i * (i + 1) / 2);
        }
        tx.close().unwrap();
    });
}

/// Go's TestTimerReadBeforeDeadline: a timer's channel read before it
/// fires blocks until the clock reaches it, which then reads its time.
#[test]
fn test_timer_read_before_deadline() {
    synctest::test(|| {
        let start = time::instant();
        let t = time::Timer::new(Duration::from_secs(5));
        let at = t.c().recv().unwrap();
        assert_eq!(at - start, Duration::from_secs(5));
        assert_eq!(time::instant() - start, Duration::from_secs(5));
    });
}

/// Go's TestTimerReadAfterDeadline: a timer that fired during a sleep
/// holds its value, with its own time.
#[test]
fn test_timer_read_after_deadline() {
    synctest::test(|| {
        let start = time::instant();
        let t = time::Timer::new(Duration::from_secs(1));
        time::sleep(Duration::from_secs(3));
        assert_eq!(t.c().recv().unwrap() - start, Duration::from_secs(1));
        assert_eq!(since_y2k(), Duration::from_secs(3));
    });
}

/// Go's TestTimerReset: a reset moves the firing on the virtual clock.
#[test]
fn test_timer_reset() {
    synctest::test(|| {
        let start = time::instant();
        let t = time::Timer::new(Duration::from_secs(1));
        assert!(t.reset(Duration::from_secs(4)));
        assert_eq!(t.c().recv().unwrap() - start, Duration::from_secs(4));
        t.reset(Duration::from_secs(2));
        assert_eq!(t.c().recv().unwrap() - start, Duration::from_secs(6));
        t.reset(Duration::from_secs(3));
        time::sleep(Duration::from_secs(1));
        assert!(t.stop());
        time::sleep(Duration::from_secs(10));
        assert!(t.c().try_recv().is_err());
    });
}

/// Go's TestTimeAfter: `after` and `after_func` on the virtual clock.
#[test]
fn test_time_after() {
    synctest::test(|| {
        let start = time::instant();
        let at = time::after(Duration::from_secs(2)).recv().unwrap();
        assert_eq!(at - start, Duration::from_secs(2));
        let (tx, rx) = chan::<Duration>(1);
        let _t = time::after_func(Duration::from_secs(3), move || {
            tx.try_send(since_y2k()).unwrap();
        });
        assert_eq!(rx.recv().unwrap(), Duration::from_secs(5));
    });
}

/// Go's TestTimerRunsImmediately: a zero timer's channel holds its value
/// as soon as the timer is made, without the bubble blocking: a `select!`
/// with `default` finds it, and the clock has not moved. A reset to zero
/// does the same.
#[test]
fn test_timer_runs_immediately() {
    synctest::test(|| {
        let start = time::instant();
        let t = time::Timer::new(Duration::ZERO);
        select! {
            recv(t.c()) -> at => assert_eq!(at.unwrap(), start),
            default => panic!("a zero timer's channel is not readable at once"),
        }
        assert!(!t.reset(Duration::ZERO), "its value was received");
        assert_eq!(t.c().try_recv(), Ok(start));
        // The blocking form.
        let t = time::Timer::new(Duration::ZERO);
        assert_eq!(t.c().recv().unwrap(), start);
        assert_eq!(time::instant(), start);
        // `after` and a zero timeout.
        assert_eq!(time::after(Duration::ZERO).try_recv(), Ok(start));
        assert_eq!(time::instant(), start);
    });
}

/// Go's TestTimerRanInPast: a timer that fired during a sleep is readable
/// with `default`, and holds the time it fired at.
#[test]
fn test_timer_ran_in_past() {
    synctest::test(|| {
        let want = time::instant() + Duration::from_secs(1);
        let t = time::Timer::new(Duration::from_secs(1));
        time::sleep(Duration::from_secs(2));
        select! {
            recv(t.c()) -> at => assert_eq!(at.unwrap(), want),
            default => panic!("a fired timer's channel is not readable"),
        }
    });
}

/// Go's TestAfterFuncRunsImmediately: a zero `after_func` runs while its
/// creator keeps running (yielding, never blocking), so the bubble never
/// has to block for it.
#[test]
fn test_after_func_runs_immediately() {
    synctest::test(|| {
        let ran = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let r = ran.clone();
        let _t = time::after_func(Duration::ZERO, move || r.store(true, Ordering::SeqCst));
        // Go spins for ever; a bound turns a regression into a failure.
        let mut spins = 0u64;
        while !ran.load(Ordering::SeqCst) {
            goroutine::yield_now();
            spins += 1;
            assert!(spins < 10_000_000, "a zero after_func did not run");
        }
        assert_eq!(since_y2k(), Duration::ZERO);
    });
}

/// Timers due at the same virtual instant all fire then, whichever order
/// their goroutines run in.
#[test]
fn same_instant_sleepers() {
    synctest::test(|| {
        let (tx, rx) = chan::<Duration>(0);
        for d in [3u64, 1, 2, 1, 3] {
            let tx = tx.clone();
            go(move || {
                time::sleep(Duration::from_secs(d));
                tx.send(since_y2k()).unwrap();
            });
        }
        drop(tx);
        let mut got: Vec<u64> = rx.iter().map(|d| d.as_secs()).collect();
        got.sort();
        assert_eq!(got, [1, 1, 2, 3, 3]);
    });
}

/// Timeouts: `recv_timeout`, `send_timeout` and `select!`'s timeout arm
/// wait exactly their virtual duration.
#[test]
fn timeouts_read_the_bubble_clock() {
    synctest::test(|| {
        let (tx, rx) = chan::<i32>(0);
        assert!(rx.recv_timeout(Duration::from_secs(10)).is_err());
        assert_eq!(since_y2k(), Duration::from_secs(10));
        assert!(tx.send_timeout(1, Duration::from_secs(5)).is_err());
        assert_eq!(since_y2k(), Duration::from_secs(15));
        let got = select! {
            recv(rx) -> _ => "message",
            default(Duration::from_secs(60)) => "timeout",
        };
        assert_eq!(got, "timeout");
        assert_eq!(since_y2k(), Duration::from_secs(75));
    });
}

/// Context deadlines expire on the bubble's clock.
#[test]
fn context_deadline_reads_the_bubble_clock() {
    synctest::test(|| {
        let (ctx, _cancel) =
            goroutine::context::Context::background().with_timeout(Duration::from_secs(30));
        ctx.done().recv().ok();
        assert_eq!(since_y2k(), Duration::from_secs(30));
        assert!(ctx.err().is_some());
    });
}

/// A ticker advancing one virtual hour takes well under a second of real
/// time, and every tick comes at its virtual time.
#[test]
fn ticker_one_virtual_hour_in_under_a_second() {
    let real = Instant::now();
    synctest::test(|| {
        let start = time::instant();
        let t = time::Ticker::new(Duration::from_secs(1));
        for i in 1..=3600u64 {
            let at = t.c().recv().unwrap();
            assert_eq!(at - start, Duration::from_secs(i));
        }
        assert_eq!(since_y2k(), Duration::from_secs(3600));
    });
    let took = real.elapsed();
    assert!(
        took < real_bound(Duration::from_secs(1)),
        "one virtual hour took {took:?}"
    );
}

/// Go's TestDeadlockRoot: the root blocked for ever on a bubble channel
/// fails the test at once, with the dump of the bubble's goroutines.
#[test]
fn test_deadlock_root() {
    let real = Instant::now();
    let e = catch_unwind(|| {
        synctest::test(|| {
            let (_tx, rx) = chan::<i32>(0);
            rx.recv().unwrap();
        })
    })
    .unwrap_err();
    let took = real.elapsed();
    let text = panic_text(e);
    assert!(
        text.contains("deadlock: all goroutines in bubble are blocked"),
        "{text}"
    );
    assert!(
        text.contains("[chan receive (durable), synctest bubble "),
        "{text}"
    );
    // Sanitizer builds record no contexts (`g::switch`): no frames there.
    if !SANITIZED {
        assert!(text.contains("test_deadlock_root"), "frames: {text}");
    }
    assert!(
        took < real_bound(Duration::from_secs(1)),
        "deadlock took {took:?}"
    );
}

/// Go's TestDeadlockChild: the root returned, a child is blocked for ever.
#[test]
fn test_deadlock_child() {
    let e = catch_unwind(|| {
        synctest::test(|| {
            go(|| {
                let (_tx, rx) = chan::<i32>(0);
                rx.recv().unwrap();
            });
        })
    })
    .unwrap_err();
    let text = panic_text(e);
    assert!(
        text.contains("deadlock: main bubble goroutine has exited but blocked goroutines remain"),
        "{text}"
    );
    assert!(text.contains("chan receive (durable)"), "{text}");
}

/// With a ticker running and the root reading it, the clock moves until
/// the root has its ticks.
#[test]
fn ticker_read_by_the_root() {
    synctest::test(|| {
        let t = time::Ticker::new(Duration::from_secs(1));
        for _ in 0..3 {
            t.c().recv().unwrap();
        }
        assert_eq!(since_y2k(), Duration::from_secs(3));
    });
}

/// Go's TestDeadlockTicker: once the root has exited, the clock stops: a
/// goroutine waiting for a tick is deadlocked, and the tick never comes.
#[test]
fn test_deadlock_ticker() {
    let ticked = Arc::new(AtomicUsize::new(0));
    let t2 = ticked.clone();
    let e = catch_unwind(AssertUnwindSafe(move || {
        synctest::test(move || {
            go(move || {
                let t = time::Ticker::new(Duration::from_secs(1));
                t.c().recv().unwrap();
                t2.fetch_add(1, Ordering::SeqCst);
            });
        })
    }))
    .unwrap_err();
    assert!(panic_text(e)
        .contains("deadlock: main bubble goroutine has exited but blocked goroutines remain"));
    assert_eq!(ticked.load(Ordering::SeqCst), 0, "ticker unexpectedly ran");
}

/// Go's TestTimerAfterBubbleExit: a bubble's timer pending when its last
/// goroutine ends never runs.
#[test]
fn test_timer_after_bubble_exit() {
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    synctest::test(move || {
        let t = time::after_func(Duration::from_secs(1), move || {
            r.store(1, Ordering::SeqCst);
        });
        std::mem::forget(t);
    });
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(ran.load(Ordering::SeqCst), 0, "timer ran after bubble exit");
}

/// Several goroutines deadlocked together: grouped under the bubble's
/// number, each marked durable by its wait.
#[test]
fn deadlock_dump_lists_every_member() {
    let e = catch_unwind(|| {
        synctest::test(|| {
            let wg = goroutine::sync::WaitGroup::new();
            wg.add(1);
            let (tx, _rx) = chan::<i32>(0);
            go(move || {
                tx.send(1).unwrap();
            });
            wg.wait();
        })
    })
    .unwrap_err();
    let text = panic_text(e);
    assert!(
        text.contains("[sync.WaitGroup.Wait (durable), synctest bubble"),
        "{text}"
    );
    assert!(
        text.contains("[chan send (durable), synctest bubble"),
        "{text}"
    );
}

/// Go's TestMutex: a mutex wait is not durable. The root waits for a
/// mutex held outside the bubble while a member sleeps one virtual second:
/// the clock must not move until the root has the lock (a durable wait
/// would let the sleeper's timer fire first).
#[test]
fn test_mutex() {
    let m = Arc::new(goroutine::sync::Mutex::new(0));
    let (locked_tx, locked_rx) = std::sync::mpsc::channel();
    let m_out = m.clone();
    let holder = std::thread::spawn(move || {
        let g = m_out.lock();
        locked_tx.send(()).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        drop(g);
    });
    locked_rx.recv().unwrap();
    synctest::test(move || {
        let sleeper = go(|| {
            time::sleep(Duration::from_secs(1));
            since_y2k()
        });
        *m.lock() += 1;
        assert_eq!(
            since_y2k(),
            Duration::ZERO,
            "the clock moved past a mutex wait"
        );
        assert_eq!(sleeper.join().unwrap(), Duration::from_secs(1));
    });
    holder.join().unwrap();
}

/// A goroutine in a real `std::thread::sleep` is not blocked in the
/// runtime: the bubble's clock waits for it.
#[test]
fn real_sleep_is_not_durable() {
    synctest::test(|| {
        let (tx, rx) = chan::<Duration>(1);
        go(move || {
            std::thread::sleep(Duration::from_millis(50));
            tx.send(since_y2k()).unwrap();
        });
        // Without the wait for the sleeper, this timeout would fire first.
        let got = rx.recv_timeout(Duration::from_secs(1));
        assert_eq!(got.unwrap(), Duration::ZERO);
    });
}

/// Go's TestCond: a `Condvar` wait is durable.
#[test]
fn test_cond() {
    synctest::test(|| {
        let pair = Arc::new((
            goroutine::sync::Mutex::new(false),
            goroutine::sync::Condvar::new(),
        ));
        let p2 = pair.clone();
        go(move || {
            time::sleep(Duration::from_secs(2));
            *p2.0.lock() = true;
            p2.1.notify_all();
        });
        let mut ready = pair.0.lock();
        while !*ready {
            ready = pair.1.wait(ready);
        }
        assert_eq!(since_y2k(), Duration::from_secs(2));
    });
}

/// Go's TestWaitGroupInBubble: `WaitGroup::wait` is durable.
#[test]
fn test_wait_group_in_bubble() {
    synctest::test(|| {
        let wg = goroutine::sync::WaitGroup::new();
        for i in 1..=3u64 {
            wg.add(1);
            let wg = wg.clone();
            go(move || {
                time::sleep(Duration::from_secs(i));
                wg.done();
            });
        }
        wg.wait();
        assert_eq!(since_y2k(), Duration::from_secs(3));
    });
}

/// Go's TestWaitGroupOutOfBubble: a group whose counter was raised outside
/// the bubble is not bound to it, so a member's `wait` on it is not
/// durable: the bubble neither reports a deadlock nor finishes until the
/// outside `done`.
#[test]
fn test_wait_group_out_of_bubble() {
    let wg = goroutine::sync::WaitGroup::new();
    wg.add(1);
    let (done_tx, done_rx) = chan::<()>(0);
    let wg2 = wg.clone();
    let bubble = std::thread::spawn(move || {
        synctest::test(move || {
            wg2.wait();
            done_tx.close().unwrap();
        })
    });
    std::thread::sleep(Duration::from_millis(20));
    assert!(done_rx.try_recv().is_err());
    assert!(
        !bubble.is_finished(),
        "the bubble ended (or called itself deadlocked) before done"
    );
    wg.done();
    assert!(done_rx.recv().is_err(), "closed by the bubble");
    bubble.join().unwrap();
}

/// Go's TestWaitGroupMovedIntoBubble: a counter raised outside, then added
/// to in a bubble, panics (Go: a fatal error) and leaves the group as it
/// was.
#[test]
fn test_wait_group_moved_into_bubble() {
    let wg = goroutine::sync::WaitGroup::new();
    wg.add(1);
    let wg2 = wg.clone();
    let e = catch_unwind(AssertUnwindSafe(|| synctest::test(move || wg2.add(1)))).unwrap_err();
    assert_eq!(
        panic_text(e),
        "sync: WaitGroup.Add called from inside and outside synctest bubble"
    );
    wg.done();
    wg.wait();
}

/// Go's TestWaitGroupMovedOutOfBubble: a counter raised in a bubble, then
/// added to (or done) outside it, panics; the group is left as it was.
#[test]
fn test_wait_group_moved_out_of_bubble() {
    let wg = goroutine::sync::WaitGroup::new();
    let wg2 = wg.clone();
    synctest::test(move || wg2.add(1));
    type Op = fn(&goroutine::sync::WaitGroup);
    let ops: [Op; 2] = [|wg| wg.add(1), |wg| wg.done()];
    for f in ops {
        let e = catch_unwind(AssertUnwindSafe(|| f(&wg))).unwrap_err();
        assert_eq!(
            panic_text(e),
            "sync: WaitGroup.Add called from inside and outside synctest bubble"
        );
    }
    assert!(format!("{wg:?}").contains("counter: 1"), "{wg:?}");
}

/// Go's TestWaitGroupMovedBetweenBubblesWithNonZeroCount, ...WithZeroCount
/// and ...AfterWait: a group bound to one bubble panics in another until
/// its counter is back at zero; then any bubble (or none) may use it.
#[test]
fn test_wait_group_moved_between_bubbles() {
    let wg = goroutine::sync::WaitGroup::new();
    let w = wg.clone();
    synctest::test(move || {
        w.add(1);
        w.done();
    });
    let w = wg.clone();
    synctest::test(move || {
        w.add(1);
        let w2 = w.clone();
        go(move || w2.done());
        w.wait();
    });
    wg.add(1);
    wg.done();
    let w = wg.clone();
    synctest::test(move || w.add(1));
    let w = wg.clone();
    let e = catch_unwind(AssertUnwindSafe(|| synctest::test(move || w.add(1)))).unwrap_err();
    assert_eq!(
        panic_text(e),
        "sync: WaitGroup.Add called from multiple synctest bubbles"
    );
}

/// Go's rule for `sync.Cond` (its notify list): waking a bubble's
/// goroutine from outside the bubble panics, and wakes nobody; the
/// bubble's own notify then does.
#[test]
fn cond_notify_from_outside_bubble_panics() {
    use std::sync::atomic::AtomicBool;
    let pair = Arc::new((
        goroutine::sync::Mutex::new(false),
        goroutine::sync::Condvar::new(),
    ));
    let linked = Arc::new(AtomicBool::new(false));
    let tried = Arc::new(AtomicBool::new(false));
    let outside = {
        let (pair, linked, tried) = (pair.clone(), linked.clone(), tried.clone());
        std::thread::spawn(move || {
            while !linked.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(1));
            }
            type Notify = fn(&goroutine::sync::Condvar);
            let notifies: [Notify; 2] = [|c| c.notify_one(), |c| c.notify_all()];
            for notify in notifies {
                let e = catch_unwind(AssertUnwindSafe(|| notify(&pair.1))).unwrap_err();
                assert_eq!(
                    panic_text(e),
                    "semaphore wake of synctest goroutine from outside bubble"
                );
            }
            tried.store(true, Ordering::SeqCst);
        })
    };
    let p2 = pair.clone();
    synctest::test(move || {
        let p3 = p2.clone();
        go(move || {
            // The root is parked in its wait (durable), linked.
            synctest::wait();
            linked.store(true, Ordering::SeqCst);
            // A real sleep: not durable, the bubble waits for it.
            while !tried.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(1));
            }
            *p3.0.lock() = true;
            p3.1.notify_one();
        });
        let mut ready = p2.0.lock();
        while !*ready {
            ready = p2.1.wait(ready);
        }
    });
    outside.join().unwrap();
}

/// The async bridge's channel futures check as the blocking operations
/// do: a bubble's channel polled from outside panics; inside, they work.
#[test]
fn channel_futures_moved_out_of_bubble() {
    let (tx, rx) = synctest::test(|| {
        let (tx, rx) = chan::<i32>(1);
        goroutine::block_on(tx.send_async(1)).unwrap();
        assert_eq!(goroutine::block_on(rx.recv_async()), Ok(1));
        (tx, rx)
    });
    let e = catch_unwind(AssertUnwindSafe(|| {
        futures::executor::block_on(rx.recv_async())
    }))
    .unwrap_err();
    assert_eq!(
        panic_text(e),
        "receive on synctest channel from outside bubble"
    );
    let e = catch_unwind(AssertUnwindSafe(|| {
        futures::executor::block_on(tx.send_async(2))
    }))
    .unwrap_err();
    assert_eq!(
        panic_text(e),
        "send on synctest channel from outside bubble"
    );
    // From a goroutine of another bubble.
    let e = catch_unwind(AssertUnwindSafe(move || {
        synctest::test(move || goroutine::block_on(rx.recv_async()))
    }))
    .unwrap_err();
    assert_eq!(
        panic_text(e),
        "receive on synctest channel from outside bubble"
    );
}

/// Go's TestMonotonicClock, adapted: a bubble's wall clock can be moved
/// to a time read outside it (a sleep of the difference), and then moves
/// by exactly what is slept; its `Instant`s differ by virtual durations
/// and never run behind the real ones read before the bubble.
#[test]
fn test_monotonic_clock() {
    let start = time::now();
    let start_instant = time::instant();
    synctest::test(move || {
        assert!(time::instant() >= start_instant);
        time::sleep(start.duration_since(time::now()).unwrap());
        assert_eq!(time::now(), start);
        let i0 = time::instant();
        let wait = Duration::from_secs(1);
        time::sleep(wait);
        assert_eq!(time::now().duration_since(start).unwrap(), wait);
        assert_eq!(time::instant() - i0, wait);
        assert_eq!(time::instant().duration_since(i0), wait);
    });
}

/// Go's TestHappensBefore: what a goroutine did before blocking is seen
/// after `wait`, including the goroutines of zero `after_func`s.
#[test]
fn test_happens_before() {
    synctest::test(|| {
        let v = Arc::new(Mutex::new(Vec::new()));
        for i in 0..10 {
            let v = v.clone();
            go(move || v.lock().unwrap().push(i));
        }
        synctest::wait();
        assert_eq!(v.lock().unwrap().len(), 10);
        // `wait` returns after zero timers' functions ran, and after the
        // goroutines they start are blocked.
        let n = Arc::new(AtomicUsize::new(0));
        let mut timers = Vec::new();
        for _ in 0..2 {
            let n = n.clone();
            timers.push(time::after_func(Duration::ZERO, move || {
                n.fetch_add(1, Ordering::SeqCst);
            }));
        }
        synctest::wait();
        assert_eq!(n.load(Ordering::SeqCst), 2);
        let (tx, rx) = chan::<()>(0);
        for _ in 0..2 {
            let (n, rx) = (n.clone(), rx.clone());
            timers.push(time::after_func(Duration::ZERO, move || {
                n.fetch_add(1, Ordering::SeqCst);
                let _ = rx.recv();
            }));
        }
        synctest::wait();
        assert_eq!(n.load(Ordering::SeqCst), 4);
        drop(tx);
        assert_eq!(since_y2k(), Duration::ZERO);
    });
}

/// Go's TestWaitOutsideBubble (panics) and nested `test` (panics).
#[test]
fn wait_and_test_misuse_panic() {
    let e = catch_unwind(synctest::wait).unwrap_err();
    assert!(panic_text(e).contains("outside a synctest bubble"));
    let e = catch_unwind(|| synctest::test(|| synctest::test(|| {}))).unwrap_err();
    assert!(panic_text(e).contains("within a synctest bubble"));
}

/// The root's panic reaches the caller of `test`.
#[test]
fn root_panic_propagates() {
    let e = catch_unwind(AssertUnwindSafe(|| {
        synctest::test(|| panic!("boom in bubble"))
    }))
    .unwrap_err();
    assert_eq!(panic_text(e), "boom in bubble");
}

/// Goroutines of a bubble inherit it; goroutines outside keep the real
/// clock.
#[test]
fn membership_is_inherited() {
    let outside = go(time::now).join().unwrap();
    assert!(outside > y2k() + Duration::from_secs(365 * 86_400));
    synctest::test(|| {
        let id = synctest::bubble_id().unwrap();
        let h = go(move || go(synctest::bubble_id).join().unwrap());
        assert_eq!(h.join().unwrap(), Some(id));
    });
    assert_eq!(synctest::bubble_id(), None);
}

/// The same test gives the same virtual times whatever the scheduling
/// (GOMAXPROCS, the randomized build): a pipeline of sleepers.
#[test]
fn virtual_times_are_deterministic() {
    let run = || {
        synctest::test(|| {
            let (tx, rx) = chan::<(usize, Duration)>(0);
            for i in 0..6usize {
                let tx = tx.clone();
                go(move || {
                    for k in 0..5u64 {
                        time::sleep(Duration::from_millis(100 * (i as u64 + 1) + k));
                        tx.send((i, since_y2k())).unwrap();
                    }
                });
            }
            drop(tx);
            let mut v: Vec<_> = rx.iter().collect();
            v.sort();
            v
        })
    };
    let first = run();
    assert_eq!(first.len(), 30);
    for _ in 0..5 {
        assert_eq!(run(), first);
    }
}

/// Go's TestChannelMovedOutOfBubble: a bubble's channel used from outside
/// (or from another bubble) panics with Go's message instead of hanging.
#[test]
fn test_channel_moved_out_of_bubble() {
    let (tx, rx) = synctest::test(|| chan::<i32>(1));
    let e = catch_unwind(AssertUnwindSafe(|| tx.send(1))).unwrap_err();
    assert_eq!(
        panic_text(e),
        "send on synctest channel from outside bubble"
    );
    let e = catch_unwind(AssertUnwindSafe(|| rx.try_recv())).unwrap_err();
    assert_eq!(
        panic_text(e),
        "receive on synctest channel from outside bubble"
    );
    let e = catch_unwind(AssertUnwindSafe(|| {
        select! {
            recv(rx) -> _ => {},
            default => {},
        }
    }))
    .unwrap_err();
    assert_eq!(
        panic_text(e),
        "receive on synctest channel from outside bubble"
    );
    let e = catch_unwind(AssertUnwindSafe(|| tx.close())).unwrap_err();
    assert_eq!(
        panic_text(e),
        "close of synctest channel from outside bubble"
    );
    // And from another bubble.
    let e = catch_unwind(AssertUnwindSafe(move || synctest::test(move || rx.recv()))).unwrap_err();
    assert_eq!(
        panic_text(e),
        "receive on synctest channel from outside bubble"
    );
}

/// Go's TestTimerFromInsideBubble: a bubble's timer stopped, reset or
/// read from outside panics with Go's messages; dropping it is fine.
#[test]
fn test_timer_from_inside_bubble() {
    let t = synctest::test(|| time::Timer::new(Duration::from_secs(1)));
    let e = catch_unwind(AssertUnwindSafe(|| t.reset(Duration::from_secs(1)))).unwrap_err();
    assert_eq!(panic_text(e), "reset of synctest timer from outside bubble");
    let e = catch_unwind(AssertUnwindSafe(|| t.stop())).unwrap_err();
    assert_eq!(panic_text(e), "stop of synctest timer from outside bubble");
    let e = catch_unwind(AssertUnwindSafe(|| t.c().recv())).unwrap_err();
    assert_eq!(
        panic_text(e),
        "receive on synctest channel from outside bubble"
    );
    drop(t);
}

/// Go's TestTimerFromOutsideBubble: a timer made outside is read inside;
/// that wait is not durable, so the bubble waits for the real timer.
#[test]
fn test_timer_from_outside_bubble() {
    let t = Arc::new(time::Timer::new(Duration::from_millis(10)));
    let t2 = t.clone();
    synctest::test(move || {
        t2.c().recv().unwrap();
    });
    assert!(!t.stop(), "the bubble returned before the timer fired");
}

/// Go's TestChannelFromOutsideBubble: operations on channels made outside
/// the bubble are not durable; an outside goroutine completes them.
#[test]
fn test_channel_from_outside_bubble() {
    type Inside = fn(&goroutine::Sender<i32>, &goroutine::Receiver<i32>);
    type Outside = fn(goroutine::Sender<i32>, goroutine::Receiver<i32>);
    let cases: [(&str, Outside, Inside); 5] = [
        (
            "read closed",
            |tx, _rx| tx.close().unwrap(),
            |_tx, rx| assert!(rx.recv().is_err()),
        ),
        (
            "read value",
            |tx, _rx| tx.send(0).unwrap(),
            |_tx, rx| assert_eq!(rx.recv(), Ok(0)),
        ),
        (
            "write value",
            |_tx, rx| assert_eq!(rx.recv(), Ok(0)),
            |tx, _rx| tx.send(0).unwrap(),
        ),
        (
            "select outside only",
            |tx, _rx| tx.close().unwrap(),
            |_tx, rx| {
                select! { recv(rx) -> _ => {} }
            },
        ),
        (
            "select mixed",
            |tx, _rx| tx.close().unwrap(),
            |_tx, rx| {
                let (_tx2, rx2) = chan::<i32>(0);
                select! { recv(rx) -> _ => {}, recv(rx2) -> _ => {} }
            },
        ),
    ];
    for (desc, outside, inside) in cases {
        let (tx, rx) = chan::<i32>(0);
        let (tx_in, rx_in) = (tx.clone(), rx.clone());
        let outer = go(move || {
            std::thread::sleep(Duration::from_millis(1));
            outside(tx, rx)
        });
        synctest::test(move || inside(&tx_in, &rx_in));
        outer.join().unwrap_or_else(|_| panic!("{desc}"));
    }
}

/// Channels made outside the bubble work inside it as usual.
#[test]
fn outside_channel_inside_bubble() {
    let (tx, rx) = chan::<i32>(1);
    tx.send(5).unwrap();
    assert_eq!(synctest::test(move || rx.recv().unwrap()), 5);
}

// ------------------------------------- #[goroutine::test]: real-time groups

fn deadlocked_test_body() {
    let (_tx, rx) = chan::<()>(0);
    let h = go(move || rx.recv().unwrap());
    h.join().unwrap();
}

/// A deadlock among a `#[goroutine::test]`'s goroutines (no bubble) fails
/// the test, with their frames, instead of hanging the test binary.
#[test]
fn goroutine_test_deadlock_fails_with_the_dump() {
    let real = Instant::now();
    let e = catch_unwind(|| {
        goroutine::__private::test::<(), _>(
            goroutine::__private::Options::new(),
            deadlocked_test_body,
        )
    })
    .unwrap_err();
    let took = real.elapsed();
    let text = panic_text(e);
    assert!(
        text.contains("deadlock: all goroutines of the test are asleep"),
        "{text}"
    );
    assert!(text.contains(" [join (durable)]:"), "{text}");
    assert!(text.contains(" [chan receive (durable)]:"), "{text}");
    if !SANITIZED {
        assert!(text.contains("deadlocked_test_body"), "frames: {text}");
    }
    assert!(took < real_bound(Duration::from_secs(30)), "took {took:?}");
}

/// The same through the attribute.
#[goroutine::test]
#[should_panic(expected = "all goroutines of the test are asleep")]
fn goroutine_test_deadlock_fails_the_test() {
    deadlocked_test_body()
}

/// Not a deadlock: a goroutine of the test sleeps (real time) before it
/// sends, and a plain thread wakes another one soon.
#[goroutine::test]
fn goroutine_test_waiting_on_timers_and_threads_is_not_a_deadlock() {
    let (tx, rx) = chan::<i32>(0);
    go(move || {
        time::sleep(Duration::from_millis(1500));
        tx.send(1).unwrap();
    });
    assert_eq!(rx.recv().unwrap(), 1);
    // A plain thread that wakes it after 2 s: longer than a second of
    // polls, within the confirmation window.
    let (tx, rx) = chan::<i32>(0);
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(2000));
        tx.send(2).unwrap();
    });
    assert_eq!(rx.recv().unwrap(), 2);
    t.join().unwrap();
}

/// `synctest::test` inside a `#[goroutine::test]`: the bubble runs on its
/// own clock, and the waiting test is not taken for deadlocked.
#[goroutine::test]
fn synctest_inside_goroutine_test() {
    let got = synctest::test(|| {
        std::thread::sleep(Duration::from_millis(1500));
        time::sleep(Duration::from_secs(10));
        since_y2k()
    });
    assert_eq!(got, Duration::from_secs(10));
}

/// Go's TestWait (the chain form): each goroutine spawns the next before
/// it hands the count on; `wait` returns after the last.
#[test]
fn test_wait_chain() {
    fn f(rx: goroutine::Receiver<i32>, tx: goroutine::Sender<i32>, done: Arc<AtomicUsize>) {
        let count = rx.recv().unwrap();
        if count == 0 {
            done.store(1, Ordering::SeqCst);
        } else {
            let (r, t, d) = (rx.clone(), tx.clone(), done.clone());
            go(move || f(r, t, d));
            tx.send(count - 1).unwrap();
        }
    }
    synctest::test(|| {
        let (tx, rx) = chan::<i32>(0);
        let done = Arc::new(AtomicUsize::new(0));
        let (r, t, d) = (rx.clone(), tx.clone(), done.clone());
        go(move || f(r, t, d));
        tx.send(100).unwrap();
        synctest::wait();
        assert_eq!(done.load(Ordering::SeqCst), 1);
    });
}
