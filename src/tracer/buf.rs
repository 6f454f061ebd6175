//! Per-thread trace buffers, the session (clock, generation), and the
//! writer thread.
//!
//! # Who may touch a buffer (the busy flag)
//! A [`TraceBuf`] belongs to one thread, which writes each event into it
//! between raising and lowering its `busy` flag. Only three other parties
//! ever look at it, all rare: `stop` collects the last batch; a plain
//! thread's exit and a thread claiming a freed buffer initialise or flush
//! it. The last two hold `CONTROL` (the start/stop mutex), so they never
//! overlap `stop`. Between an event and `stop` the protocol is Dekker's:
//! - the owner raises `busy`, *then* loads `LIVE`; if it is clear (0) it
//!   writes nothing. `stop` clears `LIVE`, *then* waits until `busy` is down
//!   before it reads the buffer. Both orders are store-then-load, so either
//!   the owner sees `LIVE` clear, or `stop` sees `busy` up and waits for the
//!   event to complete; never both miss.
//! - The StoreLoad barrier is asymmetric where the kernel allows
//!   (`membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`, Linux >= 4.14): the
//!   owner's side is a plain store and a compiler fence (no locked
//!   instruction on the hot path), and `stop` issues the membarrier, which
//!   runs a full barrier on every CPU running one of our threads, so the
//!   owner's store and load cannot be seen reordered across it. Without
//!   membarrier, the owner's store is a SeqCst swap (a locked instruction)
//!   and its load of `LIVE` (in `emit_slow`) is SeqCst, as are `stop`'s
//!   store and loads: all four in C11's single total order.
//! - `LIVE` holds the session's generation (0: off). `start` writes the
//!   session (generation, clock) and then stores the generation in `LIVE`
//!   with Release; the owner's Acquire load of `LIVE` sees the session. A
//!   buffer last used by an older generation is reset first.
//! - The event sites test `mod.rs`'s `ON` first, only a hint: `start` sets
//!   it after `LIVE`, `stop` clears it before `LIVE`. (Two words, so that
//!   `LIVE`, read by the buffers only, is addressed directly, not through
//!   the GOT as a static read all over the crate is.)
//!
//! # The fast path (one event, no call besides the event function's)
//! Each event first tries `emit_in`'s fast path: one load of the buffer's
//! address, then two tests, each a load and a compare; otherwise it falls
//! to the general, out-of-line `emit_slow` (which handles every case on
//! its own):
//! - The address comes from the M for the scheduler's own events (GoStart,
//!   GoStop, GoBlock, GoEnd; GoCreate and GoUnblock from an M: `emit_m`),
//!   whose sites hold the M: its `trace_buf` slot. Other events take it
//!   from `FAST`, a const thread-local (`emit`): the crate is compiled
//!   with the general-dynamic thread-local model, so a function that looks
//!   one up is compiled around a call (which the linker then relaxes to
//!   one load), and saves and restores registers for it on its fast path.
//!   Both point to this thread's buffer once it is claimed (`claim` sets
//!   both; a thread's exit points both back), else to `NO_BUF`, a static
//!   buffer whose `fast_gen` never matches (so the pointer needs no null
//!   test). A thread that is not an M has no slot: its events from sites
//!   that pass an `Option<&M>` go straight to `emit_slow`. The fast path raises
//!   `busy` with a plain store (the asymmetric barrier's raise): where the
//!   barrier is not asymmetric (`fast_ok` false), `fast_gen` never matches
//!   either, and `emit_slow` raises again with the SeqCst swap before its
//!   own load of `LIVE`, the load the protocol relies on there. (`NO_BUF`'s
//!   `busy` is written by each thread's first event and never read.)
//! - The buffer's `fast_gen` equals the value loaded from `LIVE` (after the
//!   raise, as above) only when the buffer's batch belongs to that
//!   generation, the session's clock is the TSC *and* the barrier is
//!   asymmetric. It is set by the owner only (in `emit_slow`), so the owner
//!   reads it without a race; it is `NO_GEN` (never a generation, never 0)
//!   otherwise, so a `LIVE` of 0 never matches it.
//! - `pos` leaves room for the longest event (`MAX_EVENT`, plus a GoName's
//!   bytes) before `limit`; with no batch begun both are null.
//!
//! Timestamps are kept relative to the session's start (`start_ns`), so the
//! first event of a batch has the previous timestamp 0, and the TSC's
//! reading converts to it with one multiply.
//!
//! # Shared timestamps
//! A clock read is most of an event's cost (`examples/clock_floor.rs`
//! measures it; skynet writes millions of events a round), so the
//! GoStart of the scheduler's quick path (a third of skynet's events)
//! reads none:
//! - The scheduler passes `quick` when it found the goroutine without
//!   waiting, right after the last goroutine's slice ended on this M: in
//!   its P's run queue on the first pass of `find_runnable`, or a park that
//!   was cancelled. Not from the global queue: another M may have queued
//!   that goroutine after the slice end, and its GoUnblock would then come
//!   after the GoStart in time. Only a P's holder fills its run queue, so
//!   whatever this M finds there was queued before the slice end.
//! - `slice_ended` is set by the events that end a slice (GoEnd, GoBlock,
//!   GoStop) and cleared by every other event and by a new batch. So the
//!   GoStart takes the slice end's timestamp only when nothing else was
//!   traced in between on this thread: no timer fired, no M parked, nothing
//!   was stolen.
//! - The time between the two is the runtime's own work between two
//!   goroutines (freeing the last one's stack and G, readying and unlocking
//!   for a park): tens of nanoseconds, more when freeing makes a system
//!   call (a stack cache spilling to its pool) or a lock is contended. A
//!   trace shows that time inside the next goroutine's slice
//!   (docs/trace-format.md).
//! - Such a GoStart is written as a GoStartLocal: its type and goroutine
//!   only, no time delta (0) and no P (the slice end's, as it is the same
//!   M holding the same P). The flight recorder's trim turns one that
//!   begins a cut batch back into a GoStart with the P of the slice end
//!   that was cut.
//!
//! # Deferred quick starts
//! A GoStartLocal needs no clock and nothing the next event does not
//! also check, so the quick GoStart is not an event call at all: the
//! scheduler stores the goroutine in the buffer's `pending` word (two
//! loads and a store, no busy flag), and the thread's next event writes
//! the GoStartLocal just before itself. Invariants:
//! - It is set only while `slice_ended` is (the batch's last event
//!   ends a slice), and every slice ends with an event of its M (GoEnd,
//!   GoBlock, GoStop, SyscallEnter...), which writes it first: so a
//!   GoStartLocal lands right after its slice end, where an immediate one
//!   would have been, and the bytes are the same.
//! - Both words are atomics (Relaxed: one thread writes them, but for
//!   the cases below), as the quick start runs outside the busy protocol.
//!   `slice_ended` is written inside an event, and at claim, exit and a
//!   new generation's first event.
//! - `limit` leaves `START_LOCAL` bytes free after any event, so a
//!   deferred GoStartLocal always fits in the batch of its slice end: the
//!   next event writes it before it makes room, and `collect` (a stop or a
//!   flight snapshot) writes it before it flushes, after the owner's event
//!   in progress (`busy`) and with `pending` swapped to 0.
//! - A quick start the owner stores between `collect`'s swap and its own
//!   next event (the two instructions of `defer_quick_start`, against a
//!   stop) belongs to no batch: that next event is of a new generation,
//!   and resets `pending`. The goroutine then shows from its next event,
//!   as one running when a trace starts.
//!
//! # Deferred creates
//! A goroutine that spawns often spawns several in a row (skynet's nodes
//! ten, a server's accept loop, a fan-out), and their GoCreates share a
//! time (below, "Shared timestamps"), a parent and a P, with ids one
//! apart (a P hands out ids from its own batch). So only the first of a
//! run is an event call: it leaves a run in `pending` (the `RUN` bit, the
//! next id expected, a count), and each spawn after it whose id is that
//! next id only counts itself there (inline in `newproc`: two loads, a
//! compare and a store). The thread's next event writes the run's
//! GoCreates first, two bytes each: `SAME_TIME` and `IMPLICIT` (the time,
//! parent and P of the GoCreate before, the run's first), and an id one
//! more than the last. It took 90% of skynet's GoCreate calls.
//! Invariants:
//! - Any event ends a run: it writes it and clears `pending` (a GoCreate
//!   begins the next). A goroutine's slice ends with an event, and the
//!   next goroutine to run on this M starts with one (a deferred quick
//!   start only follows a slice end), so a run never spans two
//!   goroutines: the parent and the P written are the spawner's. An id
//!   that is not the next one (the P's batch ran out and another P or a
//!   plain thread took the ids after it) ends the run too, as a call.
//! - Nothing is written between the run's first GoCreate and its last,
//!   so the registers the bytes rely on (the batch's previous time,
//!   running goroutine, P, and other goroutine, the last created) are
//!   the first GoCreate's, and the goroutines they name are in the same
//!   batch as it: `limit` keeps `RUN_BYTES` free (`RUN_MAX`, 64, creates)
//!   as it does for a GoStartLocal, and the owner's `emit_slow` and
//!   `collect` write a run before they flush.
//! - A run and a deferred quick start never meet: one is begun by a
//!   GoCreate, the other only right after a slice end, and every event
//!   takes what is pending. So one word holds either.
//! - A deferred GoCreate's time is a lower bound, as every shared one's:
//!   its goroutine's GoStart on another M (a stolen goroutine) reads the
//!   clock after the spawn, so it sorts after the GoCreate whenever the
//!   file is written, even if the run is written later than that GoStart.
//! - As with a quick start, a spawn counted between `collect`'s swap and
//!   the owner's next event belongs to no batch (a new generation drops
//!   the run); its goroutine shows from its next event.
//!
//! A GoCreate or a GoUnblock from an M's running goroutine (`PREV`,
//! `PREV_AFTER`; a third of skynet's events each) reads none either: it
//! takes the time of the batch's previous event, written as its type with
//! `SAME_TIME` set and no delta. Invariants:
//! - The time is a lower bound: the event happens on this M after the
//!   batch's previous event. So nothing it causes (the new or readied
//!   goroutine's GoStart, on any M) can sort before it.
//! - What causes a GoUnblock on another M, its goroutine's GoBlock, must
//!   not sort after it: `go_block` keeps the GoBlock's timestamp in the G
//!   (`G::trace_block_ts`; returned by the emit functions), and the
//!   GoUnblock shares only if it is not later than the batch's last time;
//!   else it reads the clock. A value not of this session (the G blocked
//!   untraced, or before the trace began, or a metrics sample's TSC
//!   reading took the word) may be smaller or larger: either is safe, as
//!   no GoBlock of this trace must precede the GoUnblock then. (A flight
//!   recorder's generations share one time base.)
//! - Only the fast path shares (it has the TSC's base and scale at hand);
//!   `emit_slow` reads the clock, and a batch's first event (`last_ts` 0)
//!   has nothing to share.
//! - The price is precision: such an event shows at its goroutine's
//!   previous traced event, however long the goroutine computed in
//!   between (docs/trace-format.md says so).
//! - A flight recorder's trim never keeps one first in a batch (it cuts
//!   by time, and the event before has the same); if it did, it would
//!   clear the bit and write the time (`trim_into`).
//!
//! # Unstamped slice ends
//! After the above, a slice end (GoBlock, GoEnd) was the one event of a
//! goroutine slice that read the clock: one read per slice, 2.2M reads of
//! 11-12 ns a skynet round. Where slices are that short, a time for each
//! end says little that the times around it do not, so in a run of short
//! slices most ends take their batch's previous time too (`END`:
//! `SAME_TIME`, as GoCreate). Three ends shared in four cut skynet's
//! clock reads to a third and its trace by a fifth, but no wall time the
//! noise then showed; fifteen in sixteen did (below). Invariants:
//! - A stamped slice end measures the interval since the batch's last
//!   stamped one (`last_end`), which spans the slice ends since it (the
//!   stamped one and those that shared). The interval is short under
//!   `SHORT_SLICE_NS` (500 ns) for each slice end it spans (`short_ns`).
//!   After `SHORT_RUN` (4) short intervals in a row (`short_run` counts
//!   them), the next `SKIP_ENDS` (15) slice ends share (`skip_ends`), then
//!   one reads the clock again and the count goes on. One long interval
//!   sets the count to 0: slices that alternate long and short (a worker
//!   that computes, then the goroutine that takes its result) all read it.
//! - Why fifteen: the reads that are left still cost. In skynet at
//!   GOMAXPROCS=1 a sampling profile put the clock read at 40-45% of the
//!   GoBlock and GoEnd functions' time with three ends shared in four;
//!   fifteen in sixteen took 0.64M reads a round to 0.19M and 1.4 points
//!   off the traced round (BENCHMARKS.md).
//! - All four start afresh with each batch (`begin_batch`), whose first
//!   event reads the clock (a flight recorder's cut that begins a batch at
//!   a shared time writes the time out, `trim_into`). Only the fast path
//!   shares; mid-session `emit_slow` writes only a batch's first event.
//! - The shared time is a lower bound, as for GoCreate: so a GoUnblock of
//!   the goroutine on another M still sorts after its GoBlock (`go_block`
//!   keeps the time written, the shared one).
//! - The price: in such a run a slice's end shows at the previous stamp,
//!   up to fifteen slices early, within the interval (at most 8 us while
//!   the run lasts). At a change of pace (a short interval followed by a
//!   long slice) up to fifteen slice ends may show early by as much as
//!   that slice took; the next stamped end has the right time, and the
//!   run is over. `goroutine-trace stats` counts the events with times of
//!   their own.
//!
//! # Causal order
//! Sorted by time, a goroutine's events keep the order in which they
//! happened (docs/trace-format.md), also where two Ms write them: a
//! GoStart after the GoUnblock, GoCreate, GoStop or SyscallExit that
//! queued its goroutine elsewhere; a GoUnblock after the GoBlock.
//! Invariants:
//! - A stamp is read before the store that makes its event's effect
//!   visible (the event comes first at every such site), and a stamp read
//!   before the store cannot be read after it: a counter read only
//!   executes before its instruction retires, and the store is visible
//!   only after its own, later retirement.
//! - The reading side must not read early: an unfenced counter read may
//!   execute before the load that found the goroutine completes, tens of
//!   nanoseconds early, enough to sort a GoStart and its GoEnd before the
//!   GoUnblock another M stamped just before its push (a randomized CI
//!   run saw it once; `sys::time`'s round-trip test, with plain reads,
//!   fails one run in four here, by up to 220 ticks). So the events that
//!   follow what another M did read the ordered clock
//!   (`cputicks_ordered`, ~10 ns more): a GoStart not on the quick path
//!   (`ORDERED`), a GoUnblock that cannot share (`PREV_AFTER`), and every
//!   event of `emit_slow`.
//! - Shared times are lower bounds and need no read: a quick GoStart's
//!   goroutine was queued on this M's P before the slice end it shares,
//!   and a shared GoUnblock's GoBlock is no later than its time.
//!
//! Buffers are leaked and registered in `ALL` (so `stop` finds them); a
//! thread that exits (a plain thread, or an M whose goroutine exited locked
//! to it) flushes its buffer and puts it on `FREE` for the next thread.
//!
//! # The writer
//! A thread fills one batch storage of its own (`Inner::data`), which
//! stays in its core's cache; a full batch is copied out (`copy_out`, with
//! streaming stores on x86-64: the copy neither reads the destination
//! into the cache nor evicts the runtime's lines for it) into a buffer
//! from the free list, which goes to a queue (a mutex and a condvar, taken
//! once per 64 KiB of events) that a writer thread drains into the file.
//! Filling a cold buffer in place cost skynet's traced round about two
//! points (BENCHMARKS.md). The writer sleeps on the condvar when the queue
//! is empty, and is woken once `WAKE_BATCHES` (4) wait, else looks again
//! after `WRITER_PERIOD` (10 ms): a wake-up per batch was a system call on
//! the tracing thread each time. Each look that finds nothing doubles the
//! wait, up to `WRITER_PERIOD_MAX` (80 ms); a look that finds a batch sets
//! it back to 10 ms. So a quiet trace costs 12 looks a second, not 100
//! (an echo server's, a batch every 60 ms or so: about 50), and a queued
//! batch waits at most 80 ms for the writer's next look (longer where the
//! writer gets no CPU, below), or until three more follow it. The writer
//! runs in the kernel's idle class (`SCHED_IDLE`, else at nice 19): where
//! it shares a CPU with the program's threads, it runs in their gaps, and
//! a program thread that wakes takes the CPU from it at once (an echo
//! server pinned to one CPU with the writer: p99 +4.7% and req/s -1.2% at
//! the default priority; at nice 19, which may still hold the CPU for the
//! rest of a slice when the server wakes, req/s -2.3% in a noisy set;
//! history.md). The price: on a machine whose every CPU is busy, the
//! writer gets a small share (the class's weight is 3 against 1024 for a
//! busy thread: some 10 MB a second), so a program tracing faster than
//! that falls behind. If the writer falls 1024 batches (64 MiB) behind,
//! new batches are dropped and counted in the trailer's `dropped_events`,
//! which `goroutine-trace stats` prints.
//!
//! # The flight recorder
//! A session whose full batches go to `QUEUE.ring` instead of the writer
//! (no writer thread, no file). Invariants:
//! - Bounded: after each batch is kept, the ring holds at most
//!   `max_bytes` of batches (at least one), and none whose last event is
//!   older than `age` before the newest batch's; the oldest go first.
//!   Besides the ring, each recording thread holds its one batch in the
//!   making, as with a file.
//! - A snapshot (`flight_write`) holds `CONTROL`, runs `stop`'s collection
//!   (`collect`: `LIVE` cleared, membarrier, each buffer's `busy` awaited,
//!   its batch flushed into the ring), copies the ring, then bumps the
//!   generation and sets `LIVE` again *without* a new clock: `start_ns`
//!   and the TSC base stay the recorder's, so every batch of the ring,
//!   from any generation, has timestamps relative to the one `start_ns`
//!   the snapshot's header carries. Each buffer, already flushed, begins a
//!   new batch of the new generation at its next event.
//! - The snapshot is cut at `now - age` (`trim_into`): a batch's events
//!   before the cut are skipped (their sizes read with `field_count`), and
//!   the first kept event's delta becomes its time from the start, as the
//!   first event of a batch has. It is headed by a batch of GoNames (with
//!   sysmon's id) for the goroutines alive: the GoNames written when the
//!   recorder started may have left the ring.
//! - On a crash (`flight_dump`) the collection waits at most a second for
//!   each thread and for `CONTROL`, and recording does not resume.

