//! Linux futex(2): the primitive under the M park note.

use std::sync::atomic::AtomicU32;

/// Blocks while `*word == expected` (spurious returns are possible: callers loop).
pub(crate) fn wait(word: &AtomicU32, expected: u32) {
    // SAFETY: `word` is a valid, aligned u32 for the duration of the call; a
    // null timeout means wait without a deadline. FUTEX_PRIVATE_FLAG is correct
    // because the word is never shared with another process.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            std::ptr::null::<libc::timespec>(),
        );
    }
}

/// Wakes up to `n` threads blocked in [`wait`] on `word`.
pub(crate) fn wake(word: &AtomicU32, n: i32) {
    // SAFETY: `word` is a valid, aligned u32; FUTEX_WAKE does not dereference
    // anything else.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            n,
        );
    }
}
