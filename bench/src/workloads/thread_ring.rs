//! `thread_ring`: 503 goroutines in a ring of unbuffered channels pass a
//! token N = 5,000,000 times (quick 50,000; OS threads at most 200,000);
//! the last holder must be (N mod 503) + 1; ns per hop. tokio: bounded(1);
//! may: unbounded.

use std::time::Instant;

use super::{ours_run, per, tokio_run, Cfg, Figure};

const RING: usize = 503;

fn hops(c: Cfg) -> u64 {
    c.size(5_000_000, 50_000)
}

fn figure(took: std::time::Duration, n: u64, winner: usize) -> Figure {
    let want = (n % RING as u64) as usize + 1;
    assert_eq!(winner, want, "thread_ring: wrong last holder");
    Figure {
        value: per(took, n),
        unit: "ns/hop",
        answer: format!("holder {winner}"),
        extra: Vec::new(),
    }
}

pub fn ours(c: Cfg) -> Figure {
    use goroutine::{chan, go, Receiver, Sender};
    fn member(id: usize, input: Receiver<u64>, next: Sender<u64>, done: Sender<usize>) {
        for token in &input {
            if token == 0 {
                done.send(id).expect("thread_ring: main gone");
                return;
            }
            if next.send(token - 1).is_err() {
                return;
            }
        }
    }
    let n = hops(c);
    ours_run(c.procs, move || {
        let (done_tx, done_rx) = chan::<usize>(0);
        let (first_tx, mut input) = chan::<u64>(0);
        for id in 1..RING {
            let (tx, rx) = chan::<u64>(0);
            let mine = std::mem::replace(&mut input, rx);
            let done = done_tx.clone();
            go(move || member(id, mine, tx, done));
        }
        let last = first_tx.clone();
        go(move || member(RING, input, last, done_tx));
        let start = Instant::now();
        first_tx.send(n).expect("thread_ring: ring broken");
        let winner = done_rx.recv().expect("thread_ring: no winner");
        figure(start.elapsed(), n, winner)
    })
}

pub fn tokio(c: Cfg) -> Figure {
    use tokio::sync::mpsc::{channel, Receiver, Sender};
    async fn member(id: usize, mut input: Receiver<u64>, next: Sender<u64>, done: Sender<usize>) {
        while let Some(token) = input.recv().await {
            if token == 0 {
                done.send(id).await.expect("thread_ring: main gone");
                return;
            }
            if next.send(token - 1).await.is_err() {
                return;
            }
        }
    }
    let n = hops(c);
    tokio_run(c.procs, async move {
        let (done_tx, mut done_rx) = channel::<usize>(1);
        let (first_tx, mut input) = channel::<u64>(1);
        for id in 1..RING {
            let (tx, rx) = channel::<u64>(1);
            let mine = std::mem::replace(&mut input, rx);
            tokio::spawn(member(id, mine, tx, done_tx.clone()));
        }
        tokio::spawn(member(RING, input, first_tx.clone(), done_tx));
        let start = Instant::now();
        first_tx.send(n).await.expect("thread_ring: ring broken");
        let winner = done_rx.recv().await.expect("thread_ring: no winner");
        figure(start.elapsed(), n, winner)
    })
}

pub fn may(c: Cfg) -> Figure {
    use may::sync::mpsc::{channel, Receiver, Sender};
    fn member(id: usize, input: Receiver<u64>, next: Sender<u64>, done: Sender<usize>) {
        for token in input {
            if token == 0 {
                done.send(id).expect("thread_ring: main gone");
                return;
            }
            if next.send(token - 1).is_err() {
                return;
            }
        }
    }
    let n = hops(c);
    super::may_run(c.procs, move || {
        let (done_tx, done_rx) = channel::<usize>();
        let (first_tx, mut input) = channel::<u64>();
        for id in 1..RING {
            let (tx, rx) = channel::<u64>();
            let mine = std::mem::replace(&mut input, rx);
            let done = done_tx.clone();
            super::may_go(move || member(id, mine, tx, done));
        }
        let last = first_tx.clone();
        super::may_go(move || member(RING, input, last, done_tx));
        let start = Instant::now();
        first_tx.send(n).expect("thread_ring: ring broken");
        let winner = done_rx.recv().expect("thread_ring: no winner");
        figure(start.elapsed(), n, winner)
    })
}

pub fn threads(c: Cfg) -> Figure {
    use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
    fn member(id: usize, input: Receiver<u64>, next: SyncSender<u64>, done: SyncSender<usize>) {
        for token in input {
            if token == 0 {
                let _ = done.send(id);
                return;
            }
            if next.send(token - 1).is_err() {
                return;
            }
        }
    }
    super::pin_threads(c.procs);
    let n = hops(c).min(200_000);
    let (done_tx, done_rx) = sync_channel::<usize>(0);
    let (first_tx, mut input) = sync_channel::<u64>(0);
    for id in 1..RING {
        let (tx, rx) = sync_channel::<u64>(0);
        let mine = std::mem::replace(&mut input, rx);
        let done = done_tx.clone();
        std::thread::spawn(move || member(id, mine, tx, done));
    }
    let last = first_tx.clone();
    std::thread::spawn(move || member(RING, input, last, done_tx));
    let start = Instant::now();
    first_tx.send(n).expect("thread_ring: ring broken");
    let winner = done_rx.recv().expect("thread_ring: no winner");
    figure(start.elapsed(), n, winner)
}

pub fn go(c: Cfg) -> (&'static str, Vec<String>) {
    ("thread_ring", vec![hops(c).to_string()])
}
