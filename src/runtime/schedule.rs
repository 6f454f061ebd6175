//! One round of scheduling: find a runnable G (Go's findRunnable order),
//! run it until it switches out, carry out what it asked for. This loop runs
//! on each M's own thread stack (Go's g0) and never returns.
//!
//! find_runnable, in Go's order. The numbers are the ones the code's
//! comments carry (and other modules cite, e.g. netpoll's "step 10"):
//! 1. stop-the-world pending? stop this P (`stw_stopm`).
//! 2. run this P's due timers (they may ready goroutines into runnext).
//! 3. every 61st schedtick, one G from the global queue (fairness: a P
//!    whose local queue never drains still serves the global queue); put
//!    off by one pass while a G waits in runnext.
//! 4. the local queue: runnext (inherits the time slice), then the ring.
//! 5. the global queue, a batch.
//! 6. a non-blocking netpoll, if anyone waits there and no M is blocked in
//!    the poller.
//! 7. steal (`steal.rs`), only if this M already spins or at most half of
//!    the busy Ps have a spinning M; otherwise still run the other Ps'
//!    timers that are already due (`steal::run_due_timers`; goes beyond Go).
//! 8. nothing: under the sched lock re-check stop-the-world and the global
//!    queue, then put the P on the idle list.
//! 9. if this M was spinning, the delicate dance (`spinning.rs`): stop
//!    spinning, StoreLoad, re-check all queues, and take a P back if work
//!    appeared.
//! 10. block in the netpoller until the next timer, if someone waits there
//!     or a timer is pending and no other M polls; else park the M (`stopm`).
//!
//! `schedtick` advances only when a G starts a new time slice: a G taken
//! from runnext inherits the slice of the G that readied it, so a pair that
//! ping-pongs through runnext cannot starve the ring.

use std::sync::atomic::Ordering;

use super::{globrunq, idle, localrunq, lockosthread, proc, sched, stats, steal, syscall, timers};
use crate::g::switch::{self, Action, Switch};
use crate::g::{Status, WaitReason, G};
use crate::m::{self, M};
use crate::netpoll;
use crate::p::{PHandle, PStatus};
use crate::sys::time::nanotime;
use crate::tracer;

/// The M loop. Entered by every M thread with a P; returns only when a
/// goroutine exited while locked to this thread (the thread then ends).
pub(crate) fn schedule(m: &'static M) {
    loop {
        let found = if let Some(g) = m.lockedg() {
            // Our locked G stopped running: wait until it is runnable and
            // a locked-M switch hands us a P (lockosthread.rs).
            lockosthread::stoplockedm(m);
            Found::new(g)
        } else {
            let found = find_runnable(m);
            if m.is_spinning() {
                reset_spinning(m);
            }
            if let Some(target) = lockosthread::lockedm(found.g) {
                if !std::ptr::eq(target, m) {
                    // This M parks: no switch-out time to reuse.
                    m.take_last_out();
                    lockosthread::startlockedm(m, target);
                    continue;
                }
            }
            found
        };
        // The one call site of `execute`, inlined: the switch back from a
        // goroutine then lands in this loop's frame, with no `ret` out of a
        // frame entered before the switch (`g::switch`'s note, "Returns
        // after a switch").
        if !execute(m, found) {
            return;
        }
    }
}

/// A G's first run: only now does it get a stack and a coroutine. Returns
/// false if no stack could be had: the G then ends with that error (its
/// joiner sees it) and the M schedules again. Out of line: it runs before
/// the switch, so it needs no place in `schedule`'s frame.
#[inline(never)]
fn first_run(
    m: &'static M,
    pp: &crate::p::PHandle,
    g: &'static G,
    co: &mut Option<switch::GCoroutine>,
    inherit: bool,
) -> bool {
    if !inherit {
        prefetch_next_record(pp);
    }
    // SAFETY: the G is ours and not running: a short borrow.
    let size = unsafe { g.inner() }.stack_size as usize;
    // SAFETY: short exclusive borrow of our own P's local state.
    match unsafe { pp.local() }.stacks.get(size) {
        Ok(stack) => {
            g.set_stack_bounds(stack.guard_range(), stack.usable_size());
            *co = Some(switch::new(stack, g, proc::g_body));
            true
        }
        Err(e) => {
            m.set_curg(None);
            // SAFETY: the G is ours and not running: a short borrow.
            if let Some(task) = unsafe { g.inner() }.task.take() {
                if let Some(w) = task.fail(g.id(), e) {
                    w.wake();
                }
            }
            proc::gdestroy(m, pp, g, None);
            false
        }
    }
}

