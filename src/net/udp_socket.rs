//! `UdpSocket`: std's `UdpSocket` whose receives and sends park the
//! goroutine.

use std::fmt;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use super::fd::{Dir, NetFd, Shared};

/// A UDP socket (std's [`std::net::UdpSocket`]); receives (and sends, when
/// the send buffer is full) park the calling goroutine, or block the
/// calling thread outside the runtime. See the [module docs](super) for
/// timeouts, deadlines and `set_nonblocking`.
pub struct UdpSocket {
    // Declared first: the registration goes before `inner` closes the fd.
    fd: NetFd,
    inner: std::net::UdpSocket,
}

impl UdpSocket {
    /// Binds to `addr`, trying each address it resolves to (std's
    /// `UdpSocket::bind`).
    pub fn bind<A: ToSocketAddrs>(addr: A) -> io::Result<UdpSocket> {
        super::each_addr(addr, |a| std::net::UdpSocket::bind(a).map(UdpSocket::from))
    }

    /// Receives one datagram and the address it came from.
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.fd.io(Dir::Read, || self.inner.recv_from(buf))
    }

    /// Receives one datagram without removing it from the queue.
    pub fn peek_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.fd.io(Dir::Read, || self.inner.peek_from(buf))
    }

    /// Sends `buf` to the first address `addr` resolves to (std's rule).
    pub fn send_to<A: ToSocketAddrs>(&self, buf: &[u8], addr: A) -> io::Result<usize> {
        let addr = super::first_addr(addr)?;
        self.fd.io(Dir::Write, || self.inner.send_to(buf, addr))
    }

    /// The address given to [`connect`](Self::connect).
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.inner.peer_addr()
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    /// A new handle to the same socket (a `dup`ed descriptor). It shares the
    /// timeouts, deadlines and non-blocking flag with this one.
    pub fn try_clone(&self) -> io::Result<UdpSocket> {
        let inner = self.inner.try_clone()?;
        Ok(UdpSocket {
            fd: self.fd.cloned(inner.as_raw_fd()),
            inner,
        })
    }

    /// Bounds every later receive's wait to `dur` (`None`: no bound).
    /// Expiry is `TimedOut`. `Some(Duration::ZERO)` is `InvalidInput`.
    pub fn set_read_timeout(&self, dur: Option<Duration>) -> io::Result<()> {
        self.fd.set_timeout(Dir::Read, dur)
    }

    /// Bounds every later send's wait to `dur`; see [`set_read_timeout`](Self::set_read_timeout).
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

    /// Go's `SetReadDeadline`: receives fail with `TimedOut` once
    /// `deadline` has passed; `None` clears it.
    pub fn set_read_deadline(&self, deadline: Option<Instant>) {
        self.fd.set_deadline(Dir::Read, deadline);
    }

    /// Go's `SetWriteDeadline`: sends fail with `TimedOut` once `deadline`
    /// has passed; `None` clears it.
    pub fn set_write_deadline(&self, deadline: Option<Instant>) {
        self.fd.set_deadline(Dir::Write, deadline);
    }

    /// Go's `SetDeadline`: both the read and the write deadline.
    pub fn set_deadline(&self, deadline: Option<Instant>) {
        self.set_read_deadline(deadline);
        self.set_write_deadline(deadline);
    }

    /// Sets `SO_BROADCAST`.
    pub fn set_broadcast(&self, broadcast: bool) -> io::Result<()> {
        self.inner.set_broadcast(broadcast)
    }

    /// Reads `SO_BROADCAST`.
    pub fn broadcast(&self) -> io::Result<bool> {
        self.inner.broadcast()
    }

    /// Sets `IP_MULTICAST_LOOP`.
    pub fn set_multicast_loop_v4(&self, on: bool) -> io::Result<()> {
        self.inner.set_multicast_loop_v4(on)
    }

    /// Reads `IP_MULTICAST_LOOP`.
    pub fn multicast_loop_v4(&self) -> io::Result<bool> {
        self.inner.multicast_loop_v4()
    }

    /// Sets `IP_MULTICAST_TTL`.
    pub fn set_multicast_ttl_v4(&self, ttl: u32) -> io::Result<()> {
        self.inner.set_multicast_ttl_v4(ttl)
    }

    /// Reads `IP_MULTICAST_TTL`.
    pub fn multicast_ttl_v4(&self) -> io::Result<u32> {
        self.inner.multicast_ttl_v4()
    }

    /// Sets `IPV6_MULTICAST_LOOP`.
    pub fn set_multicast_loop_v6(&self, on: bool) -> io::Result<()> {
        self.inner.set_multicast_loop_v6(on)
    }

    /// Reads `IPV6_MULTICAST_LOOP`.
    pub fn multicast_loop_v6(&self) -> io::Result<bool> {
        self.inner.multicast_loop_v6()
    }

    /// Joins an IPv4 multicast group (`IP_ADD_MEMBERSHIP`).
    pub fn join_multicast_v4(&self, multiaddr: &Ipv4Addr, interface: &Ipv4Addr) -> io::Result<()> {
        self.inner.join_multicast_v4(multiaddr, interface)
    }

    /// Joins an IPv6 multicast group (`IPV6_ADD_MEMBERSHIP`).
    pub fn join_multicast_v6(&self, multiaddr: &Ipv6Addr, interface: u32) -> io::Result<()> {
        self.inner.join_multicast_v6(multiaddr, interface)
    }

    /// Leaves an IPv4 multicast group (`IP_DROP_MEMBERSHIP`).
    pub fn leave_multicast_v4(&self, multiaddr: &Ipv4Addr, interface: &Ipv4Addr) -> io::Result<()> {
        self.inner.leave_multicast_v4(multiaddr, interface)
    }

    /// Leaves an IPv6 multicast group (`IPV6_DROP_MEMBERSHIP`).
    pub fn leave_multicast_v6(&self, multiaddr: &Ipv6Addr, interface: u32) -> io::Result<()> {
        self.inner.leave_multicast_v6(multiaddr, interface)
    }

    /// Sets `IP_TTL`.
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.inner.set_ttl(ttl)
    }

    /// Reads `IP_TTL`.
    pub fn ttl(&self) -> io::Result<u32> {
        self.inner.ttl()
    }

    /// Takes the pending socket error (`SO_ERROR`), for example an ICMP
    /// port unreachable reported to a connected socket.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.inner.take_error()
    }

    /// Sets the default destination and the only source accepted, trying
    /// each address `addr` resolves to (std's `UdpSocket::connect`).
    pub fn connect<A: ToSocketAddrs>(&self, addr: A) -> io::Result<()> {
        super::each_addr(addr, |a| self.inner.connect(a))
    }

    /// Sends `buf` to the connected address.
    pub fn send(&self, buf: &[u8]) -> io::Result<usize> {
        self.fd.io(Dir::Write, || self.inner.send(buf))
    }

    /// Receives one datagram from the connected address.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.fd.io(Dir::Read, || self.inner.recv(buf))
    }

    /// Receives one datagram from the connected address without removing
    /// it from the queue.
    pub fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.fd.io(Dir::Read, || self.inner.peek(buf))
    }

    /// With `true`, operations that would wait fail with `WouldBlock`
    /// instead (std's behaviour); the descriptor itself is always
    /// non-blocking.
    pub fn set_nonblocking(&self, nonblocking: bool) -> io::Result<()> {
        self.fd.set_nonblocking(nonblocking);
        Ok(())
    }
}

