//! Looking at another thread of this process: its CPU clock and its
//! scheduler state, for sysmon's blocked-thread probe (`runtime::revoke`),
//! and the process-wide barrier of the revocation handshake (`m::revoke`).

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

/// The scheduler state letter of thread `tid` of this process
/// (`/proc/self/task/TID/stat`, third field: `R` running or runnable, `S`
/// sleeping, `D` uninterruptible, ...).
pub(crate) fn state(tid: i32) -> Option<u8> {
    let s = std::fs::read(format!("/proc/self/task/{tid}/stat")).ok()?;
    // "pid (comm) S ...": comm may hold spaces and parentheses; the state
    // follows the last ')'.
    let close = s.iter().rposition(|&b| b == b')')?;
    s.get(close + 2).copied()
}

/// The system call thread `tid` is blocked in (`/proc/self/task/TID/syscall`,
/// first field), if it is in one.
pub(crate) fn blocked_syscall(tid: i32) -> Option<i64> {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall")).ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// A readable name for the system calls a blocked thread is usually in.
pub(crate) fn syscall_name(nr: i64) -> Option<&'static str> {
    let names: &[(i64, &str)] = &[
        (libc::SYS_read, "read"),
        (libc::SYS_write, "write"),
        (libc::SYS_openat, "openat"),
        (libc::SYS_futex, "futex"),
        (libc::SYS_nanosleep, "nanosleep"),
        (libc::SYS_clock_nanosleep, "clock_nanosleep"),
        (libc::SYS_ppoll, "ppoll"),
        (libc::SYS_pselect6, "pselect6"),
        (libc::SYS_epoll_pwait, "epoll_pwait"),
        (libc::SYS_wait4, "wait4"),
        (libc::SYS_waitid, "waitid"),
        (libc::SYS_accept, "accept"),
        (libc::SYS_accept4, "accept4"),
        (libc::SYS_connect, "connect"),
        (libc::SYS_recvfrom, "recvfrom"),
        (libc::SYS_recvmsg, "recvmsg"),
        (libc::SYS_sendto, "sendto"),
        (libc::SYS_sendmsg, "sendmsg"),
        (libc::SYS_readv, "readv"),
        (libc::SYS_writev, "writev"),
        (libc::SYS_pread64, "pread64"),
        (libc::SYS_pwrite64, "pwrite64"),
        (libc::SYS_fsync, "fsync"),
        (libc::SYS_flock, "flock"),
        (libc::SYS_fcntl, "fcntl"),
        (libc::SYS_ioctl, "ioctl"),
    ];
    // The old entry points that newer architectures (aarch64, riscv64) left
    // out of their system call tables.
    #[cfg(target_arch = "x86_64")]
    let legacy: &[(i64, &str)] = &[
        (libc::SYS_poll, "poll"),
        (libc::SYS_select, "select"),
        (libc::SYS_epoll_wait, "epoll_wait"),
    ];
    #[cfg(not(target_arch = "x86_64"))]
    let legacy: &[(i64, &str)] = &[];
    names
        .iter()
        .chain(legacy)
        .find(|&&(n, _)| n == nr)
        .map(|&(_, name)| name)
}

/// A full memory barrier on every CPU running a thread of this process
/// (`membarrier`: the private expedited command, registered on first use;
/// the global command where that is refused). False if neither is
/// available, and then P revocation is off.
pub(crate) fn heavy_barrier() -> bool {
    #[derive(Clone, Copy, PartialEq)]
    enum Kind {
        Private,
        Global,
        None,
    }
    static KIND: OnceLock<Kind> = OnceLock::new();
    let kind = *KIND.get_or_init(|| {
        if super::membarrier_register() {
            Kind::Private
        } else if membarrier_global() {
            Kind::Global
        } else {
            Kind::None
        }
    });
    match kind {
        Kind::Private => super::membarrier(),
        Kind::Global => membarrier_global(),
        Kind::None => false,
    }
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

    #[test]
    fn own_thread_is_running_and_has_a_cpu_clock() {
        assert_eq!(state(super::super::gettid()), Some(b'R'));
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
    fn sleeping_thread_is_seen_blocked() {
        let (tx, rx) = std::sync::mpsc::channel();
        let h = std::thread::spawn(move || {
            tx.send((super::super::gettid(), current_cpu_clock().unwrap()))
                .unwrap();
            std::thread::sleep(std::time::Duration::from_millis(300));
        });
        let (tid, clock) = rx.recv().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(state(tid), Some(b'S'));
        let a = cpu_time_ns(clock).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(cpu_time_ns(clock), Some(a));
        let nr = blocked_syscall(tid).unwrap();
        assert_eq!(syscall_name(nr), Some("clock_nanosleep"));
        h.join().unwrap();
        assert!(heavy_barrier());
    }
}
