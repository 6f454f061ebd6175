//! Go's goroutines for Rust.
//!
//! Stackful goroutines multiplexed onto GOMAXPROCS processors (Ps) and a few
//! OS threads (Ms) by a faithful implementation of Go's G/M/P scheduler: per-P
//! run queues with a `runnext` slot, a global queue checked every 61 ticks,
//! work stealing, spinning Ms, and parking that suspends goroutines, not
//! threads.
//!
//! Goroutines talk through Go's channels ([`chan`], [`select!`]) and
//! [`sync`] primitives, all of which park the goroutine, not the thread, and
//! also work from plain threads outside the runtime. Sockets ([`net`]) are
//! std's, with blocking calls that park the goroutine as well.
//! Cancellation flows through [`context`], and signals arrive on channels
//! through [`signal::notify`].
//!
//! ```
//! let sum: u64 = goroutine::run(|| {
//!     let hs: Vec<_> = (0..10u64).map(|i| goroutine::go(move || i * i)).collect();
//!     hs.into_iter().map(|h| h.join().unwrap()).sum()
//! });
//! assert_eq!(sum, 285);
//! ```
//!
//! # Programs and tests
//! `#[goroutine::main]` runs `main` as the main goroutine, and
//! `#[goroutine::test]` runs a test's body as a goroutine (feature `macros`,
//! on by default). Both may return `Result<(), E>` for any `E: Debug`, `Send`
//! or not, and take `max_procs = N` (GOMAXPROCS):
//!
//! ```
//! #[goroutine::main(max_procs = 2)]
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     assert_eq!(goroutine::max_procs(), 2);
//!     let answer = goroutine::go(|| 6 * 7).join()?;
//!     let n: u32 = "42".parse()?;
//!     assert_eq!(answer, n);
//!     Ok(())
//! }
//! ```
//!
//! Without the macros, [`run`] does the same from any thread, and its
//! closure may borrow the caller's locals.
//!
//! # Thread-locals and goroutines (read this)
//! [`go`] has **one unchecked precondition**. A goroutine can resume on a
//! different OS thread after any runtime call (`yield_now`,
//! `JoinHandle::join`, channel operations, mutexes, sleeps and I/O). A value
//! tied to the thread it was made on must therefore not be held across such
//! a call: a reference into a `thread_local!` value, an `Rc` cloned out of
//! one, a `std::sync::MutexGuard`, std's stdout lock, a `tracing` span
//! guard (unless the `tracing` feature is on: then spans follow their
//! goroutine), `rand::thread_rng()`. The compiler cannot check this, and breaking
//! it is undefined behaviour although `go` is safe. Keep state that must
//! follow the goroutine in [`local!`] (goroutine-local storage), and spawn
//! code that must stay on one thread with [`Builder::lock_os_thread`]
//! (or wrap part of a goroutine in [`lock_os_thread`]). The runtime itself
//! follows this rule: its own current G/M/P are re-read after every switch,
//! through an out-of-line accessor, never cached. Inside a [`preemptible`]
//! region the goroutine may move between *any* two instructions, so there no
//! thread-local state may be used at all ([`local!`] may). The exact
//! contract, the choices other runtimes made and the common traps with
//! their safe replacements: `docs/soundness.md`.
//!
//! # Preemption
//! A goroutine that has run for 10 ms is asked to yield (Go's sysmon). It
//! does so at its next runtime call or [`preempt_point`]; inside a
//! [`preemptible`] region it is also stopped by a signal wherever it is
//! (Go's asynchronous preemption, for code that promises to allow it; x86-64
//! Linux). Design: `docs/preemption.md`.
//!
//! # Stacks
//! Each goroutine gets a 256 KiB stack (configurable per goroutine with
//! [`Builder::stack_size`] and per process with `GOROUTINE_STACK_SIZE`) only
//! when it first runs: a spawned goroutine that has not run costs only its G
//! record. Stacks are carved from large reserved slabs; the OS commits pages
//! on first touch, so a goroutine that uses 8 KiB costs 8 KiB of memory. A
//! guard page under each stack turns an overflow into the message
//! `goroutine N has overflowed its stack (size S)` and Go's `fatal error:
//! stack overflow`, and the process exits with status 2 (as every fatal
//! error does; `GOTRACEBACK=crash` raises `SIGABRT` instead).
//!
//! # Observability
//! - [`stats()`]: goroutines by status, run queue lengths and scheduler
//!   counters, cheap enough to poll every millisecond.
//! - [`dump()`]: every goroutine with its status or wait reason, its frames
//!   and its spawn site, as Go's goroutine dump; [`dump_grouped()`] folds
//!   identical stacks (pprof's `debug=1`); SIGQUIT prints the dump on stderr
//!   and exits 2; `GOTRACEBACK` is honoured.
//! - [`metrics`]: Go's scheduler metrics (`runtime/metrics` names: goroutines
//!   by state, threads, the scheduling-latency histogram), for exporters;
//!   [`cpu_time`] per goroutine.
//! - [`trace`]: the execution tracer (`docs/trace-format.md`, read by the
//!   `goroutine-trace` tool).
//!
//! # Environment
//! - `GOMAXPROCS`: number of Ps; default = CPUs available to the process,
//!   lowered to its cgroup CPU limit (rounded up, at least 2), followed at run
//!   time unless set explicitly.
//! - `GOROUTINE_STACK_SIZE`: default usable stack bytes (`256K`, `1M`, ...).
//! - `GOROUTINE_STACK_GUARD=mprotect`: use the pre-6.13 guard page fallback.
//! - `GOROUTINE_MAX_THREADS`: the OS thread cap (default 10,000).
//! - `GOROUTINE_PANIC=abort`: a goroutine panic that reaches the top of its
//!   goroutine ends the process, as Go's does (joined or not).
//! - `GOTRACEBACK=none|single|all|system|crash`: how much the deadlock and
//!   panic-abort reports print, as in Go (runtime frames with `system`;
//!   SIGQUIT prints everything whatever the level, as Go does); `crash`
//!   ends fatal errors with `SIGABRT` instead of exit status 2.
//! - `GODEBUG=schedtrace=N[,scheddetail=1]`: sysmon prints Go's `SCHED`
//!   line on stderr every N ms (with `scheddetail`, one line per P, M and
//!   goroutine too). Other keys are ignored; a bad value is reported once.
//! - `GOROUTINE_TRACE=path`: write an execution trace from runtime start
//!   (completed at `exit`; call [`trace::stop`] to be sure).

