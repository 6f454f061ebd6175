//! `goroutine::signal::notify`, with Go's os/signal tests ported where they
//! apply (TestSignal: signals arrive one after another on the channel;
//! TestStop: after the channel is gone, the default action is back). Each
//! test runs in its own process: dispositions are process-wide.

mod common;

use std::io::ErrorKind;
use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use goroutine::signal::notify;

/// The handler address of `sig`'s current disposition.
fn handler(sig: i32) -> libc::sighandler_t {
    // SAFETY: a zeroed sigaction is a valid out-parameter; querying only.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        assert_eq!(libc::sigaction(sig, std::ptr::null(), &mut old), 0);
        old.sa_sigaction
    }
}

/// Sends `sig` to this process (under ThreadSanitizer, to the signal
/// thread: `common::send_signal` says why).
fn send(sig: i32) {
    // SAFETY: getpid has no preconditions.
    common::send_signal(unsafe { libc::getpid() }, sig, "goroutine-signa");
}

/// Waits (generously) until `sig`'s disposition is the default again.
fn wait_default(sig: i32) {
    let end = Instant::now() + Duration::from_secs(20);
    while handler(sig) != libc::SIG_DFL {
        assert!(Instant::now() < end, "disposition of {sig} not restored");
        std::thread::sleep(Duration::from_millis(10));
    }
}

isolated_test! {
    /// Three SIGUSR1 in a row, each received; two receivers of SIGUSR2 both
    /// get it; a signal nobody asked for does not show up.
    fn three_sigusr1_in_a_row() {
        goroutine::run(|| {
            let rx = notify(&[libc::SIGUSR1]).unwrap();
            assert_ne!(handler(libc::SIGUSR1), libc::SIG_DFL);
            for _ in 0..3 {
                send(libc::SIGUSR1);
                assert_eq!(rx.recv_timeout(Duration::from_secs(20)).unwrap(), libc::SIGUSR1);
            }
            let a = notify(&[libc::SIGUSR2, libc::SIGHUP]).unwrap();
            let b = notify(&[libc::SIGUSR2]).unwrap();
            send(libc::SIGUSR2);
            assert_eq!(a.recv_timeout(Duration::from_secs(20)).unwrap(), libc::SIGUSR2);
            assert_eq!(b.recv_timeout(Duration::from_secs(20)).unwrap(), libc::SIGUSR2);
            send(libc::SIGHUP);
            assert_eq!(a.recv_timeout(Duration::from_secs(20)).unwrap(), libc::SIGHUP);
            // Nothing else arrived on the SIGUSR1 channel.
            assert!(rx.try_recv().is_err());
        });
    }
}

isolated_test! {
    /// The runtime's own signals, uncatchable ones, bad numbers and an empty
    /// list are refused with a message naming the signal; a list with one
    /// bad signal registers nothing.
    fn refused_signals() {
        for (sig, word) in [
            (libc::SIGURG, "SIGURG"),
            (libc::SIGQUIT, "SIGQUIT"),
            (libc::SIGSEGV, "SIGSEGV"),
            (libc::SIGBUS, "SIGBUS"),
            (libc::SIGKILL, "SIGKILL"),
            (libc::SIGSTOP, "SIGSTOP"),
            (0, "not a signal"),
            (1000, "not a signal"),
            (-1, "not a signal"),
        ] {
            let e = notify(&[sig]).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidInput);
            assert!(e.to_string().contains(word), "{sig}: {e}");
            // Grammatical: "is used by", "cannot be caught", never "is cannot".
            assert!(!e.to_string().contains("is cannot"), "{sig}: {e}");
        }
        let e = notify(&[libc::SIGKILL]).unwrap_err().to_string();
        assert!(
            e.contains("signal 9 (SIGKILL) cannot be caught or ignored"),
            "{e}"
        );
        let e = notify(&[]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
        assert!(notify(&[libc::SIGUSR2, libc::SIGURG]).is_err());
        assert_eq!(handler(libc::SIGUSR2), libc::SIG_DFL);
    }
}

/// The child: registers SIGUSR2, drops the receiver, waits for the default
/// disposition, registers again (works), drops again, and finally sends
/// itself SIGUSR2, which must kill it.
#[test]
fn dropping_receivers_restores_default() {
    if common::is_child("dropping_receivers_restores_default") {
        goroutine::run(|| {
            let rx = notify(&[libc::SIGUSR2]).unwrap();
            send(libc::SIGUSR2);
            assert_eq!(
                rx.recv_timeout(Duration::from_secs(20)).unwrap(),
                libc::SIGUSR2
            );
            drop(rx);
            wait_default(libc::SIGUSR2);
            let rx = notify(&[libc::SIGUSR2]).unwrap();
            assert_ne!(handler(libc::SIGUSR2), libc::SIG_DFL);
            send(libc::SIGUSR2);
            assert_eq!(
                rx.recv_timeout(Duration::from_secs(20)).unwrap(),
                libc::SIGUSR2
            );
            let clone = rx.clone();
            drop(rx);
            // One clone left: still registered.
            send(libc::SIGUSR2);
            assert_eq!(
                clone.recv_timeout(Duration::from_secs(20)).unwrap(),
                libc::SIGUSR2
            );
            drop(clone);
            wait_default(libc::SIGUSR2);
            println!("restored");
            send(libc::SIGUSR2);
            std::thread::sleep(Duration::from_secs(20));
            println!("survived SIGUSR2");
        });
        return;
    }
    let out = common::spawn("dropping_receivers_restores_default", &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("restored") && !stdout.contains("survived"),
        "{}\nstderr: {}",
        stdout,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.signal(), Some(libc::SIGUSR2), "{:?}", out.status);
}
