//! Idle Ps, idle Ms, and waking an M to run them (`wakep`, `startm`, `stopm`).
//! The counters and their memory-ordering protocol are in `spinning.rs`.
//!
//! Invariants:
//! - A P is in exactly one place: held by an M (`M::p` or a parked M's
//!   `nextp`), on `Locked::pidle`, or on `Locked::stopped` during a
//!   stop-the-world. `npidle == pidle.len()` whenever the lock is free.
//! - An M on `Locked::midle` is parked (or about to park) on its note and
//!   holds no P; only the one that pops it from `midle` may hand it a P and
//!   wake it. New OS threads are created only when `midle` is empty.

use std::sync::atomic::Ordering;

use super::{sched, stats, throw, Locked};
use crate::m::{self, M};
use crate::p::{PHandle, PStatus};
use crate::tracer;

/// Puts `pp` on the idle list (Go's pidleput). Sched lock held. During a
/// stop-the-world the P is counted as stopped instead: the idle list stays
/// empty while a stop is active (`stw.rs`, invariant 2), whichever path
/// gives a P up (the callers that know of the stop count it themselves
/// first; this covers the rest, such as `startm` failing to make a thread).
pub(crate) fn pidleput(l: &mut Locked, pp: PHandle) {
    if l.stw.is_active() {
        super::syscall::stop_for_stw_locked(l, pp);
        return;
    }
    pp.set_status(PStatus::Idle);
    // No goroutine runs here now: a preemption request left on the P was
    // for one that has gone (a G that takes the P from the idle list, back
    // from a system call or a revoked stretch, runs no `execute` first).
    pp.preempt.store(false, Ordering::Relaxed);
    pp.preempt_for_timer.store(false, Ordering::Relaxed);
    l.pidle.push(pp);
    sched().spin.p_idle();
}

/// Takes an idle P (Go's pidleget). Sched lock held.
pub(crate) fn pidleget(l: &mut Locked) -> Option<PHandle> {
    let pp = l.pidle.pop()?;
    sched().spin.p_busy();
    Some(pp)
}

/// Tries to get one more M running goroutines, if there is an idle P and
/// nobody is already spinning. Call after making work runnable.
#[inline]
pub(crate) fn wakep() {
    if sched().spin.try_claim_wake() {
        startm(None, true);
    }
}

/// Runs some M with `pp` (or any idle P): an idle M if there is one, else a
/// new thread. With `spinning`, the caller holds a claim on `nmspinning`
/// that passes to the M (or is given back if no P is available).
pub(crate) fn startm(pp: Option<PHandle>, spinning: bool) {
    let s = sched();
    let mut l = s.lock();
    let pp = match pp {
        Some(pp) => pp,
        None => match pidleget(&mut l) {
            Some(pp) => pp,
            None => {
                drop(l);
                if spinning {
                    s.spin.undo_claim();
                }
                return;
            }
        },
    };
    if let Some(nmp) = l.midle.pop() {
        drop(l);
        // SAFETY: we popped `nmp` from the idle list: it is parked (or about
        // to park) and nobody else can hand it a P.
        unsafe { nmp.set_nextp(pp, spinning) };
        nmp.park.wakeup();
        super::sysmon::wake_if_waiting();
        return;
    }
    drop(l);
    super::sysmon::wake_if_waiting();
    let nthreads = s
        .allm
        .lock()
        .map(|v| v.iter().filter(|m| !m.is_dead()).count())
        .unwrap_or(0)
        + 1;
    super::syscall::check_thread_limit(nthreads);
    let id = s.mnext.fetch_add(1, Ordering::Relaxed);
    match m::newm(id, pp, spinning, mstart_main) {
        Ok(nm) => {
            if let Ok(mut all) = s.allm.lock() {
                all.push(nm);
            }
        }
        Err((e, pp)) => {
            if spinning {
                s.spin.undo_claim();
            }
            let mut l = s.lock();
            pidleput(&mut l, pp);
            drop(l);
            if s.allm.lock().map(|v| v.is_empty()).unwrap_or(true) {
                throw(&format!("cannot create any OS thread for the runtime: {e}"));
            }
            eprintln!("goroutine: cannot create an OS thread for another M ({e}); running with the Ms that exist");
        }
    }
}

/// What a new M runs once it holds its first P (`m::newm`): the scheduler
/// loop, which returns only when a goroutine exits while locked to the
/// thread.
fn mstart_main(m: &'static M) {
    if m.is_spinning() {
        super::schedule::count_spin(m);
    }
    super::schedule::schedule(m);
}

/// Parks the calling M on the idle list until `startm` hands it a P (a P
/// wake-up); returns
/// holding that P (Go's stopm).
pub(crate) fn stopm(m: &'static M) {
    // SAFETY: called on m's own thread.
    debug_assert!(unsafe { m.p() }.is_none());
    stats::bump(&m.parks, 1);
    if tracer::on() {
        tracer::m_park();
    }
    sched().lock().midle.push(m);
    super::checkdead::m_parked();
    m.park.sleep();
    m.park.clear();
    stats::bump(&m.wakes, 1);
    // An M waking may be the first to run goroutines after an idle spell:
    // the coarse clock that stamps parks must be fresh.
    stats::refresh_coarse_now();
    if tracer::on() {
        tracer::m_wake();
    }
    // SAFETY: own thread, after the wakeup that published nextp.
    unsafe {
        let pp = m.take_nextp().expect("stopm: woken without a P");
        m.acquirep(pp);
    }
    if m.is_spinning() {
        super::schedule::count_spin(m);
    }
}
