//! `syscalls` (benchmarks.md #10): 2 CPU-bound goroutines beside 100
//! goroutines that loop a blocking `nanosleep(1 ms)` inside the runtime's
//! system-call wrapper. Each compute goroutine runs 204.8M steps (quick
//! 16.4M) of a 64-bit LCG, once alone (the no-syscall run) and once beside
//! the sleepers (started first and warmed up: 200 sleeps done), in the same
//! process. The figure is the slowdown: compute time beside the sleepers /
//! compute time alone (1.00 = no slowdown; 2.00 = half the throughput).
//! Row `syscalls.threads`: the peak OS threads of the process, sampled
//! every 2 ms from /proc/self/status (`Threads:`) by a thread of its own
//! (not counted; Go: a goroutine) from the start of the sleepers until
//! they have all returned, plus once at the end. Checked: each compute
//! result against the LCG's closed form (jump-ahead), and every sleeper
//! slept at least once.
//!
//! The wrappers: ours `goroutine::syscall` (Go's entersyscall: sysmon
//! hands the P off after ~20 us, and a goroutine whose last calls blocked
//! long hands it off as the next one begins when others wait for it); Go
//! `syscall.Nanosleep` (a
//! `syscall.Syscall`, so entersyscall/exitsyscall; Go's `time.Sleep` is no
//! system call); tokio `spawn_blocking` (its blocking pool) awaited by 100
//! tasks; OS threads: 100 threads calling nanosleep, the process pinned to
//! P CPUs. The compute loops must let the sleepers back in: Go preempts
//! them asynchronously, so its loop is plain; ours calls
//! `goroutine::preempt_point()` every 4096 steps (sysmon asks a goroutine
//! running > 10 ms to yield there; ours has no asynchronous preemption
//! yet), tokio awaits `task::coop::consume_budget()` every 4096 steps (its
//! cooperative budget: a yield every 128 calls), threads are preempted by
//! the kernel. may has no system-call wrapper: a blocking call holds its
//! worker, and its coroutines are never preempted, so with 100 sleepers
//! looping on P workers the compute coroutines would never run (n/a).
//!
//! `blocking` ([1/7]): the same, but the sleepers call plain
//! `std::thread::sleep(1 ms)` with no wrapper, as ordinary Rust code does.
//! Ours: sysmon notices each thread blocked in the kernel and hands its P
//! off (P revocation). Go: the same program as `syscalls` (every Go system
//! call goes through entersyscall; Go is the reference). tokio: a task
//! calling `std::thread::sleep` on a worker, then `yield_now().await` (it
//! blocks the worker for the sleep). may: n/a (a coroutine calling
//! `std::thread::sleep` holds its worker, and 100 of them starve the compute
//! coroutines: it timed out). OS threads: as in `syscalls`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::latency::ThreadSampler;
use super::{ours_run, Cfg, Extra, Figure};

/// Knuth's MMIX LCG (the same constants as bench/go/syscalls.go).
const A: u64 = 6_364_136_223_846_793_005;
const C: u64 = 1_442_695_040_888_963_407;
/// Steps between two preemption checks.
const CHUNK: u64 = 4096;
const SLEEPERS: u64 = 100;
const COMPUTE: u64 = 2;

fn chunks(c: Cfg) -> u64 {
    c.size(50_000, 4_000)
}

fn seed(k: u64) -> u64 {
    k + 1
}

/// One chunk of steps. `black_box` on each step keeps LLVM from folding
/// runs of steps into one multiply-add (it would, as the steps are affine
/// with constant coefficients); Go's compiler does no such folding.
#[inline(always)]
fn steps(mut x: u64) -> u64 {
    for _ in 0..CHUNK {
        x = std::hint::black_box(x).wrapping_mul(A).wrapping_add(C);
    }
    x
}

/// `chunks * CHUNK` LCG steps from `seed`, calling `check` after each chunk.
fn compute(seed: u64, chunks: u64, check: impl Fn()) -> u64 {
    let mut x = seed;
    for _ in 0..chunks {
        x = steps(std::hint::black_box(x));
        check();
    }
    x
}

/// `n` LCG steps from `x` in O(log n): the affine map x -> A x + C
/// composed with itself n times by squaring.
fn jump(x: u64, mut n: u64) -> u64 {
    let (mut am, mut cm) = (1u64, 0u64);
    let (mut a, mut c) = (A, C);
    while n > 0 {
        if n & 1 == 1 {
            am = am.wrapping_mul(a);
            cm = cm.wrapping_mul(a).wrapping_add(c);
        }
        c = c.wrapping_mul(a).wrapping_add(c);
        a = a.wrapping_mul(a);
        n >>= 1;
    }
    am.wrapping_mul(x).wrapping_add(cm)
}

