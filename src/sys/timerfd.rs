//! A one-shot timer with nanosecond resolution that an epoll set can wait
//! on (Linux `timerfd`), for the netpoller's blocking wait.
//!
//! Why: `epoll_wait` takes its timeout in whole milliseconds (mio rounds up,
//! so it never wakes early), so every timer that the blocked poller waits
//! for fired up to 1 ms late (half a millisecond at the median, for Go,
//! which rounds the same way, as for us). A timerfd armed for
//! the exact delay, in the same epoll set, ends the wait on time; the
//! millisecond timeout stays as the backstop. (`epoll_pwait2`, Linux 5.11,
//! takes a nanosecond timeout, but mio does not use it.)
//!
//! Elsewhere (no timerfd) [`TimerFd::new`] returns `None` and the poller
//! keeps millisecond timeouts.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// A `CLOCK_MONOTONIC` timerfd, non-blocking and close-on-exec.
pub(crate) struct TimerFd {
    fd: OwnedFd,
}

impl TimerFd {
    /// A disarmed timer, or `None` where the OS has no timerfd (or it
    /// cannot be created: the caller falls back to millisecond timeouts).
    pub(crate) fn new() -> Option<TimerFd> {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            // SAFETY: plain system call with constant flags; the result is
            // checked before it is used as a descriptor.
            let fd = unsafe {
                libc::timerfd_create(
                    libc::CLOCK_MONOTONIC,
                    libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
                )
            };
            if fd < 0 {
                return None;
            }
            // SAFETY: `fd` was just created and is owned by nobody else.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            Some(TimerFd { fd })
        }
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        {
            None
        }
    }

    /// Arms the timer to fire once, `ns` nanoseconds from now (`ns <= 0`:
    /// disarms it). Re-arming replaces the previous setting and resets its
    /// expiration count, so the fd need never be read.
    pub(crate) fn set(&self, ns: i64) -> io::Result<()> {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            let ns = ns.max(0);
            let spec = libc::itimerspec {
                it_interval: libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                },
                it_value: libc::timespec {
                    tv_sec: (ns / 1_000_000_000) as libc::time_t,
                    tv_nsec: (ns % 1_000_000_000) as libc::c_long,
                },
            };
            // SAFETY: `fd` is our open timerfd; `spec` is a valid
            // itimerspec and the old value is not asked for (null).
            let r = unsafe {
                libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut())
            };
            if r < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        }
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        {
            let _ = ns;
            Err(io::ErrorKind::Unsupported.into())
        }
    }
}

impl AsRawFd for TimerFd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(all(test, any(target_os = "linux", target_os = "android")))]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn wait_readable(fd: RawFd, ms: i32) -> bool {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut p, 1, ms) == 1 }
    }

    #[test]
    fn fires_once_after_the_delay_and_rearming_replaces_it() {
        let t = TimerFd::new().expect("timerfd");
        assert!(!wait_readable(t.as_raw_fd(), 0), "disarmed at first");
        let start = Instant::now();
        t.set(2_000_000).unwrap();
        assert!(wait_readable(t.as_raw_fd(), 5_000), "never fired");
        assert!(start.elapsed() >= Duration::from_millis(2), "fired early");
        // Re-arming resets the expiration count: not readable until the
        // new expiry, and disarming (0) means it never comes.
        t.set(60_000_000_000).unwrap();
        assert!(!wait_readable(t.as_raw_fd(), 0), "count not reset");
        t.set(0).unwrap();
        assert!(!wait_readable(t.as_raw_fd(), 20), "disarmed timer fired");
    }
}