use std::cell::{Cell, UnsafeCell};
use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, Once, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use crate::m::M;
use crate::sys::time::{cputicks, cputicks_ordered, nanotime, tsc_pair, tsc_usable};

/// Payload bytes per batch (docs/trace-format.md: 64 KiB).
const BATCH_BYTES: usize = 64 * 1024;
/// Batch header: 0xB7, u32 m_id, u32 payload_len.
const HEADER: usize = 9;
/// Batches the writer may fall behind before new ones are dropped.
const MAX_QUEUED: usize = 1024;
/// A sleeping writer is woken once this many batches wait (256 KiB)...
const WAKE_BATCHES: usize = 4;
/// ...else it looks for them at this period after finding some...
const WRITER_PERIOD: Duration = Duration::from_millis(10);
/// ...doubled by each look that finds none, up to this.
const WRITER_PERIOD_MAX: Duration = Duration::from_millis(80);
/// The generation being traced, 0 when off (module note).
static LIVE: AtomicU64 = AtomicU64::new(0);

/// A buffer's `gen`/`fast_gen` when it has none: never a generation (they
/// count up from 1) and never 0 (`LIVE` when off).
const NO_GEN: u64 = u64::MAX;

/// The current session, read by every event (written by `start` before
/// `LIVE` is set with Release). One cache line, read-mostly.
#[repr(align(64))]
struct Session {
    gen: AtomicU64,
    /// nanotime at the start: timestamps in buffers count from it.
    start_ns: AtomicI64,
    use_tsc: AtomicBool,
    /// The TSC read just before `start_ns`.
    base_tsc: AtomicU64,
    /// Nanoseconds per TSC tick, 32.32 fixed point.
    mult: AtomicU64,
}

static SESSION: Session = Session {
    gen: AtomicU64::new(0),
    start_ns: AtomicI64::new(0),
    use_tsc: AtomicBool::new(false),
    base_tsc: AtomicU64::new(0),
    mult: AtomicU64::new(0),
};

/// Nanoseconds since the session's start of the TSC reading `tsc`: `base_tsc` read
/// at the start, `mult` nanoseconds per tick (32.32).
#[inline(always)]
fn tsc_scale(tsc: u64, base_tsc: u64, mult: i64) -> i64 {
    // Signed: a TSC a little behind `base_tsc` (another CPU's, or one read
    // before the session began) is a negative time, which the caller's
    // clamp or comparison absorbs, not a huge one. One signed
    // 64x64->128 multiply (`mult` < 2^63: under 2^31 ns per tick).
    let ticks = tsc.wrapping_sub(base_tsc) as i64;
    ((ticks as i128 * mult as i128) >> 32) as i64
}

/// Nanoseconds since the session's start: from the TSC where usable, else
/// nanotime.
#[inline]
fn now_rel() -> i64 {
    let s = &SESSION;
    if s.use_tsc.load(Ordering::Relaxed) {
        let base = s.base_tsc.load(Ordering::Relaxed);
        // Ordered: `emit_slow` stamps any event (module note, "Causal
        // order").
        tsc_scale(
            cputicks_ordered(),
            base,
            s.mult.load(Ordering::Relaxed) as i64,
        )
    } else {
        nanotime() - s.start_ns.load(Ordering::Relaxed)
    }
}

/// The session's clock: nanotime, from the TSC where usable.
fn now() -> i64 {
    SESSION.start_ns.load(Ordering::Relaxed) + now_rel()
}

