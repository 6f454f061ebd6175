//! The runtime semaphore under `Mutex`, `RwLock`, `WaitGroup` and `Once`
//! (Go's runtime/sema.go: `semacquire1`, `semrelease1`, `semaRoot`).
//!
//! A semaphore is any `AtomicU32` owned by a primitive; its value counts
//! available wakeup tokens. Waiters sleep in a table of [`SEMTAB_SIZE`] roots
//! keyed by the semaphore's address; each root has a lock, a queue of wait
//! records (one FIFO list per address) and `nwait`, the number of waiters,
//! readable without the lock.
//!
//! # Protocol
//! - `semacquire(addr)`: take a token by CAS if one is there (the fast path;
//!   no root is touched). Otherwise, under the root lock: `nwait += 1`, try
//!   the token again, and if there is still none enqueue a [`Sudog`] on the
//!   caller's stack and park (the lock is released by the park's unlock
//!   step, see `waitcell.rs`). Woken with the `ticket` set (a direct grant), the
//!   token is already ours; otherwise compete for it again (a newcomer may have taken
//!   it) and, on losing, requeue.
//! - `semrelease(addr, handoff)`: add a token; if `nwait == 0` return (no
//!   lock taken). Otherwise, under the lock, dequeue the first waiter for
//!   `addr` and `nwait -= 1`; after the lock, with `handoff` (Go's name for
//!   a direct grant) take the token on the waiter's behalf and set its ticket, wake it, and yield so that
//!   it runs at once on our time slice (it is in our P's `runnext`).
//!
//! # No lost wakeup
//! The releaser stores (token `+= 1`) then loads `nwait`; the acquirer
//! stores (`nwait += 1`) then loads the token. Both pairs are SeqCst, so in
//! the single order of SeqCst operations either the releaser sees the
//! waiter count (and takes the lock, which serialises it after the enqueue)
//! or the acquirer's re-check sees the token. Loom models SeqCst accesses
//! as AcqRel, so under loom only an explicit SeqCst fence sits between each
//! store and load (as in `runtime::spinning`).
//!
//! # Queue order (Go's lifo requeue)
//! Waiters of one address are served FIFO. A waiter may ask to go to the
//! *front* (`lifo`): `Mutex` does so for a goroutine that was woken and lost
//! the race to a newcomer, so that it is the next one woken (and soon
//! becomes "starving").
//!
//! Where we differ: Go keeps the distinct addresses of a root in a treap;
//! this queue keeps them in a list, so an enqueue or dequeue walks the
//! distinct addresses *currently waited on* in that root (a handful when
//! the contended primitives are spread over 251 roots). Go moved to the
//! treap for programs that block goroutines on tens of thousands of
//! distinct semaphores at once (golang/go#17953); the list can be replaced
//! by a treap behind `Queue::enqueue`/`dequeue` without touching the
//! protocol.
//!
//! # Ownership of a `Sudog`
//! Its links are read and written only under its root's lock. Its `ticket`
//! is written by the waker after unlinking it (so exclusively) and read by
//! the waiter after the `WaitCell` handover (Release/Acquire on `woken`).

use std::ptr;

use super::waitcell::{self, lock, Lock, UnsafeCell, WaitCell, WaitReason};
use crate::loom::atomic::{AtomicU32, Ordering};

/// Roots in the table (Go's `semTabSize`, a prime); two under loom so that
/// models are small but still exercise the hashing.
const SEMTAB_SIZE: usize = if cfg!(loom) { 2 } else { 251 };

/// A wait record on the waiter's stack (Go's `sudog`, the fields sema uses).
struct Sudog {
    /// The semaphore waited on; immutable.
    addr: usize,
    /// Next waiter on the same address (Go's `waitlink`). Root lock.
    waitlink: UnsafeCell<*const Sudog>,
    /// For the head of an address: the last waiter of that address, or null
    /// if the head is alone (Go's `waittail`). Root lock.
    waittail: UnsafeCell<*const Sudog>,
    /// For the head of an address: the head of the next address in this
    /// root's list (Go: the treap links). Root lock.
    next_addr: UnsafeCell<*const Sudog>,
    /// Set by a direct grant: the releaser took the token for us.
    ticket: UnsafeCell<bool>,
    cell: WaitCell,
}

