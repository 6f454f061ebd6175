//! The reader/writer lock protocol (Go's sync/rwmutex.go), without the
//! data: used by [`RwLock`](super::RwLock).
//!
//! # State
//! - `w`: a [`RawMutex`] held by the writer (and by a writer waiting for
//!   readers to leave): writers exclude each other there.
//! - `reader_count`: readers holding or waiting for the lock, minus
//!   [`MAX_READERS`] while a writer is pending or active. Negative means
//!   "a writer is in": that is how writer preference works, a reader that
//!   sees a negative count after its increment blocks on `reader_sem`, so
//!   a pending writer cannot be starved by a stream of new readers.
//! - `reader_wait`: readers that were active when the writer arrived and
//!   have not left yet; the last of them wakes the writer (`writer_sem`).
//! - `writer_sem`, `reader_sem`: runtime semaphores the writer and the
//!   blocked readers sleep on.
//!
//! # Protocol
//! - read: `reader_count += 1`; if negative, sleep on `reader_sem`.
//! - read unlock: `reader_count -= 1`; if negative (a writer is pending),
//!   `reader_wait -= 1`, and the reader that brings it to zero releases
//!   `writer_sem`.
//! - write: lock `w`; `reader_count -= MAX_READERS` (announces the writer,
//!   yields `r`, the readers still active); `reader_wait += r`, and if that
//!   leaves it non-zero sleep on `writer_sem`. The two adds make the
//!   hand-off race free: a departing reader that decrements `reader_wait`
//!   before the writer adds `r` takes it below zero, and the writer's add
//!   then brings it to exactly the number still inside.
//! - write unlock: `reader_count += MAX_READERS` yields `r`, the readers
//!   that blocked meanwhile; release `reader_sem` `r` times; unlock `w`.
//!
//! # Memory ordering
//! Lock-taking RMWs are Acquire and lock-releasing ones Release; a departing
//! reader's `reader_wait` decrement is AcqRel (it releases its own reads and
//! passes on those of the readers that left before it); a sleeper is
//! ordered after its waker by the sema.

use super::rawmutex::RawMutex;
use super::sema;
use super::waitcell::{self, WaitReason};
use crate::loom::atomic::{AtomicI32, AtomicU32, Ordering};

/// The most readers (Go's `rwmutexMaxReaders`).
const MAX_READERS: i32 = 1 << 30;

pub(crate) struct RawRwLock {
    w: RawMutex,
    writer_sem: AtomicU32,
    reader_sem: AtomicU32,
    reader_count: AtomicI32,
    reader_wait: AtomicI32,
}

impl RawRwLock {
    waitcell::loom_const_fn! {
        pub(crate) fn new() -> RawRwLock {
            RawRwLock {
                w: RawMutex::new(),
                writer_sem: AtomicU32::new(0),
                reader_sem: AtomicU32::new(0),
                reader_count: AtomicI32::new(0),
                reader_wait: AtomicI32::new(0),
            }
        }
    }

    #[inline]
    pub(crate) fn read(&self) {
        // Acquire: pairs with the Release add of the writer's unlock.
        if self.reader_count.fetch_add(1, Ordering::Acquire) + 1 < 0 {
            // A writer is pending: wait for it to finish.
            sema::semacquire(&self.reader_sem, false, WaitReason::SyncRWMutexRLock);
        }
    }

    #[inline]
    pub(crate) fn try_read(&self) -> bool {
        let mut c = self.reader_count.load(Ordering::Relaxed);
        loop {
            if c < 0 {
                return false;
            }
            // Acquire: pairs with the Release add of the writer's unlock.
            match self.reader_count.compare_exchange_weak(
                c,
                c + 1,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(cur) => c = cur,
            }
        }
    }

    #[inline]
    pub(crate) fn read_unlock(&self) {
        // Release: pairs with the Acquire half of the writer's announcement
        // (fetch_sub of MAX_READERS), so our reads precede its writes.
        let r = self.reader_count.fetch_sub(1, Ordering::Release) - 1;
        if r < 0 {
            self.read_unlock_slow(r);
        }
    }

    #[cold]
    fn read_unlock_slow(&self, r: i32) {
        if r + 1 == 0 || r + 1 == -MAX_READERS {
            waitcell::fatal("sync: RUnlock of unlocked RWMutex");
        }
        // AcqRel: the Release half orders our reads before the writer's
        // writes (the last departer wakes it); the Acquire half collects the
        // other departers' reads for that wake.
        if self.reader_wait.fetch_sub(1, Ordering::AcqRel) - 1 == 0 {
            // The last reader unblocks the writer.
            sema::semrelease(&self.writer_sem, false);
        }
    }

    pub(crate) fn write(&self) {
        // First, resolve competition with other writers.
        self.w.lock(WaitReason::SyncMutexLock);
        // Announce to readers there is a pending writer; the old count is
        // the number of readers still inside. Acquire: pairs with the
        // Release fetch_sub of readers that already left.
        let active = self.reader_count.fetch_sub(MAX_READERS, Ordering::Acquire);
        // Wait for the active readers. Acquire: pairs with the AcqRel
        // fetch_sub of readers that left since the announcement (the ones
        // that leave after this add wake us through `writer_sem`).
        if active != 0 && self.reader_wait.fetch_add(active, Ordering::Acquire) + active != 0 {
            sema::semacquire(&self.writer_sem, false, WaitReason::SyncRWMutexLock);
        }
    }

