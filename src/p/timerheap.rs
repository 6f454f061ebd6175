//! The timer heap protocol (the loom-checked core of `timers.rs`): a
//! [`Timer`]'s state and generation (`seq`), one P's 4-ary heap
//! ([`Timers`]), and starting, stopping and running timers. A P's data, so
//! it lives in `p`. The scheduler glue (which P a timer goes on, waking the
//! poller, readying goroutines) is in `runtime/timers.rs`; see its note for
//! where timers run. What the heap needs from the scheduler (readying a
//! sleeper, noting an empty heap) comes in through [`Hooks`], a type
//! parameter, so the calls are static.
//!
//! # Protocol
//! A [`Timer`] is shared (`Arc`); its `State` (when, period, seq, the heap
//! it is queued on) sits under the timer's own lock. A heap entry holds the
//! `when` and `seq` it was queued with, and each timer knows the index of
//! its entry (`idx`, written only under the lock of the heap that holds the
//! entry). Invariants:
//! - a timer has at most one entry in any heap; if it has one, that entry
//!   is in the heap `queued_on` names, at `idx`, with the timer's current
//!   `seq`. So a heap holds only pending timers: no zombies, and a heap's
//!   earliest `when` (`timer0`) is that of a pending timer, or 0 when the
//!   P has none (the deadlock check relies on this).
//! - Stopping, or resetting to a time earlier than the entry's, bumps
//!   `seq` and removes (or moves) the entry at once (O(log n)).
//! - Resetting a pending timer to a time no earlier than its entry's
//!   (`queued_when`) only records the new `when` under the timer's lock:
//!   the entry stays, with its old `when` and the current `seq` (Go's
//!   `timerModifiedLater`). Whoever pops it finds the timer's `when` still
//!   in the future and re-queues it there instead of firing. So an entry's
//!   `when` is at most its timer's, `timer0` may be early (a poller or
//!   sysmon then wakes once to find nothing due), and a later reset, the
//!   common case (deadlines pushed back on every read, `Timer::reset` of a
//!   pending timeout), takes no heap lock and moves no entry.
//! - Running a heap pops the due entry (its `idx` becomes `NOT_QUEUED`),
//!   releases the heap lock, then takes the timer's lock: the entry fires
//!   only if its `seq` is still current. A stop or reset that came between
//!   found no entry to remove (`idx` is `NOT_QUEUED`), bumped `seq`, and so
//!   won: the popped entry is dropped unrun. So the entry whose `seq`
//!   matches fires exactly once (or is re-queued, if its timer was reset
//!   to a later time meanwhile), and `stop` returns true iff it prevented
//!   that firing.
//! - Moving a heap's timers to another (a P removed by `set_max_procs`)
//!   takes every entry out, then re-queues each one still current.
//!
//! # Channel timers (Go 1.23's synchronous timer channels)
//! A channel timer (`TimerFn::SendTime`: `time::Timer`, `Ticker`, `after`)
//! makes this promise: once a stop or reset returns, no value from before
//! it can be received. Go keeps it with a second lock (`sendLock`) and a
//! sequence number checked again at the send; here the timer's own lock
//! does it:
//! - The firing sends **under the timer's lock**, right after it found its
//!   entry current (`seq`): deciding to fire and delivering are one step
//!   for a stop or reset, so none can fall between them. The receiver the
//!   value went to is woken after the unlock (waking may take the
//!   scheduler's locks, ranked before a timer's).
//! - Stop and reset take the timer's lock, then drain the channel's buffer
//!   (`Sender::take_buffered`): a value delivered and not yet received is
//!   dropped. No firing runs meanwhile, so no old value can arrive later;
//!   and the drain's lock-free look at the count (no value: no lock) is
//!   exact, since every delivery happened under the lock held now. A value
//!   that a receiver took before that was received before the stop.
//! - So `stop` returns true iff it prevented a value from being received:
//!   the arm was pending, or its value was still in the buffer (Go 1.23's
//!   result). A reset returns the same for the arm it replaces.
//! - A dropped `time::Timer` or `Ticker` stops without the drain
//!   ([`Timer::stop_keep_value_with`]): a receiver the user cloned keeps a
//!   value already delivered.
//! - Timers fire eagerly, from their heap, whether or not anybody waits on
//!   the channel; so, unlike Go 1.23 (which queues a channel timer only
//!   while a goroutine is blocked on its channel, and has a receive run a
//!   due timer first, `maybeRunChan`), a receive or a `select!` arm needs
//!   no hook into the timer. Nobody can hold a timer's channel with no way
//!   to stop it: dropping the `Timer`, the `Ticker`, or the last receiver
//!   of an `after` channel stops the timer.
//!
//! Lock order: a timer's state lock, then a heap's lock; a heap's lock is
//! never held while taking a timer's lock. A channel timer also takes its
//! channel's lock under its state lock (to send, to drain), never with a
//! heap's lock, and no channel's lock is ever held while taking a timer's.
//! A timer's function (other than a channel timer's send) runs with no lock
//! held.
//!
//! The loom models at the bottom check: stop racing the firing (exactly one
//! of "fired" and "stop returned true"), reset racing the firing (at most one
//! firing per arm, and a pending reset always fires or is stopped), a timer
//! re-armed onto another heap while both heaps run (fires once), a
//! stopped timer leaving its heap empty at once, and for a channel timer
//! (its channel a count of values sent and not received) that no value is
//! left or arrives once a stop or reset racing the firing returns, and
//! that a stop returns true exactly when a racing receive got nothing.