impl Sudog {
    fn new(addr: &AtomicU32) -> Sudog {
        Sudog {
            addr: addr as *const AtomicU32 as usize,
            waitlink: UnsafeCell::new(ptr::null()),
            waittail: UnsafeCell::new(ptr::null()),
            next_addr: UnsafeCell::new(ptr::null()),
            ticket: UnsafeCell::new(false),
            cell: WaitCell::new(),
        }
    }
}

/// Reads a link of a live record.
///
/// # Safety
/// `p` points to a live record; the caller holds its root lock.
#[inline]
unsafe fn get(p: &UnsafeCell<*const Sudog>) -> *const Sudog {
    // SAFETY: the root lock serialises link accesses (caller's contract).
    p.with(|v| unsafe { *v })
}

/// Writes a link of a live record.
///
/// # Safety
/// As for [`get`].
#[inline]
unsafe fn set(p: &UnsafeCell<*const Sudog>, v: *const Sudog) {
    // SAFETY: the root lock serialises link accesses (caller's contract).
    p.with_mut(|q| unsafe { *q = v })
}

/// The waiters of one root: a list of per-address FIFO queues.
struct Queue {
    /// First head (one record per distinct address), linked by `next_addr`.
    heads: *const Sudog,
}

// SAFETY: the records the pointers name are only touched under the root
// lock that owns this `Queue` (module note), from whichever thread holds it.
unsafe impl Send for Queue {}

impl Queue {
    /// Links `prev`'s successor (or the list head when `prev` is null).
    ///
    /// # Safety
    /// `prev` is null or a live head in this queue.
    unsafe fn set_after(&mut self, prev: *const Sudog, v: *const Sudog) {
        if prev.is_null() {
            self.heads = v;
        } else {
            // SAFETY: a live head (caller's contract), under the root lock.
            unsafe { set(&(*prev).next_addr, v) };
        }
    }

    /// Adds `s` to the waiters of its address: at the tail, or with `lifo`
    /// at the front (Go's `semaRoot.queue`).
    ///
    /// # Safety
    /// `s` is a live, unlinked record that stays in place until it is
    /// dequeued; every record in the queue is live.
    unsafe fn enqueue(&mut self, s: *const Sudog, lifo: bool) {
        // SAFETY: every pointer followed is a live record in this queue or
        // `s` (caller's contract), and we hold the root lock.
        unsafe {
            let addr = (*s).addr;
            set(&(*s).waitlink, ptr::null());
            set(&(*s).waittail, ptr::null());
            set(&(*s).next_addr, ptr::null());
            let mut prev: *const Sudog = ptr::null();
            let mut t = self.heads;
            while !t.is_null() {
                if (*t).addr == addr {
                    if lifo {
                        // `s` takes `t`'s place as head; `t` becomes the
                        // first of `s`'s followers.
                        set(&(*s).next_addr, get(&(*t).next_addr));
                        self.set_after(prev, s);
                        set(&(*s).waitlink, t);
                        let tail = get(&(*t).waittail);
                        set(&(*s).waittail, if tail.is_null() { t } else { tail });
                        set(&(*t).next_addr, ptr::null());
                        set(&(*t).waittail, ptr::null());
                    } else {
                        let tail = get(&(*t).waittail);
                        if tail.is_null() {
                            set(&(*t).waitlink, s);
                        } else {
                            set(&(*tail).waitlink, s);
                        }
                        set(&(*t).waittail, s);
                    }
                    return;
                }
                prev = t;
                t = get(&(*t).next_addr);
            }
            // First waiter on this address: a new head at the end.
            self.set_after(prev, s);
        }
    }

