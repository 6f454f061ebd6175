//! One round of scheduling: find a runnable G (Go's findRunnable order),
//! run it until it switches out, carry out what it asked for. This loop runs
//! on each M's own thread stack (Go's g0) and never returns.
//!
//! find_runnable, in Go's order:
//! 1. stop-the-world pending? stop this P (`gcstopm`).
//! 2. every 61st schedtick, one G from the global queue (fairness: a P
//!    whose local queue never drains still serves the global queue).
//! 3. the local queue: runnext (inherits the time slice), then the ring.
//! 4. the global queue, a batch.
//! 5. steal (`steal.rs`), only if this M already spins or at most half of
//!    the busy Ps have a spinning M.
//! 6. nothing: under the sched lock re-check the global queue, then put the
//!    P on the idle list; if this M was spinning, the delicate dance
//!    (`spinning.rs`): stop spinning, StoreLoad, re-check all queues, and
//!    take a P back if work appeared. Then park the M (`stopm`).
//!
//! `schedtick` advances only when a G starts a new time slice: a G taken
//! from runnext inherits the slice of the G that readied it, so a pair that
//! ping-pongs through runnext cannot starve the ring.

use super::{globrunq, idle, proc, sched, steal};
use crate::g::context::{self, Action, Switch};
use crate::g::{Status, G};
use crate::m::M;
use crate::p::PStatus;
use crate::spawn::JoinError;

/// The M loop. Entered by every M thread with a P; never returns.
pub(crate) fn schedule(m: &'static M) -> ! {
    loop {
        let (g, inherit) = find_runnable(m);
        if m.is_spinning() {
            reset_spinning(m);
        }
        execute(m, g, inherit);
    }
}

/// A spinning M found work: stop spinning, and since there may be more work,
/// make sure someone else is searching (Go's resetspinning).
fn reset_spinning(m: &'static M) {
    m.set_spinning(false);
    sched().spin.stop_spinning_found_work();
    idle::wakep();
}

/// Becomes a spinning M.
pub(crate) fn become_spinning(m: &'static M) {
    m.set_spinning(true);
    sched().spin.start_spinning();
}

/// Finds a runnable G, blocking (parking the M) until there is one. Returns
/// with the M holding a P, and whether the G inherits the time slice.
fn find_runnable(m: &'static M) -> (&'static G, bool) {
    let s = sched();
    loop {
        if s.gcwaiting.load(std::sync::atomic::Ordering::Acquire) {
            gcstopm(m);
            continue;
        }
        // SAFETY: own thread; we hold a P between loop iterations.
        let pp = unsafe { m.p() }.expect("find_runnable without a P");

        // 2. Fairness: every 61st tick, look at the global queue first.
        if pp.schedtick() % 61 == 0 && globrunq::has_work(pp) {
            let mut l = s.lock();
            if let Some(g) = globrunq::get(&mut l, pp, 1) {
                return (g, false);
            }
        }

        // 3. Local run queue.
        // SAFETY: we own pp.
        if let Some((g, inherit)) = unsafe { pp.runq.get() } {
            // SAFETY: run queues only hold leaked, never-freed Gs.
            return (unsafe { &*g.as_ptr() }, inherit);
        }

        // 4. Global run queue.
        if globrunq::has_work(pp) {
            let mut l = s.lock();
            if let Some(g) = globrunq::get(&mut l, pp, 0) {
                return (g, false);
            }
        }

        // 5. Steal.
        if m.is_spinning() || s.spin.may_spin(s.gomaxprocs()) {
            if !m.is_spinning() {
                become_spinning(m);
            }
            if let Some(g) = steal::steal_work(m, pp) {
                return (g, false);
            }
        }

        // 6. Nothing to do: give up the P.
        let mut l = s.lock();
        if s.gcwaiting.load(std::sync::atomic::Ordering::Acquire) {
            continue;
        }
        if let Some(g) = globrunq::get(&mut l, pp, 0) {
            return (g, false);
        }
        // SAFETY: own thread, holding a P.
        let pp = unsafe { m.releasep() };
        idle::pidleput(&mut l, pp);
        drop(l);

        if m.is_spinning() {
            // The delicate dance: stop spinning with a StoreLoad barrier,
            // then look once more at every queue before parking.
            m.set_spinning(false);
            s.spin.stop_spinning_for_recheck();
            if let Some(pp) = steal::check_runqs_no_p() {
                // SAFETY: own thread, holding no P.
                unsafe { m.acquirep(pp) };
                become_spinning(m);
                continue;
            }
        }
        idle::stopm(m);
    }
}

