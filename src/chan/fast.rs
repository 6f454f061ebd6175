//! The lock-free fast paths of the non-blocking operations (Go's `empty`,
//! `full` and the `!block` early returns of `chanrecv` and `chansend`).
//!
//! A `try_recv` on an empty channel, or a `try_send` on a full one, answers
//! without taking the channel's lock: it reads [`Readiness`] (the buffered
//! count and the `closed` / `rx_gone` flags, mirrored in atomics) and the
//! head of the peer wait queue. A poller then only reads the channel's cache
//! line, so a peer that makes the channel ready takes the lock uncontended,
//! and two sides polling each other (one P each) do not fight over the lock.
//!
//! # Protocol
//! - Every write of `qcount`, `closed` and `rx_gone` (bits of one
//!   `flags` byte), and of a wait queue's
//!   head, happens under the channel lock, with a Release store. Under the
//!   lock they are read Relaxed (the lock orders them); lock-free they are
//!   read Acquire.
//! - **try_recv.** Observe "not ready" (unbuffered: no sender queued;
//!   buffered: `qcount == 0`), *then* `closed`. Not closed: the channel was
//!   empty and open at the first observation (a channel never reopens), so
//!   `Empty` is linearised there. Closed: observe readiness again; still not
//!   ready means closed and drained (a closed channel never becomes ready
//!   again: no send succeeds after close), so `Closed`. Ready on the second
//!   look: take the lock (values are still buffered). The order of the two
//!   observations matters: seeing `closed == false` first and "empty" later
//!   could pair an open-but-full instant with a drained-and-closed one, and
//!   report `Empty` for a channel that was never both open and empty (Go's
//!   comment in `chanrecv`). The first load is Acquire, so the second cannot
//!   be satisfied ahead of it.
//! - **try_send.** Observe `closed` and `rx_gone` unset, then "full"
//!   (unbuffered: no receiver queued; buffered: `qcount == cap`): `Full`. A
//!   channel that closes between the two stays full (no send succeeds after
//!   close), so there was an instant that was both open and full.
//! - Anything else takes the lock and runs the ordinary locked operation,
//!   which is authoritative. A stale sudog of a completed select makes a
//!   queue look non-empty: that only costs the lock.
//! - **Never a contended lock.** While a non-blocking operation waits for
//!   the lock, it keeps re-running its fast check, and returns that answer as
//!   soon as the check decides (`Lock::lock_or`), so `try_*` on a channel
//!   drained or filled meanwhile by the lock holder never waits for it.
//!
//! # Invariants
//! - The fast paths never move a value and never touch the wait records:
//!   they only decide "not ready" (or "closed and drained"); every transfer
//!   happens under the lock.
//! - `closed`, `rx_gone` go from false to true once and never back.

use super::wait::WaitQueue;
use crate::loom::atomic::{AtomicU8, AtomicUsize, Ordering};

/// What a fast path decided without the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fast {
    /// Not ready: `try_recv` finds no value, `try_send` no room.
    NotReady,
    /// Closed (and, for a receive, drained); for a send also: no receiver
    /// left.
    Closed,
}

/// The lock-free readable part of a channel's state. Written only under the
/// channel lock (see the module note).
pub(crate) struct Readiness {
    /// Buffered values.
    qcount: AtomicUsize,
    /// [`CLOSED`] and [`RX_GONE`], each set once and never cleared, and
    /// [`RESERVED`]. One byte, so that a locked send checks all three with
    /// one load ([`Readiness::flags`]).
    flags: AtomicU8,
}

/// `close` was called, or the last sender was dropped.
const CLOSED: u8 = 1;
/// The last receiver was dropped.
const RX_GONE: u8 = 2;
/// Some ring slots are reserved for send futures (`hchan.rs`,
/// `RawChan::reserved`): set and cleared under the lock, never read
/// without it.
#[cfg_attr(loom, allow(dead_code))] // the models have no send futures
pub(crate) const RESERVED: u8 = 4;

impl Readiness {
    pub(crate) fn new() -> Readiness {
        Readiness {
            qcount: AtomicUsize::new(0),
            flags: AtomicU8::new(0),
        }
    }

    /// Every flag, for one test of the rare cases (closed, every receiver
    /// gone, slots reserved); the caller holds the lock.
    #[inline]
    pub(crate) fn flags(&self) -> u8 {
        self.flags.load(Ordering::Relaxed)
    }

    /// Sets or clears [`RESERVED`]; the caller holds the lock.
    #[cfg_attr(loom, allow(dead_code))] // the models have no send futures
    #[inline]
    pub(crate) fn set_reserved(&self, on: bool) {
        let f = self.flags.load(Ordering::Relaxed);
        let f = if on { f | RESERVED } else { f & !RESERVED };
        // Relaxed: read only under the lock, which orders it.
        self.flags.store(f, Ordering::Relaxed);
    }

    /// Whether `flags` (from [`flags`](Self::flags)) says closed.
    #[inline]
    pub(crate) fn is_closed(flags: u8) -> bool {
        flags & CLOSED != 0
    }

