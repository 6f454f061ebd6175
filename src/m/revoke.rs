//! P revocation: the handshake that lets sysmon (or a stop-the-world) take
//! the P of an M whose goroutine is blocked in the kernel *outside* the
//! runtime (a `std::fs` read, a `std::sync::Mutex`, a C library call), the
//! way Go's sysmon retakes a P from an M in a system call. The policy (which
//! Ms look blocked, what happens to the P) is `runtime::retake`; this file is
//! only the race-free transfer.
//!
//! # State (one [`Revoke`] per M)
//! - `word`: a counter bumped by 1 each time the M's thread crosses between
//!   runtime code and a goroutine's own code. **Odd: runtime code** (the
//!   scheduler loop on g0, the body of any runtime call); **even: the
//!   goroutine's own code**, during which the runtime is not touched. Each
//!   value names one *stretch*. Written by the M's own thread only, with
//!   plain stores (`leave`'s is a Release, a plain `mov` on x86-64); read
//!   by anyone.
//! - `state`: `NONE`, `PENDING` (a revoker is deciding) or `TAKEN` (the P
//!   was taken; the M has not noticed yet). `NONE -> PENDING` only by a
//!   revoker's CAS (so two revokers, sysmon and a stop-the-world, exclude
//!   each other), `PENDING -> NONE | TAKEN` by that revoker, `TAKEN -> NONE`
//!   by the M once it has let go of the P.
//!
//! # Protocol (an asymmetric Dekker handshake)
//! - **M entering the runtime** (`enter`, on every outermost runtime call):
//!   store `word` odd; compiler fence; load `state` (Acquire). `NONE`:
//!   carry on, the P is still ours. Otherwise wait until the revoker
//!   decides (`wait_decision`), and on `TAKEN` give the P up without
//!   touching it.
//! - **M leaving the runtime** (`leave`): store `word` even, with Release.
//!   From then on the thread touches no runtime state until its next
//!   `enter`.
//! - **Revoker** (`begin(seen)`, where `seen` is an even word it observed
//!   over a whole sysmon tick): CAS `state` `NONE -> PENDING`; issue a
//!   process-wide memory barrier (`membarrier`, which executes a full fence
//!   on every CPU running one of our threads); load `word`. Still `seen`:
//!   the M is in the same stretch of its goroutine's own code and cannot
//!   enter the runtime without seeing `PENDING`, so the revoker may take the
//!   P (`finish` publishes `TAKEN`). Changed: `abort` (back to `NONE`).
//!   That load is an Acquire: it reads the M's `leave`.
//!
//! # Invariants
//! 1. The M touches its P only while its word is odd and `state` was `NONE`
//!    when it made the word odd (or it has since acknowledged a decision of
//!    `NONE`).
//! 2. A revoker touches the P only between a successful `begin` and
//!    `finish`, and `begin` succeeds only if the word it loads after the
//!    barrier is the even `seen`.
//! 3. Why 1 and 2 exclude each other: the M's store of `word` and its load
//!    of `state` are ordered by the barrier the revoker runs on the M's CPU.
//!    Either the barrier comes after the M's store (the revoker's load sees
//!    the new word and aborts) or before the M's load (the M sees `PENDING`
//!    or `TAKEN` and waits). This is Dekker's pattern with the M's full
//!    fence supplied by the revoker, so the M's fast path is a plain store,
//!    a compiler fence and an acquire load (a plain load on x86-64, an
//!    `ldar` on aarch64): no locked instruction, no fence.
//! 4. The word is never the same value in two different stretches within a
//!    sysmon tick (it would take 2^31 runtime calls to wrap), so "same word
//!    twice" means "never entered the runtime in between".
//! 5. What the M did to its P before its `leave` happens-before what the
//!    revoker that takes the P then does to it (the stack cache a
//!    goroutine's exit just put a stack in, the run queue): `leave` is a
//!    Release store and the revoker's load in `begin` that reads it an
//!    Acquire. 3 is about the M's *next* entry and needs the barrier; this
//!    is about its *last* stretch and needs none. On x86-64 both are the
//!    plain `mov`s Relaxed would be, so the fast path is unchanged; what
//!    Release adds there is the compiler's ordering (a Relaxed store lets
//!    the compiler sink the M's last stores to the P below it, into the
//!    stretch where the P may be someone else's). Before it was Relaxed,
//!    the kernel's barrier ordered the M's stores on the CPU, nothing
//!    ordered them in the compiler (the x86-64 release build's code was
//!    the same either way: no store had been moved, by luck), and
//!    ThreadSanitizer, which sees no barrier, reported each stack-cache
//!    access of the next owner as a data race with the M's last ones
//!    (tests/blocking.rs).
//!
//! 6. What a revoker that aborts did with the P (`take` reads its M and
//!    status between `begin` and `abort`) happens-before the M's next use
//!    of it: `abort` is a Release store, and the M's load of `state` in
//!    `enter` an Acquire, also when it finds `NONE` and does not wait. On
//!    x86-64 a plain load is an acquire already, so this was only the
//!    compiler's to break; aarch64 reorders a plain load with later
//!    stores (docs/memory-ordering.md).
//!
//! The models in `tests` check 1-3, 5 and 6 with loom, where the barrier is
//! modelled as what it guarantees: a SeqCst fence on both sides.