#![deny(unsafe_op_in_unsafe_fn)]

#[cfg(not(target_os = "linux"))]
compile_error!(
    "goroutine supports Linux only: the runtime uses futexes, epoll (through mio), \
     /proc and Linux signals (see README, \"Supported platforms\")"
);

#[cfg(not(loom))]
mod block_on;
#[cfg(not(loom))]
mod cacheline;
#[cfg(not(loom))]
mod chan;
#[cfg(not(loom))]
pub mod context;
#[cfg(not(loom))]
mod g;
#[cfg(not(loom))]
pub mod io;
#[cfg(not(loom))]
mod local;
mod loom;
#[cfg(not(loom))]
mod m;
#[cfg(not(loom))]
mod macro_support;
#[cfg(not(loom))]
pub mod net;
#[cfg(not(loom))]
mod netpoll;
#[cfg(not(loom))]
mod p;
#[cfg(not(loom))]
mod runtime;
#[cfg(not(loom))]
pub mod signal;
#[cfg(all(feature = "tracing", not(loom)))]
mod spans;
#[cfg(not(loom))]
mod spawn;
#[cfg(not(loom))]
pub mod sync;
#[cfg(not(loom))]
pub mod synctest;
#[cfg(not(loom))]
mod sys;
#[cfg(not(loom))]
pub mod time;
#[cfg(not(loom))]
pub mod trace;
#[cfg(not(loom))]
mod traceback;
#[cfg(not(loom))]
mod tracer;

