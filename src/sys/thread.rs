//! Looking at another thread of this process: its CPU clock, for sysmon's
//! blocked-thread probe (`runtime::retake`; its scheduler state and system
//! call come from `/proc`, in `procfs.rs`), and the process-wide barrier of
//! the revocation handshake (`m::revoke`).

use std::sync::OnceLock;

/// The CPU-time clock of the calling thread, for others to read
/// (`pthread_getcpuclockid`); `None` if unavailable.
pub(crate) fn current_cpu_clock() -> Option<libc::clockid_t> {
    let mut id: libc::clockid_t = 0;
    // SAFETY: pthread_self is always valid for the calling thread; `id` is a
    // valid out pointer.
    let r = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut id) };
    (r == 0).then_some(id)
}

/// Puts the calling thread in the kernel's idle class (`SCHED_IDLE`): it
/// runs only when no thread of the normal class wants its CPU, and a
/// normal thread that wakes takes the CPU from it at once. For a helper
/// thread that must not delay the program's own where they share a CPU.
/// Falls back to the lowest nice value (19) where the class is refused.
/// Returns whether either took effect.
pub(crate) fn lower_priority() -> bool {
    // SAFETY: gettid has no preconditions; sched_setscheduler and
    // setpriority on this thread's id change only its own scheduling
    // (lowering it needs no privilege); `param` is a valid pointer.
    unsafe {
        let tid = libc::gettid();
        let param = libc::sched_param { sched_priority: 0 };
        libc::sched_setscheduler(tid, libc::SCHED_IDLE, &param) == 0
            || libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 19) == 0
    }
}

/// CPU time consumed so far by the thread whose clock is `clock`, in ns.
/// One system call (a thread CPU clock is not served by the vDSO).
pub(crate) fn cpu_time_ns(clock: libc::clockid_t) -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out pointer; a stale clock id of an exited
    // thread only makes the call fail.
    let r = unsafe { libc::clock_gettime(clock, &mut ts) };
    (r == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// A full memory barrier on every CPU running a thread of this process
/// (`membarrier`: the private expedited command, registered on first use;
/// the global command where that is refused). False if neither is
/// available, and then P revocation is off.
pub(crate) fn heavy_barrier() -> bool {
    match barrier_kind() {
        Kind::Private => super::membarrier(),
        Kind::Global => membarrier_global(),
        Kind::None => false,
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Private,
    Global,
    None,
}

/// Which barrier [`heavy_barrier`] issues, chosen (and the private command
/// registered) on first use.
fn barrier_kind() -> Kind {
    static KIND: OnceLock<Kind> = OnceLock::new();
    *KIND.get_or_init(|| {
        if super::membarrier_register() {
            Kind::Private
        } else if membarrier_global() {
            Kind::Global
        } else {
            Kind::None
        }
    })
}

/// Registers for [`heavy_barrier`] ahead of need (a thread sysmon starts:
/// `sysmon::prepare_revocation`). Registration waits for the kernel to
/// sync every thread of the process, which takes milliseconds: paid by
/// the first P revocation, it made the goroutines waiting for that P wait
/// as long.
pub(crate) fn prepare_heavy_barrier() {
    barrier_kind();
}

/// `MEMBARRIER_CMD_GLOBAL` (Linux >= 4.16; earlier `MEMBARRIER_CMD_SHARED`,
/// the same value): slower (it waits for an RCU grace period), but needs no
/// registration.
fn membarrier_global() -> bool {
    const MEMBARRIER_CMD_GLOBAL: libc::c_long = 1;
    // SAFETY: membarrier takes integer arguments only.
    unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The idle class is the calling thread's alone: another thread of
    /// the process keeps its own.
    #[test]
    fn a_lowered_priority_is_the_threads_own() {
        // SAFETY: sched_getscheduler reads a thread's class.
        let class = || unsafe { libc::sched_getscheduler(libc::gettid()) };
        let before = class();
        if before == libc::SCHED_IDLE {
            eprintln!("skipped: the test runs in the idle class already");
            return;
        }
        let (lowered, after) = std::thread::spawn(move || (lower_priority(), class()))
            .join()
            .unwrap();
        assert!(lowered);
        assert_eq!(after, libc::SCHED_IDLE);
        assert_eq!(class(), before, "the calling thread's class moved");
    }

    #[test]
    fn own_thread_has_a_cpu_clock() {
        let clock = current_cpu_clock().expect("cpu clock");
        let a = cpu_time_ns(clock).unwrap();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_add(std::hint::black_box(i));
        }
        std::hint::black_box(x);
        assert!(cpu_time_ns(clock).unwrap() > a);
    }

    #[test]
    fn sleeping_thread_uses_no_cpu() {
        let (tx, rx) = std::sync::mpsc::channel();
        let h = std::thread::spawn(move || {
            tx.send(current_cpu_clock().unwrap()).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(300));
        });
        let clock = rx.recv().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let a = cpu_time_ns(clock).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(cpu_time_ns(clock), Some(a));
        h.join().unwrap();
        assert!(heavy_barrier());
    }
}