use crate::loom::atomic::{AtomicI64, AtomicUsize, Ordering};
use crate::loom::sync::{Arc, Mutex, MutexGuard};

/// What the heap asks of the scheduler, resolved statically (a type
/// parameter: the calls inline as direct ones did). The runtime's
/// implementation is `runtime::timers::Sched`; the unit tests and the loom
/// models use `Quiet`.
pub(crate) trait Hooks {
    /// Readies a goroutine whose sleep ended.
    #[cfg(not(loom))]
    fn ready(g: &'static crate::g::G);
    /// A heap became empty: maybe no timer is pending anywhere any more
    /// (Go runs its deadlock check when the last timer goes).
    fn drained();
}

/// What a timer does when it fires.
pub(crate) enum TimerFn {
    /// Ready a goroutine parked in `sleep`.
    #[cfg(not(loom))]
    Ready(&'static crate::g::G),
    /// Send the current time without blocking (the channel timers: `after`,
    /// `Timer`, `Ticker`; Go's sendTime: a full channel drops the tick),
    /// under the timer's lock (module note, "Channel timers"). A variant of
    /// its own, not a `Call`: that would be one more allocation per timer.
    #[cfg(not(loom))]
    SendTime(crate::chan::Sender<std::time::Instant>),
    /// Call a function: `after_func` and I/O deadlines.
    Call(Box<dyn Fn() + Send + Sync>),
    /// The models' channel timer: a count of values sent and not received
    /// stands for the channel's buffer, sent to and drained under the
    /// timer's lock as `SendTime`'s channel is (module note, "Channel
    /// timers").
    #[cfg(loom)]
    SendCount(Arc<AtomicUsize>),
}

struct State {
    /// When it fires next (nanotime); meaningful while queued.
    when: i64,
    /// The `when` of the live heap entry, meaningful while queued: at most
    /// `when` (a reset to later leaves the entry as it is: module note).
    queued_when: i64,
    /// Re-arm period in ns (tickers), 0 for one-shot.
    period: i64,
    /// Generation: a heap entry is live only while its seq equals this.
    seq: u64,
    /// The heap that holds (or whose runner has just popped) the live entry.
    queued_on: Option<&'static Timers>,
}

#[cfg(not(loom))]
thread_local! {
    /// The `Instant` a channel timer fired by this thread sends: set while
    /// a synctest bubble's clock moves (`runtime::bubble`), whose timers
    /// send the bubble's time; `None` (the real time) otherwise.
    static FIRE_INSTANT: std::cell::Cell<Option<std::time::Instant>> =
        const { std::cell::Cell::new(None) };
}

/// Sets (or clears) the time this thread's channel timer firings send.
#[cfg(not(loom))]
pub(crate) fn set_fire_instant(at: Option<std::time::Instant>) {
    FIRE_INSTANT.with(|c| c.set(at));
}

#[cfg(not(loom))]
fn fire_instant() -> std::time::Instant {
    FIRE_INSTANT
        .with(|c| c.get())
        .unwrap_or_else(std::time::Instant::now)
}

/// `Timer::idx` when the timer has no entry in a heap.
const NOT_QUEUED: usize = usize::MAX;

/// A timer (see the module note).
pub(crate) struct Timer {
    state: Mutex<State>,
    /// Index of the timer's entry in its heap, `NOT_QUEUED` if none; read
    /// and written only under the lock of the heap that holds the entry.
    idx: AtomicUsize,
    func: TimerFn,
}

/// What a channel timer's send under the lock leaves to do after it: the
/// receiver to wake (`chan::Handoff`), if the send was made.
#[cfg(not(loom))]
type Handoff = Option<crate::chan::Handoff>;
#[cfg(loom)]
type Handoff = ();

struct Entry {
    when: i64,
    seq: u64,
    timer: Arc<Timer>,
}

/// A P's timers.
pub(crate) struct Timers {
    heap: Mutex<Vec<Entry>>,
    /// `when` of the heap's earliest entry, 0 if empty: read without the
    /// lock by `find_runnable`, sysmon, the poller and the deadlock check.
    timer0: AtomicI64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(e) => e.into_inner(),
    }
}

impl Timer {
    pub(crate) fn new(func: TimerFn) -> Arc<Timer> {
        Arc::new(Timer {
            state: Mutex::new(State {
                when: 0,
                queued_when: 0,
                period: 0,
                seq: 0,
                queued_on: None,
            }),
            idx: AtomicUsize::new(NOT_QUEUED),
            func,
        })
    }