/// Gs whose stack headers a cold resume starts loading at once
/// (`prefetch_cold_resume`).
const COLD_LOOKAHEAD: usize = 4;

/// Starts loading the stack lines that resuming `g`, parked long enough
/// for its stack to be cold, reads first (`G::prefetch_resume`), and, when
/// more are queued (a close that woke thousands), the stack headers of the
/// next `COLD_LOOKAHEAD` Gs in the ring (`G::prefetch_header`), so that
/// their misses overlap this G's run and each other.
///
/// The headers go in batches, one every `COLD_LOOKAHEAD` positions of the
/// ring's head: each stack is its own reservation, so each header is a TLB
/// miss whose page walk misses the cache too, and a prefetch waits for its
/// walk before it retires. Walks issued back to back proceed side by side
/// (a core has several walkers); one per resume would each stall the
/// current G. `parked`'s wake-up of 100K goroutines measures it
/// (docs/bench/history.md, seventeenth stop).
/// Out of line: `execute`'s hot path only tests whether to call it.
#[cold]
#[inline(never)]
fn prefetch_cold_resume(pp: &crate::p::PHandle, g: &'static G) {
    g.prefetch_resume();
    let (pos, next) = pp.runq_peek_n::<COLD_LOOKAHEAD>();
    if pos % COLD_LOOKAHEAD as u32 == 0 {
        for g in next.into_iter().flatten() {
            g.prefetch_header();
        }
    }
}

/// A G's first run, not through runnext: it was spawned a while ago and
/// queued behind others (a spawn burst, a wide spawn tree), and the G
/// queued next is likely the same. Starts loading that one's record now
/// (`G::prefetch_record`), so that its miss overlaps this G's run. Out of
/// line, as `prefetch_cold_resume`.
#[cold]
#[inline(never)]
fn prefetch_next_record(pp: &crate::p::PHandle) {
    if let Some(next) = pp.runq_peek() {
        next.prefetch_record();
    }
}

/// A spinning M found work: stop spinning, and since there may be more work,
/// make sure someone else is searching (Go's resetspinning).
fn reset_spinning(m: &'static M) {
    m.set_spinning(false);
    sched().spin.stop_spinning_found_work();
    idle::wakep();
}

/// Becomes a spinning M (holding a P).
pub(crate) fn become_spinning(m: &'static M) {
    m.set_spinning(true);
    sched().spin.start_spinning();
    count_spin(m);
}

/// Counts an M that starts spinning, on the P it holds.
#[inline]
pub(crate) fn count_spin(m: &'static M) {
    // SAFETY: own thread.
    if let Some(pp) = unsafe { m.p() } {
        stats::bump(&pp.counters.spins, 1);
    }
}

/// What `find_runnable` found.
struct Found {
    g: &'static G,
    /// The G inherits the time slice (a runnext hand-off).
    inherit: bool,
    /// Found on this P's run queue with no wait since the last slice ended
    /// on this M: its GoStart may share that end's timestamp
    /// (`tracer::go_start_quick`).
    quick: bool,
}

impl Found {
    /// A G that starts a new slice, found any other way.
    fn new(g: &'static G) -> Found {
        Found {
            g,
            inherit: false,
            quick: false,
        }
    }
}

