//! Creating goroutines (Go's newproc), their exit, and the G free lists.
//!
//! A spawned goroutine costs only its G record (recycled) and its task cell
//! (one allocation): its stack is taken only when it first runs (see
//! `schedule::execute`), an improvement over Go that Vyukov's design doc
//! lists and Go never made.
//!
//! Free lists (Go's gfput/gfget): each P keeps up to 64 dead Gs; past that,
//! half move to the global list under its lock; an empty P list refills up to
//! 32 from the global one. Both are LIFO stacks of pointers, so the G reused
//! next is the one freed last, still in cache (a FIFO hands out the coldest),
//! and a pop does not chase a link through a cold G.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{globrunq, idle, localrunq, sched, start, stats};
use crate::g::stack::Stack;
use crate::g::task::TaskRef;
use crate::g::{Status, G};
use crate::m;
use crate::p::PHandle;
use crate::tracer;

const P_GFREE_MAX: usize = 64;
const P_GFREE_KEEP: usize = 32;

/// The P a spawn from `here` uses (None: a plain thread, or an M without
/// one), looked up once for [`newg`] and [`newproc`]. Inside the entry
/// gate, where the P cannot be revoked.
#[inline(always)]
pub(crate) fn spawn_p(here: m::Here) -> Option<&'static PHandle> {
    // SAFETY: the M is the calling thread's own (`Here`).
    here.m().and_then(|m| unsafe { m.p() })
}

/// Spawns a goroutine and makes it runnable; returns its id.
///
/// `here` is the M the spawner's entry gate looked up, `pp` its P
/// ([`spawn_p`]), `g` a free G from [`newg`] with the same `pp`.
#[inline]
pub(crate) fn newproc(
    pp: Option<&'static PHandle>,
    g: &'static G,
    task: TaskRef,
    stack_size: usize,
    name: Option<Arc<str>>,
    here: m::Here,
) -> u64 {
    // Spawned from a synctest bubble: it joins it before it can run.
    super::bubble::inherit(here, g);
    if let Some(pp) = pp {
        let id = pp.next_goid();
        // Traced, a spawn right after another one by the same goroutine
        // is no call (`tracer::go_create_deferred`).
        if name.is_some() || (tracer::on() && !tracer::go_create_deferred(here.m(), id)) {
            named_or_traced(here.m(), id, here.g().map_or(0, |g| g.id()), pp.id, &name);
        }
        init(g, id, task, stack_size, name);
        super::stats::metrics_runnable(pp, g);
        pp.add_goroutines(1);
        stats::bump(&pp.counters.spawns, 1);
        // New goroutines go to runnext: they run next on this P, and the
        // one they displace goes to the ring's tail.
        localrunq::runqput(pp, g, true);
        idle::wakep();
        return id;
    }
    let s = start();
    let id = crate::g::new_goids(1);
    if name.is_some() || tracer::on() {
        named_or_traced(here.m(), id, 0, tracer::GLOBAL, &name);
    }
    init(g, id, task, stack_size, name);
    super::stats::metrics_runnable_unowned(g);
    // Counts both the live goroutines (exits are counted on the P they end
    // on) and, for `stats().spawns`, the spawns from outside the runtime.
    s.ngoroutine_ext.fetch_add(1, Ordering::Relaxed);
    globrunq::put(g);
    idle::wakep();
    id
}

