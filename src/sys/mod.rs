//! The OS layer: every raw system call of the runtime lives below this module
//! (futex, mmap/madvise/mprotect, signals, thread ids), so porting to another
//! target means replacing these files and nothing else.

pub(crate) mod futex;
pub(crate) mod mem;
pub(crate) mod signal;
pub(crate) mod socket;
pub(crate) mod time;
#[cfg(goroutine_sanitize = "thread")]
pub(crate) mod tsan;

/// The kernel thread id of the calling thread.
pub(crate) fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::gettid() }
}
