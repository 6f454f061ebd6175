//! `Receiver::recv_async` and `Sender::send_async`: channel operations as
//! futures, for async code (any executor, or `block_on`).
//!
//! # Design
//! An async operation is a channel operation whose wait record cannot live
//! on a stack (the future may move between polls, and an executor does not
//! keep a frame alive while the task is pending). So a pending future owns
//! a heap [`Record`]: the `WaitState` and the sudog of the blocked
//! operation (`wait.rs`), and for a receive the slot the value is handed
//! into, with `Waiter::Waker` as who to wake. The record is queued on the
//! channel like any blocked goroutine's, FIFO with goroutine waiters, and
//! `select!` and every blocking operation see one more sudog.
//!
//! # Cancel safety: the two directions differ
//! Dropping a future before it returned `Ready` is cancelling it. The
//! guarantee is tokio's: a **send** future dropped before `Ready` sent
//! nothing; a **receive** future dropped before `Ready` lost nothing.
//!
//! - A receive may be handed its value while pending (a peer writes it into
//!   the record's slot, Go's direct handoff), and a future dropped after
//!   that gives the value back to the channel (below): the value is not
//!   lost, though another receiver gets it.
//! - A send cannot work that way: a value a peer took from the record
//!   after the future's last poll would be sent by a future that never
//!   returned `Ready`, and dropped then (a `select!` whose other branch
//!   won), its send would have happened anyway: a retry sends it twice.
//!   So a send future's value moves only inside its own poll, the one that
//!   returns `Ready(Ok)`.
//!
//! # Send futures: wait without the value, send when granted
//! A pending send future's sudog holds no value (`ASYNC_SEND`, a null
//! slot): it waits for its turn, and a peer that would take its value
//! *grants* it instead: completes its wait with success, which wakes it to
//! poll again. What a grant means depends on the channel:
//! - **Buffered**: a receive that frees a slot gives it to the first
//!   waiting sender, as Go moves that sender's value in; for a send future
//!   it *reserves* the slot (`RawChan::reserved`: senders and the room
//!   check count reserved slots as filled, so nobody takes its turn). Its
//!   poll releases the reservation and sends: into the slot, or straight
//!   to a receiver that came meanwhile (then the room left over goes to
//!   the next waiting sender, `Chan::fill_from_sendq`).
//! - **Unbuffered**: there is no slot to reserve; the value needs a
//!   receiver that waits for it. So a receiver grants a send future only
//!   when it waits itself: a blocking receive, a blocked select's receive
//!   arm or a pending receive future queues itself and then grants the
//!   first send future (`Chan::grant_on_block`). The granted future's poll
//!   finds a receiver queued and hands its value over; if that receiver
//!   left before the poll (a select completed elsewhere, a timeout), it
//!   queues again, first in line. A receive that does not wait (`try_recv`,
//!   a select with `default`) takes only values that are there: a blocked
//!   goroutine's or thread's, passing over the send futures
//!   (`WaitQueue::dequeue_value`).
//!
//! A grant is a promise to the channel: someone waits on it (a receiver, or
//! the senders behind the reserved slot). A future dropped while granted,
//! before the poll that would use it, passes it on (`Chan::grant_lapsed`):
//! the reserved slot goes to the next waiting sender, or, unbuffered, the
//! next send future is granted if a receiver still waits. A close or the
//! last receiver's drop revokes every reservation (a reserved slot's room
//! goes to the values given back, which receivers get before the close),
//! and the granted futures' polls then fail.
//!
//! # Protocol (on top of `wait.rs`)
//! - **First poll**: the operation is tried under the lock, as a blocking
//!   one would be; if it would block, the record is allocated outside the
//!   lock (nothing allocates under a channel lock), the operation is tried
//!   again, and the record is enqueued only if it still would block.
//! - **Later polls**: not `woken`: if the waker changed, under the lock,
//!   while the sudog is still queued (so unclaimed), swap the waiter. A
//!   sudog no longer queued was claimed: its claimer is between its unlock
//!   and `complete`, which the future awaits by spinning
//!   (`spin_until_woken`). `woken`: a receive's outcome is final, return
//!   it; a send's is a failure (closed, no receivers) or a grant, and a
//!   granted send re-arms its record (outside the lock) and tries again
//!   under the lock, as above.
//! - **Drop while pending (cancel)**: under the lock, a still queued sudog
//!   is removed: nothing was transferred, no waiter is left behind. A
//!   claimed one is awaited as above. Then:
//!   - a send future drops its value (the operation did not happen); if it
//!     had been granted, the grant is passed on (above);
//!   - a receive future that was handed a value it will never return gives
//!     the value back to the channel, as a new send would: to a waiting
//!     receiver, the head of the buffer (it was received before the values
//!     buffered now), or, when neither has room, as a detached blocked
//!     sender, first in line (an orphan record that frees itself when a
//!     receiver takes the value, or when the channel fails it). The value
//!     was sent already, so a close does not refuse it: given back to a
//!     closed channel, it goes to the buffer or an orphan, and a close
//!     leaves orphans queued (`DETACHED` sudogs), so receivers get the
//!     value before they see the close, as they get buffered values. Only
//!     when every receiver is gone is the value dropped: nobody could take
//!     it.
//!
//! # Invariants
//! - A send future's value is in the future until the poll that returns
//!   `Ready`: no peer ever reads its record's slot (it has none).
//! - A record is freed only by its owner (the future, or an orphan's own
//!   wake), and only when no peer can reach it: its sudog was removed under
//!   the lock, or its wait was completed (`woken`, after which the
//!   completer touches nothing of it).
//! - No foreign code (a waker's clone, wake or drop, a value's drop) runs
//!   under the channel lock. A grant made by a goroutine that then parks
//!   (a blocking receive, a select) is completed by the park's unlock step,
//!   on its M's scheduler stack, as a timer's send completes an async
//!   receive: the future's waker runs there.