    /// Arms the timer on heap `target` to fire at `when` (nanotime, >= 1),
    /// then every `period` ns if `period > 0`. Replaces a pending firing,
    /// and drops a channel timer's value not yet received (module note).
    /// Returns whether a firing was pending or its value unreceived (Go
    /// 1.23's Reset result) and whether the new entry is now the heap's
    /// earliest (the caller wakes the poller).
    #[inline]
    pub(crate) fn start_on<H: Hooks>(
        this: &Arc<Timer>,
        target: &'static Timers,
        when: i64,
        period: i64,
    ) -> (bool, bool) {
        let when = when.max(1);
        let mut st = lock(&this.state);
        st.when = when;
        st.period = period;
        let drained = this.drain_locked();
        if st.queued_on.is_some() && when >= st.queued_when {
            // Pending, and not earlier than its entry: the entry stays, and
            // whoever pops it re-queues it at `when` (module note). No heap
            // lock, no sift.
            return (true, false);
        }
        let was = st.queued_on.take();
        st.seq += 1;
        st.queued_when = when;
        st.queued_on = Some(target);
        let seq = st.seq;
        let mut emptied = false;
        let earlier = match was {
            // A reset on the same heap: move the entry, one heap lock.
            Some(old) if std::ptr::eq(old, target) => target.requeue(this, when, seq),
            _ => {
                if let Some(old) = was {
                    emptied = old.remove(this);
                }
                target.push(Entry {
                    when,
                    seq,
                    timer: this.clone(),
                })
            }
        };
        drop(st);
        if emptied {
            H::drained();
        }
        (was.is_some() || drained, earlier)
    }

    /// Cancels a pending firing, and drops a channel timer's value not yet
    /// received (module note); true if either was there (Go 1.23's Stop
    /// result). The entry leaves its heap at once.
    pub(crate) fn stop_with<H: Hooks>(&self) -> bool {
        self.stop_inner::<H>(true)
    }

    /// [`stop_with`](Self::stop_with) leaving a value already delivered in
    /// the channel (a dropped `time::Timer` or `Ticker`: a receiver the
    /// user cloned may still take it); true if a firing was pending.
    pub(crate) fn stop_keep_value_with<H: Hooks>(&self) -> bool {
        self.stop_inner::<H>(false)
    }

    #[inline]
    fn stop_inner<H: Hooks>(&self, drain: bool) -> bool {
        let mut st = lock(&self.state);
        let drained = drain && self.drain_locked();
        let Some(heap) = st.queued_on.take() else {
            return drained;
        };
        st.seq += 1;
        let emptied = heap.remove(self);
        drop(st);
        if emptied {
            H::drained();
        }
        true
    }

    /// Drops the value a channel timer delivered and nobody received; true
    /// if there was one. The caller holds the state lock (module note).
    #[inline]
    fn drain_locked(&self) -> bool {
        match &self.func {
            #[cfg(not(loom))]
            TimerFn::SendTime(tx) => tx.take_buffered(),
            #[cfg(loom)]
            TimerFn::SendCount(n) => n.swap(0, Ordering::SeqCst) != 0,
            _ => false,
        }
    }

    /// Whether a firing is pending (the timer has a heap entry, or a
    /// runner just popped its live one).
    #[cfg(not(loom))]
    pub(crate) fn is_pending(&self) -> bool {
        lock(&self.state).queued_on.is_some()
    }

    /// Whether this is a channel timer (its function sends the time) with
    /// no pending firing and no heap entry: with the `&mut` that proves
    /// nobody else holds it, it can be handed out as new
    /// (`p::chantimers`).
    #[cfg(not(loom))]
    pub(crate) fn is_idle_channel_timer(&mut self) -> bool {
        let st = match self.state.get_mut() {
            Ok(st) => st,
            Err(e) => e.into_inner(),
        };
        st.queued_on.is_none()
            && *self.idx.get_mut() == NOT_QUEUED
            && matches!(self.func, TimerFn::SendTime(_))
    }

