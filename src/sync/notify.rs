//! The ticket-based notify list under `Condvar` (Go's `notifyList` in
//! runtime/sema.go: `notifyListAdd`, `notifyListWait`,
//! `notifyListNotifyOne`, `notifyListNotifyAll`).
//!
//! # Protocol
//! - `wait` is the ticket counter: a waiter takes ticket `t = wait++`
//!   (`add`) *while still holding the user's mutex*, then unlocks it and
//!   calls `wait(t)`. Tickets fix the FIFO order at the moment the waiter
//!   stops holding the mutex, whatever order the waiters then reach the
//!   list in.
//! - `notify` is the next ticket to be notified; tickets `< notify` have
//!   been notified. It only moves under `lock`.
//! - `wait(t)` under `lock`: if `t < notify` the notification already
//!   happened (return at once); otherwise enqueue a record on the caller's
//!   stack and park, the park's unlock step releasing `lock`.
//! - `notify_one` under `lock`: if `notify == wait` nobody waits; else
//!   `notify += 1` and wake the record with ticket `notify - 1` if it is
//!   already in the list (if not, its `wait` will see `t < notify`).
//! - `notify_all` under `lock`: take the whole list, set `notify = wait`,
//!   then wake everybody after unlocking.
//!
//! Both checks (`t < notify` by the waiter, the list walk by the notifier)
//! happen under `lock`, so a ticket is either found in the list or seen as
//! notified: no lost wakeup. Ticket comparisons wrap (`less`).
//!
//! # synctest bubbles
//! As Go's `notifyList`: a goroutine of a synctest bubble may be woken only
//! by a member of its bubble, so that its `Condvar` wait is durable. A
//! notify that would wake one from outside panics (`semaphore wake of
//! synctest goroutine from outside bubble`), checked under `lock` before
//! anything changes (`notify` is not moved, nobody is unlinked), so the
//! list stays as it was. Only while some bubble exists: one relaxed load
//! otherwise.
//!
//! # Memory ordering
//! `wait` and `notify` are Relaxed: all decisions are re-checked under
//! `lock`, and the unlocked fast-path checks (`notify == wait`) only need
//! coherence, since a waiter whose `add` happens-before a notify call (the
//! user's mutex orders them) is seen by it. The records' handover goes
//! through the lock and the `WaitCell` protocol.

use std::ptr;

use super::waitcell::{lock, Lock, UnsafeCell, WaitCell, WaitReason};
use crate::loom::atomic::{AtomicU32, Ordering};

struct Waiter {
    ticket: u32,
    /// Next in the list. Under `NotifyList::lock`.
    next: UnsafeCell<*const Waiter>,
    cell: WaitCell,
}

struct List {
    head: *const Waiter,
    tail: *const Waiter,
}

// SAFETY: the records are only touched under the lock that owns the list.
unsafe impl Send for List {}

pub(crate) struct NotifyList {
    /// The next ticket to hand out.
    wait: AtomicU32,
    /// The next ticket to notify. Written under `lock`.
    notify: AtomicU32,
    lock: Lock<List>,
}

