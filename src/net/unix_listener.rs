//! `UnixListener`: std's `UnixListener` whose `accept` parks the goroutine.

use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::os::unix::net::SocketAddr;
use std::path::Path;

use super::fd::{Dir, NetFd, Shared};
use super::UnixStream;

/// A Unix-domain server socket (std's
/// [`std::os::unix::net::UnixListener`]); `accept` parks the calling
/// goroutine, or blocks the calling thread outside the runtime.
///
/// As with std, dropping the listener does not remove its socket file.
pub struct UnixListener {
    // Declared first: the registration goes before `inner` closes the fd.
    fd: NetFd,
    inner: std::os::unix::net::UnixListener,
}

impl UnixListener {
    /// Binds to `path` and listens. An existing file at `path` is
    /// `AddrInUse`.
    pub fn bind<P: AsRef<Path>>(path: P) -> io::Result<UnixListener> {
        std::os::unix::net::UnixListener::bind(path).map(UnixListener::from)
    }

    /// Binds to `addr` (a path or, on Linux, an abstract name) and listens.
    pub fn bind_addr(addr: &SocketAddr) -> io::Result<UnixListener> {
        std::os::unix::net::UnixListener::bind_addr(addr).map(UnixListener::from)
    }

    /// Waits for a connection and returns it with the peer's address.
    pub fn accept(&self) -> io::Result<(UnixStream, SocketAddr)> {
        let (s, addr) = self.fd.io(Dir::Read, || self.inner.accept())?;
        Ok((UnixStream::from(s), addr))
    }

    /// A new handle to the same listener (a `dup`ed descriptor).
    pub fn try_clone(&self) -> io::Result<UnixListener> {
        let inner = self.inner.try_clone()?;
        Ok(UnixListener {
            fd: self.fd.cloned(inner.as_raw_fd()),
            inner,
        })
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    /// With `true`, `accept` fails with `WouldBlock` instead of waiting
    /// (std's behaviour); the descriptor itself is always non-blocking.
    pub fn set_nonblocking(&self, nonblocking: bool) -> io::Result<()> {
        self.fd.set_nonblocking(nonblocking);
        Ok(())
    }

    /// Takes the pending socket error (`SO_ERROR`).
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.inner.take_error()
    }

    /// An endless iterator of `accept` results (std's `incoming`).
    pub fn incoming(&self) -> UnixIncoming<'_> {
        UnixIncoming { listener: self }
    }
}

/// The iterator of [`UnixListener::incoming`]; never returns `None`.
#[derive(Debug)]
pub struct UnixIncoming<'a> {
    listener: &'a UnixListener,
}

impl Iterator for UnixIncoming<'_> {
    type Item = io::Result<UnixStream>;

    fn next(&mut self) -> Option<io::Result<UnixStream>> {
        Some(self.listener.accept().map(|(s, _)| s))
    }
}

/// Takes over a std listener: puts it in non-blocking mode.
impl From<std::os::unix::net::UnixListener> for UnixListener {
    fn from(l: std::os::unix::net::UnixListener) -> UnixListener {
        // FIONBIO on an open socket cannot fail.
        let _ = l.set_nonblocking(true);
        UnixListener {
            fd: NetFd::new(l.as_raw_fd(), Shared::new()),
            inner: l,
        }
    }
}

/// Takes over a listening Unix socket descriptor.
impl From<OwnedFd> for UnixListener {
    fn from(fd: OwnedFd) -> UnixListener {
        UnixListener::from(std::os::unix::net::UnixListener::from(fd))
    }
}

impl FromRawFd for UnixListener {
    /// # Safety
    /// `fd` must be an open listening Unix socket that nothing else owns.
    unsafe fn from_raw_fd(fd: RawFd) -> UnixListener {
        // SAFETY: the caller passes ownership of an open socket.
        UnixListener::from(unsafe { std::os::unix::net::UnixListener::from_raw_fd(fd) })
    }
}

impl AsRawFd for UnixListener {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.as_raw_fd()
    }
}

impl AsFd for UnixListener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.as_fd()
    }
}

/// Deregisters and gives up the descriptor, which stays non-blocking.
impl IntoRawFd for UnixListener {
    fn into_raw_fd(self) -> RawFd {
        let UnixListener { fd, inner } = self;
        drop(fd);
        inner.into_raw_fd()
    }
}

impl fmt::Debug for UnixListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}
