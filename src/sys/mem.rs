//! Virtual memory: the only module that calls `mmap`, `munmap`, `madvise`
//! and `mprotect` (and, for tests, `mincore`).
//!
//! Everything here is a thin, checked wrapper around one system call; policy
//! (what to reserve, where guards go, when to give pages back) lives in
//! `g::stack` and `sys::overflow`.

use std::io;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// `madvise(2)` advice that turns the pages of a range into guard pages
/// (accessing them raises `SIGSEGV`) without changing the VMA, so without
/// costing a memory mapping. Linux >= 6.13; older kernels fail with `EINVAL`.
/// Not (yet) exported by the `libc` crate.
pub(crate) const MADV_GUARD_INSTALL: libc::c_int = 102;

static PAGE_SIZE: AtomicUsize = AtomicUsize::new(0);

/// The size of a virtual memory page (a power of two), cached after the first
/// call. A constant on x86-64, whose base page is 4 KiB under every kernel
/// configuration (other targets, aarch64 among them, choose 4, 16 or 64 KiB
/// when the kernel is built): no load and no branch on hot paths.
#[inline]
pub(crate) fn page_size() -> usize {
    #[cfg(target_arch = "x86_64")]
    return 4096;
    #[cfg(not(target_arch = "x86_64"))]
    page_size_loaded()
}

#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
#[inline]
fn page_size_loaded() -> usize {
    let p = PAGE_SIZE.load(Ordering::Relaxed);
    if p != 0 {
        return p;
    }
    page_size_slow()
}

#[cold]
fn page_size_slow() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let p = if p > 0 { p as usize } else { 4096 };
    assert!(p.is_power_of_two(), "page size {p} is not a power of two");
    PAGE_SIZE.store(p, Ordering::Relaxed);
    p
}