    /// Unlinks and returns the first waiter on `addr`, or null (Go's
    /// `semaRoot.dequeue`).
    ///
    /// # Safety
    /// Every record in the queue is live.
    unsafe fn dequeue(&mut self, addr: usize) -> *const Sudog {
        // SAFETY: every record followed is live (caller's contract), and we
        // hold the root lock.
        unsafe {
            let mut prev: *const Sudog = ptr::null();
            let mut s = self.heads;
            while !s.is_null() {
                if (*s).addr == addr {
                    let next_head = get(&(*s).next_addr);
                    let t = get(&(*s).waitlink);
                    if t.is_null() {
                        self.set_after(prev, next_head);
                    } else {
                        // `t` takes `s`'s place as head.
                        set(&(*t).next_addr, next_head);
                        let more = !get(&(*t).waitlink).is_null();
                        set(
                            &(*t).waittail,
                            if more {
                                get(&(*s).waittail)
                            } else {
                                ptr::null()
                            },
                        );
                        self.set_after(prev, t);
                    }
                    set(&(*s).waitlink, ptr::null());
                    set(&(*s).waittail, ptr::null());
                    set(&(*s).next_addr, ptr::null());
                    return s;
                }
                prev = s;
                s = get(&(*s).next_addr);
            }
            ptr::null()
        }
    }
}

/// One bucket of the table (Go's `semaRoot`), alone on its cache line.
#[repr(align(64))]
struct Root {
    queue: Lock<Queue>,
    /// Waiters in `queue`. Changed under the lock, read without it by
    /// `semrelease`'s fast path (module note).
    nwait: AtomicU32,
}

impl Root {
    waitcell::loom_const_fn! {
        fn new() -> Root {
            Root {
                queue: Lock::new(Queue { heads: ptr::null() }),
                nwait: AtomicU32::new(0),
            }
        }
    }
}

#[cfg(not(loom))]
static SEMTABLE: [Root; SEMTAB_SIZE] = [const { Root::new() }; SEMTAB_SIZE];

// Under loom a fresh table per execution.
#[cfg(loom)]
loom::lazy_static! {
    static ref SEMTABLE: [Root; SEMTAB_SIZE] = [Root::new(), Root::new()];
}

#[inline]
fn root_for(addr: &AtomicU32) -> &'static Root {
    let a = addr as *const AtomicU32 as usize;
    &SEMTABLE[(a >> 3) % SEMTAB_SIZE]
}

/// Takes a token if there is one (Go's `cansemacquire`).
#[inline]
fn cansemacquire(addr: &AtomicU32) -> bool {
    // SeqCst: the acquirer's load of the Dekker pair with `semrelease`
    // (module note).
    let mut v = addr.load(Ordering::SeqCst);
    loop {
        if v == 0 {
            return false;
        }
        // Acquire: pairs with the Release half of `semrelease`'s fetch_add,
        // so the releaser's prior writes are visible to the new owner.
        match addr.compare_exchange_weak(v, v - 1, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => return true,
            Err(cur) => v = cur,
        }
    }
}

/// Waits until a token is available on `addr` and takes it (Go's
/// `semacquire1`). `lifo` queues the caller at the front of the waiters of
/// `addr`. Parks the calling goroutine with `reason`; outside the runtime,
/// blocks the calling thread.
pub(crate) fn semacquire(addr: &AtomicU32, lifo: bool, reason: WaitReason) {
    if cansemacquire(addr) {
        return;
    }
    let root = root_for(addr);
    // Pinned: stays in this frame, never moved, until we return.
    let s = Sudog::new(addr);
    loop {
        let mut q = lock(&root.queue);
        // SeqCst: the acquirer's store of the Dekker pair with `semrelease`.
        root.nwait.fetch_add(1, Ordering::SeqCst);
        #[cfg(loom)]
        crate::loom::atomic::fence(Ordering::SeqCst);
        if cansemacquire(addr) {
            // SeqCst: keeps `nwait` in the SeqCst order (module note).
            root.nwait.fetch_sub(1, Ordering::SeqCst);
            return;
        }
        // SAFETY: unpublished (not yet linked); a previous round's waker is
        // done with the record (we saw `woken` in `block`).
        s.ticket.with_mut(|t| unsafe { *t = false });
        // SAFETY: as above.
        let mode = unsafe { s.cell.prepare() };
        // SAFETY: `s` is unlinked and stays in this frame until a waker
        // unlinks it, which happens before `block` returns.
        unsafe { q.enqueue(&s, lifo) };
        s.cell.block(mode, q, reason);
        // SAFETY: the waker wrote the ticket before its Release store of
        // `woken`, which `block` observed with Acquire; it no longer
        // touches the record.
        if s.ticket.with(|t| unsafe { *t }) || cansemacquire(addr) {
            return;
        }
    }
}

