//! The workloads: one module each, one function per runtime. Every function
//! runs one measurement at the worker count the driver asked for and checks
//! its answer (a wrong answer panics, which fails the worker process).

use std::time::Duration;

pub mod block_on;
pub mod echo;
pub mod fanout;
pub mod fib;
pub mod hog_fairness;
pub mod http;
pub mod latency;
pub mod local;
pub mod net;
pub mod parked;
pub mod pingpong;
pub mod pingpong_cross;
pub mod prodcons;
pub mod select_prodcons;
pub mod skynet;
pub mod spawn;
pub mod spawn_chain;
pub mod spawn_remote;
pub mod steal_skew;
pub mod syscalls;
pub mod thread_ring;
pub mod ticker;
pub mod timers;
pub mod yields;

/// One measurement: the figure (lower is better, unless its unit is a rate:
/// see [`higher_is_better`]), its unit, the answer the workload computed
/// (already checked), and secondary figures of the same run (each gets its
/// own table row, `<workload>.<name>`).
pub struct Figure {
    pub value: f64,
    pub unit: &'static str,
    pub answer: String,
    pub extra: Vec<Extra>,
}

/// A secondary figure of a run (lower is better unless a rate), e.g. `parked`'s wake-all
/// time beside its bytes per goroutine.
#[derive(Clone, Debug, PartialEq)]
pub struct Extra {
    pub name: &'static str,
    pub value: f64,
    pub unit: &'static str,
}

/// What a worker process was asked to do.
#[derive(Clone, Copy)]
pub struct Cfg {
    pub procs: usize,
    pub quick: bool,
}

impl Cfg {
    /// `full` normally, `quick` under `--quick`.
    pub fn size(&self, full: u64, quick: u64) -> u64 {
        if self.quick {
            quick
        } else {
            full
        }
    }
}

pub fn per(took: Duration, n: u64) -> f64 {
    took.as_nanos() as f64 / n.max(1) as f64
}

pub fn ms(took: Duration) -> f64 {
    took.as_secs_f64() * 1e3
}

/// Whether a bigger figure is the better one: rates (`req/s`), where ours /
/// best peer is ahead above 1. Every other unit (times, bytes, ratios of
/// times) is better smaller.
pub fn higher_is_better(unit: &str) -> bool {
    unit.ends_with("/s")
}

/// The runtimes a workload can run on, in table order.
pub const RUNTIMES: [&str; 5] = ["ours", "go", "tokio", "may", "threads"];

