//! Testing concurrent code with a fake clock (Go 1.25's `testing/synctest`).
//!
//! [`test`](fn@test) runs a closure as the root goroutine of a *bubble*. Goroutines
//! spawned in a bubble belong to it, and the bubble has a clock of its own,
//! which starts at 2000-01-01 00:00:00 UTC and moves only when every
//! goroutine of the bubble is *durably blocked*: blocked in a way that only
//! another goroutine of the bubble, or the bubble's clock, can end. The
//! clock then jumps to the earliest timer of the bubble, which fires. So
//! code that sleeps, ticks and times out runs at once and gives the same
//! virtual times every run, at any GOMAXPROCS and in any scheduling order.
//!
//! Inside a bubble, [`time::now`](crate::time::now),
//! [`time::instant`](crate::time::instant), [`time::sleep`](crate::time::sleep),
//! [`time::after`](crate::time::after), [`time::after_func`](crate::time::after_func),
//! [`Timer`](crate::time::Timer), [`Ticker`](crate::time::Ticker), channel
//! timeouts (`recv_timeout`, `send_timeout`), `select!`'s timeout arms and
//! [`Context`](crate::context::Context) deadlines all read the bubble's
//! clock. (`std::time::Instant::now` and `std::thread::sleep` do not: they
//! are the real clock.)
//!
//! [`wait`] blocks until every other goroutine of the bubble is durably
//! blocked (Go's `synctest.Wait`): after it, whatever the others could do
//! without the clock moving is done.
//!
//! A timer that is due when it is started (a zero duration:
//! `Timer::new(Duration::ZERO)`, `after(ZERO)`, `after_func(ZERO, f)`, a
//! reset to zero) fires at once, as in Go, without waiting for the bubble
//! to block: a `select!` with `default` finds its value, and a zero
//! `after_func`'s goroutine starts while its creator keeps running. The
//! clock does not move for it, so virtual times stay the same.
//!
//! ```
//! use std::time::Duration;
//! use goroutine::{synctest, time};
//!
//! synctest::test(|| {
//!     let start = time::now();
//!     time::sleep(Duration::from_secs(3600)); // returns at once
//!     assert_eq!(time::now().duration_since(start).unwrap(), Duration::from_secs(3600));
//! });
//! ```
//!
//! # Durable waits
//! Go's rules, adapted to this crate's primitives. A wait is durable when
//! nothing outside the bubble can end it, so the clock may move past it.
//!
//! | Wait (its dump name) | Durable | Why |
//! |---|---|---|
//! | channel send, receive, `select!` (`chan send`, `chan receive`, `select`, `select (no cases)`) | yes | A bubble's goroutines use its channels; a peer outside the bubble is misuse (see below), so another member is the only waker. |
//! | `time::sleep`, timer and ticker channels, timeouts (`sleep`, `select`) | yes | Their timers are the bubble's, fired only when its clock moves. |
//! | `Condvar` wait (`sync.Cond.Wait`) | yes | As Go: the notifier is another member (a notify from outside that would wake a member panics: below). |
//! | `WaitGroup::wait` (`sync.WaitGroup.Wait`) | yes, if the group is bound to the bubble | As Go: a group whose counter a member raised from zero is bound to the bubble until it is back at zero; `done` then comes from the members it counts (from outside, it panics: below). A group raised outside the bubble is not bound: its `done` may come from outside, so waiting on it is not durable. |
//! | `JoinHandle::join` (`join`) | yes | Go has no join; joining a member ends only when that member ends. |
//! | [`wait`] (`synctest.Wait`) | yes | It is what `wait` waits for. |
//! | `Mutex`, `RwLock`, `Once`, `Semaphore` (`sync.Mutex.Lock`, `semacquire`, ...) | no | As Go: a lock's holder may be outside the bubble, and a lock wait is short; the clock waits for it. |
//! | network and file I/O (`IO wait`) | no | The peer is outside the process's control. |
//! | `block_on` (`block_on`) | no | The future may be woken by anything. |
//! | a system call, or a plain blocking call (`std::thread::sleep`, std locks) | no | The goroutine is not parked: it counts as running, and the clock waits for it. |
//!
//! # Deadlock
//! If every goroutine of the bubble is durably blocked and no timer of the
//! bubble is pending, nothing can ever happen: [`test`](fn@test) panics at once
//! (no real time passes) with `deadlock: all goroutines in bubble are
//! blocked` and a dump of the bubble's goroutines, each header marked like
//! `goroutine 10 [chan receive (durable), synctest bubble 1]:`. The blocked
//! goroutines stay parked for ever (as in Go); the test fails, the process
//! goes on. A test whose root goroutine returns waits for the other
//! goroutines of its bubble to end, moving the clock as needed.
//!
//! # Misuse
//! - Calling [`test`](fn@test) inside a bubble, or [`wait`] outside one, panics.
//! - A [`Timer`](crate::time::Timer) or [`Ticker`](crate::time::Ticker)
//!   made in a bubble and stopped or reset outside it (or the reverse)
//!   panics: `synctest timer accessed from outside bubble`. Dropping one
//!   anywhere is allowed (it stops it).
//! - A channel made in a bubble panics when used from outside it (or from
//!   another bubble), with Go's messages: `send on synctest channel from
//!   outside bubble`, `receive on ...`, `close of ...` (blocking, `try_`,
//!   timed operations, `select!` arms, and each poll of the
//!   `recv_async`/`send_async` futures).
//! - A `WaitGroup` bound to a bubble (its counter raised from zero there,
//!   and not back at zero) panics on an `add` or `done` from outside the
//!   bubble, and a group whose counter was raised outside panics on an
//!   `add` or `done` inside one: `sync: WaitGroup.Add called from inside
//!   and outside synctest bubble`; from another bubble, `... from multiple
//!   synctest bubbles` (Go makes these fatal errors). Once its counter is
//!   back at zero, a group may be used anywhere.
//! - A `Condvar` notify from outside a bubble (or from another one) that
//!   would wake a goroutine of the bubble panics, waking nobody:
//!   `semaphore wake of synctest goroutine from outside bubble` (Go's).
//! - Bubble goroutines that wait on channels made *outside* the bubble are
//!   not durably blocked while they wait (as in Go): the clock waits for
//!   the outside peer.
//!
//! # `#[goroutine::test]` without `synctest`
//! Such a test's goroutines form a real-time group: the same membership
//! and durable-wait rules with the real clock, so that a deadlock among
//! them fails the test (`deadlock: all goroutines of the test are asleep`,
//! with their frames) instead of hanging the test binary. As plain
//! threads may still wake them, the test's thread confirms it over about a
//! second of polls before it reports.