use crate::loom::atomic::{AtomicU32, Ordering};

/// No revocation in progress.
const NONE: u32 = 0;
/// A revoker is deciding; the M must wait before touching its P.
const PENDING: u32 = 1;
/// The P was taken; the M must let go of it.
const TAKEN: u32 = 2;

/// The per-M handshake state (see the module note).
pub(crate) struct Revoke {
    word: AtomicU32,
    state: AtomicU32,
}

/// What [`Revoke::enter`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Entry {
    /// Already in runtime code: an inner runtime call, nothing to do.
    Nested,
    /// Entered the runtime; the P (if any) is still ours.
    Entered,
    /// Entered, but a revoker is at work: call [`Revoke::wait_decision`]
    /// before touching the P.
    Contended,
}

impl Revoke {
    /// A new M starts in runtime code (odd).
    pub(crate) fn new() -> Revoke {
        Revoke {
            word: AtomicU32::new(1),
            state: AtomicU32::new(NONE),
        }
    }

    /// The current word (any thread; a snapshot).
    #[inline]
    pub(crate) fn word(&self) -> u32 {
        self.word.load(Ordering::Relaxed)
    }

    /// Whether the M runs runtime code (own thread).
    #[inline]
    pub(crate) fn in_runtime(&self) -> bool {
        self.word.load(Ordering::Relaxed) & 1 == 1
    }

