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

    /// A sudog for no wait yet: the resting value of a goroutine's own
    /// sudog ([`crate::g::G::chan_sudog`]), overwritten before each use.
    #[cfg(not(loom))]
    pub(crate) fn unused() -> Sudog {
        Sudog {
            next: Slot::new(ptr::null()),
            prev: Slot::new(ptr::null()),
            queued: Slot::new(false),
            shared: false,
            state: ptr::null(),
            elem: ptr::null_mut(),
            index: 0,
        }
    }
}

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
/// when taken in turn.
/// 100,000 receivers woken by one close: 650 ns per waiter before, in two
/// passes over a list linked through the sudogs.
///
/// Goroutines are readied onto the tail of this P's ring, all but the last
/// (`park::ready_queued`), which goes to runnext: the queue Go's goready of
/// each leaves, without a full barrier per waiter (100,000 woken at
/// GOMAXPROCS=1: 47.4 ms to run them all before, 44.6 ms after; the
/// `ready_here` of each was 10% of the closer's samples).
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
            let own = g.chan_sudog();
            // SAFETY: `g` is the caller's own goroutine, running, so its
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
mod tests {
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
}

#[cfg(all(test, loom))]
mod loom_tests {
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
}
