//! G: the goroutine record.
//!
//! A G is allocated once and never freed: a dead G goes to its P's free list
//! (then the global one) and is reused by a later spawn, as in Go. Records
//! come in chunks of 64 from the runtime's record arena (`arena.rs`), not
//! from the system allocator. Because G
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
//!
//! # Enumerating Gs (dumps, scheddetail)
//! Every chunk of G records is registered in `G_CHUNKS` (Go's `allgs`), so
//! [`G::for_each`] can visit every G ever allocated; such readers use only
//! the atomic fields (id, status, wait reason, `waitsince`). A goroutine's
//! name lives in `Inner` (owner-only), so named goroutines are also
//! registered by id in `NAMES` for readers on other threads.
//!
//! # Metrics fields
//! Two words in the third line's spare room, after the sudog
//! (`crate::runtime::metrics`' note): the G's accumulated on-CPU time,
//! added by the M that ran it at each switch-out, and the time of a
//! *sampled* ready (the scheduling-latency histogram). Whether the G's
//! current runnable spell is sampled is the top bit of `wait_reason`
//! ([`READY_SAMPLED`]), which is in the first line that the readier (its
//! status CAS) and `execute` (its status store) touch anyway: an
//! unsampled switch-in reads no other line. The bit is set only by the
//! party that made the G runnable, before it publishes the G on a run
//! queue, and cleared by `execute` before the G runs, so it is never set
//! while the G runs or waits; `wait_reason()` masks it off.
//!
//! While the G waits, the sampled ready's word holds the tracer's
//! timestamp of its GoBlock instead (`trace_block_ts`): the GoUnblock
//! written by the ready that ends the wait compares it before any sample
//! is taken (`tracer/buf.rs`, "Shared timestamps"). A ready that samples
//! first (the paths without a P) leaves a `ticks` reading there, far
//! larger than a session's time, which only makes the GoUnblock read the
//! clock; a stale one (the G blocked before the trace began) is harmless
//! either way (the same note).

pub(crate) mod arena;
pub(crate) mod stack;
pub(crate) mod switch;
pub(crate) mod task;
pub(crate) mod taskcache;

use std::cell::UnsafeCell;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

use self::switch::GCoroutine;
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
    /// `block_on` of a pending future.
    BlockOn,
    /// `synctest::wait`: until every other goroutine of the bubble is
    /// durably blocked.
    SynctestWait,
}

