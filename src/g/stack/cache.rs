//! The per-P stack cache: the level every spawn and exit uses (the module
//! note of `g::stack` has the levels and invariants).
//!
//! # Returning memory: the deep-use heuristic
//!
//! A goroutine that finishes after using a few KiB must not pay a system
//! call, but a burst of deep goroutines must not pin their pages forever. So
//! `StackCache::put` reads the 256-byte *probe window* at the top of the first
//! page below the kept 16 KiB (16 aligned 16-byte loads, OR-reduced). Pages
//! given back with `MADV_DONTNEED` read back as zero, so a nonzero word means
//! the last goroutine went at least that deep, and the deep region
//! (everything below the kept 16 KiB) is released with one `madvise`.
//! Otherwise nothing is done.
//!
//! Limits, honestly: the check sees *contents*, not residency. A goroutine
//! can go deeper while leaving the window zero: a frame that straddles the
//! boundary with >= 256 bytes of zeroed or never-written locals there (a
//! `[0u8; 4096]` buffer, or a page touched only by a stack probe) and then
//! calls further down. Such a miss leaves those deep pages resident while
//! the stack sits in the cache. The damage is bounded: at most [`CACHE_CAP`]
//! stacks per P can hold missed pages; every [`TRIM_EVERY`]th put the cache
//! unconditionally releases the deep region of one cached stack
//! (round-robin: one `madvise` per `TRIM_EVERY` puts);
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
//! a spawn on a fresh stack then takes no page-fault trap. The cost is at
//! most one refill batch of top pages per P allocated before use.
//! Both calls run after the pool lock is dropped (the stacks are the
//! refilling P's by then): held across them, the lock made two Ps that
//! refill at once take turns, each wait a futex sleep.

use super::*;

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

    pub(super) fn with_pool(pool: &'static Pool, class: usize) -> Self {
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
    pub(super) fn refill(&mut self) -> io::Result<()> {
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
    pub(super) fn release_deep(&self, top: NonZeroUsize) {
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
    pub(super) fn spill(&mut self, n: usize) {
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
    pub(super) fn trim_one(&mut self) {
        if self.deep == 0 || self.len == 0 {
            return;
        }
        let i = self.trim_cursor % self.len;
        self.trim_cursor = self.trim_cursor.wrapping_add(1);
        self.release_deep(self.tops[i]);
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
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
pub(super) fn went_deep(boundary: usize) -> bool {
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
pub(super) fn keep_bytes() -> usize {
    let page = mem::page_size();
    (KEEP_BYTES + page - 1) & !(page - 1)
}

/// The page holding the probe window of the stack of `usable` bytes whose
/// top is `top`, `(addr, len)`, if the stack has a deep region (see
/// `StackCache::with_pool`).
pub(super) fn probe_window(top: NonZeroUsize, usable: usize) -> Option<(usize, usize)> {
    let (page, keep) = (mem::page_size(), keep_bytes());
    (usable >= keep + page).then(|| (top.get() - keep - page, page))
}

/// The top page of the stack whose top is `top`, `(addr, len)`: the page
/// every goroutine on it writes first.
pub(super) fn top_page(top: NonZeroUsize) -> (usize, usize) {
    (top.get() - mem::page_size(), mem::page_size())
}
