//! `skynet` (atemerev/skynet): a 10-ary tree with 1,000,000 leaves (quick:
//! 10,000); each leaf sends its number up a channel, each node sums its 10
//! children; ms. Unbuffered channels where the runtime has them (tokio:
//! bounded(1); may: its only channel, unbounded).

use std::future::Future;
use std::pin::Pin;
use std::time::Instant;

use super::{ms, ours_run, tokio_run, Cfg, Figure};

fn leaves(c: Cfg) -> u64 {
    c.size(1_000_000, 10_000)
}

fn figure(took: std::time::Duration, leaves: u64, sum: u64) -> Figure {
    assert_eq!(sum, leaves * (leaves - 1) / 2, "skynet: wrong sum");
    Figure {
        value: ms(took),
        unit: "ms",
        answer: format!("sum {sum}"),
        extra: Vec::new(),
    }
}

fn ours_node(up: goroutine::Sender<u64>, num: u64, size: u64) {
    if size == 1 {
        up.send(num).expect("skynet: parent gone");
        return;
    }
    let sub = size / 10;
    let (tx, rx) = goroutine::chan::<u64>(0);
    for i in 0..10 {
        let tx = tx.clone();
        goroutine::go(move || ours_node(tx, num + i * sub, sub));
    }
    drop(tx);
    let sum: u64 = (0..10)
        .map(|_| rx.recv().expect("skynet: child gone"))
        .sum();
    up.send(sum).expect("skynet: parent gone");
}

pub fn ours(c: Cfg) -> Figure {
    let n = leaves(c);
    ours_run(c.procs, move || {
        let start = Instant::now();
        let (tx, rx) = goroutine::chan::<u64>(0);
        goroutine::go(move || ours_node(tx, 0, n));
        let sum = rx.recv().expect("skynet: no result");
        figure(start.elapsed(), n, sum)
    })
}

type Task = Pin<Box<dyn Future<Output = ()> + Send>>;

fn tokio_node(up: tokio::sync::mpsc::Sender<u64>, num: u64, size: u64) -> Task {
    Box::pin(async move {
        if size == 1 {
            up.send(num).await.expect("skynet: parent gone");
            return;
        }
        let sub = size / 10;
        let (tx, mut rx) = tokio::sync::mpsc::channel::<u64>(1);
        for i in 0..10 {
            tokio::spawn(tokio_node(tx.clone(), num + i * sub, sub));
        }
        drop(tx);
        let mut sum = 0;
        for _ in 0..10 {
            sum += rx.recv().await.expect("skynet: child gone");
        }
        up.send(sum).await.expect("skynet: parent gone");
    })
}

pub fn tokio(c: Cfg) -> Figure {
    let n = leaves(c);
    tokio_run(c.procs, async move {
        let start = Instant::now();
        let (tx, mut rx) = tokio::sync::mpsc::channel::<u64>(1);
        tokio::spawn(tokio_node(tx, 0, n));
        let sum = rx.recv().await.expect("skynet: no result");
        figure(start.elapsed(), n, sum)
    })
}

fn may_node(up: may::sync::mpsc::Sender<u64>, num: u64, size: u64) {
    if size == 1 {
        up.send(num).expect("skynet: parent gone");
        return;
    }
    let sub = size / 10;
    let (tx, rx) = may::sync::mpsc::channel::<u64>();
    for i in 0..10 {
        let tx = tx.clone();
        super::may_go(move || may_node(tx, num + i * sub, sub));
    }
    drop(tx);
    let sum: u64 = (0..10)
        .map(|_| rx.recv().expect("skynet: child gone"))
        .sum();
    up.send(sum).expect("skynet: parent gone");
}

pub fn may(c: Cfg) -> Figure {
    let n = leaves(c);
    super::may_run(c.procs, move || {
        let start = Instant::now();
        let (tx, rx) = may::sync::mpsc::channel::<u64>();
        super::may_go(move || may_node(tx, 0, n));
        let sum = rx.recv().expect("skynet: no result");
        figure(start.elapsed(), n, sum)
    })
}

pub fn go(c: Cfg) -> (&'static str, Vec<String>) {
    ("skynet", vec!["1".into(), leaves(c).to_string()])
}
