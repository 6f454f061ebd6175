//! Goroutine stacks: reserved virtual memory, carved from slabs, guarded,
//! pooled and reused.
//!
//! # Layout
//!
//! A goroutine stack is `usable` bytes of read-write memory (256 KiB by
//! default, always a multiple of the page size) with one guard page directly
//! below it. It grows down from `base` (the top, highest address) towards
//! `bottom`; running into the guard raises `SIGSEGV`, which
//! `sys::overflow` reports as `goroutine N has overflowed its stack`.
//!
//! ```text
//!  one stack (a "slot", stride = page + usable):
//!
//!   high  +---------------------------+ <- base (top): corosensei's initial frame
//!         |  kept region (16 KiB)     |    stays resident while cached
//!         +- - - - - - - - - - - - - -+ <- base - KEEP
//!         |  probe window (256 B)     |    read on put: nonzero => went deep
//!         |                           |
//!         |  deep region              |    committed on touch, released
//!         |  (usable - 16 KiB)        |    (MADV_DONTNEED) when used
//!         |                           |
//!         +---------------------------+ <- bottom (lowest usable address)
//!         |  guard page (4 KiB)       |    MADV_GUARD_INSTALL or PROT_NONE
//!   low   +---------------------------+ <- guard_lo = corosensei's `limit()`
//!
//!  one slab (a single mmap, n = min(256, 128 MiB / stride) slots of one size):
//!
//!   low                                                              high
//!   | G | stack 0 | G | stack 1 | ... | G | stack n-1 | G (slab top) |
//!     ^ carved in this order, lazily, by a bump pointer ->
//! ```
//!
//! Slot `i`'s guard sits directly above slot `i-1`'s base, so a write just
//! above a stack's base also faults; the last slot is capped by the slab's own
//! top guard.
//!
//! # Pool levels
//!
//! 1. [`StackCache`], one per P, owned by one thread at a time: up to
//!    [`CACHE_CAP`] (32) stacks of the default size class, kept as bare top
//!    addresses in an inline array, LIFO, no lock and no system call on the
//!    hot path (`bench_cache_put_get` times `put` + `get`).
//! 2. [`Pool`] (one global instance behind a mutex): per size class, a free
//!    list of stacks whose pages were all given back to the OS, plus the
//!    current slab that new stacks are carved from. A cache refills from it in
//!    batches of [`BATCH`] (16) and spills its oldest 16 stacks to it when
//!    full. Stacks of non-default sizes go straight to and from the pool.
//! 3. Slabs from the OS: one `mmap` (`MAP_NORESERVE`, `MADV_NOHUGEPAGE`) per
//!    slab of up to 256 stacks, so a million stacks cost a few thousand
//!    mmaps. Slabs are never unmapped. Reserving is not committing: under the
//!    default overcommit policy a slab costs address space only (under
//!    `vm.overcommit_memory=2` the kernel ignores `MAP_NORESERVE` and charges
//!    whole slabs against the commit limit; use smaller stacks there).
//!
//! Steady state therefore never maps memory per spawn: a spawn takes a stack
//! from its P's cache, an exit puts it back.
//!
//! # Invariants
//!
//! - Every [`Stack`] value has its guard installed at `guard_range()` and is
//!   in exactly one place: owned by a goroutine (inside its coroutine), or,
//!   as a bare top address, in one cache's array or on one pool free list. Dropping a
//!   `Stack` returns it to its pool, so a stack is never leaked.
//! - Slabs are never unmapped, so a stack address stays valid for the life of
//!   the process: a guard range published for the signal handler can never
//!   name someone else's memory.
//! - A stack on a pool free list has its whole usable range released: it
//!   costs no RSS and reads as zero.
//! - A stack on a pool warm list was spilled from a cache as it was (no
//!   system call on that path): it is in the same state as a cached stack.
//!   Past `2 * WARM_MAX` warm stacks in a class, the oldest are released
//!   (down to `WARM_MAX`) and move to the free list: in the runtime, by
//!   sysmon, slowly while exits keep spilling and in chunks once they stop
//!   (see "Giving memory back" below). `get` prefers warm stacks (no page
//!   faults), then free ones, then carves.
//! - A stack in a cache has its deep region released, except when the
//!   heuristic below missed deep use (then the periodic trim releases it).
//!   Its probe window reads nonzero only if the goroutine that last ran on it
//!   wrote there: it is zero when the stack is fresh, after any release, and
//!   a nonzero window is always followed by a release of the deep region.
//! - Guards are never removed: `MADV_DONTNEED` is applied only to usable
//!   ranges.
//!
//! # Files
//!
//! - `mod.rs`: the [`Stack`] type, its layout and the sizes and bounds
//!   every level shares;
//! - `size.rs`: the requested and default stack sizes, and the
//!   environment variables that set them;
//! - `pool.rs`: the global [`Pool`] level: slabs, guard pages, the free
//!   and warm lists, and giving memory back after a burst;
//! - `cache.rs`: the per-P [`StackCache`] level and the deep-use heuristic;
//! - `tests.rs`: the tests.
//!
//! # Memory per parked goroutine, and its floor
//!
//! A parked goroutine costs the page at the top of its stack (the colour
//! offset is kept within the top half page so that a shallow goroutine's
//! frames fit in it, see `colour_offset`), its share of the page-table page
//! that maps its 2 MiB of address space, its G record and its task cell.
//! The first two are a floor for any design that gives each goroutine a
//! contiguous, guarded 256 KiB stack: `examples/parked.rs floor` measures
//! that floor on a plain mapping, to compare with a parked goroutine's
//! cost (BENCHMARKS.md).
//!
//! Stacks are never backed by transparent huge pages (`MADV_NOHUGEPAGE`): a
//! 2 MiB page would make a goroutine that touched 4 KiB cost 2 MiB.