/// Nanoseconds per TSC tick (32.32), measured once against nanotime over
/// 2 ms; `None` if the TSC is not a usable clock. Each end of the measure
/// is a [`tsc_pair`].
fn tsc_mult() -> Option<u64> {
    static MULT: OnceLock<Option<u64>> = OnceLock::new();
    *MULT.get_or_init(|| {
        if !tsc_usable() {
            return None;
        }
        let (t0, n0) = tsc_pair();
        while nanotime() - n0 < 2_000_000 {
            std::hint::spin_loop();
        }
        let (t1, n1) = tsc_pair();
        let ticks = t1.checked_sub(t0).filter(|&t| t > 0)?;
        let ns = u128::try_from(n1 - n0).ok()?;
        Some((ns << 32).checked_div(ticks as u128)? as u64)
    })
}

/// One thread's buffer (module note).
pub(super) struct TraceBuf {
    /// The owner is writing an event (module note).
    busy: AtomicBool,
    /// The generation the fast path may write for, else `NO_GEN` (module
    /// note). Written by the owner (in `emit_slow`), and by claim/exit
    /// under `CONTROL` when it has none.
    fast_gen: AtomicU64,
    /// The batch's last event ended a goroutine's slice (GoEnd, GoBlock,
    /// GoStop): a GoStart on the scheduler's quick path may take its
    /// timestamp and P (module note, "Deferred quick starts"). Written by
    /// the owner inside an event, and when a batch begins or is dropped;
    /// read by the owner at a quick start, outside any event.
    slice_ended: AtomicBool,
    /// The owner's deferred event, which its next event writes first, or
    /// `collect` does (0: none). Either a goroutine started on the quick
    /// path right after the slice end that is the batch's last event (its
    /// id; module note, "Deferred quick starts"), or, with the `RUN` bit,
    /// a run of GoCreates (module note, "Deferred creates"): the id the
    /// run's next goroutine must have in bits 8-62, and how many it holds
    /// (at most `RUN_MAX`) in bits 0-7. Never both: a run is begun by a
    /// GoCreate and ended by the next event, a quick start is deferred
    /// only right after a slice end.
    pending: AtomicU64,
    inner: UnsafeCell<Inner>,
}

// SAFETY: `inner` is only touched by its owner while `busy` is up and
// `LIVE` set, by `stop` after `LIVE` is clear and `busy` is down, and by
// claim/exit under `CONTROL`, which excludes `stop` (module note). Its
// raw pointers point into its own `data`, and `m_slot` into a leaked M
// (used by the owner only). `NO_BUF`, shared by threads
// without a buffer, has its `inner` never touched (its `fast_gen` never
// matches and it is never in `LOCAL` or `ALL`); only its atomic `busy` is
// written.
unsafe impl Sync for TraceBuf {}

/// The owner's side of the StoreLoad barrier is a compiler fence only
/// (`stop` issues a membarrier); false: a SeqCst swap.
static ASYMMETRIC: AtomicBool = AtomicBool::new(false);

struct Inner {
    /// The session the batch in `data` belongs to (`NO_GEN`: none).
    gen: u64,
    m_id: u32,
    /// The batch's storage (capacity `HEADER + BATCH_BYTES`): the header,
    /// then the events, written through `pos`. Its length covers the
    /// header while the batch fills and is set to `pos` by `flush`, which
    /// copies the batch out and keeps the storage (module note, "The
    /// writer") until a stop frees it (`collect`).
    data: Vec<u8>,
    /// Where the next event goes, in `data`'s allocation (null: no batch
    /// begun).
    pos: *mut u8,
    /// The first `pos` without room for `MAX_EVENT` bytes before the
    /// batch's end (null: no batch begun). An event with `n` name bytes
    /// fits if `pos + n < limit`.
    limit: *mut u8,
    /// Timestamp of the batch's last event, relative to the session's
    /// start (0 before the first).
    last_ts: i64,
    /// Slice ends (`END`) the batch may still write without a clock read,
    /// how many of its intervals between stamped slice ends in a row were
    /// short, and the time of its last stamped slice end (module note,
    /// "Unstamped slice ends"; 0, 0 and `-SHORT_SLICE_NS` at a batch's
    /// start).
    skip_ends: u32,
    short_run: u32,
    last_end: i64,
    /// The interval under which the next stamped slice end counts as
    /// short: `SHORT_SLICE_NS` for each slice end it spans.
    short_ns: i64,
    /// The batch's goroutine id registers, running and other (0 before
    /// the first): ids are written as differences from them (`mod.rs`,
    /// `g_kind`).
    g_regs: super::Regs,
    /// The session's TSC base and scale (`Session`), copied for the fast
    /// path (plain loads, next to `pos`) when it is enabled.
    base_tsc: u64,
    mult: i64,
    /// The barrier is asymmetric: the fast path's raise is enough (module
    /// note). Read at claim.
    fast_ok: bool,
    /// The owner's M's slot for this buffer (`M::trace_buf`), null for a
    /// thread that is not an M: pointed at this buffer at claim, back at
    /// `NO_BUF` when the thread exits.
    m_slot: *const AtomicPtr<()>,
}

/// `FAST` of a thread without a buffer: the fast path never matches it
/// (module note).
static NO_BUF: TraceBuf = TraceBuf::new();

static ALL: Mutex<Vec<&'static TraceBuf>> = Mutex::new(Vec::new());
static FREE: Mutex<Vec<&'static TraceBuf>> = Mutex::new(Vec::new());
/// Ids for threads that are not Ms, counting down (sysmon is u32::MAX).
static NEXT_EXT_ID: AtomicU32 = AtomicU32::new(u32::MAX - 1);

thread_local! {
    /// This thread's buffer (null: none claimed).
    static LOCAL: Cell<*const TraceBuf> = const { Cell::new(ptr::null()) };
    /// This thread's buffer once claimed, else `NO_BUF` (module note).
    static FAST: Cell<*const TraceBuf> = const { Cell::new(&NO_BUF) };
    /// A batch id chosen for this thread (sysmon), 0 if none.
    static THREAD_ID: Cell<u32> = const { Cell::new(0) };
    static EXIT: ExitGuard = const { ExitGuard };
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub(super) fn set_thread_id(id: u32) {
    THREAD_ID.with(|c| c.set(id));
}

impl TraceBuf {
    const fn new() -> TraceBuf {
        TraceBuf {
            busy: AtomicBool::new(false),
            fast_gen: AtomicU64::new(NO_GEN),
            slice_ended: AtomicBool::new(false),
            pending: AtomicU64::new(0),
            inner: UnsafeCell::new(Inner {
                gen: NO_GEN,
                m_id: 0,
                data: Vec::new(),
                pos: ptr::null_mut(),
                limit: ptr::null_mut(),
                last_ts: 0,
                skip_ends: 0,
                short_run: 0,
                last_end: -SHORT_SLICE_NS,
                short_ns: SHORT_SLICE_NS,
                g_regs: super::REGS_START,
                base_tsc: 0,
                mult: 0,
                fast_ok: false,
                m_slot: ptr::null(),
            }),
        }
    }

    /// The owner raises `busy` before it loads `LIVE` (module note).
    #[inline(always)]
    fn raise(&self) {
        if ASYMMETRIC.load(Ordering::Relaxed) {
            self.raise_asymmetric();
        } else {
            // SeqCst: in one total order with `stop`'s SeqCst store of `LIVE`
            // and load of `busy`.
            self.busy.swap(true, Ordering::SeqCst);
        }
    }

    /// `raise` where `stop` issues a membarrier.
    #[inline(always)]
    fn raise_asymmetric(&self) {
        self.busy.store(true, Ordering::Relaxed);
        // The CPU may still order the load of `LIVE` before this store;
        // `stop`'s membarrier rules that out where it matters.
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
    }

    #[inline(always)]
    fn lower(&self) {
        // Release: `stop`'s Acquire load that sees it down sees the event.
        self.busy.store(false, Ordering::Release);
    }

    /// The deferred event (`pending`), 0 if none, taken by the owner
    /// inside an event: a load and a store, as only the owner writes
    /// `pending` then (`collect`, which races the owner's deferrals, swaps
    /// instead).
    #[inline(always)]
    fn take_pending(&self) -> u64 {
        let pending = self.pending.load(Ordering::Relaxed);
        if pending != 0 {
            self.pending.store(0, Ordering::Relaxed);
        }
        pending
    }

    /// Whether the deferred event `pending`, taken outside the fast path
    /// (`emit_slow`, `collect`, a thread's exit), still belongs after the
    /// batch's last event: a run always, a quick start only after a slice
    /// end (module note, "Deferred quick starts").
    fn pending_fits(&self, pending: u64) -> bool {
        pending & RUN != 0 || self.slice_ended.load(Ordering::Relaxed)
    }

    /// `stop`'s side: waits for the owner's event in progress, if any.
    fn wait_idle(&self) {
        while self.busy.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
    }

    /// `wait_idle` for at most `limit` (a crash: the owner may never
    /// finish); false if the event is still in progress.
    fn wait_idle_for(&self, limit: Duration) -> bool {
        let deadline = std::time::Instant::now() + limit;
        while self.busy.load(Ordering::SeqCst) {
            if std::time::Instant::now() > deadline {
                return false;
            }
            std::thread::yield_now();
        }
        true
    }

    /// The buffer's state.
    ///
    /// # Safety
    /// The caller may touch the buffer (module note), and no other
    /// reference from `inner` is live.
    #[allow(clippy::mut_from_ref)]
    #[inline(always)]
    unsafe fn inner(&self) -> &mut Inner {
        // SAFETY: exclusive by the protocol (caller's contract).
        unsafe { &mut *self.inner.get() }
    }
}

/// This thread's buffer, claiming one on first use.
#[inline]
fn local() -> Option<&'static TraceBuf> {
    let p = LOCAL.try_with(|c| c.get()).ok()?;
    if p.is_null() {
        return claim();
    }
    // SAFETY: LOCAL only holds leaked, never-freed buffers.
    Some(unsafe { &*p })
}

#[cold]
fn claim() -> Option<&'static TraceBuf> {
    let m = crate::m::current();
    let id = match m {
        Some(m) => m.id as u32,
        None => match THREAD_ID.try_with(|c| c.get()).unwrap_or(0) {
            0 => NEXT_EXT_ID.fetch_sub(1, Ordering::Relaxed),
            id => id,
        },
    };
    // Excludes `stop`, which may be reading a freed buffer (module note).
    let _control = lock(&CONTROL);
    let tb: &'static TraceBuf = match lock(&FREE).pop() {
        Some(tb) => tb,
        None => {
            let tb: &'static TraceBuf = Box::leak(Box::new(TraceBuf::new()));
            lock(&ALL).push(tb);
            tb
        }
    };
    // SAFETY: no owner yet, and `CONTROL` excludes `stop`.
    let inner = unsafe { tb.inner() };
    inner.m_id = id;
    inner.gen = NO_GEN;
    inner.discard();
    tb.fast_gen.store(NO_GEN, Ordering::Relaxed);
    tb.slice_ended.store(false, Ordering::Relaxed);
    tb.pending.store(0, Ordering::Relaxed);
    // The fast path's plain-store raise is only enough with the membarrier.
    // `start` set ASYMMETRIC before `LIVE`; a stale false (Relaxed) only
    // keeps this thread on the slow path, which is always correct.
    inner.fast_ok = ASYMMETRIC.load(Ordering::Relaxed);
    LOCAL.try_with(|c| c.set(tb)).ok()?;
    let _ = FAST.try_with(|c| c.set(tb));
    inner.m_slot = m.map_or(ptr::null(), |m| m.trace_buf() as *const _);
    if let Some(m) = m {
        m.trace_buf()
            .store(tb as *const TraceBuf as *mut (), Ordering::Relaxed);
    }
    // Plain threads exit, and so does an M whose goroutine exits locked to
    // it: give the buffer back then (registers the destructor; fails only
    // during thread exit).
    let _ = EXIT.try_with(|_| ());
    Some(tb)
}

