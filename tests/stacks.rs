//! Lazy stacks, memory per goroutine, and stack overflow reporting.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use goroutine::{go, run, Builder};

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("statm");
    let resident: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    // SAFETY: sysconf has no preconditions.
    resident * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64
}

// 1,000,000 goroutines spawned before any of them runs cost only their G
// record and task cell: no stack until first run (Go needs ~2,700 B each).
// The only P is held by a goroutine spinning without runtime calls (so
// cooperative preemption cannot move it, and `hogrevoke=0` keeps sysmon
// from taking the P away from it), while a plain thread spawns.
// `blockrevoke=0` too: under ThreadSanitizer the spinning thread waits in
// TSan's own locks (its loop is an atomic load and a spin hint) while the
// spawner allocates, and sysmon took its P as a thread blocked in futex.
isolated_test! {
    fn million_unstarted_goroutines_under_512_bytes_each() ["GOMAXPROCS" = "1", "GODEBUG" = "hogrevoke=0,blockrevoke=0"] {
        use std::sync::atomic::AtomicBool;
        const N: usize = 1_000_000;
        let counter = Arc::new(AtomicU64::new(0));
        let release = Arc::new(AtomicBool::new(false));
        let holding = Arc::new(AtomicBool::new(false));
        let (r, h) = (release.clone(), holding.clone());
        let hog = go(move || {
            h.store(true, Ordering::SeqCst);
            while !r.load(Ordering::SeqCst) {
                std::hint::spin_loop();
            }
        });
        while !holding.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        let mut hs = Vec::with_capacity(N);
        let before = rss_bytes();
        for i in 0..N as u64 {
            let c = counter.clone();
            hs.push(go(move || {
                c.fetch_add(i, Ordering::Relaxed);
            }));
        }
        let after = rss_bytes();
        assert_eq!(counter.load(Ordering::Relaxed), 0, "a goroutine ran early");
        assert!(goroutine::num_goroutine() > N);
        release.store(true, Ordering::SeqCst);
        hog.join().unwrap();
        for h in hs {
            h.join().unwrap();
        }
        let per_g = (after - before) / N as u64;
        let sum = counter.load(Ordering::Relaxed);
        println!("RSS per unstarted goroutine: {per_g} bytes");
        assert_eq!(sum, (N as u64 - 1) * N as u64 / 2);
        // Under ThreadSanitizer every heap byte has shadow memory and the
        // allocator is TSan's: about 1 KiB per goroutine there, so only the
        // count is checked. (ASan's redzones and shadow still fit: ~400 B.)
        if cfg!(not(goroutine_sanitize = "thread")) {
            assert!(per_g < 512, "{per_g} bytes of RSS per unstarted goroutine");
        }
    }
}

/// Child side of `stack_overflow_is_reported` (a no-op in the parent).
#[test]
fn overflow_child() {
    if !common::is_child("overflow_child") {
        return;
    }
    {
        #[allow(unconditional_recursion)]
        fn recurse(n: u64) -> u64 {
            let buf = std::hint::black_box([n; 32]);
            buf[1] + recurse(n + 1)
        }
        // The goroutine waits for the id to be printed: otherwise it can
        // overflow and end the process before the println runs.
        let (go_tx, go_rx) = goroutine::chan::<()>(0);
        let h = Builder::new()
            .stack_size(64 * 1024)
            .spawn(move || {
                let _ = go_rx.recv();
                recurse(0)
            })
            .unwrap();
        println!("spawned {}", h.id());
        let _ = go_tx.send(());
        let _ = h.join();
        unreachable!("the overflow must end the process");
    }
}

#[test]
fn stack_overflow_is_reported() {
    let out = common::spawn("overflow_child", &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let id: u64 = stdout
        .lines()
        .find_map(|l| l.split("spawned ").nth(1))
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("child printed no id: {stdout} {stderr}"));
    assert!(!out.status.success());
    let want = format!("goroutine {id} has overflowed its stack (size 64 KiB)");
    assert!(
        stderr.contains(&want),
        "expected {want:?} in stderr:\n{stderr}"
    );
    assert!(stderr.contains("fatal error: stack overflow\n"), "{stderr}");
    // Go's exit status for a fatal error (SIGABRT only with
    // GOTRACEBACK=crash: sys::overflow's tests).
    assert_eq!(out.status.code(), Some(2), "{:?}", out.status);
}

