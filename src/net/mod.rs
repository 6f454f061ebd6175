//! Networking for goroutines: [`TcpListener`], [`TcpStream`], [`UdpSocket`],
//! [`UnixListener`] and [`UnixStream`], with the constructors and methods of
//! `std::net` and `std::os::unix::net`, whose blocking operations park the
//! goroutine instead of blocking its OS thread (Go's `net` package on its
//! netpoller).
//!
//! ```no_run
//! use std::io::{Read, Write};
//! use goroutine::net::TcpListener;
//!
//! goroutine::run(|| {
//!     let listener = TcpListener::bind("127.0.0.1:7878")?;
//!     for stream in listener.incoming() {
//!         let mut stream = stream?;
//!         goroutine::go(move || {
//!             let mut buf = [0; 4096];
//!             while let Ok(n @ 1..) = stream.read(&mut buf) {
//!                 if stream.write_all(&buf[..n]).is_err() {
//!                     break;
//!                 }
//!             }
//!         });
//!     }
//!     Ok::<(), std::io::Error>(())
//! })
//! .unwrap();
//! ```
//!
//! # Design
//! Each type is a std socket in non-blocking mode plus a `NetFd` (`fd.rs`): the
//! netpoller registration, the timeouts and deadlines, and the I/O loop
//! (try the system call; on `WouldBlock`, park until the netpoller reports
//! the descriptor ready, then try again). Go's `net` is built the same way
//! (`netFD` over `internal/poll.FD` over `pollDesc`). The loop, its
//! invariants and the registration rules are in `fd.rs`; the socket calls
//! std lacks (non-blocking `connect`, `accept4`, `listen`) are socket2's,
//! set up in `crate::sys::socket`.
//!
//! - **Nothing blocks an OS thread.** Sockets are created non-blocking
//!   (`SOCK_NONBLOCK | SOCK_CLOEXEC`), `connect` waits for writability and
//!   reads `SO_ERROR`, `accept` is `accept4`. Name resolution (the
//!   `ToSocketAddrs` argument of `bind`, `connect`, `send_to`) may block
//!   in the resolver, so it runs under [`crate::syscall`].
//! - **Outside the runtime** (a plain thread) the same calls block the
//!   thread, as std's do.
//! - **Timeouts and deadlines.** `set_read_timeout` / `set_write_timeout`
//!   have std's signatures and errors (`Some(Duration::ZERO)` is
//!   `InvalidInput`) and bound each operation's wait. Go's absolute
//!   deadlines are there too (`set_read_deadline`, `set_write_deadline`,
//!   `set_deadline`): once a deadline has passed, operations in that
//!   direction fail at once, even with data ready, as in Go. An operation
//!   waits until the earlier of the deadline and now + timeout. A passed
//!   deadline is `ErrorKind::TimedOut` ("i/o timeout", Go's
//!   `os.ErrDeadlineExceeded`); an expired std timeout is `WouldBlock`
//!   (`EAGAIN`, what std reports on Linux), so std code ported unchanged
//!   behaves the same. Deadlines act at once, as Go's `net.Conn`'s: setting
//!   one re-arms an operation already waiting in that direction (on any
//!   handle of the socket), a deadline in the past wakes it with
//!   `TimedOut`, a later one or `None` keeps it waiting. A std timeout, as
//!   `SO_RCVTIMEO` on Linux, is fixed when an operation starts: a new one
//!   applies to later operations. A plain thread (outside the runtime)
//!   blocked in an operation is not re-armed: it keeps the deadline it
//!   started with. Listeners have `set_deadline` for `accept`.
//! - **`set_nonblocking(true)`** is accepted: the descriptor is always
//!   `O_NONBLOCK` underneath, and the flag makes operations that would wait
//!   fail with `WouldBlock` instead, as std's do.
//! - **Handles and clones.** `try_clone` `dup`s the descriptor, as std:
//!   the clone has its own registration and shares the timeouts, deadlines
//!   and non-blocking flag (std's are socket options and file status flags,
//!   shared through `dup`). Goroutines may use one handle from both sides at
//!   once through `&TcpStream` / `&UnixStream` (`Read` and `Write` are
//!   implemented for the references); operations in the same direction on
//!   one handle wait one at a time (Go's `fdMutex`).
//! - **Listeners** listen with the kernel's maximum backlog
//!   (`net.core.somaxconn`, as Go; std uses 128). An `accept` that fails
//!   with `EMFILE`/`ENFILE` returns the error and the listener keeps
//!   working.
//! - **Socket options** start at std's (and the kernel's) defaults: Nagle
//!   is on until `set_nodelay(true)`, no keep-alive (Go turns on
//!   `TCP_NODELAY` and 15 s keep-alives for every TCP connection).
//! - **Errors** are std's `io::Error`s with std's kinds
//!   (`ConnectionRefused`, `AddrInUse`, `TimedOut`, ...); nothing panics.

