//! Work stealing: where an idle P takes work from a busy one.
//!
//! A spinning M visits the other Ps in a random order (start at a random P,
//! step by a random number coprime with GOMAXPROCS, so every P is visited
//! once per round), 4 rounds. From each victim it takes half of the ring
//! (`RunQueue::steal_into`). Only on the last round may it take the victim's
//! `runnext`, and only after a grace while the victim runs (a 3 us sleep,
//! about 55 us with the kernel's timer slack, as in Go; `p/runq.rs` says
//! why it must be a sleep): a G in runnext was usually just readied by the
//! running G and is about to run there, so taking it would only move it
//! away from its cache. If the victim ran a goroutine from its runnext
//! during the grace (its `runnext_hits` moved), the one there now is a fresh
//! handoff, even when it is the same G (the two of a channel ping-pong take
//! turns in runnext), and is left too; Go's check of the pointer alone took
//! it and split such a pair across Ps every grace period. A victim that
//! readied a G and kept running its own does not move the count and loses
//! the G after the grace, as in Go. The last
//! round also runs the victims' due timers (Go's stealTimersOrRunNextG).
//! An M that may not spin runs the other Ps' due timers all the same
//! (`run_due_timers`): they are work known to be there, not a search.
//!
//! Before an M with nothing queued polls the network (`find_runnable`'s
//! step 6), it makes one pass over the other Ps' rings (`steal_queued`),
//! spinning or not: goroutines queued there are older than what the poll
//! would bring, and their P's M may be off its CPU. Go polls first, so a P
//! that keeps finding network work never helps a P whose M the kernel
//! preempted with a full queue (the tail latency of a loaded server).

use std::sync::atomic::Ordering;

use super::{idle, sched, stats, timers};
use crate::g::G;
use crate::m::M;
use crate::p::{PHandle, PStatus};
use crate::tracer;

const STEAL_TRIES: usize = 4;

