//! The runtime's clock (Go's `nanotime`): monotonic nanoseconds since the
//! first call, never 0 (0 means "no time" in timer and poll fields).
//!
//! It counts on the same clock as `std::time::Instant` (CLOCK_MONOTONIC
//! through the vDSO), so deadlines given as `Instant`s convert exactly.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

static BASE: OnceLock<Instant> = OnceLock::new();

#[inline]
fn base() -> Instant {
    *BASE.get_or_init(Instant::now)
}

/// Monotonic nanoseconds, >= 1.
#[inline]
pub(crate) fn nanotime() -> i64 {
    to_nanotime(Instant::now())
}

/// The nanotime of `t` (1 for any instant before the clock's base).
pub(crate) fn to_nanotime(t: Instant) -> i64 {
    let d = t.saturating_duration_since(base());
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX / 2) + 1
}

/// `now + d` in nanotime, saturating far in the future.
pub(crate) fn after(now: i64, d: Duration) -> i64 {
    let d = i64::try_from(d.as_nanos()).unwrap_or(i64::MAX / 4);
    now.saturating_add(d).min(i64::MAX / 2)
}

/// The CPU's time-stamp counter, if it is a usable clock: x86-64 with an
/// invariant TSC (`constant_tsc` and `nonstop_tsc` in /proc/cpuinfo: same
/// rate in every power state, synchronized across cores). The tracer
/// timestamps events with it (Go's `cputicks`): a few ns instead of a vDSO
/// clock read.
pub(crate) fn tsc_usable() -> bool {
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else {
        return false;
    };
    let flags = info
        .lines()
        .find(|l| l.starts_with("flags"))
        .unwrap_or_default();
    let has = |f: &str| flags.split_whitespace().any(|w| w == f);
    has("constant_tsc") && has("nonstop_tsc")
}

/// Reads the time-stamp counter (0 where there is none; see [`tsc_usable`]).
#[inline(always)]
pub(crate) fn cputicks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC exists on every x86-64 CPU and has no memory effects.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0
    }
}
