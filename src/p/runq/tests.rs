use super::*;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering::*};
use std::thread;
use std::time::{Duration, Instant};

type Q = RunQueue<u64>;

/// # Safety
/// The caller owns `q`.
unsafe fn put_fits(q: &Q, i: usize, next: bool) {
    // SAFETY: the caller owns `q`.
    let overflow = unsafe { q.put(item(i), next) };
    assert!(overflow.is_none(), "unexpected overflow");
}

/// # Safety
/// The caller owns `q`.
unsafe fn get_index(q: &Q) -> Option<usize> {
    // SAFETY: the caller owns `q`.
    unsafe { q.get() }.map(|(p, _)| index(p))
}

/// Spins (then yields) until `cond` holds; panics if another thread of
/// the test panicked (`aborted`), so a failure never hangs the test.
fn spin_until(aborted: &AtomicBool, mut cond: impl FnMut() -> bool) {
    let mut spins = 0u32;
    while !cond() {
        assert!(
            !aborted.load(Acquire),
            "another thread of this test panicked"
        );
        if spins < 64 {
            std::hint::spin_loop();
            spins += 1;
        } else {
            thread::yield_now();
        }
    }
}

/// Sets its flag if dropped during a panic, telling the other threads of
/// a test to stop waiting for this one.
struct SetOnPanic<'a>(&'a AtomicBool);

impl Drop for SetOnPanic<'_> {
    fn drop(&mut self) {
        if thread::panicking() {
            self.0.store(true, Release);
        }
    }
}

/// Go's TestSchedLocalQueue.
#[test]
fn sched_local_queue() {
    let q = Q::new();
    for i in 0..RUNQ_SIZE {
        // SAFETY: this thread owns `q` throughout.
        unsafe {
            assert_eq!(get_index(&q), None, "not empty initially");
            assert!(q.is_empty());
            for j in 0..i {
                put_fits(&q, j, false);
            }
            assert_eq!(q.len(), i);
            assert_eq!(q.is_empty(), i == 0);
            for j in 0..i {
                assert_eq!(get_index(&q), Some(j), "bad element");
            }
            assert_eq!(get_index(&q), None, "not empty afterwards");
        }
        assert!(q.is_empty());
    }
}

#[test]
fn runnext_is_lifo_and_inherits_time() {
    let q = Q::new();
    // SAFETY: this thread owns `q` throughout.
    unsafe {
        put_fits(&q, 1, false);
        put_fits(&q, 2, true);
        put_fits(&q, 3, true); // kicks 2 to the ring, behind 1
        assert_eq!(q.len(), 3);
        assert_eq!(q.get(), Some((item(3), true)));
        assert_eq!(q.get(), Some((item(1), false)));
        assert_eq!(q.get(), Some((item(2), false)));
        assert_eq!(q.get(), None);

        // G a readies G b, both through runnext, with an empty ring: b
        // runs next and inherits the slice; a, kicked to the ring, runs
        // after it in a slice of its own.
        put_fits(&q, 10, true);
        put_fits(&q, 11, true);
        assert_eq!(q.get(), Some((item(11), true)));
        assert_eq!(q.get(), Some((item(10), false)));
        assert_eq!(q.get(), None);
    }
    assert!(q.is_empty());
}

#[test]
fn peek_shows_the_ring_item_next_without_taking_it() {
    let q = Q::new();
    // SAFETY: this thread owns `q` throughout.
    unsafe {
        assert_eq!(q.peek(), None);
        put_fits(&q, 1, true); // runnext only: the ring is empty
        assert_eq!(q.peek(), None);
        put_fits(&q, 2, false);
        put_fits(&q, 3, false);
        assert_eq!(q.peek(), Some(item(2)));
        assert_eq!(q.len(), 3);
        assert_eq!(q.get(), Some((item(1), true)));
        assert_eq!(q.peek(), Some(item(2)));
        assert_eq!(q.get(), Some((item(2), false)));
        assert_eq!(q.peek(), Some(item(3)));
        assert_eq!(q.get(), Some((item(3), false)));
        assert_eq!(q.peek(), None);
    }
}