/// Adds a token to `addr` and wakes its first waiter, if any (Go's
/// `semrelease1`). With `handoff` (a direct grant) the token goes straight
/// to that waiter, which then runs at once on the caller's time slice.
pub(crate) fn semrelease(addr: &AtomicU32, handoff: bool) {
    let root = root_for(addr);
    // SeqCst: the releaser's store of the Dekker pair (module note); its
    // Release half pairs with the Acquire CAS in `cansemacquire`.
    addr.fetch_add(1, Ordering::SeqCst);
    #[cfg(loom)]
    crate::loom::atomic::fence(Ordering::SeqCst);
    // SeqCst: the releaser's load of the Dekker pair.
    if root.nwait.load(Ordering::SeqCst) == 0 {
        return;
    }
    let mut q = lock(&root.queue);
    // SeqCst: as above (under the lock this only re-checks).
    if root.nwait.load(Ordering::SeqCst) == 0 {
        return;
    }
    // SAFETY: all records in the queue are live: each waiter stays parked
    // until a waker unlinks and wakes it.
    let s = unsafe { q.dequeue(addr as *const AtomicU32 as usize) };
    if s.is_null() {
        return;
    }
    // SeqCst: keeps `nwait` in the SeqCst order (module note).
    root.nwait.fetch_sub(1, Ordering::SeqCst);
    drop(q);
    let handed = handoff && cansemacquire(addr);
    if handed {
        // SAFETY: we unlinked `s` and have not woken it: we own it.
        unsafe { (*s).ticket.with_mut(|t| *t = true) };
    }
    // SAFETY: unlinked by us above, not yet woken; `s` is not used after.
    unsafe { WaitCell::wake(&(*s).cell) };
    if handed {
        waitcell::yield_after_grant();
    }
}

/// Waiters currently queued in `addr`'s root (any address in that root);
/// for tests that wait until a goroutine has blocked.
#[cfg(all(test, not(loom)))]
fn nwait(addr: &AtomicU32) -> u32 {
    root_for(addr).nwait.load(Ordering::SeqCst)
}

#[cfg(all(test, not(loom)))]
mod tests;

#[cfg(all(test, loom))]
mod loom_tests {
    //! Loom models of the acquire/release handoff with loom threads as
    //! waiters (`RUSTFLAGS="--cfg loom" cargo test --release --lib sema`).
    use super::*;
    use crate::sync::waitcell::model;
    use loom::sync::Arc;
    use loom::thread;

    /// One waiter, one releaser: the waiter must get the token whichever
    /// side runs first (no lost wakeup between nwait and the token), with
    /// and without handoff, and the token is consumed exactly once.
    #[test]
    fn acquire_release() {
        for handoff in [false, true] {
            model(None, move || {
                let s = Arc::new(AtomicU32::new(0));
                let t = {
                    let s = s.clone();
                    thread::spawn(move || semacquire(&s, false, WaitReason::Semacquire))
                };
                semrelease(&s, handoff);
                t.join().unwrap();
                assert_eq!(s.load(Ordering::SeqCst), 0);
                assert_eq!(root_for(&s).nwait.load(Ordering::SeqCst), 0);
            });
        }
    }

    /// One token circulating among three threads, each acquiring and
    /// releasing it with handoff (a binary semaphore used as a lock, as
    /// `Mutex` uses it in starvation mode): handoffs race with barging fast
    /// paths and a lifo waiter, and the token is never lost or duplicated.
    #[test]
    fn one_token_three_threads_handoff() {
        model(Some(3), || {
            let s = Arc::new(AtomicU32::new(0));
            let ts: Vec<_> = (0..2)
                .map(|i| {
                    let s = s.clone();
                    thread::spawn(move || {
                        semacquire(&s, i == 1, WaitReason::Semacquire);
                        semrelease(&s, true);
                    })
                })
                .collect();
            semrelease(&s, true);
            semacquire(&s, false, WaitReason::Semacquire);
            semrelease(&s, true);
            for t in ts {
                t.join().unwrap();
            }
            assert_eq!(s.load(Ordering::SeqCst), 1);
            assert_eq!(root_for(&s).nwait.load(Ordering::SeqCst), 0);
        });
    }
}
