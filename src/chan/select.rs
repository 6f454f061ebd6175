//! `select!` and Go's `selectgo` (runtime/select.go).
//!
//! # selectgo: the three passes
//! The macro gives [`select`] one [`Case`] per arm (an arm whose channel is
//! `None` has no channel: Go's nil channel) and says whether there is a
//! `default`.
//! 0. **Orders.** `pollorder`: the arms with a channel in a uniformly random
//!    order, drawn afresh per call (Go's insertion shuffle with
//!    `cheaprandn`). `lockorder`: the same arms sorted by channel address, so
//!    a channel that appears twice is adjacent and locked once.
//!    A non-blocking select with one arm first asks the lock-free check of
//!    `fast.rs` and returns `default` at once on a channel that is not
//!    ready (Go's `selectnbrecv`/`selectnbsend`); with more arms it does
//!    not, since separate looks at separate channels are not one instant.
//!    **1a. Each arm alone** (not in Go). With more than one arm, try the
//!    arms in pollorder, each under its own channel's lock only, skipping
//!    those the lock-free check rules out; the first that completes is the
//!    choice ([`poll_each_alone`] says why that is still Go's semantics).
//!    Only when none completes do passes 1-3 run, lockorder included.
//! 1. **Poll.** Lock every channel (in lockorder), then try the arms in
//!    pollorder; the first that can complete now (a buffered value or room,
//!    a blocked peer, a closed channel) completes: values move, a blocked
//!    peer is claimed. Unlock, complete the peer, return. Because all the
//!    locks are held while polling, the choice is uniform among the arms
//!    ready at that instant, and `default` never fires while an arm is
//!    ready.
//! 2. **Block** (no `default`). One sudog per arm, all pointing at one
//!    shared [`WaitState`], enqueued (still holding every lock) on the
//!    channels' `recvq`/`sendq`; then park, and the M's scheduler unlocks.
//!    A peer on any of the channels claims the select by winning the CAS on
//!    the state's `done` (`wait.rs`) and completes the case its sudog
//!    belongs to; peers that lose the CAS drop the stale sudog.
//! 3. **Clean up.** Woken, lock every channel again and remove the sudogs
//!    still queued (all but the one that fired, minus any a losing peer
//!    already unlinked), unlock, and finish the fired arm: take the received
//!    value from its slot, or the failure. With one arm there is nothing to
//!    remove and pass 3 takes no lock.
//!
//! # Invariants
//! - Deadlock freedom: only a select holds more than one channel lock, and
//!   it takes them in address order; a blocked peer is completed only after
//!   every lock is released.
//! - The sudogs, the state and the arms' value slots live in the frames of
//!   [`select`] and the `select!` expansion, which do not return before
//!   pass 3 has removed every sudog under its channel's lock.
//! - The unlock step after parking runs on the M's scheduler, and once it
//!   has released one lock, a peer may ready the goroutine, which may then
//!   run again on another M while the step is still unlocking (Go's
//!   `selunlock` warning). The step unlocks in reverse lock order, so the
//!   lock it releases last is `lockorder[0]`, the first one pass 3 takes:
//!   the goroutine cannot get past that lock, or write `cases`, `lockorder`
//!   or the sudogs (all in [`select`]'s frame and above), before the step
//!   is done. But the unlock closures (in `selectgo`'s frame, into which
//!   the wait and the park are inlined) may be overwritten as soon as the
//!   goroutine runs. So the step
//!   reads its closure's captures once, passes them as arguments to the
//!   out-of-line [`selunlock`], and that reads only `cases` and `lockorder`
//!   and nothing after its last unlock. With one arm there is no pass 3,
//!   and its single unlock is the step's last access.

use std::cell::Cell;
use std::mem::MaybeUninit;
use std::ptr;

use super::error::{RecvError, SendError};
use super::hchan::{Chan, RawChan, RecvLocked, SendLocked};
use super::wait::{self, Claimed, ClaimedList, Sudog, WaitQueue, WaitState};
use super::{Receiver, Sender};
use crate::g::WaitReason;
use crate::m;

