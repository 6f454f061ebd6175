//! The execution tracer: a small decoder of docs/trace-format.md, and
//! checks on the traces of real runs (skynet, syscalls, timers, names).

mod common;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use goroutine::{chan, go, Builder, Sender};

// ---------------------------------------------------------------------------
// The decoder
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum Ev {
    GoCreate {
        g: u64,
        parent: u64,
        p: u64,
    },
    GoStart {
        g: u64,
        p: u64,
    },
    GoStop {
        g: u64,
        p: u64,
        reason: u64,
    },
    GoBlock {
        g: u64,
        p: u64,
        reason: u64,
    },
    GoUnblock {
        g: u64,
        by: u64,
        p: u64,
    },
    GoEnd {
        g: u64,
        p: u64,
    },
    Steal {
        thief: u64,
        victim: u64,
        count: u64,
    },
    ProcStart {
        p: u64,
    },
    ProcStop {
        p: u64,
    },
    MPark,
    MWake,
    SyscallEnter {
        g: u64,
        p: u64,
    },
    SyscallExit {
        g: u64,
        p: u64,
        fast: u64,
    },
    SyscallHandoff {
        p: u64,
    },
    Preempt {
        g: u64,
        p: u64,
    },
    TimerFire {
        p: u64,
        count: u64,
    },
    NetpollReady {
        count: u64,
    },
    GoName {
        g: u64,
        name: String,
    },
    RunqSample {
        p: u64,
        local: u64,
        global: u64,
    },
    GoCount {
        runnable: u64,
        running: u64,
        waiting: u64,
        syscall: u64,
    },
}

#[derive(Debug)]
struct Event {
    ts: u64,
    m: u32,
    /// Index of the batch in the file.
    batch: usize,
    ev: Ev,
}

#[derive(Debug)]
struct Trace {
    start_ns: u64,
    gomaxprocs: u32,
    end_ns: u64,
    dropped: u64,
    batches: usize,
    /// In file order (batch by batch, each in its own order).
    events: Vec<Event>,
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn bytes(&mut self, n: usize) -> Result<&[u8], String> {
        if self.at + n > self.b.len() {
            return Err(format!("truncated at byte {} (want {n} more)", self.at));
        }
        let s = &self.b[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.bytes(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.bytes(4)?.try_into().unwrap()))
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.bytes(8)?.try_into().unwrap()))
    }
    fn uvarint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            v |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(format!("varint too long at byte {}", self.at))
    }
}

fn decode(bytes: &[u8]) -> Result<Trace, String> {
    let mut r = Reader { b: bytes, at: 0 };
    if r.bytes(8)? != b"GRTRACE\0" {
        return Err("bad magic".into());
    }
    let version = r.u32()?;
    if version != 1 {
        return Err(format!("version {version}"));
    }
    if r.u32()? != 0 {
        return Err("flags != 0".into());
    }
    let start_ns = r.u64()?;
    let _unix = r.u64()?;
    let gomaxprocs = r.u32()?;
    if r.u32()? != 0 {
        return Err("reserved != 0".into());
    }
    let mut events = Vec::new();
    let mut batches = 0;
    loop {
        match r.u8()? {
            0xB7 => {
                let m = r.u32()?;
                let len = r.u32()? as usize;
                if len > 64 * 1024 {
                    return Err(format!("batch of {len} bytes"));
                }
                let payload = r.bytes(len)?;
                let mut p = Reader { b: payload, at: 0 };
                let mut ts = start_ns;
                while p.at < payload.len() {
                    let ty = p.u8()?;
                    ts += p.uvarint()?;
                    let mut u = || p.uvarint();
                    let ev = match ty {
                        1 => Ev::GoCreate {
                            g: u()?,
                            parent: u()?,
                            p: u()?,
                        },
                        2 => Ev::GoStart { g: u()?, p: u()? },
                        3 => Ev::GoStop {
                            g: u()?,
                            p: u()?,
                            reason: u()?,
                        },
                        4 => Ev::GoBlock {
                            g: u()?,
                            p: u()?,
                            reason: u()?,
                        },
                        5 => Ev::GoUnblock {
                            g: u()?,
                            by: u()?,
                            p: u()?,
                        },
                        6 => Ev::GoEnd { g: u()?, p: u()? },
                        7 => Ev::Steal {
                            thief: u()?,
                            victim: u()?,
                            count: u()?,
                        },
                        8 => Ev::ProcStart { p: u()? },
                        9 => Ev::ProcStop { p: u()? },
                        10 => Ev::MPark,
                        11 => Ev::MWake,
                        12 => Ev::SyscallEnter { g: u()?, p: u()? },
                        13 => Ev::SyscallExit {
                            g: u()?,
                            p: u()?,
                            fast: u()?,
                        },
                        14 => Ev::SyscallHandoff { p: u()? },
                        15 => Ev::Preempt { g: u()?, p: u()? },
                        16 => Ev::TimerFire {
                            p: u()?,
                            count: u()?,
                        },
                        17 => Ev::NetpollReady { count: u()? },
                        18 => {
                            let g = u()?;
                            let len = u()? as usize;
                            let name = String::from_utf8(p.bytes(len)?.to_vec())
                                .map_err(|e| e.to_string())?;
                            Ev::GoName { g, name }
                        }
                        19 => Ev::RunqSample {
                            p: u()?,
                            local: u()?,
                            global: u()?,
                        },
                        20 => Ev::GoCount {
                            runnable: u()?,
                            running: u()?,
                            waiting: u()?,
                            syscall: u()?,
                        },
                        t => return Err(format!("unknown event type {t}")),
                    };
                    events.push(Event {
                        ts,
                        m,
                        batch: batches,
                        ev,
                    });
                }
                batches += 1;
            }
            0xE0 => {
                let end_ns = r.u64()?;
                let dropped = r.u64()?;
                if r.at != bytes.len() {
                    return Err(format!("{} bytes after the trailer", bytes.len() - r.at));
                }
                return Ok(Trace {
                    start_ns,
                    gomaxprocs,
                    end_ns,
                    dropped,
                    batches,
                    events,
                });
            }
            b => return Err(format!("bad block tag {b:#x} at byte {}", r.at - 1)),
        }
    }
}

