//! poll(2) on one descriptor: the blocking wait of threads that are not
//! goroutines (a plain thread's socket wait in the netpoller, the signal
//! delivery thread). Goroutines never block here: they park in the
//! netpoller, which waits for many descriptors at once through epoll.

use std::io;

/// Waits until `fd` is readable (`read`) or writable, or `timeout_ms`
/// milliseconds pass (-1: no limit). Ok(true) if the descriptor is ready
/// (or in error or hung up: the next read or write reports which);
/// Ok(false) on the timeout or an interrupting signal.
pub(crate) fn poll_one(fd: i32, read: bool, timeout_ms: i32) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd,
        events: if read { libc::POLLIN } else { libc::POLLOUT },
        revents: 0,
    };
    // SAFETY: `pfd` is a valid pollfd for the duration of the call.
    let r = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(e);
    }
    Ok(r > 0)
}

#[cfg(test)]
mod tests {
    use super::poll_one;
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    #[test]
    fn poll_one_sees_readiness_and_times_out() {
        let (mut a, b) = UnixStream::pair().unwrap();
        assert!(
            !poll_one(b.as_raw_fd(), true, 0).unwrap(),
            "nothing to read yet"
        );
        assert!(
            poll_one(b.as_raw_fd(), false, 0).unwrap(),
            "an empty socket is writable"
        );
        a.write_all(b"x").unwrap();
        assert!(
            poll_one(b.as_raw_fd(), true, 10_000).unwrap(),
            "a byte is readable"
        );
    }

    #[test]
    fn poll_one_reports_a_bad_descriptor() {
        // poll(2) reports a closed descriptor in revents (POLLNVAL), not as
        // an error: it counts as ready, and the read that follows fails.
        assert!(poll_one(i32::MAX, true, 0).unwrap());
    }
}
