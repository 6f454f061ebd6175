//! The OS layer: every raw system call of the runtime lives below this module
//! (futex, mmap/madvise/mprotect, signals, thread ids), so porting to another
//! target means replacing these files and nothing else.

pub(crate) mod futex;
pub(crate) mod mem;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub(crate) mod preempt;
pub(crate) mod signal;
pub(crate) mod socket;
pub(crate) mod time;

/// The kernel thread id of the calling thread.
pub(crate) fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::gettid() }
}

/// The calling thread's signal mask as the kernel's 64-bit word (0 where
/// asynchronous preemption is not supported: nothing reads it there).
pub(crate) fn current_sigmask() -> u64 {
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    {
        preempt::current_sigmask()
    }
    #[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
    {
        0
    }
}