fn nanosleep_1ms() {
    let ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 1_000_000,
    };
    // SAFETY: a valid timespec; no remainder wanted.
    unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
}

/// A compute phase: its time and each goroutine's result.
struct Phase {
    took: Duration,
    results: Vec<u64>,
}

fn figure(chunks: u64, alone: Phase, beside: Phase, sleeps: u64, threads: u64) -> Figure {
    let want: Vec<u64> = (0..COMPUTE)
        .map(|k| jump(seed(k), chunks * CHUNK))
        .collect();
    assert_eq!(
        alone.results, want,
        "syscalls: wrong compute result (alone)"
    );
    assert_eq!(
        beside.results, want,
        "syscalls: wrong compute result (beside the sleepers)"
    );
    assert!(
        sleeps >= SLEEPERS,
        "syscalls: only {sleeps} sleeps by {SLEEPERS} sleepers"
    );
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    Figure {
        value: beside.took.as_secs_f64() / alone.took.as_secs_f64(),
        unit: "x no-syscall time",
        answer: format!(
            "compute ok; {sleeps} sleeps; alone {:.1} ms, beside {:.1} ms",
            ms(alone.took),
            ms(beside.took)
        ),
        extra: vec![Extra {
            name: "threads",
            value: threads as f64,
            unit: "threads",
        }],
    }
}

/// What the sleepers share: the stop flag and the count of sleeps.
#[derive(Clone, Default)]
struct Sleepers {
    stop: Arc<AtomicBool>,
    sleeps: Arc<AtomicU64>,
}

impl Sleepers {
    /// One sleeper's loop: at least one sleep, then until stopped.
    fn run(&self, sleep: impl Fn()) {
        loop {
            sleep();
            self.sleeps.fetch_add(1, Ordering::AcqRel);
            if self.stop.load(Ordering::Acquire) {
                return;
            }
        }
    }

    fn warm(&self) -> bool {
        self.sleeps.load(Ordering::Acquire) >= 2 * SLEEPERS
    }
}

pub fn ours(c: Cfg) -> Figure {
    ours_with(c, true)
}

/// `blocking`: plain `std::thread::sleep` in goroutines, no wrapper.
pub fn ours_blocking(c: Cfg) -> Figure {
    ours_with(c, false)
}

fn ours_with(c: Cfg, wrapped: bool) -> Figure {
    let chunks = chunks(c);
    ours_run(c.procs, move || {
        let phase = || {
            let start = Instant::now();
            let hs: Vec<_> = (0..COMPUTE)
                .map(|k| goroutine::go(move || compute(seed(k), chunks, goroutine::preempt_point)))
                .collect();
            let results = hs.into_iter().map(|h| h.join().unwrap()).collect();
            Phase {
                took: start.elapsed(),
                results,
            }
        };
        let alone = phase();
        let sampler = ThreadSampler::start();
        let s = Sleepers::default();
        let hs: Vec<_> = (0..SLEEPERS)
            .map(|_| {
                let s = s.clone();
                goroutine::go(move || {
                    if wrapped {
                        s.run(|| goroutine::syscall(nanosleep_1ms))
                    } else {
                        s.run(|| std::thread::sleep(Duration::from_millis(1)))
                    }
                })
            })
            .collect();
        while !s.warm() {
            goroutine::time::sleep(Duration::from_millis(1));
        }
        let beside = phase();
        s.stop.store(true, Ordering::Release);
        for h in hs {
            h.join().expect("syscalls: sleeper panicked");
        }
        let threads = sampler.peak();
        figure(
            chunks,
            alone,
            beside,
            s.sleeps.load(Ordering::Acquire),
            threads,
        )
    })
}

pub fn tokio(c: Cfg) -> Figure {
    tokio_with(c, true)
}

/// `blocking`: a task calling `std::thread::sleep` on a worker.
pub fn tokio_blocking(c: Cfg) -> Figure {
    tokio_with(c, false)
}

