use super::*;
use crate::sys::overflow::tests::{child_scenario, run_child};

fn page() -> usize {
    mem::page_size()
}

/// Writes one byte at `addr` inside memory we own.
fn poke(addr: usize, v: u8) {
    // SAFETY: tests only poke usable ranges of stacks they own.
    unsafe { ptr::write_volatile(addr as *mut u8, v) }
}

fn peek(addr: usize) -> u8 {
    // SAFETY: tests only peek usable ranges of stacks they own.
    unsafe { ptr::read_volatile(addr as *const u8) }
}

/// Forks a child that writes one byte at `addr`; returns the signal that
/// killed it (0 if it exited normally).
fn child_write_signal(addr: usize) -> i32 {
    // SAFETY: the child only does a volatile store and _exit, both
    // async-signal-safe, so forking a multi-threaded process is fine.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", io::Error::last_os_error());
    if pid == 0 {
        // SAFETY: in the child; see above. A fault kills it.
        unsafe {
            ptr::write_volatile(addr as *mut u8, 1);
            libc::_exit(0);
        }
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    let r = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(r, pid);
    if libc::WIFSIGNALED(status) {
        libc::WTERMSIG(status)
    } else {
        assert!(libc::WIFEXITED(status));
        0
    }
}

/// Number of /proc/self/maps entries overlapping `ranges`.
fn vmas_in(ranges: &[(usize, usize)]) -> usize {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines()
        .filter(|l| {
            let r = l.split_whitespace().next().unwrap();
            let (a, b) = r.split_once('-').unwrap();
            let a = usize::from_str_radix(a, 16).unwrap();
            let b = usize::from_str_radix(b, 16).unwrap();
            ranges.iter().any(|&(lo, len)| a < lo + len && lo < b)
        })
        .count()
}

#[test]
fn cache_reuses_the_same_stack_lifo() {
    let pool = Pool::leak(GuardPolicy::Auto);
    let mut c = StackCache::with_pool(pool, DEFAULT_STACK_SIZE);
    let a = c.get(DEFAULT_STACK_SIZE).unwrap();
    let b = c.get(DEFAULT_STACK_SIZE).unwrap();
    let (ta, tb) = (a.top, b.top);
    assert_ne!(ta, tb);
    c.put(a);
    c.put(b);
    assert_eq!(c.get(DEFAULT_STACK_SIZE).unwrap().top, tb);
    let again = c.get(DEFAULT_STACK_SIZE).unwrap();
    assert_eq!(again.top, ta);
    c.put(again);
    assert_eq!(c.get(DEFAULT_STACK_SIZE).unwrap().top, ta);
}

#[test]
fn slab_stacks_do_not_overlap_and_guards_sit_below() {
    let pool = Pool::leak(GuardPolicy::Auto);
    let mut c = StackCache::with_pool(pool, DEFAULT_STACK_SIZE);
    let stacks: Vec<Stack> = (0..600)
        .map(|_| c.get(DEFAULT_STACK_SIZE).unwrap())
        .collect();
    let mut ranges: Vec<(usize, usize)> = stacks
        .iter()
        .map(|s| {
            let (glo, ghi) = s.guard_range();
            assert_eq!(ghi - glo, page());
            assert_eq!(ghi, s.bottom(), "guard directly below the usable range");
            assert_eq!(s.top.get() - ghi, DEFAULT_STACK_SIZE);
            assert_eq!(s.usable_size(), DEFAULT_STACK_SIZE);
            assert_eq!(s.top.get() % page(), 0);
            use corosensei::stack::Stack as _;
            assert_eq!(s.limit().get(), glo);
            // base = top minus the local line, the cache colour and
            // the traceback header; the header ends on a line.
            let below = s.top.get() - s.base().get();
            assert!(
                below >= TOP_RESERVED + HEADER_BYTES,
                "base {below} bytes below the top"
            );
            let colour = below - TOP_RESERVED - HEADER_BYTES;
            assert!(colour < 2048 && colour % 64 == 0, "colour {colour}");
            assert_eq!(header_addr(s.top.get()), s.base().get());
            assert_eq!((s.base().get() + HEADER_BYTES) % 64, 0);
            // corosensei's parent link (16 bytes below base) shares the
            // header's cache line.
            assert_eq!(
                (s.base().get() - 16) / 64,
                (s.base().get() + HEADER_BYTES - 1) / 64
            );
            (glo, s.top.get())
        })
        .collect();
    ranges.sort_unstable();
    for w in ranges.windows(2) {
        assert!(w[0].1 <= w[1].0, "overlap: {:x?} {:x?}", w[0], w[1]);
    }
    // 600 stacks need 3 slabs of 256.
    assert_eq!(pool.slabs().len(), 3);
    for s in stacks {
        c.put(s);
    }
}

#[test]
fn usable_range_is_writable_top_and_bottom() {
    let pool = Pool::leak(GuardPolicy::Auto);
    let mut c = StackCache::with_pool(pool, DEFAULT_STACK_SIZE);
    let s = c.get(DEFAULT_STACK_SIZE).unwrap();
    poke(s.top.get() - 1, 7);
    poke(s.bottom(), 9);
    assert_eq!(peek(s.top.get() - 1), 7);
    assert_eq!(peek(s.bottom()), 9);
    c.put(s);
}

fn coalesced_release_keeps_guards(pool: &'static Pool) {
    let mut c = StackCache::with_pool(pool, DEFAULT_STACK_SIZE);
    let mut v: Vec<Stack> = (0..8).map(|_| c.get(DEFAULT_STACK_SIZE).unwrap()).collect();
    v.sort_by_key(|s| s.top);
    let tops: Vec<NonZeroUsize> = v.iter().map(|s| s.top).collect();
    let adjacent = tops
        .windows(2)
        .filter(|w| w[1].get() == w[0].get() + DEFAULT_STACK_SIZE + page())
        .count();
    assert!(adjacent > 0, "carved stacks are adjacent");
    for s in &v {
        poke(s.bottom(), 7);
        poke(s.top.get() - 1, 7);
    }
    release_coalesced(&tops, DEFAULT_STACK_SIZE);
    for s in &v {
        assert_eq!(peek(s.bottom()), 0, "released");
        assert_eq!(peek(s.top.get() - 1), 0, "released");
        let (lo, hi) = s.guard_range();
        assert_eq!(child_write_signal(lo), libc::SIGSEGV, "guard kept");
        assert_eq!(child_write_signal(hi - 1), libc::SIGSEGV, "guard kept");
    }
    for s in v {
        c.put(s);
    }
}

#[test]
fn coalesced_release_keeps_guards_with_madv_guard_install() {
    coalesced_release_keeps_guards(Pool::leak(GuardPolicy::Auto));
}

#[test]
fn coalesced_release_keeps_guards_with_mprotect_fallback() {
    coalesced_release_keeps_guards(Pool::leak(GuardPolicy::ForceMprotect));
}

fn guard_faults(pool: &'static Pool) {
    let mut c = StackCache::with_pool(pool, DEFAULT_STACK_SIZE);
    let s = c.get(DEFAULT_STACK_SIZE).unwrap();
    assert_eq!(child_write_signal(s.bottom()), 0, "bottom is writable");
    assert_eq!(child_write_signal(s.top.get() - 1), 0, "top is writable");
    let (lo, hi) = s.guard_range();
    assert_eq!(child_write_signal(hi - 1), libc::SIGSEGV, "guard top byte");
    assert_eq!(child_write_signal(lo), libc::SIGSEGV, "guard low byte");
    // The guard survives a trip through the pool (deep release on put,
    // warm list on drain) and reuse.
    let top = s.top;
    for a in (s.bottom()..s.top.get()).step_by(page()) {
        // First and last word of every page, as a deep call chain does.
        poke(a, 1);
        poke(a + page() - 8, 1);
    }
    c.put(s);
    c.drain();
    assert_eq!(pool.warm_len(DEFAULT_STACK_SIZE), BATCH);
    let mut all = Vec::new();
    let s = loop {
        let s = c.get(DEFAULT_STACK_SIZE).unwrap();
        if s.top == top {
            break s;
        }
        all.push(s);
    };
    assert_eq!(peek(s.bottom()), 0, "released pages read as zero");
    assert_eq!(child_write_signal(s.guard_range().0), libc::SIGSEGV);
    c.put(s);
}

#[test]
fn guard_faults_with_madv_guard_install() {
    let pool = Pool::leak(GuardPolicy::Auto);
    guard_faults(pool);
    if pool.mode() != GuardMode::Madvise {
        println!("skipped MADV_GUARD_INSTALL: unsupported here, tested the fallback");
    }
}

#[test]
fn carved_stacks_are_guarded_with_their_windows_mapped() {
    let pool = Pool::leak(GuardPolicy::Auto);
    let mut c = StackCache::with_pool(pool, DEFAULT_STACK_SIZE);
    // The first refill settles the guard mode one stack at a time; the
    // second carves a batch (where the kernel has MADV_GUARD_INSTALL).
    let stacks: Vec<Stack> = (0..2 * BATCH)
        .map(|_| c.get(DEFAULT_STACK_SIZE).unwrap())
        .collect();
    let batched = pool.mode() == GuardMode::Madvise && pool.lock().batch;
    // Both refills map their stacks' top pages and windows: the first
    // one's too, though it installs its guards one by one.
    for s in &stacks {
        let (lo, hi) = s.guard_range();
        assert_eq!(child_write_signal(hi - 1), libc::SIGSEGV, "guard top byte");
        assert_eq!(child_write_signal(lo), libc::SIGSEGV, "guard low byte");
        assert_eq!(child_write_signal(s.bottom()), 0, "bottom is writable");
        let (w, len) = probe_window(s.top, s.usable).unwrap();
        if batched {
            // The window maps the zero page: "resident" for mincore,
            // reads zero, and no page of the stack holds memory (a
            // fork's writes above do not show here).
            assert_eq!(mem::resident_pages(w, len).unwrap(), 1);
            // The top page is allocated ahead of the goroutine's first
            // write; the pages between hold nothing.
            let (t, _) = top_page(s.top);
            assert_eq!(mem::resident_pages(t, page()).unwrap(), 1);
            assert_eq!(mem::resident_pages(w + len, t - w - len).unwrap(), 0);
        }
        assert!(!went_deep(s.top.get() - keep_bytes()));
    }
    if !batched {
        println!("batched carving unsupported here: tested the one-by-one path");
    }
    for s in stacks {
        c.put(s);
    }
}

#[test]
fn guard_faults_with_mprotect_fallback() {
    let pool = Pool::leak(GuardPolicy::ForceMprotect);
    guard_faults(pool);
    assert_eq!(pool.mode(), GuardMode::Mprotect { forced: true });
}

#[test]
fn deep_pages_are_released_on_put_and_shallow_ones_kept() {
    let pool = Pool::leak(GuardPolicy::Auto);
    let mut c = StackCache::with_pool(pool, DEFAULT_STACK_SIZE);
    let keep_pages = KEEP_BYTES / page();
    let all_pages = DEFAULT_STACK_SIZE / page();
    let s = c.get(DEFAULT_STACK_SIZE).unwrap();
    let (bottom, top) = (s.bottom(), s.top.get());
    // Deep use: touch every page.
    // Like a growing stack: the top of every page is written first.
    for a in (bottom..top).step_by(page()) {
        poke(a + page() - 8, 0x5a);
    }
    assert_eq!(
        mem::resident_pages(bottom, DEFAULT_STACK_SIZE).unwrap(),
        all_pages
    );
    c.put(s);
    assert_eq!(
        mem::resident_pages(bottom, DEFAULT_STACK_SIZE - KEEP_BYTES).unwrap(),
        0,
        "deep pages released"
    );
    assert_eq!(
        mem::resident_pages(top - KEEP_BYTES, KEEP_BYTES).unwrap(),
        keep_pages,
        "kept region stays resident"
    );
    // Shallow use: only the kept region; put must not release it and the
    // deep region costs nothing (at most the zero page mapped by the probe).
    let s = c.get(DEFAULT_STACK_SIZE).unwrap();
    assert_eq!(s.top.get(), top);
    poke(top - 64, 3);
    c.put(s);
    assert_eq!(
        mem::resident_pages(top - KEEP_BYTES, KEEP_BYTES).unwrap(),
        keep_pages
    );
    assert!(mem::resident_pages(bottom, DEFAULT_STACK_SIZE - KEEP_BYTES).unwrap() <= 1);
    assert_eq!(peek(top - 64), 3, "no release: contents kept");
}

#[test]
fn full_cache_spills_half_to_the_pool_warm_then_releases_past_the_bound() {
    let pool = Pool::leak(GuardPolicy::Auto);
    let mut c = StackCache::with_pool(pool, DEFAULT_STACK_SIZE);
    let stacks: Vec<Stack> = (0..CACHE_CAP + 1)
        .map(|_| c.get(DEFAULT_STACK_SIZE).unwrap())
        .collect();
    let ranges: Vec<(usize, usize)> = stacks.iter().map(|s| (s.bottom(), s.usable)).collect();
    for s in &stacks {
        // Touch only the kept region: the probe sees nothing.
        for a in (s.top.get() - KEEP_BYTES..s.top.get()).step_by(page()) {
            poke(a, 1);
        }
    }
    // Empty the cache (it holds the rest of the last refill batch).
    c.drain();
    let warm0 = pool.warm_len(DEFAULT_STACK_SIZE);
    for s in stacks {
        c.put(s);
    }
    assert_eq!(c.len(), CACHE_CAP + 1 - BATCH);
    // The oldest BATCH were spilled to the warm list without a release:
    // their kept pages are still there, ready for reuse without faults.
    assert_eq!(pool.warm_len(DEFAULT_STACK_SIZE), warm0 + BATCH);
    for &(b, len) in &ranges {
        assert!(mem::resident_pages(b, len).unwrap() >= KEEP_BYTES / page());
    }
    // Past 2 * WARM_MAX warm stacks, the oldest WARM_MAX are released.
    let free0 = pool.free_len(DEFAULT_STACK_SIZE);
    let mut more: Vec<Stack> = (0..2 * WARM_MAX + CACHE_CAP)
        .map(|_| pool.get(DEFAULT_STACK_SIZE).unwrap())
        .collect();
    for s in &more {
        poke(s.top.get() - page(), 1);
    }
    c.drain();
    for s in more.drain(..) {
        c.put(s);
    }
    c.drain();
    let warm = pool.warm_len(DEFAULT_STACK_SIZE);
    assert!(warm <= 2 * WARM_MAX, "{warm} warm stacks");
    assert!(pool.free_len(DEFAULT_STACK_SIZE) >= free0 + WARM_MAX);
    // Our first stacks were the oldest warm ones: released entirely.
    for &(b, len) in &ranges {
        assert_eq!(mem::resident_pages(b, len).unwrap(), 0);
    }
}

/// A pool with a background releaser, and more stacks from it than its
/// warm list keeps (past `2 * WARM_MAX` once spilled).
fn background_pool_and_stacks() -> (&'static Pool, Vec<Stack>) {
    let pool = Pool::leak(GuardPolicy::Auto);
    pool.background.store(true, Ordering::Relaxed);
    let stacks = (0..2 * WARM_MAX + 2 * CACHE_CAP)
        .map(|_| pool.get(DEFAULT_STACK_SIZE).unwrap())
        .collect();
    (pool, stacks)
}

/// Puts `stacks` through a cache onto `pool`'s warm list, past its
/// bound (as goroutine exits would); returns the warm count.
fn spill_past_the_bound(pool: &'static Pool, stacks: Vec<Stack>) -> usize {
    let mut c = StackCache::with_pool(pool, DEFAULT_STACK_SIZE);
    for s in stacks {
        c.put(s);
    }
    c.drain();
    let warm = pool.warm_len(DEFAULT_STACK_SIZE);
    assert!(warm > 2 * WARM_MAX, "{warm} warm stacks");
    warm
}

/// While exits stream in, the pace stretches to keep the release
/// within `1 / RELEASE_BUDGET_DIV` of the releaser's time.
#[test]
fn streaming_release_keeps_to_its_share_of_a_cpu() {
    let (pool, stacks) = background_pool_and_stacks();
    let warm = spill_past_the_bound(pool, stacks);
    let stream = |cost: i64, since: i64| {
        let mut inner = pool.lock();
        inner.spills += 1;
        inner.chunk_cost = cost;
        inner.released_at = crate::sys::time::nanotime() - since;
    };
    // The last chunk took 1 ms: the pace is 50 ms, and 2 ms have passed.
    stream(1_000_000, 2 * RELEASE_PACE_NS);
    pool.release_excess();
    assert_eq!(
        pool.warm_len(DEFAULT_STACK_SIZE),
        warm,
        "released within the pace"
    );
    assert!(pool.excess.load(Ordering::Relaxed));
    assert!(pool.paced.load(Ordering::Relaxed));
    // One such pace later: a chunk, and its cost is measured.
    stream(1_000_000, RELEASE_BUDGET_DIV * 1_000_000);
    pool.release_excess();
    let gone = warm - pool.warm_len(DEFAULT_STACK_SIZE);
    assert!(gone >= PACED_CHUNK, "{gone} released");
    let cost = pool.lock().chunk_cost;
    assert!(cost > 0 && cost != 1_000_000, "chunk cost {cost}");
}

/// With a background releaser, a goroutine exit that spills past
/// `2 * WARM_MAX` makes no system call: the excess waits for
/// `release_excess` (sysmon), which paces itself while exits stream in
/// and takes the rest once they stop. Past `WARM_HARD_MAX` the spilling
/// thread releases only if the releaser stalled.
#[test]
fn background_releaser_takes_the_excess_release_off_the_spilling_thread() {
    let (pool, stacks) = background_pool_and_stacks();
    let first: Vec<(usize, usize)> = stacks[..8].iter().map(|s| (s.bottom(), s.usable)).collect();
    for s in &stacks {
        poke(s.top.get() - page(), 1);
    }
    let warm = spill_past_the_bound(pool, stacks);
    // Not released yet: the oldest still hold their touched top page.
    for &(b, len) in &first {
        assert!(mem::resident_pages(b, len).unwrap() >= 1);
    }
    assert!(pool.excess.load(Ordering::Relaxed));
    assert!(!pool.paced.load(Ordering::Relaxed));
    let free0 = pool.free_len(DEFAULT_STACK_SIZE);
    // Exits spilled since the releaser last looked, and it released a
    // moment ago: nothing yet, and the request stays up, paced. (A
    // moment that lasts an hour, as `looking` below: set to now, a stall
    // of this thread past the 1 ms pace between the store and the call,
    // which qemu-user on a loaded box makes, made a pace due.)
    pool.lock().released_at = crate::sys::time::nanotime() + 3_600_000_000_000;
    pool.release_excess();
    assert_eq!(pool.warm_len(DEFAULT_STACK_SIZE), warm);
    assert!(pool.excess.load(Ordering::Relaxed));
    assert!(pool.paced.load(Ordering::Relaxed));
    // Exits still spilling (counted by hand here), one pace later: a
    // paced chunk (more if the box stalled us for another pace), the
    // oldest first.
    {
        let mut inner = pool.lock();
        inner.spills += 1;
        inner.released_at = crate::sys::time::nanotime() - RELEASE_PACE_NS;
    }
    pool.release_excess();
    let left = pool.warm_len(DEFAULT_STACK_SIZE);
    let gone = warm - left;
    assert!(
        gone >= PACED_CHUNK && (gone % PACED_CHUNK == 0 || left == WARM_MAX),
        "{gone} released"
    );
    assert_eq!(pool.free_len(DEFAULT_STACK_SIZE), free0 + gone);
    for &(b, len) in &first {
        assert_eq!(mem::resident_pages(b, len).unwrap(), 0);
    }
    assert_eq!(pool.excess.load(Ordering::Relaxed), left > WARM_MAX);
    // No spill since: the rest goes at once (it fits in one chunk).
    pool.release_excess();
    assert_eq!(pool.warm_len(DEFAULT_STACK_SIZE), WARM_MAX);
    assert_eq!(pool.free_len(DEFAULT_STACK_SIZE), free0 + warm - WARM_MAX);
    // Nothing left to do: a second call is a flag load.
    assert!(!pool.excess.load(Ordering::Relaxed));
    pool.release_excess();
    assert_eq!(pool.warm_len(DEFAULT_STACK_SIZE), WARM_MAX);

    // Past the hard bound with sysmon looking, spills only queue...
    // (`looking`: sysmon looks between the exits, as it does while
    // they stream in; played by hand here, as a look that stays fresh
    // for an hour. Without it, all the puts must land within
    // `RELEASER_STALL_NS` of the first spill past the bound, which a
    // ThreadSanitizer build, or a loaded machine, does not keep to; a
    // refresh every few puts did not either, under TSan on a loaded
    // machine. The first spill past the bound sets the look to now,
    // hence a refresh before every put.)
    let spill = |count: usize, looking: bool| {
        let more: Vec<Stack> = (0..count)
            .map(|_| pool.get(DEFAULT_STACK_SIZE).unwrap())
            .collect();
        let mut c = StackCache::with_pool(pool, DEFAULT_STACK_SIZE);
        for s in more {
            if looking {
                pool.lock().releaser_seen = crate::sys::time::nanotime() + 3_600_000_000_000;
            }
            c.put(s);
        }
        c.drain();
    };
    spill(WARM_HARD_MAX + CACHE_CAP, true);
    let warm = pool.warm_len(DEFAULT_STACK_SIZE);
    assert!(warm > WARM_HARD_MAX, "{warm} warm stacks");
    // ... and with sysmon silent for too long, the spilling thread
    // brings the list back under the bound.
    pool.lock().releaser_seen = crate::sys::time::nanotime() - 2 * RELEASER_STALL_NS;
    spill(CACHE_CAP, false);
    let warm = pool.warm_len(DEFAULT_STACK_SIZE);
    assert!(
        warm <= WARM_HARD_MAX,
        "{warm} warm stacks past the hard bound"
    );
}

#[test]
fn periodic_trim_releases_missed_deep_pages() {
    let pool = Pool::leak(GuardPolicy::Auto);
    let mut c = StackCache::with_pool(pool, DEFAULT_STACK_SIZE);
    let s = c.get(DEFAULT_STACK_SIZE).unwrap();
    let bottom = s.bottom();
    // Deep use the probe cannot see: the window stays zero.
    poke(bottom, 1);
    c.put(s);
    assert_eq!(
        mem::resident_pages(bottom, page()).unwrap(),
        1,
        "missed by the probe"
    );
    // The trim walks the cache round-robin; `s` stays on top.
    for _ in 0..TRIM_EVERY as usize * c.len() {
        let s = c.get(DEFAULT_STACK_SIZE).unwrap();
        c.put(s);
    }
    assert_eq!(mem::resident_pages(bottom, page()).unwrap(), 0, "trimmed");
}

#[test]
fn other_sizes_use_the_sized_pool_and_drop_returns_stacks() {
    let pool = Pool::leak(GuardPolicy::Auto);
    let mut c = StackCache::with_pool(pool, DEFAULT_STACK_SIZE);
    let big = c.get(1 << 20).unwrap();
    assert_eq!(big.usable_size(), 1 << 20);
    let t = big.top;
    poke(big.bottom(), 1);
    c.put(big);
    assert_eq!(c.len(), 0, "non-default sizes are not cached");
    assert_eq!(pool.free_len(1 << 20), 1);
    let again = c.get(1 << 20).unwrap();
    assert_eq!(again.top, t);
    assert_eq!(peek(again.bottom()), 0, "fully released");
    drop(again);
    assert_eq!(pool.free_len(1 << 20), 1, "Drop returns the stack");
    // Odd sizes are rounded up to the page size.
    let odd = pool.get(100_000).unwrap();
    assert_eq!(odd.usable_size() % page(), 0);
    assert!(odd.usable_size() >= 100_000);
}

#[test]
fn hundred_thousand_stacks_stay_under_a_few_hundred_mappings() {
    const N: usize = 100_000;
    let pool = Pool::leak(GuardPolicy::Auto);
    let mut c = StackCache::with_pool(pool, DEFAULT_STACK_SIZE);
    drop(c.get(DEFAULT_STACK_SIZE).unwrap());
    if pool.mode() != GuardMode::Madvise {
        // 100,000 mprotect guards would exceed the stock vm.max_map_count.
        println!("skipped: this kernel lacks MADV_GUARD_INSTALL (needs Linux >= 6.13)");
        return;
    }
    let before = std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .count();
    let t = std::time::Instant::now();
    let stacks: Vec<Stack> = (0..N).map(|_| c.get(DEFAULT_STACK_SIZE).unwrap()).collect();
    let got = t.elapsed();
    let slabs = pool.slabs();
    let vmas = vmas_in(&slabs);
    let after = std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .count();
    let t = std::time::Instant::now();
    for s in stacks {
        c.put(s);
    }
    c.drain();
    println!(
        "{N} stacks: {} slabs, {vmas} mappings over the slabs, process maps {before} -> \
         {after}, get {:?}, put+drain {:?}",
        slabs.len(),
        got,
        t.elapsed()
    );
    assert_eq!(slabs.len(), N.div_ceil(256));
    assert!(
        vmas <= slabs.len(),
        "{vmas} mappings for {} slabs",
        slabs.len()
    );
    assert!(vmas < 400, "{vmas} mappings");
}

#[test]
fn mprotect_fallback_costs_about_two_mappings_per_stack() {
    let pool = Pool::leak(GuardPolicy::ForceMprotect);
    let mut c = StackCache::with_pool(pool, DEFAULT_STACK_SIZE);
    let stacks: Vec<Stack> = (0..100)
        .map(|_| c.get(DEFAULT_STACK_SIZE).unwrap())
        .collect();
    let vmas = vmas_in(&pool.slabs());
    println!("mprotect guards: 100 stacks (+12 carved) -> {vmas} mappings");
    // 112 carved guards (7 batches of 16) + the slab top guard, each
    // splitting the slab: about 2 mappings per stack.
    assert!((200..=240).contains(&vmas), "{vmas}");
    for s in stacks {
        c.put(s);
    }
}

#[test]
#[cfg_attr(
    any(goroutine_sanitize = "address", goroutine_sanitize = "thread"),
    ignore = "exhausts vm.max_map_count, and the sanitizer runtime then dies mapping memory \
              of its own"
)]
fn mprotect_fallback_reports_the_map_limit() {
    let name = "g::stack::tests::mprotect_fallback_reports_the_map_limit";
    let max = mem::max_map_count().unwrap_or(u64::MAX);
    if max > 200_000 {
        println!("skipped: vm.max_map_count is {max}, too high to exhaust quickly");
        return;
    }
    if child_scenario(name) {
        let pool = Pool::leak(GuardPolicy::ForceMprotect);
        let mut c = StackCache::with_pool(pool, MIN_STACK_SIZE);
        let mut held = Vec::with_capacity(100_000);
        let err = loop {
            match c.get(MIN_STACK_SIZE) {
                Ok(s) => held.push(s),
                Err(e) => break e,
            }
            assert!(held.len() < 100_000, "no map limit hit");
        };
        let n = held.len();
        std::mem::forget(held);
        eprintln!("CHILD: {n} stacks, then: {err}");
        assert_eq!(err.kind(), io::ErrorKind::OutOfMemory);
        let msg = err.to_string();
        assert!(msg.contains("vm.max_map_count is"), "{msg}");
        assert!(msg.contains("sysctl"), "{msg}");
        assert!(msg.contains("GOROUTINE_STACK_GUARD=mprotect"), "{msg}");
        let max = max as usize;
        assert!(n > max / 2 - 2000 && n < max / 2, "{n} stacks, limit {max}");
        return;
    }
    let out = run_child(name);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stderr}");
    assert!(
        out.status.success(),
        "child failed: {:?}\n{stderr}",
        out.status
    );
    assert!(stderr.contains("CHILD:"), "{stderr}");
}

