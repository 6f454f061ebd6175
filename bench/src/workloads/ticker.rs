//! `latency_*`: a goroutine reads a 1 ms ticker and records its worst gap
//! while a load runs beside it. Each run starts the ticker goroutine (ours
//! `goroutine::time::Ticker`, Go `time.NewTicker(time.Millisecond)`), which
//! notes the time of every receive; lets it tick alone for 20 ms; runs the
//! load to completion in the same process; then stops the ticker (it sees
//! the stop flag at its next receive, so its last gap ends after the load
//! did). The gaps are those between consecutive receives, the later one
//! after the load began. The figure is the worst gap (ms; 1 ms is perfect);
//! rows `.p99`: the gaps' nearest-rank p99 (ms), and `.ticks_per_s`: the
//! receives during the load per second of load (a rate: 1,000 is perfect;
//! a tick that finds the channel full is dropped, as in Go).
//!
//! The loads (sizes full / `--quick`):
//! - `latency_yield`: 1,000 goroutines (quick 200), each 20 pieces of 30 us
//!   of CPU work (a spin on `Instant::elapsed`; Go `time.Since`), yielding
//!   after each (ours `goroutine::yield_now`, Go `runtime.Gosched`).
//! - `latency_spin`: the same without the yields: each goroutine runs ~0.6
//!   ms without a runtime call.
//! - `latency_blocking`: 1,000 goroutines (quick 100) each calling plain
//!   `std::thread::sleep(100 ms)` 5 times (quick 2): a burst of blocking
//!   calls outside the runtime, each holding its thread; ours hands the P
//!   off when sysmon notices (P revocation). Go: `syscall.Nanosleep`, a
//!   real blocking system call, which Go hands off the same way
//!   (entersyscall; every Go system call is wrapped; Go's `time.Sleep` is no
//!   system call).
//! - `latency_hog`: one goroutine computing 300 ms (quick 100) in a loop
//!   that makes no runtime call (it reads the clock, a vDSO call). Ours
//!   runs it as plain code, not in `goroutine::preemptible`, so at 1 worker
//!   nothing can stop it. Go preempts it (asynchronously, or at the
//!   prologue of `time.Since`, once sysmon has asked after 10 ms).
//! - `latency_mpsc`: 500 producer then 500 consumer goroutines (quick 100
//!   each), paired over `std::sync::mpsc::sync_channel(0)`, 200 messages a
//!   pair (quick 50): a foreign channel whose waits block the OS thread.
//!   Go has no foreign blocking channel: its peer uses Go's own unbuffered
//!   channels (which park the goroutine), so it is the easier load there.
//! - `latency_echo`: TCP echo over loopback (127.0.0.1), in one process: a
//!   server goroutine accepts 100 connections, one echo goroutine each (4
//!   KiB buffer, read then write back until end of file); 100 client
//!   goroutines each connect and make 2,000 round trips (quick 200) of 64
//!   B, TCP_NODELAY on both sides. Ours `goroutine::net`; Go `net`.
//!
//! Checked (a wrong answer panics): the pieces, sleeps or messages counted
//! (and the sum of the messages), the hog's clock having passed its time,
//! and every byte of every echo (client) and the bytes echoed (server).
//!
//! Peers: Go only. tokio: not written (its `interval` beside these loads
//! would be another study); may has no ticker; OS threads have no runtime
//! to measure.

use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::latency::percentile;
use super::{ours_run, Cfg, Extra, Figure};

/// Why the peers other than Go are not run.
pub const TOKIO_NA: &str = "not written (Go is this family's peer)";
pub const MAY_NA: &str = "may has no ticker";
pub const THREADS_NA: &str = "no runtime to measure";

/// The ticker's period.
pub const PERIOD: Duration = Duration::from_millis(1);
/// How long the ticker ticks alone before the load starts.
pub const WARM: Duration = Duration::from_millis(20);
/// The unit of the figure (Go's peer prints the same).
pub const UNIT: &str = "ms worst gap";

/// A piece of CPU work of `latency_yield` and `latency_spin`.
const PIECE: Duration = Duration::from_micros(30);
const PIECES: u64 = 20;
/// A plain blocking call of `latency_blocking`.
const NAP: Duration = Duration::from_millis(100);
/// `latency_echo`'s message size and connections.
const MSG: usize = 64;
const CONNS: u64 = 100;

