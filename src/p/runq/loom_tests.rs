//! Loom models (`RUSTFLAGS="--cfg loom" cargo test --release --lib runq`).
//! `RUNQ_SIZE` is 4 here, so a handful of items reach the full, overflow
//! and wrap-around states. Loom explores interleavings and the weak
//! memory behaviours it models (stale loads); it cannot produce "load
//! buffering" (a load reading a store that comes later in the
//! execution), so the `Acquire` that keeps the owner from overwriting a
//! slot a thief is still reading (module note, invariant 3) is argued in
//! the comments rather than model-checked.
use super::*;
use loom::sync::Arc;
use loom::thread;

type Q = RunQueue<u64>;

fn check(f: impl Fn() + Sync + Send + 'static) {
    // Exhaustive (no preemption bound): these models are small enough
    // (a few hundred executions each with loom's partial-order
    // reduction). `LOOM_MAX_PREEMPTIONS=N` bounds them if they grow.
    loom::model(f);
}

/// # Safety
/// The caller owns `q`.
unsafe fn drain_indices(q: &Q, out: &mut Vec<usize>) {
    // SAFETY: the caller owns `q`.
    while let Some((p, _)) = unsafe { q.get() } {
        out.push(index(p));
    }
}

/// # Safety
/// The caller owns `q`.
unsafe fn put_collect(q: &Q, i: usize, next: bool, out: &mut Vec<usize>) {
    // SAFETY: the caller owns `q`.
    if let Some(batch) = unsafe { q.put(item(i), next) } {
        let batch: Vec<usize> = batch.map(index).collect();
        assert_eq!(batch.len(), RUNQ_SIZE / 2 + 1);
        let (last, displaced) = batch.split_last().unwrap();
        assert!(
            displaced.windows(2).all(|w| w[0] < w[1]),
            "overflow not FIFO: {batch:?}"
        );
        assert!(
            displaced.iter().all(|d| d < last),
            "overflow not FIFO: {batch:?}"
        );
        out.extend(batch);
    }
}

/// How a thief treats the victim's runnext.
#[derive(Clone, Copy, Debug)]
enum Runnext {
    /// `steal_runnext = false`.
    Leave,
    /// `steal_runnext = true`, victim not running: no grace period.
    Take,
    /// `steal_runnext = true`, victim running: the grace period, which is
    /// a `yield_now` under loom. Loom then runs the other threads before
    /// the thief again, which prunes interleavings, so the runnext models
    /// run both with and without it.
    TakeAfterGrace,
}

/// Spawns a thief that owns `mine` (empty) and steals once from `victim`,
/// then takes one item from its own queue (or all, with `drain`); returns
/// the indices it took.
fn spawn_thief(
    mine: Arc<Q>,
    victim: &Arc<Q>,
    runnext: Runnext,
    drain: bool,
) -> thread::JoinHandle<Vec<usize>> {
    let victim = victim.clone();
    let steal_runnext = !matches!(runnext, Runnext::Leave);
    let running = matches!(runnext, Runnext::TakeAfterGrace);
    thread::spawn(move || {
        let mut got = Vec::new();
        // SAFETY: this thread owns `mine`, which is empty.
        unsafe {
            if let Some(p) = mine.steal_into(&victim, steal_runnext, || running) {
                got.push(index(p));
            }
            if drain {
                drain_indices(&mine, &mut got);
            } else if let Some((p, _)) = mine.get() {
                got.push(index(p));
            }
        }
        got
    })
}

fn new_q() -> Arc<Q> {
    Arc::new(Q::new())
}

/// Owner puts (ring and runnext) and gets while a thief steals.
#[test]
fn loom_put_get_vs_steal() {
    check(|| {
        let q = new_q();
        let mut got = Vec::new();
        // SAFETY: this thread owns `q`.
        unsafe {
            put_collect(&q, 0, false, &mut got);
            put_collect(&q, 1, false, &mut got);
        }
        let thief = spawn_thief(new_q(), &q, Runnext::Leave, true);
        // SAFETY: this thread owns `q`.
        unsafe {
            put_collect(&q, 2, false, &mut got);
            put_collect(&q, 3, true, &mut got);
            for _ in 0..2 {
                if let Some((p, _)) = q.get() {
                    got.push(index(p));
                }
            }
        }
        got.extend(thief.join().unwrap());
        // SAFETY: this thread owns `q`.
        unsafe { drain_indices(&q, &mut got) };
        got.sort_unstable();
        assert_eq!(got, [0, 1, 2, 3]);
        assert!(q.is_empty());
    });
}

