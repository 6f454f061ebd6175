//! The global stack pool: slabs from the OS, guard pages, per-class free
//! and warm lists (the module note of `g::stack` has the levels and
//! invariants).
//!
//! # Giving memory back after a burst
//!
//! Go keeps the stacks of exited goroutines in its pools and returns their
//! pages with the heap's background scavenger, paced to a small share of a
//! CPU. Here sysmon plays the scavenger ([`release_excess`]), and no exit
//! makes a system call for it:
//!
//! - while exits keep spilling to the pool (a burst in progress), sysmon
//!   releases `PACED_CHUNK` stacks per pace since its last release, at
//!   most `RELEASE_CHUNK` per look. The pace is 1 ms, or longer where
//!   releasing a chunk takes more than 1/50 of it: like Go's scavenger,
//!   the release uses at most 2% of a CPU while the program is busy. Every
//!   release is a TLB shootdown of each CPU that runs an M, and its page
//!   freeing runs on a CPU the Ms need: at full speed during the burst
//!   these slowed the exits themselves (docs/bench/history.md has the
//!   measurements);
//! - once a sysmon cycle sees no new spill, it releases `RELEASE_CHUNK`
//!   per cycle and skips its naps until done;
//! - an exit releases only if sysmon has not looked at the pool for
//!   `RELEASER_STALL_NS` with more than `WARM_HARD_MAX` waiting.
//!
//! The warm list can never hold more stacks than were live at once, so
//! what waits is the program's own peak, held until its burst is over.
//!
//! # Guard pages and the kernel fallback
//!
//! On Linux >= 6.13 a guard is `madvise(MADV_GUARD_INSTALL)` on the page: a
//! page-table marker that does not split the mapping, so a slab of 256
//! guarded stacks stays one memory mapping (and adjacent slabs usually merge).
//! Support is probed on the first guard a pool installs: `EINVAL` (older
//! kernels; also `mlock`ed memory) switches the pool to `mprotect(PROT_NONE)`
//! per guard for good. That fallback splits the mapping around every guard,
//! so each stack costs about two of the `vm.max_map_count` (default 65530)
//! mappings a process may have, i.e. about 32 thousand stacks. Hitting the
//! limit returns an [`io::ErrorKind::OutOfMemory`] error that says so and how
//! to raise it. `GOROUTINE_STACK_GUARD=mprotect` forces the fallback (tests,
//! mimicking old kernels). Guard markers keep a page-table page alive per
//! 2 MiB of parked stacks.
//!
//! Guards of freshly carved stacks are installed a refill batch at a time:
//! one `process_madvise(PIDFD_SELF, [guard pages], MADV_GUARD_INSTALL)`
//! instead of one `madvise` per stack (Linux >= 6.14; on older kernels the
//! first batch fails and the pool installs guards one by one for good, which
//! `kernel_without_batched_madvise_installs_guards_one_by_one` simulates).
//! The first guard of a pool is always installed alone, to settle the mode.

use super::*;

// ---------------------------------------------------------------------------
// Global pool
// ---------------------------------------------------------------------------

/// How a pool decides between guard implementations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum GuardPolicy {
    /// `MADV_GUARD_INSTALL` if the kernel has it, unless
    /// `GOROUTINE_STACK_GUARD=mprotect`.
    FromEnv,
    /// `MADV_GUARD_INSTALL` if the kernel has it.
    #[cfg_attr(not(test), allow(dead_code))]
    Auto,
    /// Always `mprotect(PROT_NONE)`.
    #[cfg_attr(not(test), allow(dead_code))]
    ForceMprotect,
}

/// The guard implementation a pool settled on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum GuardMode {
    /// No guard installed yet.
    Unknown,
    /// `MADV_GUARD_INSTALL` works.
    Madvise,
    /// `mprotect(PROT_NONE)`; `forced` by the environment or a test.
    Mprotect { forced: bool },
}

