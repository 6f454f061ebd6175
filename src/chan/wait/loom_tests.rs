//! Models of the wait protocol with the real queue, lock and records:
//! loom threads play the waiter (a thread waiter, as a goroutine waiter
//! differs only in how it is woken) and the peers.
use super::*;
use crate::chan::lock::Lock;
use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

/// A channel reduced to what the protocol uses: a lock and one queue.
struct Q {
    lock: Lock,
    q: WaitQueue,
}

impl Q {
    fn new() -> Arc<Q> {
        Arc::new(Q {
            lock: Lock::new(),
            q: WaitQueue::new(),
        })
    }
}

/// A peer: takes the queue's lock, claims a waiting sudog if there is
/// one, and completes it by writing `v` into its slot (a sender handing
/// a value to a blocked receiver). Returns whether it delivered.
fn deliver(q: &Q, v: u32) -> u32 {
    q.lock.lock();
    // SAFETY: we hold the lock.
    let c = unsafe { q.q.dequeue() };
    // SAFETY: we hold the lock.
    unsafe { q.lock.unlock() };
    match c {
        Some(c) => {
            // SAFETY: the slot is a live `UnsafeCell<u32>` of the waiter
            // (it cannot return before `complete`), and we own it now.
            let slot = unsafe { &*(c.elem() as *const UnsafeCell<u32>) };
            // SAFETY: only the claimer writes the slot.
            slot.with_mut(|p| unsafe { *p = v });
            c.complete(true);
            1
        }
        None => 0,
    }
}

/// A closer: claims every waiter of the queue under the lock, then
/// completes each with `success = false` after unlocking (as `close`
/// does). Returns how many it completed.
fn close_all(q: &Q) -> u32 {
    q.lock.lock();
    let mut list = ClaimedList::new();
    // SAFETY: we hold the lock.
    while let Some(c) = unsafe { q.q.dequeue() } {
        c.push_to(&mut list);
    }
    // SAFETY: we hold it.
    unsafe { q.lock.unlock() };
    let mut n = 0;
    while let Some(c) = list.pop() {
        c.complete(false);
        n += 1;
    }
    n
}

/// The two sudogs of a select over two channels (one shared state).
fn select_sudogs(state: &WaitState, slots: &[UnsafeCell<u32>; 2]) -> [Sudog; 2] {
    [
        Sudog::new(state, &slots[0] as *const UnsafeCell<u32> as *mut (), 0),
        Sudog::new(state, &slots[1] as *const UnsafeCell<u32> as *mut (), 1),
    ]
}

/// Registers a select as selectgo's pass 2 does: lock both channels (in
/// a fixed order), enqueue, unlock. The sudogs must stay where they are
/// until `clean_up` removed them.
fn register(qs: &[Arc<Q>; 2], sgs: &[Sudog; 2]) {
    for (q, sg) in qs.iter().zip(sgs) {
        q.lock.lock();
        // SAFETY: lock held; the caller keeps `sgs` in place until its
        // clean-up has removed them.
        unsafe { q.q.enqueue(sg) };
    }
    for q in qs {
        // SAFETY: we hold it.
        unsafe { q.lock.unlock() };
    }
}

/// Pass 3 of a woken select: remove what is still queued; afterwards
/// both queues are empty.
fn clean_up(qs: &[Arc<Q>; 2], sgs: &[Sudog; 2]) {
    for (q, sg) in qs.iter().zip(sgs) {
        q.lock.lock();
        // SAFETY: lock held; `sg` is ours and was enqueued on `q`.
        unsafe { q.q.remove(sg) };
        // SAFETY: lock held.
        assert!(unsafe { q.q.is_empty() });
        // SAFETY: we hold it.
        unsafe { q.lock.unlock() };
    }
}

/// A select blocked on two channels, and one sender per channel racing
/// to complete it: exactly one wins, its value lands in the slot of the
/// case that fired (read by the waiter without a race), the other sender
/// finds only the stale sudog (or nothing), and the waiter's clean-up
/// leaves both queues empty.
#[test]
fn select_done_cas_picks_one_waker_and_hands_off_its_value() {
    loom::model(|| {
        let qs = [Q::new(), Q::new()];
        let slots = [UnsafeCell::new(0u32), UnsafeCell::new(0u32)];
        let state = WaitState::new(Waiter::Thread, true);
        let sgs = select_sudogs(&state, &slots);
        register(&qs, &sgs);
        let peers: Vec<_> = qs
            .iter()
            .enumerate()
            .map(|(i, q)| {
                let q = q.clone();
                thread::spawn(move || deliver(&q, 10 + i as u32))
            })
            .collect();
        state.wait_thread();
        clean_up(&qs, &sgs);
        // SAFETY: we were woken.
        let (fired, success) = unsafe { state.outcome() }.expect("woken without outcome");
        assert!(success);
        // SAFETY: the claimer's write is ordered before `woken`.
        let got = slots[fired].with(|p| unsafe { *p });
        assert_eq!(got, 10 + fired as u32);
        let delivered: Vec<u32> = peers.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(delivered.iter().sum::<u32>(), 1);
        assert_eq!(delivered[fired], 1);
    });
}

