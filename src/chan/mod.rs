//! Channels and `select` (Go's runtime/chan.go and select.go).
//!
//! # Where things are
//! - `hchan.rs`: the channel: ring buffer, send/recv/close, the direct
//!   send to or from a blocked peer.
//! - `wait.rs`: the wait records (sudog, wait queue, the per-wait state with
//!   its `done` claim) and the protocol by which a peer completes a blocked
//!   operation. Model-checked with loom.
//! - `select.rs`: `select!` and Go's `selectgo` (poll order, lock order, the
//!   three passes).
//! - `lock.rs`: the per-channel lock (Go's `lock_futex`). Model-checked.
//! - `fast.rs`: the lock-free fast paths of `try_send` / `try_recv` (Go's
//!   `empty`/`full`). Model-checked.
//! - `error.rs`: the error types; `slot.rs`: the std/loom switch for cells.
//!
//! # The shape of an operation
//! A non-blocking operation on a channel that is not ready (empty for a
//! receive, full for a send) answers without the lock (`fast.rs`).
//! Otherwise every operation takes the channel's lock once. If it can complete at once
//! (buffer space or a buffered value, or a blocked peer to hand the value to
//! or take it from) it does so and, if it completed a blocked peer, readies
//! that peer after unlocking: into this P's `runnext` when the peer is a
//! goroutine (Go's `goready`), so the pair runs back to back on one P with
//! one time slice, or by unparking it when the peer is an OS thread.
//! Otherwise it blocks: its wait records live in its own frame (no
//! allocation), the goroutine parks and its M's scheduler releases the lock
//! (or the thread unlocks and waits on its park token). A blocked peer's
//! value moves straight between the two frames.
//!
//! Channels work the same from goroutines and from plain OS threads, in any
//! mix: a thread blocks where a goroutine parks.

mod error;
mod fast;
mod future;
mod hchan;
mod lock;
pub(crate) mod select;
mod slot;
pub(crate) mod timechan;
pub(crate) mod wait;

use std::fmt;
use std::sync::Arc;

pub use self::error::{
    CloseError, RecvError, RecvTimeoutError, SendError, SendTimeoutError, TryRecvError,
    TrySendError,
};
pub use self::future::{RecvFuture, SendFuture};
use self::hchan::Chan;

/// Creates a channel of `T` with a buffer of `cap` values (Go's
/// `make(chan T, cap)`). `cap == 0` is unbuffered: a send completes only
/// when a receiver takes the value.
///
/// Both halves can be cloned: any number of goroutines or threads may send
/// and receive. Dropping the last [`Sender`] closes the channel; once every
/// [`Receiver`] is gone, sends fail and give the value back.
///
/// # Panics
/// If the buffer cannot be allocated.
///
/// ```
/// let (tx, rx) = goroutine::chan::<u32>(0);
/// let total = goroutine::run(move || {
///     goroutine::go(move || {
///         for i in 1..=10 {
///             tx.send(i).unwrap();
///         }
///         // Dropping the last sender closes the channel.
///     });
///     rx.iter().sum::<u32>()
/// });
/// assert_eq!(total, 55);
/// ```
// entry: allocates the channel; no runtime state
pub fn chan<T>(cap: usize) -> (Sender<T>, Receiver<T>) {
    let c = Arc::new(Chan::new(cap));
    // Made in a synctest bubble: it belongs to it.
    crate::runtime::bubble::tag_chan(Arc::as_ptr(&c) as usize);
    (Sender { chan: c.clone() }, Receiver { chan: c })
}

/// A timer's channel (`time::Timer`, `Ticker`, `after`): one value of
/// room inside, capacity 0 as the user sees it (Go 1.23's synchronous
/// timer channels; `hchan.rs`, the `timer` field).
pub(crate) fn timer_chan<T>() -> (Sender<T>, Receiver<T>) {
    let c = Arc::new(Chan::new_for_timer());
    crate::runtime::bubble::tag_chan(Arc::as_ptr(&c) as usize);
    (Sender { chan: c.clone() }, Receiver { chan: c })
}

/// The sending half of a channel (see [`chan`]).
pub struct Sender<T> {
    pub(crate) chan: Arc<Chan<T>>,
}

/// The receiving half of a channel (see [`chan`]).
pub struct Receiver<T> {
    pub(crate) chan: Arc<Chan<T>>,
}

