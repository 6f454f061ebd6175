//! Files of `/proc` the runtime reads while the program runs: a thread's
//! scheduler state (sysmon's blocked-thread probe, `runtime::retake`), the
//! process's thread count (deadlock detection, `runtime::checkdead`), and a
//! blocked thread's system call (the opt-in views of a revocation).
//!
//! # Invariant: no descriptor comes and goes behind the program's back
//! The runtime's background threads never open a descriptor for one read
//! and close it again at some arbitrary moment. A program that fills its
//! descriptor table (`RLIMIT_NOFILE`) relies on the table staying full: an
//! `accept` it expects to fail with EMFILE would succeed in the slot a
//! runtime thread just gave back, and an `open` would fail because a
//! runtime thread held one for a few microseconds. So the files read on
//! the default path are [`ProcFile`]s: opened once, on first need, kept
//! open and re-read in place (`pread` at offset 0 regenerates a `/proc`
//! file), closed only when what they describe ends (a thread's, as that
//! thread exits; the process's, never). That lowers the program's limit by
//! the few files held, as any file the program holds does: the status file
//! and one stat file per M that sysmon has probed, at most
//! `m::STAT_FILES_MAX` of those. Where the open fails (the table is already
//! full, no `/proc`), the caller does without, and tries again next time.
//! Only the opt-in views (the trace, `GODEBUG=blockwarn`) and a goroutine
//! dump the program asks for (`dump()`, SIGQUIT: for each goroutine
//! blocked outside the runtime) open a file for one read
//! ([`blocked_syscall`]).

use std::os::unix::fs::FileExt;

/// A `/proc` file held open and re-read in place (see the module note).
pub(crate) struct ProcFile(std::fs::File);

impl ProcFile {
    /// Opens `path` (close-on-exec, as std opens files).
    pub(crate) fn open(path: &str) -> Option<ProcFile> {
        std::fs::File::open(path).ok().map(ProcFile)
    }

    /// Reads the file afresh into `buf` (a read at offset 0 regenerates
    /// it) and returns what was read: at most `buf.len()` bytes, the
    /// beginning of the file. `None` if the read fails (what the file
    /// describes has ended).
    pub(crate) fn read<'a>(&self, buf: &'a mut [u8]) -> Option<&'a [u8]> {
        let n = self.0.read_at(buf, 0).ok()?;
        Some(&buf[..n])
    }
}

/// A thread's `/proc/self/task/<tid>/stat` (its holder: `M::thread_state`).
pub(crate) struct StatFile(ProcFile);

impl StatFile {
    /// Opens thread `tid`'s stat file.
    pub(crate) fn open(tid: i32) -> Option<StatFile> {
        ProcFile::open(&format!("/proc/self/task/{tid}/stat")).map(StatFile)
    }

    /// The scheduler state letter (the file's third field: `R` running or
    /// runnable, `S` sleeping, `D` uninterruptible, ...), read afresh.
    pub(crate) fn state(&self) -> Option<u8> {
        // "pid (comm) S ppid ...": comm is at most 15 bytes but may hold
        // spaces and parentheses, so the state follows the last ')'; the
        // fields after it are numbers. 256 bytes hold the state with room.
        let mut buf = [0u8; 256];
        let s = self.0.read(&mut buf)?;
        let close = s.iter().rposition(|&b| b == b')')?;
        s.get(close + 2).copied()
    }
}

/// The number of threads in this process (`Threads:` in
/// `/proc/self/status`), read through one descriptor held for the life of
/// the process, opened by the first call that needs it.
pub(crate) fn process_threads() -> Option<usize> {
    use std::sync::Mutex;
    static STATUS: Mutex<Option<ProcFile>> = Mutex::new(None);
    let mut file = STATUS.lock().unwrap_or_else(|e| e.into_inner());
    if file.is_none() {
        *file = ProcFile::open("/proc/self/status");
    }
    // The file is about 1.5 KiB; `Threads:` is in its first half.
    let mut buf = [0u8; 4096];
    let s = std::str::from_utf8(file.as_ref()?.read(&mut buf)?).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
}

/// The system call thread `tid` is blocked in (`/proc/self/task/TID/syscall`,
/// first field), if it is in one (-1: blocked, but not in a system call).
/// Opens the file for this one read: only the opt-in views (the trace,
/// `GODEBUG=blockwarn`) and goroutine dumps call it.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_thread_is_running() {
        let me = StatFile::open(super::super::gettid()).expect("own stat file");
        assert_eq!(me.state(), Some(b'R'));
        assert_eq!(me.state(), Some(b'R'), "read again in place");
    }

    #[test]
    fn sleeping_thread_is_seen_blocked_then_gone() {
        let (tx, rx) = std::sync::mpsc::channel();
        let h = std::thread::spawn(move || {
            tx.send(super::super::gettid()).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(300));
        });
        let tid = rx.recv().unwrap();
        let stat = StatFile::open(tid).expect("stat file");
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(stat.state(), Some(b'S'));
        let nr = blocked_syscall(tid).unwrap();
        assert_eq!(syscall_name(nr), Some("clock_nanosleep"));
        h.join().unwrap();
        // The kernel may still be finishing the thread's exit when the
        // join returns: wait for it to go.
        let gone = (0..5000).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(1));
            stat.state().is_none()
        });
        assert!(gone, "an ended thread has no state: {:?}", stat.state());
    }

    #[test]
    fn thread_count_follows_threads() {
        // Other tests start and end threads meanwhile, so check lower
        // bounds: this thread plus those it keeps waiting; the second read
        // must see the threads added after the first (read afresh).
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let rx = std::sync::Arc::new(std::sync::Mutex::new(rx));
        let mut hs = Vec::new();
        for want in [8usize, 24] {
            while hs.len() < want {
                let rx = rx.clone();
                hs.push(std::thread::spawn(move || {
                    let _ = rx.lock().unwrap().recv();
                }));
            }
            let n = process_threads().expect("thread count");
            assert!(n > want, "{n} threads, {want} of them waiting");
        }
        drop(tx);
        for h in hs {
            h.join().unwrap();
        }
    }
}
