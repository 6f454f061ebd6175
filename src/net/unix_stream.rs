//! `UnixStream`: std's `UnixStream` whose reads and writes park the
//! goroutine.

use std::fmt;
use std::io;
use std::net::Shutdown;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::os::unix::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use super::fd::{Dir, NetFd, Shared};

/// A Unix-domain stream socket (std's [`std::os::unix::net::UnixStream`]);
/// reads and writes park the calling goroutine, or block the calling thread
/// outside the runtime. See the [module docs](super) for timeouts,
/// deadlines and `set_nonblocking`.
///
/// `Read` and `Write` are implemented for `&UnixStream` too, so one
/// goroutine can read while another writes.
pub struct UnixStream {
    // Declared first: the registration goes before `inner` closes the fd.
    fd: NetFd,
    inner: std::os::unix::net::UnixStream,
}

impl UnixStream {
    /// Connects to the socket at `path`. A Unix-domain `connect` completes
    /// at once unless the listener's backlog is full, when the kernel makes
    /// it wait; it runs under [`crate::syscall`], so that wait
    /// holds up no other goroutine.
    pub fn connect<P: AsRef<Path>>(path: P) -> io::Result<UnixStream> {
        let path = path.as_ref();
        crate::syscall(|| std::os::unix::net::UnixStream::connect(path)).map(UnixStream::from)
    }

    /// Connects to the socket at `addr` (a path or, on Linux, an abstract
    /// name), as [`connect`](Self::connect).
    pub fn connect_addr(addr: &SocketAddr) -> io::Result<UnixStream> {
        crate::syscall(|| std::os::unix::net::UnixStream::connect_addr(addr)).map(UnixStream::from)
    }

    /// A connected pair of unnamed sockets.
    pub fn pair() -> io::Result<(UnixStream, UnixStream)> {
        let (a, b) = std::os::unix::net::UnixStream::pair()?;
        Ok((UnixStream::from(a), UnixStream::from(b)))
    }

    /// A new handle to the same socket (a `dup`ed descriptor). It shares the
    /// timeouts, deadlines and non-blocking flag with this one.
    pub fn try_clone(&self) -> io::Result<UnixStream> {
        let inner = self.inner.try_clone()?;
        Ok(UnixStream {
            fd: self.fd.cloned(inner.as_raw_fd()),
            inner,
        })
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    /// The remote address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.inner.peer_addr()
    }

    /// Bounds every later read's wait to `dur` (`None`: no bound). Expiry
    /// is `TimedOut`. `Some(Duration::ZERO)` is `InvalidInput`, as in std.
    pub fn set_read_timeout(&self, dur: Option<Duration>) -> io::Result<()> {
        self.fd.set_timeout(Dir::Read, dur)
    }

    /// Bounds every later write's wait to `dur`; see [`set_read_timeout`](Self::set_read_timeout).
    pub fn set_write_timeout(&self, dur: Option<Duration>) -> io::Result<()> {
        self.fd.set_timeout(Dir::Write, dur)
    }

    /// The read timeout.
    pub fn read_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.fd.timeout(Dir::Read))
    }

    /// The write timeout.
    pub fn write_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.fd.timeout(Dir::Write))
    }

    /// Go's `SetReadDeadline`: reads fail with `TimedOut` once `deadline`
    /// has passed (at once, even with data ready); `None` clears it.
    pub fn set_read_deadline(&self, deadline: Option<Instant>) {
        self.fd.set_deadline(Dir::Read, deadline);
    }

    /// Go's `SetWriteDeadline`; see [`set_read_deadline`](Self::set_read_deadline).
    pub fn set_write_deadline(&self, deadline: Option<Instant>) {
        self.fd.set_deadline(Dir::Write, deadline);
    }

    /// Go's `SetDeadline`: both the read and the write deadline.
    pub fn set_deadline(&self, deadline: Option<Instant>) {
        self.set_read_deadline(deadline);
        self.set_write_deadline(deadline);
    }

    /// Takes the pending socket error (`SO_ERROR`).
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.inner.take_error()
    }

    /// Shuts down the read half, the write half or both. Shutting down
    /// `Write` makes the peer read end of file.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.inner.shutdown(how)
    }

    /// With `true`, reads and writes that would wait fail with `WouldBlock`
    /// instead (std's behaviour); the descriptor itself is always
    /// non-blocking.
    pub fn set_nonblocking(&self, nonblocking: bool) -> io::Result<()> {
        self.fd.set_nonblocking(nonblocking);
        Ok(())
    }
}

super::impl_stream_io!(UnixStream);

/// Takes over a std stream: puts it in non-blocking mode.
impl From<std::os::unix::net::UnixStream> for UnixStream {
    fn from(s: std::os::unix::net::UnixStream) -> UnixStream {
        // FIONBIO on an open socket cannot fail.
        let _ = s.set_nonblocking(true);
        UnixStream {
            fd: NetFd::new(s.as_raw_fd(), Shared::new()),
            inner: s,
        }
    }
}

/// Takes over a connected Unix stream socket descriptor.
impl From<OwnedFd> for UnixStream {
    fn from(fd: OwnedFd) -> UnixStream {
        UnixStream::from(std::os::unix::net::UnixStream::from(fd))
    }
}

impl FromRawFd for UnixStream {
    /// # Safety
    /// `fd` must be an open Unix stream socket that nothing else owns.
    unsafe fn from_raw_fd(fd: RawFd) -> UnixStream {
        // SAFETY: the caller passes ownership of an open socket.
        UnixStream::from(unsafe { std::os::unix::net::UnixStream::from_raw_fd(fd) })
    }
}

impl AsRawFd for UnixStream {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.as_raw_fd()
    }
}

impl AsFd for UnixStream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.as_fd()
    }
}

/// Deregisters and gives up the descriptor, which stays non-blocking.
impl IntoRawFd for UnixStream {
    fn into_raw_fd(self) -> RawFd {
        let UnixStream { fd, inner } = self;
        drop(fd);
        inner.into_raw_fd()
    }
}

impl fmt::Debug for UnixStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}