use std::cell::Cell;
use std::collections::VecDeque;
use std::io;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::num::NonZeroUsize;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use corosensei::stack::StackPointer;

use crate::sys::mem;

mod cache;
mod pool;
mod size;
#[cfg(test)]
mod tests;

// The levels share their helpers within `g::stack` (`pub(super)` items).
use self::{cache::*, pool::*, size::*};

pub(crate) use cache::StackCache;
pub(crate) use pool::{release_excess, release_in_background, release_paced, release_pending};
pub(crate) use size::{default_stack_size, validate_stack_size};

/// Usable bytes of a goroutine stack unless `GOROUTINE_STACK_SIZE` says
/// otherwise.
pub(crate) const DEFAULT_STACK_SIZE: usize = 256 * 1024;
/// Smallest stack size accepted by [`validate_stack_size`].
pub(crate) const MIN_STACK_SIZE: usize = 16 * 1024;
/// Largest stack size accepted by [`validate_stack_size`].
pub(crate) const MAX_STACK_SIZE: usize = 1 << 30;

const STACK_SIZE_ENV: &str = "GOROUTINE_STACK_SIZE";
const GUARD_ENV: &str = "GOROUTINE_STACK_GUARD";

/// Most stacks carved from one slab.
const SLAB_MAX_STACKS: usize = 256;
/// Most bytes of one slab (bounds the reservation for large stack sizes).
const SLAB_MAX_BYTES: usize = 128 << 20;
/// Most stacks a per-P cache holds.
pub(crate) const CACHE_CAP: usize = 32;
/// Stacks moved between a cache and the pool at once.
pub(crate) const BATCH: usize = CACHE_CAP / 2;
// One refill's guards and pages go to the kernel in one batched call each.
const _: () = assert!(BATCH <= mem::BATCH_MAX);
/// Bytes at the top of a cached stack that stay resident.
const KEEP_BYTES: usize = 16 * 1024;
/// Size of the probe window read on `put`.
const PROBE_WORDS: usize = 32;
const PROBE_BYTES: usize = PROBE_WORDS * 8;
/// A cache unconditionally releases the deep region of one cached stack
/// every `TRIM_EVERY` puts (a power of two).
pub(crate) const TRIM_EVERY: u32 = 1024;

/// Warm (unreleased) stacks the pool keeps per size class once a release
/// has caught up: between `WARM_MAX` and `2 * WARM_MAX`, i.e. at most about
/// 16 MiB of kept top regions for the default size. During a burst of
/// exits more wait for sysmon (see [`release_excess`]).
pub(crate) const WARM_MAX: usize = 512;

/// With a background releaser (the runtime's pool: sysmon, see
/// [`release_in_background`]), a class past `2 * WARM_MAX` warm stacks only
/// asks for a release, and sysmon makes it off any P ([`release_excess`]).
/// The spilling thread releases itself only past this bound, and only if
/// sysmon has not looked at the pool for [`RELEASER_STALL_NS`] (starved of
/// CPU, or stuck).
///
/// Why no fixed bound: releasing hundreds of stacks (coalesced `madvise`
/// ranges) on a goroutine's exit held that M's P for about a millisecond,
/// which a timer-heavy program saw in its p99 oversleep. And when a burst
/// of exits outran sysmon, a fixed bound had the exiting Ms release most
/// stacks themselves, each call a TLB shootdown aimed at the other Ms. What waits is
/// bounded anyway: a warm stack is one a goroutine just exited from, so the
/// warm list never holds more stacks than were live at once; the memory is
/// the program's peak, held until the burst is over.
pub(crate) const WARM_HARD_MAX: usize = 4 * WARM_MAX;