use std::cell::UnsafeCell;
use std::future::Future;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use super::error::{RecvError, SendError};
use super::hchan::{Chan, RecvLocked, SendLocked};
use super::wait::{ClaimedList, Sudog, WaitState, Waiter, ASYNC_SEND, DETACHED};

/// The heap wait record of one pending async operation (see the module
/// note). The sudog points into the same block.
struct Record<T> {
    state: WaitState,
    slot: UnsafeCell<MaybeUninit<T>>,
    sudog: MaybeUninit<Sudog>,
}

/// Owns one `Record` (a raw block: peers reach it through the queue).
struct RecordPtr<T>(NonNull<Record<T>>);

// SAFETY: the record's shared parts are synchronised by the wait protocol
// (`wait.rs`); the value moves between threads, hence T: Send.
unsafe impl<T: Send> Send for RecordPtr<T> {}
// SAFETY: `&RecordPtr` gives no access (every method is the owner's).
unsafe impl<T: Send> Sync for RecordPtr<T> {}

impl<T> RecordPtr<T> {
    /// `index`: 0, or `DETACHED` for an orphan (module note).
    fn new(waiter: Waiter, value: Option<T>, index: usize) -> RecordPtr<T> {
        let raw = Box::into_raw(Box::new(Record {
            state: WaitState::new(waiter, false),
            slot: UnsafeCell::new(match value {
                Some(v) => MaybeUninit::new(v),
                None => MaybeUninit::uninit(),
            }),
            sudog: MaybeUninit::uninit(),
        }));
        // SAFETY: just allocated, ours alone; the sudog points into the same
        // block, which does not move until it is freed.
        unsafe {
            let sg = Sudog::new(&(*raw).state, (*raw).slot.get().cast(), index);
            (*raw).sudog.write(sg);
            RecordPtr(NonNull::new_unchecked(raw))
        }
    }

    fn state(&self) -> &WaitState {
        // SAFETY: alive while owned.
        unsafe { &self.0.as_ref().state }
    }

