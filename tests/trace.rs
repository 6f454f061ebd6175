//! The execution tracer: checks on the traces of real runs (skynet,
//! syscalls, timers, names, P revocation), read with the trace tool's
//! decoder.

mod common;

use common::skynet;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use goroutine::{chan, go, Builder};
use goroutine_trace::decode::decode_in_file_order;
use goroutine_trace::format::{Event as Ev, BATCH_SIZE, HEADER_LEN, TRAILER_LEN};

// ---------------------------------------------------------------------------
// The decoder: the trace tool's (tools/goroutine-trace), the one definition
// of docs/trace-format.md, read in file order so that the checks below see
// each batch as written.
// ---------------------------------------------------------------------------

#[derive(Debug)]
struct Event {
    /// Absolute nanotime (the header's start_ns plus the event's offset).
    ts: u64,
    m: u32,
    /// Index of the batch in the file.
    batch: usize,
    ev: Ev,
    /// Carries its own time (else its batch's previous event's).
    stamped: bool,
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

/// Decodes a complete trace with the tool's decoder (which rejects a bad
/// magic or version, unknown records and event types, truncation and bytes
/// after the trailer), and checks what it leaves to its callers: flags and
/// reserved words 0, batches no larger than the runtime's buffer.
fn decode(bytes: &[u8]) -> Result<Trace, String> {
    let f = decode_in_file_order(bytes).map_err(|e| e.to_string())?;
    if f.header.flags != 0 {
        return Err("flags != 0".into());
    }
    if bytes[HEADER_LEN - 4..HEADER_LEN] != [0; 4] {
        return Err("reserved != 0".into());
    }
    if let Some(b) = f
        .batches
        .iter()
        .find(|b| b.payload_len as usize > BATCH_SIZE)
    {
        return Err(format!("batch of {} bytes", b.payload_len));
    }
    let start_ns = f.header.start_ns;
    // The trailer's end_ns as written (the decoder makes it relative to
    // start_ns, saturating).
    let trailer = &bytes[bytes.len() - TRAILER_LEN..];
    let end_ns = u64::from_le_bytes(trailer[1..9].try_into().unwrap());
    let batches = f.batches.len();
    let events = f
        .batches
        .into_iter()
        .enumerate()
        .flat_map(|(batch, b)| {
            b.events.into_iter().map(move |e| Event {
                ts: start_ns + e.ts,
                m: e.m,
                batch,
                ev: e.ev,
                stamped: e.stamped,
            })
        })
        .collect();
    Ok(Trace {
        start_ns,
        gomaxprocs: f.header.gomaxprocs,
        end_ns,
        dropped: f.dropped,
        batches,
        events,
    })
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
            Ev::GoBlock { wait_reason, .. } => {
                assert!((1..=16).contains(wait_reason), "{e:?}")
            }
            Ev::GoStop { reason, .. } => assert!(*reason <= 2, "{e:?}"),
            Ev::ProcStart { p } | Ev::ProcStop { p } => assert!(*p < 1024, "{e:?}"),
            Ev::GoStart { g, p } => assert!(*g > 0 && *p < 1024, "{e:?}"),
            _ => {}
        }
    }
}

/// The goroutines of a trace by lifecycle event: each one's parent (its
/// GoCreate), and those that started and that ended. Built in file order,
/// which is not time order across Ms, so it relates no two events; a
/// goroutine created or ended twice fails the test.
struct Lifecycle {
    parents: HashMap<u64, u64>,
    started: HashSet<u64>,
    ended: HashSet<u64>,
}

impl Lifecycle {
    fn of(t: &Trace) -> Lifecycle {
        let mut life = Lifecycle {
            parents: HashMap::new(),
            started: HashSet::new(),
            ended: HashSet::new(),
        };
        for e in &t.events {
            match e.ev {
                Ev::GoCreate { g, parent, .. } => {
                    assert!(
                        life.parents.insert(g, parent).is_none(),
                        "g{g} created twice"
                    );
                }
                Ev::GoStart { g, .. } => {
                    life.started.insert(g);
                }
                Ev::GoEnd { g, .. } => {
                    assert!(life.ended.insert(g), "g{g} ended twice");
                }
                _ => {}
            }
        }
        life
    }

