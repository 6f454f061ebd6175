//! M: an OS thread that runs goroutines while it holds a P.
//!
//! An M runs the scheduler loop (`runtime::schedule`) on its own thread stack,
//! which plays the role of Go's g0: goroutines switch back to it to park,
//! yield or exit. M records are never freed (Go keeps them too); an M with
//! nothing to do parks on its [`Note`] in the idle M list until `startm` hands
//! it a P.
//!
//! # Ownership
//! - `p` is read and written only by the M's own thread (including code of the
//!   goroutine it is running, which runs on that thread).
//! - `nextp` is written by `startm` while the M is off every list and parked,
//!   then published by `park.wakeup()` (Release) and read by the M after
//!   `park.sleep()` (Acquire).
//! - `curg` and `spinning` are atomics so that other threads (stats, traces,
//!   the stack-overflow handler) may read them; `p_id` mirrors `p` for them
//!   (written by the M's own thread in `acquirep`/`releasep`).
//! - `parks`/`wakes` are statistics counters written by the M's own thread
//!   (`runtime::stats`).
//! - `async_preempt` and `preempt_sent_at` are set by sysmon just before it
//!   sends this M's thread `SIGURG`; the handler consumes the flag
//!   (`runtime::asyncpreempt`). `sigmask` is the thread's signal mask while
//!   it runs goroutines, recorded once at start (own thread), read by that
//!   handler on the same thread.
//! - `revoke` is the handshake through which sysmon or a stop-the-world
//!   takes the P of an M blocked in the kernel outside the runtime
//!   (`revoke.rs`); `cpu_clock` (written once at start) lets sysmon read the
//!   thread's CPU time, and `stat` its scheduler state: the file is opened
//!   by the first probe that needs it, under the lock, and closed under it
//!   by the M's own thread as the thread ends, so no reader ever uses a
//!   closed (or reused) descriptor.

pub(crate) mod note;
pub(crate) mod revoke;

use std::cell::{Cell, UnsafeCell};
use std::io;
use std::ptr;
use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicI64, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};
use std::sync::Mutex;

use self::note::Note;
use crate::g::G;
use crate::p::{PHandle, PStatus};

