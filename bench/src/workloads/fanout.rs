//! `fanout`: one producer -> chan(1024) -> W workers (4, 64 or 1024), each
//! selecting on the data channel and a quit channel -> chan(1024) -> one
//! collector (main), which checks the sum; 1,000,000 items (quick 50,000);
//! ns per item (the inverse of items/s). Ours, Go and tokio (may: not yet).

use std::time::Instant;

use goroutine::select;

use super::{ours_run, per, Cfg, Figure};

fn items(c: Cfg) -> u64 {
    c.size(1_000_000, 50_000)
}

pub fn ours(c: Cfg, workers: usize) -> Figure {
    let n = items(c);
    ours_run(c.procs, move || {
        let (data_tx, data_rx) = goroutine::chan::<u64>(1024);
        let (out_tx, out_rx) = goroutine::chan::<u64>(1024);
        let (quit_tx, quit_rx) = goroutine::chan::<()>(0);
        let start = Instant::now();
        let hs: Vec<_> = (0..workers)
            .map(|_| {
                let (data, out, quit) = (data_rx.clone(), out_tx.clone(), quit_rx.clone());
                goroutine::go(move || loop {
                    select! {
                        recv(data) -> v => match v {
                            Ok(v) => out.send(v * 2).expect("fanout: collector gone"),
                            Err(_) => return,
                        },
                        recv(quit) -> _ => return,
                    }
                })
            })
            .collect();
        drop((data_rx, out_tx, quit_rx));
        let producer = goroutine::go(move || {
            for i in 0..n {
                data_tx.send(i).expect("fanout: workers gone");
            }
        });
        let sum: u64 = (0..n)
            .map(|_| out_rx.recv().expect("fanout: item lost"))
            .sum();
        let took = start.elapsed();
        drop(quit_tx);
        producer.join().unwrap();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(sum, n * (n - 1), "fanout: wrong sum");
        Figure {
            value: per(took, n),
            unit: "ns/item",
            answer: format!("sum {sum}"),
            extra: Vec::new(),
        }
    })
}

pub fn go(c: Cfg, workers: usize) -> (&'static str, Vec<String>) {
    ("fanout", vec![items(c).to_string(), workers.to_string()])
}

/// tokio: `tokio::select!` over the data receive (the receiver behind a
/// tokio Mutex: tokio's mpsc has one consumer) and a watch channel as quit.
pub fn tokio(c: Cfg, workers: usize) -> Figure {
    use std::sync::Arc;
    use tokio::sync::mpsc::channel;
    let n = items(c);
    super::tokio_run(c.procs, async move {
        let (data_tx, data_rx) = channel::<u64>(1024);
        let data_rx = Arc::new(tokio::sync::Mutex::new(data_rx));
        let (out_tx, mut out_rx) = channel::<u64>(1024);
        let (quit_tx, quit_rx) = tokio::sync::watch::channel(false);
        let start = Instant::now();
        let hs: Vec<_> = (0..workers)
            .map(|_| {
                let (data, out, mut quit) = (data_rx.clone(), out_tx.clone(), quit_rx.clone());
                tokio::spawn(async move {
                    loop {
                        tokio::select! {
                            v = async { data.lock().await.recv().await } => match v {
                                Some(v) => out.send(v * 2).await.expect("fanout: collector gone"),
                                None => return,
                            },
                            _ = quit.changed() => return,
                        }
                    }
                })
            })
            .collect();
        drop((out_tx, quit_rx));
        let producer = tokio::spawn(async move {
            for i in 0..n {
                data_tx.send(i).await.expect("fanout: workers gone");
            }
        });
        let mut sum = 0;
        for _ in 0..n {
            sum += out_rx.recv().await.expect("fanout: item lost");
        }
        let took = start.elapsed();
        // The workers may all have left already (the producer's end closed
        // the data channel), so the quit signal must not need a receiver.
        quit_tx.send_replace(true);
        producer.await.unwrap();
        for h in hs {
            h.await.unwrap();
        }
        assert_eq!(sum, n * (n - 1), "fanout: wrong sum");
        Figure {
            value: per(took, n),
            unit: "ns/item",
            answer: format!("sum {sum}"),
            extra: Vec::new(),
        }
    })
}