    /// Goroutines created from outside the runtime (parent 0).
    fn created_outside(&self) -> usize {
        self.parents.values().filter(|&&p| p == 0).count()
    }
}

/// Checks the rule for slice ends without a clock read (the runtime's
/// `tracer/buf.rs`, "Unstamped slice ends"), as far as a file shows it: a
/// GoBlock or GoEnd that shares its batch's previous time follows, in its
/// batch, a stamped slice end at most `SKIP_ENDS` (15) slice ends back,
/// which ended a run of `SHORT_RUN` (4) short intervals between stamped
/// slice ends of the batch: under `SHORT_SLICE_NS` (500 ns) for each slice
/// end the interval spans (the runtime keeps its memory of them per
/// batch). GoStops never share. Returns how many shared.
fn check_unstamped_ends(t: &Trace) -> usize {
    // Per batch: the stamped slice ends' times, each with the slice ends
    // its interval spans (itself and the shared ones before it), and the
    // shared ones since the last.
    let mut at: HashMap<usize, (Vec<(u64, u64)>, u64)> = HashMap::new();
    let mut shared = 0;
    for e in &t.events {
        if matches!(e.ev, Ev::GoStop { .. }) {
            assert!(e.stamped, "{e:?}: a GoStop without its own time");
        }
        if !matches!(e.ev, Ev::GoEnd { .. } | Ev::GoBlock { .. }) {
            continue;
        }
        let (stamped, run) = at.entry(e.batch).or_default();
        if e.stamped {
            stamped.push((e.ts, *run + 1));
            *run = 0;
            continue;
        }
        shared += 1;
        *run += 1;
        assert!(
            *run <= 15,
            "{e:?}: {} slice ends in a row share a time",
            *run
        );
        let last = &stamped[stamped.len().saturating_sub(5)..];
        assert!(
            last.len() == 5 && last.windows(2).all(|w| w[1].0 - w[0].0 < 500 * w[1].1),
            "{e:?} shares a time after stamped slice ends (time, span) {last:?}"
        );
    }
    shared
}

/// Runs skynet with 10,000 leaves (11,111 goroutines) and waits until
/// every goroutine has ended.
fn skynet_10k() {
    let sum = goroutine::run(|| {
        let (tx, rx) = chan::<u64>(0);
        go(move || skynet(tx, 0, 10_000));
        rx.recv().unwrap()
    });
    assert_eq!(sum, 10_000 * 9_999 / 2);
    wait_for_goroutines(0);
}

/// Stops the trace once every goroutine has ended, and decodes the file
/// at `path` (then removed), checked by `check_common`.
fn finish_trace(path: &std::path::Path) -> Trace {
    wait_for_goroutines(0);
    goroutine::trace::stop().unwrap();
    let bytes = std::fs::read(path).unwrap();
    let _ = std::fs::remove_file(path);
    let t = decode(&bytes).unwrap();
    check_common(&t);
    t
}

fn trace_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("goroutine-{}-{name}.trace", std::process::id()))
}

