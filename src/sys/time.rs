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

/// The CPU's cycle or timer counter, if it is a usable clock (Go's
/// `cputicks`): the tracer timestamps events with it and the system-call
/// wrapper times calls with it, a few ns instead of a vDSO clock read.
/// - x86-64: the time-stamp counter, where it is invariant (`constant_tsc`
///   and `nonstop_tsc` in /proc/cpuinfo: same rate in every power state,
///   synchronized across cores).
/// - aarch64: the generic timer's virtual count, `CNTVCT_EL0`, which the
///   architecture makes constant-rate and system-wide (the vDSO's own
///   clock reads it); usable where `CNTFRQ_EL0` reports its frequency.
pub(crate) fn tsc_usable() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
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
    #[cfg(target_arch = "aarch64")]
    {
        counter_frequency().is_some()
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        false
    }
}

/// The counter's frequency in Hz where the architecture states it
/// (`CNTFRQ_EL0` on aarch64, which firmware sets and Linux requires to be
/// right); `None` on x86-64, whose TSC rate only a measurement gives.
pub(crate) fn counter_frequency() -> Option<u64> {
    #[cfg(target_arch = "aarch64")]
    {
        let f: u64;
        // SAFETY: CNTFRQ_EL0 is readable at EL0 whenever the virtual count
        // is (Linux enables both); the read has no memory effects.
        unsafe {
            core::arch::asm!("mrs {}, cntfrq_el0", out(reg) f, options(nomem, nostack, preserves_flags))
        };
        // The register's low 32 bits hold the frequency.
        Some(f & 0xffff_ffff).filter(|&f| f != 0)
    }
    #[cfg(not(target_arch = "aarch64"))]
    {
        None
    }
}

/// Reads the counter (0 where there is none; see [`tsc_usable`]). No
/// serialization: the read may execute before earlier loads complete,
/// tens of nanoseconds early, which a call's timing or a sample cannot
/// see; where another thread's reading must not exceed it, see
/// [`cputicks_ordered`].
#[inline(always)]
pub(crate) fn cputicks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC exists on every x86-64 CPU and has no memory effects.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(target_arch = "aarch64")]
    {
        let t: u64;
        // SAFETY: Linux lets EL0 read CNTVCT_EL0 (the vDSO relies on it);
        // the read has no memory effects.
        unsafe {
            core::arch::asm!("mrs {}, cntvct_el0", out(reg) t, options(nomem, nostack, preserves_flags))
        };
        t
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        0
    }
}

/// [`cputicks`], read only once every earlier instruction has completed
/// (Go's `cputicks`, which fences for the same reason): an unfenced read
/// may execute before an earlier load, so a thread that loads what
/// another published, then reads the counter, can read a value below the
/// one the publisher read before its store. The tracer stamps with this
/// what must sort after another thread's event (a GoStart after the
/// GoUnblock, GoCreate or GoStop that queued its goroutine). About 10 ns
/// more than `cputicks` here (20 against 10 on an AMD EPYC, a tight loop).
/// - x86-64: RDTSCP (it waits for the earlier instructions and loads),
///   where the CPU has it, else LFENCE then RDTSC.
/// - aarch64: ISB then the counter (as the kernel's own reads).
#[inline(always)]
pub(crate) fn cputicks_ordered() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        if has_rdtscp() {
            let mut aux = 0u32;
            // SAFETY: the CPU has RDTSCP (checked just above); it writes
            // `aux` (the processor id), a local.
            unsafe { core::arch::x86_64::__rdtscp(&mut aux) }
        } else {
            // SAFETY: LFENCE and RDTSC exist on every x86-64 CPU; neither
            // has memory effects beyond the fence's ordering.
            unsafe {
                core::arch::x86_64::_mm_lfence();
                core::arch::x86_64::_rdtsc()
            }
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        let t: u64;
        // SAFETY: as `cputicks`; ISB only waits for earlier instructions.
        // Not `nomem`: the compiler must not move earlier loads after it.
        unsafe {
            core::arch::asm!("isb", "mrs {}, cntvct_el0", out(reg) t, options(nostack, preserves_flags))
        };
        t
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        0
    }
}