// Under loom only the protocols with models are compiled.
#[cfg(loom)]
mod m {
    #[allow(dead_code)] // the models use the protocol, not the glue
    pub(crate) mod revoke;
}
#[cfg(loom)]
mod p {
    pub(crate) mod runq;
    #[allow(dead_code)] // the models use the protocol, not the glue
    pub(crate) mod timerheap;
}
#[cfg(loom)]
mod runtime {
    pub(crate) mod spinning;
    #[allow(dead_code)] // the model uses the count, not the glue
    pub(crate) mod stw;
}
#[cfg(loom)]
mod block_on {
    pub(crate) mod parking;
}
#[cfg(loom)]
mod chan {
    pub(crate) mod fast;
    pub(crate) mod lock;
    pub(crate) mod slot;
    pub(crate) mod wait;
}
#[cfg(loom)]
#[allow(dead_code)] // the models use only the protocol halves they check
mod sync {
    mod notify;
    mod rawmutex;
    mod rawrwlock;
    mod sema;
    mod waitcell;
    mod waitgroup;
}

#[cfg(not(loom))]
pub use block_on::block_on;
#[cfg(not(loom))]
pub use chan::{
    chan, CloseError, IntoIter, Iter, Receiver, RecvError, RecvFuture, RecvTimeoutError, SendError,
    SendFuture, SendTimeoutError, Sender, TryIter, TryRecvError, TrySendError,
};
#[cfg(not(loom))]
pub use local::{AccessError, LocalKey};
#[cfg(not(loom))]
pub use runtime::stats::Stats;
#[cfg(not(loom))]
pub use spawn::{go, run, Builder, JoinError, JoinHandle};

/// What the `select!` expansion uses. Not a stable API.
#[cfg(not(loom))]
#[doc(hidden)]
pub mod __private {
    pub use crate::chan::select::{
        block_forever, select, unreachable_select, Case, RecvArm, RecvOperand, SendArm, SendOperand,
    };
    // What `#[goroutine::main]` and `#[goroutine::test]` expand to call.
    pub use crate::macro_support::{main, test, Options, TestFailure, TestReturn};
}

/// `#[goroutine::main]`: runs `main` as the main goroutine (see the crate's
/// "Programs and tests" section). Feature `macros` (on by default).
#[cfg(all(not(loom), feature = "macros"))]
pub use goroutine_macros::main;
/// `#[goroutine::test]`: a test whose body runs as a goroutine (see the
/// crate's "Programs and tests" section). Feature `macros` (on by default).
#[cfg(all(not(loom), feature = "macros"))]
pub use goroutine_macros::test;

/// Lets the other runnable goroutines run first (Go's `Gosched`): those on
/// this processor's queue, and a share of the global queue. The yielder
/// stays on its processor while its queue has room (Go sends it through
/// the global queue, to whichever processor looks next); beyond 256
/// runnable goroutines per processor it goes to the global queue's tail.
/// Outside the runtime, yields the OS thread.
#[cfg(not(loom))]
#[inline(always)]
pub fn yield_now() {
    yield_here();
    // A caller that ends with `yield_now` keeps its frame in dumps.
    traceback::keep_caller_frame();
}

/// The body of [`yield_now`], out of line.
#[cfg(not(loom))]
#[inline(never)]
fn yield_here() {
    runtime::entry::call_here(runtime::park::gosched)
}

/// A preemption point for long loops that make no other runtime call: if
/// the goroutine has run for 10 ms and sysmon asked it to yield, it yields
/// (to the global queue, as Go's preemption does). Costs a few loads
/// otherwise. A no-op outside the runtime.
#[cfg(not(loom))]
#[inline]
pub fn preempt_point() {
    runtime::entry::call_here(|here| {
        let _ = runtime::coop_preempt::check_here(here);
    })
}