/// Finds a runnable G, blocking (parking the M) until there is one. Returns
/// with the M holding a P.
fn find_runnable(m: &'static M) -> Found {
    let s = sched();
    // Nothing has waited yet: a stop-the-world's park, a spin and the M's
    // park each lead to another pass.
    let mut first_pass = true;
    loop {
        let first = std::mem::replace(&mut first_pass, false);
        // 1. A stop-the-world is pending: stop this P. Acquire; pairs with
        // the stores in `stw.rs`. A hint: `stw_stopm` re-checks under the
        // sched lock (a stale true keeps the P), and a miss is caught at
        // step 8's re-check under that lock.
        if s.stw_waiting.load(Ordering::Acquire) && stw_stopm(m) {
            continue;
        }
        // SAFETY: own thread; we hold a P between loop iterations.
        let pp = unsafe { m.p() }.expect("find_runnable without a P");

        // 2. This P's due timers (they ready goroutines into runnext).
        let (now, _) = timers::check_timers(pp, 0);

        // 3. Fairness: every 61st tick, look at the global queue first;
        // also once a goroutine woken from outside every P has waited
        // there 2 ms (globrunq's note, "Woken goroutines first").
        // The turn is put off once if a G waits in runnext: that G was
        // just readied (a timer fired for it), and while the global G ran
        // the next wake-up would kick it to the ring's tail, behind
        // hundreds (a 1 ms ticker waited 125 ms beside 1,000 CPU-bound
        // goroutines at GOMAXPROCS=1 in one run of three). It runs first,
        // and the global queue's turn comes at the next pass. Go takes the
        // turn at once. The overdue turn is skipped right after a turn of
        // the global queue here, so that this P's own queue gets every
        // other pick however long wake-ups keep the woken part overdue
        // (globrunq's note).
        let (owed, after_turn) = {
            // SAFETY: short exclusive borrow of our own P's local state.
            let local = unsafe { pp.local() };
            (local.fair_owed, local.global_turn)
        };
        if (owed || pp.schedtick() % 61 == 0 || (!after_turn && globrunq::woken_overdue()))
            && localrunq::has_work(pp)
        {
            if !owed && pp.runq_has_next() {
                // SAFETY: as above (a fresh borrow).
                unsafe { pp.local() }.fair_owed = true;
            } else {
                // SAFETY: as above.
                unsafe { pp.local() }.fair_owed = false;
                let mut l = s.lock();
                if let Some(g) = globrunq::get(&mut l, pp, 1) {
                    // SAFETY: as above.
                    unsafe { pp.local() }.global_turn = true;
                    return Found::new(g);
                }
            }
        }

        // 4. Local run queue. On the first pass the G is found without a
        // wait since the last slice ended here, and it was queued by this
        // P's holders before that end (only a P's holder puts to its ring
        // and runnext): its GoStart may share the end's timestamp.
        if let Some((g, inherit)) = pp.runq_get() {
            if inherit {
                stats::bump(&pp.counters.runnext_hits, 1);
            }
            // SAFETY: as in step 3.
            unsafe { pp.local() }.global_turn = false;
            return Found {
                g,
                inherit,
                quick: first,
            };
        }

        // 5. Global run queue.
        if localrunq::has_work(pp) {
            let mut l = s.lock();
            if let Some(g) = globrunq::get(&mut l, pp, 0) {
                return Found::new(g);
            }
        }

        // 6. Non-blocking netpoll, if anyone waits there and nobody is
        // blocked in it. `lastpoll` pairs with step 10's swap and store by
        // another M; a hint (netpoll takes its poll lock with try_lock, so a
        // stale value costs one skipped or one fruitless poll). First, one
        // pass over the other Ps' rings: what waits there was readied before
        // anything the poll returns (`steal::steal_queued`; Go polls first).
        if netpoll::any_waiters() && s.lastpoll.load(Ordering::SeqCst) != 0 {
            if let Some(g) = steal::steal_queued(m, pp) {
                return Found::new(g);
            }
            let mut list = netpoll::netpoll(0);
            if !list.is_empty() {
                let g = list.remove(0);
                netpoll_readied(Some(m), g, pp.id);
                inject(list);
                return Found::new(g);
            }
        }

        // 7. Steal (and, on the last round, run other Ps' due timers). An
        // M that may not spin still runs other Ps' timers that are due.
        if m.is_spinning() || s.spin.may_spin(s.gomaxprocs()) {
            if !m.is_spinning() {
                become_spinning(m);
            }
            if let Some(g) = steal::steal_work(m, pp, now) {
                return Found::new(g);
            }
            // Timers run on the last round may have readied Gs here.
            if let Some((g, inherit)) = pp.runq_get() {
                return Found {
                    g,
                    inherit,
                    quick: false,
                };
            }
        } else if let Some(g) = steal::run_due_timers(pp, now) {
            return Found::new(g);
        }

        // 8. Nothing to do: give up the P.
        let mut l = s.lock();
        // Under the sched lock, as `stop_the_world`'s store: the lock orders
        // them, so a P never reaches the idle list uncounted (procresize.rs).
        if s.stw_waiting.load(Ordering::Acquire) {
            continue;
        }
        if let Some(g) = globrunq::get(&mut l, pp, 0) {
            return Found::new(g);
        }
        // SAFETY: own thread, holding a P.
        let pp = unsafe { m.releasep() };
        idle::pidleput(&mut l, pp);
        drop(l);

        // 9. The delicate dance: stop spinning with a StoreLoad barrier,
        // then look once more at every queue before parking.
        let was_spinning = m.is_spinning();
        if was_spinning {
            m.set_spinning(false);
            s.spin.stop_spinning_for_recheck();
            if let Some(pp) = steal::check_runqs_no_p() {
                // SAFETY: own thread, holding no P.
                unsafe { m.acquirep(pp) };
                become_spinning(m);
                continue;
            }
        }

        // 10. Block in the netpoller until the next timer, if someone waits
        // there or a timer is pending and no other M polls.
        // `lastpoll.swap(0)` elects the one blocking poller: it is one RMW
        // order with the other Ms' swaps here and sysmon's CAS (sysmon.rs),
        // so exactly one sees it non-zero. It and the `poll_until` store pair
        // with the loads in `timers::wake_netpoller` (and the `else` branch
        // below): who sees `lastpoll == 0` and an absent or later
        // `poll_until` breaks the wait. After the poll, `poll_until` is
        // cleared before `lastpoll` is set, so such a reader at worst breaks
        // a poll that has ended (the next poll then returns early, at once).
        let poll_until = timers::next_when();
        if (netpoll::any_waiters() || poll_until != 0) && s.lastpoll.swap(0, Ordering::SeqCst) != 0
        {
            s.poll_until.store(poll_until, Ordering::SeqCst);
            let mut list = netpoll::netpoll_until(poll_until);
            s.poll_until.store(0, Ordering::SeqCst);
            s.lastpoll.store(nanotime(), Ordering::SeqCst);
            let pp = {
                let mut l = s.lock();
                idle::pidleget(&mut l)
            };
            match pp {
                Some(pp) => {
                    let p = pp.id;
                    // SAFETY: own thread, holding no P.
                    unsafe { m.acquirep(pp) };
                    if !list.is_empty() {
                        let g = list.remove(0);
                        netpoll_readied(Some(m), g, p);
                        inject(list);
                        if was_spinning {
                            become_spinning(m);
                        }
                        return Found::new(g);
                    }
                    if was_spinning {
                        become_spinning(m);
                    }
                    continue;
                }
                None => {
                    if !list.is_empty() {
                        inject(list);
                    }
                }
            }
        } else if poll_until != 0 {
            // Another M is blocked in the poller: make sure it wakes for
            // our earliest timer. Pairs with that M's `poll_until` store
            // above.
            let until = s.poll_until.load(Ordering::SeqCst);
            if until == 0 || until > poll_until {
                netpoll::netpoll_break();
            }
        }
        idle::stopm(m);
    }
}

