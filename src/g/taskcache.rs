//! Memory for task cells: per-P caches of fixed-size blocks.
//!
//! Every spawn allocates one task cell (`task.rs`) and every goroutine exit
//! or join frees one, usually on another P than the one that allocated it
//! (the spawner's P allocates, a thief's P frees). Through the system
//! allocator that flow costs a third of a spawn at GOMAXPROCS=2 (glibc's
//! per-thread caches fill on the freeing side and every further free takes
//! the allocating arena's lock). So cells of up to 256 bytes come from size
//! classes of 64, 128 and 256 bytes, cached per P like Go's per-P free lists:
//! a P keeps up to `CACHE_MAX` blocks per class; a full cache moves half to
//! the global pool in one locked operation, an empty one takes `BATCH` back.
//!
//! Blocks come from the runtime's record arena (`arena.rs`), `BATCH` at a
//! time, not from the system allocator: glibc grows a thread's arena a page
//! at a time, each step an `mprotect` under the memory map's write lock,
//! which stalled the Ms carving stacks on the other CPUs (the arena note).
//! Arena memory is never returned: a freed block goes back to a cache or
//! the global pool and is reused, so the blocks held are the most cells
//! ever alive at once (64 to 256 bytes per goroutine), as Go keeps its
//! `g`s.
//!
//! Invariants: every block of class `c` is `CLASSES[c]` bytes of arena
//! memory aligned to `ALIGN`, and is in exactly one place at a time: a
//! cache, the global pool, or a live task cell. A cached block is
//! uninitialised memory owned by its cache.

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::Mutex;

use super::arena::Arena;
use crate::cacheline::CacheLine;

const CLASSES: [usize; 3] = [64, 128, 256];
const ALIGN: usize = 16;
const CACHE_MAX: usize = 256;
const BATCH: usize = CACHE_MAX / 2;

/// The size class for `layout`, if it has one.
#[inline]
pub(crate) fn class_of(layout: Layout) -> Option<usize> {
    if layout.align() > ALIGN {
        return None;
    }
    CLASSES.iter().position(|&c| layout.size() <= c)
}

#[inline]
fn class_layout(c: usize) -> Layout {
    // The sizes and the alignment are constants that form valid layouts.
    Layout::from_size_align(CLASSES[c], ALIGN).expect("task class layout")
}

/// The global pool: free blocks of each class, and the arena new ones are
/// carved from.
struct Global {
    free: [Vec<NonNull<u8>>; 3],
    arena: Arena,
}
// SAFETY: the pointers are uninitialised arena blocks owned by the pool.
unsafe impl Send for Global {}

impl Global {
    /// Moves up to `n` blocks of class `c` into `out`, carving new ones from
    /// the arena when the pool has none (fewer, or none, when the arena
    /// cannot map more: `arena`'s note, "Out of memory").
    fn take(&mut self, c: usize, n: usize, out: &mut Vec<NonNull<u8>>) {
        let pool = &mut self.free[c];
        if pool.is_empty() {
            let layout = class_layout(c);
            // The cache's vector holds at most CACHE_MAX (it spills
            // first): its room was reserved when it first grew, so this
            // never reallocates once warm.
            if out.try_reserve(n).is_err() {
                return;
            }
            for _ in 0..n {
                match self.arena.alloc(layout) {
                    Some(p) => out.push(p),
                    None => break,
                }
            }
            return;
        }
        let at = pool.len() - pool.len().min(n);
        out.extend(pool.drain(at..));
    }
}

/// On lines of its own: spawns from outside the runtime take it for every
/// cell, while the Ms return blocks to it (`crate::cacheline`).
static GLOBAL: CacheLine<Mutex<Global>> = CacheLine::new(Mutex::new(Global {
    free: [Vec::new(), Vec::new(), Vec::new()],
    arena: Arena::new(),
}));

fn global() -> std::sync::MutexGuard<'static, Global> {
    GLOBAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A P's cache (owned by the P's holder, like the rest of `PLocal`).
pub(crate) struct TaskCache {
    free: [Vec<NonNull<u8>>; 3],
}

