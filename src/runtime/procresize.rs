//! Stop-the-world and `set_max_procs` (Go's stopTheWorld / procresize /
//! startTheWorld).
//!
//! # Protocol
//! - `worldsema` serialises stop-the-worlds. A goroutine waiting for it
//!   yields instead of blocking its M, so its P can still be stopped by the
//!   stop-the-world that holds the sema.
//! - Stopping: under the sched lock begin the count (`stw.rs`, which sets
//!   `stw_waiting`) of GOMAXPROCS Ps, stop the caller's own P (if it holds
//!   one) and every idle P at once. Each other P is held by an M that will
//!   see `stw_waiting` at its next scheduling point (`find_runnable`, the
//!   steal loop) and, re-checking under the lock, count it as stopped; the
//!   last one wakes `stopnote`. A P given up during the stop is counted
//!   instead of idled (`idle::pidleput`), so every P is counted exactly once
//!   (`stw.rs`'s invariants).
//! - While stopped, no M holds a P except the caller: the idle list is empty,
//!   so `wakep`/`startm` find nothing and spinning Ms without a P park.
//! - Resizing: Ps with id >= the new count are destroyed (their queues go to
//!   the global queue, free Gs and stacks to the global pools, status Dead;
//!   the record stays in `allp`). New Ps are created or revived. The caller
//!   keeps its P if it survives, else takes P0.
//! - Starting: in one critical section with the resize, end the count
//!   (clearing `stw_waiting`) and put Ps without work on the idle list, so
//!   no M can take an idle P and still see the stop (`stw.rs`, invariant
//!   4); then start an M for each P with local work, and `wakep`.
//!
//! - Ps in a system call are stopped by CASing them `Syscall -> Stopped`;
//!   running Ps get their `preempt` flag set, so their goroutines yield at
//!   their next runtime call (Go's preemptall).
//!
//! - GOMAXPROCS follows the cgroup CPU limit while nobody chose it
//!   ([`follow_cgroup`], from sysmon once a second, as Go 1.25): a change
//!   is applied by `set_max_procs` on a short-lived thread, never on sysmon,
//!   whose preemption requests a stop-the-world may need. One such thread
//!   at a time; a `set_max_procs` by the program ends the following.
//!
//! - An M that stays in its goroutine's own code for a whole 100 us round
//!   of the wait (blocked in the kernel outside the runtime, or computing
//!   without runtime calls) has its P revoked (`retake.rs`), which then
//!   counts as stopped: the M re-acquires a P at its next runtime call,
//!   after the world restarts. So no goroutine can hold a stop-the-world
//!   up for longer than about 200 us.

use std::sync::atomic::{AtomicBool, Ordering};

use super::{globrunq, idle, proc, sched, start, Locked, MAX_PROCS};
use crate::g::G;
use crate::m;
use crate::p::{PHandle, PStatus};

/// The program set GOMAXPROCS itself (`crate::set_max_procs`): the cgroup
/// limit is no longer followed.
static CHOSEN: AtomicBool = AtomicBool::new(false);
/// A thread applying a new cgroup limit is running.
static FOLLOWING: AtomicBool = AtomicBool::new(false);

/// `crate::set_max_procs`: the program's own choice (module note).
pub(crate) fn set_max_procs_chosen(n: usize) -> usize {
    if n != 0 {
        CHOSEN.store(true, Ordering::Relaxed);
    }
    set_max_procs(n)
}

/// Applies a change of the cgroup CPU limit to GOMAXPROCS (module note).
/// Called by sysmon about once a second; cheap when nothing changed: a
/// `pread` of each limit file.
pub(crate) fn follow_cgroup() {
    if CHOSEN.load(Ordering::Relaxed) || !super::env::follows_cgroup() {
        return;
    }
    let want = super::env::default_procs();
    if want == sched().gomaxprocs() as usize || FOLLOWING.swap(true, Ordering::Acquire) {
        return;
    }
    super::checkdead::internal_thread_started();
    let spawned = std::thread::Builder::new()
        .name("goroutine-maxprocs".into())
        .stack_size(64 * 1024)
        .spawn(move || {
            if !CHOSEN.load(Ordering::Relaxed) {
                set_max_procs(want);
            }
            FOLLOWING.store(false, Ordering::Release);
            super::checkdead::internal_thread_exited();
        });
    if spawned.is_err() {
        // No thread now: try again at the next look.
        FOLLOWING.store(false, Ordering::Release);
        super::checkdead::internal_thread_exited();
    }
}

/// Sets GOMAXPROCS (see `crate::set_max_procs`); returns the previous value.
pub(crate) fn set_max_procs(n: usize) -> usize {
    let s = start();
    let prev = s.gomaxprocs() as usize;
    if n == 0 {
        return prev;
    }
    let n = n.min(MAX_PROCS);
    acquire_worldsema();
    let prev = s.gomaxprocs() as usize;
    if n != prev {
        stop_the_world();
        start_the_world(n as u32);
    }
    // Release; pairs with the Acquire CAS in `acquire_worldsema`: the next
    // stop-the-world sees everything this one did.
    s.worldsema.store(false, Ordering::Release);
    prev
}

