//! The workloads: one module each, one function per runtime. Every function
//! runs one measurement at the worker count the driver asked for and checks
//! its answer (a wrong answer panics, which fails the worker process).

use std::time::Duration;

pub mod fanout;
pub mod parked;
pub mod pingpong;
pub mod prodcons;
pub mod select_prodcons;
pub mod skynet;
pub mod spawn;
pub mod spawn_chain;
pub mod spawn_remote;
pub mod steal_skew;
pub mod thread_ring;
pub mod yields;

/// One measurement: the figure (lower is better), its unit, and the answer
/// the workload computed (already checked).
pub struct Figure {
    pub value: f64,
    pub unit: &'static str,
    pub answer: String,
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

/// The runtimes a workload can run on, in table order.
pub const RUNTIMES: [&str; 5] = ["ours", "go", "tokio", "may", "threads"];

type Impl = fn(Cfg) -> Figure;
type GoImpl = fn(Cfg) -> (&'static str, Vec<String>);

/// A workload: its name, a one-line description, and its implementations
/// (`None` where a runtime does not run it, with the reason).
pub struct Workload {
    pub name: &'static str,
    pub what: &'static str,
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
            ours: spawn::ours,
            tokio: Ok(spawn::tokio),
            may: Ok(spawn::may),
            threads: Ok(spawn::threads),
            go: Ok(spawn::go),
        },
        Workload {
            name: "spawn_chain",
            what: "each goroutine spawns the next, 1M deep (ns per goroutine)",
            ours: spawn_chain::ours,
            tokio: Ok(spawn_chain::tokio),
            may: Ok(spawn_chain::may),
            threads: Ok(spawn_chain::threads),
            go: Ok(spawn_chain::go),
        },
        Workload {
            name: "spawn_remote",
            what: "1M goroutines spawned from a thread outside the runtime (ns per goroutine)",
            ours: spawn_remote::ours,
            tokio: Ok(spawn_remote::tokio),
            may: Ok(spawn_remote::may),
            threads: Err("same as spawn"),
            go: Err("Go has no threads outside its runtime"),
        },
        Workload {
            name: "yield",
            what: "1000 goroutines x 1000 yields (ns per yield)",
            ours: yields::ours,
            tokio: Ok(yields::tokio),
            may: Ok(yields::may),
            threads: Ok(yields::threads),
            go: Ok(yields::go),
        },
        Workload {
            name: "skynet",
            what: "10-ary tree, 1M leaves, unbuffered channels (ms)",
            ours: skynet::ours,
            tokio: Ok(skynet::tokio),
            may: Ok(skynet::may),
            threads: Err("1M OS threads: not sensible"),
            go: Ok(skynet::go),
        },
        Workload {
            name: "pingpong",
            what: "two goroutines, unbuffered channel, 2M round trips (ns per round trip)",
            ours: pingpong::ours,
            tokio: Ok(pingpong::tokio),
            may: Ok(pingpong::may),
            threads: Ok(pingpong::threads),
            go: Ok(pingpong::go),
        },
        Workload {
            name: "thread_ring",
            what: "503 goroutines in a ring, 5M hops (ns per hop)",
            ours: thread_ring::ours,
            tokio: Ok(thread_ring::tokio),
            may: Ok(thread_ring::may),
            threads: Ok(thread_ring::threads),
            go: Ok(thread_ring::go),
        },
        Workload {
            name: "prodcons0",
            what: "GOMAXPROCS producers + consumers, chan cap 0 (ns per item)",
            ours: |c| prodcons::ours(c, 0),
            tokio: Ok(|c| prodcons::tokio(c, 0)),
            may: Err(prodcons::MAY_NA),
            threads: Ok(|c| prodcons::threads(c, 0)),
            go: Ok(|c| prodcons::go(c, 0)),
        },
        Workload {
            name: "prodcons10",
            what: "the same, chan cap 10 (ns per item)",
            ours: |c| prodcons::ours(c, 10),
            tokio: Ok(|c| prodcons::tokio(c, 10)),
            may: Err(prodcons::MAY_NA),
            threads: Ok(|c| prodcons::threads(c, 10)),
            go: Ok(|c| prodcons::go(c, 10)),
        },
        Workload {
            name: "prodcons100",
            what: "the same, chan cap 100 (ns per item)",
            ours: |c| prodcons::ours(c, 100),
            tokio: Ok(|c| prodcons::tokio(c, 100)),
            may: Err(prodcons::MAY_NA),
            threads: Ok(|c| prodcons::threads(c, 100)),
            go: Ok(|c| prodcons::go(c, 100)),
        },
        Workload {
            name: "select_prodcons",
            what: "prodcons through select, cap 128, 100 units of work per item (ns per item)",
            ours: select_prodcons::ours,
            tokio: Ok(select_prodcons::tokio),
            may: Err("not written yet"),
            threads: Err("no select on std channels"),
            go: Ok(select_prodcons::go),
        },
        Workload {
            name: "parked",
            what: "100K goroutines blocked on a channel receive (bytes of RSS per goroutine)",
            ours: parked::ours,
            tokio: Ok(parked::tokio),
            may: Ok(parked::may),
            threads: Err("100K OS threads: not sensible"),
            go: Ok(parked::go),
        },
        Workload {
            name: "fanout4",
            what: "1 producer -> chan(1024) -> 4 workers selecting on data and quit -> 1 collector (ns per item)",
            ours: |c| fanout::ours(c, 4),
            tokio: Ok(|c| fanout::tokio(c, 4)),
            may: Err("not written yet"),
            threads: Err("not written yet"),
            go: Ok(|c| fanout::go(c, 4)),
        },
        Workload {
            name: "fanout64",
            what: "1 producer -> chan(1024) -> 64 workers selecting on data and quit -> 1 collector (ns per item)",
            ours: |c| fanout::ours(c, 64),
            tokio: Ok(|c| fanout::tokio(c, 64)),
            may: Err("not written yet"),
            threads: Err("not written yet"),
            go: Ok(|c| fanout::go(c, 64)),
        },
        Workload {
            name: "fanout1024",
            what: "1 producer -> chan(1024) -> 1024 workers selecting on data and quit -> 1 collector (ns per item)",
            ours: |c| fanout::ours(c, 1024),
            tokio: Ok(|c| fanout::tokio(c, 1024)),
            may: Err("not written yet"),
            threads: Err("not written yet"),
            go: Ok(|c| fanout::go(c, 1024)),
        },
        Workload {
            name: "steal_skew",
            what: "100K tasks from one spawner, 10% spin 1 ms, 90% 1 us (makespan / ideal)",
            ours: steal_skew::ours,
            tokio: Ok(steal_skew::tokio),
            may: Ok(steal_skew::may),
            threads: Err("100K OS threads: not sensible"),
            go: Ok(steal_skew::go),
        },
    ]
}

/// Workloads of benchmarks.md that the tool does not run yet.
pub const NOT_YET: [(&str, &str); 5] = [
    ("hog_fairness", "not yet available (needs preemption)"),
    (
        "syscalls",
        "not yet available (needs the blocking-syscall wrapper)",
    ),
    ("timers", "not yet available (needs timers)"),
    ("echo", "not yet available (needs net)"),
    ("http", "not yet available (needs net)"),
];

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