/// A free G for a spawn on `pp` ([`spawn_p`]; the first half of
/// [`newproc`], taken before the task cell so that a failure needs no cell
/// undone): the P's free list, else the global one, else a fresh record.
/// `None` out of memory (`g::arena`'s note); the spawner then reports it.
#[inline]
pub(crate) fn newg(pp: Option<&'static PHandle>) -> Option<&'static G> {
    match pp {
        Some(pp) => gfget(pp).or_else(G::alloc),
        None => {
            start();
            gfget_global().or_else(G::alloc)
        }
    }
}

/// Gives back a G from [`newg`] that was not used (the task cell could not
/// be allocated), with the same `pp`.
#[cold]
pub(crate) fn gfput_unused(g: &'static G, pp: Option<&'static PHandle>) {
    if let Some(pp) = pp {
        gfput(pp, g);
        return;
    }
    g.set_status(Status::Idle);
    let s = sched();
    let mut global = s.gfree.lock().unwrap_or_else(|e| e.into_inner());
    global.push(g);
    s.gfree_len.store(global.len(), Ordering::Relaxed);
}

/// The rare parts of spawning: a named goroutine's name is registered for
/// dumps, and the GoCreate (and GoName) trace events.
/// An unnamed goroutine (the traced case) is a tail call to the GoCreate
/// event, without the named case's frame.
#[cold]
#[inline(never)]
fn named_or_traced(
    m: Option<&'static m::M>,
    id: u64,
    parent: u64,
    p: u32,
    name: &Option<Arc<str>>,
) {
    match name {
        None => tracer::go_create(m, id, parent, p),
        Some(name) => named(m, id, parent, p, name),
    }
}

#[cold]
#[inline(never)]
fn named(m: Option<&'static m::M>, id: u64, parent: u64, p: u32, name: &Arc<str>) {
    crate::g::register_name(id, name.clone());
    if tracer::on() {
        tracer::go_create(m, id, parent, p);
        tracer::go_name(id, name);
    }
}

/// Inline: a few stores. The slots it fills are empty on a free G
/// (`gdestroy` and `G::alloc` leave them `None`), so there is nothing to
/// drop; without the drop glue of the old values (a `TaskRef`'s failure
/// path) the call, its frame and its landing pad cost about 20
/// instructions per spawn.
#[inline(always)]
fn init(g: &'static G, id: u64, task: TaskRef, stack_size: usize, name: Option<Arc<str>>) {
    g.set_id(id);
    // Both are zero when a goroutine returns (regions and guards are
    // scoped); resetting keeps a recycled G clean whatever happened.
    g.reset_preempt_counters();
    // SAFETY: the G came off a free list (or is new): we own it until it is
    // published on a run queue below.
    let inner = unsafe { g.inner() };
    debug_assert!(
        inner.task.is_none() && inner.name.is_none(),
        "a free G holds a task or a name"
    );
    // The old values are None (above): forgetting them drops nothing.
    std::mem::forget(inner.task.replace(task));
    // validate_stack_size caps stacks at 1 GiB.
    inner.stack_size = u32::try_from(stack_size).unwrap_or(u32::MAX);
    std::mem::forget(std::mem::replace(&mut inner.name, name));
    g.set_status(Status::Runnable);
}

impl Drop for TaskRef {
    /// A task dropped without running (never happens in the runtime, which
    /// always runs or fails it) still completes its joiner. Here, not in
    /// `g/task.rs`: waking is the runtime's.
    fn drop(&mut self) {
        // SAFETY: this is the Drop, called once.
        if let Some(w) = unsafe { self.drop_unrun() } {
            w.wake();
        }
    }
}

/// The body of every goroutine: runs on the G's own stack.
pub(crate) fn g_body(g: &'static G) {
    // SAFETY: `g` is running on this thread; we are its owner.
    let (task, name) = unsafe {
        let inner = g.inner();
        (inner.task.take(), inner.name.clone())
    };
    match task {
        Some(task) => {
            if let Some(w) = task.run(g.id(), name.as_deref()) {
                w.wake();
            }
        }
        None => super::throw("goroutine started without a task"),
    }
}

/// A goroutine finished (or could not start): recycle its stack and G.
pub(crate) fn gdestroy(m: &m::M, pp: &PHandle, g: &'static G, stack: Option<Stack>) {
    if tracer::on() {
        tracer::go_end(m, g.id(), pp.id);
    }
    g.set_status(Status::Dead);
    // A synctest bubble's member leaves it (maybe the bubble is done).
    super::bubble::exited(g);
    g.set_stack_bounds((0, 0), 0);
    {
        // SAFETY: the G is dead and we (its last M) own it.
        let inner = unsafe { g.inner() };
        inner.task = None;
        if inner.name.take().is_some() {
            crate::g::unregister_name(g.id());
        }
        inner.locked = 0;
        inner.lockedm = None;
    }
    if let Some(stack) = stack {
        // SAFETY: short exclusive borrow of our own P's local state.
        unsafe { pp.local() }.stacks.put(stack);
    }
    pp.add_goroutines(-1);
    gfput(pp, g);
}

/// Inline (always): `gdestroy`, on every goroutine exit, is its common
/// caller, and an out-of-line call there costs instructions on every
/// goroutine's exit.
#[inline(always)]
fn gfput(pp: &PHandle, g: &'static G) {
    g.set_status(Status::Idle);
    // SAFETY: short exclusive borrow of our own P's local state.
    let local = unsafe { pp.local() };
    local.gfree.push(g);
    if local.gfree.len() >= P_GFREE_MAX {
        let s = sched();
        let mut global = s.gfree.lock().unwrap_or_else(|e| e.into_inner());
        // The most recently freed (hottest) stay here.
        global.extend(local.gfree.drain(..local.gfree.len() - P_GFREE_KEEP));
        s.gfree_len.store(global.len(), Ordering::Relaxed);
    }
    pp.counters
        .gfree
        .store(local.gfree.len() as u64, Ordering::Relaxed);
}

/// Inline: the common case (a G on the P's own list) is a pop and a store,
/// less than the call it would cost; the refill from the global list is
/// out of line.
#[inline]
fn gfget(pp: &PHandle) -> Option<&'static G> {
    // SAFETY: short exclusive borrow of our own P's local state.
    let local = unsafe { pp.local() };
    let Some(g) = local.gfree.pop() else {
        return gfget_refill(pp);
    };
    pp.counters
        .gfree
        .store(local.gfree.len() as u64, Ordering::Relaxed);
    Some(g)
}

