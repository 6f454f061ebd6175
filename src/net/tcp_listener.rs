//! `TcpListener`: std's `TcpListener` whose `accept` parks the goroutine.
//!
//! `bind` creates the socket non-blocking and listens with the kernel's
//! maximum backlog; `accept` is `accept4(SOCK_NONBLOCK | SOCK_CLOEXEC)`, so
//! an accepted stream is ready for the netpoller in one system call.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::AsFd;

use super::fd::{Dir, NetFd};
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
            socket::bind_listen(&sock, a)?;
            Ok(TcpListener::from_nonblocking(sock.into()))
        })
    }

    /// The local address (with the port the kernel picked for port 0).
    // entry: a socket option or address: one system call on the descriptor, no runtime state
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    /// Waits for a connection and returns it with the peer's address.
    #[inline(always)]
    pub fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let r = self
            .fd
            .io(Dir::Read, || socket::accept(self.inner.as_fd()))
            .map(|(sock, addr)| (TcpStream::from_nonblocking(sock.into()), addr));
        // A caller that ends with `accept` keeps its frame in dumps.
        crate::traceback::keep_caller_frame();
        r
    }

    /// An endless iterator of `accept` results (std's `incoming`).
    // entry: builds the iterator (its `next` is gated through `accept`)
    pub fn incoming(&self) -> Incoming<'_> {
        Incoming { listener: self }
    }

    /// Sets `IP_TTL`.
    // entry: a socket option or address: one system call on the descriptor, no runtime state
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.inner.set_ttl(ttl)
    }

    /// Reads `IP_TTL`.
    // entry: a socket option or address: one system call on the descriptor, no runtime state
    pub fn ttl(&self) -> io::Result<u32> {
        self.inner.ttl()
    }

    /// Takes the pending socket error (`SO_ERROR`).
    // entry: a socket option or address: one system call on the descriptor, no runtime state
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.inner.take_error()
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

super::impl_socket!(TcpListener, std::net::TcpListener, "a listening socket");
super::impl_listener_deadline!(TcpListener);