    fn sudog(&self) -> &Sudog {
        // SAFETY: alive while owned; initialised in `new`.
        unsafe { self.0.as_ref().sudog.assume_init_ref() }
    }

    /// Whether the completed operation succeeded.
    ///
    /// # Safety
    /// The wait was completed (`state().is_woken()`).
    unsafe fn success(&self) -> bool {
        // SAFETY: woken (contract).
        unsafe { self.state().outcome() }
            .expect("async channel wait woken without an outcome")
            .1
    }

    /// Moves the value out of the slot.
    ///
    /// # Safety
    /// The slot holds a value (a send not taken, a receive completed with
    /// success) and no peer can reach the record; called once.
    unsafe fn take_value(&self) -> T {
        // SAFETY: contract.
        unsafe { (*self.0.as_ref().slot.get()).assume_init_read() }
    }
}

impl RecordPtr<()> {
    /// The record of a pending send future: a sudog with no value slot
    /// (`ASYNC_SEND`: the value stays in the future).
    fn new_async_send(waiter: Waiter) -> RecordPtr<()> {
        let rec = RecordPtr::new(waiter, None, ASYNC_SEND);
        // SAFETY: just allocated, ours alone.
        unsafe { rec.rearm_async_send(None) };
        rec
    }

    /// Arms the record for a new wait (`Some` waiter to wake), or only
    /// rebuilds its sudog (`None`: at creation).
    ///
    /// # Safety
    /// No peer can reach the record: just allocated, or its wait was
    /// completed (`woken`) and its sudog is off every queue.
    unsafe fn rearm_async_send(&self, waiter: Option<Waiter>) {
        let raw = self.0.as_ptr();
        // SAFETY: unreachable by peers (contract), so ours alone. The state
        // is replaced in place (a completed wait's waiter was taken by its
        // completer: nothing of value is dropped), and the sudog rebuilt to
        // point at it, without a value slot.
        unsafe {
            if let Some(w) = waiter {
                (*raw).state = WaitState::new(w, false);
            }
            let sg = Sudog::new_async_send(&(*raw).state);
            (*raw).sudog.write(sg);
        }
    }
}

impl<T> RecordPtr<T> {
    /// Frees the block (the slot's content is not dropped).
    ///
    /// # Safety
    /// No peer can reach the record (module note).
    unsafe fn free(self) {
        // SAFETY: allocated by `Box::new` in `new`; unreachable (contract).
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}

/// What a pending future does on a later poll.
enum Repoll {
    Pending,
    /// The wait is complete: take the outcome.
    Done,
}

/// The shared half of `poll` for a pending future: see the module note.
fn repoll<T, U>(
    chan: &Chan<T>,
    rec: &RecordPtr<U>,
    registered: &mut Waker,
    cx: &Context<'_>,
) -> Repoll {
    if rec.state().is_woken() {
        return Repoll::Done;
    }
    if registered.will_wake(cx.waker()) {
        // The registered waker will be woken on completion.
        return Repoll::Pending;
    }
    let new = cx.waker().clone();
    chan.raw.lock.lock();
    // SAFETY: we hold the lock the sudog was queued under.
    if unsafe { rec.sudog().is_queued() } {
        // SAFETY: locked and queued.
        let old = unsafe { rec.state().set_waiter(Waiter::Waker(Box::new(new.clone()))) };
        // SAFETY: we hold it.
        unsafe { chan.raw.lock.unlock() };
        drop(old);
        *registered = new;
        return Repoll::Pending;
    }
    // SAFETY: we hold it.
    unsafe { chan.raw.lock.unlock() };
    rec.state().spin_until_woken();
    Repoll::Done
}

/// Cancels a pending wait: returns true if the sudog was still queued (and
/// is now removed: nothing happened), false once the wait is completed.
fn cancel<T, U>(chan: &Chan<T>, rec: &RecordPtr<U>, recv: bool) -> bool {
    chan.raw.lock.lock();
    // SAFETY: we hold the lock the sudog was queued under.
    let queued = unsafe { rec.sudog().is_queued() };
    if queued {
        let q = if recv {
            &chan.raw.recvq
        } else {
            &chan.raw.sendq
        };
        // SAFETY: locked; the sudog is ours and was queued on `q`.
        unsafe { q.remove(rec.sudog()) };
    }
    // SAFETY: we hold it.
    unsafe { chan.raw.lock.unlock() };
    if !queued {
        rec.state().spin_until_woken();
    }
    queued
}

/// The future of [`Receiver::recv_async`](crate::Receiver::recv_async).
#[must_use = "futures do nothing unless polled"]
pub struct RecvFuture<'a, T: Send> {
    chan: &'a Chan<T>,
    /// The pending wait and the waker it was registered with.
    wait: Option<(RecordPtr<T>, Waker)>,
    done: bool,
}