impl<T> Sender<T> {
    /// Sends `v`, blocking (parking the goroutine, or blocking the thread)
    /// until a receiver takes it or the buffer has room. Fails, giving `v`
    /// back, if the channel is closed (also while blocked) or every receiver
    /// is gone.
    #[inline]
    pub fn send(&self, v: T) -> Result<(), SendError<T>> {
        if crate::runtime::bubble::chan_checks_on() {
            return self.send_checked(v);
        }
        crate::runtime::entry::call_here(move |here| {
            let here = crate::runtime::coop_preempt::check_here(here);
            self.chan.send(v, here)
        })
    }

    /// [`send`](Self::send) while synctest bubbles exist: with their
    /// misuse check before and the durable-wait note after.
    #[cold]
    #[inline(never)]
    fn send_checked(&self, v: T) -> Result<(), SendError<T>> {
        crate::runtime::bubble::check_chan(Arc::as_ptr(&self.chan) as usize, "send on", true);
        crate::runtime::entry::call_here(move |here| {
            let here = crate::runtime::coop_preempt::check_here(here);
            let r = self.chan.send(v, here);
            crate::runtime::bubble::chan_op_done();
            r
        })
    }

    /// Sends `v`, waiting at most `timeout`; on failure the value comes
    /// back in the error.
    ///
    /// # Cancel safety
    /// A timeout is a send that did not happen: `Err(Timeout(v))` gives
    /// `v` back, and no receiver got it (the wait is a `select!` of the
    /// send and a timer, and only the arm that fires happens). Retrying
    /// after a timeout never sends a value twice.
    pub fn send_timeout(
        &self,
        v: T,
        timeout: std::time::Duration,
    ) -> Result<(), SendTimeoutError<T>> {
        crate::runtime::bubble::check_chan(Arc::as_ptr(&self.chan) as usize, "send on", false);
        crate::runtime::entry::call(move || {
            let v = match self.try_send(v) {
                Ok(()) => return Ok(()),
                Err(TrySendError::Closed(v)) => return Err(SendTimeoutError::Closed(v)),
                Err(TrySendError::Full(v)) if timeout.is_zero() => {
                    return Err(SendTimeoutError::Timeout(v))
                }
                Err(TrySendError::Full(v)) => v,
            };
            let timer = crate::time::Timer::new(timeout);
            let mut arm = select::SendArm::new(Some(self), v);
            let mut tarm = select::RecvArm::new(Some(timer.c()));
            select::select([arm.case(), tarm.case()], true);
            match arm.take() {
                Some(Ok(())) => Ok(()),
                Some(Err(SendError(v))) => Err(SendTimeoutError::Closed(v)),
                None => match arm.into_value() {
                    Some(v) => Err(SendTimeoutError::Timeout(v)),
                    None => crate::runtime::throw("send_timeout: value lost"),
                },
            }
        })
    }

    /// Sends `v` if that needs no waiting: buffer room, or (unbuffered) a
    /// receiver already blocked.
    ///
    /// On a full channel (or an unbuffered one with no receiver waiting) it
    /// answers without taking the channel's lock, so polling with it only
    /// reads the channel and does not slow down the other side.
    pub fn try_send(&self, v: T) -> Result<(), TrySendError<T>> {
        crate::runtime::bubble::check_chan(Arc::as_ptr(&self.chan) as usize, "send on", false);
        crate::runtime::entry::call(move || self.chan.try_send(v))
    }

    /// Closes the channel for every sender (Go's `close`): blocked senders
    /// get their value back, receivers drain the buffer and then get
    /// [`RecvError`]. Closing a closed channel is an error (Go panics).
    pub fn close(&self) -> Result<(), CloseError> {
        crate::runtime::bubble::check_chan(Arc::as_ptr(&self.chan) as usize, "close of", false);
        crate::runtime::entry::call(move || self.chan.close())
    }

    /// Values in the buffer.
    pub fn len(&self) -> usize {
        crate::runtime::entry::call(move || self.chan.len())
    }

    /// Whether the buffer holds no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The buffer size given to [`chan`].
    // entry: an immutable field of the channel
    pub fn capacity(&self) -> usize {
        self.chan.user_cap()
    }

    /// Whether the channel is closed (by [`Sender::close`] or by dropping
    /// every sender).
    pub fn is_closed(&self) -> bool {
        crate::runtime::entry::call(move || self.chan.is_closed())
    }

    /// [`try_send`](Self::try_send) that hands back the receiver it gave
    /// the value to instead of waking it, for a caller that sends under a
    /// lock of its own and wakes the receiver (which may take the
    /// scheduler's locks) once it has released it (a synctest bubble's
    /// outcome; a channel timer's firing does the same through
    /// `timechan`).
    #[inline]
    pub(crate) fn try_send_defer_wake(&self, v: T) -> Result<Handoff, TrySendError<T>> {
        self.chan.try_send_claim(v).map(Handoff)
    }
}

