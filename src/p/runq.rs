//! The per-P local run queue (Go's `runqput`, `runqputslow`, `runqget`,
//! `runqgrab`, `runqsteal`, `runqempty`, `runqdrain`, `runqputbatch`).
//!
//! # Design
//!
//! A P's runnable goroutines live in two places:
//!
//! - `runnext`: a single slot holding the goroutine that should run next,
//!   ahead of the ring. A goroutine readied by the running one goes here so
//!   that a producer/consumer pair (e.g. two goroutines ping-ponging on a
//!   channel) runs back to back and *inherits* the current time slice.
//! - a fixed ring of [`RUNQ_SIZE`] slots indexed by two free-running `u32`
//!   counters, `head` (next to consume) and `tail` (next free slot). The ring
//!   holds `tail - head` items (wrapping arithmetic) at positions
//!   `head % RUNQ_SIZE .. tail % RUNQ_SIZE`. `RUNQ_SIZE` is a power of two, so
//!   the modulo stays consistent across the `u32` wrap.
//!
//! ## Who may call what
//!
//! - The **owner** (the thread holding the P) is the only producer:
//!   [`put`](RunQueue::put) (in the scheduler its two halves,
//!   [`try_put`](RunQueue::try_put) and
//!   [`put_overflow`](RunQueue::put_overflow)),
//!   [`push_back_batch`](RunQueue::push_back_batch),
//!   [`get`](RunQueue::get), [`drain`](RunQueue::drain), and
//!   [`steal_into`](RunQueue::steal_into) *with this queue as the
//!   destination* (`self`).
//! - **Anyone** may steal from a queue (be the `victim` of `steal_into`) and
//!   read [`is_empty`](RunQueue::is_empty) / [`len`](RunQueue::len).
//!
//! ## Invariants
//!
//! 1. Only the owner writes `tail` and the slots. So the owner may read its
//!    own `tail` and slots with `Relaxed` loads.
//! 2. `head` only moves forward and only by compare-and-swap, by any consumer
//!    (the owner's `get`/overflow/drain, or a thief). A consumer reads the
//!    slots it wants *first* and then claims them with one CAS from the `head`
//!    value it read; a successful CAS is the commit, a failed one discards
//!    what was read.
//! 3. The owner writes slot `i % RUNQ_SIZE` for position `i` only after it has
//!    observed (`Acquire` on `head`) that position `i - RUNQ_SIZE` was
//!    consumed. The consumer's slot read precedes its `Release` CAS, so the
//!    read happens-before the overwrite: a consumer whose CAS succeeds read
//!    the value that belonged to its positions, never a later one.
//! 4. A slot is only read after an `Acquire` load of `tail` that covers it
//!    (or, for the owner, after its own write), so the item's slot write
//!    and everything the producer did to the item before publishing it are
//!    visible to whoever takes it.
//! 5. Only the owner stores a non-null `runnext` (`try_put`, by swap). The owner
//!    (`get`, `drain`) or a thief takes it by CAS to null, so exactly one
//!    party takes a given runnext item.
//!
//! ## Why `Relaxed` slot loads are fine
//!
//! A thief reads `head` and `tail` (`Acquire`), then the slots in between
//! with `Relaxed` loads. The read may be stale or torn *as a whole* (the
//! owner may be overwriting those slots for the next lap, another thief may
//! be taking them), but then `head` has moved on and the thief's CAS fails
//! (invariant 3); when the CAS succeeds, invariants 3 and 4 say every value
//! read was the right one. The slots are atomics rather than plain cells only
//! so that these racy-but-discarded reads are not data races in the Rust
//! memory model. The ABA case (the `u32` `head` wrapping all the way round
//! between a thief's load and its CAS: 2^32 consumptions) is ignored, as in
//! Go.
//!
//! ## The overflow stays out of the callers' frames
//!
//! A full ring moves half of itself plus the new item out as one
//! [`Overflow`] batch (1 KiB of pointers) for the global queue. The
//! scheduler calls [`try_put`](RunQueue::try_put) inline and
//! [`put_overflow`](RunQueue::put_overflow) from a cold, out-of-line
//! function, so the batch lives in that function's frame only. `newproc`,
//! `ready` and the channel wake paths run on goroutines' own stacks, whose
//! first page holds as little as 1.9 KiB of frames: with the batch inlined
//! into each of them (a 2.1 KiB frame), every goroutine that spawned or woke
//! another wrote into a second stack page.
//!
//! A thief copies the stolen items straight into the free part of its *own*
//! ring (beyond its `tail`) and publishes them with one `Release` store of
//! its `tail`, as Go's `runqsteal` does; while its own ring holds at most
//! `RUNQ_SIZE / 2` items, those writes can never overlap positions another
//! thief of *that* queue could successfully claim.