/// Reserves `len` bytes (a multiple of the page size) of private anonymous
/// read-write memory. Nothing is committed: pages are allocated by the kernel
/// on first touch and read as zero until then (`MAP_NORESERVE`: no swap/commit
/// accounting under the default overcommit policy).
///
/// The range is marked `MADV_NOHUGEPAGE` (and mapped `MAP_STACK`, which implies
/// it on Linux >= 6.7) so that transparent huge pages never back a stack
/// with 2 MiB: a goroutine touching 4 KiB must cost 4 KiB. Failure of that
/// advice (kernels built without THP) is ignored. The record arena
/// (`g/arena.rs`) maps its regions here too, where the same holds: records
/// are touched as they are first used.
pub(crate) fn reserve(len: usize) -> io::Result<NonNull<u8>> {
    debug_assert!(len > 0 && len % page_size() == 0);
    // SAFETY: a fresh anonymous mapping at an address chosen by the kernel
    // cannot alias any existing Rust object.
    let p = unsafe {
        libc::mmap(
            ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_STACK,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `p..p+len` is the mapping we just created; advice only changes
    // how the kernel backs it.
    unsafe { libc::madvise(p, len, libc::MADV_NOHUGEPAGE) };
    NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned a null address"))
}

/// Unmaps `addr..addr+len`.
///
/// # Safety
/// The range must have been obtained from [`reserve`] (or be a page-aligned
/// part of such a range), and nothing may use it afterwards: no reference into
/// it may outlive this call and no code may run on it.
pub(crate) unsafe fn unmap(addr: NonNull<u8>, len: usize) -> io::Result<()> {
    // SAFETY: the caller guarantees the range is ours and no longer used.
    if unsafe { libc::munmap(addr.as_ptr().cast(), len) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Makes `addr..addr+len` a guard region with `MADV_GUARD_INSTALL` (Linux >=
/// 6.13): any access raises `SIGSEGV`, the VMA is not split (no extra memory
/// mapping), and the guard survives `MADV_DONTNEED` of neighbouring pages.
/// Fails with `EINVAL` on kernels without the advice (and on `mlock`ed
/// ranges); the caller then falls back to [`protect_none`].
///
/// # Safety
/// The range must be page-aligned, inside a mapping obtained from [`reserve`],
/// and hold no live Rust object: its contents are discarded.
pub(crate) unsafe fn guard_install(addr: NonNull<u8>, len: usize) -> io::Result<()> {
    // SAFETY: the caller guarantees the range is ours and holds nothing live.
    if unsafe { libc::madvise(addr.as_ptr().cast(), len, MADV_GUARD_INSTALL) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `process_madvise(2)`'s name for the calling process (`PIDFD_SELF`, Linux
/// >= 6.14): no pidfd to open and keep. Older kernels fail with `EBADF`.
const PIDFD_SELF: libc::c_int = -10000;

/// Most ranges one batched call takes (the kernel's `UIO_MAXIOV` is 1024).
pub(crate) const BATCH_MAX: usize = 64;

/// Applies `advice` to every `(addr, len)` of `ranges` (at most
/// [`BATCH_MAX`]) with one `process_madvise(2)` on this process: one system
/// call instead of one per range. The kernel accepts any advice for the
/// calling process since Linux 6.13 and names it `PIDFD_SELF` since 6.14;
/// older kernels fail (`EBADF`, `EINVAL`, `ENOSYS`, `EPERM`) and the caller
/// then uses [`guard_install`] or plain `madvise` per range. Returns how
/// many of the ranges, from the first, were advised in full (the kernel
/// stops at the first range it fails on).
///
/// # Safety
/// As for the advice applied to each range by itself: every range must be
/// page-aligned, inside a mapping obtained from [`reserve`], and, for
/// destructive advice (`MADV_GUARD_INSTALL`), hold no live Rust object.
pub(crate) unsafe fn madvise_batch(
    ranges: &[(usize, usize)],
    advice: libc::c_int,
) -> io::Result<usize> {
    assert!(ranges.len() <= BATCH_MAX, "madvise_batch: too many ranges");
    // A stack-cache refill (16 ranges) calls this on the spawning
    // goroutine's own stack: its iovec array is kept to that size.
    if ranges.len() <= SMALL_BATCH {
        // SAFETY: the caller's contract.
        unsafe { madvise_batch_in::<SMALL_BATCH>(ranges, advice) }
    } else {
        // SAFETY: the caller's contract.
        unsafe { madvise_batch_in::<BATCH_MAX>(ranges, advice) }
    }
}

/// Batches of at most this many ranges use a 256-byte iovec array.
const SMALL_BATCH: usize = 16;

/// [`madvise_batch`] with an iovec array of `N` (>= `ranges.len()`).
#[inline(never)]
unsafe fn madvise_batch_in<const N: usize>(
    ranges: &[(usize, usize)],
    advice: libc::c_int,
) -> io::Result<usize> {
    let mut iov = [libc::iovec {
        iov_base: ptr::null_mut(),
        iov_len: 0,
    }; N];
    for (v, &(addr, len)) in iov.iter_mut().zip(ranges) {
        *v = libc::iovec {
            iov_base: addr as *mut libc::c_void,
            iov_len: len,
        };
    }
    // SAFETY: `iov[..ranges.len()]` is initialised and outlives the call,
    // which only reads it; the advice's own contract is the caller's.
    let r = unsafe {
        libc::syscall(
            libc::SYS_process_madvise,
            PIDFD_SELF,
            iov.as_ptr(),
            ranges.len(),
            advice,
            0u32,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut done = r as usize;
    let mut n = 0;
    for &(_, len) in ranges {
        if done < len {
            break;
        }
        done -= len;
        n += 1;
    }
    Ok(n)
}

/// Starts loading the cache line that holds `addr` into the L1 cache,
/// without waiting for it. A hint: no architectural effect, never faults,
/// any address will do (a no-op on targets without the instruction here).
#[inline(always)]
pub(crate) fn prefetch(addr: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch has no architectural effect and never faults.
    unsafe {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(addr as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = addr;
}

/// Maps the pages of `addr..addr+len` for reading without a fault each
/// (`MADV_POPULATE_READ`, Linux >= 5.14): never-touched anonymous pages get
/// the shared zero page, which costs a page-table entry and no memory (it
/// is not counted in RSS). Fails on older kernels; the caller ignores that.
///
/// # Safety
/// The range must be page-aligned and inside a mapping obtained from
/// [`reserve`] (advice that reads only: contents are unchanged).
#[cfg(test)]
pub(crate) unsafe fn populate_read(addr: NonNull<u8>, len: usize) -> io::Result<()> {
    // SAFETY: populating only maps pages for reading; contents are unchanged.
    if unsafe { libc::madvise(addr.as_ptr().cast(), len, libc::MADV_POPULATE_READ) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Makes `addr..addr+len` inaccessible with `mprotect(PROT_NONE)`: the
/// fallback guard for kernels without `MADV_GUARD_INSTALL`. The kernel splits
/// the mapping around the range, so every such guard costs memory mappings
/// (counted against `vm.max_map_count`); `ENOMEM` reports hitting that limit.
///
/// # Safety
/// The range must be page-aligned, inside a mapping obtained from [`reserve`],
/// and hold no live Rust object that will still be accessed.
pub(crate) unsafe fn protect_none(addr: NonNull<u8>, len: usize) -> io::Result<()> {
    // SAFETY: the caller guarantees nothing will access the range.
    if unsafe { libc::mprotect(addr.as_ptr().cast(), len, libc::PROT_NONE) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Gives the pages of `addr..addr+len` back to the OS (`MADV_DONTNEED`): the
/// range stays reserved and readable, its resident pages are freed at once
/// and read back as zero on the next touch. (`MADV_FREE` would be cheaper
/// but lazy: the pages would stay counted in RSS and could read back with
/// their old contents, which the stack pool relies on not happening.)
///
/// # Safety
/// The range must be page-aligned, inside a mapping obtained from [`reserve`],
/// and hold no live Rust object: its contents become zero.
pub(crate) unsafe fn release(addr: NonNull<u8>, len: usize) -> io::Result<()> {
    // SAFETY: the caller guarantees the range is ours and its contents dead.
    if unsafe { libc::madvise(addr.as_ptr().cast(), len, libc::MADV_DONTNEED) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Set once a batched release failed for a reason that will not change
/// (a kernel without `process_madvise` on `PIDFD_SELF`, or one that refuses
/// `MADV_DONTNEED` through it): later calls go straight to `madvise`.
static NO_RELEASE_BATCH: AtomicBool = AtomicBool::new(false);

/// [`release`] for many ranges: `process_madvise(MADV_DONTNEED)` over up to
/// [`BATCH_MAX`] ranges per call, falling back to one `madvise` per range
/// where the kernel does not take it (Linux < 6.13). Errors are ignored, as
/// callers of `release` do: a range left resident only costs memory.
///
/// Why: each `madvise(MADV_DONTNEED)` on a multi-threaded process ends with
/// a TLB shootdown, an interrupt to every other CPU running one of our
/// threads, and waits for them. A recent kernel (6.18 here) flushes once
/// per `process_madvise` call instead of once per range, so a batch costs
/// about one flush instead of one per range.
///
/// # Safety
/// As for [`release`], for every range.
pub(crate) unsafe fn release_ranges(ranges: &[(usize, usize)]) {
    let mut rest = ranges;
    while !rest.is_empty() && !NO_RELEASE_BATCH.load(Ordering::Relaxed) {
        let chunk = &rest[..rest.len().min(BATCH_MAX)];
        // SAFETY: the caller's contract, range by range.
        match unsafe { madvise_batch(chunk, libc::MADV_DONTNEED) } {
            Ok(n) if n > 0 => rest = &rest[n..],
            // The first range of the chunk failed (or the call did): let
            // the per-range path below handle what is left, and stop
            // batching if the call itself is unsupported.
            Ok(_) => break,
            Err(e) => {
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EBADF | libc::EINVAL | libc::ENOSYS | libc::EPERM)
                ) {
                    NO_RELEASE_BATCH.store(true, Ordering::Relaxed);
                }
                break;
            }
        }
    }
    for &(addr, len) in rest {
        if let Some(p) = NonNull::new(addr as *mut u8) {
            // SAFETY: the caller's contract for this range.
            let _ = unsafe { release(p, len) };
        }
    }
}

/// The kernel's per-process limit on memory mappings (`vm.max_map_count`,
/// 65530 by default), or `None` if it cannot be read.
pub(crate) fn max_map_count() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// How many pages of `addr..addr+len` have a present page-table entry
/// (`mincore`). Note that a never-written page that was *read* maps the
/// shared zero page and counts here although it costs no memory.
#[cfg(test)]
pub(crate) fn resident_pages(addr: usize, len: usize) -> io::Result<usize> {
    let page = page_size();
    let mut vec = vec![0u8; len.div_ceil(page)];
    // SAFETY: mincore only writes `vec` (one byte per page of the range,
    // which `vec` is sized for); it does not touch the range itself.
    if unsafe { libc::mincore(addr as *mut libc::c_void, len, vec.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(vec.iter().filter(|&&b| b & 1 != 0).count())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_size_is_a_power_of_two() {
        let p = page_size();
        assert!(p >= 4096 && p.is_power_of_two());
        assert_eq!(p, page_size());
        assert_eq!(p, page_size_loaded(), "the constant disagrees with sysconf");
    }

    #[test]
    fn reserve_touch_release_reads_zero() {
        let page = page_size();
        let len = 8 * page;
        let p = reserve(len).unwrap();
        let a = p.as_ptr() as usize;
        assert_eq!(
            resident_pages(a, len).unwrap(),
            0,
            "reserve must not commit"
        );
        for i in 0..8 {
            // SAFETY: inside the fresh read-write mapping.
            unsafe { p.as_ptr().add(i * page).write(0xAA) };
        }
        assert_eq!(resident_pages(a, len).unwrap(), 8);
        // SAFETY: our mapping; the bytes written above are dead.
        unsafe { release(p, len).unwrap() };
        assert_eq!(resident_pages(a, len).unwrap(), 0);
        // SAFETY: still mapped read-write; released pages read as zero.
        assert_eq!(unsafe { p.as_ptr().read() }, 0);
        // SAFETY: our mapping, no longer used.
        unsafe { unmap(p, len).unwrap() };
    }

    /// More ranges than one batch holds, every other page: all released,
    /// the pages between them kept (batched where the kernel allows, per
    /// range otherwise).
    #[test]
    fn release_ranges_releases_exactly_the_ranges() {
        let page = page_size();
        let n = 2 * BATCH_MAX + 5;
        let len = 2 * n * page;
        let p = reserve(len).unwrap();
        let a = p.as_ptr() as usize;
        for i in 0..2 * n {
            // SAFETY: inside the fresh read-write mapping.
            unsafe { p.as_ptr().add(i * page).write(0xAA) };
        }
        assert_eq!(resident_pages(a, len).unwrap(), 2 * n);
        let ranges: Vec<(usize, usize)> = (0..n).map(|i| (a + 2 * i * page, page)).collect();
        // SAFETY: our mapping; the bytes of the released pages are dead.
        unsafe { release_ranges(&ranges) };
        for i in 0..2 * n {
            let want = if i % 2 == 0 { 0 } else { 1 };
            assert_eq!(
                resident_pages(a + i * page, page).unwrap(),
                want,
                "page {i}"
            );
        }
        // SAFETY: still mapped read-write; released pages read as zero.
        assert_eq!(unsafe { p.as_ptr().read() }, 0);
        // SAFETY: as above, a kept page.
        assert_eq!(unsafe { p.as_ptr().add(page).read() }, 0xAA);
        // SAFETY: our mapping, no longer used.
        unsafe { unmap(p, len).unwrap() };
    }

    #[test]
    fn guard_install_is_supported_or_einval() {
        let page = page_size();
        let p = reserve(2 * page).unwrap();
        // SAFETY: the first page of our fresh mapping, holding nothing.
        match unsafe { guard_install(p, page) } {
            Ok(()) => println!("MADV_GUARD_INSTALL supported"),
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{e}");
                println!("MADV_GUARD_INSTALL unsupported: {e}");
            }
        }
        // SAFETY: our mapping, no longer used.
        unsafe { unmap(p, 2 * page).unwrap() };
    }

    #[test]
    fn batched_guard_install_and_populate_read() {
        let page = page_size();
        let p = reserve(8 * page).unwrap();
        let a = p.as_ptr() as usize;
        let guards = [(a, page), (a + 4 * page, page)];
        // SAFETY: guard slots of our fresh mapping, holding nothing.
        match unsafe { madvise_batch(&guards, MADV_GUARD_INSTALL) } {
            Ok(n) => {
                assert_eq!(n, 2);
                // Populating the pages between the guards maps the zero page
                // (resident in mincore's view, no memory).
                let windows = [(a + page, page), (a + 5 * page, page)];
                // SAFETY: usable pages of our mapping; reading only.
                let n = unsafe { madvise_batch(&windows, libc::MADV_POPULATE_READ) }.unwrap();
                assert_eq!(n, 2);
                assert_eq!(resident_pages(a + page, page).unwrap(), 1);
                assert_eq!(resident_pages(a + 2 * page, 2 * page).unwrap(), 0);
                // SAFETY: as above.
                unsafe { populate_read(NonNull::new((a + 2 * page) as *mut u8).unwrap(), page) }
                    .unwrap();
                assert_eq!(resident_pages(a + 2 * page, page).unwrap(), 1);
                // SAFETY: still mapped read-write; reads zero.
                assert_eq!(unsafe { ((a + page) as *const u8).read_volatile() }, 0);
                // Populating a guard fails: the guard was installed.
                // SAFETY: as above.
                assert!(unsafe { madvise_batch(&[(a, page)], libc::MADV_POPULATE_READ) }.is_err());
            }
            Err(e) => println!("process_madvise on PIDFD_SELF unsupported: {e}"),
        }
        // SAFETY: our mapping, no longer used.
        unsafe { unmap(p, 8 * page).unwrap() };
    }

    #[test]
    fn max_map_count_is_readable() {
        let n = max_map_count().expect("/proc/sys/vm/max_map_count");
        assert!(n > 1000, "{n}");
    }
}