/// Makes `madvise(..., MADV_GUARD_INSTALL)` fail with `EINVAL` for the
/// calling thread (and threads and processes it creates), as on a kernel
/// older than 6.13: a seccomp filter on the advice argument.
#[cfg(target_arch = "x86_64")]
fn simulate_kernel_without_guard_install() {
    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    const RET_K: u16 = 0x06;
    const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
    const RET_ALLOW: u32 = 0x7fff_0000;
    const RET_ERRNO: u32 = 0x0005_0000;
    let ins = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    let prog = [
        ins(LD_W_ABS, 0, 0, 4), // seccomp_data.arch
        ins(JEQ_K, 0, 4, AUDIT_ARCH_X86_64),
        ins(LD_W_ABS, 0, 0, 0), // seccomp_data.nr
        ins(JEQ_K, 0, 2, libc::SYS_madvise as u32),
        ins(LD_W_ABS, 0, 0, 32), // low half of args[2], the advice
        ins(JEQ_K, 1, 0, mem::MADV_GUARD_INSTALL as u32),
        ins(RET_K, 0, 0, RET_ALLOW),
        ins(RET_K, 0, 0, RET_ERRNO | libc::EINVAL as u32),
    ];
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: prctl with valid arguments; `fprog` points to a valid BPF
    // program that outlives the call (the kernel copies it).
    unsafe {
        assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
        let r = libc::prctl(libc::PR_SET_SECCOMP, 2, &fprog as *const libc::sock_fprog);
        assert_eq!(r, 0, "seccomp: {}", io::Error::last_os_error());
    }
}

