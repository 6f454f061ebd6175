//! A `thread_local!` read after a switch point sees the new thread's slot.
//!
//! LLVM may treat a thread-local's address as fixed within one function
//! (llvm/llvm-project#98479, rust-lang/unsafe-code-guidelines#602), which a
//! stackful goroutine that resumes on another thread in the middle of that
//! function would break: the second read below could load the *old*
//! thread's slot. docs/soundness.md ("The compiler's side") states where we
//! stand; this test is the tripwire. `.ci/run` runs it again under fat LTO
//! (`--profile release-lto`), where the most inlining happens.

mod common;

use std::cell::Cell;
use std::time::{Duration, Instant};

thread_local! {
    static SLOT: Cell<i32> = const { Cell::new(0) };
}

fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

/// Writes the calling thread's id into its own `SLOT`, out of line (an
/// opaque path: its address is computed on the thread that calls it).
#[inline(never)]
fn stamp() {
    SLOT.with(|s| s.set(gettid()));
}

/// Reads `SLOT` out of line: the documented way to read a thread-local
/// after a switch point (docs/soundness.md), fresh on every architecture.
#[inline(never)]
fn read_slot() -> i32 {
    SLOT.with(|s| s.get())
}

/// Reads `SLOT` inline before and after a receive that may move the
/// goroutine to another thread, and out of line after it. Returns (thread
/// before, thread after, slot read inline after, slot read out of line
/// after): the reads after must be the thread after's own.
#[inline(always)]
fn probe(rx: &goroutine::Receiver<()>) -> (i32, i32, i32, i32) {
    stamp();
    let before = SLOT.with(|s| s.get());
    rx.recv().unwrap();
    stamp();
    let read = SLOT.with(|s| s.get());
    (before, gettid(), read, read_slot())
}

isolated_test! {
    fn a_thread_local_read_after_a_switch_reads_the_new_threads_slot() ["GOMAXPROCS" = "4"] {
        let (moves, stale) = common::within(120, || {
            let (mut moves, mut stale) = (0u32, Vec::new());
            let t = Instant::now();
            while moves < 85 && t.elapsed() < Duration::from_secs(60) {
                let hs: Vec<_> = (0..8)
                    .map(|_| {
                        let (tx, rx) = goroutine::chan::<()>(0);
                        // Woken by a plain thread: the goroutine goes to
                        // the global queue, and any M may resume it.
                        std::thread::spawn(move || {
                            std::thread::sleep(Duration::from_micros(200));
                            tx.send(()).unwrap();
                        });
                        goroutine::go(move || probe(&rx))
                    })
                    .collect();
                // Busy goroutines keep the Ms the sleepers left occupied.
                let spin: Vec<_> = (0..3)
                    .map(|_| {
                        goroutine::go(|| {
                            let t = Instant::now();
                            while t.elapsed() < Duration::from_micros(500) {
                                goroutine::yield_now();
                            }
                        })
                    })
                    .collect();
                for h in hs {
                    let (before, after, read, out_of_line) = h.join().unwrap();
                    assert_eq!(out_of_line, after, "an out-of-line read was stale");
                    if before != after {
                        moves += 1;
                        if read != after {
                            stale.push((before, after, read));
                        }
                    }
                }
                for s in spin {
                    s.join().unwrap();
                }
            }
            (moves, stale)
        });
        // On aarch64 LLVM does keep the slot's address across the receive
        // (the inlined read after it loads the old thread's slot: seen under
        // qemu-user, where the code is the same as on ARM hardware), so
        // there only the out-of-line read is promised (docs/soundness.md).
        if cfg!(target_arch = "aarch64") {
            println!("aarch64: {} of {moves} inlined reads were stale", stale.len());
        } else {
            assert!(stale.is_empty(), "stale thread-local reads (before, after, read): {stale:?}");
        }
        // Otherwise the test checked nothing.
        assert!(moves > 0, "no goroutine changed threads across the receive");
        println!("{moves} moves, no stale read");
    }
}