/// Whether the CPU has RDTSCP (CPUID 0x8000_0001, EDX bit 27), asked once:
/// 0 not yet, 1 yes, 2 no.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn has_rdtscp() -> bool {
    static HAS: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);
    match HAS.load(Ordering::Relaxed) {
        0 => {
            // SAFETY: CPUID exists on every x86-64 CPU; leaf 0x8000_0000
            // says whether the extended leaf asked next exists. (A safe
            // function in newer toolchains, unsafe in the oldest we
            // support.)
            #[allow(unused_unsafe)]
            let has = unsafe {
                use core::arch::x86_64::__cpuid;
                __cpuid(0x8000_0000).eax >= 0x8000_0001 && __cpuid(0x8000_0001).edx & (1 << 27) != 0
            };
            HAS.store(if has { 1 } else { 2 }, Ordering::Relaxed);
            has
        }
        v => v == 1,
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
    let (t, n) = if tsc_usable() {
        TICKS_TSC.store(true, Ordering::Relaxed);
        tsc_pair()
    } else {
        let n = nanotime();
        (n as u64, n)
    };
    TICKS_BASE.store(t as i64, Ordering::Relaxed);
    TICKS_BASE_NS.store(n, Ordering::Relaxed);
}

/// A nanotime reading and the counter ([`cputicks`]) at the same moment:
/// the nanotime read between two counter reads, their midpoint, from the
/// try of five whose two counter reads came closest (a try the thread was
/// preempted in is wide, and loses). Every calibration of the counter
/// against nanotime pairs its clocks so: read one after the other, a
/// preemption between them (milliseconds, on a loaded machine or under an
/// emulator) skews the scale, and it once made every timestamp of the
/// tracer's traces run at a third of the real rate.
pub(crate) fn tsc_pair() -> (u64, i64) {
    let mut best = (u64::MAX, 0, 0);
    for _ in 0..5 {
        let a = cputicks();
        let n = nanotime();
        let width = cputicks().wrapping_sub(a);
        if width < best.0 {
            best = (width, a.wrapping_add(width / 2), n);
        }
    }
    (best.1, best.2)
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
/// the first 100 us, when the measure is too short to trust). Both ends
/// are a [`tsc_pair`]. Costs five nanotime reads and a division: callers
/// refresh a cached copy now and then (sysmon, readers), not per sample.
pub(crate) fn ticks_mult() -> u64 {
    if !TICKS_TSC.load(Ordering::Relaxed) {
        return 1 << 32;
    }
    let base_ns = TICKS_BASE_NS.load(Ordering::Relaxed);
    let base = TICKS_BASE.load(Ordering::Relaxed) as u64;
    let (t, n) = tsc_pair();
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

/// Recomputes the cached [`ticks_mult`] (sysmon, metric readers).
pub(crate) fn refresh_ticks_mult() -> u64 {
    let m = ticks_mult();
    if m != 0 {
        TICKS_MULT.store(m as i64, Ordering::Relaxed);
    }
    m
}

/// How many [`cputicks`] make `us` microseconds, for a threshold that
/// needs no precision: from the stated frequency on aarch64; on x86-64,
/// whose rate is 1-5 GHz and unmeasured here, `us` times 2^12 (so 32 us
/// makes 2^17 ticks: 26-130 us).
pub(crate) fn ticks_for_us(us: u64) -> u64 {
    match counter_frequency() {
        Some(hz) => (hz.saturating_mul(us) / 1_000_000).max(1),
        None => us << 12,
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    /// A pair's two readings are of one moment: each lies between the
    /// same clock's readings just before and just after the call.
    #[test]
    fn tsc_pair_reads_both_clocks_at_one_moment() {
        for _ in 0..100 {
            let (t0, n0) = (cputicks(), nanotime());
            let (t, n) = tsc_pair();
            let (n1, t1) = (nanotime(), cputicks());
            assert!(n0 <= n && n <= n1, "nanotime {n} outside {n0}..={n1}");
            if tsc_usable() {
                assert!(t0 <= t && t <= t1, "counter {t} outside {t0}..={t1}");
            }
        }
    }

    /// The counter is a clock wherever the runtime uses it as one: it
    /// exists on x86-64 and aarch64 (on x86-64 only with an invariant TSC,
    /// which CI's machines have), never goes back on one thread, and runs
    /// at a rate that matches nanotime within a wide margin.
    #[test]
    fn cputicks_is_a_clock() {
        if cfg!(target_arch = "aarch64") {
            assert!(tsc_usable(), "CNTFRQ_EL0 reads 0");
        }
        if !tsc_usable() {
            assert_eq!(cputicks(), 0);
            return;
        }
        let (t0, n0) = (cputicks(), nanotime());
        let mut last = t0;
        let mut n1 = n0;
        while n1 - n0 < 20_000_000 {
            let t = cputicks();
            assert!(t >= last, "counter went back: {last} then {t}");
            last = t;
            n1 = nanotime();
        }
        let ticks = cputicks() - t0;
        assert!(ticks > 0, "counter did not move in 20 ms");
        // Ticks per second, from 20 ms or more of nanotime: within 10 kHz
        // and 10 GHz, and within a factor 4 of the stated frequency.
        let hz = ticks as f64 * 1e9 / (n1 - n0) as f64;
        assert!((1e4..1e10).contains(&hz), "counter at {hz} Hz");
        if let Some(f) = counter_frequency() {
            let ratio = hz / f as f64;
            assert!(
                (0.25..4.0).contains(&ratio),
                "{hz} Hz measured, {f} Hz stated"
            );
            assert_eq!(ticks_for_us(1_000_000), f);
        }
    }

    /// The tracer's causal order rests on this: a reading passed to another
    /// thread is never above that thread's ordered reading taken after it
    /// saw it (`cputicks_ordered`; tracer/buf.rs, "Causal order"). Both
    /// ways, many round trips, so the two threads run on two CPUs for most
    /// of them wherever two are free.
    /// The value `slot` receives (and takes it): spins a while, then yields,
    /// so that two threads sharing a CPU (a loaded box) take turns.
    fn wait_for(slot: &AtomicU64) -> u64 {
        let mut spins = 0u32;
        loop {
            match slot.swap(0, Ordering::Acquire) {
                0 if spins < 1_000 => {
                    spins += 1;
                    std::hint::spin_loop()
                }
                0 => std::thread::yield_now(),
                v => return v,
            }
        }
    }

    #[test]
    fn an_ordered_read_is_not_below_a_reading_it_saw() {
        if !tsc_usable() {
            return;
        }
        const TRIPS: u32 = 20_000;
        let there = Arc::new(AtomicU64::new(0));
        let back = Arc::new(AtomicU64::new(0));
        let (there2, back2) = (there.clone(), back.clone());
        let echo = std::thread::spawn(move || {
            let mut worst = i64::MAX;
            for _ in 0..TRIPS {
                let sent = wait_for(&there2);
                worst = worst.min(cputicks_ordered().wrapping_sub(sent) as i64);
                back2.store(cputicks_ordered(), Ordering::Release);
            }
            worst
        });
        let mut worst = i64::MAX;
        for _ in 0..TRIPS {
            there.store(cputicks_ordered(), Ordering::Release);
            let sent = wait_for(&back);
            worst = worst.min(cputicks_ordered().wrapping_sub(sent) as i64);
        }
        let echo_worst = echo.join().unwrap();
        assert!(
            worst >= 0 && echo_worst >= 0,
            "an ordered reading below one it saw: by {} and {} ticks",
            -worst.min(0),
            -echo_worst.min(0)
        );
    }
}
