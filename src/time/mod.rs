//! Sleeping and timers (Go's `time` package on the runtime's timers).
//!
//! Every timer lives in a per-P heap (`runtime::timers`) and fires from the
//! scheduler; nothing here takes a thread.
//!
//! # Timer channels: Go 1.23's contract
//! The channels of [`Timer`], [`Ticker`] and [`after`] are synchronous, as
//! Go's are since 1.23 (`p::timerheap`, "Channel timers", says how):
//! - **No stale value.** Once [`Timer::stop`], [`Timer::reset`],
//!   [`Ticker::stop`] or [`Ticker::reset`] returns, no value from before it
//!   can be received: a firing not yet received is withdrawn, and none
//!   still on its way can arrive. There is nothing to drain before a
//!   reset (Go before 1.23 needed `if !t.Stop() { <-t.C }`).
//! - **Unbuffered to the eye.** Their `len()` and `capacity()` are 0, as an
//!   unbuffered channel's; a receive still finds a firing that nobody took
//!   yet. A ticker keeps at most one tick waiting and drops the rest, as
//!   Go's does.
//! - **No `stop` needed.** Dropping a `Timer` or a `Ticker`, or the last
//!   receiver of an `after` channel, stops the timer: nothing unreferenced
//!   stays pending or keeps firing. A dropped `Timer` or `Ticker` gives its
//!   record and channel to its P's cache for the next one
//!   (`time::kit`, with the conditions that make that safe).
//! - **`select!` as usual.** A timer fires from its heap at its time,
//!   whether or not anybody waits on its channel, so a receive, a
//!   `select!` arm or `recv_async` on it is an ordinary receive.
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
use crate::runtime::bubble::{self, nanotime};
use crate::runtime::entry::call_here;
use crate::runtime::park;
use crate::runtime::timers::{self, TimerFn};
use crate::sys::time::after as deadline_after;

mod kit;

use self::kit::ChanTimer;

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
    crate::runtime::entry::call(move || {
        if d.is_zero() {
            crate::runtime::coop_preempt::check();
            return;
        }
        let Some(g) = m::current_g() else {
            std::thread::sleep(d);
            return;
        };
        // A synctest bubble's member sleeps on the bubble's clock.
        let bubble = bubble::current();
        let when = deadline_after(nanotime(), d);
        let t = timers::Timer::new(TimerFn::Ready(g));
        // The park inlined into this frame (not generic): `g::switch`'s
        // note, "Returns after a switch".
        park::park_inline(m::Here::lookup(), WaitReason::Sleep, &mut |_g| {
            t.start_in(bubble, m::Here::lookup(), when, 0);
            true
        });
    })
}

/// Pauses until `deadline` (returns at once if it has passed).
#[inline(always)]
pub fn sleep_until(deadline: Instant) {
    sleep(deadline.saturating_duration_since(bubble::instant_now()))
}

/// The current wall-clock time. In a synctest bubble (`crate::synctest`)
/// it is the bubble's fake clock, which starts at 2000-01-01 00:00:00 UTC
/// and moves only when every goroutine of the bubble is durably blocked;
/// elsewhere, `SystemTime::now()`.
pub fn now() -> std::time::SystemTime {
    crate::runtime::entry::call(|| match bubble::current_virtual() {
        Some(b) => b.system_time(),
        None => std::time::SystemTime::now(),
    })
}

/// The current `Instant`: in a synctest bubble, the bubble's (differences
/// of two are virtual durations; the values timer channels deliver there
/// are on the same scale); elsewhere, `Instant::now()`.
pub fn instant() -> Instant {
    crate::runtime::entry::call(bubble::instant_now)
}

/// A channel that receives the current time once `d` has passed (Go's
/// `time.After`), with Go 1.23's timer channel contract (module note): its
/// `len()` and `capacity()` are 0, and dropping every receiver of the
/// channel stops the timer, so `after` in a loop's `select!` leaves no
/// pending timer behind for each round that another arm won. Once the
/// time is received, the channel reports closed.
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
    crate::runtime::entry::call(move || {
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
            bubble: bubble::current_id(),
        }
    })
}

