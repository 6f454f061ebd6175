//! `spawn_remote`: a thread outside the runtime (the process's main thread)
//! spawns 1,000,000 goroutines (quick 20,000), each counts a shared counter
//! down; the last one signals the thread; ns per goroutine. Go has no
//! threads outside its runtime, so it has no column here; tokio spawns
//! through a `Handle`, may from a plain thread.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Instant;

use super::{Cfg, Figure};

use super::spawn::n;

fn figure(took: std::time::Duration, n: u64, left: &AtomicUsize) -> Figure {
    super::spawn::counted_down("spawn_remote", took, n, left)
}

pub fn ours(c: Cfg) -> Figure {
    let n = n(c);
    goroutine::set_max_procs(c.procs);
    let left = Arc::new(AtomicUsize::new(n as usize));
    let (tx, rx) = mpsc::channel::<()>();
    let start = Instant::now();
    for _ in 0..n {
        let (left, tx) = (left.clone(), tx.clone());
        goroutine::go(move || {
            if left.fetch_sub(1, Ordering::AcqRel) == 1 {
                tx.send(()).expect("spawn_remote: main gone");
            }
        });
    }
    rx.recv().expect("spawn_remote: no signal");
    figure(start.elapsed(), n, &left)
}

pub fn tokio(c: Cfg) -> Figure {
    let n = n(c);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(c.procs)
        .build()
        .expect("tokio runtime");
    let handle = rt.handle().clone();
    let left = Arc::new(AtomicUsize::new(n as usize));
    let (tx, rx) = mpsc::channel::<()>();
    let start = Instant::now();
    for _ in 0..n {
        let (left, tx) = (left.clone(), tx.clone());
        handle.spawn(async move {
            if left.fetch_sub(1, Ordering::AcqRel) == 1 {
                tx.send(()).expect("spawn_remote: main gone");
            }
        });
    }
    rx.recv().expect("spawn_remote: no signal");
    figure(start.elapsed(), n, &left)
}

pub fn may(c: Cfg) -> Figure {
    let n = n(c);
    may::config().set_workers(c.procs);
    let left = Arc::new(AtomicUsize::new(n as usize));
    let (tx, rx) = mpsc::channel::<()>();
    let start = Instant::now();
    for _ in 0..n {
        let (left, tx) = (left.clone(), tx.clone());
        super::may_go(move || {
            if left.fetch_sub(1, Ordering::AcqRel) == 1 {
                tx.send(()).expect("spawn_remote: main gone");
            }
        });
    }
    rx.recv().expect("spawn_remote: no signal");
    figure(start.elapsed(), n, &left)
}
