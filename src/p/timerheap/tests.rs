use super::*;

fn entry(when: i64) -> Entry {
    Entry {
        when,
        seq: 0,
        timer: Timer::new(TimerFn::Call(Box::new(|| {}))),
    }
}

#[test]
fn four_ary_heap_pops_in_order() {
    let mut h = Vec::new();
    let mut x = 12345u64;
    let mut want = Vec::new();
    for _ in 0..1000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let w = (x % 10_000) as i64 + 1;
        want.push(w);
        h.push(entry(w));
        let i = h.len() - 1;
        sift_up(&mut h, i);
    }
    want.sort();
    let got: Vec<i64> = (0..1000).map(|_| remove_at(&mut h, 0).when).collect();
    assert_eq!(got, want);
}

#[test]
fn stopped_timers_leave_the_heap_at_once_and_never_fire() {
    let heap: &'static Timers = Box::leak(Box::new(Timers::new()));
    let fired = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let timers: Vec<_> = (0..400)
        .map(|i| {
            let f = fired.clone();
            let t = Timer::new(TimerFn::Call(Box::new(move || {
                f.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            })));
            // Out of order, so that removals come from inside the heap.
            Timer::start_on::<Quiet>(&t, heap, 10 + (i * 37) % 400, 0);
            t
        })
        .collect();
    let stopped = timers
        .iter()
        .step_by(2)
        .filter(|t| t.stop_with::<Quiet>())
        .count();
    assert_eq!(stopped, 200);
    assert_eq!(heap.len(), 200, "no stopped entry lingers");
    assert!(timers.iter().step_by(2).all(|t| !t.stop_with::<Quiet>()));
    // Resets move entries inside the heap; the count stays.
    for (i, t) in timers.iter().enumerate().skip(1).step_by(2) {
        assert!(Timer::start_on::<Quiet>(t, heap, 5 + (i as i64 * 13) % 500, 0).0);
    }
    assert_eq!(heap.len(), 200);
    check_heap(heap);
    assert_eq!(heap.run_due::<Quiet>(1_000_000), 200);
    assert_eq!(fired.load(std::sync::atomic::Ordering::Relaxed), 200);
    assert_eq!(heap.len(), 0);
    assert_eq!(heap.next(), 0);
}

/// Heap order, and every entry's timer knows its index.
fn check_heap(heap: &Timers) {
    let h = lock(&heap.heap);
    for (i, e) in h.iter().enumerate() {
        assert_eq!(e.timer.idx.load(Ordering::Relaxed), i);
        if i > 0 {
            assert!(h[(i - 1) / 4].when <= e.when);
        }
    }
    assert_eq!(heap.next(), h.first().map_or(0, |e| e.when));
}

#[test]
fn random_starts_and_stops_keep_the_heap_exact() {
    let heap: &'static Timers = Box::leak(Box::new(Timers::new()));
    let timers: Vec<_> = (0..64)
        .map(|_| Timer::new(TimerFn::Call(Box::new(|| {}))))
        .collect();
    let mut pending = [false; 64];
    let mut x = 99u64;
    for _ in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let i = (x % 64) as usize;
        if x & 64 == 0 {
            let (was, _) =
                Timer::start_on::<Quiet>(&timers[i], heap, (x >> 8) as i64 % 1000 + 1, 0);
            assert_eq!(was, pending[i]);
            pending[i] = true;
        } else {
            assert_eq!(timers[i].stop_with::<Quiet>(), pending[i]);
            pending[i] = false;
        }
        assert_eq!(heap.len(), pending.iter().filter(|p| **p).count());
    }
    check_heap(heap);
}

#[test]
fn a_later_reset_leaves_the_entry_and_fires_once_at_the_new_time() {
    let heap: &'static Timers = Box::leak(Box::new(Timers::new()));
    let fired = Arc::new(AtomicUsize::new(0));
    let f = fired.clone();
    let t = Timer::new(TimerFn::Call(Box::new(move || {
        f.fetch_add(1, Ordering::SeqCst);
    })));
    assert_eq!(Timer::start_on::<Quiet>(&t, heap, 10, 0), (false, true));
    // Later: pending, not earlier; the entry keeps its time.
    assert_eq!(Timer::start_on::<Quiet>(&t, heap, 50, 0), (true, false));
    assert_eq!((heap.len(), heap.next()), (1, 10));
    // Its old time: re-queued at the new one, not fired.
    assert_eq!(heap.run_due::<Quiet>(20), 0);
    assert_eq!((heap.len(), heap.next()), (1, 50));
    check_heap(heap);
    // Earlier again: the entry moves at once.
    assert_eq!(Timer::start_on::<Quiet>(&t, heap, 30, 0), (true, true));
    assert_eq!(heap.next(), 30);
    assert_eq!(Timer::start_on::<Quiet>(&t, heap, 40, 0), (true, false));
    assert_eq!(heap.run_due::<Quiet>(35), 0);
    assert_eq!(heap.run_due::<Quiet>(40), 1);
    assert_eq!(fired.load(Ordering::SeqCst), 1);
    assert_eq!((heap.len(), heap.next()), (0, 0));
    // A stop after a later reset removes the entry, which never fires.
    Timer::start_on::<Quiet>(&t, heap, 10, 0);
    Timer::start_on::<Quiet>(&t, heap, 60, 0);
    assert!(t.stop_with::<Quiet>());
    assert_eq!((heap.len(), heap.next()), (0, 0));
    assert_eq!(heap.run_due::<Quiet>(100), 0);
    assert_eq!(fired.load(Ordering::SeqCst), 1);
}

#[test]
fn move_all_keeps_pending_timers_only() {
    let (a, b): (&'static Timers, &'static Timers) = (
        Box::leak(Box::new(Timers::new())),
        Box::leak(Box::new(Timers::new())),
    );
    let timers: Vec<_> = (0..10)
        .map(|i| {
            let t = Timer::new(TimerFn::Call(Box::new(|| {})));
            Timer::start_on::<Quiet>(&t, a, 100 - i, 0);
            t
        })
        .collect();
    timers[3].stop_with::<Quiet>();
    a.move_all(b);
    assert_eq!((a.len(), a.next()), (0, 0));
    assert_eq!(b.len(), 9);
    check_heap(b);
    assert!(
        timers[4].stop_with::<Quiet>(),
        "a moved timer stops on its new heap"
    );
    assert!(!timers[3].stop_with::<Quiet>());
    assert_eq!(b.run_due::<Quiet>(1000), 8);
}