#[test]
fn deep_goroutines_then_many_shallow_ones() {
    // A burst of goroutines that each touch ~170 KiB of their 256 KiB stack,
    // then many shallow ones reusing the pooled stacks: results stay right.
    // The depth is computed from the measured frame size, which differs
    // between debug and release builds.
    #[inline(never)]
    fn deep(n: u32, addrs: &mut [usize; 2]) -> u64 {
        let buf = std::hint::black_box([n as u64; 512]);
        if n < 2 {
            addrs[n as usize] = buf.as_ptr() as usize;
        }
        if n == 0 {
            buf[0]
        } else {
            buf[5] + deep(n - 1, addrs)
        }
    }
    let frame = go(|| {
        let mut addrs = [0usize; 2];
        deep(1, &mut addrs);
        addrs[1] - addrs[0]
    })
    .join()
    .unwrap();
    let depth = (170 * 1024 / frame) as u32;
    assert!(depth >= 8, "frame of {frame} bytes");
    let hs: Vec<_> = (0..200)
        .map(|_| go(move || deep(depth, &mut [0; 2])))
        .collect();
    for h in hs {
        assert_eq!(h.join().unwrap(), (1..=depth as u64).sum::<u64>());
    }
    let hs: Vec<_> = (0..10_000u64).map(|i| go(move || i)).collect();
    assert_eq!(
        hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>(),
        9_999 * 5_000
    );
}

// Goroutines parked at many depths (from a few frames to ~100 KiB below
// the top), left parked across several ticks of the coarse clock, then
// woken at once: each resume of a G parked that long starts loading its
// stack first (`StackHeader::prefetch_resume`, from the SP of its switch
// out), and every frame must come back intact. The number of levels is
// computed from the measured frame size, which differs between builds
// (AddressSanitizer's redzones made 200 fixed levels overflow the stack).
#[test]
fn goroutines_parked_long_at_any_depth_resume_intact() {
    #[inline(never)]
    fn park_at(n: u32, rx: &goroutine::Receiver<()>, at: &mut [usize; 2]) -> u64 {
        let buf = std::hint::black_box([u64::from(n) * 3 + 1; 64]);
        if n < 2 {
            at[n as usize] = buf.as_ptr() as usize;
        }
        if n == 0 {
            assert!(rx.recv().is_err(), "got a value");
            return buf[7];
        }
        buf[63] + park_at(n - 1, rx, at)
    }
    common::within(60, || {
        let frame = go(|| {
            let (tx, rx) = goroutine::chan::<()>(0);
            drop(tx);
            let mut at = [0usize; 2];
            park_at(1, &rx, &mut at);
            at[1] - at[0]
        })
        .join()
        .unwrap();
        let levels = (100 * 1024 / frame).clamp(8, 200) as u32;
        let (tx, rx) = goroutine::chan::<()>(0);
        let parked = Arc::new(AtomicU64::new(0));
        let hs: Vec<_> = (0..2_000u32)
            .map(|i| {
                let (rx, parked) = (rx.clone(), parked.clone());
                go(move || {
                    parked.fetch_add(1, Ordering::SeqCst);
                    park_at(i % levels, &rx, &mut [0; 2])
                })
            })
            .collect();
        while parked.load(Ordering::SeqCst) < 2_000 {
            goroutine::yield_now();
        }
        // A few ticks of the coarse clock (sysmon's, about 1-10 ms each).
        goroutine::time::sleep(std::time::Duration::from_millis(50));
        drop(tx);
        for (i, h) in hs.into_iter().enumerate() {
            let n = u64::from(i as u32 % levels);
            let want = (0..=n).map(|k| k * 3 + 1).sum::<u64>();
            assert_eq!(h.join().unwrap(), want, "goroutine {i}");
        }
    });
}