/// The receiver a [`Sender::try_send_defer_wake`] handed its value to, if
/// any: wake it with [`wake`](Handoff::wake), with no timer lock held.
#[must_use = "a receiver handed a value must be woken"]
pub(crate) struct Handoff(Option<wait::Claimed>);

impl Handoff {
    /// Wakes the receiver (readies it, or wakes its thread or task).
    #[inline]
    pub(crate) fn wake(self) {
        if let Some(c) = self.0 {
            c.complete(true);
        }
    }
}

impl<T> Receiver<T> {
    /// Receives a value, blocking (parking the goroutine, or blocking the
    /// thread) until one is available. Fails once the channel is closed and
    /// its buffer drained.
    #[inline]
    pub fn recv(&self) -> Result<T, RecvError> {
        if crate::runtime::bubble::chan_checks_on() {
            return self.recv_checked();
        }
        crate::runtime::entry::call_here(move |here| {
            let here = crate::runtime::coop_preempt::check_here(here);
            self.chan.recv(here)
        })
    }

    /// [`recv`](Self::recv) while synctest bubbles exist (as
    /// `Sender::send_checked`).
    #[cold]
    #[inline(never)]
    fn recv_checked(&self) -> Result<T, RecvError> {
        crate::runtime::bubble::check_chan(Arc::as_ptr(&self.chan) as usize, "receive on", true);
        crate::runtime::entry::call_here(move |here| {
            let here = crate::runtime::coop_preempt::check_here(here);
            let r = self.chan.recv(here);
            crate::runtime::bubble::chan_op_done();
            r
        })
    }

    /// Receives a value, waiting at most `timeout`.
    ///
    /// # Cancel safety
    /// A timeout took no value: `Err(Timeout)` means nothing was received,
    /// and a value sent meanwhile waits in the channel for the next
    /// receive (the wait is a `select!` of the receive and a timer, and
    /// only the arm that fires happens).
    pub fn recv_timeout(&self, timeout: std::time::Duration) -> Result<T, RecvTimeoutError> {
        crate::runtime::bubble::check_chan(Arc::as_ptr(&self.chan) as usize, "receive on", false);
        crate::runtime::entry::call(move || {
            match self.try_recv() {
                Ok(v) => return Ok(v),
                Err(TryRecvError::Closed) => return Err(RecvTimeoutError::Closed),
                Err(TryRecvError::Empty) if timeout.is_zero() => {
                    return Err(RecvTimeoutError::Timeout)
                }
                Err(TryRecvError::Empty) => {}
            }
            let timer = crate::time::Timer::new(timeout);
            let mut arm = select::RecvArm::new(Some(self));
            let mut tarm = select::RecvArm::new(Some(timer.c()));
            select::select([arm.case(), tarm.case()], true);
            match arm.take() {
                Some(Ok(v)) => Ok(v),
                Some(Err(RecvError)) => Err(RecvTimeoutError::Closed),
                None => Err(RecvTimeoutError::Timeout),
            }
        })
    }