/// A goroutine the netpoller readied, as it is queued on `p`
/// (`tracer::GLOBAL`: the global queue): its GoUnblock, then its ready
/// sample (always taken: it was readied without a P's countdown). In that
/// order: until the sample, the word it takes holds the GoBlock's time
/// (`G::trace_block_ts`), by which the GoUnblock may share its batch's
/// previous time instead of reading the clock (every one did when the
/// sample came first: a third of an echo server's clock reads).
#[inline]
fn netpoll_readied(here: Option<&M>, g: &'static G, p: u32) {
    if tracer::on() {
        tracer::go_unblock(here, g, 0, p);
    }
    stats::metrics_runnable_unowned(g);
}

/// Makes a list of Gs (already `Runnable`, from the netpoller) runnable
/// (Go's injectglist): as many as there are idle Ps go to the global queue,
/// each with an M started for it; the rest to this M's P, if it has one,
/// else to the global queue too.
pub(crate) fn inject(mut list: Vec<&'static G>) {
    if list.is_empty() {
        return;
    }
    let s = sched();
    let here = m::current();
    let pp = here.and_then(|m| {
        // SAFETY: m is the calling thread's own M.
        unsafe { m.p() }
    });
    let npidle = s.spin.npidle() as usize;
    let n = match pp {
        Some(_) => npidle.min(list.len()),
        None => list.len(),
    };
    let rest = list.split_off(n);
    for g in &list {
        netpoll_readied(here, g, tracer::GLOBAL);
    }
    let p = pp.map_or(tracer::GLOBAL, |pp| pp.id);
    for g in &rest {
        netpoll_readied(here, g, p);
    }
    if !list.is_empty() {
        let mut l = s.lock();
        globrunq::put_woken_list_locked(&mut l, &mut list);
        drop(l);
        for _ in 0..n {
            if s.spin.npidle() == 0 {
                break;
            }
            idle::startm(None, false);
        }
    }
    if let Some(pp) = pp {
        for g in rest {
            localrunq::runqput(pp, g, false);
        }
        idle::wakep();
    }
}