/// A plain (unshared) blocked receive, a sender delivering and a closer
/// racing: whoever pops the sudog completes it once; the waiter sees
/// either the value (success) or the close, never both, never neither.
#[test]
fn handoff_or_close_completes_a_plain_wait_once() {
    loom::model(|| {
        let q = Q::new();
        let slot = UnsafeCell::new(0u32);
        let state = WaitState::new(Waiter::Thread, false);
        let sg = Sudog::new(&state, &slot as *const UnsafeCell<u32> as *mut (), 0);
        q.lock.lock();
        // SAFETY: lock held; `sg` stays until completed (a plain wait is
        // always dequeued by its completer).
        unsafe { q.q.enqueue(&sg) };
        // SAFETY: we hold it.
        unsafe { q.lock.unlock() };
        let sender = {
            let q = q.clone();
            thread::spawn(move || deliver(&q, 7))
        };
        let closer = {
            let q = q.clone();
            thread::spawn(move || close_all(&q))
        };
        state.wait_thread();
        // SAFETY: we were woken.
        let (idx, success) = unsafe { state.outcome() }.unwrap();
        assert_eq!(idx, 0);
        let delivered = sender.join().unwrap();
        let closed = closer.join().unwrap();
        assert_eq!(delivered, u32::from(success));
        assert_eq!(closed, u32::from(!success));
        if success {
            // SAFETY: written before `woken`.
            assert_eq!(slot.with(|p| unsafe { *p }), 7);
        }
    });
}

/// A sender on one channel and a closer of the other race for one
/// select: exactly one completes it; if the closer won, the select sees
/// the close (no value) on its case and the sender found only a stale
/// sudog; otherwise the value is in the slot of the sender's case.
#[test]
fn a_close_and_a_send_race_for_a_select() {
    loom::model(|| {
        let qs = [Q::new(), Q::new()];
        let slots = [UnsafeCell::new(0u32), UnsafeCell::new(0u32)];
        let state = WaitState::new(Waiter::Thread, true);
        let sgs = select_sudogs(&state, &slots);
        register(&qs, &sgs);
        let sender = {
            let q = qs[1].clone();
            thread::spawn(move || deliver(&q, 11))
        };
        let closer = {
            let q = qs[0].clone();
            thread::spawn(move || close_all(&q))
        };
        state.wait_thread();
        clean_up(&qs, &sgs);
        // SAFETY: we were woken.
        let (fired, success) = unsafe { state.outcome() }.expect("woken without outcome");
        let delivered = sender.join().unwrap();
        let closed = closer.join().unwrap();
        assert_eq!(delivered + closed, 1);
        if success {
            assert_eq!((fired, delivered), (1, 1));
            // SAFETY: the claimer's write is ordered before `woken`.
            assert_eq!(slots[1].with(|p| unsafe { *p }), 11);
        } else {
            assert_eq!((fired, closed), (0, 1));
        }
    });
}

/// An unbuffered channel reduced to what the send futures' protocol
/// uses (`future.rs`, "Send futures"): the lock and both queues.
struct Ch {
    lock: Lock,
    sendq: WaitQueue,
    recvq: WaitQueue,
}

impl Ch {
    fn new() -> Arc<Ch> {
        Arc::new(Ch {
            lock: Lock::new(),
            sendq: WaitQueue::new(),
            recvq: WaitQueue::new(),
        })
    }
}

/// A record in the model's main frame, lent to a loom thread: the main
/// thread joins every thread before the frame ends.
struct Lent<T>(*const T);
// SAFETY: the records are synchronised by the protocol under test; the
// main frame outlives every thread (joined before it returns).
unsafe impl<T> Send for Lent<T> {}

impl<T> Lent<T> {
    fn get(&self) -> &T {
        // SAFETY: alive until the main thread's join (see the type).
        unsafe { &*self.0 }
    }
}

/// A pending send future's sudog: no value slot (`ASYNC_SEND`).
fn async_send_sudog(state: &WaitState) -> Sudog {
    Sudog::new_async_send(state)
}

fn receiver_sudog(state: &WaitState, slot: &UnsafeCell<u32>) -> Sudog {
    Sudog::new(state, slot as *const UnsafeCell<u32> as *mut (), 0)
}

