//! `fanout`: one producer -> chan(1024) -> W workers (4, 64 or 1024), each
//! selecting on the data channel and a quit channel -> chan(1024) -> one
//! collector (main), which checks the sum; 1,000,000 items (quick 50,000);
//! ns per item (the inverse of items/s). Ours and Go only for now.

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
        }
    })
}

pub fn go(c: Cfg, workers: usize) -> (&'static str, Vec<String>) {
    ("fanout", vec![items(c).to_string(), workers.to_string()])
}