fn workers(c: Cfg) -> u64 {
    c.size(1000, 200)
}
fn sleepers(c: Cfg) -> (u64, u64) {
    (c.size(1000, 100), c.size(5, 2))
}
fn hog_for(c: Cfg) -> Duration {
    Duration::from_millis(c.size(300, 100))
}
fn pairs(c: Cfg) -> (u64, u64) {
    (c.size(500, 100), c.size(200, 50))
}
fn trips(c: Cfg) -> u64 {
    c.size(2000, 200)
}

/// What one measurement saw.
pub struct Seen {
    /// The ticker goroutine's receive times, in order.
    pub ticks: Vec<Instant>,
    /// When the load began and ended.
    pub start: Instant,
    pub end: Instant,
    /// The load's (checked) answer.
    pub answer: String,
}

/// The gaps (ns) between consecutive receives, the later after `start`.
fn gaps(ticks: &[Instant], start: Instant) -> Vec<i64> {
    ticks
        .windows(2)
        .filter(|w| w[1] > start)
        .map(|w| (w[1] - w[0]).as_nanos() as i64)
        .collect()
}

/// The figure of a measurement: worst gap, p99, ticks per second of load.
pub fn figure(what: &str, s: Seen) -> Figure {
    let mut g = gaps(&s.ticks, s.start);
    assert!(
        !g.is_empty(),
        "{what}: the ticker never ticked after the load began"
    );
    g.sort_unstable();
    let ms = |ns: i64| ns as f64 / 1e6;
    let during = s
        .ticks
        .iter()
        .filter(|&&t| t >= s.start && t <= s.end)
        .count();
    let took = s.end.duration_since(s.start);
    // Where the worst gap ended, from the load's start (a diagnostic).
    let worst_end = s
        .ticks
        .windows(2)
        .filter(|w| w[1] > s.start)
        .max_by_key(|w| w[1] - w[0])
        .map_or(Duration::ZERO, |w| w[1] - s.start);
    Figure {
        value: ms(*g.last().unwrap()),
        unit: UNIT,
        answer: format!(
            "{}; {during} ticks in {:.3} s of load; the worst gap ended {:.1} ms into it",
            s.answer,
            took.as_secs_f64(),
            worst_end.as_secs_f64() * 1e3
        ),
        extra: vec![
            Extra {
                name: "p99",
                value: ms(percentile(&g, 99.0)),
                unit: "ms",
            },
            Extra {
                name: "ticks_per_s",
                value: during as f64 / took.as_secs_f64().max(1e-9),
                unit: "ticks/s",
            },
        ],
    }
}

/// One measurement on ours: the ticker goroutine, 20 ms alone, then `load`
/// (run by the main goroutine) to completion, then the ticker stopped.
fn measure(procs: usize, load: impl FnOnce() -> String + Send + 'static) -> Seen {
    ours_run(procs, move || {
        let stop = Arc::new(AtomicBool::new(false));
        let ticker = {
            let stop = stop.clone();
            goroutine::go(move || {
                let t = goroutine::time::Ticker::new(PERIOD);
                let mut ticks = Vec::with_capacity(1 << 14);
                loop {
                    t.c().recv().expect("ticker channel closed");
                    ticks.push(Instant::now());
                    if stop.load(Ordering::Acquire) {
                        break;
                    }
                }
                t.stop();
                ticks
            })
        };
        goroutine::time::sleep(WARM);
        let hist0 = sched_latencies();
        let start = Instant::now();
        let answer = load();
        let end = Instant::now();
        stop.store(true, Ordering::Release);
        let ticks = ticker.join().expect("ticker goroutine");
        if std::env::var_os("BENCH_SCHED_LATENCY").is_some() {
            report_sched_latencies(&hist0, &sched_latencies(), &ticks, start);
        }
        Seen {
            ticks,
            start,
            end,
            answer,
        }
    })
}

/// The runtime's `/sched/latencies:seconds` histogram (bounds, counts).
fn sched_latencies() -> (Vec<f64>, Vec<u64>) {
    let mut s = [goroutine::metrics::Sample::new("/sched/latencies:seconds")];
    goroutine::metrics::read(&mut s);
    match std::mem::take(&mut s[0].value) {
        goroutine::metrics::Value::Histogram {
            buckets, counts, ..
        } => (buckets, counts),
        v => panic!("/sched/latencies:seconds: {v:?}"),
    }
}