/// Flushes and frees this thread's buffer when the thread exits.
struct ExitGuard;

impl Drop for ExitGuard {
    fn drop(&mut self) {
        let _ = FAST.try_with(|c| c.set(&NO_BUF));
        let Ok(p) = LOCAL.try_with(|c| c.replace(ptr::null())) else {
            return;
        };
        if p.is_null() {
            return;
        }
        // SAFETY: LOCAL only holds leaked, never-freed buffers.
        let tb = unsafe { &*p };
        let _control = lock(&CONTROL);
        // SAFETY: we are the owner, between events, and `CONTROL` excludes
        // `stop`.
        let inner = unsafe { tb.inner() };
        let pending = tb.take_pending();
        if !inner.pos.is_null() {
            if tb.pending_fits(pending) {
                // SAFETY: room kept by `limit` (`begin_batch`).
                unsafe { inner.write_pending(pending) };
            }
            inner.flush();
        }
        inner.gen = NO_GEN;
        if !inner.m_slot.is_null() {
            // SAFETY: the slot is a field of a leaked (never freed) M, this
            // thread's.
            unsafe { &*inner.m_slot }.store(no_buf(), Ordering::Relaxed);
            inner.m_slot = ptr::null();
        }
        tb.fast_gen.store(NO_GEN, Ordering::Relaxed);
        tb.slice_ended.store(false, Ordering::Relaxed);
        lock(&FREE).push(tb);
    }
}

/// Writes one event into the calling thread's buffer (if tracing is on).
///
/// Inlined into each (cold, out-of-line) event function of `mod.rs`, so
/// that the field loop is unrolled for its constant count and the event
/// costs one call. The fast path is two tests (module note); anything
/// else (no buffer yet, no membarrier, tracing off, a new session, a full
/// batch, no TSC) goes to `emit_slow`.
#[inline(always)]
pub(super) fn emit(ty: u8, args: &[u64], bytes: &[u8]) {
    // Const thread-local without a destructor: a plain load.
    let tb = FAST.with(|c| c.get());
    // SAFETY: FAST only holds `NO_BUF` or leaked, never-freed buffers.
    emit_in::<CLOCK>(unsafe { &*tb }, ty, args, bytes, 0);
}

/// How an event is stamped (`emit_in`'s `STAMP`; module note, "Shared
/// timestamps"): with a clock read;
const CLOCK: u8 = 0;
/// a slice end (GoBlock, GoEnd): with a clock read, or with the batch's
/// previous event's time while its recent slices were short (module note,
/// "Unstamped slice ends");
const END: u8 = 1;
/// with the batch's previous event's time if there is one (GoCreate);
const PREV: u8 = 2;
/// as `PREV`, if the timestamp passed (`floor`) is not later than that
/// time (GoUnblock: its goroutine's GoBlock's), else with an ordered
/// clock read;
const PREV_AFTER: u8 = 3;
/// with an ordered clock read (GoStart: module note, "Causal order").
const ORDERED: u8 = 4;

/// How many slice ends in a row may go without a clock read after one
/// that read it (module note, "Unstamped slice ends").
const SKIP_ENDS: u32 = 15;
/// An interval between two stamped slice ends is short under this
/// (nanoseconds) for each slice end it spans...
const SHORT_SLICE_NS: i64 = 500;
/// ...and after this many short ones in a row, the next `SKIP_ENDS` slice
/// ends go without a clock read.
const SHORT_RUN: u32 = 4;

/// `emit` from the scheduler's thread `m` (the calling thread's M), which
/// the caller holds: the buffer comes from the M (`M::trace_buf`), with no
/// thread-local lookup, the lookup that made each event function save and
/// restore registers around a call (module note, "The fast path").
/// Returns the event's timestamp (relative to the session's start), 0 if
/// it wrote none: GoBlock keeps it for the GoUnblock that follows
/// (`PREV_AFTER`).
#[inline(always)]
pub(super) fn emit_m(m: &M, ty: u8, args: &[u64]) -> u64 {
    emit_in::<CLOCK>(of_m(m), ty, args, &[], 0)
}

/// `emit_m` with an ordered clock read, for a GoStart (module note,
/// "Causal order").
#[inline(always)]
pub(super) fn emit_m_ordered(m: &M, ty: u8, args: &[u64]) {
    emit_in::<ORDERED>(of_m(m), ty, args, &[], 0);
}

/// `emit_m` for a GoBlock or a GoEnd, which may take the batch's previous
/// event's time (`END`). Returns the time written, as `emit_m`: the shared
/// one where it shared.
#[inline(always)]
pub(super) fn emit_m_end(m: &M, ty: u8, args: &[u64]) -> u64 {
    emit_in::<END>(of_m(m), ty, args, &[], 0)
}

/// `emit_m` for an event that may take the batch's previous event's time
/// (`PREV`, or `PREV_AFTER` with a `floor` other than 0), where the
/// caller may run on a thread that is not an M (`None`): such a thread
/// takes the out-of-line path, which finds its buffer itself (and reads
/// the clock).
#[inline(always)]
pub(super) fn emit_here_prev(m: Option<&M>, ty: u8, args: &[u64], floor: Option<u64>) {
    match (m, floor) {
        (Some(m), None) => {
            emit_in::<PREV>(of_m(m), ty, args, &[], 0);
        }
        (Some(m), Some(f)) => {
            emit_in::<PREV_AFTER>(of_m(m), ty, args, &[], f);
        }
        (None, _) => {
            slow(ty, args, &[]);
        }
    }
}

/// A GoStart of goroutine `g` (not 0) on the scheduler's quick path, on
/// `m`, the calling thread's M: if the batch's last event ended a
/// goroutine's slice, it is left for the next event to write as a
/// GoStartLocal, and this returns true (module note, "Deferred quick
/// starts"); else false, and the caller writes a GoStart.
#[inline(always)]
pub(super) fn defer_quick_start(m: &M, g: u64) -> bool {
    let tb = of_m(m);
    // Outside any event: both words are atomics, and only this thread
    // writes them but for `collect` and a batch's reset (module note).
    if tb.slice_ended.load(Ordering::Relaxed) {
        tb.pending.store(g, Ordering::Relaxed);
        return true;
    }
    false
}

/// A GoCreate of goroutine `g` by the goroutine running on `m` (the
/// calling thread's M, holding a P): if it continues the run of creates
/// the last event began (the next id, no event since, room left), it is
/// left for the next event to write, and this returns true (module note,
/// "Deferred creates"); else false, and the caller writes a GoCreate.
#[inline(always)]
pub(super) fn defer_create(m: &M, g: u64) -> bool {
    let tb = of_m(m);
    // Outside any event, as `defer_quick_start`.
    let run = tb.pending.load(Ordering::Relaxed);
    if run & RUN != 0 && (run & !RUN) >> 8 == g && run & 0xff < RUN_MAX {
        tb.pending.store(run + (1 << 8) + 1, Ordering::Relaxed);
        return true;
    }
    false
}

/// `pending` holds a run of GoCreates.
const RUN: u64 = 1 << 63;

/// The most GoCreates a run defers (module note, "Deferred creates").
const RUN_MAX: u64 = 64;
/// The bytes of a run's deferred GoCreates: two each.
const RUN_BYTES: usize = 2 * RUN_MAX as usize;

/// `pending` after a GoCreate of goroutine `g` was written: a run whose
/// next id is `g + 1`, empty (0, no run, for an id too large to grow in
/// bits 8-62).
#[inline(always)]
fn run_after(g: u64) -> u64 {
    if g < 1 << 54 {
        RUN | (g + 1) << 8
    } else {
        0
    }
}

/// The buffer of `m`, the calling thread's M: the one its thread claimed,
/// else `NO_BUF`.
#[inline(always)]
fn of_m(m: &M) -> &'static TraceBuf {
    // SAFETY: the slot holds `NO_BUF` or a leaked, never-freed buffer
    // (`claim`, `ExitGuard`), written by this thread only.
    unsafe { &*(m.trace_buf().load(Ordering::Relaxed) as *const TraceBuf) }
}

/// `M::trace_buf`'s value for an M whose thread has claimed no buffer.
pub(super) fn no_buf() -> *mut () {
    &NO_BUF as *const TraceBuf as *mut ()
}

#[inline(always)]
fn emit_in<const STAMP: u8>(tb: &TraceBuf, ty: u8, args: &[u64], bytes: &[u8], floor: u64) -> u64 {
    assert!(args.len() <= 4 && bytes.len() <= super::MAX_NAME);
    // The clock first: its read takes tens of cycles, which the tests
    // below and the deferred events' writes overlap instead of waiting
    // for it (wasted where they send the event to `emit_slow`).
    let tsc = match STAMP {
        CLOCK => cputicks(),
        ORDERED => cputicks_ordered(),
        _ => 0,
    };
    // Enough where `fast_gen` can match below; elsewhere `emit_slow`
    // raises again (module note).
    tb.raise_asymmetric();
    // Acquire: pairs with `start`'s Release store (the session is
    // visible). After the raise: see the module note. `fast_gen` is only
    // written by this thread.
    if LIVE.load(Ordering::Acquire) != tb.fast_gen.load(Ordering::Relaxed) {
        return slow(ty, args, bytes);
    }
    // SAFETY: we own the buffer, `busy` is up and `LIVE` set (`fast_gen` is
    // never 0).
    let inner = unsafe { tb.inner() };
    if inner.pos.addr() + bytes.len() >= inner.limit.addr() {
        return slow(ty, args, bytes);
    }
    // The event deferred since the last one first: a goroutine started on
    // the quick path (its GoStartLocal: the batch's last event is the
    // slice end it follows; module note, "Deferred quick starts"), or the
    // goroutines created after a GoCreate that began a run ("Deferred
    // creates"). Then a GoCreate begins a run; any other event ends it.
    let pending = tb.pending.load(Ordering::Relaxed);
    if pending != 0 {
        // SAFETY: `limit` keeps room for either besides an event's
        // (`begin_batch`).
        unsafe { inner.write_pending(pending) };
    }
    if ty == super::GO_CREATE {
        tb.pending.store(run_after(args[0]), Ordering::Relaxed);
    } else if pending != 0 {
        tb.pending.store(0, Ordering::Relaxed);
    }
    // A constant store: `ty` is a constant where this is inlined.
    tb.slice_ended
        .store(super::ends_slice(ty), Ordering::Relaxed);
    // The batch's previous event's time, where the event may share it:
    // not a batch's first event (`last_ts` 0), nor a GoUnblock whose
    // goroutine blocked after the batch's last stamp; a slice end while
    // slices are short (`skip_ends` is 0 at a batch's start, so the batch
    // has a previous event), which returns it for the GoUnblock's floor.
    let share = match STAMP {
        PREV => inner.last_ts != 0,
        PREV_AFTER => inner.last_ts != 0 && floor <= inner.last_ts as u64,
        END => inner.skip_ends != 0,
        _ => false,
    };
    if share {
        if STAMP == END {
            inner.skip_ends -= 1;
        }
        let ts = if STAMP == END {
            inner.last_ts as u64
        } else {
            0
        };
        // SAFETY: room checked just above.
        unsafe { inner.write_same_time(ty, args) };
        tb.lower();
        return ts;
    }
    // `fast_gen` matched: the session's clock is the TSC, its base and
    // scale copied into the buffer. An event that could not share a time
    // reads it now (it read none above).
    let tsc = match STAMP {
        CLOCK | ORDERED => tsc,
        PREV_AFTER => cputicks_ordered(),
        _ => cputicks(),
    };
    let ts = tsc_scale(tsc, inner.base_tsc, inner.mult).max(inner.last_ts);
    if STAMP == END {
        // Short: the last stamped slice end is recent for the slice ends
        // since (a batch's first slice end never finds it so: `last_end`
        // starts a whole `short_ns` before the session). Branch-free.
        let short = ts - inner.last_end < inner.short_ns;
        inner.short_run = (inner.short_run + 1) * short as u32;
        let skip = (inner.short_run >= SHORT_RUN) as u32 * SKIP_ENDS;
        inner.skip_ends = skip;
        inner.short_ns = SHORT_SLICE_NS * (skip as i64 + 1);
        inner.last_end = ts;
    }
    // SAFETY: room checked just above.
    unsafe { inner.write(ty, ts, args, bytes) };
    tb.lower();
    ts as u64
}

