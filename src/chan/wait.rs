//! Wait records: how a blocked channel operation waits and how a peer
//! completes it (Go's `sudog`, `waitq` and `selectDone`).
//!
//! # Records (no allocation per operation)
//! - [`WaitState`]: one per blocked operation; a blocked `select` has one,
//!   shared by all its cases. It holds who to wake ([`Waiter`]), the outcome
//!   (which sudog fired, and whether with a value or because the channel
//!   closed), the claim flag `done` and the `woken` flag.
//! - [`Sudog`]: one per channel queue the operation waits in. It points to
//!   its `WaitState` and to `elem`, the waiter's value slot: for a receive an
//!   uninitialised `T` the sender writes into, for a send the `T` the
//!   receiver moves out (a direct send, Go's direct handoff: the value never
//!   goes through the channel buffer). It carries a copy of the state's
//!   `shared` flag, so that popping an unshared sudog never loads the state.
//!   A send future's sudog ([`ASYNC_SEND`]) has no slot: its value moves
//!   only in its own poll, and a peer completing it *grants* it (wakes it to
//!   send) instead of taking a value (`future.rs`, "Send futures").
//!
//! # Where records live
//! - The `WaitState` and the value slot: in the waiter's frame.
//! - The sudog of a goroutine's plain (one-channel) send or receive: in the
//!   goroutine's own G record, its third cache line ([`place_sudog`]). G
//!   records are packed in chunks, so a queue of such sudogs is a walk over
//!   dense memory. Go's sudogs come from a per-P cache for the same reason.
//!   A close pops every waiter in a row under the lock, following `next`
//!   from one sudog to the next, and with sudogs in the waiters' frames each
//!   step was a TLB and a cache miss on another cold stack (100,000
//!   receivers: 45 ms for the close, now 13 ms).
//! - Every other sudog (a select's cases, a thread's operation, an async
//!   future's record) is in the waiter's frame or future.
//!
//! # Protocol
//! 1. **Register.** Holding the channel's lock, the waiter enqueues a sudog
//!    on the channel's `recvq` or `sendq` ([`WaitQueue::enqueue`]); a select
//!    holds all its channels' locks and enqueues one sudog per case.
//! 2. **Block.** The waiter releases the lock(s) only once it can be woken
//!    (a goroutine: from its M's scheduler after it is parked, see
//!    `runtime::park`; a thread: then it waits for `woken`).
//! 3. **Claim.** A peer holding the channel's lock pops sudogs from the front
//!    ([`WaitQueue::dequeue`]). A wait that more than one party may complete
//!    (`shared`: a select, including one with a timeout arm) is claimed by the
//!    CAS `done: 0 -> 1` (Go's `selectDone`); the loser of that race only
//!    unlinks the stale sudog and pops the next one. A wait with one sudog
//!    and nothing else able to complete it belongs to whoever pops it.
//! 4. **Complete.** The winner holds a [`Claimed`]: it moves the value
//!    through `elem`, releases the channel lock, and calls
//!    [`Claimed::complete`], which records the outcome, takes the
//!    `Waiter`, sets `woken` (Release) and wakes it. After the `woken` store
//!    the waker touches nothing of the waiter's.
//! 5. **Clean up.** The woken waiter removes its sudogs that are still
//!    queued, under each channel's lock ([`WaitQueue::remove`]; Go's select
//!    pass 3; a timer will do the same for a timed-out wait).
//!
//! # Invariants
//! - A sudog's `next`, `prev` and `queued` are protected by the lock of the
//!   channel whose queue it is on (or was last on). A sudog is on at most
//!   one queue, at most once; `queued` says whether it still is.
//! - The records stay valid while any peer can reach them: a sudog is
//!   reachable while queued (the waiter removes it, under the lock, before
//!   it returns) and while claimed (the waiter cannot return before
//!   `complete`). Losers of the claim CAS touch the `WaitState` only while
//!   holding a lock that the waiter's clean-up must take.
//! - Exactly one party completes a wait, once: the unique popper of an
//!   unshared wait, or the winner of the `done` CAS. So `fired`, `success`
//!   and `waiter` have a single writer, and the waiter reads them only after
//!   it was woken (goroutine: readied through a run queue, Release/Acquire;
//!   thread: `woken`, Release/Acquire).
//! - Why the value slot is valid when a peer writes it: the slot lives in the
//!   waiter's frame, which cannot return before the wait is completed (the
//!   goroutine is parked; the thread loops on `woken`), and only the claimer
//!   writes it, before `complete`.