/// `Read`/`Write` for a stream type and for `&` it: each call is the std
/// socket's operation on the non-blocking fd, retried by `NetFd::io`
/// (parking on the netpoller) while it would block. The type needs fields
/// `inner` (the std socket) and `fd` (its `NetFd`). Inlined into the
/// caller, ending with `keep_caller_frame`: a function that ends with a
/// read keeps its frame in dumps (`traceback::keep_caller_frame`); the
/// same for the other waiting socket calls (`accept`, `recv_from`, ...).
macro_rules! impl_stream_io {
    ($t:ty) => {
        impl std::io::Read for &$t {
            #[inline(always)]
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let r = self.fd.io(super::fd::Dir::Read, || {
                    std::io::Read::read(&mut &self.inner, buf)
                });
                crate::traceback::keep_caller_frame();
                r
            }

            #[inline(always)]
            fn read_vectored(
                &mut self,
                bufs: &mut [std::io::IoSliceMut<'_>],
            ) -> std::io::Result<usize> {
                let r = self.fd.io(super::fd::Dir::Read, || {
                    std::io::Read::read_vectored(&mut &self.inner, bufs)
                });
                crate::traceback::keep_caller_frame();
                r
            }
        }

        impl std::io::Write for &$t {
            #[inline(always)]
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                let r = self.fd.io(super::fd::Dir::Write, || {
                    std::io::Write::write(&mut &self.inner, buf)
                });
                crate::traceback::keep_caller_frame();
                r
            }

            #[inline(always)]
            fn write_vectored(&mut self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
                let r = self.fd.io(super::fd::Dir::Write, || {
                    std::io::Write::write_vectored(&mut &self.inner, bufs)
                });
                crate::traceback::keep_caller_frame();
                r
            }

            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }

        impl std::io::Read for $t {
            #[inline(always)]
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                std::io::Read::read(&mut &*self, buf)
            }

            #[inline(always)]
            fn read_vectored(
                &mut self,
                bufs: &mut [std::io::IoSliceMut<'_>],
            ) -> std::io::Result<usize> {
                std::io::Read::read_vectored(&mut &*self, bufs)
            }
        }

        impl std::io::Write for $t {
            #[inline(always)]
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                std::io::Write::write(&mut &*self, buf)
            }

            #[inline(always)]
            fn write_vectored(&mut self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
                std::io::Write::write_vectored(&mut &*self, bufs)
            }

            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
    };
}
use impl_stream_io;