/// `BENCH_SCHED_LATENCY=1` (a check of the metric, not a figure): prints
/// on stderr the scheduling-latency histogram's percentiles over the load
/// (the bucket that holds each, in ms) beside the ticker's gap
/// percentiles minus the period (its own lateness), to compare.
fn report_sched_latencies(
    before: &(Vec<f64>, Vec<u64>),
    after: &(Vec<f64>, Vec<u64>),
    ticks: &[Instant],
    start: Instant,
) {
    let (bounds, counts) = after;
    let d: Vec<u64> = counts.iter().zip(&before.1).map(|(a, b)| a - b).collect();
    let total: u64 = d.iter().sum();
    let pct = |p: f64| {
        let rank = ((p * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in d.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return (bounds[i] * 1e3, bounds[i + 1] * 1e3);
            }
        }
        (f64::NAN, f64::NAN)
    };
    let mut gaps: Vec<i64> = ticks
        .windows(2)
        .filter(|w| w[1] > start)
        .map(|w| (w[1] - w[0]).as_nanos() as i64 - PERIOD.as_nanos() as i64)
        .collect();
    gaps.sort_unstable();
    for p in [0.5, 0.99] {
        let (lo, hi) = pct(p);
        eprintln!(
            "sched_latency p{:.0}: histogram [{lo:.3}, {hi:.3}) ms over {total} samples; \
             ticker gap - period: {:.3} ms over {} gaps",
            p * 100.0,
            percentile(&gaps, p * 100.0) as f64 / 1e6,
            gaps.len()
        );
    }
}

/// Spins on the clock for `d`; returns the clock reads.
fn spin(d: Duration) -> u64 {
    let t = Instant::now();
    let mut n = 1;
    while t.elapsed() < d {
        n += 1;
    }
    n
}

/// `n` goroutines of `PIECES` pieces each, yielding after each if asked.
fn pieces(n: u64, yield_each: bool) -> String {
    let hs: Vec<_> = (0..n)
        .map(|_| {
            goroutine::go(move || {
                let mut done = 0u64;
                for _ in 0..PIECES {
                    spin(PIECE);
                    done += 1;
                    if yield_each {
                        goroutine::yield_now();
                    }
                }
                done
            })
        })
        .collect();
    let total: u64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
    check_pieces(total, n)
}

fn check_pieces(total: u64, n: u64) -> String {
    assert_eq!(total, n * PIECES, "latency: wrong count of pieces");
    format!("{total} pieces of 30 us")
}

pub fn yield_ours(c: Cfg) -> Figure {
    let n = workers(c);
    figure("latency_yield", measure(c.procs, move || pieces(n, true)))
}

pub fn spin_ours(c: Cfg) -> Figure {
    let n = workers(c);
    figure("latency_spin", measure(c.procs, move || pieces(n, false)))
}

pub fn blocking_ours(c: Cfg) -> Figure {
    let (n, k) = sleepers(c);
    let seen = measure(c.procs, move || {
        let hs: Vec<_> = (0..n)
            .map(|_| {
                goroutine::go(move || {
                    let t = Instant::now();
                    for _ in 0..k {
                        std::thread::sleep(NAP);
                    }
                    assert!(
                        t.elapsed() >= NAP * k as u32,
                        "latency_blocking: short sleep"
                    );
                    k
                })
            })
            .collect();
        let total: u64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(total, n * k, "latency_blocking: wrong count of sleeps");
        format!("{total} sleeps of 100 ms")
    });
    figure("latency_blocking", seen)
}

pub fn hog_ours(c: Cfg) -> Figure {
    let d = hog_for(c);
    let seen = measure(c.procs, move || {
        let h = goroutine::go(move || {
            let t = Instant::now();
            let reads = spin(d);
            (reads, t.elapsed())
        });
        let (reads, took) = h.join().unwrap();
        check_hog(reads, took, d)
    });
    figure("latency_hog", seen)
}

fn check_hog(reads: u64, took: Duration, d: Duration) -> String {
    assert!(reads > 1 && took >= d, "latency_hog: the hog stopped early");
    format!("hog ran {} ms ({reads} clock reads)", took.as_millis())
}

pub fn mpsc_ours(c: Cfg) -> Figure {
    let (n, msgs) = pairs(c);
    let seen = measure(c.procs, move || {
        let (txs, rxs): (Vec<_>, Vec<_>) = (0..n)
            .map(|_| std::sync::mpsc::sync_channel::<u64>(0))
            .unzip();
        let producers: Vec<_> = txs
            .into_iter()
            .map(|tx| {
                goroutine::go(move || {
                    for v in 0..msgs {
                        tx.send(v).expect("latency_mpsc: send");
                    }
                })
            })
            .collect();
        let consumers: Vec<_> = rxs
            .into_iter()
            .map(|rx| goroutine::go(move || rx.iter().map(|v| (1, v)).fold((0, 0), add2)))
            .collect();
        producers.into_iter().for_each(|h| h.join().unwrap());
        let (count, sum) = consumers
            .into_iter()
            .map(|h| h.join().unwrap())
            .fold((0, 0), add2);
        check_mpsc(count, sum, n, msgs)
    });
    figure("latency_mpsc", seen)
}