    /// A revocation is being decided or was decided and not yet noticed
    /// (any thread; a snapshot). Read by the asynchronous-preemption
    /// handler, which exists on x86-64 and aarch64 only.
    #[inline]
    #[cfg_attr(
        not(any(target_arch = "x86_64", target_arch = "aarch64")),
        allow(dead_code)
    )]
    pub(crate) fn busy(&self) -> bool {
        self.state.load(Ordering::Relaxed) != NONE
    }

    /// Own thread: enters runtime code (module note, "M entering").
    #[inline(always)]
    pub(crate) fn enter(&self) -> Entry {
        let w = self.word.load(Ordering::Relaxed);
        if w & 1 == 1 {
            return Entry::Nested;
        }
        self.publish(w.wrapping_add(1));
        if self.state_after_publish() == NONE {
            Entry::Entered
        } else {
            Entry::Contended
        }
    }

    /// Own thread: back to the goroutine's own code (module note).
    ///
    /// Release: everything the M did to its P in the stretch that ends here
    /// happens-before whatever a revoker that takes the P in the next
    /// stretch does to it (it reads this store with Acquire in `begin`).
    /// On x86-64 this is the plain `mov` a Relaxed store is; the ordering
    /// is also the compiler's: without it, a store to the P (its stack
    /// cache, its run queue) may be moved below the word's store, into
    /// the stretch where the P may already be someone else's.
    #[inline(always)]
    pub(crate) fn leave(&self) {
        let w = self.word.load(Ordering::Relaxed);
        // `| 1` first: robust if the word is already even (never expected).
        self.word.store((w | 1).wrapping_add(1), Ordering::Release);
    }

    /// Own thread, after [`Entry::Contended`]: waits for the revoker's
    /// decision. True: the P was taken (call [`acknowledge`](Self::acknowledge)
    /// once the handle is dropped); false: it is still ours.
    #[cold]
    pub(crate) fn wait_decision(&self) -> bool {
        loop {
            // Acquire: pairs with the revoker's Release in `finish`/`abort`:
            // what it did to the P happens-before our next use of it. (Under
            // loom a read-modify-write, which reads the latest value: a
            // spinning load may be shown stale values forever there.)
            #[cfg(not(loom))]
            let s = self.state.load(Ordering::Acquire);
            #[cfg(loom)]
            let s = self.state.fetch_add(0, Ordering::Acquire);
            match s {
                NONE => return false,
                TAKEN => return true,
                _ => crate::loom::thread::yield_now(),
            }
        }
    }

    /// Own thread: the M has let go of the P taken from it.
    pub(crate) fn acknowledge(&self) {
        // Relaxed: only a revoker's CAS reads it, and the M touches no P
        // until it acquires one through the scheduler's own synchronisation.
        self.state.store(NONE, Ordering::Relaxed);
    }

    /// Revoker: starts taking the M's P if the M is still in the stretch
    /// `seen` (even). `barrier` must be a process-wide memory barrier (the
    /// kernel's `membarrier`). On true the M cannot touch its P until
    /// [`finish`](Self::finish) or [`abort`](Self::abort).
    pub(crate) fn begin(&self, seen: u32, barrier: impl FnOnce()) -> bool {
        debug_assert_eq!(seen & 1, 0, "begin with a runtime word");
        // AcqRel: the M's acknowledgement (a plain store) and anything the
        // last revoker did are ordered before our reads of the M's state.
        if self
            .state
            .compare_exchange(NONE, PENDING, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            return false; // another revoker, or a TAKEN not yet noticed
        }
        barrier();
        // The barrier's effect on this thread, under loom (module note).
        #[cfg(loom)]
        crate::loom::atomic::fence(Ordering::SeqCst);
        if self.word_after_barrier() == seen {
            true
        } else {
            self.abort();
            false
        }
    }

    /// Revoker: the P is taken (after a successful `begin`).
    pub(crate) fn finish(&self) {
        // Release: pairs with the M's Acquire in `wait_decision`.
        self.state.store(TAKEN, Ordering::Release);
    }

    /// Revoker: leaves the P with the M (after a successful `begin`).
    pub(crate) fn abort(&self) {
        // Release: as in `finish`, and with the M's Acquire in `enter`
        // (`state_after_publish`) when it finds this `NONE`.
        self.state.store(NONE, Ordering::Release);
    }

    /// The M's store of its odd word. Outside loom: a plain store and a
    /// compiler fence; the revoker's barrier supplies the CPU fence.
    #[inline(always)]
    fn publish(&self, w: u32) {
        #[cfg(not(loom))]
        {
            self.word.store(w, Ordering::Relaxed);
            std::sync::atomic::compiler_fence(Ordering::SeqCst);
        }
        // loom has no membarrier: model the fence it runs on this thread
        // as a SeqCst fence (module note).
        #[cfg(loom)]
        {
            self.word.store(w, Ordering::Relaxed);
            crate::loom::atomic::fence(Ordering::SeqCst);
        }
    }

    /// The M's load of `state` right after `publish`. Acquire: pairs with
    /// the Release of `abort`: a revoker that began, read the P and left
    /// it with the M read it before the M, finding `NONE`, writes it
    /// (invariant 6). A plain
    /// `mov` on x86-64, where every load is an acquire; on aarch64 an
    /// `ldar` in place of an `ldr`.
    #[inline(always)]
    fn state_after_publish(&self) -> u32 {
        self.state.load(Ordering::Acquire)
    }

    /// The revoker's load of `word` after its barrier. Acquire: pairs with
    /// the Release in `leave` (invariant 5 of the module note).
    fn word_after_barrier(&self) -> u32 {
        self.word.load(Ordering::Acquire)
    }
}

