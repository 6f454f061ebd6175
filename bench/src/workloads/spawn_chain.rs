//! `spawn_chain`: each goroutine spawns the next, 1,000,000 deep (quick
//! 20,000; OS threads at most 100,000); the last one reports; ns per
//! goroutine.

use std::time::Instant;

use super::{ours_run, per, tokio_run, Cfg, Figure};

fn n(c: Cfg) -> u64 {
    c.size(1_000_000, 20_000)
}

fn figure(took: std::time::Duration, n: u64, reached: u64) -> Figure {
    assert_eq!(reached, n, "spawn_chain: the chain broke");
    Figure {
        value: per(took, n),
        unit: "ns/task",
        answer: format!("{reached} links"),
        extra: Vec::new(),
    }
}

pub fn ours(c: Cfg) -> Figure {
    fn link(i: u64, n: u64, done: goroutine::Sender<u64>) {
        if i == n {
            done.send(i).expect("spawn_chain: main gone");
        } else {
            goroutine::go(move || link(i + 1, n, done));
        }
    }
    let n = n(c);
    ours_run(c.procs, move || {
        let (tx, rx) = goroutine::chan::<u64>(0);
        let start = Instant::now();
        goroutine::go(move || link(1, n, tx));
        let reached = rx.recv().expect("spawn_chain: no end");
        figure(start.elapsed(), n, reached)
    })
}

pub fn tokio(c: Cfg) -> Figure {
    fn link(i: u64, n: u64, done: tokio::sync::oneshot::Sender<u64>) {
        tokio::spawn(async move {
            if i == n {
                done.send(i).expect("spawn_chain: main gone");
            } else {
                link(i + 1, n, done);
            }
        });
    }
    let n = n(c);
    tokio_run(c.procs, async move {
        let (tx, rx) = tokio::sync::oneshot::channel::<u64>();
        let start = Instant::now();
        link(1, n, tx);
        let reached = rx.await.expect("spawn_chain: no end");
        figure(start.elapsed(), n, reached)
    })
}

pub fn may(c: Cfg) -> Figure {
    fn link(i: u64, n: u64, done: may::sync::mpsc::Sender<u64>) {
        if i == n {
            done.send(i).expect("spawn_chain: main gone");
        } else {
            super::may_go(move || link(i + 1, n, done));
        }
    }
    let n = n(c);
    super::may_run(c.procs, move || {
        let (tx, rx) = may::sync::mpsc::channel::<u64>();
        let start = Instant::now();
        super::may_go(move || link(1, n, tx));
        let reached = rx.recv().expect("spawn_chain: no end");
        figure(start.elapsed(), n, reached)
    })
}

pub fn threads(c: Cfg) -> Figure {
    fn link(i: u64, n: u64, done: std::sync::mpsc::Sender<u64>) {
        if i == n {
            done.send(i).expect("spawn_chain: main gone");
        } else {
            std::thread::spawn(move || link(i + 1, n, done));
        }
    }
    super::pin_threads(c.procs);
    let n = n(c).min(100_000);
    let (tx, rx) = std::sync::mpsc::channel::<u64>();
    let start = Instant::now();
    std::thread::spawn(move || link(1, n, tx));
    let reached = rx.recv().expect("spawn_chain: no end");
    figure(start.elapsed(), n, reached)
}

pub fn go(c: Cfg) -> (&'static str, Vec<String>) {
    ("spawn_chain", vec![n(c).to_string()])
}