/// The stacks of one size class.
pub(super) struct Class {
    pub(super) usable: usize,
    /// Tops of released stacks ready for reuse (LIFO).
    pub(super) free: Vec<NonZeroUsize>,
    /// Tops of stacks spilled from a P cache without a release, newest at
    /// the back (taken LIFO), in the same state as cached ones: only their
    /// kept top region (and deep pages the heuristic missed) may be
    /// resident. Past `2 * WARM_MAX` the oldest (at the front) are released
    /// (down to `WARM_MAX`) and move to `free`: by sysmon if the pool has a
    /// background releaser, else (or past `WARM_HARD_MAX` with sysmon
    /// stalled) by the thread that spilled.
    pub(super) warm: VecDeque<NonZeroUsize>,
    /// Guard address of the next slot to carve from the current slab.
    pub(super) next: usize,
    /// End of the carvable part of the current slab (`next == end`: none left).
    pub(super) end: usize,
}

pub(super) struct PoolInner {
    pub(super) mode: GuardMode,
    /// Whether guards and probe windows are set up in batches
    /// (`Pool::carve_batch`); cleared for good when the kernel refuses.
    pub(super) batch: bool,
    pub(super) classes: Vec<Class>,
    /// When (`nanotime`) the background releaser last looked at the pool,
    /// or a spill last asked it to (whichever is later), for the stall
    /// check (`RELEASER_STALL_NS`).
    pub(super) releaser_seen: i64,
    /// When the background releaser last released a chunk (its pace).
    pub(super) released_at: i64,
    /// How long (ns) releasing `PACED_CHUNK` stacks took at the last
    /// release, for the streaming pace (`RELEASE_BUDGET_DIV`).
    pub(super) chunk_cost: i64,
    /// Spills to a warm list so far, and as many as the releaser had seen
    /// at its last look: a difference means exits are streaming in.
    pub(super) spills: u64,
    pub(super) spills_seen: u64,
    /// Every slab, `(addr, len)`, for diagnostics and tests.
    pub(super) slabs: Vec<(usize, usize)>,
}

/// The global level of the stack pool (module note): free lists per size
/// class and the slabs stacks are carved from.
pub(super) struct Pool {
    pub(super) policy: GuardPolicy,
    pub(super) inner: Mutex<PoolInner>,
    /// A background thread (sysmon) releases excess warm stacks
    /// ([`Pool::release_excess`]); set once, when it starts.
    pub(super) background: AtomicBool,
    /// Some class has more than `2 * WARM_MAX` warm stacks: the background
    /// releaser's cue (a hint: it re-checks under the lock).
    pub(super) excess: AtomicBool,
    /// The releaser left work for later because exits were streaming in:
    /// it naps as usual instead of coming straight back (a hint).
    pub(super) paced: AtomicBool,
}

pub(super) static GLOBAL: Pool = Pool::new(GuardPolicy::FromEnv);

/// The releaser's wake-up (sysmon's `wake_from_nap`), registered by
/// [`release_in_background`]: the stack cache lives below the scheduler
/// and reaches it only through this hook (HACKING.md, "Layers").
pub(super) static RELEASER_WAKE: OnceLock<fn()> = OnceLock::new();

/// From now on, excess warm stacks of the runtime's pool are released by
/// whoever calls [`release_excess`] (sysmon, each cycle), not on the
/// goroutine exit that spilled them (see `WARM_HARD_MAX`); the first spill
/// past the bound calls `wake` to end the releaser's nap.
pub(crate) fn release_in_background(wake: fn()) {
    let _ = RELEASER_WAKE.set(wake);
    GLOBAL.background.store(true, Ordering::Relaxed);
}

/// Whether the runtime's pool has warm stacks waiting for
/// [`release_excess`] (sysmon checks before it naps; see
/// `sysmon::wake_from_nap` for the ordering).
#[inline]
pub(crate) fn release_pending() -> bool {
    GLOBAL.excess.load(Ordering::SeqCst)
}

/// Whether the pending release waits for its pace (exits were streaming in
/// at sysmon's last look): sysmon then naps as usual rather than at once.
#[inline]
pub(crate) fn release_paced() -> bool {
    GLOBAL.paced.load(Ordering::Relaxed)
}

/// sysmon's part of [`release_in_background`]: a flag load when there is
/// nothing to release.
#[inline]
pub(crate) fn release_excess() {
    if GLOBAL.excess.load(Ordering::Relaxed) {
        GLOBAL.release_excess();
    }
}

