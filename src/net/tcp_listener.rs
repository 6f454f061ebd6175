//! `TcpListener`: std's `TcpListener` whose `accept` parks the goroutine.
//!
//! `bind` creates the socket non-blocking and listens with the kernel's
//! maximum backlog; `accept` is `accept4(SOCK_NONBLOCK | SOCK_CLOEXEC)`, so
//! an accepted stream is ready for the netpoller in one system call.

use std::fmt;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};

use super::fd::{Dir, NetFd, Shared};
use super::TcpStream;
use crate::sys::socket;

/// A TCP server socket (std's [`std::net::TcpListener`]); `accept` parks
/// the calling goroutine, or blocks the calling thread outside the runtime.
///
/// Several goroutines may accept on one listener; they wait one at a time.
/// An `accept` that fails (for example with `EMFILE`, too many open files)
/// returns the error and leaves the listener working.
pub struct TcpListener {
    // Declared first: the registration goes before `inner` closes the fd.
    fd: NetFd,
    inner: std::net::TcpListener,
}

impl TcpListener {
    /// Binds to `addr` and listens (std's `TcpListener::bind`): tries each
    /// address it resolves to; `SO_REUSEADDR` is set, as std does. Port 0
    /// picks a free port ([`local_addr`](Self::local_addr) tells which).
    /// An address in use is `ErrorKind::AddrInUse`.
    pub fn bind<A: ToSocketAddrs>(addr: A) -> io::Result<TcpListener> {
        super::each_addr(addr, |a| {
            let sock = socket::stream_socket(a)?;
            socket::bind_listen(sock.as_fd(), a)?;
            Ok(TcpListener::from_nonblocking(sock.into()))
        })
    }

    fn from_nonblocking(inner: std::net::TcpListener) -> TcpListener {
        TcpListener {
            fd: NetFd::new(inner.as_raw_fd(), Shared::new()),
            inner,
        }
    }

    /// The local address (with the port the kernel picked for port 0).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    /// A new handle to the same listener (a `dup`ed descriptor).
    pub fn try_clone(&self) -> io::Result<TcpListener> {
        let inner = self.inner.try_clone()?;
        Ok(TcpListener {
            fd: self.fd.cloned(inner.as_raw_fd()),
            inner,
        })
    }

    /// Waits for a connection and returns it with the peer's address.
    pub fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let (sock, addr) = self
            .fd
            .io(Dir::Read, || socket::accept(self.inner.as_fd()))?;
        Ok((TcpStream::from_nonblocking(sock.into()), addr))
    }

    /// An endless iterator of `accept` results (std's `incoming`).
    pub fn incoming(&self) -> Incoming<'_> {
        Incoming { listener: self }
    }

    /// Sets `IP_TTL`.
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.inner.set_ttl(ttl)
    }

    /// Reads `IP_TTL`.
    pub fn ttl(&self) -> io::Result<u32> {
        self.inner.ttl()
    }

    /// Takes the pending socket error (`SO_ERROR`).
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.inner.take_error()
    }

    /// With `true`, `accept` fails with `WouldBlock` instead of waiting
    /// (std's behaviour); the descriptor itself is always non-blocking.
    pub fn set_nonblocking(&self, nonblocking: bool) -> io::Result<()> {
        self.fd.set_nonblocking(nonblocking);
        Ok(())
    }
}

/// The iterator of [`TcpListener::incoming`]; never returns `None`.
#[derive(Debug)]
pub struct Incoming<'a> {
    listener: &'a TcpListener,
}

impl Iterator for Incoming<'_> {
    type Item = io::Result<TcpStream>;

    fn next(&mut self) -> Option<io::Result<TcpStream>> {
        Some(self.listener.accept().map(|(s, _)| s))
    }
}

/// Takes over a std listener: puts it in non-blocking mode.
impl From<std::net::TcpListener> for TcpListener {
    fn from(l: std::net::TcpListener) -> TcpListener {
        // FIONBIO on an open socket cannot fail.
        let _ = l.set_nonblocking(true);
        TcpListener::from_nonblocking(l)
    }
}

/// Takes over a listening socket descriptor, as std's `From<OwnedFd>`.
impl From<OwnedFd> for TcpListener {
    fn from(fd: OwnedFd) -> TcpListener {
        TcpListener::from(std::net::TcpListener::from(fd))
    }
}

impl FromRawFd for TcpListener {
    /// # Safety
    /// `fd` must be an open listening socket that nothing else owns.
    unsafe fn from_raw_fd(fd: RawFd) -> TcpListener {
        // SAFETY: the caller passes ownership of an open socket.
        TcpListener::from(unsafe { std::net::TcpListener::from_raw_fd(fd) })
    }
}

impl AsRawFd for TcpListener {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.as_raw_fd()
    }
}

impl AsFd for TcpListener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.as_fd()
    }
}

/// Deregisters and gives up the descriptor, which stays non-blocking.
impl IntoRawFd for TcpListener {
    fn into_raw_fd(self) -> RawFd {
        let TcpListener { fd, inner } = self;
        drop(fd);
        inner.into_raw_fd()
    }
}

impl fmt::Debug for TcpListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}
