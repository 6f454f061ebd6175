//! The sync primitives: ports of Go's sync tests (waitgroup_test.go,
//! mutex_test.go, rwmutex_test.go, once_test.go, cond_test.go) and of
//! golang.org/x/sync/semaphore's tests, plus mixed use from goroutines and
//! plain OS threads. Tests that need a GOMAXPROCS of their own run in a
//! child process (`isolated_test!`) under a watchdog, so that a lost
//! wakeup fails the test instead of hanging it.
//!
//! The only time-based verdicts are the starvation bounds (Go's
//! TestMutexFairness and x/sync's TestLargeAcquireDoesntStarve), with
//! margins of about 50x what they need.

mod common;

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use goroutine::sync::{Condvar, Mutex, Once, RwLock, Semaphore, WaitGroup};
use goroutine::{go, run, yield_now};

/// Yields (a goroutine) or spins (a thread) until `cond` holds.
fn wait_until(cond: impl Fn() -> bool) {
    while !cond() {
        yield_now();
    }
}

/// Busy-waits `d` while letting the other goroutines of this P run.
fn busy_yield(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        yield_now();
    }
}

/// In an isolated child: fails the process if the test has not finished in
/// `secs` (a hang means a lost wakeup).
fn watchdog(secs: u64) {
    thread::spawn(move || {
        thread::sleep(Duration::from_secs(secs));
        eprintln!("watchdog: test still running after {secs} s (lost wakeup?)");
        std::process::exit(101);
    });
}

// ---------------------------------------------------------------------------
// WaitGroup

