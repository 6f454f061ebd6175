//! `UnixListener`: std's `UnixListener` whose `accept` parks the goroutine.

use std::io;
use std::os::unix::net::SocketAddr;
use std::path::Path;

use super::fd::{Dir, NetFd};
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
    // entry: creates the socket; registration happens on first wait (gated)
    pub fn bind<P: AsRef<Path>>(path: P) -> io::Result<UnixListener> {
        std::os::unix::net::UnixListener::bind(path).map(UnixListener::from)
    }

    /// Binds to `addr` (a path or, on Linux, an abstract name) and listens.
    // entry: creates the socket; registration happens on first wait (gated)
    pub fn bind_addr(addr: &SocketAddr) -> io::Result<UnixListener> {
        std::os::unix::net::UnixListener::bind_addr(addr).map(UnixListener::from)
    }

    /// Waits for a connection and returns it with the peer's address.
    #[inline(always)]
    pub fn accept(&self) -> io::Result<(UnixStream, SocketAddr)> {
        let r = self
            .fd
            .io(Dir::Read, || self.inner.accept())
            .map(|(s, addr)| (UnixStream::from(s), addr));
        // A caller that ends with `accept` keeps its frame in dumps.
        crate::traceback::keep_caller_frame();
        r
    }

    /// The local address.
    // entry: a socket option or address: one system call on the descriptor, no runtime state
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    /// Takes the pending socket error (`SO_ERROR`).
    // entry: a socket option or address: one system call on the descriptor, no runtime state
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.inner.take_error()
    }

    /// An endless iterator of `accept` results (std's `incoming`).
    // entry: builds the iterator (its `next` is gated through `accept`)
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

super::impl_socket!(
    UnixListener,
    std::os::unix::net::UnixListener,
    "a listening Unix socket"
);
super::impl_listener_deadline!(UnixListener);
