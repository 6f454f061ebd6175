//! A timer's channel in the forms the layer below holds it: the sending end
//! as the timer heap's `TimeChan` (with the table of what the heap may do
//! with it), the receiving end as a raw pointer in a P's cache of timer
//! kits (`p::chantimers`). Both are type-erased there, so that `p` names
//! no channel type; the functions here are the only ones that turn the
//! pointers back into channels, each for the one type they were made from.
//!
//! # Invariants
//! - A `TimeChan`'s pointer is an `Arc<Chan<Instant>>` that was a `Sender`
//!   (it counts as one of the channel's senders) and is turned back into
//!   one only by [`drop_sender`], once, when the `TimeChan` drops.
//! - A raw receiver ([`Receiver::into_raw`]) is an `Arc<Chan<T>>` that was
//!   a `Receiver`, turned back once, by [`Receiver::from_raw`].
//! - A hand-off pointer from [`send`] is a won claim ([`wait::Claimed`]),
//!   completed once, by [`wake`].

use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::Instant;

use super::hchan::Chan;
use super::wait::Claimed;
use super::{Receiver, Sender};
use crate::p::timerheap::{TimeChan, TimeChanOps};

/// What the timer heap may do with a timer's channel.
static OPS: TimeChanOps = TimeChanOps {
    send,
    wake,
    take_buffered,
    drop: drop_sender,
};

impl Sender<Instant> {
    /// This sender as a channel timer's channel (`TimerFn::SendTime`).
    pub(crate) fn into_time_chan(self) -> TimeChan {
        let raw = into_raw(self.into_arc());
        // SAFETY: `raw` is a sender's `Arc`, which `OPS` accepts and
        // `drop_sender` drops; a channel may be used from any thread.
        unsafe { TimeChan::from_raw(raw, &OPS) }
    }

    /// The sender's `Arc`, with no sender's drop (the channel still counts
    /// it as a sender).
    fn into_arc(self) -> Arc<Chan<Instant>> {
        let this = ManuallyDrop::new(self);
        // SAFETY: `this` is never used or dropped again, so the Arc is
        // moved out exactly once.
        unsafe { std::ptr::read(&this.chan) }
    }
}

impl<T> Receiver<T> {
    /// This receiver as a raw pointer (a P's cache of timer kits); it is
    /// still one of the channel's receivers.
    pub(crate) fn into_raw(self) -> NonNull<()> {
        let this = ManuallyDrop::new(self);
        // SAFETY: `this` is never used or dropped again, so the Arc is
        // moved out exactly once.
        into_raw(unsafe { std::ptr::read(&this.chan) })
    }

    /// The receiver [`into_raw`](Self::into_raw) gave.
    ///
    /// # Safety
    /// `raw` came from `Receiver::<T>::into_raw`, for this `T`, and is
    /// taken back once.
    pub(crate) unsafe fn from_raw(raw: NonNull<()>) -> Receiver<T> {
        Receiver {
            // SAFETY: the caller's contract: an `Arc<Chan<T>>`'s pointer,
            // taken back once.
            chan: unsafe { Arc::from_raw(raw.as_ptr() as *const Chan<T>) },
        }
    }
}

fn into_raw<T>(a: Arc<Chan<T>>) -> NonNull<()> {
    // SAFETY: `Arc::into_raw` never returns null.
    unsafe { NonNull::new_unchecked(Arc::into_raw(a) as *mut ()) }
}

/// # Safety
/// `raw` is a `TimeChan`'s pointer (module note), alive for `'a`.
unsafe fn chan<'a>(raw: NonNull<()>) -> &'a Chan<Instant> {
    // SAFETY: the caller's contract.
    unsafe { &*(raw.as_ptr() as *const Chan<Instant>) }
}

/// `TimeChanOps::send`: a try-send that hands back the receiver it gave
/// the value to instead of waking it (the timer's lock is held).
///
/// # Safety
/// `raw` is a `TimeChan`'s pointer (module note).
unsafe fn send(raw: NonNull<()>, at: Instant) -> Option<NonNull<()>> {
    // SAFETY: the heap calls this with its `TimeChan`'s pointer.
    match unsafe { chan(raw) }.try_send_claim(at) {
        Ok(claim) => claim.map(Claimed::into_raw),
        // Full: the tick is dropped (Go's `sendTime`); closed cannot
        // happen while the sender exists.
        Err(_) => None,
    }
}

/// `TimeChanOps::wake`.
///
/// # Safety
/// `claim` came from [`send`] and is woken once.
unsafe fn wake(claim: NonNull<()>) {
    // SAFETY: `claim` came from `send`, and the heap wakes it once.
    unsafe { Claimed::from_raw(claim) }.complete(true);
}

/// `TimeChanOps::take_buffered` (`Chan::take_buffered`).
///
/// # Safety
/// `raw` is a `TimeChan`'s pointer (module note).
unsafe fn take_buffered(raw: NonNull<()>) -> bool {
    // SAFETY: the heap calls this with its `TimeChan`'s pointer.
    unsafe { chan(raw) }.take_buffered()
}

/// `TimeChanOps::drop`: the sender's drop.
///
/// # Safety
/// `raw` is a `TimeChan`'s pointer, dropped once, as the `TimeChan` drops.
unsafe fn drop_sender(raw: NonNull<()>) {
    drop(Sender {
        // SAFETY: the `TimeChan`'s pointer, taken back once, as it drops.
        chan: unsafe { Arc::from_raw(raw.as_ptr() as *const Chan<Instant>) },
    });
}
