//! TCP socket set-up for the netpoller, on the `socket2` crate (the one
//! tokio and mio use): sockets created non-blocking and close-on-exec in one
//! call (`SOCK_NONBLOCK | SOCK_CLOEXEC`), a non-blocking `connect`, `listen`
//! with the kernel's maximum backlog, and `accept4`. Reads, writes and
//! socket options go through std on the socket itself; UDP and Unix-domain
//! sockets are std's (`std::os::unix::net` handles paths, abstract and
//! unnamed addresses), made non-blocking by `net`'s `From` conversions.
//!
//! What stays hand-written here, and why: only the choices socket2 leaves
//! to its caller. The flags (socket2's `Socket::new` adds `SOCK_CLOEXEC`, we
//! add `SOCK_NONBLOCK` so that no `fcntl` follows), the backlog (-1, which
//! the kernel caps to `net.core.somaxconn`, as Go does; std uses 128),
//! `SO_REUSEADDR` before `bind` (as std does on Unix), and a clear error for
//! an accepted peer address that is neither IPv4 nor IPv6 (socket2 returns
//! `None`). The sockaddr conversions are socket2's and allocate nothing:
//! `SockAddr` is a `sockaddr_storage` on the stack, so `accept` costs the
//! `accept4` call and nothing else. The connect-in-progress protocol
//! (`EINPROGRESS`, wait for writability, `SO_ERROR`, peer check) is in
//! `net/tcp_stream.rs`.

use std::io;
use std::net::SocketAddr;
use std::os::fd::BorrowedFd;

use socket2::{Domain, SockAddr, SockRef, Socket, Type};

/// Creates a `SOCK_STREAM` socket of `addr`'s family, non-blocking and
/// close-on-exec.
pub(crate) fn stream_socket(addr: &SocketAddr) -> io::Result<Socket> {
    Socket::new(Domain::for_address(*addr), Type::STREAM.nonblocking(), None)
}

/// Starts (or completes) a connection to `addr`. On a non-blocking socket
/// this usually fails with `EINPROGRESS`: the caller waits for writability
/// and reads `SO_ERROR`.
pub(crate) fn connect(fd: BorrowedFd<'_>, addr: &SocketAddr) -> io::Result<()> {
    SockRef::from(&fd).connect(&SockAddr::from(*addr))
}

/// Binds to `addr` with `SO_REUSEADDR` (as std does on Unix) and listens
/// with a backlog of -1, which the kernel caps to `net.core.somaxconn`
/// (Go uses somaxconn; std uses 128).
pub(crate) fn bind_listen(sock: &Socket, addr: &SocketAddr) -> io::Result<()> {
    sock.set_reuse_address(true)?;
    sock.bind(&SockAddr::from(*addr))?;
    sock.listen(-1)
}

/// Accepts a connection with `accept4`, the new socket non-blocking and
/// close-on-exec; returns it with the peer's address.
pub(crate) fn accept(fd: BorrowedFd<'_>) -> io::Result<(Socket, SocketAddr)> {
    let (sock, addr) = SockRef::from(&fd).accept4(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC)?;
    let addr = addr.as_socket().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "accepted a connection with an address that is not IPv4 or IPv6",
        )
    })?;
    Ok((sock, addr))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{AsFd, AsRawFd};

    /// Addresses round-trip through socket2's conversions, for both
    /// families (IPv6 only where the machine has it); the flags of the
    /// sockets made here are checked on the public types in tests/net.rs.
    #[test]
    fn listen_accept_and_addresses_round_trip() {
        for local in ["127.0.0.1:0", "[::1]:0"] {
            let local: SocketAddr = local.parse().unwrap();
            let listener = stream_socket(&local).unwrap();
            if let Err(e) = bind_listen(&listener, &local) {
                assert!(local.is_ipv6(), "bind {local}: {e}");
                continue; // no IPv6 loopback here
            }
            assert!(listener.reuse_address().unwrap());
            let bound = listener.local_addr().unwrap().as_socket().unwrap();
            assert_eq!(bound.ip(), local.ip());
            assert_ne!(bound.port(), 0);

            // Nothing to accept yet: non-blocking, so WouldBlock at once.
            let e = accept(listener.as_fd()).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::WouldBlock, "{e}");

            let client = stream_socket(&bound).unwrap();
            match connect(client.as_fd(), &bound) {
                Ok(()) => {}
                Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EINPROGRESS), "{e}"),
            }
            let client_addr = client.local_addr().unwrap().as_socket().unwrap();
            let (_server, peer) = loop {
                match accept(listener.as_fd()) {
                    Ok(a) => break a,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
                    Err(e) => panic!("accept: {e}"),
                }
            };
            assert_eq!(peer, client_addr);
        }
    }

    #[test]
    fn connect_refused_is_connection_refused() {
        // A port bound but not listening: the kernel refuses connections to
        // it, and, held (without SO_REUSEADDR), no other test's listener
        // can take it meanwhile (a port closed before the connect could be,
        // and was: a parallel test's listener accepted the connection).
        let held = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        held.bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())
            .unwrap();
        let addr = held.local_addr().unwrap().as_socket().unwrap();
        let s = stream_socket(&addr).unwrap();
        let e = match connect(s.as_fd(), &addr) {
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {
                // Loopback refusals are usually synchronous; otherwise the
                // error arrives in SO_ERROR.
                let mut pfd = libc::pollfd {
                    fd: s.as_raw_fd(),
                    events: libc::POLLOUT,
                    revents: 0,
                };
                // SAFETY: one live pollfd, count 1.
                assert_eq!(unsafe { libc::poll(&mut pfd, 1, 10_000) }, 1);
                s.take_error().unwrap().expect("a refused connection")
            }
            Err(e) => e,
            Ok(()) => panic!("connected to a closed port"),
        };
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused, "{e}");
    }
}