impl WaitReason {
    const ALL: [WaitReason; 19] = [
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
        WaitReason::BlockOn,
        WaitReason::SynctestWait,
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
            WaitReason::BlockOn => "block_on",
            WaitReason::SynctestWait => "synctest.Wait",
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
    /// `lock_os_thread` nesting depth (with `lockosthread::PINNED` set for
    /// a goroutine spawned pinned), and the M it is wired to.
    pub(crate) locked: u32,
    pub(crate) lockedm: Option<&'static crate::m::M>,
}

/// The G record. Three cache lines: the first holds everything a context
/// switch touches (the coroutine, the status, the yielder), so switching to
/// a cold G costs one miss on its record; the second what spawn and exit
/// touch; the third the goroutine's own sudog, which only its plain channel
/// waits touch. Gs are allocated in chunks (`alloc`), never one by one.
#[repr(C, align(64))]
pub(crate) struct G {
    /// The execution context; `None` until the G first runs (lazy stacks).
    /// Touched only by the scheduler (on g0), never by the G's own code, so
    /// it is kept apart from `inner`, which the running G uses.
    coroutine: UnsafeCell<Option<GCoroutine>>,
    status: AtomicU32,
    wait_reason: AtomicU8,
    /// Nesting depth of `goroutine::preemptible` regions, and of runtime
    /// calls in progress (`InRuntime` guards). Written only by the G itself
    /// while it runs; read by the SIGURG handler on the same thread and, as
    /// a hint, by sysmon (`runtime::asyncpreempt`'s note). They fill the
    /// padding after `wait_reason`: these fields stay in two cache lines.
    region_depth: AtomicU8,
    in_runtime: AtomicU8,
    /// How many of the G's last system calls in a row blocked long
    /// (saturating; `runtime::syscall`'s note, "Hand-off at entry"). Written
    /// only by the G itself; it fills the last byte of that padding.
    syscall_long: AtomicU8,
    /// The corosensei yielder of the running coroutine: the way back to the
    /// M's scheduler context (Go's g0). Written by the G itself on first run.
    yielder: AtomicPtr<()>,
    /// Goroutine id (Go's goid); written by the spawner before publication.
    id: AtomicU64,
    /// Low end of the stack's guard page (one page) and the usable size,
    /// read by the stack-overflow signal handler on the same thread.
    guard_lo: AtomicUsize,
    stack_bytes: AtomicU32,
    /// When the G last parked, in ms since runtime start plus one
    /// (`runtime::stats::coarse_ms`, sysmon's coarse clock; 0: never), for
    /// the goroutine dump's "N minutes". Written by the G itself in `park`,
    /// read by anyone. 32 bits keep these fields in two cache lines; they
    /// wrap after 49 days, and readers subtract with wrapping.
    waitsince: AtomicU32,
    inner: UnsafeCell<Inner>,
    /// The third cache line: the room of the goroutine's own sudog, used by
    /// its plain (one-channel) blocking sends and receives in turn
    /// (`chan::wait`'s note, "Where records live"). Off every queue
    /// whenever the G runs. The G owns the memory; the channel layer owns
    /// its type (the layer rule: this layer never names `chan`), which it
    /// checks fits ([`SudogRoom`]).
    chan_sudog: UnsafeCell<SudogRoom>,
    /// After the sudog's room, in the third line's spare room (cold:
    /// touched once per switch-out, and by sampled readies): see "Metrics
    /// fields" in the module note.
    metrics: GMetrics,
}

/// The per-G fields of the scheduler metrics (module note, "Metrics
/// fields").
struct GMetrics {
    /// On-CPU time so far, in `sys::time::ticks`: written by the M that
    /// runs the G as it switches out, read by anyone.
    cpu_ticks: AtomicU64,
    /// When a sampled ready made the G runnable (`ticks`); meaningful only
    /// while `wait_reason` carries [`READY_SAMPLED`].
    ready_ticks: AtomicU64,
}

/// Room for one channel sudog in the G record: 48 bytes (the rest of the
/// third line holds the metrics fields), zeroed at
/// creation. `chan::wait` asserts at compile time that its `Sudog` fits
/// (size and alignment) and that all-zero bytes are its unused value, so
/// the room is a valid `Sudog` from the start.
#[repr(C, align(8))]
pub(crate) struct SudogRoom([usize; 6]);

/// Who to wake: a parked goroutine, a blocked OS thread or an async task.
/// Waking is the runtime's (`Waiter::wake`, in `runtime/park.rs`).
pub(crate) enum Waiter {
    Goroutine(&'static G),
    Thread(std::thread::Thread),
    /// An async task (a `JoinHandle` or channel future polled by an
    /// executor, or by `block_on`). Boxed: a `Waker` is two words, and the
    /// enum stays one pointer plus a tag (it sits in every task cell's
    /// header, which must keep small spawns in the 64-byte block class).
    Waker(Box<std::task::Waker>),
}

/// The top bit of `wait_reason`: the G's current runnable spell is
/// sampled for the scheduling-latency histogram (module note, "Metrics
/// fields").
const READY_SAMPLED: u8 = 0x80;

/// Fresh Gs are carved from chunks of this many.
const G_CHUNK: usize = 64;

/// Goroutine id generator (Go's `sched.goidgen`); Ps take batches of 16.
/// Starts at 1: the first goroutine ever is the main goroutine, id 1.
static GOIDGEN: AtomicU64 = AtomicU64::new(1);

/// Reserves `n` consecutive goroutine ids; returns the first.
#[inline]
pub(crate) fn new_goids(n: u64) -> u64 {
    GOIDGEN.fetch_add(n, Ordering::Relaxed)
}

/// The rest of the chunk fresh Gs come from (rarely used: dead Gs are
/// recycled), and the memory chunks are carved from (`arena.rs`: never
/// through the system allocator, whose arena growth would take the memory
/// map lock under the Ms carving stacks).
static G_ARENA: std::sync::Mutex<(&'static [G], arena::Arena)> =
    std::sync::Mutex::new((&[], arena::Arena::new()));

/// Every chunk ever allocated: every G record is in one of them.
static G_CHUNKS: std::sync::Mutex<Vec<&'static [G]>> = std::sync::Mutex::new(Vec::new());

/// Names of the live named goroutines (`Builder::name`), by id. The name in
/// `Inner` belongs to the G's owner; readers on other threads (dumps,
/// `scheddetail`) look here. Only named spawns and their exits take the lock.
static NAMES: std::sync::Mutex<Vec<(u64, Arc<str>)>> = std::sync::Mutex::new(Vec::new());

/// Records the name of live goroutine `id` for readers on other threads.
pub(crate) fn register_name(id: u64, name: Arc<str>) {
    NAMES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((id, name));
}

/// Forgets the name of goroutine `id` (it exited).
pub(crate) fn unregister_name(id: u64) {
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(i) = names.iter().position(|(g, _)| *g == id) {
        names.swap_remove(i);
    }
}

/// The names of the live named goroutines, by id (a snapshot).
pub(crate) fn names() -> Vec<(u64, Arc<str>)> {
    NAMES.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

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
            region_depth: AtomicU8::new(0),
            in_runtime: AtomicU8::new(0),
            syscall_long: AtomicU8::new(0),
            yielder: AtomicPtr::new(ptr::null_mut()),
            id: AtomicU64::new(0),
            guard_lo: AtomicUsize::new(0),
            stack_bytes: AtomicU32::new(0),
            waitsince: AtomicU32::new(0),
            inner: UnsafeCell::new(Inner {
                task: None,
                stack_size: 0,
                name: None,
                locked: 0,
                lockedm: None,
            }),
            chan_sudog: UnsafeCell::new(SudogRoom([0; 6])),
            metrics: GMetrics {
                cpu_ticks: AtomicU64::new(0),
                ready_ticks: AtomicU64::new(0),
            },
        }
    }

