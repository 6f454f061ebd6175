//! The timer heap protocol (the loom-checked core of `timers.rs`): a
//! [`Timer`]'s state and generation (`seq`), one P's 4-ary heap
//! ([`Timers`]), and starting, stopping and running timers. The scheduler
//! glue (which P a timer goes on, waking the poller, readying goroutines) is
//! in `timers.rs`; see its note for where timers run.
//!
//! # Protocol
//! A [`Timer`] is shared (`Arc`); its `State` (when, period, seq, the heap
//! it is queued on) sits under the timer's own lock. A heap entry holds the
//! `when` and `seq` it was queued with. Starting a timer bumps `seq` and
//! pushes a new entry; stopping or resetting bumps `seq`, which turns the
//! old entry into a zombie: when it reaches the top it is dropped unrun (and
//! a heap with more than a quarter zombies is rebuilt without them, when
//! it runs or when a timer is pushed). So only
//! the entry whose `seq` matches may fire, exactly once, and `stop` returns
//! true iff it prevented that firing. Moving a timer to another heap (a P
//! removed by `set_max_procs`, or a reset from another P) is the same: a new
//! entry with the current `seq` on the new heap, the old one a zombie.
//!
//! Lock order: a heap's lock, then a timer's state lock. `start`/`stop`
//! never hold a timer lock while taking a heap lock. A timer's function runs
//! with no lock held.
//!
//! The loom models at the bottom check: stop racing the firing (exactly one
//! of "fired" and "stop returned true"), reset racing the firing (at most one
//! firing per arm, and a pending reset always fires or is stopped), and a
//! timer re-armed onto another heap while both heaps run (fires once).

use crate::loom::atomic::{AtomicI64, AtomicU32, Ordering};
use crate::loom::sync::{Arc, Mutex, MutexGuard};

/// What a timer does when it fires.
pub(crate) enum TimerFn {
    /// Ready a goroutine parked in `sleep`.
    #[cfg(not(loom))]
    Ready(&'static crate::g::G),
    /// Send the time on a channel without blocking (Go's sendTime: a full
    /// channel drops the tick). Channel timers: `after`, `Timer`, `Ticker`.
    #[cfg(not(loom))]
    SendTime(crate::chan::Sender<std::time::Instant>),
    /// Call a function (`after_func`, I/O deadlines).
    Call(Box<dyn Fn() + Send + Sync>),
}

struct State {
    /// When it fires next (nanotime); meaningful while queued.
    when: i64,
    /// Re-arm period in ns (tickers), 0 for one-shot.
    period: i64,
    /// Generation: a heap entry is live only while its seq equals this.
    seq: u64,
    /// The heap that holds the live entry.
    queued_on: Option<&'static Timers>,
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
                period: 0,
                seq: 0,
                queued_on: None,
            }),
            func,
        })
    }

    /// Arms the timer on heap `target` to fire at `when` (nanotime, >= 1),
    /// then every `period` ns if `period > 0`. Replaces a pending firing.
    /// Returns whether one was pending (Go's Reset result) and whether the
    /// new entry is now the heap's earliest (the caller wakes the poller).
    pub(crate) fn start_on(
        this: &Arc<Timer>,
        target: &'static Timers,
        when: i64,
        period: i64,
    ) -> (bool, bool) {
        let when = when.max(1);
        let (was, seq) = {
            let mut st = lock(&this.state);
            let was = st.queued_on.take();
            if let Some(old) = was {
                old.zombies.fetch_add(1, Ordering::Relaxed);
            }
            st.seq += 1;
            st.when = when;
            st.period = period;
            st.queued_on = Some(target);
            (was.is_some(), st.seq)
        };
        let earlier = target.push(Entry {
            when,
            seq,
            timer: this.clone(),
        });
        (was, earlier)
    }

    /// Cancels a pending firing; true if there was one.
    pub(crate) fn stop(&self) -> bool {
        let mut st = lock(&self.state);
        match st.queued_on.take() {
            Some(heap) => {
                st.seq += 1;
                heap.zombies.fetch_add(1, Ordering::Relaxed);
                true
            }
            None => false,
        }
    }

    fn fire(&self) {
        match &self.func {
            #[cfg(not(loom))]
            TimerFn::Ready(g) => crate::runtime::park::ready(g),
            #[cfg(not(loom))]
            TimerFn::SendTime(tx) => {
                let _ = tx.try_send(std::time::Instant::now());
            }
            TimerFn::Call(f) => f(),
        }
    }
}

impl Timers {
    #[cfg(not(loom))]
    pub(crate) const fn new() -> Timers {
        Timers {
            heap: Mutex::new(Vec::new()),
            timer0: AtomicI64::new(0),
            zombies: AtomicU32::new(0),
        }
    }