use std::ptr::{self, NonNull};

use super::slot::Slot;
use crate::loom::atomic::{AtomicBool, AtomicPtr, AtomicU32, Ordering};

#[cfg(not(loom))]
pub(crate) use crate::runtime::park::Waiter;

/// Under loom only OS threads (loom threads) wait, and they wait by
/// spinning on `woken` (see [`WaitState::wait_thread`]), so waking is only
/// the `woken` store.
#[cfg(loom)]
pub(crate) enum Waiter {
    Thread,
}

#[cfg(loom)]
impl Waiter {
    pub(crate) fn wake(self) {}
}

/// The state of one blocked operation (see the module note).
pub(crate) struct WaitState {
    /// 0 while pending, 1 once claimed (Go's `selectDone`); only used when
    /// `shared`.
    done: AtomicU32,
    /// More than one party may complete this wait (several sudogs, or a
    /// timer): claims go through `done`.
    shared: bool,
    /// Who to wake; taken by the claimer.
    waiter: Slot<Option<Waiter>>,
    /// The sudog whose operation completed the wait (Go's `gp.param`), and
    /// whether it completed with a value (false: the channel was closed or,
    /// for a send, every receiver was gone). Written by the claimer.
    fired: Slot<*const Sudog>,
    success: Slot<bool>,
    /// Set by the claimer after its last access to the waiter's records.
    woken: AtomicBool,
}

impl WaitState {
    pub(crate) fn new(waiter: Waiter, shared: bool) -> WaitState {
        WaitState {
            done: AtomicU32::new(0),
            shared,
            waiter: Slot::new(Some(waiter)),
            fired: Slot::new(ptr::null()),
            success: Slot::new(false),
            woken: AtomicBool::new(false),
        }
    }