    /// The goroutine's own sudog (see the field). Only the G itself writes
    /// it while it runs, and only while it is on no queue; while queued it
    /// belongs to the channel lock, as any sudog (`chan::wait`'s note).
    #[inline]
    pub(crate) fn chan_sudog(&self) -> *mut SudogRoom {
        self.chan_sudog.get()
    }

    /// A fresh G record (never freed), carved from a chunk of the G arena;
    /// `None` when no memory can be mapped for a new chunk (`arena`'s
    /// note, "Out of memory").
    pub(crate) fn alloc() -> Option<&'static G> {
        let mut guard = G_ARENA.lock().unwrap_or_else(|e| e.into_inner());
        let (rest, memory) = &mut *guard;
        if rest.is_empty() {
            let layout = std::alloc::Layout::array::<G>(G_CHUNK).expect("G chunk layout");
            // Room for the chunk's entry first: out of memory, the push
            // below must not abort in the system allocator.
            let mut chunks = G_CHUNKS.lock().unwrap_or_else(|e| e.into_inner());
            chunks.try_reserve(1).ok()?;
            let p = memory.alloc(layout)?.cast::<G>();
            for i in 0..G_CHUNK {
                // SAFETY: `p` is a fresh block for `G_CHUNK` Gs, aligned
                // for G, that nothing else uses (`Arena::alloc`).
                unsafe { p.as_ptr().add(i).write(G::new()) };
            }
            // SAFETY: all `G_CHUNK` records were just written, and the
            // arena's memory is never freed or handed out again.
            let chunk: &'static [G] = unsafe { std::slice::from_raw_parts(p.as_ptr(), G_CHUNK) };
            chunks.push(chunk);
            *rest = chunk;
        }
        let (g, tail) = rest.split_first().expect("G chunk is not empty");
        *rest = tail;
        Some(g)
    }

