//! G: the goroutine record.
//!
//! A G is allocated once and never freed: a dead G goes to its P's free list
//! (then the global one) and is reused by a later spawn, as in Go. Because G
//! records are never freed, `&'static G` is the handle every queue, wait list
//! and M uses; a stale handle can never dangle, it can only name a recycled G,
//! and the status protocol below prevents that from being observed.
//!
//! # Ownership (who may touch what), by status
//! - `Idle`: on a free list; owned by the holder of that list (a P's owner or
//!   the global free-list lock).
//! - `Runnable`: on exactly one run queue (a P's runnext/ring or the global
//!   queue); owned by whoever pops it. Not running, its stack (if any) is not
//!   in use.
//! - `Running`: owned by the M whose `curg` it is. "The stack is owned by this
//!   goroutine. It is not on a run queue."
//! - `Waiting`: parked. It is on no run queue; the only legal transition is
//!   `ready()` by the one party that took it off its wait list
//!   (`Waiting -> Runnable`, checked by a CAS).
//! - `Dead`: finished, being recycled by its last M.
//!
//! The mutable fields a G carries across threads (`Inner`) are only touched
//! by the current owner as defined above; ownership moves with the release/
//! acquire edges of the queue or wait list that hands the G over.

pub(crate) mod context;
pub(crate) mod stack;
pub(crate) mod task;
pub(crate) mod taskcache;

use std::cell::UnsafeCell;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

use self::context::GCoroutine;
use self::task::TaskRef;

/// Goroutine status (Go's numbering, so traces and dumps read the same).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    /// On a free list.
    Idle = 0,
    /// On a run queue.
    Runnable = 1,
    /// Running on an M.
    Running = 2,
    /// In a blocking system call (`goroutine::syscall`), without a P.
    Syscall = 3,
    /// Parked until someone readies it.
    Waiting = 4,
    /// Finished.
    Dead = 6,
}

impl Status {
    fn from_u32(v: u32) -> Status {
        match v {
            0 => Status::Idle,
            1 => Status::Runnable,
            2 => Status::Running,
            3 => Status::Syscall,
            4 => Status::Waiting,
            _ => Status::Dead,
        }
    }
}

/// Why a goroutine is parked (Go's waitReason strings, shown in dumps).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(dead_code)] // each variant is used by the primitive it names
pub(crate) enum WaitReason {
    None = 0,
    /// Blocked in `JoinHandle::join`.
    Join,
    ChanReceive,
    ChanSend,
    Select,
    SelectNoCases,
    ChanReceiveNilChan,
    ChanSendNilChan,
    SyncMutexLock,
    SyncRWMutexRLock,
    SyncRWMutexLock,
    SyncCondWait,
    SyncWaitGroupWait,
    SyncOnceDo,
    Semacquire,
    /// `time::sleep`.
    Sleep,
    /// Waiting for a file descriptor in the netpoller.
    IoWait,
}

impl WaitReason {
    const ALL: [WaitReason; 17] = [
        WaitReason::None,
        WaitReason::Join,
        WaitReason::ChanReceive,
        WaitReason::ChanSend,
        WaitReason::Select,
        WaitReason::SelectNoCases,
        WaitReason::ChanReceiveNilChan,
        WaitReason::ChanSendNilChan,
        WaitReason::SyncMutexLock,
        WaitReason::SyncRWMutexRLock,
        WaitReason::SyncRWMutexLock,
        WaitReason::SyncCondWait,
        WaitReason::SyncWaitGroupWait,
        WaitReason::SyncOnceDo,
        WaitReason::Semacquire,
        WaitReason::Sleep,
        WaitReason::IoWait,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            WaitReason::None => "",
            WaitReason::Join => "join",
            WaitReason::ChanReceive => "chan receive",
            WaitReason::ChanSend => "chan send",
            WaitReason::Select => "select",
            WaitReason::SelectNoCases => "select (no cases)",
            WaitReason::ChanReceiveNilChan => "chan receive (nil chan)",
            WaitReason::ChanSendNilChan => "chan send (nil chan)",
            WaitReason::SyncMutexLock => "sync.Mutex.Lock",
            WaitReason::SyncRWMutexRLock => "sync.RWMutex.RLock",
            WaitReason::SyncRWMutexLock => "sync.RWMutex.Lock",
            WaitReason::SyncCondWait => "sync.Cond.Wait",
            WaitReason::SyncWaitGroupWait => "sync.WaitGroup.Wait",
            WaitReason::SyncOnceDo => "sync.Once.Do",
            WaitReason::Semacquire => "semacquire",
            WaitReason::Sleep => "sleep",
            WaitReason::IoWait => "IO wait",
        }
    }
}

