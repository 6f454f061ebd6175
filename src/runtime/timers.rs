//! Timers: one 4-ary heap per P (Go's `p.timers`), run by the scheduler.
//! The heap and its start/stop/fire protocol are in `p/timerheap.rs` (model-
//! checked with loom); this file decides where timers go and run.
//!
//! # Where timers run
//! - `find_runnable` runs the due timers of its own P first
//!   ([`check_timers`]), and on the last stealing round those of every other
//!   P (idle ones included), so a timer fires even if its P is busy or idle.
//! - An M that finds no work blocks in the netpoller until the earliest
//!   timer of all Ps ([`next_when`]); a timer added earlier than that wakes
//!   it ([`wake_netpoller`]), and with nobody polling, `wakep` starts an M
//!   that will.
//! - sysmon starts an M when a timer is overdue and no M looks at it; if
//!   every P is busy, it preempts a goroutine that has run for 100 us on a P
//!   holding a due timer (`sysmon::preempt_for_timers`); a new earliest
//!   timer cuts sysmon's nap short if it would wake too late
//!   (`sysmon::timer_started`).
//! - A heap holds pending timers only (stop and reset remove the entry at
//!   once), so "no P has a timer" means "no timer is pending": the deadlock
//!   check relies on it, and a heap that empties asks for that check
//!   (`checkdead::timers_drained`).
//! - A timer goes on the heap of the P that starts it (P0 from a plain
//!   thread: P0 survives every `set_max_procs`); a P removed by
//!   `set_max_procs` moves its timers to P0.
//!
//! A timer's function runs on whatever M ran the heap (on its scheduler
//! stack), so it must not block: the runtime's timer functions only ready a
//! goroutine, try-send on a timer's channel (under the timer's lock:
//! `p/timerheap.rs`, "Channel timers"), or spawn a goroutine.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::sched;
use crate::m;
pub(crate) use crate::p::timerheap::{Hooks, Timer, TimerFn};
use crate::p::P;
use crate::sys::time::nanotime;

/// The heap's hooks (`p::timerheap::Hooks`): the scheduler's.
pub(crate) struct Sched;

impl Hooks for Sched {
    #[inline]
    fn ready(g: &'static crate::g::G) {
        super::park::ready(g)
    }

    #[inline]
    fn drained() {
        super::checkdead::timers_drained()
    }
}

impl Timer {
    /// Cancels a pending firing, and drops a channel timer's value not yet
    /// received; true if either was there. The entry leaves its heap at
    /// once.
    pub(crate) fn stop(&self) -> bool {
        self.stop_with::<Sched>()
    }

    /// [`stop`](Self::stop) leaving a channel timer's delivered value in
    /// its channel (a dropped `time::Timer`: a cloned receiver keeps it).
    pub(crate) fn stop_keep_value(&self) -> bool {
        self.stop_keep_value_with::<Sched>()
    }

    /// Arms the timer to fire at `when` (nanotime), then every `period` ns
    /// if `period > 0`, on the caller's P. Replaces a pending firing and
    /// drops a channel timer's value not yet received; returns whether
    /// either was there (Go 1.23's Reset result).
    pub(crate) fn start(self: &Arc<Self>, when: i64, period: i64) -> bool {
        self.start_here(m::Here::lookup(), when, period)
    }

    /// [`start`](Self::start) with the caller's M already looked up (an
    /// entry gate's `Here`): one thread-local lookup fewer.
    /// In a synctest bubble (the caller's goroutine is a member) the
    /// timer goes on the bubble's heap, `when` on its virtual clock.
    #[inline]
    pub(crate) fn start_here(self: &Arc<Self>, here: m::Here, when: i64, period: i64) -> bool {
        self.start_in(super::bubble::current(), here, when, period)
    }

    /// [`start_here`](Self::start_here) for a timer of bubble `bubble`
    /// (None: the real-time heaps), looked up by the caller beforehand
    /// (`time::sleep` starts its timer on the scheduler's stack, where no
    /// goroutine is current).
    #[inline]
    pub(crate) fn start_in(
        self: &Arc<Self>,
        bubble: Option<&'static super::bubble::Bubble>,
        here: m::Here,
        when: i64,
        period: i64,
    ) -> bool {
        if let Some(b) = bubble {
            if b.is_virtual() {
                // The bubble's clock moves only in its own check: no poller
                // or sysmon to wake. A timer due already fires now
                // (`bubble::fire_due`).
                let was = Timer::start_on::<Sched>(self, b.timers(), when, period).0;
                if when <= b.nanotime() {
                    super::bubble::fire_due(b);
                }
                return was;
            }
            // A test's real-time group: the timer runs as any, and keeps
            // the group from being called deadlocked while pending.
            b.note_real_timer(self);
        }
        let (was, earlier) = Timer::start_on::<Sched>(self, &target_p(here).timers, when, period);
        if earlier {
            wake_netpoller(when.max(1));
            super::sysmon::timer_started(when);
        }
        was
    }
}

/// The P a new timer goes on: the caller's, or P0 from outside the runtime
/// (P0 survives every `set_max_procs`).
fn target_p(here: m::Here) -> &'static P {
    if let Some(m) = here.m() {
        // SAFETY: m is the calling thread's own M.
        if let Some(pp) = unsafe { m.p() } {
            return pp.get();
        }
    }
    let s = super::start();
    // Starting the runtime created P0.
    s.allp(0).expect("P0 exists once the runtime started")
}

/// Runs the due timers of `pp` (Go's checkTimers). `now` may be 0 (read
/// the clock only if some timer exists). Returns the time used and the next
/// `when` of this P (0 if none).
#[inline]
pub(crate) fn check_timers(pp: &P, now: i64) -> (i64, i64) {
    let next = pp.timers.next();
    if next == 0 {
        return (now, 0);
    }
    let now = if now == 0 { nanotime() } else { now };
    if now < next {
        return (now, next);
    }
    let fired = pp.timers.run_due::<Sched>(now);
    if fired > 0 {
        // Any M may run any P's heap: a real read-modify-write, but only
        // when timers fired.
        pp.counters
            .timers_fired
            .fetch_add(fired as u64, Ordering::Relaxed);
        if crate::tracer::on() {
            crate::tracer::timer_fire(pp.id, fired as u64);
        }
    }
    (now, pp.timers.next())
}

/// The earliest timer of all Ps, 0 if none (Go's timeSleepUntil).
pub(crate) fn next_when() -> i64 {
    let s = sched();
    let mut next = 0i64;
    for id in 0..s.allp_created.load(Ordering::Acquire) as usize {
        if let Some(p) = s.allp(id) {
            let w = p.timers.next();
            if w != 0 && (next == 0 || w < next) {
                next = w;
            }
        }
    }
    next
}

/// A timer at `when` was added: make sure some M will wake for it (Go's
/// wakeNetPoller). If an M is blocked in the netpoller until later, break
/// its wait; if nobody polls, start an M (it will poll if it finds nothing).
pub(crate) fn wake_netpoller(when: i64) {
    let s = sched();
    if s.lastpoll.load(Ordering::SeqCst) == 0 {
        let until = s.poll_until.load(Ordering::SeqCst);
        if until == 0 || until > when {
            crate::netpoll::netpoll_break();
        }
    } else {
        super::idle::wakep();
    }
}