/// Runs `f` as a **preemptible region** of the calling goroutine and returns
/// its result: inside it, a goroutine that has run for 10 ms is stopped
/// wherever it is, between any two instructions (Go's asynchronous
/// preemption, by signal), instead of only at its next runtime call. A loop
/// that makes no call at all then no longer keeps its processor from the
/// other goroutines.
///
/// A stopped goroutine may resume on another OS thread, at any instruction
/// of `f`. So `f` must keep, at *every* instruction, the promise that other
/// code keeps only at runtime calls:
///
/// - **No thread-local state**, directly or through a library:
///   `thread_local!`, per-thread random generators (`rand::thread_rng()`),
///   `std::collections::HashMap::new()` and `RandomState::new()` (per-thread
///   keys), `std::thread::current()`, `errno` read after a libc call
///   (`io::Error::last_os_error()`, std's file and socket calls).
/// - **No thread-affine lock or guard**: no `std::sync::Mutex` or `RwLock`
///   guard, no printing (`println!`, `eprintln!`, `dbg!` lock stdout and
///   stderr), no `lock_os_thread` state that depends on staying put.
///   `goroutine::sync` types are fine, and so is every runtime call
///   (channels, `go`, `join`, `sleep`, sockets, `syscall`): the runtime
///   cannot be interrupted while inside one of its own calls.
/// - **No statically linked global allocator** (a `#[global_allocator]` such
///   as jemalloc or mimalloc) if `f` allocates. The default system
///   allocator is fine: code in libc and other shared libraries is never
///   interrupted.
/// - **No `catch_unwind` inside `f`**. A panic that leaves the region is
///   fine: nothing is interrupted while a panic unwinds.
///
/// The runtime cannot check these rules; breaking one can deadlock or
/// corrupt that thread-bound state. Pure computation on data the goroutine
/// owns (a numeric kernel, a parser over a buffer, a simulation step) keeps
/// them naturally.
///
/// Regions nest and belong to their goroutine; outside regions preemption
/// stays cooperative. A preemption costs a signal and two context switches,
/// a few microseconds, at most once per 10 ms slice. Called outside a
/// goroutine, or on targets other than x86-64 Linux, `preemptible` just
/// calls `f`. The design and its reasons are in `docs/preemption.md`.
///
/// ```
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// let spins = goroutine::run(|| {
///     let stop = Arc::new(AtomicBool::new(false));
///     let s = stop.clone();
///     // A loop without a single runtime call: without the region it would
///     // keep its processor until it ends.
///     let hog = goroutine::go(move || {
///         goroutine::preemptible(|| {
///             let mut n = 0u64;
///             while !s.load(Ordering::Relaxed) {
///                 n += 1;
///             }
///             n
///         })
///     });
///     goroutine::time::sleep(Duration::from_millis(20));
///     stop.store(true, Ordering::Relaxed);
///     hog.join().unwrap()
/// });
/// assert!(spins > 0);
/// ```
#[cfg(not(loom))]
#[inline]
pub fn preemptible<R>(f: impl FnOnce() -> R) -> R {
    // Sanitizer builds link the sanitizer's allocator and interceptors into
    // the executable, where the handler's PC check cannot tell them from
    // user code (the "statically linked allocator" risk of
    // docs/preemption.md): there regions are not preemptible.
    #[cfg(any(goroutine_sanitize = "address", goroutine_sanitize = "thread"))]
    return f();
    #[cfg(not(any(goroutine_sanitize = "address", goroutine_sanitize = "thread")))]
    runtime::asyncpreempt::region(f)
}

/// Hooks for the crate's own tests. Not a stable API.
#[cfg(not(loom))]
#[doc(hidden)]
pub mod __test {
    pub use crate::runtime::asyncpreempt::AsyncPreemptStats;

    /// Counters of asynchronous preemption since the process started.
    // entry: reads process-wide counters (relaxed loads)
    pub fn async_preempt_stats() -> AsyncPreemptStats {
        crate::runtime::asyncpreempt::stats()
    }

    /// The cgroup CPU limit GOMAXPROCS's default follows (`None`: none),
    /// read now from the files the runtime keeps open.
    // entry: reads files the runtime opened; no runtime state
    pub fn cgroup_cpu_limit() -> Option<f64> {
        crate::runtime::env::cgroup_cpu_limit()
    }

    /// Runs `f` as if it were a runtime call: no signal may stop the
    /// goroutine inside it.
    pub fn as_runtime_call<R>(f: impl FnOnce() -> R) -> R {
        crate::runtime::asyncpreempt::as_runtime_call(f)
    }
}

/// Runs `f`, which may block in the OS (a system call, blocking file I/O, a
/// C library call), without stopping other goroutines: Go's
/// `entersyscall`/`exitsyscall`. Entering is cheap (the P is only marked);
/// if `f` takes more than ~20 us, sysmon hands the P to another thread so the
/// other goroutines keep running; on return the goroutine takes its P back,
/// or another idle one, or waits on the global queue. A goroutine whose last
/// two calls each blocked long (2^17 TSC ticks: 26-130 us) hands its P off
/// as the next one begins if other goroutines wait for it, rather than
/// leave it idle until sysmon looks (which Go does).
///
/// `f` runs without a P; if it blocks on a goroutine primitive (a channel,
/// a mutex, a join), the goroutine leaves the system call state while it is
/// parked. Outside a goroutine, just runs `f`.
#[cfg(not(loom))]
#[inline(always)]
pub fn syscall<R>(f: impl FnOnce() -> R) -> R {
    let r = runtime::syscall::syscall(false, f);
    // A caller that ends with `syscall` keeps its frame in dumps.
    traceback::keep_caller_frame();
    r
}

