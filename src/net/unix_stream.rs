//! `UnixStream`: std's `UnixStream` whose reads and writes park the
//! goroutine.

use std::io;
use std::net::Shutdown;
use std::os::unix::net::SocketAddr;
use std::path::Path;

use super::fd::NetFd;

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
        crate::runtime::syscall::syscall(false, || std::os::unix::net::UnixStream::connect(path))
            .map(UnixStream::from)
    }

    /// Connects to the socket at `addr` (a path or, on Linux, an abstract
    /// name), as [`connect`](Self::connect).
    pub fn connect_addr(addr: &SocketAddr) -> io::Result<UnixStream> {
        crate::runtime::syscall::syscall(false, || {
            std::os::unix::net::UnixStream::connect_addr(addr)
        })
        .map(UnixStream::from)
    }

    /// A connected pair of unnamed sockets.
    // entry: creates the socket; registration happens on first wait (gated)
    pub fn pair() -> io::Result<(UnixStream, UnixStream)> {
        let (a, b) = std::os::unix::net::UnixStream::pair()?;
        Ok((UnixStream::from(a), UnixStream::from(b)))
    }

    /// The local address.
    // entry: a socket option or address: one system call on the descriptor, no runtime state
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    /// The remote address.
    // entry: a socket option or address: one system call on the descriptor, no runtime state
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.inner.peer_addr()
    }

    /// Takes the pending socket error (`SO_ERROR`).
    // entry: a socket option or address: one system call on the descriptor, no runtime state
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.inner.take_error()
    }

    /// Shuts down the read half, the write half or both. Shutting down
    /// `Write` makes the peer read end of file.
    // entry: one shutdown(2); parked waiters are woken by the netpoller
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.inner.shutdown(how)
    }
}

super::impl_stream_io!(UnixStream);

super::impl_socket!(
    UnixStream,
    std::os::unix::net::UnixStream,
    "a connected Unix stream socket"
);
super::impl_deadlines!(UnixStream);
