//! `yield`: G goroutines each yield K times (1000 x 1000; quick 100 x 100);
//! ns per yield.

use std::time::Instant;

use super::{ours_run, per, tokio_run, Cfg, Figure};

fn gk(c: Cfg) -> (u64, u64) {
    if c.quick {
        (100, 100)
    } else {
        (1000, 1000)
    }
}

fn figure(took: std::time::Duration, g: u64, k: u64, done: u64) -> Figure {
    assert_eq!(done, g * k, "yield: wrong number of yields");
    Figure {
        value: per(took, g * k),
        unit: "ns/yield",
        answer: format!("{done} yields"),
        extra: Vec::new(),
    }
}

pub fn ours(c: Cfg) -> Figure {
    let (g, k) = gk(c);
    ours_run(c.procs, move || {
        let start = Instant::now();
        let hs: Vec<_> = (0..g)
            .map(|_| {
                goroutine::go(move || {
                    for _ in 0..k {
                        goroutine::yield_now();
                    }
                    k
                })
            })
            .collect();
        let done = hs.into_iter().map(|h| h.join().unwrap()).sum();
        figure(start.elapsed(), g, k, done)
    })
}

pub fn tokio(c: Cfg) -> Figure {
    let (g, k) = gk(c);
    tokio_run(c.procs, async move {
        let start = Instant::now();
        let hs: Vec<_> = (0..g)
            .map(|_| {
                tokio::spawn(async move {
                    for _ in 0..k {
                        tokio::task::yield_now().await;
                    }
                    k
                })
            })
            .collect();
        let mut done = 0;
        for h in hs {
            done += h.await.unwrap();
        }
        figure(start.elapsed(), g, k, done)
    })
}

pub fn may(c: Cfg) -> Figure {
    let (g, k) = gk(c);
    super::may_run(c.procs, move || {
        let start = Instant::now();
        let hs: Vec<_> = (0..g)
            .map(|_| {
                super::may_go(move || {
                    for _ in 0..k {
                        may::coroutine::yield_now();
                    }
                    k
                })
            })
            .collect();
        let done = hs.into_iter().map(|h| h.join().unwrap()).sum();
        figure(start.elapsed(), g, k, done)
    })
}

pub fn threads(c: Cfg) -> Figure {
    super::pin_threads(c.procs);
    let (g, k) = gk(c);
    let start = Instant::now();
    let hs: Vec<_> = (0..g)
        .map(|_| {
            std::thread::spawn(move || {
                for _ in 0..k {
                    std::thread::yield_now();
                }
                k
            })
        })
        .collect();
    let done = hs.into_iter().map(|h| h.join().unwrap()).sum();
    figure(start.elapsed(), g, k, done)
}

pub fn go(c: Cfg) -> (&'static str, Vec<String>) {
    let (g, k) = gk(c);
    (
        "yield",
        vec![g.to_string(), "1".into(), (g * k).to_string()],
    )
}