    /// The part of a firing done under the state lock: a channel timer's
    /// send (module note). Returns the receiver to wake after the unlock.
    #[inline]
    fn fire_locked(&self) -> Handoff {
        match &self.func {
            #[cfg(not(loom))]
            TimerFn::SendTime(tx) => tx.try_send_defer_wake(fire_instant()).ok(),
            #[cfg(loom)]
            TimerFn::SendCount(n) => {
                n.fetch_add(1, Ordering::SeqCst);
            }
            _ => Handoff::default(),
        }
    }

    /// The rest of the firing, with no lock held: wake the receiver that
    /// [`fire_locked`](Self::fire_locked) handed the value to, or run the
    /// function.
    fn fire<H: Hooks>(&self, handoff: Handoff) {
        match &self.func {
            #[cfg(not(loom))]
            TimerFn::Ready(g) => H::ready(g),
            #[cfg(not(loom))]
            TimerFn::SendTime(_) => {
                if let Some(h) = handoff {
                    h.wake();
                }
            }
            TimerFn::Call(f) => f(),
            #[cfg(loom)]
            TimerFn::SendCount(_) => {}
        }
        #[cfg(loom)]
        let () = handoff;
    }
}

impl Timers {
    #[cfg(not(loom))]
    pub(crate) const fn new() -> Timers {
        Timers {
            heap: Mutex::new(Vec::new()),
            timer0: AtomicI64::new(0),
        }
    }

    #[cfg(loom)]
    pub(crate) fn new() -> Timers {
        Timers {
            heap: Mutex::new(Vec::new()),
            timer0: AtomicI64::new(0),
        }
    }

    /// `when` of the earliest pending timer, 0 if none.
    #[inline]
    pub(crate) fn next(&self) -> i64 {
        self.timer0.load(Ordering::Acquire)
    }

    #[cfg_attr(loom, allow(dead_code))] // read by schedtrace and stats
    pub(crate) fn len(&self) -> usize {
        lock(&self.heap).len()
    }

    /// Pushes an entry; true if it is earlier than everything before.
    fn push(&self, e: Entry) -> bool {
        let when = e.when;
        let mut h = lock(&self.heap);
        let i = h.len();
        h.push(e);
        sift_up(&mut h, i);
        let t0 = self.timer0.load(Ordering::Relaxed);
        self.timer0.store(h[0].when, Ordering::Release);
        t0 == 0 || when < t0
    }

    /// Gives `t`'s entry (if this heap still holds it, else a new one) a
    /// new `when` and `seq`; true if it is now earlier than everything
    /// before. The caller holds `t`'s state lock.
    fn requeue(&self, t: &Arc<Timer>, when: i64, seq: u64) -> bool {
        let mut h = lock(&self.heap);
        let i = t.idx.load(Ordering::Relaxed);
        if i == NOT_QUEUED {
            // A runner popped it: that entry is stale now.
            let i = h.len();
            h.push(Entry {
                when,
                seq,
                timer: t.clone(),
            });
            sift_up(&mut h, i);
        } else {
            debug_assert!(std::ptr::eq(&*h[i].timer, &**t));
            h[i].when = when;
            h[i].seq = seq;
            fix(&mut h, i);
        }
        let t0 = self.timer0.load(Ordering::Relaxed);
        self.timer0.store(h[0].when, Ordering::Release);
        t0 == 0 || when < t0
    }

    /// Removes `t`'s entry if this heap holds it (a runner may have popped
    /// it already). Returns whether the heap is now empty because of it.
    /// The caller holds `t`'s state lock and has bumped its `seq`.
    fn remove(&self, t: &Timer) -> bool {
        let mut h = lock(&self.heap);
        let i = t.idx.load(Ordering::Relaxed);
        if i == NOT_QUEUED {
            return false;
        }
        debug_assert!(std::ptr::eq(&*h[i].timer, t));
        let e = remove_at(&mut h, i);
        publish_top(&self.timer0, &h);
        let emptied = h.is_empty();
        drop(h);
        // The entry's Arc may be the last reference but one: dropped with
        // no heap lock held.
        drop(e);
        emptied
    }

