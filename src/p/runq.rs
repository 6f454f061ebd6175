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
    /// (`globrunq::runqput`); the tests call this.
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
/// This was a 3 us spin on the clock before. On a 16-core machine that cost
/// fanout64 (1 producer, 64 workers) 2.5x at GOMAXPROCS 8: 0.73 steals,
/// 0.09 M parks and 0.09 M wake-ups per item, against 0.035 / 0.002 / 0.002
/// with the sleep; and pingpong 1.4x at every GOMAXPROCS from 2 to 16. A
/// 50 us spin that polled the victim's queue was worse still
/// (BENCHMARKS.md, 2026-11-27 third stop).
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
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering::*};
    use std::thread;
    use std::time::{Duration, Instant};

    type Q = RunQueue<u64>;

    /// # Safety
    /// The caller owns `q`.
    unsafe fn put_fits(q: &Q, i: usize, next: bool) {
        // SAFETY: the caller owns `q`.
        let overflow = unsafe { q.put(item(i), next) };
        assert!(overflow.is_none(), "unexpected overflow");
    }

    /// # Safety
    /// The caller owns `q`.
    unsafe fn get_index(q: &Q) -> Option<usize> {
        // SAFETY: the caller owns `q`.
        unsafe { q.get() }.map(|(p, _)| index(p))
    }

    /// Spins (then yields) until `cond` holds; panics if another thread of
    /// the test panicked (`aborted`), so a failure never hangs the test.
    fn spin_until(aborted: &AtomicBool, mut cond: impl FnMut() -> bool) {
        let mut spins = 0u32;
        while !cond() {
            assert!(
                !aborted.load(Acquire),
                "another thread of this test panicked"
            );
            if spins < 64 {
                std::hint::spin_loop();
                spins += 1;
            } else {
                thread::yield_now();
            }
        }
    }

    /// Sets its flag if dropped during a panic, telling the other threads of
    /// a test to stop waiting for this one.
    struct SetOnPanic<'a>(&'a AtomicBool);

    impl Drop for SetOnPanic<'_> {
        fn drop(&mut self) {
            if thread::panicking() {
                self.0.store(true, Release);
            }
        }
    }

    /// Go's TestSchedLocalQueue.
    #[test]
    fn sched_local_queue() {
        let q = Q::new();
        for i in 0..RUNQ_SIZE {
            // SAFETY: this thread owns `q` throughout.
            unsafe {
                assert_eq!(get_index(&q), None, "not empty initially");
                assert!(q.is_empty());
                for j in 0..i {
                    put_fits(&q, j, false);
                }
                assert_eq!(q.len(), i);
                assert_eq!(q.is_empty(), i == 0);
                for j in 0..i {
                    assert_eq!(get_index(&q), Some(j), "bad element");
                }
                assert_eq!(get_index(&q), None, "not empty afterwards");
            }
            assert!(q.is_empty());
        }
    }

    #[test]
    fn runnext_is_lifo_and_inherits_time() {
        let q = Q::new();
        // SAFETY: this thread owns `q` throughout.
        unsafe {
            put_fits(&q, 1, false);
            put_fits(&q, 2, true);
            put_fits(&q, 3, true); // kicks 2 to the ring, behind 1
            assert_eq!(q.len(), 3);
            assert_eq!(q.get(), Some((item(3), true)));
            assert_eq!(q.get(), Some((item(1), false)));
            assert_eq!(q.get(), Some((item(2), false)));
            assert_eq!(q.get(), None);

            // G a readies G b, both through runnext, with an empty ring: b
            // runs next and inherits the slice; a, kicked to the ring, runs
            // after it in a slice of its own.
            put_fits(&q, 10, true);
            put_fits(&q, 11, true);
            assert_eq!(q.get(), Some((item(11), true)));
            assert_eq!(q.get(), Some((item(10), false)));
            assert_eq!(q.get(), None);
        }
        assert!(q.is_empty());
    }

    #[test]
    fn peek_shows_the_ring_item_next_without_taking_it() {
        let q = Q::new();
        // SAFETY: this thread owns `q` throughout.
        unsafe {
            assert_eq!(q.peek(), None);
            put_fits(&q, 1, true); // runnext only: the ring is empty
            assert_eq!(q.peek(), None);
            put_fits(&q, 2, false);
            put_fits(&q, 3, false);
            assert_eq!(q.peek(), Some(item(2)));
            assert_eq!(q.len(), 3);
            assert_eq!(q.get(), Some((item(1), true)));
            assert_eq!(q.peek(), Some(item(2)));
            assert_eq!(q.get(), Some((item(2), false)));
            assert_eq!(q.peek(), Some(item(3)));
            assert_eq!(q.get(), Some((item(3), false)));
            assert_eq!(q.peek(), None);
        }
    }

    #[test]
    fn peek_n_shows_the_ring_items_next_and_the_head() {
        let q = Q::new();
        // SAFETY: this thread owns `q` throughout.
        unsafe {
            assert_eq!(q.peek_n::<3>(), (0, [None; 3]));
            put_fits(&q, 1, true); // runnext only: the ring is empty
            assert_eq!(q.peek_n::<3>(), (0, [None; 3]));
            for i in 2..=5 {
                put_fits(&q, i, false);
            }
            assert_eq!(
                q.peek_n::<3>(),
                (0, [Some(item(2)), Some(item(3)), Some(item(4))])
            );
            assert_eq!(q.get(), Some((item(1), true)));
            assert_eq!(q.get(), Some((item(2), false)));
            assert_eq!(q.get(), Some((item(3), false)));
            assert_eq!(q.peek_n::<3>(), (2, [Some(item(4)), Some(item(5)), None]));
            assert_eq!(q.len(), 2);
        }
    }

    /// Go's TestSchedLocalQueueSteal.
    #[test]
    fn sched_local_queue_steal() {
        let p1 = Q::new();
        let p2 = Q::new();
        let mut seen = vec![0u32; RUNQ_SIZE];
        for i in 0..RUNQ_SIZE {
            seen[..i].fill(0);
            // SAFETY: this thread owns both queues; p2's ring is empty.
            unsafe {
                for j in 0..i {
                    put_fits(&p1, j, false);
                }
                let mut stolen = 0;
                if let Some(p) = p2.steal_into(&p1, true, || true) {
                    stolen += 1;
                    seen[index(p)] += 1;
                }
                while let Some(j) = get_index(&p2) {
                    stolen += 1;
                    seen[j] += 1;
                }
                while let Some(j) = get_index(&p1) {
                    seen[j] += 1;
                }
                assert!(seen[..i].iter().all(|&s| s == 1), "i={i}: {seen:?}");
                assert!(
                    stolen == i / 2 || stolen == i / 2 + 1,
                    "i={i}: stole {stolen}"
                );
            }
        }
    }

    #[test]
    fn steal_keeps_order_and_takes_runnext_only_when_ring_empty() {
        let p1 = Q::new();
        let p2 = Q::new();
        // SAFETY: this thread owns both queues; p2's ring is empty at each steal.
        unsafe {
            for j in 0..5 {
                put_fits(&p1, j, false);
            }
            put_fits(&p1, 99, true);
            // 5 in the ring: steal 3 (0, 1, 2); 2 is returned, 0 and 1 queued.
            assert_eq!(p2.steal_into(&p1, true, || false), Some(item(2)));
            assert_eq!(get_index(&p2), Some(0));
            assert_eq!(get_index(&p2), Some(1));
            assert_eq!(get_index(&p2), None);
            // 2 left: steal 1.
            assert_eq!(p2.steal_into(&p1, true, || false), Some(item(3)));
            assert_eq!(p2.steal_into(&p1, true, || false), Some(item(4)));
            // Ring empty: runnext only if allowed.
            assert_eq!(p2.steal_into(&p1, false, || false), None);
            assert!(!p1.is_empty());
            let start = Instant::now();
            assert_eq!(p2.steal_into(&p1, true, || true), Some(item(99)));
            assert!(start.elapsed() >= Duration::from_micros(3));
            assert!(p1.is_empty());
            assert_eq!(p2.steal_into(&p1, true, || true), None);
        }
    }

    // A thief that waits to take a running victim's runnext leaves it if the
    // victim ran an item from runnext meanwhile (a fresh handoff, maybe of
    // the same G), and takes it if the count stood still.
    #[test]
    fn runnext_left_to_a_victim_that_hands_over_meanwhile() {
        use std::cell::Cell;
        let p1 = Q::new();
        let p2 = Q::new();
        // SAFETY: this thread owns both queues; p2's ring is empty at each steal.
        unsafe {
            put_fits(&p1, 7, true);
            // The count moves between the looks before and after the wait.
            let handoffs = Cell::new(0u64);
            let moving = || {
                handoffs.set(handoffs.get() + 1);
                Some(handoffs.get())
            };
            assert_eq!(p2.steal_into_counted(&p1, true, moving), None);
            assert_eq!(handoffs.get(), 2, "looked before and after the wait");
            assert!(!p1.is_empty(), "runnext left to its owner");
            // The victim stopped running during the wait: take it.
            let running = Cell::new(true);
            let stops = || running.replace(false).then_some(5);
            let got = p2
                .steal_into_counted(&p1, true, stops)
                .map(|(p, n)| (index(p), n));
            assert_eq!(got, Some((7, 1)));
            // A count that stands still: the victim kept running its own
            // goroutine, and the readied one is taken after the wait.
            put_fits(&p1, 8, true);
            let got = p2
                .steal_into_counted(&p1, true, || Some(5))
                .map(|(p, n)| (index(p), n));
            assert_eq!(got, Some((8, 1)));
            assert!(p1.is_empty());
        }
    }

    #[test]
    fn overflow_moves_half_plus_new_item_in_fifo_order() {
        let q = Q::new();
        // SAFETY: this thread owns `q` throughout.
        unsafe {
            for j in 0..RUNQ_SIZE {
                put_fits(&q, j, false);
            }
            let batch = q.put(item(RUNQ_SIZE), false).expect("ring full");
            assert_eq!(batch.len(), RUNQ_SIZE / 2 + 1);
            let got: Vec<usize> = batch.map(index).collect();
            let want: Vec<usize> = (0..RUNQ_SIZE / 2).chain([RUNQ_SIZE]).collect();
            assert_eq!(got, want);
            assert_eq!(q.len(), RUNQ_SIZE / 2);
            for j in RUNQ_SIZE / 2..RUNQ_SIZE {
                assert_eq!(get_index(&q), Some(j));
            }
            assert_eq!(get_index(&q), None);

            // Overflow through a runnext kick: the kicked item ends the batch.
            for j in 0..RUNQ_SIZE {
                put_fits(&q, j, false);
            }
            put_fits(&q, 1000, true);
            let batch = q.put(item(1001), true).expect("ring full");
            let got: Vec<usize> = batch.map(index).collect();
            let want: Vec<usize> = (0..RUNQ_SIZE / 2).chain([1000]).collect();
            assert_eq!(got, want);
            assert_eq!(q.get(), Some((item(1001), true)));
            for j in RUNQ_SIZE / 2..RUNQ_SIZE {
                assert_eq!(get_index(&q), Some(j));
            }
            assert_eq!(get_index(&q), None);

            // Many laps with the counters wrapping far away from zero is
            // covered by the stress test; here, many overflows in a row.
            let mut next_in = 0;
            let mut out = Vec::new();
            for _ in 0..10 * RUNQ_SIZE {
                if let Some(batch) = q.put(item(next_in), false) {
                    out.extend(batch.map(index));
                }
                next_in += 1;
            }
            q.drain(|p| out.push(index(p)));
            out.sort_unstable();
            assert_eq!(out, (0..next_in).collect::<Vec<_>>());
        }
    }

    #[test]
    fn counters_wrap() {
        let q = Q::new();
        let start = u32::MAX - 3;
        q.head.store(start, Relaxed);
        q.tail.store(start, Relaxed);
        let p2 = Q::new();
        // SAFETY: this thread owns both queues.
        unsafe {
            for j in 0..RUNQ_SIZE {
                put_fits(&q, j, false);
            }
            assert_eq!(q.len(), RUNQ_SIZE);
            let batch = q.put(item(RUNQ_SIZE), false).expect("ring full");
            assert_eq!(batch.len(), RUNQ_SIZE / 2 + 1);
            assert_eq!(
                p2.steal_into(&q, false, || false),
                Some(item(RUNQ_SIZE / 2 + RUNQ_SIZE / 4 - 1))
            );
            assert_eq!(get_index(&q), Some(RUNQ_SIZE / 2 + RUNQ_SIZE / 4));
        }
    }

    #[test]
    fn drain_push_back_batch_and_len() {
        let q = Q::new();
        // SAFETY: this thread owns `q`.
        unsafe {
            let mut src = (0..RUNQ_SIZE + 10).map(item);
            assert_eq!(q.push_back_batch(&mut src), RUNQ_SIZE);
            assert_eq!(
                src.next(),
                Some(item(RUNQ_SIZE)),
                "left-over items stay in the iterator"
            );
            assert_eq!(q.len(), RUNQ_SIZE);
            assert_eq!(q.push_back_batch(&mut src), 0);
            assert_eq!(get_index(&q), Some(0));
            assert_eq!(q.push_back_batch(&mut src), 1);
            assert_eq!(src.next(), Some(item(RUNQ_SIZE + 2)));
            put_fits(&q, 5000, true);
            assert_eq!(q.len(), RUNQ_SIZE + 1);
            let mut out = Vec::new();
            q.drain(|p| out.push(index(p)));
            let want: Vec<usize> = [5000]
                .into_iter()
                .chain(1..RUNQ_SIZE)
                .chain([RUNQ_SIZE + 1])
                .collect();
            assert_eq!(out, want);
            assert!(q.is_empty());
            assert_eq!(q.len(), 0);
            q.drain(|_| panic!("queue is empty"));
        }
    }

    /// Go's TestSchedLocalQueueEmpty (`RunSchedLocalQueueEmptyTest`): a queue
    /// that holds at least one item throughout, while the owner puts one and
    /// gets one, must never look empty. With a thief (which steals in every
    /// third round and checks emptiness in the others), it may only look
    /// empty in a round in which the thief stole something.
    fn run_empty_test(with_thief: bool, max_rounds: u32, max_time: Duration) {
        let q = Q::new();
        let thief_q = Q::new();
        let helpers = 1 + u32::from(with_thief);
        let participants = helpers + 1;
        // Round number published by the owner; 0 before the first, STOP at the end.
        const STOP: u32 = u32::MAX;
        let round = AtomicU32::new(0);
        let arrived = AtomicU32::new(0);
        let finished = AtomicU32::new(0);
        let saw_empty = AtomicBool::new(false);
        let stolen = AtomicU32::new(0);
        let aborted = AtomicBool::new(false);
        let arrive = |r: u32| {
            arrived.fetch_add(1, AcqRel);
            spin_until(&aborted, || arrived.load(Acquire) >= participants * r);
        };
        let wait_round = |r: u32| {
            spin_until(&aborted, || round.load(Acquire) >= r);
            round.load(Acquire) != STOP
        };
        thread::scope(|s| {
            s.spawn(|| {
                let _guard = SetOnPanic(&aborted);
                let mut r = 1;
                while wait_round(r) {
                    arrive(r);
                    if q.is_empty() {
                        saw_empty.store(true, Relaxed);
                    }
                    finished.fetch_add(1, Release);
                    r += 1;
                }
            });
            if with_thief {
                s.spawn(|| {
                    let _guard = SetOnPanic(&aborted);
                    let mut r = 1;
                    while wait_round(r) {
                        arrive(r);
                        if r % 3 != 0 {
                            // A second checker in two rounds out of three, so
                            // that most rounds still test emptiness strictly.
                            if q.is_empty() {
                                saw_empty.store(true, Relaxed);
                            }
                        } else {
                            let mut n = 0;
                            // SAFETY: this thread owns `thief_q`, empty at each round start.
                            unsafe {
                                if thief_q.steal_into(&q, r % 2 == 0, || r % 4 == 0).is_some() {
                                    n += 1;
                                }
                                while thief_q.get().is_some() {
                                    n += 1;
                                }
                            }
                            stolen.store(n, Relaxed);
                        }
                        finished.fetch_add(1, Release);
                        r += 1;
                    }
                });
            }
            // The owner.
            let _guard = SetOnPanic(&aborted);
            let start = Instant::now();
            let mut r = 1;
            while r <= max_rounds && start.elapsed() < max_time {
                let next0 = r & 1 == 0;
                let next1 = r & 2 == 0;
                saw_empty.store(false, Relaxed);
                stolen.store(0, Relaxed);
                let mut got = 0;
                // SAFETY: this thread owns `q`.
                unsafe {
                    put_fits(&q, 0, next0);
                    round.store(r, Release);
                    arrive(r);
                    put_fits(&q, 1, next1);
                    got += u32::from(q.get().is_some());
                    spin_until(&aborted, || finished.load(Acquire) >= helpers * r);
                    while q.get().is_some() {
                        got += 1;
                    }
                }
                let stolen = stolen.load(Relaxed);
                assert_eq!(got + stolen, 2, "round {r}: items lost or duplicated");
                assert!(
                    !saw_empty.load(Relaxed) || stolen > 0,
                    "round {r}: queue looked empty (next0={next0}, next1={next1})"
                );
                r += 1;
            }
            round.store(STOP, Release);
        });
    }

    #[test]
    fn sched_local_queue_empty() {
        run_empty_test(false, 50_000, Duration::from_millis(150));
    }

    #[test]
    fn sched_local_queue_empty_with_thief() {
        run_empty_test(true, 50_000, Duration::from_millis(150));
    }

    /// One owner putting and getting 100k items (with runnext and overflow)
    /// while two thieves steal from it and from each other: every item is
    /// taken exactly once.
    #[test]
    fn stress_owner_vs_two_thieves() {
        const ITEMS: usize = 100_000;
        let seen: Vec<AtomicU8> = (0..ITEMS).map(|_| AtomicU8::new(0)).collect();
        let mark = |p: NonNull<u64>| {
            let prev = seen[index(p)].fetch_add(1, Relaxed);
            assert_eq!(prev, 0, "item {} taken twice", index(p));
        };
        let owner_q = Q::new();
        let thief_qs = [Q::new(), Q::new()];
        let done = AtomicBool::new(false);
        // Start near the wrap so the counters cross u32::MAX during the run.
        owner_q.head.store(u32::MAX - 5000, Relaxed);
        owner_q.tail.store(u32::MAX - 5000, Relaxed);
        thread::scope(|s| {
            for k in 0..2 {
                let (me, other) = (&thief_qs[k], &thief_qs[1 - k]);
                let (owner_q, done, mark) = (&owner_q, &done, &mark);
                s.spawn(move || {
                    let mut round = 0u32;
                    loop {
                        let finished = done.load(Acquire);
                        round = round.wrapping_add(1);
                        let victim = if round % 4 == 0 { other } else { owner_q };
                        // SAFETY: this thread owns `me`, drained empty below
                        // before each steal.
                        unsafe {
                            if let Some(p) =
                                me.steal_into(victim, round % 2 == 0, || round % 16 == 0)
                            {
                                mark(p);
                            }
                            while let Some((p, _)) = me.get() {
                                mark(p);
                            }
                        }
                        if finished {
                            break;
                        }
                    }
                });
            }
            // Stops the thieves if the owner panics.
            let _guard = SetOnPanic(&done);
            let mut rng = 0x9e37_79b9_7f4a_7c15u64;
            let mut rand = move || {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng
            };
            let mut next_item = 0;
            while next_item < ITEMS {
                let burst = (rand() % 400) as usize + 1;
                for _ in 0..burst.min(ITEMS - next_item) {
                    // SAFETY: this thread owns `owner_q`.
                    if let Some(batch) = unsafe { owner_q.put(item(next_item), rand() % 4 == 0) } {
                        batch.for_each(mark);
                    }
                    next_item += 1;
                }
                for _ in 0..rand() % 400 {
                    // SAFETY: this thread owns `owner_q`.
                    match unsafe { owner_q.get() } {
                        Some((p, _)) => mark(p),
                        None => break,
                    }
                }
            }
            // SAFETY: this thread owns `owner_q`.
            unsafe { owner_q.drain(mark) };
            done.store(true, Release);
        });
        assert!(owner_q.is_empty() && thief_qs.iter().all(Q::is_empty));
        let missing: Vec<usize> = (0..ITEMS).filter(|&i| seen[i].load(Relaxed) != 1).collect();
        assert!(
            missing.is_empty(),
            "{} items not taken exactly once: {:?}",
            missing.len(),
            &missing[..missing.len().min(20)]
        );
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Loom models (`RUSTFLAGS="--cfg loom" cargo test --release --lib runq`).
    //! `RUNQ_SIZE` is 4 here, so a handful of items reach the full, overflow
    //! and wrap-around states. Loom explores interleavings and the weak
    //! memory behaviours it models (stale loads); it cannot produce "load
    //! buffering" (a load reading a store that comes later in the
    //! execution), so the `Acquire` that keeps the owner from overwriting a
    //! slot a thief is still reading (module note, invariant 3) is argued in
    //! the comments rather than model-checked.
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    type Q = RunQueue<u64>;

    fn check(f: impl Fn() + Sync + Send + 'static) {
        // Exhaustive (no preemption bound): these models are small enough
        // (a few hundred executions each with loom's partial-order
        // reduction). `LOOM_MAX_PREEMPTIONS=N` bounds them if they grow.
        loom::model(f);
    }

    /// # Safety
    /// The caller owns `q`.
    unsafe fn drain_indices(q: &Q, out: &mut Vec<usize>) {
        // SAFETY: the caller owns `q`.
        while let Some((p, _)) = unsafe { q.get() } {
            out.push(index(p));
        }
    }

    /// # Safety
    /// The caller owns `q`.
    unsafe fn put_collect(q: &Q, i: usize, next: bool, out: &mut Vec<usize>) {
        // SAFETY: the caller owns `q`.
        if let Some(batch) = unsafe { q.put(item(i), next) } {
            let batch: Vec<usize> = batch.map(index).collect();
            assert_eq!(batch.len(), RUNQ_SIZE / 2 + 1);
            let (last, displaced) = batch.split_last().unwrap();
            assert!(
                displaced.windows(2).all(|w| w[0] < w[1]),
                "overflow not FIFO: {batch:?}"
            );
            assert!(
                displaced.iter().all(|d| d < last),
                "overflow not FIFO: {batch:?}"
            );
            out.extend(batch);
        }
    }

    /// How a thief treats the victim's runnext.
    #[derive(Clone, Copy, Debug)]
    enum Runnext {
        /// `steal_runnext = false`.
        Leave,
        /// `steal_runnext = true`, victim not running: no grace period.
        Take,
        /// `steal_runnext = true`, victim running: the grace period, which is
        /// a `yield_now` under loom. Loom then runs the other threads before
        /// the thief again, which prunes interleavings, so the runnext models
        /// run both with and without it.
        TakeAfterGrace,
    }

    /// Spawns a thief that owns `mine` (empty) and steals once from `victim`,
    /// then takes one item from its own queue (or all, with `drain`); returns
    /// the indices it took.
    fn spawn_thief(
        mine: Arc<Q>,
        victim: &Arc<Q>,
        runnext: Runnext,
        drain: bool,
    ) -> thread::JoinHandle<Vec<usize>> {
        let victim = victim.clone();
        let steal_runnext = !matches!(runnext, Runnext::Leave);
        let running = matches!(runnext, Runnext::TakeAfterGrace);
        thread::spawn(move || {
            let mut got = Vec::new();
            // SAFETY: this thread owns `mine`, which is empty.
            unsafe {
                if let Some(p) = mine.steal_into(&victim, steal_runnext, || running) {
                    got.push(index(p));
                }
                if drain {
                    drain_indices(&mine, &mut got);
                } else if let Some((p, _)) = mine.get() {
                    got.push(index(p));
                }
            }
            got
        })
    }

    fn new_q() -> Arc<Q> {
        Arc::new(Q::new())
    }

    /// Owner puts (ring and runnext) and gets while a thief steals.
    #[test]
    fn loom_put_get_vs_steal() {
        check(|| {
            let q = new_q();
            let mut got = Vec::new();
            // SAFETY: this thread owns `q`.
            unsafe {
                put_collect(&q, 0, false, &mut got);
                put_collect(&q, 1, false, &mut got);
            }
            let thief = spawn_thief(new_q(), &q, Runnext::Leave, true);
            // SAFETY: this thread owns `q`.
            unsafe {
                put_collect(&q, 2, false, &mut got);
                put_collect(&q, 3, true, &mut got);
                for _ in 0..2 {
                    if let Some((p, _)) = q.get() {
                        got.push(index(p));
                    }
                }
            }
            got.extend(thief.join().unwrap());
            // SAFETY: this thread owns `q`.
            unsafe { drain_indices(&q, &mut got) };
            got.sort_unstable();
            assert_eq!(got, [0, 1, 2, 3]);
            assert!(q.is_empty());
        });
    }

    /// Owner overflows a full ring (directly and through a runnext kick)
    /// while a thief steals.
    #[test]
    fn loom_overflow_vs_steal() {
        check(|| {
            let q = new_q();
            let mut got = Vec::new();
            // SAFETY: this thread owns `q`.
            unsafe {
                for i in 0..RUNQ_SIZE {
                    put_collect(&q, i, false, &mut got);
                }
            }
            assert!(got.is_empty());
            let thief = spawn_thief(new_q(), &q, Runnext::Leave, true);
            let n = RUNQ_SIZE;
            // SAFETY: this thread owns `q`.
            unsafe {
                put_collect(&q, n, false, &mut got);
                put_collect(&q, n + 1, true, &mut got);
                put_collect(&q, n + 2, true, &mut got);
                if let Some((p, _)) = q.get() {
                    got.push(index(p));
                }
            }
            got.extend(thief.join().unwrap());
            // SAFETY: this thread owns `q`.
            unsafe { drain_indices(&q, &mut got) };
            got.sort_unstable();
            assert_eq!(got, (0..n + 3).collect::<Vec<_>>());
        });
    }

    /// Owner appends a batch (up to the full ring) while a thief steals.
    #[test]
    fn loom_push_back_batch_vs_steal() {
        check(|| {
            let q = new_q();
            let mut got = Vec::new();
            // SAFETY: this thread owns `q`.
            unsafe { put_collect(&q, 0, false, &mut got) };
            let thief = spawn_thief(new_q(), &q, Runnext::Leave, true);
            let mut rest = (1..=RUNQ_SIZE).map(item);
            // SAFETY: this thread owns `q`.
            let n = unsafe { q.push_back_batch(&mut rest) };
            // At least the free slots at the time the owner looked.
            assert!(n >= RUNQ_SIZE - 1);
            got.extend(rest.map(index));
            got.extend(thief.join().unwrap());
            // SAFETY: this thread owns `q`.
            unsafe { drain_indices(&q, &mut got) };
            got.sort_unstable();
            assert_eq!(got, (0..=RUNQ_SIZE).collect::<Vec<_>>());
        });
    }

    /// Two thieves (allowed to take runnext) against an owner's get.
    #[test]
    fn loom_two_thieves_vs_owner() {
        check(|| {
            let q = new_q();
            let mut got = Vec::new();
            // SAFETY: this thread owns `q`.
            unsafe {
                put_collect(&q, 0, false, &mut got);
                put_collect(&q, 1, false, &mut got);
                put_collect(&q, 2, true, &mut got);
            }
            let a = spawn_thief(new_q(), &q, Runnext::Take, true);
            let b = spawn_thief(new_q(), &q, Runnext::TakeAfterGrace, true);
            // SAFETY: this thread owns `q`.
            if let Some((p, inherit)) = unsafe { q.get() } {
                assert_eq!(inherit, index(p) == 2);
                got.push(index(p));
            }
            got.extend(a.join().unwrap());
            got.extend(b.join().unwrap());
            // SAFETY: this thread owns `q`.
            unsafe { drain_indices(&q, &mut got) };
            got.sort_unstable();
            assert_eq!(got, [0, 1, 2]);
        });
    }

    /// A thief steals from a thief that is publishing what it stole.
    #[test]
    fn loom_steal_from_thief() {
        check(|| {
            let q = new_q();
            let mut got = Vec::new();
            // SAFETY: this thread owns `q`.
            unsafe {
                for i in 0..RUNQ_SIZE {
                    put_collect(&q, i, false, &mut got);
                }
            }
            let qa = new_q();
            // A steals 2 from the owner (keeps one queued) and runs one of its own.
            let a = spawn_thief(qa.clone(), &q, Runnext::Leave, false);
            // B steals from A.
            let b = spawn_thief(new_q(), &qa, Runnext::Leave, true);
            got.extend(a.join().unwrap());
            got.extend(b.join().unwrap());
            // SAFETY: `a` has exited; its queue is ours now (join is the handoff).
            unsafe { drain_indices(&qa, &mut got) };
            // SAFETY: this thread owns `q`.
            unsafe { drain_indices(&q, &mut got) };
            got.sort_unstable();
            assert_eq!(got, (0..RUNQ_SIZE).collect::<Vec<_>>());
        });
    }

    /// A longer owner run (ring wrap-around, overflow, runnext kicks) against
    /// a thief that steals twice.
    #[test]
    fn loom_mixed_owner_vs_thief_twice() {
        check(|| {
            let q = new_q();
            let mut got = Vec::new();
            // SAFETY: this thread owns `q`.
            unsafe {
                for i in 0..3 {
                    put_collect(&q, i, false, &mut got);
                }
            }
            let victim = q.clone();
            // Not `spawn_thief`: this one steals twice.
            let thief = thread::spawn(move || {
                let mine = Q::new();
                let mut got = Vec::new();
                for _ in 0..2 {
                    // SAFETY: this thread owns `mine`, drained empty before each steal.
                    unsafe {
                        if let Some(p) = mine.steal_into(&victim, true, || false) {
                            got.push(index(p));
                        }
                        drain_indices(&mine, &mut got);
                    }
                }
                got
            });
            // SAFETY: this thread owns `q`.
            unsafe {
                put_collect(&q, 3, true, &mut got);
                put_collect(&q, 4, false, &mut got);
                if let Some((p, _)) = q.get() {
                    got.push(index(p));
                }
                put_collect(&q, 5, false, &mut got);
                put_collect(&q, 6, true, &mut got);
                if let Some((p, _)) = q.get() {
                    got.push(index(p));
                }
            }
            got.extend(thief.join().unwrap());
            // SAFETY: this thread owns `q`.
            unsafe { drain_indices(&q, &mut got) };
            got.sort_unstable();
            assert_eq!(got, (0..7).collect::<Vec<_>>());
        });
    }

    /// runnext is taken by exactly one of the owner's get and a thief.
    #[test]
    fn loom_runnext_owner_get_vs_thief() {
        for mode in [Runnext::Take, Runnext::TakeAfterGrace] {
            check(move || runnext_owner_get_vs_thief(mode));
        }
    }

    fn runnext_owner_get_vs_thief(mode: Runnext) {
        let q = new_q();
        // SAFETY: this thread owns `q`.
        unsafe { assert!(q.put(item(7), true).is_none()) };
        let thief = spawn_thief(new_q(), &q, mode, true);
        // SAFETY: this thread owns `q`.
        let mine = unsafe { q.get() };
        if let Some((p, inherit)) = mine {
            assert_eq!((index(p), inherit), (7, true));
        }
        let stolen = thief.join().unwrap();
        match mine {
            Some(_) => assert!(stolen.is_empty()),
            None => assert_eq!(stolen, [7]),
        }
        assert!(q.is_empty());
    }

    /// A put into runnext kicks the old runnext into the ring while a thief
    /// tries to take runnext.
    #[test]
    fn loom_runnext_kick_vs_thief() {
        for mode in [Runnext::Take, Runnext::TakeAfterGrace] {
            check(move || runnext_kick_vs_thief(mode));
        }
    }

    fn runnext_kick_vs_thief(mode: Runnext) {
        let q = new_q();
        // SAFETY: this thread owns `q`.
        unsafe { assert!(q.put(item(0), true).is_none()) };
        let thief = spawn_thief(new_q(), &q, mode, true);
        let mut got = Vec::new();
        // SAFETY: this thread owns `q`.
        unsafe {
            // Kicks 0 into the ring (unless the thief took it first).
            assert!(q.put(item(1), true).is_none());
            if let Some((p, _)) = q.get() {
                got.push(index(p));
            }
        }
        got.extend(thief.join().unwrap());
        // SAFETY: this thread owns `q`.
        unsafe { drain_indices(&q, &mut got) };
        got.sort_unstable();
        assert_eq!(got, [0, 1]);
    }

    /// Go's RunSchedLocalQueueEmptyTest as a model: the queue holds at least
    /// one item throughout, so `is_empty` must never say otherwise.
    #[test]
    fn loom_is_empty_never_spurious() {
        for (next0, next1) in [(false, false), (false, true), (true, false), (true, true)] {
            check(move || {
                let q = new_q();
                // SAFETY: this thread owns `q`.
                unsafe { assert!(q.put(item(0), next0).is_none()) };
                let checker = {
                    let q = q.clone();
                    thread::spawn(move || {
                        assert!(!q.is_empty(), "spuriously empty ({next0}, {next1})")
                    })
                };
                // SAFETY: this thread owns `q`.
                unsafe {
                    assert!(q.put(item(1), next1).is_none());
                    assert!(q.get().is_some());
                }
                checker.join().unwrap();
                // SAFETY: this thread owns `q`.
                unsafe {
                    assert!(q.get().is_some());
                    assert!(q.get().is_none());
                }
            });
        }
    }
}
