use super::*;
use loom::sync::atomic::AtomicUsize;
use loom::thread;

fn heap() -> &'static Timers {
    Box::leak(Box::new(Timers::new()))
}

fn counting_timer() -> (Arc<Timer>, Arc<AtomicUsize>) {
    let fired = Arc::new(AtomicUsize::new(0));
    let f = fired.clone();
    let t = Timer::new(TimerFn::Call(Box::new(move || {
        f.fetch_add(1, Ordering::SeqCst);
    })));
    (t, fired)
}

/// stop() racing the firing: exactly one of them wins.
#[test]
fn stop_races_fire() {
    loom::model(|| {
        let h = heap();
        let (t, fired) = counting_timer();
        Timer::start_on::<Quiet>(&t, h, 5, 0);
        let t2 = t.clone();
        let stopper = thread::spawn(move || t2.stop_with::<Quiet>());
        h.run_due::<Quiet>(10);
        let stopped = stopper.join().unwrap();
        let n = fired.load(Ordering::SeqCst);
        assert_eq!(
            n + stopped as usize,
            1,
            "fired {n}, stop returned {stopped}"
        );
    });
}

/// Arms a timer at 5 and races a reset to 7 (later: the entry stays)
/// against a run of the heap at `run_at`, then runs it at 10. Returns
/// whether the reset found the timer pending, and the firings after the
/// racing run and in all; the heap must end empty.
fn reset_racing_a_run(run_at: i64) -> (bool, usize, usize) {
    let h = heap();
    let (t, fired) = counting_timer();
    Timer::start_on::<Quiet>(&t, h, 5, 0);
    let t2 = t.clone();
    let resetter = thread::spawn(move || Timer::start_on::<Quiet>(&t2, h, 7, 0).0);
    h.run_due::<Quiet>(run_at);
    let was_pending = resetter.join().unwrap();
    let before = fired.load(Ordering::SeqCst);
    h.run_due::<Quiet>(10);
    assert_eq!((h.len(), h.next()), (0, 0));
    (was_pending, before, fired.load(Ordering::SeqCst))
}

/// A reset racing the firing, at a time only the first arm is due: the
/// old arm fires at most once, and not at all if the reset found it
/// pending; the new arm fires exactly once when the heap runs again.
#[test]
fn reset_races_fire() {
    loom::model(|| {
        let (was_pending, before, after) = reset_racing_a_run(6);
        assert!(before <= 1);
        if was_pending {
            assert_eq!(before, 0);
        }
        assert_eq!(after - before, 1, "the reset arm fires exactly once");
    });
}

/// The same race at a time both arms are due: one firing if the reset
/// found the timer pending (the reset's arm), two if the first arm had
/// fired before it.
#[test]
fn later_reset_races_fire_due_both() {
    loom::model(|| {
        let (was_pending, _, n) = reset_racing_a_run(10);
        assert_eq!(n, if was_pending { 1 } else { 2 }, "fired {n} times");
    });
}

/// A timer re-armed onto another heap while both heaps run: each arm
/// fires at most once, and the replaced arm not at all (its entry on the
/// first heap is a zombie): one firing if the re-arm found the first arm
/// pending, two if the first had already fired.
#[test]
fn rearm_onto_another_heap() {
    loom::model(|| {
        let (a, b) = (heap(), heap());
        let (t, fired) = counting_timer();
        Timer::start_on::<Quiet>(&t, a, 5, 0);
        let t2 = t.clone();
        let mover = thread::spawn(move || {
            let (was_pending, _) = Timer::start_on::<Quiet>(&t2, b, 5, 0);
            b.run_due::<Quiet>(10);
            was_pending
        });
        a.run_due::<Quiet>(10);
        let was_pending = mover.join().unwrap();
        a.run_due::<Quiet>(10);
        let n = fired.load(Ordering::SeqCst);
        assert_eq!(n, if was_pending { 1 } else { 2 }, "fired {n} times");
        assert_eq!(a.next(), 0);
        assert_eq!(b.next(), 0);
    });
}

