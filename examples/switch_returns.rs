//! What a mispredicted return after a stack switch costs: the floor under
//! `g::switch`'s note "Returns after a switch".
//!
//! Two corosensei coroutines are resumed in turn, 10 million times, and each
//! suspends at once. Four shapes of the same loop:
//!
//! - `flat`: the resume is in the loop's own frame and the suspend in the
//!   coroutine's loop: every `ret` of the switch is predicted.
//! - `resume-in-frame`: the resume is in a function of its own, as the
//!   scheduler's `execute` was: that function returns after the switch back.
//! - `two-frames`: the coroutine suspends two calls down (a channel
//!   operation and the park inside it): both return after the resume.
//! - `both`: the two together, the shape of a ping-pong round trip before
//!   the ninth stop.
//!
//! Each return out of a frame entered before a switch goes to an address the
//! other side's calls pushed onto the CPU's return-address stack, and is
//! mispredicted. Usage: `cargo run --release --example switch_returns`.

use std::hint::black_box;
use std::time::Instant;

use corosensei::stack::{Stack, StackPointer};
use corosensei::{Coroutine, CoroutineResult, Yielder};

/// A plain heap stack: enough for this probe (no guard page).
struct HeapStack(Vec<u8>);

// SAFETY: the range [limit, base) is owned memory that lives as long as the
// value, and base is 16-byte aligned.
unsafe impl Stack for HeapStack {
    fn base(&self) -> StackPointer {
        StackPointer::new((self.0.as_ptr() as usize + self.0.len()) & !15).expect("non-null")
    }
    fn limit(&self) -> StackPointer {
        StackPointer::new(self.0.as_ptr() as usize + 4096).expect("non-null")
    }
}

type Co = Coroutine<(), (), (), HeapStack>;

#[inline(never)]
fn park(y: &Yielder<(), ()>) {
    y.suspend(());
    black_box(());
}

#[inline(never)]
fn operation(y: &Yielder<(), ()>) {
    park(y);
    black_box(());
}

#[inline(never)]
fn execute(c: &mut Co) {
    if let CoroutineResult::Return(()) = c.resume(()) {
        unreachable!("the probe's coroutines never return");
    }
}

fn pair(deep: bool) -> Vec<Co> {
    (0..2)
        .map(|_| {
            let stack = HeapStack(vec![0u8; 64 * 1024]);
            if deep {
                Coroutine::with_stack(stack, |y: &Yielder<(), ()>, ()| loop {
                    operation(y);
                })
            } else {
                Coroutine::with_stack(stack, |y: &Yielder<(), ()>, ()| loop {
                    y.suspend(());
                })
            }
        })
        .collect()
}

/// Nanoseconds per resume-and-suspend pair, best of `rounds`.
fn measure(deep: bool, in_frame: bool, n: u64, rounds: usize) -> f64 {
    let mut cos = pair(deep);
    let mut best = f64::MAX;
    for _ in 0..rounds {
        let t = Instant::now();
        for i in 0..n {
            let c = &mut cos[(i & 1) as usize];
            if in_frame {
                execute(c);
            } else if let CoroutineResult::Return(()) = c.resume(()) {
                unreachable!("the probe's coroutines never return");
            }
        }
        best = best.min(t.elapsed().as_nanos() as f64 / n as f64);
    }
    // Dropping the suspended coroutines unwinds their stacks (corosensei's
    // forced unwind).
    drop(cos);
    best
}

fn main() {
    let n = 10_000_000;
    println!("ns per resume + suspend pair (best of 3 rounds of {n}):");
    for (name, deep, in_frame) in [
        ("flat", false, false),
        ("resume-in-frame", false, true),
        ("two-frames", true, false),
        ("both", true, true),
    ] {
        println!("  {name:16} {:6.2}", measure(deep, in_frame, n, 3));
    }
}
