//! ThreadSanitizer's annotation interface (compiler-rt `tsan_interface.h`),
//! compiled only with `--cfg goroutine_sanitize="thread"` (README,
//! "Sanitizers"): goroutine fibers, and happens-before edges that TSan
//! cannot see by itself.

use std::ffi::{c_uint, c_void};

extern "C" {
    fn __tsan_get_current_fiber() -> *mut c_void;
    fn __tsan_create_fiber(flags: c_uint) -> *mut c_void;
    fn __tsan_destroy_fiber(fiber: *mut c_void);
    fn __tsan_switch_to_fiber(fiber: *mut c_void, flags: c_uint);
    fn __tsan_acquire(addr: *mut c_void);
    fn __tsan_release(addr: *mut c_void);
}

/// A TSan fiber: the thread-like context that TSan attributes a goroutine's
/// memory accesses to. Destroyed on drop.
pub(crate) struct Fiber(*mut c_void);

impl Fiber {
    pub(crate) fn new() -> Fiber {
        // SAFETY: no preconditions; flags 0.
        Fiber(unsafe { __tsan_create_fiber(0) })
    }

    /// Makes this fiber the calling thread's current one, synchronising
    /// (flags 0: the code before happens before the code after). Returns the
    /// fiber to go back to with [`switch_back`].
    #[inline(always)]
    pub(crate) fn switch_to(&self) -> *mut c_void {
        // SAFETY: `self.0` is a live fiber, current on no other thread (the
        // caller's contract: its goroutine is owned by the calling M).
        unsafe {
            let back = __tsan_get_current_fiber();
            __tsan_switch_to_fiber(self.0, 0);
            back
        }
    }
}

impl Drop for Fiber {
    fn drop(&mut self) {
        // SAFETY: not current on any thread (the owner switched back after
        // the last run) and never used again.
        unsafe { __tsan_destroy_fiber(self.0) }
    }
}

/// Back to the fiber that [`Fiber::switch_to`] replaced, synchronising.
#[inline(always)]
pub(crate) fn switch_back(back: *mut c_void) {
    // SAFETY: `back` is the calling thread's own fiber, replaced earlier on
    // this thread.
    unsafe { __tsan_switch_to_fiber(back, 0) }
}

/// A release on `addr`: what happens before it happens before an
/// [`acquire`] of the same address.
#[inline(always)]
pub(crate) fn release<T>(addr: *const T) {
    // SAFETY: an annotation only; TSan does not dereference `addr`.
    unsafe { __tsan_release(addr as *mut c_void) }
}

/// An acquire on `addr`; see [`release`].
#[inline(always)]
pub(crate) fn acquire<T>(addr: *const T) {
    // SAFETY: an annotation only; TSan does not dereference `addr`.
    unsafe { __tsan_acquire(addr as *mut c_void) }
}