/// What every socket type has, written once: `try_clone`,
/// `set_nonblocking`, the conversions from std and from descriptors, the
/// fd traits and `Debug`. The type needs fields `fd` (its `NetFd`, declared
/// first) and `inner` (the std socket `$std`).
macro_rules! impl_socket {
    ($t:ident, $std:ty, $what:literal) => {
        impl $t {
            /// Wraps a std socket that is already non-blocking.
            pub(crate) fn from_nonblocking(inner: $std) -> $t {
                $t {
                    fd: super::fd::NetFd::new(
                        std::os::fd::AsRawFd::as_raw_fd(&inner),
                        super::fd::Shared::new(),
                    ),
                    inner,
                }
            }

            /// A new handle to the same socket (a `dup`ed descriptor). It
            /// shares the timeouts, deadlines and non-blocking flag with
            /// this one.
            pub fn try_clone(&self) -> std::io::Result<$t> {
                let inner = self.inner.try_clone()?;
                Ok($t {
                    fd: self.fd.cloned(std::os::fd::AsRawFd::as_raw_fd(&inner)),
                    inner,
                })
            }

            /// With `true`, operations that would wait fail with
            /// `WouldBlock` instead (std's behaviour); the descriptor
            /// itself is always non-blocking.
            pub fn set_nonblocking(&self, nonblocking: bool) -> std::io::Result<()> {
                self.fd.set_nonblocking(nonblocking);
                Ok(())
            }
        }

        /// Takes over a std socket: puts it in non-blocking mode (its
        /// blocking operations now park instead).
        impl From<$std> for $t {
            fn from(s: $std) -> $t {
                // FIONBIO on an open socket cannot fail (only a bad
                // descriptor or argument pointer makes ioctl fail).
                let _ = s.set_nonblocking(true);
                $t::from_nonblocking(s)
            }
        }

        #[doc = concat!("Takes over ", $what, " descriptor, as std's `From<OwnedFd>`.")]
        impl From<std::os::fd::OwnedFd> for $t {
            fn from(fd: std::os::fd::OwnedFd) -> $t {
                $t::from(<$std>::from(fd))
            }
        }

        impl std::os::fd::FromRawFd for $t {
            #[doc = concat!("# Safety\n`fd` must be ", $what, " that nothing else owns.")]
            unsafe fn from_raw_fd(fd: std::os::fd::RawFd) -> $t {
                // SAFETY: the caller passes ownership of an open socket.
                $t::from(unsafe { <$std as std::os::fd::FromRawFd>::from_raw_fd(fd) })
            }
        }

        impl std::os::fd::AsRawFd for $t {
            fn as_raw_fd(&self) -> std::os::fd::RawFd {
                std::os::fd::AsRawFd::as_raw_fd(&self.inner)
            }
        }

        impl std::os::fd::AsFd for $t {
            fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
                std::os::fd::AsFd::as_fd(&self.inner)
            }
        }

        /// Deregisters and gives up the descriptor, which stays non-blocking.
        impl std::os::fd::IntoRawFd for $t {
            fn into_raw_fd(self) -> std::os::fd::RawFd {
                let $t { fd, inner } = self;
                drop(fd);
                std::os::fd::IntoRawFd::into_raw_fd(inner)
            }
        }

        impl std::fmt::Debug for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Debug::fmt(&self.inner, f)
            }
        }
    };
}
use impl_socket;

