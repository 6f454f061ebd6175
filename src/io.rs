//! Readiness for any file descriptor: [`Fd`], the netpoller for pipes,
//! child stdio, eventfd, signalfd, ttys and serial ports (what tokio's
//! `AsyncFd` is for async code).
//!
//! # Design
//! `Fd<T>` owns a `T: AsFd`, puts its descriptor in non-blocking mode and
//! registers it with the netpoller through the sockets' own `NetFd`
//! (`net/fd.rs`): the same I/O loop (try the call; on `WouldBlock` park
//! until the netpoller sees an edge; retry), the same per-direction
//! timeouts and deadlines, the same one-waiter-per-direction rule. So an
//! `Fd` behaves exactly like a socket of this crate.
//!
//! `readable()` / `writable()` run that loop over a zero-timeout poll(2) of
//! the descriptor: they return once the descriptor is ready *now* (level),
//! which is what a caller that then does its own non-blocking call needs
//! (the netpoller's edges alone could be stale).
//!
//! # Invariants
//! - The `NetFd` is declared before the inner value, so the registration
//!   is dropped before the descriptor is closed (`into_inner` drops it
//!   first too, and restores the original file status flags).
//! - Regular files and directories are refused: epoll rejects them
//!   (`EPERM`), because they are always "ready" and block in the page
//!   cache instead.

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::time::{Duration, Instant};

use crate::net::fd::{Dir, NetFd, Shared};
use crate::sys::fdio;

/// A file descriptor (owned through `T`) whose waits park the goroutine:
/// reads and writes that would block wait in the netpoller, as sockets do.
///
/// For pipes, child stdio, eventfd, signalfd, ttys and serial ports.
/// Regular files are refused (they cannot be polled): use `std::fs` in a
/// [`syscall`](crate::syscall) block for those.
///
/// ```
/// use std::io::{Read, Write};
/// use std::process::{Command, Stdio};
///
/// goroutine::run(|| {
///     let mut child = Command::new("echo")
///         .arg("hello from a child")
///         .stdout(Stdio::piped())
///         .spawn()
///         .unwrap();
///     // Reading parks this goroutine, not its thread, until output comes.
///     let mut out = goroutine::io::Fd::new(child.stdout.take().unwrap()).unwrap();
///     let mut s = String::new();
///     out.read_to_string(&mut s).unwrap();
///     assert_eq!(s, "hello from a child\n");
///     child.wait().unwrap();
/// });
/// ```
///
/// # A bare `OwnedFd`
/// `Fd<T>` reads and writes through `T`'s own `Read` and `Write` (so a
/// type with its own framing keeps it). `OwnedFd` has neither, and Rust's
/// coherence rules forbid adding them for `Fd<OwnedFd>` beside the generic
/// impls (std may one day implement `Read` for `OwnedFd`, and then the two
/// would overlap). Wrap the descriptor in a `File`, whose `Read` and `Write`
/// are plain read(2) and write(2) (a pipe or eventfd in a `File` is still
/// a pipe: only regular files are refused):
///
/// ```
/// use std::io::{Read, Write};
/// use std::os::fd::OwnedFd;
///
/// # fn pipe() -> (OwnedFd, OwnedFd) {
/// #     use std::os::fd::FromRawFd;
/// #     let mut fds = [0; 2];
/// #     assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
/// #     unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
/// # }
/// let (r, w): (OwnedFd, OwnedFd) = pipe();
/// goroutine::run(move || {
///     let mut w = goroutine::io::Fd::new(std::fs::File::from(w)).unwrap();
///     let mut r = goroutine::io::Fd::new(std::fs::File::from(r)).unwrap();
///     w.write_all(b"ping").unwrap();
///     drop(w);
///     let mut s = String::new();
///     r.read_to_string(&mut s).unwrap();
///     assert_eq!(s, "ping");
/// });
/// ```
pub struct Fd<T: AsFd> {
    // Declared first: dropped (deregistered) before `inner` closes the fd.
    net: NetFd,
    inner: T,
    /// The file status flags before `new` set `O_NONBLOCK`.
    flags: libc::c_int,
}

