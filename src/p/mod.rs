//! P: a logical processor, the right to run goroutines. Exactly GOMAXPROCS
//! of them exist; an M must hold one to run Go code (here: goroutines).
//!
//! # Ownership
//! Holding a [`PHandle`] *is* owning the P: the handle is neither `Clone` nor
//! `Copy`, and it moves between an M (`M::p`), the idle P list and the
//! stop-the-world list. The owner alone
//! - pushes to and pops from the front of the run queue (`runq.put/get`),
//! - touches `PLocal` (free Gs, the stack cache, the goroutine id cache),
//! - advances `schedtick` and the goroutine counter.
//!
//! Anyone may read `status`, `schedtick` and the counters, and steal from the
//! run queue (`runq.steal_into`). The statistics counters (`counters`,
//! `runtime::stats`) are written by the owner only (but `timers_fired`, which
//! any M running the timers adds to), on a cache line of their own.
//!
//! A P whose M entered a system call (`goroutine::syscall`) is owned by
//! nobody: its handle was dissolved by `PHandle::enter_syscall` and its
//! status is `Syscall`. Whoever first CASes the status away from `Syscall`
//! (the M returning, sysmon retaking it, a stop-the-world) gets a new handle
//! (`P::cas_from_syscall`). Its timers and run queue stay usable meanwhile:
//! the timer heap has its own lock and thieves may steal from the ring (only
//! its owner pushes, and it has none).
//!
//! A P whose M is blocked in the kernel *outside* the runtime keeps its
//! owner (status `Running`) until sysmon or a stop-the-world wins the M's
//! revocation handshake (`m::revoke`): the winner makes a new handle
//! ([`PHandle::claim_revoked`]) while the M's own handle is dormant, and the
//! M drops its handle unused when it next enters the runtime. That and
//! `cas_from_syscall` are the only ways a P changes owner without its
//! handle moving.
//!
//! P records are never freed: a P removed by
//! `set_max_procs` keeps its slot in `allp` with status `Dead`, so a thief or
//! a stats reader holding an index from an older GOMAXPROCS never dangles.

pub(crate) mod chantimers;
pub(crate) mod counters;
pub(crate) mod runq;
pub(crate) mod timerheap;

use std::cell::UnsafeCell;
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicPtr, AtomicU32, Ordering};

use self::chantimers::ChanTimerCache;
use self::counters::{PCounters, SchedLatency};
use self::runq::RunQueue;
use self::timerheap::Timers;
use crate::g::stack::StackCache;
use crate::g::taskcache::TaskCache;
use crate::g::G;

/// P status (Go's numbering).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PStatus {
    /// On the idle P list (or about to be handed to an M).
    Idle = 0,
    /// Held by an M running goroutines or the scheduler.
    Running = 1,
    /// Its M is in a system call; nobody owns it (module note).
    Syscall = 2,
    /// Stopped for a stop-the-world (Go's `_Pgcstop`).
    Stopped = 3,
    /// Removed by `set_max_procs`.
    Dead = 4,
}

/// Goroutine ids are handed to Ps in batches (Go's `_GoidCacheBatch`).
const GOID_BATCH: u64 = 16;

/// Owner-only state of a P.
pub(crate) struct PLocal {
    /// Dead Gs ready for reuse (Go's `gFree`), a LIFO stack.
    pub(crate) gfree: Vec<&'static G>,
    /// Stacks ready for reuse.
    pub(crate) stacks: StackCache,
    /// Memory blocks for task cells.
    pub(crate) tasks: TaskCache,
    /// Dropped channel timers, for reuse (`chantimers`).
    pub(crate) chan_timers: ChanTimerCache,
    /// Goroutines that yielded while the global queue was non-empty, on their
    /// way to the global queue's tail (see `globrunq`'s note).
    pub(crate) yieldq: Vec<&'static G>,
    /// The global queue's fairness turn was put off once because a G
    /// waited in runnext (`find_runnable`, step 3): taken at the next pass.
    pub(crate) fair_owed: bool,
    /// The last pick here was step 3's turn of the global queue, and none
    /// from the local queue has followed: no overdue turn now
    /// (`find_runnable`, step 3; globrunq's note).
    pub(crate) global_turn: bool,
    goid_next: u64,
    goid_end: u64,
}

