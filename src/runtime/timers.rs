//! Timers: one 4-ary heap per P (Go's `p.timers`), run by the scheduler.
//!
//! # Where timers run
//! - `find_runnable` runs the due timers of its own P first
//!   ([`check_timers`]), and on the last stealing round those of every other
//!   P (idle ones included), so a timer fires even if its P is busy or idle.
//! - An M that finds no work blocks in the netpoller until the earliest
//!   timer of all Ps ([`next_when`]); a timer added earlier than that wakes
//!   it ([`wake_netpoller`]), and with nobody polling, `wakep` starts an M
//!   that will.
//! - sysmon starts an M when a timer is overdue and no M looks at it.
//!
//! # Protocol
//! A [`Timer`] is shared (`Arc`); its `State` (when, period, seq, the P it
//! is queued on) sits under the timer's own lock. A heap entry holds the
//! `when` and `seq` it was queued with. Starting a timer bumps `seq` and
//! pushes a new entry; stopping or resetting bumps `seq`, which turns the old
//! entry into a zombie: when it reaches the top it is dropped unrun (and a
//! heap with more than a quarter zombies is rebuilt without them). So only
//! the entry whose `seq` matches may fire, exactly once, and `stop` returns
//! true iff it prevented that firing.
//!
//! Lock order: a P's heap lock, then a timer's state lock. `start`/`stop`
//! never hold a timer lock while taking a heap lock. A timer's function runs
//! with no lock held, on whatever M ran the heap (on its scheduler stack), so
//! it must not block: the runtime's timer functions only ready a goroutine,
//! try-send on a buffered channel, or spawn a goroutine.

use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::{park, sched, throw};
use crate::g::G;
use crate::m;
use crate::p::P;
use crate::sys::time::nanotime;

/// What a timer does when it fires.
pub(crate) enum TimerFn {
    /// Ready a goroutine parked in `sleep`.
    Ready(&'static G),
    /// Call a function (channel timers, `after_func`, I/O deadlines).
    Call(Box<dyn Fn() + Send + Sync>),
}

struct State {
    /// When it fires next (nanotime); meaningful while queued.
    when: i64,
    /// Re-arm period in ns (tickers), 0 for one-shot.
    period: i64,
    /// Generation: a heap entry is live only while its seq equals this.
    seq: u64,
    /// The P whose heap holds the live entry.
    queued_on: Option<u32>,
}

/// A timer (see the module note).
pub(crate) struct Timer {
    state: Mutex<State>,
    func: TimerFn,
}

struct Entry {
    when: i64,
    seq: u64,
    timer: Arc<Timer>,
}

/// A P's timers.
pub(crate) struct Timers {
    heap: Mutex<Vec<Entry>>,
    /// `when` of the heap's top entry (zombie or not), 0 if empty: read
    /// without the lock by `find_runnable`, sysmon and the poller.
    timer0: AtomicI64,
    /// Entries known to be stale.
    zombies: AtomicU32,
    /// Timers fired from this heap (statistics; see `check_timers`).
    fired: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(_) => throw("timer lock poisoned"),
    }
}

impl Timer {
    pub(crate) fn new(func: TimerFn) -> Arc<Timer> {
        Arc::new(Timer {
            state: Mutex::new(State {
                when: 0,
                period: 0,
                seq: 0,
                queued_on: None,
            }),
            func,
        })
    }

    /// Arms the timer to fire at `when` (nanotime), then every `period` ns
    /// if `period > 0`. Replaces a pending firing; returns whether one was
    /// pending (Go's Reset result).
    pub(crate) fn start(self: &Arc<Self>, when: i64, period: i64) -> bool {
        let target = target_p();
        let (was, seq) = {
            let mut st = lock(&self.state);
            let was = st.queued_on.take();
            if let Some(id) = was {
                zombie(id);
            }
            st.seq += 1;
            st.when = when.max(1);
            st.period = period;
            st.queued_on = Some(target.id);
            (was.is_some(), st.seq)
        };
        target.timers.push(Entry {
            when: when.max(1),
            seq,
            timer: self.clone(),
        });
        was
    }

    /// Cancels a pending firing; true if there was one.
    pub(crate) fn stop(&self) -> bool {
        let mut st = lock(&self.state);
        match st.queued_on.take() {
            Some(id) => {
                st.seq += 1;
                zombie(id);
                true
            }
            None => false,
        }
    }

    fn fire(&self) {
        match &self.func {
            TimerFn::Ready(g) => park::ready(g),
            TimerFn::Call(f) => f(),
        }
    }
}

fn zombie(p: u32) {
    if let Some(pp) = sched().allp(p as usize) {
        pp.timers.zombies.fetch_add(1, Ordering::Relaxed);
    }
}

/// The P a new timer goes on: the caller's, or P0 from outside the runtime
/// (P0 survives every `set_max_procs`).
fn target_p() -> &'static P {
    if let Some(m) = m::current() {
        // SAFETY: m is the calling thread's own M.
        if let Some(pp) = unsafe { m.p() } {
            return pp.get();
        }
    }
    let s = super::start();
    // Starting the runtime created P0.
    s.allp(0).expect("P0 exists once the runtime started")
}

impl Timers {
    pub(crate) const fn new() -> Timers {
        Timers {
            heap: Mutex::new(Vec::new()),
            timer0: AtomicI64::new(0),
            zombies: AtomicU32::new(0),
            fired: AtomicU64::new(0),
        }
    }

