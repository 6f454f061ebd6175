//! The thread-local pattern of docs/soundness.md made sound: an `Rc` taken
//! from per-goroutine state, held across runtime calls that may move the
//! goroutine to another thread, then dropped. With a `thread_local!` this
//! is undefined behaviour (the count is updated from two threads without
//! synchronisation; it corrupted the count or the heap in 5 of 6 runs);
//! here it runs with `goroutine::local!` and with a goroutine pinned by
//! `Builder::lock_os_thread(true)`. Also run under ThreadSanitizer
//! (`.ci/sanitizers tsan`), which reports any unsynchronised access.

mod common;

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use common::within;
use goroutine::{go, Builder};

const GOROUTINES: usize = 16;

/// Iterations per goroutine (the issue used 100K; the sanitizer build is
/// ~20x slower).
#[cfg(not(goroutine_sanitize = "thread"))]
const ITERS: usize = 20_000;
#[cfg(goroutine_sanitize = "thread")]
const ITERS: usize = 2_000;

fn tid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

/// A runtime call that moves goroutines around: mostly yields, and every
/// 16th a sleep (the timer readies the goroutine on whichever P runs it).
fn switch(i: usize) {
    if i % 16 == 0 {
        goroutine::time::sleep(Duration::from_micros(1));
    } else {
        goroutine::yield_now();
    }
}

goroutine::local! {
    static SHARED: Rc<RefCell<u64>> = Rc::new(RefCell::new(0));
}

thread_local! {
    static THREAD_SHARED: Rc<RefCell<u64>> = Rc::new(RefCell::new(0));
}

// The pattern with goroutine::local!: each goroutine's Rc and its
// clones move together, so counts stay exact, and the goroutines do move
// between threads meanwhile.
isolated_test! {
    fn rc_held_across_runtime_calls_with_goroutine_local() {
        goroutine::set_max_procs(4);
        let moves = within(300, || {
            let hs: Vec<_> = (0..GOROUTINES)
                .map(|_| {
                    go(|| {
                        let mut moves = 0u64;
                        let mut last = tid();
                        for i in 0..ITERS {
                            let r = SHARED.with(|s| s.clone());
                            *r.borrow_mut() += 1;
                            switch(i);
                            assert_eq!(Rc::strong_count(&r), 2, "only ours and the local's");
                            drop(r);
                            let t = tid();
                            moves += u64::from(t != last);
                            last = t;
                        }
                        let total = SHARED.with(|s| *s.borrow());
                        assert_eq!(total, ITERS as u64, "one count per goroutine");
                        assert_eq!(SHARED.with(Rc::strong_count), 1);
                        moves
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
        });
        println!("{moves} thread changes in {} switches", GOROUTINES * ITERS);
        assert!(moves > 0, "no goroutine ever changed thread: the test proves nothing");
    }
}

// The same pattern with a plain thread_local!, made sound by pinning each
// goroutine to its thread: no other goroutine runs on that thread while it
// lives, so the thread's Rc has exactly two owners, ours and the
// thread-local's, and every access happens on that thread.
isolated_test! {
    fn rc_held_across_runtime_calls_with_pinned_goroutines() {
        goroutine::set_max_procs(4);
        within(300, || {
            let hs: Vec<_> = (0..GOROUTINES)
                .map(|_| {
                    Builder::new()
                        .lock_os_thread(true)
                        .spawn(|| {
                            let t = tid();
                            for i in 0..ITERS / 4 {
                                let r = THREAD_SHARED.with(|s| s.clone());
                                *r.borrow_mut() += 1;
                                switch(i);
                                assert_eq!(tid(), t, "a pinned goroutine changed thread");
                                assert_eq!(Rc::strong_count(&r), 2, "only ours and the thread's");
                                drop(r);
                            }
                            // The thread ran only this goroutine (it starts with
                            // the pin, and ends with it).
                            THREAD_SHARED.with(|s| *s.borrow())
                        })
                        .unwrap()
                })
                .collect();
            for h in hs {
                assert_eq!(h.join().unwrap(), (ITERS / 4) as u64);
            }
        });
    }
}
