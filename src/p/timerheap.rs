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
//!   (`TimeChanOps::take_buffered`): a value delivered and not yet received is
//!   dropped. No firing runs meanwhile, so no old value can arrive later;
//!   and the drain's looks before it (the timer's `sent` flag: no firing
//!   since the last drain, nothing to do; then the channel's count: no
//!   value, no channel lock) are exact, since every delivery happened
//!   under the lock held now. A value
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

#[cfg(not(loom))]
use std::ptr::NonNull;

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
    SendTime(TimeChan),
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
    /// A channel timer fired since its channel was last drained, so the
    /// channel may hold a value: a stop or reset that finds it false has
    /// nothing to drain and leaves the channel alone (every send happens
    /// under this lock, so it is exact in that direction).
    sent: bool,
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

/// [`set_fire_instant`], returning the setting it replaces (a bubble's
/// due timer fired from inside the bubble's own firing restores it).
#[cfg(not(loom))]
pub(crate) fn replace_fire_instant(at: Option<std::time::Instant>) -> Option<std::time::Instant> {
    FIRE_INSTANT.with(|c| c.replace(at))
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

/// A channel timer's channel as the heap holds it: the sending end of a
/// channel of `Instant`s, type-erased, with what the heap may do with it
/// (send, wake the receiver a send handed its value to, drain, drop) in a
/// table the channel layer provides (`chan::timechan`). So this layer names
/// no channel type, and a timer needs no allocation beyond its record.
#[cfg(not(loom))]
pub(crate) struct TimeChan {
    /// The sender, as `ops` knows it.
    raw: NonNull<()>,
    ops: &'static TimeChanOps,
}

/// What the heap does with a [`TimeChan`] (module note, "Channel timers").
/// Each function gets the `raw` sender of the `TimeChan` it is called for.
#[cfg(not(loom))]
pub(crate) struct TimeChanOps {
    /// Sends the time without blocking (a full channel drops it, as Go's
    /// `sendTime`), under the timer's lock; returns the receiver the value
    /// was handed to, to wake once the lock is released.
    pub(crate) send: unsafe fn(NonNull<()>, std::time::Instant) -> Option<NonNull<()>>,
    /// Wakes a receiver that `send` returned (no timer lock held).
    pub(crate) wake: unsafe fn(NonNull<()>),
    /// Drops a value delivered and not received; true if there was one.
    pub(crate) take_buffered: unsafe fn(NonNull<()>) -> bool,
    /// Drops the sender.
    pub(crate) drop: unsafe fn(NonNull<()>),
}

#[cfg(not(loom))]
impl TimeChan {
    /// # Safety
    /// `raw` is a sender that `ops`' functions accept, owned from now on by
    /// the `TimeChan` (its drop runs `ops.drop`); the channel behind it may
    /// be used from any thread.
    pub(crate) unsafe fn from_raw(raw: NonNull<()>, ops: &'static TimeChanOps) -> TimeChan {
        TimeChan { raw, ops }
    }
}

// SAFETY: the sender behind `raw` is owned by the `TimeChan` alone and may be
// used from any thread (`from_raw`'s contract).
#[cfg(not(loom))]
unsafe impl Send for TimeChan {}
// SAFETY: as above; `ops`' functions take the channel's own lock where
// they need one, so calls from several threads at once are sound.
#[cfg(not(loom))]
unsafe impl Sync for TimeChan {}

#[cfg(not(loom))]
impl Drop for TimeChan {
    fn drop(&mut self) {
        // SAFETY: `raw` is the sender `ops` accepts, dropped once, here.
        unsafe { (self.ops.drop)(self.raw) }
    }
}

/// What a channel timer's send under the lock leaves to do after it: the
/// receiver to wake, if the send handed its value to one.
#[cfg(not(loom))]
type Handoff = Option<NonNull<()>>;
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
                sent: false,
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
        let drained = this.drain_locked(&mut st);
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
        let drained = drain && self.drain_locked(&mut st);
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
    fn drain_locked(&self, st: &mut State) -> bool {
        if !std::mem::take(&mut st.sent) {
            return false;
        }
        match &self.func {
            #[cfg(not(loom))]
            // SAFETY: `raw` is the sender `ops` accepts (`TimeChan::from_raw`).
            TimerFn::SendTime(tc) => unsafe { (tc.ops.take_buffered)(tc.raw) },
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
    /// (`time::kit`).
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
    fn fire_locked(&self, st: &mut State) -> Handoff {
        st.sent = true;
        match &self.func {
            #[cfg(not(loom))]
            // SAFETY: as in `drain_locked`.
            TimerFn::SendTime(tc) => unsafe { (tc.ops.send)(tc.raw, fire_instant()) },
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
            TimerFn::SendTime(tc) => {
                if let Some(h) = handoff {
                    // SAFETY: `h` came from this channel's `send`, and is
                    // woken once, with no timer lock held.
                    unsafe { (tc.ops.wake)(h) }
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
            let handoff = e.timer.fire_locked(&mut st);
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
mod tests;

#[cfg(all(test, loom))]
mod loom_models;