/// Makes every `process_madvise` fail with `ENOSYS` for the calling
/// thread (and what it creates), as on a kernel older than 5.10 (older
/// than 6.14 fails `PIDFD_SELF` with `EBADF` instead: the same path).
#[cfg(target_arch = "x86_64")]
fn simulate_kernel_without_process_madvise() {
    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    const RET_K: u16 = 0x06;
    const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
    const RET_ALLOW: u32 = 0x7fff_0000;
    const RET_ERRNO: u32 = 0x0005_0000;
    let ins = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    let prog = [
        ins(LD_W_ABS, 0, 0, 4), // seccomp_data.arch
        ins(JEQ_K, 0, 2, AUDIT_ARCH_X86_64),
        ins(LD_W_ABS, 0, 0, 0), // seccomp_data.nr
        ins(JEQ_K, 1, 0, libc::SYS_process_madvise as u32),
        ins(RET_K, 0, 0, RET_ALLOW),
        ins(RET_K, 0, 0, RET_ERRNO | libc::ENOSYS as u32),
    ];
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: prctl with valid arguments; `fprog` points to a valid BPF
    // program that outlives the call (the kernel copies it).
    unsafe {
        assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
        let r = libc::prctl(libc::PR_SET_SECCOMP, 2, &fprog as *const libc::sock_fprog);
        assert_eq!(r, 0, "seccomp: {}", io::Error::last_os_error());
    }
}

