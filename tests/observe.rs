//! Observability: `stats()` counters, `GODEBUG=schedtrace`, the goroutine
//! dump and SIGQUIT.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use goroutine::{chan, go, Builder};

/// `pattern` against `line`: `#` matches one or more digits, `*` any run
/// of characters (possibly empty); everything else literally.
fn matches(pattern: &str, line: &str) -> bool {
    fn m(p: &[u8], s: &[u8]) -> bool {
        match p.first() {
            None => s.is_empty(),
            Some(b'#') => {
                let n = s.iter().take_while(|c| c.is_ascii_digit()).count();
                (1..=n).rev().any(|k| m(&p[1..], &s[k..]))
            }
            Some(b'*') => (0..=s.len()).any(|k| m(&p[1..], &s[k..])),
            Some(c) => s.first() == Some(c) && m(&p[1..], &s[1..]),
        }
    }
    m(pattern.as_bytes(), line.as_bytes())
}

#[test]
fn pattern_matcher() {
    assert!(matches("SCHED #ms: [# #]", "SCHED 10ms: [0 12]"));
    assert!(!matches("SCHED #ms:", "SCHED ms:"));
    assert!(matches(
        "  G#: status=#(*) m=*",
        "  G3: status=4(chan receive) m=nil"
    ));
    assert!(matches("  G#: status=#(*) m=*", "  G3: status=2() m=0"));
}

fn busy(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        goroutine::preempt_point();
        std::hint::spin_loop();
    }
}

// ---------------------------------------------------------------------------
// stats()
// ---------------------------------------------------------------------------