fn tokio_with(c: Cfg, wrapped: bool) -> Figure {
    async fn compute_task(seed: u64, chunks: u64) -> u64 {
        let mut x = seed;
        for _ in 0..chunks {
            x = steps(x);
            tokio::task::coop::consume_budget().await;
        }
        x
    }
    let chunks = chunks(c);
    super::tokio_run_timed(c.procs, async move {
        let phase = || async move {
            let start = Instant::now();
            let hs: Vec<_> = (0..COMPUTE)
                .map(|k| tokio::spawn(compute_task(seed(k), chunks)))
                .collect();
            let mut results = Vec::new();
            for h in hs {
                results.push(h.await.unwrap());
            }
            Phase {
                took: start.elapsed(),
                results,
            }
        };
        let alone = phase().await;
        let sampler = ThreadSampler::start();
        let s = Sleepers::default();
        let hs: Vec<_> = (0..SLEEPERS)
            .map(|_| {
                let s = s.clone();
                tokio::spawn(async move {
                    loop {
                        if wrapped {
                            tokio::task::spawn_blocking(nanosleep_1ms).await.unwrap();
                        } else {
                            std::thread::sleep(Duration::from_millis(1));
                            tokio::task::yield_now().await;
                        }
                        s.sleeps.fetch_add(1, Ordering::AcqRel);
                        if s.stop.load(Ordering::Acquire) {
                            return;
                        }
                    }
                })
            })
            .collect();
        while !s.warm() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let beside = phase().await;
        s.stop.store(true, Ordering::Release);
        for h in hs {
            h.await.expect("syscalls: sleeper panicked");
        }
        let threads = sampler.peak();
        figure(
            chunks,
            alone,
            beside,
            s.sleeps.load(Ordering::Acquire),
            threads,
        )
    })
}

pub fn threads(c: Cfg) -> Figure {
    super::pin_threads(c.procs);
    let chunks = chunks(c);
    let phase = || {
        let start = Instant::now();
        let hs: Vec<_> = (0..COMPUTE)
            .map(|k| std::thread::spawn(move || compute(seed(k), chunks, || ())))
            .collect();
        let results = hs.into_iter().map(|h| h.join().unwrap()).collect();
        Phase {
            took: start.elapsed(),
            results,
        }
    };
    let alone = phase();
    let sampler = ThreadSampler::start();
    let s = Sleepers::default();
    let hs: Vec<_> = (0..SLEEPERS)
        .map(|_| {
            let s = s.clone();
            std::thread::spawn(move || s.run(nanosleep_1ms))
        })
        .collect();
    while !s.warm() {
        std::thread::sleep(Duration::from_millis(1));
    }
    let beside = phase();
    s.stop.store(true, Ordering::Release);
    for h in hs {
        h.join().expect("syscalls: sleeper panicked");
    }
    let threads = sampler.peak();
    figure(
        chunks,
        alone,
        beside,
        s.sleeps.load(Ordering::Acquire),
        threads,
    )
}

pub fn go(c: Cfg) -> (&'static str, Vec<String>) {
    ("syscalls", vec![(chunks(c) * CHUNK).to_string()])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jump_ahead() {
        for seed in [0, 1, 2, 12345] {
            let mut x = seed;
            for n in 0..300u64 {
                assert_eq!(jump(seed, n), x, "seed {seed} n {n}");
                x = x.wrapping_mul(A).wrapping_add(C);
            }
        }
        assert_eq!(compute(7, 3, || ()), jump(7, 3 * CHUNK));
    }

    #[test]
    fn figures() {
        let chunks = 2;
        let good = || Phase {
            took: Duration::from_millis(100),
            results: (0..COMPUTE).map(|k| jump(seed(k), 2 * CHUNK)).collect(),
        };
        let mut slow = good();
        slow.took = Duration::from_millis(150);
        let f = figure(chunks, good(), slow, 300, 105);
        assert!((f.value - 1.5).abs() < 1e-9, "{}", f.value);
        assert_eq!(f.extra[0].value, 105.0);
    }

    #[test]
    #[should_panic(expected = "wrong compute result (beside the sleepers)")]
    fn wrong_result() {
        let phase = |r: u64| Phase {
            took: Duration::from_millis(1),
            results: vec![jump(seed(0), CHUNK), r],
        };
        figure(1, phase(jump(seed(1), CHUNK)), phase(1), 300, 1);
    }

    #[test]
    #[should_panic(expected = "only 99 sleeps")]
    fn lazy_sleepers() {
        let phase = || Phase {
            took: Duration::from_millis(1),
            results: (0..COMPUTE).map(|k| jump(seed(k), CHUNK)).collect(),
        };
        figure(1, phase(), phase(), 99, 1);
    }
}