/// Fields owned by the G's current owner (see the module note).
pub(crate) struct Inner {
    /// The closure and result cell; taken when the G first runs.
    pub(crate) task: Option<TaskRef>,
    /// Usable stack bytes this G asked for (at most 1 GiB).
    pub(crate) stack_size: u32,
    /// The name given through `Builder::name`.
    pub(crate) name: Option<Arc<str>>,
    /// `lock_os_thread` nesting depth, and the M it is wired to.
    pub(crate) locked: u32,
    pub(crate) lockedm: Option<&'static crate::m::M>,
}

/// The G record. Two cache lines: the first holds everything a context
/// switch touches (the coroutine, the status, the yielder), so switching to
/// a cold G costs one miss on its record; the second what spawn and exit
/// touch. Gs are allocated in chunks (`alloc`), never one by one.
#[repr(C, align(64))]
pub(crate) struct G {
    /// The execution context; `None` until the G first runs (lazy stacks).
    /// Touched only by the scheduler (on g0), never by the G's own code, so
    /// it is kept apart from `inner`, which the running G uses.
    coroutine: UnsafeCell<Option<GCoroutine>>,
    status: AtomicU32,
    wait_reason: AtomicU8,
    /// The corosensei yielder of the running coroutine: the way back to the
    /// M's scheduler context (Go's g0). Written by the G itself on first run.
    yielder: AtomicPtr<()>,
    /// Goroutine id (Go's goid); written by the spawner before publication.
    id: AtomicU64,
    /// Low end of the stack's guard page (one page) and the usable size,
    /// read by the stack-overflow signal handler on the same thread.
    guard_lo: AtomicUsize,
    stack_bytes: AtomicUsize,
    inner: UnsafeCell<Inner>,
}

/// Fresh Gs are carved from chunks of this many.
const G_CHUNK: usize = 64;

/// The chunk fresh Gs come from (rarely used: dead Gs are recycled).
static G_ARENA: std::sync::Mutex<&'static [G]> = std::sync::Mutex::new(&[]);

/// Every chunk ever allocated: every G record is in one of them.
static G_CHUNKS: std::sync::Mutex<Vec<&'static [G]>> = std::sync::Mutex::new(Vec::new());

// SAFETY: all cross-thread fields are atomics; `inner` is only accessed by the
// G's current owner per the status protocol in the module note, and ownership
// moves through release/acquire edges (run queues, wait lists, the sched lock).
unsafe impl Sync for G {}
// SAFETY: see above; a G is handed between threads by design.
unsafe impl Send for G {}

impl G {
    fn new() -> G {
        G {
            coroutine: UnsafeCell::new(None),
            status: AtomicU32::new(Status::Idle as u32),
            wait_reason: AtomicU8::new(0),
            yielder: AtomicPtr::new(ptr::null_mut()),
            id: AtomicU64::new(0),
            guard_lo: AtomicUsize::new(0),
            stack_bytes: AtomicUsize::new(0),
            inner: UnsafeCell::new(Inner {
                task: None,
                stack_size: 0,
                name: None,
                locked: 0,
                lockedm: None,
            }),
        }
    }