// ---------------------------------------------------------------------------
// Workloads
// ---------------------------------------------------------------------------

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
        skynet_10k();
        goroutine::trace::stop().unwrap();
        assert!(!goroutine::trace::is_enabled());
        goroutine::trace::stop().unwrap(); // a no-op

        let bytes = std::fs::read(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let t = decode(&bytes).unwrap();
        check_common(&t);
        assert_eq!(t.gomaxprocs, 2);
        assert!(t.batches >= 1);

        let life = Lifecycle::of(&t);
        let mut blocks = 0;
        for e in &t.events {
            if let Ev::GoBlock {
                wait_reason: reason,
                ..
            } = e.ev
            {
                blocks += 1;
                // Skynet blocks on channels, run's goroutine on nothing
                // else; joins are not used.
                assert!(reason == 2 || reason == 3, "reason {reason}");
            }
        }
        // run's goroutine (parent 0) and the tree: 1 + 10 + ... + 10,000.
        assert_eq!(life.parents.len(), 1 + 11_111, "goroutines created");
        assert_eq!(life.created_outside(), 1);
        for g in life.parents.keys() {
            assert!(life.started.contains(g), "g{g} never started");
            assert!(life.ended.contains(g), "g{g} never ended");
        }
        assert!(blocks > 0);
        // Most GoStarts come from the scheduler's quick path (this P's run
        // queue, right after the last slice ended on the M) and share the slice
        // end's timestamp instead of reading the clock; each such GoStart
        // follows a GoEnd, GoBlock or GoStop in its batch.
        let (mut starts, mut shared) = (0, 0);
        for w in t.events.windows(2) {
            if let Ev::GoStart { .. } = w[1].ev {
                starts += 1;
                let ends_slice = matches!(
                    w[0].ev,
                    Ev::GoEnd { .. } | Ev::GoBlock { .. } | Ev::GoStop { .. }
                );
                if w[0].batch == w[1].batch && w[0].ts == w[1].ts && ends_slice {
                    shared += 1;
                }
            }
        }
        assert!(
            shared * 4 >= starts,
            "{shared} of {starts} GoStarts share a slice end's timestamp"
        );
        // GoCreate and GoUnblock written by a running goroutine read no
        // clock: they take their batch's previous event's time (a lower
        // bound), so skynet's are mostly at the time of the event before.
        let (mut mid, mut same) = (0, 0);
        for w in t.events.windows(2) {
            if let Ev::GoCreate { parent, .. } | Ev::GoUnblock { by_g: parent, .. } = w[1].ev {
                if parent != 0 {
                    mid += 1;
                    if w[0].batch == w[1].batch && w[0].ts == w[1].ts {
                        same += 1;
                    }
                }
            }
        }
        assert!(
            same * 2 >= mid,
            "{same} of {mid} GoCreates and GoUnblocks share their batch's previous time"
        );
        // Slice ends without a clock read only in runs of short slices
        // (none need be: a slow or loaded machine has no such runs).
        let unstamped = check_unstamped_ends(&t);
        eprintln!("{unstamped} slice ends share a time");
        check_causal_order(&t);
    }
}

// Goroutines that compute for 30 us each and leave their result in a
// channel with room for all, for one that only receives: that one blocks
// only when the channel is empty, so between two of its slices one that
// computed ended, in any order the scheduler picks (randomized too).
// Slices long and short by turns, never a run of short ones: every slice
// end reads the clock (runs of short slices may share their batch's
// previous time; `check_unstamped_ends`).
isolated_test! {
    fn long_slices_keep_their_own_end_times() ["GOMAXPROCS" = "1"] {
        let path = trace_path("long-slices");
        goroutine::trace::start(&path).unwrap();
        let n = goroutine::run(|| {
            let (tx, rx) = chan::<u64>(40);
            for i in 0..40 {
                let tx = tx.clone();
                go(move || {
                    let t = std::time::Instant::now();
                    while t.elapsed() < std::time::Duration::from_micros(30) {
                        std::hint::spin_loop();
                    }
                    tx.send(i).unwrap();
                });
            }
            drop(tx);
            let mut n = 0;
            while rx.recv().is_ok() {
                n += 1;
            }
            n
        });
        assert_eq!(n, 40);
        let t = finish_trace(&path);
        let ends = t
            .events
            .iter()
            .filter(|e| matches!(e.ev, Ev::GoEnd { .. }))
            .count();
        assert!(ends >= 40, "{ends} GoEnds");
        assert_eq!(check_unstamped_ends(&t), 0, "slice ends without their own time");
    }
}

