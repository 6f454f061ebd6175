//! `pingpong_cross`: `pingpong` with the two sides forced onto different
//! workers (benchmarks.md's "forced cross-P" variant). Two goroutines bounce
//! a value over two channels of capacity 1, and each side only busy-polls
//! them with non-blocking operations (try_send / try_recv; Go: `select` with
//! `default`), never blocking and never yielding. A side therefore holds its
//! worker for the whole run, so the other side can only run on another
//! worker: every round trip is a value crossing between two workers and
//! back (cache-line transfers through the channel), with no park or wake-up
//! in it. 2M round trips (quick 20,000) after 10,000 warm-up trips (quick
//! 1,000); ns per round trip. Needs 2 workers: at 1 the spinning side would
//! starve the other, so every runtime is shown as n/a there.
//!
//! Capacity 1, not 0: a non-blocking send on an unbuffered channel succeeds
//! only when the receiver is parked in a receive, which a polling receiver
//! never is. tokio: `mpsc::channel(1)`; may: its only channel (unbounded; at
//! most one value is ever in flight, so it behaves as capacity 1, and its
//! `send` never blocks); OS threads: `sync_channel(1)`, the process pinned to
//! 2 CPUs. Each side gives up with a panic after 10 s without progress (the
//! sides would be sharing a worker), so a scheduler that cannot separate
//! them fails loudly instead of hanging.

use std::time::{Duration, Instant};

use super::pingpong::{figure, trips, warm};
use super::{ours_run, tokio_run, Cfg, Figure};

/// How long a side polls without an answer before it gives up.
const STALL: Duration = Duration::from_secs(10);

/// Calls `f` until it returns a value, without blocking or yielding.
fn poll<T>(mut f: impl FnMut() -> Option<T>) -> T {
    let mut tries = 0u32;
    let mut since = None;
    loop {
        if let Some(v) = f() {
            return v;
        }
        tries = tries.wrapping_add(1);
        if tries.is_multiple_of(4096) {
            let t: Instant = *since.get_or_insert_with(Instant::now);
            assert!(
                t.elapsed() < STALL,
                "pingpong_cross: no progress for {} s (the two sides share a worker?)",
                STALL.as_secs()
            );
        }
    }
}

/// The timing side: `warm` untimed round trips, then `n` timed ones with
/// the values 0..n, each checked; returns the time and the last value.
fn ping(
    warm: u64,
    n: u64,
    mut send: impl FnMut(u64) -> bool,
    mut recv: impl FnMut() -> Option<u64>,
) -> (Duration, u64) {
    let mut trip = |v: u64| {
        poll(|| send(v).then_some(()));
        let got = poll(&mut recv);
        assert_eq!(got, v, "pingpong_cross: wrong value");
        got
    };
    for i in 0..warm {
        trip(i);
    }
    let start = Instant::now();
    let mut last = 0;
    for i in 0..n {
        last = trip(i);
    }
    (start.elapsed(), last)
}

/// The echoing side: sends back each of `trips` values; returns the count.
fn pong(
    trips: u64,
    mut send: impl FnMut(u64) -> bool,
    mut recv: impl FnMut() -> Option<u64>,
) -> u64 {
    for _ in 0..trips {
        let v = poll(&mut recv);
        poll(|| send(v).then_some(()));
    }
    trips
}

fn checked((took, last): (Duration, u64), n: u64, echoed: u64, warm: u64) -> Figure {
    assert_eq!(echoed, warm + n, "pingpong_cross: echo side lost trips");
    let mut f = figure(took, n, last);
    f.answer = format!("{n} round trips across 2 workers");
    f
}

pub fn ours(c: Cfg) -> Figure {
    let (n, warm) = (trips(c), warm(c));
    ours_run(c.procs, move || {
        let (ping_tx, ping_rx) = goroutine::chan::<u64>(1);
        let (pong_tx, pong_rx) = goroutine::chan::<u64>(1);
        let echo = goroutine::go(move || {
            pong(
                warm + n,
                |v| pong_tx.try_send(v).is_ok(),
                || ping_rx.try_recv().ok(),
            )
        });
        let timer = goroutine::go(move || {
            ping(
                warm,
                n,
                |v| ping_tx.try_send(v).is_ok(),
                || pong_rx.try_recv().ok(),
            )
        });
        let timed = timer.join().expect("pingpong_cross: timing side");
        let echoed = echo.join().expect("pingpong_cross: echo side");
        checked(timed, n, echoed, warm)
    })
}