impl<'a, T: Send> RecvFuture<'a, T> {
    pub(crate) fn new(chan: &'a Chan<T>) -> RecvFuture<'a, T> {
        RecvFuture {
            chan,
            wait: None,
            done: false,
        }
    }

    /// Receives under the lock; if that would block, enqueues `rec` (when
    /// given) and returns None.
    fn attempt(&self, rec: Option<&RecordPtr<T>>) -> Option<Result<T, RecvError>> {
        let chan = self.chan;
        let mut grant = None;
        chan.raw.lock.lock();
        // SAFETY: locked; a Claimed is completed below.
        let r = match unsafe { chan.recv_locked() } {
            RecvLocked::Done(v, c) => Some((Ok(v), c)),
            RecvLocked::Closed => Some((Err(RecvError), None)),
            RecvLocked::Empty => {
                if let Some(rec) = rec {
                    // SAFETY: locked; the record stays put until removed
                    // under this lock or completed (module note).
                    unsafe { chan.raw.recvq.enqueue(rec.sudog()) };
                    // A receiver that waits grants a pending send future.
                    // SAFETY: locked, queued; completed below.
                    grant = unsafe { chan.grant_on_block() };
                }
                None
            }
        };
        // SAFETY: locked.
        unsafe { chan.raw.lock.unlock() };
        if let Some(g) = grant {
            g.complete(true);
        }
        r.map(|(r, c)| {
            if let Some(c) = c {
                c.complete(true);
            }
            r
        })
    }
}

impl<T: Send> Unpin for RecvFuture<'_, T> {}

impl<T: Send> Future for RecvFuture<'_, T> {
    type Output = Result<T, RecvError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T, RecvError>> {
        let this = self.get_mut();
        assert!(
            !this.done,
            "recv_async future polled after it returned Ready"
        );
        // A synctest bubble's channel polled from outside it panics, as
        // `recv` does (`crate::synctest`'s note, "Misuse").
        crate::runtime::bubble::check_chan(
            this.chan as *const Chan<T> as usize,
            "receive on",
            false,
        );
        let out = crate::runtime::entry::call(|| {
            if let Some((rec, registered)) = &mut this.wait {
                if let Repoll::Pending = repoll(this.chan, rec, registered, cx) {
                    return Poll::Pending;
                }
                let (rec, _) = this.wait.take().expect("checked above");
                // SAFETY: woken; the record is ours again.
                let r = if unsafe { rec.success() } {
                    // SAFETY: a successful receive wrote the value.
                    Ok(unsafe { rec.take_value() })
                } else {
                    Err(RecvError)
                };
                // SAFETY: completed: no peer can reach it.
                unsafe { rec.free() };
                return Poll::Ready(r);
            }
            crate::runtime::coop_preempt::check();
            if let Some(r) = this.attempt(None) {
                return Poll::Ready(r);
            }
            // Allocate outside the lock, then try again.
            let waker = cx.waker().clone();
            let rec = RecordPtr::new(Waiter::Waker(Box::new(waker.clone())), None, 0);
            match this.attempt(Some(&rec)) {
                Some(r) => {
                    // SAFETY: never queued; its slot is empty.
                    unsafe { rec.free() };
                    Poll::Ready(r)
                }
                None => {
                    this.wait = Some((rec, waker));
                    Poll::Pending
                }
            }
        });
        if out.is_ready() {
            this.done = true;
        }
        out
    }
}