impl<T: AsFd> Fd<T> {
    /// Takes `inner`, makes its descriptor non-blocking and registers it
    /// with the netpoller (starting the runtime if needed). Fails with
    /// `InvalidInput` for a regular file or a directory, and with the
    /// system's error if the descriptor cannot be registered.
    pub fn new(inner: T) -> io::Result<Fd<T>> {
        crate::runtime::entry::call(|| {
            let fd = inner.as_fd().as_raw_fd();
            let kind = fdio::file_type(fd)?;
            if kind == libc::S_IFREG || kind == libc::S_IFDIR {
                let what = if kind == libc::S_IFREG {
                    "a regular file"
                } else {
                    "a directory"
                };
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "goroutine::io::Fd::new: descriptor {fd} is {what}, which epoll cannot \
                         poll (it is always ready and blocks in the kernel instead); use \
                         std::fs inside goroutine::syscall for files"
                    ),
                ));
            }
            let flags = fdio::status_flags(fd)?;
            if flags & libc::O_NONBLOCK == 0 {
                fdio::set_status_flags(fd, flags | libc::O_NONBLOCK)?;
            }
            let net = NetFd::new(fd, Shared::new());
            if let Err(e) = net.poll() {
                let _ = fdio::set_status_flags(fd, flags);
                return Err(e);
            }
            Ok(Fd { net, inner, flags })
        })
    }

    /// Parks until the descriptor is readable (or hung up, or in error),
    /// or the read deadline / timeout passes (`TimedOut`).
    #[inline(always)]
    pub fn readable(&self) -> io::Result<()> {
        let fd = self.raw();
        let r = self.net.io(Dir::Read, || ready(fdio::ready_now(fd, true)));
        // A caller that ends with `readable` keeps its frame in dumps.
        crate::traceback::keep_caller_frame();
        r
    }

    /// Parks until the descriptor is writable (or in error), or the write
    /// deadline / timeout passes (`TimedOut`).
    #[inline(always)]
    pub fn writable(&self) -> io::Result<()> {
        let fd = self.raw();
        let r = self
            .net
            .io(Dir::Write, || ready(fdio::ready_now(fd, false)));
        crate::traceback::keep_caller_frame();
        r
    }

    /// Runs `op`, a non-blocking operation on the descriptor, until it does
    /// not fail with `WouldBlock`, parking for readability in between
    /// (`write`: writability). For calls `Read`/`Write` do not cover
    /// (`recvmsg`, an eventfd's 8-byte read through `libc`, ioctls).
    pub fn read_with<R>(&self, op: impl FnMut(&T) -> io::Result<R>) -> io::Result<R> {
        self.with(Dir::Read, op)
    }

    /// Like [`read_with`](Self::read_with), waiting for writability.
    pub fn write_with<R>(&self, op: impl FnMut(&T) -> io::Result<R>) -> io::Result<R> {
        self.with(Dir::Write, op)
    }

    fn with<R>(&self, dir: Dir, mut op: impl FnMut(&T) -> io::Result<R>) -> io::Result<R> {
        let inner = &self.inner;
        self.net.io(dir, || op(inner))
    }

    /// The inner value.
    // entry: an accessor of the wrapped value; no runtime state
    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    /// The inner value, mutably. It must keep the same descriptor.
    // entry: an accessor of the wrapped value; no runtime state
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.inner
    }

    /// Deregisters the descriptor, restores its file status flags (it is
    /// blocking again if it was) and gives the inner value back.
    // entry: an accessor of the wrapped value; no runtime state
    pub fn into_inner(self) -> T {
        let Fd { net, inner, flags } = self;
        drop(net);
        let _ = fdio::set_status_flags(inner.as_fd().as_raw_fd(), flags);
        inner
    }

    /// Bounds every later read's wait to `dur` (`None`: no bound). Expiry
    /// is `TimedOut`. `Some(Duration::ZERO)` is `InvalidInput`, as on
    /// sockets.
    pub fn set_read_timeout(&self, dur: Option<Duration>) -> io::Result<()> {
        self.net.set_timeout(Dir::Read, dur)
    }

    /// Bounds every later write's wait; see [`set_read_timeout`](Self::set_read_timeout).
    pub fn set_write_timeout(&self, dur: Option<Duration>) -> io::Result<()> {
        self.net.set_timeout(Dir::Write, dur)
    }

    /// The read timeout.
    pub fn read_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.net.timeout(Dir::Read))
    }

    /// The write timeout.
    pub fn write_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.net.timeout(Dir::Write))
    }

    /// Go's `SetReadDeadline`: reads (and `readable`) fail with `TimedOut`
    /// once `deadline` has passed; `None` clears it.
    pub fn set_read_deadline(&self, deadline: Option<Instant>) {
        self.net.set_deadline(Dir::Read, deadline);
    }

    /// Go's `SetWriteDeadline`; see [`set_read_deadline`](Self::set_read_deadline).
    pub fn set_write_deadline(&self, deadline: Option<Instant>) {
        self.net.set_deadline(Dir::Write, deadline);
    }

    /// Go's `SetDeadline`: both the read and the write deadline.
    pub fn set_deadline(&self, deadline: Option<Instant>) {
        self.set_read_deadline(deadline);
        self.set_write_deadline(deadline);
    }

    /// With `true`, reads and writes that would wait fail with `WouldBlock`
    /// instead; the descriptor itself stays non-blocking.
    // entry: one fcntl(2) on the descriptor; no runtime state
    pub fn set_nonblocking(&self, nonblocking: bool) -> io::Result<()> {
        self.net.set_nonblocking(nonblocking);
        Ok(())
    }

    fn raw(&self) -> RawFd {
        self.inner.as_fd().as_raw_fd()
    }
}