// SAFETY: the cached pointers are uninitialised blocks owned by the cache;
// the cache moves with its P between threads.
unsafe impl Send for TaskCache {}

impl TaskCache {
    pub(crate) fn new() -> TaskCache {
        TaskCache {
            free: [Vec::new(), Vec::new(), Vec::new()],
        }
    }

    /// A block of class `c`; `None` out of memory.
    #[inline]
    pub(crate) fn alloc(&mut self, c: usize) -> Option<NonNull<u8>> {
        if let Some(p) = self.free[c].pop() {
            return Some(p);
        }
        self.refill(c)
    }

    #[cold]
    fn refill(&mut self, c: usize) -> Option<NonNull<u8>> {
        global().take(c, BATCH, &mut self.free[c]);
        self.free[c].pop()
    }

    /// Gives back a block of class `c`.
    ///
    /// # Safety
    /// `p` is a block of class `c` that nobody uses any more.
    #[inline]
    pub(crate) unsafe fn free(&mut self, c: usize, p: NonNull<u8>) {
        if self.free[c].len() >= CACHE_MAX {
            self.spill(c);
        }
        self.free[c].push(p);
    }

    #[cold]
    fn spill(&mut self, c: usize) {
        let at = self.free[c].len() - BATCH;
        global().free[c].extend(self.free[c].drain(at..));
    }

    /// Moves everything to the global pool (the P is being destroyed).
    pub(crate) fn drain(&mut self) {
        let mut g = global();
        for c in 0..CLASSES.len() {
            g.free[c].append(&mut self.free[c]);
        }
    }
}

/// A block of class `c` for code that holds no P; `None` out of memory.
pub(crate) fn alloc_global(c: usize) -> Option<NonNull<u8>> {
    let mut g = global();
    match g.free[c].pop() {
        Some(p) => Some(p),
        None => g.arena.alloc(class_layout(c)),
    }
}

/// Frees a block of class `c` from code that holds no P.
///
/// # Safety
/// `p` is a block of class `c` that nobody uses any more.
pub(crate) unsafe fn free_global(c: usize, p: NonNull<u8>) {
    global().free[c].push(p);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        assert_eq!(class_of(Layout::new::<[u8; 1]>()), Some(0));
        assert_eq!(class_of(Layout::new::<[u64; 8]>()), Some(0));
        assert_eq!(class_of(Layout::new::<[u64; 9]>()), Some(1));
        assert_eq!(class_of(Layout::new::<[u64; 32]>()), Some(2));
        assert_eq!(class_of(Layout::new::<[u64; 33]>()), None);
        assert_eq!(class_of(Layout::from_size_align(32, 64).unwrap()), None);
    }

    #[test]
    fn cache_reuses_spills_and_refills() {
        let mut a = TaskCache::new();
        let mut b = TaskCache::new();
        let p = a.alloc(1).unwrap();
        // SAFETY: p is an unused class-1 block.
        unsafe { a.free(1, p) };
        assert_eq!(a.alloc(1), Some(p), "LIFO reuse");
        // Blocks allocated on `a` and freed on `b` (the spawn -> exit flow)
        // end up back on `a` through the global pool.
        let blocks: Vec<_> = (0..3 * CACHE_MAX).map(|_| a.alloc(0).unwrap()).collect();
        for q in &blocks {
            // Write through the block: it must be real memory of 64 bytes.
            // SAFETY: an unused block of 64 bytes, aligned to 16.
            unsafe { q.as_ptr().write_bytes(0xAB, 64) };
        }
        for q in blocks {
            // SAFETY: unused class-0 block.
            unsafe { b.free(0, q) };
        }
        assert!(b.free[0].len() <= CACHE_MAX);
        let again = a.alloc(0).unwrap();
        // SAFETY: unused class-0 blocks.
        unsafe {
            a.free(0, again);
            a.free(1, p);
        }
        b.drain();
        a.drain();
        assert!(a.free.iter().chain(b.free.iter()).all(Vec::is_empty));
        let q = alloc_global(2).unwrap();
        // SAFETY: unused class-2 block.
        unsafe { free_global(2, q) };
    }
}