impl<T: Send> Drop for RecvFuture<'_, T> {
    fn drop(&mut self) {
        let Some((rec, _)) = self.wait.take() else {
            return;
        };
        let chan = self.chan;
        let lost = crate::runtime::entry::call(|| {
            if cancel(chan, &rec, true) {
                // SAFETY: removed under the lock: unreachable.
                unsafe { rec.free() };
                return None;
            }
            // SAFETY: completed (`cancel` waited for `woken`).
            if !unsafe { rec.success() } {
                // SAFETY: completed: unreachable.
                unsafe { rec.free() };
                return None;
            }
            // SAFETY: a successful receive wrote the value; completed.
            let v = unsafe { rec.take_value() };
            // SAFETY: completed: unreachable.
            unsafe { rec.free() };
            give_back(chan, v)
        });
        // A value the closed channel would not take back: dropped here,
        // outside the runtime call.
        drop(lost);
    }
}

/// Returns a received value that will never be returned by its future to
/// the channel, as a send would (module note), even to a closed channel.
/// Gives the value back to the caller (to drop) only if every receiver is
/// gone.
fn give_back<T: Send>(chan: &Chan<T>, v: T) -> Option<T> {
    chan.raw.lock.lock();
    // SAFETY: locked; a Claimed is completed below.
    match unsafe { chan.give_back_locked(v) } {
        SendLocked::Done(c) => {
            // SAFETY: locked.
            unsafe { chan.raw.lock.unlock() };
            if let Some(c) = c {
                c.complete(true);
            }
            None
        }
        SendLocked::Closed(v) => {
            // SAFETY: locked.
            unsafe { chan.raw.lock.unlock() };
            Some(v)
        }
        SendLocked::Full(v) => {
            // SAFETY: locked.
            unsafe { chan.raw.lock.unlock() };
            // Allocate outside the lock, then try again: the state may have
            // changed meanwhile.
            let orphan = Orphan::<T>::new(v);
            chan.raw.lock.lock();
            // SAFETY: the slot holds the value; the record is ours alone.
            let v = unsafe { orphan.take_value() };
            // SAFETY: locked; a Claimed is completed below.
            match unsafe { chan.give_back_locked(v) } {
                SendLocked::Full(v) => {
                    // SAFETY: the slot is empty again; ours alone.
                    unsafe { (*orphan.0.as_ref().slot.get()).write(v) };
                    // First in line: the value was received before every
                    // blocked sender's.
                    // SAFETY: locked; the orphan frees itself only once
                    // completed, which needs this sudog dequeued first.
                    unsafe { chan.raw.sendq.enqueue_front(orphan.sudog()) };
                    // SAFETY: locked.
                    unsafe { chan.raw.lock.unlock() };
                    None
                }
                r => {
                    // SAFETY: locked.
                    unsafe { chan.raw.lock.unlock() };
                    // SAFETY: never queued: unreachable; its slot is empty.
                    unsafe { orphan.free() };
                    match r {
                        SendLocked::Done(c) => {
                            if let Some(c) = c {
                                c.complete(true);
                            }
                            None
                        }
                        SendLocked::Closed(v) => Some(v),
                        SendLocked::Full(_) => unreachable!("handled above"),
                    }
                }
            }
        }
    }
}

/// A detached blocked sender: a record whose waker frees it (module note).
struct Orphan<T>(std::marker::PhantomData<T>);

/// The orphan's waker: frees the record when the send completes.
struct OrphanWake {
    record: AtomicPtr<()>,
    release: unsafe fn(*mut ()),
}

impl Wake for OrphanWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref()
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // The wait is completed once, so this runs once; the swap makes a
        // second call (there is none) harmless.
        let rec = self.record.swap(std::ptr::null_mut(), Ordering::AcqRel);
        if !rec.is_null() {
            // SAFETY: `rec` is this orphan's record, completed (the
            // completer stored `woken` before waking us), reachable only
            // through this pointer.
            unsafe { (self.release)(rec) }
        }
    }
}