/// Runs `f` with the world stopped (every P stopped but the caller's, if
/// it holds one), then restarts it: the goroutine dump (`traceback`'s
/// module note). The number of Ps does not change.
pub(crate) fn with_world_stopped<R>(f: impl FnOnce() -> R) -> R {
    let s = start();
    acquire_worldsema();
    stop_the_world();
    let r = f();
    start_the_world(s.gomaxprocs());
    // Release; pairs with the Acquire CAS in `acquire_worldsema`.
    s.worldsema.store(false, Ordering::Release);
    r
}

fn acquire_worldsema() {
    let s = sched();
    let in_goroutine = m::current_g().is_some();
    // Acquire; pairs with the Release stores that free the sema
    // (`set_max_procs`, `with_world_stopped`).
    while s
        .worldsema
        .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        if in_goroutine {
            // Inside the gate: `set_max_procs` and `with_world_stopped`'s
            // callers run their bodies through it.
            super::park::gosched(m::Here::lookup());
        } else {
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
    }
}

fn stop_the_world() {
    let s = sched();
    s.stopnote.clear();
    let mut l = s.lock();
    // Sets `stw_waiting` under the sched lock. It pairs with every load of
    // the flag: under the same lock (find_runnable's step 8, `stw_stopm`,
    // `handoffp`, `pidleput`, sysmon's re-checks), which the lock orders;
    // and lock-free hints (find_runnable's step 1, `execute`, the steal
    // loop, `exitsyscall`, `entersyscall`, whose gap its comment describes
    // in syscall.rs).
    l.stw.begin(s.gomaxprocs(), &s.stw_waiting);
    if let Some(m) = m::current() {
        // SAFETY: m is the calling thread's own M.
        if let Some(pp) = unsafe { m.p() } {
            pp.set_status(PStatus::Stopped);
            let _ = l.stw.stop_own();
        }
    }
    while let Some(pp) = idle::pidleget(&mut l) {
        pp.set_status(PStatus::Stopped);
        count_locked(&mut l, pp);
    }
    // Ps whose M is in a system call: take them (their M will find no P
    // when it returns and queue its goroutine). Running Ps: ask their
    // goroutines to yield at their next runtime call (Go's preemptall).
    for id in 0..s.gomaxprocs() as usize {
        if let Some(p) = s.allp(id) {
            if let Some(pp) = p.cas_from_syscall(PStatus::Stopped) {
                count_locked(&mut l, pp);
            } else if p.status() == PStatus::Running {
                // Release: pairs with `execute`'s Acquire load, which
                // then sees `stw_waiting` set above and leaves the request
                // (the goroutines' own checks load Relaxed: a request
                // carries no data).
                p.preempt.store(true, Ordering::Release);
            }
        }
    }
    let wait = l.stw.remaining() > 0;
    drop(l);
    if wait {
        // Goroutines in preemptible regions may never reach a runtime call:
        // signal them too, and again every 100 us while some P still runs
        // (a signal is refused while its goroutine is in libc or a runtime
        // call), as Go's stopTheWorldWithSema does. sysmon does not help
        // here: it sleeps during a stop-the-world.
        // An M that stays in its goroutine's own code (blocked in the
        // kernel, or computing without runtime calls) for a whole round
        // loses its P, which then counts as stopped (`retake.rs`), as Go
        // counts a P in a system call.
        let mut seen = vec![None; s.gomaxprocs() as usize];
        loop {
            preempt_running_async(s);
            if s.stopnote.sleep_timeout(100_000) {
                break;
            }
            for (id, seen) in seen.iter_mut().enumerate() {
                let Some(p) = s.allp(id) else { continue };
                // A P that was in flight to an M at the first pass (in its
                // `nextp`, not yet running) is asked now, as Go's
                // stopTheWorldWithSema repeats preemptall every round.
                if p.status() == PStatus::Running {
                    p.preempt.store(true, Ordering::Release);
                }
                // A P that entered a system call after our first pass (its
                // M's flag check and our CAS can miss each other: see
                // `entersyscall`): stop it now.
                if let Some(pp) = p.cas_from_syscall(PStatus::Stopped) {
                    super::syscall::stop_for_stw(pp);
                    continue;
                }
                if p.status() != PStatus::Running {
                    continue;
                }
                if let Some(pp) = super::retake::take_for_stw(p, seen) {
                    super::syscall::stop_for_stw(pp);
                }
            }
        }
    }
}

/// Signals the goroutine of every running P that is in a preemptible region
/// (the asynchronous half of Go's preemptall).
fn preempt_running_async(s: &'static super::Sched) {
    let now = crate::sys::time::nanotime();
    // Goroutines in regions on threads whose P was taken: their Ps count
    // as stopped already, but a dump wants their frames.
    super::asyncpreempt::preempt_revoked(now);
    for id in 0..s.gomaxprocs() as usize {
        if let Some(p) = s.allp(id) {
            if p.status() == PStatus::Running {
                super::asyncpreempt::preempt_m(p, now);
            }
        }
    }
}