#[test]
fn peek_n_shows_the_ring_items_next_and_the_head() {
    let q = Q::new();
    // SAFETY: this thread owns `q` throughout.
    unsafe {
        assert_eq!(q.peek_n::<3>(), (0, [None; 3]));
        put_fits(&q, 1, true); // runnext only: the ring is empty
        assert_eq!(q.peek_n::<3>(), (0, [None; 3]));
        for i in 2..=5 {
            put_fits(&q, i, false);
        }
        assert_eq!(
            q.peek_n::<3>(),
            (0, [Some(item(2)), Some(item(3)), Some(item(4))])
        );
        assert_eq!(q.get(), Some((item(1), true)));
        assert_eq!(q.get(), Some((item(2), false)));
        assert_eq!(q.get(), Some((item(3), false)));
        assert_eq!(q.peek_n::<3>(), (2, [Some(item(4)), Some(item(5)), None]));
        assert_eq!(q.len(), 2);
    }
}

/// Go's TestSchedLocalQueueSteal.
#[test]
fn sched_local_queue_steal() {
    let p1 = Q::new();
    let p2 = Q::new();
    let mut seen = vec![0u32; RUNQ_SIZE];
    for i in 0..RUNQ_SIZE {
        seen[..i].fill(0);
        // SAFETY: this thread owns both queues; p2's ring is empty.
        unsafe {
            for j in 0..i {
                put_fits(&p1, j, false);
            }
            let mut stolen = 0;
            if let Some(p) = p2.steal_into(&p1, true, || true) {
                stolen += 1;
                seen[index(p)] += 1;
            }
            while let Some(j) = get_index(&p2) {
                stolen += 1;
                seen[j] += 1;
            }
            while let Some(j) = get_index(&p1) {
                seen[j] += 1;
            }
            assert!(seen[..i].iter().all(|&s| s == 1), "i={i}: {seen:?}");
            assert!(
                stolen == i / 2 || stolen == i / 2 + 1,
                "i={i}: stole {stolen}"
            );
        }
    }
}

#[test]
fn steal_keeps_order_and_takes_runnext_only_when_ring_empty() {
    let p1 = Q::new();
    let p2 = Q::new();
    // SAFETY: this thread owns both queues; p2's ring is empty at each steal.
    unsafe {
        for j in 0..5 {
            put_fits(&p1, j, false);
        }
        put_fits(&p1, 99, true);
        // 5 in the ring: steal 3 (0, 1, 2); 2 is returned, 0 and 1 queued.
        assert_eq!(p2.steal_into(&p1, true, || false), Some(item(2)));
        assert_eq!(get_index(&p2), Some(0));
        assert_eq!(get_index(&p2), Some(1));
        assert_eq!(get_index(&p2), None);
        // 2 left: steal 1.
        assert_eq!(p2.steal_into(&p1, true, || false), Some(item(3)));
        assert_eq!(p2.steal_into(&p1, true, || false), Some(item(4)));
        // Ring empty: runnext only if allowed.
        assert_eq!(p2.steal_into(&p1, false, || false), None);
        assert!(!p1.is_empty());
        let start = Instant::now();
        assert_eq!(p2.steal_into(&p1, true, || true), Some(item(99)));
        assert!(start.elapsed() >= Duration::from_micros(3));
        assert!(p1.is_empty());
        assert_eq!(p2.steal_into(&p1, true, || true), None);
    }
}