/// Takes over a std socket: puts it in non-blocking mode.
impl From<std::net::UdpSocket> for UdpSocket {
    fn from(s: std::net::UdpSocket) -> UdpSocket {
        // FIONBIO on an open socket cannot fail.
        let _ = s.set_nonblocking(true);
        UdpSocket {
            fd: NetFd::new(s.as_raw_fd(), Shared::new()),
            inner: s,
        }
    }
}

/// Takes over a datagram socket descriptor, as std's `From<OwnedFd>`.
impl From<OwnedFd> for UdpSocket {
    fn from(fd: OwnedFd) -> UdpSocket {
        UdpSocket::from(std::net::UdpSocket::from(fd))
    }
}

impl FromRawFd for UdpSocket {
    /// # Safety
    /// `fd` must be an open datagram socket that nothing else owns.
    unsafe fn from_raw_fd(fd: RawFd) -> UdpSocket {
        // SAFETY: the caller passes ownership of an open socket.
        UdpSocket::from(unsafe { std::net::UdpSocket::from_raw_fd(fd) })
    }
}

impl AsRawFd for UdpSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.as_raw_fd()
    }
}

impl AsFd for UdpSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.as_fd()
    }
}

/// Deregisters and gives up the descriptor, which stays non-blocking.
impl IntoRawFd for UdpSocket {
    fn into_raw_fd(self) -> RawFd {
        let UdpSocket { fd, inner } = self;
        drop(fd);
        inner.into_raw_fd()
    }
}

impl fmt::Debug for UdpSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}