/// Counts `pp` (owned, not held by any M) as stopped: a stop is active,
/// since the caller saw it under the lock or holds an uncounted P, without
/// which the stop cannot complete (`stw.rs`, invariant 2).
fn count_locked(l: &mut Locked, pp: PHandle) {
    match l.stw.stop(pp) {
        super::stw::Offer::Counted { last } => {
            if last {
                sched().stopnote.wakeup();
            }
        }
        super::stw::Offer::NotStopping(_) => unreachable!("counted outside a stop"),
    }
}

/// Changes the number of Ps to `n` during stop-the-world, under the sched
/// lock; returns the Ps that have local work (each needs an M) and those
/// without (for the idle list).
fn procresize(l: &mut Locked, n: u32) -> (Vec<PHandle>, Vec<PHandle>) {
    let s = sched();
    let old = s.gomaxprocs();
    let mut handles: Vec<PHandle> = l.stw.take_stopped();
    for id in old..n {
        let pp = s.create_p(id);
        pp.set_status(PStatus::Stopped);
        handles.push(pp);
    }
    // The caller's own P, if it has one.
    let me = m::current();
    // SAFETY: own M; nobody else touches it during stop-the-world.
    let own_id = me.and_then(|m| unsafe { m.p() }.map(|pp| pp.id));

    let mut moved: Vec<&'static G> = Vec::new();
    let mut keep = Vec::with_capacity(n as usize);
    // P0 survives every resize: destroyed Ps' timers move there.
    let p0 = s.allp(0).expect("P0 exists");
    for pp in handles {
        if pp.id < n {
            keep.push(pp);
        } else {
            destroy_p(&pp, &mut moved, p0);
        }
    }
    if let (Some(m), Some(id)) = (me, own_id) {
        if id >= n {
            // SAFETY: own M, holding a P.
            let pp = unsafe { m.releasep() };
            destroy_p(&pp, &mut moved, p0);
            let p0 = keep
                .iter()
                .position(|p| p.id == 0)
                .map(|i| keep.swap_remove(i))
                .expect("P0 survives every resize");
            // SAFETY: own M, now holding no P.
            unsafe { m.acquirep(p0) };
        } else {
            // SAFETY: own M, holding a P.
            unsafe { m.p() }
                .expect("own P vanished")
                .set_status(PStatus::Running);
        }
    }
    // A destroyed P's Gs were next in line: they go to the global queue's head.
    globrunq::put_front_list_locked(l, &mut moved);
    // Pairs with the Acquire load in `Sched::gomaxprocs` (runtime/mod.rs):
    // who sees the new count sees the P records created above.
    s.gomaxprocs.store(n, Ordering::SeqCst);

    keep.into_iter()
        .partition(|pp| !pp.runq_is_empty() || pp.timers.next() != 0)
}

/// Moves everything a dying P holds to the global structures.
fn destroy_p(pp: &PHandle, moved: &mut Vec<&'static G>, timers_to: &'static crate::p::P) {
    pp.timers.move_all(&timers_to.timers);
    pp.runq_drain(|g| moved.push(g));
    // SAFETY: short exclusive borrow of a P we hold.
    moved.append(&mut unsafe { pp.local() }.yieldq);
    pp.counters.yieldq.store(0, Ordering::Relaxed);
    proc::gfpurge(pp);
    // SAFETY: short exclusive borrow of a P we hold.
    unsafe { pp.local() }.stacks.drain();
    // SAFETY: short exclusive borrow of a P we hold.
    unsafe { pp.local() }.tasks.drain();
    // SAFETY: short exclusive borrow of a P we hold; the kits are dropped
    // after it.
    let kits = unsafe { pp.local() }.chan_timers.drain();
    drop(kits);
    pp.set_status(PStatus::Dead);
}

/// Resizes to `n` Ps and restarts the world (Go's startTheWorldWithSema).
fn start_the_world(n: u32) {
    let s = sched();
    let mut l = s.lock();
    let (runnable, idle) = procresize(&mut l, n);
    // Clears `stw_waiting` (pairs with the same loads as `stop_the_world`'s
    // store), and only then, in the same critical section, publishes the
    // idle Ps: an M that takes one sees the stop over (`stw.rs`, invariant
    // 4). An M stopped by this stop-the-world does not wait for it: it
    // parks in `stopm` and the `startm`s below (or later ones) hand it a P.
    l.stw.end(&s.stw_waiting);
    for pp in idle {
        idle::pidleput(&mut l, pp);
    }
    drop(l);
    for pp in runnable {
        idle::startm(Some(pp), false);
    }
    idle::wakep();
    // sysmon sleeps through a stop-the-world (its deep sleep, up to a
    // minute when no timer is pending), and the Ps that run on after it
    // (the caller's own, or one whose goroutine computes) start no M, so
    // nothing else would wake it: a goroutine looping from here on would
    // go unpreempted until that sleep ends. Go's startTheWorld wakes it
    // the same way.
    super::sysmon::wake_if_waiting();
}