pub(crate) struct M {
    pub(crate) id: u64,
    p: UnsafeCell<Option<PHandle>>,
    nextp: UnsafeCell<Option<PHandle>>,
    spinning: AtomicBool,
    curg: AtomicPtr<G>,
    /// The running goroutine's locals map (`G::locals_slot`, in the reserved
    /// line at its stack top), null while none runs: set by `execute` just
    /// before it switches into the goroutine and cleared when it switches
    /// back, so `local::caller_map` finds the map with one load from the M
    /// instead of three (the G, its stack bounds). Read only on the M's own
    /// thread; atomic only to be `Sync`.
    locals: AtomicPtr<u8>,
    pub(crate) park: Note,
    rand: Cell<u64>,
    /// The thread's kernel id (`gettid`), 0 until the thread has started.
    /// Written once, by the M's own thread in `mstart`; read by other
    /// threads: async preemption signals it (`asyncpreempt.rs`), and sysmon's
    /// blocked-thread probe reads its `/proc/self/task/<tid>/` state and
    /// system call (`runtime/retake.rs`). Relaxed: a reader that sees 0
    /// skips the thread, and one that sees the id needs nothing else from
    /// the write.
    tid: AtomicI32,
    /// The P this M left in `Syscall` state (own thread only).
    oldp: Cell<Option<&'static crate::p::P>>,
    /// The time-stamp counter when the running system call began (own
    /// thread only; `runtime::syscall`).
    syscall_tsc: Cell<u64>,
    /// When the running goroutine switched in (`sys::time::ticks`), for
    /// the CPU time of a goroutine still running (`runtime::metrics`).
    /// Written by the own thread in `execute`, read by anyone (Relaxed:
    /// an estimate).
    switch_in: AtomicU64,
    /// When this M's last goroutine switched out (`ticks`), for the next
    /// switch-in on the scheduler's quick path to reuse instead of reading
    /// the clock again; 0 when there is none to reuse (own thread only;
    /// `runtime::metrics`' note).
    last_out: Cell<u64>,
    /// Id of the P held (`NO_P` if none): a mirror of `p` that other threads
    /// may read (schedtrace, sysmon's preemption event). Own thread writes.
    p_id: AtomicU32,
    /// Times this M parked idle, and woke (statistics; own thread writes).
    pub(crate) parks: AtomicU64,
    pub(crate) wakes: AtomicU64,
    /// The goroutine wired to this thread by `lock_os_thread` (own thread).
    lockedg: Cell<Option<&'static G>>,
    /// The thread ended (a goroutine exited while locked to it).
    dead: AtomicBool,
    /// sysmon asks this M's goroutine to stop asynchronously (see the note).
    #[cfg_attr(
        not(all(
            target_os = "linux",
            any(target_arch = "x86_64", target_arch = "aarch64")
        )),
        allow(dead_code)
    )] // asynchronous preemption is x86-64 and aarch64 Linux only
    pub(crate) async_preempt: AtomicBool,
    /// When sysmon sent the last `SIGURG` (nanotime), for latency stats.
    #[cfg_attr(
        not(all(
            target_os = "linux",
            any(target_arch = "x86_64", target_arch = "aarch64")
        )),
        allow(dead_code)
    )] // asynchronous preemption is x86-64 and aarch64 Linux only
    pub(crate) preempt_sent_at: AtomicI64,
    /// The thread's signal mask (the kernel's 64-bit word), see the note.
    pub(crate) sigmask: AtomicU64,
    /// An address near the top of this M's own thread stack (g0), recorded
    /// at start: g0 runs below it, within `M_STACK_SIZE` (see
    /// `current_g_checked`).
    g0_hi: AtomicUsize,
    /// The revocation handshake (see `revoke.rs`).
    pub(crate) revoke: revoke::Revoke,
    /// Its P was revoked while its goroutine computed (a hog,
    /// `runtime/retake.rs` rule 5), not while it blocked: set by the
    /// revoker inside the handshake, cleared by the M when it notices.
    pub(crate) revoked_hog: std::sync::atomic::AtomicBool,
    /// The thread's CPU-time clock id (-1: unknown), written once at start.
    cpu_clock: AtomicI32,
    /// The thread's stat file (see the note and [`M::thread_state`]).
    stat: Mutex<StatSlot>,
    /// The tracer's buffer of this M's thread (`tracer/buf.rs`, "The fast
    /// path"), opaque here: the event sites of the scheduler, which hold
    /// the M, find the buffer with one load from it instead of a
    /// thread-local lookup. Written by the M's own thread only (the
    /// tracer's claim and thread exit); atomic only to be `Sync`.
    trace_buf: AtomicPtr<()>,
}

/// `M::stat`: not opened yet, open, or closed for good (the thread ended).
enum StatSlot {
    Unopened,
    Open(crate::sys::procfs::StatFile),
    Closed,
}

/// The most stat files (`M::thread_state`) held open at once. Every M
/// sysmon has probed keeps one until its thread ends, and a program with
/// hundreds of goroutines blocked in plain system calls has as many Ms: an
/// unbounded count would eat into a default descriptor limit of 1,024. The
/// Ms that hold a P, the ones probed again and again, are at most
/// GOMAXPROCS at a time; past the cap, rule 3 alone decides for the rest
/// (`runtime/retake.rs`).
pub(crate) const STAT_FILES_MAX: usize = 32;
/// Stat files held open now. Relaxed: only a count; an open that would
/// pass the cap takes its increment back, so at most the cap are held.
static STAT_FILES: AtomicUsize = AtomicUsize::new(0);

/// `M::p_id` when the M holds no P.
pub(crate) const NO_P: u32 = u32::MAX;
/// Stack size of M threads (the scheduler's g0 stack).
const M_STACK_SIZE: usize = 256 * 1024;

// SAFETY: `p`, `nextp` and `rand` follow the ownership rules in the module
// note (own thread only, or handed over through the park note); the rest are
// atomics.
unsafe impl Sync for M {}
// SAFETY: as above.
unsafe impl Send for M {}

thread_local! {
    static CURRENT: Cell<*const M> = const { Cell::new(ptr::null()) };
}