// A thief that waits to take a running victim's runnext leaves it if the
// victim ran an item from runnext meanwhile (a fresh handoff, maybe of
// the same G), and takes it if the count stood still.
#[test]
fn runnext_left_to_a_victim_that_hands_over_meanwhile() {
    use std::cell::Cell;
    let p1 = Q::new();
    let p2 = Q::new();
    // SAFETY: this thread owns both queues; p2's ring is empty at each steal.
    unsafe {
        put_fits(&p1, 7, true);
        // The count moves between the looks before and after the wait.
        let handoffs = Cell::new(0u64);
        let moving = || {
            handoffs.set(handoffs.get() + 1);
            Some(handoffs.get())
        };
        assert_eq!(p2.steal_into_counted(&p1, true, moving), None);
        assert_eq!(handoffs.get(), 2, "looked before and after the wait");
        assert!(!p1.is_empty(), "runnext left to its owner");
        // The victim stopped running during the wait: take it.
        let running = Cell::new(true);
        let stops = || running.replace(false).then_some(5);
        let got = p2
            .steal_into_counted(&p1, true, stops)
            .map(|(p, n)| (index(p), n));
        assert_eq!(got, Some((7, 1)));
        // A count that stands still: the victim kept running its own
        // goroutine, and the readied one is taken after the wait.
        put_fits(&p1, 8, true);
        let got = p2
            .steal_into_counted(&p1, true, || Some(5))
            .map(|(p, n)| (index(p), n));
        assert_eq!(got, Some((8, 1)));
        assert!(p1.is_empty());
    }
}

#[test]
fn overflow_moves_half_plus_new_item_in_fifo_order() {
    let q = Q::new();
    // SAFETY: this thread owns `q` throughout.
    unsafe {
        for j in 0..RUNQ_SIZE {
            put_fits(&q, j, false);
        }
        let batch = q.put(item(RUNQ_SIZE), false).expect("ring full");
        assert_eq!(batch.len(), RUNQ_SIZE / 2 + 1);
        let got: Vec<usize> = batch.map(index).collect();
        let want: Vec<usize> = (0..RUNQ_SIZE / 2).chain([RUNQ_SIZE]).collect();
        assert_eq!(got, want);
        assert_eq!(q.len(), RUNQ_SIZE / 2);
        for j in RUNQ_SIZE / 2..RUNQ_SIZE {
            assert_eq!(get_index(&q), Some(j));
        }
        assert_eq!(get_index(&q), None);

        // Overflow through a runnext kick: the kicked item ends the batch.
        for j in 0..RUNQ_SIZE {
            put_fits(&q, j, false);
        }
        put_fits(&q, 1000, true);
        let batch = q.put(item(1001), true).expect("ring full");
        let got: Vec<usize> = batch.map(index).collect();
        let want: Vec<usize> = (0..RUNQ_SIZE / 2).chain([1000]).collect();
        assert_eq!(got, want);
        assert_eq!(q.get(), Some((item(1001), true)));
        for j in RUNQ_SIZE / 2..RUNQ_SIZE {
            assert_eq!(get_index(&q), Some(j));
        }
        assert_eq!(get_index(&q), None);

        // Many laps with the counters wrapping far away from zero is
        // covered by the stress test; here, many overflows in a row.
        let mut next_in = 0;
        let mut out = Vec::new();
        for _ in 0..10 * RUNQ_SIZE {
            if let Some(batch) = q.put(item(next_in), false) {
                out.extend(batch.map(index));
            }
            next_in += 1;
        }
        q.drain(|p| out.push(index(p)));
        out.sort_unstable();
        assert_eq!(out, (0..next_in).collect::<Vec<_>>());
    }
}

#[test]
fn counters_wrap() {
    let q = Q::new();
    let start = u32::MAX - 3;
    q.head.store(start, Relaxed);
    q.tail.store(start, Relaxed);
    let p2 = Q::new();
    // SAFETY: this thread owns both queues.
    unsafe {
        for j in 0..RUNQ_SIZE {
            put_fits(&q, j, false);
        }
        assert_eq!(q.len(), RUNQ_SIZE);
        let batch = q.put(item(RUNQ_SIZE), false).expect("ring full");
        assert_eq!(batch.len(), RUNQ_SIZE / 2 + 1);
        assert_eq!(
            p2.steal_into(&q, false, || false),
            Some(item(RUNQ_SIZE / 2 + RUNQ_SIZE / 4 - 1))
        );
        assert_eq!(get_index(&q), Some(RUNQ_SIZE / 2 + RUNQ_SIZE / 4));
    }
}

