//! `fib`: fib(30) as a spawn tree with cutoff 15 (benchmarks.md, beside
//! `steal_skew`). fib(n) for n >= 15 spawns a goroutine for fib(n-1),
//! computes fib(n-2) itself and joins the child (Go: the child sends its
//! result on a channel of capacity 1; tokio: `spawn` + awaiting the
//! `JoinHandle`); below 15 it recurses serially. 2,583 spawns per tree, most
//! of the time in the serial leaves, so the figure shows how well a
//! scheduler spreads a recursively spawned tree over its workers. The
//! answer (832040) is checked against an iterative fib; ms. The same size
//! under --quick (a few ms). The serial leaves are the same Rust code on
//! every Rust runtime; Go's are compiled by Go's compiler.

use std::future::Future;
use std::pin::Pin;
use std::time::Instant;

use super::{ms, ours_run, tokio_run, Cfg, Figure};

/// fib(N) is computed.
const N: u64 = 30;
/// Below this, fib recurses serially instead of spawning.
const CUTOFF: u64 = 15;

/// The serial recursion of the leaves.
fn serial(n: u64) -> u64 {
    if n < 2 {
        n
    } else {
        serial(n - 1) + serial(n - 2)
    }
}

/// fib(n) by iteration: the answer the trees are checked against.
fn expected(n: u64) -> u64 {
    let (mut a, mut b) = (0u64, 1u64);
    for _ in 0..n {
        (a, b) = (b, a + b);
    }
    a
}

/// Tasks a tree for fib(n) spawns.
fn spawns(n: u64) -> u64 {
    if n < CUTOFF {
        0
    } else {
        1 + spawns(n - 1) + spawns(n - 2)
    }
}

fn figure(took: std::time::Duration, got: u64) -> Figure {
    let want = expected(N);
    assert_eq!(got, want, "fib: fib({N}) = {got}, want {want}");
    Figure {
        value: ms(took),
        unit: "ms",
        answer: format!("fib({N}) = {got}, {} spawns", spawns(N)),
        extra: Vec::new(),
    }
}

fn ours_fib(n: u64) -> u64 {
    if n < CUTOFF {
        return serial(n);
    }
    let child = goroutine::go(move || ours_fib(n - 1));
    let b = ours_fib(n - 2);
    child.join().expect("fib: child panicked") + b
}

pub fn ours(c: Cfg) -> Figure {
    ours_run(c.procs, move || {
        let n = std::hint::black_box(N);
        let start = Instant::now();
        let got = ours_fib(n);
        figure(start.elapsed(), got)
    })
}

type Task = Pin<Box<dyn Future<Output = u64> + Send>>;

fn tokio_fib(n: u64) -> Task {
    Box::pin(async move {
        if n < CUTOFF {
            return serial(n);
        }
        let child = tokio::spawn(tokio_fib(n - 1));
        let b = tokio_fib(n - 2).await;
        child.await.expect("fib: child panicked") + b
    })
}

pub fn tokio(c: Cfg) -> Figure {
    tokio_run(c.procs, async move {
        let n = std::hint::black_box(N);
        let start = Instant::now();
        let got = tokio_fib(n).await;
        figure(start.elapsed(), got)
    })
}

fn may_fib(n: u64) -> u64 {
    if n < CUTOFF {
        return serial(n);
    }
    let child = super::may_go(move || may_fib(n - 1));
    let b = may_fib(n - 2);
    child.join().expect("fib: child panicked") + b
}

pub fn may(c: Cfg) -> Figure {
    super::may_run(c.procs, move || {
        let n = std::hint::black_box(N);
        let start = Instant::now();
        let got = may_fib(n);
        figure(start.elapsed(), got)
    })
}

pub fn go(_: Cfg) -> (&'static str, Vec<String>) {
    ("fib", vec![N.to_string(), CUTOFF.to_string()])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers() {
        assert_eq!(expected(N), 832_040);
        assert_eq!(serial(20), expected(20));
        assert_eq!(spawns(N), 2_583);
        assert_eq!(spawns(CUTOFF - 1), 0);
        assert_eq!(
            figure(std::time::Duration::from_millis(2), 832_040).value,
            2.0
        );
    }

    #[test]
    #[should_panic(expected = "fib: fib(30) = 832041")]
    fn wrong_answer() {
        figure(std::time::Duration::from_millis(2), 832_041);
    }
}