/// The M of the calling thread, if it is one of the runtime's threads.
///
/// Immune by construction to the compiler's thread-local hazard
/// (docs/soundness.md, "The compiler's side"): a goroutine can resume on
/// another thread after any runtime call, and LLVM may reuse a
/// thread-local's address within one function. This function is out of
/// line (`#[inline(never)]`, kept under LTO) and loads through the address
/// it computes, with no switch point inside; a load cannot be merged across
/// the switch, which writes memory, so every call reads the slot of the
/// thread it runs on. Every lookup of the current M, G and P goes through
/// here (or through [`current_locals_inline`], inside such a function).
#[inline(never)]
pub(crate) fn current() -> Option<&'static M> {
    let m = CURRENT.with(|c| c.get());
    // SAFETY: CURRENT only ever holds a leaked (never freed) M.
    unsafe { m.as_ref() }
}

/// The calling thread's M, looked up once by the entry gate
/// (`runtime::entry::call_here`) and passed down a runtime call's hot path
/// (preemption check, channel operation, `ready`, `park`) instead of being
/// looked up again at each step: a ping-pong round trip made 18 lookups
/// before, 4 now.
///
/// Valid only until the goroutine next leaves its thread: a park, a yield
/// or a preemption may resume it on another M. Code that holds a `Here`
/// must not use it after such a switch: it passes it to at most one
/// `park` or yield, as its last use, and takes the fresh one that
/// `preempt::check_here` returns.
#[derive(Clone, Copy)]
pub(crate) struct Here(Option<&'static M>);

impl Here {
    /// Looks the calling thread's M up now (for callers without a gate's
    /// `Here`).
    #[inline]
    pub(crate) fn lookup() -> Here {
        Here(current())
    }

    /// From an M the caller has just looked up on its own thread.
    #[inline(always)]
    pub(crate) fn of(m: Option<&'static M>) -> Here {
        Here(m)
    }

    /// The calling thread's M (None on a plain thread).
    #[inline(always)]
    pub(crate) fn m(self) -> Option<&'static M> {
        self.debug_check();
        self.0
    }

    /// The goroutine running on the calling thread, if any.
    #[inline(always)]
    pub(crate) fn g(self) -> Option<&'static G> {
        self.m().and_then(|m| m.curg())
    }

    /// Debug builds: this `Here` is still the calling thread's (it was not
    /// kept across a switch that moved the goroutine).
    #[inline(always)]
    fn debug_check(self) {
        #[cfg(debug_assertions)]
        {
            let now = current().map(|m| m as *const M);
            assert!(
                self.0.map(|m| m as *const M) == now,
                "a stale m::Here: the goroutine moved to another M since the lookup"
            );
        }
    }

    /// Runs `f` on the local state of this M's P, if it holds one (as
    /// [`current_p_local`]).
    #[inline]
    pub(crate) fn p_local<R>(self, f: impl FnOnce(&mut crate::p::PLocal) -> R) -> Option<R> {
        let m = self.m()?;
        // SAFETY: m is the calling thread's own M.
        let pp = unsafe { m.p() }?;
        // SAFETY: a short exclusive borrow; no caller holds another one.
        Some(f(unsafe { pp.local() }))
    }
}

/// Runs `f` on the local state of the calling thread's P, if it holds one.
/// Callers must not hold another borrow of that state (see `PHandle::local`).
#[inline]
pub(crate) fn current_p_local<R>(f: impl FnOnce(&mut crate::p::PLocal) -> R) -> Option<R> {
    Here::lookup().p_local(f)
}

/// The goroutine running on the calling thread, if any.
#[inline]
pub(crate) fn current_g() -> Option<&'static G> {
    current().and_then(|m| m.curg())
}

/// The locals map of the goroutine running on the calling thread (null on
/// a thread outside the runtime, or while its M runs no goroutine), with the
/// thread-local read inlined into the caller: for the hot lookup of
/// `local::caller_map`. Only for use inside an out-of-line function that
/// makes no runtime call (so cannot resume on another thread) between this
/// lookup and its return: the compiler may then reuse the thread-local
/// address only within that one call. Two dependent loads, the thread's M
/// and its `locals`, with the same hazard as [`current_g`]'s two under
/// asynchronous preemption (see [`current_g_checked`]).
#[inline(always)]
pub(crate) fn current_locals_inline() -> *mut u8 {
    let m = CURRENT.with(|c| c.get());
    // SAFETY: CURRENT only ever holds a leaked (never freed) M.
    unsafe { m.as_ref() }.map_or(ptr::null_mut(), |m| m.locals())
}