type Impl = fn(Cfg) -> Figure;
type GoImpl = fn(Cfg) -> (&'static str, Vec<String>);

/// The load generator of a network workload (see [`net`]): it runs in a
/// process of its own (`bench __client`), the same for every server.
pub struct Client {
    /// Loads the server at 127.0.0.1:port and measures; panics on a wrong
    /// answer.
    pub run: fn(Cfg, u16) -> Figure,
    /// Why it cannot run on this machine (a tool missing), if so: every
    /// runtime's cell then says so.
    pub missing: fn() -> Option<&'static str>,
}

/// A workload: its name, a one-line description, and its implementations
/// (`None` where a runtime does not run it, with the reason).
pub struct Workload {
    pub name: &'static str,
    pub what: &'static str,
    /// Fewest workers the workload makes sense at; below it every runtime
    /// is shown as "n/a (needs N workers)".
    pub min_procs: usize,
    /// A network workload's load generator: the runtimes' functions are
    /// then servers (they print their port and serve until stdin closes)
    /// and the figures are the client's.
    pub client: Option<Client>,
    pub ours: Impl,
    pub tokio: Result<Impl, &'static str>,
    pub may: Result<Impl, &'static str>,
    pub threads: Result<Impl, &'static str>,
    /// Go program in bench/go/ and its arguments (size decided by quick).
    pub go: Result<GoImpl, &'static str>,
}

pub fn all() -> Vec<Workload> {
    vec![
        Workload {
            name: "spawn",
            what: "1M goroutines each count down, spawned from one (ns per goroutine)",
            min_procs: 1,
            client: None,
            ours: spawn::ours,
            tokio: Ok(spawn::tokio),
            may: Ok(spawn::may),
            threads: Ok(spawn::threads),
            go: Ok(spawn::go),
        },
        Workload {
            name: "spawn_chain",
            what: "each goroutine spawns the next, 1M deep (ns per goroutine)",
            min_procs: 1,
            client: None,
            ours: spawn_chain::ours,
            tokio: Ok(spawn_chain::tokio),
            may: Ok(spawn_chain::may),
            threads: Ok(spawn_chain::threads),
            go: Ok(spawn_chain::go),
        },
        Workload {
            name: "spawn_remote",
            what: "1M goroutines spawned from a thread outside the runtime (ns per goroutine)",
            min_procs: 1,
            client: None,
            ours: spawn_remote::ours,
            tokio: Ok(spawn_remote::tokio),
            may: Ok(spawn_remote::may),
            threads: Err("same as spawn"),
            go: Err("Go has no threads outside its runtime"),
        },
        Workload {
            name: "block_on_ready",
            what: "block_on of a ready future, 1M times (ns per call; tokio: Handle::block_on from a thread)",
            min_procs: 1,
            client: None,
            ours: block_on::ready_ours,
            tokio: Ok(block_on::ready_tokio),
            may: Err("may has no block_on"),
            threads: Err("no runtime to bridge"),
            go: Err("Go has no futures"),
        },
        Workload {
            name: "block_on_wake",
            what: "a thread wakes a task waiting in block_on, which answers: 100K round trips (ns per round trip)",
            min_procs: 1,
            client: None,
            ours: block_on::wake_ours,
            tokio: Ok(block_on::wake_tokio),
            may: Err("may has no block_on"),
            threads: Err("no runtime to bridge"),
            go: Err("Go has no futures"),
        },
        Workload {
            name: "yield",
            what: "1000 goroutines x 1000 yields (ns per yield)",
            min_procs: 1,
            client: None,
            ours: yields::ours,
            tokio: Ok(yields::tokio),
            may: Ok(yields::may),
            threads: Ok(yields::threads),
            go: Ok(yields::go),
        },
        Workload {
            name: "skynet",
            what: "10-ary tree, 1M leaves, unbuffered channels (ms)",
            min_procs: 1,
            client: None,
            ours: skynet::ours,
            tokio: Ok(skynet::tokio),
            may: Ok(skynet::may),
            threads: Err("1M OS threads: not sensible"),
            go: Ok(skynet::go),
        },
        Workload {
            name: "pingpong",
            what: "two goroutines, unbuffered channel, 2M round trips, scheduled as the runtime likes (ns per round trip)",
            min_procs: 1,
            client: None,
            ours: pingpong::ours,
            tokio: Ok(pingpong::tokio),
            may: Ok(pingpong::may),
            threads: Ok(pingpong::threads),
            go: Ok(pingpong::go),
        },
        Workload {
            name: "pingpong_cross",
            what: "forced cross-P: two goroutines busy-poll try_send/try_recv on two cap-1 channels, never blocking or yielding, so each holds its own worker; 2M round trips (ns per round trip; needs 2 workers)",
            min_procs: 2,
            client: None,
            ours: pingpong_cross::ours,
            tokio: Ok(pingpong_cross::tokio),
            may: Ok(pingpong_cross::may),
            threads: Ok(pingpong_cross::threads),
            go: Ok(pingpong_cross::go),
        },
        Workload {
            name: "thread_ring",
            what: "503 goroutines in a ring, 5M hops (ns per hop)",
            min_procs: 1,
            client: None,
            ours: thread_ring::ours,
            tokio: Ok(thread_ring::tokio),
            may: Ok(thread_ring::may),
            threads: Ok(thread_ring::threads),
            go: Ok(thread_ring::go),
        },
        Workload {
            name: "prodcons0",
            what: "GOMAXPROCS producers + consumers, chan cap 0 (ns per item)",
            min_procs: 1,
            client: None,
            ours: |c| prodcons::ours(c, 0),
            tokio: Ok(|c| prodcons::tokio(c, 0)),
            may: Err(prodcons::MAY_NA),
            threads: Ok(|c| prodcons::threads(c, 0)),
            go: Ok(|c| prodcons::go(c, 0)),
        },
        Workload {
            name: "prodcons10",
            what: "the same, chan cap 10 (ns per item)",
            min_procs: 1,
            client: None,
            ours: |c| prodcons::ours(c, 10),
            tokio: Ok(|c| prodcons::tokio(c, 10)),
            may: Err(prodcons::MAY_NA),
            threads: Ok(|c| prodcons::threads(c, 10)),
            go: Ok(|c| prodcons::go(c, 10)),
        },
        Workload {
            name: "prodcons100",
            what: "the same, chan cap 100 (ns per item)",
            min_procs: 1,
            client: None,
            ours: |c| prodcons::ours(c, 100),
            tokio: Ok(|c| prodcons::tokio(c, 100)),
            may: Err(prodcons::MAY_NA),
            threads: Ok(|c| prodcons::threads(c, 100)),
            go: Ok(|c| prodcons::go(c, 100)),
        },
        Workload {
            name: "select_prodcons",
            what: "prodcons through select, cap 128, 100 units of work per item (ns per item)",
            min_procs: 1,
            client: None,
            ours: select_prodcons::ours,
            tokio: Ok(select_prodcons::tokio),
            may: Err("not written yet"),
            threads: Err("no select on std channels"),
            go: Ok(select_prodcons::go),
        },
        Workload {
            name: "parked",
            what: "100K goroutines blocked on a channel receive (bytes of RSS per goroutine; rows .spawn_park: ns per goroutine, .wake_all: ms)",
            min_procs: 1,
            client: None,
            ours: |c| parked::ours(c, parked::SMALL),
            tokio: Ok(|c| parked::tokio(c, parked::SMALL)),
            may: Ok(|c| parked::may(c, parked::SMALL)),
            threads: Err("100K OS threads: not sensible"),
            go: Ok(|c| parked::go(c, parked::SMALL)),
        },
        Workload {
            name: "parked_1m",
            what: "the same with 1M goroutines (quick: 100K)",
            min_procs: 1,
            client: None,
            ours: |c| parked::ours(c, parked::BIG),
            tokio: Ok(|c| parked::tokio(c, parked::BIG)),
            may: Ok(|c| parked::may(c, parked::BIG)),
            threads: Err("1M OS threads: not sensible"),
            go: Ok(|c| parked::go(c, parked::BIG)),
        },
        Workload {
            name: "fanout4",
            what: "1 producer -> chan(1024) -> 4 workers selecting on data and quit -> 1 collector (ns per item)",
            min_procs: 1,
            client: None,
            ours: |c| fanout::ours(c, 4),
            tokio: Ok(|c| fanout::tokio(c, 4)),
            may: Err("not written yet"),
            threads: Err("not written yet"),
            go: Ok(|c| fanout::go(c, 4)),
        },
        Workload {
            name: "fanout64",
            what: "1 producer -> chan(1024) -> 64 workers selecting on data and quit -> 1 collector (ns per item)",
            min_procs: 1,
            client: None,
            ours: |c| fanout::ours(c, 64),
            tokio: Ok(|c| fanout::tokio(c, 64)),
            may: Err("not written yet"),
            threads: Err("not written yet"),
            go: Ok(|c| fanout::go(c, 64)),
        },
        Workload {
            name: "fanout1024",
            what: "1 producer -> chan(1024) -> 1024 workers selecting on data and quit -> 1 collector (ns per item)",
            min_procs: 1,
            client: None,
            ours: |c| fanout::ours(c, 1024),
            tokio: Ok(|c| fanout::tokio(c, 1024)),
            may: Err("not written yet"),
            threads: Err("not written yet"),
            go: Ok(|c| fanout::go(c, 1024)),
        },
        Workload {
            name: "steal_skew",
            what: "100K tasks from one spawner, 10% spin 1 ms, 90% 1 us (makespan / ideal)",
            min_procs: 1,
            client: None,
            ours: steal_skew::ours,
            tokio: Ok(steal_skew::tokio),
            may: Ok(steal_skew::may),
            threads: Err("100K OS threads: not sensible"),
            go: Ok(steal_skew::go),
        },
        Workload {
            name: "fib",
            what: "fib(30) spawn tree, cutoff 15: spawn fib(n-1), compute fib(n-2), join; answer 832040 (ms)",
            min_procs: 1,
            client: None,
            ours: fib::ours,
            tokio: Ok(fib::tokio),
            may: Ok(fib::may),
            threads: Err("an OS thread per spawn (2,583 per tree): not sensible"),
            go: Ok(fib::go),
        },
        Workload {
            name: "hog_fairness",
            what: "1 worker: Go's BenchmarkPingPongHog, a ping-pong pair beside a spinning hog (ns per round trip); rows .probe_p99/.probe_max: P hogs beside a probe sleeping 1 ms in a loop, its lateness (ms); ours' hogs are plain loops in preemptible() (asynchronous preemption), tokio's await consume_budget()",
            min_procs: 1,
            client: None,
            ours: hog_fairness::ours,
            tokio: Ok(hog_fairness::tokio),
            may: Err("no preemption nor budget: a spinning coroutine keeps its worker"),
            threads: Ok(hog_fairness::threads),
            go: Ok(hog_fairness::go),
        },
        Workload {
            name: "syscalls",
            what: "2 compute goroutines beside 100 looping nanosleep(1 ms) in the syscall wrapper (compute time / time alone); row .threads: peak OS threads",
            min_procs: 1,
            client: None,
            ours: syscalls::ours,
            tokio: Ok(syscalls::tokio),
            may: Err("no syscall wrapper: a blocking call holds its worker"),
            threads: Ok(syscalls::threads),
            go: Ok(syscalls::go),
        },
        Workload {
            name: "blocking",
            what: "as syscalls, but the 100 sleepers call plain std::thread::sleep(1 ms) with no wrapper (compute time / time alone); row .threads: peak OS threads; Go runs its syscalls program (every Go syscall is wrapped)",
            min_procs: 1,
            client: None,
            ours: syscalls::ours_blocking,
            tokio: Ok(syscalls::tokio_blocking),
            may: Err("a blocking call holds its worker and coroutines are never preempted: with 100 sleepers on P workers the compute coroutines starve (timed out)"),
            threads: Ok(syscalls::threads),
            go: Ok(syscalls::go),
        },
        Workload {
            name: "timers",
            what: "100K goroutines each sleep 1 s + (i mod 1000) ms (oversleep p99, ms; rows .p50/.max)",
            min_procs: 1,
            client: None,
            ours: timers::ours,
            tokio: Ok(timers::tokio),
            may: Ok(timers::may),
            threads: Err("100K OS threads: not sensible"),
            go: Ok(timers::go),
        },
        Workload {
            name: "timers_churn",
            what: "1,000 pending timers; ~1M ops: start, reset, stop a fresh timer (ns per op)",
            min_procs: 1,
            client: None,
            ours: timers::churn_ours,
            tokio: Ok(timers::churn_tokio),
            may: Err("no timer object to reset or stop"),
            threads: Err("std has no timers"),
            go: Ok(timers::churn_go),
        },
        Workload {
            name: "latency_yield",
            what: "a 1 ms Ticker read by a goroutine beside 1,000 goroutines x 20 pieces of 30 us CPU work, a yield after each (quick 200 goroutines): the ticker's worst gap (ms; rows .p99: ms, .ticks_per_s: higher is better)",
            min_procs: 1,
            client: None,
            ours: ticker::yield_ours,
            tokio: Err(ticker::TOKIO_NA),
            may: Err(ticker::MAY_NA),
            threads: Err(ticker::THREADS_NA),
            go: Ok(ticker::yield_go),
        },
        Workload {
            name: "latency_spin",
            what: "the same, the pieces without yields (each goroutine ~0.6 ms without a runtime call)",
            min_procs: 1,
            client: None,
            ours: ticker::spin_ours,
            tokio: Err(ticker::TOKIO_NA),
            may: Err(ticker::MAY_NA),
            threads: Err(ticker::THREADS_NA),
            go: Ok(ticker::spin_go),
        },
        Workload {
            name: "latency_blocking",
            what: "the ticker beside 1,000 goroutines each calling plain std::thread::sleep(100 ms) 5 times (quick 100 x 2); Go: syscall.Nanosleep, a real blocking system call it hands off",
            min_procs: 1,
            client: None,
            ours: ticker::blocking_ours,
            tokio: Err(ticker::TOKIO_NA),
            may: Err(ticker::MAY_NA),
            threads: Err(ticker::THREADS_NA),
            go: Ok(ticker::blocking_go),
        },
        Workload {
            name: "latency_hog",
            what: "the ticker beside one goroutine computing 300 ms (quick 100) without a runtime call (ours: plain code, not preemptible())",
            min_procs: 1,
            client: None,
            ours: ticker::hog_ours,
            tokio: Err(ticker::TOKIO_NA),
            may: Err(ticker::MAY_NA),
            threads: Err(ticker::THREADS_NA),
            go: Ok(ticker::hog_go),
        },
        Workload {
            name: "latency_mpsc",
            what: "the ticker beside 500 producer + 500 consumer goroutines paired over std::sync::mpsc::sync_channel(0), 200 messages a pair (quick 100 pairs x 50); Go: its own unbuffered channels (no foreign blocking channel)",
            min_procs: 1,
            client: None,
            ours: ticker::mpsc_ours,
            tokio: Err(ticker::TOKIO_NA),
            may: Err(ticker::MAY_NA),
            threads: Err(ticker::THREADS_NA),
            go: Ok(ticker::mpsc_go),
        },
        Workload {
            name: "latency_echo",
            what: "the ticker beside TCP echo over loopback in the same process: 100 connections x 2,000 round trips of 64 B (quick 200), client and server goroutines (ours goroutine::net, Go net)",
            min_procs: 1,
            client: None,
            ours: ticker::echo_ours,
            tokio: Err(ticker::TOKIO_NA),
            may: Err(ticker::MAY_NA),
            threads: Err(ticker::THREADS_NA),
            go: Ok(ticker::echo_go),
        },
        Workload {
            name: "local",
            what: "goroutine-local storage: one goroutine per worker increments its own counter 10M times (quick 200K) through goroutine::local! / task_local! / coroutine_local! / thread_local! (ns per access; row .thread_local: ours' goroutines through std thread_local!)",
            min_procs: 1,
            client: None,
            ours: local::ours,
            tokio: Ok(local::tokio),
            may: Ok(local::may),
            threads: Ok(local::threads),
            go: Err("Go has no goroutine-local storage"),
        },
        Workload {
            name: "echo_100",
            what: "TCP echo over loopback, 100 connections, 64 B messages, closed loop for 5 s (quick 0.2 s), one client thread in its own process (req/s, higher is better; rows .p50_us/.p99_us: round trip; RSS: the server's)",
            min_procs: 1,
            client: Some(Client {
                run: |c, port| echo::client(c, port, 100, echo::SMALL),
                missing: || None,
            }),
            ours: echo::ours,
            tokio: Ok(echo::tokio),
            may: Ok(echo::may),
            threads: Ok(echo::threads),
            go: Ok(echo::go),
        },
        Workload {
            name: "echo_10k",
            what: "the same with 10,000 connections (quick 1,000)",
            min_procs: 1,
            client: Some(Client {
                run: |c, port| echo::client(c, port, echo::conns_10k(c), echo::SMALL),
                missing: || None,
            }),
            ours: echo::ours,
            tokio: Ok(echo::tokio),
            may: Ok(echo::may),
            threads: Err("10K OS threads: not sensible"),
            go: Ok(echo::go),
        },
        Workload {
            name: "echo_100_512b",
            what: "echo_100 with 512 B messages",
            min_procs: 1,
            client: Some(Client {
                run: |c, port| echo::client(c, port, 100, echo::LARGE),
                missing: || None,
            }),
            ours: echo::ours,
            tokio: Ok(echo::tokio),
            may: Ok(echo::may),
            threads: Ok(echo::threads),
            go: Ok(echo::go),
        },
        Workload {
            name: "http",
            what: "HTTP/1.1 keep-alive hello server loaded by wrk -t1 -c100 -d5s (quick -d1s) in its own process (req/s, higher is better; rows .p50_us/.p99_us: wrk's latency; RSS: the server's)",
            min_procs: 1,
            client: Some(Client {
                run: http::client,
                missing: http::wrk_missing,
            }),
            ours: http::ours,
            tokio: Ok(http::tokio),
            may: Ok(http::may),
            threads: Err("not run (thread per connection: see echo_100)"),
            go: Ok(http::go),
        },
    ]
}

/// `bench list`: every workload with its description, then those not
/// available yet, names aligned.
pub fn list() -> String {
    let all = all();
    let rows = all
        .iter()
        .map(|w| (w.name, w.what))
        .chain(NOT_YET.iter().copied());
    let width = rows.clone().map(|(n, _)| n.len()).max().unwrap_or(0);
    rows.map(|(name, what)| format!("{name:<width$} {what}\n"))
        .collect()
}

/// Workloads of benchmarks.md that the tool does not run yet (none now;
/// the driver answers their name with the reason).
pub const NOT_YET: [(&str, &str); 0] = [];

/// A tokio runtime with `procs` workers; the body runs as a task on it (not
/// on the calling thread), so only the workers run the workload.
pub fn tokio_run<F, T>(procs: usize, f: F) -> T
where
    F: std::future::Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let rt = ::tokio::runtime::Builder::new_multi_thread()
        .worker_threads(procs)
        .build()
        .expect("tokio runtime");
    rt.block_on(async move { ::tokio::spawn(f).await.expect("tokio task panicked") })
}

