//! [`CacheLine`]: a value on cache lines of its own.
//!
//! Global scheduler state is written by every M and by threads outside the
//! runtime (a remote spawn takes the sched lock, the global G free list and
//! the task-block pool, and counts itself). Fields that different threads
//! write at different rates must not share a cache line with each other or
//! with read-mostly fields that every scheduling round reads (GOMAXPROCS, the
//! stop-the-world flag, the P table): each write would take the line from
//! every reader (false sharing). Left to the compiler, which fields share a
//! line changes with the layout of unrelated code, and a remote spawn's
//! cost once moved between two builds for that reason alone.
//!
//! Two lines on x86-64 and aarch64, whose prefetchers fetch lines in pairs
//! (crossbeam's `CachePadded` makes the same choice), one elsewhere.

use std::ops::Deref;

#[cfg_attr(any(target_arch = "x86_64", target_arch = "aarch64"), repr(align(128)))]
#[cfg_attr(
    not(any(target_arch = "x86_64", target_arch = "aarch64")),
    repr(align(64))
)]
pub(crate) struct CacheLine<T>(T);

impl<T> CacheLine<T> {
    pub(crate) const fn new(v: T) -> CacheLine<T> {
        CacheLine(v)
    }
}

impl<T> Deref for CacheLine<T> {
    type Target = T;
    #[inline(always)]
    fn deref(&self) -> &T {
        &self.0
    }
}