/// Past `WARM_HARD_MAX` with the releaser stalled, the spilling thread
/// releases this many stacks beyond the bound, oldest first.
const SPILL_RELEASE_MAX: usize = 64;

/// Most stacks sysmon releases per call of [`release_excess`] once exits
/// have stopped: a millisecond or so of `madvise`, so that sysmon's other
/// duties (preemption, the network, hand-offs) wait at most that long
/// between chunks.
const RELEASE_CHUNK: usize = 1024;

/// While exits keep spilling (a burst in progress), sysmon releases only
/// this many stacks per pace (at least [`RELEASE_PACE_NS`], longer where
/// [`RELEASE_BUDGET_DIV`] asks it): each release is a TLB
/// shootdown of every CPU running an M, so releasing at full speed during
/// the burst slowed the exits themselves. Like Go's background scavenger,
/// the pace keeps memory going back while the program is busy (see the
/// module note), and the rest goes when it stops.
const PACED_CHUNK: usize = 256;
const RELEASE_PACE_NS: i64 = 1_000_000;

/// While exits stream in, a pace lasts at least this many times as long as
/// the last chunk took to release: the release then takes at most 1/50 of
/// sysmon's time (Go's background scavenger keeps to about 1% of a CPU).
/// A fixed pace took a noticeable share of a CPU from the exiting Ms on a
/// 2-core box, and a burst of exits finished sooner with the budget
/// (docs/bench/history.md).
const RELEASE_BUDGET_DIV: i64 = 50;

/// A release request that sysmon has not looked at for this long (ns)
/// lets the spilling thread release past `WARM_HARD_MAX` itself. sysmon
/// looks at least every 10 ms (its longest nap while Ps run), so this is
/// two of its periods.
const RELEASER_STALL_NS: i64 = 20_000_000;

// ---------------------------------------------------------------------------
// Stack
// ---------------------------------------------------------------------------

/// One goroutine stack: `usable` read-write bytes below `base`, with a guard
/// page below them (see the module note). Owning a `Stack` means owning that
/// memory; dropping it returns the stack (released) to its pool.
pub(crate) struct Stack {
    /// The top of the stack (highest address, exclusive), page-aligned.
    top: NonZeroUsize,
    /// Usable bytes, a multiple of the page size.
    usable: usize,
    /// The pool the stack came from and goes back to.
    pool: &'static Pool,
}

impl Stack {
    /// Usable bytes (excluding the guard page).
    #[inline]
    pub(crate) fn usable_size(&self) -> usize {
        self.usable
    }

    /// The guard page, `[lo, hi)`; `hi` is the lowest usable address.
    #[inline]
    pub(crate) fn guard_range(&self) -> (usize, usize) {
        let bottom = self.bottom();
        (bottom - mem::page_size(), bottom)
    }

    /// The lowest usable address.
    #[inline]
    fn bottom(&self) -> usize {
        self.top.get() - self.usable
    }

    /// Gives the whole usable range back to the OS.
    fn release_all(&self) {
        release_range(self.bottom(), self.usable);
    }
}

/// `MADV_DONTNEED` on part of a stack we own. Failure (only possible if the
/// process `mlock`ed the memory) leaves the pages resident, which is harmless.
/// Releases the usable ranges of `tops` (stacks of `usable` bytes) with as
/// few `madvise` calls as possible: stacks carved one after another from a
/// slab are adjacent (`top + page + usable == next top`), so a run of them is
/// one range that also covers the guard pages between them. That is sound in
/// both guard modes: `MADV_DONTNEED` leaves guard markers in place (only
/// `MADV_GUARD_REMOVE` and unmapping drop them) and does not change the
/// protection of an `mprotect` guard; a guard has no pages to free. Each call
/// costs a TLB shootdown on every CPU running this process, so freeing a
/// burst of stacks (100,000 goroutines exiting at once) costs a few calls
/// instead of one per stack (measured: `parked` wake-all, see BENCHMARKS.md).
fn release_coalesced(tops: &[NonZeroUsize], usable: usize) {
    let stride = usable + mem::page_size();
    let mut sorted: Vec<usize> = tops.iter().map(|t| t.get()).collect();
    sorted.sort_unstable();
    let mut ranges: Vec<(usize, usize)> = Vec::with_capacity(sorted.len());
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i] - usable;
        let mut end = sorted[i];
        let mut j = i + 1;
        while j < sorted.len() && sorted[j] == end + stride {
            end = sorted[j];
            j += 1;
        }
        if end > start {
            ranges.push((start, end - start));
        }
        i = j;
    }
    // SAFETY: each range is the page-aligned usable part of one or more
    // adjacent stacks that the caller owns exclusively and that nothing
    // runs on (their contents are dead), inside slabs from mem::reserve.
    // One call per up to 64 ranges: one TLB shootdown each, not one per
    // range (`mem::release_ranges`).
    unsafe { mem::release_ranges(&ranges) };
}