use std::fmt;
use std::ptr::{self, NonNull};

use crate::loom::atomic::{AtomicPtr, AtomicU32, Ordering};

/// Slots in a P's local ring (Go's `len(p.runq)`). Shrunk under loom so the
/// model checker can reach the full/overflow states.
pub(crate) const RUNQ_SIZE: usize = if cfg!(loom) { 4 } else { 256 };

/// Items moved out of a full ring in one go: half the ring plus the new item.
const OVERFLOW_LEN: usize = RUNQ_SIZE / 2 + 1;

// Wrapping `u32` positions map consistently onto slots only if the ring size
// divides 2^32; steals of up to half the ring must fit in a `u32`.
const _: () = assert!(RUNQ_SIZE.is_power_of_two() && RUNQ_SIZE >= 2 && RUNQ_SIZE <= 1 << 31);

/// A P's local run queue of `NonNull<T>` items (see the module note). The
/// queue never dereferences the pointers; it only moves them around.
pub(crate) struct RunQueue<T> {
    /// Next position to consume. Written by consumers with CAS only.
    head: AtomicU32,
    /// Next free position. Written by the owner only.
    tail: AtomicU32,
    /// The item to run next, ahead of the ring, or null.
    runnext: AtomicPtr<T>,
    /// The ring. Slots are written by the owner only.
    buf: [AtomicPtr<T>; RUNQ_SIZE],
}

// SAFETY: the queue holds raw pointers it never dereferences; all shared
// state is atomic and the cross-thread protocol is the one in the module
// note. What the pointed-to items may do across threads is the caller's
// business (the scheduler hands a `G` to exactly one thread at a time).
unsafe impl<T> Send for RunQueue<T> {}
// SAFETY: as above; every `&self` method is either safe to call from any
// thread (`steal_into` as victim, `is_empty`, `len`) or `unsafe` with the
// owner-only contract spelled out.
unsafe impl<T> Sync for RunQueue<T> {}

impl<T> RunQueue<T> {
    /// An empty queue. Not `const`: loom atomics are built at run time.
    pub(crate) fn new() -> Self {
        RunQueue {
            head: AtomicU32::new(0),
            tail: AtomicU32::new(0),
            runnext: AtomicPtr::new(ptr::null_mut()),
            buf: std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
        }
    }

    #[inline]
    fn slot(&self, pos: u32) -> &AtomicPtr<T> {
        &self.buf[pos as usize % RUNQ_SIZE]
    }

    /// Puts `item` on the queue (Go's `runqput`).
    ///
    /// With `next`, `item` goes into `runnext` and the item it displaces (if
    /// any) goes to the tail of the ring; otherwise `item` goes to the tail.
    /// If the ring is full, half of it (`RUNQ_SIZE / 2` items, oldest first)
    /// plus the item being added are moved out and returned, for the caller
    /// to put on the global queue in one locked operation (Go's
    /// `runqputslow`). Returns `None` when everything fit.
    ///
    /// The `runnext` swap is `SeqCst`, a full barrier: the scheduler's
    /// `ready`/`newproc` path puts with `next = true` and then reads the
    /// spinning-M count to decide whether to wake an M, and a spinning M
    /// decrements that count and then re-checks the run queues
    /// ([`is_empty`](Self::is_empty), also `SeqCst`). The store of the item and
    /// the load of the count must not be reordered (StoreLoad), or both sides
    /// can miss each other and the item sits with no M to run it. The ring
    /// path (`next = false`, or the kicked runnext) publishes `tail` with a
    /// `Release` store only, exactly as Go; a caller that needs the StoreLoad
    /// ordering on that path must add its own `SeqCst` fence.
    ///
    /// # Safety
    /// Only the owner of this queue calls `put`, `push_back_batch`, `get`,
    /// `drain`, or `steal_into` with this queue as `self` (single producer);
    /// the owner may change hands only with a happens-before edge between the
    /// old and the new owner (e.g. a P handoff or P wake-up, through a lock
    /// or an atomic).
    ///
    /// The scheduler calls the two halves, [`try_put`](Self::try_put) inline
    /// and [`put_overflow`](Self::put_overflow) out of line
    /// (`localrunq::runqput`); the tests call this.
    #[cfg_attr(not(test), allow(dead_code))]
    #[must_use = "an overflow batch holds items that were taken off the queue; dropping it loses them"]
    pub(crate) unsafe fn put(&self, item: NonNull<T>, next: bool) -> Option<Overflow<T>> {
        // SAFETY: owner only, the caller's contract.
        match unsafe { self.try_put(item, next) } {
            Ok(()) => None,
            // SAFETY: as above.
            Err(item) => unsafe { self.put_overflow(item) },
        }
    }

