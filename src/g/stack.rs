//! Goroutine stacks: reserved virtual memory, carved from slabs, guarded,
//! pooled and reused.
//!
//! # Layout
//!
//! A goroutine stack is `usable` bytes of read-write memory (256 KiB by
//! default, always a multiple of the page size) with one guard page directly
//! below it. It grows down from `base` (the top, highest address) towards
//! `bottom`; running into the guard raises `SIGSEGV`, which
//! `sys::signal` reports as `goroutine N has overflowed its stack`.
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
//!    hot path: `put` + `get` of a stack that stayed shallow measured about
//!    4 ns on a 2.6 GHz Xeon VM, of which the deep-use probe is under 1 ns
//!    (`bench_cache_put_get`).
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
//! # Giving memory back after a burst
//!
//! Go keeps the stacks of exited goroutines in its pools and returns their
//! pages with the heap's background scavenger, paced to a small share of a
//! CPU. Here sysmon plays the scavenger ([`release_excess`]), and no exit
//! makes a system call for it:
//!
//! - while exits keep spilling to the pool (a burst in progress), sysmon
//!   releases `PACED_CHUNK` (256) stacks per pace since its last release,
//!   at most `RELEASE_CHUNK` per look (it looks every 20 us to 10 ms). The
//!   pace is 1 ms, or longer where releasing a chunk takes more than 1/50
//!   of it: like Go's scavenger, the release uses at most 2% of a CPU while
//!   the program is busy (about 20,000 stacks a second on the 2-core VM,
//!   where a chunk takes about 250 us). Every release is a TLB shootdown
//!   of each CPU that runs an M, and its page freeing runs on a CPU the Ms
//!   need: at full speed during the burst these slowed the exits
//!   themselves (100,000 goroutines woken at once at GOMAXPROCS=2: 75 ms
//!   when the exiting Ms also released past a bound of 2,048; 50 ms paced
//!   at 256 a ms; 10% less again with the 2% budget);
//! - once a sysmon cycle sees no new spill, it releases `RELEASE_CHUNK`
//!   (1,024) per cycle and skips its naps until done: about 100 ms per
//!   100,000 stacks;
//! - an exit releases only if sysmon has not looked at the pool for
//!   `RELEASER_STALL_NS` (20 ms) with more than `WARM_HARD_MAX` waiting.
//!
//! The warm list can never hold more stacks than were live at once, so
//! what waits is the program's own peak, held until its burst is over.
//!
//! # Returning memory: the deep-use heuristic
//!
//! A goroutine that finishes after using a few KiB must not pay a system
//! call, but a burst of deep goroutines must not pin their pages forever. So
//! `StackCache::put` reads the 256-byte *probe window* at the top of the first
//! page below the kept 16 KiB (16 aligned 16-byte loads, OR-reduced). Pages
//! given back with `MADV_DONTNEED` read back as zero, so a nonzero word means
//! the last goroutine went at least that deep, and the deep region
//! (everything below the kept 16 KiB) is released with one `madvise` (about
//! 2 us including refaulting the page later). Otherwise nothing is done.
//!
//! Limits, honestly: the check sees *contents*, not residency. A goroutine
//! can go deeper while leaving the window zero: a frame that straddles the
//! boundary with >= 256 bytes of zeroed or never-written locals there (a
//! `[0u8; 4096]` buffer, or a page touched only by a stack probe) and then
//! calls further down. Such a miss leaves those deep pages resident while
//! the stack sits in the cache. The damage is bounded: at most [`CACHE_CAP`]
//! stacks per P can hold missed pages; every [`TRIM_EVERY`]th put the cache
//! unconditionally releases the deep region of one cached stack
//! (round-robin; one `madvise` of 1-2 us per 1024 puts, ~2 ns amortized);
//! stacks that spill to the pool's warm list are released entirely once
//! they are among the oldest past its bound; dropped stacks are released at
//! once. A residency-exact check (`mincore`) would be a system call per
//! put. Reading the window of a stack whose window page was never touched
//! (or was just released) maps the shared zero page: one minor fault, no
//! memory, once per release. So that a burst of exits (a million parked
//! goroutines woken at once) does not pay that fault once per goroutine,
//! the pool maps the windows of the stacks it hands to a cache (fresh or
//! released ones) to the zero page in advance, with one batched
//! `MADV_POPULATE_READ` per refill (`Pool::carve_batch`): no trap, no
//! memory, a page-table entry in a page-table page the stack's top needs
//! anyway. The same refill allocates those stacks' top pages with one
//! batched `MADV_POPULATE_WRITE`, the page every goroutine writes first:
//! a spawn on a fresh stack then takes no page-fault trap (a million
//! parked goroutines: 0.07 traps each instead of 1.07). The cost is at most
//! one refill batch of top pages (16 x 4 KiB per P) allocated before use.
//! Both calls run after the pool lock is dropped (the stacks are the
//! refilling P's by then): held across them, the lock made two Ps that
//! refill at once take turns, each wait a futex sleep (100,000 goroutines
//! spawned and parked at GOMAXPROCS=2: 6,200 context switches and 3.9 us
//! per goroutine; 1,700 and 2.3 us without).
//!
//! # Guard pages and the kernel fallback
//!
//! On Linux >= 6.13 a guard is `madvise(MADV_GUARD_INSTALL)` on the page: a
//! page-table marker that does not split the mapping, so a slab of 256
//! guarded stacks stays one memory mapping (and adjacent slabs usually merge).
//! Support is probed on the first guard a pool installs: `EINVAL` (older
//! kernels; also `mlock`ed memory) switches the pool to `mprotect(PROT_NONE)`
//! per guard for good, and so does a first guard that the kernel can still
//! read (`mem::kernel_can_read`: an emulator such as qemu-user returns
//! success for advice it does not implement). That fallback splits the mapping around every guard,
//! so each stack costs about two of the `vm.max_map_count` (default 65530)
//! mappings a process may have, i.e. about 32 thousand stacks. Hitting the
//! limit returns an [`io::ErrorKind::OutOfMemory`] error that says so and how
//! to raise it. `GOROUTINE_STACK_GUARD=mprotect` forces the fallback (tests,
//! mimicking old kernels). Guard markers keep a page-table page alive per
//! 2 MiB of parked stacks (about 0.5 KiB per parked stack).
//!
//! Guards of freshly carved stacks are installed a refill batch at a time:
//! one `process_madvise(PIDFD_SELF, [guard pages], MADV_GUARD_INSTALL)`
//! instead of one `madvise` per stack (Linux >= 6.14; on older kernels the
//! first batch fails and the pool installs guards one by one for good, which
//! `kernel_without_batched_madvise_installs_guards_one_by_one` simulates).
//! The first guard of a pool is always installed alone, to settle the mode.
//!
//! # Memory per parked goroutine, and its floor
//!
//! A parked goroutine costs the page at the top of its stack (the colour
//! offset is kept within the top half page so that a shallow goroutine's
//! frames fit in it, see `colour_offset`), its share of the page-table page
//! that maps its 2 MiB of address space (4 KiB per 2 MiB: 512 bytes at the
//! default 260 KiB stride), its G record (128 bytes) and its task cell (64
//! bytes and up). The first two are a floor for any design that gives each
//! goroutine a contiguous, guarded 256 KiB stack: `examples/parked.rs floor`
//! touches one byte per 260 KiB of a plain mapping and measures 4,617 bytes
//! of RSS plus page tables per touch (4,224 at a 64 KiB stride), against
//! 4,895 per parked goroutine.
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
/// Why no fixed bound: releasing 512 stacks (coalesced `madvise` ranges) on
/// a goroutine's exit held that M's P for 0.7-1.2 ms, every 512 exits (a
/// timer-heavy program, 100K sleepers and 100 wake-ups per ms, saw each
/// such stall in its p99 oversleep). And when a burst of exits outran
/// sysmon (100K goroutines woken at once, exiting about 1 us apart), a
/// bound of 2,048 had the exiting Ms release most stacks themselves, 64 at
/// a time, each call a TLB shootdown aimed at the other Ms. What waits is
/// bounded anyway: a warm stack is one a goroutine just exited from, so the
/// warm list never holds more stacks than were live at once; the memory is
/// the program's peak, held until the burst is over.
pub(crate) const WARM_HARD_MAX: usize = 4 * WARM_MAX;

/// Past `WARM_HARD_MAX` with the releaser stalled, the spilling thread
/// releases this many stacks beyond the bound, oldest first.
const SPILL_RELEASE_MAX: usize = 64;

/// Most stacks sysmon releases per call of [`release_excess`] once exits
/// have stopped: about 1 ms of `madvise` on a 2-core VM, so that sysmon's
/// other duties (preemption, the network, hand-offs) wait at most that long
/// between chunks.
const RELEASE_CHUNK: usize = 1024;