// Exhaustion is an error, not a crash: with the mprotect guard fallback
// (each stack costs ~2 memory mappings) more parked goroutines than
// vm.max_map_count allows. The ones that cannot get a stack finish with a
// non-panic JoinError naming the limit; the others run normally, and the
// runtime keeps working afterwards.
isolated_test! {
    #[cfg_attr(
        any(goroutine_sanitize = "address", goroutine_sanitize = "thread"),
        ignore = "exhausts vm.max_map_count, and the sanitizer runtime then dies mapping memory \
                  of its own"
    )]
    fn stack_exhaustion_is_a_join_error() ["GOROUTINE_STACK_GUARD" = "mprotect", "GOMAXPROCS" = "2"] {
        let max: usize = std::fs::read_to_string("/proc/sys/vm/max_map_count")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(usize::MAX);
        if max > 200_000 {
            println!("skipped: vm.max_map_count is {max}, too high to exhaust quickly");
            return;
        }
        let n = max / 2 + 4000;
        let (failed, ok, message) = run(move || {
            let started = Arc::new(AtomicU64::new(0));
            let (tx, rx) = goroutine::chan::<()>(0);
            let hs: Vec<_> = (0..n)
                .map(|_| {
                    let (rx, started) = (rx.clone(), started.clone());
                    Builder::new()
                        .stack_size(16 * 1024)
                        .spawn(move || {
                            started.fetch_add(1, Ordering::SeqCst);
                            let _ = rx.recv();
                        })
                        .unwrap()
                })
                .collect();
            // Wait until every goroutine either runs (and parks) or failed.
            loop {
                let finished = hs.iter().filter(|h| h.is_finished()).count() as u64;
                if started.load(Ordering::SeqCst) + finished >= n as u64 {
                    break;
                }
                goroutine::yield_now();
            }
            drop(tx);
            drop(rx);
            let (mut failed, mut ok, mut message) = (0usize, 0usize, String::new());
            for h in hs {
                match h.join() {
                    Ok(()) => ok += 1,
                    Err(e) => {
                        assert!(!e.is_panic(), "a panic instead of a start error: {e}");
                        failed += 1;
                        message = e.to_string();
                    }
                }
            }
            // Still working: the stacks of this size class come back from the
            // pool. (A new size class would need new guard mappings, which
            // the exhausted fallback cannot give.)
            let hs: Vec<_> = (0..1000u64)
                .map(|i| Builder::new().stack_size(16 * 1024).spawn(move || i).unwrap())
                .collect();
            assert_eq!(hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>(), 499_500);
            (failed, ok, message)
        });
        println!("{ok} goroutines ran, {failed} could not get a stack: {message}");
        assert_eq!(failed + ok, n);
        assert!(failed > 0, "the map limit was never reached");
        assert!(ok > max / 4, "only {ok} goroutines got a stack");
        assert!(message.contains("max_map_count"), "{message}");
        assert!(message.contains("could not start"), "{message}");
    }
}

/// Parks `n` goroutines on one channel, wakes them all with a close, and
/// waits until every one has exited; returns the RSS growth while they
/// were parked (their stacks' top pages, mostly).
fn burst_of_exits(n: usize) -> u64 {
    let before = rss_bytes();
    let wg = goroutine::sync::WaitGroup::new();
    let parked = Arc::new(AtomicU64::new(0));
    let (tx, rx) = goroutine::chan::<()>(0);
    for _ in 0..n {
        let (rx, wg, parked) = (rx.clone(), wg.clone(), parked.clone());
        wg.add(1);
        go(move || {
            parked.fetch_add(1, Ordering::Relaxed);
            let _ = rx.recv();
            wg.done();
        });
    }
    while parked.load(Ordering::Relaxed) < n as u64 {
        goroutine::yield_now();
    }
    let grown = rss_bytes().saturating_sub(before);
    drop(tx);
    wg.wait();
    grown
}

/// Polls RSS every 10 ms until it is at most `goal`; false after `secs`.
fn rss_falls_to(goal: u64, secs: u64) -> bool {
    let start = std::time::Instant::now();
    let end = start + std::time::Duration::from_secs(secs);
    while std::time::Instant::now() < end {
        if rss_bytes() <= goal {
            return true;
        }
        goroutine::time::sleep(std::time::Duration::from_millis(10));
    }
    false
}

/// Whether RSS shows the stacks given back. Not under a sanitizer, where
/// the load still runs (for the sanitizer's checks of the release path)
/// but RSS is the sanitizer's, and grows after the burst instead of
/// falling: ASan keeps freed blocks in its quarantine and the shadow of
/// every stack page touched; TSan keeps each goroutine's fiber state and
/// the shadow.
const RSS_SHOWS_RELEASE: bool = cfg!(not(any(
    goroutine_sanitize = "address",
    goroutine_sanitize = "thread"
)));

// The stacks of a burst of exits (20,000 goroutines woken at once) wait on
// the pool's warm list while the exits stream in, and sysmon gives them back
// once the burst is over: RSS falls by at least 3/4 of what the parked
// goroutines took, within seconds, with the program idle.
isolated_test! {
    fn a_burst_of_exits_is_given_back_once_over() ["GOMAXPROCS" = "2"] {
        run(|| {
            let base = rss_bytes();
            let grown = burst_of_exits(20_000);
            assert!(grown > 20_000 * 4096 / 2, "parked goroutines took only {grown} bytes");
            if !RSS_SHOWS_RELEASE {
                return;
            }
            let goal = base + grown / 4;
            assert!(
                rss_falls_to(goal, 20),
                "RSS still {} MiB after the burst (before {} MiB, parked +{} MiB)",
                rss_bytes() >> 20,
                base >> 20,
                grown >> 20
            );
        });
    }
}