pub(crate) struct P {
    pub(crate) id: u32,
    status: AtomicU32,
    /// Private: the owner's operations go through [`PHandle`] (the one
    /// door to them); anyone may read its length ([`P::runq_len`]).
    runq: RunQueue<G>,
    /// Incremented each time a G starts a new time slice (not on runnext
    /// handoffs, which inherit the slice). Written by the owner only.
    schedtick: AtomicU32,
    /// Goroutines created on this P minus goroutines that exited on it.
    /// Written by the owner only; summed over all Ps by `num_goroutine`.
    ngoroutine: AtomicI64,
    /// Incremented on every system call entry (sysmon watches it).
    syscalltick: AtomicU32,
    /// sysmon asks the goroutine running on this P to yield (cooperative
    /// preemption): checked at runtime calls and `preempt_point()`.
    pub(crate) preempt: AtomicBool,
    /// The request in `preempt` is sysmon's for a due timer of this P
    /// (`sysmon::preempt_for_timers`), not for a used-up slice: the
    /// goroutine steps aside for the timer's goroutine, to this P's queue
    /// tail, rather than to the global queue. Cleared with `preempt` when a
    /// new slice starts.
    pub(crate) preempt_for_timer: AtomicBool,
    /// This P's timer heap (any M may run it; see `runtime::timers`).
    pub(crate) timers: Timers,
    /// Statistics, written by the owner only (`runtime::stats`).
    pub(crate) counters: PCounters,
    /// This P's share of the scheduling-latency histogram, written by the
    /// owner only (`runtime::metrics`).
    pub(crate) latency: SchedLatency,
    /// The M holding this P (Go's `p.m`): set by `acquirep`, cleared by
    /// `releasep`, read by sysmon to signal that M's thread (asynchronous
    /// preemption). A hint only: the signal handler re-checks everything on
    /// the target thread.
    m: AtomicPtr<crate::m::M>,
    local: UnsafeCell<PLocal>,
}

// SAFETY: `local` is only touched by the holder of the P's unique PHandle
// (module note); everything else is atomic or the thread-safe run queue.
unsafe impl Sync for P {}
// SAFETY: as above.
unsafe impl Send for P {}

impl P {
    /// Goroutines in the P's ring and runnext: a snapshot, read from any
    /// thread (stats, sysmon, the idle checks).
    #[inline]
    pub(crate) fn runq_len(&self) -> usize {
        self.runq.len()
    }

    /// Whether the P's ring and runnext are empty (a snapshot, as
    /// [`P::runq_len`]).
    #[inline]
    pub(crate) fn runq_is_empty(&self) -> bool {
        self.runq.is_empty()
    }

    pub(crate) fn new(id: u32) -> &'static P {
        Box::leak(Box::new(P {
            id,
            status: AtomicU32::new(PStatus::Idle as u32),
            runq: RunQueue::new(),
            schedtick: AtomicU32::new(0),
            ngoroutine: AtomicI64::new(0),
            syscalltick: AtomicU32::new(0),
            preempt: AtomicBool::new(false),
            preempt_for_timer: AtomicBool::new(false),
            timers: Timers::new(),
            counters: PCounters::default(),
            latency: SchedLatency::default(),
            m: AtomicPtr::new(std::ptr::null_mut()),
            local: UnsafeCell::new(PLocal {
                gfree: Vec::new(),
                stacks: StackCache::new(),
                tasks: TaskCache::new(),
                chan_timers: ChanTimerCache::new(),
                yieldq: Vec::new(),
                fair_owed: false,
                global_turn: false,
                goid_next: 0,
                goid_end: 0,
            }),
        }))
    }

    #[inline]
    pub(crate) fn status(&self) -> PStatus {
        match self.status.load(Ordering::Acquire) {
            0 => PStatus::Idle,
            1 => PStatus::Running,
            2 => PStatus::Syscall,
            3 => PStatus::Stopped,
            _ => PStatus::Dead,
        }
    }

    #[inline]
    pub(crate) fn schedtick(&self) -> u32 {
        self.schedtick.load(Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn syscalltick(&self) -> u32 {
        self.syscalltick.load(Ordering::Relaxed)
    }

    /// `Syscall -> to`: the one who wins this CAS owns the P (the M coming
    /// back from its system call, sysmon retaking it, or a stop-the-world).
    pub(crate) fn cas_from_syscall(&'static self, to: PStatus) -> Option<PHandle> {
        self.status
            .compare_exchange(
                PStatus::Syscall as u32,
                to as u32,
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .ok()
            .map(|_| PHandle(self))
    }

    /// The M holding this P, if any (a hint; see the field).
    #[inline]
    #[cfg_attr(
        not(all(
            target_os = "linux",
            any(target_arch = "x86_64", target_arch = "aarch64")
        )),
        allow(dead_code)
    )] // asynchronous preemption is x86-64 and aarch64 Linux only
    pub(crate) fn m(&self) -> Option<&'static crate::m::M> {
        // Acquire: pairs with `set_m`'s Release, so that a reader on another
        // thread (sysmon's probe, a dump) sees the M record as built. Its
        // building and the store are ordered only through the M's thread
        // start (the store is made on that thread): with Relaxed here, TSan
        // reported sysmon's read of the M's revoke word racing the record's
        // construction. The reader still re-validates on the target thread.
        // SAFETY: null or a leaked (never freed) M.
        unsafe { self.m.load(Ordering::Acquire).as_ref() }
    }

    #[inline]
    pub(crate) fn ngoroutine(&self) -> i64 {
        self.ngoroutine.load(Ordering::Relaxed)
    }
}