/// Runs the G `find_runnable` found on this M until it switches out, then
/// carries out its action. Returns false if the M must exit (its locked
/// goroutine exited).
/// Always inlined into `schedule`'s loop, its one caller (`g::switch`'s
/// note, "Returns after a switch").
#[inline(always)]
fn execute(m: &'static M, found: Found) -> bool {
    let Found {
        g,
        mut inherit,
        mut quick,
    } = found;
    loop {
        // SAFETY: own thread, holding a P (find_runnable returned with one).
        let pp = unsafe { m.p() }.expect("execute without a P");
        if !inherit {
            pp.bump_schedtick();
        }
        // sysmon's request was for the G that ran before, even when this
        // one inherits its slice (Go clears the per-G `gp.preempt` in every
        // execute): a G woken into runnext must not step aside for a
        // request made for its waker, or for the G of a revoked slice. If
        // that slice is used up, sysmon sees the same schedtick and asks
        // again. A stop-the-world's request stands (`stw::clear_stale_request`
        // has the orderings). A stale `stw_waiting` only delays a stop that
        // has not asked this P yet: the flag is re-checked at every
        // scheduling point, and `stop_the_world` asks running Ps again
        // every 100 us.
        if super::stw::clear_stale_request(&pp.preempt, &sched().stw_waiting) {
            pp.preempt_for_timer.store(false, Ordering::Relaxed);
        }
        debug_assert_eq!(g.status(), Status::Runnable);
        g.set_status(Status::Running);
        m.set_curg(Some(g));
        if tracer::on() {
            if quick {
                tracer::go_start_quick(m, g.id(), pp.id);
            } else {
                tracer::go_start(m, g.id(), pp.id);
            }
        }

        // SAFETY: the G is ours (we popped it from a run queue) and we are on
        // g0; the G's own code never touches its coroutine.
        let co = unsafe { g.coroutine() };
        if co.is_none() {
            if !first_run(m, pp, g, co, inherit) {
                return true;
            }
        } else if !inherit
            && g.wait_reason() != WaitReason::None
            && g.waitsince() != stats::coarse_ms()
        {
            // A G that parked before the coarse clock's last tick (about a
            // millisecond or more ago; not one that yielded or was
            // preempted, nor one handed over through runnext: those ran
            // moments ago) may find its stack cold: thousands woken at once
            // by a close or a broadcast, or an idle connection's goroutine.
            // Start loading the lines the resume reads; the hot paths skip
            // it.
            prefetch_cold_resume(pp, g);
        }
        // Where `local!` finds this goroutine's values (`M::locals`).
        m.set_locals(g.locals_slot().map_or(std::ptr::null_mut(), |p| p.as_ptr()));
        // CPU time and the scheduling-latency sample (`runtime::metrics`).
        let t0 = stats::metrics_switch_in(m, pp, g, quick);
        let switch = switch::resume(co);
        stats::metrics_switch_out(m, g, t0);
        m.set_locals(std::ptr::null_mut());
        m.set_curg(None);
        if let Switch::Action(Action::ExitSyscall) = switch {
            m.take_last_out();
            // Back from a system call with no P to run on.
            syscall::exitsyscall0(m, g);
            return true;
        }

        // The G may have changed this M's P (set_max_procs); re-read it.
        // SAFETY: own thread, holding a P.
        let pp = unsafe { m.p() }.expect("goroutine returned without a P");
        match switch {
            Switch::Exited(stack) => return exited(m, pp, g, stack),
            Switch::Action(Action::Yield) => {
                yielded(m, pp, g);
                return true;
            }
            Switch::Action(Action::Preempt) => {
                preempted(m, pp, g);
                return true;
            }
            Switch::Action(Action::ExitSyscall) => unreachable!("handled above"),
            Switch::Action(Action::YieldLocal) => {
                g.set_status(Status::Runnable);
                stats::metrics_runnable(pp, g);
                if tracer::on() {
                    tracer::go_stop(m, g.id(), pp.id, tracer::STOP_YIELD_LOCAL);
                }
                localrunq::runqput(pp, g, false);
                return true;
            }
            Switch::Action(Action::Park(unlock)) => {
                // A synctest bubble's member parks under its bubble's lock.
                let parking = super::bubble::parking(g);
                g.set_status(Status::Waiting);
                // Before `unlock`: once it ran, a waker may emit GoUnblock.
                if tracer::on() {
                    tracer::go_block(m, g, pp.id, g.wait_reason() as u64);
                }
                // SAFETY: `unlock` points to a closure on the G's stack, which
                // is intact: the G cannot run until `unlock` made it findable.
                if unsafe { (*unlock)(g) } {
                    // A synctest bubble's member: maybe its clock moves.
                    super::bubble::parked(parking);
                    return true;
                }
                drop(parking);
                // Park cancelled: run it again at once, same time slice
                // (its GoStart right after its GoBlock).
                g.set_status(Status::Runnable);
                inherit = true;
                quick = true;
            }
        }
    }
}