#[cfg(all(test, loom))]
mod tests {
    use super::*;
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;
    use loom::thread;

    /// An M in a goroutine's own code (word 2), and its P's data (loom
    /// reports any two unordered accesses to it).
    fn m_in_user_code() -> (Arc<Revoke>, Arc<UnsafeCell<u32>>) {
        let r = Arc::new(Revoke::new());
        r.enter();
        r.leave(); // word 2: user code
        (r, Arc::new(UnsafeCell::new(0u32)))
    }

    /// The M in a goroutine's own code (word 2) enters the runtime while a
    /// revoker tries to take its P. Checked: the P's data is never touched
    /// by both at once (loom reports a concurrent `with_mut`), exactly one
    /// side ends up owning it, and an M that finds no revoker at work
    /// (`Entered`) still owns its P. The M's wait for a decision is a
    /// plain spin; loom cannot run a spin to completion, so an M that finds
    /// one at work waits by joining the revoker (its decision is then final,
    /// which is all the spin waits for).
    #[test]
    fn revoke_races_entry() {
        loom::model(|| {
            let (r, p) = m_in_user_code();
            let (r2, p2) = (r.clone(), p.clone());
            let revoker = thread::spawn(move || {
                if r2.begin(2, || {}) {
                    p2.with_mut(|v| unsafe { *v += 10 });
                    r2.finish();
                    true
                } else {
                    false
                }
            });
            let (kept, taken) = match r.enter() {
                Entry::Nested => unreachable!(),
                Entry::Entered => {
                    p.with_mut(|v| unsafe { *v += 1 });
                    r.leave();
                    (true, revoker.join().unwrap())
                }
                Entry::Contended => {
                    let taken = revoker.join().unwrap();
                    let lost = r.wait_decision();
                    assert_eq!(lost, taken);
                    if lost {
                        r.acknowledge();
                    } else {
                        p.with_mut(|v| unsafe { *v += 1 });
                    }
                    r.leave();
                    (!lost, taken)
                }
            };
            assert!(kept != taken, "kept={kept} taken={taken}");
            p.with(|v| assert_eq!(unsafe { *v }, if taken { 10 } else { 1 }));
        });
    }

    /// The other direction: what the M did to its P in runtime code (a
    /// stack put back in the P's cache at a goroutine's exit, a run-queue
    /// push) happens-before what a revoker that takes the P next does to
    /// it. The revoker is sysmon as it runs: it reads the word (its probe,
    /// which needs an even word seen twice; once is enough for the model),
    /// and only then begins. loom reports the revoker's `with_mut` as a
    /// data race if `leave` is Relaxed (with `begin`'s load Relaxed too),
    /// which is what ThreadSanitizer found in tests/blocking.rs: the M's
    /// last stack-cache writes and the next owner's reads were unordered.
    /// After the P was taken, the M's next entry finds `TAKEN` and leaves
    /// the P alone; a third stretch (the goroutine computed on, then
    /// entered again) may not be revoked with a stale `seen`.
    #[test]
    fn revoker_sees_the_ms_last_stretch() {
        loom::model(|| {
            let r = Arc::new(Revoke::new()); // word 1: runtime code
            let p = Arc::new(UnsafeCell::new(0u32));
            let (r2, p2) = (r.clone(), p.clone());
            // The stretch the revoker took the P in, if it did.
            let revoker = thread::spawn(move || {
                let seen = r2.word(); // sysmon's probe
                if seen & 1 == 1 || !r2.begin(seen, || {}) {
                    return None;
                }
                p2.with_mut(|v| unsafe { *v += 10 });
                r2.finish();
                Some(seen)
            });
            // The M's last runtime stretch on its P (1), the goroutine's
            // own code (2), runtime code again (3), its own code (4).
            p.with_mut(|v| unsafe { *v += 1 });
            r.leave();
            // (As in `revoke_races_entry`, a contended M waits by joining.)
            let (kept, taken) = match r.enter() {
                Entry::Nested => unreachable!(),
                Entry::Entered => {
                    p.with_mut(|v| unsafe { *v += 1 });
                    r.leave();
                    (true, revoker.join().unwrap())
                }
                Entry::Contended => {
                    let taken = revoker.join().unwrap();
                    let lost = r.wait_decision();
                    assert_eq!(lost, taken.is_some());
                    if lost {
                        r.acknowledge();
                    } else {
                        p.with_mut(|v| unsafe { *v += 1 });
                    }
                    r.leave();
                    (!lost, taken)
                }
            };
            // Taken in stretch 2: the M lost it at its entry. Kept in 3:
            // it can only have been taken in 4, after the M let go.
            match taken {
                Some(2) => assert!(!kept),
                Some(4) => assert!(kept),
                Some(w) => panic!("taken in stretch {w}"),
                None => assert!(kept),
            }
            let want = 1 + u32::from(kept) + if taken.is_some() { 10 } else { 0 };
            p.with(|v| assert_eq!(unsafe { *v }, want));
        });
    }