pub fn tokio(c: Cfg) -> Figure {
    let (n, warm) = (trips(c), warm(c));
    tokio_run(c.procs, async move {
        let (ping_tx, mut ping_rx) = tokio::sync::mpsc::channel::<u64>(1);
        let (pong_tx, mut pong_rx) = tokio::sync::mpsc::channel::<u64>(1);
        let echo = tokio::spawn(async move {
            pong(
                warm + n,
                |v| pong_tx.try_send(v).is_ok(),
                || ping_rx.try_recv().ok(),
            )
        });
        let timer = tokio::spawn(async move {
            ping(
                warm,
                n,
                |v| ping_tx.try_send(v).is_ok(),
                || pong_rx.try_recv().ok(),
            )
        });
        let timed = timer.await.expect("pingpong_cross: timing side");
        let echoed = echo.await.expect("pingpong_cross: echo side");
        checked(timed, n, echoed, warm)
    })
}

pub fn may(c: Cfg) -> Figure {
    let (n, warm) = (trips(c), warm(c));
    super::may_run(c.procs, move || {
        let (ping_tx, ping_rx) = may::sync::mpsc::channel::<u64>();
        let (pong_tx, pong_rx) = may::sync::mpsc::channel::<u64>();
        let echo = super::may_go(move || {
            pong(
                warm + n,
                |v| pong_tx.send(v).is_ok(),
                || ping_rx.try_recv().ok(),
            )
        });
        let timer = super::may_go(move || {
            ping(
                warm,
                n,
                |v| ping_tx.send(v).is_ok(),
                || pong_rx.try_recv().ok(),
            )
        });
        let timed = timer.join().expect("pingpong_cross: timing side");
        let echoed = echo.join().expect("pingpong_cross: echo side");
        checked(timed, n, echoed, warm)
    })
}

pub fn threads(c: Cfg) -> Figure {
    super::pin_threads(c.procs);
    let (n, warm) = (trips(c), warm(c));
    let (ping_tx, ping_rx) = std::sync::mpsc::sync_channel::<u64>(1);
    let (pong_tx, pong_rx) = std::sync::mpsc::sync_channel::<u64>(1);
    let echo = std::thread::spawn(move || {
        pong(
            warm + n,
            |v| pong_tx.try_send(v).is_ok(),
            || ping_rx.try_recv().ok(),
        )
    });
    let timer = std::thread::spawn(move || {
        ping(
            warm,
            n,
            |v| ping_tx.try_send(v).is_ok(),
            || pong_rx.try_recv().ok(),
        )
    });
    let timed = timer.join().expect("pingpong_cross: timing side");
    let echoed = echo.join().expect("pingpong_cross: echo side");
    checked(timed, n, echoed, warm)
}

pub fn go(c: Cfg) -> (&'static str, Vec<String>) {
    (
        "pingpong_cross",
        vec![trips(c).to_string(), warm(c).to_string()],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::sync_channel;

    /// The protocol on two plain threads: values come back in order and the
    /// figure's checks pass.
    #[test]
    fn protocol() {
        let (ping_tx, ping_rx) = sync_channel::<u64>(1);
        let (pong_tx, pong_rx) = sync_channel::<u64>(1);
        let echo = std::thread::spawn(move || {
            pong(
                150,
                |v| pong_tx.try_send(v).is_ok(),
                || ping_rx.try_recv().ok(),
            )
        });
        let timed = ping(
            50,
            100,
            |v| ping_tx.try_send(v).is_ok(),
            || pong_rx.try_recv().ok(),
        );
        assert_eq!(timed.1, 99);
        let f = checked(timed, 100, echo.join().unwrap(), 50);
        assert_eq!(f.unit, "ns/round trip");
    }

    #[test]
    #[should_panic(expected = "lost trips")]
    fn lost_trips() {
        checked((Duration::from_millis(1), 99), 100, 149, 50);
    }
}