    /// Whether `flags` says every receiver is gone.
    #[inline]
    pub(crate) fn is_rx_gone(flags: u8) -> bool {
        flags & RX_GONE != 0
    }

    /// Buffered values; the caller holds the lock.
    #[inline]
    pub(crate) fn qcount(&self) -> usize {
        self.qcount.load(Ordering::Relaxed)
    }

    /// Sets the count; the caller holds the lock.
    #[inline]
    pub(crate) fn set_qcount(&self, n: usize) {
        // Release: pairs with the Acquire loads of the fast paths.
        self.qcount.store(n, Ordering::Release);
    }

    /// Whether the channel is closed; the caller holds the lock.
    #[inline]
    pub(crate) fn closed(&self) -> bool {
        Self::is_closed(self.flags())
    }

    /// Closes; the caller holds the lock.
    #[inline]
    pub(crate) fn set_closed(&self) {
        let f = self.flags.load(Ordering::Relaxed);
        // Release: a fast path that sees the flag sees every count written
        // before it (the second look of try_recv relies on it).
        self.flags.store(f | CLOSED, Ordering::Release);
    }

    /// Whether every receiver is gone; the caller holds the lock.
    #[inline]
    pub(crate) fn rx_gone(&self) -> bool {
        Self::is_rx_gone(self.flags())
    }

    /// Records that every receiver is gone; the caller holds the lock.
    #[inline]
    pub(crate) fn set_rx_gone(&self) {
        let f = self.flags.load(Ordering::Relaxed);
        // Release: as in `set_closed`.
        self.flags.store(f | RX_GONE, Ordering::Release);
    }

    /// Buffered values, read without the lock.
    #[inline]
    pub(crate) fn load_qcount(&self) -> usize {
        self.qcount.load(Ordering::Acquire)
    }

    /// Whether the channel is closed, read without the lock.
    #[inline]
    pub(crate) fn load_closed(&self) -> bool {
        self.flags.load(Ordering::Acquire) & CLOSED != 0
    }

    /// Lock-free: no value to receive (Go's `empty`). `sendq` is the
    /// channel's queue of blocked senders, `cap` its buffer size.
    #[inline]
    fn recv_not_ready(&self, cap: usize, sendq: &WaitQueue) -> bool {
        if cap == 0 {
            sendq.looks_empty()
        } else {
            // Acquire: orders the `closed` load after it (module note).
            self.qcount.load(Ordering::Acquire) == 0
        }
    }

    /// Lock-free: no room to send (Go's `full`).
    #[inline]
    fn send_not_ready(&self, cap: usize, recvq: &WaitQueue) -> bool {
        if cap == 0 {
            recvq.looks_empty()
        } else {
            self.qcount.load(Ordering::Acquire) == cap
        }
    }

    /// The fast path of a non-blocking receive: `Some` is the answer,
    /// `None` means take the lock.
    #[inline]
    pub(crate) fn try_recv_fast(&self, cap: usize, sendq: &WaitQueue) -> Option<Fast> {
        if !self.recv_not_ready(cap, sendq) {
            return None;
        }
        // Acquire: pairs with `set_closed`, so the second look below sees
        // every value sent before the close.
        if self.flags.load(Ordering::Acquire) & CLOSED == 0 {
            return Some(Fast::NotReady);
        }
        if self.recv_not_ready(cap, sendq) {
            return Some(Fast::Closed);
        }
        None
    }

