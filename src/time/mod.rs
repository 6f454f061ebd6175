//! Sleeping and timers (Go's `time` package on the runtime's timers).
//!
//! Every timer lives in a per-P heap (`runtime::timers`) and fires from the
//! scheduler; nothing here takes a thread. Channel timers deliver the firing
//! time into a channel of capacity 1 with a non-blocking send, as Go does:
//! a tick that finds the channel full is dropped. A dropped `Timer` or
//! `Ticker` gives its record and channel to its P's cache for the next one
//! (`p::chantimers`, with the conditions that make that safe); an `after`
//! timer is stopped when the last receiver of its channel goes.
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
use crate::p::chantimers::ChanTimer;
use crate::runtime::entry::call_here;
use crate::runtime::park;
use crate::runtime::timers::{self, TimerFn};
use crate::sys::time::{after as deadline_after, nanotime};

/// Pauses the calling goroutine for at least `d` (Go's `time.Sleep`): the
/// goroutine parks and its P runs others. Called outside the runtime, it
/// sleeps the OS thread. A zero duration returns at once.
#[inline(always)]
pub fn sleep(d: Duration) {
    sleep_for(d);
    // A caller that ends with `sleep` keeps its frame in dumps.
    crate::traceback::keep_caller_frame();
}

/// The body of [`sleep`], out of line.
#[inline(never)]
fn sleep_for(d: Duration) {
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
#[inline(always)]
pub fn sleep_until(deadline: Instant) {
    sleep(deadline.saturating_duration_since(Instant::now()))
}

/// A channel that receives the current time once `d` has passed (Go's
/// `time.After`). Dropping every receiver of the channel stops the timer:
/// `after` in a loop's `select!` leaves no pending timer behind for each
/// round that another arm won (as Go since 1.23).
pub fn after(d: Duration) -> Receiver<Instant> {
    call_here(move |here| {
        // The heap entry owns the timer and with it the sender: once the time
        // is sent and the entry dropped, the channel holds the value and then
        // reports closed.
        let (t, rx) = take_kit(here).into_parts();
        // SAFETY: a kit's channel has two handles, both in `t` and `rx`.
        unsafe { rx.set_sending_timer(&t) };
        t.start_here(here, deadline_after(nanotime(), d), 0);
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
            crate::spawn::go(move || f());
        })));
        t.start(deadline_after(nanotime(), d), 0);
        Timer {
            kit: ManuallyDrop::new(ChanTimer::from_parts(t, rx)),
            _keep: Some(tx),
        }
    })
}

/// A single event delivered on a channel (Go's `time.Timer`). Use
/// [`Timer::c`] in `select!`: `recv(t.c()) -> at => ...`.
pub struct Timer {
    /// The timer record and its channel, from the P's cache of dropped
    /// channel timers when it has one (`p::chantimers`), and given back to
    /// it on drop.
    kit: ManuallyDrop<ChanTimer>,
    /// after_func's timers keep their never-used sender here.
    _keep: Option<Sender<Instant>>,
}

impl Timer {
    /// A timer that sends the current time on its channel after `d`.
    pub fn new(d: Duration) -> Timer {
        call_here(move |here| {
            let kit = take_kit(here);
            kit.timer()
                .start_here(here, deadline_after(nanotime(), d), 0);
            Timer {
                kit: ManuallyDrop::new(kit),
                _keep: None,
            }
        })
    }

    /// The channel the time is delivered on.
    // entry: a getter of the delivery channel
    pub fn c(&self) -> &Receiver<Instant> {
        self.kit.rx()
    }

    /// Prevents the timer from firing; false if it already fired or was
    /// stopped. As in Go, a value already in the channel stays there.
    pub fn stop(&self) -> bool {
        crate::runtime::asyncpreempt::in_runtime(move || self.kit.timer().stop())
    }

    /// Re-arms the timer to fire after `d`; true if it was still pending.
    pub fn reset(&self, d: Duration) -> bool {
        call_here(move |here| {
            self.kit
                .timer()
                .start_here(here, deadline_after(nanotime(), d), 0)
        })
    }
}

impl Drop for Timer {
    /// Dropping a channel timer stops it (nobody could receive its value)
    /// and gives its parts to the P's cache; an `after_func` timer keeps
    /// running, as in Go.
    fn drop(&mut self) {
        // SAFETY: taken once, here; `kit` is not used again.
        let kit = unsafe { ManuallyDrop::take(&mut self.kit) };
        if self._keep.is_some() {
            drop(kit);
            return;
        }
        stop_and_recycle(kit);
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
    /// As `Timer::kit`.
    kit: ManuallyDrop<ChanTimer>,
}

impl Ticker {
    /// A ticker with period `d`.
    ///
    /// # Panics
    /// If `d` is zero (Go: "non-positive interval for NewTicker").
    pub fn new(d: Duration) -> Ticker {
        assert!(!d.is_zero(), "non-positive interval for Ticker::new");
        call_here(move |here| {
            let kit = take_kit(here);
            kit.timer()
                .start_here(here, deadline_after(nanotime(), d), period_ns(d));
            Ticker {
                kit: ManuallyDrop::new(kit),
            }
        })
    }

    /// The channel ticks are delivered on.
    // entry: a getter of the delivery channel
    pub fn c(&self) -> &Receiver<Instant> {
        self.kit.rx()
    }

    /// Stops the ticker (no more ticks are sent; the channel stays open).
    pub fn stop(&self) {
        crate::runtime::asyncpreempt::in_runtime(move || {
            self.kit.timer().stop();
        })
    }

    /// Stops the ticker and restarts it with period `d`.
    ///
    /// # Panics
    /// If `d` is zero.
    pub fn reset(&self, d: Duration) {
        assert!(!d.is_zero(), "non-positive interval for Ticker::reset");
        call_here(move |here| {
            self.kit
                .timer()
                .start_here(here, deadline_after(nanotime(), d), period_ns(d));
        })
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        // SAFETY: taken once, here; `kit` is not used again.
        let kit = unsafe { ManuallyDrop::take(&mut self.kit) };
        stop_and_recycle(kit);
    }
}

/// A channel timer from the calling M's P's cache (`p::chantimers`), or a
/// new one.
#[inline]
fn take_kit(here: m::Here) -> ChanTimer {
    here.p_local(|l| l.chan_timers.take())
        .flatten()
        .unwrap_or_else(ChanTimer::new)
}

/// Stops a dropped channel timer and gives its parts to the P's cache
/// (`p::chantimers`), or drops them if they cannot be reused.
fn stop_and_recycle(kit: ChanTimer) {
    call_here(move |here| {
        // A record nobody else holds has no heap entry (an entry, or a
        // runner that popped one, holds a reference): nothing to stop.
        if std::sync::Arc::strong_count(kit.timer()) != 1 {
            kit.timer().stop();
        }
        // Without a P the closure (and the kit in it) is dropped unrun.
        let rest = here.p_local(move |l| l.chan_timers.keep(kit));
        // Dropped with no borrow of the P's local state live.
        drop(rest);
    });
}

impl fmt::Debug for Ticker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ticker").finish_non_exhaustive()
    }
}

fn period_ns(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX / 4).max(1)
}