impl Pool {
    pub(super) const fn new(policy: GuardPolicy) -> Pool {
        Pool {
            policy,
            inner: Mutex::new(PoolInner {
                mode: GuardMode::Unknown,
                batch: true,
                classes: Vec::new(),
                releaser_seen: 0,
                released_at: -RELEASE_PACE_NS,
                chunk_cost: 0,
                spills: 0,
                spills_seen: 0,
                slabs: Vec::new(),
            }),
            background: AtomicBool::new(false),
            excess: AtomicBool::new(false),
            paced: AtomicBool::new(false),
        }
    }

    /// If some class went past `2 * WARM_MAX` warm stacks (or the last call
    /// left work), releases the oldest warm stacks past `WARM_MAX`: at most
    /// [`RELEASE_CHUNK`] once exits have stopped spilling since the last
    /// call, else [`PACED_CHUNK`] per pace since the last release (up to
    /// `RELEASE_CHUNK`; the pace is [`RELEASE_PACE_NS`], or
    /// [`RELEASE_BUDGET_DIV`] times the last chunk's cost if longer). The
    /// request stays up while more are
    /// left. The system calls run without the pool lock.
    pub(super) fn release_excess(&self) {
        if !self.excess.swap(false, Ordering::Relaxed) {
            return;
        }
        let now = crate::sys::time::nanotime();
        let mut inner = self.lock();
        inner.releaser_seen = now;
        let streaming = inner.spills != inner.spills_seen;
        inner.spills_seen = inner.spills;
        // While streaming: the chunks due since the last release, so that
        // sysmon's longer naps (up to 10 ms) keep the same pace, which is
        // stretched to keep the release within its share of a CPU.
        let pace = RELEASE_PACE_NS.max(inner.chunk_cost.saturating_mul(RELEASE_BUDGET_DIV));
        let paces = (now - inner.released_at) / pace;
        let mut left = if streaming {
            (paces.max(0) as usize)
                .saturating_mul(PACED_CHUNK)
                .min(RELEASE_CHUNK)
        } else {
            RELEASE_CHUNK
        };
        for ci in 0..inner.classes.len() {
            let class = &mut inner.classes[ci];
            let n = class.warm.len().saturating_sub(WARM_MAX).min(left);
            if n == 0 {
                continue;
            }
            left -= n;
            let usable = class.usable;
            let old: Vec<NonZeroUsize> = class.warm.drain(..n).collect();
            inner.released_at = now;
            drop(inner);
            let start = crate::sys::time::nanotime();
            release_coalesced(&old, usable);
            let took = crate::sys::time::nanotime() - start;
            inner = self.lock();
            inner.chunk_cost = took.saturating_mul(PACED_CHUNK as i64) / n as i64;
            inner.classes[ci].free.extend(old);
        }
        if inner.classes.iter().any(|c| c.warm.len() > WARM_MAX) {
            // The rest in later cycles; while exits stream in, sysmon naps
            // between them (`release_paced`), else it skips its nap.
            self.paced.store(streaming, Ordering::Relaxed);
            self.excess.store(true, Ordering::SeqCst);
        }
    }

