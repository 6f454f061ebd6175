//! SHIM: replaced by main's netpoller on merge.
//!
//! A stand-in with exactly the interface of the real netpoller, so that
//! `crate::net` can be written and tested before the epoll netpoller lands.
//! It registers nothing: waiting is poll(2) on the one descriptor. Outside
//! the runtime it blocks the thread until the descriptor is ready or the
//! deadline passes. Inside a goroutine it must not hold the M in poll(2)
//! (with every P's M blocked, the peer goroutine could never run), so it
//! polls without waiting and yields to the other goroutines between tries,
//! sleeping in poll(2) for at most 1 ms every 64 tries to bound the spin.

use std::io;
use std::os::fd::RawFd;
use std::time::Instant;

/// SHIM: replaced by main's netpoller on merge.
pub(crate) struct PollFd {
    fd: RawFd,
}

impl PollFd {
    /// Registers `fd` (already non-blocking) with the netpoller,
    /// edge-triggered, for read and write. (The shim registers nothing.)
    pub(crate) fn new(fd: RawFd) -> io::Result<PollFd> {
        Ok(PollFd { fd })
    }

    /// Waits until `fd` may be readable (or closed/errored); `Ok(())` means
    /// "retry the operation". `Err(TimedOut)` once `deadline` has passed.
    pub(crate) fn wait_read(&self, deadline: Option<Instant>) -> io::Result<()> {
        wait(self.fd, libc::POLLIN, deadline)
    }

    /// Waits until `fd` may be writable (or closed/errored), as `wait_read`.
    pub(crate) fn wait_write(&self, deadline: Option<Instant>) -> io::Result<()> {
        wait(self.fd, libc::POLLOUT, deadline)
    }
}

fn wait(fd: RawFd, events: libc::c_short, deadline: Option<Instant>) -> io::Result<()> {
    let in_goroutine = crate::m::current_g().is_some();
    let mut tries = 0u32;
    loop {
        let now = Instant::now();
        let left_ms = match deadline {
            Some(d) if d <= now => {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "i/o timeout"));
            }
            // Round up, so that a wakeup is never before the deadline.
            Some(d) => (d - now).as_micros().div_ceil(1000).min(i32::MAX as u128) as i32,
            None => -1,
        };
        tries += 1;
        let timeout = match (in_goroutine, tries % 64 == 0) {
            (false, _) => left_ms,
            (true, false) => 0,
            (true, true) if left_ms < 0 => 1,
            (true, true) => left_ms.min(1),
        };
        let mut pfd = libc::pollfd {
            fd,
            events,
            revents: 0,
        };
        // SAFETY: `pfd` is one live pollfd for the duration of the call.
        let r = unsafe { libc::poll(&mut pfd, 1, timeout) };
        if r > 0 {
            return Ok(());
        }
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        if in_goroutine {
            crate::yield_now();
        }
    }
}
