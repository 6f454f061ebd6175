//! `goroutine::io::Fd`: readiness for pipes, child stdio and eventfds.

use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use goroutine::io::Fd;

fn pipe() -> (std::fs::File, std::fs::File) {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: pipe2 returned two fresh descriptors we now own.
    unsafe {
        (
            std::fs::File::from(OwnedFd::from_raw_fd(fds[0])),
            std::fs::File::from(OwnedFd::from_raw_fd(fds[1])),
        )
    }
}

#[test]
fn a_pipe_reader_parks_until_a_thread_writes() {
    let (r, mut w) = pipe();
    let h = goroutine::go(move || {
        let mut r = Fd::new(r).unwrap();
        r.readable().unwrap();
        let mut buf = Vec::new();
        r.read_to_end(&mut buf).unwrap();
        buf
    });
    std::thread::sleep(Duration::from_millis(30));
    w.write_all(b"written later").unwrap();
    drop(w);
    assert_eq!(h.join().unwrap(), b"written later");
}

#[test]
fn many_goroutines_on_many_pipes() {
    let mut hs = Vec::new();
    for i in 0..100u32 {
        let (r, w) = pipe();
        let reader = goroutine::go(move || {
            let r = Fd::new(r).unwrap();
            let mut buf = Vec::new();
            // `&Fd<File>` reads, since `&File` does.
            (&r).read_to_end(&mut buf).unwrap();
            buf
        });
        let writer = goroutine::go(move || {
            let mut w = Fd::new(w).unwrap();
            // More than a pipe buffer (64 KiB): the writer parks too.
            let data: Vec<u8> = (0..200_000u32).map(|k| (k ^ i) as u8).collect();
            w.write_all(&data).unwrap();
            data
        });
        hs.push((reader, writer));
    }
    for (r, w) in hs {
        let sent = w.join().unwrap();
        assert_eq!(r.join().unwrap(), sent);
    }
}

#[test]
fn read_deadline_and_timeout_as_on_sockets() {
    let (r, _w) = pipe();
    goroutine::run(move || {
        let mut r = Fd::new(r).unwrap();
        r.set_read_deadline(Some(Instant::now() + Duration::from_millis(20)));
        let mut b = [0u8; 8];
        assert_eq!(r.read(&mut b).unwrap_err().kind(), ErrorKind::TimedOut);
        assert_eq!(r.readable().unwrap_err().kind(), ErrorKind::TimedOut);
        r.set_read_deadline(None);
        r.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        assert_eq!(r.read_timeout().unwrap(), Some(Duration::from_millis(20)));
        // An expired std-style timeout reports what std does on Linux.
        assert_eq!(r.read(&mut b).unwrap_err().kind(), ErrorKind::WouldBlock);
        assert_eq!(
            r.set_read_timeout(Some(Duration::ZERO)).unwrap_err().kind(),
            ErrorKind::InvalidInput
        );
        r.set_nonblocking(true).unwrap();
        assert_eq!(r.read(&mut b).unwrap_err().kind(), ErrorKind::WouldBlock);
    });
}

#[test]
fn a_regular_file_is_refused_with_a_clear_error() {
    let f = std::fs::File::open("Cargo.toml").unwrap();
    let e = Fd::new(f).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    assert!(e.to_string().contains("regular file"), "{e}");
}

#[test]
fn into_inner_restores_blocking_mode() {
    let (r, _w) = pipe();
    let fd = Fd::new(r).unwrap();
    let raw = fd.as_raw_fd();
    // SAFETY: F_GETFL on an open descriptor.
    let flags = unsafe { libc::fcntl(raw, libc::F_GETFL) };
    assert_ne!(flags & libc::O_NONBLOCK, 0);
    let r = fd.into_inner();
    // SAFETY: as above.
    let flags = unsafe { libc::fcntl(r.as_raw_fd(), libc::F_GETFL) };
    assert_eq!(flags & libc::O_NONBLOCK, 0);
}

#[test]
fn child_stdio_round_trip() {
    goroutine::run(|| {
        let mut child = Command::new("cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = Fd::new(child.stdin.take().unwrap()).unwrap();
        let mut stdout = Fd::new(child.stdout.take().unwrap()).unwrap();
        let data: Vec<u8> = (0..300_000u32).map(|k| (k % 251) as u8).collect();
        let writer = {
            let data = data.clone();
            goroutine::go(move || {
                stdin.write_all(&data).unwrap();
                // Dropping closes cat's stdin.
            })
        };
        let mut out = Vec::new();
        stdout.read_to_end(&mut out).unwrap();
        writer.join().unwrap();
        assert!(child.wait().unwrap().success());
        assert_eq!(out, data);
    });
}

#[test]
fn an_eventfd_through_read_with() {
    // SAFETY: eventfd takes integers; the result is a fresh descriptor.
    let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    assert!(raw >= 0);
    // SAFETY: we own the new descriptor.
    let efd = Fd::new(unsafe { OwnedFd::from_raw_fd(raw) }).unwrap();
    let efd = std::sync::Arc::new(efd);
    let reader = {
        let efd = efd.clone();
        goroutine::go(move || {
            efd.read_with(|fd| {
                let mut v = 0u64;
                // SAFETY: reads 8 bytes into `v`.
                let n = unsafe { libc::read(fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
                if n < 0 {
                    Err(std::io::Error::last_os_error())
                } else {
                    Ok(v)
                }
            })
            .unwrap()
        })
    };
    std::thread::sleep(Duration::from_millis(20));
    let one = 5u64;
    // SAFETY: writes 8 bytes from `one`.
    let n = unsafe { libc::write(raw, (&one as *const u64).cast(), 8) };
    assert_eq!(n, 8);
    assert_eq!(reader.join().unwrap(), 5);
}

#[test]
fn an_fd_used_from_a_plain_thread_blocks_the_thread() {
    let (r, mut w) = pipe();
    let mut r = Fd::new(r).unwrap();
    let writer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        w.write_all(b"to a thread").unwrap();
    });
    let mut buf = [0u8; 11];
    r.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"to a thread");
    writer.join().unwrap();
}