// The same while other goroutines keep exiting (bursts of 1,000, one after
// another, which keep spilling stacks to the pool): sysmon's paced release
// still gives the big burst's stacks back.
isolated_test! {
    fn a_burst_of_exits_is_given_back_while_exits_go_on() ["GOMAXPROCS" = "2"] {
        use std::sync::atomic::AtomicBool;
        run(|| {
            let base = rss_bytes();
            let grown = burst_of_exits(20_000);
            let stop = Arc::new(AtomicBool::new(false));
            let rounds = Arc::new(AtomicU64::new(0));
            let (s, r) = (stop.clone(), rounds.clone());
            let churn = go(move || {
                while !s.load(Ordering::Relaxed) {
                    burst_of_exits(1_000);
                    r.fetch_add(1, Ordering::Relaxed);
                }
            });
            // The exits are going on before the first look.
            while rounds.load(Ordering::Relaxed) == 0 {
                goroutine::yield_now();
            }
            let goal = base + grown / 4;
            let fell = if RSS_SHOWS_RELEASE {
                rss_falls_to(goal, 20)
            } else {
                // Exits go on beside sysmon's release for a while.
                while rounds.load(Ordering::Relaxed) < 5 {
                    goroutine::time::sleep(std::time::Duration::from_millis(10));
                }
                true
            };
            stop.store(true, Ordering::Relaxed);
            churn.join().unwrap();
            assert!(
                fell,
                "RSS still {} MiB after the burst with exits going on (before {} MiB, parked +{} MiB)",
                rss_bytes() >> 20,
                base >> 20,
                grown >> 20
            );
        });
    }
}

/// The bytes of stack below its own frame that `f` wrote: the range below
/// is filled with a pattern first, then scanned for the lowest change.
#[inline(never)]
fn stack_written_by(f: &mut dyn FnMut()) -> usize {
    const PATTERN: u64 = 0x5a5a_5a5a_5a5a_5a5a;
    /// Left untouched below `here`: this function's own frame.
    const MARGIN: usize = 512;
    /// Painted below that (well inside a 256 KiB goroutine stack).
    const SPAN: usize = 16 * 1024;
    let here = std::hint::black_box(0u64);
    let sp = std::ptr::addr_of!(here) as usize & !7;
    let (lo, hi) = (sp - MARGIN - SPAN, sp - MARGIN);
    for a in (lo..hi).step_by(8) {
        // SAFETY: the free part of this goroutine's stack below our frame
        // (the callee frames of `f` will overwrite it); nothing lives there.
        unsafe { std::ptr::write_volatile(a as *mut u64, PATTERN) };
    }
    f();
    let lowest = (lo..hi)
        .step_by(8)
        // SAFETY: as above; mapped and written just now.
        .find(|&a| unsafe { std::ptr::read_volatile(a as *const u64) } != PATTERN)
        .unwrap_or(hi);
    assert!(lowest > lo, "`f` used more than the {SPAN} bytes painted");
    sp - lowest
}

// A goroutine's first stack page holds at least 1.9 KiB of frames (less its
// cache colour); a goroutine that spawns or wakes another should not need a
// second page for the runtime's part of it. Spawning and readying go
// through `runqput`, whose rare overflow path holds a 1 KiB batch of Gs: that
// path is kept out of line, and a refill of the stack cache keeps its
// batches to one refill. Before that, each of `newproc` and the wake path
// had a 2.1 KiB frame (fib(30) as a spawn tree: 400 page faults, 200 after).
// Release builds only: unoptimized frames are much larger.
isolated_test! {
    #[cfg_attr(debug_assertions, ignore = "frame sizes of optimized builds")]
    fn spawning_and_waking_use_little_of_the_callers_stack() ["GOMAXPROCS" = "1"] {
        let used = run(|| {
            let (tx, rx) = goroutine::chan::<u64>(1);
            let receiver = go(move || rx.iter().sum::<u64>());
            let mut child = None;
            let spawn = stack_written_by(&mut || child = Some(go(|| 7u64)));
            let mut wake = None;
            for _ in 0..100 {
                // Let the receiver run and park (one P: it is next in line,
                // except under randomized scheduling, hence the retries).
                goroutine::yield_now();
                let used = stack_written_by(&mut || tx.send(5).unwrap());
                // The value went to the waiting receiver, not into the buffer.
                if tx.is_empty() {
                    wake = Some(used);
                    break;
                }
            }
            let wake = wake.expect("the receiver was never waiting");
            drop(tx);
            assert_eq!(child.take().unwrap().join().unwrap(), 7);
            assert_eq!(receiver.join().unwrap() % 5, 0);
            (spawn, wake)
        });
        eprintln!("stack written: spawn {} B, wake {} B", used.0, used.1);
        assert!(used.0 <= 1024, "a spawn wrote {} bytes of its caller's stack", used.0);
        assert!(used.1 <= 1024, "a wake wrote {} bytes of its caller's stack", used.1);
    }
}