    /// Calls `f` on every G record ever allocated (idle and dead ones too:
    /// callers filter by status). Statuses read this way are a snapshot.
    pub(crate) fn for_each(mut f: impl FnMut(&'static G)) {
        let chunks: Vec<&'static [G]> = G_CHUNKS.lock().unwrap_or_else(|e| e.into_inner()).clone();
        for chunk in chunks {
            chunk.iter().for_each(&mut f);
        }
    }

    /// Where the running goroutine keeps its goroutine-local map
    /// (`crate::local`): in place, at the start of the runtime's reserved
    /// line at the top of its stack (`stack::TOP_RESERVED`; the G record
    /// itself has no room left in its first two cache lines). `None` without a
    /// stack.
    #[inline]
    /// The slot is `stack::TOP_RESERVED` bytes, 64-aligned (`local` checks
    /// that its map fits).
    pub(crate) fn locals_slot(&self) -> Option<std::ptr::NonNull<u8>> {
        self.stack_range()
            .and_then(|(_, hi)| std::ptr::NonNull::new((hi - stack::TOP_RESERVED) as *mut _))
    }

    /// Debug builds: panics if the goroutine is in a preemptible region but
    /// not in a runtime call, i.e. some runtime path lacks its entry gate
    /// (`runtime::asyncpreempt::debug_check_guarded`).
    #[inline]
    pub(crate) fn debug_check_guarded(&self) {
        debug_assert!(
            self.region_depth() == 0 || self.in_runtime() > 0 || std::thread::panicking(),
            "goroutine {}: runtime code in a preemptible region without an InRuntime guard",
            self.id()
        );
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
            crate::sys::throw(&format!(
                "ready of goroutine {} with bad status {:?}",
                self.id(),
                Status::from_u32(s)
            ));
        }
    }

    #[inline]
    pub(crate) fn wait_reason(&self) -> WaitReason {
        let r = (self.wait_reason.load(Ordering::Relaxed) & !READY_SAMPLED) as usize;
        WaitReason::ALL.get(r).copied().unwrap_or(WaitReason::None)
    }

    #[inline]
    pub(crate) fn set_wait_reason(&self, r: WaitReason) {
        self.wait_reason.store(r as u8, Ordering::Relaxed)
    }

    /// Marks the G's runnable spell as sampled for the scheduling-latency
    /// histogram, made runnable at `ticks` (module note, "Metrics
    /// fields"). The caller made it runnable and has not published it yet.
    #[inline]
    pub(crate) fn mark_ready_sampled(&self, ticks: u64) {
        self.metrics.ready_ticks.store(ticks, Ordering::Relaxed);
        let r = self.wait_reason.load(Ordering::Relaxed);
        self.wait_reason.store(r | READY_SAMPLED, Ordering::Relaxed);
    }

    /// If the runnable spell that ends now was sampled, clears the mark
    /// and returns when it began (`execute`, the G's owner).
    #[inline(always)]
    pub(crate) fn take_ready_sample(&self) -> Option<u64> {
        let r = self.wait_reason.load(Ordering::Relaxed);
        if r & READY_SAMPLED == 0 {
            return None;
        }
        self.wait_reason
            .store(r & !READY_SAMPLED, Ordering::Relaxed);
        Some(self.metrics.ready_ticks.load(Ordering::Relaxed))
    }

    /// The tracer's timestamp of this G's last GoBlock (`tracer`'s
    /// GoUnblock), kept in `ready_ticks` while the G is parked: the field
    /// means nothing then (module note, "Metrics fields"), and the ready
    /// that ends the park reads it before a sample may overwrite it.
    #[inline(always)]
    pub(crate) fn trace_block_ts(&self) -> u64 {
        self.metrics.ready_ticks.load(Ordering::Relaxed)
    }

    /// Keeps the tracer's timestamp of this G's GoBlock (written by the
    /// M parking it, before the park's unlock makes it findable).
    #[inline(always)]
    pub(crate) fn set_trace_block_ts(&self, ts: u64) {
        self.metrics.ready_ticks.store(ts, Ordering::Relaxed);
    }

    /// Adds `ticks` of on-CPU time (the M that ran the G, as it switches
    /// out: the only writer, so a load and a store).
    #[inline(always)]
    pub(crate) fn add_cpu_ticks(&self, ticks: u64) {
        let c = &self.metrics.cpu_ticks;
        c.store(
            c.load(Ordering::Relaxed).wrapping_add(ticks),
            Ordering::Relaxed,
        );
    }

    /// On-CPU time up to the G's last switch-out, in ticks.
    #[inline]
    pub(crate) fn cpu_ticks(&self) -> u64 {
        self.metrics.cpu_ticks.load(Ordering::Relaxed)
    }

    /// Starts a recycled G's CPU time from zero (its exit, the owner).
    #[inline]
    pub(crate) fn reset_cpu_ticks(&self) {
        self.metrics.cpu_ticks.store(0, Ordering::Relaxed);
    }