/// `emit_slow` for `emit`: events without name bytes pass their fields by
/// value, in registers, so that the fast path's way out is a tail call
/// (no frame, no spilled fields).
#[inline(always)]
fn slow(ty: u8, args: &[u64], bytes: &[u8]) -> u64 {
    if bytes.is_empty() {
        let a = |i: usize| args.get(i).copied().unwrap_or(0);
        // Five arguments, all in registers (six is the most on x86-64 and
        // aarch64 has eight): with a seventh on the stack the event
        // function needed a frame and callee-saved registers on its fast
        // path too, not only a call here.
        let meta = ty as u64 | (args.len() as u64) << 8;
        emit_slow_fields(meta, a(0), a(1), a(2), a(3))
    } else {
        emit_slow(ty, args, bytes)
    }
}

/// `emit_slow` for up to four fields by value; `meta` packs the type (bits
/// 0-7) and the field count (8-15).
#[cold]
#[inline(never)]
fn emit_slow_fields(meta: u64, a0: u64, a1: u64, a2: u64, a3: u64) -> u64 {
    let args = [a0, a1, a2, a3];
    let n = ((meta >> 8) & 0xff) as usize;
    emit_slow(meta as u8, &args[..n.min(4)], &[])
}

/// Every case of `emit`, out of line: finds (or claims) the buffer, raises
/// `busy` as the barrier's mode wants, resets the buffer for a new session,
/// writes a deferred quick start, begins a batch and reads whichever clock
/// the session uses. May follow a raise by the fast path (raising twice is
/// harmless). Returns the TSC reading of the timestamp, as `emit_m`; this
/// path always reads the clock.
#[cold]
#[inline(never)]
fn emit_slow(ty: u8, args: &[u64], bytes: &[u8]) -> u64 {
    assert!(args.len() <= 4 && bytes.len() <= super::MAX_NAME);
    let Some(tb) = local() else { return 0 };
    tb.raise();
    // SeqCst: without membarrier `raise` is a SeqCst swap, and this load
    // is the other half of the owner's StoreLoad pair (module note): only
    // a SeqCst load is ordered after that swap in C11. An Acquire load
    // was, on x86-64 (after a locked `xchg`) and with aarch64's default
    // `ldar`, but not with `ldapr` (FEAT_LRCPC, e.g. `-C
    // target-cpu=neoverse-n1`), which may be satisfied before the swap's
    // store is visible: then `stop` could see `busy` down and read the
    // buffer while this event writes it. Also the Acquire of `emit`
    // (the session is visible). With membarrier it costs what an
    // Acquire does (`ldar`, a plain `mov` on x86-64).
    let gen = LIVE.load(Ordering::SeqCst);
    let mut stamp = 0;
    if gen != 0 {
        // SAFETY: we own the buffer, `busy` is up and `LIVE` set.
        let inner = unsafe { tb.inner() };
        if inner.gen != gen {
            inner.gen = gen;
            inner.discard();
            tb.slice_ended.store(false, Ordering::Relaxed);
            // A deferred event of an older session's batch (if `collect`
            // did not write it, it came too late for it).
            tb.pending.store(0, Ordering::Relaxed);
        }
        let pending = tb.take_pending();
        if !inner.pos.is_null() && tb.pending_fits(pending) {
            // SAFETY: room kept by `limit`, as on the fast path.
            unsafe { inner.write_pending(pending) };
        }
        let fast = inner.fast_ok && SESSION.use_tsc.load(Ordering::Relaxed);
        if fast {
            inner.base_tsc = SESSION.base_tsc.load(Ordering::Relaxed);
            inner.mult = SESSION.mult.load(Ordering::Relaxed) as i64;
        }
        tb.fast_gen
            .store(if fast { gen } else { NO_GEN }, Ordering::Relaxed);
        if inner.pos.addr() + bytes.len() >= inner.limit.addr() {
            inner.make_room(bytes.len());
        }
        let ts = now_rel().max(inner.last_ts);
        stamp = ts as u64;
        // SAFETY: `make_room` made room (it asserts it).
        unsafe { inner.write(ty, ts, args, bytes) };
        tb.slice_ended
            .store(super::ends_slice(ty), Ordering::Relaxed);
        if ty == super::GO_CREATE {
            tb.pending.store(run_after(args[0]), Ordering::Relaxed);
        }
    }
    tb.lower();
    stamp
}

/// Writes `v` as unsigned LEB128 at `p`; returns the byte after it.
///
/// # Safety
/// `p` is valid for writes of 10 bytes (the longest uvarint).
#[inline(always)]
unsafe fn put_uvarint(mut p: *mut u8, mut v: u64) -> *mut u8 {
    // SAFETY: at most 10 bytes are written (64 bits, 7 per byte), within
    // the room the caller guarantees.
    // The shift's zero test ends the loop (no compare, no copy of `v`).
    // Most values take one byte: a straight line for them, the loop
    // (kept out of the common path's registers) for the rest.
    unsafe {
        if v < 0x80 {
            p.write(v as u8);
            return p.add(1);
        }
        loop {
            let b = v as u8;
            v >>= 7;
            if v == 0 {
                p.write(b);
                return p.add(1);
            }
            p.write(b | 0x80);
            p = p.add(1);
        }
    }
}

/// The most bytes an event takes besides its name: type, delta, 4 fields.
const MAX_EVENT: usize = 1 + 10 * 5;
/// The most bytes a GoStartLocal takes (type, goroutine): `limit` keeps
/// them free after any event, for a deferred quick start.
const START_LOCAL: usize = 1 + 10;

impl Inner {
    /// Drops the batch being filled, if any (no batch begun after).
    fn discard(&mut self) {
        self.data.clear();
        self.pos = ptr::null_mut();
        self.limit = ptr::null_mut();
    }

    fn begin_batch(&mut self) {
        if self.data.capacity() < HEADER + BATCH_BYTES {
            self.data = Vec::with_capacity(HEADER + BATCH_BYTES);
        }
        self.data.clear();
        self.data.push(0xB7);
        self.data.extend_from_slice(&self.m_id.to_le_bytes());
        self.data.extend_from_slice(&[0; 4]);
        let base = self.data.as_mut_ptr();
        // SAFETY: both within the allocation (capacity HEADER + BATCH_BYTES,
        // checked above; MAX_EVENT <= BATCH_BYTES).
        unsafe {
            self.pos = base.add(HEADER);
            self.limit = base.add(HEADER + BATCH_BYTES - MAX_EVENT - START_LOCAL - RUN_BYTES + 1);
        }
        self.last_ts = 0;
        self.skip_ends = 0;
        self.short_run = 0;
        self.last_end = -SHORT_SLICE_NS;
        self.short_ns = SHORT_SLICE_NS;
        self.g_regs = super::REGS_START;
    }

    /// Makes room for an event with `extra` name bytes: completes the full
    /// batch, begins a new one (out of line: once per 64 KiB).
    #[cold]
    #[inline(never)]
    fn make_room(&mut self, extra: usize) {
        if !self.pos.is_null() {
            self.flush();
        }
        self.begin_batch();
        // A fresh batch holds the longest event (MAX_NAME < BATCH_BYTES);
        // `write`'s unsafe stores rely on it.
        assert!(self.pos.addr() + extra < self.limit.addr());
    }