fn add2(a: (u64, u64), b: (u64, u64)) -> (u64, u64) {
    (a.0 + b.0, a.1 + b.1)
}

fn check_mpsc(count: u64, sum: u64, n: u64, msgs: u64) -> String {
    assert_eq!(count, n * msgs, "latency_mpsc: wrong count of messages");
    assert_eq!(
        sum,
        n * (msgs * (msgs - 1) / 2),
        "latency_mpsc: wrong sum of messages"
    );
    format!("{count} messages, sum {sum}")
}

/// The bytes of message `i` of connection `conn`.
fn message(conn: u64, i: u64, buf: &mut [u8; MSG]) {
    for (j, b) in buf.iter_mut().enumerate() {
        *b = (conn.wrapping_mul(31) ^ i.wrapping_mul(7) ^ j as u64) as u8;
    }
}

pub fn echo_ours(c: Cfg) -> Figure {
    let n = trips(c);
    super::net::raise_fd_limit();
    let seen = measure(c.procs, move || {
        let l = goroutine::net::TcpListener::bind("127.0.0.1:0").expect("latency_echo: bind");
        let addr = l.local_addr().expect("local_addr");
        let server = goroutine::go(move || {
            let hs: Vec<_> = (0..CONNS)
                .map(|_| {
                    let (s, _) = l.accept().expect("latency_echo: accept");
                    s.set_nodelay(true).expect("nodelay");
                    goroutine::go(move || echo_conn(&s))
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
        });
        let clients: Vec<_> = (0..CONNS)
            .map(|conn| {
                goroutine::go(move || {
                    let s =
                        goroutine::net::TcpStream::connect(addr).expect("latency_echo: connect");
                    s.set_nodelay(true).expect("nodelay");
                    let (mut msg, mut back) = ([0u8; MSG], [0u8; MSG]);
                    for i in 0..n {
                        message(conn, i, &mut msg);
                        (&s).write_all(&msg).expect("latency_echo: write");
                        (&s).read_exact(&mut back).expect("latency_echo: read");
                        assert_eq!(msg, back, "latency_echo: wrong echo");
                    }
                    n
                })
            })
            .collect();
        let total: u64 = clients.into_iter().map(|h| h.join().unwrap()).sum();
        let echoed = server.join().unwrap();
        check_echo(total, echoed, n)
    });
    figure("latency_echo", seen)
}

/// Echoes what `s` receives until end of file; returns the bytes echoed.
fn echo_conn(mut s: &goroutine::net::TcpStream) -> u64 {
    let mut buf = vec![0u8; 4096];
    let mut echoed = 0;
    loop {
        let n = match s.read(&mut buf) {
            Ok(0) | Err(_) => return echoed,
            Ok(n) => n,
        };
        if s.write_all(&buf[..n]).is_err() {
            return echoed;
        }
        echoed += n as u64;
    }
}

fn check_echo(total: u64, echoed: u64, n: u64) -> String {
    assert_eq!(total, CONNS * n, "latency_echo: wrong count of round trips");
    assert_eq!(
        echoed,
        total * MSG as u64,
        "latency_echo: wrong count of bytes echoed"
    );
    format!("{total} round trips of {MSG} B over {CONNS} connections")
}

/// The Go peer (bench/go/ticker.go) and its arguments: the load's name,
/// then its sizes.
fn go_args(name: &'static str, sizes: &[u64]) -> (&'static str, Vec<String>) {
    let mut args = vec![name.to_string()];
    args.extend(sizes.iter().map(u64::to_string));
    ("ticker", args)
}

pub fn yield_go(c: Cfg) -> (&'static str, Vec<String>) {
    go_args("latency_yield", &[workers(c), PIECES])
}

pub fn spin_go(c: Cfg) -> (&'static str, Vec<String>) {
    go_args("latency_spin", &[workers(c), PIECES])
}

pub fn blocking_go(c: Cfg) -> (&'static str, Vec<String>) {
    let (n, k) = sleepers(c);
    go_args("latency_blocking", &[n, k])
}

pub fn hog_go(c: Cfg) -> (&'static str, Vec<String>) {
    go_args("latency_hog", &[hog_for(c).as_millis() as u64])
}

pub fn mpsc_go(c: Cfg) -> (&'static str, Vec<String>) {
    let (n, msgs) = pairs(c);
    go_args("latency_mpsc", &[n, msgs])
}

pub fn echo_go(c: Cfg) -> (&'static str, Vec<String>) {
    go_args("latency_echo", &[CONNS, trips(c)])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(offsets_us: &[u64], start_us: u64, end_us: u64) -> Seen {
        let t0 = Instant::now();
        let at = |us: u64| t0 + Duration::from_micros(us);
        Seen {
            ticks: offsets_us.iter().map(|&us| at(us)).collect(),
            start: at(start_us),
            end: at(end_us),
            answer: "ok".into(),
        }
    }

    #[test]
    fn figures() {
        // Warm ticks at 0..3 ms; the load from 2.5 ms to 10.5 ms; a 5 ms
        // gap inside it; the last receive after it.
        let s = seen(
            &[0, 1000, 2000, 3000, 4000, 9000, 10000, 11000],
            2500,
            10500,
        );
        let f = figure("t", s);
        assert_eq!(f.unit, UNIT);
        assert_eq!(f.value, 5.0);
        assert_eq!(f.extra[0].name, "p99");
        assert_eq!(f.extra[0].value, 5.0);
        assert_eq!(f.extra[1].name, "ticks_per_s");
        // 3000, 4000, 9000 and 10000 us fall in the 8 ms of load.
        assert!(
            (f.extra[1].value - 500.0).abs() < 1e-6,
            "{}",
            f.extra[1].value
        );
        assert!(super::super::higher_is_better(f.extra[1].unit));
        assert!(!super::super::higher_is_better(f.unit));
        assert_eq!(
            f.answer,
            "ok; 4 ticks in 0.008 s of load; the worst gap ended 6.5 ms into it"
        );
    }

    #[test]
    fn gaps_after_start() {
        let s = seen(&[0, 1000, 30000, 31000], 10000, 20000);
        // The warm gap (0 -> 1 ms) is not counted; the one across the
        // load's start is.
        let mut g = gaps(&s.ticks, s.start);
        g.sort_unstable();
        assert_eq!(g, [1_000_000, 29_000_000]);
        // A starved ticker: no receive during the load, a gap over it.
        let f = figure("t", s);
        assert_eq!(f.value, 29.0);
        assert_eq!(f.extra[1].value, 0.0);
    }

    #[test]
    #[should_panic(expected = "t: the ticker never ticked")]
    fn no_ticks() {
        figure("t", seen(&[0, 1000], 5000, 6000));
    }

    #[test]
    fn checks() {
        assert_eq!(check_pieces(40, 2), "40 pieces of 30 us");
        assert_eq!(check_mpsc(6, 6, 2, 3), "6 messages, sum 6");
        let ms = Duration::from_millis;
        assert!(check_hog(5, ms(101), ms(100)).starts_with("hog ran 101 ms"));
        assert!(check_echo(200, 200 * 64, 2).starts_with("200 round trips"));
    }

    #[test]
    #[should_panic(expected = "wrong count of pieces")]
    fn lost_piece() {
        check_pieces(39, 2);
    }

    #[test]
    #[should_panic(expected = "wrong sum of messages")]
    fn wrong_sum() {
        check_mpsc(6, 7, 2, 3);
    }

    #[test]
    #[should_panic(expected = "the hog stopped early")]
    fn short_hog() {
        check_hog(5, Duration::from_millis(99), Duration::from_millis(100));
    }

    #[test]
    #[should_panic(expected = "wrong count of bytes echoed")]
    fn short_echo() {
        check_echo(200, 200 * 64 - 1, 2);
    }

    #[test]
    fn messages_differ() {
        let (mut a, mut b) = ([0u8; MSG], [0u8; MSG]);
        message(1, 2, &mut a);
        message(1, 3, &mut b);
        assert_ne!(a, b);
        message(2, 2, &mut b);
        assert_ne!(a, b);
    }

    #[test]
    fn go_peer_args() {
        let quick = Cfg {
            procs: 1,
            quick: true,
        };
        assert_eq!(
            yield_go(quick),
            (
                "ticker",
                vec!["latency_yield".into(), "200".into(), "20".into()]
            )
        );
        assert_eq!(hog_go(quick).1, ["latency_hog", "100"]);
        assert_eq!(echo_go(quick).1, ["latency_echo", "100", "200"]);
    }
}
