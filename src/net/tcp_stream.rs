//! `TcpStream`: std's `TcpStream` whose blocking calls park the goroutine.
//!
//! `connect` creates the socket non-blocking, starts the connection, waits
//! for writability and reads `SO_ERROR` (Go's `netFD.connect`), trying every
//! resolved address in turn as std does.

use std::io;
use std::net::{Shutdown, SocketAddr, ToSocketAddrs};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use super::fd::{self, Dir, NetFd};
use crate::sys::socket;

/// A TCP connection (std's [`std::net::TcpStream`]); reads, writes and
/// `connect` park the calling goroutine, or block the calling thread
/// outside the runtime. See the [module docs](super) for timeouts,
/// deadlines and `set_nonblocking`.
///
/// `Read` and `Write` are implemented for `&TcpStream` too, so one
/// goroutine can read while another writes.
pub struct TcpStream {
    // Declared first: the registration goes before `inner` closes the fd.
    fd: NetFd,
    inner: std::net::TcpStream,
}

impl TcpStream {
    /// Connects to `addr`, trying each address it resolves to until one
    /// succeeds (std's `TcpStream::connect`). Name resolution runs under
    /// [`crate::syscall`]; the connection itself parks.
    pub fn connect<A: ToSocketAddrs>(addr: A) -> io::Result<TcpStream> {
        super::each_addr(addr, |a| connect_one(a, None))
    }

    /// Connects to `addr`, failing with `TimedOut` after `timeout`
    /// (std's `TcpStream::connect_timeout`; a zero timeout is
    /// `InvalidInput`).
    pub fn connect_timeout(addr: &SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
        if timeout.is_zero() {
            return Err(fd::zero_timeout());
        }
        connect_one(addr, Instant::now().checked_add(timeout))
    }

    /// The remote address.
    // entry: a socket option or address: one system call on the descriptor, no runtime state
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.inner.peer_addr()
    }

    /// The local address.
    // entry: a socket option or address: one system call on the descriptor, no runtime state
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    /// Shuts down the read half, the write half or both. Shutting down
    /// `Write` sends FIN: the peer reads end of file.
    // entry: one shutdown(2); parked waiters are woken by the netpoller
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.inner.shutdown(how)
    }

    /// Reads without removing the data from the queue.
    #[inline(always)]
    pub fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        let r = self.fd.io(Dir::Read, || self.inner.peek(buf));
        crate::traceback::keep_caller_frame();
        r
    }

    /// Sets `TCP_NODELAY`.
    // entry: a socket option or address: one system call on the descriptor, no runtime state
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        self.inner.set_nodelay(nodelay)
    }

    /// Reads `TCP_NODELAY`.
    // entry: a socket option or address: one system call on the descriptor, no runtime state
    pub fn nodelay(&self) -> io::Result<bool> {
        self.inner.nodelay()
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

/// One connection attempt (Go's `netFD.connect`).
fn connect_one(addr: &SocketAddr, deadline: Option<Instant>) -> io::Result<TcpStream> {
    crate::runtime::entry::call(move || {
        let stream = TcpStream::from_nonblocking(socket::stream_socket(addr)?.into());
        match socket::connect(stream.as_fd(), addr) {
            Ok(()) => return Ok(stream),
            // EINTR: the connection goes on asynchronously, as EINPROGRESS.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EINPROGRESS | libc::EALREADY | libc::EINTR)
                ) => {}
            Err(e) => return Err(e),
        }
        let poll = stream.fd.poll()?;
        loop {
            poll.wait_write(deadline)?;
            if let Some(e) = stream.inner.take_error()? {
                return Err(e);
            }
            // SO_ERROR is also 0 while the connection is in progress, and the
            // netpoller may wake us spuriously: connected only if there is a
            // peer (Go does the same check).
            match stream.inner.peer_addr() {
                Ok(_) => return Ok(stream),
                Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => {}
                Err(e) => return Err(e),
            }
        }
    })
}

super::impl_stream_io!(TcpStream);

super::impl_socket!(TcpStream, std::net::TcpStream, "a connected stream socket");
super::impl_deadlines!(TcpStream);
