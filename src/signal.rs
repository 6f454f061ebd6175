//! Incoming Unix signals on a channel (Go's `os/signal.Notify`).
//!
//! ```no_run
//! goroutine::run(|| {
//!     let sigs = goroutine::signal::notify(&[libc::SIGTERM, libc::SIGINT])?;
//!     let sig = sigs.recv().expect("the signal channel stays open");
//!     println!("got signal {sig}, shutting down");
//!     Ok::<(), std::io::Error>(())
//! })
//! .unwrap();
//! ```
//!
//! # Design and invariants
//! - **Nothing happens in the handler** but two async-signal-safe steps:
//!   the signal's pending counter is incremented (an atomic) and one byte
//!   is written to a non-blocking socket pair (a full pair drops the byte;
//!   the counter keeps the count). The handler is installed with
//!   signal-hook (`signal_hook::low_level::register`), which chains to a
//!   handler that was there before.
//! - **Delivery** is done by one plain thread, `goroutine-signal`, started
//!   by the first `notify`: it waits on the socket pair, takes each
//!   counter and `try_send`s the signal number to every live receiver of
//!   that signal. As Go's, delivery never blocks: a receiver whose buffer
//!   (64 signals) is full misses the signal. Signals that arrive faster
//!   than the thread runs may be merged by the kernel, as in Go.
//! - **Restoring the disposition.** Before the first registration of a
//!   signal the previous `sigaction` is saved. When every receiver of a
//!   signal is gone (found by the delivery thread within 200 ms, or at the
//!   next signal), that saved disposition is put back with `sigaction`,
//!   and signal-hook's action is kept aside to be re-installed by a later
//!   `notify`. A signal that arrives after the receivers were dropped but
//!   before the restore gets the previous disposition's effect: it is
//!   raised again if that disposition is `SIG_DFL` (a handler was already
//!   chained to by signal-hook; `SIG_IGN` needs nothing).
//! - **Refused:** the signals the runtime itself uses (`SIGURG`:
//!   asynchronous preemption; `SIGQUIT`: the goroutine dump; `SIGSEGV`
//!   and `SIGBUS`: stack guard pages), those that cannot be caught
//!   (`SIGKILL`, `SIGSTOP`) or that mean a fault (`SIGILL`, `SIGFPE`),
//!   numbers outside 1..=SIGRTMAX, and an empty list (Go's "all signals").
//!   Signals nobody registered keep their default behaviour.
//! - The registry lock is a std mutex held only for short, non-blocking
//!   work (no channel operation blocks: `try_send` only).

use std::collections::BTreeMap;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::chan::{chan, Receiver, Sender};

/// Signal numbers go up to SIGRTMAX (64 on Linux).
const MAX_SIG: usize = 65;

/// Signals received and not yet delivered, by number (the handler's only
/// state besides the wake-up byte).
static PENDING: [AtomicU32; MAX_SIG] = [const { AtomicU32::new(0) }; MAX_SIG];

/// How many signals a receiver's buffer holds before it misses some.
const BUFFER: usize = 64;

struct Registry {
    sigs: BTreeMap<i32, SigState>,
    /// The socket pair: the handler writes to `.1`, the thread reads `.0`.
    wake: Option<&'static (UnixStream, UnixStream)>,
}

struct SigState {
    subs: Vec<Sender<i32>>,
    /// The disposition before the first `notify` of this signal.
    original: libc::sigaction,
    /// signal-hook's disposition while the original is back in place
    /// (`None`: signal-hook's handler is installed).
    parked_hook: Option<libc::sigaction>,
}

// SAFETY: `libc::sigaction` is plain data (a handler address, flags and a
// mask); it is only ever handed to sigaction(2).
unsafe impl Send for SigState {}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    sigs: BTreeMap::new(),
    wake: None,
});