    /// [`put`](Self::put) without the overflow: puts `item` (into `runnext`
    /// with `next`) and returns the item that found the ring full, if any
    /// (`item` itself or the kicked runnext), for
    /// [`put_overflow`](Self::put_overflow). The scheduler's hot paths call
    /// this and keep the overflow out of line, so that their stack frames
    /// (on the goroutine's own stack) do not hold an [`Overflow`] batch: a
    /// 1 KiB local in `newproc` or `ready` pushed a goroutine that spawns or
    /// wakes another into a second stack page.
    ///
    /// # Safety
    /// Owner only, as for [`put`](Self::put).
    #[inline]
    pub(crate) unsafe fn try_put(&self, item: NonNull<T>, next: bool) -> Result<(), NonNull<T>> {
        let mut item = item;
        if next {
            // SeqCst: a full barrier, see `put`'s doc comment (pairs with the
            // spinning-M protocol's SeqCst RMW/loads in the scheduler). Its
            // release half pairs with the acquire half of a thief's runnext
            // CAS in `grab` and with `is_empty`'s runnext load.
            let old = self.runnext.swap(item.as_ptr(), Ordering::SeqCst);
            match NonNull::new(old) {
                None => return Ok(()),
                // Kick the old runnext to the tail of the ring.
                Some(old) => item = old,
            }
        }
        if self.put_ring(item) {
            Ok(())
        } else {
            Err(item)
        }
    }

    /// Appends `item` at the ring's tail if the ring has room. Owner only.
    #[inline]
    fn put_ring(&self, item: NonNull<T>) -> bool {
        // Acquire: pairs with the Release head CAS of consumers (`get`,
        // `grab`, `put_slow`, `drain`), so their slot reads happen before we
        // overwrite a consumed slot below (invariant 3).
        let h = self.head.load(Ordering::Acquire);
        // Relaxed: only the owner (us) writes `tail`.
        let t = self.tail.load(Ordering::Relaxed);
        if (t.wrapping_sub(h) as usize) < RUNQ_SIZE {
            self.slot(t).store(item.as_ptr(), Ordering::Relaxed);
            // Release: publishes the slot write (and the caller's writes to
            // the item); pairs with the Acquire tail loads of thieves
            // (`grab`) and `is_empty`/`len`.
            self.tail.store(t.wrapping_add(1), Ordering::Release);
            return true;
        }
        false
    }

    /// Puts `item` at the ring's tail after [`try_put`](Self::try_put)
    /// found it full: moves half of the ring and `item` out (Go's
    /// `runqputslow`), or, if a consumer made room first, appends it.
    /// Returns the batch for the global queue, `None` if `item` fit.
    ///
    /// # Safety
    /// Owner only, as for [`put`](Self::put).
    #[must_use = "an overflow batch holds items that were taken off the queue; dropping it loses them"]
    pub(crate) unsafe fn put_overflow(&self, item: NonNull<T>) -> Option<Overflow<T>> {
        loop {
            if self.put_ring(item) {
                return None;
            }
            // Acquire / Relaxed as in `put_ring`. Only consumers move `head`,
            // and only forward: if the ring is no longer full, the next
            // `put_ring` succeeds.
            let h = self.head.load(Ordering::Acquire);
            let t = self.tail.load(Ordering::Relaxed);
            if t.wrapping_sub(h) as usize >= RUNQ_SIZE {
                if let Some(batch) = self.put_slow(item, h, t) {
                    return Some(batch);
                }
            }
        }
    }

