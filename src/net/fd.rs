//! `NetFd`: what every socket type shares (Go's `internal/poll.FD`): the
//! netpoller registration, the timeouts and deadlines, and the loop that
//! turns a non-blocking system call into a blocking one by parking.
//!
//! # The I/O loop
//! ```text
//!   deadline passed? ── yes ──> TimedOut            (Go's prepareRead)
//!   try the syscall ── done / error ──> return      (no lock, no poller)
//!        │ WouldBlock
//!   set_nonblocking(true)? ── yes ──> WouldBlock
//!   take this direction's waiter lock
//!   loop { wait for readiness (park) ─ TimedOut ─> return; try the syscall again }
//! ```
//! The first attempt costs one system call and nothing else, so a socket
//! that always has data (or buffer room) never touches the netpoller.
//!
//! # Invariants
//! - `poll` is registered at most once, lazily, on the first wait (under
//!   `register`): conversions from std sockets are therefore infallible,
//!   and a socket that never blocks never costs an `epoll_ctl`. Readiness
//!   that arrived before the registration is not lost: the loop always
//!   retries the syscall before it waits, and registering a ready socket
//!   reports it ready.
//! - One waiter per direction per `PollFd` (the netpoller keeps one parked
//!   goroutine per direction, as Go's `pollDesc`): `waiters[dir]` is held
//!   from the first `WouldBlock` to the end of the operation, as Go's
//!   `fdMutex` read/write lock.
//! - The owning socket type declares its `NetFd` before the std socket, so
//!   the registration is dropped before the descriptor is closed.
//! - `Shared` is shared by `try_clone`d handles: timeouts and `O_NONBLOCK`
//!   are per-socket in std (socket options and file status flags, shared
//!   through `dup`), and deadlines follow them.
//! - Deadlines act at once (Go's `SetReadDeadline` on a blocked `Read`):
//!   an operation that waits is listed in `Shared::parked` (with its
//!   descriptor's `PollWake`) from its first wait to its end; `set_deadline`
//!   stores the deadline (`SeqCst`) and then wakes every listed waiter of
//!   that direction, on any handle. The waiter reads the deadline after its
//!   wait slot is armed, so a deadline set at any moment is either seen by
//!   the waiter or wakes it (netpoll's note, "Re-arming a deadline"). After
//!   every wakeup the loop re-checks: a passed deadline is `TimedOut`, a
//!   passed std timeout `WouldBlock` (`EAGAIN`, std's report on Linux),
//!   otherwise retry and wait again under the current deadline.

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{
    AtomicBool, AtomicU64,
    Ordering::{Relaxed, SeqCst},
};
use std::sync::{Arc, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use crate::netpoll::{PollFd, PollWake};

/// The direction of an operation; indexes the per-direction fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dir {
    Read = 0,
    Write = 1,
}

/// Settings shared by every handle of one socket (see the module note).
#[derive(Debug, Default)]
pub(crate) struct Shared {
    /// `set_read_timeout` / `set_write_timeout`, per direction. Read only
    /// when an operation is about to wait.
    timeouts: std::sync::Mutex<[Option<Duration>; 2]>,
    /// Absolute deadlines per direction, encoded by [`encode`] (0 = none).
    /// `SeqCst`: a store and the waiter's slot CAS form a Dekker pair.
    deadlines: [AtomicU64; 2],
    /// `set_nonblocking(true)`: fail with `WouldBlock` instead of waiting.
    nonblocking: AtomicBool,
    /// The goroutines waiting in an operation on any handle of this
    /// socket, by direction: whom `set_deadline` wakes. An entry lives
    /// from the first wait to the end of the operation (`Parked`).
    parked: std::sync::Mutex<Vec<(Dir, PollWake)>>,
}

/// One descriptor's registration plus the socket's shared settings.
pub(crate) struct NetFd {
    /// Registered on first use; see the module note.
    poll: OnceLock<PollFd>,
    /// Serialises the registration (a goroutine mutex: `PollFd::new` may
    /// park).
    register: crate::sync::Mutex<()>,
    /// One waiter per direction.
    waiters: [crate::sync::Mutex<()>; 2],
    /// The descriptor, owned by the socket type that owns this `NetFd`.
    fd: RawFd,
    shared: Arc<Shared>,
}