/// The operations `selectgo` needs from an arm, type-erased.
trait CaseImpl {
    /// The arm's channel, or None for a nil-channel arm.
    fn raw(&self) -> Option<&RawChan>;
    /// The queue a blocked arm waits in (`sendq` for a send).
    fn queue(&self) -> Option<&WaitQueue>;
    fn is_send(&self) -> bool;
    /// Lock-free: whether the arm certainly cannot complete now (`fast.rs`;
    /// a closed channel is ready: the arm fires with the failure).
    fn not_ready(&self) -> bool;
    /// Tries to complete the arm now (pass 1).
    ///
    /// # Safety
    /// The arm's channel is locked; the caller completes a returned claim.
    unsafe fn poll(&mut self) -> Option<Option<Claimed>>;
    /// The value slot a sudog of this arm points to (pass 2).
    fn elem(&mut self) -> *mut ();
    /// Pass 2, once this arm's sudog is queued: the pending send future
    /// that a receive arm on an unbuffered channel grants
    /// (`Chan::grant_on_block`), to complete after the unlock.
    ///
    /// # Safety
    /// The arm's channel is locked.
    unsafe fn grant(&self) -> Option<Claimed>;
    /// Records the outcome of this arm's fired sudog (pass 3).
    ///
    /// # Safety
    /// This arm's sudog fired with `success`, and the wait is over.
    unsafe fn finish(&mut self, success: bool);
}

/// One arm of a select, as the macro hands it to [`select`].
pub struct Case<'a>(&'a mut (dyn CaseImpl + 'a));

impl Case<'_> {
    #[inline]
    fn raw(&self) -> Option<&RawChan> {
        self.0.raw()
    }
}

/// Anything `recv(..)` accepts: a `Receiver`, a reference to one, or an
/// `Option` of those (`None` is Go's nil channel: the arm never fires).
pub trait RecvOperand {
    type Item;
    fn recv_operand(&self) -> Option<&Receiver<Self::Item>>;
}

impl<T> RecvOperand for Receiver<T> {
    type Item = T;
    #[inline]
    fn recv_operand(&self) -> Option<&Receiver<T>> {
        Some(self)
    }
}

impl<R: RecvOperand + ?Sized> RecvOperand for &R {
    type Item = R::Item;
    #[inline]
    fn recv_operand(&self) -> Option<&Receiver<R::Item>> {
        (**self).recv_operand()
    }
}

impl<R: RecvOperand + ?Sized> RecvOperand for &mut R {
    type Item = R::Item;
    #[inline]
    fn recv_operand(&self) -> Option<&Receiver<R::Item>> {
        (**self).recv_operand()
    }
}

impl<R: RecvOperand> RecvOperand for Option<R> {
    type Item = R::Item;
    #[inline]
    fn recv_operand(&self) -> Option<&Receiver<R::Item>> {
        self.as_ref().and_then(|r| r.recv_operand())
    }
}

/// A [`Timer`](crate::time::Timer) or [`Ticker`](crate::time::Ticker) is
/// a receive operand too: `recv(timer) -> at => ...`.
impl RecvOperand for crate::time::Timer {
    type Item = std::time::Instant;
    #[inline]
    fn recv_operand(&self) -> Option<&Receiver<std::time::Instant>> {
        Some(self.c())
    }
}

impl RecvOperand for crate::time::Ticker {
    type Item = std::time::Instant;
    #[inline]
    fn recv_operand(&self) -> Option<&Receiver<std::time::Instant>> {
        Some(self.c())
    }
}

/// Anything `send(..)` accepts: a `Sender`, a reference to one, or an
/// `Option` of those (`None`: the arm never fires).
pub trait SendOperand {
    type Item;
    fn send_operand(&self) -> Option<&Sender<Self::Item>>;
}

impl<T> SendOperand for Sender<T> {
    type Item = T;
    #[inline]
    fn send_operand(&self) -> Option<&Sender<T>> {
        Some(self)
    }
}

impl<S: SendOperand + ?Sized> SendOperand for &S {
    type Item = S::Item;
    #[inline]
    fn send_operand(&self) -> Option<&Sender<S::Item>> {
        (**self).send_operand()
    }
}

impl<S: SendOperand + ?Sized> SendOperand for &mut S {
    type Item = S::Item;
    #[inline]
    fn send_operand(&self) -> Option<&Sender<S::Item>> {
        (**self).send_operand()
    }
}