    /// Go's `runqputslow`: the ring is full at `h..t`. Claims its older half
    /// with one CAS on `head` and returns it followed by `item`; `None` if a
    /// consumer moved `head` first (the caller retries the fast path).
    /// Owner only (reads its own slots with `Relaxed` loads).
    fn put_slow(&self, item: NonNull<T>, h: u32, t: u32) -> Option<Overflow<T>> {
        let n = t.wrapping_sub(h) / 2;
        // The owner saw `head` at `h` or later when it pushed position
        // `t - 1`, so the ring can be at most full (Go throws here too).
        assert_eq!(
            n as usize,
            RUNQ_SIZE / 2,
            "runq: put_slow on a queue that is not full"
        );
        let mut batch = Overflow::empty();
        for i in 0..n {
            batch.items[i as usize] =
                NonNull::new(self.slot(h.wrapping_add(i)).load(Ordering::Relaxed));
        }
        // Release: commits the consumption; pairs with the Acquire head loads
        // of the producer (ourselves, in the next `put`) and of thieves.
        // Failure: Relaxed, the caller reloads `head` with Acquire.
        if self
            .head
            .compare_exchange(h, h.wrapping_add(n), Ordering::Release, Ordering::Relaxed)
            .is_err()
        {
            return None;
        }
        batch.items[n as usize] = Some(item);
        batch.len = n as usize + 1;
        debug_assert!(batch.items[..batch.len].iter().all(Option::is_some));
        Some(batch)
    }

    /// Appends items from `items` to the ring until it is full or `items` is
    /// exhausted, publishing them with one `tail` store (Go's
    /// `runqputbatch`). Returns how many were taken; whatever is left in
    /// `items` (never pulled from it) is for the caller to put on the global
    /// queue. Never touches `runnext`.
    ///
    /// # Safety
    /// Owner only, as for [`put`](Self::put).
    pub(crate) unsafe fn push_back_batch(
        &self,
        items: &mut impl Iterator<Item = NonNull<T>>,
    ) -> usize {
        // Acquire: pairs with consumers' Release head CAS (invariant 3), as in
        // `put`.
        let h = self.head.load(Ordering::Acquire);
        // Relaxed: only the owner (us) writes `tail`.
        let t0 = self.tail.load(Ordering::Relaxed);
        let mut t = t0;
        while (t.wrapping_sub(h) as usize) < RUNQ_SIZE {
            let Some(item) = items.next() else { break };
            self.slot(t).store(item.as_ptr(), Ordering::Relaxed);
            t = t.wrapping_add(1);
        }
        if t != t0 {
            // Release: publishes the slot writes; pairs with the Acquire tail
            // loads of thieves (`grab`) and `is_empty`/`len`.
            self.tail.store(t, Ordering::Release);
        }
        t.wrapping_sub(t0) as usize
    }

