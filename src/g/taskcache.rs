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
//! The global pool keeps at most `GLOBAL_MAX` blocks per class and returns
//! the rest to the system allocator, so a burst does not pin memory forever.
//!
//! Invariants: every block of class `c` was allocated from the system
//! allocator with `class_layout(c)`, so it may be freed with that layout
//! anywhere (that is how code without a P frees, and how the pool trims).
//! A cached block is uninitialised memory owned by its cache.

use std::alloc::{self, Layout};
use std::ptr::NonNull;
use std::sync::Mutex;

const CLASSES: [usize; 3] = [64, 128, 256];
const ALIGN: usize = 16;
const CACHE_MAX: usize = 256;
const BATCH: usize = CACHE_MAX / 2;
const GLOBAL_MAX: usize = 64 * 1024;

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

fn sys_alloc(c: usize) -> NonNull<u8> {
    let layout = class_layout(c);
    // SAFETY: the layout has a non-zero size.
    let p = unsafe { alloc::alloc(layout) };
    NonNull::new(p).unwrap_or_else(|| alloc::handle_alloc_error(layout))
}

/// # Safety
/// `p` is a block of class `c` that nobody uses any more.
unsafe fn sys_free(c: usize, p: NonNull<u8>) {
    // SAFETY: every class-`c` block was allocated with `class_layout(c)`.
    unsafe { alloc::dealloc(p.as_ptr(), class_layout(c)) }
}

struct Blocks(Vec<NonNull<u8>>);
// SAFETY: the pointers are uninitialised memory blocks owned by the pool.
unsafe impl Send for Blocks {}

static GLOBAL: Mutex<[Blocks; 3]> =
    Mutex::new([Blocks(Vec::new()), Blocks(Vec::new()), Blocks(Vec::new())]);

fn global() -> std::sync::MutexGuard<'static, [Blocks; 3]> {
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

    /// A block of class `c`.
    #[inline]
    pub(crate) fn alloc(&mut self, c: usize) -> NonNull<u8> {
        if let Some(p) = self.free[c].pop() {
            return p;
        }
        self.refill(c)
    }

    #[cold]
    fn refill(&mut self, c: usize) -> NonNull<u8> {
        {
            let mut g = global();
            let pool = &mut g[c].0;
            let take = pool.len().min(BATCH);
            let at = pool.len() - take;
            self.free[c].extend(pool.drain(at..));
        }
        self.free[c].pop().unwrap_or_else(|| sys_alloc(c))
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
        let mut g = global();
        let pool = &mut g[c].0;
        let at = self.free[c].len() - BATCH;
        for p in self.free[c].drain(at..) {
            if pool.len() < GLOBAL_MAX {
                pool.push(p);
            } else {
                // SAFETY: the block came from a cache, so it is unused.
                unsafe { sys_free(c, p) };
            }
        }
    }

    /// Moves everything to the global pool (the P is being destroyed).
    pub(crate) fn drain(&mut self) {
        for c in 0..CLASSES.len() {
            while !self.free[c].is_empty() {
                let n = self.free[c].len().min(BATCH);
                let at = self.free[c].len() - n;
                let mut g = global();
                for p in self.free[c].drain(at..) {
                    if g[c].0.len() < GLOBAL_MAX {
                        g[c].0.push(p);
                    } else {
                        // SAFETY: the block came from a cache, so it is unused.
                        unsafe { sys_free(c, p) };
                    }
                }
            }
        }
    }
}

/// A block of class `c` for code that holds no P.
pub(crate) fn alloc_global(c: usize) -> NonNull<u8> {
    global()[c].0.pop().unwrap_or_else(|| sys_alloc(c))
}

/// Frees a block of class `c` from code that holds no P.
///
/// # Safety
/// `p` is a block of class `c` that nobody uses any more.
pub(crate) unsafe fn free_global(c: usize, p: NonNull<u8>) {
    let mut g = global();
    if g[c].0.len() < GLOBAL_MAX {
        g[c].0.push(p);
    } else {
        drop(g);
        // SAFETY: forwarded from the caller.
        unsafe { sys_free(c, p) };
    }
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
        let p = a.alloc(1);
        // SAFETY: p is an unused class-1 block.
        unsafe { a.free(1, p) };
        assert_eq!(a.alloc(1), p, "LIFO reuse");
        // Blocks allocated on `a` and freed on `b` (the spawn -> exit flow)
        // end up back on `a` through the global pool.
        let blocks: Vec<_> = (0..3 * CACHE_MAX).map(|_| a.alloc(0)).collect();
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
        let again = a.alloc(0);
        // SAFETY: unused class-0 blocks.
        unsafe {
            a.free(0, again);
            a.free(1, p);
        }
        b.drain();
        a.drain();
        assert!(a.free.iter().chain(b.free.iter()).all(Vec::is_empty));
        let q = alloc_global(2);
        // SAFETY: unused class-2 block.
        unsafe { free_global(2, q) };
    }
}