    /// Runs every entry due at `now`; returns how many fired.
    pub(crate) fn run_due<H: Hooks>(&self, now: i64) -> usize {
        let mut fired = 0;
        loop {
            let e = {
                let mut h = lock(&self.heap);
                match h.first() {
                    None => {
                        self.timer0.store(0, Ordering::Release);
                        return fired;
                    }
                    Some(top) if top.when > now => {
                        self.timer0.store(top.when, Ordering::Release);
                        return fired;
                    }
                    Some(_) => {}
                }
                let e = remove_at(&mut h, 0);
                publish_top(&self.timer0, &h);
                e
            };
            let mut st = lock(&e.timer.state);
            if st.seq != e.seq {
                // Stopped or reset after the pop: that call won.
                continue;
            }
            if st.when > now {
                // Reset to a later time while queued: queue it at that time
                // (on this heap: the entry was the live one, so the timer
                // is queued here).
                st.queued_when = st.when;
                self.push(Entry {
                    when: st.when,
                    seq: e.seq,
                    timer: e.timer.clone(),
                });
                continue;
            }
            let rearmed = match st.queued_on {
                Some(heap) if st.period > 0 => {
                    // Catch up without firing once per missed period.
                    let missed = (now - st.when) / st.period;
                    st.when += st.period * (missed + 1);
                    st.queued_when = st.when;
                    heap.push(Entry {
                        when: st.when,
                        seq: e.seq,
                        timer: e.timer.clone(),
                    });
                    true
                }
                _ => {
                    st.queued_on = None;
                    false
                }
            };
            // A channel timer sends now, under the lock that its stop and
            // reset take (module note, "Channel timers").
            let handoff = e.timer.fire_locked();
            drop(st);
            if !rearmed && self.next() == 0 {
                H::drained();
            }
            e.timer.fire::<H>(handoff);
            fired += 1;
        }
    }

    /// Moves every pending timer to `to` (a P removed by `set_max_procs`).
    pub(crate) fn move_all(&self, to: &'static Timers) {
        let entries = {
            let mut h = lock(&self.heap);
            self.timer0.store(0, Ordering::Release);
            for e in h.iter() {
                e.timer.idx.store(NOT_QUEUED, Ordering::Relaxed);
            }
            std::mem::take(&mut *h)
        };
        let this: *const Timers = self;
        for e in entries {
            let t = e.timer.clone();
            let mut st = lock(&t.state);
            let here = st.queued_on.is_some_and(|q| std::ptr::eq(q, this));
            if st.seq != e.seq || !here {
                continue;
            }
            st.queued_on = Some(to);
            to.push(e);
        }
    }
}

fn publish_top(timer0: &AtomicI64, h: &[Entry]) {
    timer0.store(h.first().map_or(0, |e| e.when), Ordering::Release);
}

/// Moves entry `i` up to its place. Each entry it passes moves down one
/// level and gets its new index; the moving entry gets its index once, at
/// the end (one store per level: each store may miss the cache, as every
/// timer is an allocation of its own).
fn sift_up(h: &mut [Entry], mut i: usize) {
    let when = h[i].when;
    while i > 0 {
        let parent = (i - 1) / 4;
        if when >= h[parent].when {
            break;
        }
        h.swap(i, parent);
        h[i].timer.idx.store(i, Ordering::Relaxed);
        i = parent;
    }
    h[i].timer.idx.store(i, Ordering::Relaxed);
}

/// Moves entry `i` down to its place (see `sift_up` for the indexes).
fn sift_down(h: &mut [Entry], mut i: usize) {
    let n = h.len();
    let when = h[i].when;
    loop {
        let first = 4 * i + 1;
        if first >= n {
            break;
        }
        let mut best = first;
        for c in first + 1..(first + 4).min(n) {
            if h[c].when < h[best].when {
                best = c;
            }
        }
        if h[best].when >= when {
            break;
        }
        h.swap(i, best);
        h[i].timer.idx.store(i, Ordering::Relaxed);
        i = best;
    }
    h[i].timer.idx.store(i, Ordering::Relaxed);
}

/// Takes entry `i` out of the heap; its timer's `idx` becomes `NOT_QUEUED`.
fn remove_at(h: &mut Vec<Entry>, i: usize) -> Entry {
    let last = h.len() - 1;
    h.swap(i, last);
    let e = h.pop().expect("remove_at on an empty timer heap");
    e.timer.idx.store(NOT_QUEUED, Ordering::Relaxed);
    if i < h.len() {
        // The entry moved into the hole may belong above or below it.
        fix(h, i);
    }
    e
}

/// Restores heap order after entry `i`'s `when` changed.
fn fix(h: &mut [Entry], i: usize) {
    if i > 0 && h[i].when < h[(i - 1) / 4].when {
        sift_up(h, i);
    } else {
        sift_down(h, i);
    }
}

/// The tests' hooks: nothing to ready, nobody to tell.
#[cfg(test)]
pub(crate) struct Quiet;

#[cfg(test)]
impl Hooks for Quiet {
    #[cfg(not(loom))]
    fn ready(_: &'static crate::g::G) {
        unreachable!("the heap's tests have no sleep timers")
    }
    fn drained() {}
}

#[cfg(all(test, not(loom)))]
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
        let got: Vec<i64> = (0..1000).map(|_| remove_at(&mut h, 0).when).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn stopped_timers_leave_the_heap_at_once_and_never_fire() {
        let heap: &'static Timers = Box::leak(Box::new(Timers::new()));
        let fired = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let timers: Vec<_> = (0..400)
            .map(|i| {
                let f = fired.clone();
                let t = Timer::new(TimerFn::Call(Box::new(move || {
                    f.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                })));
                // Out of order, so that removals come from inside the heap.
                Timer::start_on::<Quiet>(&t, heap, 10 + (i * 37) % 400, 0);
                t
            })
            .collect();
        let stopped = timers
            .iter()
            .step_by(2)
            .filter(|t| t.stop_with::<Quiet>())
            .count();
        assert_eq!(stopped, 200);
        assert_eq!(heap.len(), 200, "no stopped entry lingers");
        assert!(timers.iter().step_by(2).all(|t| !t.stop_with::<Quiet>()));
        // Resets move entries inside the heap; the count stays.
        for (i, t) in timers.iter().enumerate().skip(1).step_by(2) {
            assert!(Timer::start_on::<Quiet>(t, heap, 5 + (i as i64 * 13) % 500, 0).0);
        }
        assert_eq!(heap.len(), 200);
        check_heap(heap);
        assert_eq!(heap.run_due::<Quiet>(1_000_000), 200);
        assert_eq!(fired.load(std::sync::atomic::Ordering::Relaxed), 200);
        assert_eq!(heap.len(), 0);
        assert_eq!(heap.next(), 0);
    }