    /// Takes the next item (Go's `runqget`): `runnext` first, returned with
    /// `inherit_time = true` (it runs in the current time slice), else the
    /// head of the ring with `false`. `None` if both are empty.
    ///
    /// # Safety
    /// Owner only, as for [`put`](Self::put). (A non-owner would read `tail`
    /// and the slots without synchronizing with the producer.)
    pub(crate) unsafe fn get(&self) -> Option<(NonNull<T>, bool)> {
        // Relaxed: only a hint; the CAS below validates it. Only the owner
        // (us) stores a non-null runnext, so this is never stale in a way
        // that matters.
        let next = self.runnext.load(Ordering::Relaxed);
        if let Some(item) = NonNull::new(next) {
            // SeqCst like Go's runnext cas (a full barrier). Success pairs
            // with a thief's runnext CAS (only one of them takes the item) and
            // with `is_empty`'s runnext load: the ring `tail` store of an
            // earlier `put` that kicked an item out of runnext happens-before
            // whoever sees this null. If it fails, a thief took runnext.
            if self
                .runnext
                .compare_exchange(next, ptr::null_mut(), Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
            {
                return Some((item, true));
            }
        }
        loop {
            // Acquire: pairs with the Release head CAS of other consumers.
            let h = self.head.load(Ordering::Acquire);
            // Relaxed: only the owner (us) writes `tail`.
            let t = self.tail.load(Ordering::Relaxed);
            if t == h {
                return None;
            }
            // Relaxed: our own write (invariant 1); validated by the CAS.
            let item = self.slot(h).load(Ordering::Relaxed);
            // Release: commits the consumption; pairs with the producer's
            // Acquire head load in `put_ring` (invariant 3). Failure: Relaxed, we
            // reload with Acquire.
            if self
                .head
                .compare_exchange(h, h.wrapping_add(1), Ordering::Release, Ordering::Relaxed)
                .is_ok()
            {
                return Some((
                    NonNull::new(item).expect("runq: claimed an empty slot"),
                    false,
                ));
            }
        }
    }

    /// The item the ring would give next, without taking it: a hint for
    /// prefetching (a thief may take it meanwhile). Skips `runnext`.
    ///
    /// # Safety
    /// Only the owner may call this (it reads `tail` without
    /// synchronization, as [`get`](Self::get) does).
    #[cfg(not(loom))]
    #[inline]
    pub(crate) unsafe fn peek(&self) -> Option<NonNull<T>> {
        // Relaxed: a hint; only the owner writes `tail`.
        let h = self.head.load(Ordering::Relaxed);
        let t = self.tail.load(Ordering::Relaxed);
        if t == h {
            return None;
        }
        NonNull::new(self.slot(h).load(Ordering::Relaxed))
    }

    /// The ring's position of the item it would give next, and up to `N`
    /// items from there, without taking them (`None` past the tail): a hint
    /// for prefetching, as [`peek`](Self::peek). Skips `runnext`.
    ///
    /// # Safety
    /// As [`peek`](Self::peek): only the owner may call this.
    #[cfg(not(loom))]
    #[inline]
    pub(crate) unsafe fn peek_n<const N: usize>(&self) -> (u32, [Option<NonNull<T>>; N]) {
        // Relaxed: a hint; only the owner writes `tail`, and the slots in
        // `[head, tail)` hold items it put (a thief may take them meanwhile).
        let h = self.head.load(Ordering::Relaxed);
        let t = self.tail.load(Ordering::Relaxed);
        let n = (t.wrapping_sub(h) as usize).min(N);
        let mut out = [None; N];
        for (i, o) in out.iter_mut().enumerate().take(n) {
            *o = NonNull::new(self.slot(h.wrapping_add(i as u32)).load(Ordering::Relaxed));
        }
        (h, out)
    }

    /// Steals about half of `victim`'s ring (`n - n / 2` of its `n` items,
    /// oldest first) into this queue's ring (Go's `runqsteal`), and returns
    /// the last one stolen for the caller to run now; the others are
    /// published at this queue's tail. `None` if there was nothing to steal.
    ///
    /// With `steal_runnext` (Go: the last of the stealing rounds), if the
    /// victim's ring is empty but its `runnext` is set, take `runnext`
    /// instead. Before that, if `victim_running()` says the victim's P is
    /// running, wait ~3 µs: the victim has most likely just readied that item
    /// and is about to block and run it itself, and stealing it would bounce
    /// it between Ps. (The scheduler's form,
    /// [`steal_into_counted`](Self::steal_into_counted), also leaves
    /// `runnext` alone if the victim ran an item from it during that wait.)
    ///
    /// # Safety
    /// The caller owns `self` (see [`put`](Self::put)), and `self`'s ring
    /// holds at most `RUNQ_SIZE / 2` items; it is empty in the scheduler,
    /// which only steals after its own `get` came back empty. `victim` may be
    /// any other queue.
    #[must_use = "the returned item was taken off the victim's queue; dropping it loses it"]
    #[allow(dead_code)] // the scheduler uses the counted form; the tests this one
    pub(crate) unsafe fn steal_into(
        &self,
        victim: &RunQueue<T>,
        steal_runnext: bool,
        victim_running: impl Fn() -> bool,
    ) -> Option<NonNull<T>> {
        // SAFETY: the caller's contract is ours.
        unsafe { self.steal_into_counted(victim, steal_runnext, || victim_running().then_some(0)) }
            .map(|(g, _)| g)
    }

    /// [`steal_into`](Self::steal_into), also returning how many items were
    /// taken (the returned one included), for statistics and traces.
    ///
    /// `victim_busy()` is `None` while the victim's P is not running, and
    /// otherwise a count that the victim's owner advances each time it runs
    /// an item from its `runnext` (the scheduler passes the P's
    /// `runnext_hits`). If the count moved during the grace wait before
    /// taking `runnext`, the victim is handing goroutines over through
    /// `runnext` (the two of a channel ping-pong, each readying the other and
    /// blocking), and the item there now is a fresh one it is about to run,
    /// even when it is the same G as before the wait: Go's compare-and-swap
    /// on the pointer alone takes it, which splits the pair across Ps every
    /// grace period (about 55 us). It is left, and a later round looks again.
    /// A victim that readied an item and then kept running its own goroutine
    /// does not move the count, and loses the item after the wait, as in Go.
    ///
    /// # Safety
    /// As for [`steal_into`](Self::steal_into).
    #[must_use = "the returned item was taken off the victim's queue; dropping it loses it"]
    pub(crate) unsafe fn steal_into_counted(
        &self,
        victim: &RunQueue<T>,
        steal_runnext: bool,
        victim_busy: impl Fn() -> Option<u64>,
    ) -> Option<(NonNull<T>, u32)> {
        debug_assert!(!ptr::eq(self, victim), "runq: stealing from itself");
        // Relaxed: only the owner (us) writes our `tail`.
        let t = self.tail.load(Ordering::Relaxed);
        // Acquire: pairs with the Release head CAS of our own thieves, so
        // their reads of the slots `grab` is about to overwrite happen before
        // those writes (invariant 3).
        let h = self.head.load(Ordering::Acquire);
        // Go checks this after the copy (and throws); checking first means a
        // broken contract never clobbers live items.
        assert!(
            t.wrapping_sub(h) as usize <= RUNQ_SIZE / 2,
            "runq: steal_into a ring more than half full"
        );
        // SAFETY: we own `self` and, as just checked, its ring holds at most
        // `RUNQ_SIZE / 2` items, so positions `t .. t + RUNQ_SIZE / 2` are
        // free and their previous contents were consumed before `h`.
        let n = unsafe { victim.grab(self, t, steal_runnext, &victim_busy) };
        if n == 0 {
            return None;
        }
        let taken = n;
        let n = n - 1;
        // Relaxed: written by us in `grab`.
        let item = self.slot(t.wrapping_add(n)).load(Ordering::Relaxed);
        let item = NonNull::new(item).expect("runq: stole an empty slot");
        if n == 0 {
            return Some((item, taken));
        }
        // At most half full plus fewer than half stolen: no overflow.
        debug_assert!((t.wrapping_sub(h).wrapping_add(n) as usize) < RUNQ_SIZE);
        // Release: publishes the stolen items copied into our slots; pairs
        // with the Acquire tail loads of our thieves and `is_empty`/`len`.
        self.tail.store(t.wrapping_add(n), Ordering::Release);
        Some((item, taken))
    }

    /// Go's `runqgrab`: claims `n - n / 2` items of this (victim) queue's ring
    /// and copies them into `dst`'s slots at positions `dst_tail..`, or the
    /// victim's runnext if allowed and the ring is empty. Returns how many
    /// were copied (0 if none).
    ///
    /// # Safety
    /// The caller owns `dst`, and `dst`'s positions `dst_tail ..
    /// dst_tail + RUNQ_SIZE / 2` are free (beyond its `tail`, not live).
    unsafe fn grab(
        &self,
        dst: &RunQueue<T>,
        dst_tail: u32,
        steal_runnext: bool,
        victim_busy: &impl Fn() -> Option<u64>,
    ) -> u32 {
        loop {
            // Acquire: pairs with the Release head CAS of other consumers; a
            // head value implies the tail it was claimed under is visible.
            let h = self.head.load(Ordering::Acquire);
            // Acquire: pairs with the owner's Release tail store in `put_ring`,
            // `push_back_batch`, `steal_into`: the slots up to `t` are
            // visible (invariant 4).
            let t = self.tail.load(Ordering::Acquire);
            let n = t.wrapping_sub(h);
            let n = n - n / 2;
            if n == 0 {
                if !steal_runnext {
                    return 0;
                }
                // Relaxed: only a hint; the CAS below validates it.
                let next = self.runnext.load(Ordering::Relaxed);
                if next.is_null() {
                    return 0;
                }
                if let Some(handoffs) = victim_busy() {
                    runnext_grace_period();
                    // The victim ran runnext meanwhile: what is there now is
                    // a fresh handoff (`steal_into_counted`). Leave it.
                    if victim_busy().is_some_and(|now| now != handoffs) {
                        return 0;
                    }
                }
                // SeqCst like Go's runnext cas. Its acquire half pairs with
                // the owner's SeqCst swap in `try_put` (the item's contents are
                // visible to us); against the owner's `get` CAS exactly one
                // wins. Failure: Relaxed, we start over.
                if self
                    .runnext
                    .compare_exchange(next, ptr::null_mut(), Ordering::SeqCst, Ordering::Relaxed)
                    .is_err()
                {
                    continue;
                }
                dst.slot(dst_tail).store(next, Ordering::Relaxed);
                return 1;
            }
            if n as usize > RUNQ_SIZE / 2 {
                // `h` and `t` were read at different times; try again.
                continue;
            }
            for i in 0..n {
                // Relaxed: racy read, validated by the CAS below (module note).
                let item = self.slot(h.wrapping_add(i)).load(Ordering::Relaxed);
                // Relaxed: published later by `steal_into`'s Release tail store.
                dst.slot(dst_tail.wrapping_add(i))
                    .store(item, Ordering::Relaxed);
            }
            // Release: commits the consumption; pairs with the victim owner's
            // Acquire head load in `put_ring` (invariant 3). Failure: Relaxed, we
            // reload with Acquire.
            if self
                .head
                .compare_exchange(h, h.wrapping_add(n), Ordering::Release, Ordering::Relaxed)
                .is_ok()
            {
                return n;
            }
        }
    }

    /// Whether the queue is empty (Go's `runqempty`): ring empty and no
    /// `runnext`.
    ///
    /// A concurrent `put(b, next = true)` kicking `a` from `runnext` to the
    /// ring, followed by a `get` taking `b`, never makes a queue that held
    /// `a` throughout look empty: `tail` is read again after `runnext`, and
    /// if it moved the snapshot is retried.
    ///
    /// All loads are `SeqCst`: the scheduler's spinning-M protocol (decrement
    /// the spinning count, then re-check every run queue) relies on them
    /// pairing with `put`'s `SeqCst` runnext swap as a Dekker-style handshake.
    /// Whether `runnext` holds an item (a hint: a thief may take it).
    #[cfg_attr(loom, allow(dead_code))]
    #[inline]
    pub(crate) fn has_next(&self) -> bool {
        // Relaxed: a hint; its reader acts on `get`'s CAS.
        !self.runnext.load(Ordering::Relaxed).is_null()
    }

    pub(crate) fn is_empty(&self) -> bool {
        loop {
            // SeqCst (acquire half): pairs with the Release head CAS of
            // consumers, so the tail that head was claimed under is visible
            // to the next load.
            let head = self.head.load(Ordering::SeqCst);
            // SeqCst (acquire half): pairs with the owner's Release tail
            // stores.
            let tail = self.tail.load(Ordering::SeqCst);
            // SeqCst: pairs with `put`'s SeqCst swap (see above) and with the
            // SeqCst runnext CAS of `get`/`grab`/`drain`: if we see the null
            // an owner's `get` left, the `tail` store of the `put` that kicked
            // the old runnext into the ring is visible to the re-read below.
            let runnext = self.runnext.load(Ordering::SeqCst);
            // SeqCst (acquire half): pairs with the owner's Release tail
            // stores.
            if self.tail.load(Ordering::SeqCst) == tail {
                return head == tail && runnext.is_null();
            }
        }
    }

    /// Number of queued items, ring plus `runnext`. Approximate while the
    /// queue is in use (for statistics and heuristics only).
    #[allow(dead_code)] // read by schedtrace and stats
    pub(crate) fn len(&self) -> usize {
        // Acquire: pairs with the Release head CAS of consumers, so the tail
        // load below is at least the tail the head was claimed under.
        let h = self.head.load(Ordering::Acquire);
        // Acquire: pairs with the owner's Release tail stores.
        let t = self.tail.load(Ordering::Acquire);
        let ring = (t.wrapping_sub(h) as usize).min(RUNQ_SIZE);
        // Relaxed: a snapshot for statistics.
        ring + usize::from(!self.runnext.load(Ordering::Relaxed).is_null())
    }

    /// Free slots in the ring (`runnext` not counted). Exact for the owner
    /// but for thieves, who only shrink the ring, so never too large.
    ///
    /// # Safety
    /// Owner only, as for [`put`](Self::put).
    pub(crate) unsafe fn room(&self) -> usize {
        // Acquire: pairs with consumers' Release head CAS, as in `put`.
        let h = self.head.load(Ordering::Acquire);
        // Relaxed: only the owner (us) writes `tail`.
        let t = self.tail.load(Ordering::Relaxed);
        RUNQ_SIZE.saturating_sub(t.wrapping_sub(h) as usize)
    }

    /// Takes everything off the queue, `runnext` first, then the ring oldest
    /// first, calling `f` on each item (Go's `runqdrain`; for moving a
    /// destroyed P's work to the global queue). Thieves may still take items
    /// concurrently; each item goes to exactly one of them or `f`.
    ///
    /// # Safety
    /// Owner only, as for [`put`](Self::put).
    pub(crate) unsafe fn drain(&self, mut f: impl FnMut(NonNull<T>)) {
        // Relaxed: only a hint; the CAS validates it.
        let next = self.runnext.load(Ordering::Relaxed);
        if let Some(item) = NonNull::new(next) {
            // SeqCst like `get`'s runnext CAS (pairs with thieves' runnext
            // CAS and `is_empty`). If it fails, a thief took runnext.
            if self
                .runnext
                .compare_exchange(next, ptr::null_mut(), Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
            {
                f(item);
            }
        }
        let mut batch = [ptr::null_mut::<T>(); RUNQ_SIZE];
        loop {
            // Acquire: pairs with the Release head CAS of other consumers.
            let h = self.head.load(Ordering::Acquire);
            // Relaxed: only the owner (us) writes `tail`.
            let t = self.tail.load(Ordering::Relaxed);
            let n = t.wrapping_sub(h) as usize;
            if n == 0 {
                return;
            }
            if n > RUNQ_SIZE {
                // Cannot happen for the owner; retry like Go does.
                continue;
            }
            for (i, out) in batch[..n].iter_mut().enumerate() {
                // Relaxed: our own writes (invariant 1); validated by the CAS.
                *out = self.slot(h.wrapping_add(i as u32)).load(Ordering::Relaxed);
            }
            // Release: commits the consumption; pairs with the Acquire head
            // loads in `put` and of thieves. Failure: Relaxed, we reload.
            if self
                .head
                .compare_exchange(h, t, Ordering::Release, Ordering::Relaxed)
                .is_ok()
            {
                for &item in &batch[..n] {
                    f(NonNull::new(item).expect("runq: drained an empty slot"));
                }
                return;
            }
        }
    }
}

impl<T> fmt::Debug for RunQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunQueue")
            // Relaxed: a diagnostic snapshot.
            .field("head", &self.head.load(Ordering::Relaxed))
            // Relaxed: a diagnostic snapshot.
            .field("tail", &self.tail.load(Ordering::Relaxed))
            // Relaxed: a diagnostic snapshot.
            .field("runnext", &self.runnext.load(Ordering::Relaxed))
            .finish()
    }
}