#[cfg(target_arch = "x86_64")]
#[test]
fn kernel_without_batched_madvise_installs_guards_one_by_one() {
    let name = "g::stack::tests::kernel_without_batched_madvise_installs_guards_one_by_one";
    if child_scenario(name) {
        simulate_kernel_without_process_madvise();
        let pool = Pool::leak(GuardPolicy::Auto);
        let mut c = StackCache::with_pool(pool, DEFAULT_STACK_SIZE);
        let stacks: Vec<Stack> = (0..3 * BATCH)
            .map(|_| c.get(DEFAULT_STACK_SIZE).unwrap())
            .collect();
        if pool.mode() == GuardMode::Madvise {
            assert!(!pool.lock().batch, "batching given up");
        }
        for s in &stacks {
            let (lo, hi) = s.guard_range();
            assert_eq!(child_write_signal(lo), libc::SIGSEGV);
            assert_eq!(child_write_signal(hi - 1), libc::SIGSEGV);
            assert_eq!(child_write_signal(s.bottom()), 0);
        }
        for s in stacks {
            c.put(s);
        }
        eprintln!("CHILD: done");
        return;
    }
    let out = run_child(name);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "child failed: {:?}\n{stderr}",
        out.status
    );
    assert!(stderr.contains("CHILD: done"), "{stderr}");
}