#[test]
fn stats_count_spawns_timers_and_goroutines_by_status() {
    let before = goroutine::stats();
    let n = 100;
    goroutine::run(move || {
        let hs: Vec<_> = (0..n).map(|_| go(|| ())).collect();
        for h in hs {
            h.join().unwrap();
        }
        for _ in 0..3 {
            goroutine::time::sleep(Duration::from_millis(1));
        }
    });
    let after = goroutine::stats();
    assert!(
        after.spawns > before.spawns + n,
        "{} -> {}",
        before.spawns,
        after.spawns
    );
    assert!(after.timers_fired >= before.timers_fired + 3);
    assert_eq!(after.local_runq.len(), after.gomaxprocs);
    assert!(after.threads >= 1 && after.threads_created >= after.threads as u64);

    // Goroutines parked on a channel are counted as waiting.
    let (tx, rx) = chan::<()>(0);
    let hs: Vec<_> = (0..20)
        .map(|_| {
            let rx = rx.clone();
            go(move || {
                let _ = rx.recv();
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let s = goroutine::stats();
        // `waiting` is the rest of the live goroutines.
        assert!(
            s.runnable + s.running + s.waiting + s.syscall >= s.goroutines,
            "{s:?}"
        );
        if s.waiting >= 20 {
            break;
        }
        assert!(Instant::now() < deadline, "waiting never reached 20: {s:?}");
        std::thread::sleep(Duration::from_millis(1));
    }
    drop(rx);
    drop(tx);
    for h in hs {
        h.join().unwrap();
    }
}

#[test]
fn stats_are_cheap() {
    goroutine::stats();
    let t = Instant::now();
    for _ in 0..1000 {
        std::hint::black_box(goroutine::stats());
    }
    let each = t.elapsed() / 1000;
    println!("stats() takes {each:?}");
    // Generous: about 0.1 us on an idle machine.
    assert!(each < Duration::from_millis(1), "stats() takes {each:?}");
}

// One goroutine fills its P's queue with busy goroutines; the other P
// steals half of them.
isolated_test! {
    fn stats_count_steals() ["GOMAXPROCS" = "2"] {
        let before = goroutine::stats();
        goroutine::run(|| {
            let hs: Vec<_> = (0..64).map(|_| go(|| busy(Duration::from_millis(2)))).collect();
            for h in hs {
                h.join().unwrap();
            }
        });
        let after = goroutine::stats();
        assert!(after.steals > before.steals, "{after:?}");
        assert!(after.stolen - before.stolen >= after.steals - before.steals);
        assert!(after.spins > before.spins, "{after:?}");
    }
}

// A 30 ms system call at GOMAXPROCS=1: sysmon hands the P off.
isolated_test! {
    fn stats_count_syscall_handoffs() ["GOMAXPROCS" = "1"] {
        let before = goroutine::stats();
        goroutine::run(|| {
            let other = go(|| busy(Duration::from_millis(5)));
            goroutine::syscall(|| std::thread::sleep(Duration::from_millis(30)));
            other.join().unwrap();
        });
        let after = goroutine::stats();
        assert!(
            after.syscall_handoffs > before.syscall_handoffs,
            "{before:?}\n{after:?}"
        );
        goroutine::run(|| goroutine::syscall_blocking(|| ()));
        assert!(goroutine::stats().syscall_handoffs > after.syscall_handoffs);
    }
}

// A goroutine that never reaches a scheduling point for 30 ms is asked
// to yield, and does.
isolated_test! {
    fn stats_count_preemptions() ["GOMAXPROCS" = "1"] {
        let before = goroutine::stats();
        goroutine::run(|| {
            let other = go(|| ());
            // Three time slices (scaled: sysmon runs late under emulation).
            busy(common::scaled(Duration::from_millis(30)));
            other.join().unwrap();
        });
        let after = goroutine::stats();
        assert!(after.preempt_requests > before.preempt_requests, "{after:?}");
        assert!(after.preempt_yields > before.preempt_yields, "{after:?}");
    }
}

// ---------------------------------------------------------------------------
// GODEBUG=schedtrace
// ---------------------------------------------------------------------------

/// The child of the schedtrace tests: ~300 ms of mixed work, with a
/// goroutine parked on a channel receive throughout.
#[test]
fn schedtrace_child() {
    if !common::is_child("schedtrace_child") {
        return;
    }
    goroutine::run(|| {
        let (tx, rx) = chan::<()>(0);
        let parked = go(move || {
            let _ = rx.recv();
        });
        let t = Instant::now();
        while t.elapsed() < Duration::from_millis(300) {
            let hs: Vec<_> = (0..8)
                .map(|_| go(|| busy(Duration::from_micros(200))))
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            goroutine::time::sleep(Duration::from_millis(2));
        }
        drop(tx);
        parked.join().unwrap();
    });
}

const SCHED: &str = "SCHED #ms: gomaxprocs=2 idleprocs=# threads=# spinningthreads=# needspinning=0 idlethreads=# blockedthreads=# runqueue=#";

fn sched_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.starts_with("SCHED ")).collect()
}

fn sched_ms(line: &str) -> u64 {
    line["SCHED ".len()..line.find("ms:").unwrap()]
        .parse()
        .unwrap()
}

#[test]
fn schedtrace_prints_go_lines() {
    let out = common::spawn(
        "schedtrace_child",
        &[("GODEBUG", "schedtrace=10"), ("GOMAXPROCS", "2")],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let lines = sched_lines(&stderr);
    // ~30 expected; few enough to pass on a loaded machine.
    assert!(lines.len() >= 3, "{stderr}");
    for l in &lines {
        assert!(matches(&format!("{SCHED} [# #]"), l), "{l:?}");
    }
    let ms: Vec<u64> = lines.iter().map(|l| sched_ms(l)).collect();
    assert!(ms.windows(2).all(|w| w[1] >= w[0] + 9), "{ms:?}");
    assert!(!stderr.contains("  P0:"), "no detail without scheddetail");
}

#[test]
#[cfg_attr(
    goroutine_sanitize = "thread",
    ignore = "TSan's own threads show up as extra M lines"
)]
fn scheddetail_prints_p_m_and_g_lines() {
    let out = common::spawn(
        "schedtrace_child",
        &[
            ("GODEBUG", "schedtrace=20,scheddetail=1"),
            ("GOMAXPROCS", "2"),
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let detail = format!("{SCHED} gcwaiting=* nmidlelocked=# stopwait=# sysmonwait=*");
    let lines = sched_lines(&stderr);
    assert!(lines.len() >= 3, "{stderr}");
    for l in &lines {
        assert!(matches(&detail, l), "{l:?}");
    }
    let p = "  P#: status=# schedtick=# syscalltick=# m=* runqsize=# gfreecnt=# timerslen=#";
    let m = "  M#: p=* curg=* mallocing=0 throwing=0 preemptoff= locks=0 dying=0 spinning=* blocked=* lockedg=nil";
    let g = "  G#: status=#(*) m=* lockedm=nil";
    let (mut ps, mut ms, mut gs) = (0, 0, 0);
    for l in stderr.lines().filter(|l| l.starts_with("  ")) {
        if l.starts_with("  P") {
            assert!(matches(p, l), "{l:?}");
            ps += 1;
        } else if l.starts_with("  M") {
            assert!(matches(m, l), "{l:?}");
            ms += 1;
        } else if l.starts_with("  G") {
            assert!(matches(g, l), "{l:?}");
            gs += 1;
        } else {
            panic!("unexpected line {l:?}");
        }
    }
    assert_eq!(ps, 2 * lines.len(), "two P lines per report");
    assert!(ms >= lines.len() && gs >= lines.len());
    assert!(stderr.contains("status=4(chan receive) m=nil"), "{stderr}");
}

#[test]
fn bad_godebug_value_is_reported_once() {
    let out = common::spawn(
        "schedtrace_child",
        &[("GODEBUG", "gctrace=1,schedtrace=abc"), ("GOMAXPROCS", "2")],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stderr.matches("GODEBUG").count(), 1, "{stderr}");
    assert!(stderr.contains("schedtrace=\"abc\""), "{stderr}");
    assert!(sched_lines(&stderr).is_empty(), "{stderr}");
}

// ---------------------------------------------------------------------------
// dump and SIGQUIT
// ---------------------------------------------------------------------------

fn dump_string() -> String {
    let mut out = Vec::new();
    goroutine::dump(&mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// Waits until the dump shows `want`; returns the dump.
fn dump_until(want: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let d = dump_string();
        if d.contains(want) {
            return d;
        }
        assert!(Instant::now() < deadline, "{want:?} never in:\n{d}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

// Builder::name("") is no name: no empty `name:` line in the dump, no
// empty parentheses in a JoinError.
#[test]
fn empty_name_is_no_name() {
    let (tx, rx) = chan::<()>(0);
    let h = Builder::new()
        .name("")
        .spawn(move || {
            let _ = rx.recv();
            panic!("unnamed");
        })
        .unwrap();
    let header = format!("goroutine {} [chan receive]:\n", h.id());
    let d = dump_until(&header);
    let after = &d[d.find(&header).unwrap() + header.len()..];
    assert!(!after.starts_with("\tname:"), "{d}");
    drop(tx);
    let e = h.join().unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("goroutine {} panicked: unnamed", e.id())
    );
}

#[test]
fn dump_lists_blocked_and_named_goroutines() {
    let (tx, rx) = chan::<u32>(0);
    let blocked = go(move || rx.recv().unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let (s2, (wtx, wrx)) = (stop.clone(), chan::<()>(0));
    let named = Builder::new()
        .name("dump-worker")
        .spawn(move || {
            let _ = wrx.recv();
            s2.store(true, Ordering::SeqCst);
        })
        .unwrap();
    let want = format!("goroutine {} [chan receive]:\n", blocked.id());
    let d = dump_until(&want);
    let named_header = format!(
        "goroutine {} [chan receive]:\n\tname: dump-worker\n",
        named.id()
    );
    let d = if d.contains(&named_header) {
        d
    } else {
        dump_until(&named_header)
    };
    // Every header is Go's, and goroutines are separated by blank lines.
    for l in d.lines().filter(|l| l.starts_with("goroutine ")) {
        assert!(matches("goroutine # [*]:", l), "{l:?}");
    }
    // From a goroutine, the caller comes first, as running.
    let id = goroutine::run(|| {
        let d = dump_string();
        let me = goroutine::current_id();
        assert!(
            d.starts_with(&format!("goroutine {me} [running]:\n")),
            "{d}"
        );
        me
    });
    assert!(id > 0);
    tx.send(7).unwrap();
    assert_eq!(blocked.join().unwrap(), 7);
    wtx.send(()).unwrap();
    named.join().unwrap();
    assert!(stop.load(Ordering::SeqCst));
    let d = dump_string();
    assert!(
        !d.contains(&want),
        "a finished goroutine is still listed:\n{d}"
    );
}

#[test]
fn sigquit_child() {
    if !common::is_child("sigquit_child") {
        return;
    }
    let (_tx, rx) = chan::<()>(0);
    let h = Builder::new()
        .name("quit-waiter")
        .spawn(move || {
            let _ = rx.recv();
        })
        .unwrap();
    println!("waiter={}", h.id());
    while !dump_string().contains("[chan receive]") {
        std::thread::sleep(Duration::from_millis(1));
    }
    // SAFETY: getpid has no preconditions.
    common::send_signal(unsafe { libc::getpid() }, libc::SIGQUIT, "goroutine-sigqu");
    std::thread::sleep(Duration::from_secs(20));
    println!("SIGQUIT did not exit");
}

#[test]
fn sigquit_dumps_and_exits_2() {
    let out = common::spawn("sigquit_child", &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
    let id: u64 = stdout
        .lines()
        .find_map(|l| l.split("waiter=").nth(1))
        .expect("the child printed its waiter")
        .parse()
        .unwrap();
    assert!(stderr.contains("SIGQUIT: quit\n\n"), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "goroutine {id} [chan receive]:\n\tname: quit-waiter\n"
        )),
        "{stderr}"
    );
}

// ---------------------------------------------------------------------------
// dump_json
// ---------------------------------------------------------------------------

/// The JSON dump parses, follows docs/dump-json.md, and says what the text
/// dump says about the same goroutines.
#[test]
fn dump_json_parses_and_matches_dump() {
    let (tx, rx) = chan::<u32>(0);
    let named = Builder::new()
        .name("json \"worker\"")
        .spawn(move || rx.recv().unwrap())
        .unwrap();
    let header = format!("goroutine {} [chan receive]:\n", named.id());
    let text = dump_until(&header);
    let mut out = Vec::new();
    goroutine::dump_json(&mut out).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).expect("valid JSON");
    assert_eq!(v["schema"], "goroutine-dump");
    assert_eq!(v["version"], 1);
    let gs = v["goroutines"].as_array().unwrap();
    let g = gs
        .iter()
        .find(|g| g["id"] == named.id())
        .unwrap_or_else(|| panic!("goroutine {} missing: {v}", named.id()));
    assert_eq!(g["name"], "json \"worker\"");
    assert_eq!(g["state"], "waiting");
    assert_eq!(g["wait_reason"], "chan receive");
    assert!(g["wait_ms"].as_u64().is_some(), "{g}");
    assert_eq!(g["locked_to_thread"], false);
    let frames = g["frames"].as_array().unwrap();
    // Sanitizer builds record no frames of parked goroutines (README,
    // "Sanitizers"): the JSON says they are unavailable, and the checks of
    // frames end here.
    if cfg!(any(
        goroutine_sanitize = "address",
        goroutine_sanitize = "thread"
    )) {
        assert!(frames.is_empty(), "{g}");
        assert!(g["frames_unavailable"].is_string(), "{g}");
        tx.send(3).unwrap();
        assert_eq!(named.join().unwrap(), 3);
        return;
    }
    assert!(!frames.is_empty(), "{g}");
    // The same frames as the text dump, in the same order.
    let block = &text[text.find(&header).unwrap()..];
    let block = &block[..block.find("\n\n").unwrap_or(block.len())];
    let text_fns: Vec<&str> = block
        .lines()
        .filter_map(|l| l.strip_suffix("(...)"))
        .collect();
    let json_fns: Vec<&str> = frames
        .iter()
        .map(|f| f["function"].as_str().unwrap())
        .collect();
    assert_eq!(json_fns, text_fns, "{block}");
    for f in frames {
        assert!(f["pc"].as_str().unwrap().starts_with("0x"), "{f}");
    }
    let created = &g["created_by"];
    assert!(
        created["function"]
            .as_str()
            .unwrap()
            .contains("dump_json_parses_and_matches_dump"),
        "{created}"
    );
    assert!(block.contains(&format!(
        "created by {}",
        created["function"].as_str().unwrap()
    )));
    tx.send(3).unwrap();
    assert_eq!(named.join().unwrap(), 3);
}

/// A goroutine blocked in a plain `std` call shows its system call.
#[test]
fn dump_json_names_a_blocked_system_call() {
    let (tx, rx) = chan::<()>(0);
    let h = go(move || {
        tx.send(()).unwrap();
        std::thread::sleep(Duration::from_millis(1500));
    });
    rx.recv().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut out = Vec::new();
        goroutine::dump_json(&mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).expect("valid JSON");
        let g = v["goroutines"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["id"] == h.id())
            .cloned();
        if let Some(g) = g {
            if let Some(call) = g["blocked_in_syscall"].as_str() {
                // qemu-user: /proc/<tid>/syscall gives the host's system
                // call number (README, "Supported platforms").
                if !cfg!(goroutine_qemu) {
                    assert!(call.contains("sleep"), "{g}");
                }
                assert_eq!(g["state"], "running");
                break;
            }
        }
        assert!(Instant::now() < deadline, "never shown blocked: {v}");
        std::thread::sleep(Duration::from_millis(20));
    }
    h.join().unwrap();
}
