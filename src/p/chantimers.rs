//! A P's cache of channel timers: the parts of a dropped `time::Timer` or
//! `time::Ticker` (the timer record and its channel), kept for the next one.
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

use std::mem::ManuallyDrop;
use std::sync::Arc;
use std::time::Instant;

use super::timerheap::{Timer, TimerFn};
use crate::chan::{timer_chan, Receiver};

/// Channel timers a P keeps.
pub(crate) const CAP: usize = 16;

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
        ChanTimer::from_parts(Timer::new(TimerFn::SendTime(tx)), rx)
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

/// A P's free channel timers (module note).
pub(crate) struct ChanTimerCache {
    free: Vec<ChanTimer>,
}

impl ChanTimerCache {
    pub(crate) const fn new() -> ChanTimerCache {
        ChanTimerCache { free: Vec::new() }
    }

    /// A kept channel timer, if there is one.
    #[inline]
    pub(crate) fn take(&mut self) -> Option<ChanTimer> {
        self.free.pop()
    }

    /// Keeps `kit` if it can be reused and there is room; otherwise hands
    /// it back, for the caller to drop once it no longer borrows the P.
    pub(crate) fn keep(&mut self, mut kit: ChanTimer) -> Option<ChanTimer> {
        if self.free.len() >= CAP || !kit.reusable() {
            return Some(kit);
        }
        if self.free.capacity() == 0 {
            self.free.reserve_exact(CAP);
        }
        self.free.push(kit);
        None
    }

    /// Empties the cache (a P being destroyed); the caller drops the kits.
    pub(crate) fn drain(&mut self) -> Vec<ChanTimer> {
        std::mem::take(&mut self.free)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chan::chan;
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
        assert!(c.keep(k).is_none(), "a stopped, unused timer is kept");
        let k = c.take().expect("the kept timer");
        assert_eq!(Arc::as_ptr(k.timer()), p, "the kept timer comes back");
        assert!(!k.timer().stop_with::<Quiet>(), "and it is stopped");
        assert!(c.take().is_none());
    }

    #[test]
    fn a_timer_still_reachable_or_used_is_not_kept() {
        let mut c = ChanTimerCache::new();
        let h = heap();

        // Pending: its heap entry holds the record.
        let k = ChanTimer::new();
        Timer::start_on::<Quiet>(k.timer(), h, 1 << 40, 0);
        assert!(c.keep(k).is_some(), "a pending timer");

        // A clone of the receiver is out there.
        let k = ChanTimer::new();
        let rx2 = k.rx().clone();
        assert!(c.keep(k).is_some(), "a receiver clone");
        drop(rx2);

        // A value waits in the channel (the timer fired, nobody received).
        let k = ChanTimer::new();
        Timer::start_on::<Quiet>(k.timer(), h, 1, 0);
        h.run_due::<Quiet>(2);
        assert!(k.rx().buffered() == 1, "the firing sent the time");
        assert!(c.keep(k).is_some(), "a buffered value");

        // Someone else holds the record.
        let k = ChanTimer::new();
        let t2 = k.timer().clone();
        assert!(c.keep(k).is_some(), "a second reference to the record");
        drop(t2);

        // A function timer (after_func's).
        let (_tx, rx) = chan(0);
        let k = ChanTimer::from_parts(Timer::new(TimerFn::Call(Box::new(|| ()))), rx);
        assert!(c.keep(k).is_some(), "a function timer");
    }

    #[test]
    fn the_cache_holds_at_most_cap() {
        let mut c = ChanTimerCache::new();
        for _ in 0..CAP {
            assert!(c.keep(ChanTimer::new()).is_none());
        }
        assert!(c.keep(ChanTimer::new()).is_some());
        assert_eq!(c.drain().len(), CAP);
    }
}