    /// A private pool for tests (leaked: stacks point at their pool).
    #[cfg(test)]
    pub(super) fn leak(policy: GuardPolicy) -> &'static Pool {
        Box::leak(Box::new(Pool::new(policy)))
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, PoolInner> {
        // The pool's state is consistent between statements that can panic
        // (only allocation can), so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A stack of `usable` bytes (rounded up to the page size).
    pub(super) fn get(&'static self, usable: usize) -> io::Result<Stack> {
        let usable = validate_stack_size(usable)?;
        let mut inner = self.lock();
        let ci = inner.class(usable);
        let top = self.pop_or_carve(&mut inner, ci)?;
        Ok(Stack {
            top,
            usable,
            pool: self,
        })
    }

    /// Fills `out` with the tops of stacks of `usable` bytes (guards
    /// installed, pages released) now owned by the caller; returns how many
    /// (at most `out.len()`), failing only if it could not get a single one.
    pub(super) fn take(&self, usable: usize, out: &mut [NonZeroUsize]) -> io::Result<usize> {
        let mut inner = self.lock();
        let ci = inner.class(usable);
        let mut i = 0;
        // Released and fresh stacks whose top page and probe window are to
        // be mapped (see `carve_batch`), once the lock is dropped.
        let mut to_map = ToMap::new();
        while i < out.len() {
            let class = &mut inner.classes[ci];
            let top = if let Some(top) = class.warm.pop_back() {
                top
            } else if let Some(top) = class.free.pop() {
                to_map.add(top, usable);
                top
            } else {
                break;
            };
            out[i] = top;
            i += 1;
        }
        if inner.mode == GuardMode::Madvise && inner.batch {
            while i < out.len() {
                match self.carve_batch(&mut inner, ci, &mut out[i..], &mut to_map) {
                    Ok(n) => i += n,
                    Err(e) if i == 0 => return Err(e),
                    Err(_) => break,
                }
            }
            // The stacks in `out` are the caller's now: the page work (the
            // bulk of a refill's time, a page allocation per stack) runs
            // without the pool lock, so that Ps refilling at once do not
            // queue behind each other's system calls.
            drop(inner);
            to_map.populate();
            return Ok(i);
        }
        // One guard at a time: the guard mode is not settled yet (the first
        // refill), or the kernel cannot batch. The warm and free lists are
        // empty here, so these are fresh stacks, mapped as above.
        let mut n = out.len();
        for (j, slot) in out.iter_mut().enumerate().skip(i) {
            match self.pop_or_carve(&mut inner, ci) {
                Ok(top) => {
                    *slot = top;
                    to_map.add(top, usable);
                }
                Err(e) if j == 0 => return Err(e),
                Err(_) => {
                    n = j;
                    break;
                }
            }
        }
        drop(inner);
        to_map.populate();
        Ok(n)
    }

    /// Carves up to `out.len()` new stacks from class `ci`'s current slab (a
    /// new one if it is used up) with their guards installed by one batched
    /// `MADV_GUARD_INSTALL` (`mem::madvise_batch`) instead of one `madvise`
    /// per stack. Their probe windows are to be mapped to the zero page by one
    /// batched `MADV_POPULATE_READ` (the caller does it, from `to_map`, once
    /// it has dropped the pool lock): a fresh stack's first `StackCache::put`
    /// then reads its window without a page fault (a burst of a million
    /// goroutines exiting paid one fault each). The zero page costs no
    /// memory and the window shares its page-table page with the stack's
    /// top. Only in `GuardMode::Madvise`; a kernel without batching (Linux <
    /// 6.14) switches the pool to one `madvise` per guard for good.
    pub(super) fn carve_batch(
        &self,
        inner: &mut PoolInner,
        ci: usize,
        out: &mut [NonZeroUsize],
        to_map: &mut ToMap,
    ) -> io::Result<usize> {
        let page = mem::page_size();
        let usable = inner.classes[ci].usable;
        let stride = usable + page;
        if inner.classes[ci].next == inner.classes[ci].end {
            self.new_slab(inner, ci)?;
        }
        let class = &mut inner.classes[ci];
        let n = out.len().min(BATCH).min((class.end - class.next) / stride);
        // A refill's worth (`BATCH`), not `mem::BATCH_MAX`: this runs on
        // the spawning goroutine's stack, whose pages are what we save.
        let mut guards = [(0usize, 0usize); BATCH];
        for (k, g) in guards[..n].iter_mut().enumerate() {
            *g = (class.next + k * stride, page);
        }
        class.next += n * stride;
        // SAFETY: fresh guard slots of our slab (past the old bump pointer,
        // below its end), holding nothing.
        let done = match unsafe { mem::madvise_batch(&guards[..n], mem::MADV_GUARD_INSTALL) } {
            Ok(done) => done,
            Err(_) => {
                inner.batch = false;
                0
            }
        };
        // The rest one by one (this also reports a real error properly).
        for k in done..n {
            if let Err(e) = self.install_guard(&mut inner.mode, guards[k].0, page) {
                // Slots k.. hold no guard: hand them out later.
                inner.classes[ci].next = guards[k].0;
                if k == 0 {
                    return Err(e);
                }
                return finish_batch(usable, &guards[..k], out, to_map);
            }
        }
        finish_batch(usable, &guards[..n], out, to_map)
    }

    /// Puts stacks (by top address) of `usable` bytes back: on the free
    /// list if `released`, else on the warm list (spilled from a cache),
    /// releasing the oldest warm ones once there are too many.
    pub(super) fn give_back(
        &self,
        usable: usize,
        tops: impl Iterator<Item = NonZeroUsize>,
        released: bool,
    ) {
        let mut inner = self.lock();
        let ci = inner.class(usable);
        if released {
            inner.classes[ci].free.extend(tops);
            return;
        }
        inner.spills += 1;
        let class = &mut inner.classes[ci];
        class.warm.extend(tops);
        let len = class.warm.len();
        if len <= 2 * WARM_MAX {
            return;
        }
        let background = self.background.load(Ordering::Relaxed);
        if background {
            // sysmon releases them off any P (`release_in_background`);
            // the first spill past the bound wakes it from its nap.
            // SeqCst: the Dekker pairing with sysmon's nap (`wake_from_nap`).
            if !self.excess.swap(true, Ordering::SeqCst) {
                inner.releaser_seen = crate::sys::time::nanotime();
                self.paced.store(false, Ordering::Relaxed);
                drop(inner);
                if let Some(wake) = RELEASER_WAKE.get() {
                    wake();
                }
                return;
            }
            if len <= WARM_HARD_MAX
                || crate::sys::time::nanotime() - inner.releaser_seen <= RELEASER_STALL_NS
            {
                return;
            }
        }
        // No releaser, or it stalled: release here. In the second case only
        // a bounded chunk past the hard bound, so that no single exit makes
        // more than `SPILL_RELEASE_MAX` stacks' worth of system calls.
        let n = if background {
            (len - WARM_HARD_MAX + SPILL_RELEASE_MAX).min(len - WARM_MAX)
        } else {
            len - WARM_MAX
        };
        let old: Vec<NonZeroUsize> = inner.classes[ci].warm.drain(..n).collect();
        // The system calls run without the pool lock.
        drop(inner);
        release_coalesced(&old, usable);
        let mut inner = self.lock();
        inner.classes[ci].free.extend(old);
    }

    pub(super) fn pop_or_carve(
        &self,
        inner: &mut PoolInner,
        ci: usize,
    ) -> io::Result<NonZeroUsize> {
        if let Some(top) = inner.classes[ci].warm.pop_back() {
            return Ok(top);
        }
        if let Some(top) = inner.classes[ci].free.pop() {
            return Ok(top);
        }
        let page = mem::page_size();
        let stride = inner.classes[ci].usable + page;
        if inner.classes[ci].next == inner.classes[ci].end {
            self.new_slab(inner, ci)?;
        }
        let guard = inner.classes[ci].next;
        self.install_guard(&mut inner.mode, guard, page)?;
        inner.classes[ci].next += stride;
        // Above a slab start, so never zero.
        NonZeroUsize::new(guard + stride).ok_or_else(|| io::Error::other("null stack address"))
    }

    /// Maps a new slab for class `ci` and installs its top guard.
    pub(super) fn new_slab(&self, inner: &mut PoolInner, ci: usize) -> io::Result<()> {
        let page = mem::page_size();
        let stride = inner.classes[ci].usable + page;
        let n = (SLAB_MAX_BYTES / stride).clamp(1, SLAB_MAX_STACKS);
        let len = n * stride + page;
        let base = match mem::reserve(len) {
            Ok(p) => p.as_ptr() as usize,
            Err(e) => return Err(self.reserve_error(inner.mode, e, len)),
        };
        if let Err(e) = self.install_guard(&mut inner.mode, base + n * stride, page) {
            if let Some(p) = NonNull::new(base as *mut u8) {
                // SAFETY: we just mapped this slab and handed out nothing from it.
                let _ = unsafe { mem::unmap(p, len) };
            }
            return Err(e);
        }
        inner.slabs.push((base, len));
        let c = &mut inner.classes[ci];
        c.next = base;
        c.end = base + n * stride;
        Ok(())
    }

    /// Installs one guard page at `addr` (inside a slab, holding nothing),
    /// settling the pool's guard mode on first use.
    pub(super) fn install_guard(
        &self,
        mode: &mut GuardMode,
        addr: usize,
        len: usize,
    ) -> io::Result<()> {
        let Some(p) = NonNull::new(addr as *mut u8) else {
            return Err(io::Error::other("null guard address"));
        };
        if *mode == GuardMode::Unknown {
            *mode = match self.policy {
                GuardPolicy::ForceMprotect => GuardMode::Mprotect { forced: true },
                GuardPolicy::Auto => GuardMode::Madvise,
                GuardPolicy::FromEnv => {
                    let v = std::env::var_os(GUARD_ENV);
                    let (force, warning) =
                        guard_env_forces_mprotect(v.as_deref().map(|v| v.to_str().ok_or(v)));
                    if let Some(w) = warning {
                        eprintln!("{w}");
                    }
                    if force {
                        GuardMode::Mprotect { forced: true }
                    } else {
                        GuardMode::Madvise
                    }
                }
            };
        }
        if *mode == GuardMode::Madvise {
            // SAFETY: `addr..addr+len` is a page-aligned guard slot of one of
            // our slabs; it holds no object.
            match unsafe { mem::guard_install(p, len) } {
                Ok(()) => return Ok(()),
                Err(e) if guard_install_unsupported(&e) => {
                    *mode = GuardMode::Mprotect { forced: false };
                }
                Err(e) => return Err(e),
            }
        }
        let forced = *mode == GuardMode::Mprotect { forced: true };
        // SAFETY: as above; nothing will access the guard page.
        unsafe { mem::protect_none(p, len) }.map_err(|e| map_limit_error(e, forced, "mprotect"))
    }

    /// The error of a slab reservation that failed. Out of address space
    /// (`ENOMEM`, e.g. under `RLIMIT_AS`) it is the OS error itself, kind
    /// `OutOfMemory`: an error with a message allocates, and every
    /// goroutine that starts from now on fails the same way, each holding
    /// its error in its task cell until joined, so the messages would eat
    /// the last of the heap until an allocation aborted the process (as it
    /// did, 200,000 spawns under a 1 GiB limit) instead of the spawn's own
    /// clean `OutOfMemory` (`g::arena`'s note). `JoinError` says which
    /// goroutine could not start.
    pub(super) fn reserve_error(&self, mode: GuardMode, e: io::Error, _len: usize) -> io::Error {
        match mode {
            GuardMode::Mprotect { forced } => map_limit_error(e, forced, "mmap"),
            _ => e,
        }
    }

    #[cfg(test)]
    pub(super) fn mode(&self) -> GuardMode {
        self.lock().mode
    }

    #[cfg(test)]
    pub(super) fn slabs(&self) -> Vec<(usize, usize)> {
        self.lock().slabs.clone()
    }

    #[cfg(test)]
    pub(super) fn warm_len(&self, usable: usize) -> usize {
        let mut inner = self.lock();
        let ci = inner.class(usable);
        inner.classes[ci].warm.len()
    }

    #[cfg(test)]
    pub(super) fn free_len(&self, usable: usize) -> usize {
        let mut inner = self.lock();
        let ci = inner.class(usable);
        inner.classes[ci].free.len()
    }
}

impl PoolInner {
    /// The index of the class of `usable` bytes, created if needed.
    pub(super) fn class(&mut self, usable: usize) -> usize {
        if let Some(i) = self.classes.iter().position(|c| c.usable == usable) {
            return i;
        }
        self.classes.push(Class {
            usable,
            free: Vec::new(),
            warm: VecDeque::new(),
            next: 0,
            end: 0,
        });
        self.classes.len() - 1
    }
}

/// Whether a `MADV_GUARD_INSTALL` failure means "not available here".
pub(super) fn guard_install_unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EINVAL | libc::ENOSYS | libc::EPERM | libc::EOPNOTSUPP)
    )
}

