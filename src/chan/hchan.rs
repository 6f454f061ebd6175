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
//!   P `runnext` (a direct send). Buffer room (a slot neither filled nor
//!   reserved): append to the ring. Otherwise block: a sudog on `sendq`
//!   whose slot holds the value, in the sender's own frame.
//! - **recv**: buffered, a buffered value: take the ring's head; the slot
//!   it frees goes to the first waiting sender: a blocked sender's value
//!   moves to the tail, which keeps FIFO order, and a send future (which
//!   holds its value back, `future.rs`) gets the slot reserved and a
//!   grant; complete it after unlocking. Unbuffered, a sender waiting with
//!   a value: move it out of its slot, and complete the sender (send
//!   futures are passed over). Closed (and drained): fail. Otherwise block
//!   with a sudog on `recvq` and an empty slot; on an unbuffered channel
//!   a receiver that blocks grants the first send future, which then sends
//!   to it in its poll (`grant_on_block`).
//! - **close**: set `closed`, claim every attached waiter of `sendq`,
//!   revoke the reserved slots (their room goes to the detached senders,
//!   `fill_from_sendq`), claim every waiter of `recvq`, unlock, then
//!   complete each with `success = false`: receivers get `RecvError`,
//!   senders their value back (Go panics there; we return `SendError`).
//! - **last receiver dropped**: set `rx_gone`, revoke the reserved slots,
//!   fail every waiting sender as close does, and drop the buffered values
//!   (outside the lock); then, for a `time::after` channel, stop the timer
//!   that would send on it (after the unlock: a timer's lock is never taken
//!   under a channel's).
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
//! - Buffered: a claimable sudog on `sendq` implies no room (every slot
//!   filled or reserved: `qcount + reserved == cap`), and on `recvq` that
//!   the ring is empty (`qcount == 0`; slots may be reserved): a sender
//!   only waits when there is no room, a receiver only when there is no
//!   value, and whoever changes that takes a waiter first. A reservation
//!   released without its slot filled (its send future gave a receiver its
//!   value directly, or was dropped) gives its room on
//!   (`fill_from_sendq`). Unbuffered: a claimable sudog on `recvq` implies
//!   that `sendq` holds no claimable sender with a value (only send
//!   futures, each granted by a waiting receiver or waiting for one: a
//!   receiver that waits grants one, and a granted future dropped unpolled
//!   grants the next, `grant_lapsed`).
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
use super::fast::{Fast, Readiness, RESERVED};
use super::lock::Lock;
use super::wait::{self, Claimed, ClaimedList, Popped, Sudog, WaitQueue, WaitState};
use crate::g::WaitReason;
use crate::m;
use crate::p::timerheap::Timer;

/// The untyped part of a channel: its lock and wait queues.
pub(crate) struct RawChan {
    pub(crate) lock: Lock,
    /// Buffered channels: the ring slots promised to granted send futures
    /// (`future.rs`, "Send futures"), not yet filled. Under the lock. Here,
    /// not in [`State`], because it fits in the padding after `lock`.
    reserved: UnsafeCell<u32>,
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

