//! File descriptor calls behind `goroutine::io::Fd`: the type check, the
//! file status flags, and a zero-timeout poll(2).

use std::io;
use std::os::fd::RawFd;

/// What `fd` refers to, as `fstat` reports it.
pub(crate) fn file_type(fd: RawFd) -> io::Result<libc::mode_t> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `st` is valid for a write of one `stat`; fstat fails cleanly
    // (EBADF) for a descriptor that is not open.
    if unsafe { libc::fstat(fd, st.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fstat succeeded, so it filled `st`.
    Ok(unsafe { st.assume_init() }.st_mode & libc::S_IFMT)
}

/// The file status flags (`F_GETFL`).
pub(crate) fn status_flags(fd: RawFd) -> io::Result<libc::c_int> {
    // SAFETY: F_GETFL takes no pointer argument.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(flags)
}

/// Sets the file status flags (`F_SETFL`).
pub(crate) fn set_status_flags(fd: RawFd, flags: libc::c_int) -> io::Result<()> {
    // SAFETY: F_SETFL takes an integer argument.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether `fd` is ready now for reading (`read`) or writing: a poll(2)
/// that does not wait. Hang-up and error conditions count as ready (the
/// next read or write reports them).
pub(crate) fn ready_now(fd: RawFd, read: bool) -> io::Result<bool> {
    let events = if read { libc::POLLIN } else { libc::POLLOUT };
    let mut p = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    // SAFETY: one valid pollfd, zero timeout.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if p.revents & libc::POLLNVAL != 0 {
        return Err(io::Error::from_raw_os_error(libc::EBADF));
    }
    Ok(p.revents & (events | libc::POLLHUP | libc::POLLERR) != 0)
}
