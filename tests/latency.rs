//! A ready goroutine runs soon, whatever the others do (issue 38).
//!
//! A goroutine reads a 1 ms `time::Ticker` and records its worst gap while
//! a load runs beside it, at GOMAXPROCS 1 and 2 (each in its own process).
//! The bound is generous, 100 ms (debug builds: 400 ms, `DEBUG_FACTOR`),
//! and a load gets up to three measurements (`ATTEMPTS`), so that a loaded
//! 2-core VM passes; the
//! runtime's own figures (a few ms) are in BENCHMARKS.md's latency rows.
//! Before the fixes of 2026-12-06 several loads left the ticker waiting
//! 130-370 ms (the hog at GOMAXPROCS=1: 300 ms).

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use goroutine::{go, run};

/// The bound on the ticker's worst gap: 100 ms in release builds, times
/// `DEBUG_FACTOR` in debug builds, whose unoptimized scheduler and sysmon
/// run each pass several times slower (CI's debug run once saw 250 ms
/// beside the std mpsc pairs, whose typical worst gap is 3-6 ms there),
/// and times `GOROUTINE_TEST_TIME_SCALE` (tests/common) under an emulator.
const BOUND: Duration = Duration::from_millis(if cfg!(debug_assertions) {
    100 * DEBUG_FACTOR
} else {
    100
});

/// How much longer a debug build may take (see [`BOUND`]).
const DEBUG_FACTOR: u64 = 4;

