use super::*;

fn thread_state(shared: bool) -> WaitState {
    WaitState::new(Waiter::Thread(std::thread::current()), shared)
}

/// Pops every claimable sudog, completing each, and returns their
/// `index`es in order.
fn drain(q: &WaitQueue) -> Vec<usize> {
    let mut out = Vec::new();
    // SAFETY: single-threaded test: the "lock" is trivially held.
    while let Some(c) = unsafe { q.dequeue() } {
        // SAFETY: the claimed sudog is alive (in the caller's frame).
        out.push(unsafe { c.sg.as_ref() }.index);
        c.complete(true);
    }
    out
}

#[test]
fn queue_is_fifo_and_remove_relinks() {
    let q = WaitQueue::new();
    let states: Vec<WaitState> = (0..5).map(|_| thread_state(false)).collect();
    let sgs: Vec<Sudog> = states
        .iter()
        .enumerate()
        .map(|(i, st)| Sudog::new(st, ptr::null_mut(), i))
        .collect();
    for sg in &sgs {
        // SAFETY: single-threaded; the sudogs outlive the queue use.
        unsafe { q.enqueue(sg) };
    }
    // Remove the middle, the first and the last.
    for i in [2, 0, 4] {
        // SAFETY: as above; each was enqueued on `q`.
        unsafe { q.remove(&sgs[i]) };
    }
    // SAFETY: as above; removing twice is a no-op.
    unsafe { q.remove(&sgs[2]) };
    assert_eq!(drain(&q), vec![1, 3]);
    // SAFETY: single-threaded.
    assert!(unsafe { q.is_empty() });
    for (i, st) in states.iter().enumerate() {
        let done = [1, 3].contains(&i);
        assert_eq!(st.is_woken(), done);
        // SAFETY: woken (or never completed: then no outcome).
        assert_eq!(unsafe { st.outcome() }, done.then_some((i, true)));
    }
}

/// A select queued on one channel twice, plus a plain waiter: the first
/// dequeue claims the select, the second finds its other sudog stale,
/// skips it (unqueued, so the select's clean-up leaves the queue alone)
/// and claims the plain waiter.
#[test]
fn stale_select_sudogs_are_skipped_and_unlinked() {
    let q = WaitQueue::new();
    let sel = thread_state(true);
    let plain = thread_state(false);
    let a = Sudog::new(&sel, ptr::null_mut(), 0);
    let b = Sudog::new(&sel, ptr::null_mut(), 1);
    let p = Sudog::new(&plain, ptr::null_mut(), 7);
    for sg in [&a, &b, &p] {
        // SAFETY: single-threaded; the sudogs outlive the queue use.
        unsafe { q.enqueue(sg) };
    }
    assert_eq!(drain(&q), vec![0, 7]);
    // SAFETY: woken above.
    assert_eq!(unsafe { sel.outcome() }, Some((0, true)));
    // Another waiter queues before the select runs its pass 3, which
    // must leave it alone: both of the select's sudogs are off the queue.
    let late = thread_state(false);
    let l = Sudog::new(&late, ptr::null_mut(), 9);
    // SAFETY: single-threaded; `l` outlives the queue use; `a` and `b`
    // were enqueued on `q`.
    unsafe {
        q.enqueue(&l);
        q.remove(&a);
        q.remove(&b);
    }
    assert_eq!(drain(&q), vec![9]);
    // SAFETY: single-threaded.
    assert!(unsafe { q.is_empty() });
}

#[test]
fn a_claimed_list_completes_every_waiter_once() {
    let q = WaitQueue::new();
    let states: Vec<WaitState> = (0..3).map(|_| thread_state(false)).collect();
    let sgs: Vec<Sudog> = states
        .iter()
        .enumerate()
        .map(|(i, st)| Sudog::new(st, ptr::null_mut(), i))
        .collect();
    for sg in &sgs {
        // SAFETY: single-threaded; the sudogs outlive the queue use.
        unsafe { q.enqueue(sg) };
    }
    let mut list = ClaimedList::new();
    // SAFETY: single-threaded.
    while let Some(c) = unsafe { q.dequeue() } {
        c.push_to(&mut list);
    }
    while let Some(c) = list.pop() {
        c.complete(false);
    }
    for (i, st) in states.iter().enumerate() {
        // SAFETY: woken.
        assert_eq!(unsafe { st.outcome() }, Some((i, false)));
    }
}

/// The G record's sudog room starts zeroed (`g::SudogRoom`), and is read as
/// a `Sudog` before its first write (`place_sudog`'s check): all-zero bytes
/// must be a sudog for no wait.
#[test]
fn zeroed_room_is_an_unused_sudog() {
    let g = crate::g::G::alloc().expect("a G record");
    // SAFETY: the room fits a `Sudog` (the assertion in wait.rs), and a
    // fresh G's room is all zeroes, whose every field is a valid value.
    let sg = unsafe { &*g.chan_sudog().cast::<Sudog>() };
    // SAFETY: the record is on no queue; nothing else reads or writes it.
    let (queued, next, prev) = unsafe { (sg.queued.get(), sg.next.get(), sg.prev.get()) };
    assert!(!queued && next.is_null() && prev.is_null());
    assert!(!sg.shared && sg.state.is_null() && sg.elem.is_null());
    assert_eq!(sg.index, 0);
    assert!(!sg.is_detached());
}