/// Checks what holds for every trace: timestamps within [start, end] and
/// in order inside each batch, valid wait reasons, stop reasons, P ids.
fn check_common(t: &Trace) {
    assert_eq!(t.dropped, 0, "events were dropped");
    assert!(t.end_ns >= t.start_ns);
    let mut last: HashMap<usize, u64> = HashMap::new();
    for e in &t.events {
        assert!(
            e.ts >= t.start_ns && e.ts <= t.end_ns,
            "{e:?} outside the trace"
        );
        let prev = last.insert(e.batch, e.ts).unwrap_or(0);
        assert!(e.ts >= prev, "batch {} goes back in time at {e:?}", e.batch);
        match &e.ev {
            Ev::GoBlock { reason, .. } => assert!((1..=16).contains(reason), "{e:?}"),
            Ev::GoStop { reason, .. } => assert!(*reason <= 2, "{e:?}"),
            Ev::ProcStart { p } | Ev::ProcStop { p } => assert!(*p < 1024, "{e:?}"),
            Ev::GoStart { g, p } => assert!(*g > 0 && *p < 1024, "{e:?}"),
            _ => {}
        }
    }
}

fn trace_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("goroutine-{}-{name}.trace", std::process::id()))
}

// ---------------------------------------------------------------------------
// Workloads
// ---------------------------------------------------------------------------

fn skynet(up: Sender<u64>, num: u64, size: u64) {
    if size == 1 {
        up.send(num).unwrap();
        return;
    }
    let sub = size / 10;
    let (tx, rx) = chan::<u64>(0);
    for i in 0..10 {
        let tx = tx.clone();
        go(move || skynet(tx, num + i * sub, sub));
    }
    drop(tx);
    let sum: u64 = (0..10).map(|_| rx.recv().unwrap()).sum();
    up.send(sum).unwrap();
}

