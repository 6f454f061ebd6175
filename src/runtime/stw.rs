//! The stop-the-world count: which Ps have stopped, and when a stop begins
//! and ends (Go's `sched.stopwait`, `gcwaiting` and the `_Pgcstop` Ps).
//! `procresize.rs` drives a stop; this file is the bookkeeping every P
//! holder goes through, kept apart so that loom checks it (`loom_tests`).
//!
//! # State
//! A [`Stop`] lives in the sched lock's `Locked`; the flag
//! (`Sched::stw_waiting`) mirrors [`Stop::is_active`] for lock-free hints
//! (`find_runnable`'s step 1, the steal loop, `entersyscall`).
//!
//! # Invariants
//! 1. **The flag changes only under the sched lock**, in [`Stop::begin`] and
//!    [`Stop::end`], so under the lock `flag == is_active()`.
//! 2. **While a stop is active, every P is either counted or held
//!    uncounted** by exactly one owner: an M (its `p` or `nextp`), a system
//!    call (`Syscall` status), or a caller passing its handle to
//!    [`Stop::stop`]. The idle list is empty: `begin`'s caller moves every
//!    idle P into the count, and a P given up while a stop is active is
//!    counted instead of idled (`idle::pidleput`).
//! 3. **A P is counted only while a stop is active**, and at most
//!    `stopwait` times: [`Stop::stop`] hands a P back to its caller when no
//!    stop is active (the caller keeps running it), and fails loudly if the
//!    count is already complete (some P was counted twice).
//! 4. **The stop ends in the same critical section that publishes the
//!    restarted Ps** (`procresize`'s idle list). An M that takes an idle P
//!    therefore sees the flag clear, under the same lock.
//!
//! Invariant 4 is the one the runtime lacked until 2026-12: the world was
//! restarted by `procresize` putting Ps on the idle list, unlocking, and
//! only then clearing the flag. An M returning from the netpoller (or
//! sysmon starting one for an overdue timer) could take an idle P in that
//! gap, see the flag still set, and "stop" its P into a count that was
//! already complete. That P stayed in the stopped list, owned by nobody,
//! and the next stop waited for it forever (`stopwait=1`, every P
//! `status=3`): `set_max_procs` beside timer sleepers hung in most runs.

/// The count of one stop-the-world (see the module note). `P` is the P
/// handle type (`PHandle`; a plain id in the loom model).
pub(crate) struct Stop<P> {
    active: bool,
    /// Ps still to stop.
    stopwait: u32,
    /// The Ps stopped so far (the caller's own P is counted, not listed).
    stopped: Vec<P>,
}

/// What [`Stop::stop`] did with a P.
#[must_use]
pub(crate) enum Offer<P> {
    /// Counted; `last`: it completed the count (wake the stopper).
    Counted { last: bool },
    /// No stop is active: the P is the caller's again.
    NotStopping(P),
}

impl<P> Stop<P> {
    pub(crate) const fn new() -> Stop<P> {
        Stop {
            active: false,
            stopwait: 0,
            stopped: Vec::new(),
        }
    }

    /// Begins a stop of `n` Ps; sets the flag. Sched lock held.
    pub(crate) fn begin(&mut self, n: u32, flag: &crate::loom::atomic::AtomicBool) {
        assert!(
            !self.active && self.stopped.is_empty(),
            "stop-the-world begun twice"
        );
        self.active = true;
        self.stopwait = n;
        // SeqCst, under the sched lock: pairs with the lock-free hints
        // (their comments name their halves) and, through the lock, with
        // every check made under it (invariant 1).
        flag.store(true, crate::loom::atomic::Ordering::SeqCst);
    }

    /// Whether a stop is active (the flag's value, under the lock).
    #[inline]
    pub(crate) fn is_active(&self) -> bool {
        self.active
    }

    /// Ps still to stop (schedtrace's `stopwait`).
    pub(crate) fn remaining(&self) -> u32 {
        self.stopwait
    }

    /// Counts the stopper's own P, which it keeps (not listed).
    pub(crate) fn stop_own(&mut self) -> bool {
        self.count()
    }

    /// Counts `p` as stopped and lists it, if a stop is active; else gives
    /// it back. Sched lock held.
    pub(crate) fn stop(&mut self, p: P) -> Offer<P> {
        if !self.active {
            return Offer::NotStopping(p);
        }
        let last = self.count();
        self.stopped.push(p);
        Offer::Counted { last }
    }

    fn count(&mut self) -> bool {
        assert!(
            self.active && self.stopwait > 0,
            "stop-the-world: a P counted twice (stopwait already 0)"
        );
        self.stopwait -= 1;
        self.stopwait == 0
    }