#[test]
fn drain_push_back_batch_and_len() {
    let q = Q::new();
    // SAFETY: this thread owns `q`.
    unsafe {
        let mut src = (0..RUNQ_SIZE + 10).map(item);
        assert_eq!(q.push_back_batch(&mut src), RUNQ_SIZE);
        assert_eq!(
            src.next(),
            Some(item(RUNQ_SIZE)),
            "left-over items stay in the iterator"
        );
        assert_eq!(q.len(), RUNQ_SIZE);
        assert_eq!(q.push_back_batch(&mut src), 0);
        assert_eq!(get_index(&q), Some(0));
        assert_eq!(q.push_back_batch(&mut src), 1);
        assert_eq!(src.next(), Some(item(RUNQ_SIZE + 2)));
        put_fits(&q, 5000, true);
        assert_eq!(q.len(), RUNQ_SIZE + 1);
        let mut out = Vec::new();
        q.drain(|p| out.push(index(p)));
        let want: Vec<usize> = [5000]
            .into_iter()
            .chain(1..RUNQ_SIZE)
            .chain([RUNQ_SIZE + 1])
            .collect();
        assert_eq!(out, want);
        assert!(q.is_empty());
        assert_eq!(q.len(), 0);
        q.drain(|_| panic!("queue is empty"));
    }
}

/// Go's TestSchedLocalQueueEmpty (`RunSchedLocalQueueEmptyTest`): a queue
/// that holds at least one item throughout, while the owner puts one and
/// gets one, must never look empty. With a thief (which steals in every
/// third round and checks emptiness in the others), it may only look
/// empty in a round in which the thief stole something.
fn run_empty_test(with_thief: bool, max_rounds: u32, max_time: Duration) {
    let q = Q::new();
    let thief_q = Q::new();
    let helpers = 1 + u32::from(with_thief);
    let participants = helpers + 1;
    // Round number published by the owner; 0 before the first, STOP at the end.
    const STOP: u32 = u32::MAX;
    let round = AtomicU32::new(0);
    let arrived = AtomicU32::new(0);
    let finished = AtomicU32::new(0);
    let saw_empty = AtomicBool::new(false);
    let stolen = AtomicU32::new(0);
    let aborted = AtomicBool::new(false);
    let arrive = |r: u32| {
        arrived.fetch_add(1, AcqRel);
        spin_until(&aborted, || arrived.load(Acquire) >= participants * r);
    };
    let wait_round = |r: u32| {
        spin_until(&aborted, || round.load(Acquire) >= r);
        round.load(Acquire) != STOP
    };
    thread::scope(|s| {
        s.spawn(|| {
            let _guard = SetOnPanic(&aborted);
            let mut r = 1;
            while wait_round(r) {
                arrive(r);
                if q.is_empty() {
                    saw_empty.store(true, Relaxed);
                }
                finished.fetch_add(1, Release);
                r += 1;
            }
        });
        if with_thief {
            s.spawn(|| {
                let _guard = SetOnPanic(&aborted);
                let mut r = 1;
                while wait_round(r) {
                    arrive(r);
                    if r % 3 != 0 {
                        // A second checker in two rounds out of three, so
                        // that most rounds still test emptiness strictly.
                        if q.is_empty() {
                            saw_empty.store(true, Relaxed);
                        }
                    } else {
                        let mut n = 0;
                        // SAFETY: this thread owns `thief_q`, empty at each round start.
                        unsafe {
                            if thief_q.steal_into(&q, r % 2 == 0, || r % 4 == 0).is_some() {
                                n += 1;
                            }
                            while thief_q.get().is_some() {
                                n += 1;
                            }
                        }
                        stolen.store(n, Relaxed);
                    }
                    finished.fetch_add(1, Release);
                    r += 1;
                }
            });
        }
        // The owner.
        let _guard = SetOnPanic(&aborted);
        let start = Instant::now();
        let mut r = 1;
        while r <= max_rounds && start.elapsed() < max_time {
            let next0 = r & 1 == 0;
            let next1 = r & 2 == 0;
            saw_empty.store(false, Relaxed);
            stolen.store(0, Relaxed);
            let mut got = 0;
            // SAFETY: this thread owns `q`.
            unsafe {
                put_fits(&q, 0, next0);
                round.store(r, Release);
                arrive(r);
                put_fits(&q, 1, next1);
                got += u32::from(q.get().is_some());
                spin_until(&aborted, || finished.load(Acquire) >= helpers * r);
                while q.get().is_some() {
                    got += 1;
                }
            }
            let stolen = stolen.load(Relaxed);
            assert_eq!(got + stolen, 2, "round {r}: items lost or duplicated");
            assert!(
                !saw_empty.load(Relaxed) || stolen > 0,
                "round {r}: queue looked empty (next0={next0}, next1={next1})"
            );
            r += 1;
        }
        round.store(STOP, Release);
    });
}

