//! Sleeping and timers (Go's `time` package on the runtime's timers).
//!
//! Every timer lives in a per-P heap (`runtime::timers`) and fires from the
//! scheduler; nothing here takes a thread. Channel timers deliver the firing
//! time into a channel of capacity 1 with a non-blocking send, as Go does:
//! a tick that finds the channel full is dropped.
//!
//! ```
//! use std::time::Duration;
//! use goroutine::{select, time};
//!
//! goroutine::run(|| {
//!     time::sleep(Duration::from_millis(1));
//!     let (_tx, rx) = goroutine::chan::<i32>(0);
//!     let got = select! {
//!         recv(rx) -> _ => "message",
//!         recv(time::after(Duration::from_millis(5))) -> _ => "timeout",
//!     };
//!     assert_eq!(got, "timeout");
//! });
//! ```

use std::fmt;
use std::mem::ManuallyDrop;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::chan::{chan, Receiver, Sender};
use crate::g::WaitReason;
use crate::m;
use crate::runtime::park;
use crate::runtime::timers::{self, TimerFn};
use crate::sys::time::{after as deadline_after, nanotime};

/// Pauses the calling goroutine for at least `d` (Go's `time.Sleep`): the
/// goroutine parks and its P runs others. Called outside the runtime, it
/// sleeps the OS thread. A zero duration returns at once.
pub fn sleep(d: Duration) {
    crate::runtime::asyncpreempt::in_runtime(move || {
        if d.is_zero() {
            crate::runtime::preempt::check();
            return;
        }
        let Some(g) = m::current_g() else {
            std::thread::sleep(d);
            return;
        };
        let when = deadline_after(nanotime(), d);
        let t = timers::Timer::new(TimerFn::Ready(g));
        // The park inlined into this frame (not generic): `g::context`'s
        // note, "Returns after a switch".
        park::park_inline(m::Here::lookup(), WaitReason::Sleep, &mut |_g| {
            t.start(when, 0);
            true
        });
    })
}

/// Pauses until `deadline` (returns at once if it has passed).
pub fn sleep_until(deadline: Instant) {
    sleep(deadline.saturating_duration_since(Instant::now()))
}

/// What a channel timer does when it fires: sends the time without
/// blocking (Go's sendTime: a full channel drops the tick).
fn send_time(tx: Sender<Instant>) -> TimerFn {
    TimerFn::SendTime(tx)
}

/// A channel that receives the current time once `d` has passed (Go's
/// `time.After`).
pub fn after(d: Duration) -> Receiver<Instant> {
    crate::runtime::asyncpreempt::in_runtime(move || {
        let (tx, rx) = chan(1);
        // The heap entry owns the timer and with it the sender: once the time
        // is sent and the entry dropped, the channel holds the value and then
        // reports closed.
        let t = timers::Timer::new(send_time(tx));
        t.start(deadline_after(nanotime(), d), 0);
        rx
    })
}

/// Spawns `f` as a goroutine once `d` has passed (Go's `time.AfterFunc`).
/// The returned timer can stop or reset it; its channel never receives.
pub fn after_func<F>(d: Duration, f: F) -> Timer
where
    F: Fn() + Send + Sync + 'static,
{
    crate::runtime::asyncpreempt::in_runtime(move || {
        let f = Arc::new(f);
        let (tx, rx) = chan(0);
        let t = timers::Timer::new(TimerFn::Call(Box::new(move || {
            let f = f.clone();
            crate::go(move || f());
        })));
        t.start(deadline_after(nanotime(), d), 0);
        Timer {
            inner: t,
            rx: ManuallyDrop::new(rx),
            _keep: Some(tx),
        }
    })
}

/// A single event delivered on a channel (Go's `time.Timer`). Use
/// [`Timer::c`] in `select!`: `recv(t.c()) -> at => ...`.
pub struct Timer {
    inner: Arc<timers::Timer>,
    /// Dropped first, quietly (`Drop`): with it gone, the sender's drop
    /// in `inner` has no receiver to close the channel for.
    rx: ManuallyDrop<Receiver<Instant>>,
    /// after_func's timers keep their never-used sender here.
    _keep: Option<Sender<Instant>>,
}