#[cfg(target_arch = "x86_64")]
#[test]
fn kernel_without_guard_install_falls_back_to_mprotect() {
    let name = "g::stack::tests::kernel_without_guard_install_falls_back_to_mprotect";
    if child_scenario(name) {
        simulate_kernel_without_guard_install();
        let p = mem::reserve(page()).unwrap();
        // SAFETY: our fresh page.
        let e = unsafe { mem::guard_install(p, page()) }.unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
        // The alternate signal stack falls back to an mprotect guard.
        std::thread::spawn(|| {
            let off = libc::stack_t {
                ss_sp: ptr::null_mut(),
                ss_flags: libc::SS_DISABLE,
                ss_size: 0,
            };
            // SAFETY: disabling this thread's alternate stack.
            assert_eq!(unsafe { libc::sigaltstack(&off, ptr::null_mut()) }, 0);
            crate::sys::overflow::install_altstack_for_current_thread().unwrap();
        })
        .join()
        .unwrap();
        let pool = Pool::leak(GuardPolicy::Auto);
        let mut c = StackCache::with_pool(pool, MIN_STACK_SIZE);
        let s = c.get(MIN_STACK_SIZE).unwrap();
        assert_eq!(pool.mode(), GuardMode::Mprotect { forced: false });
        assert_eq!(child_write_signal(s.guard_range().0), libc::SIGSEGV);
        assert_eq!(child_write_signal(s.bottom()), 0);
        let max = mem::max_map_count().unwrap_or(u64::MAX);
        // Under a sanitizer, exhausting the map count kills the
        // sanitizer runtime first (it maps memory of its own).
        let sanitizer = cfg!(any(
            goroutine_sanitize = "address",
            goroutine_sanitize = "thread"
        ));
        if max <= 200_000 && !sanitizer {
            let mut held = Vec::with_capacity(100_000);
            let err = loop {
                match c.get(MIN_STACK_SIZE) {
                    Ok(s) => held.push(s),
                    Err(e) => break e,
                }
                assert!(held.len() < 100_000, "no map limit hit");
            };
            std::mem::forget(held);
            eprintln!("CHILD: {err}");
            assert_eq!(err.kind(), io::ErrorKind::OutOfMemory);
            let msg = err.to_string();
            assert!(
                msg.contains("This kernel lacks MADV_GUARD_INSTALL (needs Linux >= 6.13)"),
                "{msg}"
            );
            assert!(msg.contains(&format!("vm.max_map_count is {max}")), "{msg}");
        }
        std::mem::forget(s);
        eprintln!("CHILD: done");
        return;
    }
    let out = run_child(name);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stderr}");
    assert!(
        out.status.success(),
        "child failed: {:?}\n{stderr}",
        out.status
    );
    assert!(stderr.contains("CHILD: done"), "{stderr}");
}

