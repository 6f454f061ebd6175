//! Randomized scheduling, a test mode (Go's `randomizeScheduler`, on under
//! `-race`): built with `RUSTFLAGS="--cfg goroutine_randomize"`, the
//! scheduler flips coins where Go's does, so that tests cannot pass only
//! because of one particular interleaving:
//! - `runqput`: a G meant for `runnext` goes to the ring's tail half the time;
//! - `ready`: a woken G goes to the global queue a quarter of the time;
//! - `yield_now`: the yielder goes to the global queue half the time;
//! - `steal`: a thief may take a victim's `runnext` on any round.
//!
//! Every choice is one a correct program must already tolerate (each is a
//! legal schedule of the normal scheduler). CI runs the whole test suite in
//! this mode. Without the cfg this module is not compiled.

use std::cell::Cell;

thread_local! {
    static STATE: Cell<u64> = const { Cell::new(0) };
}

fn next() -> u64 {
    STATE.with(|s| {
        let mut x = s.get();
        if x == 0 {
            // Seed per thread from the clock and the thread's stack address.
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64);
            x = t ^ (&x as *const u64 as u64).rotate_left(17) | 1;
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.set(x);
        x
    })
}

/// A fair coin.
pub(crate) fn coin() -> bool {
    next() & 1 == 0
}

/// True with probability 1/n.
pub(crate) fn one_in(n: u64) -> bool {
    next() % n == 0
}
