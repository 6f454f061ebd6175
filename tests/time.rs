//! Timers: sleep, after, Timer, Ticker, after_func, channel timeouts and the
//! select timeout arm (ports of Go's time tests where they apply).
//!
//! Bounds are generous (the suite must pass on a loaded 2-core box): they
//! check that things happen, in order, and not absurdly late.

mod common;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::within;
use goroutine::time::{self, Ticker, Timer};
use goroutine::{chan, go, select, RecvTimeoutError, SendTimeoutError};

#[test]
fn sleep_waits_at_least_the_duration() {
    within(30, || {
        for ms in [0u64, 1, 5, 20] {
            let t0 = Instant::now();
            time::sleep(Duration::from_millis(ms));
            assert!(t0.elapsed() >= Duration::from_millis(ms));
        }
    });
}

#[test]
fn sleep_outside_the_runtime_sleeps_the_thread() {
    let t0 = Instant::now();
    time::sleep(Duration::from_millis(10));
    assert!(t0.elapsed() >= Duration::from_millis(10));
}

// Sleeping parks the goroutine, not its thread: at GOMAXPROCS=1, 200
// goroutines sleeping 50 ms each finish together, not one after another
// (10 s).
isolated_test! {
    fn sleepers_share_one_p() ["GOMAXPROCS" = "1"] {
        let t0 = Instant::now();
        within(30, || {
            let hs: Vec<_> = (0..200)
                .map(|_| {
                    go(|| {
                        let t = Instant::now();
                        time::sleep(Duration::from_millis(50));
                        t.elapsed()
                    })
                })
                .collect();
            for h in hs {
                assert!(h.join().unwrap() >= Duration::from_millis(50));
            }
        });
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    }
}