impl<S: SendOperand> SendOperand for Option<S> {
    type Item = S::Item;
    #[inline]
    fn send_operand(&self) -> Option<&Sender<S::Item>> {
        self.as_ref().and_then(|s| s.send_operand())
    }
}

/// The state of a `recv` arm: its channel, the slot a sender writes into,
/// and the result once it fired.
pub struct RecvArm<'a, T> {
    chan: Option<&'a Chan<T>>,
    slot: MaybeUninit<T>,
    result: Option<Result<T, RecvError>>,
}

impl<'a, T> RecvArm<'a, T> {
    #[inline]
    // entry: the select! expansion's arm bookkeeping; the select itself (`select`) is gated
    pub fn new(rx: Option<&'a Receiver<T>>) -> Self {
        RecvArm {
            chan: rx.map(|r| &*r.chan),
            slot: MaybeUninit::uninit(),
            result: None,
        }
    }

    #[inline]
    // entry: the select! expansion's arm bookkeeping; the select itself (`select`) is gated
    pub fn case(&mut self) -> Case<'_> {
        Case(self)
    }

    /// The result, if this arm fired.
    #[inline]
    // entry: the select! expansion's arm bookkeeping; the select itself (`select`) is gated
    pub fn take(&mut self) -> Option<Result<T, RecvError>> {
        self.result.take()
    }
}

impl<T> CaseImpl for RecvArm<'_, T> {
    fn raw(&self) -> Option<&RawChan> {
        self.chan.map(|c| &c.raw)
    }

    fn queue(&self) -> Option<&WaitQueue> {
        self.chan.map(|c| &c.raw.recvq)
    }

    fn is_send(&self) -> bool {
        false
    }

    fn not_ready(&self) -> bool {
        self.chan.is_some_and(|c| c.recv_not_ready())
    }

    /// # Safety
    /// As [`CaseImpl::poll`].
    unsafe fn poll(&mut self) -> Option<Option<Claimed>> {
        let c = self.chan?;
        // SAFETY: locked (contract); the caller completes the claim.
        match unsafe { c.recv_locked() } {
            RecvLocked::Done(v, claim) => {
                self.result = Some(Ok(v));
                Some(claim)
            }
            RecvLocked::Closed => {
                self.result = Some(Err(RecvError));
                Some(None)
            }
            RecvLocked::Empty => None,
        }
    }

    fn elem(&mut self) -> *mut () {
        self.slot.as_mut_ptr().cast()
    }

    /// # Safety
    /// As [`CaseImpl::grant`].
    unsafe fn grant(&self) -> Option<Claimed> {
        // SAFETY: locked (contract); this arm's receiver is queued, and the
        // caller completes the claim after the unlock.
        self.chan.and_then(|c| unsafe { c.grant_on_block() })
    }

    /// # Safety
    /// As [`CaseImpl::finish`].
    unsafe fn finish(&mut self, success: bool) {
        self.result = Some(if success {
            // SAFETY: a successful completion of our sudog wrote a T into
            // `slot` (contract), and it is read once.
            Ok(unsafe { self.slot.assume_init_read() })
        } else {
            Err(RecvError)
        });
    }
}

/// The state of a `send` arm: its channel, the value (which a receiver
/// moves out of it), and the result once it fired.
pub struct SendArm<'a, T> {
    chan: Option<&'a Chan<T>>,
    value: Option<T>,
    result: Option<Result<(), SendError<T>>>,
}

impl<'a, T> SendArm<'a, T> {
    #[inline]
    // entry: the select! expansion's arm bookkeeping; the select itself (`select`) is gated
    pub fn new(tx: Option<&'a Sender<T>>, value: T) -> Self {
        SendArm {
            chan: tx.map(|s| &*s.chan),
            value: Some(value),
            result: None,
        }
    }

    #[inline]
    // entry: the select! expansion's arm bookkeeping; the select itself (`select`) is gated
    pub fn case(&mut self) -> Case<'_> {
        Case(self)
    }

    /// The result, if this arm fired.
    #[inline]
    // entry: the select! expansion's arm bookkeeping; the select itself (`select`) is gated
    pub fn take(&mut self) -> Option<Result<(), SendError<T>>> {
        self.result.take()
    }

    /// The value, if this arm did not fire.
    pub(crate) fn into_value(mut self) -> Option<T> {
        self.value.take()
    }
}

