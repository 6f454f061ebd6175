//! Soak: skynet (1,000,000 leaf goroutines) 50 times in one process. The
//! answer must be right every round and the resident memory must stop
//! growing after the first rounds (pools, free lists and caches reach a
//! steady state; nothing leaks per round).
//!
//! Release builds only: in a debug build 50 rounds take minutes.

mod common;

use goroutine::{chan, go, Sender};

fn skynet(up: Sender<u64>, num: u64, size: u64) {
    if size == 1 {
        up.send(num).expect("skynet: parent gone");
        return;
    }
    let sub = size / 10;
    let (tx, rx) = chan::<u64>(0);
    for i in 0..10 {
        let tx = tx.clone();
        go(move || skynet(tx, num + i * sub, sub));
    }
    drop(tx);
    let sum: u64 = (0..10)
        .map(|_| rx.recv().expect("skynet: child gone"))
        .sum();
    up.send(sum).expect("skynet: parent gone");
}

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("statm");
    let resident: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    // SAFETY: sysconf has no preconditions.
    resident * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64
}

isolated_test! {
    #[cfg_attr(debug_assertions, ignore = "release builds only (minutes in debug)")]
    fn skynet_fifty_rounds_rss_reaches_a_steady_state() {
        let mut rss = Vec::new();
        for round in 0..50 {
            let result = goroutine::run(|| {
                let (tx, rx) = chan::<u64>(0);
                go(move || skynet(tx, 0, 1_000_000));
                rx.recv().expect("skynet: no result")
            });
            assert_eq!(result, 499_999_500_000, "round {round}");
            rss.push(rss_bytes());
        }
        let mb = |b: u64| b / (1 << 20);
        println!(
            "RSS after rounds 1, 5, 10, 25, 50: {} {} {} {} {} MiB",
            mb(rss[0]),
            mb(rss[4]),
            mb(rss[9]),
            mb(rss[24]),
            mb(rss[49])
        );
        // Steady state: the last 40 rounds stay within 10% (+16 MiB) of the
        // highest RSS seen in the first 10.
        let early = *rss[..10].iter().max().unwrap();
        let late = *rss[10..].iter().max().unwrap();
        assert!(
            late <= early + early / 10 + (16 << 20),
            "RSS kept growing: first 10 rounds peaked at {} MiB, later rounds at {} MiB",
            mb(early),
            mb(late)
        );
    }
}