impl Timer {
    /// A timer that sends the current time on its channel after `d`.
    pub fn new(d: Duration) -> Timer {
        crate::runtime::asyncpreempt::in_runtime(move || {
            let (tx, rx) = chan(1);
            let inner = timers::Timer::new(send_time(tx));
            inner.start(deadline_after(nanotime(), d), 0);
            Timer {
                inner,
                rx: ManuallyDrop::new(rx),
                _keep: None,
            }
        })
    }

    /// The channel the time is delivered on.
    // entry: a getter of the delivery channel
    pub fn c(&self) -> &Receiver<Instant> {
        &self.rx
    }

    /// Prevents the timer from firing; false if it already fired or was
    /// stopped. As in Go, a value already in the channel stays there.
    pub fn stop(&self) -> bool {
        crate::runtime::asyncpreempt::in_runtime(move || self.inner.stop())
    }

    /// Re-arms the timer to fire after `d`; true if it was still pending.
    pub fn reset(&self, d: Duration) -> bool {
        crate::runtime::asyncpreempt::in_runtime(move || {
            self.inner.start(deadline_after(nanotime(), d), 0)
        })
    }
}

impl Drop for Timer {
    /// Dropping a channel timer stops it (nobody could receive its value);
    /// an `after_func` timer keeps running, as in Go.
    fn drop(&mut self) {
        let this = &*self;
        crate::runtime::asyncpreempt::in_runtime(move || {
            if this._keep.is_none() {
                this.inner.stop();
            }
        });
        // SAFETY: taken once, here; `rx` is not used again.
        let rx = unsafe { ManuallyDrop::take(&mut self.rx) };
        // The channel's only sender is in `inner` (or `_keep`), dropped
        // next, and only ever try-sends: the receiver may go quietly.
        rx.drop_unobserved();
    }
}

impl fmt::Debug for Timer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timer").finish_non_exhaustive()
    }
}

/// Delivers the time on a channel every period (Go's `time.Ticker`). Slow
/// receivers miss ticks rather than queue them.
pub struct Ticker {
    inner: Arc<timers::Timer>,
    /// As `Timer::rx`.
    rx: ManuallyDrop<Receiver<Instant>>,
}

impl Ticker {
    /// A ticker with period `d`.
    ///
    /// # Panics
    /// If `d` is zero (Go: "non-positive interval for NewTicker").
    pub fn new(d: Duration) -> Ticker {
        crate::runtime::asyncpreempt::in_runtime(move || {
            assert!(!d.is_zero(), "non-positive interval for Ticker::new");
            let (tx, rx) = chan(1);
            let inner = timers::Timer::new(send_time(tx));
            let period = period_ns(d);
            inner.start(deadline_after(nanotime(), d), period);
            Ticker {
                inner,
                rx: ManuallyDrop::new(rx),
            }
        })
    }

    /// The channel ticks are delivered on.
    // entry: a getter of the delivery channel
    pub fn c(&self) -> &Receiver<Instant> {
        &self.rx
    }

    /// Stops the ticker (no more ticks are sent; the channel stays open).
    pub fn stop(&self) {
        crate::runtime::asyncpreempt::in_runtime(move || {
            self.inner.stop();
        })
    }

    /// Stops the ticker and restarts it with period `d`.
    ///
    /// # Panics
    /// If `d` is zero.
    pub fn reset(&self, d: Duration) {
        crate::runtime::asyncpreempt::in_runtime(move || {
            assert!(!d.is_zero(), "non-positive interval for Ticker::reset");
            self.inner
                .start(deadline_after(nanotime(), d), period_ns(d));
        })
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        let this = &*self;
        crate::runtime::asyncpreempt::in_runtime(move || {
            this.inner.stop();
        });
        // SAFETY: taken once, here; `rx` is not used again.
        let rx = unsafe { ManuallyDrop::take(&mut self.rx) };
        // As in `Timer::drop`.
        rx.drop_unobserved();
    }
}

impl fmt::Debug for Ticker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ticker").finish_non_exhaustive()
    }
}

fn period_ns(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX / 4).max(1)
}
