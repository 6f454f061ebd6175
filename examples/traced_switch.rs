//! The cost of the `tracing` feature at a switch (issue 44): ping-pong
//! round trips and skynet with every goroutine inside a span of its own,
//! under three set-ups: no subscriber set (the switch pays one relaxed
//! load), a subscriber that tracks no span (`NoSubscriber`: the hooks run
//! and find nothing), and tracing-subscriber's registry (spans tracked per
//! thread: each switch exits the goroutine's span on the old thread and
//! enters it on the new one). Compare with `examples/pingpong.rs` and
//! `examples/skynet.rs` built without the feature. In ping-pong each
//! goroutine carries one span; in skynet two (its own, and its parent's,
//! which `go` starts it inside), and each spawn captures the spawner's.
//!
//! ```text
//! cargo run --release --features tracing --example traced_switch -- pingpong registry [ROUND_TRIPS]
//! cargo run --release --features tracing --example traced_switch -- skynet none [ROUNDS]
//! ```

use std::time::Instant;

use goroutine::{chan, go, Sender};
use tracing::info_span;

fn pingpong(n: u64) {
    let took = goroutine::run(move || {
        let (ping_tx, ping_rx) = chan::<u64>(0);
        let (pong_tx, pong_rx) = chan::<u64>(0);
        // Spawned before `ping` is entered (`go` would start it inside):
        // one span per goroutine.
        let echo = go(move || {
            let span = info_span!("echo");
            let _s = span.enter();
            for v in ping_rx {
                pong_tx.send(v).expect("pong");
            }
        });
        let span = info_span!("ping");
        let _s = span.enter();
        for i in 0..10_000 {
            ping_tx.send(i).expect("ping");
            pong_rx.recv().expect("pong");
        }
        let start = Instant::now();
        for i in 0..n {
            ping_tx.send(i).expect("ping");
            assert_eq!(pong_rx.recv(), Ok(i));
        }
        let took = start.elapsed();
        drop(ping_tx);
        echo.join().expect("echo");
        took
    });
    let rt = took.as_nanos() as f64 / n as f64;
    // Two switches out (and two in) per round trip.
    println!(
        "pingpong: {rt:.1} ns per round trip, {:.1} ns per switch",
        rt / 2.0
    );
}

fn skynet_node(up: Sender<u64>, num: u64, size: u64) {
    // A span of its own, inside its parent's (`go` starts the child
    // inside the spawner's span): two spans carried per goroutine.
    let span = info_span!("node", num);
    let _s = span.enter();
    if size == 1 {
        up.send(num).expect("skynet: parent gone");
        return;
    }
    let sub = size / 10;
    let (tx, rx) = chan::<u64>(0);
    for i in 0..10 {
        let tx = tx.clone();
        go(move || skynet_node(tx, num + i * sub, sub));
    }
    drop(tx);
    let sum: u64 = (0..10)
        .map(|_| rx.recv().expect("skynet: child gone"))
        .sum();
    up.send(sum).expect("skynet: parent gone");
}

fn skynet(rounds: u64) {
    for round in 1..=rounds {
        let start = Instant::now();
        let result = goroutine::run(|| {
            let (tx, rx) = chan::<u64>(0);
            go(move || skynet_node(tx, 0, 1_000_000));
            rx.recv().expect("skynet: no result")
        });
        assert_eq!(result, 499_999_500_000);
        println!("skynet round {round}: {} ms", start.elapsed().as_millis());
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let what = args.next().unwrap_or_else(|| "pingpong".into());
    let sub = args.next().unwrap_or_else(|| "registry".into());
    let n: Option<u64> = args.next().and_then(|s| s.parse().ok());
    match sub.as_str() {
        "none" => {}
        "nosub" => {
            tracing::subscriber::set_global_default(tracing::subscriber::NoSubscriber::new())
                .expect("subscriber")
        }
        "registry" => tracing::subscriber::set_global_default(tracing_subscriber::registry())
            .expect("subscriber"),
        other => panic!("unknown subscriber {other:?}: none, nosub or registry"),
    }
    println!(
        "{what}, subscriber {sub}, GOMAXPROCS={}",
        goroutine::max_procs()
    );
    match what.as_str() {
        "pingpong" => pingpong(n.unwrap_or(1_000_000)),
        "skynet" => skynet(n.unwrap_or(3)),
        other => panic!("unknown benchmark {other:?}: pingpong or skynet"),
    }
}
