//! goroutine::local!: one value per goroutine, made lazily, kept across
//! thread changes, dropped when the goroutine ends (returning or
//! panicking) before `join` returns; per thread outside the runtime.

mod common;

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::within;
use goroutine::{go, AccessError};

/// Counts the drops of values tagged with its key (each test its own).
struct Tracked {
    tag: usize,
    drops: &'static [AtomicUsize; 8],
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.drops[self.tag].fetch_add(1, Ordering::SeqCst);
    }
}

static DROPS: [AtomicUsize; 8] = [const { AtomicUsize::new(0) }; 8];
static INITS: [AtomicUsize; 8] = [const { AtomicUsize::new(0) }; 8];

fn tracked(tag: usize) -> Tracked {
    INITS[tag].fetch_add(1, Ordering::SeqCst);
    Tracked { tag, drops: &DROPS }
}

goroutine::local! {
    static ID: Cell<u64> = Cell::new(0);
    static LOG: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
    static LAZY: Tracked = tracked(0);
    static ON_PANIC: Tracked = tracked(1);
    static OUTSIDE: Tracked = tracked(2);
    pub(crate) static COUNT: Cell<u32> = Cell::new(5);
}

#[test]
fn each_goroutine_has_its_own_value_across_runtime_calls() {
    within(60, || {
        let hs: Vec<_> = (1..=32u64)
            .map(|i| {
                go(move || {
                    assert_eq!(ID.get(), 0, "fresh value");
                    ID.set(i);
                    for k in 0..200 {
                        LOG.with_borrow_mut(|l| l.push(k));
                        if k % 10 == 0 {
                            goroutine::time::sleep(Duration::from_micros(10));
                        } else {
                            goroutine::yield_now();
                        }
                        assert_eq!(ID.get(), i);
                    }
                    LOG.with_borrow(|l| assert_eq!(l.len(), 200));
                    ID.replace(0)
                })
            })
            .collect();
        for (i, h) in (1..=32u64).zip(hs) {
            assert_eq!(h.join().unwrap(), i);
        }
        // The main goroutine's values are its own too.
        assert_eq!(ID.get(), 0);
        assert_eq!(COUNT.get(), 5);
    });
}