/// While exits keep spilling (a burst in progress), sysmon releases only
/// this many stacks per pace (at least [`RELEASE_PACE_NS`], longer where
/// [`RELEASE_BUDGET_DIV`] asks it): each release is a TLB
/// shootdown of every CPU running an M, so releasing at full speed during
/// the burst slowed the exits themselves. Like Go's background scavenger,
/// the pace keeps memory going back while the program is busy (see the
/// module note), and the rest goes when it stops. At 64 per ms (a fixed
/// pace then), 100K goroutines woken at once at GOMAXPROCS=2 took 43 ms
/// instead of 50 (6 runs each, within this box's noise), and memory went
/// back at 64K stacks a second while exits went on.
const PACED_CHUNK: usize = 256;
const RELEASE_PACE_NS: i64 = 1_000_000;

/// While exits stream in, a pace lasts at least this many times as long as
/// the last chunk took to release: the release then takes at most 1/50 of
/// sysmon's time (Go's background scavenger keeps to about 1% of a CPU).
/// Releasing 1,024 stacks during a burst took about 1 ms here, and at a
/// fixed 256 stacks a ms that was 8-10% of a CPU taken from the exiting
/// Ms on a 2-core box: 100,000 goroutines woken at once at GOMAXPROCS=2
/// finished 10% sooner without it.
const RELEASE_BUDGET_DIV: i64 = 50;

/// A release request that sysmon has not looked at for this long (ns)
/// lets the spilling thread release past `WARM_HARD_MAX` itself. sysmon
/// looks at least every 10 ms (its longest nap while Ps run), so this is
/// two of its periods.
const RELEASER_STALL_NS: i64 = 20_000_000;

// ---------------------------------------------------------------------------
// Sizes and environment
// ---------------------------------------------------------------------------

/// Checks a requested stack size and rounds it up to the page size.
///
/// Sizes below 16 KiB or above 1 GiB are rejected with
/// [`io::ErrorKind::InvalidInput`].
pub(crate) fn validate_stack_size(bytes: usize) -> io::Result<usize> {
    if !(MIN_STACK_SIZE..=MAX_STACK_SIZE).contains(&bytes) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "goroutine stack size of {bytes} bytes is out of range: \
                 it must be between 16 KiB ({MIN_STACK_SIZE} bytes) and 1 GiB \
                 ({MAX_STACK_SIZE} bytes)"
            ),
        ));
    }
    let page = mem::page_size();
    Ok((bytes + page - 1) & !(page - 1))
}

/// The stack size used when a spawn does not ask for one: 256 KiB, or
/// `GOROUTINE_STACK_SIZE` (bytes, with an optional `K`/`KiB`/`M`/`MiB`/`G`/
/// `GiB` suffix, case-insensitive) read once. A bad value is reported with one
/// line on stderr and the default is used. Always page-aligned.
pub(crate) fn default_stack_size() -> usize {
    static SIZE: OnceLock<usize> = OnceLock::new();
    *SIZE.get_or_init(|| {
        let raw = std::env::var_os(STACK_SIZE_ENV);
        let (size, warning) = stack_size_from_env(raw.as_deref().map(|v| v.to_str().ok_or(v)));
        if let Some(w) = warning {
            eprintln!("{w}");
        }
        size
    })
}

/// The default stack size given the value of `GOROUTINE_STACK_SIZE`
/// (`None`: unset; `Err`: not UTF-8), and the warning line to print if the
/// value was rejected.
fn stack_size_from_env(value: Option<Result<&str, &std::ffi::OsStr>>) -> (usize, Option<String>) {
    let fallback = |shown: String, why: String| {
        let w = format!(
            "goroutine: ignoring {STACK_SIZE_ENV}={shown}: {why}; using the default \
             stack size of {} KiB",
            DEFAULT_STACK_SIZE / 1024
        );
        (DEFAULT_STACK_SIZE, Some(w))
    };
    match value {
        // Unset or empty (`GOROUTINE_STACK_SIZE=`): the default, silently,
        // as for GOMAXPROCS.
        None | Some(Ok("")) => (DEFAULT_STACK_SIZE, None),
        Some(Err(os)) => fallback(format!("{os:?}"), "not valid UTF-8".to_owned()),
        Some(Ok(s)) => match parse_stack_size(s)
            .and_then(|b| validate_stack_size(b).map_err(|e| e.to_string()))
        {
            Ok(size) => (size, None),
            Err(why) => fallback(format!("{s:?}"), why),
        },
    }
}

/// Parses `<digits>[ ][K|KiB|M|MiB|G|GiB]` (suffix case-insensitive, powers
/// of 1024) into bytes. Does not check the range.
fn parse_stack_size(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return Err(
            "expected a number of bytes, optionally followed by K, KiB, M, MiB, G or GiB".into(),
        );
    }
    let (num, suffix) = s.split_at(digits);
    let shift = match suffix.trim().to_ascii_lowercase().as_str() {
        "" => 0,
        "k" | "kib" => 10,
        "m" | "mib" => 20,
        "g" | "gib" => 30,
        other => {
            return Err(format!(
                "unknown size suffix {other:?} (use K, KiB, M, MiB, G or GiB)"
            ))
        }
    };
    num.parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .ok_or_else(|| "number too large".to_owned())
}

/// Whether `GOROUTINE_STACK_GUARD` forces `mprotect` guards, and the warning
/// line for a value that is ignored (`None`: unset; `Err`: not UTF-8).
fn guard_env_forces_mprotect(
    value: Option<Result<&str, &std::ffi::OsStr>>,
) -> (bool, Option<String>) {
    let shown = match value {
        None | Some(Ok("")) => return (false, None),
        Some(Ok("mprotect")) => return (true, None),
        Some(Ok(v)) => format!("{v:?}"),
        Some(Err(v)) => format!("{v:?}"),
    };
    let w =
        format!("goroutine: ignoring {GUARD_ENV}={shown}: the only accepted value is \"mprotect\"");
    (false, Some(w))
}

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
/// each other (measured: 110 ns per yield at 1000 goroutines instead of 62).
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

// ---------------------------------------------------------------------------
// Global pool
// ---------------------------------------------------------------------------

/// How a pool decides between guard implementations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GuardPolicy {
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
enum GuardMode {
    /// No guard installed yet.
    Unknown,
    /// `MADV_GUARD_INSTALL` works.
    Madvise,
    /// `mprotect(PROT_NONE)`; `forced` by the environment or a test.
    Mprotect { forced: bool },
}

/// The stacks of one size class.
struct Class {
    usable: usize,
    /// Tops of released stacks ready for reuse (LIFO).
    free: Vec<NonZeroUsize>,
    /// Tops of stacks spilled from a P cache without a release, newest at
    /// the back (taken LIFO), in the same state as cached ones: only their
    /// kept top region (and deep pages the heuristic missed) may be
    /// resident. Past `2 * WARM_MAX` the oldest (at the front) are released
    /// (down to `WARM_MAX`) and move to `free`: by sysmon if the pool has a
    /// background releaser, else (or past `WARM_HARD_MAX` with sysmon
    /// stalled) by the thread that spilled.
    warm: VecDeque<NonZeroUsize>,
    /// Guard address of the next slot to carve from the current slab.
    next: usize,
    /// End of the carvable part of the current slab (`next == end`: none left).
    end: usize,
}

struct PoolInner {
    mode: GuardMode,
    /// Whether guards and probe windows are set up in batches
    /// (`Pool::carve_batch`); cleared for good when the kernel refuses.
    batch: bool,
    classes: Vec<Class>,
    /// When (`nanotime`) the background releaser last looked at the pool,
    /// or a spill last asked it to (whichever is later), for the stall
    /// check (`RELEASER_STALL_NS`).
    releaser_seen: i64,
    /// When the background releaser last released a chunk (its pace).
    released_at: i64,
    /// How long (ns) releasing `PACED_CHUNK` stacks took at the last
    /// release, for the streaming pace (`RELEASE_BUDGET_DIV`).
    chunk_cost: i64,
    /// Spills to a warm list so far, and as many as the releaser had seen
    /// at its last look: a difference means exits are streaming in.
    spills: u64,
    spills_seen: u64,
    /// Every slab, `(addr, len)`, for diagnostics and tests.
    slabs: Vec<(usize, usize)>,
}

/// The global level of the stack pool (module note): free lists per size
/// class and the slabs stacks are carved from.
struct Pool {
    policy: GuardPolicy,
    inner: Mutex<PoolInner>,
    /// A background thread (sysmon) releases excess warm stacks
    /// ([`Pool::release_excess`]); set once, when it starts.
    background: AtomicBool,
    /// Some class has more than `2 * WARM_MAX` warm stacks: the background
    /// releaser's cue (a hint: it re-checks under the lock).
    excess: AtomicBool,
    /// The releaser left work for later because exits were streaming in:
    /// it naps as usual instead of coming straight back (a hint).
    paced: AtomicBool,
}

static GLOBAL: Pool = Pool::new(GuardPolicy::FromEnv);