/// Go's testWaitGroup: n goroutines each `done` wg1 then wait on wg2; none
/// may pass wg2 before main has called `done` n times on it.
fn test_wait_group(wg1: &WaitGroup, wg2: &WaitGroup) {
    const N: usize = 16;
    wg1.add(N as isize);
    wg2.add(N as isize);
    let exited = Arc::new(AtomicUsize::new(0));
    let hs: Vec<_> = (0..N)
        .map(|_| {
            let (wg1, wg2, exited) = (wg1.clone(), wg2.clone(), exited.clone());
            go(move || {
                wg1.done();
                wg2.wait();
                exited.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    wg1.wait();
    for _ in 0..N {
        assert_eq!(
            exited.load(Ordering::SeqCst),
            0,
            "WaitGroup released group too soon"
        );
        wg2.done();
    }
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(exited.load(Ordering::SeqCst), N);
}

// Go's TestWaitGroup: the same two groups reused for several rounds.
#[test]
fn wait_group() {
    run(|| {
        let wg1 = WaitGroup::new();
        let wg2 = WaitGroup::new();
        for _ in 0..8 {
            test_wait_group(&wg1, &wg2);
        }
    });
}

// Go's TestWaitGroupMisuse: a negative counter panics with Go's message,
// from a plain thread and from a goroutine.
#[test]
fn wait_group_negative_counter_panics() {
    let wg = WaitGroup::new();
    wg.add(1);
    wg.done();
    let err = catch_unwind(AssertUnwindSafe(|| wg.done())).unwrap_err();
    assert_eq!(
        err.downcast_ref::<&str>().copied(),
        Some("sync: negative WaitGroup counter")
    );

    let err = go(|| {
        let wg = WaitGroup::new();
        wg.add(2);
        wg.add(-3);
    })
    .join()
    .unwrap_err();
    assert!(err.is_panic());
    assert_eq!(err.message(), "sync: negative WaitGroup counter");
}

#[test]
fn wait_group_zero_does_not_wait_and_clones_share() {
    let wg = WaitGroup::new();
    wg.wait();
    let wg2 = wg.clone();
    wg.add(1);
    let t = thread::spawn(move || wg2.done());
    wg.wait();
    t.join().unwrap();
    run(move || wg.wait());
}

// Threads wait for goroutines, and goroutines for threads.
#[test]
fn wait_group_between_threads_and_goroutines() {
    const N: usize = 8;
    let count = Arc::new(AtomicUsize::new(0));
    // A plain thread waits for goroutines.
    let wg = WaitGroup::new();
    wg.add(N as isize);
    for _ in 0..N {
        let (wg, count) = (wg.clone(), count.clone());
        go(move || {
            yield_now();
            count.fetch_add(1, Ordering::SeqCst);
            wg.done();
        });
    }
    wg.wait();
    assert_eq!(count.load(Ordering::SeqCst), N);

    // Goroutines and a thread wait for plain threads.
    let wg = WaitGroup::new();
    wg.add(N as isize);
    let waiters: Vec<_> = (0..4)
        .map(|_| {
            let (wg, count) = (wg.clone(), count.clone());
            go(move || {
                wg.wait();
                assert_eq!(count.load(Ordering::SeqCst), 2 * N);
            })
        })
        .collect();
    let thread_waiter = {
        let (wg, count) = (wg.clone(), count.clone());
        thread::spawn(move || {
            wg.wait();
            assert_eq!(count.load(Ordering::SeqCst), 2 * N);
        })
    };
    let workers: Vec<_> = (0..N)
        .map(|_| {
            let (wg, count) = (wg.clone(), count.clone());
            thread::spawn(move || {
                count.fetch_add(1, Ordering::SeqCst);
                wg.done();
            })
        })
        .collect();
    for w in waiters {
        w.join().unwrap();
    }
    thread_waiter.join().unwrap();
    for w in workers {
        w.join().unwrap();
    }
}

// ---------------------------------------------------------------------------
// Mutex

/// Go's hammerMutex, with a non-atomic counter: the final count is exact
/// only if the critical sections never overlap; `inside` checks that
/// directly too.
fn hammer_mutex(goroutines: usize, threads: usize, iters: u64) {
    struct Shared {
        m: Mutex<u64>,
        inside: AtomicBool,
    }
    let s = Arc::new(Shared {
        m: Mutex::new(0),
        inside: AtomicBool::new(false),
    });
    let body = move |s: Arc<Shared>| {
        move || {
            for i in 0..iters {
                let mut g = s.m.lock();
                assert!(!s.inside.swap(true, Ordering::Relaxed), "two holders");
                *g += 1;
                if i % 64 == 0 {
                    // Hold the lock across a scheduling point now and then.
                    yield_now();
                }
                s.inside.store(false, Ordering::Relaxed);
                drop(g);
                if i % 7 == 0 {
                    yield_now();
                }
            }
        }
    };
    let ts: Vec<_> = (0..threads)
        .map(|_| thread::spawn(body(s.clone())))
        .collect();
    let s2 = s.clone();
    run(move || {
        let gs: Vec<_> = (0..goroutines).map(|_| go(body(s2.clone()))).collect();
        for g in gs {
            g.join().unwrap();
        }
    });
    for t in ts {
        t.join().unwrap();
    }
    assert_eq!(*s.m.lock(), (goroutines + threads) as u64 * iters);
}

// Go's TestMutex, with plain threads hammering the same mutex.
#[test]
fn mutex_counter_goroutines_and_threads() {
    hammer_mutex(10, 3, 2000);
}

// The same with several Ps and one, in their own runtimes.
isolated_test! {
    fn mutex_counter_gomaxprocs_4() ["GOMAXPROCS" = "4"] {
        watchdog(120);
        hammer_mutex(16, 2, 3000);
    }
}

isolated_test! {
    fn mutex_counter_gomaxprocs_1() ["GOMAXPROCS" = "1"] {
        watchdog(120);
        hammer_mutex(16, 2, 3000);
    }
}

#[test]
fn mutex_try_lock() {
    let m = Arc::new(Mutex::new(5));
    {
        let g = m.try_lock().expect("try_lock of an unlocked mutex failed");
        assert_eq!(*g, 5);
        assert!(
            m.try_lock().is_none(),
            "try_lock of a locked mutex succeeded"
        );
        // Neither a goroutine nor a thread gets it while we hold it.
        let m2 = m.clone();
        assert!(go(move || m2.try_lock().is_none()).join().unwrap());
        let m2 = m.clone();
        assert!(thread::spawn(move || m2.try_lock().is_none())
            .join()
            .unwrap());
    }
    let mut g = m.try_lock().expect("try_lock after unlock failed");
    *g += 1;
    drop(g);
    assert_eq!(*m.lock(), 6);
    let mut m = Arc::try_unwrap(m).ok().unwrap();
    *m.get_mut() += 1;
    assert_eq!(m.into_inner(), 7);
}

#[test]
fn mutex_no_poisoning() {
    let m = Arc::new(Mutex::new(1));
    let m2 = m.clone();
    let r = go(move || {
        let mut g = m2.lock();
        *g = 2;
        panic!("boom");
    })
    .join();
    assert!(r.is_err());
    // The panic unlocked it, and the write stands.
    assert_eq!(*m.try_lock().expect("mutex left locked by a panic"), 2);
}

// A goroutine may park while it unwinds (a destructor that locks), and a
// panic in a goroutine releases the locks it held to their waiters.
#[test]
fn park_while_unwinding() {
    struct LockOnDrop(Arc<Mutex<i32>>);
    impl Drop for LockOnDrop {
        fn drop(&mut self) {
            *self.0.lock() += 1;
        }
    }
    let m = Arc::new(Mutex::new(0));
    let g = m.lock();
    let h = {
        let m = m.clone();
        go(move || {
            let _d = LockOnDrop(m);
            panic!("unwinding");
        })
    };
    // The goroutine parks in `drop`, mid-unwind, until we unlock.
    thread::sleep(Duration::from_millis(5));
    drop(g);
    let e = h.join().unwrap_err();
    assert_eq!(e.message(), "unwinding");
    assert_eq!(*m.lock(), 1);

    // A waiter is woken by the unlock of a panicking holder.
    let held = Arc::new(AtomicBool::new(false));
    let (m2, held2) = (m.clone(), held.clone());
    let holder = go(move || {
        let _g = m2.lock();
        held2.store(true, Ordering::SeqCst);
        busy_yield(Duration::from_millis(2));
        panic!("holder");
    });
    wait_until(|| held.load(Ordering::SeqCst));
    let m3 = m.clone();
    let waiter = go(move || *m3.lock() += 1);
    assert!(holder.join().is_err());
    waiter.join().unwrap();
    assert_eq!(*m.lock(), 2);
}

// A locked mutex is not tied to a thread: the guard can be unlocked by
// another goroutine (as in Go).
#[test]
fn mutex_guard_unlocked_elsewhere() {
    static M: Mutex<u32> = Mutex::new(0);
    let g = M.lock();
    let h = go(move || {
        let mut g = g;
        *g += 1;
        drop(g);
    });
    h.join().unwrap();
    assert_eq!(*M.lock(), 1);
}

/// Go's TestMutexFairness: goroutine 1 keeps re-locking the mutex in a tight
/// loop, holding it ~100 us each time (Go sleeps while holding it; we let
/// the P's other goroutines run meanwhile). Goroutine 2 must still get the
/// lock 10 times. In normal mode it would lose every race (it only runs
/// while goroutine 1 holds the lock, and is woken just before goroutine 1
/// re-locks); after 1 ms it switches the mutex to starvation mode and gets
/// it handed over. Goroutine 1 gives up after 1 s; goroutine 2 needs about
/// 20 ms.
fn mutex_fairness() {
    watchdog(60);
    run(|| {
        let mu = Arc::new(Mutex::new(()));
        let stop = Arc::new(AtomicBool::new(false));
        let hog = {
            let (mu, stop) = (mu.clone(), stop.clone());
            go(move || {
                let start = Instant::now();
                while !stop.load(Ordering::SeqCst) {
                    if start.elapsed() > Duration::from_secs(1) {
                        return false;
                    }
                    let g = mu.lock();
                    busy_yield(Duration::from_micros(100));
                    drop(g);
                }
                true
            })
        };
        let start = Instant::now();
        let fair = {
            let (mu, stop) = (mu.clone(), stop.clone());
            go(move || {
                for _ in 0..10 {
                    busy_yield(Duration::from_micros(100));
                    drop(mu.lock());
                }
                stop.store(true, Ordering::SeqCst);
            })
        };
        fair.join().unwrap();
        let took = start.elapsed();
        assert!(
            hog.join().unwrap(),
            "can't acquire Mutex 10 times while another goroutine re-locks it for 1 s"
        );
        eprintln!("10 acquisitions against a re-locking hog in {took:?}");
    });
}

isolated_test! {
    fn mutex_fairness_gomaxprocs_1() ["GOMAXPROCS" = "1"] {
        mutex_fairness();
    }
}

isolated_test! {
    fn mutex_fairness_gomaxprocs_2() ["GOMAXPROCS" = "2"] {
        mutex_fairness();
    }
}

// Every primitive parks the goroutine, not its thread: with one P, a waiter
// and its waker share the only thread, so a waiter that blocked the thread
// would hang (the watchdog fails it).
isolated_test! {
    fn waiters_park_the_goroutine_not_the_thread() ["GOMAXPROCS" = "1"] {
        watchdog(60);
        run(|| {
            // Mutex.
            let m = Arc::new(Mutex::new(0));
            let g = m.lock();
            let w = { let m = m.clone(); go(move || *m.lock() += 1) };
            busy_yield(Duration::from_millis(2));
            drop(g);
            w.join().unwrap();
            assert_eq!(*m.lock(), 1);

            // RwLock: a reader waits for the writer, a writer for readers.
            let l = Arc::new(RwLock::new(0));
            let wg = l.write();
            let r = { let l = l.clone(); go(move || *l.read()) };
            busy_yield(Duration::from_millis(1));
            drop(wg);
            assert_eq!(r.join().unwrap(), 0);
            let rg = l.read();
            let w = { let l = l.clone(); go(move || *l.write() = 1) };
            busy_yield(Duration::from_millis(1));
            drop(rg);
            w.join().unwrap();
            assert_eq!(*l.read(), 1);

            // WaitGroup.
            let wg = WaitGroup::new();
            wg.add(1);
            let w = { let wg = wg.clone(); go(move || wg.wait()) };
            yield_now();
            wg.done();
            w.join().unwrap();

            // Condvar.
            let pair = Arc::new((Mutex::new(false), Condvar::new()));
            let w = {
                let pair = pair.clone();
                go(move || {
                    let (m, c) = &*pair;
                    drop(c.wait_while(m.lock(), |ready| !*ready));
                })
            };
            yield_now();
            *pair.0.lock() = true;
            pair.1.notify_one();
            w.join().unwrap();

            // Once: a second caller waits for the first.
            let once = Arc::new(Once::new());
            let ran = Arc::new(AtomicUsize::new(0));
            let started = Arc::new(AtomicBool::new(false));
            let first = {
                let (once, ran, started) = (once.clone(), ran.clone(), started.clone());
                go(move || once.call_once(|| {
                    started.store(true, Ordering::SeqCst);
                    busy_yield(Duration::from_millis(1));
                    ran.fetch_add(1, Ordering::SeqCst);
                }))
            };
            // Under randomized scheduling one yield need not run `first`:
            // wait until it is inside `call_once`.
            while !started.load(Ordering::SeqCst) {
                yield_now();
            }
            once.call_once(|| unreachable!());
            assert_eq!(ran.load(Ordering::SeqCst), 1);
            first.join().unwrap();

            // Semaphore.
            let s = Arc::new(Semaphore::new(1));
            s.acquire(1);
            let w = { let s = s.clone(); go(move || { s.acquire(1); s.release(1) }) };
            busy_yield(Duration::from_millis(1));
            s.release(1);
            w.join().unwrap();
        });
    }
}

// ---------------------------------------------------------------------------
// RwLock

// Go's TestParallelReaders: every reader holds the read lock at the same
// time (each waits, holding it, until all have it).
#[test]
fn rwlock_parallel_readers() {
    for readers in [1usize, 3, 4, 10] {
        let l = Arc::new(RwLock::new(7));
        let locked = WaitGroup::new();
        let unlock = WaitGroup::new();
        locked.add(readers as isize);
        unlock.add(1);
        let reader = move |l: Arc<RwLock<i32>>, locked: WaitGroup, unlock: WaitGroup| {
            move || {
                let g = l.read();
                locked.done();
                unlock.wait();
                assert_eq!(*g, 7);
            }
        };
        // Half goroutines, half plain threads.
        let mut gs = Vec::new();
        let mut ts = Vec::new();
        for i in 0..readers {
            let f = reader(l.clone(), locked.clone(), unlock.clone());
            if i % 2 == 0 {
                gs.push(go(f));
            } else {
                ts.push(thread::spawn(f));
            }
        }
        locked.wait();
        // All readers are inside: a writer cannot be.
        assert!(l.try_write().is_none());
        unlock.done();
        gs.into_iter().for_each(|g| g.join().unwrap());
        ts.into_iter().for_each(|t| t.join().unwrap());
        assert!(l.try_write().is_some());
    }
}

/// Go's HammerRWMutex: readers add 1 to `activity`, writers 10000; a
/// reader must never see a writer inside, a writer must be alone.
fn hammer_rwlock(writers: usize, readers: usize, iters: usize) {
    let l = Arc::new(RwLock::new(()));
    let activity = Arc::new(AtomicU64::new(0));
    let reader = move |l: Arc<RwLock<()>>, activity: Arc<AtomicU64>| {
        move || {
            for i in 0..iters {
                let g = l.read();
                let n = activity.fetch_add(1, Ordering::SeqCst) + 1;
                assert!((1..10000).contains(&n), "rlock({n})");
                if i % 16 == 0 {
                    yield_now();
                }
                activity.fetch_sub(1, Ordering::SeqCst);
                drop(g);
            }
        }
    };
    let writer = move |l: Arc<RwLock<()>>, activity: Arc<AtomicU64>| {
        move || {
            for i in 0..iters {
                let g = l.write();
                let n = activity.fetch_add(10000, Ordering::SeqCst) + 10000;
                assert_eq!(n, 10000, "wlock({n})");
                if i % 16 == 0 {
                    yield_now();
                }
                activity.fetch_sub(10000, Ordering::SeqCst);
                drop(g);
            }
        }
    };
    // One reader and one writer are plain threads, the rest goroutines.
    let ts = [
        thread::spawn(reader(l.clone(), activity.clone())),
        thread::spawn(writer(l.clone(), activity.clone())),
    ];
    let (l2, a2) = (l.clone(), activity.clone());
    run(move || {
        let mut hs = Vec::new();
        for i in 0..writers.max(readers) {
            if i < writers {
                hs.push(go(writer(l2.clone(), a2.clone())));
            }
            if i < readers {
                hs.push(go(reader(l2.clone(), a2.clone())));
            }
        }
        hs.into_iter().for_each(|h| h.join().unwrap());
    });
    ts.into_iter().for_each(|t| t.join().unwrap());
    assert_eq!(activity.load(Ordering::SeqCst), 0);
}

// Go's TestRWMutex (a subset of its writer/reader mixes).
#[test]
fn rwlock_hammer() {
    for (w, r) in [(1, 1), (1, 3), (1, 10), (4, 1), (4, 10), (10, 5)] {
        hammer_rwlock(w, r, 500);
    }
}

isolated_test! {
    fn rwlock_hammer_gomaxprocs_1() ["GOMAXPROCS" = "1"] {
        watchdog(120);
        hammer_rwlock(4, 10, 500);
    }
}

// Writer preference (Go's RWMutex contract): once a writer waits, new
// readers wait behind it, from goroutines and threads alike.
#[test]
fn rwlock_writer_preference() {
    let l = Arc::new(RwLock::new(0));
    let order = Arc::new(Mutex::new(Vec::new()));
    let r1 = l.read();
    let w = {
        let (l, order) = (l.clone(), order.clone());
        go(move || {
            let mut g = l.write();
            *g = 1;
            order.lock().push("writer");
        })
    };
    // Wait until the writer is pending: then try_read fails.
    while let Some(g) = l.try_read() {
        drop(g);
        thread::yield_now();
    }
    assert!(
        l.try_read().is_none(),
        "a reader barged past a waiting writer"
    );
    let reader = move |l: Arc<RwLock<i32>>, order: Arc<Mutex<Vec<&'static str>>>| {
        move || {
            let v = *l.read();
            order.lock().push("reader");
            v
        }
    };
    let r2 = go(reader(l.clone(), order.clone()));
    let r3 = thread::spawn(reader(l.clone(), order.clone()));
    thread::sleep(Duration::from_millis(5));
    assert!(
        order.lock().is_empty(),
        "someone got in while r1 held the lock"
    );
    drop(r1);
    w.join().unwrap();
    assert_eq!(
        r2.join().unwrap(),
        1,
        "a new reader got in before the waiting writer"
    );
    assert_eq!(
        r3.join().unwrap(),
        1,
        "a new reader got in before the waiting writer"
    );
    assert_eq!(*order.lock(), ["writer", "reader", "reader"]);
}

#[test]
fn rwlock_try_semantics() {
    let mut l = RwLock::new(String::from("a"));
    {
        let r = l.try_read().unwrap();
        assert!(l.try_read().is_some(), "readers share");
        assert!(l.try_write().is_none(), "writer while read-locked");
        drop(r);
    }
    {
        let mut w = l.try_write().unwrap();
        w.push('b');
        assert!(l.try_read().is_none(), "reader while write-locked");
        assert!(l.try_write().is_none(), "two writers");
    }
    l.get_mut().push('c');
    assert_eq!(*l.read(), "abc");
    assert_eq!(l.into_inner(), "abc");
}

// ---------------------------------------------------------------------------
// Once

// Go's TestOnce, with callers that arrive while `f` runs: exactly one call,
// and every caller returns only after it finished.
#[test]
fn once_runs_exactly_once_and_others_wait() {
    const GOROUTINES: usize = 10;
    const THREADS: usize = 3;
    let once = Arc::new(Once::new());
    let calls = Arc::new(AtomicUsize::new(0));
    let value = Arc::new(AtomicUsize::new(0));
    let arrived = Arc::new(AtomicUsize::new(0));
    let caller = move |once: Arc<Once>,
                       calls: Arc<AtomicUsize>,
                       value: Arc<AtomicUsize>,
                       arrived: Arc<AtomicUsize>| {
        move || {
            arrived.fetch_add(1, Ordering::SeqCst);
            once.call_once(|| {
                calls.fetch_add(1, Ordering::SeqCst);
                // Let every other caller arrive (and wait) before finishing.
                wait_until(|| arrived.load(Ordering::SeqCst) == GOROUTINES + THREADS);
                for _ in 0..100 {
                    yield_now();
                }
                value.store(1, Ordering::Relaxed);
            });
            // Relaxed: `call_once` must order the store before our return.
            assert_eq!(value.load(Ordering::Relaxed), 1, "once failed inside run");
            assert!(once.is_completed());
        }
    };
    let ts: Vec<_> = (0..THREADS)
        .map(|_| {
            thread::spawn(caller(
                once.clone(),
                calls.clone(),
                value.clone(),
                arrived.clone(),
            ))
        })
        .collect();
    let gs: Vec<_> = (0..GOROUTINES)
        .map(|_| {
            go(caller(
                once.clone(),
                calls.clone(),
                value.clone(),
                arrived.clone(),
            ))
        })
        .collect();
    gs.into_iter().for_each(|g| g.join().unwrap());
    ts.into_iter().for_each(|t| t.join().unwrap());
    assert_eq!(calls.load(Ordering::SeqCst), 1, "once failed outside run");
}

// Go's TestOncePanic: a panicking `f` still completes the Once.
#[test]
fn once_panic_completes_it() {
    let once = Once::new();
    assert!(!once.is_completed());
    let r = catch_unwind(AssertUnwindSafe(|| once.call_once(|| panic!("failed"))));
    assert!(r.is_err(), "Once.call_once did not panic");
    assert!(once.is_completed());
    once.call_once(|| panic!("Once.call_once called twice"));
    // The internal mutex was released by the unwind.
    let once = Arc::new(once);
    go(move || once.call_once(|| panic!("called twice")))
        .join()
        .unwrap();
}

// ---------------------------------------------------------------------------
// Condvar

// Producer/consumer over a bounded buffer with two condition variables;
// producers and consumers are goroutines and plain threads.
#[test]
fn condvar_producer_consumer() {
    const PER_PRODUCER: u64 = 2000;
    const PRODUCERS: u64 = 3;
    const CAP: usize = 4;
    struct Q {
        buf: Mutex<VecDeque<Option<u64>>>,
        not_empty: Condvar,
        not_full: Condvar,
    }
    let q = Arc::new(Q {
        buf: Mutex::new(VecDeque::new()),
        not_empty: Condvar::new(),
        not_full: Condvar::new(),
    });
    let put = |q: &Q, v: Option<u64>| {
        let mut b = q.not_full.wait_while(q.buf.lock(), |b| b.len() == CAP);
        b.push_back(v);
        drop(b);
        q.not_empty.notify_one();
    };
    let consumer = move |q: Arc<Q>| {
        move || {
            let mut sum = 0;
            loop {
                let mut b = q.not_empty.wait_while(q.buf.lock(), |b| b.is_empty());
                let v = b.pop_front().unwrap();
                drop(b);
                q.not_full.notify_one();
                match v {
                    Some(v) => sum += v,
                    None => return sum,
                }
            }
        }
    };
    // Producers report through a WaitGroup, so the main goroutine parks
    // (never blocks its thread on a thread join) until all are done.
    let produced = WaitGroup::new();
    produced.add(PRODUCERS as isize);
    let producer = move |q: Arc<Q>, p: u64, produced: WaitGroup| {
        move || {
            for i in 0..PER_PRODUCER {
                put(&q, Some(p * PER_PRODUCER + i));
            }
            produced.done();
        }
    };
    let tc = thread::spawn(consumer(q.clone()));
    let tp = thread::spawn(producer(q.clone(), 0, produced.clone()));
    let q2 = q.clone();
    let sum = run(move || {
        let cs: Vec<_> = (0..2).map(|_| go(consumer(q2.clone()))).collect();
        for p in 1..PRODUCERS {
            go(producer(q2.clone(), p, produced.clone()));
        }
        produced.wait();
        for _ in 0..3 {
            put(&q2, None);
        }
        cs.into_iter().map(|c| c.join().unwrap()).sum::<u64>()
    });
    tp.join().unwrap();
    let total = sum + tc.join().unwrap();
    let n = PRODUCERS * PER_PRODUCER;
    assert_eq!(total, n * (n - 1) / 2);
}

// Go's TestCondBroadcast, reduced: one notify_all wakes every waiter (each
// waits exactly once; there are no spurious wakeups to hide a miss).
#[test]
fn condvar_notify_all_wakes_everyone() {
    const GOROUTINES: usize = 12;
    const THREADS: usize = 3;
    let pair = Arc::new((Mutex::new(0usize), Condvar::new()));
    let woke = Arc::new(AtomicUsize::new(0));
    let waiter = move |pair: Arc<(Mutex<usize>, Condvar)>, woke: Arc<AtomicUsize>| {
        move || {
            let (m, c) = &*pair;
            let mut g = m.lock();
            *g += 1;
            let g = c.wait(g);
            woke.fetch_add(1, Ordering::SeqCst);
            drop(g);
        }
    };
    let ts: Vec<_> = (0..THREADS)
        .map(|_| thread::spawn(waiter(pair.clone(), woke.clone())))
        .collect();
    let gs: Vec<_> = (0..GOROUTINES)
        .map(|_| go(waiter(pair.clone(), woke.clone())))
        .collect();
    // Once the count is complete under the lock, every waiter has taken its
    // ticket (it released the lock only inside `wait`).
    wait_until(|| *pair.0.lock() == GOROUTINES + THREADS);
    assert_eq!(woke.load(Ordering::SeqCst), 0);
    pair.1.notify_all();
    gs.into_iter().for_each(|g| g.join().unwrap());
    ts.into_iter().for_each(|t| t.join().unwrap());
    assert_eq!(woke.load(Ordering::SeqCst), GOROUTINES + THREADS);
    // Nobody is left: these are no-ops.
    pair.1.notify_one();
    pair.1.notify_all();
}

// Go's TestCondSignalGenerations: waiters are woken one at a time, in the
// order they started waiting (FIFO), goroutines and threads mixed.
#[test]
fn condvar_notify_one_is_fifo() {
    const N: usize = 60;
    /// (waiters running, the order they woke in), and the condvar.
    type State = (Mutex<(usize, Vec<usize>)>, Condvar);
    let state = Arc::new((Mutex::new((0usize, Vec::new())), Condvar::new()));
    let waiter = move |state: Arc<State>, i: usize| {
        move || {
            let (m, c) = &*state;
            let mut g = m.lock();
            g.0 += 1; // "running": main waits for this before starting i+1
            let mut g = c.wait(g);
            g.1.push(i); // "awake"
        }
    };
    let mut ts = Vec::new();
    let mut gs = Vec::new();
    for i in 0..N {
        if i % 5 == 4 {
            ts.push(thread::spawn(waiter(state.clone(), i)));
        } else {
            gs.push(go(waiter(state.clone(), i)));
        }
        wait_until(|| state.0.lock().0 == i + 1);
    }
    for i in 0..N {
        state.1.notify_one();
        wait_until(|| state.0.lock().1.len() == i + 1);
        let v = state.0.lock().1[i];
        assert_eq!(v, i, "notified {v}, expected {i}");
    }
    gs.into_iter().for_each(|g| g.join().unwrap());
    ts.into_iter().for_each(|t| t.join().unwrap());
}

// A plain thread and a goroutine ping-pong through one Mutex and Condvar.
#[test]
fn condvar_ping_pong_thread_and_goroutine() {
    const ROUNDS: u32 = 2000;
    let pair = Arc::new((Mutex::new(0u32), Condvar::new()));
    let player = move |pair: Arc<(Mutex<u32>, Condvar)>, parity: u32| {
        move || {
            let (m, c) = &*pair;
            let mut g = m.lock();
            loop {
                g = c.wait_while(g, |n| *n % 2 != parity && *n < ROUNDS);
                if *g >= ROUNDS {
                    c.notify_all();
                    return;
                }
                *g += 1;
                c.notify_one();
            }
        }
    };
    let t = thread::spawn(player(pair.clone(), 0));
    go(player(pair.clone(), 1)).join().unwrap();
    t.join().unwrap();
    assert_eq!(*pair.0.lock(), ROUNDS);
}

// ---------------------------------------------------------------------------
// Semaphore

/// x/sync's HammerWeighted with an occupancy check: the units held never
/// exceed the size, and all of them come back.
fn hammer_semaphore(size: usize, goroutines: usize, threads: usize, loops: usize) {
    let s = Arc::new(Semaphore::new(size));
    let held = Arc::new(AtomicUsize::new(0));
    let worker = move |s: Arc<Semaphore>, held: Arc<AtomicUsize>, n: usize| {
        move || {
            for i in 0..loops {
                s.acquire(n);
                let now = held.fetch_add(n, Ordering::SeqCst) + n;
                assert!(now <= size, "{now} units held of {size}");
                if i % 3 == 0 {
                    yield_now();
                }
                held.fetch_sub(n, Ordering::SeqCst);
                s.release(n);
            }
        }
    };
    let ts: Vec<_> = (0..threads)
        .map(|j| thread::spawn(worker(s.clone(), held.clone(), j % size + 1)))
        .collect();
    let (s2, h2) = (s.clone(), held.clone());
    run(move || {
        let gs: Vec<_> = (0..goroutines)
            .map(|j| go(worker(s2.clone(), h2.clone(), (j + threads) % size + 1)))
            .collect();
        gs.into_iter().for_each(|g| g.join().unwrap());
    });
    ts.into_iter().for_each(|t| t.join().unwrap());
    assert!(s.try_acquire(size), "units were lost");
    s.release(size);
}

// x/sync's TestWeighted.
#[test]
fn semaphore_weighted_accounting() {
    hammer_semaphore(8, 12, 3, 1000);
}

isolated_test! {
    fn semaphore_weighted_gomaxprocs_1() ["GOMAXPROCS" = "1"] {
        watchdog(120);
        hammer_semaphore(6, 12, 2, 1000);
    }
}

// Requests are served strictly FIFO: a small request queued behind a large
// one waits even when it would fit.
#[test]
fn semaphore_fifo_order() {
    let s = Arc::new(Semaphore::new(2));
    let order = Arc::new(Mutex::new(Vec::new()));
    s.acquire(2);
    let big = {
        let (s, order) = (s.clone(), order.clone());
        go(move || {
            s.acquire(2);
            order.lock().push("big");
            s.release(2);
        })
    };
    // `try_acquire(0)` fails exactly when someone is queued.
    while s.try_acquire(0) {
        thread::yield_now();
    }
    let small = {
        let (s, order) = (s.clone(), order.clone());
        thread::spawn(move || {
            s.acquire(1);
            order.lock().push("small");
            s.release(1);
        })
    };
    s.release(1);
    thread::sleep(Duration::from_millis(5));
    assert!(
        order.lock().is_empty(),
        "the small request bypassed the big one at the front"
    );
    s.release(1);
    big.join().unwrap();
    small.join().unwrap();
    assert_eq!(*order.lock(), ["big", "small"]);
    assert!(s.try_acquire(2));
}

// x/sync's TestLargeAcquireDoesntStarve: workers keep releasing and
// re-acquiring one unit each; a request for all units must get through.
isolated_test! {
    fn semaphore_large_acquire_does_not_starve() ["GOMAXPROCS" = "2"] {
        watchdog(60);
        const N: usize = 4;
        run(|| {
            let s = Arc::new(Semaphore::new(N));
            let running = Arc::new(AtomicBool::new(true));
            let wg = WaitGroup::new();
            wg.add(N as isize);
            let mut workers = Vec::new();
            for _ in 0..N {
                s.acquire(1);
                let (s, running, wg) = (s.clone(), running.clone(), wg.clone());
                workers.push(go(move || {
                    let start = Instant::now();
                    let mut starved = false;
                    while running.load(Ordering::SeqCst) {
                        if start.elapsed() > Duration::from_secs(5) {
                            starved = true;
                            break;
                        }
                        busy_yield(Duration::from_micros(50));
                        s.release(1);
                        s.acquire(1);
                    }
                    s.release(1);
                    wg.done();
                    starved
                }));
            }
            s.acquire(N);
            running.store(false, Ordering::SeqCst);
            s.release(N);
            wg.wait();
            for w in workers {
                assert!(!w.join().unwrap(), "acquire(N) starved for 5 s by acquire(1)/release(1)");
            }
        });
    }
}

#[test]
fn semaphore_misuse_panics() {
    let s = Semaphore::new(2);
    let e = catch_unwind(AssertUnwindSafe(|| s.release(1))).unwrap_err();
    assert_eq!(
        e.downcast_ref::<&str>().copied(),
        Some("semaphore: released more than held")
    );
    let e = catch_unwind(AssertUnwindSafe(|| s.acquire(3))).unwrap_err();
    assert!(e
        .downcast_ref::<String>()
        .is_some_and(|m| m.contains("exceeds the size")));
    assert!(!s.try_acquire(3));
    // Still usable.
    s.acquire(2);
    s.release(2);
}

// ---------------------------------------------------------------------------
// Everything together, from goroutines and plain threads.

#[test]
fn all_primitives_shared_by_threads_and_goroutines() {
    struct Shared {
        m: Mutex<u64>,
        l: RwLock<u64>,
        s: Semaphore,
        once: Once,
        inits: AtomicUsize,
        pair: (Mutex<u64>, Condvar),
    }
    const WORKERS: usize = 12;
    const ITERS: u64 = 300;
    let sh = Arc::new(Shared {
        m: Mutex::new(0),
        l: RwLock::new(0),
        s: Semaphore::new(3),
        once: Once::new(),
        inits: AtomicUsize::new(0),
        pair: (Mutex::new(0), Condvar::new()),
    });
    let wg = WaitGroup::new();
    wg.add(WORKERS as isize);
    let work = move |sh: Arc<Shared>, wg: WaitGroup, id: u64| {
        move || {
            sh.once.call_once(|| {
                sh.inits.fetch_add(1, Ordering::SeqCst);
            });
            for i in 0..ITERS {
                *sh.m.lock() += 1;
                if i % 4 == 0 {
                    *sh.l.write() += 1;
                } else {
                    let _ = *sh.l.read();
                }
                sh.s.acquire(1 + (id as usize % 3));
                yield_now();
                sh.s.release(1 + (id as usize % 3));
                let (m, c) = &sh.pair;
                *m.lock() += 1;
                c.notify_all();
            }
            wg.done();
        }
    };
    let mut ts = Vec::new();
    let mut gs = Vec::new();
    for id in 0..WORKERS as u64 {
        let f = work(sh.clone(), wg.clone(), id);
        if id % 3 == 0 {
            ts.push(thread::spawn(f));
        } else {
            gs.push(go(f));
        }
    }
    // A goroutine watches the condvar until every increment is in.
    let total = WORKERS as u64 * ITERS;
    let watcher = {
        let sh = sh.clone();
        go(move || {
            let (m, c) = &sh.pair;
            drop(c.wait_while(m.lock(), |n| *n < total));
        })
    };
    wg.wait();
    watcher.join().unwrap();
    gs.into_iter().for_each(|g| g.join().unwrap());
    ts.into_iter().for_each(|t| t.join().unwrap());
    assert_eq!(*sh.m.lock(), total);
    assert_eq!(*sh.l.read(), WORKERS as u64 * ITERS.div_ceil(4));
    assert_eq!(sh.inits.load(Ordering::SeqCst), 1);
    assert!(sh.s.try_acquire(3));
}

// Compile-time: the primitives are shareable and the guards sendable.
#[allow(dead_code)]
fn assert_send_sync() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Mutex<u32>>();
    send_sync::<RwLock<u32>>();
    send_sync::<WaitGroup>();
    send_sync::<Once>();
    send_sync::<Condvar>();
    send_sync::<Semaphore>();
    send::<goroutine::sync::MutexGuard<'static, u32>>();
    send::<goroutine::sync::RwLockReadGuard<'static, u32>>();
    send::<goroutine::sync::RwLockWriteGuard<'static, u32>>();
}