    /// Receives a value if one is ready: buffered, or (unbuffered) offered
    /// by a blocked sender.
    ///
    /// A pending [`send_async`](Sender::send_async) future does not offer
    /// its value: it sends only in its own poll, to a receiver that waits
    /// for it (see its "Cancel safety"). So on an unbuffered channel whose
    /// only senders are pending futures, `try_recv` finds nothing; a
    /// blocking [`recv`](Self::recv), a `select!` without `default` or a
    /// [`recv_async`](Self::recv_async) gets their values.
    ///
    /// On an empty channel (open, or closed and drained) it answers without
    /// taking the channel's lock, so polling with it only reads the channel
    /// and does not slow down the sender.
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        crate::runtime::bubble::check_chan(Arc::as_ptr(&self.chan) as usize, "receive on", false);
        crate::runtime::entry::call(move || self.chan.try_recv())
    }

    /// A blocking iterator: yields values until the channel is closed and
    /// drained.
    // entry: builds the iterator (its `next` is gated through `recv`)
    pub fn iter(&self) -> Iter<'_, T> {
        Iter { rx: self }
    }

    /// A non-blocking iterator: yields the values ready now.
    // entry: builds the iterator (its `next` is gated through `try_recv`)
    pub fn try_iter(&self) -> TryIter<'_, T> {
        TryIter { rx: self }
    }

    /// Values in the buffer. Always 0 for a timer's channel
    /// ([`Timer::c`](crate::time::Timer::c), [`Ticker::c`](crate::time::Ticker::c),
    /// [`after`](crate::time::after)), which presents as unbuffered, as
    /// Go 1.23's do: a receive may still find a value ready.
    pub fn len(&self) -> usize {
        crate::runtime::entry::call(move || self.chan.len())
    }

    /// Whether the buffer holds no values (`len() == 0`).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The buffer size given to [`chan`]; 0 for a timer's channel (see
    /// [`len`](Self::len)).
    // entry: an immutable field of the channel
    pub fn capacity(&self) -> usize {
        self.chan.user_cap()
    }

    /// Values in the buffer, a timer's channel's included (tests).
    #[cfg(test)]
    pub(crate) fn buffered(&self) -> usize {
        self.chan.buffered()
    }

    /// Whether the channel is closed (it may still hold buffered values).
    pub fn is_closed(&self) -> bool {
        crate::runtime::entry::call(move || self.chan.is_closed())
    }

    /// Drops this receiver without the last receiver's work (failing
    /// blocked senders, dropping the buffered values at once). Only for a
    /// channel whose senders never block and are about to go too, with no
    /// lock between: a timer's, whose one sender only try-sends and is
    /// dropped with the timer right after. Nobody is left to see that
    /// work, the values still buffered go with the channel, and the
    /// sender's drop then finds no receiver to close the channel for. A
    /// receiver the user cloned keeps the usual behaviour: it is not the
    /// last, and the sender's drop closes the channel for it.
    pub(crate) fn drop_unobserved(self) {
        let this = std::mem::ManuallyDrop::new(self);
        let _last = this.chan.drop_receiver();
        // SAFETY: `this` is never used or dropped again, so the Arc is
        // moved out exactly once.
        drop(unsafe { std::ptr::read(&this.chan) });
    }

    /// Whether this receiver and one sender are the channel's only handles
    /// (and its only references), and it is open, empty and without
    /// waiters: a caller that holds that sender too may hand the pair out
    /// as a new channel (`time::kit`).
    pub(crate) fn is_unused_pair(&self) -> bool {
        Arc::strong_count(&self.chan) == 2 && self.chan.is_unused_pair()
    }

    /// Makes `t` the timer that sends on this channel: the last receiver's
    /// drop stops it (`time::after`).
    ///
    /// # Safety
    /// As `Chan::set_sending_timer`: the caller holds the channel's only
    /// handles.
    pub(crate) unsafe fn set_sending_timer(&self, t: &Arc<crate::p::timerheap::Timer>) {
        // SAFETY: forwarded.
        unsafe { self.chan.set_sending_timer(t) }
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.chan.add_sender();
        Sender {
            chan: self.chan.clone(),
        }
    }
}

impl<T> Clone for Receiver<T> {
    fn clone(&self) -> Self {
        self.chan.add_receiver();
        Receiver {
            chan: self.chan.clone(),
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        // Giving up one of several senders touches no runtime state; the
        // last one closes the channel and wakes its waiters: runtime work,
        // behind the entry gate. Unless no receiver is left to see it (a
        // timer's channel, dropped whole).
        if self.chan.drop_sender() && self.chan.close_needed() {
            crate::runtime::entry::call(move || self.chan.last_sender_dropped())
        }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        // As for `Sender`: only the last receiver does runtime work, and
        // only if a sender or a queued value is left.
        if self.chan.drop_receiver() && self.chan.receiver_work_left() {
            crate::runtime::entry::call(move || self.chan.last_receiver_dropped())
        }
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender")
            .field("capacity", &self.capacity())
            .finish_non_exhaustive()
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver")
            .field("capacity", &self.capacity())
            .finish_non_exhaustive()
    }
}

/// Blocking iterator over a [`Receiver`] (see [`Receiver::iter`]).
#[derive(Debug)]
pub struct Iter<'a, T> {
    rx: &'a Receiver<T>,
}

impl<T> Iterator for Iter<'_, T> {
    type Item = T;
    // Inline: a frame between the caller and a blocking receive costs a
    // mispredicted return on each wake-up (`g::switch`'s note).
    #[inline]
    fn next(&mut self) -> Option<T> {
        self.rx.recv().ok()
    }
}

/// Non-blocking iterator over a [`Receiver`] (see [`Receiver::try_iter`]).
#[derive(Debug)]
pub struct TryIter<'a, T> {
    rx: &'a Receiver<T>,
}

impl<T> Iterator for TryIter<'_, T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.rx.try_recv().ok()
    }
}

/// Owning blocking iterator (`for v in rx`).
#[derive(Debug)]
pub struct IntoIter<T> {
    rx: Receiver<T>,
}