    /// [`block`](Self::block) for a receive that finds send futures queued
    /// (`future.rs`, "Send futures"): on an unbuffered channel
    /// (`rendezvous`) it grants the first one as it queues itself, and
    /// completes the grant once the lock is released. The same body as
    /// `block`, written out again rather than shared through a generic
    /// helper: `block`, the common case, then compiles as it did before
    /// send futures (a shared helper changed its code and cost).
    ///
    /// # Safety
    /// As for `block` with `Queue::Recv`.
    #[cold]
    #[inline(never)]
    pub(crate) unsafe fn block_recv_granting(
        &self,
        here: m::Here,
        slot: *mut (),
        rendezvous: bool,
    ) -> bool {
        let g = here.g();
        let state = WaitState::new(wait::waiter_for(g), false);
        let mut stack = MaybeUninit::uninit();
        let sg = wait::place_sudog(g, &mut stack, Sudog::new(&state, slot, 0));
        // SAFETY: locked (contract); as in `block`. The grant is completed
        // after the unlock below.
        let mut grant = unsafe {
            self.recvq.enqueue(sg);
            if rendezvous {
                self.sendq.dequeue_async_send()
            } else {
                None
            }
        };
        wait::block_here(&state, g, here, WaitReason::ChanReceive, || {
            // Both captures are read before the unlock: once it is released
            // a peer may complete this wait, and the goroutine run on and
            // overwrite this frame, while this step (on the scheduler) is
            // still running. The grant completes after the unlock, as every
            // completion does: its waker is foreign code.
            let grant = grant.take();
            // SAFETY: we hold the lock until this runs, once.
            unsafe { self.lock.unlock() };
            if let Some(c) = grant {
                c.complete(true);
            }
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
                reserved: UnsafeCell::new(0),
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
        // One load for the rare cases: closed, every receiver gone, slots
        // reserved.
        let flags = ready.flags();
        if flags != 0
            && (Readiness::is_rx_gone(flags) || (Readiness::is_closed(flags) && !given_back))
        {
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
            // SAFETY: under the lock.
            if flags & RESERVED != 0 && unsafe { !self.room_unreserved(qcount) } {
                return SendLocked::Full(v);
            }
            if given_back {
                // To the head: it was received before every value buffered
                // now, so the receivers get it first (`future.rs`,
                // `give_back`).
                st.recvx = if st.recvx == 0 { self.cap() } else { st.recvx } - 1;
                // SAFETY: recvx < cap; under the lock; there is room, so
                // the slot before the initialised range is free.
                unsafe { self.slot(st.recvx) }.write(v);
            } else {
                // SAFETY: sendx < cap; under the lock; the slot is outside
                // the initialised range, so nothing is overwritten.
                unsafe { self.slot(st.sendx) }.write(v);
                st.sendx += 1;
                if st.sendx == self.cap() {
                    st.sendx = 0;
                }
            }
            ready.set_qcount(qcount + 1);
            return SendLocked::Done(None);
        }
        SendLocked::Full(v)
    }

    /// Whether a ring with `qcount < cap` values has a slot that is not
    /// reserved for a send future (`RawChan::reserved`).
    ///
    /// # Safety
    /// The caller holds the lock.
    #[cold]
    #[inline(never)]
    unsafe fn room_unreserved(&self, qcount: usize) -> bool {
        // SAFETY: under the lock (contract).
        qcount + unsafe { self.reserved() } < self.cap()
    }

    /// The count of reserved ring slots (`RawChan::reserved`).
    ///
    /// # Safety
    /// The caller holds the lock.
    #[inline]
    unsafe fn reserved(&self) -> usize {
        // SAFETY: under the lock (contract).
        unsafe { *self.raw.reserved.get() as usize }
    }

    /// Sets the count of reserved ring slots.
    ///
    /// # Safety
    /// The caller holds the lock.
    #[inline]
    unsafe fn set_reserved(&self, n: usize) {
        let n = u32::try_from(n)
            .unwrap_or_else(|_| crate::runtime::throw("chan: too many reserved slots"));
        // SAFETY: under the lock (contract).
        unsafe { *self.raw.reserved.get() = n };
        self.ready.set_reserved(n != 0);
    }

    /// For a receiver about to wait (it found nothing to take): on an
    /// unbuffered channel, claims the first pending send future, whose
    /// value moves only in its own poll; completing the claim (after the
    /// unlock) wakes it to poll again and hand its value to the waiting
    /// receiver (`future.rs`, "Send futures"). A receive that does not
    /// wait grants nothing.
    ///
    /// # Safety
    /// The caller holds the lock, then enqueues its receiver before
    /// releasing it, and completes the claim after.
    #[inline(always)]
    pub(crate) unsafe fn grant_on_block(&self) -> Option<Claimed> {
        if self.raw.sendq.looks_empty() || self.cap() != 0 {
            return None;
        }
        // SAFETY: forwarded.
        unsafe { self.grant_slow() }
    }

    /// # Safety
    /// As for `grant_on_block`.
    #[cold]
    unsafe fn grant_slow(&self) -> Option<Claimed> {
        // SAFETY: locked (contract). Only send futures are left to take:
        // the receive found no sender with a value, so any still queued is
        // stale or (a select sending and receiving on this channel) the
        // caller's own, which the claim skips.
        unsafe { self.raw.sendq.dequeue_async_send() }
    }

    /// A granted send future takes its turn (its poll) on a buffered
    /// channel: its reserved slot is released, for the send it now makes
    /// to fill (or a receiver to take directly). False if it had none to
    /// release: unbuffered, or a close or the last receiver's drop revoked
    /// every reservation (the send then fails).
    ///
    /// # Safety
    /// The caller holds the lock and was granted (buffered: a slot was
    /// reserved for it); called once per grant.
    pub(crate) unsafe fn release_reservation(&self) -> bool {
        if self.cap() == 0 || self.ready.closed() || self.ready.rx_gone() {
            return false;
        }
        // SAFETY: under the lock (contract).
        unsafe {
            let r = self.reserved();
            debug_assert!(r > 0, "a granted send future found no reserved slot");
            self.set_reserved(r.saturating_sub(1));
        }
        true
    }

    /// Gives the free ring room (buffered: slots neither filled nor
    /// reserved) to the waiting senders, in order, as a receive that makes
    /// room does: a blocked sender's value goes to a waiting receiver, or
    /// else into the ring; a send future gets a reserved slot and a grant.
    /// Restores "a waiting sender means no room" after a reservation was
    /// released without filling its slot, or revoked by a close. The claims
    /// go to `claims`, to complete with success after the unlock.
    ///
    /// # Safety
    /// The caller holds the lock; the last receiver is not gone.
    pub(crate) unsafe fn fill_from_sendq(&self, claims: &mut ClaimedList) {
        // SAFETY: under the lock (contract).
        let st = unsafe { self.st() };
        loop {
            // SAFETY: under the lock.
            let reserved = unsafe { self.reserved() };
            let qcount = self.ready.qcount();
            if qcount + reserved >= self.cap() {
                return;
            }
            // SAFETY: under the lock; the claims are completed by the caller.
            let Some(s) = (unsafe { self.raw.sendq.dequeue() }) else {
                return;
            };
            if s.is_async_send() {
                // SAFETY: under the lock.
                unsafe { self.set_reserved(reserved + 1) };
                s.push_to(claims);
                continue;
            }
            // SAFETY: a claimed blocked sender's slot holds its T, alive
            // until we complete it (with success: it will not use it again).
            let v = unsafe { ptr::read(s.elem() as *const T) };
            // SAFETY: under the lock.
            match unsafe { self.raw.recvq.dequeue() } {
                Some(r) => {
                    // SAFETY: a claimed receiver's slot is an uninitialised
                    // T, alive until we complete it, written only by us. (A
                    // receiver waits only on an empty ring: no order to keep.)
                    unsafe { ptr::write(r.elem() as *mut T, v) };
                    r.push_to(claims);
                }
                None => {
                    // SAFETY: sendx < cap; under the lock; room (checked
                    // above) means the slot is outside the initialised range.
                    unsafe { self.slot(st.sendx) }.write(v);
                    st.sendx += 1;
                    if st.sendx == self.cap() {
                        st.sendx = 0;
                    }
                    self.ready.set_qcount(qcount + 1);
                }
            }
            s.push_to(claims);
        }
    }

    /// A granted send future will not use its grant (it is dropped before
    /// the poll that would): pass it on. Buffered: its reserved slot goes
    /// to the waiting senders ([`fill_from_sendq`](Self::fill_from_sendq)).
    /// Unbuffered: the receiver that granted it may still wait; if some
    /// receiver does, the next pending send future is granted in its stead.
    /// The claims go to `claims`, to complete with success after the unlock.
    ///
    /// # Safety
    /// The caller holds the lock, and its send future was granted and is
    /// off the queue; called once per grant.
    pub(crate) unsafe fn grant_lapsed(&self, claims: &mut ClaimedList) {
        // SAFETY: under the lock (contract).
        unsafe {
            if self.cap() == 0 {
                if self.raw.recvq.has_claimable() {
                    if let Some(a) = self.raw.sendq.dequeue_async_send() {
                        a.push_to(claims);
                    }
                }
            } else if self.release_reservation() {
                self.fill_from_sendq(claims);
            }
        }
    }

    /// Receives without blocking (Go's chanrecv up to the point of blocking).
    ///
    /// Always inlined: a call here would be one more frame on every
    /// receive. What send futures need (`future.rs`, "Send futures") is
    /// out of line, and returns in registers into the common code, so that
    /// the common paths compile as they did before them.
    ///
    /// # Safety
    /// The caller holds the lock; it must complete a returned `Claimed`.
    #[inline(always)]
    pub(crate) unsafe fn recv_locked(&self) -> RecvLocked<T> {
        // SAFETY: under the lock (contract).
        let st = unsafe { self.st() };
        // SAFETY: under the lock.
        let c = match unsafe { self.raw.sendq.dequeue_sender() } {
            Popped::Sender(c) => Some(c),
            // SAFETY: under the lock; popped from the head of `sendq`.
            Popped::AsyncSend(a) => match unsafe { self.recv_past_async_send(Some(a)) } {
                (Some(sender), _) => Some(sender),
                // SAFETY: under the lock.
                (None, grant) => return unsafe { self.recv_buffered(grant) },
            },
            Popped::Empty => None,
        };
        if let Some(c) = c {
            // SAFETY: a claimed sender's slot holds its T, alive until we
            // complete it; we move it out and complete with success, so the
            // sender will not use it again.
            let sent = unsafe { ptr::read(c.elem() as *const T) };
            let cap = self.cap();
            if cap == 0 {
                return RecvLocked::Done(sent, Some(c));
            }
            // A waiting sender means no room: every slot filled or reserved.
            if self.ready.qcount() != cap {
                // SAFETY: under the lock; as the caller.
                return RecvLocked::Done(unsafe { self.recv_rotate_reserved(sent) }, Some(c));
            }
            // The ring is full: take its head and put the sender's value in
            // the freed slot, which is now the tail; FIFO order is kept.
            // SAFETY: recvx < cap, an initialised slot (the ring is full).
            let head = unsafe { self.slot(st.recvx) };
            // SAFETY: initialised (see above); we refill it at once.
            let v = unsafe { head.assume_init_read() };
            head.write(sent);
            st.recvx += 1;
            if st.recvx == cap {
                st.recvx = 0;
            }
            st.sendx = st.recvx;
            return RecvLocked::Done(v, Some(c));
        }
        // SAFETY: under the lock.
        unsafe { self.recv_buffered(None) }
    }

    /// The rest of [`recv_locked`](Self::recv_locked), with no sender to
    /// take a value from: a buffered value, if any, returned with `grant`
    /// (a send future granted the slot it frees).
    ///
    /// # Safety
    /// As for `recv_locked`; with `grant`, a value is buffered.
    #[inline(always)]
    unsafe fn recv_buffered(&self, grant: Option<Claimed>) -> RecvLocked<T> {
        // SAFETY: under the lock (contract).
        let st = unsafe { self.st() };
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
            return RecvLocked::Done(v, grant);
        }
        if self.ready.closed() {
            RecvLocked::Closed
        } else {
            RecvLocked::Empty
        }
    }

    /// [`recv_locked`](Self::recv_locked) popped a send future's sudog `a`
    /// from the head of `sendq`: that future holds its value back. Returns
    /// the sender to take a value from instead, and the grant to hand out.
    /// Buffered, with a value buffered: no sender; the slot that the
    /// caller's take frees is reserved for `a`, whose claim (its grant) is
    /// returned. Otherwise `a` goes back where it was, and: unbuffered, the
    /// first blocked sender with a value, if any (send futures are granted
    /// only by receivers that wait, `grant_on_block`); buffered, nothing
    /// (the ring is empty, every slot reserved for futures ahead in line).
    ///
    /// # Safety
    /// The caller holds the lock and popped `a` from the head of `sendq`.
    #[cold]
    #[inline(never)]
    unsafe fn recv_past_async_send(
        &self,
        a: Option<Claimed>,
    ) -> (Option<Claimed>, Option<Claimed>) {
        let a = a.expect("a send future's claim");
        // SAFETY: under the lock (contract); `a` is an unshared claim popped
        // under it, so putting it back is as if it had stayed.
        unsafe {
            if self.cap() != 0 && self.ready.qcount() > 0 {
                self.set_reserved(self.reserved() + 1);
                return (None, Some(a));
            }
            // Back to the head, where it was: an unshared wait, popped under
            // this lock hold, so nobody saw it gone.
            self.raw.sendq.enqueue_front(a.into_sudog());
            if self.cap() == 0 {
                return (self.raw.sendq.dequeue_value(), None);
            }
        }
        (None, None)
    }

    /// [`recv_locked`](Self::recv_locked) with a blocked sender's value
    /// `sent` in hand and a ring not full: some slots are reserved for
    /// send futures. With values buffered, takes the head and puts `sent`
    /// at the tail; with none (every slot reserved), `sent` is the value
    /// received. Returns the value received.
    ///
    /// # Safety
    /// The caller holds the lock and popped a sender from `sendq` with no
    /// room left (`qcount + reserved == cap`).
    #[cold]
    #[inline(never)]
    unsafe fn recv_rotate_reserved(&self, sent: T) -> T {
        // SAFETY: under the lock (contract); the slots read and written are
        // in and out of the initialised range as said below.
        unsafe {
            let st = self.st();
            let qcount = self.ready.qcount();
            debug_assert_eq!(qcount + self.reserved(), self.cap());
            if qcount == 0 {
                return sent;
            }
            // recvx < cap, initialised (qcount > 0); the tail slot is free
            // (there are reserved, so unfilled, slots).
            let v = self.slot(st.recvx).assume_init_read();
            st.recvx += 1;
            if st.recvx == self.cap() {
                st.recvx = 0;
            }
            self.slot(st.sendx).write(sent);
            st.sendx += 1;
            if st.sendx == self.cap() {
                st.sendx = 0;
            }
            v
        }
    }

    /// Go's chansend with `block`; `here` is the caller's M (entry gate).
    ///
    /// Always inlined into the caller (`Sender::send`, itself inlined into
    /// the user's code): the attempt is a call that returns before any
    /// switch, and the wait is the one non-generic frame `RawChan::block`,
    /// which holds the switch. A goroutine woken from it then returns out
    /// of one frame entered before the switch, not two or three (each such
    /// return is mispredicted: `g::switch`'s note, "Returns after a
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
        // this frame until the wait returns. Send futures queued: a
        // receiver that waits grants one (`grant_on_block`).
        let ok = unsafe {
            if self.raw.sendq.looks_empty() {
                self.raw.block(Queue::Recv, here, slot.as_mut_ptr().cast())
            } else {
                self.raw
                    .block_recv_granting(here, slot.as_mut_ptr().cast(), self.cap() == 0)
            }
        };
        if ok {
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
        // Blocked senders fail; detached ones (values given back by async
        // receives, already sent) stay queued for the receivers.
        let mut senders = Vec::new();
        // SAFETY: locked; every claim is completed below.
        while let Some(c) = unsafe { self.raw.sendq.dequeue_attached() } {
            senders.push(c);
        }
        // Every reserved slot is revoked: its send future will fail. The
        // room goes to the detached senders, so that a waiting receiver
        // gets their values rather than the close.
        let mut handed = ClaimedList::new();
        // SAFETY: locked; the claims are completed below.
        unsafe {
            if self.cap() != 0 && self.reserved() != 0 {
                self.set_reserved(0);
                self.fill_from_sendq(&mut handed);
            }
        }
        // In an array, not linked through the sudogs: completing them then
        // loads each one's records ahead (`complete_all`).
        let mut claims = Vec::new();
        // SAFETY: locked; every claim is completed below.
        while let Some(c) = unsafe { self.raw.recvq.dequeue() } {
            claims.push(c);
        }
        claims.append(&mut senders);
        // SAFETY: locked.
        unsafe { self.unlock() };
        handed.complete_all();
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
        // Reserved slots are revoked: their send futures will fail.
        // SAFETY: locked.
        unsafe { self.set_reserved(0) };
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
    /// good as new (`time::kit`). A stale sudog counts as a waiter.
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
        // A channel made in a synctest bubble leaves the bubble's table.
        crate::runtime::bubble::untag_chan(self as *const Self as usize);
        let (head, n) = (self.state.get_mut().recvx, self.ready.qcount());
        for k in 0..n {
            let i = (head + k) % self.buf.len();
            // SAFETY: in bounds; the buffered range is initialised; `&mut
            // self` is exclusive, and nothing else drops these.
            unsafe { (*self.buf.cell(i).get()).assume_init_drop() };
        }
    }
}