impl NetFd {
    /// A `NetFd` for `fd`, which must already be non-blocking and must
    /// outlive the returned value.
    pub(crate) fn new(fd: RawFd, shared: Arc<Shared>) -> NetFd {
        NetFd {
            poll: OnceLock::new(),
            register: crate::sync::Mutex::new(()),
            waiters: [crate::sync::Mutex::new(()), crate::sync::Mutex::new(())],
            fd,
            shared,
        }
    }

    /// A `NetFd` for a descriptor of the same socket (a `try_clone`).
    pub(crate) fn cloned(&self, fd: RawFd) -> NetFd {
        NetFd::new(fd, self.shared.clone())
    }

    /// The registration, made on first use.
    pub(crate) fn poll(&self) -> io::Result<&PollFd> {
        crate::runtime::entry::call(move || {
            if let Some(p) = self.poll.get() {
                return Ok(p);
            }
            let _one = self.register.lock();
            if let Some(p) = self.poll.get() {
                return Ok(p);
            }
            let p = PollFd::new(self.fd)?;
            Ok(self.poll.get_or_init(|| p))
        })
    }

    /// Runs `op` (a non-blocking system call on this descriptor) until it
    /// does not fail with `WouldBlock`, parking in between; see the module
    /// note. Fails with `TimedOut` when the direction's deadline passes
    /// first (also one set while waiting), and with `WouldBlock` when its
    /// std timeout does (what std reports on Linux).
    pub(crate) fn io<R>(&self, dir: Dir, mut op: impl FnMut() -> io::Result<R>) -> io::Result<R> {
        // Every socket operation that may wait comes through here: the
        // runtime-call guard of the public methods (asyncpreempt.rs).
        crate::runtime::entry::call(move || {
            // Socket I/O is a preemption point (a server loop that never blocks
            // still yields after its 10 ms slice).
            crate::runtime::coop_preempt::check();
            if self.deadline_passed(dir) {
                return Err(timed_out());
            }
            match retry_interrupted(&mut op) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if self.shared.nonblocking.load(Relaxed) {
                        return Err(e);
                    }
                }
                done => return done,
            }
            // std's timeout: fixed when the operation starts (SO_RCVTIMEO
            // on Linux is read when the call begins, too).
            let relative = self
                .timeout(dir)
                .and_then(|t| Instant::now().checked_add(t));
            let poll = self.poll()?;
            let _one_waiter = self.waiters[dir as usize].lock();
            let _parked = Parked::new(&self.shared, dir, poll.waker());
            let read = dir == Dir::Read;
            loop {
                poll.wait(read, &|| earlier(self.deadline(dir), relative))?;
                if self.deadline_passed(dir) {
                    return Err(timed_out());
                }
                if relative.is_some_and(|d| Instant::now() >= d) {
                    return Err(timeout_expired());
                }
                match retry_interrupted(&mut op) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    done => return done,
                }
            }
        })
    }

    /// The direction's Go-style deadline (`SeqCst`: see `set_deadline`).
    fn deadline(&self, dir: Dir) -> Option<Instant> {
        decode(self.shared.deadlines[dir as usize].load(SeqCst))
    }

    fn deadline_passed(&self, dir: Dir) -> bool {
        self.deadline(dir).is_some_and(|d| Instant::now() >= d)
    }

    /// std's `set_read_timeout` / `set_write_timeout`.
    pub(crate) fn set_timeout(&self, dir: Dir, timeout: Option<Duration>) -> io::Result<()> {
        if timeout == Some(Duration::ZERO) {
            return Err(zero_timeout());
        }
        crate::runtime::entry::call(move || {
            self.timeouts()[dir as usize] = timeout;
            Ok(())
        })
    }

    /// std's `read_timeout` / `write_timeout`.
    pub(crate) fn timeout(&self, dir: Dir) -> Option<Duration> {
        crate::runtime::entry::call(move || self.timeouts()[dir as usize])
    }

    /// Go's `SetReadDeadline` / `SetWriteDeadline`: stores the deadline,
    /// then wakes every goroutine parked in that direction on any handle
    /// of this socket, so it waits again under the new deadline or fails
    /// if it has passed (netpoll's note, "Re-arming a deadline").
    pub(crate) fn set_deadline(&self, dir: Dir, deadline: Option<Instant>) {
        crate::runtime::entry::call(move || {
            // SeqCst: pairs with the waiter's slot CAS (a Dekker pair).
            self.shared.deadlines[dir as usize].store(encode(deadline), SeqCst);
            let parked = lock(&self.shared.parked);
            for &(d, w) in parked.iter() {
                if d == dir {
                    w.wake(dir == Dir::Read);
                }
            }
        })
    }

    /// std's `set_nonblocking`: the descriptor stays `O_NONBLOCK`; this
    /// only says whether an operation that would block waits.
    pub(crate) fn set_nonblocking(&self, nonblocking: bool) {
        self.shared.nonblocking.store(nonblocking, Relaxed);
    }

    /// Callers hold an `InRuntime` guard: a std mutex guard is thread-bound.
    fn timeouts(&self) -> std::sync::MutexGuard<'_, [Option<Duration>; 2]> {
        lock(&self.shared.timeouts)
    }
}