#[test]
fn sched_local_queue_empty() {
    run_empty_test(false, 50_000, Duration::from_millis(150));
}

#[test]
fn sched_local_queue_empty_with_thief() {
    run_empty_test(true, 50_000, Duration::from_millis(150));
}

/// One owner putting and getting 100k items (with runnext and overflow)
/// while two thieves steal from it and from each other: every item is
/// taken exactly once.
#[test]
fn stress_owner_vs_two_thieves() {
    const ITEMS: usize = 100_000;
    let seen: Vec<AtomicU8> = (0..ITEMS).map(|_| AtomicU8::new(0)).collect();
    let mark = |p: NonNull<u64>| {
        let prev = seen[index(p)].fetch_add(1, Relaxed);
        assert_eq!(prev, 0, "item {} taken twice", index(p));
    };
    let owner_q = Q::new();
    let thief_qs = [Q::new(), Q::new()];
    let done = AtomicBool::new(false);
    // Start near the wrap so the counters cross u32::MAX during the run.
    owner_q.head.store(u32::MAX - 5000, Relaxed);
    owner_q.tail.store(u32::MAX - 5000, Relaxed);
    thread::scope(|s| {
        for k in 0..2 {
            let (me, other) = (&thief_qs[k], &thief_qs[1 - k]);
            let (owner_q, done, mark) = (&owner_q, &done, &mark);
            s.spawn(move || {
                let mut round = 0u32;
                loop {
                    let finished = done.load(Acquire);
                    round = round.wrapping_add(1);
                    let victim = if round % 4 == 0 { other } else { owner_q };
                    // SAFETY: this thread owns `me`, drained empty below
                    // before each steal.
                    unsafe {
                        if let Some(p) = me.steal_into(victim, round % 2 == 0, || round % 16 == 0) {
                            mark(p);
                        }
                        while let Some((p, _)) = me.get() {
                            mark(p);
                        }
                    }
                    if finished {
                        break;
                    }
                }
            });
        }
        // Stops the thieves if the owner panics.
        let _guard = SetOnPanic(&done);
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut rand = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut next_item = 0;
        while next_item < ITEMS {
            let burst = (rand() % 400) as usize + 1;
            for _ in 0..burst.min(ITEMS - next_item) {
                // SAFETY: this thread owns `owner_q`.
                if let Some(batch) = unsafe { owner_q.put(item(next_item), rand() % 4 == 0) } {
                    batch.for_each(mark);
                }
                next_item += 1;
            }
            for _ in 0..rand() % 400 {
                // SAFETY: this thread owns `owner_q`.
                match unsafe { owner_q.get() } {
                    Some((p, _)) => mark(p),
                    None => break,
                }
            }
        }
        // SAFETY: this thread owns `owner_q`.
        unsafe { owner_q.drain(mark) };
        done.store(true, Release);
    });
    assert!(owner_q.is_empty() && thief_qs.iter().all(Q::is_empty));
    let missing: Vec<usize> = (0..ITEMS).filter(|&i| seen[i].load(Relaxed) != 1).collect();
    assert!(
        missing.is_empty(),
        "{} items not taken exactly once: {:?}",
        missing.len(),
        &missing[..missing.len().min(20)]
    );
}