use crate::chan::chan;
use crate::g::WaitReason;
use crate::m;
use crate::runtime::bubble::{self, Bubble, Outcome};
use crate::runtime::park;

/// Runs `f` as the root goroutine of a new bubble (Go's `synctest.Test`)
/// and returns its result once every goroutine of the bubble has ended
/// (module note). Call it from a plain thread or a goroutine outside any
/// bubble.
///
/// # Panics
/// - With `f`'s panic, once the bubble is done (or deadlocked).
/// - If the bubble deadlocks: every goroutine durably blocked and no timer
///   pending; the message carries the dump of the bubble's goroutines.
/// - If called inside a bubble.
pub fn test<F, T>(f: F) -> T
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    if bubble::current_virtual().is_some() {
        panic!("synctest::test called from within a synctest bubble");
    }
    let (tx, rx) = chan::<Outcome>(1);
    let b = Bubble::new(Box::new(move |outcome| {
        // A channel of one, sent to once: never full. The receiver is
        // woken after the send, with no lock held.
        if let Ok(h) = tx.try_send_defer_wake(outcome) {
            h.wake();
        }
    }));
    let h = crate::spawn::go(move || {
        bubble::join_current(b);
        f()
    });
    let outcome = wait_outcome(&rx);
    match outcome {
        Outcome::Done => match h.join() {
            Ok(v) => v,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        },
        Outcome::Deadlock(text) => {
            if h.is_finished() {
                if let Err(e) = h.join() {
                    // The root's own panic says more than the deadlock it
                    // left behind.
                    eprintln!("{text}");
                    std::panic::resume_unwind(e.into_panic());
                }
            }
            panic!("{text}")
        }
    }
}

/// Blocks until every other goroutine of the calling goroutine's bubble is
/// durably blocked (Go's `synctest.Wait`; the module note's table). The
/// clock does not move while `wait` waits; if the others are already
/// blocked, it returns at once.
///
/// # Panics
/// Outside a bubble, or if another goroutine of the bubble is in `wait`
/// already.
pub fn wait() {
    let r = crate::runtime::entry::call(|| {
        let Some(g) = m::current_g() else {
            return Err("synctest::wait called outside a synctest bubble");
        };
        bubble::set_waiter(g)?;
        park::park(WaitReason::SynctestWait, &mut |_| true);
        Ok(())
    });
    if let Err(msg) = r {
        panic!("{msg}");
    }
}

/// The bubble the calling goroutine belongs to, by number (Go numbers
/// them in dumps: `synctest bubble 1`), or None outside bubbles.
pub fn bubble_id() -> Option<u64> {
    crate::runtime::entry::call(bubble::current_id)
}

/// Waits for a bubble's outcome. A goroutine waits with a timeout, again
/// and again: a pending timer keeps a `#[goroutine::test]`'s real-time
/// group, which the caller may belong to, from looking deadlocked while
/// the bubble runs.
fn wait_outcome(rx: &crate::chan::Receiver<Outcome>) -> Outcome {
    if m::current_g_checked().is_none() {
        return rx.recv().expect("a bubble always sends its outcome");
    }
    loop {
        match rx.recv_timeout(std::time::Duration::from_millis(100)) {
            Ok(o) => return o,
            Err(crate::chan::RecvTimeoutError::Timeout) => {}
            Err(crate::chan::RecvTimeoutError::Closed) => {
                unreachable!("a bubble always sends its outcome")
            }
        }
    }
}

/// How often the test's thread looks at a real-time group.
const POLL: std::time::Duration = std::time::Duration::from_millis(250);

/// `#[goroutine::test]` without `synctest`: runs `f` as a goroutine, as
/// [`crate::run`] does, as the root of a real-time group (no fake clock).
/// If every goroutine of the group stays durably blocked (the module
/// note's table) with none of their timers pending for 5 s of polls
/// ([`POLL`] times `bubble::CONFIRM_POLLS`), the test fails with
/// their dump instead of hanging. Called from a goroutine, it runs `f`
/// there, as `run` does.
pub(crate) fn run_in_group<F, T>(f: F) -> T
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    if m::current_g_checked().is_some() {
        return f();
    }
    let b = Bubble::new_real();
    // Closed when the root's closure ends, returned or unwound.
    let (done_tx, done_rx) = chan::<()>(0);
    let h = crate::spawn::go(move || {
        let _done = done_tx;
        bubble::join_current(b);
        f()
    });
    let mut seen = None;
    while let Err(crate::chan::RecvTimeoutError::Timeout) = done_rx.recv_timeout(POLL) {
        if let Some(text) = bubble::real_group_deadlock(b, &mut seen) {
            panic!("{text}");
        }
    }
    match h.join() {
        Ok(v) => v,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}
