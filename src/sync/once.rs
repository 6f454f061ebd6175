//! `Once`: Go's sync/once.go.
//!
//! # Protocol
//! `done` (0 or 1) is the fast path: one Acquire load, paired with the
//! Release store that the first caller makes after `f` returns. Callers that
//! see 0 take the internal mutex `m` (parking with reason
//! `sync.Once.Do`), re-check `done` under it, and the one that still sees 0
//! runs `f`, then stores `done = 1`, then unlocks. So concurrent callers
//! wait for the first `f` to finish (they are queued on `m`), and every
//! caller returns only after `f`'s effects are visible to it.
//!
//! As in Go, if `f` panics the `Once` counts as done: `done` is set and `m`
//! unlocked during the unwind (Go's deferred calls), the panic continues in
//! the caller, and later calls do not run anything.

use super::rawmutex::RawMutex;
use super::waitcell::WaitReason;
use crate::loom::atomic::{AtomicU32, Ordering};

/// Runs a function exactly once (Go's `sync.Once`).
///
/// Callers that arrive while the first call runs park (goroutines) or block
/// (threads) until it has finished.
///
/// ```
/// use goroutine::sync::Once;
///
/// static INIT: Once = Once::new();
/// let mut n = 0;
/// INIT.call_once(|| n += 1);
/// INIT.call_once(|| n += 1);
/// assert_eq!(n, 1);
/// assert!(INIT.is_completed());
/// ```
pub struct Once {
    done: AtomicU32,
    m: RawMutex,
}

impl Once {
    /// A new `Once` that has not run.
    // entry: a constructor; no runtime state
    pub const fn new() -> Once {
        Once {
            done: AtomicU32::new(0),
            m: RawMutex::new(),
        }
    }

    /// Calls `f` if and only if this is the first call on this `Once`
    /// (Go's `Once.Do`). Other callers, concurrent or later, return only
    /// after that first call has returned. If `f` panics, the `Once` is
    /// still complete (Go's rule) and the panic propagates to the caller.
    #[inline]
    pub fn call_once<F: FnOnce()>(&self, f: F) {
        // Acquire: pairs with the Release store in `call_slow`, so the
        // effects of `f` are visible.
        if self.done.load(Ordering::Acquire) == 0 {
            self.call_slow(f);
        }
    }

    /// Whether the first call has finished (returned or panicked).
    #[inline]
    // entry: one atomic load
    pub fn is_completed(&self) -> bool {
        // Acquire: as in `call_once`.
        self.done.load(Ordering::Acquire) != 0
    }

    #[cold]
    fn call_slow<F: FnOnce()>(&self, f: F) {
        /// Go's two deferred calls, run in this order on return or unwind.
        struct Finish<'a> {
            once: &'a Once,
            ran: bool,
        }
        impl Drop for Finish<'_> {
            fn drop(&mut self) {
                crate::runtime::entry::call(|| {
                    if self.ran {
                        // Release: pairs with the Acquire loads of the fast
                        // path.
                        self.once.done.store(1, Ordering::Release);
                    }
                    self.once.m.unlock();
                })
            }
        }

        // Not around `f`: the caller's code (see `in_runtime`).
        crate::runtime::entry::call(|| self.m.lock(WaitReason::SyncOnceDo));
        let mut finish = Finish {
            once: self,
            ran: false,
        };
        // Relaxed: `m` orders us after the store of whoever ran `f`.
        if self.done.load(Ordering::Relaxed) == 0 {
            finish.ran = true;
            f();
        }
    }
}

impl Default for Once {
    fn default() -> Once {
        Once::new()
    }
}

impl std::fmt::Debug for Once {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Once")
            .field("done", &self.is_completed())
            .finish_non_exhaustive()
    }
}
