//! `Receiver::recv_async` and `Sender::send_async`: channel operations as
//! futures, for async code (any executor, or `block_on`).
//!
//! # Design
//! An async operation is a channel operation whose wait record cannot live
//! on a stack (the future may move between polls, and an executor does not
//! keep a frame alive while the task is pending). So a pending future owns
//! a heap [`Record`]: the `WaitState`, the sudog and the value slot of the
//! blocked operation (`wait.rs`), with `Waiter::Waker` as who to wake. The
//! record is queued on the channel like any blocked goroutine's, so a peer
//! hands a value over to it directly, FIFO with goroutine waiters, and
//! `select!` and every blocking operation are unchanged: they see one more
//! sudog and complete it like any other.
//!
//! # Protocol (on top of `wait.rs`)
//! - **First poll**: the operation is tried under the lock, as a blocking
//!   one would be; if it would block, the record is allocated outside the
//!   lock (nothing allocates under a channel lock), the operation is tried
//!   again, and the record is enqueued only if it still would block.
//! - **Later polls**: `woken` set: the outcome is final, return it. The
//!   waker changed: under the lock, while the sudog is still queued (so
//!   unclaimed), swap the waiter. A sudog no longer queued was claimed: its
//!   claimer is between its unlock and `complete`, which the future awaits
//!   by spinning (`spin_until_woken`).
//! - **Drop while pending (cancel)**: under the lock, a still queued sudog
//!   is removed: nothing was transferred, no waiter is left behind. A
//!   claimed one is awaited as above. Then:
//!   - a send future that did not send drops its value with it (the
//!     operation did not happen);
//!   - a receive future that was handed a value it will never return gives
//!     the value back to the channel, as a new send would: to a waiting
//!     receiver, the buffer, or, when neither has room, as a detached
//!     blocked sender (an orphan record that frees itself when a receiver
//!     takes the value, or when the channel fails it). The value was sent
//!     already, so a close does not refuse it: given back to a closed
//!     channel, it goes to the buffer or an orphan, and a close leaves
//!     orphans queued (`DETACHED` sudogs), so receivers get the value
//!     before they see the close, as they get buffered values. Only when
//!     every receiver is gone is the value dropped: nobody could take it.
//!
//! # Invariants
//! - A record is freed only by its owner (the future, or an orphan's own
//!   wake), and only when no peer can reach it: its sudog was removed under
//!   the lock, or its wait was completed (`woken`, after which the
//!   completer touches nothing of it).
//! - No foreign code (a waker's clone or drop, a value's drop) runs under
//!   the channel lock.

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
use super::wait::{Sudog, WaitState, Waiter, DETACHED};

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
fn repoll<T>(
    chan: &Chan<T>,
    rec: &RecordPtr<T>,
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
fn cancel<T>(chan: &Chan<T>, rec: &RecordPtr<T>, recv: bool) -> bool {
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
                }
                None
            }
        };
        // SAFETY: locked.
        unsafe { chan.raw.lock.unlock() };
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
        let out = crate::runtime::asyncpreempt::in_runtime(|| {
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
            crate::runtime::preempt::check();
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
        let lost = crate::runtime::asyncpreempt::in_runtime(|| {
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
                    // SAFETY: locked; the orphan frees itself only once
                    // completed, which needs this sudog dequeued first.
                    unsafe { chan.raw.sendq.enqueue(orphan.sudog()) };
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
    value: Option<T>,
    wait: Option<(RecordPtr<T>, Waker)>,
}

impl<'a, T: Send> SendFuture<'a, T> {
    pub(crate) fn new(chan: &'a Chan<T>, v: T) -> SendFuture<'a, T> {
        SendFuture {
            chan,
            value: Some(v),
            wait: None,
        }
    }
}

impl<T: Send> Unpin for SendFuture<'_, T> {}

impl<T: Send> Future for SendFuture<'_, T> {
    type Output = Result<(), SendError<T>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), SendError<T>>> {
        let this = self.get_mut();
        crate::runtime::asyncpreempt::in_runtime(|| {
            let chan = this.chan;
            if let Some((rec, registered)) = &mut this.wait {
                if let Repoll::Pending = repoll(chan, rec, registered, cx) {
                    return Poll::Pending;
                }
                let (rec, _) = this.wait.take().expect("checked above");
                // SAFETY: woken; the record is ours again.
                let r = if unsafe { rec.success() } {
                    Ok(())
                } else {
                    // SAFETY: a failed send leaves the value in the slot.
                    Err(SendError(unsafe { rec.take_value() }))
                };
                // SAFETY: completed: no peer can reach it.
                unsafe { rec.free() };
                return Poll::Ready(r);
            }
            let v = this
                .value
                .take()
                .expect("send_async future polled after it returned Ready");
            crate::runtime::preempt::check();
            let mut rec: Option<RecordPtr<T>> = None;
            let mut v = v;
            loop {
                chan.raw.lock.lock();
                // SAFETY: locked; a Claimed is completed below.
                match unsafe { chan.send_locked(v) } {
                    SendLocked::Done(c) => {
                        // SAFETY: locked.
                        unsafe { chan.raw.lock.unlock() };
                        if let Some(c) = c {
                            c.complete(true);
                        }
                        if let Some(rec) = rec {
                            // SAFETY: never queued; its slot is empty.
                            unsafe { rec.free() };
                        }
                        return Poll::Ready(Ok(()));
                    }
                    SendLocked::Closed(v) => {
                        // SAFETY: locked.
                        unsafe { chan.raw.lock.unlock() };
                        if let Some(rec) = rec {
                            // SAFETY: never queued; its slot is empty.
                            unsafe { rec.free() };
                        }
                        return Poll::Ready(Err(SendError(v)));
                    }
                    SendLocked::Full(back) => match rec.take() {
                        Some(r) => {
                            // SAFETY: the slot is empty; the record ours.
                            unsafe { (*r.0.as_ref().slot.get()).write(back) };
                            // SAFETY: locked; the record stays put until
                            // removed under this lock or completed.
                            unsafe { chan.raw.sendq.enqueue(r.sudog()) };
                            // SAFETY: locked.
                            unsafe { chan.raw.lock.unlock() };
                            this.wait = Some((r, cx.waker().clone()));
                            return Poll::Pending;
                        }
                        None => {
                            // SAFETY: locked.
                            unsafe { chan.raw.lock.unlock() };
                            // Allocate outside the lock, then try again.
                            rec = Some(RecordPtr::new(
                                Waiter::Waker(Box::new(cx.waker().clone())),
                                None,
                                0,
                            ));
                            v = back;
                        }
                    },
                }
            }
        })
    }
}

impl<T: Send> Drop for SendFuture<'_, T> {
    fn drop(&mut self) {
        let Some((rec, _)) = self.wait.take() else {
            return;
        };
        let chan = self.chan;
        let unsent = crate::runtime::asyncpreempt::in_runtime(|| {
            let removed = cancel(chan, &rec, false);
            // SAFETY: removed under the lock, or completed: unreachable
            // either way, and `success` is read only when completed.
            let unsent = if removed || !unsafe { rec.success() } {
                // SAFETY: an unsent value is still in the slot.
                Some(unsafe { rec.take_value() })
            } else {
                None
            };
            // SAFETY: unreachable (see above).
            unsafe { rec.free() };
            unsent
        });
        // The operation did not happen: the value is dropped with the
        // future, outside the runtime call.
        drop(unsent);
    }
}