/// [`tokio_run`] with tokio's time driver enabled (`tokio::time`).
pub fn tokio_run_timed<F, T>(procs: usize, f: F) -> T
where
    F: std::future::Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let rt = ::tokio::runtime::Builder::new_multi_thread()
        .worker_threads(procs)
        .enable_time()
        .build()
        .expect("tokio runtime");
    rt.block_on(async move { ::tokio::spawn(f).await.expect("tokio task panicked") })
}

/// [`tokio_run`] with tokio's I/O and time drivers (the network servers).
pub fn tokio_run_net<F, T>(procs: usize, f: F) -> T
where
    F: std::future::Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let rt = ::tokio::runtime::Builder::new_multi_thread()
        .worker_threads(procs)
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(async move { ::tokio::spawn(f).await.expect("tokio task panicked") })
}

/// may with `procs` workers; the body runs in a coroutine.
pub fn may_run<F, T>(procs: usize, f: F) -> T
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    ::may::config().set_workers(procs);
    may_go(f).join().expect("may coroutine panicked")
}

/// Spawns a may coroutine.
pub fn may_go<F, T>(f: F) -> ::may::coroutine::JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    // SAFETY: the closures spawned here use no thread-local storage and do
    // not block the worker thread outside may's primitives (may's contract).
    unsafe { ::may::coroutine::spawn(f) }
}