    /// Writes one event at `pos` with timestamp `ts` (relative, not before
    /// `last_ts`).
    ///
    /// # Safety
    /// `pos + bytes.len() < limit` (a batch is begun and the event fits),
    /// and `args.len() <= 4`.
    #[inline(always)]
    unsafe fn write(&mut self, ty: u8, ts: i64, args: &[u64], bytes: &[u8]) {
        let delta = (ts - self.last_ts) as u64;
        self.last_ts = ts;
        let implicit = super::implicit(&self.g_regs, ty, args);
        // SAFETY: written in place, without bounds checks: the event takes
        // at most 1 + 10 * (1 + args.len()) + bytes.len() <= MAX_EVENT +
        // bytes.len() bytes, and `pos + bytes.len() < limit` leaves that
        // much before the batch's end (caller's contract), inside `data`'s
        // allocation. `flush` covers the written bytes with `set_len`.
        unsafe {
            let start = self.pos;
            start.write(ty | if implicit { super::IMPLICIT } else { 0 });
            let p = put_uvarint(start.add(1), delta);
            let p = self.write_fields(ty, p, args, implicit);
            ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len());
            self.pos = p.add(bytes.len());
        }
    }

    /// Writes the deferred event `pending` (`TraceBuf::pending`; nothing
    /// for 0): a run's GoCreates or a GoStartLocal.
    ///
    /// # Safety
    /// As `write_creates` or `write_start_local`.
    #[inline(always)]
    unsafe fn write_pending(&mut self, pending: u64) {
        // SAFETY: the caller's.
        unsafe {
            if pending & RUN != 0 {
                self.write_creates(pending & 0xff);
            } else if pending != 0 {
                self.write_start_local(pending);
            }
        }
    }

    /// Writes `n` deferred GoCreates of a run (module note, "Deferred
    /// creates"): each of the goroutine after the last one created, so
    /// one byte for its id, with the time, parent and P of the GoCreate
    /// just before it.
    ///
    /// # Safety
    /// `pos` is valid for writes of `RUN_BYTES` bytes: `limit` keeps them
    /// free after any event (`begin_batch`); the batch's last event is the
    /// run's first GoCreate.
    #[inline(always)]
    unsafe fn write_creates(&mut self, n: u64) {
        const BYTE: u8 = super::GO_CREATE | super::SAME_TIME | super::IMPLICIT;
        // SAFETY: 2 * n <= RUN_BYTES bytes (`defer_create` keeps n <=
        // RUN_MAX), within the caller's room.
        unsafe {
            for _ in 0..n {
                self.pos.write(BYTE);
                self.pos.add(1).write(super::zigzag(1) as u8);
                self.pos = self.pos.add(2);
            }
        }
        self.g_regs[1] = self.g_regs[1].wrapping_add(n);
    }

    /// Writes a GoStartLocal of goroutine `g`: a GoStart with the
    /// timestamp and the P of the slice end just before it (the batch's
    /// last event), which the reader takes from that event.
    ///
    /// # Safety
    /// `pos` is valid for writes of `START_LOCAL` bytes: `limit` keeps
    /// them free after any event (`begin_batch`).
    #[inline(always)]
    unsafe fn write_start_local(&mut self, g: u64) {
        let v = super::g_encode(&mut self.g_regs, super::G_START, g);
        // SAFETY: at most `START_LOCAL` bytes, within the caller's room.
        unsafe {
            self.pos.write(super::GO_START_LOCAL);
            self.pos = put_uvarint(self.pos.add(1), v);
        }
    }

    /// Writes an event of type `ty` with the timestamp of the batch's
    /// previous event (there is one): its type with `SAME_TIME` set, no
    /// delta, then its fields as `write` does.
    ///
    /// # Safety
    /// As `write`'s, with no name bytes.
    #[inline(always)]
    unsafe fn write_same_time(&mut self, ty: u8, args: &[u64]) {
        let implicit = super::implicit(&self.g_regs, ty, args);
        // SAFETY: as `write`: at most 1 + 10 * args.len() bytes.
        unsafe {
            let start = self.pos;
            start.write(ty | super::SAME_TIME | if implicit { super::IMPLICIT } else { 0 });
            self.pos = self.write_fields(ty, start.add(1), args, implicit);
        }
    }

    /// Writes the fields `args` of an event of type `ty` at `p` (ids
    /// against the registers; with `implicit`, not the implied ones);
    /// returns the byte after them.
    ///
    /// # Safety
    /// `p` is valid for writes of `10 * args.len()` bytes.
    #[inline(always)]
    unsafe fn write_fields(&mut self, ty: u8, p: *mut u8, args: &[u64], implicit: bool) -> *mut u8 {
        // One call per field index, not a loop: each folds to nothing or
        // to one field's write where this is inlined (a loop with a test
        // per field was not unrolled).
        // SAFETY: within the room the caller guarantees.
        unsafe {
            let p = self.write_field::<0>(ty, p, args, implicit);
            let p = self.write_field::<1>(ty, p, args, implicit);
            let p = self.write_field::<2>(ty, p, args, implicit);
            self.write_field::<3>(ty, p, args, implicit)
        }
    }

    /// `write_fields`' field `I`, if the event has it and writes it.
    ///
    /// # Safety
    /// `p` is valid for writes of 10 bytes.
    #[inline(always)]
    unsafe fn write_field<const I: usize>(
        &mut self,
        ty: u8,
        p: *mut u8,
        args: &[u64],
        implicit: bool,
    ) -> *mut u8 {
        if I >= args.len() || (implicit && super::implied(ty, I)) {
            return p;
        }
        let v = super::encode_field(&mut self.g_regs, ty, I, args[I]);
        // SAFETY: within the room the caller guarantees.
        unsafe { put_uvarint(p, v) }
    }

    /// Completes the batch being filled (one is begun) and hands it to the
    /// writer.
    fn flush(&mut self) {
        // SAFETY: a begun batch's `pos` lies in `data`'s allocation, at or
        // after its header.
        let used = unsafe { self.pos.offset_from(self.data.as_ptr()) } as usize;
        // SAFETY: the header (pushed) and the events (written by `write`)
        // initialise every byte before `pos`, within the capacity.
        unsafe { self.data.set_len(used) };
        self.pos = ptr::null_mut();
        self.limit = ptr::null_mut();
        let len = (used - HEADER) as u32;
        self.data[5..9].copy_from_slice(&len.to_le_bytes());
        let mut q = lock(&QUEUE);
        if q.gen != self.gen || q.done {
            // A batch of a finished session: nowhere to go.
            return;
        }
        if q.ring.is_none() && q.batches.len() >= MAX_QUEUED {
            q.dropped += count_events(&self.data[HEADER..]);
            return;
        }
        // Copied under the lock (a microsecond or two): the writer takes
        // it once per batch.
        let mut batch = q.free.pop().unwrap_or_default();
        copy_out(&self.data, &mut batch);
        if q.ring.is_some() {
            q.keep(batch, self.last_ts);
            return;
        }
        q.batches.push_back(batch);
        // Only a sleeping writer is woken, and only for a few batches: a
        // wake-up is a system call here and a context switch there, each
        // batch's at skynet's pace (module note, "The writer").
        let wake = q.writer_sleeps && q.batches.len() >= WAKE_BATCHES;
        drop(q);
        if wake {
            QUEUE_CV.notify_one();
        }
    }
}

/// The writer's queue (module note), or the flight recorder's ring.
struct Queue {
    gen: u64,
    batches: VecDeque<Vec<u8>>,
    /// The flight recorder's ring (module note, "The flight recorder"):
    /// `Some` while one runs, and then `batches` is unused.
    ring: Option<Ring>,
    /// Emptied buffers for reuse.
    free: Vec<Vec<u8>>,
    dropped: u64,
    /// The writer waits on `QUEUE_CV` for batches.
    writer_sleeps: bool,
    /// `stop` collected the last batches: write the trailer and finish.
    done: bool,
    end_ns: i64,
}

static QUEUE: Mutex<Queue> = Mutex::new(Queue {
    gen: 0,
    batches: VecDeque::new(),
    ring: None,
    free: Vec::new(),
    dropped: 0,
    writer_sleeps: false,
    done: false,
    end_ns: 0,
});
static QUEUE_CV: Condvar = Condvar::new();

/// The flight recorder's full batches, oldest first, within its bounds.
struct Ring {
    /// Each batch with the timestamp of its last event (relative to the
    /// session's start).
    batches: VecDeque<(Vec<u8>, i64)>,
    /// Bytes of the batches held.
    bytes: usize,
    age_ns: i64,
    max_bytes: usize,
}

impl Queue {
    /// Keeps a full batch in the ring, whose last event is at `end`, then
    /// drops the oldest batches beyond the byte bound or the age (measured
    /// from `end`, the newest time known here).
    fn keep(&mut self, batch: Vec<u8>, end: i64) {
        let Some(ring) = self.ring.as_mut() else {
            return;
        };
        ring.bytes += batch.len();
        ring.batches.push_back((batch, end));
        while let Some((front, front_end)) = ring.batches.front() {
            let over = ring.bytes > ring.max_bytes && ring.batches.len() > 1;
            if !over && *front_end >= end.saturating_sub(ring.age_ns) {
                break;
            }
            ring.bytes -= front.len();
            let (old, _) = ring.batches.pop_front().expect("front exists");
            if self.free.len() < 64 {
                self.free.push(old);
            }
        }
    }
}