fn registry() -> std::sync::MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Delivers each of `signals` on the returned channel (Go's
/// `signal.Notify`), from now until every clone of the receiver is dropped;
/// then the signals' previous dispositions come back (see the module
/// note). Each receipt is the signal's number. Calling it again for a
/// signal adds another receiver: every receiver gets every signal.
///
/// # Errors
/// `InvalidInput`, naming the signal, for an empty list, a number outside
/// 1..=SIGRTMAX, the runtime's own signals (`SIGURG`, `SIGQUIT`,
/// `SIGSEGV`, `SIGBUS`) and `SIGKILL`, `SIGSTOP`, `SIGILL`, `SIGFPE`.
/// Nothing is registered when an error is returned for a list.
// entry: registers with the signal thread (std lock) and makes a channel
pub fn notify(signals: &[i32]) -> io::Result<Receiver<i32>> {
    if signals.is_empty() {
        return Err(invalid(
            "signal::notify: name at least one signal (Go's \"all signals\" is not supported)"
                .to_string(),
        ));
    }
    for &sig in signals {
        check(sig)?;
    }
    let (tx, rx) = chan(BUFFER);
    let mut reg = registry();
    let wake = match reg.wake {
        Some(w) => w,
        None => {
            let w: &'static (UnixStream, UnixStream) = Box::leak(Box::new(start_thread()?));
            reg.wake = Some(w);
            w
        }
    };
    let wfd = wake.1.as_raw_fd();
    for &sig in signals {
        match reg.sigs.get_mut(&sig) {
            Some(st) => {
                if let Some(hook) = st.parked_hook.take() {
                    // SAFETY: `hook` is the sigaction signal-hook installed,
                    // saved by `restore`; re-installing it is what
                    // signal-hook would have left in place.
                    if unsafe { libc::sigaction(sig, &hook, std::ptr::null_mut()) } != 0 {
                        st.parked_hook = Some(hook);
                        return Err(io::Error::last_os_error());
                    }
                }
                st.subs.push(tx.clone());
            }
            None => {
                // SAFETY: a zeroed sigaction is a valid out-parameter.
                let mut original: libc::sigaction = unsafe { std::mem::zeroed() };
                // SAFETY: querying only (null new action).
                if unsafe { libc::sigaction(sig, std::ptr::null(), &mut original) } != 0 {
                    return Err(io::Error::last_os_error());
                }
                let action = move || {
                    // Async-signal-safe only: an atomic add and write(2).
                    PENDING[sig as usize].fetch_add(1, Ordering::Release);
                    let b = 1u8;
                    // SAFETY: write(2) of one byte from a live local to an
                    // fd that is never closed (the pair is leaked).
                    unsafe { libc::write(wfd, (&b as *const u8).cast(), 1) };
                };
                // SAFETY: the action is async-signal-safe (above); `sig`
                // passed `check`, so it is not one signal-hook forbids.
                unsafe { signal_hook::low_level::register(sig, action) }?;
                reg.sigs.insert(
                    sig,
                    SigState {
                        subs: vec![tx.clone()],
                        original,
                        parked_hook: None,
                    },
                );
            }
        }
    }
    Ok(rx)
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// Refuses what the module note lists, with a message naming why.
fn check(sig: i32) -> io::Result<()> {
    let why = match sig {
        libc::SIGURG => Some("is used by the runtime for asynchronous preemption"),
        libc::SIGQUIT => Some("is used by the runtime for its goroutine dump"),
        libc::SIGSEGV | libc::SIGBUS => {
            Some("is used by the runtime to detect goroutine stack overflow")
        }
        libc::SIGKILL | libc::SIGSTOP => Some("cannot be caught or ignored by any process"),
        libc::SIGILL | libc::SIGFPE => Some("reports a fault in the faulting thread"),
        _ => None,
    };
    if let Some(why) = why {
        return Err(invalid(format!(
            "signal::notify: signal {sig} ({}) {why}; it cannot be registered",
            name(sig)
        )));
    }
    if sig < 1 || sig > libc::SIGRTMAX() || sig as usize >= MAX_SIG {
        return Err(invalid(format!(
            "signal::notify: {sig} is not a signal number (1..={})",
            libc::SIGRTMAX()
        )));
    }
    Ok(())
}

fn name(sig: i32) -> &'static str {
    match sig {
        libc::SIGURG => "SIGURG",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSTOP => "SIGSTOP",
        libc::SIGILL => "SIGILL",
        libc::SIGFPE => "SIGFPE",
        _ => "?",
    }
}

/// Creates the wake-up pair and starts the delivery thread.
fn start_thread() -> io::Result<(UnixStream, UnixStream)> {
    let (r, w) = UnixStream::pair()?;
    r.set_nonblocking(true)?;
    w.set_nonblocking(true)?;
    let rfd = r.as_raw_fd();
    std::thread::Builder::new()
        .name("goroutine-signal".into())
        .spawn(move || deliver_loop(rfd))?;
    Ok((r, w))
}

/// The delivery thread: wait for a wake-up byte (or 200 ms while some
/// signal is installed, to notice dropped receivers), drain, deliver.
fn deliver_loop(rfd: i32) -> ! {
    let mut buf = [0u8; 64];
    loop {
        let installed = registry().sigs.values().any(|s| s.parked_hook.is_none());
        let timeout = if installed { 200 } else { -1 };
        // An error (none is expected on a live pipe) just means another
        // round: the read below finds what arrived.
        let _ = crate::sys::poll::poll_one(rfd, true, timeout);
        // SAFETY: reading into a live buffer from the pair's read end,
        // which is never closed (the pair is leaked).
        while unsafe { libc::read(rfd, buf.as_mut_ptr().cast(), buf.len()) } > 0 {}
        deliver();
    }
}

fn deliver() {
    let mut reg = registry();
    for (&sig, st) in reg.sigs.iter_mut() {
        let n = PENDING[sig as usize].swap(0, Ordering::Acquire);
        st.subs
            .retain(|tx| tx.chan.receivers.load(Ordering::Relaxed) > 0);
        for _ in 0..n {
            for tx in &st.subs {
                // Never blocks (Go's Notify): a full buffer misses it.
                let _ = tx.try_send(sig);
            }
        }
        if st.subs.is_empty() && st.parked_hook.is_none() {
            restore(sig, st);
            if n > 0 && st.original.sa_sigaction == libc::SIG_DFL {
                // It arrived after the last receiver went: give it the
                // previous (default) disposition's effect now.
                // SAFETY: sending a signal to our own process.
                unsafe { libc::kill(libc::getpid(), sig) };
            }
        }
    }
}

/// Puts the original disposition back, keeping signal-hook's aside.
fn restore(sig: i32, st: &mut SigState) {
    // SAFETY: a zeroed sigaction is a valid out-parameter.
    let mut hook: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: `original` is the disposition sigaction(2) gave us for `sig`.
    if unsafe { libc::sigaction(sig, &st.original, &mut hook) } == 0 {
        st.parked_hook = Some(hook);
    }
}