/// Owner overflows a full ring (directly and through a runnext kick)
/// while a thief steals.
#[test]
fn loom_overflow_vs_steal() {
    check(|| {
        let q = new_q();
        let mut got = Vec::new();
        // SAFETY: this thread owns `q`.
        unsafe {
            for i in 0..RUNQ_SIZE {
                put_collect(&q, i, false, &mut got);
            }
        }
        assert!(got.is_empty());
        let thief = spawn_thief(new_q(), &q, Runnext::Leave, true);
        let n = RUNQ_SIZE;
        // SAFETY: this thread owns `q`.
        unsafe {
            put_collect(&q, n, false, &mut got);
            put_collect(&q, n + 1, true, &mut got);
            put_collect(&q, n + 2, true, &mut got);
            if let Some((p, _)) = q.get() {
                got.push(index(p));
            }
        }
        got.extend(thief.join().unwrap());
        // SAFETY: this thread owns `q`.
        unsafe { drain_indices(&q, &mut got) };
        got.sort_unstable();
        assert_eq!(got, (0..n + 3).collect::<Vec<_>>());
    });
}

/// Owner appends a batch (up to the full ring) while a thief steals.
#[test]
fn loom_push_back_batch_vs_steal() {
    check(|| {
        let q = new_q();
        let mut got = Vec::new();
        // SAFETY: this thread owns `q`.
        unsafe { put_collect(&q, 0, false, &mut got) };
        let thief = spawn_thief(new_q(), &q, Runnext::Leave, true);
        let mut rest = (1..=RUNQ_SIZE).map(item);
        // SAFETY: this thread owns `q`.
        let n = unsafe { q.push_back_batch(&mut rest) };
        // At least the free slots at the time the owner looked.
        assert!(n >= RUNQ_SIZE - 1);
        got.extend(rest.map(index));
        got.extend(thief.join().unwrap());
        // SAFETY: this thread owns `q`.
        unsafe { drain_indices(&q, &mut got) };
        got.sort_unstable();
        assert_eq!(got, (0..=RUNQ_SIZE).collect::<Vec<_>>());
    });
}

/// Two thieves (allowed to take runnext) against an owner's get.
#[test]
fn loom_two_thieves_vs_owner() {
    check(|| {
        let q = new_q();
        let mut got = Vec::new();
        // SAFETY: this thread owns `q`.
        unsafe {
            put_collect(&q, 0, false, &mut got);
            put_collect(&q, 1, false, &mut got);
            put_collect(&q, 2, true, &mut got);
        }
        let a = spawn_thief(new_q(), &q, Runnext::Take, true);
        let b = spawn_thief(new_q(), &q, Runnext::TakeAfterGrace, true);
        // SAFETY: this thread owns `q`.
        if let Some((p, inherit)) = unsafe { q.get() } {
            assert_eq!(inherit, index(p) == 2);
            got.push(index(p));
        }
        got.extend(a.join().unwrap());
        got.extend(b.join().unwrap());
        // SAFETY: this thread owns `q`.
        unsafe { drain_indices(&q, &mut got) };
        got.sort_unstable();
        assert_eq!(got, [0, 1, 2]);
    });
}

/// A thief steals from a thief that is publishing what it stole.
#[test]
fn loom_steal_from_thief() {
    check(|| {
        let q = new_q();
        let mut got = Vec::new();
        // SAFETY: this thread owns `q`.
        unsafe {
            for i in 0..RUNQ_SIZE {
                put_collect(&q, i, false, &mut got);
            }
        }
        let qa = new_q();
        // A steals 2 from the owner (keeps one queued) and runs one of its own.
        let a = spawn_thief(qa.clone(), &q, Runnext::Leave, false);
        // B steals from A.
        let b = spawn_thief(new_q(), &qa, Runnext::Leave, true);
        got.extend(a.join().unwrap());
        got.extend(b.join().unwrap());
        // SAFETY: `a` has exited; its queue is ours now (join is the handoff).
        unsafe { drain_indices(&qa, &mut got) };
        // SAFETY: this thread owns `q`.
        unsafe { drain_indices(&q, &mut got) };
        got.sort_unstable();
        assert_eq!(got, (0..RUNQ_SIZE).collect::<Vec<_>>());
    });
}