fn ready(r: io::Result<bool>) -> io::Result<()> {
    match r {
        Ok(true) => Ok(()),
        Ok(false) => Err(io::ErrorKind::WouldBlock.into()),
        Err(e) => Err(e),
    }
}

impl<T: AsFd> AsFd for Fd<T> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.as_fd()
    }
}

impl<T: AsFd> AsRawFd for Fd<T> {
    fn as_raw_fd(&self) -> RawFd {
        self.raw()
    }
}

impl<T: AsFd + std::fmt::Debug> std::fmt::Debug for Fd<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fd").field("inner", &self.inner).finish()
    }
}

impl<T: AsFd + Read> Read for Fd<T> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let inner = &mut self.inner;
        self.net.io(Dir::Read, || inner.read(buf))
    }

    fn read_vectored(&mut self, bufs: &mut [io::IoSliceMut<'_>]) -> io::Result<usize> {
        let inner = &mut self.inner;
        self.net.io(Dir::Read, || inner.read_vectored(bufs))
    }
}

impl<T: AsFd + Write> Write for Fd<T> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let inner = &mut self.inner;
        self.net.io(Dir::Write, || inner.write(buf))
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        let inner = &mut self.inner;
        self.net.io(Dir::Write, || inner.write_vectored(bufs))
    }

    fn flush(&mut self) -> io::Result<()> {
        let inner = &mut self.inner;
        self.net.io(Dir::Write, || inner.flush())
    }
}

impl<'a, T: AsFd> Read for &'a Fd<T>
where
    &'a T: Read,
{
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut inner: &'a T = &self.inner;
        self.net.io(Dir::Read, || inner.read(buf))
    }
}

impl<'a, T: AsFd> Write for &'a Fd<T>
where
    &'a T: Write,
{
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut inner: &'a T = &self.inner;
        self.net.io(Dir::Write, || inner.write(buf))
    }

    fn flush(&mut self) -> io::Result<()> {
        let mut inner: &'a T = &self.inner;
        self.net.io(Dir::Write, || inner.flush())
    }
}
