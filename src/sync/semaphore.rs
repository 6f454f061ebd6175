//! `Semaphore`: a weighted counting semaphore (golang.org/x/sync/semaphore
//! `Weighted`).
//!
//! # Protocol
//! All state is under one short internal lock: `cur` (units held) and a
//! FIFO list of waiters, each a record on the waiter's stack with the
//! weight it asks for.
//! - `acquire(n)`: if `size - cur >= n` and nobody waits, take it;
//!   otherwise append a record and park (the park's unlock step releases
//!   the lock, see `wait.rs`).
//! - `release(n)`: `cur -= n`, then grant waiters *from the front only*
//!   while the front one fits (`cur += its n`, unlink it); stop at the first
//!   that does not fit, even if a smaller one behind it would. That is the
//!   FIFO rule that keeps a large request from being starved by a stream of
//!   small ones. Granted records are woken after the lock is released.
//!
//! A waiter is granted by the releaser before it is woken, so waking it
//! needs no re-check and there is no lost wakeup: the grant and the
//! enqueue are both under the lock.

use std::ptr;

use super::waitcell::{lock, Lock, UnsafeCell, WaitCell, WaitReason};

struct Waiter {
    n: usize,
    /// Next in the FIFO. Under the lock.
    next: UnsafeCell<*const Waiter>,
    cell: WaitCell,
}

struct State {
    cur: usize,
    head: *const Waiter,
    tail: *const Waiter,
}

// SAFETY: the records are only touched under the lock that owns `State`.
unsafe impl Send for State {}

/// A weighted semaphore with `size` units (golang.org/x/sync/semaphore).
///
/// [`acquire(n)`](Semaphore::acquire) takes `n` units, parking the calling
/// goroutine (or blocking the calling thread) until they are available;
/// [`release(n)`](Semaphore::release) gives them back. Waiters are served
/// strictly in arrival order: a large request at the front is not bypassed
/// by smaller ones behind it, so it cannot be starved.
///
/// ```
/// use goroutine::sync::Semaphore;
///
/// let s = Semaphore::new(3);
/// s.acquire(2);
/// assert!(!s.try_acquire(2));
/// assert!(s.try_acquire(1));
/// s.release(3);
/// ```
pub struct Semaphore {
    size: usize,
    state: Lock<State>,
}

impl Semaphore {
    /// A semaphore with `size` units, all available.
    // entry: a constructor; no runtime state
    pub const fn new(size: usize) -> Semaphore {
        Semaphore {
            size,
            state: Lock::new(State {
                cur: 0,
                head: ptr::null(),
                tail: ptr::null(),
            }),
        }
    }

    /// Acquires `n` units, waiting (FIFO) until they are available.
    ///
    /// # Panics
    /// If `n` exceeds the semaphore's size: such a request could never be
    /// granted (Go's `Acquire` would block until its context is done).
    #[inline(always)]
    pub fn acquire(&self, n: usize) {
        self.acquire_n(n);
        // A caller that ends with `acquire` keeps its frame in dumps.
        crate::traceback::keep_caller_frame();
    }

    /// The body of [`acquire`](Self::acquire), out of line.
    #[inline(never)]
    fn acquire_n(&self, n: usize) {
        crate::runtime::entry::call(move || {
            let mut st = lock(&self.state);
            if self.size - st.cur >= n && st.head.is_null() {
                st.cur += n;
                return;
            }
            if n > self.size {
                drop(st);
                panic!("semaphore: acquire of {n} exceeds the size {}", self.size);
            }
            let w = Waiter {
                n,
                next: UnsafeCell::new(ptr::null()),
                cell: WaitCell::new(),
            };
            // SAFETY: `w` is not published yet.
            let mode = unsafe { w.cell.prepare() };
            let wp: *const Waiter = &w;
            if st.tail.is_null() {
                st.head = wp;
            } else {
                // SAFETY: `tail` is a live record (its owner waits until
                // granted), and we hold the lock.
                unsafe { (*st.tail).next.with_mut(|p| *p = wp) };
            }
            st.tail = wp;
            // `w` stays in this frame until a releaser granted and woke it; the
            // units are ours when `block` returns.
            w.cell.block(mode, st, WaitReason::Semacquire);
        })
    }

    /// Acquires `n` units if they are available now and nobody is waiting
    /// (a waiter at the front has priority).
    pub fn try_acquire(&self, n: usize) -> bool {
        crate::runtime::entry::call(move || {
            let mut st = lock(&self.state);
            let ok = self.size - st.cur >= n && st.head.is_null();
            if ok {
                st.cur += n;
            }
            ok
        })
    }

    /// Releases `n` units and grants waiters in FIFO order.
    ///
    /// # Panics
    /// If more units are released than are held (`semaphore: released more
    /// than held`).
    pub fn release(&self, n: usize) {
        crate::runtime::entry::call(move || {
            let mut st = lock(&self.state);
            if n > st.cur {
                drop(st);
                panic!("semaphore: released more than held");
            }
            st.cur -= n;
            // Grant from the front while the front waiter fits.
            let first = st.head;
            let mut last: *const Waiter = ptr::null();
            let mut s = st.head;
            while !s.is_null() {
                // SAFETY: a live record in the list, under the lock.
                let (wn, next) = unsafe { ((*s).n, (*s).next.with(|p| *p)) };
                if self.size - st.cur < wn {
                    break;
                }
                st.cur += wn;
                last = s;
                s = next;
            }
            if last.is_null() {
                return;
            }
            // Detach the granted prefix `first..=last`.
            st.head = s;
            if s.is_null() {
                st.tail = ptr::null();
            }
            drop(st);
            let mut g = first;
            loop {
                // SAFETY: the detached records are ours until woken; read `next`
                // before waking, after which the record may be gone.
                let next = unsafe { (*g).next.with(|p| *p) };
                let done = g == last;
                // SAFETY: unlinked and granted by us, woken once.
                unsafe { WaitCell::wake(&(*g).cell) };
                if done {
                    break;
                }
                g = next;
            }
        })
    }
}

impl std::fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (held, waiting) = crate::runtime::entry::call(|| {
            let st = lock(&self.state);
            (st.cur, !st.head.is_null())
        });
        f.debug_struct("Semaphore")
            .field("size", &self.size)
            .field("held", &held)
            .field("waiting", &waiting)
            .finish()
    }
}