// Goroutines spawned in runs: one spawner makes 150 in a row (the tracer
// defers a run's GoCreates after its first, at most 64 at a time), while
// a plain thread spawns too, taking ids between the spawner P's batches
// of 16 (so a run's next id is not always one more); two others take
// turns, yielding after every third spawn, so that each one's next spawn
// has the id after the other's last: a run must end at a gap and at each
// event, or a GoCreate would name the wrong goroutine or parent. Each
// child reports its parent; the trace must say the same, with every
// GoCreate before its goroutine ran.
fn spawns_in_runs(procs: &str) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let path = trace_path(&format!("create-runs-{procs}"));
    goroutine::trace::start(&path).unwrap();
    let reported = goroutine::run(|| {
        let done = Arc::new(AtomicBool::new(false));
        let outside = {
            let done = done.clone();
            std::thread::spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    go(|| {});
                    std::thread::yield_now();
                }
            })
        };
        let (tx, rx) = chan::<(u64, u64)>(0);
        let spawner = |tx: goroutine::Sender<(u64, u64)>, n: usize, yield_every: usize| {
            move || {
                let me = goroutine::current_id();
                for i in 1..=n {
                    let tx = tx.clone();
                    go(move || tx.send((goroutine::current_id(), me)).unwrap());
                    if yield_every != 0 && i % yield_every == 0 {
                        goroutine::yield_now();
                    }
                    // No event: room for the plain thread's spawns.
                    let t = std::time::Instant::now();
                    while t.elapsed() < std::time::Duration::from_micros(2) {
                        std::hint::spin_loop();
                    }
                }
            }
        };
        go(spawner(tx.clone(), 150, 0));
        go(spawner(tx.clone(), 60, 3));
        go(spawner(tx, 60, 3));
        let reported = rx.into_iter().collect::<Vec<_>>();
        done.store(true, Ordering::Relaxed);
        outside.join().unwrap();
        reported
    });
    assert_eq!(reported.len(), 270);
    let t = finish_trace(&path);
    let life = Lifecycle::of(&t);
    for (child, parent) in reported {
        assert_eq!(life.parents.get(&child), Some(&parent), "g{child}'s parent");
    }
    check_causal_order(&t);
}

// A goroutine's spawns and its sends keep their order in the trace,
// though the tracer defers a run of spawns' GoCreates to the thread's
// next event: each round spawns three, readies a parked receiver, spawns
// three more, and waits for its answer. In the file, the send's event
// (the receiver's GoUnblock, or the spawner's GoBlock if the receiver was
// not parked yet) comes after the first three GoCreates and before the
// others.
isolated_test! {
    fn spawns_and_wakeups_keep_their_order() ["GOMAXPROCS" = "1"] {
        const ROUNDS: usize = 20;
        let path = trace_path("spawn-wake-order");
        goroutine::trace::start(&path).unwrap();
        let (spawner, receiver, rounds) = goroutine::run(|| {
            let (tx, rx) = chan::<usize>(0);
            let (ack_tx, ack_rx) = chan::<()>(0);
            let receiver = go(move || {
                ack_tx.send(()).unwrap();
                while rx.recv().is_ok() {
                    ack_tx.send(()).unwrap();
                }
            });
            let receiver_id = receiver.id();
            let spawner = go(move || {
                ack_rx.recv().unwrap();
                let mut rounds = Vec::new();
                for k in 0..ROUNDS {
                    let before: Vec<u64> = (0..3).map(|_| go(|| {}).id()).collect();
                    tx.send(k).unwrap();
                    let after: Vec<u64> = (0..3).map(|_| go(|| {}).id()).collect();
                    ack_rx.recv().unwrap();
                    rounds.push((before, after));
                }
                (goroutine::current_id(), rounds)
            });
            let (spawner_id, rounds) = spawner.join().unwrap();
            receiver.join().unwrap();
            (spawner_id, receiver_id, rounds)
        });
        let t = finish_trace(&path);
        let at = |pred: &dyn Fn(&Ev) -> bool| -> Vec<usize> {
            t.events.iter().enumerate().filter(|(_, e)| pred(&e.ev)).map(|(i, _)| i).collect()
        };
        // The send is one event of the spawner's: the receiver's GoUnblock
        // (it was parked), or the spawner's GoBlock (it was not yet).
        let sends = at(&|ev| match *ev {
            Ev::GoUnblock { g, by_g, .. } => g == receiver && by_g == spawner,
            Ev::GoBlock { g, .. } => g == spawner,
            _ => false,
        });
        let created = |g: u64| {
            let at = at(&|ev| matches!(*ev, Ev::GoCreate { g: c, parent, .. } if c == g && parent == spawner));
            assert_eq!(at.len(), 1, "g{g}'s GoCreate by g{spawner}");
            at[0]
        };
        for (k, (before, after)) in rounds.iter().enumerate() {
            let last_before = before.iter().map(|&g| created(g)).max().unwrap();
            let first_after = after.iter().map(|&g| created(g)).min().unwrap();
            assert!(
                sends.iter().any(|&s| last_before < s && s < first_after),
                "round {k}: no event of the send between the spawns before and after it"
            );
        }
        check_causal_order(&t);
    }
}