#[test]
fn map_limit_message_explains_the_limit() {
    let e = io::Error::from_raw_os_error(libc::ENOMEM);
    let m = map_limit_message(&e, false, "mprotect", Some(65530));
    assert!(
        m.contains("lacks MADV_GUARD_INSTALL (needs Linux >= 6.13)"),
        "{m}"
    );
    assert!(
        m.contains("vm.max_map_count is 65530, which allows about 32765 stacks"),
        "{m}"
    );
    assert!(m.contains("sysctl -w vm.max_map_count="), "{m}");
    let m = map_limit_message(&e, true, "mmap", None);
    assert!(m.contains("GOROUTINE_STACK_GUARD=mprotect forces"), "{m}");
    let e = map_limit_error(
        io::Error::from_raw_os_error(libc::ENOMEM),
        false,
        "mprotect",
    );
    assert_eq!(e.kind(), io::ErrorKind::OutOfMemory);
    let e = map_limit_error(
        io::Error::from_raw_os_error(libc::EACCES),
        false,
        "mprotect",
    );
    assert_eq!(e.raw_os_error(), Some(libc::EACCES));
}

#[test]
fn validate_stack_size_limits_and_rounding() {
    assert_eq!(validate_stack_size(MIN_STACK_SIZE).unwrap(), MIN_STACK_SIZE);
    assert_eq!(validate_stack_size(MAX_STACK_SIZE).unwrap(), MAX_STACK_SIZE);
    assert_eq!(
        validate_stack_size(DEFAULT_STACK_SIZE).unwrap(),
        DEFAULT_STACK_SIZE
    );
    let r = validate_stack_size(MIN_STACK_SIZE + 1).unwrap();
    assert_eq!(r, MIN_STACK_SIZE + page());
    for bad in [0, 1, MIN_STACK_SIZE - 1, MAX_STACK_SIZE + 1, usize::MAX] {
        let e = validate_stack_size(bad).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        let m = e.to_string();
        assert!(m.contains("16 KiB") && m.contains("1 GiB"), "{m}");
    }
}