impl<T: Send> Orphan<T> {
    #[allow(clippy::new_ret_no_self)]
    fn new(v: T) -> RecordPtr<T> {
        let wake = Arc::new(OrphanWake {
            record: AtomicPtr::new(std::ptr::null_mut()),
            release: Orphan::<T>::release,
        });
        let rec = RecordPtr::new(
            Waiter::Waker(Box::new(Waker::from(wake.clone()))),
            Some(v),
            DETACHED,
        );
        wake.record.store(rec.0.as_ptr().cast(), Ordering::Release);
        rec
    }

    /// # Safety
    /// `rec` is an orphan's completed record, unreachable by any peer.
    unsafe fn release(rec: *mut ()) {
        // SAFETY: contract; the pointer came from `RecordPtr::new`.
        let rec = RecordPtr::<T>(unsafe { NonNull::new_unchecked(rec.cast()) });
        // SAFETY: completed (contract).
        if !unsafe { rec.success() } {
            // The channel failed the send: the value is still ours.
            // SAFETY: a failed send leaves the value in the slot.
            drop(unsafe { rec.take_value() });
        }
        // SAFETY: completed, unreachable (contract).
        unsafe { rec.free() };
    }
}

/// The future of [`Sender::send_async`](crate::Sender::send_async).
#[must_use = "futures do nothing unless polled"]
pub struct SendFuture<'a, T: Send> {
    chan: &'a Chan<T>,
    /// The value, until a poll sends it (or returns it in the error).
    value: Option<T>,
    /// The pending wait (an `ASYNC_SEND` record: no value in it) and the
    /// waker it was registered with.
    wait: Option<(RecordPtr<()>, Waker)>,
}