    /// A fresh G record (never freed), carved from a leaked chunk.
    pub(crate) fn alloc() -> &'static G {
        let mut arena = G_ARENA.lock().unwrap_or_else(|e| e.into_inner());
        if arena.is_empty() {
            let chunk: Box<[G]> = (0..G_CHUNK).map(|_| G::new()).collect();
            let chunk: &'static [G] = Box::leak(chunk);
            G_CHUNKS
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(chunk);
            *arena = chunk;
        }
        let (g, rest) = arena.split_first().expect("G chunk is not empty");
        *arena = rest;
        g
    }

    /// Calls `f` on every G record ever allocated (idle and dead ones too:
    /// callers filter by status). Statuses read this way are a snapshot.
    pub(crate) fn for_each(mut f: impl FnMut(&'static G)) {
        let chunks: Vec<&'static [G]> = G_CHUNKS.lock().unwrap_or_else(|e| e.into_inner()).clone();
        for chunk in chunks {
            chunk.iter().for_each(&mut f);
        }
    }

    #[inline]
    pub(crate) fn id(&self) -> u64 {
        self.id.load(Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn set_id(&self, id: u64) {
        self.id.store(id, Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn status(&self) -> Status {
        Status::from_u32(self.status.load(Ordering::Acquire))
    }

    #[inline]
    pub(crate) fn set_status(&self, s: Status) {
        self.status.store(s as u32, Ordering::Release)
    }

    /// `Waiting -> Runnable`, the only transition made by a party that does not
    /// own the G. Panics (a runtime bug) if the G was not waiting.
    #[inline]
    pub(crate) fn cas_waiting_to_runnable(&self) {
        let r = self.status.compare_exchange(
            Status::Waiting as u32,
            Status::Runnable as u32,
            Ordering::AcqRel,
            Ordering::Relaxed,
        );
        if let Err(s) = r {
            crate::runtime::throw(&format!(
                "ready of goroutine {} with bad status {:?}",
                self.id(),
                Status::from_u32(s)
            ));
        }
    }

    #[allow(dead_code)] // read by dumps and traces
    pub(crate) fn wait_reason(&self) -> WaitReason {
        let r = self.wait_reason.load(Ordering::Relaxed) as usize;
        WaitReason::ALL.get(r).copied().unwrap_or(WaitReason::None)
    }

    pub(crate) fn set_wait_reason(&self, r: WaitReason) {
        self.wait_reason.store(r as u8, Ordering::Relaxed)
    }

    pub(crate) fn yielder(&self) -> *mut () {
        self.yielder.load(Ordering::Relaxed)
    }

    pub(crate) fn set_yielder(&self, y: *mut ()) {
        self.yielder.store(y, Ordering::Relaxed)
    }

    /// Records the stack's guard page (`[lo, hi)`, one page) and size.
    pub(crate) fn set_stack_bounds(&self, guard: (usize, usize), usable: usize) {
        debug_assert!(guard.0 == 0 || guard.1 - guard.0 == crate::sys::mem::page_size());
        self.guard_lo.store(guard.0, Ordering::Relaxed);
        self.stack_bytes.store(usable, Ordering::Relaxed);
    }

    /// If `addr` lies in this G's stack guard page, the usable stack size.
    /// Async-signal-safe (atomics only).
    pub(crate) fn overflowed_at(&self, addr: usize) -> Option<usize> {
        let lo = self.guard_lo.load(Ordering::Relaxed);
        // page_size() is a cached atomic load by now (stacks were carved).
        let hi = lo + crate::sys::mem::page_size();
        (lo != 0 && addr >= lo && addr < hi).then(|| self.stack_bytes.load(Ordering::Relaxed))
    }

    /// The owner-only fields.
    ///
    /// # Safety
    /// The caller must own the G (module note) and must not hold another
    /// reference obtained from `inner` at the same time.
    #[allow(clippy::mut_from_ref)]
    #[inline]
    pub(crate) unsafe fn inner(&self) -> &mut Inner {
        // SAFETY: exclusivity is the caller's obligation (see above).
        unsafe { &mut *self.inner.get() }
    }

    /// The G's execution context.
    ///
    /// # Safety
    /// Only the scheduler of the M that owns the G, on its own stack (g0),
    /// with no other borrow of it live.
    #[allow(clippy::mut_from_ref)]
    #[inline]
    pub(crate) unsafe fn coroutine(&self) -> &mut Option<GCoroutine> {
        // SAFETY: exclusivity is the caller's obligation (see above).
        unsafe { &mut *self.coroutine.get() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(
        any(goroutine_sanitize = "address", goroutine_sanitize = "thread"),
        ignore = "a sanitizer build's context is bigger (ASan: corosensei keeps the parent stack's \
                  bounds; TSan: the fiber)"
    )]
    fn g_is_two_cache_lines_with_the_switch_fields_in_the_first() {
        assert_eq!(std::mem::size_of::<G>(), 128);
        assert_eq!(std::mem::align_of::<G>(), 64);
        assert!(std::mem::offset_of!(G, yielder) + 8 <= 64);
        assert!(std::mem::offset_of!(G, status) + 4 <= 64);
    }

    #[test]
    fn wait_reasons_round_trip_through_the_g() {
        let g = G::alloc();
        for (i, r) in WaitReason::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i, "ALL must be in discriminant order");
            g.set_wait_reason(*r);
            assert_eq!(g.wait_reason(), *r);
        }
        assert_eq!(WaitReason::ChanReceive.as_str(), "chan receive");
    }
}