    /// When the G last parked (see the field), 0 if never.
    #[inline]
    pub(crate) fn waitsince(&self) -> u32 {
        self.waitsince.load(Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn set_waitsince(&self, t: u32) {
        self.waitsince.store(t, Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn yielder(&self) -> *mut () {
        self.yielder.load(Ordering::Relaxed)
    }

    pub(crate) fn set_yielder(&self, y: *mut ()) {
        self.yielder.store(y, Ordering::Relaxed)
    }

    /// Preemptible-region depth (see the field).
    #[inline]
    pub(crate) fn region_depth(&self) -> u8 {
        self.region_depth.load(Ordering::Relaxed)
    }

    /// Runtime calls in progress (see the field).
    #[inline]
    pub(crate) fn in_runtime(&self) -> u8 {
        self.in_runtime.load(Ordering::Relaxed)
    }

    /// The in-runtime count itself, for the sigreturn stub that drops the
    /// trampoline's count with its last instruction before the system call.
    #[inline]
    #[cfg_attr(
        not(all(
            target_os = "linux",
            any(target_arch = "x86_64", target_arch = "aarch64")
        )),
        allow(dead_code)
    )] // asynchronous preemption is x86-64 and aarch64 Linux only
    pub(crate) fn in_runtime_counter(&self) -> &AtomicU8 {
        &self.in_runtime
    }

    /// Increments one of the two counters of the running G (only the G
    /// itself writes them, so a load and a store suffice). Returns false,
    /// leaving it alone, if it is at its maximum: it then stays non-zero
    /// until the outer levels end, which is all its readers ask.
    ///
    /// The signal fences keep the compiler from moving the caller's memory
    /// accesses across the update: the SIGURG handler, on this thread, must
    /// see the count raised before the first access of the guarded code and
    /// until the last.
    #[inline(always)]
    fn bump(counter: &AtomicU8) -> bool {
        let n = counter.load(Ordering::Relaxed);
        if n == u8::MAX {
            return false;
        }
        counter.store(n + 1, Ordering::Relaxed);
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
        true
    }

    /// Undoes a successful [`G::bump`].
    #[inline(always)]
    fn unbump(counter: &AtomicU8) {
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
        let n = counter.load(Ordering::Relaxed);
        debug_assert!(n > 0, "preemption counter underflow");
        counter.store(n.wrapping_sub(1), Ordering::Relaxed);
    }

    /// Enters a preemptible region; false if the depth is saturated.
    #[inline]
    #[cfg_attr(
        not(all(
            target_os = "linux",
            any(target_arch = "x86_64", target_arch = "aarch64")
        )),
        allow(dead_code)
    )] // asynchronous preemption is x86-64 and aarch64 Linux only
    pub(crate) fn region_enter(&self) -> bool {
        G::bump(&self.region_depth)
    }