/// `execute`'s arm for a goroutine that returned or panicked: recycle it;
/// false if its thread ends with it (it exited locked to it). Inlined:
/// `execute` runs once per switch.
#[inline(always)]
fn exited(m: &'static M, pp: &PHandle, g: &'static G, stack: crate::g::stack::Stack) -> bool {
    // A recycled G's CPU time starts from zero. Here, not at spawn: the
    // line was just written by `stats::metrics_switch_out`, and a spawn touches
    // no other line of the G's third.
    g.reset_cpu_ticks();
    let locked = lockosthread::lockedm(g).is_some();
    let ends_thread = locked && lockosthread::exit_ends_thread(g);
    if locked && !ends_thread {
        // Wired only while it unwound: the thread stays.
        m.set_lockedg(None);
    }
    proc::gdestroy(m, pp, g, Some(stack));
    if ends_thread {
        lockosthread::mexit(m);
        return false;
    }
    true
}

/// `execute`'s arm for a yield, in Go's Gosched order: the runnable
/// goroutines go first. With the global queue empty the local tail gives
/// it without a lock; otherwise `put_yield` lets a share of the global
/// queue go first and keeps the G on this P while the ring has room
/// (localrunq's note).
#[inline(always)]
fn yielded(m: &M, pp: &PHandle, g: &'static G) {
    g.set_status(Status::Runnable);
    stats::metrics_runnable(pp, g);
    if tracer::on() {
        tracer::go_stop(m, g.id(), pp.id, tracer::STOP_YIELD);
    }
    #[cfg(goroutine_randomize)]
    let to_global = super::randomize::coin();
    #[cfg(not(goroutine_randomize))]
    let to_global = false;
    if to_global || sched().runqsize.load(Ordering::Relaxed) != 0 {
        localrunq::put_yield(pp, g, to_global);
    } else {
        localrunq::runqput(pp, g, false);
    }
}

/// `execute`'s arm for a preempted goroutine (Go's gopreempt_m): it goes
/// to the global queue. One preempted for a due timer of this P goes to
/// this P's queue tail instead: it only steps aside for the timer's
/// goroutine (readied into runnext by the timers that `find_runnable` runs
/// first). From the global queue the fairness check (every 61st tick)
/// could pick it again ahead of that goroutine, which would then wait a
/// whole slice (the sleeper's p99 in `hog_fairness` showed it).
#[inline(always)]
fn preempted(m: &M, pp: &PHandle, g: &'static G) {
    g.set_status(Status::Runnable);
    stats::metrics_runnable(pp, g);
    stats::bump(&pp.counters.preempt_yields, 1);
    if tracer::on() {
        tracer::go_stop(m, g.id(), pp.id, tracer::STOP_PREEMPT);
    }
    if pp.preempt_for_timer.swap(false, Ordering::Relaxed) {
        localrunq::runqput(pp, g, false);
    } else {
        globrunq::put(g);
    }
}

/// Stops this M's P for a stop-the-world and parks the M until a restart
/// hands it a P (Go's `gcstopm`). The caller saw `stw_waiting` as a hint;
/// under the sched lock the stop may turn out to be over (a stale read):
/// then the M keeps its P and returns false.
pub(crate) fn stw_stopm(m: &'static M) -> bool {
    let s = sched();
    let mut l = s.lock();
    if !l.stw.is_active() {
        return false;
    }
    if m.is_spinning() {
        m.set_spinning(false);
        s.spin.stop_spinning_found_work();
    }
    // SAFETY: own thread, holding a P.
    let pp = unsafe { m.releasep() };
    pp.set_status(PStatus::Stopped);
    localrunq::flush_yields_locked(&mut l, &pp);
    match l.stw.stop(pp) {
        super::stw::Offer::Counted { last } => {
            if last {
                s.stopnote.wakeup();
            }
        }
        super::stw::Offer::NotStopping(_) => unreachable!("checked under the lock"),
    }
    drop(l);
    idle::stopm(m);
    true
}
