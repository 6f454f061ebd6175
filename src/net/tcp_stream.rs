//! `TcpStream`: std's `TcpStream` whose blocking calls park the goroutine.
//!
//! `connect` creates the socket non-blocking, starts the connection, waits
//! for writability and reads `SO_ERROR` (Go's `netFD.connect`), trying every
//! resolved address in turn as std does.

use std::fmt;
use std::io;
use std::net::{Shutdown, SocketAddr, ToSocketAddrs};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use super::fd::{self, Dir, NetFd, Shared};
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

    /// Wraps a socket that is already non-blocking.
    pub(crate) fn from_nonblocking(inner: std::net::TcpStream) -> TcpStream {
        TcpStream {
            fd: NetFd::new(inner.as_raw_fd(), Shared::new()),
            inner,
        }
    }

    /// The remote address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.inner.peer_addr()
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    /// Shuts down the read half, the write half or both. Shutting down
    /// `Write` sends FIN: the peer reads end of file.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.inner.shutdown(how)
    }

    /// A new handle to the same socket (a `dup`ed descriptor). It shares the
    /// timeouts, deadlines and non-blocking flag with this one.
    pub fn try_clone(&self) -> io::Result<TcpStream> {
        let inner = self.inner.try_clone()?;
        Ok(TcpStream {
            fd: self.fd.cloned(inner.as_raw_fd()),
            inner,
        })
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

    /// Reads without removing the data from the queue.
    pub fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.fd.io(Dir::Read, || self.inner.peek(buf))
    }

    /// Sets `TCP_NODELAY`.
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        self.inner.set_nodelay(nodelay)
    }

    /// Reads `TCP_NODELAY`.
    pub fn nodelay(&self) -> io::Result<bool> {
        self.inner.nodelay()
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

    /// With `true`, reads and writes that would wait fail with `WouldBlock`
    /// instead (std's behaviour); the descriptor itself is always
    /// non-blocking.
    pub fn set_nonblocking(&self, nonblocking: bool) -> io::Result<()> {
        self.fd.set_nonblocking(nonblocking);
        Ok(())
    }
}

/// One connection attempt (Go's `netFD.connect`).
fn connect_one(addr: &SocketAddr, deadline: Option<Instant>) -> io::Result<TcpStream> {
    crate::runtime::asyncpreempt::in_runtime(move || {
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

/// Takes over a std stream: puts it in non-blocking mode (its blocking
/// operations now park instead).
impl From<std::net::TcpStream> for TcpStream {
    fn from(s: std::net::TcpStream) -> TcpStream {
        // FIONBIO on an open socket cannot fail (only a bad descriptor or
        // argument pointer makes ioctl fail).
        let _ = s.set_nonblocking(true);
        TcpStream::from_nonblocking(s)
    }
}

/// Takes over a connected stream socket descriptor, as std's `From<OwnedFd>`.
impl From<OwnedFd> for TcpStream {
    fn from(fd: OwnedFd) -> TcpStream {
        TcpStream::from(std::net::TcpStream::from(fd))
    }
}

impl FromRawFd for TcpStream {
    /// # Safety
    /// `fd` must be an open stream socket that nothing else owns.
    unsafe fn from_raw_fd(fd: RawFd) -> TcpStream {
        // SAFETY: the caller passes ownership of an open socket.
        TcpStream::from(unsafe { std::net::TcpStream::from_raw_fd(fd) })
    }
}

impl AsRawFd for TcpStream {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.as_raw_fd()
    }
}

impl AsFd for TcpStream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.as_fd()
    }
}

/// Deregisters and gives up the descriptor, which stays non-blocking.
impl IntoRawFd for TcpStream {
    fn into_raw_fd(self) -> RawFd {
        let TcpStream { fd, inner } = self;
        drop(fd);
        inner.into_raw_fd()
    }
}

impl fmt::Debug for TcpStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}
