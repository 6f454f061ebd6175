//! N goroutines (default 100,000) park on one channel; prints, per
//! goroutine, the growth of resident memory plus page tables (VmRSS + VmPTE),
//! the minor page faults and the time taken to spawn and park them, then the
//! time and faults to wake them all and let them finish. Faults are the
//! process's minor faults (/proc/self/stat), which also count pages the
//! kernel maps on request (`MADV_POPULATE_READ`), without a trap.
//!
//! `parked floor [N] [STRIDE_KIB]` measures the floor instead: N touches of
//! one byte, one per STRIDE_KIB (default 260) of a fresh reservation, i.e.
//! what one resident page per stack costs, page tables included, with no
//! runtime at all. Then the cold pass: one read per slot in turn after a
//! 512 MiB sweep has evicted them from the caches and the TLB, each read
//! giving the next address (nothing overlaps) or independent (the CPU
//! overlaps what it can): what a wake-up of goroutines parked a while pays
//! per resume for the layout alone (stride 2 is Go's layout: 2 KiB stacks
//! side by side).
//!
//! `parked carve [N]` times, per stack, the kernel's part of carving N fresh
//! stacks at the default 260 KiB stride, the way the stack pool does it (one
//! `process_madvise` per 16 stacks): the guard (`MADV_GUARD_INSTALL`), the
//! top page (`MADV_POPULATE_WRITE`), the probe window (`MADV_POPULATE_READ`)
//! and all three, each on a fresh reservation, beside a plain write fault on
//! the top page (Linux >= 6.14).
//!
//! Usage: cargo run --release --example parked [N] | floor [N] [STRIDE_KIB] | carve [N]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// VmRSS + VmPTE in bytes.
fn rss_pte() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kb = |key: &str| {
        s.lines()
            .find_map(|l| {
                l.strip_prefix(key)?
                    .trim()
                    .strip_suffix("kB")?
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .unwrap_or(0)
    };
    (kb("VmRSS:") + kb("VmPTE:")) * 1024
}

/// Minor page faults of this process so far (/proc/self/stat, field 10).
fn minflt() -> u64 {
    let s = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // Fields after the command name, which is in parentheses.
    let rest = &s[s.rfind(')').expect("stat: no ')'") + 2..];
    rest.split_whitespace()
        .nth(7)
        .expect("stat: minflt")
        .parse()
        .expect("stat: minflt")
}

fn arg(i: usize, default: u64) -> u64 {
    match std::env::args().nth(i) {
        None => default,
        Some(a) => a.parse().unwrap_or_else(|_| {
            eprintln!("parked: expected a number, got {a:?}");
            std::process::exit(2)
        }),
    }
}

fn floor() {
    let n = arg(2, 100_000) as usize;
    let stride = arg(3, 260) as usize * 1024;
    assert!(n > 0 && stride >= 64, "floor: N > 0 and STRIDE_KIB > 0");
    let (m0, r0) = (minflt(), rss_pte());
    let p = reserve(n * stride);
    // The word at the end of slot `i`: the touched byte's line.
    let word = |i: usize| p + (i + 1) * stride - 8;
    let t = Instant::now();
    for i in 0..n {
        // SAFETY: inside the mapping (the last byte of each stride).
        unsafe { (p as *mut u8).add((i + 1) * stride - 1).write_volatile(1) };
    }
    let el = t.elapsed();
    println!(
        "floor: {n} touches at a {} KiB stride: {:.0} B (RSS+PTE) and {:.2} faults per touch, {:.0} ns each",
        stride / 1024,
        (rss_pte() - r0) as f64 / n as f64,
        (minflt() - m0) as f64 / n as f64,
        el.as_nanos() as f64 / n as f64
    );
    // The cold pass: what a resume of each slot in turn pays once the TLB
    // and the caches have forgotten them (a wake-up of goroutines parked a
    // while), one dependent read per slot: each touched word holds the
    // address of the next slot's.
    for i in 0..n {
        let next = if i + 1 < n { word(i + 1) } else { 0 };
        // SAFETY: an aligned word inside slot `i`'s touched page.
        unsafe { (word(i) as *mut usize).write(next) };
    }
    // Follows the chain from slot 0; returns the time it took.
    let chase = || {
        let (mut a, t) = (word(0), Instant::now());
        while a != 0 {
            // SAFETY: a chain of words written above, ending in 0.
            a = unsafe { (a as *const usize).read_volatile() };
        }
        t.elapsed()
    };
    // Before the sweep is allocated (filling it evicts too).
    let hot = chase();
    // Evicts the slots' lines and translations: 512 MiB, a line at a time.
    let sweep = vec![1u8; 512 << 20];
    let evict = || {
        let sum = sweep.iter().step_by(64).map(|&b| b as u64).sum::<u64>();
        assert_eq!(sum, (512 << 20) / 64);
    };
    evict();
    let cold = chase();
    // The same reads, independent of each other (the CPU overlaps as many
    // as it can), cold again.
    evict();
    let t = Instant::now();
    let mut x = 0usize;
    for i in 0..n {
        // SAFETY: an aligned word inside slot `i`'s touched page.
        x ^= unsafe { (word(i) as *const usize).read_volatile() };
    }
    let overlapped = t.elapsed();
    std::hint::black_box(x);
    println!(
        "floor: then one read per slot in turn, cold (after a 512 MiB sweep): {:.1} ns each when each read gives the next address ({:.1} warm), {:.1} ns when they are independent",
        cold.as_nanos() as f64 / n as f64,
        hot.as_nanos() as f64 / n as f64,
        overlapped.as_nanos() as f64 / n as f64,
    );
}

/// A fresh private reservation of `len` bytes without huge pages.
fn reserve(len: usize) -> usize {
    // SAFETY: a fresh private anonymous mapping; nothing else uses it.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED, "mmap of {len} bytes failed");
    // SAFETY: same mapping; advice only.
    unsafe { libc::madvise(p, len, libc::MADV_NOHUGEPAGE) };
    p as usize
}

fn carve() {
    const GUARD_INSTALL: libc::c_int = 102;
    const PIDFD_SELF: libc::c_int = -10000;
    const BATCH: usize = 16;
    let n = arg(2, 100_000) as usize;
    let (page, stride) = (4096, 260 * 1024);
    // Offsets below a stack's slot start: the guard is the slot's first
    // page, the top page its last, the probe window 16 KiB below the top.
    let steps: [(&str, &[(libc::c_int, usize)]); 5] = [
        ("write fault on the top page", &[]),
        ("guard", &[(GUARD_INSTALL, 0)]),
        (
            "top page populated",
            &[(libc::MADV_POPULATE_WRITE, stride - page)],
        ),
        (
            "probe window mapped",
            &[(libc::MADV_POPULATE_READ, stride - 5 * page)],
        ),
        (
            "all three (the pool's carve)",
            &[
                (GUARD_INSTALL, 0),
                (libc::MADV_POPULATE_WRITE, stride - page),
                (libc::MADV_POPULATE_READ, stride - 5 * page),
            ],
        ),
    ];
    for (name, advice) in steps {
        let base = reserve(n * stride);
        let t = Instant::now();
        for first in (0..n).step_by(BATCH) {
            let k = BATCH.min(n - first);
            for &(adv, off) in advice {
                let iov: Vec<libc::iovec> = (first..first + k)
                    .map(|i| libc::iovec {
                        iov_base: (base + i * stride + off) as *mut libc::c_void,
                        iov_len: page,
                    })
                    .collect();
                // SAFETY: pages of our own fresh reservation, holding nothing.
                let r = unsafe {
                    libc::syscall(
                        libc::SYS_process_madvise,
                        PIDFD_SELF,
                        iov.as_ptr(),
                        iov.len(),
                        adv,
                        0u32,
                    )
                };
                if r < 0 {
                    let e = std::io::Error::last_os_error();
                    println!("carve: {name}: process_madvise failed ({e}); needs Linux >= 6.14");
                    return;
                }
            }
            if advice.is_empty() {
                for i in first..first + k {
                    // SAFETY: the last byte of a slot of our reservation.
                    unsafe { ((base + (i + 1) * stride - 1) as *mut u8).write_volatile(1) };
                }
            }
        }
        println!(
            "carve: {n} stacks, {name}: {:.0} ns per stack",
            t.elapsed().as_nanos() as f64 / n as f64
        );
    }
}

fn main() {
    match std::env::args().nth(1).as_deref() {
        Some("floor") => return floor(),
        Some("carve") => return carve(),
        _ => {}
    }
    let n = arg(1, 100_000);
    goroutine::run(move || {
        let parked = Arc::new(AtomicU64::new(0));
        let wg = goroutine::sync::WaitGroup::new();
        wg.add(n as isize);
        let (tx, rx) = goroutine::chan::<()>(0);
        let (m0, r0) = (minflt(), rss_pte());
        let t = Instant::now();
        for _ in 0..n {
            let (rx, parked, wg) = (rx.clone(), parked.clone(), wg.clone());
            goroutine::go(move || {
                parked.fetch_add(1, Ordering::AcqRel);
                assert!(rx.recv().is_err(), "parked: got a value");
                wg.done();
            });
        }
        while parked.load(Ordering::Acquire) < n {
            goroutine::yield_now();
        }
        let park = t.elapsed();
        let (m1, r1) = (minflt(), rss_pte());
        let t = Instant::now();
        drop(tx);
        wg.wait();
        let wake = t.elapsed();
        let m2 = minflt();
        let per = |x: u64| x as f64 / n as f64;
        println!(
            "{n} parked: {:.0} B (RSS+PTE), {:.2} faults, {:.0} ns per goroutine to spawn and park; \
             wake all: {:.1} ms, {:.2} faults per goroutine",
            per(r1 - r0),
            per(m1 - m0),
            park.as_nanos() as f64 / n as f64,
            wake.as_secs_f64() * 1e3,
            per(m2 - m1)
        );
    });
}