/// std's timeouts and Go's deadlines for a connection type (streams and
/// UDP), written once; see the module note, "Timeouts and deadlines".
macro_rules! impl_deadlines {
    ($t:ident) => {
        impl $t {
            /// Bounds the wait of every read that starts later to `dur`
            /// (`None`: no bound), as std: expiry is `WouldBlock` (`EAGAIN`,
            /// what std reports on Linux), and a read already waiting
            /// keeps the timeout it started with. `Some(Duration::ZERO)`
            /// is `InvalidInput`, as in std.
            pub fn set_read_timeout(
                &self,
                dur: Option<std::time::Duration>,
            ) -> std::io::Result<()> {
                self.fd.set_timeout(super::fd::Dir::Read, dur)
            }

            /// Bounds the wait of every write that starts later to `dur`;
            /// see [`set_read_timeout`](Self::set_read_timeout).
            pub fn set_write_timeout(
                &self,
                dur: Option<std::time::Duration>,
            ) -> std::io::Result<()> {
                self.fd.set_timeout(super::fd::Dir::Write, dur)
            }

            /// The read timeout.
            pub fn read_timeout(&self) -> std::io::Result<Option<std::time::Duration>> {
                Ok(self.fd.timeout(super::fd::Dir::Read))
            }

            /// The write timeout.
            pub fn write_timeout(&self) -> std::io::Result<Option<std::time::Duration>> {
                Ok(self.fd.timeout(super::fd::Dir::Write))
            }

            /// Go's `SetReadDeadline`: reads fail with `TimedOut` once
            /// `deadline` has passed (at once, even with data ready);
            /// `None` clears it. It acts on a read already waiting, on this
            /// handle or a clone: a deadline in the past wakes it with
            /// `TimedOut`, a later one or `None` keeps it waiting until the
            /// new deadline.
            pub fn set_read_deadline(&self, deadline: Option<std::time::Instant>) {
                self.fd.set_deadline(super::fd::Dir::Read, deadline);
            }

            /// Go's `SetWriteDeadline`; see
            /// [`set_read_deadline`](Self::set_read_deadline).
            pub fn set_write_deadline(&self, deadline: Option<std::time::Instant>) {
                self.fd.set_deadline(super::fd::Dir::Write, deadline);
            }

            /// Go's `SetDeadline`: both the read and the write deadline.
            pub fn set_deadline(&self, deadline: Option<std::time::Instant>) {
                self.set_read_deadline(deadline);
                self.set_write_deadline(deadline);
            }
        }
    };
}
use impl_deadlines;

/// Go's `SetDeadline` for a listener, written once.
macro_rules! impl_listener_deadline {
    ($t:ident) => {
        impl $t {
            /// Go's `Listener.SetDeadline`: `accept` fails with `TimedOut`
            /// once `deadline` has passed, also an `accept` already
            /// waiting (moving the deadline into the past wakes it).
            /// `None` clears it and `accept` works again.
            pub fn set_deadline(&self, deadline: Option<std::time::Instant>) {
                self.fd.set_deadline(super::fd::Dir::Read, deadline);
            }
        }
    };
}
use impl_listener_deadline;

pub(crate) mod fd;
mod tcp_listener;
mod tcp_stream;
mod udp_socket;
mod unix_listener;
mod unix_stream;

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};

pub use std::net::Shutdown;

pub use self::tcp_listener::{Incoming, TcpListener};
pub use self::tcp_stream::TcpStream;
pub use self::udp_socket::UdpSocket;
pub use self::unix_listener::{UnixIncoming, UnixListener};
pub use self::unix_stream::UnixStream;

/// Resolves `addr` without holding up other goroutines.
fn resolve<A: ToSocketAddrs>(addr: A) -> io::Result<Vec<SocketAddr>> {
    crate::runtime::syscall::syscall(false, || addr.to_socket_addrs().map(Iterator::collect))
}

/// std's `each_addr`: tries `f` on every address `addr` resolves to and
/// returns the first success, or the last error.
fn each_addr<A: ToSocketAddrs, T>(
    addr: A,
    mut f: impl FnMut(&SocketAddr) -> io::Result<T>,
) -> io::Result<T> {
    let mut last = None;
    for a in resolve(addr)? {
        match f(&a) {
            Ok(t) => return Ok(t),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "could not resolve to any addresses",
        )
    }))
}

/// The first address `addr` resolves to (std's rule for `send_to`).
fn first_addr<A: ToSocketAddrs>(addr: A) -> io::Result<SocketAddr> {
    resolve(addr)?
        .into_iter()
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no addresses to send data to"))
}

/// Every type here can be moved to and shared between goroutines.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<TcpListener>();
    send_sync::<TcpStream>();
    send_sync::<UdpSocket>();
    send_sync::<UnixListener>();
    send_sync::<UnixStream>();
};
