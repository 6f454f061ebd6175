//! The OS layer: every raw system call of the runtime lives below this module
//! (futex, mmap/madvise/mprotect, signals, thread ids), so porting to another
//! target means replacing these files and nothing else.

pub(crate) mod futex;
pub(crate) mod mem;
pub(crate) mod signal;
pub(crate) mod time;

/// The kernel thread id of the calling thread.
pub(crate) fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::gettid() }
}

/// Registers `f` to run when the process exits through `exit(3)`
/// (returning from `main`, `std::process::exit`). Best effort: a failed
/// registration (out of memory) is ignored.
pub(crate) fn at_exit(f: extern "C" fn()) {
    // SAFETY: `f` is a plain function with the C ABI that atexit expects.
    unsafe { libc::atexit(f) };
}