/// `a < b` in ticket order, robust to wrap-around.
#[inline]
fn less(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

impl NotifyList {
    super::waitcell::loom_const_fn! {
        pub(crate) fn new() -> NotifyList {
            NotifyList {
                wait: AtomicU32::new(0),
                notify: AtomicU32::new(0),
                lock: Lock::new(List {
                    head: ptr::null(),
                    tail: ptr::null(),
                }),
            }
        }
    }

    /// Takes a ticket (call while holding the user's lock).
    #[inline]
    pub(crate) fn add(&self) -> u32 {
        // Relaxed: see the module note.
        self.wait.fetch_add(1, Ordering::Relaxed)
    }

    /// Waits until ticket `t` has been notified.
    pub(crate) fn wait(&self, t: u32) {
        let mut l = lock(&self.lock);
        // Relaxed: `notify` is written under the lock we hold.
        if less(t, self.notify.load(Ordering::Relaxed)) {
            return;
        }
        let w = Waiter {
            ticket: t,
            next: UnsafeCell::new(ptr::null()),
            cell: WaitCell::new(),
        };
        // SAFETY: `w` is not published yet.
        let mode = unsafe { w.cell.prepare() };
        let wp: *const Waiter = &w;
        if l.tail.is_null() {
            l.head = wp;
        } else {
            // SAFETY: `tail` is a live record (its owner waits until
            // unlinked), and we hold the lock.
            unsafe { (*l.tail).next.with_mut(|n| *n = wp) };
        }
        l.tail = wp;
        // `w` stays in this frame until a notifier unlinked and woke it.
        w.cell.block(mode, l, WaitReason::SyncCondWait);
    }

    /// Wakes the waiter with the oldest unnotified ticket, if any.
    pub(crate) fn notify_one(&self) {
        // Relaxed fast path: see the module note.
        if self.wait.load(Ordering::Relaxed) == self.notify.load(Ordering::Relaxed) {
            return;
        }
        let mut l = lock(&self.lock);
        let t = self.notify.load(Ordering::Relaxed);
        if t == self.wait.load(Ordering::Relaxed) {
            return;
        }
        // Find ticket `t`: usually at the front (waiters enqueue in nearly
        // ticket order). If it is not there yet, its `wait` will see that
        // it was notified.
        let mut prev: *const Waiter = ptr::null();
        let mut s = l.head;
        while !s.is_null() {
            // SAFETY: every record in the list is live (its owner waits until
            // unlinked), and we hold the lock.
            let (next, ticket) = unsafe { ((*s).next.with(|n| *n), (*s).ticket) };
            if ticket == t {
                // SAFETY: as above.
                if !unsafe { may_wake(s) } {
                    drop(l);
                    wake_from_outside();
                }
                self.notify.store(t.wrapping_add(1), Ordering::Relaxed);
                if prev.is_null() {
                    l.head = next;
                } else {
                    // SAFETY: `prev` is a live record in the list.
                    unsafe { (*prev).next.with_mut(|n| *n = next) };
                }
                if next.is_null() {
                    l.tail = prev;
                }
                drop(l);
                // SAFETY: unlinked by us, woken once, not used after.
                unsafe { WaitCell::wake(&(*s).cell) };
                return;
            }
            prev = s;
            s = next;
        }
        self.notify.store(t.wrapping_add(1), Ordering::Relaxed);
    }

    /// Wakes every waiter that took a ticket before this call.
    pub(crate) fn notify_all(&self) {
        // Relaxed fast path: see the module note.
        if self.wait.load(Ordering::Relaxed) == self.notify.load(Ordering::Relaxed) {
            return;
        }
        let mut l = lock(&self.lock);
        let mut c = l.head;
        while !c.is_null() {
            // SAFETY: every record in the list is live (its owner waits until
            // unlinked), and we hold the lock.
            if !unsafe { may_wake(c) } {
                drop(l);
                wake_from_outside();
            }
            // SAFETY: as above.
            c = unsafe { (*c).next.with(|n| *n) };
        }
        let mut s = std::mem::replace(&mut l.head, ptr::null());
        l.tail = ptr::null();
        self.notify
            .store(self.wait.load(Ordering::Relaxed), Ordering::Relaxed);
        drop(l);
        while !s.is_null() {
            // SAFETY: the detached chain is ours; read `next` before waking
            // `s`, after which it may be gone.
            let next = unsafe { (*s).next.with(|n| *n) };
            // SAFETY: unlinked by us, woken once.
            unsafe { WaitCell::wake(&(*s).cell) };
            s = next;
        }
    }
}

/// Whether the caller may wake the waiter of record `w` (module note,
/// "synctest bubbles").
///
/// # Safety
/// `w` is in the list, whose lock the caller holds.
#[inline]
unsafe fn may_wake(w: *const Waiter) -> bool {
    #[cfg(not(loom))]
    if crate::runtime::bubble::virtual_active() {
        // SAFETY: the caller's contract.
        if let Some(g) = unsafe { (*w).cell.goroutine() } {
            return crate::runtime::bubble::may_wake(g);
        }
    }
    let _ = w;
    true
}

/// The panic of a notify that may not wake a bubble's goroutine.
#[cold]
fn wake_from_outside() -> ! {
    #[cfg(not(loom))]
    panic!("{}", crate::runtime::bubble::WAKE_FROM_OUTSIDE);
    #[cfg(loom)]
    unreachable!("no bubbles under loom");
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Loom model (`RUSTFLAGS="--cfg loom" cargo test --release --lib notify`).
    use super::*;
    use crate::sync::waitcell::model;
    use loom::sync::Arc;
    use loom::thread;

    /// Two waiters take tickets in order; `notify_one` twice wakes both
    /// (whether or not they reached the list first), `notify_all` with
    /// nobody left is a no-op.
    #[test]
    fn tickets_are_never_lost() {
        model(None, || {
            let n = Arc::new(NotifyList::new());
            let t0 = n.add();
            let t1 = n.add();
            let ws: Vec<_> = [t0, t1]
                .into_iter()
                .map(|t| {
                    let n = n.clone();
                    thread::spawn(move || n.wait(t))
                })
                .collect();
            n.notify_one();
            n.notify_one();
            n.notify_all();
            for w in ws {
                w.join().unwrap();
            }
        });
    }

    /// `notify_all` racing with waiters reaching the list.
    #[test]
    fn notify_all_wakes_everyone() {
        model(None, || {
            let n = Arc::new(NotifyList::new());
            let ts: Vec<u32> = (0..2).map(|_| n.add()).collect();
            let ws: Vec<_> = ts
                .into_iter()
                .map(|t| {
                    let n = n.clone();
                    thread::spawn(move || n.wait(t))
                })
                .collect();
            n.notify_all();
            for w in ws {
                w.join().unwrap();
            }
        });
    }
}
