//! hchan: the channel itself (Go's runtime/chan.go).
//!
//! # Layout
//! A [`Chan<T>`] is a [`RawChan`] (the lock and the two wait queues: all
//! that the untyped parts of `select` touch), the state under the lock (the
//! ring buffer's indexes and count, `closed`, `rx_gone`), the ring buffer
//! (allocated once, at creation; empty when unbuffered; inline, in the
//! channel's own allocation, for capacity 1: [`Ring`]) and the counts of
//! `Sender` and `Receiver` handles.
//!
//! # Protocol (every step under `raw.lock` unless it says otherwise)
//! - **send**: closed, or every receiver gone: fail, the value comes back.
//!   A receiver waiting (a claimable sudog on `recvq`): write the value into
//!   its slot, unlock, then complete it, which readies it into the sender's
//!   P `runnext` (a direct send). Buffer space: append to the ring.
//!   Otherwise block: a sudog on `sendq` whose slot holds the value, in the
//!   sender's own frame.
//! - **recv**: a sender waiting: unbuffered, move the value out of its slot;
//!   buffered (the ring is then full), take the ring's head and move the
//!   sender's value to the tail, which keeps FIFO order; complete it after
//!   unlocking. A buffered value: take it. Closed (and drained): fail.
//!   Otherwise block with a sudog on `recvq` and an empty slot.
//! - **close**: set `closed`, claim every waiter of both queues, unlock,
//!   then complete each with `success = false`: receivers get `RecvError`,
//!   senders their value back (Go panics there; we return `SendError`).
//! - **last receiver dropped**: set `rx_gone`, fail every waiting sender as
//!   close does, and drop the buffered values (outside the lock); then, for
//!   a `time::after` channel, stop the timer that would send on it (after
//!   the unlock: a timer's lock is never taken under a channel's).
//! - **last sender dropped**: close (if not closed yet).
//! - **a timer's channel** (`timer`: `time::Timer`, `Ticker`, `after`): a
//!   capacity-1 ring whose one sender is the timer. It sends
//!   (`try_send_claim`, waking the receiver after its own lock) and drains
//!   (`take_buffered`) under the timer's lock, so no value from before a
//!   stop or reset is received after it (`p/timerheap.rs`, "Channel
//!   timers"); `len` and the user's capacity are 0, as Go 1.23's.
//! - **try_send / try_recv**: first the lock-free check of `fast.rs` (a full
//!   or empty channel answers without the lock), then the locked operation.
//!   `qcount`, `closed` and `rx_gone` live in [`Readiness`] atomics for that
//!   check; they are still only written under the lock.
//!
//! # Invariants
//! - A claimable sudog on `sendq` implies the ring is full, and on `recvq`
//!   that it is empty: a sender only waits when the ring is full, a receiver
//!   only when it is empty, and whoever changes that takes a waiter first.
//!   Stale sudogs (of a select already completed through another channel)
//!   may sit on either queue until their owner removes them; `dequeue`
//!   skips them (`wait.rs`).
//! - Once `closed` or `rx_gone` is set no sudog is enqueued on `sendq` again
//!   (a send fails at once), and once `closed` none on `recvq` (a receive of
//!   a closed channel never blocks).
//! - The ring slots `recvx .. recvx + qcount` (mod cap) are initialised; the
//!   others are not.
//! - No user code runs with the lock held: values are only moved (bitwise)
//!   under it, never dropped; nothing under it can panic.

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::ptr;
use std::sync::atomic::{fence, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use super::error::{CloseError, RecvError, SendError, TryRecvError, TrySendError};
use super::fast::{Fast, Readiness};
use super::lock::Lock;
use super::wait::{self, Claimed, ClaimedList, Sudog, WaitQueue, WaitState};
use crate::g::WaitReason;
use crate::m;
use crate::p::timerheap::Timer;

/// The untyped part of a channel: its lock and wait queues.
pub(crate) struct RawChan {
    pub(crate) lock: Lock,
    /// Blocked receivers (their slots are uninitialised `T`s).
    pub(crate) recvq: WaitQueue,
    /// Blocked senders (their slots hold the `T` to send).
    pub(crate) sendq: WaitQueue,
}

/// Which wait queue of a [`RawChan`] a blocking operation joins.
#[derive(Clone, Copy)]
pub(crate) enum Queue {
    Send,
    Recv,
}

impl RawChan {
    /// Waits on queue `q` until a peer completes the operation or the
    /// channel fails it; returns whether it succeeded. `slot` is the
    /// waiter's value: a `T` to send, or room for the `T` received.
    ///
    /// Not generic, so the park and its switch are inlined here in this
    /// crate: a woken goroutine returns out of this one frame (see
    /// `Chan::send`).
    ///
    /// # Safety
    /// The caller holds the lock (released here once the wait can be
    /// woken). `slot` stays valid until this returns: for `Send` it holds
    /// an initialised `T`, which a successful completion moves out; for
    /// `Recv` a successful completion writes a `T` into it.
    #[inline(never)]
    pub(crate) unsafe fn block(&self, q: Queue, here: m::Here, slot: *mut ()) -> bool {
        let g = here.g();
        let state = WaitState::new(wait::waiter_for(g), false);
        let mut stack = MaybeUninit::uninit();
        let sg = wait::place_sudog(g, &mut stack, Sudog::new(&state, slot, 0));
        let (queue, reason) = match q {
            Queue::Send => (&self.sendq, WaitReason::ChanSend),
            Queue::Recv => (&self.recvq, WaitReason::ChanReceive),
        };
        // SAFETY: locked (contract). `state` lives in this frame, which does
        // not return before the wait is completed, and `slot` as long
        // (contract); `sg` lives as long (`place_sudog`); the completer of
        // this unshared wait is the one that dequeued `sg`.
        unsafe { queue.enqueue(sg) };
        wait::block_here(&state, g, here, reason, || {
            // SAFETY: we hold the lock until this runs, once.
            unsafe { self.lock.unlock() }
        });
        // SAFETY: woken (block returned).
        let (_, success) =
            unsafe { state.outcome() }.expect("channel wait woken without an outcome");
        success
    }
}

/// Protected by `RawChan::lock`.
struct State {
    /// The ring indexes of the next send and receive.
    sendx: usize,
    recvx: usize,
}

pub(crate) struct Chan<T> {
    pub(crate) raw: RawChan,
    /// The buffered count and the `closed` / `rx_gone` flags: written under
    /// the lock, readable without it (`fast.rs`).
    ready: Readiness,
    state: UnsafeCell<State>,
    buf: Ring<T>,
    pub(crate) senders: AtomicUsize,
    pub(crate) receivers: AtomicUsize,
    /// The timer whose firing sends on this channel, for `time::after`'s
    /// channels only (the timer is then owned by its heap entry, and the
    /// receiver by the user). Once the last receiver goes nobody can see
    /// the firing, so its drop stops the timer rather than leave it pending
    /// until it fires (Go since 1.23 lets its collector take such timers).
    /// Written once, while the creator holds both handles and nothing else
    /// can reach the channel; read by the last receiver's drop.
    sending_timer: UnsafeCell<Option<Weak<Timer>>>,
    /// A timer's channel (`time::Timer`, `Ticker`, `after`): a capacity-1
    /// ring inside, capacity 0 as the user sees it (Go 1.23's synchronous
    /// timer channels: `len` and `capacity` report 0). Its one sender is
    /// the timer, which sends and drains only under its own lock
    /// (`p::timerheap`, "Channel timers"). Immutable.
    timer: bool,
}

// SAFETY: `state` and `buf` are only accessed under `raw.lock` (or through
// `&mut self` in Drop, or by the last receiver once `rx_gone` fences every
// other user off the ring); values of T move between threads, hence T: Send.
unsafe impl<T: Send> Send for Chan<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Chan<T> {}

/// A ring slot.
type Cell<T> = UnsafeCell<MaybeUninit<T>>;

/// The ring buffer. A capacity-1 channel (a timer's or a ticker's, a
/// one-shot reply) keeps its slot inline, in the channel's own allocation,
/// as Go allocates `hchan` and its buffer together: one allocation per
/// channel instead of two. Other capacities allocate the ring once, at
/// creation (an unbuffered channel's empty ring allocates nothing).
enum Ring<T> {
    One(Cell<T>),
    Heap(Box<[Cell<T>]>),
}

impl<T> Ring<T> {
    fn new(cap: usize) -> Ring<T> {
        if cap == 1 {
            Ring::One(UnsafeCell::new(MaybeUninit::uninit()))
        } else {
            Ring::Heap(
                (0..cap)
                    .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
                    .collect(),
            )
        }
    }

    #[inline]
    fn len(&self) -> usize {
        match self {
            Ring::One(_) => 1,
            Ring::Heap(b) => b.len(),
        }
    }

    /// Slot `i`, unchecked.
    ///
    /// # Safety
    /// `i < self.len()`.
    #[inline]
    unsafe fn cell(&self, i: usize) -> &Cell<T> {
        match self {
            Ring::One(c) => c,
            // SAFETY: in bounds (contract).
            Ring::Heap(b) => unsafe { b.get_unchecked(i) },
        }
    }
}

/// The outcome of a send attempted under the lock.
pub(crate) enum SendLocked<T> {
    /// Sent; a receiver to complete (after unlocking), if it was handed over.
    Done(Option<Claimed>),
    /// Would block.
    Full(T),
    /// Closed, or no receivers.
    Closed(T),
}

/// The outcome of a receive attempted under the lock.
pub(crate) enum RecvLocked<T> {
    /// Received; a sender to complete (after unlocking), if one was waiting.
    Done(T, Option<Claimed>),
    Empty,
    Closed,
}

impl<T> Chan<T> {
    pub(crate) fn new(cap: usize) -> Chan<T> {
        Chan {
            raw: RawChan {
                lock: Lock::new(),
                recvq: WaitQueue::new(),
                sendq: WaitQueue::new(),
            },
            ready: Readiness::new(),
            state: UnsafeCell::new(State { sendx: 0, recvx: 0 }),
            buf: Ring::new(cap),
            senders: AtomicUsize::new(1),
            receivers: AtomicUsize::new(1),
            sending_timer: UnsafeCell::new(None),
            timer: false,
        }
    }

    /// A timer's channel (the `timer` field's note).
    pub(crate) fn new_for_timer() -> Chan<T> {
        let mut c = Chan::new(1);
        c.timer = true;
        c
    }

    /// The capacity the user sees: 0 for a timer's channel.
    #[inline]
    pub(crate) fn user_cap(&self) -> usize {
        if self.timer {
            0
        } else {
            self.cap()
        }
    }

    #[inline]
    pub(crate) fn cap(&self) -> usize {
        self.buf.len()
    }

    #[inline]
    fn lock(&self) {
        self.raw.lock.lock();
    }

    /// # Safety
    /// The caller holds the lock.
    #[inline]
    unsafe fn unlock(&self) {
        // SAFETY: forwarded contract.
        unsafe { self.raw.lock.unlock() }
    }

    /// The state under the lock.
    ///
    /// # Safety
    /// The caller holds the lock and no other reference from `st` is live.
    #[allow(clippy::mut_from_ref)]
    #[inline]
    unsafe fn st(&self) -> &mut State {
        // SAFETY: exclusive under the lock (contract).
        unsafe { &mut *self.state.get() }
    }

    /// Ring slot `i`.
    ///
    /// # Safety
    /// `i < cap`, and the caller holds the lock (or otherwise owns the ring).
    #[allow(clippy::mut_from_ref)]
    #[inline]
    unsafe fn slot(&self, i: usize) -> &mut MaybeUninit<T> {
        // SAFETY: in bounds and exclusive (contract).
        unsafe { &mut *self.buf.cell(i).get() }
    }

    /// Sends without blocking (Go's chansend up to the point of blocking).
    ///
    /// # Safety
    /// The caller holds the lock; it must complete a returned `Claimed`.
    #[inline]
    pub(crate) unsafe fn send_locked(&self, v: T) -> SendLocked<T> {
        // SAFETY: forwarded.
        unsafe { self.send_locked_inner(v, false) }
    }

    /// [`send_locked`](Self::send_locked) for a value an async receive
    /// gives back (`future.rs`): it was sent before any close, so a closed
    /// channel still takes it (buffer, or `Full` for an orphan); only a
    /// channel without receivers refuses it (`Closed`).
    ///
    /// # Safety
    /// As for `send_locked`.
    pub(crate) unsafe fn give_back_locked(&self, v: T) -> SendLocked<T> {
        // SAFETY: forwarded.
        unsafe { self.send_locked_inner(v, true) }
    }

    /// # Safety
    /// As for `send_locked`.
    #[inline(always)]
    unsafe fn send_locked_inner(&self, v: T, given_back: bool) -> SendLocked<T> {
        // SAFETY: under the lock (contract).
        let st = unsafe { self.st() };
        let ready = &self.ready;
        if ready.rx_gone() || (ready.closed() && !given_back) {
            return SendLocked::Closed(v);
        }
        // SAFETY: under the lock.
        if let Some(c) = unsafe { self.raw.recvq.dequeue() } {
            // SAFETY: a claimed receiver's slot is an uninitialised T in its
            // frame, alive until we complete it, written only by us.
            unsafe { ptr::write(c.elem() as *mut T, v) };
            return SendLocked::Done(Some(c));
        }
        let qcount = ready.qcount();
        if qcount < self.cap() {
            // SAFETY: sendx < cap; under the lock; the slot is outside the
            // initialised range, so nothing is overwritten.
            unsafe { self.slot(st.sendx) }.write(v);
            st.sendx += 1;
            if st.sendx == self.cap() {
                st.sendx = 0;
            }
            ready.set_qcount(qcount + 1);
            return SendLocked::Done(None);
        }
        SendLocked::Full(v)
    }

    /// Receives without blocking (Go's chanrecv up to the point of blocking).
    ///
    /// # Safety
    /// The caller holds the lock; it must complete a returned `Claimed`.
    #[inline]
    pub(crate) unsafe fn recv_locked(&self) -> RecvLocked<T> {
        // SAFETY: under the lock (contract).
        let st = unsafe { self.st() };
        // SAFETY: under the lock.
        if let Some(c) = unsafe { self.raw.sendq.dequeue() } {
            // SAFETY: a claimed sender's slot holds its T, alive until we
            // complete it; we move it out and complete with success, so the
            // sender will not use it again.
            let sent = unsafe { ptr::read(c.elem() as *const T) };
            if self.cap() == 0 {
                return RecvLocked::Done(sent, Some(c));
            }
            // A waiting sender means the ring is full: take its head and put
            // the sender's value in the freed slot, which is now the tail.
            debug_assert_eq!(self.ready.qcount(), self.cap());
            // SAFETY: recvx < cap, an initialised slot (the ring is full).
            let head = unsafe { self.slot(st.recvx) };
            // SAFETY: initialised (see above); we refill it at once.
            let v = unsafe { head.assume_init_read() };
            head.write(sent);
            st.recvx += 1;
            if st.recvx == self.cap() {
                st.recvx = 0;
            }
            st.sendx = st.recvx;
            return RecvLocked::Done(v, Some(c));
        }
        let qcount = self.ready.qcount();
        if qcount > 0 {
            // SAFETY: recvx < cap and, qcount > 0, initialised; it leaves the
            // initialised range below.
            let v = unsafe { self.slot(st.recvx).assume_init_read() };
            st.recvx += 1;
            if st.recvx == self.cap() {
                st.recvx = 0;
            }
            self.ready.set_qcount(qcount - 1);
            return RecvLocked::Done(v, None);
        }
        if self.ready.closed() {
            RecvLocked::Closed
        } else {
            RecvLocked::Empty
        }
    }

    /// Go's chansend with `block`; `here` is the caller's M (entry gate).
    ///
    /// Always inlined into the caller (`Sender::send`, itself inlined into
    /// the user's code): the attempt is a call that returns before any
    /// switch, and the wait is the one non-generic frame `RawChan::block`,
    /// which holds the switch. A goroutine woken from it then returns out
    /// of one frame entered before the switch, not two or three (each such
    /// return is mispredicted: `g::context`'s note, "Returns after a
    /// switch").
    #[inline(always)]
    pub(crate) fn send(&self, v: T, here: m::Here) -> Result<(), SendError<T>> {
        let v = match self.send_now(v, here) {
            Ok(r) => return r,
            Err(v) => v,
        };
        let mut slot = MaybeUninit::new(v);
        // SAFETY: locked (`send_now` returned the value: full); `slot` lives
        // in this frame until `block` returns, and holds our value.
        if unsafe { self.raw.block(Queue::Send, here, slot.as_mut_ptr().cast()) } {
            // The receiver moved the value out of `slot`.
            Ok(())
        } else {
            // SAFETY: a failed completion leaves our value in the slot.
            Err(SendError(unsafe { slot.assume_init() }))
        }
    }

    /// Sends `v` if that needs no wait: `Ok` with the send's result, or
    /// `Err(v)` if the channel is full, with the lock held for
    /// `RawChan::block`.
    fn send_now(&self, v: T, here: m::Here) -> Result<Result<(), SendError<T>>, T> {
        self.lock();
        // SAFETY: locked; a Claimed is completed below.
        match unsafe { self.send_locked(v) } {
            SendLocked::Done(c) => {
                // SAFETY: locked.
                unsafe { self.unlock() };
                if let Some(c) = c {
                    c.complete_here(true, here);
                }
                Ok(Ok(()))
            }
            SendLocked::Closed(v) => {
                // SAFETY: locked.
                unsafe { self.unlock() };
                Ok(Err(SendError(v)))
            }
            SendLocked::Full(v) => Err(v),
        }
    }

    pub(crate) fn try_send(&self, v: T) -> Result<(), TrySendError<T>> {
        if let Some(c) = self.try_send_claim(v)? {
            c.complete(true);
        }
        Ok(())
    }

    /// [`try_send`](Self::try_send) up to the wake-up: the receiver it
    /// handed the value to, if any, comes back to be completed by the
    /// caller, which must do so (a channel timer's firing sends under the
    /// timer's lock and wakes the receiver after releasing it).
    #[inline]
    pub(crate) fn try_send_claim(&self, v: T) -> Result<Option<Claimed>, TrySendError<T>> {
        // Full: answer without the lock, and never wait for a lock whose
        // holder fills the channel meanwhile (fast.rs).
        let full = || self.ready.try_send_fast(self.cap(), &self.raw.recvq);
        if full().is_some() || self.raw.lock.lock_or(full).is_err() {
            return Err(TrySendError::Full(v));
        }
        // SAFETY: locked; a Claimed is handed to the caller, who completes
        // it.
        let r = unsafe { self.send_locked(v) };
        // SAFETY: locked.
        unsafe { self.unlock() };
        match r {
            SendLocked::Done(c) => Ok(c),
            SendLocked::Full(v) => Err(TrySendError::Full(v)),
            SendLocked::Closed(v) => Err(TrySendError::Closed(v)),
        }
    }

    /// Takes and drops every buffered value; true if there was one. For a
    /// timer's channel, whose stop or reset must leave no value from
    /// before it (`p::timerheap`, "Channel timers"): the timer calls it
    /// under its own lock, which every send on the channel holds, so the
    /// lock-free look at the count misses no value (a receiver may only
    /// take one meanwhile). The senders it completes are detached ones (a
    /// value an async receive gave back, `future.rs`): their wake frees a
    /// record and readies nobody.
    #[inline]
    pub(crate) fn take_buffered(&self) -> bool {
        // The common case, a stop or reset with nothing delivered: one load.
        self.ready.load_qcount() != 0 && self.take_buffered_slow()
    }

    #[cold]
    #[inline(never)]
    fn take_buffered_slow(&self) -> bool {
        let mut took = false;
        while self.ready.load_qcount() != 0 {
            self.lock();
            // SAFETY: locked; a Claimed is completed below.
            let r = unsafe { self.recv_locked() };
            // SAFETY: locked.
            unsafe { self.unlock() };
            match r {
                RecvLocked::Done(v, c) => {
                    if let Some(c) = c {
                        c.complete(true);
                    }
                    drop(v);
                    took = true;
                }
                RecvLocked::Empty | RecvLocked::Closed => break,
            }
        }
        took
    }

    /// Go's chanrecv with `block`; `here` is the caller's M (entry gate).
    /// Always inlined, as [`send`](Self::send) is.
    #[inline(always)]
    pub(crate) fn recv(&self, here: m::Here) -> Result<T, RecvError> {
        if let Some(r) = self.recv_now(here) {
            return r;
        }
        let mut slot = MaybeUninit::<T>::uninit();
        // SAFETY: locked (`recv_now` returned None: empty); `slot` lives in
        // this frame until `block` returns.
        if unsafe { self.raw.block(Queue::Recv, here, slot.as_mut_ptr().cast()) } {
            // SAFETY: a successful completion wrote the value into `slot`.
            Ok(unsafe { slot.assume_init() })
        } else {
            Err(RecvError)
        }
    }

    /// Receives if that needs no wait: `Some` with the result, or `None` if
    /// the channel is empty, with the lock held for `RawChan::block`.
    fn recv_now(&self, here: m::Here) -> Option<Result<T, RecvError>> {
        self.lock();
        // SAFETY: locked; a Claimed is completed below.
        match unsafe { self.recv_locked() } {
            RecvLocked::Done(v, c) => {
                // SAFETY: locked.
                unsafe { self.unlock() };
                if let Some(c) = c {
                    c.complete_here(true, here);
                }
                Some(Ok(v))
            }
            RecvLocked::Closed => {
                // SAFETY: locked.
                unsafe { self.unlock() };
                Some(Err(RecvError))
            }
            RecvLocked::Empty => None,
        }
    }

    pub(crate) fn try_recv(&self) -> Result<T, TryRecvError> {
        // Empty, or closed and drained: answer without the lock (fast.rs).
        let fast = || self.ready.try_recv_fast(self.cap(), &self.raw.sendq);
        let answer = match fast() {
            Some(f) => Err(f),
            None => self.raw.lock.lock_or(fast),
        };
        match answer {
            Ok(()) => {}
            Err(Fast::NotReady) => return Err(TryRecvError::Empty),
            Err(Fast::Closed) => return Err(TryRecvError::Closed),
        }
        // SAFETY: locked; a Claimed is completed below.
        let r = unsafe { self.recv_locked() };
        // SAFETY: locked.
        unsafe { self.unlock() };
        match r {
            RecvLocked::Done(v, c) => {
                if let Some(c) = c {
                    c.complete(true);
                }
                Ok(v)
            }
            RecvLocked::Empty => Err(TryRecvError::Empty),
            RecvLocked::Closed => Err(TryRecvError::Closed),
        }
    }

    /// Lock-free: a receive certainly cannot complete now (empty and open;
    /// see `fast.rs`). For a one-arm non-blocking select.
    #[inline]
    pub(crate) fn recv_not_ready(&self) -> bool {
        self.ready.try_recv_fast(self.cap(), &self.raw.sendq) == Some(Fast::NotReady)
    }

    /// Lock-free: a send certainly cannot complete now (full and open).
    #[inline]
    pub(crate) fn send_not_ready(&self) -> bool {
        self.ready.try_send_fast(self.cap(), &self.raw.recvq) == Some(Fast::NotReady)
    }

    /// Go's closechan, returning an error instead of panicking.
    pub(crate) fn close(&self) -> Result<(), CloseError> {
        self.lock();
        // SAFETY: locked.
        if self.ready.closed() {
            // SAFETY: locked.
            unsafe { self.unlock() };
            return Err(CloseError);
        }
        self.ready.set_closed();
        // In an array, not linked through the sudogs: completing them then
        // loads each one's records ahead (`complete_all`).
        let mut claims = Vec::new();
        // SAFETY: locked; every claim is completed below.
        while let Some(c) = unsafe { self.raw.recvq.dequeue() } {
            claims.push(c);
        }
        // Blocked senders fail; detached ones (values given back by async
        // receives, already sent) stay queued for the receivers.
        // SAFETY: as above.
        while let Some(c) = unsafe { self.raw.sendq.dequeue_attached() } {
            claims.push(c);
        }
        // SAFETY: locked.
        unsafe { self.unlock() };
        #[cfg(not(loom))]
        super::wait::complete_all(claims, false, crate::m::Here::lookup());
        #[cfg(loom)]
        for c in claims {
            c.complete(false);
        }
        Ok(())
    }

    /// The last `Sender` is gone: close.
    pub(crate) fn last_sender_dropped(&self) {
        // Already closed by hand is fine: dropping never fails.
        let _ = self.close();
    }

    /// The last `Receiver` is gone: fail every waiting and future send, and
    /// drop the buffered values.
    pub(crate) fn last_receiver_dropped(&self) {
        self.lock();
        // SAFETY: locked.
        let st = unsafe { self.st() };
        self.ready.set_rx_gone();
        let mut list = ClaimedList::new();
        // SAFETY: locked; every claim is completed below.
        while let Some(c) = unsafe { self.raw.sendq.dequeue() } {
            c.push_to(&mut list);
        }
        let (head, n) = (st.recvx, self.ready.qcount());
        self.ready.set_qcount(0);
        st.sendx = st.recvx;
        // SAFETY: locked.
        unsafe { self.unlock() };
        while let Some(c) = list.pop() {
            c.complete(false);
        }
        // With `rx_gone` set no send touches the ring again and no receiver
        // exists, so the `n` values taken out of the count above are ours to
        // drop, without the lock (their Drop may use channels, even this
        // one).
        for k in 0..n {
            // SAFETY: in bounds; initialised (they were in the buffered
            // range); ours alone (see above).
            unsafe { self.slot((head + k) % self.cap()).assume_init_drop() };
        }
        // SAFETY: written only before the channel was shared (`set_sending_timer`).
        let timer = unsafe { &*self.sending_timer.get() };
        if let Some(t) = timer.as_ref().and_then(Weak::upgrade) {
            // Its firing has nobody to see it (the field's note).
            t.stop();
        }
    }

    /// Records the timer that sends on this channel (`time::after`).
    ///
    /// # Safety
    /// The caller holds the channel's only handles (one sender, inside the
    /// timer, and one receiver), so nothing else can reach the channel.
    pub(crate) unsafe fn set_sending_timer(&self, t: &Arc<Timer>) {
        // SAFETY: exclusive (contract).
        unsafe { *self.sending_timer.get() = Some(Arc::downgrade(t)) };
    }

    /// Buffered values, without the lock (Go's `len(c)`): the count at
    /// some instant during the call; always 0 for a timer's channel (Go
    /// 1.23's `chanlen`: it presents as unbuffered).
    pub(crate) fn len(&self) -> usize {
        if self.timer {
            return 0;
        }
        self.buffered()
    }

    /// Buffered values, without the lock, whatever the kind of channel.
    pub(crate) fn buffered(&self) -> usize {
        self.ready.load_qcount()
    }

    /// Whether the channel is closed, without the lock.
    pub(crate) fn is_closed(&self) -> bool {
        self.ready.load_closed()
    }

    /// Handle counting: a clone of a `Sender`.
    #[inline]
    pub(crate) fn add_sender(&self) {
        // Relaxed: as Arc's clone; the count only needs its own total order.
        self.senders.fetch_add(1, Ordering::Relaxed);
    }

    #[inline]
    pub(crate) fn add_receiver(&self) {
        // Relaxed: as above.
        self.receivers.fetch_add(1, Ordering::Relaxed);
    }

    /// Drops a `Sender`; true if it was the last one (the caller then
    /// calls `last_sender_dropped`, which closes the channel).
    #[inline]
    #[must_use]
    pub(crate) fn drop_sender(&self) -> bool {
        // The decrements are totally ordered among themselves, so exactly
        // one sees 1. Release, and Acquire for the last, as `Arc`'s count:
        // whoever drops the last handle of either kind sees what the other
        // handles did before they went (`close_needed`,
        // `receiver_work_left`).
        let last = self.senders.fetch_sub(1, Ordering::Release) == 1;
        if last {
            fence(Ordering::Acquire);
        }
        last
    }

    /// Whether the last sender must close the channel: some receiver is
    /// left to see it. Every blocked receive, select arm and future holds
    /// a `Receiver`, so with none left nothing can observe the close, and
    /// the channel's own drop frees the buffer. (The count cannot rise
    /// again from zero: a receiver comes only from another.)
    #[inline]
    pub(crate) fn close_needed(&self) -> bool {
        // Acquire: pairs with the Release decrements (`drop_receiver`).
        self.receivers.load(Ordering::Acquire) != 0
    }

    /// Whether the last receiver has work left (`last_receiver_dropped`):
    /// a sender that may still send or block, or a queued value to fail
    /// (a detached sender, freed only when completed). With neither, the
    /// channel's own drop frees the buffer.
    #[inline]
    pub(crate) fn receiver_work_left(&self) -> bool {
        // Acquire: pairs with the Release decrements (`drop_sender`), and
        // through them with every enqueue made before a handle went.
        self.senders.load(Ordering::Acquire) != 0 || !self.raw.sendq.looks_empty()
    }

    /// Whether the channel has one sender and one receiver left and is
    /// open, empty and without waiters: for a caller that holds both
    /// handles and so knows nobody else can reach the channel, it is as
    /// good as new (`p::chantimers`). A stale sudog counts as a waiter.
    pub(crate) fn is_unused_pair(&self) -> bool {
        // Acquire: pairs with the Release of the other handles' drops, so
        // whatever they did to the channel is seen here.
        self.senders.load(Ordering::Acquire) == 1
            && self.receivers.load(Ordering::Acquire) == 1
            && !self.ready.closed()
            && !self.ready.rx_gone()
            && self.ready.qcount() == 0
            && self.raw.recvq.looks_empty()
            && self.raw.sendq.looks_empty()
    }

    /// Drops a `Receiver`; true if it was the last one (then call
    /// `last_receiver_dropped`).
    #[inline]
    #[must_use]
    pub(crate) fn drop_receiver(&self) -> bool {
        // Release / Acquire: as in `drop_sender`.
        let last = self.receivers.fetch_sub(1, Ordering::Release) == 1;
        if last {
            fence(Ordering::Acquire);
        }
        last
    }
}

impl<T> Drop for Chan<T> {
    fn drop(&mut self) {
        let (head, n) = (self.state.get_mut().recvx, self.ready.qcount());
        for k in 0..n {
            let i = (head + k) % self.buf.len();
            // SAFETY: in bounds; the buffered range is initialised; `&mut
            // self` is exclusive, and nothing else drops these.
            unsafe { (*self.buf.cell(i).get()).assume_init_drop() };
        }
    }
}
