//! The scheduler: global state (`sched`), `schedule`/`find_runnable`, the
//! idle and spinning protocol, stealing, the global run queue, parking and
//! stop-the-world.
//!
//! # Glossary (as in Go's proc.go)
//! - **G**: a goroutine (`crate::g`).
//! - **M**: an OS thread that runs goroutines (`crate::m`).
//! - **P**: a processor, the right to run goroutines; exactly GOMAXPROCS of
//!   them (`crate::p`). An M must hold a P to run a G.
//!
//! Where things happen:
//! - `schedule.rs`: the M loop, `find_runnable` in Go's order, `execute`.
//! - `steal.rs`: the random victim order and the 4 stealing rounds.
//! - `spinning.rs`: the spinning-M counters and their memory-ordering
//!   protocol (model-checked with loom).
//! - `idle.rs`: idle P and idle M lists, `wakep`, `startm`, `stopm`.
//! - `globrunq.rs`: the global run queue.
//! - `proc.rs`: creating goroutines (newproc), their exit, G free lists.
//! - `park.rs`: `park`/`ready`, the primitive under every blocking operation.
//! - `procresize.rs`: stop-the-world and `set_max_procs`.
//! - `stw.rs`: the stop-the-world count (which Ps stopped; when a stop
//!   begins and ends), loom-checked.
//! - `timers.rs` (with `p/timerheap.rs`): the per-P timer heaps (the heap
//!   protocol is loom-checked).
//! - `syscall.rs`: entering and leaving blocking system calls, `handoffp`.
//! - `lockosthread.rs`: wiring a goroutine to its thread.
//! - `coop_preempt.rs`: the cooperative preemption check.
//! - `asyncpreempt.rs`: preemptible regions, the `InRuntime` guard, the
//!   `SIGURG` decision and trampoline (asynchronous preemption).
//! - `sysmon.rs`: the monitor thread: preemption, syscall retake, polling,
//!   schedtrace, trace samples.
//! - `checkdead.rs`: deadlock detection.
//! - `panics.rs`: reporting goroutine panics nobody joins.
//! - `randomize.rs`: the randomized-scheduling test mode
//!   (`--cfg goroutine_randomize`).
//! - `stats.rs`: the statistics counters and `goroutine::stats`.
//! - `schedtrace.rs`: `GODEBUG=schedtrace=N[,scheddetail=1]`.
//! - `dump.rs`: the goroutine dump and SIGQUIT.
//! - `env.rs`: GOMAXPROCS, GOROUTINE_MAX_THREADS, GODEBUG.

pub(crate) mod asyncpreempt;
pub(crate) mod bubble;
pub(crate) mod checkdead;
pub(crate) mod coop_preempt;
pub(crate) mod dump;
pub(crate) mod entry;
pub(crate) mod env;
pub(crate) mod globrunq;
pub(crate) mod idle;
pub(crate) mod localrunq;
pub(crate) mod lockosthread;
pub(crate) mod metrics;
pub(crate) mod panics;
pub(crate) mod park;
pub(crate) mod proc;
pub(crate) mod procresize;
#[cfg(goroutine_randomize)]
pub(crate) mod randomize;
pub(crate) mod retake;
pub(crate) mod schedtrace;
pub(crate) mod schedule;
pub(crate) mod spinning;
pub(crate) mod stats;
pub(crate) mod steal;
pub(crate) mod stw;
pub(crate) mod syscall;
pub(crate) mod sysmon;
pub(crate) mod timers;

use std::ptr;
use std::sync::atomic::{
    AtomicBool, AtomicI64, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};
use std::sync::{Mutex, MutexGuard, Once};

use crate::cacheline::CacheLine;
use crate::g::G;
use crate::m::note::Note;
use crate::m::M;
use crate::p::{PHandle, P};

/// The most Ps the runtime supports (Go's `_MaxGomaxprocs` on 64-bit).
pub(crate) const MAX_PROCS: usize = 1024;

/// State protected by `Sched::lock` (Go's `sched.lock`).
pub(crate) struct Locked {
    /// The global run queue (its contents and their invariant with
    /// `Sched::runqsize` are private to `globrunq.rs`).
    pub(crate) runq: globrunq::GlobalQueue,
    /// Idle Ps (LIFO).
    pub(crate) pidle: Vec<PHandle>,
    /// Idle Ms parked on their notes.
    pub(crate) midle: Vec<&'static M>,
    /// Stop-the-world: Ps still to stop, and the Ps stopped so far
    /// (`stw.rs`).
    pub(crate) stw: stw::Stop<PHandle>,
}