/// Like [`syscall`], for calls known to block for long (Go's
/// `entersyscallblock`): the P is handed to another thread at once.
#[cfg(not(loom))]
#[inline(always)]
pub fn syscall_blocking<R>(f: impl FnOnce() -> R) -> R {
    let r = runtime::syscall::syscall(true, f);
    // A caller that ends with `syscall_blocking` keeps its frame in dumps.
    traceback::keep_caller_frame();
    r
}

/// Wires the calling goroutine to its current OS thread (Go's
/// `runtime.LockOSThread`): until as many `unlock_os_thread` calls as lock
/// calls, it runs only on this thread and no other goroutine runs there.
/// Use it for thread-affine state (thread-locals held across runtime calls,
/// OpenGL contexts, `setns`). A goroutine that exits while locked ends the
/// thread with it. A no-op outside a goroutine.
#[cfg(not(loom))]
pub fn lock_os_thread() {
    runtime::entry::call(runtime::lockosthread::lock_os_thread)
}

/// Undoes one `lock_os_thread` (a no-op when not locked).
#[cfg(not(loom))]
pub fn unlock_os_thread() {
    runtime::entry::call(runtime::lockosthread::unlock_os_thread)
}

/// Sets the most OS threads the runtime may create (default 10,000, or
/// `GOROUTINE_MAX_THREADS`) and returns the previous limit (Go's
/// `debug.SetMaxThreads`). Going past it is fatal: `runtime: program
/// exceeds N-thread limit` / `fatal error: thread exhaustion`. Values below
/// 2 are raised to 2.
#[cfg(not(loom))]
pub fn set_max_threads(n: usize) -> usize {
    runtime::entry::call(move || {
        runtime::start();
        runtime::MAX_THREADS.swap(n.max(2), std::sync::atomic::Ordering::Relaxed)
    })
}

/// The id of the calling goroutine (the main goroutine is 1), or 0 when
/// called from a thread that is not running a goroutine.
#[cfg(not(loom))]
// entry: reads the calling thread's M and its goroutine's id: no P, no lock
pub fn current_id() -> u64 {
    m::current_g_checked().map_or(0, |g| g.id())
}

/// The number of goroutines that exist (spawned and not yet finished).
#[cfg(not(loom))]
// entry: sums counters (atomic loads) without owning or changing any P
pub fn num_goroutine() -> usize {
    runtime::sched().num_goroutine()
}

/// The current GOMAXPROCS (starts the runtime if needed).
#[cfg(not(loom))]
pub fn max_procs() -> usize {
    runtime::entry::call(move || runtime::start().gomaxprocs() as usize)
}

/// Sets GOMAXPROCS to `n` and returns the previous value; `n == 0` only
/// queries. Values above 1024 are capped. Resizes the P array while
/// goroutines run, with a brief stop-the-world: each running goroutine is
/// stopped at its next scheduling point (a runtime call).
///
/// # Waiting for goroutines that make no runtime call
/// The stop-the-world (this one and every other) waits until each running
/// goroutine reaches such a point. A goroutine that computes for long
/// without any runtime call, outside a [`preemptible`] region, cannot be
/// stopped meanwhile: `set_max_procs` then waits for as long as it runs,
/// forever for a loop that never makes one (Go stops such loops with a
/// signal; here only regions allow that). The way out is in the loop:
/// call [`preempt_point`] in it (a few loads when nothing is asked), or run
/// it inside [`preemptible`] (stopped by signal wherever it is; the region's
/// rules apply).
///
/// ```
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::Arc;
///
/// goroutine::run(|| {
///     let stop = Arc::new(AtomicBool::new(false));
///     let s = stop.clone();
///     let spinner = goroutine::go(move || {
///         while !s.load(Ordering::Relaxed) {
///             // Without this call, set_max_procs below would wait forever.
///             goroutine::preempt_point();
///         }
///     });
///     goroutine::yield_now();
///     let before = goroutine::set_max_procs(2);
///     stop.store(true, Ordering::Relaxed);
///     spinner.join().unwrap();
///     goroutine::set_max_procs(before);
/// });
/// ```
#[cfg(not(loom))]
pub fn set_max_procs(n: usize) -> usize {
    runtime::entry::call(move || runtime::procresize::set_max_procs_chosen(n))
}

