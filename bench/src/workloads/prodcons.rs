//! `prodcons` (Go's BenchmarkChanProdCons0/10/100): GOMAXPROCS producers and
//! GOMAXPROCS consumers share one channel of capacity 0, 10 or 100;
//! producers take work in chunks of 1000 items from a shared counter; each
//! producer ends with a 0 marker. 4,000,000 items (quick 100,000); ns per
//! item. tokio: bounded(max(cap, 1)), the receiver behind a tokio Mutex
//! (tokio's mpsc has one consumer); may: not run (its channels are all
//! unbounded, so the capacity could not be honoured); threads: std
//! sync_channel(cap), the receiver behind a Mutex.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::{ours_run, per, tokio_run, Cfg, Figure};

const CHUNK: i64 = 1000;

fn items(c: Cfg) -> i64 {
    c.size(4_000_000, 100_000) as i64
}

fn figure(took: std::time::Duration, items: i64, got: u64) -> Figure {
    assert_eq!(got, items as u64, "prodcons: items lost or duplicated");
    Figure {
        value: per(took, items as u64),
        unit: "ns/item",
        answer: format!("{got} items"),
        extra: Vec::new(),
    }
}

pub fn ours(c: Cfg, cap: usize) -> Figure {
    let (items, procs) = (items(c), c.procs);
    ours_run(procs, move || {
        let chunks = Arc::new(AtomicI64::new(items / CHUNK));
        let (tx, rx) = goroutine::chan::<u32>(cap);
        let start = Instant::now();
        let mut hs = Vec::new();
        for _ in 0..procs {
            let (tx, chunks) = (tx.clone(), chunks.clone());
            hs.push(goroutine::go(move || {
                while chunks.fetch_sub(1, Ordering::Relaxed) > 0 {
                    for _ in 0..CHUNK {
                        tx.send(1).expect("send");
                    }
                }
                tx.send(0).expect("send end marker");
                0u64
            }));
            let rx = rx.clone();
            hs.push(goroutine::go(move || {
                let mut got = 0u64;
                while rx.recv().expect("recv") != 0 {
                    got += 1;
                }
                got
            }));
        }
        let got = hs.into_iter().map(|h| h.join().unwrap()).sum();
        figure(start.elapsed(), items, got)
    })
}

pub fn tokio(c: Cfg, cap: usize) -> Figure {
    let (items, procs) = (items(c), c.procs);
    tokio_run(procs, async move {
        let chunks = Arc::new(AtomicI64::new(items / CHUNK));
        let (tx, rx) = tokio::sync::mpsc::channel::<u32>(cap.max(1));
        let rx = Arc::new(tokio::sync::Mutex::new(rx));
        let start = Instant::now();
        let mut hs = Vec::new();
        for _ in 0..procs {
            let (tx, chunks) = (tx.clone(), chunks.clone());
            hs.push(tokio::spawn(async move {
                while chunks.fetch_sub(1, Ordering::Relaxed) > 0 {
                    for _ in 0..CHUNK {
                        tx.send(1).await.expect("send");
                    }
                }
                tx.send(0).await.expect("send end marker");
                0u64
            }));
            let rx = rx.clone();
            hs.push(tokio::spawn(async move {
                let mut got = 0u64;
                while rx.lock().await.recv().await.expect("recv") != 0 {
                    got += 1;
                }
                got
            }));
        }
        let mut got = 0;
        for h in hs {
            got += h.await.unwrap();
        }
        figure(start.elapsed(), items, got)
    })
}

/// Why may does not run prodcons.
pub const MAY_NA: &str = "may has no bounded channel";

pub fn threads(c: Cfg, cap: usize) -> Figure {
    super::pin_threads(c.procs);
    let (items, procs) = (items(c), c.procs);
    let chunks = Arc::new(AtomicI64::new(items / CHUNK));
    let (tx, rx) = std::sync::mpsc::sync_channel::<u32>(cap);
    let rx = Arc::new(Mutex::new(rx));
    let start = Instant::now();
    let mut hs = Vec::new();
    for _ in 0..procs {
        let (tx, chunks) = (tx.clone(), chunks.clone());
        hs.push(std::thread::spawn(move || {
            while chunks.fetch_sub(1, Ordering::Relaxed) > 0 {
                for _ in 0..CHUNK {
                    tx.send(1).expect("send");
                }
            }
            tx.send(0).expect("send end marker");
            0u64
        }));
        let rx = rx.clone();
        hs.push(std::thread::spawn(move || {
            let mut got = 0u64;
            while rx.lock().unwrap().recv().expect("recv") != 0 {
                got += 1;
            }
            got
        }));
    }
    let got = hs.into_iter().map(|h| h.join().unwrap()).sum();
    figure(start.elapsed(), items, got)
}

pub fn go(c: Cfg, cap: usize) -> (&'static str, Vec<String>) {
    ("prodcons", vec![items(c).to_string(), cap.to_string()])
}