/// Ownership of a P (see the module note).
pub(crate) struct PHandle(&'static P);

impl Deref for PHandle {
    type Target = P;
    #[inline]
    fn deref(&self) -> &P {
        self.0
    }
}

impl PHandle {
    /// Claims a P record. Only for a P that nobody else holds a handle to
    /// (a new P, or one revived by `set_max_procs` during stop-the-world).
    pub(crate) fn claim(p: &'static P) -> PHandle {
        PHandle(p)
    }

    /// Claims the P of an M whose handle was revoked (`runtime::retake`).
    ///
    /// # Safety
    /// The caller won the M's revocation handshake (`m::revoke`: between a
    /// successful `begin` and `finish`) and saw `p` held by that M: the M's
    /// own handle is dormant until it forgets it, so this handle is the
    /// only live one.
    pub(crate) unsafe fn claim_revoked(p: &'static P) -> PHandle {
        PHandle(p)
    }

    /// Whether a G waits in this P's runnext (owner only; a thief may take
    /// it meanwhile, so a hint).
    #[inline]
    pub(crate) fn runq_has_next(&self) -> bool {
        self.0.runq.has_next()
    }

    /// Takes the next goroutine from this P's run queue, `runnext` first
    /// (Go's runqget); `true`: it came from `runnext` and inherits the
    /// current time slice.
    #[inline]
    pub(crate) fn runq_get(&self) -> Option<(&'static G, bool)> {
        // SAFETY: holding the handle is owning the P (module note), so we
        // are the queue's one owner.
        let (g, inherit) = unsafe { self.0.runq.get() }?;
        // SAFETY: run queues only hold leaked, never-freed Gs.
        Some((unsafe { &*g.as_ptr() }, inherit))
    }

    /// The G this P's ring would give next, left in place: a prefetch hint
    /// only (a thief may take it meanwhile, or it may have run already).
    #[cfg(not(loom))]
    #[inline]
    pub(crate) fn runq_peek(&self) -> Option<&'static G> {
        // SAFETY: holding the handle is owning the P (as in `runq_get`).
        let g = unsafe { self.0.runq.peek() }?;
        // SAFETY: run queues only hold leaked, never-freed Gs.
        Some(unsafe { &*g.as_ptr() })
    }

    /// The ring position of the G this P's ring would give next, and up to
    /// `N` Gs from there, left in place: prefetch hints only, as
    /// [`runq_peek`](Self::runq_peek).
    #[cfg(not(loom))]
    #[inline]
    pub(crate) fn runq_peek_n<const N: usize>(&self) -> (u32, [Option<&'static G>; N]) {
        // SAFETY: holding the handle is owning the P (as in `runq_get`).
        let (pos, gs) = unsafe { self.0.runq.peek_n::<N>() };
        // SAFETY: run queues only hold leaked, never-freed Gs.
        (pos, gs.map(|g| g.map(|g| unsafe { &*g.as_ptr() })))
    }

    /// Puts `g` on this P's run queue (Go's runqput): into `runnext` with
    /// `next`. Returns the G that found the ring full (`g` or the kicked
    /// runnext), for [`runq_put_overflow`](Self::runq_put_overflow).
    #[inline]
    pub(crate) fn runq_try_put(&self, g: &'static G, next: bool) -> Result<(), &'static G> {
        // SAFETY: we own the P (as in `runq_get`); run queues only hold
        // leaked, never-freed Gs.
        unsafe { self.0.runq.try_put(NonNull::from(g), next) }.map_err(|g| unsafe { &*g.as_ptr() })
    }

    /// Puts `g` at the ring's tail after `runq_try_put` found it full;
    /// returns what the full ring moved out, for the global queue.
    pub(crate) fn runq_put_overflow(&self, g: &'static G) -> Option<runq::Overflow<G>> {
        // SAFETY: we own the P (as in `runq_get`).
        unsafe { self.0.runq.put_overflow(NonNull::from(g)) }
    }

    /// Free slots in this P's ring (`runnext` not counted).
    #[inline]
    pub(crate) fn runq_room(&self) -> usize {
        // SAFETY: we own the P (as in `runq_get`).
        unsafe { self.0.runq.room() }
    }

    /// Appends goroutines to the ring's tail while it has room (Go's
    /// runqputbatch); returns how many it took from `items`.
    #[inline]
    pub(crate) fn runq_push_back_batch(
        &self,
        items: &mut impl Iterator<Item = NonNull<G>>,
    ) -> usize {
        // SAFETY: we own the P (as in `runq_get`).
        unsafe { self.0.runq.push_back_batch(items) }
    }

    /// Steals about half of `victim`'s queue into this P's (Go's
    /// runqsteal): the goroutine to run now and how many were taken.
    /// `victim_busy`: see `RunQueue::steal_into_counted`.
    #[inline]
    pub(crate) fn runq_steal_from(
        &self,
        victim: &P,
        steal_runnext: bool,
        victim_busy: impl Fn() -> Option<u64>,
    ) -> Option<(&'static G, u32)> {
        // The ring must have room for half a ring (the scheduler steals only
        // when its own queue is empty, so this never refuses there). Exact
        // for the owner: only it adds, thieves only shrink it.
        if self.0.runq.len() > runq::RUNQ_SIZE / 2 || std::ptr::eq(self.0, victim) {
            return None;
        }
        // SAFETY: we own the P (as in `runq_get`), the destination, whose
        // ring holds at most half a ring (checked); any other queue may be a
        // victim.
        let (g, n) = unsafe {
            self.0
                .runq
                .steal_into_counted(&victim.runq, steal_runnext, victim_busy)
        }?;
        // SAFETY: run queues only hold leaked, never-freed Gs.
        Some((unsafe { &*g.as_ptr() }, n))
    }

    /// Empties this P's run queue, `runnext` first, in order.
    pub(crate) fn runq_drain(&self, mut f: impl FnMut(&'static G)) {
        // SAFETY: we own the P (as in `runq_get`); run queues only hold
        // leaked, never-freed Gs.
        unsafe { self.0.runq.drain(|g| f(&*g.as_ptr())) }
    }

    #[inline]
    pub(crate) fn get(&self) -> &'static P {
        self.0
    }

    #[inline]
    pub(crate) fn set_status(&self, s: PStatus) {
        self.0.status.store(s as u32, Ordering::Release)
    }

    /// Records the M holding the P (`acquirep` / `releasep`).
    #[inline]
    pub(crate) fn set_m(&self, m: Option<&'static crate::m::M>) {
        let p = m.map_or(std::ptr::null_mut(), |m| m as *const _ as *mut _);
        // Release: pairs with `m`'s Acquire.
        self.0.m.store(p, Ordering::Release)
    }

    #[inline]
    pub(crate) fn bump_schedtick(&self) {
        let t = self.0.schedtick.load(Ordering::Relaxed);
        self.0.schedtick.store(t.wrapping_add(1), Ordering::Relaxed);
    }

    #[inline]
    pub(crate) fn bump_syscalltick(&self) {
        let t = self.0.syscalltick.load(Ordering::Relaxed);
        self.0
            .syscalltick
            .store(t.wrapping_add(1), Ordering::Relaxed);
    }

    /// Gives up ownership while the P waits in `Syscall` state: from now on
    /// whoever wins [`P::cas_from_syscall`] owns it.
    pub(crate) fn enter_syscall(self) -> &'static P {
        let p = self.0;
        p.status.store(PStatus::Syscall as u32, Ordering::Release);
        p
    }

    #[inline]
    pub(crate) fn add_goroutines(&self, d: i64) {
        let n = self.0.ngoroutine.load(Ordering::Relaxed);
        self.0.ngoroutine.store(n + d, Ordering::Relaxed);
    }

    /// The owner-only state.
    ///
    /// # Safety
    /// No other reference returned by `local` may be live (callers keep these
    /// borrows short and never across a goroutine switch).
    #[allow(clippy::mut_from_ref)]
    #[inline]
    pub(crate) unsafe fn local(&self) -> &mut PLocal {
        // SAFETY: we hold the unique handle; exclusivity of the borrow is the
        // caller's obligation.
        unsafe { &mut *self.0.local.get() }
    }

    /// The next goroutine id, from this P's batch.
    pub(crate) fn next_goid(&self) -> u64 {
        // SAFETY: short exclusive borrow by the owner.
        let l = unsafe { self.local() };
        if l.goid_next == l.goid_end {
            l.goid_next = crate::g::new_goids(GOID_BATCH);
            l.goid_end = l.goid_next + GOID_BATCH;
        }
        let id = l.goid_next;
        l.goid_next += 1;
        id
    }
}