/// Runs `g` on this M until it switches out, then carries out its action.
fn execute(m: &'static M, g: &'static G, inherit: bool) {
    let mut inherit = inherit;
    loop {
        // SAFETY: own thread, holding a P (find_runnable returned with one).
        let pp = unsafe { m.p() }.expect("execute without a P");
        if !inherit {
            pp.bump_schedtick();
        }
        debug_assert_eq!(g.status(), Status::Runnable);
        g.set_status(Status::Running);
        m.set_curg(Some(g));

        // SAFETY: the G is ours (we popped it from a run queue) and we are on
        // g0; the G's own code never touches its coroutine.
        let co = unsafe { g.coroutine() };
        if co.is_none() {
            // First run: only now does the G get a stack.
            // SAFETY: the G is ours and not running: a short borrow.
            let size = unsafe { g.inner() }.stack_size;
            // SAFETY: short exclusive borrow of our own P's local state.
            match unsafe { pp.local() }.stacks.get(size) {
                Ok(stack) => {
                    g.set_stack_bounds(stack.guard_range(), stack.usable_size());
                    *co = Some(context::new(stack, g, proc::g_body));
                }
                Err(e) => {
                    m.set_curg(None);
                    // SAFETY: the G is ours and not running: a short borrow.
                    if let Some(task) = unsafe { g.inner() }.task.take() {
                        task.fail(JoinError::start_failed(g.id(), e));
                    }
                    proc::gdestroy(pp, g, None);
                    return;
                }
            }
        }
        let switch = context::resume(co);
        m.set_curg(None);

        // The G may have changed this M's P (set_max_procs); re-read it.
        // SAFETY: own thread, holding a P.
        let pp = unsafe { m.p() }.expect("goroutine returned without a P");
        match switch {
            Switch::Exited(stack) => {
                proc::gdestroy(pp, g, Some(stack));
                return;
            }
            Switch::Action(Action::Yield) => {
                // Go's Gosched puts the G at the global queue's tail: every
                // runnable G, local or global, goes before it. When the
                // global queue is empty the local tail gives the same order
                // without taking the lock; when it is not, the local tail
                // would let a lone yielder shut the global queue out (it
                // would be served only every 61st tick), so the G goes to the
                // global tail through the P's yield buffer (globrunq's note).
                g.set_status(Status::Runnable);
                if sched().runqsize.load(std::sync::atomic::Ordering::Relaxed) != 0 {
                    globrunq::put_yield(pp, g);
                } else {
                    globrunq::runqput(pp, g, false);
                }
                return;
            }
            Switch::Action(Action::YieldLocal) => {
                g.set_status(Status::Runnable);
                globrunq::runqput(pp, g, false);
                return;
            }
            Switch::Action(Action::Park(unlock)) => {
                g.set_status(Status::Waiting);
                // SAFETY: `unlock` points to a closure on the G's stack, which
                // is intact: the G cannot run until `unlock` made it findable.
                if unsafe { (*unlock)(g) } {
                    return;
                }
                // Park cancelled: run it again at once, same time slice.
                g.set_status(Status::Runnable);
                inherit = true;
            }
        }
    }
}

/// Stops this M's P for a stop-the-world and parks the M (Go's gcstopm).
pub(crate) fn gcstopm(m: &'static M) {
    let s = sched();
    if m.is_spinning() {
        m.set_spinning(false);
        s.spin.stop_spinning_found_work();
    }
    // SAFETY: own thread, holding a P.
    let pp = unsafe { m.releasep() };
    pp.set_status(PStatus::GcStop);
    let mut l = s.lock();
    globrunq::flush_yields_locked(&mut l, &pp);
    l.stopped.push(pp);
    l.stopwait -= 1;
    if l.stopwait == 0 {
        s.stopnote.wakeup();
    }
    drop(l);
    idle::stopm(m);
}
