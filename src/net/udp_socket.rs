//! `UdpSocket`: std's `UdpSocket` whose receives and sends park the
//! goroutine.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};

use super::fd::{Dir, NetFd};

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
    #[inline(always)]
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let r = self.fd.io(Dir::Read, || self.inner.recv_from(buf));
        crate::traceback::keep_caller_frame();
        r
    }

    /// Receives one datagram without removing it from the queue.
    #[inline(always)]
    pub fn peek_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let r = self.fd.io(Dir::Read, || self.inner.peek_from(buf));
        crate::traceback::keep_caller_frame();
        r
    }

    /// Sends `buf` to the first address `addr` resolves to (std's rule).
    #[inline(always)]
    pub fn send_to<A: ToSocketAddrs>(&self, buf: &[u8], addr: A) -> io::Result<usize> {
        let addr = super::first_addr(addr)?;
        let r = self.fd.io(Dir::Write, || self.inner.send_to(buf, addr));
        crate::traceback::keep_caller_frame();
        r
    }

    /// The address given to [`connect`](Self::connect).
    // entry: a socket option or address: one system call on the descriptor, no runtime state
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.inner.peer_addr()
    }

    /// The local address.
    // entry: a socket option or address: one system call on the descriptor, no runtime state
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    /// Sets `SO_BROADCAST`.
    // entry: a socket option or address: one system call on the descriptor, no runtime state
    pub fn set_broadcast(&self, broadcast: bool) -> io::Result<()> {
        self.inner.set_broadcast(broadcast)
    }

    /// Reads `SO_BROADCAST`.
    // entry: a socket option or address: one system call on the descriptor, no runtime state
    pub fn broadcast(&self) -> io::Result<bool> {
        self.inner.broadcast()
    }

    /// Sets `IP_MULTICAST_LOOP`.
    // entry: a socket option or address: one system call on the descriptor, no runtime state
    pub fn set_multicast_loop_v4(&self, on: bool) -> io::Result<()> {
        self.inner.set_multicast_loop_v4(on)
    }

    /// Reads `IP_MULTICAST_LOOP`.
    // entry: a socket option or address: one system call on the descriptor, no runtime state
    pub fn multicast_loop_v4(&self) -> io::Result<bool> {
        self.inner.multicast_loop_v4()
    }

    /// Sets `IP_MULTICAST_TTL`.
    // entry: a socket option or address: one system call on the descriptor, no runtime state
    pub fn set_multicast_ttl_v4(&self, ttl: u32) -> io::Result<()> {
        self.inner.set_multicast_ttl_v4(ttl)
    }

    /// Reads `IP_MULTICAST_TTL`.
    // entry: a socket option or address: one system call on the descriptor, no runtime state
    pub fn multicast_ttl_v4(&self) -> io::Result<u32> {
        self.inner.multicast_ttl_v4()
    }

    /// Sets `IPV6_MULTICAST_LOOP`.
    // entry: a socket option or address: one system call on the descriptor, no runtime state
    pub fn set_multicast_loop_v6(&self, on: bool) -> io::Result<()> {
        self.inner.set_multicast_loop_v6(on)
    }

    /// Reads `IPV6_MULTICAST_LOOP`.
    // entry: a socket option or address: one system call on the descriptor, no runtime state
    pub fn multicast_loop_v6(&self) -> io::Result<bool> {
        self.inner.multicast_loop_v6()
    }

    /// Joins an IPv4 multicast group (`IP_ADD_MEMBERSHIP`).
    // entry: a socket option or address: one system call on the descriptor, no runtime state
    pub fn join_multicast_v4(&self, multiaddr: &Ipv4Addr, interface: &Ipv4Addr) -> io::Result<()> {
        self.inner.join_multicast_v4(multiaddr, interface)
    }

    /// Joins an IPv6 multicast group (`IPV6_ADD_MEMBERSHIP`).
    // entry: a socket option or address: one system call on the descriptor, no runtime state
    pub fn join_multicast_v6(&self, multiaddr: &Ipv6Addr, interface: u32) -> io::Result<()> {
        self.inner.join_multicast_v6(multiaddr, interface)
    }

    /// Leaves an IPv4 multicast group (`IP_DROP_MEMBERSHIP`).
    // entry: a socket option or address: one system call on the descriptor, no runtime state
    pub fn leave_multicast_v4(&self, multiaddr: &Ipv4Addr, interface: &Ipv4Addr) -> io::Result<()> {
        self.inner.leave_multicast_v4(multiaddr, interface)
    }

    /// Leaves an IPv6 multicast group (`IPV6_DROP_MEMBERSHIP`).
    // entry: a socket option or address: one system call on the descriptor, no runtime state
    pub fn leave_multicast_v6(&self, multiaddr: &Ipv6Addr, interface: u32) -> io::Result<()> {
        self.inner.leave_multicast_v6(multiaddr, interface)
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

    /// Takes the pending socket error (`SO_ERROR`), for example an ICMP
    /// port unreachable reported to a connected socket.
    // entry: a socket option or address: one system call on the descriptor, no runtime state
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.inner.take_error()
    }

    /// Sets the default destination and the only source accepted, trying
    /// each address `addr` resolves to (std's `UdpSocket::connect`).
    pub fn connect<A: ToSocketAddrs>(&self, addr: A) -> io::Result<()> {
        super::each_addr(addr, |a| self.inner.connect(a))
    }

    /// Sends `buf` to the connected address.
    #[inline(always)]
    pub fn send(&self, buf: &[u8]) -> io::Result<usize> {
        let r = self.fd.io(Dir::Write, || self.inner.send(buf));
        crate::traceback::keep_caller_frame();
        r
    }

    /// Receives one datagram from the connected address.
    #[inline(always)]
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        let r = self.fd.io(Dir::Read, || self.inner.recv(buf));
        crate::traceback::keep_caller_frame();
        r
    }

    /// Receives one datagram from the connected address without removing
    /// it from the queue.
    #[inline(always)]
    pub fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        let r = self.fd.io(Dir::Read, || self.inner.peek(buf));
        crate::traceback::keep_caller_frame();
        r
    }
}

super::impl_socket!(UdpSocket, std::net::UdpSocket, "a datagram socket");
super::impl_deadlines!(UdpSocket);