/// A single event delivered on a channel (Go's `time.Timer`). Use
/// [`Timer::c`] in `select!`: `recv(t.c()) -> at => ...`.
///
/// Its channel keeps Go 1.23's contract (module note): once
/// [`stop`](Timer::stop) or [`reset`](Timer::reset) returns, no value from
/// before can be received, so a reset needs no draining first; the
/// channel's `len()` and `capacity()` are 0; dropping the timer stops it.
///
/// ```
/// use std::time::Duration;
/// use goroutine::time::Timer;
///
/// goroutine::run(|| {
///     let t = Timer::new(Duration::from_millis(1));
///     goroutine::time::sleep(Duration::from_millis(5)); // it fires; nobody receives
///     assert!(t.reset(Duration::from_secs(3600)), "its value was withdrawn");
///     assert!(t.c().try_recv().is_err(), "no stale value");
///     assert_eq!(t.c().len(), 0);
/// });
/// ```
pub struct Timer {
    /// The timer record and its channel, from the P's cache of dropped
    /// channel timers when it has one (`kit`), and given back to
    /// it on drop.
    kit: ManuallyDrop<ChanTimer>,
    /// after_func's timers keep their never-used sender here.
    _keep: Option<Sender<Instant>>,
    /// The synctest bubble it was made in (its stop and reset panic
    /// elsewhere: `crate::synctest`'s note, "Misuse").
    bubble: Option<u64>,
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
                bubble: bubble::current_id(),
            }
        })
    }

    /// The channel the time is delivered on (`len()` and `capacity()` 0:
    /// see the type's note).
    // entry: a getter of the delivery channel
    pub fn c(&self) -> &Receiver<Instant> {
        self.kit.rx()
    }

    /// Stops the timer (Go 1.23's `Stop`): once this returns, no value can
    /// be received from [`c`](Self::c) until a [`reset`](Self::reset),
    /// not even one the timer sent before and nobody received (it is
    /// withdrawn). True if the call kept a value from being received: the
    /// timer was pending, or it had fired and its value was not taken yet;
    /// false if the value was received already or the timer was stopped.
    ///
    /// # Panics
    /// In a synctest bubble other than the one it was made in (or outside
    /// it).
    pub fn stop(&self) -> bool {
        bubble::check_timer(self.bubble, "stop of");
        crate::runtime::entry::call(move || self.kit.timer().stop())
    }

    /// Re-arms the timer to fire after `d` (Go 1.23's `Reset`): once this
    /// returns, only the new firing can be received; a value sent before
    /// and not received is withdrawn, so no draining is needed first.
    /// Returns what [`stop`](Self::stop) would have: true if the old
    /// firing was pending or its value not yet received.
    ///
    /// # Panics
    /// As [`stop`](Self::stop).
    pub fn reset(&self, d: Duration) -> bool {
        bubble::check_timer(self.bubble, "reset of");
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
/// receivers miss ticks rather than queue them: at most one tick waits.
///
/// Its channel keeps Go 1.23's contract (module note): once
/// [`stop`](Ticker::stop) or [`reset`](Ticker::reset) returns, no tick from
/// before can be received; the channel's `len()` and `capacity()` are 0;
/// dropping the ticker stops it.
pub struct Ticker {
    /// As `Timer::kit`.
    kit: ManuallyDrop<ChanTimer>,
    /// As `Timer::bubble`.
    bubble: Option<u64>,
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
                bubble: bubble::current_id(),
            }
        })
    }

    /// The channel ticks are delivered on.
    // entry: a getter of the delivery channel
    pub fn c(&self) -> &Receiver<Instant> {
        self.kit.rx()
    }

    /// Stops the ticker: once this returns, no tick can be received, not
    /// even one sent before and not taken yet (it is withdrawn), until a
    /// [`reset`](Self::reset). The channel stays open.
    ///
    /// # Panics
    /// In a synctest bubble other than the one it was made in (or outside
    /// it).
    pub fn stop(&self) {
        bubble::check_timer(self.bubble, "stop of");
        crate::runtime::entry::call(move || {
            self.kit.timer().stop();
        })
    }

    /// Stops the ticker and restarts it with period `d`: once this returns,
    /// only ticks of the new period can be received (a tick sent before and
    /// not taken is withdrawn). The first comes `d` from now.
    ///
    /// # Panics
    /// If `d` is zero.
    pub fn reset(&self, d: Duration) {
        assert!(!d.is_zero(), "non-positive interval for Ticker::reset");
        bubble::check_timer(self.bubble, "reset of");
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

/// A channel timer from the calling M's P's cache (`kit`), or a
/// new one.
#[inline]
fn take_kit(here: m::Here) -> ChanTimer {
    if bubble::current_virtual().is_some() {
        // A synctest bubble's timer: its channel is made here, so that it
        // belongs to the bubble (`crate::synctest`'s note).
        return ChanTimer::new();
    }
    here.p_local(|l| kit::take(&mut l.chan_timers))
        .flatten()
        .unwrap_or_else(ChanTimer::new)
}

/// Stops a dropped channel timer and gives its parts to the P's cache
/// (`kit`), or drops them if they cannot be reused.
fn stop_and_recycle(kit: ChanTimer) {
    call_here(move |here| {
        // A record nobody else holds has no heap entry (an entry, or a
        // runner that popped one, holds a reference): nothing to stop. A
        // value delivered stays for a receiver the user cloned (and keeps
        // the kit out of the cache).
        if std::sync::Arc::strong_count(kit.timer()) != 1 {
            kit.timer().stop_keep_value();
        }
        // A bubble's channel stays its own: not for the P's cache.
        if bubble::chan_is_tagged(std::sync::Arc::as_ptr(&kit.rx().chan) as usize) {
            drop(kit);
            return;
        }
        // Without a P the closure (and the kit in it) is dropped unrun.
        let rest = here.p_local(move |l| kit::keep(&mut l.chan_timers, kit));
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