/// The running goroutine, looked up safely from code that may be preempted
/// asynchronously *during* the lookup (a preemptible region; the runtime's
/// own guards and region markers use it, as does `current_id`).
///
/// [`current_g`] reads the thread's M, then the M's `curg`. Stopped between
/// the two reads and resumed on another thread, it would read the *old*
/// thread's `curg`: another goroutine, or none. So each answer is checked
/// against the caller's stack pointer, which moves with the goroutine: a G
/// is accepted only if the caller runs on that G's stack, "none" only if it
/// runs on the M's own thread stack (g0); otherwise the lookup is repeated,
/// now on the new thread. A second preemption inside the same few
/// instructions would need another whole time slice to pass there; the
/// loop is bounded anyway.
#[inline(never)]
pub(crate) fn current_g_checked() -> Option<&'static G> {
    let mut tries = 0;
    loop {
        // A plain thread never becomes an M, and goroutines run only on Ms.
        let m = current()?;
        let g = m.curg();
        let here = 0u8;
        let sp = std::hint::black_box(&here) as *const u8 as usize;
        let ok = match g {
            Some(g) => g.stack_range().is_some_and(|(lo, hi)| sp >= lo && sp < hi),
            None => {
                let hi = m.g0_hi.load(Ordering::Relaxed);
                sp <= hi && sp > hi.saturating_sub(M_STACK_SIZE)
            }
        };
        tries += 1;
        if ok || tries == 8 {
            return g;
        }
    }
}

/// Async-signal-safe lookup for the stack-overflow handler: if `addr` is in
/// the guard page of the goroutine running on this thread, its id and size.
pub(crate) fn overflow_lookup(addr: usize) -> Option<(u64, usize)> {
    // `try_with` on a const-initialised Cell without a destructor is a plain
    // thread-local load: no allocation, no lock.
    let m = CURRENT.try_with(|c| c.get()).ok()?;
    // SAFETY: CURRENT only ever holds a leaked M.
    let m = unsafe { m.as_ref() }?;
    let g = m.curg()?;
    g.overflowed_at(addr).map(|size| (g.id(), size))
}

/// The calling thread's M, for the asynchronous-preemption signal handler:
/// async-signal-safe, as `overflow_lookup`.
#[cfg_attr(
    not(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    )),
    allow(dead_code)
)] // asynchronous preemption is x86-64 and aarch64 Linux only
pub(crate) fn current_in_signal() -> Option<&'static M> {
    let m = CURRENT.try_with(|c| c.get()).ok()?;
    // SAFETY: CURRENT only ever holds a leaked M.
    unsafe { m.as_ref() }
}