/// A snapshot of the scheduler: goroutines by status, run queue lengths,
/// threads, and cumulative counters (spawns, steals, global-queue grabs,
/// runnext hits, spins, M parks and wakes, syscall handoffs, preemptions,
/// timers fired, netpoll wakeups). Starts the runtime if needed.
///
/// Cheap enough to call every millisecond: the counters live per P (each
/// written only by its P's owner with a relaxed store, on a cache line of
/// its own) and per M, and are summed here; goroutines by status are
/// derived from the queues and the Ms, not counted per transition (see
/// [`Stats`] for what is exact and what is a snapshot).
///
/// ```
/// let before = goroutine::stats().spawns;
/// goroutine::go(|| ()).join().unwrap();
/// assert!(goroutine::stats().spawns > before);
/// ```
#[cfg(not(loom))]
pub fn stats() -> Stats {
    runtime::stats::stats()
}

/// Runtime metrics in the form of Go's `runtime/metrics`: names such as
/// `/sched/goroutines/runnable:goroutines` and `/sched/latencies:seconds`
/// ([`all`](metrics::all) lists them with their kind and help text), read
/// into caller-owned [`Sample`](metrics::Sample)s by [`read`](metrics::read).
/// An exporter (Prometheus, OpenTelemetry) needs nothing else: see
/// `examples/metrics_exporter.rs`.
///
/// Reading costs a walk of the Ps and the Ms and no stop of the world; the
/// goroutine counts by state are each exact for their instant but not one
/// atomic snapshot (a goroutine between a queue and a thread counts as
/// waiting). `/sched/latencies:seconds` is the time goroutines spent
/// runnable before they ran, sampled about one transition in 8 as Go
/// samples it, always on; its buckets are exponential, four per power of
/// two from 256 ns to about 275 s (the module note of the implementation,
/// `src/runtime/metrics.rs`, has the details).
///
/// ```
/// use goroutine::metrics::{self, Sample, Value};
/// goroutine::go(|| ()).join().unwrap();
/// let mut samples: Vec<Sample> = metrics::all().iter().map(|d| Sample::new(d.name)).collect();
/// metrics::read(&mut samples);
/// let created = samples.iter().find(|s| s.name == "/sched/goroutines-created:goroutines");
/// assert!(matches!(created.unwrap().value, Value::U64(n) if n >= 1));
/// ```
#[cfg(not(loom))]
pub mod metrics {
    pub use crate::runtime::metrics::{Description, Kind, Sample, Value};

    /// Every supported metric: name, kind and description.
    // entry: copies a constant table; touches no runtime state
    pub fn all() -> Vec<Description> {
        crate::runtime::metrics::all()
    }

    /// Fills each sample's `value` for its `name` ([`Value::Unknown`] for a
    /// name that is not supported). Starts the runtime if needed. A
    /// histogram's vectors are reused: read the same samples again and it
    /// allocates nothing.
    pub fn read(samples: &mut [Sample]) {
        crate::runtime::entry::call(|| crate::runtime::metrics::read(samples))
    }
}

/// The CPU time of live goroutine `id` so far, measured with
/// `GODEBUG=cputime=1` (`None` without it, or if there is no such
/// goroutine; off by default because it reads the clock at every switch):
/// the wall time it spent switched in on a thread, added up at
/// each switch from the time-stamp counter. It counts time the OS took
/// the thread away and time blocked in the kernel while the goroutine
/// kept its thread (system calls, plain blocking calls), and it is read
/// without stopping a running goroutine. The counter's ticks are turned
/// into time with a factor calibrated against the monotonic clock and
/// refined once a second, so a parked goroutine's reading may still move
/// by a fraction of a percent. Finds the goroutine by walking every
/// goroutine record: not for hot paths.
#[cfg(not(loom))]
pub fn cpu_time(id: u64) -> Option<std::time::Duration> {
    runtime::entry::call(|| runtime::metrics::cpu_time(id))
}