impl<T> Iterator for IntoIter<T> {
    type Item = T;
    // Inline: a frame between the caller and a blocking receive costs a
    // mispredicted return on each wake-up (`g::switch`'s note).
    #[inline]
    fn next(&mut self) -> Option<T> {
        self.rx.recv().ok()
    }
}

impl<T> IntoIterator for Receiver<T> {
    type Item = T;
    type IntoIter = IntoIter<T>;
    fn into_iter(self) -> IntoIter<T> {
        IntoIter { rx: self }
    }
}

impl<'a, T> IntoIterator for &'a Receiver<T> {
    type Item = T;
    type IntoIter = Iter<'a, T>;
    fn into_iter(self) -> Iter<'a, T> {
        self.iter()
    }
}

/// Async receiving: for async code (any executor, or
/// [`block_on`](crate::block_on)); see `future.rs` for the protocol.
impl<T: Send> Receiver<T> {
    /// Receives a value as a future: the same operation as [`recv`]
    /// (Go's semantics: FIFO with blocked goroutines and threads, direct
    /// handoff from a blocked sender, `Err` once closed and drained), but
    /// waiting by returning `Pending` and waking the task's waker instead
    /// of parking.
    ///
    /// # Cancel safety
    /// Dropping the future before it returned `Ready` (a `tokio::select!`
    /// whose other branch won, a timeout) cancels it, leaves no waiter
    /// behind, and loses no value. A sender may have handed it a value
    /// already (Go's direct handoff into the waiting receive): the drop
    /// then gives the value back to the channel, to a waiting receiver,
    /// the head of the buffer (ahead of the values sent after it), or, with
    /// the buffer full, first in line as a blocked send. The next receive
    /// gets it; after a close too (receivers get it before they see the
    /// close). Only once every receiver is gone is it dropped, as buffered
    /// values are. What cancelling may change is who receives the value,
    /// and where a full buffer was, its order.
    ///
    /// On a timer's channel (`time::Timer`, `Ticker`, `after`) the value
    /// given back is a firing's: Go 1.23's promise that no value from
    /// before a `stop` or `reset` is received after it covers receives and
    /// `select!`, but not a future that was handed a firing, then dropped
    /// after such a `stop` or `reset`: that value is received later. Poll
    /// the future to completion, or drop it before you stop or reset.
    ///
    /// [`recv`]: Receiver::recv
    ///
    /// ```
    /// let (tx, rx) = goroutine::chan::<u32>(1);
    /// goroutine::go(move || tx.send(5).unwrap());
    /// assert_eq!(goroutine::block_on(rx.recv_async()), Ok(5));
    /// ```
    // entry: builds the future (its `poll` is gated)
    pub fn recv_async(&self) -> RecvFuture<'_, T> {
        RecvFuture::new(&self.chan)
    }
}

/// Async sending; see [`Receiver::recv_async`].
impl<T: Send> Sender<T> {
    /// Sends `v` as a future: the same operation as [`send`](Sender::send),
    /// waiting by returning `Pending`.
    ///
    /// # Cancel safety
    /// As tokio's `mpsc::Sender::send`: if the future is dropped before it
    /// returned `Ready` (a `tokio::select!` whose other branch won, a
    /// timeout), `v` was not sent. It is dropped with the future, and no
    /// waiter is left behind; a retry never sends a value twice. (To keep
    /// a value that cannot be sent now, use [`try_send`](Sender::try_send),
    /// or [`send_timeout`](Sender::send_timeout), which give it back.)
    ///
    /// For that, the value moves into the channel only in the poll that
    /// returns `Ready(Ok)`. A pending future waits for its turn without
    /// offering its value: a receive that makes room (buffered: the slot is
    /// then reserved for it) or that waits for a value (unbuffered) wakes
    /// it, and its next poll sends. On an unbuffered channel a receiver
    /// thus waits for that poll, and a receive that does not wait
    /// ([`try_recv`](Receiver::try_recv), a `select!` with `default`)
    /// does not see a pending send future. A future dropped after it was
    /// woken passes its turn to the next waiting sender.
    ///
    /// ```
    /// let (tx, rx) = goroutine::chan::<u32>(0);
    /// let h = goroutine::go(move || rx.recv().unwrap());
    /// goroutine::block_on(tx.send_async(9)).unwrap();
    /// assert_eq!(h.join().unwrap(), 9);
    /// ```
    // entry: builds the future (its `poll` is gated)
    pub fn send_async(&self, v: T) -> SendFuture<'_, T> {
        SendFuture::new(&self.chan, v)
    }
}