    pub(crate) fn try_write(&self) -> bool {
        if !self.w.try_lock() {
            return false;
        }
        // Acquire: pairs with the Release fetch_sub of departed readers.
        if self
            .reader_count
            .compare_exchange(0, -MAX_READERS, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.w.unlock();
            return false;
        }
        true
    }

    pub(crate) fn write_unlock(&self) {
        // Announce to readers there is no active writer. Release: pairs with
        // the Acquire fetch_add of new readers (and, through the sema, of the
        // blocked ones we wake below).
        let r = self.reader_count.fetch_add(MAX_READERS, Ordering::Release) + MAX_READERS;
        if r >= MAX_READERS {
            waitcell::fatal("sync: Unlock of unlocked RWMutex");
        }
        // Unblock the readers that arrived while we held the lock.
        for _ in 0..r {
            sema::semrelease(&self.reader_sem, false);
        }
        // Allow other writers to proceed.
        self.w.unlock();
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Loom models (`RUSTFLAGS="--cfg loom" cargo test --release --lib rawrwlock`).
    use super::*;
    use crate::sync::waitcell::model;
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;
    use loom::thread;

    struct Shared {
        l: RawRwLock,
        v: UnsafeCell<u32>,
    }

    // SAFETY: `v` is accessed only under `l` (which loom checks).
    unsafe impl Sync for Shared {}

    /// Two readers and a writer: loom checks that the writer excludes the
    /// readers (the cell), that nobody sleeps forever, and that each reader
    /// sees the value either before or after the write.
    #[test]
    fn readers_and_writer() {
        model(Some(4), || {
            let s = Arc::new(Shared {
                l: RawRwLock::new(),
                v: UnsafeCell::new(0),
            });
            let readers: Vec<_> = (0..2)
                .map(|_| {
                    let s = s.clone();
                    thread::spawn(move || {
                        s.l.read();
                        // SAFETY: read-locked; loom reports a racing write.
                        let v = s.v.with(|v| unsafe { *v });
                        s.l.read_unlock();
                        assert!(v == 0 || v == 1);
                    })
                })
                .collect();
            s.l.write();
            // SAFETY: write-locked; loom reports a racing access.
            s.v.with_mut(|v| unsafe { *v = 1 });
            s.l.write_unlock();
            for r in readers {
                r.join().unwrap();
            }
            assert_eq!(s.l.reader_count.load(Ordering::SeqCst), 0);
            assert_eq!(s.l.reader_wait.load(Ordering::SeqCst), 0);
        });
    }

    /// Two writers and a reader: the writers exclude each other (through
    /// `w`) and the reader; every lock is eventually granted.
    #[test]
    fn two_writers_and_a_reader() {
        model(Some(4), || {
            let s = Arc::new(Shared {
                l: RawRwLock::new(),
                v: UnsafeCell::new(0),
            });
            let writer = |s: Arc<Shared>| {
                move || {
                    s.l.write();
                    // SAFETY: write-locked; loom reports a racing access.
                    s.v.with_mut(|v| unsafe { *v += 1 });
                    s.l.write_unlock();
                }
            };
            let w1 = thread::spawn(writer(s.clone()));
            let w2 = thread::spawn(writer(s.clone()));
            s.l.read();
            // SAFETY: read-locked.
            let v = s.v.with(|v| unsafe { *v });
            s.l.read_unlock();
            assert!(v <= 2);
            w1.join().unwrap();
            w2.join().unwrap();
            // SAFETY: all threads joined.
            assert_eq!(s.v.with(|v| unsafe { *v }), 2);
            assert_eq!(s.l.reader_count.load(Ordering::SeqCst), 0);
        });
    }

    /// Writer preference: once a writer has announced itself, `try_read`
    /// fails, and a reader arriving after it gets in only after it.
    #[test]
    fn pending_writer_blocks_new_readers() {
        model(Some(4), || {
            let s = Arc::new(Shared {
                l: RawRwLock::new(),
                v: UnsafeCell::new(0),
            });
            s.l.read();
            let w = {
                let s = s.clone();
                thread::spawn(move || {
                    s.l.write();
                    // SAFETY: write-locked.
                    s.v.with_mut(|v| unsafe { *v = 1 });
                    s.l.write_unlock();
                })
            };
            // Wait until the writer is pending.
            while s.l.reader_count.load(Ordering::SeqCst) >= 0 {
                thread::yield_now();
            }
            assert!(!s.l.try_read());
            let r = {
                let s = s.clone();
                thread::spawn(move || {
                    s.l.read();
                    // SAFETY: read-locked.
                    let v = s.v.with(|v| unsafe { *v });
                    s.l.read_unlock();
                    assert_eq!(v, 1, "a new reader got in before the pending writer");
                })
            };
            s.l.read_unlock();
            w.join().unwrap();
            r.join().unwrap();
        });
    }
}