/// What a thief asks to sleep before taking a running P's `runnext` (Go's
/// `usleep(3)` in runqgrab).
#[cfg(not(loom))]
const RUNNEXT_GRACE: std::time::Duration = std::time::Duration::from_micros(3);

/// The wait before stealing a running P's `runnext`: a real sleep, as Go's.
///
/// The kernel's timer slack (50 us by default for a normal thread) makes the
/// 3 us asked for about 55 us, and that length is what the wait is for:
/// - the victim usually runs the G itself meanwhile (a G that readies
///   another and then blocks: every handoff through a channel), so the pair
///   stays on its P and its cache;
/// - the thief gives its CPU away instead of polling the victim's queue;
/// - it still counts as spinning, so the submitters' `wakep`s meanwhile
///   wake no more Ms (each one a futex wake on the submitter's own path).
///
/// This was a 3 us spin on the clock before, which on a 16-core machine
/// made a thief steal the runnext of a victim about to run it (a steal, an
/// M park and an M wake-up per item for fanout64, and a slower pingpong at
/// every GOMAXPROCS from 2 to 16); a spin that polled the victim's queue
/// was worse still. The figures: docs/bench/history.md, 2026-11-27 third
/// stop.
#[cfg(not(loom))]
fn runnext_grace_period() {
    std::thread::sleep(RUNNEXT_GRACE);
}

