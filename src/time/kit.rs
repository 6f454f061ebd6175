//! Channel timer kits: the parts of a `time::Timer` or `time::Ticker` (the
//! timer record and its channel), and when a dropped one may go to its P's
//! cache (`p::chantimers`, which stores kits type-erased) for the next one.
//!
//! `time::Timer::new` is the timeout of every `select!` with a timeout arm
//! and of every `recv_timeout` / `send_timeout`: a timer made, raced
//! against a channel, stopped and dropped, once per call. Made from
//! scratch, each costs two allocations and two frees (the record and the
//! channel), a quarter of the instructions of a start-and-stop. Go pays the
//! same two allocations, from its per-P caches of small-object memory; here
//! a P keeps up to [`CAP`] (16) dropped channel timers whole and hands them
//! out again, as it keeps dead Gs and stacks.
//!
//! # Invariants
//! - A cached [`ChanTimer`] is indistinguishable from a new one, and nobody
//!   else can reach it: its timer is stopped (no heap entry); its record's
//!   `Arc` is unique, so no timer runner still holds an entry it popped
//!   (and so no send of a firing is in flight); its channel's only handles
//!   are the two inside the kit (the record's sender and the receiver), and
//!   it is open, empty and has no waiter. [`ChanTimerCache::keep`] checks
//!   all of it, with one compare-and-swap (`Arc::get_mut`) and plain loads,
//!   and drops a kit that fails any check as before.
//! - The one moment those checks can race is excluded by uniqueness: every
//!   other path to the channel goes through an `Arc` the checks count.
//! - Only the P's owner touches its cache (it is in `PLocal`). A kit is
//!   dropped (closing its channel, which wakes nobody) outside the borrow of
//!   `PLocal`. A P removed by `set_max_procs` drops its kits.
//! - In the cache a kit's receiver is a raw pointer with the function that
//!   drops it ([`drop_cached_rx`]); only [`take`] turns it back into a
//!   `Receiver<Instant>`, once.

use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::Instant;

use crate::chan::{timer_chan, Receiver};
use crate::p::chantimers::{ChanTimerCache, Kit};
use crate::p::timerheap::{Timer, TimerFn};

/// A channel timer's parts: the timer record, whose function sends the time
/// on the channel, and the channel's receiver.
pub(crate) struct ChanTimer {
    timer: Arc<Timer>,
    /// Dropped first, quietly (`Drop`): with it gone, the sender's drop in
    /// `timer` has no receiver to close the channel for.
    rx: ManuallyDrop<Receiver<Instant>>,
}

impl ChanTimer {
    /// A new channel timer, not started: a timer's channel (one value of
    /// room inside, as Go's `make(chan Time, 1)`, capacity 0 to the user,
    /// as Go 1.23's).
    pub(crate) fn new() -> ChanTimer {
        let (tx, rx) = timer_chan();
        ChanTimer::from_parts(Timer::new(TimerFn::SendTime(tx.into_time_chan())), rx)
    }

    /// A kit of a timer and a channel of the caller's (`after_func`'s,
    /// whose timer calls a function: [`keep`](ChanTimerCache::keep)
    /// refuses it).
    pub(crate) fn from_parts(timer: Arc<Timer>, rx: Receiver<Instant>) -> ChanTimer {
        ChanTimer {
            timer,
            rx: ManuallyDrop::new(rx),
        }
    }

    #[inline]
    pub(crate) fn timer(&self) -> &Arc<Timer> {
        &self.timer
    }

    #[inline]
    pub(crate) fn rx(&self) -> &Receiver<Instant> {
        &self.rx
    }

    /// Splits the kit for a timer that its heap entry owns (`time::after`):
    /// the channel is the caller's from now on.
    pub(crate) fn into_parts(self) -> (Arc<Timer>, Receiver<Instant>) {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped or used again, so each field is
        // moved out exactly once.
        unsafe {
            (
                std::ptr::read(&this.timer),
                ManuallyDrop::take(&mut this.rx),
            )
        }
    }

    /// Whether the kit can be handed out again as new (module note). The
    /// caller has stopped the timer.
    fn reusable(&mut self) -> bool {
        let Some(t) = Arc::get_mut(&mut self.timer) else {
            return false;
        };
        t.is_idle_channel_timer() && self.rx.is_unused_pair()
    }
}

impl Drop for ChanTimer {
    fn drop(&mut self) {
        // SAFETY: taken once, here; `rx` is not used again.
        let rx = unsafe { ManuallyDrop::take(&mut self.rx) };
        // The channel's only sender is in `timer` (dropped next) and only
        // ever try-sends: the receiver may go quietly (`drop_unobserved`).
        rx.drop_unobserved();
    }
}

