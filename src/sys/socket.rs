//! Socket system calls that std does not expose in the form the netpoller
//! needs: sockets created non-blocking and close-on-exec in one call
//! (`SOCK_NONBLOCK | SOCK_CLOEXEC`), a non-blocking `connect`, `listen` with
//! the kernel's maximum backlog, and `accept4`. Everything else (reads,
//! writes, socket options) goes through std on the socket itself.
//!
//! Addresses cross the boundary as `std::net::SocketAddr`; the conversion to
//! and from `sockaddr_in` / `sockaddr_in6` lives here and nowhere else.

use std::io;
use std::mem::{size_of, MaybeUninit};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// Creates a `SOCK_STREAM` socket of `addr`'s family, non-blocking and
/// close-on-exec.
pub(crate) fn stream_socket(addr: &SocketAddr) -> io::Result<OwnedFd> {
    let domain = match addr {
        SocketAddr::V4(_) => libc::AF_INET,
        SocketAddr::V6(_) => libc::AF_INET6,
    };
    // SAFETY: socket(2) takes only integers; on success we own the new fd.
    let fd = unsafe {
        libc::socket(
            domain,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a freshly created descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Starts (or completes) a connection to `addr`. On a non-blocking socket
/// this usually fails with `EINPROGRESS`: the caller waits for writability
/// and reads `SO_ERROR`.
pub(crate) fn connect(fd: BorrowedFd<'_>, addr: &SocketAddr) -> io::Result<()> {
    let (storage, len) = to_sockaddr(addr);
    // SAFETY: `storage` holds a valid sockaddr of `len` bytes for the call.
    let r = unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&storage as *const libc::sockaddr_storage).cast(),
            len,
        )
    };
    cvt(r)
}

/// Binds to `addr` with `SO_REUSEADDR` (as std does on Unix) and listens
/// with a backlog of -1, which the kernel caps to `net.core.somaxconn`
/// (Go uses somaxconn; std uses 128).
pub(crate) fn bind_listen(fd: BorrowedFd<'_>, addr: &SocketAddr) -> io::Result<()> {
    let one: libc::c_int = 1;
    // SAFETY: the option value is a live c_int of the size passed.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&one as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    })?;
    let (storage, len) = to_sockaddr(addr);
    // SAFETY: `storage` holds a valid sockaddr of `len` bytes for the call.
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&storage as *const libc::sockaddr_storage).cast(),
            len,
        )
    })?;
    // SAFETY: listen(2) takes only integers.
    cvt(unsafe { libc::listen(fd.as_raw_fd(), -1) })
}

/// Accepts a connection with `accept4`, the new socket non-blocking and
/// close-on-exec; returns it with the peer's address.
pub(crate) fn accept(fd: BorrowedFd<'_>) -> io::Result<(OwnedFd, SocketAddr)> {
    let mut storage = MaybeUninit::<libc::sockaddr_storage>::zeroed();
    let mut len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: `storage` is writable for `len` bytes and `len` is a live
    // socklen_t; the kernel writes at most `len` bytes and updates `len`.
    let new = unsafe {
        libc::accept4(
            fd.as_raw_fd(),
            storage.as_mut_ptr().cast(),
            &mut len,
            libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
        )
    };
    if new < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: accept4 returned a new descriptor that nothing else owns.
    let owned = unsafe { OwnedFd::from_raw_fd(new) };
    // SAFETY: zero-initialised storage, partly filled in by the kernel, is a
    // valid sockaddr_storage.
    let storage = unsafe { storage.assume_init() };
    Ok((owned, from_sockaddr(&storage, len)?))
}

fn cvt(r: libc::c_int) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn to_sockaddr(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain old data; all zeroes is valid.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    // The octets are already in network order.
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for every
            // sockaddr type, sockaddr_in included.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin) };
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: as above, for sockaddr_in6.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin6) };
            size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

fn from_sockaddr(storage: &libc::sockaddr_storage, len: libc::socklen_t) -> io::Result<SocketAddr> {
    let len = len as usize;
    match storage.ss_family as libc::c_int {
        libc::AF_INET if len >= size_of::<libc::sockaddr_in>() => {
            // SAFETY: the family says the storage holds a sockaddr_in, and
            // sockaddr_storage is aligned for it.
            let sin =
                unsafe { &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
            Ok(SocketAddr::V4(SocketAddrV4::new(
                ip,
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 if len >= size_of::<libc::sockaddr_in6>() => {
            // SAFETY: as above, for sockaddr_in6.
            let sin6 = unsafe {
                &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>()
            };
            Ok(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "accepted a connection with an address that is not IPv4 or IPv6",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockaddr_round_trip() {
        for a in [
            "127.0.0.1:80",
            "0.0.0.0:0",
            "255.1.2.3:65535",
            "[::1]:8080",
            "[fe80::1%3]:1",
        ] {
            let addr: SocketAddr = a.parse().unwrap();
            let (storage, len) = to_sockaddr(&addr);
            assert_eq!(from_sockaddr(&storage, len).unwrap(), addr, "{a}");
        }
    }
}