/// Copies `src` into `dst` (empty, any capacity) with stores that bypass
/// this core's caches where the target has them: the batch's storage
/// stays hot in the cache for the next batch's events, and the copy
/// neither pollutes the cache nor reads the destination's lines first.
fn copy_out(src: &[u8], dst: &mut Vec<u8>) {
    dst.clear();
    dst.reserve(src.len());
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
        let d = dst.as_mut_ptr();
        let n = src.len();
        let lead = d.align_offset(16).min(n);
        // SAFETY: `dst` has capacity for `n` bytes (reserved above), `src`
        // holds `n`, and the two are distinct allocations. The streaming
        // stores are 16-byte aligned (`lead` skips to the alignment) and
        // within the first `n` bytes; SSE2 is part of x86-64. The fence
        // orders them before the queue's unlock that hands `dst` to the
        // writer (streaming stores are weakly ordered). Every byte below
        // `n` is written before `set_len`.
        unsafe {
            ptr::copy_nonoverlapping(src.as_ptr(), d, lead);
            let mut i = lead;
            while i + 16 <= n {
                let v = _mm_loadu_si128(src.as_ptr().add(i).cast::<__m128i>());
                _mm_stream_si128(d.add(i).cast::<__m128i>(), v);
                i += 16;
            }
            ptr::copy_nonoverlapping(src.as_ptr().add(i), d.add(i), n - i);
            _mm_sfence();
            dst.set_len(n);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    dst.extend_from_slice(src);
}

/// What a running session writes to.
enum Running {
    /// A trace file, written by this writer thread.
    File(JoinHandle<io::Result<()>>),
    /// The flight recorder's ring (`QUEUE.ring`).
    Flight(Flight),
}

/// A running flight recorder: what a snapshot's header says.
struct Flight {
    start_ns: i64,
    unix_ns: u64,
    gomaxprocs: u32,
    age_ns: i64,
    /// Where the snapshots written on a crash or SIGQUIT go.
    dir: PathBuf,
}

/// Serialises `start`, `stop` and the flight recorder's snapshots; holds
/// what the running session writes to.
static CONTROL: Mutex<Option<Running>> = Mutex::new(None);

/// The trace file's header (docs/trace-format.md).
fn header(start_ns: i64, unix_ns: u64, gomaxprocs: u32) -> Vec<u8> {
    let mut header = Vec::with_capacity(40);
    header.extend_from_slice(b"GRTRACE\0");
    header.extend_from_slice(&super::VERSION.to_le_bytes());
    header.extend_from_slice(&0u32.to_le_bytes());
    header.extend_from_slice(&(start_ns as u64).to_le_bytes());
    header.extend_from_slice(&unix_ns.to_le_bytes());
    header.extend_from_slice(&gomaxprocs.to_le_bytes());
    header.extend_from_slice(&0u32.to_le_bytes());
    header
}

/// The trailer (docs/trace-format.md).
fn trailer(end_ns: i64, dropped: u64) -> [u8; 17] {
    let mut trailer = [0u8; 17];
    trailer[0] = 0xE0;
    trailer[1..9].copy_from_slice(&(end_ns as u64).to_le_bytes());
    trailer[9..17].copy_from_slice(&dropped.to_le_bytes());
    trailer
}

/// Begins a new session's clock and generation (under `CONTROL`, with
/// `LIVE` clear): returns the generation, the start (nanotime) and the
/// wall clock at the start.
fn new_session() -> (u64, i64, u64) {
    static MEMBARRIER: OnceLock<bool> = OnceLock::new();
    let asym = *MEMBARRIER.get_or_init(crate::sys::membarrier_register);
    ASYMMETRIC.store(asym, Ordering::Relaxed);
    let s = &SESSION;
    let gen = s.gen.load(Ordering::Relaxed) + 1;
    let mult = tsc_mult();
    s.use_tsc.store(mult.is_some(), Ordering::Relaxed);
    s.mult.store(mult.unwrap_or(0), Ordering::Relaxed);
    s.base_tsc.store(cputicks(), Ordering::Relaxed);
    let start_ns = nanotime();
    s.start_ns.store(start_ns, Ordering::Relaxed);
    s.gen.store(gen, Ordering::Relaxed);
    let unix_ns = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    (gen, start_ns, unix_ns)
}

/// Turns generation `gen` on (the session is written): every event site
/// from now on records, then the atexit hook, sysmon's samples and the
/// names of the goroutines that exist.
fn go_live(gen: u64, control: MutexGuard<'_, Option<Running>>) {
    // Release: the session is visible to whoever sees `LIVE` (Acquire in
    // `emit`).
    LIVE.store(gen, Ordering::Release);
    super::ON.store(true, Ordering::Relaxed);
    drop(control);
    static ATEXIT: Once = Once::new();
    ATEXIT.call_once(|| crate::sys::at_exit(at_exit));
    // sysmon samples while tracing: it must not stay in its deep sleep.
    (super::hooks().wake_sysmon)();
    for (g, name) in crate::g::names() {
        super::go_name(g, &name);
    }
}

fn already() -> io::Error {
    io::Error::new(io::ErrorKind::AlreadyExists, "tracing is already enabled")
}

pub(super) fn start(path: &Path, gomaxprocs: u32) -> io::Result<()> {
    let mut control = lock(&CONTROL);
    if control.is_some() {
        return Err(already());
    }
    // Smaller than a full batch (64 KiB less at most one event), so that
    // full batches go to the file without a copy; the header, the trailer
    // and short batches collected by `stop` are buffered.
    let mut out = BufWriter::with_capacity(BATCH_BYTES / 2, File::create(path)?);
    let (gen, start_ns, unix_ns) = new_session();
    out.write_all(&header(start_ns, unix_ns, gomaxprocs))?;
    {
        let mut q = lock(&QUEUE);
        q.gen = gen;
        q.batches.clear();
        q.ring = None;
        q.dropped = 0;
        q.done = false;
        q.end_ns = 0;
    }
    let writer = std::thread::Builder::new()
        .name("goroutine-trace".into())
        .spawn(move || writer(out))?;
    // A runtime thread for checkdead while it lives (until `stop` joins it).
    (super::hooks().thread_started)();
    *control = Some(Running::File(writer));
    go_live(gen, control);
    Ok(())
}

/// Starts the flight recorder (`crate::trace::FlightRecorder`): a session
/// whose full batches go to the ring, keeping the last `age` (at most
/// `max_bytes` of batches); `dir` receives the snapshots of a crash.
pub(super) fn flight_start(
    age: Duration,
    max_bytes: usize,
    dir: PathBuf,
    gomaxprocs: u32,
) -> io::Result<()> {
    let mut control = lock(&CONTROL);
    if control.is_some() {
        return Err(already());
    }
    let (gen, start_ns, unix_ns) = new_session();
    let age_ns = i64::try_from(age.as_nanos()).unwrap_or(i64::MAX);
    {
        let mut q = lock(&QUEUE);
        q.gen = gen;
        q.batches.clear();
        q.ring = Some(Ring {
            batches: VecDeque::new(),
            bytes: 0,
            age_ns,
            max_bytes,
        });
        q.dropped = 0;
        q.done = false;
        q.end_ns = 0;
    }
    *control = Some(Running::Flight(Flight {
        start_ns,
        unix_ns,
        gomaxprocs,
        age_ns,
        dir,
    }));
    go_live(gen, control);
    Ok(())
}

/// Whether the flight recorder runs.
pub(super) fn flight_running() -> bool {
    matches!(*lock(&CONTROL), Some(Running::Flight(_)))
}

extern "C" fn at_exit() {
    if let Err(e) = stop(Which::Any) {
        eprintln!("goroutine: trace: {e}");
    }
}

/// Turns the session off and collects every thread's last batch (`stop`'s
/// side of the busy-flag protocol, module note): into the writer's queue,
/// or the flight recorder's ring. With `patient` false (a crash), a thread
/// that stays inside an event for a second is skipped. With `release`
/// (a stop), each thread's batch storage is freed too (a new session's
/// first event allocates it again): kept, it would hold 64 KiB for every
/// thread that ever traced.
fn collect(patient: bool, release: bool) {
    // SeqCst: ordered before the loads of `busy` below (module note).
    super::ON.store(false, Ordering::Relaxed);
    LIVE.store(0, Ordering::SeqCst);
    if ASYMMETRIC.load(Ordering::Relaxed) && !crate::sys::membarrier() {
        // Registered at start, so this cannot fail; if it did, the owners'
        // stores might not be visible yet: give them a moment.
        std::thread::sleep(Duration::from_millis(10));
    }
    let gen = SESSION.gen.load(Ordering::Relaxed);
    let all = lock(&ALL).clone();
    for tb in all {
        if patient {
            tb.wait_idle();
        } else if !tb.wait_idle_for(Duration::from_secs(1)) {
            continue;
        }
        // SAFETY: `LIVE` is clear and `busy` down: the owner writes nothing
        // more; claim/exit are excluded by `CONTROL` (module note).
        let inner = unsafe { tb.inner() };
        // The deferred event, unless the owner stores it after this (its
        // next event then belongs to no batch of this generation).
        let pending = tb.pending.swap(0, Ordering::Relaxed);
        if inner.gen == gen && !inner.pos.is_null() {
            if pending != 0 && tb.pending_fits(pending) {
                // SAFETY: room kept by `limit` (`begin_batch`).
                unsafe { inner.write_pending(pending) };
                tb.slice_ended.store(false, Ordering::Relaxed);
            }
            inner.flush();
        }
        if release {
            inner.discard();
            inner.data = Vec::new();
        }
    }
}

/// Which session a stop ends.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Which {
    /// Whichever runs (the atexit hook).
    Any,
    File,
    Flight,
}

pub(super) fn stop(which: Which) -> io::Result<()> {
    let mut control = lock(&CONTROL);
    let wanted = match &*control {
        None => return Ok(()),
        Some(Running::File(_)) => which != Which::Flight,
        Some(Running::Flight(_)) => which != Which::File,
    };
    if !wanted {
        return Ok(());
    }
    let running = control.take().expect("checked just above");
    collect(true, true);
    let writer = match running {
        Running::File(w) => w,
        Running::Flight(_) => {
            let mut q = lock(&QUEUE);
            q.done = true;
            if let Some(ring) = q.ring.take() {
                for (b, _) in ring.batches {
                    if q.free.len() < 64 {
                        q.free.push(b);
                    }
                }
            }
            return Ok(());
        }
    };
    {
        let mut q = lock(&QUEUE);
        q.end_ns = now();
        q.done = true;
    }
    QUEUE_CV.notify_all();
    let r = writer.join();
    (super::hooks().thread_exited)();
    match r {
        Ok(r) => r,
        Err(_) => Err(io::Error::other("the trace writer panicked")),
    }
}

/// Writes the flight recorder's window to `w` as a complete trace (module
/// note, "The flight recorder"): collects every thread's batch in the
/// making, copies the ring, and (unless `resume` is false: a crash) goes
/// on recording at once with a new generation. Returns the bytes written.
pub(super) fn flight_write(w: &mut dyn Write, resume: bool) -> io::Result<u64> {
    flight_write_locked(lock(&CONTROL), w, resume)
}

fn flight_write_locked(
    control: MutexGuard<'_, Option<Running>>,
    w: &mut dyn Write,
    resume: bool,
) -> io::Result<u64> {
    let Some(Running::Flight(f)) = &*control else {
        return Err(io::Error::other("the flight recorder is not running"));
    };
    let (start_ns, unix_ns, gomaxprocs, age_ns) = (f.start_ns, f.unix_ns, f.gomaxprocs, f.age_ns);
    collect(resume, false);
    let end_rel = now_rel();
    let batches: Vec<Vec<u8>> = {
        let q = lock(&QUEUE);
        q.ring
            .as_ref()
            .map(|r| r.batches.iter().map(|(b, _)| b.clone()).collect())
            .unwrap_or_default()
    };
    if resume {
        // The same clock (start and TSC base), a new generation: each
        // buffer, collected above, begins a new batch at its next event.
        let gen = SESSION.gen.load(Ordering::Relaxed) + 1;
        SESSION.gen.store(gen, Ordering::Relaxed);
        lock(&QUEUE).gen = gen;
        go_live(gen, control);
    } else {
        drop(control);
    }
    let cutoff = end_rel.saturating_sub(age_ns).max(0);
    let mut out = Vec::with_capacity(batches.iter().map(Vec::len).sum::<usize>() + 4096);
    out.extend_from_slice(&header(start_ns, unix_ns, gomaxprocs));
    // The names of the goroutines alive now, at the window's start: the
    // GoNames of the recorder's start may have left the ring.
    let mut names = Vec::new();
    let mut last = 0;
    let mut regs = super::REGS_START;
    for (g, name) in crate::g::names() {
        let mut end = name.len().min(super::MAX_NAME);
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        names.push(super::GO_NAME);
        push_uvarint(&mut names, (cutoff - last) as u64);
        last = cutoff;
        push_uvarint(
            &mut names,
            super::encode_field(&mut regs, super::GO_NAME, 0, g),
        );
        push_uvarint(&mut names, end as u64);
        names.extend_from_slice(&name.as_bytes()[..end]);
        if names.len() > BATCH_BYTES - MAX_EVENT - super::MAX_NAME {
            push_batch(&mut out, u32::MAX, &names);
            names.clear();
            last = 0;
            regs = super::REGS_START;
        }
    }
    if !names.is_empty() {
        push_batch(&mut out, u32::MAX, &names);
    }
    for b in &batches {
        trim_into(&mut out, b, cutoff);
    }
    out.extend_from_slice(&trailer(start_ns + end_rel, 0));
    w.write_all(&out)?;
    w.flush()?;
    Ok(out.len() as u64)
}

