//! The runtime's clock (Go's `nanotime`): monotonic nanoseconds since the
//! first call, never 0 (0 means "no time" in timer and poll fields).
//!
//! It counts on the same clock as `std::time::Instant` (CLOCK_MONOTONIC
//! through the vDSO), read directly: `Instant::now()` and a subtraction
//! from a base `Instant` cost about a tenth more than the read itself. A
//! deadline given as an `Instant` converts through a fresh reading of both,
//! so it lands at most one clock read late, never early.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

/// CLOCK_MONOTONIC at the first call, in ns (0 until then).
static BASE: AtomicI64 = AtomicI64::new(0);

/// CLOCK_MONOTONIC in ns.
#[inline]
fn monotonic_ns() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    // `time_t` and `c_long` are i64 here, i32 on 32-bit targets.
    #[allow(clippy::useless_conversion)]
    let (sec, nsec) = (i64::from(ts.tv_sec), i64::from(ts.tv_nsec));
    sec * 1_000_000_000 + nsec
}

#[cold]
fn init_base(now: i64) -> i64 {
    // Relaxed: any thread's first reading will do as the base, as long as
    // every thread uses the same one (the CAS picks it).
    match BASE.compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed) {
        Ok(_) => now,
        Err(b) => b,
    }
}

/// Monotonic nanoseconds, >= 1.
#[inline]
pub(crate) fn nanotime() -> i64 {
    let now = monotonic_ns();
    // Relaxed: the base is written once (`init_base`).
    let base = match BASE.load(Ordering::Relaxed) {
        0 => init_base(now),
        b => b,
    };
    // A reading taken before another thread set the base is 1.
    (now - base).max(0) + 1
}

/// The nanotime of `t` (1 for any instant before the clock's base): `t`
/// relative to a fresh `Instant` read just before a fresh `nanotime`, so
/// the result is late by at most the time between the two reads.
pub(crate) fn to_nanotime(t: Instant) -> i64 {
    let then = Instant::now();
    let now = nanotime();
    let ns = |d: Duration| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX / 4);
    if t >= then {
        now.saturating_add(ns(t - then)).min(i64::MAX / 2)
    } else {
        (now - ns(then - t)).max(1)
    }
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

/// Whether [`ticks`] reads the TSC (set once by [`ticks_init`]).
static TICKS_TSC: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// The first [`ticks`] and [`nanotime`] readings, for [`ticks_per_ns`]'s
/// calibration (set by [`ticks_init`]).
static TICKS_BASE: AtomicI64 = AtomicI64::new(0);
static TICKS_BASE_NS: AtomicI64 = AtomicI64::new(0);

/// Chooses the scheduler's cheap clock ([`ticks`]) and notes its first
/// reading for calibration. Called once, at runtime start; until then
/// `ticks` reads nanotime.
pub(crate) fn ticks_init() {
    if tsc_usable() {
        TICKS_TSC.store(true, Ordering::Relaxed);
    }
    TICKS_BASE.store(ticks() as i64, Ordering::Relaxed);
    TICKS_BASE_NS.store(nanotime(), Ordering::Relaxed);
}

/// The scheduler's cheap clock, for the scheduling-latency samples and
/// per-goroutine CPU time: the time-stamp counter where it is a usable
/// clock ([`tsc_usable`]), else nanotime. Only differences of two readings
/// mean anything; [`ticks_to_ns`] converts them.
#[inline(always)]
pub(crate) fn ticks() -> u64 {
    if TICKS_TSC.load(Ordering::Relaxed) {
        cputicks()
    } else {
        nanotime() as u64
    }
}

/// Nanoseconds per tick, 32.32 fixed point: measured against nanotime
/// since [`ticks_init`] (the longer the runtime has run, the better; 0 in
/// the first 100 us, when the measure is too short to trust). Costs a
/// nanotime read and a division: callers refresh a cached copy now and
/// then (sysmon, readers), not per sample.
pub(crate) fn ticks_mult() -> u64 {
    ticks_mult_at(nanotime())
}

/// [`ticks_mult`] with a nanotime just read.
fn ticks_mult_at(n: i64) -> u64 {
    if !TICKS_TSC.load(Ordering::Relaxed) {
        return 1 << 32;
    }
    let base_ns = TICKS_BASE_NS.load(Ordering::Relaxed);
    let base = TICKS_BASE.load(Ordering::Relaxed) as u64;
    let t = cputicks();
    let dn = n - base_ns;
    let dt = t.wrapping_sub(base);
    if base_ns == 0 || dn < 100_000 || dt == 0 || dt > i64::MAX as u64 {
        return 0;
    }
    ((dn as u128) << 32).checked_div(dt as u128).unwrap_or(0) as u64
}

/// `ticks` (a difference of two [`ticks`] readings) in nanoseconds, with
/// `mult` from [`ticks_mult`].
#[inline]
pub(crate) fn ticks_to_ns(ticks: u64, mult: u64) -> u64 {
    ((ticks as u128 * mult as u128) >> 32) as u64
}

/// [`ticks_mult`]'s latest value, for the hot paths (0 until first
/// refreshed).
static TICKS_MULT: AtomicI64 = AtomicI64::new(0);

/// The cached [`ticks_mult`] (0: not calibrated yet).
#[inline]
pub(crate) fn ticks_mult_cached() -> u64 {
    TICKS_MULT.load(Ordering::Relaxed) as u64
}

/// Recomputes the cached [`ticks_mult`] (metric readers), with `now`
/// a nanotime just read if the caller has one (sysmon).
pub(crate) fn refresh_ticks_mult(now: Option<i64>) -> u64 {
    let m = ticks_mult_at(now.unwrap_or_else(nanotime));
    if m != 0 {
        TICKS_MULT.store(m as i64, Ordering::Relaxed);
    }
    m
}