impl<T> CaseImpl for SendArm<'_, T> {
    fn raw(&self) -> Option<&RawChan> {
        self.chan.map(|c| &c.raw)
    }

    fn queue(&self) -> Option<&WaitQueue> {
        self.chan.map(|c| &c.raw.sendq)
    }

    fn is_send(&self) -> bool {
        true
    }

    fn not_ready(&self) -> bool {
        self.chan.is_some_and(|c| c.send_not_ready())
    }

    /// # Safety
    /// As [`CaseImpl::poll`].
    unsafe fn poll(&mut self) -> Option<Option<Claimed>> {
        let c = self.chan?;
        let v = self.value.take()?;
        // SAFETY: locked (contract); the caller completes the claim.
        match unsafe { c.send_locked(v) } {
            SendLocked::Done(claim) => {
                self.result = Some(Ok(()));
                Some(claim)
            }
            SendLocked::Closed(v) => {
                self.result = Some(Err(SendError(v)));
                Some(None)
            }
            SendLocked::Full(v) => {
                self.value = Some(v);
                None
            }
        }
    }

    fn elem(&mut self) -> *mut () {
        match self.value.as_mut() {
            Some(v) => (v as *mut T).cast(),
            // A send arm only blocks after a poll that gave the value back.
            None => crate::runtime::throw("select: blocking send arm without a value"),
        }
    }

    unsafe fn grant(&self) -> Option<Claimed> {
        None
    }

    /// # Safety
    /// As [`CaseImpl::finish`].
    unsafe fn finish(&mut self, success: bool) {
        if success {
            // The receiver moved the value out of our `Some`: forget the
            // bitwise husk instead of dropping it.
            std::mem::forget(self.value.take());
            self.result = Some(Ok(()));
        } else {
            // Failed (closed, or no receivers): the value is still ours.
            let v = self.value.take();
            self.result = v.map(|v| Err(SendError(v)));
        }
    }
}