/// The P's free list is empty: refill it from the global list (up to
/// `P_GFREE_KEEP`) and take one.
#[cold]
#[inline(never)]
fn gfget_refill(pp: &PHandle) -> Option<&'static G> {
    let s = sched();
    if s.gfree_len.load(Ordering::Relaxed) == 0 {
        return None;
    }
    // SAFETY: short exclusive borrow of our own P's local state (the
    // caller's ended).
    let local = unsafe { pp.local() };
    let mut global = s.gfree.lock().unwrap_or_else(|e| e.into_inner());
    let at = global.len().saturating_sub(P_GFREE_KEEP);
    local.gfree.extend(global.drain(at..));
    s.gfree_len.store(global.len(), Ordering::Relaxed);
    drop(global);
    let g = local.gfree.pop();
    pp.counters
        .gfree
        .store(local.gfree.len() as u64, Ordering::Relaxed);
    g
}

fn gfget_global() -> Option<&'static G> {
    let s = sched();
    if s.gfree_len.load(Ordering::Relaxed) == 0 {
        return None;
    }
    let mut global = s.gfree.lock().unwrap_or_else(|e| e.into_inner());
    let g = global.pop();
    s.gfree_len.store(global.len(), Ordering::Relaxed);
    g
}

/// Moves all of a P's free Gs to the global list (the P is being destroyed).
pub(crate) fn gfpurge(pp: &PHandle) {
    // SAFETY: short exclusive borrow of our own P's local state.
    let local = unsafe { pp.local() };
    let s = sched();
    let mut global = s.gfree.lock().unwrap_or_else(|e| e.into_inner());
    global.append(&mut local.gfree);
    s.gfree_len.store(global.len(), Ordering::Relaxed);
    pp.counters.gfree.store(0, Ordering::Relaxed);
}