/// Turns `ENOMEM` from `op` on the `mprotect` guard path into an error that
/// explains the memory-mapping limit.
pub(super) fn map_limit_error(e: io::Error, forced: bool, op: &str) -> io::Error {
    if e.raw_os_error() != Some(libc::ENOMEM) {
        return e;
    }
    io::Error::new(
        io::ErrorKind::OutOfMemory,
        map_limit_message(&e, forced, op, mem::max_map_count()),
    )
}

pub(super) fn map_limit_message(e: &io::Error, forced: bool, op: &str, max: Option<u64>) -> String {
    let why = if forced {
        format!("{GUARD_ENV}=mprotect forces mprotect guard pages")
    } else {
        "This kernel lacks MADV_GUARD_INSTALL (needs Linux >= 6.13)".to_owned()
    };
    let limit = match max {
        Some(n) => format!(
            "vm.max_map_count is {n}, which allows about {} stacks",
            n / 2
        ),
        None => "vm.max_map_count (unreadable here; 65530 by default) allows about half as \
                 many stacks"
            .to_owned(),
    };
    format!(
        "cannot create a goroutine stack: {op} failed ({e}): the memory-mapping limit is \
         reached. {why}, so each goroutine stack guard costs a memory mapping (about 2 per \
         stack), and {limit}. Raise it with `sysctl -w vm.max_map_count=N` (e.g. 1048576; \
         persist it in /etc/sysctl.d), or run fewer goroutines at once"
    )
}

