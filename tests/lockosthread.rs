//! LockOSThread: nesting, thread affinity across runtime calls, and the
//! thread exit of a goroutine that dies locked (ports of Go's tests).

mod common;

use std::time::Duration;

use common::within;
use goroutine::{chan, go};

fn tid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

fn thread_exists(tid: i32) -> bool {
    std::path::Path::new(&format!("/proc/self/task/{tid}")).exists()
}

// Go's TestLockOSThreadNesting: the goroutine stays locked until as many
// unlocks as locks.
#[test]
fn lock_os_thread_nesting() {
    within(30, || {
        go(|| {
            goroutine::lock_os_thread();
            goroutine::lock_os_thread();
            let t = tid();
            goroutine::unlock_os_thread();
            for _ in 0..100 {
                goroutine::yield_now();
                assert_eq!(tid(), t, "still locked after one unlock of two");
            }
            goroutine::unlock_os_thread();
            // Unlocking more than locked is a no-op.
            goroutine::unlock_os_thread();
        })
        .join()
        .unwrap();
    });
}

// The thread stays the same across 1,000 yields, channel operations and
// sleeps, while other goroutines keep all Ps busy.
#[test]
fn locked_goroutine_keeps_its_thread() {
    within(60, || {
        let (tx, rx) = chan::<u64>(0);
        let (done_tx, done_rx) = chan::<()>(0);
        let busy: Vec<_> = (0..4)
            .map(|_| {
                let done_rx = done_rx.clone();
                go(move || loop {
                    goroutine::select! {
                        recv(done_rx) -> _ => return,
                        default => goroutine::yield_now(),
                    }
                })
            })
            .collect();
        let echo = go(move || {
            for v in rx.iter() {
                if v == u64::MAX {
                    break;
                }
            }
        });
        let locked = go(move || {
            goroutine::lock_os_thread();
            let t = tid();
            for i in 0..1000u64 {
                goroutine::yield_now();
                tx.send(i).unwrap();
                if i % 100 == 0 {
                    goroutine::time::sleep(Duration::from_micros(100));
                }
                assert_eq!(tid(), t, "moved to another thread at step {i}");
            }
            tx.send(u64::MAX).unwrap();
            goroutine::unlock_os_thread();
            t
        });
        let t = locked.join().unwrap();
        assert!(t > 0);
        echo.join().unwrap();
        drop(done_tx);
        for b in busy {
            b.join().unwrap();
        }
    });
}

// Go's TestLockOSThreadExit: a goroutine that exits locked takes its thread
// with it; the runtime keeps working. (In its own process: another test's
// goroutine exiting locked would end a thread this one checks.)
isolated_test! {
    fn exiting_locked_goroutine_ends_its_thread() {
    within(30, || {
        let t = go(|| {
            goroutine::lock_os_thread();
            tid()
        })
        .join()
        .unwrap();
        let mut gone = false;
        for _ in 0..2000 {
            if !thread_exists(t) {
                gone = true;
                break;
            }
            goroutine::time::sleep(Duration::from_millis(1));
        }
        assert!(gone, "thread {t} of the exited locked goroutine is still there");
        // Unlocked before exit: the thread stays.
        let t2 = go(|| {
            goroutine::lock_os_thread();
            goroutine::unlock_os_thread();
            tid()
        })
        .join()
        .unwrap();
        goroutine::time::sleep(Duration::from_millis(20));
        assert!(thread_exists(t2));
        assert_eq!(go(|| 3).join().unwrap(), 3);
    });
    }
}

// A locked goroutine blocked in a channel receive does not hold a P: other
// goroutines still run at GOMAXPROCS=1.
#[test]
fn locked_goroutine_blocking_frees_the_p() {
    within(30, || {
        let prev = goroutine::set_max_procs(1);
        let (tx, rx) = chan::<i32>(0);
        let h = go(move || {
            goroutine::lock_os_thread();
            let t = tid();
            let v = rx.recv().unwrap();
            assert_eq!(tid(), t);
            goroutine::unlock_os_thread();
            v
        });
        let others: Vec<_> = (0..10).map(|i| go(move || i * 2)).collect();
        let sum: i32 = others.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(sum, 90);
        tx.send(5).unwrap();
        assert_eq!(h.join().unwrap(), 5);
        goroutine::set_max_procs(prev);
    });
}

// Builder::lock_os_thread(true): the goroutine's thread is the same from
// its closure's first instruction to its end, across runtime calls, while
// other goroutines keep every P busy; unlock_os_thread cannot undo the pin;
// the thread ends with the goroutine. (In its own process: the thread exit
// is checked.)
isolated_test! {
    fn pinned_goroutine_never_changes_thread() {
    goroutine::set_max_procs(2);
    within(60, || {
        let (stop_tx, stop_rx) = chan::<()>(0);
        let busy: Vec<_> = (0..4)
            .map(|_| {
                let stop_rx = stop_rx.clone();
                go(move || loop {
                    if stop_rx.try_recv().is_err_and(|e| e.is_closed()) {
                        return;
                    }
                    goroutine::yield_now();
                })
            })
            .collect();
        let pinned = goroutine::Builder::new()
            .lock_os_thread(true)
            .spawn(|| {
                let t = tid();
                // Undoing a pin is not possible, nor is undoing it twice.
                goroutine::unlock_os_thread();
                goroutine::unlock_os_thread();
                // A nested lock still counts as usual.
                goroutine::lock_os_thread();
                goroutine::unlock_os_thread();
                for i in 0..300 {
                    if i % 10 == 0 {
                        goroutine::time::sleep(Duration::from_micros(50));
                    } else {
                        goroutine::yield_now();
                    }
                    assert_eq!(tid(), t, "a pinned goroutine changed thread");
                }
                t
            })
            .unwrap();
        let t = pinned.join().unwrap();
        drop(stop_tx);
        for b in busy {
            b.join().unwrap();
        }
        let mut gone = false;
        for _ in 0..2000 {
            if !thread_exists(t) {
                gone = true;
                break;
            }
            goroutine::time::sleep(Duration::from_millis(1));
        }
        assert!(gone, "thread {t} of the ended pinned goroutine is still there");
        // The runtime goes on, and lock_os_thread(false) (the default) does
        // not pin: that goroutine's thread stays.
        let t2 = goroutine::Builder::new()
            .lock_os_thread(false)
            .spawn(|| {
                goroutine::yield_now();
                tid()
            })
            .unwrap()
            .join()
            .unwrap();
        goroutine::time::sleep(Duration::from_millis(20));
        assert!(thread_exists(t2), "an unpinned goroutine took its thread with it");
    });
    }
}