pub(crate) struct Sched {
    pub(crate) lock: CacheLine<Mutex<Locked>>,
    /// Length of `Locked::runq`, readable without the lock. Stored with
    /// SeqCst under the lock: pairs with the spinning protocol's fence (see
    /// `spinning.rs`) so a spinning M that stops cannot miss global work.
    pub(crate) runqsize: CacheLine<AtomicU32>,
    /// The coarse clock when the global queue's oldest woken G was queued,
    /// 0 while none waits (`globrunq::woken_overdue`).
    pub(crate) woken_since: CacheLine<AtomicU32>,
    /// nmspinning and npidle.
    pub(crate) spin: CacheLine<spinning::Spinning>,
    pub(crate) gomaxprocs: AtomicU32,
    /// A stop-the-world is in progress: every P holder must stop (Go's
    /// `gcwaiting`; `GODEBUG=scheddetail=1` still prints it under Go's name).
    pub(crate) stw_waiting: AtomicBool,
    /// All P records ever created, by id (never freed).
    allp: [AtomicPtr<P>; MAX_PROCS],
    /// Number of P records created so far.
    pub(crate) allp_created: AtomicU32,
    /// All Ms (never freed).
    pub(crate) allm: Mutex<Vec<&'static M>>,
    pub(crate) mnext: AtomicU64,
    /// Global free list of dead Gs (Go's `sched.gFree`).
    pub(crate) gfree: CacheLine<Mutex<Vec<&'static G>>>,
    pub(crate) gfree_len: CacheLine<AtomicUsize>,
    /// Woken when the last P stops for a stop-the-world.
    pub(crate) stopnote: Note,
    /// Serialises stop-the-world (Go's worldsema).
    pub(crate) worldsema: AtomicBool,
    /// Goroutines spawned from outside the runtime (no P to count them on).
    pub(crate) ngoroutine_ext: CacheLine<AtomicI64>,
    /// When the network was last polled; 0 while an M is blocked in the
    /// poller (Go's sched.lastpoll: swapping it to 0 elects the poller).
    pub(crate) lastpoll: CacheLine<AtomicI64>,
    /// The blocked poller's deadline (nanotime), 0 if none.
    pub(crate) poll_until: CacheLine<AtomicI64>,
    /// sysmon is in its deep sleep on `sysmonnote`.
    pub(crate) sysmonwait: AtomicBool,
    pub(crate) sysmonnote: Note,
}

/// The most OS threads the runtime may create (Go's debug.SetMaxThreads).
pub(crate) static MAX_THREADS: AtomicUsize = AtomicUsize::new(10_000);

static SCHED: Sched = Sched {
    lock: CacheLine::new(Mutex::new(Locked {
        runq: globrunq::GlobalQueue::new(),
        pidle: Vec::new(),
        midle: Vec::new(),
        stw: stw::Stop::new(),
    })),
    runqsize: CacheLine::new(AtomicU32::new(0)),
    woken_since: CacheLine::new(AtomicU32::new(0)),
    spin: CacheLine::new(spinning::Spinning::new()),
    gomaxprocs: AtomicU32::new(0),
    stw_waiting: AtomicBool::new(false),
    allp: [const { AtomicPtr::new(ptr::null_mut()) }; MAX_PROCS],
    allp_created: AtomicU32::new(0),
    allm: Mutex::new(Vec::new()),
    mnext: AtomicU64::new(0),
    gfree: CacheLine::new(Mutex::new(Vec::new())),
    gfree_len: CacheLine::new(AtomicUsize::new(0)),
    stopnote: Note::new(),
    worldsema: AtomicBool::new(false),
    ngoroutine_ext: CacheLine::new(AtomicI64::new(0)),
    lastpoll: CacheLine::new(AtomicI64::new(1)),
    poll_until: CacheLine::new(AtomicI64::new(0)),
    sysmonwait: AtomicBool::new(false),
    sysmonnote: Note::new(),
};

static START: Once = Once::new();
/// nanotime when the runtime started (schedtrace's `SCHED Nms`).
static START_NS: AtomicI64 = AtomicI64::new(0);

/// nanotime when the runtime started.
pub(crate) fn start_time() -> i64 {
    START_NS.load(Ordering::Relaxed)
}

/// The scheduler. Code running on an M may use it directly; entry points
/// from user code call [`start`] first.
#[inline]
pub(crate) fn sched() -> &'static Sched {
    &SCHED
}

/// Starts the runtime once: reads GOMAXPROCS and GODEBUG, creates the Ps
/// (all idle), installs the stack-overflow and SIGQUIT handlers, starts
/// sysmon and, with `GOROUTINE_TRACE`, the tracer. Ms are created on demand
/// by `wakep`.
pub(crate) fn start() -> &'static Sched {
    if !START.is_completed() {
        start_with(None);
    }
    &SCHED
}