/// Writes the tops of freshly guarded slots to `out` and notes their top
/// pages and probe windows in `to_map` (see `Pool::carve_batch`).
pub(super) fn finish_batch(
    usable: usize,
    guards: &[(usize, usize)],
    out: &mut [NonZeroUsize],
    to_map: &mut ToMap,
) -> io::Result<usize> {
    let stride = usable + mem::page_size();
    for (slot, &(g, _)) in out.iter_mut().zip(guards) {
        // Above a slab start, so never zero.
        let top =
            NonZeroUsize::new(g + stride).ok_or_else(|| io::Error::other("null stack address"))?;
        *slot = top;
        to_map.add(top, usable);
    }
    Ok(guards.len())
}

/// The pages of stacks handed out by one `Pool::take` that are to be mapped
/// before use (`populate`): top pages for writing, probe windows for
/// reading. Filled under the pool lock, mapped after it is dropped.
pub(super) struct ToMap {
    pub(super) tops: [(usize, usize); BATCH],
    pub(super) windows: [(usize, usize); BATCH],
    pub(super) nt: usize,
    pub(super) nw: usize,
}

impl ToMap {
    pub(super) fn new() -> Self {
        ToMap {
            tops: [(0, 0); BATCH],
            windows: [(0, 0); BATCH],
            nt: 0,
            nw: 0,
        }
    }