/// A crash or SIGQUIT: if the flight recorder runs, writes its window to a
/// new file in its directory and says where on stderr (`why` names the
/// occasion). Never waits long for a lock or a thread (the process is
/// about to end).
pub(super) fn flight_dump(why: &str) {
    let control = {
        let deadline = std::time::Instant::now() + Duration::from_secs(1);
        loop {
            match CONTROL.try_lock() {
                Ok(c) => break c,
                Err(std::sync::TryLockError::Poisoned(e)) => break e.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => {
                    if std::time::Instant::now() > deadline {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
    };
    let Some(Running::Flight(f)) = &*control else {
        return;
    };
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let path = f.dir.join(format!(
        "goroutine-flight-{}-{}.trace",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let r = File::create(&path).and_then(|mut file| flight_write_locked(control, &mut file, false));
    match r {
        Ok(_) => eprintln!(
            "goroutine: flight recorder ({why}): trace written to {}",
            path.display()
        ),
        Err(e) => eprintln!(
            "goroutine: flight recorder ({why}): cannot write {}: {e}",
            path.display()
        ),
    }
}

fn push_uvarint(v: &mut Vec<u8>, mut x: u64) {
    loop {
        let b = x as u8 & 0x7f;
        x >>= 7;
        if x == 0 {
            v.push(b);
            return;
        }
        v.push(b | 0x80);
    }
}

/// How many events a batch's payload holds (counted only when a batch is
/// dropped, so that writing an event need not count).
fn count_events(payload: &[u8]) -> u64 {
    let (mut i, mut n) = (0, 0);
    while i < payload.len() {
        let (ty, timed, implicit) = type_of(payload[i]);
        i += 1;
        if timed {
            read_uvarint(payload, &mut i);
        }
        let mut last = 0;
        for f in 0..super::field_count(ty) {
            if !(implicit && super::implied(ty, f)) {
                last = read_uvarint(payload, &mut i);
            }
        }
        if ty == super::GO_NAME {
            i += last as usize;
        }
        n += 1;
    }
    n
}

/// An event's type byte: its type, whether a `ts_delta` follows (not for
/// a GoStartLocal, nor with `SAME_TIME`), and whether it carries
/// `IMPLICIT`.
fn type_of(b: u8) -> (u8, bool, bool) {
    let ty = b & super::TYPE_BITS;
    let timed = b & super::SAME_TIME == 0 && ty != super::GO_START_LOCAL;
    (ty, timed, b & super::IMPLICIT != 0)
}

/// Reads a uvarint of `b` at `*i` (a batch this module wrote).
fn read_uvarint(b: &[u8], i: &mut usize) -> u64 {
    let mut x = 0u64;
    let mut shift = 0;
    while let Some(&byte) = b.get(*i) {
        *i += 1;
        x |= ((byte & 0x7f) as u64) << shift.min(63);
        shift += 7;
        if byte & 0x80 == 0 {
            break;
        }
    }
    x
}

/// Appends a batch record of `m_id` holding `payload`.
fn push_batch(out: &mut Vec<u8>, m_id: u32, payload: &[u8]) {
    out.push(0xB7);
    out.extend_from_slice(&m_id.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(payload);
}

/// Appends the events of `batch` (a whole batch record, header
/// included) at or after `cutoff` (relative to the session's start): the
/// first one kept gets its time from the start as its delta, as a batch's
/// first event has, and the kept events are written again against the new
/// batch's registers (`mod.rs`, `Regs`): goroutine id differences and
/// implied fields (`IMPLICIT`) chain through the events cut. Nothing if
/// none is kept.
fn trim_into(out: &mut Vec<u8>, batch: &[u8], cutoff: i64) {
    let m_id = u32::from_le_bytes(batch[1..5].try_into().expect("4 bytes"));
    let payload = &batch[HEADER..];
    let mut i = 0;
    let mut ts = 0i64;
    // The registers as written, and in the new batch.
    let mut regs = super::REGS_START;
    let mut new_regs = super::REGS_START;
    let mut kept: Option<Vec<u8>> = None;
    // The P of the last slice end (GoEnd, GoBlock, GoStop): a
    // GoStartLocal's.
    let mut slice_p = 0u64;
    let mut fields = [0u64; 4];
    while i < payload.len() {
        let at = i;
        let (ty, timed, implicit) = type_of(payload[i]);
        i += 1;
        let delta = if timed {
            read_uvarint(payload, &mut i)
        } else {
            0
        };
        ts += delta as i64;
        let n = super::field_count(ty);
        for (f, slot) in fields.iter_mut().enumerate().take(n) {
            let v = (!(implicit && super::implied(ty, f))).then(|| read_uvarint(payload, &mut i));
            *slot = super::decode_field(&mut regs, ty, f, v);
        }
        let name = if ty == super::GO_NAME {
            let end = (i + fields[1] as usize).min(payload.len());
            let name = &payload[i..end];
            i = end;
            name
        } else {
            &[]
        };
        let local = ty == super::GO_START_LOCAL;
        match &mut kept {
            None if ts < cutoff => {}
            None if at == 0 => {
                out.extend_from_slice(batch);
                return;
            }
            // The first kept event gets its time; a GoStartLocal becomes a
            // GoStart: the slice end whose time and P it took was cut.
            None if local => {
                let mut k = Vec::new();
                encode_into(
                    &mut k,
                    &mut new_regs,
                    super::GO_START,
                    Some(ts as u64),
                    &[fields[0], slice_p],
                    &[],
                );
                kept = Some(k);
            }
            None => {
                let mut k = Vec::new();
                encode_into(
                    &mut k,
                    &mut new_regs,
                    ty,
                    Some(ts as u64),
                    &fields[..n],
                    name,
                );
                kept = Some(k);
            }
            Some(k) => {
                encode_into(
                    k,
                    &mut new_regs,
                    ty,
                    timed.then_some(delta),
                    &fields[..n],
                    name,
                );
            }
        }
        if super::ends_slice(ty) {
            slice_p = fields[1];
        }
    }
    if let Some(k) = kept {
        push_batch(out, m_id, &k);
    }
}

/// Appends an event of type `ty` (its `ts_delta`, `None` for `SAME_TIME`
/// or a GoStartLocal) with `fields` and name bytes `name`, written against
/// `regs` as the tracer's fast path writes it (`Inner::write`).
fn encode_into(
    out: &mut Vec<u8>,
    regs: &mut super::Regs,
    ty: u8,
    delta: Option<u64>,
    fields: &[u64],
    name: &[u8],
) {
    let implicit = super::implicit(regs, ty, fields);
    let mut byte = ty;
    if implicit {
        byte |= super::IMPLICIT;
    }
    if delta.is_none() && ty != super::GO_START_LOCAL {
        byte |= super::SAME_TIME;
    }
    out.push(byte);
    if let Some(d) = delta {
        push_uvarint(out, d);
    }
    for (f, &a) in fields.iter().enumerate() {
        if !(implicit && super::implied(ty, f)) {
            push_uvarint(out, super::encode_field(regs, ty, f, a));
        }
    }
    out.extend_from_slice(name);
}

/// The writer thread: drains the queue into the file, then writes the
/// trailer.
fn writer(mut out: BufWriter<File>) -> io::Result<()> {
    // Best effort (module note, "The writer"): a failure leaves it as it
    // was.
    crate::sys::thread::lower_priority();
    let mut result = Ok(());
    let mut batches = Vec::new();
    let mut period = WRITER_PERIOD;
    loop {
        let (done, end_ns, dropped) = {
            let mut q = lock(&QUEUE);
            while q.batches.is_empty() && !q.done {
                q.writer_sleeps = true;
                q = QUEUE_CV
                    .wait_timeout(q, period)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
                q.writer_sleeps = false;
                // An empty look (a timeout, or a spurious wake-up) backs
                // off (module note, "The writer").
                period = (period * 2).min(WRITER_PERIOD_MAX);
            }
            period = WRITER_PERIOD;
            batches.extend(q.batches.drain(..));
            (q.done, q.end_ns, q.dropped)
        };
        for b in batches.drain(..) {
            if result.is_ok() {
                result = out.write_all(&b);
            }
            let mut q = lock(&QUEUE);
            if q.free.len() < 64 {
                q.free.push(b);
            }
        }
        if done {
            let trailer = trailer(end_ns, dropped);
            result = result
                .and_then(|_| out.write_all(&trailer))
                .and_then(|_| out.flush());
            return result;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{GO_BLOCK, GO_CREATE, GO_END, GO_START_LOCAL, IMPLICIT, SAME_TIME};
    use super::*;

    /// Appends one event of type byte `byte` (with a delta unless a
    /// GoStartLocal or `SAME_TIME`), its fields implied where they may be.
    fn put(b: &mut Vec<u8>, regs: &mut super::super::Regs, byte: u8, delta: u64, fields: &[u64]) {
        let (ty, timed, _) = type_of(byte);
        encode_into(b, regs, ty, timed.then_some(delta), fields, &[]);
    }

    /// The events of a batch record: (type, absolute time, fields), implied
    /// fields filled in.
    fn events(batch: &[u8]) -> Vec<(u8, u64, Vec<u64>)> {
        let payload = &batch[HEADER..];
        let (mut i, mut ts, mut regs) = (0, 0, super::super::REGS_START);
        let mut out = Vec::new();
        while i < payload.len() {
            let (ty, timed, implicit) = type_of(payload[i]);
            i += 1;
            if timed {
                ts += read_uvarint(payload, &mut i);
            }
            let fields = (0..super::super::field_count(ty))
                .map(|f| {
                    let implied = implicit && super::super::implied(ty, f);
                    let v = (!implied).then(|| read_uvarint(payload, &mut i));
                    super::super::decode_field(&mut regs, ty, f, v)
                })
                .collect();
            out.push((ty, ts, fields));
        }
        out
    }

    /// The streaming copy writes every byte and no more, whatever the
    /// length, the source's alignment and the destination's contents and
    /// capacity.
    #[test]
    fn copy_out_copies_exactly() {
        let src: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
        for len in (0..70).chain([255, 256, 257, 999, 1000]) {
            for skip in 0..3 {
                let part = &src[skip..skip + len.min(1000 - skip)];
                let mut dst = Vec::with_capacity(skip * 5);
                dst.push(0xEE);
                copy_out(part, &mut dst);
                assert_eq!(dst, part, "len {len}, skip {skip}");
            }
        }
    }

    #[test]
    fn trim_rebases_times_and_goroutine_ids() {
        let mut payload = Vec::new();
        let mut regs = super::super::REGS_START;
        put(&mut payload, &mut regs, GO_CREATE, 10, &[500, 100, 2]);
        put(&mut payload, &mut regs, GO_END, 10, &[100, 2]);
        put(&mut payload, &mut regs, GO_START_LOCAL, 0, &[500]);
        put(&mut payload, &mut regs, GO_BLOCK, 10, &[500, 2, 3]);
        put(&mut payload, &mut regs, GO_CREATE, 5, &[501, 500, 2]);
        put(
            &mut payload,
            &mut regs,
            GO_CREATE | SAME_TIME,
            0,
            &[502, 500, 2],
        );
        let mut batch = Vec::new();
        push_batch(&mut batch, 7, &payload);
        let all = events(&batch);
        assert_eq!(all.len(), 6);
        assert_eq!(count_events(&batch[HEADER..]), 6);
        assert_eq!(all[2], (GO_START_LOCAL, 20, vec![500]));
        assert_eq!(all[5], (GO_CREATE, 35, vec![502, 500, 2]));
        // The GoEnd, the GoBlock and the later GoCreates imply their
        // running goroutine and P; the first event cannot.
        let bytes = &batch[HEADER..];
        assert_eq!(bytes[0] & IMPLICIT, 0);
        let implied = events_bytes(bytes)
            .iter()
            .filter(|&&b| b & IMPLICIT != 0)
            .count();
        assert_eq!(implied, 4);
        // Nothing cut: the batch as it was.
        let mut out = Vec::new();
        trim_into(&mut out, &batch, 10);
        assert_eq!(out, batch);
        // Cut at each later time: the events at or after it, unchanged.
        for cutoff in [11, 20, 21, 30, 35] {
            let mut out = Vec::new();
            trim_into(&mut out, &batch, cutoff);
            let want: Vec<_> = all
                .iter()
                .filter(|e| e.1 >= cutoff as u64)
                .cloned()
                .collect();
            assert_eq!(events(&out), want, "cut at {cutoff}");
        }
        let mut out = Vec::new();
        trim_into(&mut out, &batch, 36);
        assert!(out.is_empty());
    }

    /// The type bytes of a payload's events.
    fn events_bytes(payload: &[u8]) -> Vec<u8> {
        let (mut i, mut out) = (0, Vec::new());
        while i < payload.len() {
            let (ty, timed, implicit) = type_of(payload[i]);
            out.push(payload[i]);
            i += 1;
            if timed {
                read_uvarint(payload, &mut i);
            }
            for f in 0..super::super::field_count(ty) {
                if !(implicit && super::super::implied(ty, f)) {
                    read_uvarint(payload, &mut i);
                }
            }
        }
        out
    }
}