/// A receive that waits, as `Chan::recv` does it: nothing to take (the
/// send futures hold their values back), so it queues itself and
/// grants the first send future, completing the grant after the unlock.
fn receive_and_grant(ch: &Ch, sg: &Sudog) {
    ch.lock.lock();
    // SAFETY: we hold the lock; `sg` stays put until it is
    // completed (an unshared wait is always dequeued by its completer).
    let grant = unsafe {
        assert!(ch.sendq.dequeue_value().is_none());
        ch.recvq.enqueue(sg);
        ch.sendq.dequeue_async_send()
    };
    // SAFETY: we hold it.
    unsafe { ch.lock.unlock() };
    if let Some(g) = grant {
        assert!(g.is_async_send());
        g.complete(true);
    }
}

/// A granted send future's poll (`SendFuture::poll_send`): the value
/// moves now, to a waiting receiver, or the future queues again, first
/// in line (`requeue`: its re-armed record). Returns whether it sent.
fn poll_granted(ch: &Ch, v: u32, requeue: &Sudog) -> bool {
    ch.lock.lock();
    // SAFETY: we hold the lock.
    let r = unsafe { ch.recvq.dequeue() };
    if r.is_none() {
        // SAFETY: we hold the lock; `requeue` stays put until removed or
        // completed.
        unsafe { ch.sendq.enqueue_front(requeue) };
    }
    // SAFETY: we hold it.
    unsafe { ch.lock.unlock() };
    match r {
        Some(r) => {
            // SAFETY: a claimed receiver's slot is a live
            // `UnsafeCell<u32>`, ours until `complete`.
            let slot = unsafe { &*(r.elem() as *const UnsafeCell<u32>) };
            // SAFETY: only the claimer writes the slot.
            slot.with_mut(|p| unsafe { *p = v });
            r.complete(true);
            true
        }
        None => false,
    }
}

/// A send future dropped while pending (`SendFuture::drop`): a queued
/// sudog is removed (nothing sent); a granted one passes its grant on
/// to the next send future if a receiver still waits
/// (`Chan::grant_lapsed`). Returns whether it had been granted.
fn drop_send_future(ch: &Ch, sg: &Sudog, state: &WaitState) -> bool {
    ch.lock.lock();
    // SAFETY: we hold the lock; `sg` was queued on `sendq`.
    let queued = unsafe {
        let q = sg.is_queued();
        ch.sendq.remove(sg);
        q
    };
    // SAFETY: we hold it.
    unsafe { ch.lock.unlock() };
    if queued {
        return false;
    }
    // Claimed: wait for the claimer's completion (`spin_until_woken`).
    state.wait_thread();
    // SAFETY: woken.
    let (_, granted) = unsafe { state.outcome() }.expect("woken without outcome");
    if granted {
        let mut claims = ClaimedList::new();
        ch.lock.lock();
        // SAFETY: we hold the lock.
        unsafe {
            if ch.recvq.has_claimable() {
                if let Some(n) = ch.sendq.dequeue_async_send() {
                    n.push_to(&mut claims);
                }
            }
            ch.lock.unlock();
        }
        claims.complete_all();
    }
    granted
}

/// Two send futures pending on an unbuffered channel; a receiver
/// arrives and grants the first, which is dropped (by another thread)
/// before it polls again. Whichever way the grant and the cancel race
/// (the drop removes the still-queued sudog, or finds it granted), the
/// dropped future's value is never delivered, and the receiver is not
/// left waiting: the second future is granted (by the receiver, or by
/// the drop passing the grant on) and sends on its poll.
#[test]
fn a_dropped_send_future_sends_nothing_and_passes_its_grant_on() {
    loom::model(|| {
        let ch = Ch::new();
        let (s1, s2) = (
            WaitState::new(Waiter::Thread, false),
            WaitState::new(Waiter::Thread, false),
        );
        let (a1, a2) = (async_send_sudog(&s1), async_send_sudog(&s2));
        ch.lock.lock();
        // SAFETY: we hold the lock; both sudogs outlive the threads.
        unsafe {
            ch.sendq.enqueue(&a1);
            ch.sendq.enqueue(&a2);
            ch.lock.unlock();
        }
        let slot = UnsafeCell::new(0u32);
        let rstate = WaitState::new(Waiter::Thread, false);
        let rsg = receiver_sudog(&rstate, &slot);
        let dropper = {
            let (ch, a1, s1) = (ch.clone(), Lent(&a1), Lent(&s1));
            thread::spawn(move || drop_send_future(&ch, a1.get(), s1.get()))
        };
        let receiver = {
            let (ch, rsg, rstate) = (ch.clone(), Lent(&rsg), Lent(&rstate));
            thread::spawn(move || {
                receive_and_grant(&ch, rsg.get());
                rstate.get().wait_thread();
            })
        };
        // This thread is the second future's executor: it is granted in
        // every interleaving, and its poll sends.
        s2.wait_thread();
        // SAFETY: woken.
        assert_eq!(unsafe { s2.outcome() }, Some((ASYNC_SEND, true)));
        let s2b = WaitState::new(Waiter::Thread, false);
        let a2b = async_send_sudog(&s2b);
        assert!(
            poll_granted(&ch, 2, &a2b),
            "the granted future found no receiver"
        );
        receiver.join().unwrap();
        let dropped_granted = dropper.join().unwrap();
        // SAFETY: woken (joined after `wait_thread`).
        assert_eq!(unsafe { rstate.outcome() }, Some((0, true)));
        // SAFETY: the claimer's write is ordered before `woken`.
        assert_eq!(slot.with(|p| unsafe { *p }), 2);
        // The dropped future was granted only if it was first in line
        // when the receiver came.
        // SAFETY: s1 is woken iff it was granted (then joined above).
        assert_eq!(dropped_granted, s1.is_woken());
        ch.lock.lock();
        // SAFETY: we hold the lock.
        unsafe {
            assert!(ch.sendq.is_empty() && ch.recvq.is_empty());
            ch.lock.unlock();
        }
    });
}

