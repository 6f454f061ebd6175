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

/// The `Instant` of a nanotime.
#[allow(dead_code)] // used by traces and dumps
pub(crate) fn from_nanotime(n: i64) -> Instant {
    base() + Duration::from_nanos(n.saturating_sub(1).max(0) as u64)
}

/// `now + d` in nanotime, saturating far in the future.
pub(crate) fn after(now: i64, d: Duration) -> i64 {
    let d = i64::try_from(d.as_nanos()).unwrap_or(i64::MAX / 4);
    now.saturating_add(d).min(i64::MAX / 2)
}