#[test]
fn stack_size_parsing() {
    assert_eq!(parse_stack_size("65536"), Ok(65536));
    assert_eq!(parse_stack_size("64K"), Ok(65536));
    assert_eq!(parse_stack_size(" 64 KiB "), Ok(65536));
    assert_eq!(parse_stack_size("64kib"), Ok(65536));
    assert_eq!(parse_stack_size("2M"), Ok(2 << 20));
    assert_eq!(parse_stack_size("2MiB"), Ok(2 << 20));
    assert_eq!(parse_stack_size("1G"), Ok(1 << 30));
    for bad in [
        "",
        "K",
        "-1",
        "1.5M",
        "64KB",
        "64 X",
        "99999999999999999999",
    ] {
        assert!(parse_stack_size(bad).is_err(), "{bad:?}");
    }
    assert!(parse_stack_size("18446744073709551615M").is_err());
}

#[test]
fn stack_size_env_handling() {
    assert_eq!(stack_size_from_env(None), (DEFAULT_STACK_SIZE, None));
    // Empty is unset, silently, as for GOMAXPROCS.
    assert_eq!(
        stack_size_from_env(Some(Ok(""))),
        (DEFAULT_STACK_SIZE, None)
    );
    assert_eq!(stack_size_from_env(Some(Ok("1M"))), (1 << 20, None));
    assert_eq!(stack_size_from_env(Some(Ok("20000"))).0, 20480);
    for bad in ["lots", "4K", "2G"] {
        let (size, w) = stack_size_from_env(Some(Ok(bad)));
        assert_eq!(size, DEFAULT_STACK_SIZE);
        let w = w.unwrap();
        assert!(!w.contains('\n'), "one line: {w}");
        assert!(w.contains("GOROUTINE_STACK_SIZE"), "{w}");
        assert!(w.contains(&format!("{bad:?}")), "{w}");
        assert!(w.contains("256 KiB"), "{w}");
    }
    let os = std::ffi::OsStr::new("x");
    assert!(stack_size_from_env(Some(Err(os))).1.is_some());
    assert_eq!(default_stack_size() % page(), 0);
}