/// A receiving select on an unbuffered channel (one sudog there, one
/// on another channel) grants the pending send future, and a sender on
/// the other channel races to complete the select. If the sender wins,
/// the granted future's poll finds only the select's stale sudog: it
/// sends nothing and waits again, first in line; otherwise it hands its
/// value to the select. Exactly one completes the select.
#[test]
fn a_granted_send_future_whose_receiver_left_waits_again() {
    loom::model(|| {
        let ch = Ch::new();
        let other = Q::new();
        let astate = WaitState::new(Waiter::Thread, false);
        let a = async_send_sudog(&astate);
        ch.lock.lock();
        // SAFETY: we hold the lock; `a` outlives the threads.
        unsafe {
            ch.sendq.enqueue(&a);
            ch.lock.unlock();
        }
        let slots = [UnsafeCell::new(0u32), UnsafeCell::new(0u32)];
        let sel = WaitState::new(Waiter::Thread, true);
        let sgs = select_sudogs(&sel, &slots);
        // Pass 2: queue on both channels under both locks, grant on the
        // unbuffered one; complete the grant after the unlocks.
        ch.lock.lock();
        other.lock.lock();
        // SAFETY: both locks held; the sudogs stay until `clean_up`.
        let grant = unsafe {
            ch.recvq.enqueue(&sgs[0]);
            other.q.enqueue(&sgs[1]);
            ch.sendq.dequeue_async_send()
        };
        // SAFETY: we hold them.
        unsafe {
            other.lock.unlock();
            ch.lock.unlock();
        }
        grant.expect("the pending future is granted").complete(true);
        let sender = {
            let other = other.clone();
            thread::spawn(move || deliver(&other, 5))
        };
        let executor = {
            let (ch, astate) = (ch.clone(), Lent(&astate));
            thread::spawn(move || {
                astate.get().wait_thread();
                let again = WaitState::new(Waiter::Thread, false);
                let requeued = async_send_sudog(&again);
                let sent = poll_granted(&ch, 7, &requeued);
                if !sent {
                    // Still first in line; take it back out to end
                    // the model (a drop while queued).
                    ch.lock.lock();
                    // SAFETY: we hold the lock; it was queued there.
                    unsafe {
                        assert!(requeued.is_queued());
                        ch.sendq.remove(&requeued);
                        ch.lock.unlock();
                    }
                }
                sent
            })
        };
        sel.wait_thread();
        // Pass 3.
        for (lock, q, sg) in [
            (&ch.lock, &ch.recvq, &sgs[0]),
            (&other.lock, &other.q, &sgs[1]),
        ] {
            lock.lock();
            // SAFETY: lock held; `sg` is ours and was queued on `q`.
            unsafe {
                q.remove(sg);
                lock.unlock();
            }
        }
        // SAFETY: woken.
        let (fired, success) = unsafe { sel.outcome() }.expect("woken without outcome");
        assert!(success);
        let delivered = sender.join().unwrap();
        let sent = executor.join().unwrap();
        assert_eq!(delivered + u32::from(sent), 1);
        if sent {
            assert_eq!(fired, 0);
            // SAFETY: written before `woken`.
            assert_eq!(slots[0].with(|p| unsafe { *p }), 7);
        } else {
            assert_eq!(fired, 1);
            // SAFETY: written before `woken`.
            assert_eq!(slots[1].with(|p| unsafe { *p }), 5);
        }
    });
}