    /// Heap order, and every entry's timer knows its index.
    fn check_heap(heap: &Timers) {
        let h = lock(&heap.heap);
        for (i, e) in h.iter().enumerate() {
            assert_eq!(e.timer.idx.load(Ordering::Relaxed), i);
            if i > 0 {
                assert!(h[(i - 1) / 4].when <= e.when);
            }
        }
        assert_eq!(heap.next(), h.first().map_or(0, |e| e.when));
    }

    #[test]
    fn random_starts_and_stops_keep_the_heap_exact() {
        let heap: &'static Timers = Box::leak(Box::new(Timers::new()));
        let timers: Vec<_> = (0..64)
            .map(|_| Timer::new(TimerFn::Call(Box::new(|| {}))))
            .collect();
        let mut pending = [false; 64];
        let mut x = 99u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let i = (x % 64) as usize;
            if x & 64 == 0 {
                let (was, _) =
                    Timer::start_on::<Quiet>(&timers[i], heap, (x >> 8) as i64 % 1000 + 1, 0);
                assert_eq!(was, pending[i]);
                pending[i] = true;
            } else {
                assert_eq!(timers[i].stop_with::<Quiet>(), pending[i]);
                pending[i] = false;
            }
            assert_eq!(heap.len(), pending.iter().filter(|p| **p).count());
        }
        check_heap(heap);
    }

    #[test]
    fn a_later_reset_leaves_the_entry_and_fires_once_at_the_new_time() {
        let heap: &'static Timers = Box::leak(Box::new(Timers::new()));
        let fired = Arc::new(AtomicUsize::new(0));
        let f = fired.clone();
        let t = Timer::new(TimerFn::Call(Box::new(move || {
            f.fetch_add(1, Ordering::SeqCst);
        })));
        assert_eq!(Timer::start_on::<Quiet>(&t, heap, 10, 0), (false, true));
        // Later: pending, not earlier; the entry keeps its time.
        assert_eq!(Timer::start_on::<Quiet>(&t, heap, 50, 0), (true, false));
        assert_eq!((heap.len(), heap.next()), (1, 10));
        // Its old time: re-queued at the new one, not fired.
        assert_eq!(heap.run_due::<Quiet>(20), 0);
        assert_eq!((heap.len(), heap.next()), (1, 50));
        check_heap(heap);
        // Earlier again: the entry moves at once.
        assert_eq!(Timer::start_on::<Quiet>(&t, heap, 30, 0), (true, true));
        assert_eq!(heap.next(), 30);
        assert_eq!(Timer::start_on::<Quiet>(&t, heap, 40, 0), (true, false));
        assert_eq!(heap.run_due::<Quiet>(35), 0);
        assert_eq!(heap.run_due::<Quiet>(40), 1);
        assert_eq!(fired.load(Ordering::SeqCst), 1);
        assert_eq!((heap.len(), heap.next()), (0, 0));
        // A stop after a later reset removes the entry, which never fires.
        Timer::start_on::<Quiet>(&t, heap, 10, 0);
        Timer::start_on::<Quiet>(&t, heap, 60, 0);
        assert!(t.stop_with::<Quiet>());
        assert_eq!((heap.len(), heap.next()), (0, 0));
        assert_eq!(heap.run_due::<Quiet>(100), 0);
        assert_eq!(fired.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn move_all_keeps_pending_timers_only() {
        let (a, b): (&'static Timers, &'static Timers) = (
            Box::leak(Box::new(Timers::new())),
            Box::leak(Box::new(Timers::new())),
        );
        let timers: Vec<_> = (0..10)
            .map(|i| {
                let t = Timer::new(TimerFn::Call(Box::new(|| {})));
                Timer::start_on::<Quiet>(&t, a, 100 - i, 0);
                t
            })
            .collect();
        timers[3].stop_with::<Quiet>();
        a.move_all(b);
        assert_eq!((a.len(), a.next()), (0, 0));
        assert_eq!(b.len(), 9);
        check_heap(b);
        assert!(
            timers[4].stop_with::<Quiet>(),
            "a moved timer stops on its new heap"
        );
        assert!(!timers[3].stop_with::<Quiet>());
        assert_eq!(b.run_due::<Quiet>(1000), 8);
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use loom::sync::atomic::AtomicUsize;
    use loom::thread;

    fn heap() -> &'static Timers {
        Box::leak(Box::new(Timers::new()))
    }

    fn counting_timer() -> (Arc<Timer>, Arc<AtomicUsize>) {
        let fired = Arc::new(AtomicUsize::new(0));
        let f = fired.clone();
        let t = Timer::new(TimerFn::Call(Box::new(move || {
            f.fetch_add(1, Ordering::SeqCst);
        })));
        (t, fired)
    }

    /// stop() racing the firing: exactly one of them wins.
    #[test]
    fn stop_races_fire() {
        loom::model(|| {
            let h = heap();
            let (t, fired) = counting_timer();
            Timer::start_on::<Quiet>(&t, h, 5, 0);
            let t2 = t.clone();
            let stopper = thread::spawn(move || t2.stop_with::<Quiet>());
            h.run_due::<Quiet>(10);
            let stopped = stopper.join().unwrap();
            let n = fired.load(Ordering::SeqCst);
            assert_eq!(
                n + stopped as usize,
                1,
                "fired {n}, stop returned {stopped}"
            );
        });
    }

    /// Arms a timer at 5 and races a reset to 7 (later: the entry stays)
    /// against a run of the heap at `run_at`, then runs it at 10. Returns
    /// whether the reset found the timer pending, and the firings after the
    /// racing run and in all; the heap must end empty.
    fn reset_racing_a_run(run_at: i64) -> (bool, usize, usize) {
        let h = heap();
        let (t, fired) = counting_timer();
        Timer::start_on::<Quiet>(&t, h, 5, 0);
        let t2 = t.clone();
        let resetter = thread::spawn(move || Timer::start_on::<Quiet>(&t2, h, 7, 0).0);
        h.run_due::<Quiet>(run_at);
        let was_pending = resetter.join().unwrap();
        let before = fired.load(Ordering::SeqCst);
        h.run_due::<Quiet>(10);
        assert_eq!((h.len(), h.next()), (0, 0));
        (was_pending, before, fired.load(Ordering::SeqCst))
    }

    /// A reset racing the firing, at a time only the first arm is due: the
    /// old arm fires at most once, and not at all if the reset found it
    /// pending; the new arm fires exactly once when the heap runs again.
    #[test]
    fn reset_races_fire() {
        loom::model(|| {
            let (was_pending, before, after) = reset_racing_a_run(6);
            assert!(before <= 1);
            if was_pending {
                assert_eq!(before, 0);
            }
            assert_eq!(after - before, 1, "the reset arm fires exactly once");
        });
    }

    /// The same race at a time both arms are due: one firing if the reset
    /// found the timer pending (the reset's arm), two if the first arm had
    /// fired before it.
    #[test]
    fn later_reset_races_fire_due_both() {
        loom::model(|| {
            let (was_pending, _, n) = reset_racing_a_run(10);
            assert_eq!(n, if was_pending { 1 } else { 2 }, "fired {n} times");
        });
    }

    /// A timer re-armed onto another heap while both heaps run: each arm
    /// fires at most once, and the replaced arm not at all (its entry on the
    /// first heap is a zombie): one firing if the re-arm found the first arm
    /// pending, two if the first had already fired.
    #[test]
    fn rearm_onto_another_heap() {
        loom::model(|| {
            let (a, b) = (heap(), heap());
            let (t, fired) = counting_timer();
            Timer::start_on::<Quiet>(&t, a, 5, 0);
            let t2 = t.clone();
            let mover = thread::spawn(move || {
                let (was_pending, _) = Timer::start_on::<Quiet>(&t2, b, 5, 0);
                b.run_due::<Quiet>(10);
                was_pending
            });
            a.run_due::<Quiet>(10);
            let was_pending = mover.join().unwrap();
            a.run_due::<Quiet>(10);
            let n = fired.load(Ordering::SeqCst);
            assert_eq!(n, if was_pending { 1 } else { 2 }, "fired {n} times");
            assert_eq!(a.next(), 0);
            assert_eq!(b.next(), 0);
        });
    }

    /// A channel timer (module note, "Channel timers"), a count of the
    /// values sent and not received standing for its channel.
    fn channel_timer() -> (Arc<Timer>, Arc<AtomicUsize>) {
        let sent = Arc::new(AtomicUsize::new(0));
        (Timer::new(TimerFn::SendCount(sent.clone())), sent)
    }

    /// Go 1.23's stop racing the firing and a receive: once stop returns,
    /// no value is left to receive, then or later, and stop returns true
    /// exactly when the value was not received (it stopped the firing, or
    /// withdrew the value sent).
    #[test]
    fn channel_timer_stop_races_fire_and_receive() {
        loom::model(|| {
            let h = heap();
            let (t, sent) = channel_timer();
            Timer::start_on::<Quiet>(&t, h, 5, 0);
            let (t2, sent2) = (t.clone(), sent.clone());
            let stopper = thread::spawn(move || {
                let stopped = t2.stop_with::<Quiet>();
                (stopped, sent2.load(Ordering::SeqCst))
            });
            let sent3 = sent.clone();
            let receiver = thread::spawn(move || sent3.swap(0, Ordering::SeqCst));
            h.run_due::<Quiet>(10);
            let (stopped, left_at_stop) = stopper.join().unwrap();
            let received = receiver.join().unwrap();
            assert_eq!(left_at_stop, 0, "a value left after stop returned");
            assert_eq!(sent.load(Ordering::SeqCst), 0, "a value sent after stop");
            assert!(received <= 1);
            assert_eq!(
                stopped as usize + received,
                1,
                "stop returned {stopped}, received {received}"
            );
        });
    }

    /// A reset to later racing the old arm's firing (the entry may stay,
    /// module note): once reset returns, no old value is left, reset finds
    /// the old arm pending (nobody received), and the new arm delivers
    /// exactly one value.
    #[test]
    fn channel_timer_reset_races_fire() {
        loom::model(|| {
            let h = heap();
            let (t, sent) = channel_timer();
            Timer::start_on::<Quiet>(&t, h, 5, 0);
            let (t2, sent2) = (t.clone(), sent.clone());
            let resetter = thread::spawn(move || {
                let (was, _) = Timer::start_on::<Quiet>(&t2, h, 7, 0);
                (was, sent2.load(Ordering::SeqCst))
            });
            h.run_due::<Quiet>(6);
            let (was, left) = resetter.join().unwrap();
            assert!(was, "reset found the old arm not pending");
            assert_eq!(left, 0, "an old value left after reset returned");
            h.run_due::<Quiet>(10);
            assert_eq!(sent.load(Ordering::SeqCst), 1, "the new arm's values");
        });
    }

    /// A stop racing a reset from another thread: the heap never keeps a
    /// stopped entry, and ends empty exactly when the stop came last.
    #[test]
    fn stop_races_reset_leaves_no_zombie() {
        loom::model(|| {
            let h = heap();
            let (t, fired) = counting_timer();
            Timer::start_on::<Quiet>(&t, h, 5, 0);
            let t2 = t.clone();
            let resetter = thread::spawn(move || {
                Timer::start_on::<Quiet>(&t2, h, 7, 0);
            });
            let stopped = t.stop_with::<Quiet>();
            resetter.join().unwrap();
            let len = h.len();
            assert!(len <= 1);
            // If the stop came last the heap is empty, else the reset's
            // entry is there; either way the heap's length is the truth.
            let again = t.stop_with::<Quiet>();
            assert_eq!(again, len == 1);
            assert!(stopped || again);
            assert_eq!(h.len(), 0);
            assert_eq!(h.next(), 0);
            assert_eq!(h.run_due::<Quiet>(10), 0);
            assert_eq!(fired.load(Ordering::SeqCst), 0);
        });
    }
}