/// About `us` microseconds of CPU work with no runtime call.
fn spin(us: u64) -> u64 {
    let t = Instant::now();
    let mut x = 1u64;
    while t.elapsed() < Duration::from_micros(us) {
        for _ in 0..64 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
    x
}

/// Runs `load` (it returns once its goroutines are done) beside a 1 ms
/// ticker; returns the ticker's worst gap and its tick count.
fn worst_gap(load: impl FnOnce() + Send + 'static) -> (Duration, usize) {
    common::within(120, move || {
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let ticker = go(move || {
            let t = goroutine::time::Ticker::new(Duration::from_millis(1));
            let mut worst = Duration::ZERO;
            let mut ticks = 0;
            let mut last = Instant::now();
            while !st.load(Ordering::Relaxed) {
                t.c().recv().unwrap();
                let now = Instant::now();
                worst = worst.max(now - last);
                last = now;
                ticks += 1;
            }
            (worst, ticks)
        });
        goroutine::time::sleep(Duration::from_millis(20));
        load();
        goroutine::time::sleep(Duration::from_millis(5));
        stop.store(true, Ordering::Relaxed);
        ticker.join().unwrap()
    })
}

/// Waits for `n` goroutines made by `f`, each given its index.
fn many(n: u64, f: impl Fn(u64) + Send + Sync + 'static) {
    let f = Arc::new(f);
    let hs: Vec<_> = (0..n)
        .map(|i| {
            let f = f.clone();
            go(move || f(i))
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
}

/// Measurements of one load before it fails: the first under the bound
/// passes. The test machines are VMs whose host now and then stalls a
/// virtual CPU (CI once saw 117-457 ms gaps in four loads of one run that
/// gave 1-7 ms on the rerun); the bugs these tests guard against stall the
/// ticker in every measurement (a hog at GOMAXPROCS=1: 300 ms, always).
const ATTEMPTS: usize = 3;

/// Runs `measure` (the load beside the ticker, returning the ticker's
/// worst gap and tick count) until a worst gap is under [`BOUND`], at most
/// [`ATTEMPTS`] times; fails with every figure otherwise.
fn check(what: &str, mut measure: impl FnMut() -> (Duration, usize)) {
    let procs = run(goroutine::max_procs);
    let mut seen = Vec::new();
    for _ in 0..ATTEMPTS {
        let (worst, ticks) = measure();
        eprintln!("{what} at GOMAXPROCS={procs}: worst gap {worst:?}, {ticks} ticks");
        assert!(ticks > 0, "{what}: the ticker never ticked");
        // Randomized scheduling (`--cfg goroutine_randomize`, Go's
        // randomizeScheduler) sends half the goroutines meant for runnext
        // to the ring's tail, on purpose: a woken ticker then waits behind
        // hundreds (240-490 ms here). The loads run there for their
        // behaviour; the bound is the default scheduler's promise. Nor
        // under ThreadSanitizer, where the loads run for its checks: a
        // `go` there is so slow, and slower the more goroutines have been
        // spawned, that `many(1_000, ..)` spawns for over a second, and the
        // spawner's P serves none of its timers meanwhile.
        if worst < common::scaled(BOUND)
            || cfg!(goroutine_randomize)
            || cfg!(goroutine_sanitize = "thread")
        {
            return;
        }
        seen.push(worst);
    }
    let bound = common::scaled(BOUND);
    panic!("{what}: the ticker waited {seen:?} in {ATTEMPTS} runs (bound {bound:?})");
}

/// 1,000 goroutines, each 20 pieces of ~30 us CPU work, with `yield_now`
/// after each piece or not.
fn cpu_pieces(yields: bool) {
    let what = if yields {
        "pieces with yields"
    } else {
        "pieces without yields"
    };
    check(what, || {
        let done = Arc::new(AtomicU64::new(0));
        let d = done.clone();
        let r = worst_gap(move || {
            many(1_000, move |_| {
                for _ in 0..20 {
                    std::hint::black_box(spin(30));
                    if yields {
                        goroutine::yield_now();
                    }
                }
                d.fetch_add(1, Ordering::Relaxed);
            })
        });
        assert_eq!(done.load(Ordering::Relaxed), 1_000);
        r
    });
}

/// A burst of plain blocking calls: 1,000 goroutines, each 2 x
/// `std::thread::sleep(50 ms)`.
fn blocking_burst() {
    check("1,000 plain blocking sleeps", || {
        worst_gap(|| {
            many(1_000, |_| {
                for _ in 0..2 {
                    std::thread::sleep(Duration::from_millis(50));
                }
            })
        })
    });
}

/// One goroutine computing 300 ms without a runtime call.
fn hog() {
    check("a 300 ms hog", || {
        worst_gap(|| {
            go(|| spin(300_000)).join().unwrap();
        })
    });
}

/// 500 producer and 500 consumer goroutines over std's rendezvous channel.
fn std_mpsc() {
    check("std mpsc pairs", || {
        let got = Arc::new(AtomicU64::new(0));
        let g = got.clone();
        let r = worst_gap(move || {
            let mut hs = Vec::new();
            for _ in 0..500 {
                let (tx, rx) = std::sync::mpsc::sync_channel::<u64>(0);
                hs.push(go(move || {
                    for i in 0..100 {
                        tx.send(i).unwrap();
                    }
                }));
                let g = g.clone();
                hs.push(go(move || {
                    while let Ok(v) = rx.recv() {
                        g.fetch_add(v, Ordering::Relaxed);
                    }
                }));
            }
            for h in hs {
                h.join().unwrap();
            }
        });
        assert_eq!(got.load(Ordering::Relaxed), 500 * (99 * 100 / 2));
        r
    });
}

/// One child process at a time: these children measure latency, and ten
/// of them at once on two cores measure the kernel's run queue instead.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A test whose body runs in its own process at GOMAXPROCS `$procs`, the
/// children of this file one after another.
macro_rules! latency_test {
    ($name:ident, $procs:literal, $body:expr) => {
        #[test]
        fn $name() {
            if !common::is_child(stringify!($name)) {
                let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
                common::run_isolated(stringify!($name), &[("GOMAXPROCS", $procs)]);
                return;
            }
            $body
        }
    };
}

macro_rules! at_both {
    ($($name1:ident, $name2:ident => $body:expr;)*) => {$(
        latency_test!($name1, "1", $body);
        latency_test!($name2, "2", $body);
    )*};
}

at_both! {
    cpu_pieces_with_yields_p1, cpu_pieces_with_yields_p2 => cpu_pieces(true);
    cpu_pieces_without_yields_p1, cpu_pieces_without_yields_p2 => cpu_pieces(false);
    blocking_burst_p1, blocking_burst_p2 => blocking_burst();
    hog_p1, hog_p2 => hog();
    std_mpsc_p1, std_mpsc_p2 => std_mpsc();
}