/// A channel timer (module note, "Channel timers"), a count of the
/// values sent and not received standing for its channel.
fn channel_timer() -> (Arc<Timer>, Arc<AtomicUsize>) {
    let sent = Arc::new(AtomicUsize::new(0));
    (Timer::new(TimerFn::SendCount(sent.clone())), sent)
}

/// Go 1.23's stop racing the firing and a receive: once stop returns,
/// no value is left to receive, then or later, and stop returns true
/// exactly when the value was not received (it stopped the firing, or
/// withdrew the value sent).
#[test]
fn channel_timer_stop_races_fire_and_receive() {
    loom::model(|| {
        let h = heap();
        let (t, sent) = channel_timer();
        Timer::start_on::<Quiet>(&t, h, 5, 0);
        let (t2, sent2) = (t.clone(), sent.clone());
        let stopper = thread::spawn(move || {
            let stopped = t2.stop_with::<Quiet>();
            (stopped, sent2.load(Ordering::SeqCst))
        });
        let sent3 = sent.clone();
        let receiver = thread::spawn(move || sent3.swap(0, Ordering::SeqCst));
        h.run_due::<Quiet>(10);
        let (stopped, left_at_stop) = stopper.join().unwrap();
        let received = receiver.join().unwrap();
        assert_eq!(left_at_stop, 0, "a value left after stop returned");
        assert_eq!(sent.load(Ordering::SeqCst), 0, "a value sent after stop");
        assert!(received <= 1);
        assert_eq!(
            stopped as usize + received,
            1,
            "stop returned {stopped}, received {received}"
        );
    });
}

/// A reset to later racing the old arm's firing (the entry may stay,
/// module note): once reset returns, no old value is left, reset finds
/// the old arm pending (nobody received), and the new arm delivers
/// exactly one value.
#[test]
fn channel_timer_reset_races_fire() {
    loom::model(|| {
        let h = heap();
        let (t, sent) = channel_timer();
        Timer::start_on::<Quiet>(&t, h, 5, 0);
        let (t2, sent2) = (t.clone(), sent.clone());
        let resetter = thread::spawn(move || {
            let (was, _) = Timer::start_on::<Quiet>(&t2, h, 7, 0);
            (was, sent2.load(Ordering::SeqCst))
        });
        h.run_due::<Quiet>(6);
        let (was, left) = resetter.join().unwrap();
        assert!(was, "reset found the old arm not pending");
        assert_eq!(left, 0, "an old value left after reset returned");
        h.run_due::<Quiet>(10);
        assert_eq!(sent.load(Ordering::SeqCst), 1, "the new arm's values");
    });
}

/// A stop racing a reset from another thread: the heap never keeps a
/// stopped entry, and ends empty exactly when the stop came last.
#[test]
fn stop_races_reset_leaves_no_zombie() {
    loom::model(|| {
        let h = heap();
        let (t, fired) = counting_timer();
        Timer::start_on::<Quiet>(&t, h, 5, 0);
        let t2 = t.clone();
        let resetter = thread::spawn(move || {
            Timer::start_on::<Quiet>(&t2, h, 7, 0);
        });
        let stopped = t.stop_with::<Quiet>();
        resetter.join().unwrap();
        let len = h.len();
        assert!(len <= 1);
        // If the stop came last the heap is empty, else the reset's
        // entry is there; either way the heap's length is the truth.
        let again = t.stop_with::<Quiet>();
        assert_eq!(again, len == 1);
        assert!(stopped || again);
        assert_eq!(h.len(), 0);
        assert_eq!(h.next(), 0);
        assert_eq!(h.run_due::<Quiet>(10), 0);
        assert_eq!(fired.load(Ordering::SeqCst), 0);
    });
}