    #[cfg(loom)]
    pub(crate) fn new() -> Timers {
        Timers {
            heap: Mutex::new(Vec::new()),
            timer0: AtomicI64::new(0),
            zombies: AtomicU32::new(0),
        }
    }

    /// `when` of the earliest entry, 0 if none.
    #[inline]
    pub(crate) fn next(&self) -> i64 {
        self.timer0.load(Ordering::Acquire)
    }

    #[cfg_attr(loom, allow(dead_code))] // read by schedtrace
    pub(crate) fn len(&self) -> usize {
        lock(&self.heap).len()
    }

    /// Pushes an entry; true if it is earlier than everything before.
    fn push(&self, e: Entry) -> bool {
        let when = e.when;
        let mut h = lock(&self.heap);
        // Also clean here (Go's cleantimers on add): a goroutine that starts
        // and stops timers without ever letting the scheduler run this heap
        // would otherwise grow it without bound.
        let z = self.zombies.load(Ordering::Relaxed) as usize;
        if z > 64 && z * 4 > h.len() {
            self.clean(&mut h);
        }
        h.push(e);
        let i = h.len() - 1;
        sift_up(&mut h, i);
        let t0 = self.timer0.load(Ordering::Relaxed);
        self.timer0.store(h[0].when, Ordering::Release);
        t0 == 0 || when < t0
    }

    /// Runs every entry due at `now`; returns how many fired.
    pub(crate) fn run_due(&self, now: i64) -> usize {
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

    /// Moves every live entry to `to` (a P removed by `set_max_procs`).
    pub(crate) fn move_all(&self, to: &'static Timers) {
        let entries = std::mem::take(&mut *lock(&self.heap));
        self.timer0.store(0, Ordering::Release);
        self.zombies.store(0, Ordering::Relaxed);
        for e in entries {
            let mut st = lock(&e.timer.state);
            if st.seq != e.seq {
                continue;
            }
            st.queued_on = Some(to);
            drop(st);
            to.push(e);
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
        let got: Vec<i64> = (0..1000).map(|_| pop(&mut h).when).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn zombies_are_cleaned_and_never_fire() {
        let heap: &'static Timers = Box::leak(Box::new(Timers::new()));
        let fired = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let timers: Vec<_> = (0..400)
            .map(|i| {
                let f = fired.clone();
                let t = Timer::new(TimerFn::Call(Box::new(move || {
                    f.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                })));
                Timer::start_on(&t, heap, 10 + i, 0);
                t
            })
            .collect();
        let stopped = timers.iter().step_by(2).filter(|t| t.stop()).count();
        assert_eq!(stopped, 200);
        assert_eq!(heap.run_due(1_000_000), 200);
        assert_eq!(fired.load(std::sync::atomic::Ordering::Relaxed), 200);
        assert_eq!(heap.len(), 0);
        assert_eq!(heap.next(), 0);
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
            Timer::start_on(&t, h, 5, 0);
            let t2 = t.clone();
            let stopper = thread::spawn(move || t2.stop());
            h.run_due(10);
            let stopped = stopper.join().unwrap();
            let n = fired.load(Ordering::SeqCst);
            assert_eq!(
                n + stopped as usize,
                1,
                "fired {n}, stop returned {stopped}"
            );
        });
    }

    /// A reset racing the firing: the old arm fires at most once, and the
    /// new arm fires exactly once when the heap runs again.
    #[test]
    fn reset_races_fire() {
        loom::model(|| {
            let h = heap();
            let (t, fired) = counting_timer();
            Timer::start_on(&t, h, 5, 0);
            let t2 = t.clone();
            let resetter = thread::spawn(move || Timer::start_on(&t2, h, 7, 0).0);
            h.run_due(6);
            let was_pending = resetter.join().unwrap();
            let before = fired.load(Ordering::SeqCst);
            assert!(before <= 1);
            // If the reset found the first arm pending, that arm did not fire.
            if was_pending {
                assert_eq!(before, 0);
            }
            h.run_due(10);
            let after = fired.load(Ordering::SeqCst);
            assert_eq!(after - before, 1, "the reset arm fires exactly once");
            assert_eq!(h.next(), 0);
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
            Timer::start_on(&t, a, 5, 0);
            let t2 = t.clone();
            let mover = thread::spawn(move || {
                let (was_pending, _) = Timer::start_on(&t2, b, 5, 0);
                b.run_due(10);
                was_pending
            });
            a.run_due(10);
            let was_pending = mover.join().unwrap();
            a.run_due(10);
            let n = fired.load(Ordering::SeqCst);
            assert_eq!(n, if was_pending { 1 } else { 2 }, "fired {n} times");
            assert_eq!(a.next(), 0);
            assert_eq!(b.next(), 0);
        });
    }
}