/// Our runtime with `procs` Ps (the driver also sets GOMAXPROCS).
pub fn ours_run<F, T>(procs: usize, f: F) -> T
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    goroutine::set_max_procs(procs);
    goroutine::run(f)
}

/// Pins this process to `procs` CPUs, so OS threads get the same worker
/// count as the schedulers.
pub fn pin_threads(procs: usize) {
    // SAFETY: plain libc calls on a zeroed cpu_set_t owned here.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) != 0 {
            return;
        }
        let mut want: libc::cpu_set_t = std::mem::zeroed();
        let mut n = 0;
        for cpu in 0..libc::CPU_SETSIZE as usize {
            if n < procs && libc::CPU_ISSET(cpu, &set) {
                libc::CPU_SET(cpu, &mut want);
                n += 1;
            }
        }
        libc::sched_setaffinity(0, std::mem::size_of_val(&want), &want);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        let all = all();
        let mut names: Vec<&str> = all.iter().map(|w| w.name).collect();
        names.extend(NOT_YET.iter().map(|(n, _)| *n));
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count, "duplicate workload names");
        for n in &names {
            // Names become file names (`bench plot`) and `.` separates a
            // secondary figure's name.
            assert!(
                n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                "{n}"
            );
        }
        for w in &all {
            assert!(w.min_procs >= 1, "{}", w.name);
        }
    }

    #[test]
    fn listed() {
        let list = list();
        for w in all() {
            let line = list
                .lines()
                .find(|l| l.split_whitespace().next() == Some(w.name))
                .unwrap_or_else(|| panic!("{} not listed", w.name));
            assert!(line.ends_with(w.what), "{line}");
        }
        for want in [
            "pingpong",
            "pingpong_cross",
            "parked",
            "parked_1m",
            "fib",
            "steal_skew",
            "timers",
            "timers_churn",
            "syscalls",
            "blocking",
            "hog_fairness",
            "latency_yield",
            "latency_spin",
            "latency_blocking",
            "latency_hog",
            "latency_mpsc",
            "latency_echo",
        ] {
            assert!(all().iter().any(|w| w.name == want), "{want}");
        }
        for name in ["echo_100", "echo_10k", "echo_100_512b", "http"] {
            let w = all().into_iter().find(|w| w.name == name).unwrap();
            assert!(w.client.is_some(), "{name} has a load generator");
            assert!(!list.contains("not yet available"), "{list}");
        }
        assert!(all()
            .iter()
            .filter(|w| !w.name.starts_with("echo") && w.name != "http")
            .all(|w| w.client.is_none()));
        // Descriptions start in one column.
        let cols: Vec<usize> = list
            .lines()
            .map(|l| {
                let name = l.split(' ').next().unwrap();
                l.len() - l[name.len()..].trim_start().len()
            })
            .collect();
        assert!(cols.windows(2).all(|w| w[0] == w[1]), "{list}");
    }

    #[test]
    fn sizes() {
        let full = Cfg {
            procs: 1,
            quick: false,
        };
        let quick = Cfg {
            procs: 1,
            quick: true,
        };
        assert_eq!(full.size(10, 1), 10);
        assert_eq!(quick.size(10, 1), 1);
        assert_eq!(per(Duration::from_micros(3), 1000), 3.0);
        assert_eq!(per(Duration::from_micros(3), 0), 3000.0);
        assert_eq!(ms(Duration::from_micros(1500)), 1.5);
    }

    #[test]
    fn better() {
        assert!(higher_is_better("req/s"));
        assert!(higher_is_better("ticks/s"));
        for unit in [
            "ns/yield",
            "ms",
            "us",
            "B/parked",
            "ms oversleep p99",
            "x",
            ticker::UNIT,
        ] {
            assert!(!higher_is_better(unit), "{unit}");
        }
    }
}