impl<'a, T: Send> SendFuture<'a, T> {
    pub(crate) fn new(chan: &'a Chan<T>, v: T) -> SendFuture<'a, T> {
        SendFuture {
            chan,
            value: Some(v),
            wait: None,
        }
    }

    /// `poll`'s body, inside the entry gate (module note, "Send futures").
    fn poll_send(&mut self, cx: &Context<'_>) -> Poll<Result<(), SendError<T>>> {
        let chan = self.chan;
        let mut granted = false;
        if let Some((rec, registered)) = &mut self.wait {
            if let Repoll::Pending = repoll(chan, rec, registered, cx) {
                return Poll::Pending;
            }
            // SAFETY: woken; the record is ours again.
            if !unsafe { rec.success() } {
                // Failed: closed, or every receiver gone.
                let (rec, _) = self.wait.take().expect("checked above");
                // SAFETY: completed: no peer can reach it.
                unsafe { rec.free() };
                let v = self
                    .value
                    .take()
                    .expect("a pending send future holds its value");
                return Poll::Ready(Err(SendError(v)));
            }
            // Granted: a receiver waits for this poll (unbuffered), or a
            // slot of the buffer is reserved for it. The record is re-armed
            // now, outside the lock (a waker's clone and drop are foreign
            // code), in case the send must wait again.
            granted = true;
            let w = cx.waker().clone();
            // SAFETY: completed and off the queue (woken): unreachable.
            unsafe { rec.rearm_async_send(Some(Waiter::Waker(Box::new(w.clone())))) };
            *registered = w;
        } else {
            crate::runtime::coop_preempt::check();
        }
        let mut v = self
            .value
            .take()
            .expect("send_async future polled after it returned Ready");
        // A record for a first wait, allocated outside the lock.
        let mut fresh: Option<RecordPtr<()>> = None;
        loop {
            let mut claims = ClaimedList::new();
            chan.raw.lock.lock();
            // A granted future releases its reserved slot (if any) for this
            // send, and the room left over goes on to the next waiting
            // sender.
            // SAFETY: locked; granted, once per grant.
            let released = granted && unsafe { chan.release_reservation() };
            // SAFETY: locked; a returned claim is completed below.
            let r = unsafe { chan.send_locked(v) };
            if released {
                // SAFETY: locked; the claims are completed after the unlock.
                unsafe { chan.fill_from_sendq(&mut claims) };
            }
            let out = match r {
                SendLocked::Done(c) => {
                    // SAFETY: locked.
                    unsafe { chan.raw.lock.unlock() };
                    if let Some(c) = c {
                        c.complete(true);
                    }
                    Poll::Ready(Ok(()))
                }
                SendLocked::Closed(v) => {
                    // SAFETY: locked.
                    unsafe { chan.raw.lock.unlock() };
                    Poll::Ready(Err(SendError(v)))
                }
                SendLocked::Full(back) => {
                    if granted {
                        // Unbuffered, and the receiver that granted this
                        // future left before its poll: wait again, first in
                        // line, where the grant took it from. (A buffered
                        // grant had a slot: never full.)
                        debug_assert!(!released);
                        let (rec, _) = self.wait.as_ref().expect("granted");
                        // SAFETY: locked; re-armed above, off every queue.
                        unsafe { chan.raw.sendq.enqueue_front(rec.sudog()) };
                        // SAFETY: locked.
                        unsafe { chan.raw.lock.unlock() };
                        self.value = Some(back);
                        Poll::Pending
                    } else if let Some(rec) = fresh.take() {
                        // SAFETY: locked; the record stays put until removed
                        // under this lock or completed (module note).
                        unsafe { chan.raw.sendq.enqueue(rec.sudog()) };
                        // SAFETY: locked.
                        unsafe { chan.raw.lock.unlock() };
                        self.value = Some(back);
                        self.wait = Some((rec, cx.waker().clone()));
                        Poll::Pending
                    } else {
                        // SAFETY: locked.
                        unsafe { chan.raw.lock.unlock() };
                        // Allocate outside the lock, then try again.
                        fresh = Some(RecordPtr::new_async_send(Waiter::Waker(Box::new(
                            cx.waker().clone(),
                        ))));
                        v = back;
                        continue;
                    }
                }
            };
            claims.complete_all();
            if out.is_ready() {
                if let Some(rec) = fresh {
                    // SAFETY: never queued.
                    unsafe { rec.free() };
                }
                if let Some((rec, _)) = self.wait.take() {
                    // SAFETY: granted: completed, then re-armed but never
                    // queued again.
                    unsafe { rec.free() };
                }
            }
            return out;
        }
    }
}

impl<T: Send> Unpin for SendFuture<'_, T> {}

impl<T: Send> Future for SendFuture<'_, T> {
    type Output = Result<(), SendError<T>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), SendError<T>>> {
        let this = self.get_mut();
        // As `RecvFuture::poll`.
        crate::runtime::bubble::check_chan(this.chan as *const Chan<T> as usize, "send on", false);
        crate::runtime::entry::call(|| this.poll_send(cx))
    }
}

impl<T: Send> Drop for SendFuture<'_, T> {
    fn drop(&mut self) {
        let Some((rec, _)) = self.wait.take() else {
            // Never waited, or done: nothing queued. The value (if unsent)
            // is dropped with the future.
            return;
        };
        let chan = self.chan;
        crate::runtime::entry::call(|| {
            // A queued sudog is removed: nothing happened. Otherwise the
            // wait was completed: failed (nothing to undo), or granted, and
            // the grant, which this future will never use, is passed on.
            // SAFETY: `success` is read only once completed.
            if !cancel(chan, &rec, false) && unsafe { rec.success() } {
                let mut claims = ClaimedList::new();
                chan.raw.lock.lock();
                // SAFETY: locked; granted, off the queue, once; the claims
                // are completed below.
                unsafe { chan.grant_lapsed(&mut claims) };
                // SAFETY: locked.
                unsafe { chan.raw.lock.unlock() };
                claims.complete_all();
            }
            // SAFETY: removed under the lock, or completed: unreachable.
            unsafe { rec.free() };
        });
        // The value was not sent: it is dropped with the future, outside
        // the runtime call.
    }
}