impl Drop for NetFd {
    /// Deregisters from the netpoller (under its locks): a runtime call.
    fn drop(&mut self) {
        crate::runtime::entry::call(move || {
            drop(self.poll.take());
        })
    }
}

impl Shared {
    pub(crate) fn new() -> Arc<Shared> {
        Arc::new(Shared::default())
    }
}

/// A std mutex of plain data (nothing panics while holding one); callers
/// hold an `InRuntime` guard, as a std guard is thread-bound.
fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// An entry in `Shared::parked` for the duration of one waiting operation.
struct Parked<'a> {
    shared: &'a Shared,
    dir: Dir,
    wake: PollWake,
}

impl<'a> Parked<'a> {
    fn new(shared: &'a Shared, dir: Dir, wake: PollWake) -> Parked<'a> {
        lock(&shared.parked).push((dir, wake));
        Parked { shared, dir, wake }
    }
}

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        let mut parked = lock(&self.shared.parked);
        if let Some(i) = parked
            .iter()
            .position(|&(d, w)| d == self.dir && w.same(self.wake))
        {
            parked.swap_remove(i);
        }
    }
}

fn retry_interrupted<R>(op: &mut impl FnMut() -> io::Result<R>) -> io::Result<R> {
    loop {
        match op() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            r => return r,
        }
    }
}

/// The earlier of two optional deadlines (`None` is "never").
pub(crate) fn earlier(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The error of an operation whose deadline or timeout passed (Go's
/// `os.ErrDeadlineExceeded`, "i/o timeout").
pub(crate) fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "i/o timeout")
}

/// The error of an operation whose std timeout (`set_read_timeout`,
/// `set_write_timeout`) passed: `EAGAIN`, exactly what std reports on
/// Linux, so code ported from std behaves the same.
pub(crate) fn timeout_expired() -> io::Error {
    io::Error::from_raw_os_error(libc::EAGAIN)
}

/// std's error for `set_*_timeout(Some(Duration::ZERO))`.
pub(crate) fn zero_timeout() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        "cannot set a 0 duration timeout",
    )
}

/// The instant deadlines are measured from (taken on first use).
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// 0 for no deadline, else 1 + nanoseconds since [`epoch`]. A deadline
/// before the epoch is already past and encodes as the epoch itself;
/// deadlines more than 584 years ahead are clamped to that.
fn encode(deadline: Option<Instant>) -> u64 {
    deadline.map_or(0, |d| {
        let ns = d.saturating_duration_since(epoch()).as_nanos();
        ns.saturating_add(1).min(u128::from(u64::MAX)) as u64
    })
}

fn decode(v: u64) -> Option<Instant> {
    if v == 0 {
        return None;
    }
    // A clamped far-future deadline that does not fit an Instant is "never".
    epoch().checked_add(Duration::from_nanos(v - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadline_encoding() {
        assert_eq!(decode(encode(None)), None);
        let now = Instant::now();
        let later = now + Duration::from_millis(1500);
        assert_eq!(decode(encode(Some(later))), Some(later));
        // Before the epoch: still in the past after the round trip.
        if let Some(early) = epoch().checked_sub(Duration::from_secs(1)) {
            assert!(decode(encode(Some(early))).unwrap() <= Instant::now());
        }
        assert_ne!(encode(Some(epoch())), 0);
    }

    #[test]
    fn earlier_of_two() {
        let a = Instant::now();
        let b = a + Duration::from_secs(1);
        assert_eq!(earlier(None, None), None);
        assert_eq!(earlier(Some(b), None), Some(b));
        assert_eq!(earlier(None, Some(a)), Some(a));
        assert_eq!(earlier(Some(b), Some(a)), Some(a));
    }
}