/// A longer owner run (ring wrap-around, overflow, runnext kicks) against
/// a thief that steals twice.
#[test]
fn loom_mixed_owner_vs_thief_twice() {
    check(|| {
        let q = new_q();
        let mut got = Vec::new();
        // SAFETY: this thread owns `q`.
        unsafe {
            for i in 0..3 {
                put_collect(&q, i, false, &mut got);
            }
        }
        let victim = q.clone();
        // Not `spawn_thief`: this one steals twice.
        let thief = thread::spawn(move || {
            let mine = Q::new();
            let mut got = Vec::new();
            for _ in 0..2 {
                // SAFETY: this thread owns `mine`, drained empty before each steal.
                unsafe {
                    if let Some(p) = mine.steal_into(&victim, true, || false) {
                        got.push(index(p));
                    }
                    drain_indices(&mine, &mut got);
                }
            }
            got
        });
        // SAFETY: this thread owns `q`.
        unsafe {
            put_collect(&q, 3, true, &mut got);
            put_collect(&q, 4, false, &mut got);
            if let Some((p, _)) = q.get() {
                got.push(index(p));
            }
            put_collect(&q, 5, false, &mut got);
            put_collect(&q, 6, true, &mut got);
            if let Some((p, _)) = q.get() {
                got.push(index(p));
            }
        }
        got.extend(thief.join().unwrap());
        // SAFETY: this thread owns `q`.
        unsafe { drain_indices(&q, &mut got) };
        got.sort_unstable();
        assert_eq!(got, (0..7).collect::<Vec<_>>());
    });
}

/// runnext is taken by exactly one of the owner's get and a thief.
#[test]
fn loom_runnext_owner_get_vs_thief() {
    for mode in [Runnext::Take, Runnext::TakeAfterGrace] {
        check(move || runnext_owner_get_vs_thief(mode));
    }
}

fn runnext_owner_get_vs_thief(mode: Runnext) {
    let q = new_q();
    // SAFETY: this thread owns `q`.
    unsafe { assert!(q.put(item(7), true).is_none()) };
    let thief = spawn_thief(new_q(), &q, mode, true);
    // SAFETY: this thread owns `q`.
    let mine = unsafe { q.get() };
    if let Some((p, inherit)) = mine {
        assert_eq!((index(p), inherit), (7, true));
    }
    let stolen = thief.join().unwrap();
    match mine {
        Some(_) => assert!(stolen.is_empty()),
        None => assert_eq!(stolen, [7]),
    }
    assert!(q.is_empty());
}

/// A put into runnext kicks the old runnext into the ring while a thief
/// tries to take runnext.
#[test]
fn loom_runnext_kick_vs_thief() {
    for mode in [Runnext::Take, Runnext::TakeAfterGrace] {
        check(move || runnext_kick_vs_thief(mode));
    }
}

fn runnext_kick_vs_thief(mode: Runnext) {
    let q = new_q();
    // SAFETY: this thread owns `q`.
    unsafe { assert!(q.put(item(0), true).is_none()) };
    let thief = spawn_thief(new_q(), &q, mode, true);
    let mut got = Vec::new();
    // SAFETY: this thread owns `q`.
    unsafe {
        // Kicks 0 into the ring (unless the thief took it first).
        assert!(q.put(item(1), true).is_none());
        if let Some((p, _)) = q.get() {
            got.push(index(p));
        }
    }
    got.extend(thief.join().unwrap());
    // SAFETY: this thread owns `q`.
    unsafe { drain_indices(&q, &mut got) };
    got.sort_unstable();
    assert_eq!(got, [0, 1]);
}

/// Go's RunSchedLocalQueueEmptyTest as a model: the queue holds at least
/// one item throughout, so `is_empty` must never say otherwise.
#[test]
fn loom_is_empty_never_spurious() {
    for (next0, next1) in [(false, false), (false, true), (true, false), (true, true)] {
        check(move || {
            let q = new_q();
            // SAFETY: this thread owns `q`.
            unsafe { assert!(q.put(item(0), next0).is_none()) };
            let checker = {
                let q = q.clone();
                thread::spawn(move || assert!(!q.is_empty(), "spuriously empty ({next0}, {next1})"))
            };
            // SAFETY: this thread owns `q`.
            unsafe {
                assert!(q.put(item(1), next1).is_none());
                assert!(q.get().is_some());
            }
            checker.join().unwrap();
            // SAFETY: this thread owns `q`.
            unsafe {
                assert!(q.get().is_some());
                assert!(q.get().is_none());
            }
        });
    }
}