/// Runs a select over `cases` (Go's selectgo; see the module note). Returns
/// the index of the arm that fired, or None when `block` is false and no
/// arm was ready (the `default` arm).
pub fn select<const N: usize>(mut cases: [Case<'_>; N], block: bool) -> Option<usize> {
    const { assert!(N <= u16::MAX as usize, "select!: too many arms") };
    crate::runtime::entry::call(move || {
        crate::runtime::coop_preempt::check();
        let mut pollorder = [0u16; N];
        let mut lockorder = [0u16; N];
        let mut sudogs = [const { MaybeUninit::<Sudog>::uninit() }; N];
        selectgo(
            &mut cases,
            &mut pollorder,
            &mut lockorder,
            &mut sudogs,
            block,
        )
    })
}

fn selectgo(
    cases: &mut [Case<'_>],
    pollorder: &mut [u16],
    lockorder: &mut [u16],
    sudogs: &mut [MaybeUninit<Sudog>],
    block: bool,
) -> Option<usize> {
    // Pass 0: poll order (random) and lock order (by address), without the
    // nil-channel arms.
    let mut n = 0;
    for (i, case) in cases.iter().enumerate() {
        if case.raw().is_none() {
            continue;
        }
        let j = fastrandn(n as u32 + 1) as usize;
        pollorder[n] = pollorder[j];
        pollorder[j] = i as u16;
        n += 1;
    }
    let pollorder = &pollorder[..n];

    if n == 0 {
        if !block {
            return None;
        }
        // Only nil channels: block forever, as Go does.
        let reason = match cases {
            [c] if c.0.is_send() => WaitReason::ChanSendNilChan,
            [_] => WaitReason::ChanReceiveNilChan,
            _ => WaitReason::Select,
        };
        park_forever(reason);
    }

    // A non-blocking select with one arm is a non-blocking operation (Go
    // compiles it to `selectnbrecv`/`selectnbsend`): answer "not ready"
    // without the lock when the lock-free check says so. Only for one arm:
    // two lock-free looks at two channels are two instants, and `default`
    // must not fire unless there is one instant with no arm ready.
    if !block && n == 1 && cases[pollorder[0] as usize].0.not_ready() {
        return None;
    }

    // Pass 1a (not in Go): with several arms, try each alone first.
    if n > 1 {
        if let Some(i) = poll_each_alone(cases, pollorder) {
            return Some(i);
        }
    }

    let lockorder = &mut lockorder[..n];
    lockorder.copy_from_slice(pollorder);
    lockorder.sort_unstable_by_key(|&i| chan_addr(cases, i));
    let lockorder = &*lockorder;

    // Pass 1: look for an arm that can complete now.
    sellock(cases, lockorder);
    for &i in pollorder {
        // SAFETY: every channel is locked; the claim is completed below.
        if let Some(claim) = unsafe { cases[i as usize].0.poll() } {
            // SAFETY: we hold the locks `sellock` took.
            unsafe { selunlock(cases, lockorder) };
            if let Some(c) = claim {
                c.complete(true);
            }
            return Some(i as usize);
        }
    }
    if !block {
        // SAFETY: we hold the locks `sellock` took.
        unsafe { selunlock(cases, lockorder) };
        return None;
    }

    // Pass 2: enqueue on every channel, then park.
    let g = m::current_g();
    let state = WaitState::new(wait::waiter_for(g), true);
    let mut grants = ClaimedList::new();
    for &i in lockorder {
        let i = i as usize;
        let sg: *const Sudog = sudogs[i].write(Sudog::new(&state, cases[i].0.elem(), i));
        let q = cases[i].0.queue().expect("non-nil arm has a queue");
        // SAFETY: the channel is locked; the sudog stays in `select`'s frame
        // until pass 3 removed it (module note).
        unsafe { q.enqueue(sg) };
        // SAFETY: locked; the grant is completed after the unlock.
        if let Some(grant) = unsafe { cases[i].0.grant() } {
            grant.push_to(&mut grants);
        }
    }
    {
        let (c, l): (&[Case<'_>], &[u16]) = (cases, lockorder);
        let mut grants = Some(grants);
        // The park and its switch inlined into this frame (not generic):
        // `g::switch`'s note, "Returns after a switch".
        wait::block_here(
            &state,
            g,
            crate::m::Here::lookup(),
            WaitReason::Select,
            move || {
                // SAFETY: we hold the locks until this runs, once; it reads its
                // captures before the first unlock (module note).
                unsafe { selunlock_granting(c, l, grants.take()) }
            },
        );
    }

    // Pass 3: remove the sudogs that did not fire.
    // SAFETY: woken (block returned).
    let (fired, success) = unsafe { state.outcome() }.expect("select woken without an outcome");
    if n > 1 {
        sellock(cases, lockorder);
        for &i in lockorder {
            let i = i as usize;
            if i == fired {
                continue;
            }
            let q = cases[i].0.queue().expect("non-nil arm has a queue");
            // SAFETY: locked; the sudog was initialised and enqueued on `q`
            // in pass 2.
            unsafe { q.remove(sudogs[i].assume_init_ref()) };
        }
        // SAFETY: we hold the locks `sellock` took.
        unsafe { selunlock(cases, lockorder) };
    }
    // SAFETY: `fired` completed with `success`; every sudog is off its queue.
    unsafe { cases[fired].0.finish(success) };
    Some(fired)
}

/// Pass 1a: tries the arms in `pollorder`, each under its own channel's
/// lock alone, skipping the arms that the lock-free check rules out; the
/// first that completes is the select's choice. No lock order, no second
/// lock: a select whose arm is ready (a buffered channel with room or a
/// value, a blocked peer, a closed channel) costs one lock, not one per
/// arm.
///
/// Why this keeps Go's semantics: an arm that completes here completes at
/// an instant when it could proceed, and it was first in the random poll
/// order among the arms seen ready, as pass 1 would choose. An arm skipped
/// as not ready that became ready during the scan was made ready by an
/// operation that overlaps this select, and such an operation may be
/// ordered after it. Only the answer "no arm is ready" needs one instant
/// for all the arms (a `default`, or blocking): that is pass 1's, with
/// every lock held.
fn poll_each_alone(cases: &mut [Case<'_>], pollorder: &[u16]) -> Option<usize> {
    for &i in pollorder {
        let case = &mut cases[i as usize];
        if case.0.not_ready() {
            continue;
        }
        let raw: *const RawChan = case.raw().expect("non-nil arm has a channel");
        // SAFETY: the channel outlives the select (the arm borrows its
        // handle); the arm's state is ours alone.
        let claim = unsafe {
            (*raw).lock.lock();
            let r = case.0.poll();
            (*raw).lock.unlock();
            r
        };
        if let Some(claim) = claim {
            if let Some(c) = claim {
                c.complete(true);
            }
            return Some(i as usize);
        }
    }
    None
}

#[inline]
fn chan_addr(cases: &[Case<'_>], i: u16) -> usize {
    cases[i as usize]
        .raw()
        .map_or(0, |c| c as *const RawChan as usize)
}

/// Locks every channel of `lockorder`, each once.
fn sellock(cases: &[Case<'_>], lockorder: &[u16]) {
    let mut prev: *const RawChan = ptr::null();
    for &i in lockorder {
        let c = cases[i as usize].raw().expect("non-nil arm has a channel");
        if !ptr::eq(c, prev) {
            c.lock.lock();
            prev = c;
        }
    }
}

/// Unlocks what [`sellock`] locked, in reverse order, each channel once.
/// Out of line: see the module note on why it must take its inputs as
/// arguments and read nothing after the last unlock.
///
/// # Safety
/// The caller holds the locks `sellock(cases, lockorder)` took.
#[inline(never)]
unsafe fn selunlock(cases: &[Case<'_>], lockorder: &[u16]) {
    for k in (0..lockorder.len()).rev() {
        let c = cases[lockorder[k] as usize]
            .raw()
            .expect("non-nil arm has a channel");
        if k > 0 {
            let prev = cases[lockorder[k - 1] as usize].raw();
            if prev.is_some_and(|p| ptr::eq(p, c)) {
                continue; // unlocked on the next iteration
            }
        }
        // SAFETY: locked by `sellock` (contract), unlocked once here.
        unsafe { c.lock.unlock() };
    }
}

/// [`selunlock`], then completes the grants of pass 2 (pending send
/// futures woken for this select's receive arms), which hold nothing of
/// the select's frame. Out of line, with its inputs as arguments, for the
/// reason `selunlock` is (module note).
///
/// # Safety
/// As for `selunlock`.
#[inline(never)]
unsafe fn selunlock_granting(cases: &[Case<'_>], lockorder: &[u16], grants: Option<ClaimedList>) {
    // SAFETY: forwarded.
    unsafe { selunlock(cases, lockorder) };
    if let Some(grants) = grants {
        grants.complete_all();
    }
}

/// `select! {}`: blocks forever (Go's `select {}`).
pub fn block_forever() -> ! {
    crate::runtime::entry::call(|| park_forever(WaitReason::SelectNoCases))
}

fn park_forever(reason: WaitReason) -> ! {
    loop {
        if m::current_g().is_some() {
            // Nobody holds this goroutine: it is never readied.
            crate::runtime::park::park(reason, &mut |_| true);
        } else {
            let _blocked = crate::runtime::checkdead::thread_blocked();
            std::thread::park();
        }
    }
}

/// The `select!` expansion calls this when no arm fired although the select
/// blocked: a runtime bug.
#[cold]
// entry: aborts the process (`throw`); touches no runtime state
pub fn unreachable_select() -> ! {
    crate::runtime::throw("select: woken without a fired arm")
}

/// A uniform random number below `n` (Go's cheaprandn): the M's generator
/// on a goroutine, a thread-local one on a plain thread.
#[inline]
fn fastrandn(n: u32) -> u32 {
    let r = match m::current() {
        Some(m) => m.fastrand(),
        None => thread_rand(),
    };
    ((r as u32 as u64 * n as u64) >> 32) as u32
}

/// Out of line so no thread-local address is cached across a switch.
#[inline(never)]
fn thread_rand() -> u64 {
    thread_local! {
        static RAND: Cell<u64> = const { Cell::new(0) };
    }
    RAND.with(|r| {
        let mut x = r.get();
        if x == 0 {
            use std::hash::{BuildHasher, RandomState};
            x = RandomState::new().hash_one(std::thread::current().id()) | 1;
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        r.set(x);
        x
    })
}

/// Waits on several channel operations and runs the arm of the one that
/// completes (Go's `select`), in the style of crossbeam-channel's `select!`.
///
/// Arms, in any order, separated by commas (a block body needs none):
/// - `recv(rx) -> msg => body`: `msg` is a `Result<T, RecvError>` (an error
///   once the channel is closed and drained);
/// - `send(tx, value) -> res => body`: `res` is a `Result<(), SendError<T>>`
///   (an error, with the value, if the channel is closed or has no
///   receivers);
/// - `default => body`: runs when no other arm is ready right now; without
///   it, `select!` blocks until one is;
/// - `default(timeout) => body`: runs if no other arm fired within
///   `timeout` (a `Duration`; Go's `case <-time.After(d)`, but the timer is
///   stopped when the select returns).
///
/// `rx` / `tx` may be a `Receiver` / `Sender`, a reference to one, or an
/// `Option` of either: an arm whose channel is `None` never fires (Go's nil
/// channel). Channel expressions and sent values are evaluated once, in
/// order, before anything else. Among the arms ready at once one is chosen
/// uniformly at random. `select! {}` blocks forever. A body may `break`,
/// `continue` or `return`: it is not a closure.
///
/// # Cancel safety
/// Only the arm that fires happens. The others are cancelled with nothing
/// done: a `send` arm that did not fire sent nothing (its value is dropped
/// when the `select!` ends), a `recv` arm that did not fire took nothing
/// (a value sent meanwhile stays in the channel), and `default(timeout)`
/// firing means no channel arm happened. A peer that would complete an
/// arm must first claim the whole select, and only one claim wins.
///
/// A pending [`send_async`](crate::Sender::send_async) future offers no
/// value to take (see its "Cancel safety"): a `recv` arm gets it only in
/// a select that blocks (no `default`), which wakes the future to send.
///
/// ```
/// use goroutine::{chan, select};
///
/// let (tx, rx) = chan::<i32>(1);
/// let (_quit_tx, quit_rx) = chan::<()>(0);
/// tx.send(7).unwrap();
/// let got = select! {
///     recv(rx) -> msg => msg.unwrap(),
///     recv(quit_rx) -> _ => -1,
/// };
/// assert_eq!(got, 7);
///
/// // Nothing ready: default.
/// let nil: Option<&goroutine::Receiver<i32>> = None;
/// let r = select! {
///     recv(nil) -> _ => "nil channel fired",
///     recv(rx) -> _ => "empty channel fired",
///     default => "default",
/// };
/// assert_eq!(r, "default");
/// ```
///
/// At most one `default`:
/// ```compile_fail
/// let (_tx, rx) = goroutine::chan::<i32>(0);
/// goroutine::select! {
///     recv(rx) -> _ => {},
///     default => {},
///     default => {},
/// }
/// ```
#[macro_export]
macro_rules! select {
    () => {
        $crate::__private::block_forever()
    };
    ($($tokens:tt)+) => {
        $crate::__select_parse!(() () $($tokens)+)
    };
}

/// `select!` step 1: parse the arms into `(recv (rx) (pat) (body))`,
/// `(send (tx) (value) (pat) (body))` and the default body.
#[doc(hidden)]
#[macro_export]
macro_rules! __select_parse {
    ($cases:tt $default:tt) => {
        $crate::__select_gen!($cases () () $default)
    };

    (($($cases:tt)*) $default:tt recv($r:expr) -> $p:pat => $body:expr, $($rest:tt)*) => {
        $crate::__select_parse!(($($cases)* (recv ($r) ($p) ($body))) $default $($rest)*)
    };
    (($($cases:tt)*) $default:tt recv($r:expr) -> $p:pat => $body:block $($rest:tt)*) => {
        $crate::__select_parse!(($($cases)* (recv ($r) ($p) ($body))) $default $($rest)*)
    };
    (($($cases:tt)*) $default:tt recv($r:expr) -> $p:pat => $body:expr) => {
        $crate::__select_parse!(($($cases)* (recv ($r) ($p) ($body))) $default)
    };

    (($($cases:tt)*) $default:tt send($s:expr, $v:expr) -> $p:pat => $body:expr, $($rest:tt)*) => {
        $crate::__select_parse!(($($cases)* (send ($s) ($v) ($p) ($body))) $default $($rest)*)
    };
    (($($cases:tt)*) $default:tt send($s:expr, $v:expr) -> $p:pat => $body:block $($rest:tt)*) => {
        $crate::__select_parse!(($($cases)* (send ($s) ($v) ($p) ($body))) $default $($rest)*)
    };
    (($($cases:tt)*) $default:tt send($s:expr, $v:expr) -> $p:pat => $body:expr) => {
        $crate::__select_parse!(($($cases)* (send ($s) ($v) ($p) ($body))) $default)
    };

    (($($cases:tt)*) $default:tt default($t:expr) => $body:expr, $($rest:tt)*) => {
        $crate::__select_parse!(($($cases)* (recv ($crate::time::Timer::new($t)) (_) ($body))) $default $($rest)*)
    };
    (($($cases:tt)*) $default:tt default($t:expr) => $body:block $($rest:tt)*) => {
        $crate::__select_parse!(($($cases)* (recv ($crate::time::Timer::new($t)) (_) ($body))) $default $($rest)*)
    };
    (($($cases:tt)*) $default:tt default($t:expr) => $body:expr) => {
        $crate::__select_parse!(($($cases)* (recv ($crate::time::Timer::new($t)) (_) ($body))) $default)
    };

    ($cases:tt () default => $body:expr, $($rest:tt)*) => {
        $crate::__select_parse!($cases (($body)) $($rest)*)
    };
    ($cases:tt () default => $body:block $($rest:tt)*) => {
        $crate::__select_parse!($cases (($body)) $($rest)*)
    };
    ($cases:tt () default => $body:expr) => {
        $crate::__select_parse!($cases (($body)))
    };
    ($cases:tt ($($d:tt)+) default $($rest:tt)*) => {
        ::core::compile_error!("select!: more than one `default` arm")
    };

    ($cases:tt $default:tt $($rest:tt)+) => {
        ::core::compile_error!(::core::concat!(
            "select!: expected `recv(rx) -> pat => body`, `send(tx, value) -> pat => body` \
             or `default => body`, found: ",
            ::core::stringify!($($rest)+)
        ))
    };
}

/// `select!` step 2: one nested block per arm evaluates its channel (and
/// value) and holds the arm's state; the innermost block runs the select and
/// the if-chain runs the body of the arm that fired. Each level's `__arm` is
/// a distinct variable (macro hygiene), named by the tokens passed down.
#[doc(hidden)]
#[macro_export]
macro_rules! __select_gen {
    (() () () (($d:expr))) => {
        $d
    };
    (() ($($arms:tt)*) ($($dispatch:tt)*) ()) => {{
        $crate::__private::select([$($arms)*], true);
        $($dispatch)* { $crate::__private::unreachable_select() }
    }};
    (() ($($arms:tt)*) ($($dispatch:tt)*) (($d:expr))) => {{
        $crate::__private::select([$($arms)*], false);
        $($dispatch)* { $d }
    }};
    (((recv ($r:expr) ($p:pat) ($body:expr)) $($rest:tt)*) ($($arms:tt)*) ($($dispatch:tt)*) $default:tt) => {{
        let __operand = &$r;
        let mut __arm = $crate::__private::RecvArm::new(
            $crate::__private::RecvOperand::recv_operand(__operand),
        );
        $crate::__select_gen!(
            ($($rest)*)
            ($($arms)* __arm.case(),)
            ($($dispatch)* if let ::core::option::Option::Some(__res) = __arm.take() {
                let $p = __res;
                $body
            } else)
            $default
        )
    }};
    (((send ($s:expr) ($v:expr) ($p:pat) ($body:expr)) $($rest:tt)*) ($($arms:tt)*) ($($dispatch:tt)*) $default:tt) => {{
        let __operand = &$s;
        let mut __arm = $crate::__private::SendArm::new(
            $crate::__private::SendOperand::send_operand(__operand),
            $v,
        );
        $crate::__select_gen!(
            ($($rest)*)
            ($($arms)* __arm.case(),)
            ($($dispatch)* if let ::core::option::Option::Some(__res) = __arm.take() {
                let $p = __res;
                $body
            } else)
            $default
        )
    }};
}
