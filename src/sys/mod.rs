//! The OS layer: every raw system call of the runtime lives below this module
//! (futex, mmap/madvise/mprotect, poll, sockets, signals, thread ids,
//! membarrier), so porting the scheduler (`runtime`, `g`, `p`, `m`,
//! `netpoll`, `sync`, `chan`, `time`) to another target means replacing
//! these files (and choosing mio's backend: the netpoller's epoll goes
//! through mio). Two public OS-facing modules make their own calls, as Go's
//! `os/signal` does: `signal.rs` (sigaction, its self-pipe, re-raising a
//! signal) and the traceback's `dl_iterate_phdr` (a libc call, not a system
//! call). Tests call libc directly where they provoke the OS.

pub(crate) mod cgroup;
pub(crate) mod fdio;
pub(crate) mod futex;
pub(crate) mod mem;
pub(crate) mod overflow;
pub(crate) mod poll;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub(crate) mod preempt;
pub(crate) mod procfs;
pub(crate) mod socket;
pub(crate) mod thread;
pub(crate) mod time;
pub(crate) mod timerfd;
#[cfg(goroutine_sanitize = "thread")]
pub(crate) mod tsan;

/// The kernel thread id of the calling thread.
pub(crate) fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::gettid() }
}

/// Registers `f` to run when the process exits through `exit(3)`
/// (returning from `main`, `std::process::exit`). Best effort: a failed
/// registration (out of memory) is ignored.
pub(crate) fn at_exit(f: extern "C" fn()) {
    // SAFETY: `f` is a plain function with the C ABI that atexit expects.
    unsafe { libc::atexit(f) };
}

const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

/// Registers the process for private expedited membarriers (Linux >= 4.14);
/// false if the kernel (or a seccomp filter) does not allow them.
pub(crate) fn membarrier_register() -> bool {
    // SAFETY: membarrier takes integer arguments only and has no memory
    // effects on our address space beyond ordering.
    let r = unsafe {
        libc::syscall(
            libc::SYS_membarrier,
            MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
            0,
            0,
        )
    };
    r == 0
}

/// Runs a full memory barrier on every CPU that is running a thread of
/// this process (after [`membarrier_register`]): an asymmetric fence that
/// lets the other side of a Dekker-style protocol use only compiler
/// fences. False if it failed.
pub(crate) fn membarrier() -> bool {
    // SAFETY: as above.
    let r = unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) };
    r == 0
}

/// The calling thread's signal mask as the kernel's 64-bit word (0 where
/// asynchronous preemption is not supported: nothing reads it there).
pub(crate) fn current_sigmask() -> u64 {
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    {
        preempt::current_sigmask()
    }
    #[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
    {
        0
    }
}

/// A fatal runtime error: prints Go's `fatal error:` line and ends the
/// process as Go does ([`fatal_exit`]). Here, in the lowest layer, so that
/// every layer may use it (re-exported as `runtime::throw`).
#[cold]
pub(crate) fn throw(msg: &str) -> ! {
    eprintln!("fatal error: {msg}");
    fatal_exit()
}

/// `GOTRACEBACK=crash` as read once ([`init_crash_mode`]): 0 not read yet,
/// 1 no, 2 yes.
static CRASH: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Reads `GOTRACEBACK` once, so that [`fatal_exit`] may run in signal
/// context (the stack-overflow handler) without touching the environment.
/// Called when the runtime starts, and by the first fatal error if earlier.
pub(crate) fn init_crash_mode() {
    use std::sync::atomic::Ordering;
    if CRASH.load(Ordering::Relaxed) == 0 {
        let crash = std::env::var_os("GOTRACEBACK").is_some_and(|v| v == "crash");
        CRASH.store(if crash { 2 } else { 1 }, Ordering::Relaxed);
    }
}

/// Whether `GOTRACEBACK=crash` asks fatal errors for a core dump: false
/// until [`init_crash_mode`] ran. Async-signal-safe.
pub(crate) fn crash_requested() -> bool {
    CRASH.load(std::sync::atomic::Ordering::Relaxed) == 2
}

/// Ends the process after a report that leaves the runtime consistent (the
/// deadlock report, SIGQUIT's dump): exit status 2 through `exit`, which
/// runs the `atexit` hooks (a running trace is completed), or `SIGABRT`
/// with `GOTRACEBACK=crash`, as Go does for both.
#[cold]
pub(crate) fn exit_after_report() -> ! {
    init_crash_mode();
    if crash_requested() {
        std::process::abort()
    }
    std::process::exit(2)
}

/// Ends the process after a fatal error has been reported, as Go does:
/// exit status 2, or `SIGABRT` (a core dump, where the system keeps one)
/// with `GOTRACEBACK=crash`. Measured with Go 1.19 for a deadlock, a stack
/// overflow, thread exhaustion, out of memory and SIGQUIT: 2 under `none`,
/// `single`, `all` and `system`, 134 (`SIGABRT`) under `crash`.
///
/// `_exit`, not `exit`: after a broken invariant nothing may run that
/// could take a runtime lock (`atexit` hooks: the tracer's flush), as
/// `abort` runs nothing either. Async-signal-safe once [`init_crash_mode`]
/// ran (the overflow handler relies on it).
#[cold]
pub(crate) fn fatal_exit() -> ! {
    if CRASH.load(std::sync::atomic::Ordering::Relaxed) == 0 {
        // Not in signal context: the handler's caller ran it at start.
        init_crash_mode();
    }
    if crash_requested() {
        std::process::abort()
    }
    // SAFETY: _exit has no preconditions and never returns.
    unsafe { libc::_exit(2) }
}