isolated_test! {
    fn runs_of_spawns_keep_their_parents() ["GOMAXPROCS" = "1"] {
        spawns_in_runs("1");
    }
}

isolated_test! {
    fn runs_of_spawns_keep_their_parents_across_ps() ["GOMAXPROCS" = "2"] {
        spawns_in_runs("2");
    }
}

/// Per goroutine, the events are in causal order once sorted by time:
/// Create < Start, Block < Unblock < Start, a SyscallExit that queued it
/// (`fast` 0) < Start, and nothing after End. With
/// two Ps, a GoUnblock's shared time must still come no earlier than the
/// GoBlock another M wrote, and a deferred GoCreate no later than its
/// goroutine's GoStart on another M. Events of different Ms may carry the
/// same time (a coarse clock: aarch64's counter ticks every 1-40 ns, and
/// emulated, coarser), and then their order is not in the file: a time is
/// checked as a group, in which some order must make every goroutine's
/// transitions valid.
fn check_causal_order(t: &Trace) {
    let mut order: Vec<&Event> = t.events.iter().collect();
    order.sort_by_key(|e| e.ts);
    let mut state: HashMap<u64, &str> = HashMap::new();
    for group in order.chunk_by(|a, b| a.ts == b.ts) {
        let mut left: Vec<&Event> = group.to_vec();
        while !left.is_empty() {
            // A GoStart last: of a blocked goroutine, its GoUnblock
            // (another M's) may be due first.
            let ok = |e: &&Event| transition(&state, e).is_ok();
            let at = left
                .iter()
                .position(|e| ok(e) && !matches!(e.ev, Ev::GoStart { .. }))
                .or_else(|| left.iter().position(ok));
            let Some(at) = at else {
                // No order of this time's events works: report the
                // first one's fault.
                let e = left[0];
                panic!("{}", transition(&state, e).unwrap_err());
            };
            let e = left.remove(at);
            if let Ok(Some((g, to))) = transition(&state, e) {
                state.insert(g, to);
            }
        }
    }
}

/// The state goroutine `e`'s event moves it to from `state`, `None` for
/// events of no goroutine's state, or why it may not happen now.
fn transition(
    state: &HashMap<u64, &'static str>,
    e: &Event,
) -> Result<Option<(u64, &'static str)>, String> {
    let check = |g: u64, ok: &[&str], what: &str, to: &'static str| match state.get(&g) {
        Some(s) if !ok.contains(s) => Err(format!("g{g} {what} while {s}")),
        _ => Ok(Some((g, to))),
    };
    match e.ev {
        Ev::GoCreate { g, .. } => Ok(Some((g, "runnable"))),
        // Blocked: a park cancelled (its GoStart follows its GoBlock at
        // once).
        Ev::GoStart { g, .. } => check(g, &["runnable", "blocked"], "started", "running"),
        Ev::GoStop { g, .. } => Ok(Some((g, "runnable"))),
        Ev::GoBlock { g, .. } => check(g, &["running"], "blocked", "blocked"),
        Ev::GoUnblock { g, .. } => check(g, &["blocked"], "unblocked", "runnable"),
        Ev::GoEnd { g, .. } => check(g, &["running"], "ended", "ended"),
        // Back from a system call, or from a kernel call outside the
        // runtime whose P sysmon revoked, with no P to go on: queued, and
        // a later GoStart runs it (docs/trace-format.md, "ProcRevoke").
        Ev::SyscallExit { g, fast: 0, .. } => {
            check(g, &["running"], "left a system call", "runnable")
        }
        _ => Ok(None),
    }
}