/// Limits the address space (`RLIMIT_AS`) to what the process maps now
/// plus `extra` bytes.
fn limit_address_space(extra: u64) {
    let status = std::fs::read_to_string("/proc/self/status").expect("status");
    let vm_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmSize");
    let limit = vm_kib * 1024 + extra;
    let lim = libc::rlimit {
        rlim_cur: limit,
        rlim_max: limit,
    };
    // SAFETY: a valid rlimit for the call.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &lim) }, 0);
}

/// Most goroutines the address-space children spawn.
const AS_MAX: usize = 2_000_000;

/// Child of `spawn_under_an_address_space_limit_fails_cleanly`: parked
/// goroutines are spawned with `Builder::spawn` until it fails.
#[test]
fn address_space_child() {
    if !common::is_child("address_space_child") {
        return;
    }
    // The test's own vector is not what may fail: its room comes first.
    let mut hs = Vec::with_capacity(AS_MAX);
    let (tx, rx) = goroutine::chan::<()>(0);
    limit_address_space(1 << 30);
    let (spawned, err, failed) = run(move || {
        let mut err = None;
        for i in 0..AS_MAX {
            let rx = rx.clone();
            match Builder::new().spawn(move || {
                let _ = rx.recv();
            }) {
                Ok(h) => hs.push(h),
                Err(e) => {
                    err = Some(e);
                    break;
                }
            }
            if i % 1000 == 0 {
                // Let the started ones take their stacks too.
                goroutine::yield_now();
            }
        }
        drop(tx);
        let spawned = hs.len();
        // Each one ran and returned, or could not get a stack: a JoinError
        // that is not a panic.
        let mut failed = 0;
        for h in hs {
            if let Err(e) = h.join() {
                assert!(!e.is_panic(), "{e}");
                failed += 1;
            }
        }
        (spawned, err, failed)
    });
    let err = err.expect("no spawn failed under the limit");
    println!(
        "spawned {spawned}; spawn error kind {:?} ({err}); {failed} could not start",
        err.kind()
    );
    assert_eq!(err.kind(), std::io::ErrorKind::OutOfMemory, "{err}");
    assert!(spawned > 1000, "only {spawned} spawned");
}

/// Child of `go_under_an_address_space_limit_is_gos_fatal_error`.
#[test]
fn address_space_go_child() {
    if !common::is_child("address_space_go_child") {
        return;
    }
    let mut hs = Vec::with_capacity(AS_MAX);
    let (tx, rx) = goroutine::chan::<()>(0);
    limit_address_space(1 << 30);
    run(move || {
        for _ in 0..AS_MAX {
            let rx = rx.clone();
            hs.push(go(move || {
                let _ = rx.recv();
            }));
        }
        drop((tx, hs));
    });
    println!("every go succeeded under the limit");
}

/// Spawning under an address-space limit (`RLIMIT_AS`): `Builder::spawn`
/// returns `OutOfMemory` once no memory can be mapped for a goroutine's
/// records (it aborted with `memory allocation of 12288 bytes failed`),
/// and goroutines whose stack could not be mapped fail to start with a
/// clean `JoinError`.
#[test]
fn spawn_under_an_address_space_limit_fails_cleanly() {
    if cfg!(any(
        goroutine_sanitize = "address",
        goroutine_sanitize = "thread"
    )) {
        // The sanitizers' shadow memory needs more address space than
        // any limit this test could set.
        println!("skipped under a sanitizer");
        return;
    }
    let out = common::spawn("address_space_child", &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    assert!(stdout.contains("spawn error kind OutOfMemory"), "{stdout}");
}

/// `go` cannot return an error: out of memory it ends the process with
/// Go's `fatal error: out of memory`, the goroutine count, and exit
/// status 2.
#[test]
fn go_under_an_address_space_limit_is_gos_fatal_error() {
    if cfg!(any(
        goroutine_sanitize = "address",
        goroutine_sanitize = "thread"
    )) {
        println!("skipped under a sanitizer");
        return;
    }
    let out = common::spawn("address_space_go_child", &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{:?}\n{stderr}", out.status);
    assert!(
        stderr.contains("runtime: out of memory: cannot allocate a goroutine (")
            && stderr.contains(" goroutines)\nfatal error: out of memory\n"),
        "{stderr}"
    );
}