    /// A revoker that began and then left the P with its M (`take` finds
    /// the P no longer the M's, or not running, and aborts) read the P
    /// between `begin` and `abort`. An M entering the runtime that finds
    /// the abort's `NONE` (an `Entered`, no wait) must not write the P
    /// before those reads: `state_after_publish` is an Acquire, pairing
    /// with `abort`'s Release. With a Relaxed load loom reports the M's
    /// `with_mut` as racing with the revoker's `with`. (On x86-64 every
    /// load is an acquire; on aarch64 a plain load is not.)
    #[test]
    fn an_entry_after_an_abort_sees_the_revokers_reads() {
        loom::model(|| {
            let (r, p) = m_in_user_code();
            let (r2, p2) = (r.clone(), p.clone());
            let revoker = thread::spawn(move || {
                if r2.begin(2, || {}) {
                    // `take`'s check of the P, then it leaves it alone.
                    // SAFETY: loom's cell checks that no write races this read.
                    p2.with(|v| assert_eq!(unsafe { *v }, 0));
                    r2.abort();
                }
            });
            match r.enter() {
                Entry::Nested => unreachable!(),
                // SAFETY (both writes): loom's cell checks that no access
                // races them; that the revoker's read happened before is what
                // the model checks.
                Entry::Entered => p.with_mut(|v| unsafe { *v += 1 }),
                Entry::Contended => {
                    revoker.join().unwrap();
                    assert!(!r.wait_decision(), "an aborted revocation took the P");
                    p.with_mut(|v| unsafe { *v += 1 });
                    r.leave();
                    return;
                }
            }
            r.leave();
            revoker.join().unwrap();
        });
    }

    /// Two revokers (sysmon and a stop-the-world) never both win, and after
    /// a revocation was acknowledged the next stretch can be revoked again
    /// while a stale `seen` never is.
    #[test]
    fn two_revokers_and_rounds() {
        loom::model(|| {
            let r = Arc::new(Revoke::new());
            r.enter();
            r.leave(); // 2
            let hs: Vec<_> = (0..2)
                .map(|_| {
                    let r = r.clone();
                    thread::spawn(move || {
                        let won = r.begin(2, || {});
                        if won {
                            r.finish();
                        }
                        won
                    })
                })
                .collect();
            let wins = hs
                .into_iter()
                .map(|h| h.join().unwrap())
                .filter(|&w| w)
                .count();
            assert_eq!(
                wins, 1,
                "the M stayed in stretch 2: exactly one revoker wins"
            );
            assert_eq!(r.enter(), Entry::Contended);
            assert!(r.wait_decision());
            r.acknowledge();
            r.leave(); // 4
            assert!(!r.begin(2, || {}));
            assert!(r.begin(4, || {}));
            r.finish();
            assert_eq!(r.enter(), Entry::Contended);
            assert!(r.wait_decision());
        });
    }
}