// The other events: names, syscalls and handoffs, timers, ProcStart/Stop,
// sysmon's samples; GOROUTINE_TRACE and the atexit hook write the file
// (the child exits without calling stop).
/// Runs test `child` in a new process at `procs` GOMAXPROCS, traced by
/// `GOROUTINE_TRACE` to a file named after `name`, and returns its trace,
/// decoded and checked by `check_common`.
fn child_trace(child: &str, name: &str, procs: &str) -> Trace {
    let path = trace_path(name);
    let out = common::spawn(
        child,
        &[
            ("GOROUTINE_TRACE", path.to_str().unwrap()),
            ("GOMAXPROCS", procs),
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
    t
}

#[test]
fn env_trace_has_the_other_events() {
    let t = child_trace("env_trace_child", "env", "2");
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
        has(&|e| matches!(
            e,
            Ev::GoBlock {
                wait_reason: 15,
                ..
            }
        )),
        "no sleep block"
    );
    assert!(
        has(&|e| matches!(e, Ev::GoUnblock { by_g: 0, .. })),
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
        .find(|e| matches!(e.ev, Ev::GoBlock { g, wait_reason: 15, .. } if g == sleeper))
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

// The netpoller's wake-ups read no clock of their own where they may share
// their batch's previous time: the GoUnblock reads its goroutine's GoBlock
// time from the word the ready sample takes, so the sample comes after it.
// (When it came first, every one of them read the clock: a third of an echo
// server's clock reads.)
#[test]
fn netpoll_wakeups_share_a_time() {
    let t = child_trace("netpoll_trace_child", "netpoll", "1");
    check_causal_order(&t);
    let polled: Vec<&Event> = t
        .events
        .iter()
        .filter(|e| matches!(e.ev, Ev::GoUnblock { by_g: 0, .. }))
        .collect();
    let shared = polled.iter().filter(|e| !e.stamped).count();
    // 4 clients x 200 round trips: a wake-up for most halves of them.
    assert!(polled.len() >= 400, "{} poller wake-ups", polled.len());
    assert!(
        shared * 2 >= polled.len(),
        "{shared} of {} poller wake-ups share a time",
        polled.len()
    );
}

#[test]
fn netpoll_trace_child() {
    use goroutine::net::{TcpListener, TcpStream};
    use std::io::{Read, Write};
    if !common::is_child("netpoll_trace_child") {
        return;
    }
    goroutine::run(|| {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        go(move || {
            while let Ok((mut c, _)) = l.accept() {
                go(move || {
                    let mut b = [0u8; 8];
                    while c.read_exact(&mut b).is_ok() {
                        c.write_all(&b).unwrap();
                    }
                });
            }
        });
        let clients: Vec<_> = (0..4)
            .map(|_| {
                go(move || {
                    let mut c = TcpStream::connect(addr).unwrap();
                    let mut b = [7u8; 8];
                    for _ in 0..200 {
                        c.write_all(&b).unwrap();
                        c.read_exact(&mut b).unwrap();
                    }
                })
            })
            .collect();
        for h in clients {
            h.join().unwrap();
        }
    });
    // No trace::stop: the atexit hook completes the file.
}

// A goroutine blocked in the kernel outside the runtime (std's sleep):
// sysmon revokes its P (ProcRevoke, from sysmon's batches, naming the
// goroutine and its system call); the goroutine gets a P back afterwards and
// ends normally. The trace tool's model draws it: a slice ended by the
// revocation, a mark, the blocked time counted as syscall time.
isolated_test! {
    fn proc_revoke_names_goroutine_and_syscall() ["GOMAXPROCS" = "1"] {
        let path = trace_path("revoke");
        goroutine::trace::start(&path).unwrap();
        goroutine::run(|| {
            let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let d = done.clone();
            let h = Builder::new()
                .name("blocker")
                .spawn(move || {
                    for _ in 0..3 {
                        std::thread::sleep(std::time::Duration::from_millis(50));
                    }
                    d.store(true, std::sync::atomic::Ordering::Relaxed);
                })
                .unwrap();
            // Work for the P while the blocker sleeps.
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                goroutine::time::sleep(std::time::Duration::from_millis(1));
            }
            h.join().unwrap();
        });
        wait_for_goroutines(0);
        goroutine::trace::stop().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let t = decode(&bytes).unwrap();
        check_common(&t);
        let blocker = t
            .events
            .iter()
            .find_map(|e| match &e.ev {
                Ev::GoName { g, name } if name == "blocker" => Some(*g),
                _ => None,
            })
            .expect("the blocker's GoName");
        let revokes: Vec<&Event> = t
            .events
            .iter()
            .filter(|e| matches!(e.ev, Ev::ProcRevoke { .. }))
            .collect();
        assert!(!revokes.is_empty(), "no ProcRevoke in the trace");
        for e in &revokes {
            assert_eq!(e.m, u32::MAX, "ProcRevoke comes from sysmon: {e:?}");
            let Ev::ProcRevoke { g, p, syscall_nr } = e.ev else {
                unreachable!()
            };
            assert_eq!(g, blocker, "{e:?}");
            assert_eq!(p, 0, "{e:?}");
            // qemu-user: /proc/<tid>/syscall gives the host's system call
            // number (README, "Supported platforms").
            if !cfg!(goroutine_qemu) {
                let nr = syscall_nr as i64;
                assert!(
                    nr == libc::SYS_clock_nanosleep || nr == libc::SYS_nanosleep,
                    "{e:?}"
                );
                // The tool's syscall table agrees with libc's numbers.
                let label = goroutine_trace::format::syscall_label(syscall_nr);
                assert!(label == "clock_nanosleep" || label == "nanosleep", "{label}");
            }
        }

        // The model: the blocker's slices end at each revocation, it runs
        // again after each, and its blocked time is syscall time.
        let full = goroutine_trace::decode::decode(
            &bytes,
            goroutine_trace::decode::DecodeOptions::default(),
            &mut |_, _| {},
        )
        .unwrap();
        let m = goroutine_trace::model::build(&full, &mut |_, _| {});
        use goroutine_trace::model::{EndReason, MarkKind};
        let slices: Vec<_> = m
            .lanes
            .iter()
            .flat_map(|l| &l.slices)
            .filter(|s| s.g == blocker)
            .collect();
        let revoked = slices
            .iter()
            .filter(|s| s.reason == EndReason::Revoked)
            .count();
        assert_eq!(revoked, revokes.len(), "{slices:?}");
        let last = slices.iter().max_by_key(|s| s.start).unwrap();
        assert_eq!(last.reason, EndReason::End, "{slices:?}");
        assert_eq!(
            m.marks
                .iter()
                .filter(|mk| matches!(mk.kind, MarkKind::Revoke { g, .. } if g == blocker))
                .count(),
            revokes.len()
        );
        let info = m.goroutines.iter().find(|g| g.id == blocker).unwrap();
        assert!(info.syscall >= 10_000_000, "{info:?}");
    }
}

// Two traces one after the other in one process. The buffers keep the
// first session's state (its generation, a half-filled batch) when it
// stops; the second session must start each of them afresh: its file holds
// exactly the second run's goroutines, each trace valid on its own. Plain
// threads (outside the runtime) spawn some of them, from their own buffers.
isolated_test! {
    fn second_trace_starts_afresh() ["GOMAXPROCS" = "2"] {
        let mut seen: Vec<HashSet<u64>> = Vec::new();
        for round in 0..2u64 {
            let path = trace_path(&format!("session{round}"));
            goroutine::trace::start(&path).unwrap();
            let inside = 300 + 200 * round;
            let outside = 5 + round;
            let sum = goroutine::run(move || {
                let (tx, rx) = chan::<u64>(0);
                for i in 0..inside {
                    let tx = tx.clone();
                    go(move || tx.send(i).unwrap());
                }
                let tx2 = tx.clone();
                std::thread::spawn(move || {
                    for i in 0..outside {
                        let tx = tx2.clone();
                        go(move || tx.send(inside + i).unwrap());
                    }
                })
                .join()
                .unwrap();
                drop(tx);
                (0..inside + outside).map(|_| rx.recv().unwrap()).sum::<u64>()
            });
            let n = inside + outside;
            assert_eq!(sum, n * (n - 1) / 2);
            wait_for_goroutines(0);
            goroutine::trace::stop().unwrap();

            let bytes = std::fs::read(&path).unwrap();
            let _ = std::fs::remove_file(&path);
            let t = decode(&bytes).unwrap();
            check_common(&t);
            let life = Lifecycle::of(&t);
            let created: HashSet<u64> = life.parents.keys().copied().collect();
            // Every goroutine that ran in this session was created in it.
            assert_eq!(life.started, created, "round {round}");
            // run's goroutine, and those spawned inside and outside.
            assert_eq!(created.len() as u64, 1 + n, "round {round}");
            assert_eq!(life.created_outside() as u64, 1 + outside, "round {round}");
            assert_eq!(created, life.ended, "round {round}");
            seen.push(created);
        }
        assert!(seen[0].is_disjoint(&seen[1]));
    }
}

// A trace that fills fewer batches than wake the writer (four): the
// writer still finds them while the trace runs (it looks at least every
// 80 ms), so they reach the file before `stop`. Skynet of 10,000 leaves
// at one P makes about 67,000 events, two batches of 64 KiB and part of a
// third.
isolated_test! {
    fn batches_reach_the_file_while_the_trace_runs() ["GOMAXPROCS" = "1"] {
        let path = trace_path("period");
        goroutine::trace::start(&path).unwrap();
        skynet_10k();
        // Generous for a loaded machine: the writer looks within 80 ms.
        let mut len = 0;
        for _ in 0..1000 {
            len = std::fs::metadata(&path).map_or(0, |m| m.len());
            if len >= BATCH_SIZE as u64 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        goroutine::trace::stop().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert!(
            len >= BATCH_SIZE as u64,
            "{len} bytes in the file before stop, {} after",
            bytes.len()
        );
        let t = decode(&bytes).unwrap();
        check_common(&t);
        assert!(t.batches >= 2 && t.batches < 8, "{} batches", t.batches);
    }
}

/// The trace writer's thread's voluntary context switches (each of its
/// looks at the queue is one), from Linux's `/proc`; `None` until the
/// thread has named itself.
#[cfg(target_os = "linux")]
fn writer_switches() -> Option<u64> {
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let dir = task.path();
        match std::fs::read_to_string(dir.join("comm")) {
            Ok(comm) if comm.trim_end() == "goroutine-trace" => {}
            _ => continue,
        }
        let status = std::fs::read_to_string(dir.join("status")).ok()?;
        let line = status
            .lines()
            .find(|l| l.starts_with("voluntary_ctxt_switches:"))?;
        return line.split_whitespace().nth(1)?.parse().ok();
    }
    None
}

// A trace with nothing to write: the writer's looks back off to one in
// 80 ms (about 12 a second; 100 at a fixed 10 ms).
#[cfg(target_os = "linux")]
isolated_test! {
    fn a_quiet_trace_wakes_its_writer_rarely() ["GOMAXPROCS" = "1"] {
        let path = trace_path("quiet");
        goroutine::trace::start(&path).unwrap();
        let mut before = None;
        for _ in 0..1000 {
            before = writer_switches();
            if before.is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let before = before.expect("no thread named goroutine-trace");
        std::thread::sleep(std::time::Duration::from_secs(1));
        let looks = writer_switches().unwrap() - before;
        goroutine::trace::stop().unwrap();
        let _ = std::fs::remove_file(&path);
        assert!(looks < 40, "{looks} looks in a second");
    }
}
