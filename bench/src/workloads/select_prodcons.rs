//! `select_prodcons` (Go's BenchmarkSelectProdCons): GOMAXPROCS producers
//! and consumers on one channel of capacity 128, every send and receive
//! through a select with two more arms that never fire (Go's benchmark uses
//! an hour-long timer and a never-closed channel; here two idle channels),
//! and 100 iterations of local work per item. 1,000,000 items (quick
//! 50,000); ns per item. Ours, Go and tokio (may: not yet).

use std::hint::black_box;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use goroutine::select;

use super::{ours_run, per, Cfg, Figure};

const CHUNK: i64 = 1000;

fn items(c: Cfg) -> i64 {
    c.size(1_000_000, 50_000) as i64
}

fn work(acc: &mut u64) {
    for _ in 0..100 {
        *acc = black_box(*acc * 2);
        *acc = black_box(*acc / 2);
    }
}

pub fn ours(c: Cfg) -> Figure {
    let (items, procs) = (items(c), c.procs);
    ours_run(procs, move || {
        let chunks = Arc::new(AtomicI64::new(items / CHUNK));
        let (tx, rx) = goroutine::chan::<u32>(128);
        let (idle_tx, idle_rx) = goroutine::chan::<()>(0);
        let start = Instant::now();
        let mut hs = Vec::new();
        for _ in 0..procs {
            let (tx, chunks) = (tx.clone(), chunks.clone());
            let (i1, i2) = (idle_rx.clone(), idle_rx.clone());
            hs.push(goroutine::go(move || {
                let mut acc = 1u64;
                while chunks.fetch_sub(1, Ordering::Relaxed) > 0 {
                    for _ in 0..CHUNK {
                        work(&mut acc);
                        select! {
                            send(tx, 1) -> r => r.expect("send"),
                            recv(i1) -> _ => unreachable!("idle channel fired"),
                            recv(i2) -> _ => unreachable!("idle channel fired"),
                        }
                    }
                }
                tx.send(0).expect("send end marker");
                assert_eq!(acc, 1);
                0u64
            }));
            let rx = rx.clone();
            let (i1, i2) = (idle_rx.clone(), idle_rx.clone());
            hs.push(goroutine::go(move || {
                let mut acc = 1u64;
                let mut got = 0u64;
                loop {
                    let v = select! {
                        recv(rx) -> v => v.expect("recv"),
                        recv(i1) -> _ => unreachable!("idle channel fired"),
                        recv(i2) -> _ => unreachable!("idle channel fired"),
                    };
                    if v == 0 {
                        break;
                    }
                    got += 1;
                    work(&mut acc);
                }
                assert_eq!(acc, 1);
                got
            }));
        }
        let got: u64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
        drop(idle_tx);
        assert_eq!(
            got, items as u64,
            "select_prodcons: items lost or duplicated"
        );
        Figure {
            value: per(start.elapsed(), items as u64),
            unit: "ns/item",
            answer: format!("{got} items"),
            extra: Vec::new(),
        }
    })
}

pub fn go(c: Cfg) -> (&'static str, Vec<String>) {
    ("select_prodcons", vec![items(c).to_string()])
}

/// tokio: `tokio::select!` over the send (or the receive, the receiver
/// behind a tokio Mutex, as tokio's mpsc has one consumer) and two idle
/// channels.
pub fn tokio(c: Cfg) -> Figure {
    use tokio::sync::mpsc::channel;
    let (items, procs) = (items(c), c.procs);
    super::tokio_run(procs, async move {
        let chunks = Arc::new(AtomicI64::new(items / CHUNK));
        let (tx, rx) = channel::<u32>(128);
        let rx = Arc::new(tokio::sync::Mutex::new(rx));
        let mut idle_txs = Vec::new();
        let mut idle = || {
            let (t, r) = channel::<()>(1);
            idle_txs.push(t);
            r
        };
        let start = Instant::now();
        let mut hs = Vec::new();
        for _ in 0..procs {
            let (tx, chunks) = (tx.clone(), chunks.clone());
            let (mut i1, mut i2) = (idle(), idle());
            hs.push(tokio::spawn(async move {
                let mut acc = 1u64;
                while chunks.fetch_sub(1, Ordering::Relaxed) > 0 {
                    for _ in 0..CHUNK {
                        work(&mut acc);
                        tokio::select! {
                            r = tx.send(1) => r.expect("send"),
                            _ = i1.recv() => unreachable!("idle channel fired"),
                            _ = i2.recv() => unreachable!("idle channel fired"),
                        }
                    }
                }
                tx.send(0).await.expect("send end marker");
                assert_eq!(acc, 1);
                0u64
            }));
            let rx = rx.clone();
            let (mut i1, mut i2) = (idle(), idle());
            hs.push(tokio::spawn(async move {
                let mut acc = 1u64;
                let mut got = 0u64;
                loop {
                    let v = tokio::select! {
                        v = async { rx.lock().await.recv().await } => v.expect("recv"),
                        _ = i1.recv() => unreachable!("idle channel fired"),
                        _ = i2.recv() => unreachable!("idle channel fired"),
                    };
                    if v == 0 {
                        break;
                    }
                    got += 1;
                    work(&mut acc);
                }
                assert_eq!(acc, 1);
                got
            }));
        }
        let mut got = 0;
        for h in hs {
            got += h.await.unwrap();
        }
        drop(idle_txs);
        assert_eq!(
            got, items as u64,
            "select_prodcons: items lost or duplicated"
        );
        Figure {
            value: per(start.elapsed(), items as u64),
            unit: "ns/item",
            answer: format!("{got} items"),
            extra: Vec::new(),
        }
    })
}