#[test]
fn guard_env_handling() {
    assert_eq!(guard_env_forces_mprotect(None), (false, None));
    assert_eq!(guard_env_forces_mprotect(Some(Ok(""))), (false, None));
    assert_eq!(
        guard_env_forces_mprotect(Some(Ok("mprotect"))),
        (true, None)
    );
    let (f, w) = guard_env_forces_mprotect(Some(Ok("madvise")));
    assert!(!f);
    let w = w.unwrap();
    assert!(w.contains("GOROUTINE_STACK_GUARD") && w.contains("madvise") && !w.contains('\n'));
}

#[test]
fn coroutine_runs_on_a_pooled_stack() {
    use corosensei::{Coroutine, CoroutineResult};
    let mut c = StackCache::new();
    let s = c.get(default_stack_size()).unwrap();
    let (lo, hi) = (s.bottom(), s.top.get());
    let mut co = Coroutine::with_stack(s, move |y, x: usize| {
        let local = 0u8;
        let sp = &local as *const u8 as usize;
        assert!(sp > lo && sp < hi, "running on the pooled stack");
        let z = y.suspend(x + 1);
        z * 2
    });
    assert!(matches!(co.resume(1), CoroutineResult::Yield(2)));
    assert!(matches!(co.resume(5), CoroutineResult::Return(10)));
    c.put(co.into_stack());
}

#[test]
fn colour_offsets_spread_over_the_cache_sets() {
    // 64 consecutive default-size stacks get many distinct colours, each
    // a multiple of the cache line, within the top half page (so frames
    // of up to 2 KiB still fit in the top page).
    let stride = DEFAULT_STACK_SIZE + 4096;
    let mut seen = std::collections::HashSet::new();
    for i in 0..64usize {
        let top = 0x7f00_0000_0000 + i * stride;
        let c = colour_offset(top);
        assert_eq!(c % 64, 0);
        assert!(c < 2048);
        seen.insert(c);
    }
    assert!(seen.len() >= 24, "only {} colours", seen.len());
}

#[test]
fn cache_is_send_and_stack_is_send() {
    fn send<T: Send>() {}
    send::<Stack>();
    send::<StackCache>();
}