impl M {
    fn new(id: u64) -> &'static M {
        Box::leak(Box::new(M {
            id,
            p: UnsafeCell::new(None),
            nextp: UnsafeCell::new(None),
            spinning: AtomicBool::new(false),
            curg: AtomicPtr::new(ptr::null_mut()),
            locals: AtomicPtr::new(ptr::null_mut()),
            park: Note::new(),
            rand: Cell::new(0x9E37_79B9_7F4A_7C15 ^ id.wrapping_mul(0xA24B_AED4_963E_E407)),
            tid: AtomicI32::new(0),
            oldp: Cell::new(None),
            syscall_tsc: Cell::new(0),
            switch_in: AtomicU64::new(0),
            last_out: Cell::new(0),
            p_id: AtomicU32::new(NO_P),
            parks: AtomicU64::new(0),
            wakes: AtomicU64::new(0),
            lockedg: Cell::new(None),
            dead: AtomicBool::new(false),
            async_preempt: AtomicBool::new(false),
            preempt_sent_at: AtomicI64::new(0),
            sigmask: AtomicU64::new(0),
            g0_hi: AtomicUsize::new(0),
            revoke: revoke::Revoke::new(),
            revoked_hog: std::sync::atomic::AtomicBool::new(false),
            cpu_clock: AtomicI32::new(-1),
            stat: Mutex::new(StatSlot::Unopened),
            trace_buf: AtomicPtr::new(crate::tracer::no_buf()),
        }))
    }

    /// The tracer's buffer slot of this M (see the field).
    #[inline(always)]
    pub(crate) fn trace_buf(&self) -> &AtomicPtr<()> {
        &self.trace_buf
    }

    /// The running goroutine, read on this M's own thread (the M wrote
    /// it).
    #[inline]
    pub(crate) fn curg(&self) -> Option<&'static G> {
        // SAFETY: curg is null or a leaked (never freed) G.
        unsafe { self.curg.load(Ordering::Relaxed).as_ref() }
    }

    /// The running goroutine, read from another thread (sysmon, schedtrace,
    /// the goroutine counts). Acquire, pairing with `set_curg`'s Release:
    /// the G's fields are then at least as new as when this M took the G
    /// from a run queue, its first initialisation (`G::alloc`'s plain write
    /// of the record) included. With a Relaxed read ThreadSanitizer
    /// reported sysmon's `g.id()` of a goroutine's first run as racing
    /// with that write (tests/trace.rs).
    #[inline]
    pub(crate) fn curg_from_outside(&self) -> Option<&'static G> {
        // SAFETY: curg is null or a leaked (never freed) G.
        unsafe { self.curg.load(Ordering::Acquire).as_ref() }
    }

    /// Sets the running goroutine's locals map (see the field).
    #[inline]
    pub(crate) fn set_locals(&self, p: *mut u8) {
        self.locals.store(p, Ordering::Relaxed)
    }

    /// The running goroutine's locals map, null if none runs.
    #[inline]
    pub(crate) fn locals(&self) -> *mut u8 {
        self.locals.load(Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn set_curg(&self, g: Option<&'static G>) {
        let p = g.map_or(ptr::null_mut(), |g| g as *const G as *mut G);
        // Release: see `curg_from_outside` (a plain `mov` on x86-64).
        self.curg.store(p, Ordering::Release)
    }

    #[inline]
    pub(crate) fn is_spinning(&self) -> bool {
        self.spinning.load(Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn set_spinning(&self, s: bool) {
        self.spinning.store(s, Ordering::Relaxed)
    }

    /// The thread's kernel id (0 until it has started; see the field).
    pub(crate) fn tid(&self) -> i32 {
        self.tid.load(Ordering::Relaxed)
    }

    /// The id of the P this M holds, if any, as seen from any thread (a
    /// snapshot: it may change at once).
    #[inline]
    pub(crate) fn p_id(&self) -> Option<u32> {
        let id = self.p_id.load(Ordering::Relaxed);
        (id != NO_P).then_some(id)
    }

    /// The thread's CPU-time clock, once started.
    pub(crate) fn cpu_clock(&self) -> Option<libc::clockid_t> {
        let c = self.cpu_clock.load(Ordering::Relaxed);
        (c != -1).then_some(c)
    }

    /// The thread's scheduler state letter (`R` running or runnable, `S`
    /// sleeping, ...), `None` if it cannot be read (the thread has not
    /// started or has ended, or its stat file could not be opened: a full
    /// descriptor table, no `/proc`, [`STAT_FILES_MAX`] reached). The
    /// first call opens the thread's stat file, which stays open until the
    /// thread ends: see `sys::procfs` for why it is never opened per read.
    pub(crate) fn thread_state(&self) -> Option<u8> {
        // Held for one open or read at most; the only other user is the
        // thread itself as it ends.
        let mut slot = self.stat.lock().unwrap_or_else(|e| e.into_inner());
        if matches!(*slot, StatSlot::Unopened) {
            let tid = self.tid();
            if tid == 0 {
                return None;
            }
            // At most `STAT_FILES_MAX` held at once (see there); the slot
            // stays unopened, so a later probe tries again.
            if STAT_FILES.fetch_add(1, Ordering::Relaxed) >= STAT_FILES_MAX {
                STAT_FILES.fetch_sub(1, Ordering::Relaxed);
                return None;
            }
            let Some(f) = crate::sys::procfs::StatFile::open(tid) else {
                STAT_FILES.fetch_sub(1, Ordering::Relaxed);
                return None;
            };
            *slot = StatSlot::Open(f);
        }
        match &*slot {
            StatSlot::Open(f) => f.state(),
            _ => None,
        }
    }

    /// The P this M holds.
    ///
    /// # Safety
    /// Only on this M's own thread.
    #[inline]
    pub(crate) unsafe fn p(&self) -> Option<&PHandle> {
        // Debug builds: the M is in runtime code (its handshake word is
        // odd: `runtime::entry`'s gate), or its P could be revoked under it.
        debug_assert!(
            self.revoke.in_runtime() || std::thread::panicking(),
            "M{}: runtime code outside the entry gate (its P could be revoked)",
            self.id
        );
        // SAFETY: own-thread access (caller's contract); no &mut is live.
        unsafe { (*self.p.get()).as_ref() }
    }

    /// Takes ownership of `pp` (Go's acquirep).
    ///
    /// # Safety
    /// Only on this M's own thread, which must hold no P.
    pub(crate) unsafe fn acquirep(&'static self, pp: PHandle) {
        pp.set_status(PStatus::Running);
        self.p_id.store(pp.id, Ordering::Relaxed);
        if crate::tracer::on() {
            crate::tracer::proc_start(pp.id);
        }
        pp.set_m(Some(self));
        // SAFETY: own-thread access (caller's contract).
        let slot = unsafe { &mut *self.p.get() };
        debug_assert!(slot.is_none());
        *slot = Some(pp);
    }

    /// Gives up the P (Go's releasep).
    ///
    /// # Safety
    /// Only on this M's own thread, which must hold a P.
    pub(crate) unsafe fn releasep(&self) -> PHandle {
        // SAFETY: own-thread access (caller's contract).
        let pp = unsafe { (*self.p.get()).take() };
        let pp = pp.expect("releasep: M holds no P");
        self.p_id.store(NO_P, Ordering::Relaxed);
        if crate::tracer::on() {
            crate::tracer::proc_stop(pp.id);
        }
        pp.set_m(None);
        pp
    }

    /// A revoker took this M's P (`runtime::retake`): the M no longer holds
    /// it, as other threads see. Called by the revoker between a successful
    /// `revoke.begin` and `revoke.finish`, while the M cannot enter the
    /// runtime; the M's own slot still holds the old handle until
    /// [`forget_revoked_p`](Self::forget_revoked_p).
    pub(crate) fn mark_p_revoked(&self) {
        self.p_id.store(NO_P, Ordering::Relaxed);
    }

    /// Own thread, after the handshake reported its P taken: drops the stale
    /// handle without running anything on it (the revoker's new handle owns
    /// the P now).
    ///
    /// # Safety
    /// Only on this M's own thread, after `revoke.wait_decision()` returned
    /// true.
    pub(crate) unsafe fn forget_revoked_p(&self) {
        // SAFETY: own-thread access (caller's contract).
        // PHandle has no destructor: discarding the stale handle runs
        // nothing on the P.
        let stale = unsafe { (*self.p.get()).take() };
        debug_assert!(stale.is_some(), "revoked M held no P");
    }

    /// Hands `pp` to this parked M (Go's `nextp`: a P wake-up or a locked-M
    /// switch); `wakeup` must follow.
    ///
    /// # Safety
    /// The M must be parked and off every list, so no one else touches nextp.
    pub(crate) unsafe fn set_nextp(&self, pp: PHandle, spinning: bool) {
        self.set_spinning(spinning);
        // SAFETY: the M is parked and owned by the caller (contract).
        unsafe { *self.nextp.get() = Some(pp) };
    }

    /// After waking: takes the P handed over by `set_nextp`.
    ///
    /// # Safety
    /// Only on this M's own thread, after `park.sleep()` returned.
    pub(crate) unsafe fn take_nextp(&self) -> Option<PHandle> {
        // SAFETY: published by the waker's Release wakeup, observed by our
        // Acquire sleep; no one else touches it now.
        unsafe { (*self.nextp.get()).take() }
    }

    /// The goroutine locked to this M (own thread only).
    pub(crate) fn lockedg(&self) -> Option<&'static G> {
        self.lockedg.get()
    }

    pub(crate) fn set_lockedg(&self, g: Option<&'static G>) {
        self.lockedg.set(g);
    }

    /// Whether this M's thread has ended.
    pub(crate) fn is_dead(&self) -> bool {
        self.dead.load(Ordering::Relaxed)
    }

    pub(crate) fn set_dead(&self) {
        self.dead.store(true, Ordering::Relaxed);
    }

    /// Remembers the P left behind by a system call (own thread only).
    pub(crate) fn set_oldp(&self, p: Option<&'static crate::p::P>) {
        self.oldp.set(p);
    }

    /// Takes the P left behind by a system call (own thread only).
    pub(crate) fn take_oldp(&self) -> Option<&'static crate::p::P> {
        self.oldp.take()
    }

    /// Notes when a system call begins (own thread only).
    #[inline]
    pub(crate) fn set_syscall_tsc(&self, t: u64) {
        self.syscall_tsc.set(t)
    }

    /// When the running system call began (own thread only).
    #[inline]
    pub(crate) fn syscall_tsc(&self) -> u64 {
        self.syscall_tsc.get()
    }

    /// Notes when the goroutine about to run switched in (see the field).
    #[inline(always)]
    pub(crate) fn set_switch_in(&self, t: u64) {
        self.switch_in.store(t, Ordering::Relaxed)
    }

    /// Takes the last switch-out's time, leaving 0 (see the field).
    #[inline(always)]
    pub(crate) fn take_last_out(&self) -> u64 {
        self.last_out.replace(0)
    }

    /// Notes the last switch-out's time (see the field; 0: none).
    #[inline(always)]
    pub(crate) fn set_last_out(&self, t: u64) {
        self.last_out.set(t)
    }

    /// When the running goroutine switched in (see the field).
    #[inline]
    pub(crate) fn switch_in(&self) -> u64 {
        self.switch_in.load(Ordering::Relaxed)
    }

    /// A per-M xorshift random number (steal order, randomized scheduling).
    pub(crate) fn fastrand(&self) -> u64 {
        let mut x = self.rand.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rand.set(x);
        x
    }
}

/// Creates a new M (an OS thread) that starts by running with `pp`, then
/// runs `main` (the scheduler loop: the runtime passes it in, so that m does
/// not depend on the scheduler). On failure the P is given back with the
/// error.
pub(crate) fn newm(
    id: u64,
    pp: PHandle,
    spinning: bool,
    main: fn(&'static M),
) -> Result<&'static M, (io::Error, PHandle)> {
    let m = M::new(id);
    // SAFETY: the M is new and not yet running; nobody else can see it.
    unsafe { m.set_nextp(pp, spinning) };
    let r = std::thread::Builder::new()
        .name(format!("goroutine-m{id}"))
        .stack_size(M_STACK_SIZE)
        .spawn(move || mstart(m, main));
    match r {
        Ok(_) => Ok(m),
        Err(e) => {
            // SAFETY: the thread never started, so we are the only user of
            // `m` and nextp is still the P we put there.
            let pp = unsafe { m.take_nextp() }.expect("nextp vanished");
            Err((e, pp))
        }
    }
}

/// The body of every M thread: sets the thread up, takes the P it was
/// given, runs `main`.
fn mstart(m: &'static M, main: fn(&'static M)) {
    let marker = 0u8;
    m.g0_hi.store(
        std::hint::black_box(&marker) as *const u8 as usize,
        Ordering::Relaxed,
    );
    CURRENT.with(|c| c.set(m));
    m.tid.store(crate::sys::gettid(), Ordering::Relaxed);
    if let Some(c) = crate::sys::thread::current_cpu_clock() {
        m.cpu_clock.store(c, Ordering::Relaxed);
    }
    m.sigmask
        .store(crate::sys::current_sigmask(), Ordering::Relaxed);
    if let Err(e) = crate::sys::overflow::install_altstack_for_current_thread() {
        eprintln!(
            "goroutine: M{}: no alternate signal stack ({e}); stack overflows will not be reported",
            m.id
        );
    }
    // SAFETY: we are this M's thread and hold no P yet; nextp was set before
    // the thread was spawned (happens-before through thread spawn).
    unsafe {
        let pp = m.take_nextp().expect("mstart without a P");
        m.acquirep(pp);
    }
    main(m);
    // A goroutine exited while locked to this thread: the thread ends.
    let was = std::mem::replace(
        &mut *m.stat.lock().unwrap_or_else(|e| e.into_inner()),
        StatSlot::Closed,
    );
    if matches!(was, StatSlot::Open(_)) {
        STAT_FILES.fetch_sub(1, Ordering::Relaxed);
    }
    CURRENT.with(|c| c.set(ptr::null()));
}