    /// Leaves a region entered with a successful `region_enter`.
    #[inline]
    #[cfg_attr(
        not(all(
            target_os = "linux",
            any(target_arch = "x86_64", target_arch = "aarch64")
        )),
        allow(dead_code)
    )] // asynchronous preemption is x86-64 and aarch64 Linux only
    pub(crate) fn region_exit(&self) {
        G::unbump(&self.region_depth)
    }

    /// Enters a runtime call; false if the count is saturated.
    #[inline]
    pub(crate) fn runtime_enter(&self) -> bool {
        G::bump(&self.in_runtime)
    }

    /// Leaves a runtime call entered with a successful `runtime_enter`.
    #[inline]
    pub(crate) fn runtime_exit(&self) {
        G::unbump(&self.in_runtime)
    }

    /// Resets both counters, and the system-call history, of a G being
    /// recycled (owner only).
    #[inline]
    pub(crate) fn reset_preempt_counters(&self) {
        self.region_depth.store(0, Ordering::Relaxed);
        self.in_runtime.store(0, Ordering::Relaxed);
        self.syscall_long.store(0, Ordering::Relaxed);
    }

    /// Long system calls in a row (see the field).
    #[inline]
    pub(crate) fn syscall_long(&self) -> u8 {
        self.syscall_long.load(Ordering::Relaxed)
    }

    /// Records the G's latest system call (running G only).
    #[inline]
    pub(crate) fn set_syscall_long(&self, n: u8) {
        self.syscall_long.store(n, Ordering::Relaxed)
    }

    /// The usable stack, `[lo, hi)`, if the G has one. Async-signal-safe.
    #[inline]
    pub(crate) fn stack_range(&self) -> Option<(usize, usize)> {
        let guard = self.guard_lo.load(Ordering::Relaxed);
        if guard == 0 {
            return None;
        }
        let lo = guard + crate::sys::mem::page_size();
        Some((lo, lo + self.stack_bytes.load(Ordering::Relaxed) as usize))
    }

    /// Starts loading the stack lines a resume of this switched-out G reads
    /// first (`traceback::StackHeader::prefetch_resume`). The caller owns
    /// the G (popped it from a run queue) and is about to resume it.
    #[inline]
    pub(crate) fn prefetch_resume(&self) {
        #[cfg(not(any(goroutine_sanitize = "address", goroutine_sanitize = "thread")))]
        if let Some((_, top)) = self.stack_range() {
            // SAFETY: the G is switched out and ours (caller's contract),
            // and its stack is live while it has a context.
            unsafe { crate::traceback::StackHeader::prefetch_resume(top) }
        }
    }

    /// Starts loading this G's record (its first two lines: what the
    /// scheduler reads to run it), without reading it: a look-ahead hint
    /// for the G queued next. Records are never freed, so any G will do.
    #[inline]
    pub(crate) fn prefetch_record(&self) {
        let a = self as *const G as usize;
        crate::sys::mem::prefetch(a);
        crate::sys::mem::prefetch(a + 64);
    }

    /// Starts loading the header line of this G's stack (where a resume's
    /// [`G::prefetch_resume`] reads the SP), without reading anything but
    /// the G's own bounds: the look-ahead for the G queued next, one
    /// resume early, so that its TLB walk and cache miss overlap the
    /// current G's run. Any G will do: a G that has no stack yet, or runs
    /// elsewhere by now, costs a useless prefetch.
    #[inline]
    pub(crate) fn prefetch_header(&self) {
        #[cfg(not(any(goroutine_sanitize = "address", goroutine_sanitize = "thread")))]
        if let Some((_, top)) = self.stack_range() {
            crate::sys::mem::prefetch(crate::g::stack::header_addr(top));
        }
    }

    /// Records the stack's guard page (`[lo, hi)`, one page) and size.
    pub(crate) fn set_stack_bounds(&self, guard: (usize, usize), usable: usize) {
        debug_assert!(guard.0 == 0 || guard.1 - guard.0 == crate::sys::mem::page_size());
        self.guard_lo.store(guard.0, Ordering::Relaxed);
        // Usable sizes are at most 1 GiB (`validate_stack_size`).
        self.stack_bytes.store(usable as u32, Ordering::Relaxed);
    }

    /// If `addr` lies in this G's stack guard page, the usable stack size.
    /// Async-signal-safe (atomics only).
    pub(crate) fn overflowed_at(&self, addr: usize) -> Option<usize> {
        let lo = self.guard_lo.load(Ordering::Relaxed);
        // page_size() is a cached atomic load by now (stacks were carved).
        let hi = lo + crate::sys::mem::page_size();
        (lo != 0 && addr >= lo && addr < hi)
            .then(|| self.stack_bytes.load(Ordering::Relaxed) as usize)
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
    fn g_is_three_cache_lines_with_the_switch_fields_in_the_first() {
        assert_eq!(std::mem::size_of::<G>(), 192);
        assert_eq!(std::mem::align_of::<G>(), 64);
        assert!(std::mem::offset_of!(G, yielder) + 8 <= 64);
        assert!(std::mem::offset_of!(G, status) + 4 <= 64);
        assert!(std::mem::offset_of!(G, wait_reason) < 64);
        assert!(std::mem::offset_of!(G, in_runtime) < 64);
        assert!(std::mem::offset_of!(G, metrics) >= 128);
    }

    #[test]
    fn wait_reasons_round_trip_through_the_g() {
        let g = G::alloc().unwrap();
        for (i, r) in WaitReason::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i, "ALL must be in discriminant order");
            g.set_wait_reason(*r);
            assert_eq!(g.wait_reason(), *r);
        }
        assert_eq!(WaitReason::ChanReceive.as_str(), "chan receive");
    }
}