    /// Timers fired from this heap so far.
    pub(crate) fn fired(&self) -> u64 {
        self.fired.load(Ordering::Relaxed)
    }

    /// `when` of the earliest entry, 0 if none.
    #[inline]
    pub(crate) fn next(&self) -> i64 {
        self.timer0.load(Ordering::Acquire)
    }

    pub(crate) fn len(&self) -> usize {
        lock(&self.heap).len()
    }

    fn push(&self, e: Entry) {
        let when = e.when;
        let earlier = {
            let mut h = lock(&self.heap);
            h.push(e);
            let i = h.len() - 1;
            sift_up(&mut h, i);
            let t0 = self.timer0.load(Ordering::Relaxed);
            let earlier = t0 == 0 || when < t0;
            self.timer0.store(h[0].when, Ordering::Release);
            earlier
        };
        if earlier {
            wake_netpoller(when);
        }
    }

    /// Runs every entry due at `now`; returns how many fired.
    fn run_due(&self, now: i64) -> usize {
        let mut fired = 0;
        loop {
            let t = {
                let mut h = lock(&self.heap);
                let z = self.zombies.load(Ordering::Relaxed) as usize;
                if z > 64 && z * 4 > h.len() {
                    self.clean(&mut h);
                }
                let Some(top) = h.first() else {
                    self.timer0.store(0, Ordering::Release);
                    return fired;
                };
                if top.when > now {
                    self.timer0.store(top.when, Ordering::Release);
                    return fired;
                }
                let e = pop(&mut h);
                let mut st = lock(&e.timer.state);
                if st.seq != e.seq {
                    drop(st);
                    let _ = self
                        .zombies
                        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |z| {
                            Some(z.saturating_sub(1))
                        });
                    publish_top(&self.timer0, &h);
                    continue;
                }
                if st.period > 0 {
                    // Catch up without firing once per missed period.
                    let missed = (now - st.when) / st.period;
                    st.when += st.period * (missed + 1);
                    let when = st.when;
                    drop(st);
                    let i = h.len();
                    h.push(Entry {
                        when,
                        seq: e.seq,
                        timer: e.timer.clone(),
                    });
                    sift_up(&mut h, i);
                } else {
                    st.queued_on = None;
                    drop(st);
                }
                publish_top(&self.timer0, &h);
                e.timer
            };
            t.fire();
            fired += 1;
        }
    }

    /// Drops every stale entry and re-heapifies. Heap lock held.
    fn clean(&self, h: &mut Vec<Entry>) {
        h.retain(|e| lock(&e.timer.state).seq == e.seq);
        for i in (0..h.len()).rev() {
            sift_down(h, i);
        }
        self.zombies.store(0, Ordering::Relaxed);
        publish_top(&self.timer0, h);
    }

    /// Moves every entry to `to` (a P removed by `set_max_procs`).
    pub(crate) fn move_all(&self, to: &'static P) {
        let entries = std::mem::take(&mut *lock(&self.heap));
        self.timer0.store(0, Ordering::Release);
        self.zombies.store(0, Ordering::Relaxed);
        for e in entries {
            let mut st = lock(&e.timer.state);
            if st.seq != e.seq {
                continue;
            }
            st.queued_on = Some(to.id);
            drop(st);
            to.timers.push(e);
        }
    }
}

fn publish_top(timer0: &AtomicI64, h: &[Entry]) {
    timer0.store(h.first().map_or(0, |e| e.when), Ordering::Release);
}

fn sift_up(h: &mut [Entry], mut i: usize) {
    while i > 0 {
        let parent = (i - 1) / 4;
        if h[i].when >= h[parent].when {
            break;
        }
        h.swap(i, parent);
        i = parent;
    }
}

fn sift_down(h: &mut [Entry], mut i: usize) {
    let n = h.len();
    loop {
        let first = 4 * i + 1;
        if first >= n {
            return;
        }
        let mut best = first;
        for c in first + 1..(first + 4).min(n) {
            if h[c].when < h[best].when {
                best = c;
            }
        }
        if h[best].when >= h[i].when {
            return;
        }
        h.swap(i, best);
        i = best;
    }
}

fn pop(h: &mut Vec<Entry>) -> Entry {
    let last = h.len() - 1;
    h.swap(0, last);
    let e = h.pop().expect("pop of an empty timer heap");
    if !h.is_empty() {
        sift_down(h, 0);
    }
    e
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
    let fired = pp.timers.run_due(now);
    if fired > 0 {
        // Any M may run any P's heap: a real read-modify-write, but only
        // when timers fired.
        pp.timers.fired.fetch_add(fired as u64, Ordering::Relaxed);
        if crate::trace::on() {
            crate::trace::timer_fire(pp.id, fired as u64);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(when: i64) -> Entry {
        Entry {
            when,
            seq: 0,
            timer: Timer::new(TimerFn::Call(Box::new(|| {}))),
        }
    }

    #[test]
    fn four_ary_heap_pops_in_order() {
        let mut h = Vec::new();
        let mut x = 12345u64;
        let mut want = Vec::new();
        for _ in 0..1000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let w = (x % 10_000) as i64 + 1;
            want.push(w);
            h.push(entry(w));
            let i = h.len() - 1;
            sift_up(&mut h, i);
        }
        want.sort();
        let got: Vec<i64> = (0..1000).map(|_| pop(&mut h).when).collect();
        assert_eq!(got, want);
    }
}