/// The releaser's wake-up (sysmon's `wake_from_nap`), registered by
/// [`release_in_background`]: the stack cache lives below the scheduler
/// and reaches it only through this hook (HACKING.md, "Layers").
static RELEASER_WAKE: OnceLock<fn()> = OnceLock::new();

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
    const fn new(policy: GuardPolicy) -> Pool {
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
    fn release_excess(&self) {
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
    fn leak(policy: GuardPolicy) -> &'static Pool {
        Box::leak(Box::new(Pool::new(policy)))
    }

    fn lock(&self) -> MutexGuard<'_, PoolInner> {
        // The pool's state is consistent between statements that can panic
        // (only allocation can), so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A stack of `usable` bytes (rounded up to the page size).
    fn get(&'static self, usable: usize) -> io::Result<Stack> {
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
    fn take(&self, usable: usize, out: &mut [NonZeroUsize]) -> io::Result<usize> {
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
    fn carve_batch(
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
    fn give_back(&self, usable: usize, tops: impl Iterator<Item = NonZeroUsize>, released: bool) {
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

    fn pop_or_carve(&self, inner: &mut PoolInner, ci: usize) -> io::Result<NonZeroUsize> {
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
    fn new_slab(&self, inner: &mut PoolInner, ci: usize) -> io::Result<()> {
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
    fn install_guard(&self, mode: &mut GuardMode, addr: usize, len: usize) -> io::Result<()> {
        let Some(p) = NonNull::new(addr as *mut u8) else {
            return Err(io::Error::other("null guard address"));
        };
        let first = *mode == GuardMode::Unknown;
        if first {
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
                // The first guard is checked: an emulator (qemu-user)
                // accepts the advice without installing anything, which
                // would leave every stack unguarded. Then mprotect.
                Ok(()) if first && mem::kernel_can_read(addr) == Some(true) => {
                    *mode = GuardMode::Mprotect { forced: false };
                }
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
    fn reserve_error(&self, mode: GuardMode, e: io::Error, _len: usize) -> io::Error {
        match mode {
            GuardMode::Mprotect { forced } => map_limit_error(e, forced, "mmap"),
            _ => e,
        }
    }

    #[cfg(test)]
    fn mode(&self) -> GuardMode {
        self.lock().mode
    }

    #[cfg(test)]
    fn slabs(&self) -> Vec<(usize, usize)> {
        self.lock().slabs.clone()
    }

    #[cfg(test)]
    fn warm_len(&self, usable: usize) -> usize {
        let mut inner = self.lock();
        let ci = inner.class(usable);
        inner.classes[ci].warm.len()
    }

    #[cfg(test)]
    fn free_len(&self, usable: usize) -> usize {
        let mut inner = self.lock();
        let ci = inner.class(usable);
        inner.classes[ci].free.len()
    }
}

impl PoolInner {
    /// The index of the class of `usable` bytes, created if needed.
    fn class(&mut self, usable: usize) -> usize {
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
fn guard_install_unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EINVAL | libc::ENOSYS | libc::EPERM | libc::EOPNOTSUPP)
    )
}

/// Turns `ENOMEM` from `op` on the `mprotect` guard path into an error that
/// explains the memory-mapping limit.
fn map_limit_error(e: io::Error, forced: bool, op: &str) -> io::Error {
    if e.raw_os_error() != Some(libc::ENOMEM) {
        return e;
    }
    io::Error::new(
        io::ErrorKind::OutOfMemory,
        map_limit_message(&e, forced, op, mem::max_map_count()),
    )
}

fn map_limit_message(e: &io::Error, forced: bool, op: &str, max: Option<u64>) -> String {
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

// ---------------------------------------------------------------------------
// Per-P cache
// ---------------------------------------------------------------------------

/// The per-P level of the stack pool (module note). Owned by one thread at a
/// time: `Send`, not `Sync`.
pub(crate) struct StackCache {
    pool: &'static Pool,
    /// The usable size of the cached class (the default stack size).
    class: usize,
    /// Bytes at the top of a cached stack kept resident (16 KiB rounded up
    /// to the page size).
    keep: usize,
    /// Bytes below the kept top region (the region released on deep use);
    /// 0 if the class is too small to have one.
    deep: usize,
    /// `tops[..len]`: the tops of the cached stacks of `class` bytes from
    /// `pool`, owned by this cache; LIFO (`tops[len - 1]` is the most
    /// recently used). Entries past `len` are meaningless.
    tops: [NonZeroUsize; CACHE_CAP],
    len: usize,
    /// Puts since creation, for the periodic trim.
    puts: u32,
    trim_cursor: usize,
    _not_sync: PhantomData<Cell<()>>,
}

impl StackCache {
    /// An empty cache for the default stack size on the global pool.
    pub(crate) fn new() -> Self {
        Self::with_pool(&GLOBAL, default_stack_size())
    }

    fn with_pool(pool: &'static Pool, class: usize) -> Self {
        let page = mem::page_size();
        let keep = keep_bytes();
        // A deep region exists only if at least one page lies below the kept
        // top (the probe window sits in that page).
        let deep = if class >= keep + page {
            class - keep
        } else {
            0
        };
        StackCache {
            pool,
            class,
            keep,
            deep,
            tops: [NonZeroUsize::MAX; CACHE_CAP],
            len: 0,
            puts: 0,
            trim_cursor: 0,
            _not_sync: PhantomData,
        }
    }

    /// A stack of `usable` bytes (already validated by the caller). The
    /// default size comes from this cache (refilled from the pool in
    /// batches); other sizes come from the pool.
    #[inline]
    pub(crate) fn get(&mut self, usable: usize) -> io::Result<Stack> {
        if usable != self.class {
            return self.pool.get(usable);
        }
        if self.len == 0 {
            self.refill()?;
        }
        self.len -= 1;
        Ok(Stack {
            top: self.tops[self.len],
            usable,
            pool: self.pool,
        })
    }

    /// Refills an empty cache with a batch from the pool.
    #[cold]
    #[inline(never)]
    fn refill(&mut self) -> io::Result<()> {
        debug_assert_eq!(self.len, 0);
        let n = self.pool.take(self.class, &mut self.tops[..BATCH])?;
        if n == 0 {
            return Err(io::Error::other("goroutine stack pool returned no stack"));
        }
        self.len = n;
        Ok(())
    }

    /// Returns a stack whose goroutine has finished (nothing runs on it).
    #[inline]
    pub(crate) fn put(&mut self, s: Stack) {
        if s.usable != self.class || !ptr::eq(s.pool, self.pool) {
            // Released and returned to its own pool by Drop.
            drop(s);
            return;
        }
        let top = ManuallyDrop::new(s).top;
        if self.deep != 0 && went_deep(top.get() - self.keep) {
            self.release_deep(top);
        }
        if self.len == CACHE_CAP {
            self.spill(BATCH);
        }
        self.tops[self.len] = top;
        self.len += 1;
        self.puts = self.puts.wrapping_add(1);
        if self.puts % TRIM_EVERY == 0 {
            self.trim_one();
        }
    }

    /// Releases the deep region of the cached-class stack with this top.
    #[cold]
    #[inline(never)]
    fn release_deep(&self, top: NonZeroUsize) {
        release_range(top.get() - self.class, self.deep);
    }

    /// Gives every cached stack, released, to the pool (the P is destroyed).
    pub(crate) fn drain(&mut self) {
        self.spill(self.len);
    }

    /// Moves the oldest `n` cached stacks to the pool's warm list, without a
    /// system call (the pool releases its oldest warm stacks past a bound).
    /// Releasing here cost one `madvise` per stack, each a TLB shootdown
    /// across the runtime's threads: 40% of skynet's time at GOMAXPROCS=2.
    #[cold]
    #[inline(never)]
    fn spill(&mut self, n: usize) {
        let n = n.min(self.len);
        if n == 0 {
            return;
        }
        self.pool
            .give_back(self.class, self.tops[..n].iter().copied(), false);
        self.tops.copy_within(n..self.len, 0);
        self.len -= n;
    }

    /// The periodic trim: releases the deep region of one cached stack,
    /// round-robin, whether or not the probe saw deep use.
    #[cold]
    #[inline(never)]
    fn trim_one(&mut self) {
        if self.deep == 0 || self.len == 0 {
            return;
        }
        let i = self.trim_cursor % self.len;
        self.trim_cursor = self.trim_cursor.wrapping_add(1);
        self.release_deep(self.tops[i]);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.len
    }
}

impl Drop for StackCache {
    fn drop(&mut self) {
        self.drain();
    }
}

/// Whether the probe window just below `boundary` (the bottom of a cached
/// stack's kept region) holds a nonzero word: the last goroutine on the stack
/// went below the kept region.
#[inline]
fn went_deep(boundary: usize) -> bool {
    let window = (boundary - PROBE_BYTES) as *const [u128; PROBE_BYTES / 16];
    // SAFETY: the window lies in the usable range of a stack we own
    // exclusively (the caller passes `top - keep`, i.e. `bottom + deep` with
    // `deep >= one page`),
    // which is mapped read-write for the life of the process, page-aligned at
    // its end (so 16-aligned), and not written by anyone while we read it (its
    // goroutine has finished). Bytes of anonymous memory are always
    // initialised (zero or written).
    let w = unsafe { &*window };
    // Four independent OR chains over 16 aligned 16-byte loads: straight-line
    // SSE2 code, no loop.
    let a = (w[0] | w[4]) | (w[8] | w[12]);
    let b = (w[1] | w[5]) | (w[9] | w[13]);
    let c = (w[2] | w[6]) | (w[10] | w[14]);
    let d = (w[3] | w[7]) | (w[11] | w[15]);
    (a | b) | (c | d) != 0
}

/// Bytes at the top of a cached stack that stay resident: [`KEEP_BYTES`]
/// rounded up to the page size.
#[inline]
fn keep_bytes() -> usize {
    let page = mem::page_size();
    (KEEP_BYTES + page - 1) & !(page - 1)
}

/// The page holding the probe window of the stack of `usable` bytes whose
/// top is `top`, `(addr, len)`, if the stack has a deep region (see
/// `StackCache::with_pool`).
fn probe_window(top: NonZeroUsize, usable: usize) -> Option<(usize, usize)> {
    let (page, keep) = (mem::page_size(), keep_bytes());
    (usable >= keep + page).then(|| (top.get() - keep - page, page))
}

/// The top page of the stack whose top is `top`, `(addr, len)`: the page
/// every goroutine on it writes first.
fn top_page(top: NonZeroUsize) -> (usize, usize) {
    (top.get() - mem::page_size(), mem::page_size())
}

/// Writes the tops of freshly guarded slots to `out` and notes their top
/// pages and probe windows in `to_map` (see `Pool::carve_batch`).
fn finish_batch(
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
struct ToMap {
    tops: [(usize, usize); BATCH],
    windows: [(usize, usize); BATCH],
    nt: usize,
    nw: usize,
}

impl ToMap {
    fn new() -> Self {
        ToMap {
            tops: [(0, 0); BATCH],
            windows: [(0, 0); BATCH],
            nt: 0,
            nw: 0,
        }
    }

    /// Notes the stack of `usable` bytes whose top is `top`; past
    /// `BATCH` stacks (a refill) the rest fault on first touch instead.
    fn add(&mut self, top: NonZeroUsize, usable: usize) {
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
    fn populate(&self) {
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
fn populate(pages: &[(usize, usize)], advice: libc::c_int) {
    if pages.is_empty() {
        return;
    }
    // SAFETY: each range is one page of the usable range of a stack the
    // caller owns and nothing runs on; populating leaves the contents as
    // they are (zero: released or never touched).
    let _ = unsafe { mem::madvise_batch(pages, advice) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::signal::tests::{child_scenario, run_child};

    fn page() -> usize {
        mem::page_size()
    }

    /// Writes one byte at `addr` inside memory we own.
    fn poke(addr: usize, v: u8) {
        // SAFETY: tests only poke usable ranges of stacks they own.
        unsafe { ptr::write_volatile(addr as *mut u8, v) }
    }

    fn peek(addr: usize) -> u8 {
        // SAFETY: tests only peek usable ranges of stacks they own.
        unsafe { ptr::read_volatile(addr as *const u8) }
    }

    /// Forks a child that writes one byte at `addr`; returns the signal that
    /// killed it (0 if it exited normally).
    fn child_write_signal(addr: usize) -> i32 {
        // SAFETY: the child only does a volatile store and _exit, both
        // async-signal-safe, so forking a multi-threaded process is fine.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork: {}", io::Error::last_os_error());
        if pid == 0 {
            // SAFETY: in the child; see above. A fault kills it.
            unsafe {
                ptr::write_volatile(addr as *mut u8, 1);
                libc::_exit(0);
            }
        }
        let mut status = 0;
        // SAFETY: waiting for our own child.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(r, pid);
        if libc::WIFSIGNALED(status) {
            libc::WTERMSIG(status)
        } else {
            assert!(libc::WIFEXITED(status));
            0
        }
    }

    /// Number of /proc/self/maps entries overlapping `ranges`.
    fn vmas_in(ranges: &[(usize, usize)]) -> usize {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        maps.lines()
            .filter(|l| {
                let r = l.split_whitespace().next().unwrap();
                let (a, b) = r.split_once('-').unwrap();
                let a = usize::from_str_radix(a, 16).unwrap();
                let b = usize::from_str_radix(b, 16).unwrap();
                ranges.iter().any(|&(lo, len)| a < lo + len && lo < b)
            })
            .count()
    }

    #[test]
    fn cache_reuses_the_same_stack_lifo() {
        let pool = Pool::leak(GuardPolicy::Auto);
        let mut c = StackCache::with_pool(pool, DEFAULT_STACK_SIZE);
        let a = c.get(DEFAULT_STACK_SIZE).unwrap();
        let b = c.get(DEFAULT_STACK_SIZE).unwrap();
        let (ta, tb) = (a.top, b.top);
        assert_ne!(ta, tb);
        c.put(a);
        c.put(b);
        assert_eq!(c.get(DEFAULT_STACK_SIZE).unwrap().top, tb);
        let again = c.get(DEFAULT_STACK_SIZE).unwrap();
        assert_eq!(again.top, ta);
        c.put(again);
        assert_eq!(c.get(DEFAULT_STACK_SIZE).unwrap().top, ta);
    }

    #[test]
    fn slab_stacks_do_not_overlap_and_guards_sit_below() {
        let pool = Pool::leak(GuardPolicy::Auto);
        let mut c = StackCache::with_pool(pool, DEFAULT_STACK_SIZE);
        let stacks: Vec<Stack> = (0..600)
            .map(|_| c.get(DEFAULT_STACK_SIZE).unwrap())
            .collect();
        let mut ranges: Vec<(usize, usize)> = stacks
            .iter()
            .map(|s| {
                let (glo, ghi) = s.guard_range();
                assert_eq!(ghi - glo, page());
                assert_eq!(ghi, s.bottom(), "guard directly below the usable range");
                assert_eq!(s.top.get() - ghi, DEFAULT_STACK_SIZE);
                assert_eq!(s.usable_size(), DEFAULT_STACK_SIZE);
                assert_eq!(s.top.get() % page(), 0);
                use corosensei::stack::Stack as _;
                assert_eq!(s.limit().get(), glo);
                // base = top minus the local line, the cache colour and
                // the traceback header; the header ends on a line.
                let below = s.top.get() - s.base().get();
                assert!(
                    below >= TOP_RESERVED + HEADER_BYTES,
                    "base {below} bytes below the top"
                );
                let colour = below - TOP_RESERVED - HEADER_BYTES;
                assert!(colour < 2048 && colour % 64 == 0, "colour {colour}");
                assert_eq!(header_addr(s.top.get()), s.base().get());
                assert_eq!((s.base().get() + HEADER_BYTES) % 64, 0);
                // corosensei's parent link (16 bytes below base) shares the
                // header's cache line.
                assert_eq!(
                    (s.base().get() - 16) / 64,
                    (s.base().get() + HEADER_BYTES - 1) / 64
                );
                (glo, s.top.get())
            })
            .collect();
        ranges.sort_unstable();
        for w in ranges.windows(2) {
            assert!(w[0].1 <= w[1].0, "overlap: {:x?} {:x?}", w[0], w[1]);
        }
        // 600 stacks need 3 slabs of 256.
        assert_eq!(pool.slabs().len(), 3);
        for s in stacks {
            c.put(s);
        }
    }

    #[test]
    fn usable_range_is_writable_top_and_bottom() {
        let pool = Pool::leak(GuardPolicy::Auto);
        let mut c = StackCache::with_pool(pool, DEFAULT_STACK_SIZE);
        let s = c.get(DEFAULT_STACK_SIZE).unwrap();
        poke(s.top.get() - 1, 7);
        poke(s.bottom(), 9);
        assert_eq!(peek(s.top.get() - 1), 7);
        assert_eq!(peek(s.bottom()), 9);
        c.put(s);
    }

    fn coalesced_release_keeps_guards(pool: &'static Pool) {
        let mut c = StackCache::with_pool(pool, DEFAULT_STACK_SIZE);
        let mut v: Vec<Stack> = (0..8).map(|_| c.get(DEFAULT_STACK_SIZE).unwrap()).collect();
        v.sort_by_key(|s| s.top);
        let tops: Vec<NonZeroUsize> = v.iter().map(|s| s.top).collect();
        let adjacent = tops
            .windows(2)
            .filter(|w| w[1].get() == w[0].get() + DEFAULT_STACK_SIZE + page())
            .count();
        assert!(adjacent > 0, "carved stacks are adjacent");
        for s in &v {
            poke(s.bottom(), 7);
            poke(s.top.get() - 1, 7);
        }
        release_coalesced(&tops, DEFAULT_STACK_SIZE);
        for s in &v {
            assert_eq!(peek(s.bottom()), 0, "released");
            assert_eq!(peek(s.top.get() - 1), 0, "released");
            let (lo, hi) = s.guard_range();
            assert_eq!(child_write_signal(lo), libc::SIGSEGV, "guard kept");
            assert_eq!(child_write_signal(hi - 1), libc::SIGSEGV, "guard kept");
        }
        for s in v {
            c.put(s);
        }
    }

    #[test]
    fn coalesced_release_keeps_guards_with_madv_guard_install() {
        coalesced_release_keeps_guards(Pool::leak(GuardPolicy::Auto));
    }

    #[test]
    fn coalesced_release_keeps_guards_with_mprotect_fallback() {
        coalesced_release_keeps_guards(Pool::leak(GuardPolicy::ForceMprotect));
    }

    fn guard_faults(pool: &'static Pool) {
        let mut c = StackCache::with_pool(pool, DEFAULT_STACK_SIZE);
        let s = c.get(DEFAULT_STACK_SIZE).unwrap();
        assert_eq!(child_write_signal(s.bottom()), 0, "bottom is writable");
        assert_eq!(child_write_signal(s.top.get() - 1), 0, "top is writable");
        let (lo, hi) = s.guard_range();
        assert_eq!(child_write_signal(hi - 1), libc::SIGSEGV, "guard top byte");
        assert_eq!(child_write_signal(lo), libc::SIGSEGV, "guard low byte");
        // The guard survives a trip through the pool (deep release on put,
        // warm list on drain) and reuse.
        let top = s.top;
        for a in (s.bottom()..s.top.get()).step_by(page()) {
            // First and last word of every page, as a deep call chain does.
            poke(a, 1);
            poke(a + page() - 8, 1);
        }
        c.put(s);
        c.drain();
        assert_eq!(pool.warm_len(DEFAULT_STACK_SIZE), BATCH);
        let mut all = Vec::new();
        let s = loop {
            let s = c.get(DEFAULT_STACK_SIZE).unwrap();
            if s.top == top {
                break s;
            }
            all.push(s);
        };
        assert_eq!(peek(s.bottom()), 0, "released pages read as zero");
        assert_eq!(child_write_signal(s.guard_range().0), libc::SIGSEGV);
        c.put(s);
    }

    #[test]
    fn guard_faults_with_madv_guard_install() {
        let pool = Pool::leak(GuardPolicy::Auto);
        guard_faults(pool);
        if pool.mode() != GuardMode::Madvise {
            println!("skipped MADV_GUARD_INSTALL: unsupported here, tested the fallback");
        }
    }

    #[test]
    fn carved_stacks_are_guarded_with_their_windows_mapped() {
        let pool = Pool::leak(GuardPolicy::Auto);
        let mut c = StackCache::with_pool(pool, DEFAULT_STACK_SIZE);
        // The first refill settles the guard mode one stack at a time; the
        // second carves a batch (where the kernel has MADV_GUARD_INSTALL).
        let stacks: Vec<Stack> = (0..2 * BATCH)
            .map(|_| c.get(DEFAULT_STACK_SIZE).unwrap())
            .collect();
        let batched = pool.mode() == GuardMode::Madvise && pool.lock().batch;
        // Both refills map their stacks' top pages and windows: the first
        // one's too, though it installs its guards one by one.
        for s in &stacks {
            let (lo, hi) = s.guard_range();
            assert_eq!(child_write_signal(hi - 1), libc::SIGSEGV, "guard top byte");
            assert_eq!(child_write_signal(lo), libc::SIGSEGV, "guard low byte");
            assert_eq!(child_write_signal(s.bottom()), 0, "bottom is writable");
            let (w, len) = probe_window(s.top, s.usable).unwrap();
            if batched {
                // The window maps the zero page: "resident" for mincore,
                // reads zero, and no page of the stack holds memory (a
                // fork's writes above do not show here).
                assert_eq!(mem::resident_pages(w, len).unwrap(), 1);
                // The top page is allocated ahead of the goroutine's first
                // write; the pages between hold nothing.
                let (t, _) = top_page(s.top);
                assert_eq!(mem::resident_pages(t, page()).unwrap(), 1);
                assert_eq!(mem::resident_pages(w + len, t - w - len).unwrap(), 0);
            }
            assert!(!went_deep(s.top.get() - keep_bytes()));
        }
        if !batched {
            println!("batched carving unsupported here: tested the one-by-one path");
        }
        for s in stacks {
            c.put(s);
        }
    }

    #[test]
    fn guard_faults_with_mprotect_fallback() {
        let pool = Pool::leak(GuardPolicy::ForceMprotect);
        guard_faults(pool);
        assert_eq!(pool.mode(), GuardMode::Mprotect { forced: true });
    }

    #[test]
    fn deep_pages_are_released_on_put_and_shallow_ones_kept() {
        let pool = Pool::leak(GuardPolicy::Auto);
        let mut c = StackCache::with_pool(pool, DEFAULT_STACK_SIZE);
        let keep_pages = KEEP_BYTES / page();
        let all_pages = DEFAULT_STACK_SIZE / page();
        let s = c.get(DEFAULT_STACK_SIZE).unwrap();
        let (bottom, top) = (s.bottom(), s.top.get());
        // Deep use: touch every page.
        // Like a growing stack: the top of every page is written first.
        for a in (bottom..top).step_by(page()) {
            poke(a + page() - 8, 0x5a);
        }
        assert_eq!(
            mem::resident_pages(bottom, DEFAULT_STACK_SIZE).unwrap(),
            all_pages
        );
        c.put(s);
        assert_eq!(
            mem::resident_pages(bottom, DEFAULT_STACK_SIZE - KEEP_BYTES).unwrap(),
            0,
            "deep pages released"
        );
        assert_eq!(
            mem::resident_pages(top - KEEP_BYTES, KEEP_BYTES).unwrap(),
            keep_pages,
            "kept region stays resident"
        );
        // Shallow use: only the kept region; put must not release it and the
        // deep region costs nothing (at most the zero page mapped by the probe).
        let s = c.get(DEFAULT_STACK_SIZE).unwrap();
        assert_eq!(s.top.get(), top);
        poke(top - 64, 3);
        c.put(s);
        assert_eq!(
            mem::resident_pages(top - KEEP_BYTES, KEEP_BYTES).unwrap(),
            keep_pages
        );
        assert!(mem::resident_pages(bottom, DEFAULT_STACK_SIZE - KEEP_BYTES).unwrap() <= 1);
        assert_eq!(peek(top - 64), 3, "no release: contents kept");
    }

    #[test]
    fn full_cache_spills_half_to_the_pool_warm_then_releases_past_the_bound() {
        let pool = Pool::leak(GuardPolicy::Auto);
        let mut c = StackCache::with_pool(pool, DEFAULT_STACK_SIZE);
        let stacks: Vec<Stack> = (0..CACHE_CAP + 1)
            .map(|_| c.get(DEFAULT_STACK_SIZE).unwrap())
            .collect();
        let ranges: Vec<(usize, usize)> = stacks.iter().map(|s| (s.bottom(), s.usable)).collect();
        for s in &stacks {
            // Touch only the kept region: the probe sees nothing.
            for a in (s.top.get() - KEEP_BYTES..s.top.get()).step_by(page()) {
                poke(a, 1);
            }
        }
        // Empty the cache (it holds the rest of the last refill batch).
        c.drain();
        let warm0 = pool.warm_len(DEFAULT_STACK_SIZE);
        for s in stacks {
            c.put(s);
        }
        assert_eq!(c.len(), CACHE_CAP + 1 - BATCH);
        // The oldest BATCH were spilled to the warm list without a release:
        // their kept pages are still there, ready for reuse without faults.
        assert_eq!(pool.warm_len(DEFAULT_STACK_SIZE), warm0 + BATCH);
        for &(b, len) in &ranges {
            assert!(mem::resident_pages(b, len).unwrap() >= KEEP_BYTES / page());
        }
        // Past 2 * WARM_MAX warm stacks, the oldest WARM_MAX are released.
        let free0 = pool.free_len(DEFAULT_STACK_SIZE);
        let mut more: Vec<Stack> = (0..2 * WARM_MAX + CACHE_CAP)
            .map(|_| pool.get(DEFAULT_STACK_SIZE).unwrap())
            .collect();
        for s in &more {
            poke(s.top.get() - page(), 1);
        }
        c.drain();
        for s in more.drain(..) {
            c.put(s);
        }
        c.drain();
        let warm = pool.warm_len(DEFAULT_STACK_SIZE);
        assert!(warm <= 2 * WARM_MAX, "{warm} warm stacks");
        assert!(pool.free_len(DEFAULT_STACK_SIZE) >= free0 + WARM_MAX);
        // Our first stacks were the oldest warm ones: released entirely.
        for &(b, len) in &ranges {
            assert_eq!(mem::resident_pages(b, len).unwrap(), 0);
        }
    }

    /// A pool with a background releaser, and more stacks from it than its
    /// warm list keeps (past `2 * WARM_MAX` once spilled).
    fn background_pool_and_stacks() -> (&'static Pool, Vec<Stack>) {
        let pool = Pool::leak(GuardPolicy::Auto);
        pool.background.store(true, Ordering::Relaxed);
        let stacks = (0..2 * WARM_MAX + 2 * CACHE_CAP)
            .map(|_| pool.get(DEFAULT_STACK_SIZE).unwrap())
            .collect();
        (pool, stacks)
    }

    /// Puts `stacks` through a cache onto `pool`'s warm list, past its
    /// bound (as goroutine exits would); returns the warm count.
    fn spill_past_the_bound(pool: &'static Pool, stacks: Vec<Stack>) -> usize {
        let mut c = StackCache::with_pool(pool, DEFAULT_STACK_SIZE);
        for s in stacks {
            c.put(s);
        }
        c.drain();
        let warm = pool.warm_len(DEFAULT_STACK_SIZE);
        assert!(warm > 2 * WARM_MAX, "{warm} warm stacks");
        warm
    }

    /// While exits stream in, the pace stretches to keep the release
    /// within `1 / RELEASE_BUDGET_DIV` of the releaser's time.
    #[test]
    fn streaming_release_keeps_to_its_share_of_a_cpu() {
        let (pool, stacks) = background_pool_and_stacks();
        let warm = spill_past_the_bound(pool, stacks);
        let stream = |cost: i64, since: i64| {
            let mut inner = pool.lock();
            inner.spills += 1;
            inner.chunk_cost = cost;
            inner.released_at = crate::sys::time::nanotime() - since;
        };
        // The last chunk took 1 ms: the pace is 50 ms, and 2 ms have passed.
        stream(1_000_000, 2 * RELEASE_PACE_NS);
        pool.release_excess();
        assert_eq!(
            pool.warm_len(DEFAULT_STACK_SIZE),
            warm,
            "released within the pace"
        );
        assert!(pool.excess.load(Ordering::Relaxed));
        assert!(pool.paced.load(Ordering::Relaxed));
        // One such pace later: a chunk, and its cost is measured.
        stream(1_000_000, RELEASE_BUDGET_DIV * 1_000_000);
        pool.release_excess();
        let gone = warm - pool.warm_len(DEFAULT_STACK_SIZE);
        assert!(gone >= PACED_CHUNK, "{gone} released");
        let cost = pool.lock().chunk_cost;
        assert!(cost > 0 && cost != 1_000_000, "chunk cost {cost}");
    }

    /// With a background releaser, a goroutine exit that spills past
    /// `2 * WARM_MAX` makes no system call: the excess waits for
    /// `release_excess` (sysmon), which paces itself while exits stream in
    /// and takes the rest once they stop. Past `WARM_HARD_MAX` the spilling
    /// thread releases only if the releaser stalled.
    #[test]
    fn background_releaser_takes_the_excess_release_off_the_spilling_thread() {
        let (pool, stacks) = background_pool_and_stacks();
        let first: Vec<(usize, usize)> =
            stacks[..8].iter().map(|s| (s.bottom(), s.usable)).collect();
        for s in &stacks {
            poke(s.top.get() - page(), 1);
        }
        let warm = spill_past_the_bound(pool, stacks);
        // Not released yet: the oldest still hold their touched top page.
        for &(b, len) in &first {
            assert!(mem::resident_pages(b, len).unwrap() >= 1);
        }
        assert!(pool.excess.load(Ordering::Relaxed));
        assert!(!pool.paced.load(Ordering::Relaxed));
        let free0 = pool.free_len(DEFAULT_STACK_SIZE);
        // Exits spilled since the releaser last looked, and it released a
        // moment ago: nothing yet, and the request stays up, paced.
        pool.lock().released_at = crate::sys::time::nanotime();
        pool.release_excess();
        assert_eq!(pool.warm_len(DEFAULT_STACK_SIZE), warm);
        assert!(pool.excess.load(Ordering::Relaxed));
        assert!(pool.paced.load(Ordering::Relaxed));
        // Exits still spilling (counted by hand here), one pace later: a
        // paced chunk (more if the box stalled us for another pace), the
        // oldest first.
        {
            let mut inner = pool.lock();
            inner.spills += 1;
            inner.released_at = crate::sys::time::nanotime() - RELEASE_PACE_NS;
        }
        pool.release_excess();
        let left = pool.warm_len(DEFAULT_STACK_SIZE);
        let gone = warm - left;
        assert!(
            gone >= PACED_CHUNK && (gone % PACED_CHUNK == 0 || left == WARM_MAX),
            "{gone} released"
        );
        assert_eq!(pool.free_len(DEFAULT_STACK_SIZE), free0 + gone);
        for &(b, len) in &first {
            assert_eq!(mem::resident_pages(b, len).unwrap(), 0);
        }
        assert_eq!(pool.excess.load(Ordering::Relaxed), left > WARM_MAX);
        // No spill since: the rest goes at once (it fits in one chunk).
        pool.release_excess();
        assert_eq!(pool.warm_len(DEFAULT_STACK_SIZE), WARM_MAX);
        assert_eq!(pool.free_len(DEFAULT_STACK_SIZE), free0 + warm - WARM_MAX);
        // Nothing left to do: a second call is a flag load.
        assert!(!pool.excess.load(Ordering::Relaxed));
        pool.release_excess();
        assert_eq!(pool.warm_len(DEFAULT_STACK_SIZE), WARM_MAX);

        // Past the hard bound with sysmon looking, spills only queue...
        // (`looking`: sysmon looks between the exits, as it does while
        // they stream in; played by hand here, as a look that stays fresh
        // for an hour. Without it, all the puts must land within
        // `RELEASER_STALL_NS` of the first spill past the bound, which a
        // ThreadSanitizer build, or a loaded machine, does not keep to; a
        // refresh every few puts did not either, under TSan on a loaded
        // machine. The first spill past the bound sets the look to now,
        // hence a refresh before every put.)
        let spill = |count: usize, looking: bool| {
            let more: Vec<Stack> = (0..count)
                .map(|_| pool.get(DEFAULT_STACK_SIZE).unwrap())
                .collect();
            let mut c = StackCache::with_pool(pool, DEFAULT_STACK_SIZE);
            for s in more {
                if looking {
                    pool.lock().releaser_seen = crate::sys::time::nanotime() + 3_600_000_000_000;
                }
                c.put(s);
            }
            c.drain();
        };
        spill(WARM_HARD_MAX + CACHE_CAP, true);
        let warm = pool.warm_len(DEFAULT_STACK_SIZE);
        assert!(warm > WARM_HARD_MAX, "{warm} warm stacks");
        // ... and with sysmon silent for too long, the spilling thread
        // brings the list back under the bound.
        pool.lock().releaser_seen = crate::sys::time::nanotime() - 2 * RELEASER_STALL_NS;
        spill(CACHE_CAP, false);
        let warm = pool.warm_len(DEFAULT_STACK_SIZE);
        assert!(
            warm <= WARM_HARD_MAX,
            "{warm} warm stacks past the hard bound"
        );
    }

    #[test]
    fn periodic_trim_releases_missed_deep_pages() {
        let pool = Pool::leak(GuardPolicy::Auto);
        let mut c = StackCache::with_pool(pool, DEFAULT_STACK_SIZE);
        let s = c.get(DEFAULT_STACK_SIZE).unwrap();
        let bottom = s.bottom();
        // Deep use the probe cannot see: the window stays zero.
        poke(bottom, 1);
        c.put(s);
        assert_eq!(
            mem::resident_pages(bottom, page()).unwrap(),
            1,
            "missed by the probe"
        );
        // The trim walks the cache round-robin; `s` stays on top.
        for _ in 0..TRIM_EVERY as usize * c.len() {
            let s = c.get(DEFAULT_STACK_SIZE).unwrap();
            c.put(s);
        }
        assert_eq!(mem::resident_pages(bottom, page()).unwrap(), 0, "trimmed");
    }

    #[test]
    fn other_sizes_use_the_sized_pool_and_drop_returns_stacks() {
        let pool = Pool::leak(GuardPolicy::Auto);
        let mut c = StackCache::with_pool(pool, DEFAULT_STACK_SIZE);
        let big = c.get(1 << 20).unwrap();
        assert_eq!(big.usable_size(), 1 << 20);
        let t = big.top;
        poke(big.bottom(), 1);
        c.put(big);
        assert_eq!(c.len(), 0, "non-default sizes are not cached");
        assert_eq!(pool.free_len(1 << 20), 1);
        let again = c.get(1 << 20).unwrap();
        assert_eq!(again.top, t);
        assert_eq!(peek(again.bottom()), 0, "fully released");
        drop(again);
        assert_eq!(pool.free_len(1 << 20), 1, "Drop returns the stack");
        // Odd sizes are rounded up to the page size.
        let odd = pool.get(100_000).unwrap();
        assert_eq!(odd.usable_size() % page(), 0);
        assert!(odd.usable_size() >= 100_000);
    }

    #[test]
    fn hundred_thousand_stacks_stay_under_a_few_hundred_mappings() {
        const N: usize = 100_000;
        let pool = Pool::leak(GuardPolicy::Auto);
        let mut c = StackCache::with_pool(pool, DEFAULT_STACK_SIZE);
        drop(c.get(DEFAULT_STACK_SIZE).unwrap());
        if pool.mode() != GuardMode::Madvise {
            // 100,000 mprotect guards would exceed the stock vm.max_map_count.
            println!("skipped: this kernel lacks MADV_GUARD_INSTALL (needs Linux >= 6.13)");
            return;
        }
        let before = std::fs::read_to_string("/proc/self/maps")
            .unwrap()
            .lines()
            .count();
        let t = std::time::Instant::now();
        let stacks: Vec<Stack> = (0..N).map(|_| c.get(DEFAULT_STACK_SIZE).unwrap()).collect();
        let got = t.elapsed();
        let slabs = pool.slabs();
        let vmas = vmas_in(&slabs);
        let after = std::fs::read_to_string("/proc/self/maps")
            .unwrap()
            .lines()
            .count();
        let t = std::time::Instant::now();
        for s in stacks {
            c.put(s);
        }
        c.drain();
        println!(
            "{N} stacks: {} slabs, {vmas} mappings over the slabs, process maps {before} -> \
             {after}, get {:?}, put+drain {:?}",
            slabs.len(),
            got,
            t.elapsed()
        );
        assert_eq!(slabs.len(), N.div_ceil(256));
        assert!(
            vmas <= slabs.len(),
            "{vmas} mappings for {} slabs",
            slabs.len()
        );
        assert!(vmas < 400, "{vmas} mappings");
    }

    #[test]
    fn mprotect_fallback_costs_about_two_mappings_per_stack() {
        let pool = Pool::leak(GuardPolicy::ForceMprotect);
        let mut c = StackCache::with_pool(pool, DEFAULT_STACK_SIZE);
        let stacks: Vec<Stack> = (0..100)
            .map(|_| c.get(DEFAULT_STACK_SIZE).unwrap())
            .collect();
        let vmas = vmas_in(&pool.slabs());
        println!("mprotect guards: 100 stacks (+12 carved) -> {vmas} mappings");
        // 112 carved guards (7 batches of 16) + the slab top guard, each
        // splitting the slab: about 2 mappings per stack.
        assert!((200..=240).contains(&vmas), "{vmas}");
        for s in stacks {
            c.put(s);
        }
    }

    #[test]
    #[cfg_attr(
        any(goroutine_sanitize = "address", goroutine_sanitize = "thread"),
        ignore = "exhausts vm.max_map_count, and the sanitizer runtime then dies mapping memory \
                  of its own"
    )]
    fn mprotect_fallback_reports_the_map_limit() {
        let name = "g::stack::tests::mprotect_fallback_reports_the_map_limit";
        let max = mem::max_map_count().unwrap_or(u64::MAX);
        if max > 200_000 {
            println!("skipped: vm.max_map_count is {max}, too high to exhaust quickly");
            return;
        }
        if child_scenario(name) {
            let pool = Pool::leak(GuardPolicy::ForceMprotect);
            let mut c = StackCache::with_pool(pool, MIN_STACK_SIZE);
            let mut held = Vec::with_capacity(100_000);
            let err = loop {
                match c.get(MIN_STACK_SIZE) {
                    Ok(s) => held.push(s),
                    Err(e) => break e,
                }
                assert!(held.len() < 100_000, "no map limit hit");
            };
            let n = held.len();
            std::mem::forget(held);
            eprintln!("CHILD: {n} stacks, then: {err}");
            assert_eq!(err.kind(), io::ErrorKind::OutOfMemory);
            let msg = err.to_string();
            assert!(msg.contains("vm.max_map_count is"), "{msg}");
            assert!(msg.contains("sysctl"), "{msg}");
            assert!(msg.contains("GOROUTINE_STACK_GUARD=mprotect"), "{msg}");
            let max = max as usize;
            assert!(n > max / 2 - 2000 && n < max / 2, "{n} stacks, limit {max}");
            return;
        }
        let out = run_child(name);
        let stderr = String::from_utf8_lossy(&out.stderr);
        println!("{stderr}");
        assert!(
            out.status.success(),
            "child failed: {:?}\n{stderr}",
            out.status
        );
        assert!(stderr.contains("CHILD:"), "{stderr}");
    }

    /// Makes `madvise(..., MADV_GUARD_INSTALL)` fail with `EINVAL` for the
    /// calling thread (and threads and processes it creates), as on a kernel
    /// older than 6.13: a seccomp filter on the advice argument.
    #[cfg(target_arch = "x86_64")]
    fn simulate_kernel_without_guard_install() {
        const LD_W_ABS: u16 = 0x20;
        const JEQ_K: u16 = 0x15;
        const RET_K: u16 = 0x06;
        const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
        const RET_ALLOW: u32 = 0x7fff_0000;
        const RET_ERRNO: u32 = 0x0005_0000;
        let ins = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
        let prog = [
            ins(LD_W_ABS, 0, 0, 4), // seccomp_data.arch
            ins(JEQ_K, 0, 4, AUDIT_ARCH_X86_64),
            ins(LD_W_ABS, 0, 0, 0), // seccomp_data.nr
            ins(JEQ_K, 0, 2, libc::SYS_madvise as u32),
            ins(LD_W_ABS, 0, 0, 32), // low half of args[2], the advice
            ins(JEQ_K, 1, 0, mem::MADV_GUARD_INSTALL as u32),
            ins(RET_K, 0, 0, RET_ALLOW),
            ins(RET_K, 0, 0, RET_ERRNO | libc::EINVAL as u32),
        ];
        let fprog = libc::sock_fprog {
            len: prog.len() as u16,
            filter: prog.as_ptr() as *mut libc::sock_filter,
        };
        // SAFETY: prctl with valid arguments; `fprog` points to a valid BPF
        // program that outlives the call (the kernel copies it).
        unsafe {
            assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
            let r = libc::prctl(libc::PR_SET_SECCOMP, 2, &fprog as *const libc::sock_fprog);
            assert_eq!(r, 0, "seccomp: {}", io::Error::last_os_error());
        }
    }

    /// Makes every `process_madvise` fail with `ENOSYS` for the calling
    /// thread (and what it creates), as on a kernel older than 5.10 (older
    /// than 6.14 fails `PIDFD_SELF` with `EBADF` instead: the same path).
    #[cfg(target_arch = "x86_64")]
    fn simulate_kernel_without_process_madvise() {
        const LD_W_ABS: u16 = 0x20;
        const JEQ_K: u16 = 0x15;
        const RET_K: u16 = 0x06;
        const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
        const RET_ALLOW: u32 = 0x7fff_0000;
        const RET_ERRNO: u32 = 0x0005_0000;
        let ins = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
        let prog = [
            ins(LD_W_ABS, 0, 0, 4), // seccomp_data.arch
            ins(JEQ_K, 0, 2, AUDIT_ARCH_X86_64),
            ins(LD_W_ABS, 0, 0, 0), // seccomp_data.nr
            ins(JEQ_K, 1, 0, libc::SYS_process_madvise as u32),
            ins(RET_K, 0, 0, RET_ALLOW),
            ins(RET_K, 0, 0, RET_ERRNO | libc::ENOSYS as u32),
        ];
        let fprog = libc::sock_fprog {
            len: prog.len() as u16,
            filter: prog.as_ptr() as *mut libc::sock_filter,
        };
        // SAFETY: prctl with valid arguments; `fprog` points to a valid BPF
        // program that outlives the call (the kernel copies it).
        unsafe {
            assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
            let r = libc::prctl(libc::PR_SET_SECCOMP, 2, &fprog as *const libc::sock_fprog);
            assert_eq!(r, 0, "seccomp: {}", io::Error::last_os_error());
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn kernel_without_batched_madvise_installs_guards_one_by_one() {
        let name = "g::stack::tests::kernel_without_batched_madvise_installs_guards_one_by_one";
        if child_scenario(name) {
            simulate_kernel_without_process_madvise();
            let pool = Pool::leak(GuardPolicy::Auto);
            let mut c = StackCache::with_pool(pool, DEFAULT_STACK_SIZE);
            let stacks: Vec<Stack> = (0..3 * BATCH)
                .map(|_| c.get(DEFAULT_STACK_SIZE).unwrap())
                .collect();
            if pool.mode() == GuardMode::Madvise {
                assert!(!pool.lock().batch, "batching given up");
            }
            for s in &stacks {
                let (lo, hi) = s.guard_range();
                assert_eq!(child_write_signal(lo), libc::SIGSEGV);
                assert_eq!(child_write_signal(hi - 1), libc::SIGSEGV);
                assert_eq!(child_write_signal(s.bottom()), 0);
            }
            for s in stacks {
                c.put(s);
            }
            eprintln!("CHILD: done");
            return;
        }
        let out = run_child(name);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "child failed: {:?}\n{stderr}",
            out.status
        );
        assert!(stderr.contains("CHILD: done"), "{stderr}");
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn kernel_without_guard_install_falls_back_to_mprotect() {
        let name = "g::stack::tests::kernel_without_guard_install_falls_back_to_mprotect";
        if child_scenario(name) {
            simulate_kernel_without_guard_install();
            let p = mem::reserve(page()).unwrap();
            // SAFETY: our fresh page.
            let e = unsafe { mem::guard_install(p, page()) }.unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
            // The alternate signal stack falls back to an mprotect guard.
            std::thread::spawn(|| {
                let off = libc::stack_t {
                    ss_sp: ptr::null_mut(),
                    ss_flags: libc::SS_DISABLE,
                    ss_size: 0,
                };
                // SAFETY: disabling this thread's alternate stack.
                assert_eq!(unsafe { libc::sigaltstack(&off, ptr::null_mut()) }, 0);
                crate::sys::signal::install_altstack_for_current_thread().unwrap();
            })
            .join()
            .unwrap();
            let pool = Pool::leak(GuardPolicy::Auto);
            let mut c = StackCache::with_pool(pool, MIN_STACK_SIZE);
            let s = c.get(MIN_STACK_SIZE).unwrap();
            assert_eq!(pool.mode(), GuardMode::Mprotect { forced: false });
            assert_eq!(child_write_signal(s.guard_range().0), libc::SIGSEGV);
            assert_eq!(child_write_signal(s.bottom()), 0);
            let max = mem::max_map_count().unwrap_or(u64::MAX);
            // Under a sanitizer, exhausting the map count kills the
            // sanitizer runtime first (it maps memory of its own).
            let sanitizer = cfg!(any(
                goroutine_sanitize = "address",
                goroutine_sanitize = "thread"
            ));
            if max <= 200_000 && !sanitizer {
                let mut held = Vec::with_capacity(100_000);
                let err = loop {
                    match c.get(MIN_STACK_SIZE) {
                        Ok(s) => held.push(s),
                        Err(e) => break e,
                    }
                    assert!(held.len() < 100_000, "no map limit hit");
                };
                std::mem::forget(held);
                eprintln!("CHILD: {err}");
                assert_eq!(err.kind(), io::ErrorKind::OutOfMemory);
                let msg = err.to_string();
                assert!(
                    msg.contains("This kernel lacks MADV_GUARD_INSTALL (needs Linux >= 6.13)"),
                    "{msg}"
                );
                assert!(msg.contains(&format!("vm.max_map_count is {max}")), "{msg}");
            }
            std::mem::forget(s);
            eprintln!("CHILD: done");
            return;
        }
        let out = run_child(name);
        let stderr = String::from_utf8_lossy(&out.stderr);
        println!("{stderr}");
        assert!(
            out.status.success(),
            "child failed: {:?}\n{stderr}",
            out.status
        );
        assert!(stderr.contains("CHILD: done"), "{stderr}");
    }

    #[test]
    fn map_limit_message_explains_the_limit() {
        let e = io::Error::from_raw_os_error(libc::ENOMEM);
        let m = map_limit_message(&e, false, "mprotect", Some(65530));
        assert!(
            m.contains("lacks MADV_GUARD_INSTALL (needs Linux >= 6.13)"),
            "{m}"
        );
        assert!(
            m.contains("vm.max_map_count is 65530, which allows about 32765 stacks"),
            "{m}"
        );
        assert!(m.contains("sysctl -w vm.max_map_count="), "{m}");
        let m = map_limit_message(&e, true, "mmap", None);
        assert!(m.contains("GOROUTINE_STACK_GUARD=mprotect forces"), "{m}");
        let e = map_limit_error(
            io::Error::from_raw_os_error(libc::ENOMEM),
            false,
            "mprotect",
        );
        assert_eq!(e.kind(), io::ErrorKind::OutOfMemory);
        let e = map_limit_error(
            io::Error::from_raw_os_error(libc::EACCES),
            false,
            "mprotect",
        );
        assert_eq!(e.raw_os_error(), Some(libc::EACCES));
    }

    #[test]
    fn validate_stack_size_limits_and_rounding() {
        assert_eq!(validate_stack_size(MIN_STACK_SIZE).unwrap(), MIN_STACK_SIZE);
        assert_eq!(validate_stack_size(MAX_STACK_SIZE).unwrap(), MAX_STACK_SIZE);
        assert_eq!(
            validate_stack_size(DEFAULT_STACK_SIZE).unwrap(),
            DEFAULT_STACK_SIZE
        );
        let r = validate_stack_size(MIN_STACK_SIZE + 1).unwrap();
        assert_eq!(r, MIN_STACK_SIZE + page());
        for bad in [0, 1, MIN_STACK_SIZE - 1, MAX_STACK_SIZE + 1, usize::MAX] {
            let e = validate_stack_size(bad).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
            let m = e.to_string();
            assert!(m.contains("16 KiB") && m.contains("1 GiB"), "{m}");
        }
    }

    #[test]
    fn stack_size_parsing() {
        assert_eq!(parse_stack_size("65536"), Ok(65536));
        assert_eq!(parse_stack_size("64K"), Ok(65536));
        assert_eq!(parse_stack_size(" 64 KiB "), Ok(65536));
        assert_eq!(parse_stack_size("64kib"), Ok(65536));
        assert_eq!(parse_stack_size("2M"), Ok(2 << 20));
        assert_eq!(parse_stack_size("2MiB"), Ok(2 << 20));
        assert_eq!(parse_stack_size("1G"), Ok(1 << 30));
        for bad in [
            "",
            "K",
            "-1",
            "1.5M",
            "64KB",
            "64 X",
            "99999999999999999999",
        ] {
            assert!(parse_stack_size(bad).is_err(), "{bad:?}");
        }
        assert!(parse_stack_size("18446744073709551615M").is_err());
    }

    #[test]
    fn stack_size_env_handling() {
        assert_eq!(stack_size_from_env(None), (DEFAULT_STACK_SIZE, None));
        // Empty is unset, silently, as for GOMAXPROCS.
        assert_eq!(
            stack_size_from_env(Some(Ok(""))),
            (DEFAULT_STACK_SIZE, None)
        );
        assert_eq!(stack_size_from_env(Some(Ok("1M"))), (1 << 20, None));
        assert_eq!(stack_size_from_env(Some(Ok("20000"))).0, 20480);
        for bad in ["lots", "4K", "2G"] {
            let (size, w) = stack_size_from_env(Some(Ok(bad)));
            assert_eq!(size, DEFAULT_STACK_SIZE);
            let w = w.unwrap();
            assert!(!w.contains('\n'), "one line: {w}");
            assert!(w.contains("GOROUTINE_STACK_SIZE"), "{w}");
            assert!(w.contains(&format!("{bad:?}")), "{w}");
            assert!(w.contains("256 KiB"), "{w}");
        }
        let os = std::ffi::OsStr::new("x");
        assert!(stack_size_from_env(Some(Err(os))).1.is_some());
        assert_eq!(default_stack_size() % page(), 0);
    }

    #[test]
    fn guard_env_handling() {
        assert_eq!(guard_env_forces_mprotect(None), (false, None));
        assert_eq!(guard_env_forces_mprotect(Some(Ok(""))), (false, None));
        assert_eq!(
            guard_env_forces_mprotect(Some(Ok("mprotect"))),
            (true, None)
        );
        let (f, w) = guard_env_forces_mprotect(Some(Ok("madvise")));
        assert!(!f);
        let w = w.unwrap();
        assert!(w.contains("GOROUTINE_STACK_GUARD") && w.contains("madvise") && !w.contains('\n'));
    }

    #[test]
    fn coroutine_runs_on_a_pooled_stack() {
        use corosensei::{Coroutine, CoroutineResult};
        let mut c = StackCache::new();
        let s = c.get(default_stack_size()).unwrap();
        let (lo, hi) = (s.bottom(), s.top.get());
        let mut co = Coroutine::with_stack(s, move |y, x: usize| {
            let local = 0u8;
            let sp = &local as *const u8 as usize;
            assert!(sp > lo && sp < hi, "running on the pooled stack");
            let z = y.suspend(x + 1);
            z * 2
        });
        assert!(matches!(co.resume(1), CoroutineResult::Yield(2)));
        assert!(matches!(co.resume(5), CoroutineResult::Return(10)));
        c.put(co.into_stack());
    }

    #[test]
    fn colour_offsets_spread_over_the_cache_sets() {
        // 64 consecutive default-size stacks get many distinct colours, each
        // a multiple of the cache line, within the top half page (so frames
        // of up to 2 KiB still fit in the top page).
        let stride = DEFAULT_STACK_SIZE + 4096;
        let mut seen = std::collections::HashSet::new();
        for i in 0..64usize {
            let top = 0x7f00_0000_0000 + i * stride;
            let c = colour_offset(top);
            assert_eq!(c % 64, 0);
            assert!(c < 2048);
            seen.insert(c);
        }
        assert!(seen.len() >= 24, "only {} colours", seen.len());
    }

    #[test]
    fn cache_is_send_and_stack_is_send() {
        fn send<T: Send>() {}
        send::<Stack>();
        send::<StackCache>();
    }
}