    /// Tries to become the one party that completes this wait.
    #[inline]
    fn try_claim(&self) -> bool {
        // Relaxed is enough: the CAS only has to pick one winner. The data
        // the winner then reads (the sudog, `waiter`) was published by the
        // channel lock it holds, and what it writes reaches the waiter
        // through `woken` / the run queue, not through `done`.
        !self.shared
            || self
                .done
                .compare_exchange(0, 1, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    /// Whether the wait was claimed (a shared wait's `done`). Relaxed, as
    /// the claim: the caller holds a lock that orders what it then reads.
    #[inline]
    fn is_claimed(&self) -> bool {
        self.done.load(Ordering::Relaxed) != 0
    }

    /// Replaces who to wake (an async waiter polled with a new waker).
    ///
    /// # Safety
    /// The caller holds the lock of the channel whose queue the wait's only
    /// sudog is on, and that sudog is still queued ([`Sudog::is_queued`]):
    /// then nobody has claimed the wait, and nobody can before the lock is
    /// released.
    /// Returns the old one, to drop after unlocking (a waker's drop is
    /// foreign code, which never runs under a channel lock).
    #[cfg(not(loom))]
    pub(crate) unsafe fn set_waiter(&self, w: Waiter) -> Option<Waiter> {
        // SAFETY: unclaimed and guarded by the lock (contract): the claimer
        // that could take `waiter` must first pop the sudog under that lock.
        unsafe { self.waiter.replace(Some(w)) }
    }

    /// Spins (yielding the thread) until a claimer that has already popped
    /// this wait's sudog has completed it. The claimer is then between its
    /// unlock and `complete`, a few instructions of runtime code that never
    /// park, so this ends quickly. Used by async waiters, which cannot park.
    #[cfg(not(loom))]
    pub(crate) fn spin_until_woken(&self) {
        let mut spins = 0u32;
        while !self.is_woken() {
            if spins < 64 {
                std::hint::spin_loop();
                spins += 1;
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// Whether a claimer has finished with the wait. Acquire: pairs with the
    /// Release store in [`Claimed::complete`], so the outcome it wrote is
    /// visible.
    #[inline]
    pub(crate) fn is_woken(&self) -> bool {
        self.woken.load(Ordering::Acquire)
    }

    /// Blocks the calling OS thread until the wait is completed.
    ///
    /// Under loom the thread spins (yielding) instead of parking: then
    /// `woken` is the only edge from the completer to the waiter, which is
    /// what the models must check (loom's unpark publishes the unparker's
    /// memory at once and only switches threads at its own operations, so
    /// it would hide a missing Release), and loom lets a leftover park token
    /// end an unrelated `join`.
    pub(crate) fn wait_thread(&self) {
        #[cfg(not(loom))]
        let _blocked = crate::runtime::checkdead::thread_blocked();
        while !self.is_woken() {
            #[cfg(not(loom))]
            std::thread::park();
            #[cfg(loom)]
            loom::thread::yield_now();
        }
    }

    /// The index of the sudog that fired and whether it succeeded, or None if
    /// nothing completed the wait through a queue.
    ///
    /// # Safety
    /// Only the waiter, after it was woken (goroutine: resumed after park;
    /// thread: `is_woken()` returned true).
    pub(crate) unsafe fn outcome(&self) -> Option<(usize, bool)> {
        // SAFETY: the claimer wrote these before waking us; being woken
        // orders those writes before these reads (caller's contract).
        let fired = unsafe { self.fired.get() };
        if fired.is_null() {
            return None;
        }
        // SAFETY: `fired` is one of our own sudogs, alive in our frame; its
        // `index` is immutable.
        let index = unsafe { (*fired).index };
        // SAFETY: as for `fired`.
        Some((index, unsafe { self.success.get() }))
    }
}

/// One waiting operation on one channel queue (Go's sudog).
pub(crate) struct Sudog {
    // Protected by the lock of the channel whose queue this is (was) on.
    next: Slot<*const Sudog>,
    prev: Slot<*const Sudog>,
    queued: Slot<bool>,
    // Immutable after `new`.
    /// A copy of the state's `shared`: a claimer that pops an unshared
    /// sudog owns it without loading the state, which is in the waiter's
    /// frame (a cold stack when a close pops thousands in a row). Also set
    /// on a send future's sudog ([`ASYNC_SEND`]), whose wait is unshared
    /// (its state says so, and claims it without a CAS): that sends a
    /// receive's pop down the path that checks for it
    /// ([`WaitQueue::dequeue_sender`]), so that popping a blocked
    /// goroutine's sudog checks nothing more than it did.
    shared: bool,
    state: *const WaitState,
    elem: *mut (),
    /// The case index within a select (0 for a plain operation).
    index: usize,
}

/// The `index` of a detached sender's sudog (an async receive's value given
/// back to the channel, `future.rs`): a value already sent, which a close
/// leaves queued for the receivers, as it leaves buffered values.
pub(crate) const DETACHED: usize = usize::MAX;

/// The `index` of a pending send future's sudog (`future.rs`, "Send
/// futures"): a sender that holds no value out for the taking. Its value
/// moves only inside its own poll, so a peer never takes it: a receiver
/// that would take it *grants* it instead (completes its wait with
/// success, which means "poll again: a receiver waits for you" on an
/// unbuffered channel, "a slot of the buffer is reserved for you" on a
/// buffered one), and its `elem` is null.
pub(crate) const ASYNC_SEND: usize = usize::MAX - 1;

impl Sudog {
    /// Whether this is a detached sender's sudog ([`DETACHED`]).
    #[inline]
    pub(crate) fn is_detached(&self) -> bool {
        self.index == DETACHED
    }

    /// Whether this is a send future's sudog ([`ASYNC_SEND`]).
    #[inline]
    pub(crate) fn is_async_send(&self) -> bool {
        self.index == ASYNC_SEND
    }

    /// A sudog for `state`, with the value slot `elem`.
    pub(crate) fn new(state: &WaitState, elem: *mut (), index: usize) -> Sudog {
        Sudog {
            next: Slot::new(ptr::null()),
            prev: Slot::new(ptr::null()),
            queued: Slot::new(false),
            shared: state.shared,
            state,
            elem,
            index,
        }
    }

    /// The sudog of a send future's wait `state` (unshared): no value slot
    /// ([`ASYNC_SEND`]), and `shared` set (see the field).
    pub(crate) fn new_async_send(state: &WaitState) -> Sudog {
        debug_assert!(!state.shared, "a send future's wait is unshared");
        Sudog {
            shared: true,
            ..Sudog::new(state, ptr::null_mut(), ASYNC_SEND)
        }
    }
}

// The room the G record keeps for its own sudog (`g::SudogRoom`) holds a
// `Sudog`: it fits, and its all-zero bytes, which the room starts as, are
// a sudog for no wait (null links, not queued: `tests.rs` checks it).
#[cfg(not(loom))]
const _: () = {
    assert!(std::mem::size_of::<Sudog>() <= std::mem::size_of::<crate::g::SudogRoom>());
    assert!(std::mem::align_of::<Sudog>() <= std::mem::align_of::<crate::g::SudogRoom>());
};

impl Sudog {
    /// Whether the sudog is still on its queue (not claimed, not removed).
    ///
    /// # Safety
    /// The caller holds the lock of the channel whose queue it was put on.
    pub(crate) unsafe fn is_queued(&self) -> bool {
        // SAFETY: `queued` is protected by that lock (contract).
        unsafe { self.queued.get() }
    }
}

/// A FIFO of sudogs (Go's waitq), protected by its channel's lock: every
/// method but [`WaitQueue::looks_empty`] requires the caller to hold that
/// lock.
///
/// `first` is an atomic only so that the channel's lock-free fast paths
/// (`fast.rs`) can ask whether anyone waits without taking the lock; it is
/// written only under the lock (Release, so that a lock-free reader that sees
/// a sudog also sees the channel state written before it was queued), and
/// the lock-free reader never follows the pointer.
pub(crate) struct WaitQueue {
    first: AtomicPtr<Sudog>,
    last: Slot<*const Sudog>,
}

// SAFETY: the raw pointers are only followed under the channel lock (module
// note), which also orders every access to the fields.
unsafe impl Send for WaitQueue {}
// SAFETY: as above.
unsafe impl Sync for WaitQueue {}

impl WaitQueue {
    pub(crate) fn new() -> WaitQueue {
        WaitQueue {
            first: AtomicPtr::new(ptr::null_mut()),
            last: Slot::new(ptr::null()),
        }
    }

    /// The head, under the lock (Relaxed: the lock orders every write).
    #[inline]
    fn head(&self) -> *const Sudog {
        self.first.load(Ordering::Relaxed)
    }

    /// Sets the head; the caller holds the lock.
    #[inline]
    fn set_head(&self, sg: *const Sudog) {
        // Release: pairs with the Acquire in `looks_empty`.
        self.first.store(sg as *mut Sudog, Ordering::Release);
    }

    /// Whether no sudog is queued, read without the lock (Go's
    /// `c.recvq.first == nil` in `full`/`empty`). A stale sudog counts as
    /// queued, so the answer "not empty" is only a hint (the caller then
    /// takes the lock), while "empty" was true at the instant of the load.
    #[inline]
    pub(crate) fn looks_empty(&self) -> bool {
        // Acquire: pairs with the Release in `set_head`; and a later load
        // of the caller (the `closed` flag) is not hoisted above this one.
        self.first.load(Ordering::Acquire).is_null()
    }

    /// Appends `sg`.
    ///
    /// # Safety
    /// The caller holds the channel lock; `sg` is on no queue and stays at
    /// its address, alive, until it is dequeued or removed (module note).
    #[inline]
    pub(crate) unsafe fn enqueue(&self, sg: *const Sudog) {
        // SAFETY: under the lock (contract); `sg` and `last` are live sudogs.
        unsafe {
            let s = &*sg;
            let last = self.last.get();
            s.next.set(ptr::null());
            s.prev.set(last);
            s.queued.set(true);
            if last.is_null() {
                self.set_head(sg);
            } else {
                (*last).next.set(sg);
            }
            self.last.set(sg);
        }
    }

    /// Puts `sg` first: a woken send future whose receiver left before its
    /// poll goes back to the place it was granted from (`future.rs`).
    ///
    /// # Safety
    /// As for [`enqueue`](Self::enqueue).
    pub(crate) unsafe fn enqueue_front(&self, sg: *const Sudog) {
        // SAFETY: under the lock (contract); `sg` and the head are live.
        unsafe {
            let s = &*sg;
            let first = self.head();
            s.prev.set(ptr::null());
            s.next.set(first);
            s.queued.set(true);
            if first.is_null() {
                self.last.set(sg);
            } else {
                (*first).prev.set(sg);
            }
            self.set_head(sg);
        }
    }

    /// Removes and returns the first sudog, unlinked and marked unqueued.
    ///
    /// # Safety
    /// The caller holds the channel lock.
    #[inline]
    unsafe fn pop(&self) -> Option<NonNull<Sudog>> {
        // SAFETY: under the lock (contract); queued sudogs are live.
        unsafe {
            let sg = NonNull::new(self.head() as *mut Sudog)?;
            let s = sg.as_ref();
            let next = s.next.get();
            self.set_head(next);
            if next.is_null() {
                self.last.set(ptr::null());
            } else {
                (*next).prev.set(ptr::null());
            }
            s.next.set(ptr::null());
            s.queued.set(false);
            Some(sg)
        }
    }

    /// Pops sudogs until one whose wait this caller claims (step 3).
    ///
    /// # Safety
    /// The caller holds the channel lock. It must call
    /// [`Claimed::complete`] on the result (after releasing the lock is
    /// fine, and better).
    #[inline]
    pub(crate) unsafe fn dequeue(&self) -> Option<Claimed> {
        loop {
            // SAFETY: under the lock (contract).
            let sg = unsafe { self.pop() }?;
            // SAFETY: a sudog that was queued is alive, and so is its state,
            // while we hold the lock (module note).
            // An unshared sudog is ours once popped, without loading its
            // state (see `Sudog::shared`).
            if unsafe { !sg.as_ref().shared || (*sg.as_ref().state).try_claim() } {
                return Some(Claimed { sg });
            }
            // Stale: its wait was completed through another queue; the
            // waiter knows it is no longer queued.
        }
    }

    /// As [`dequeue`](Self::dequeue) for a receive: the first claimable
    /// sender, told apart from a send future, which has no value to take
    /// (`Chan::recv_locked`). A blocked goroutine's or thread's sudog
    /// (unshared) is returned as `dequeue` would, with no further check:
    /// the send future's check is on the path of shared sudogs, which its
    /// own takes (`Sudog::shared`).
    ///
    /// # Safety
    /// As for `dequeue`: the caller completes the claim, either kind (or,
    /// for a send future, may put it back with
    /// [`enqueue_front`](Self::enqueue_front) under the same lock hold).
    #[inline(always)]
    pub(crate) unsafe fn dequeue_sender(&self) -> Popped {
        loop {
            // SAFETY: under the lock (contract).
            let Some(sg) = (unsafe { self.pop() }) else {
                return Popped::Empty;
            };
            // SAFETY: a sudog that was queued is alive, and so is its state,
            // while we hold the lock (module note).
            let s = unsafe { sg.as_ref() };
            if !s.shared {
                return Popped::Sender(Claimed { sg });
            }
            if s.is_async_send() {
                // An unshared wait: ours once popped.
                return Popped::AsyncSend(Claimed { sg });
            }
            // SAFETY: as above.
            if unsafe { (*s.state).try_claim() } {
                return Popped::Sender(Claimed { sg });
            }
            // Stale, as in `dequeue`.
        }
    }

    /// As [`dequeue`](Self::dequeue) for a receive on an unbuffered
    /// channel: the first claimable sender with a value to take, passing
    /// over send futures' sudogs ([`ASYNC_SEND`]), which stay queued in
    /// order (their value moves only in their own poll; a receiver that
    /// waits grants one, [`dequeue_async_send`](Self::dequeue_async_send)).
    /// Walks the queue: for the rare queue with a send future first
    /// (`Chan::recv_locked` pops with `dequeue` otherwise).
    ///
    /// # Safety
    /// As for `dequeue`.
    pub(crate) unsafe fn dequeue_value(&self) -> Option<Claimed> {
        let mut at = self.head();
        // SAFETY: under the lock (contract); queued sudogs and their states
        // are live.
        unsafe {
            while let Some(sg) = NonNull::new(at as *mut Sudog) {
                let s = sg.as_ref();
                at = s.next.get();
                if s.is_async_send() {
                    continue;
                }
                self.remove(s);
                if !s.shared || (*s.state).try_claim() {
                    return Some(Claimed { sg });
                }
                // Stale: unlinked, as `dequeue` does.
            }
        }
        None
    }

    /// Claims the first send future's sudog ([`ASYNC_SEND`]), leaving the
    /// others in place: the grant of a receiver that waits on an unbuffered
    /// channel (`hchan.rs`). A send future's wait is unshared, so it is
    /// the popper's.
    ///
    /// # Safety
    /// As for `dequeue`.
    pub(crate) unsafe fn dequeue_async_send(&self) -> Option<Claimed> {
        let mut at = self.head();
        // SAFETY: under the lock (contract); queued sudogs are live.
        unsafe {
            while let Some(sg) = NonNull::new(at as *mut Sudog) {
                let s = sg.as_ref();
                at = s.next.get();
                if s.is_async_send() {
                    self.remove(s);
                    return Some(Claimed { sg });
                }
            }
        }
        None
    }

    /// Whether a claimable sudog is queued, unlinking the stale ones in
    /// front of it (as `dequeue` would). Claims nothing: a select's sudog
    /// seen claimable here may still be claimed through another channel
    /// before the caller acts, so the answer is a hint for a grant (a
    /// spurious one costs a poll), never for a transfer.
    ///
    /// # Safety
    /// The caller holds the channel lock.
    pub(crate) unsafe fn has_claimable(&self) -> bool {
        loop {
            let head = self.head();
            if head.is_null() {
                return false;
            }
            // SAFETY: under the lock (contract); a queued sudog and its
            // state are live.
            unsafe {
                let s = &*head;
                if !s.shared || !(*s.state).is_claimed() {
                    return true;
                }
                self.pop();
            }
        }
    }

    /// As [`dequeue`](Self::dequeue), skipping detached sudogs
    /// ([`DETACHED`]), which stay queued in order (`close`). Walks the
    /// queue: close is rare and detached senders few.
    ///
    /// # Safety
    /// As for `dequeue`.
    pub(crate) unsafe fn dequeue_attached(&self) -> Option<Claimed> {
        let mut at = self.head();
        // SAFETY: under the lock (contract); queued sudogs and their states
        // are live.
        unsafe {
            while let Some(sg) = NonNull::new(at as *mut Sudog) {
                let s = sg.as_ref();
                at = s.next.get();
                if s.is_detached() {
                    continue;
                }
                self.remove(s);
                if (*s.state).try_claim() {
                    return Some(Claimed { sg });
                }
            }
        }
        None
    }

    /// Removes `sg` if it is still queued here (select pass 3).
    ///
    /// # Safety
    /// The caller holds the channel lock, and `sg` was enqueued on this queue
    /// (and is alive: it is the caller's own).
    pub(crate) unsafe fn remove(&self, sg: &Sudog) {
        // SAFETY: under the lock (contract); linked sudogs are live.
        unsafe {
            if !sg.queued.get() {
                return;
            }
            let (prev, next) = (sg.prev.get(), sg.next.get());
            if prev.is_null() {
                self.set_head(next);
            } else {
                (*prev).next.set(next);
            }
            if next.is_null() {
                self.last.set(prev);
            } else {
                (*next).prev.set(prev);
            }
            sg.next.set(ptr::null());
            sg.prev.set(ptr::null());
            sg.queued.set(false);
        }
    }

    /// Whether no sudog is queued (stale ones included).
    ///
    /// # Safety
    /// The caller holds the channel lock.
    #[allow(dead_code)] // used by the debug checks of the channel and the models
    pub(crate) unsafe fn is_empty(&self) -> bool {
        self.head().is_null()
    }
}

/// A sudog whose wait the holder has won: it must move the value through
/// [`Claimed::elem`] and then call [`Claimed::complete`] exactly once.
#[must_use = "a claimed wait must be completed, or its waiter never wakes"]
pub(crate) struct Claimed {
    sg: NonNull<Sudog>,
}

impl Claimed {
    /// The waiter's value slot (see the module note for its type).
    #[inline]
    pub(crate) fn elem(&self) -> *mut () {
        // SAFETY: a claimed sudog stays alive until `complete`.
        unsafe { self.sg.as_ref() }.elem
    }

    /// Gives up an unshared claim without completing it: the sudog, to put
    /// back on the queue it was popped from, under the same lock hold
    /// (nobody saw it gone: an unshared wait belongs to its popper).
    pub(crate) fn into_sudog(self) -> *const Sudog {
        // SAFETY: a claimed sudog and its state are alive.
        debug_assert!(!unsafe { &*self.sg.as_ref().state }.shared);
        self.sg.as_ptr()
    }

    /// The claim as a raw pointer, to carry through a type-erased hand-off
    /// (a channel timer's firing: `chan::timechan`); [`from_raw`]
    /// (Self::from_raw) takes it back, and the duty to complete it with it.
    #[cfg(not(loom))]
    pub(crate) fn into_raw(self) -> NonNull<()> {
        self.sg.cast()
    }

    /// The claim [`into_raw`](Self::into_raw) gave.
    ///
    /// # Safety
    /// `raw` came from `into_raw` and is taken back once.
    #[cfg(not(loom))]
    pub(crate) unsafe fn from_raw(raw: NonNull<()>) -> Claimed {
        Claimed { sg: raw.cast() }
    }

    /// Whether this is a send future's sudog ([`ASYNC_SEND`]): it has no
    /// value to take, and completing it with success grants it.
    #[inline]
    pub(crate) fn is_async_send(&self) -> bool {
        // SAFETY: a claimed sudog stays alive until `complete`.
        unsafe { self.sg.as_ref() }.is_async_send()
    }

    /// Records the outcome and wakes the waiter (step 4). `success`: the
    /// value was handed over (false: the channel closed, or had no receivers
    /// left).
    #[inline]
    pub(crate) fn complete(self, success: bool) {
        #[cfg(not(loom))]
        self.complete_here(success, crate::m::Here::lookup());
        #[cfg(loom)]
        self.complete_with(success, Waiter::wake);
    }

    /// [`complete`](Self::complete) with the M the caller's entry gate
    /// looked up (the woken goroutine goes to that M's P).
    #[cfg(not(loom))]
    #[inline]
    pub(crate) fn complete_here(self, success: bool, here: crate::m::Here) {
        self.complete_with(success, |w| w.wake_here(here));
    }

    #[inline(always)]
    fn complete_with(self, success: bool, wake: impl FnOnce(Waiter)) {
        // SAFETY: we won the claim, so we are the only writer of the outcome
        // and of `waiter`, and the waiter does not read them (or leave its
        // frame) before `woken` / being readied below.
        unsafe {
            let sg = self.sg.as_ptr() as *const Sudog;
            let st = &*(*sg).state;
            st.fired.set(sg);
            st.success.set(success);
            let w = st
                .waiter
                .replace(None)
                .expect("wait completed twice: its waiter is gone");
            // Release: pairs with the Acquire in `WaitState::is_woken`. From
            // here on the waiter's frame may be gone; only `w` (ours) is used.
            st.woken.store(true, Ordering::Release);
            wake(w);
        }
    }

    /// Starts loading what `complete` reads first, the sudog and the wait
    /// state beside it (both in the waiter's frame, usually one page), so
    /// that a batch completed in a row (`complete_all`) overlaps those
    /// cache and TLB misses instead of taking them one after another.
    #[inline]
    fn prefetch(&self) {
        // A hint only (the loom models have no caches to warm).
        #[cfg(not(loom))]
        crate::sys::mem::prefetch(self.sg.as_ptr() as usize);
    }

    #[inline]
    fn prefetch_state(&self) {
        #[cfg(not(loom))]
        // SAFETY: reading `state` (immutable after the sudog was built) from
        // a live sudog (claimed, not yet completed).
        crate::sys::mem::prefetch(unsafe { self.sg.as_ref().state } as usize);
    }

    /// Links this claim into `list` (close wakes many waiters after
    /// releasing the lock, as Go collects them in a gList).
    pub(crate) fn push_to(self, list: &mut ClaimedList) {
        // SAFETY: a claimed sudog is ours until `complete`: no one else
        // touches its links (it is on no queue).
        unsafe { self.sg.as_ref().next.set(list.head) };
        list.head = self.sg.as_ptr();
    }
}

/// Completes a batch of claims in order (a close waking every waiter),
/// loading each claim's records a few claims ahead: the wait states are in
/// the waiters' frames, on as many cold stacks, one TLB and cache miss each
/// when taken in turn (two passes over a list linked through the sudogs
/// were slower).
///
/// Goroutines are readied onto the tail of this P's ring, all but the last
/// (`park::ready_queued`), which goes to runnext: the queue Go's goready of
/// each leaves, without a full barrier per waiter (a `ready_here` of each
/// was a tenth of the closer's profile).
#[cfg(not(loom))]
pub(crate) fn complete_all(claims: Vec<Claimed>, success: bool, here: crate::m::Here) {
    /// Claims ahead whose sudogs are being loaded; the states are loaded at
    /// half that distance, once their sudog (holding the pointer) is in.
    const AHEAD: usize = 16;
    /// Goroutines readied between two looks for an idle P
    /// (`park::ready_queued`).
    const WAKE_EVERY: usize = 16;
    let mut it = claims.into_iter();
    let mut i = 0usize;
    while let Some(c) = it.next() {
        let rest = it.as_slice();
        if let Some(n) = rest.get(AHEAD - 1) {
            n.prefetch();
        }
        if let Some(n) = rest.get(AHEAD / 2 - 1) {
            n.prefetch_state();
        }
        if rest.is_empty() {
            // The last one into runnext (and an idle P woken if any), as
            // Go's goready of each would leave it.
            c.complete_here(success, here);
        } else {
            let wake = i % WAKE_EVERY == 0;
            c.complete_with(success, |w| w.wake_queued(here, wake));
        }
        i += 1;
    }
}

/// What [`WaitQueue::dequeue_sender`] popped.
pub(crate) enum Popped {
    /// A sender with a value to take (claimed).
    Sender(Claimed),
    /// A send future (claimed: its wait is unshared), which holds its value
    /// back.
    AsyncSend(Claimed),
    /// Nobody claimable.
    Empty,
}

/// Claimed sudogs linked through their `next` field.
pub(crate) struct ClaimedList {
    head: *const Sudog,
}

impl ClaimedList {
    pub(crate) const fn new() -> ClaimedList {
        ClaimedList { head: ptr::null() }
    }

    /// Completes every claim of the list with success (after the lock is
    /// released).
    #[inline]
    pub(crate) fn complete_all(mut self) {
        while let Some(c) = self.pop() {
            c.complete(true);
        }
    }

    pub(crate) fn pop(&mut self) -> Option<Claimed> {
        let sg = NonNull::new(self.head as *mut Sudog)?;
        // SAFETY: the list holds claimed, not yet completed sudogs: alive
        // and ours.
        self.head = unsafe { sg.as_ref().next.get() };
        Some(Claimed { sg })
    }
}

/// Where a plain (one-channel) blocking operation puts its sudog `sg`: in
/// its goroutine's record (`g`), else in `stack`, the caller's frame. The
/// caller's sudog must be alive until its wait is completed and it is off
/// the queue, which holds for both: the G's own sudog is used by one plain
/// operation at a time (the G is parked until a claimer popped it), and the
/// frame does not return before then.
#[cfg(not(loom))]
#[inline]
pub(crate) fn place_sudog(
    g: Option<&'static crate::g::G>,
    stack: &mut std::mem::MaybeUninit<Sudog>,
    sg: Sudog,
) -> *const Sudog {
    match g {
        Some(g) => {
            // The room fits a `Sudog` (the assertion above).
            let own = g.chan_sudog().cast::<Sudog>();
            // SAFETY: the room holds a valid `Sudog` (zeroed, or the last
            // one written here). `g` is the caller's own goroutine, running, so its
            // sudog is on no queue (popped before its last wait completed,
            // or never used) and nobody else reads or writes it; the pop
            // happened before the wake that let this G run again.
            unsafe {
                debug_assert!(
                    !(*own).queued.get(),
                    "a goroutine's own sudog is still queued"
                );
                own.write(sg);
            }
            own
        }
        None => stack.write(sg),
    }
}

/// The waiter record for the caller: its goroutine `g`, or the calling
/// thread when `g` is None.
#[cfg(not(loom))]
pub(crate) fn waiter_for(g: Option<&'static crate::g::G>) -> Waiter {
    match g {
        Some(g) => Waiter::Goroutine(g),
        None => Waiter::Thread(std::thread::current()),
    }
}

/// Step 2: waits until `state` is completed. The caller holds the lock(s)
/// its sudogs are queued under; `unlock` releases them once the caller can
/// be woken: for a goroutine (`g`, the goroutine of the M `here` names),
/// from its M's scheduler after it is parked; for a thread (`g` None),
/// right away, before it waits for `woken`.
///
/// Always inlined, with the park and its switch: the callers are the
/// non-generic waits of this crate (`RawChan::block`, `selectgo`), whose
/// frame is then the only one a woken goroutine returns out of
/// (`g::switch`'s note, "Returns after a switch").
#[cfg(not(loom))]
#[inline(always)]
pub(crate) fn block_here(
    state: &WaitState,
    g: Option<&'static crate::g::G>,
    here: crate::m::Here,
    reason: crate::g::WaitReason,
    mut unlock: impl FnMut(),
) {
    match g {
        Some(_) => {
            crate::runtime::park::park_inline(here, reason, &mut |_| {
                unlock();
                true
            });
            debug_assert!(
                state.is_woken(),
                "goroutine resumed before its wait completed"
            );
        }
        None => {
            unlock();
            state.wait_thread();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests;

#[cfg(all(test, loom))]
mod loom_tests;