#[test]
fn made_on_first_use_and_dropped_before_join_returns() {
    within(60, || {
        let (inits, drops) = (&INITS[0], &DROPS[0]);
        let before = (inits.load(Ordering::SeqCst), drops.load(Ordering::SeqCst));
        // Not used: never made.
        go(|| ID.set(3)).join().unwrap();
        assert_eq!(inits.load(Ordering::SeqCst), before.0);
        // Used twice by each of 10 goroutines: made once per goroutine.
        let hs: Vec<_> = (0..10)
            .map(|_| {
                go(|| {
                    LAZY.with(|t| assert_eq!(t.tag, 0));
                    goroutine::yield_now();
                    LAZY.with(|t| assert_eq!(t.tag, 0));
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(inits.load(Ordering::SeqCst), before.0 + 10);
        assert_eq!(
            drops.load(Ordering::SeqCst),
            before.1 + 10,
            "dropped before join returned"
        );
    });
}

#[test]
fn dropped_when_the_goroutine_panics() {
    within(60, || {
        let before = DROPS[1].load(Ordering::SeqCst);
        let e = go(|| {
            ON_PANIC.with(|_| ());
            goroutine::yield_now();
            panic!("boom");
        })
        .join()
        .unwrap_err();
        assert!(e.is_panic());
        assert_eq!(e.message(), "boom");
        assert_eq!(DROPS[1].load(Ordering::SeqCst), before + 1);
    });
}

struct PanicsOnDrop;
impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        panic!("destructor of a local");
    }
}

goroutine::local! {
    static BAD: PanicsOnDrop = PanicsOnDrop;
}

#[test]
fn a_destructor_panic_is_the_goroutines_panic() {
    within(60, || {
        let e = go(|| BAD.with(|_| 7)).join().unwrap_err();
        assert!(e.is_panic());
        assert_eq!(e.message(), "destructor of a local");
        // The runtime goes on, and the G record's next goroutine starts clean.
        assert_eq!(go(|| COUNT.get()).join().unwrap(), 5);
    });
}

static SEEN_DURING_DROP: Mutex<Vec<Result<u32, AccessError>>> = Mutex::new(Vec::new());

struct UsesOtherOnDrop;
impl Drop for UsesOtherOnDrop {
    fn drop(&mut self) {
        let r = COUNT.try_with(|c| c.get());
        SEEN_DURING_DROP.lock().unwrap().push(r);
    }
}

goroutine::local! {
    static USES_OTHER: UsesOtherOnDrop = UsesOtherOnDrop;
}

#[test]
fn locals_cannot_be_used_while_being_destroyed() {
    within(60, || {
        go(|| {
            COUNT.set(9);
            USES_OTHER.with(|_| ());
        })
        .join()
        .unwrap();
        // Whether COUNT's value was dropped already or not, none may be used
        // or made again.
        let seen = SEEN_DURING_DROP.lock().unwrap().clone();
        assert_eq!(seen.len(), 1);
        let e: AccessError = seen[0].unwrap_err();
        assert!(
            e.to_string().contains("during or after its destruction"),
            "{e}"
        );
    });
}

goroutine::local! {
    static RECURSIVE: u32 = RECURSIVE.with(|v| *v + 1);
}

#[test]
fn an_initialiser_that_uses_its_own_key_panics() {
    within(60, || {
        let e = go(|| RECURSIVE.with(|v| *v)).join().unwrap_err();
        assert!(
            e.message().contains("recursive initialisation"),
            "{}",
            e.message()
        );
    });
}

#[test]
fn an_initialiser_may_park_and_use_other_keys() {
    goroutine::local! {
        static SLOW: u64 = {
            ID.set(41);
            goroutine::time::sleep(Duration::from_millis(1));
            ID.get() + 1
        };
    }
    within(60, || {
        let hs: Vec<_> = (0..8).map(|_| go(|| SLOW.with(|v| *v))).collect();
        for h in hs {
            assert_eq!(h.join().unwrap(), 42);
        }
    });
}

#[test]
fn outside_the_runtime_a_key_is_per_thread() {
    let before = (
        INITS[2].load(Ordering::SeqCst),
        DROPS[2].load(Ordering::SeqCst),
    );
    let counts = Arc::new(Mutex::new(Vec::new()));
    let ts: Vec<_> = (0..4)
        .map(|i| {
            let counts = counts.clone();
            std::thread::spawn(move || {
                COUNT.set(i);
                OUTSIDE.with(|t| assert_eq!(t.tag, 2));
                std::thread::yield_now();
                counts.lock().unwrap().push(COUNT.get());
                // A goroutine started from here has its own value.
                assert_eq!(go(|| COUNT.get()).join().unwrap(), 5);
                assert_eq!(COUNT.get(), i);
            })
        })
        .collect();
    for t in ts {
        t.join().unwrap();
    }
    let mut counts = counts.lock().unwrap().clone();
    counts.sort_unstable();
    assert_eq!(counts, vec![0, 1, 2, 3]);
    assert_eq!(INITS[2].load(Ordering::SeqCst), before.0 + 4);
    // Dropped at thread exit (join waits for the thread's destructors).
    assert_eq!(DROPS[2].load(Ordering::SeqCst), before.1 + 4);
}

#[test]
fn usable_inside_a_preemptible_region() {
    within(60, || {
        let hs: Vec<_> = (1..=4u64)
            .map(|i| {
                go(move || {
                    ID.set(i);
                    goroutine::preemptible(|| {
                        let mut sum = 0u64;
                        for _ in 0..2_000_000 {
                            sum = sum.wrapping_add(ID.get());
                        }
                        sum
                    })
                })
            })
            .collect();
        for (i, h) in (1..=4u64).zip(hs) {
            assert_eq!(h.join().unwrap(), i * 2_000_000);
        }
    });
}
