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

/// Like [`wait`], but gives up after `timeout_ns` nanoseconds.
pub(crate) fn wait_timeout(word: &AtomicU32, expected: u32, timeout_ns: i64) {
    let ts = libc::timespec {
        tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `word` is a valid, aligned u32 and `ts` a valid relative
    // timeout, both live for the duration of the call.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            &ts as *const libc::timespec,
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