    /// The stopped Ps, for `procresize`, once every P is counted.
    pub(crate) fn take_stopped(&mut self) -> Vec<P> {
        assert!(
            self.active && self.stopwait == 0,
            "stop-the-world: Ps taken before every P stopped"
        );
        std::mem::take(&mut self.stopped)
    }

    /// Ends the stop; clears the flag. Sched lock held, and the caller
    /// publishes the restarted Ps before it unlocks (invariant 4).
    pub(crate) fn end(&mut self, flag: &crate::loom::atomic::AtomicBool) {
        assert!(
            self.active && self.stopwait == 0 && self.stopped.is_empty(),
            "stop-the-world ended with Ps unaccounted for"
        );
        self.active = false;
        // SeqCst under the sched lock: invariant 1.
        flag.store(false, crate::loom::atomic::Ordering::SeqCst);
    }
}

/// `execute`'s check as a goroutine starts: clears a pending preemption
/// request (`preempt`, the P's flag), which was made for the goroutine
/// that ran before, unless a stop-the-world is pending (`flag`,
/// `stw_waiting`): a stop's request stands. True if it cleared one (the
/// caller then clears the request's reason too).
///
/// `preempt` is loaded with Acquire, pairing with `stop_the_world`'s
/// Release store of it, made after `begin` set `flag`: a request seen
/// here is seen with the flag its stop set, so this never clears a stop's
/// request. (x86-64 never reorders two loads; aarch64 may satisfy the
/// flag's load before a Relaxed load of `preempt`, see the flag clear and
/// the request set, and drop it: the stop then waited for its 100 us
/// re-ask. `loom_tests` checks it.) `flag`: Acquire, pairs with
/// `begin`/`end`; a stale false otherwise only delays a stop that has not
/// asked this P yet.
#[inline]
pub(crate) fn clear_stale_request(
    preempt: &crate::loom::atomic::AtomicBool,
    flag: &crate::loom::atomic::AtomicBool,
) -> bool {
    use crate::loom::atomic::Ordering;
    if preempt.load(Ordering::Acquire) && !flag.load(Ordering::Acquire) {
        preempt.store(false, Ordering::Relaxed);
        return true;
    }
    false
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! The stop protocol with its timer interaction, in miniature: the
    //! sched lock over `Stop` and the idle list, the flag beside it, and
    //! the P holders that race with a stop and a restart.
    use super::{Offer, Stop};
    use crate::loom::atomic::{AtomicBool, Ordering};
    use loom::sync::{Arc, Condvar, Mutex};
    use loom::thread;

    struct Locked {
        stw: Stop<usize>,
        pidle: Vec<usize>,
    }

    struct World {
        lock: Mutex<Locked>,
        flag: AtomicBool,
        /// The stopper's note: the last P counted wakes it.
        done: Condvar,
        /// Set once per P whenever an M holds it (to check "one owner").
        held: [AtomicBool; 2],
    }

    impl World {
        fn hold(&self, p: usize) {
            assert!(
                !self.held[p].swap(true, Ordering::SeqCst),
                "P{p} held twice"
            );
        }
        fn unhold(&self, p: usize) {
            assert!(self.held[p].swap(false, Ordering::SeqCst));
        }

        /// `stw_stopm`: an M holding `p` that saw the flag (a hint)
        /// re-checks under the lock; true if it stopped the P.
        fn stopm(&self, p: usize) -> bool {
            let mut l = self.lock.lock().unwrap();
            if !l.stw.is_active() {
                return false;
            }
            self.unhold(p);
            match l.stw.stop(p) {
                Offer::Counted { last } => {
                    if last {
                        self.done.notify_all();
                    }
                }
                Offer::NotStopping(_) => unreachable!("checked under the lock"),
            }
            true
        }

        /// A stop-the-world and its restart with `procresize` (both Ps
        /// survive and go idle). `split`: the old restart, which published
        /// the idle Ps and cleared the flag in two critical sections.
        fn stop_and_start(&self, split: bool) {
            let mut l = self.lock.lock().unwrap();
            l.stw.begin(2, &self.flag);
            while let Some(p) = l.pidle.pop() {
                match l.stw.stop(p) {
                    Offer::Counted { last } => assert!(!last || l.pidle.is_empty()),
                    Offer::NotStopping(_) => unreachable!(),
                }
            }
            while l.stw.remaining() > 0 {
                l = self.done.wait(l).unwrap();
            }
            let stopped = l.stw.take_stopped();
            if split {
                l.pidle.extend(stopped);
                drop(l);
                thread::yield_now();
                self.lock.lock().unwrap().stw.end(&self.flag);
                return;
            }
            l.stw.end(&self.flag);
            l.pidle.extend(stopped);
        }
    }

    /// P0 runs a goroutine (its M checks the flag at its next scheduling
    /// point); P1 is idle, and another M comes back from the netpoller
    /// with a timer due (or sysmon starts one for it): it takes an idle P
    /// and checks the flag at its first scheduling point. Two stops run
    /// back to back, as `set_max_procs` in a loop does. Every interleaving
    /// must finish (loom fails a model that deadlocks), and no P may be
    /// counted by a stop that is already complete (Stop's asserts).
    #[test]
    fn restart_publishes_idle_ps_with_the_flag_clear() {
        model(false);
    }

    /// The same model with the restart split as it was before 2026-12:
    /// loom finds the M that counts its P into a complete stop.
    #[test]
    #[should_panic(expected = "counted twice")]
    fn split_restart_counts_a_p_twice() {
        model(true);
    }

    /// A stop-the-world sets the flag, then asks P0's goroutine to yield
    /// (`preempt`, Release); P0's M starts its next goroutine meanwhile
    /// and clears a request it takes for a stale one
    /// (`clear_stale_request`). The stop's request must stand: with a
    /// Relaxed load of `preempt` loom finds the M that sees the request
    /// but not the flag, and drops it.
    #[test]
    fn a_starting_goroutine_keeps_a_stops_request() {
        loom::model(|| {
            let flag = Arc::new(AtomicBool::new(false));
            let preempt = Arc::new(AtomicBool::new(false));
            let m = {
                let (flag, preempt) = (flag.clone(), preempt.clone());
                thread::spawn(move || super::clear_stale_request(&preempt, &flag))
            };
            let mut l = Stop::<usize>::new();
            l.begin(1, &flag);
            preempt.store(true, Ordering::Release);
            let cleared = m.join().unwrap();
            assert!(!cleared, "a stop-the-world's request was cleared");
            assert!(preempt.load(Ordering::Relaxed));
        });
    }

    fn model(split: bool) {
        loom::model(move || {
            let w = Arc::new(World {
                lock: Mutex::new(Locked {
                    stw: Stop::new(),
                    pidle: vec![1],
                }),
                flag: AtomicBool::new(false),
                done: Condvar::new(),
                held: [AtomicBool::new(true), AtomicBool::new(false)],
            });
            // P0's M: at each scheduling point, a flag seen set stops the P
            // and parks the M until a restart hands it one (here: it takes
            // an idle P back, as `stopm` does once woken).
            let m0 = {
                let w = w.clone();
                thread::spawn(move || {
                    let mut p = Some(0);
                    for _ in 0..2 {
                        match p {
                            Some(q) => {
                                if w.flag.load(Ordering::Acquire) && w.stopm(q) {
                                    p = None;
                                }
                            }
                            None => {
                                let mut l = w.lock.lock().unwrap();
                                if let Some(q) = l.pidle.pop() {
                                    w.hold(q);
                                    p = Some(q);
                                }
                            }
                        }
                        thread::yield_now();
                    }
                    if let Some(q) = p {
                        let mut l = w.lock.lock().unwrap();
                        w.unhold(q);
                        match l.stw.stop(q) {
                            Offer::Counted { last } => {
                                if last {
                                    w.done.notify_all();
                                }
                            }
                            Offer::NotStopping(q) => l.pidle.push(q),
                        }
                    }
                })
            };
            // The netpoller's M: a timer is due, it takes an idle P, then
            // looks at the flag first thing (`find_runnable`'s step 1), and
            // gives the P up when it has run the timer.
            let m1 = {
                let w = w.clone();
                thread::spawn(move || {
                    let got = {
                        let mut l = w.lock.lock().unwrap();
                        let p = l.pidle.pop();
                        if let Some(p) = p {
                            w.hold(p);
                        }
                        p
                    };
                    if let Some(p) = got {
                        if w.flag.load(Ordering::Acquire) && w.stopm(p) {
                            return;
                        }
                        let mut l = w.lock.lock().unwrap();
                        w.unhold(p);
                        // `pidleput`: a P given up during a stop is counted.
                        match l.stw.stop(p) {
                            Offer::Counted { last } => {
                                if last {
                                    w.done.notify_all();
                                }
                            }
                            Offer::NotStopping(p) => l.pidle.push(p),
                        }
                    }
                })
            };
            w.stop_and_start(split);
            w.stop_and_start(split);
            m0.join().unwrap();
            m1.join().unwrap();
            let l = w.lock.lock().unwrap();
            assert!(!l.stw.is_active());
        });
    }
}
