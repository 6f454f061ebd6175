//! `steal_skew`: one goroutine spawns 100,000 tasks (quick 2,000); a fixed
//! xorshift sequence makes 10% of them spin 1 ms and the rest 1 us. The
//! figure is makespan / ideal, where ideal = total spin / P (1.00 is
//! perfect balance; 1 / efficiency of benchmarks.md).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{ours_run, tokio_run, Cfg, Figure};

fn tasks(c: Cfg) -> u64 {
    c.size(100_000, 2_000)
}

/// The spin of each task, in microseconds (the same sequence as
/// bench/go/steal_skew.go).
fn plan(n: u64) -> Vec<u64> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if x.is_multiple_of(10) {
                1000
            } else {
                1
            }
        })
        .collect()
}

fn spin(us: u64) {
    let t = Instant::now();
    let d = Duration::from_micros(us);
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

fn figure(took: Duration, plan: &[u64], procs: usize, done: u64) -> Figure {
    assert_eq!(done, plan.len() as u64, "steal_skew: tasks lost");
    let work_us: u64 = plan.iter().sum();
    let ideal = work_us as f64 / procs as f64;
    Figure {
        value: took.as_secs_f64() * 1e6 / ideal,
        unit: "x ideal",
        answer: format!("{done} tasks, {work_us} us of spin"),
        extra: Vec::new(),
    }
}

pub fn ours(c: Cfg) -> Figure {
    let (plan, procs) = (Arc::new(plan(tasks(c))), c.procs);
    ours_run(procs, move || {
        let wg = Arc::new(goroutine::sync::WaitGroup::new());
        let done = Arc::new(std::sync::atomic::AtomicU64::new(0));
        wg.add(plan.len() as isize);
        let start = Instant::now();
        let spawner = {
            let (plan, wg, done) = (plan.clone(), wg.clone(), done.clone());
            goroutine::go(move || {
                for &us in plan.iter() {
                    let (wg, done) = (wg.clone(), done.clone());
                    goroutine::go(move || {
                        spin(us);
                        done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        wg.done();
                    });
                }
            })
        };
        wg.wait();
        let took = start.elapsed();
        spawner.join().unwrap();
        let done = done.load(std::sync::atomic::Ordering::Relaxed);
        figure(took, &plan, procs, done)
    })
}

pub fn tokio(c: Cfg) -> Figure {
    let (plan, procs) = (Arc::new(plan(tasks(c))), c.procs);
    tokio_run(procs, async move {
        let start = Instant::now();
        let spawner = {
            let plan = plan.clone();
            tokio::spawn(async move {
                plan.iter()
                    .map(|&us| tokio::spawn(async move { spin(us) }))
                    .collect::<Vec<_>>()
            })
        };
        let mut done = 0;
        for h in spawner.await.unwrap() {
            h.await.unwrap();
            done += 1;
        }
        figure(start.elapsed(), &plan, procs, done)
    })
}

pub fn may(c: Cfg) -> Figure {
    let (plan, procs) = (Arc::new(plan(tasks(c))), c.procs);
    super::may_run(procs, move || {
        let start = Instant::now();
        let spawner = {
            let plan = plan.clone();
            super::may_go(move || {
                plan.iter()
                    .map(|&us| super::may_go(move || spin(us)))
                    .collect::<Vec<_>>()
            })
        };
        let mut done = 0;
        for h in spawner.join().unwrap() {
            h.join().unwrap();
            done += 1;
        }
        figure(start.elapsed(), &plan, procs, done)
    })
}

pub fn go(c: Cfg) -> (&'static str, Vec<String>) {
    ("steal_skew", vec![tasks(c).to_string()])
}