/// Tries to steal a G for `pp` from the other Ps. On the last round it also
/// runs the other Ps' due timers (idle Ps included: nobody else would); the
/// goroutines they ready land in `pp`'s queue, which the caller checks.
pub(crate) fn steal_work(m: &'static M, pp: &PHandle, mut now: i64) -> Option<&'static G> {
    let s = sched();
    for round in 0..STEAL_TRIES {
        let last = round == STEAL_TRIES - 1;
        let n = s.gomaxprocs();
        for id in RandomOrder::new(n, m.fastrand()) {
            if s.stw_waiting.load(Ordering::Acquire) {
                return None;
            }
            let Some(victim) = s.allp(id as usize) else {
                continue;
            };
            if std::ptr::eq(victim, pp.get()) {
                continue;
            }
            if last && victim.timers.next() != 0 {
                let (t, _) = timers::check_timers(victim, now);
                now = t;
                if let Some((g, _)) = pp.runq_get() {
                    return Some(g);
                }
            }
            if victim.status() == PStatus::Idle {
                continue;
            }
            // While the victim runs, its count of goroutines run from
            // runnext tells a thief waiting to take its runnext whether it
            // has been handing goroutines over meanwhile (the run queue's
            // `steal_into_counted`).
            let got = pp.runq_steal_from(victim, last || randomized_runnext(), || {
                (victim.status() == PStatus::Running)
                    .then(|| victim.counters.runnext_hits.load(Ordering::Relaxed))
            });
            if let Some((g, n)) = got {
                count_steal(pp, victim, n);
                return Some(g);
            }
        }
    }
    None
}

/// Takes half of the ring of the first other P that has queued goroutines,
/// in one pass in random order: no runnext, no timers, no spinning. Called
/// by `find_runnable` before it takes new work from the netpoller (step 6):
/// goroutines queued on another P were readied earlier than anything the
/// poll would return, and that P's M may be off the CPU (the kernel
/// preempted it) while its queue waits. Go polls first, and a P that keeps
/// finding network work then never helps: at GOMAXPROCS=2 on two cores
/// shared with a load generator, echo_100's p99 became the time the kernel
/// kept one M off its CPU with dozens of goroutines in its queue.
pub(crate) fn steal_queued(m: &'static M, pp: &PHandle) -> Option<&'static G> {
    let s = sched();
    for id in RandomOrder::new(s.gomaxprocs(), m.fastrand()) {
        let Some(victim) = s.allp(id as usize) else {
            continue;
        };
        if std::ptr::eq(victim, pp.get()) || victim.status() == PStatus::Idle {
            continue;
        }
        if let Some((g, n)) = pp.runq_steal_from(victim, false, || None) {
            count_steal(pp, victim, n);
            return Some(g);
        }
    }
    None
}

/// Counts (and traces) a steal of `n` goroutines by `pp` from `victim`.
fn count_steal(pp: &PHandle, victim: &crate::p::P, n: u32) {
    stats::bump(&pp.counters.steals, 1);
    stats::bump(&pp.counters.stolen, n as u64);
    if tracer::on() {
        tracer::steal(pp.id, victim.id, n as u64);
    }
}

/// Runs the other Ps' timers that are already due, for an M that may not
/// spin (`Spinning::may_spin`: enough Ms search already) and found no work
/// of its own. Returns a G they readied onto `pp`, if any.
///
/// Why: the spinning limit rations the search for work that may not exist.
/// A due timer is work that does exist, and the Ms allowed to spin may not
/// get to it soon: one just woken by `wakep` (counted as spinning from its
/// wake-up) can wait for a CPU. Without this, an M holding a P whose own
/// heap was empty gave its P up, found the overdue timer (`next_when`) in
/// the past, polled with no wait, took its P back, and went round again
/// without running it: with 100K sleepers at GOMAXPROCS=2, a third of the
/// timers fired over 250 us late (up to 8 ms), behind over a million such
/// rounds, while the woken M waited for the CPU the looping one held.
/// Go's findRunnable has the same gap (it runs other Ps' timers only while
/// spinning).
pub(crate) fn run_due_timers(pp: &PHandle, mut now: i64) -> Option<&'static G> {
    let s = sched();
    for id in 0..s.gomaxprocs() as usize {
        let Some(victim) = s.allp(id) else { continue };
        if std::ptr::eq(victim, pp.get()) {
            continue;
        }
        let next = victim.timers.next();
        if next == 0 {
            continue;
        }
        if now == 0 {
            now = crate::sys::time::nanotime();
        }
        if next <= now {
            let (t, _) = timers::check_timers(victim, now);
            now = t;
        }
    }
    pp.runq_get().map(|(g, _)| g)
}

/// In the randomized test mode, a thief may take runnext on any round.
#[inline]
fn randomized_runnext() -> bool {
    #[cfg(goroutine_randomize)]
    return super::randomize::one_in(8);
    #[cfg(not(goroutine_randomize))]
    false
}

/// The delicate dance's re-check, done by an M that holds no P after it
/// stopped spinning: if any P's queue or the global queue has work, take an
/// idle P to go after it.
pub(crate) fn check_runqs_no_p() -> Option<PHandle> {
    let s = sched();
    let n = s.gomaxprocs() as usize;
    let work = s.runqsize.load(Ordering::SeqCst) != 0
        || (0..n).any(|id| s.allp(id).is_some_and(|p| !p.runq_is_empty()));
    if !work {
        return None;
    }
    let mut l = s.lock();
    idle::pidleget(&mut l)
}

/// Visits 0..n once each in a random order: a random start and a random
/// stride coprime with n (Go's randomOrder).
pub(crate) struct RandomOrder {
    n: u32,
    pos: u32,
    inc: u32,
    left: u32,
}

impl RandomOrder {
    pub(crate) fn new(n: u32, rand: u64) -> RandomOrder {
        if n == 0 {
            return RandomOrder {
                n: 1,
                pos: 0,
                inc: 1,
                left: 0,
            };
        }
        let pos = (rand % n as u64) as u32;
        let mut inc = ((rand >> 32) % n as u64) as u32 + 1;
        while gcd(inc, n) != 1 {
            inc = inc % n + 1;
        }
        RandomOrder {
            n,
            pos,
            inc,
            left: n,
        }
    }
}

impl Iterator for RandomOrder {
    type Item = u32;
    fn next(&mut self) -> Option<u32> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let cur = self.pos;
        self.pos = (self.pos + self.inc) % self.n;
        Some(cur)
    }
}

fn gcd(mut a: u32, mut b: u32) -> u32 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_order_visits_every_p_once() {
        for n in 1..=64u32 {
            for seed in [0u64, 1, 7, 0xdead_beef_1234_5678, u64::MAX] {
                let mut seen: Vec<u32> = RandomOrder::new(n, seed).collect();
                assert_eq!(seen.len(), n as usize);
                seen.sort();
                seen.dedup();
                assert_eq!(seen.len(), n as usize, "n={n} seed={seed}");
            }
        }
    }
}