/// A kept channel timer from a P's cache, if it has one.
#[inline]
pub(crate) fn take(c: &mut ChanTimerCache) -> Option<ChanTimer> {
    let (timer, rx) = c.take()?.into_raw_parts();
    // SAFETY: a cached kit's receiver came from `keep`'s
    // `Receiver::<Instant>::into_raw`, and is taken back once, here.
    let rx = unsafe { Receiver::<Instant>::from_raw(rx) };
    Some(ChanTimer::from_parts(timer, rx))
}

/// Gives `kit` to a P's cache if it can be reused and there is room;
/// otherwise hands it back, for the caller to drop once it no longer
/// borrows the P.
pub(crate) fn keep(c: &mut ChanTimerCache, mut kit: ChanTimer) -> Option<ChanTimer> {
    if c.is_full() || !kit.reusable() {
        return Some(kit);
    }
    let (timer, rx) = kit.into_parts();
    // SAFETY: the receiver is the kit's from now on, and `drop_cached_rx`
    // drops it as a `Receiver<Instant>`, the type it came from; a receiver
    // may move to another thread.
    c.push(unsafe { Kit::from_raw_parts(timer, rx.into_raw(), drop_cached_rx) });
    None
}

/// Drops a cached kit's receiver, as [`ChanTimer`]'s drop does.
///
/// # Safety
/// `rx` came from `Receiver::<Instant>::into_raw` and is dropped once.
unsafe fn drop_cached_rx(rx: NonNull<()>) {
    // SAFETY: the caller's contract.
    unsafe { Receiver::<Instant>::from_raw(rx) }.drop_unobserved();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chan::chan;
    use crate::p::chantimers::CAP;
    use crate::p::timerheap::{Quiet, Timers};

    fn heap() -> &'static Timers {
        Box::leak(Box::new(Timers::new()))
    }

    #[test]
    fn a_stopped_unused_timer_is_kept_and_handed_out_again() {
        let mut c = ChanTimerCache::new();
        let k = ChanTimer::new();
        let p = Arc::as_ptr(k.timer());
        Timer::start_on::<Quiet>(k.timer(), heap(), 1 << 40, 0);
        assert!(k.timer().stop_with::<Quiet>());
        assert!(keep(&mut c, k).is_none(), "a stopped, unused timer is kept");
        let k = take(&mut c).expect("the kept timer");
        assert_eq!(Arc::as_ptr(k.timer()), p, "the kept timer comes back");
        assert!(!k.timer().stop_with::<Quiet>(), "and it is stopped");
        assert!(take(&mut c).is_none());
    }

    #[test]
    fn a_timer_still_reachable_or_used_is_not_kept() {
        let mut c = ChanTimerCache::new();
        let h = heap();

        // Pending: its heap entry holds the record.
        let k = ChanTimer::new();
        Timer::start_on::<Quiet>(k.timer(), h, 1 << 40, 0);
        assert!(keep(&mut c, k).is_some(), "a pending timer");

        // A clone of the receiver is out there.
        let k = ChanTimer::new();
        let rx2 = k.rx().clone();
        assert!(keep(&mut c, k).is_some(), "a receiver clone");
        drop(rx2);

        // A value waits in the channel (the timer fired, nobody received).
        let k = ChanTimer::new();
        Timer::start_on::<Quiet>(k.timer(), h, 1, 0);
        h.run_due::<Quiet>(2);
        assert!(k.rx().buffered() == 1, "the firing sent the time");
        assert!(keep(&mut c, k).is_some(), "a buffered value");

        // Someone else holds the record.
        let k = ChanTimer::new();
        let t2 = k.timer().clone();
        assert!(
            keep(&mut c, k).is_some(),
            "a second reference to the record"
        );
        drop(t2);

        // A function timer (after_func's).
        let (_tx, rx) = chan(0);
        let k = ChanTimer::from_parts(Timer::new(TimerFn::Call(Box::new(|| ()))), rx);
        assert!(keep(&mut c, k).is_some(), "a function timer");
    }

    #[test]
    fn the_cache_holds_at_most_cap() {
        let mut c = ChanTimerCache::new();
        for _ in 0..CAP {
            assert!(keep(&mut c, ChanTimer::new()).is_none());
        }
        assert!(keep(&mut c, ChanTimer::new()).is_some());
        assert_eq!(c.drain().len(), CAP);
    }
}