#[test]
fn hundred_thousand_sleepers() {
    within(120, || {
        let woke = Arc::new(AtomicUsize::new(0));
        let hs: Vec<_> = (0..100_000u64)
            .map(|i| {
                let woke = woke.clone();
                go(move || {
                    let d = Duration::from_millis(50 + i % 100);
                    let t = Instant::now();
                    time::sleep(d);
                    assert!(t.elapsed() >= d);
                    woke.fetch_add(1, Ordering::Relaxed);
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(woke.load(Ordering::Relaxed), 100_000);
    });
}

// Go's TestAfterQueuing: timers started out of order fire in order of
// their deadlines, each not before its time and not absurdly after. In its
// own process: another test waking 100,000 sleepers at once would queue
// thousands of goroutines ahead of the forwarding goroutines here.
isolated_test! {
    fn after_queuing() {
    within(60, || {
        const SLOTS: [u64; 13] = [5, 3, 6, 6, 6, 1, 1, 2, 7, 9, 4, 8, 0];
        let delta = Duration::from_millis(20);
        let mut last_err = String::new();
        // Go retries too: a loaded machine can reorder timers that are
        // close together.
        for _attempt in 0..3 {
            let (tx, rx) = chan::<(u64, Instant)>(SLOTS.len());
            let t0 = Instant::now();
            for &slot in &SLOTS {
                let tx = tx.clone();
                go(move || {
                    let at = time::after(delta * slot as u32).recv().unwrap();
                    tx.send((slot, at)).unwrap();
                });
            }
            let mut sorted = SLOTS;
            sorted.sort();
            let mut ok = true;
            for &want in &sorted {
                let (slot, at) = rx.recv().unwrap();
                let dt = at.duration_since(t0);
                let target = delta * want as u32;
                if slot != want {
                    last_err = format!("slot {slot} fired where {want} was due");
                    ok = false;
                }
                if dt < target.saturating_sub(delta / 2) || dt > target + delta * 10 {
                    last_err = format!("slot {slot} fired at {dt:?}, target {target:?}");
                    ok = false;
                }
            }
            if ok {
                return;
            }
        }
        panic!("{last_err}");
    });
    }
}

// Go's TestTimerFairness: goroutines flooding a channel cannot keep a timer
// from firing in a select.
#[test]
fn timer_fairness() {
    within(30, || {
        let (c_tx, c_rx) = chan::<bool>(0);
        let (done_tx, done_rx) = chan::<()>(0);
        for _ in 0..2 {
            let (c_tx, done_rx) = (c_tx.clone(), done_rx.clone());
            go(move || loop {
                select! {
                    send(c_tx, true) -> _ => {},
                    recv(done_rx) -> _ => return,
                }
            });
        }
        let timer = Timer::new(Duration::from_millis(20));
        loop {
            select! {
                recv(c_rx) -> _ => {},
                recv(timer) -> _ => break,
            }
        }
        drop(done_tx);
    });
}

#[test]
fn timer_stop_and_reset() {
    within(30, || {
        // Stopped before it fires: nothing is delivered.
        let t = Timer::new(Duration::from_millis(30));
        assert!(t.stop());
        assert!(!t.stop());
        assert_eq!(
            t.c().recv_timeout(Duration::from_millis(80)),
            Err(RecvTimeoutError::Timeout)
        );
        // Reset of a stopped timer: delivered once, not before the new time.
        let t0 = Instant::now();
        assert!(!t.reset(Duration::from_millis(10)));
        let at = t.c().recv().unwrap();
        assert!(at.duration_since(t0) >= Duration::from_millis(10));
        assert_eq!(
            t.c().recv_timeout(Duration::from_millis(50)),
            Err(RecvTimeoutError::Timeout)
        );
        // Reset of a pending timer moves it.
        let t = Timer::new(Duration::from_secs(3600));
        let t0 = Instant::now();
        assert!(t.reset(Duration::from_millis(5)));
        t.c().recv().unwrap();
        assert!(t0.elapsed() < Duration::from_secs(60));
    });
}

// Dropping a timer or a ticker closes its channel for a receiver the user
// cloned, after any value already delivered; with no clone left, the drop
// takes the quiet path (no close), which must lose nothing either.
#[test]
fn dropping_a_timer_closes_its_channel_for_a_cloned_receiver() {
    within(30, || {
        // Fired before the drop: the clone gets the value, then the close.
        let t = Timer::new(Duration::from_millis(1));
        let rx = t.c().clone();
        goroutine::time::sleep(Duration::from_millis(20));
        drop(t);
        assert!(rx.recv().is_ok(), "the fired value was lost");
        assert!(rx.recv().is_err(), "the channel stayed open");
        // Stopped by the drop: no value, closed.
        let t = Timer::new(Duration::from_secs(3600));
        let rx = t.c().clone();
        drop(t);
        assert!(rx.recv().is_err());
        // A ticker: the same.
        let tk = Ticker::new(Duration::from_millis(2));
        let rx = tk.c().clone();
        rx.recv().unwrap();
        drop(tk);
        while rx.recv().is_ok() {}
        // after_func's channel never receives, and closes with the timer.
        let t = goroutine::time::after_func(Duration::from_secs(3600), || {});
        let rx = t.c().clone();
        assert!(t.stop());
        drop(t);
        assert!(rx.recv().is_err());
        // Many timers dropped whole, pending, fired or stopped.
        for i in 0..10_000u64 {
            let t = Timer::new(Duration::from_micros(i % 3));
            if i % 2 == 0 {
                t.stop();
            }
        }
    });
}

// A dropped Timer or Ticker goes whole to its P's cache of channel timers
// (`p::chantimers`) when nothing else can reach it, and comes back as the
// next one. Whatever the old one did (fired and not received, stopped,
// fired and received, ticked, still pending), the next timer starts with an
// empty channel and fires once, at its own time.
#[test]
fn a_timer_made_after_a_drop_starts_afresh() {
    within(30, || {
        let ms = Duration::from_millis;
        for i in 0..100u32 {
            match i % 5 {
                0 => {
                    let t = Timer::new(Duration::from_micros(1));
                    time::sleep(ms(2));
                    drop(t);
                }
                1 => {
                    let t = Timer::new(Duration::from_secs(3600));
                    assert!(t.stop());
                }
                2 => {
                    let t = Timer::new(ms(1));
                    t.c().recv().unwrap();
                }
                3 => {
                    let tk = Ticker::new(ms(1));
                    tk.c().recv().unwrap();
                }
                _ => {
                    let t = Timer::new(Duration::from_secs(3600));
                    assert!(t.reset(Duration::from_secs(7200)));
                }
            }
            let t0 = Instant::now();
            let t = Timer::new(ms(3));
            assert!(t.c().try_recv().is_err(), "a new timer had a value at once");
            let at = t.c().recv().expect("the new timer fires");
            assert!(at >= t0 + ms(3), "fired early");
            time::sleep(ms(4));
            assert!(t.c().try_recv().is_err(), "a one-shot timer fired twice");
            assert!(!t.stop(), "stop after the firing found it pending");
        }
    });
}

// Selects with a timeout arm, from goroutines on every P and from a plain
// thread, while values arrive now and then: the timers of these selects are
// dropped and made again thousands of times, most through the Ps' caches of
// channel timers, some of them fired and some stopped. A timeout must never
// come early (a recycled timer's old value or firing would end a select at
// once), and every value sent is received exactly once.
#[test]
fn select_timeouts_reuse_timers_safely() {
    within(120, || {
        const PER: u64 = 400;
        let (tx, rx) = chan::<u64>(0);
        let got = Arc::new(AtomicU64::new(0));
        let wait = move |rx: goroutine::Receiver<u64>, got: Arc<AtomicU64>, seed: u64| {
            let mut x = seed | 1;
            for _ in 0..PER {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let d = Duration::from_micros(x % 300);
                let t0 = Instant::now();
                select! {
                    recv(rx) -> v => { got.fetch_add(v.unwrap(), Ordering::Relaxed); }
                    default(d) => assert!(t0.elapsed() >= d, "a timeout came early"),
                }
            }
        };
        let mut hs: Vec<_> = (0..8u64)
            .map(|i| {
                let (rx, got) = (rx.clone(), got.clone());
                go(move || wait(rx, got, i.wrapping_mul(0x9E37_79B9_7F4A_7C15)))
            })
            .collect();
        let thread = {
            let (rx, got) = (rx.clone(), got.clone());
            std::thread::spawn(move || wait(rx, got, 77))
        };
        let sender = go(move || {
            let mut sent = 0;
            for v in 1..=500u64 {
                if tx.send_timeout(v, Duration::from_millis(2)).is_ok() {
                    sent += v;
                }
                if v % 16 == 0 {
                    time::sleep(Duration::from_micros(200));
                }
            }
            // Kept open until the waiters are done: a closed channel would
            // end their selects at once.
            (sent, tx)
        });
        let (sent, tx) = sender.join().unwrap();
        for h in hs.drain(..) {
            h.join().unwrap();
        }
        thread.join().unwrap();
        drop((tx, rx));
        assert_eq!(got.load(Ordering::Relaxed), sent, "a value lost or doubled");
    });
}

// Dropping the last receiver of an `after` channel stops its timer (as Go
// since 1.23): a loop whose select takes another arm each round leaves no
// pending timer behind. A receiver kept (a clone) keeps its timer, which
// still delivers. Isolated: `stats().timers` counts the whole process's.
isolated_test! {
    fn dropping_an_after_channel_stops_its_timer() {
        within(30, || {
            let hour = Duration::from_secs(3600);
            let before = goroutine::stats().timers;
            let (tx, rx) = chan::<u32>(1);
            for i in 0..10_000u32 {
                tx.send(i).unwrap();
                select! {
                    recv(rx) -> v => assert_eq!(v.unwrap(), i),
                    recv(time::after(hour)) -> _ => unreachable!("an hour passed"),
                }
            }
            let now = goroutine::stats().timers;
            assert!(now <= before, "pending timers grew from {before} to {now}");
            // Kept receivers keep their timers; a clone is a receiver.
            let kept: Vec<_> = (0..100).map(|_| time::after(hour)).collect();
            assert_eq!(goroutine::stats().timers, before + 100);
            let clone = kept[0].clone();
            drop(kept);
            assert_eq!(goroutine::stats().timers, before + 1);
            drop(clone);
            assert_eq!(goroutine::stats().timers, before);
            // A clone of a short one still gets the time, then the close.
            let r = time::after(Duration::from_millis(5));
            let r2 = r.clone();
            drop(r);
            assert!(r2.recv().is_ok(), "the kept clone lost the time");
            assert!(r2.recv().is_err());
        });
    }
}

// A reset to a later time leaves the heap entry at the old time (Go's
// timerModifiedLater): reaching it must re-queue the timer, not fire it.
// Each timer is reset later several times, from this goroutine and from
// others (on other Ps), and then delivers exactly once, at the last time.
// The times leave 100 ms between a timer's creation and its first reset,
// and 200 ms or more between resets: a loaded box (a debug build beside the
// other tests) once stalled the goroutines that reset half the timers past
// a 30 ms first deadline.
#[test]
fn timer_reset_later_fires_once_at_the_new_time() {
    within(30, || {
        let ts: Vec<_> = (0..20)
            .map(|_| Arc::new(Timer::new(Duration::from_millis(100))))
            .collect();
        let t0 = Instant::now();
        for step in 1..=4u64 {
            let hs: Vec<_> = ts
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let t = t.clone();
                    let reset = move || assert!(t.reset(Duration::from_millis(150 + 50 * step)));
                    if i % 2 == 0 {
                        reset();
                        None
                    } else {
                        Some(go(reset))
                    }
                })
                .collect();
            for h in hs.into_iter().flatten() {
                h.join().unwrap();
            }
            // Past the previous time: nothing may have fired yet.
            goroutine::time::sleep(Duration::from_millis(10));
            for t in &ts {
                assert!(
                    t.c().try_recv().is_err(),
                    "fired at a time it was reset from"
                );
            }
        }
        for t in &ts {
            let at = t.c().recv().unwrap();
            assert!(at.duration_since(t0) >= Duration::from_millis(350));
            assert!(!t.stop(), "delivered, so no longer pending");
            assert!(t.c().recv_timeout(Duration::from_millis(20)).is_err());
        }
    });
}

// Many goroutines start, stop and reset timers at random: a timer whose
// stop() returned true never delivers; every other one delivers exactly
// once.
#[test]
fn timer_stop_reset_stress() {
    within(120, || {
        let delivered = Arc::new(AtomicU64::new(0));
        let expected = Arc::new(AtomicU64::new(0));
        let hs: Vec<_> = (0..64u64)
            .map(|w| {
                let (delivered, expected) = (delivered.clone(), expected.clone());
                go(move || {
                    let mut x = w.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                    for _ in 0..100 {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        let t = Timer::new(Duration::from_micros(x % 2000));
                        if x % 3 == 0 {
                            // Go's rule for `Reset` on a channel timer (before
                            // Go 1.23, as here: a value already delivered stays
                            // in the channel): stop it, and drain the value if
                            // it fired first, or the reset timer delivers twice.
                            // On a loaded machine a 0-2 ms timer often fires
                            // before this line.
                            if !t.stop() {
                                t.c().recv().unwrap();
                            }
                            t.reset(Duration::from_micros((x >> 8) % 2000));
                        }
                        let stopped = x % 2 == 0 && t.stop();
                        if !stopped {
                            expected.fetch_add(1, Ordering::Relaxed);
                            t.c().recv().unwrap();
                            delivered.fetch_add(1, Ordering::Relaxed);
                        }
                        if t.c().recv_timeout(Duration::from_millis(3)).is_ok() {
                            panic!("a stopped or already-received timer delivered again");
                        }
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(
            delivered.load(Ordering::Relaxed),
            expected.load(Ordering::Relaxed)
        );
    });
}

#[test]
fn ticker_ticks_until_stopped() {
    within(30, || {
        let tk = Ticker::new(Duration::from_millis(5));
        let t0 = Instant::now();
        for _ in 0..5 {
            tk.c().recv().unwrap();
        }
        assert!(t0.elapsed() >= Duration::from_millis(20));
        tk.stop();
        // At most one tick was already buffered.
        let _ = tk.c().try_recv();
        assert_eq!(
            tk.c().recv_timeout(Duration::from_millis(50)),
            Err(RecvTimeoutError::Timeout)
        );
        tk.reset(Duration::from_millis(2));
        tk.c().recv().unwrap();
    });
}

#[test]
fn after_func_runs_in_a_goroutine_unless_stopped() {
    within(30, || {
        let (tx, rx) = chan::<u64>(1);
        let _t = time::after_func(Duration::from_millis(5), move || {
            let _ = tx.try_send(goroutine::current_id());
        });
        let id = rx.recv().unwrap();
        assert_ne!(id, 0, "after_func must run f in a goroutine");

        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        let t = time::after_func(Duration::from_millis(20), move || {
            r.fetch_add(1, Ordering::SeqCst);
        });
        assert!(t.stop());
        time::sleep(Duration::from_millis(60));
        assert_eq!(ran.load(Ordering::SeqCst), 0);

        // Dropping the handle does not cancel it (Go's AfterFunc).
        let r = ran.clone();
        drop(time::after_func(Duration::from_millis(1), move || {
            r.fetch_add(1, Ordering::SeqCst);
        }));
        let t0 = Instant::now();
        while ran.load(Ordering::SeqCst) == 0 {
            assert!(t0.elapsed() < Duration::from_secs(20));
            time::sleep(Duration::from_millis(1));
        }
    });
}

#[test]
fn channel_timeouts() {
    within(30, || {
        let (tx, rx) = chan::<i32>(0);
        let t0 = Instant::now();
        assert_eq!(
            rx.recv_timeout(Duration::from_millis(20)),
            Err(RecvTimeoutError::Timeout)
        );
        assert!(t0.elapsed() >= Duration::from_millis(20));
        match tx.send_timeout(7, Duration::from_millis(20)) {
            Err(SendTimeoutError::Timeout(v)) => assert_eq!(v, 7),
            other => panic!("{other:?}"),
        }
        let tx2 = tx.clone();
        go(move || {
            time::sleep(Duration::from_millis(5));
            tx2.send(9).unwrap();
        });
        assert_eq!(rx.recv_timeout(Duration::from_secs(20)), Ok(9));
        let rx2 = rx.clone();
        let h = go(move || rx2.recv().unwrap());
        tx.send_timeout(11, Duration::from_secs(20)).unwrap();
        assert_eq!(h.join().unwrap(), 11);
        drop(tx);
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(1)),
            Err(RecvTimeoutError::Closed)
        );
    });
    // From a plain thread too.
    let (_tx, rx) = chan::<i32>(0);
    assert_eq!(
        rx.recv_timeout(Duration::from_millis(10)),
        Err(RecvTimeoutError::Timeout)
    );
}

#[test]
fn select_timeout_arm() {
    within(30, || {
        let (tx, rx) = chan::<i32>(1);
        let t0 = Instant::now();
        let r = select! {
            recv(rx) -> v => v.unwrap(),
            default(Duration::from_millis(15)) => -1,
        };
        assert_eq!(r, -1);
        assert!(t0.elapsed() >= Duration::from_millis(15));
        tx.send(3).unwrap();
        let r = select! {
            recv(rx) -> v => v.unwrap(),
            default(Duration::from_secs(20)) => -1,
        };
        assert_eq!(r, 3);
    });
}

// A timer wakes a runtime whose Ms are all parked (the poller sleeps until
// the timer), also when armed from a plain thread.
#[test]
fn timer_wakes_an_idle_runtime() {
    goroutine::max_procs();
    std::thread::sleep(Duration::from_millis(20));
    let t0 = Instant::now();
    let at = time::after(Duration::from_millis(30)).recv().unwrap();
    assert!(at.duration_since(t0) >= Duration::from_millis(30));
}

// Shrinking GOMAXPROCS moves the timers of removed Ps.
isolated_test! {
    fn timers_survive_set_max_procs() ["GOMAXPROCS" = "4"] {
        within(60, || {
            let hs: Vec<_> = (0..400u64)
                .map(|i| go(move || time::sleep(Duration::from_millis(30 + i % 50))))
                .collect();
            time::sleep(Duration::from_millis(5));
            goroutine::set_max_procs(1);
            for h in hs {
                h.join().unwrap();
            }
            goroutine::set_max_procs(3);
            let t = Timer::new(Duration::from_millis(5));
            t.c().recv().unwrap();
        });
    }
}