    /// The fast path of a non-blocking send: `Some(NotReady)` is the answer
    /// `Full`; `None` means take the lock (which also reports a closed
    /// channel, with the value given back).
    #[inline]
    pub(crate) fn try_send_fast(&self, cap: usize, recvq: &WaitQueue) -> Option<Fast> {
        // Acquire: the `full` load below is not satisfied ahead of these.
        if self.flags.load(Ordering::Acquire) & (CLOSED | RX_GONE) != 0 {
            return None;
        }
        self.send_not_ready(cap, recvq).then_some(Fast::NotReady)
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! A channel of capacity 1 reduced to what the fast paths see: the real
    //! lock, `Readiness` and wait queue, a one-slot ring in a loom cell, and
    //! the locked operations written out as `hchan.rs` does them.
    use super::*;
    use crate::chan::lock::Lock;
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;
    use loom::thread;

    struct C {
        lock: Lock,
        ready: Readiness,
        sendq: WaitQueue,
        recvq: WaitQueue,
        slot: UnsafeCell<u32>,
    }

    const CAP: usize = 1;

    /// Runs a model with at most 3 preemptions per execution (as
    /// `sync::waitcell::model`): the spin lock with three threads would not be
    /// exhaustible otherwise, and ordering bugs of two loads need few
    /// preemptions. `LOOM_MAX_PREEMPTIONS` overrides it.
    fn model(f: impl Fn() + Sync + Send + 'static) {
        let mut b = loom::model::Builder::new();
        if b.preemption_bound.is_none() {
            b.preemption_bound = Some(3);
        }
        b.check(f);
    }

    #[derive(Debug, PartialEq)]
    enum Got {
        Value(u32),
        Empty,
        Closed,
    }

    impl C {
        fn new() -> Arc<C> {
            Arc::new(C {
                lock: Lock::new(),
                ready: Readiness::new(),
                sendq: WaitQueue::new(),
                recvq: WaitQueue::new(),
                slot: UnsafeCell::new(0),
            })
        }

        fn try_send(&self, v: u32) -> Result<(), Fast> {
            let give_up = || self.ready.try_send_fast(CAP, &self.recvq);
            if let Some(f) = give_up() {
                return Err(f);
            }
            if let Err(f) = self.lock.lock_or(give_up) {
                return Err(f);
            }
            let r = if self.ready.closed() || self.ready.rx_gone() {
                Err(Fast::Closed)
            } else if self.ready.qcount() < CAP {
                // SAFETY: under the lock; the slot is free.
                self.slot.with_mut(|p| unsafe { *p = v });
                self.ready.set_qcount(1);
                Ok(())
            } else {
                Err(Fast::NotReady)
            };
            // SAFETY: we hold it.
            unsafe { self.lock.unlock() };
            r
        }

        fn try_recv(&self) -> Got {
            let give_up = || self.ready.try_recv_fast(CAP, &self.sendq);
            let fast = |f| match f {
                Fast::NotReady => Got::Empty,
                Fast::Closed => Got::Closed,
            };
            if let Some(f) = give_up() {
                return fast(f);
            }
            if let Err(f) = self.lock.lock_or(give_up) {
                return fast(f);
            }
            let r = if self.ready.qcount() > 0 {
                self.ready.set_qcount(0);
                // SAFETY: under the lock; the slot holds a value.
                Got::Value(self.slot.with(|p| unsafe { *p }))
            } else if self.ready.closed() {
                Got::Closed
            } else {
                Got::Empty
            };
            // SAFETY: we hold it.
            unsafe { self.lock.unlock() };
            r
        }

        fn close(&self) {
            self.lock.lock();
            self.ready.set_closed();
            // SAFETY: we hold it.
            unsafe { self.lock.unlock() };
        }
    }

    /// A sender sends one value and closes; a receiver polls twice. The
    /// receiver never sees `Closed` before the value (the value would be
    /// lost), never `Empty` after `Closed`, and the value is received by
    /// the poller or is still buffered at the end.
    #[test]
    fn try_recv_never_reports_closed_while_a_value_is_buffered() {
        model(|| {
            let c = C::new();
            let tx = {
                let c = c.clone();
                thread::spawn(move || {
                    assert_eq!(c.try_send(7), Ok(()));
                    c.close();
                })
            };
            let a = c.try_recv();
            let b = c.try_recv();
            tx.join().unwrap();
            let rest = c.try_recv();
            let got: Vec<&Got> = [&a, &b, &rest].into_iter().collect();
            let values = got.iter().filter(|g| ***g == Got::Value(7)).count();
            assert_eq!(values, 1, "{got:?}");
            if a == Got::Closed {
                panic!("closed before the value: {got:?}");
            }
            if a == Got::Value(7) || b == Got::Value(7) {
                assert_eq!(rest, Got::Closed);
            }
            if b == Got::Closed {
                assert_eq!(a, Got::Value(7));
            }
        });
    }

    /// Go's `chanrecv` ordering case: a channel holding one value is
    /// closed and then drained by one receiver while another polls it once.
    /// If the poller does not get the value, the value stayed buffered until
    /// after the close, so the channel was never both open and empty during
    /// the poll: it must report `Closed` (or, looking before the drain, take
    /// the value), never `Empty`. Reading `closed` before the emptiness (the
    /// wrong order) lets the poll see the open flag before the close and the
    /// empty buffer after the drain: this model fails with the loads swapped.
    #[test]
    fn a_poll_racing_close_and_drain_never_reports_empty() {
        model(|| {
            let c = C::new();
            assert_eq!(c.try_send(5), Ok(()));
            let other = {
                let c = c.clone();
                thread::spawn(move || c.try_recv())
            };
            c.close();
            let mine = c.try_recv();
            let theirs = other.join().unwrap();
            let rest = c.try_recv();
            let all = [&mine, &theirs, &rest];
            assert_eq!(
                all.iter().filter(|g| ***g == Got::Value(5)).count(),
                1,
                "{all:?}"
            );
            assert_ne!(theirs, Got::Empty, "{all:?}");
            assert_eq!(rest, Got::Closed);
        });
    }

    /// try_send on a full channel answers `Full` without the lock, and a
    /// close racing with it turns the answer into `Closed` only through
    /// the locked path; a receiver dropping the value first makes it room.
    #[test]
    fn try_send_full_or_closed_races_close() {
        model(|| {
            let c = C::new();
            assert_eq!(c.try_send(1), Ok(()));
            let closer = {
                let c = c.clone();
                thread::spawn(move || c.close())
            };
            let r = c.try_send(2);
            closer.join().unwrap();
            assert!(
                matches!(r, Err(Fast::NotReady) | Err(Fast::Closed)),
                "{r:?}"
            );
            assert_eq!(c.try_recv(), Got::Value(1));
            assert_eq!(c.try_recv(), Got::Closed);
            assert_eq!(c.try_send(3), Err(Fast::Closed));
        });
    }
}