    /// Notes the stack of `usable` bytes whose top is `top`; past
    /// `BATCH` stacks (a refill) the rest fault on first touch instead.
    pub(super) fn add(&mut self, top: NonZeroUsize, usable: usize) {
        if self.nt < self.tops.len() {
            self.tops[self.nt] = top_page(top);
            self.nt += 1;
        }
        if let Some(w) = probe_window(top, usable) {
            if self.nw < self.windows.len() {
                self.windows[self.nw] = w;
                self.nw += 1;
            }
        }
    }

    /// Maps the noted pages: two system calls at most.
    pub(super) fn populate(&self) {
        populate(&self.tops[..self.nt], libc::MADV_POPULATE_WRITE);
        populate(&self.windows[..self.nw], libc::MADV_POPULATE_READ);
    }
}

/// Maps the given pages of stacks about to be handed out in one system call
/// (`Pool::carve_batch`): top pages for writing (`MADV_POPULATE_WRITE`,
/// allocated now, in the kernel, instead of by a page-fault trap on the
/// goroutine's first write), probe windows for reading (the zero page,
/// `MADV_POPULATE_READ`). Best effort: on failure a page faults on first
/// touch, as it would have anyway.
pub(super) fn populate(pages: &[(usize, usize)], advice: libc::c_int) {
    if pages.is_empty() {
        return;
    }
    // SAFETY: each range is one page of the usable range of a stack the
    // caller owns and nothing runs on; populating leaves the contents as
    // they are (zero: released or never touched).
    let _ = unsafe { mem::madvise_batch(pages, advice) };
}
