//! Memory for the runtime's small records that are reused rather than
//! freed: G records (`G::alloc`) and task-cell blocks (`taskcache`).
//!
//! # Why not the system allocator
//! glibc gives each thread that allocates an arena of its own and grows a
//! thread's arena one page-rounded step at a time, with an `mprotect` per
//! step. Every `mprotect` takes the process's memory-map lock for writing,
//! which waits for, and then blocks, every page fault and `madvise` of the
//! other threads: the Ms carving goroutine stacks (`g/stack/pool.rs`) on the
//! other CPUs. At GOMAXPROCS=2, 100,000 goroutines spawned and parked made
//! about 5,000 such calls (two thirds for task cells, one third for G
//! chunks); a sixth of the run was the lock's wait and the sleeps and
//! wake-ups it caused. Go's runtime allocates these records (its `g`s, its
//! `sudog`s) from its own heap, never through malloc.
//!
//! # The arena
//! A bump allocator over private anonymous mappings of [`REGION`] bytes
//! (one `mmap` per MiB, pages faulted in on first touch as records are
//! used). Nothing is ever returned: a record freed goes back to its free
//! list (the G free lists, the task-cell caches and pool) and is reused.
//! So the memory these records hold is the peak number alive at once,
//! about 200 to 450 bytes per goroutine (the G record and its task cell),
//! as Go keeps its `g`s.
//!
//! Invariants: every block handed out is `align`-aligned, `size` bytes,
//! inside a mapping that is never unmapped, and handed out once.
//!
//! # Out of memory
//! A mapping that fails (an address-space limit, `RLIMIT_AS`, or an
//! exhausted map count) is the caller's to report: `alloc` returns `None`,
//! and a spawn turns it into an error (`Builder::spawn`'s `OutOfMemory`)
//! or, where no error can be returned (`go`), into Go's `fatal error: out
//! of memory` (`runtime::out_of_memory`). Nothing calls
//! `handle_alloc_error`, whose abort would hide which limit was hit.

use std::alloc::Layout;
use std::ptr::NonNull;

use crate::sys::mem;

/// Bytes mapped at a time.
const REGION: usize = 1 << 20;

/// The unused part of the current mapping (`next..end`); empty at first.
/// Callers keep it under a lock of theirs.
pub(crate) struct Arena {
    next: usize,
    end: usize,
}

impl Arena {
    pub(crate) const fn new() -> Arena {
        Arena { next: 0, end: 0 }
    }

    /// `layout.size()` bytes aligned to `layout.align()` (at most a page),
    /// never freed; `None` if the system has no memory to map (module
    /// note, "Out of memory"): the arena is unchanged, and a later call
    /// tries again.
    pub(crate) fn alloc(&mut self, layout: Layout) -> Option<NonNull<u8>> {
        debug_assert!(layout.size() > 0 && layout.size() <= REGION);
        debug_assert!(layout.align() <= mem::page_size());
        let mut at = self.next.next_multiple_of(layout.align());
        if self.next == 0 || at + layout.size() > self.end {
            let base = mem::reserve(REGION).ok()?;
            self.next = base.as_ptr() as usize;
            self.end = self.next + REGION;
            at = self.next;
        }
        self.next = at + layout.size();
        // `at` lies inside a live mapping, hence non-null.
        Some(NonNull::new(at as *mut u8).expect("arena address is null"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_aligned_disjoint_and_writable_across_regions() {
        let mut a = Arena::new();
        let layout = Layout::from_size_align(192, 64).unwrap();
        let n = 2 * REGION / 192 + 3;
        let mut seen: Vec<usize> = (0..n)
            .map(|i| {
                let p = a.alloc(layout).unwrap();
                assert_eq!(p.as_ptr() as usize % 64, 0);
                // SAFETY: a fresh, unshared block of 192 bytes.
                unsafe { p.as_ptr().write_bytes(i as u8, 192) };
                p.as_ptr() as usize
            })
            .collect();
        seen.sort_unstable();
        assert!(
            seen.windows(2).all(|w| w[1] - w[0] >= 192),
            "blocks overlap"
        );
        // A smaller alignment right after: still aligned, still disjoint.
        let q = a.alloc(Layout::from_size_align(48, 16).unwrap()).unwrap();
        assert_eq!(q.as_ptr() as usize % 16, 0);
        assert!(seen
            .iter()
            .all(|&s| (q.as_ptr() as usize) >= s + 192 || (q.as_ptr() as usize) + 48 <= s));
    }
}