fn wait_for_goroutines(n: usize) {
    for _ in 0..2000 {
        if goroutine::num_goroutine() <= n {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    panic!("{} goroutines left", goroutine::num_goroutine());
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

// Skynet with 10,000 leaves (11,111 goroutines) under the tracer: every one
// of them is created, started and ended; blocks have valid reasons.
isolated_test! {
    fn skynet_trace_has_every_goroutine() ["GOMAXPROCS" = "2"] {
        let path = trace_path("skynet");
        goroutine::trace::start(&path).unwrap();
        let err = goroutine::trace::start(&path).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists);
        assert!(goroutine::trace::is_enabled());
        let sum = goroutine::run(|| {
            let (tx, rx) = chan::<u64>(0);
            go(move || skynet(tx, 0, 10_000));
            rx.recv().unwrap()
        });
        assert_eq!(sum, 10_000 * 9_999 / 2);
        wait_for_goroutines(0);
        goroutine::trace::stop().unwrap();
        assert!(!goroutine::trace::is_enabled());
        goroutine::trace::stop().unwrap(); // a no-op

        let bytes = std::fs::read(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let t = decode(&bytes).unwrap();
        check_common(&t);
        assert_eq!(t.gomaxprocs, 2);
        assert!(t.batches >= 1);

        let mut created: HashMap<u64, u64> = HashMap::new();
        let mut started = HashSet::new();
        let mut ended = HashSet::new();
        let mut blocks = 0;
        for e in &t.events {
            match e.ev {
                Ev::GoCreate { g, parent, .. } => {
                    assert!(created.insert(g, parent).is_none(), "g{g} created twice");
                }
                Ev::GoStart { g, .. } => {
                    started.insert(g);
                }
                Ev::GoEnd { g, .. } => {
                    assert!(ended.insert(g), "g{g} ended twice");
                }
                Ev::GoBlock { reason, .. } => {
                    blocks += 1;
                    // Skynet blocks on channels, run's goroutine on nothing
                    // else; joins are not used.
                    assert!(reason == 2 || reason == 3, "reason {reason}");
                }
                _ => {}
            }
        }
        // run's goroutine (parent 0) and the tree: 1 + 10 + ... + 10,000.
        assert_eq!(created.len(), 1 + 11_111, "goroutines created");
        assert_eq!(created.values().filter(|&&p| p == 0).count(), 1);
        for g in created.keys() {
            assert!(started.contains(g), "g{g} never started");
            assert!(ended.contains(g), "g{g} never ended");
        }
        assert!(blocks > 0);
        // Per goroutine, the events are in causal order once sorted by time
        // (stable by file order): Create < Start, and nothing after End.
        let mut order: Vec<&Event> = t.events.iter().collect();
        order.sort_by_key(|e| e.ts);
        let mut state: HashMap<u64, &str> = HashMap::new();
        for e in order {
            match e.ev {
                Ev::GoCreate { g, .. } => {
                    state.insert(g, "created");
                }
                Ev::GoStart { g, .. } => {
                    if let Some(s) = state.get(&g) {
                        assert_ne!(*s, "ended", "g{g} started after its end");
                    }
                    state.insert(g, "running");
                }
                Ev::GoEnd { g, .. } => {
                    if let Some(s) = state.get(&g) {
                        assert_eq!(*s, "running", "g{g} ended while {s}");
                    }
                    state.insert(g, "ended");
                }
                _ => {}
            }
        }
    }
}

// The other events: names, syscalls and handoffs, timers, ProcStart/Stop,
// sysmon's samples; GOROUTINE_TRACE and the atexit hook write the file
// (the child exits without calling stop).
#[test]
fn env_trace_has_the_other_events() {
    let path = trace_path("env");
    let out = common::spawn(
        "env_trace_child",
        &[
            ("GOROUTINE_TRACE", path.to_str().unwrap()),
            ("GOMAXPROCS", "2"),
        ],
    );
    assert!(
        out.status.success(),
        "child failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    let t = decode(&bytes).unwrap();
    check_common(&t);
    let has = |f: &dyn Fn(&Ev) -> bool| t.events.iter().any(|e| f(&e.ev));
    assert!(has(
        &|e| matches!(e, Ev::GoName { name, .. } if name == "sleeper")
    ));
    assert!(has(&|e| matches!(e, Ev::SyscallEnter { .. })));
    assert!(has(&|e| matches!(e, Ev::SyscallExit { .. })));
    assert!(has(&|e| matches!(e, Ev::SyscallHandoff { .. })));
    assert!(has(
        &|e| matches!(e, Ev::TimerFire { count, .. } if *count >= 1)
    ));
    assert!(
        has(&|e| matches!(e, Ev::GoBlock { reason: 15, .. })),
        "no sleep block"
    );
    assert!(
        has(&|e| matches!(e, Ev::GoUnblock { by: 0, .. })),
        "no timer unblock"
    );
    assert!(has(&|e| matches!(e, Ev::ProcStart { .. })));
    assert!(has(&|e| matches!(e, Ev::ProcStop { .. })));
    assert!(has(&|e| matches!(e, Ev::MPark)));
    assert!(has(&|e| matches!(e, Ev::MWake)));
    assert!(has(&|e| matches!(e, Ev::RunqSample { .. })));
    assert!(has(&|e| matches!(e, Ev::GoCount { .. })));
    assert!(
        has(&|e| matches!(e, Ev::GoStop { reason: 0, .. })),
        "no yield"
    );
    // sysmon's events come in batches of M u32::MAX.
    assert!(t
        .events
        .iter()
        .any(|e| e.m == u32::MAX && matches!(e.ev, Ev::RunqSample { .. })));
    // A goroutine named "sleeper" slept 20 ms: its block and unblock.
    let sleeper = t
        .events
        .iter()
        .find_map(|e| match &e.ev {
            Ev::GoName { g, name } if name == "sleeper" => Some(*g),
            _ => None,
        })
        .unwrap();
    let block = t
        .events
        .iter()
        .find(|e| matches!(e.ev, Ev::GoBlock { g, reason: 15, .. } if g == sleeper))
        .expect("the sleeper's GoBlock");
    let unblock = t
        .events
        .iter()
        .find(|e| matches!(e.ev, Ev::GoUnblock { g, .. } if g == sleeper))
        .expect("the sleeper's GoUnblock");
    assert!(
        unblock.ts >= block.ts + 15_000_000,
        "slept {} ns",
        unblock.ts - block.ts
    );
}

#[test]
fn env_trace_child() {
    if !common::is_child("env_trace_child") {
        return;
    }
    goroutine::run(|| {
        let h = Builder::new()
            .name("sleeper")
            .spawn(|| goroutine::time::sleep(std::time::Duration::from_millis(20)))
            .unwrap();
        h.join().unwrap();
        goroutine::syscall(|| std::thread::sleep(std::time::Duration::from_millis(30)));
        goroutine::syscall_blocking(|| std::thread::sleep(std::time::Duration::from_millis(1)));
        for _ in 0..10 {
            goroutine::yield_now();
        }
        // Let sysmon take a few samples.
        goroutine::time::sleep(std::time::Duration::from_millis(30));
    });
    // No trace::stop: the atexit hook completes the file.
}