fn release_range(addr: usize, len: usize) {
    if len == 0 {
        return;
    }
    if let Some(p) = NonNull::new(addr as *mut u8) {
        // SAFETY: callers pass a page-aligned part of the usable range of a
        // stack they own exclusively and that nothing runs on, so its
        // contents are dead; the range lies inside a slab from mem::reserve.
        let _ = unsafe { mem::release(p, len) };
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        self.release_all();
        self.pool
            .give_back(self.usable, std::iter::once(self.top), true);
    }
}

/// Bytes at the top of every goroutine stack that the coroutine does not
/// use: one cache line kept for the runtime's per-goroutine data. It holds
/// the goroutine-local map (`crate::local`), all zero whenever the stack is
/// free (fresh memory reads zero; the goroutine empties it when it ends,
/// before its stack is recycled).
pub(crate) const TOP_RESERVED: usize = 64;

/// Cache colouring: stack tops are page-aligned and a whole number of pages
/// apart, so without an offset every goroutine's hot top-of-stack lines map to
/// the same few L1 sets and a thousand goroutines switching in turn evict
/// each other (the yield benchmark at 1000 goroutines shows it).
/// Each stack starts 0..31 cache lines below its top, chosen by a hash of its
/// address (stable for the stack's life).
///
/// The range is half a page, not a whole one: the offset is dead space at
/// the top of the stack's first page, and a goroutine whose frames do not
/// fit in what is left of that page touches a second one. A goroutine
/// parked in a channel receive uses well under 1 KiB; with offsets up to
/// 4032 bytes about one stack in six straddled into a second page (measured
/// with `examples/parked.rs`: 1.21 page faults per parked goroutine), with
/// offsets up to 1984 bytes none does.
#[inline]
fn colour_offset(top: usize) -> usize {
    let h = ((top >> 12) as u32).wrapping_mul(0x9E37_79B9);
    (h >> 27) as usize * 64
}

/// Bytes below the goroutine-local line (`TOP_RESERVED`) and the cache
/// colour, above what corosensei uses, that hold the goroutine's
/// [`crate::traceback::StackHeader`] (its saved context for tracebacks, its
/// spawn site). With the colouring below, the header ends on a cache-line
/// boundary and shares its line with corosensei's parent link (16 bytes
/// below `base()`), which every switch touches anyway.
pub(crate) const HEADER_BYTES: usize = 48;

/// The address of the stack header of the stack whose top is `top`; also
/// the base handed to corosensei. Layout from the top down: the
/// goroutine-local line (`TOP_RESERVED`), the cache colour, the header.
#[inline]
pub(crate) fn header_addr(top: usize) -> usize {
    top - TOP_RESERVED - colour_offset(top) - HEADER_BYTES
}

// SAFETY: `base()` is a 16-byte-aligned (STACK_ALIGNMENT-aligned) address
// at least TOP_RESERVED + HEADER_BYTES (112) and at most 1984 + 112 bytes
// below the page-aligned top of `usable` >= 16 KiB
// (>= corosensei's MIN_STACK_SIZE + 4 KiB) bytes of read-write memory owned by
// this value and mapped for the life of the process (slabs are never
// unmapped); a guard page sits directly below it. `limit()` is the low end of
// that guard page, page-aligned.
unsafe impl corosensei::stack::Stack for Stack {
    #[inline]
    fn base(&self) -> StackPointer {
        let base = header_addr(self.top.get());
        NonZeroUsize::new(base).unwrap_or(self.top)
    }

    /// The low end of the guard page. corosensei's doc asks for the limit to
    /// include guard pages; it uses it only for `CoroutineTrapHandler::
    /// stack_ptr_in_bounds` (which must accept a stack pointer inside the
    /// guard after an overflow) and for sanitizer bookkeeping. Its own
    /// `DefaultStack` returns the start of its mapping, guard included.
    #[inline]
    fn limit(&self) -> StackPointer {
        // The guard's low end is above the slab start, which is non-null.
        NonZeroUsize::new(self.guard_range().0).unwrap_or(self.top)
    }
}