/// Starts the runtime with `n` Ps instead of GOMAXPROCS from the
/// environment (`#[goroutine::main(max_procs = n)]`), if it has not started
/// yet: returns false, changing nothing, if it had.
pub(crate) fn start_with_procs(n: usize) -> bool {
    start_with(Some(n.clamp(1, MAX_PROCS)))
}

/// [`start`], with `procs` Ps if given; true if this call started it.
#[cold]
fn start_with(procs: Option<usize>) -> bool {
    let mut started = false;
    START.call_once(|| {
        started = true;
        START_NS.store(crate::sys::time::nanotime(), Ordering::Relaxed);
        crate::sys::time::ticks_init();
        stats::metrics_init();
        stats::refresh_coarse_now();
        let n = procs.unwrap_or_else(env::gomaxprocs_from_env);
        let s = &SCHED;
        let mut l = s.lock();
        for id in 0..n {
            let pp = s.create_p(id as u32);
            idle::pidleput(&mut l, pp);
        }
        s.gomaxprocs.store(n as u32, Ordering::SeqCst);
        drop(l);
        s.lastpoll
            .store(crate::sys::time::nanotime(), Ordering::SeqCst);
        env::max_threads_from_env();
        if let Err(e) = crate::netpoll::init() {
            throw(&format!("cannot create the netpoller (epoll/eventfd): {e}"));
        }
        checkdead::init();
        crate::sys::overflow::install_overflow_handler(crate::m::overflow_lookup);
        dump::install_sigquit();
        env::godebug();
        crate::tracer::start_from_env(
            n as u32,
            crate::tracer::Hooks {
                thread_started: checkdead::internal_thread_started,
                thread_exited: checkdead::internal_thread_exited,
                wake_sysmon: sysmon::wake_if_waiting,
            },
        );
        panics::install_hook();
        sysmon::start();
    });
    started
}

impl Sched {
    /// Takes the sched lock. A poisoned lock means a runtime bug panicked
    /// while holding it; the state may be inconsistent, so that is fatal.
    #[inline]
    pub(crate) fn lock(&self) -> MutexGuard<'_, Locked> {
        asyncpreempt::debug_check_guarded();
        match self.lock.lock() {
            Ok(g) => g,
            Err(_) => throw("sched lock poisoned"),
        }
    }

    #[inline]
    pub(crate) fn gomaxprocs(&self) -> u32 {
        self.gomaxprocs.load(Ordering::Acquire)
    }

    /// The P with index `id`, if it was ever created.
    #[inline]
    pub(crate) fn allp(&self, id: usize) -> Option<&'static P> {
        // SAFETY: allp slots hold null or a leaked (never freed) P.
        unsafe { self.allp[id].load(Ordering::Acquire).as_ref() }
    }

    /// Returns a handle to P `id`, creating the record if needed. Only during
    /// runtime start or stop-the-world, when no handle to it exists.
    pub(crate) fn create_p(&self, id: u32) -> PHandle {
        let p = match self.allp(id as usize) {
            Some(p) => p,
            None => {
                let p = P::new(id);
                self.allp[id as usize].store(p as *const P as *mut P, Ordering::Release);
                self.allp_created.fetch_max(id + 1, Ordering::AcqRel);
                p
            }
        };
        PHandle::claim(p)
    }

    /// Number of live goroutines (Go's NumGoroutine).
    pub(crate) fn num_goroutine(&self) -> usize {
        let mut n = self.ngoroutine_ext.load(Ordering::Relaxed);
        for id in 0..self.allp_created.load(Ordering::Acquire) as usize {
            if let Some(p) = self.allp(id) {
                n += p.ngoroutine();
            }
        }
        n.max(0) as usize
    }
}

pub(crate) use crate::sys::throw;

/// Go's `fatal error: out of memory`, for a spawn that cannot return an
/// error (`go`, as Go's `go` statement): no memory could be mapped for a
/// goroutine's records (`g::arena`'s note). Prints the number of
/// goroutines, and ends the process as every fatal error does (exit status
/// 2; `SIGABRT` with `GOTRACEBACK=crash`). Formats without allocating.
#[cold]
#[inline(never)]
pub(crate) fn out_of_memory() -> ! {
    let n = sched().num_goroutine();
    eprintln!(
        "runtime: out of memory: cannot allocate a goroutine ({n} goroutines)\n\
         fatal error: out of memory"
    );
    crate::sys::fatal_exit()
}