#[cfg(loom)]
fn runnext_grace_period() {
    crate::loom::thread::yield_now();
}

/// Items moved out of a full ring by [`RunQueue::put`], in FIFO order: the
/// displaced ring items oldest first, then the item being put. Iterate it
/// (it is an [`Iterator`]) to move them to the global queue.
#[must_use = "an overflow batch holds items that were taken off the queue; dropping it loses them"]
pub(crate) struct Overflow<T> {
    items: [Option<NonNull<T>>; OVERFLOW_LEN],
    /// Items in `items[pos..len]` are still to be yielded.
    pos: usize,
    len: usize,
}

impl<T> Overflow<T> {
    fn empty() -> Self {
        Overflow {
            items: [None; OVERFLOW_LEN],
            pos: 0,
            len: 0,
        }
    }
}

impl<T> Iterator for Overflow<T> {
    type Item = NonNull<T>;

    fn next(&mut self) -> Option<NonNull<T>> {
        if self.pos == self.len {
            return None;
        }
        let item = self.items[self.pos].take();
        self.pos += 1;
        item
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.len - self.pos;
        (n, Some(n))
    }
}

impl<T> ExactSizeIterator for Overflow<T> {}

impl<T> fmt::Debug for Overflow<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(&self.items[self.pos..self.len])
            .finish()
    }
}

/// Test items: fake, never-dereferenced addresses that encode an index.
#[cfg(test)]
fn item(i: usize) -> NonNull<u64> {
    NonNull::new(((i + 1) * 8) as *mut u64).expect("nonzero address")
}

/// The index encoded by [`item`].
#[cfg(test)]
fn index(p: NonNull<u64>) -> usize {
    p.as_ptr() as usize / 8 - 1
}

#[cfg(all(test, not(loom)))]
mod tests;

#[cfg(all(test, loom))]
mod loom_tests;