/// The calling goroutine's CPU time so far (see [`cpu_time`]); `None` on
/// a thread that is not running a goroutine, or without
/// `GODEBUG=cputime=1`. Cheap: two loads and a clock
/// read.
#[cfg(not(loom))]
pub fn current_cpu_time() -> Option<std::time::Duration> {
    runtime::entry::call(runtime::metrics::current_cpu_time)
}

/// Writes every live goroutine to `w` as Go's `debug=2` goroutine dump
/// (and SIGQUIT output) does: the calling goroutine first, then by id, each
/// with its frames, innermost first, and where it was spawned:
///
/// ```text
/// goroutine 17 [chan receive, 3 minutes]:
///         name: worker
/// myapp::worker(...)
///         /src/main.rs:8
/// myapp::main::{{closure}}(...)
///         /src/main.rs:14
/// created by myapp::main in goroutine 1
///         /src/main.rs:14
/// ```
///
/// The status is `runnable`, `running`, `syscall` or the wait reason of a
/// parked goroutine (`chan receive`, `select`, `sync.Mutex.Lock`, `sleep`,
/// `IO wait`, `join`...), with `N minutes` once it has waited at least a
/// minute, as Go prints it. Named goroutines ([`Builder::name`]) get a
/// `name:` line. Frames of the runtime itself are hidden unless
/// `GOTRACEBACK=system`. A goroutine running on another thread is shown as
/// Go shows it (`goroutine running on other thread; stack unavailable`);
/// one whose thread is blocked in a plain `std` call (outside the runtime)
/// as `[syscall, blocked outside the runtime: read]`, with the system call.
/// SIGQUIT's dump also shows the frames of both, taken by their threads.
///
/// Like Go's `runtime.Stack(buf, true)` it stops the world while it reads
/// the stacks (a few microseconds per goroutine; symbolisation happens after
/// the world restarts and is cached per address). As with
/// [`set_max_procs`], a goroutine that spins without any runtime call
/// outside a [`preemptible`] region delays it until it makes one, and so
/// does one blocked (thread and all) on a `std` lock the caller holds. Frames need unwind tables
/// (always present) and, for names and file:line, symbols and line tables
/// (`debug = 1` or `"line-tables-only"`; with `strip = true` frames print as
/// `?`). x86-64 Linux; elsewhere the headers only. SIGQUIT writes the same
/// dump on stderr and exits with status 2, as in Go.
#[cfg(not(loom))]
pub fn dump(w: &mut impl std::io::Write) -> std::io::Result<()> {
    runtime::dump::dump(w)
}

/// Writes the goroutine dump to `w` as one JSON document, for scripts (as
/// Java's `jcmd Thread.dump_to_file -format=json`): every goroutine with
/// its id, name, state, wait reason, how long it has waited (ms), whether
/// it is locked to its thread, its frames (function, file, line, address)
/// and who created it. The schema is in `docs/dump-json.md`; it carries a
/// version. It stops the world like [`dump`] and shows the same frames
/// (runtime frames only with `GOTRACEBACK=system`).
///
/// ```
/// let mut out = Vec::new();
/// goroutine::run(move || goroutine::dump_json(&mut out).map(|_| out)).unwrap();
/// ```
#[cfg(not(loom))]
pub fn dump_json(w: &mut impl std::io::Write) -> std::io::Result<()> {
    runtime::dump::dump_json(w)
}

/// Writes pprof's `debug=1` goroutine profile to `w`: identical stacks
/// (same frames, same status or wait reason, same spawn site) folded into
/// one entry with the number of goroutines that share it, largest first:
///
/// ```text
/// goroutine profile: total 10002
/// 10000 @ 0x55d0c1a2b3c4 0x55d0c1a2b500 0x55d0c1a2a111
/// # [chan receive]
/// #    0x55d0c1a2b3c3    myapp::worker    /src/main.rs:8
/// #    created by myapp::main    /src/main.rs:14
/// ```
///
/// It stops the world like [`dump`].
#[cfg(not(loom))]
pub fn dump_grouped(w: &mut impl std::io::Write) -> std::io::Result<()> {
    runtime::dump::dump_grouped(w)
}
