//! The execution tracer's engine: the event sites the scheduler calls,
//! the per-thread buffers and the writer (the public control is
//! `crate::trace`; the format is `docs/trace-format.md`).
//!
//! # Cost
//! Off, each event site is one predictable branch on a global flag
//! (`on()`); the emit functions are `#[cold]` and out of line. On, an event
//! costs a time-stamp counter read (not a GoStart on the scheduler's quick
//! path: it shares the timestamp of the slice end just before it, and is
//! not even a call, the thread's next event writing it; nor a GoCreate or
//! GoUnblock from a running goroutine: it takes the batch's previous
//! event's time; see `buf.rs`, "Shared timestamps" and "Deferred quick
//! starts"), a few varint bytes (fields that repeat the batch's running
//! goroutine and P left out: "Implied fields" in docs/trace-format.md)
//! written in place into
//! the calling thread's buffer, and two plain stores of a busy flag that
//! let `stop` collect every buffer safely (its StoreLoad barrier is a
//! `membarrier` issued by `stop`, so the hot path has no locked
//! instruction; see `buf.rs`). Full buffers (64 KiB) go to a writer
//! thread. Each event function is one call with the buffer write inlined: its
//! fast path tests two words (the session's generation against the
//! buffer's, the room left), reads the TSC, and
//! writes the varints through a raw pointer into the batch's reserved
//! room; everything else (first event, new session, full batch, no TSC or
//! no membarrier) is one tail call to an out-of-line path. Full batches
//! reach the file without a copy. What this costs on skynet, the
//! event-heaviest workload, is in BENCHMARKS.md.
//!
//! # Design
//! - Buffers (`buf.rs`): one per OS thread (an M, sysmon, or a plain thread
//!   that spawns or wakes goroutines), each a batch in the making, with
//!   the M id in its batch header (threads that are not Ms get ids counting
//!   down from `u32::MAX`: sysmon is `u32::MAX`).
//! - Sessions: a start bumps a generation; a buffer whose generation is
//!   older is reset before its next event, so a batch never mixes traces.
//! - Timestamps: the invariant TSC scaled to nanotime where available
//!   (calibrated against nanotime at the first start, 2 ms), else nanotime.
//!   Within a batch they never go backwards (clamped), as the format wants.
//! - Goroutines that exist when tracing starts appear from their next event
//!   (GoStart, GoUnblock...), without a GoCreate; named ones get a GoName at
//!   start. Ms holding a P at start get no ProcStart.

mod buf;

use crate::g::G;
use crate::m::M;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Tracing is on: the one flag every event site tests (a hint: the
/// buffers' protocol has its own word, `buf.rs`).
static ON: AtomicBool = AtomicBool::new(false);

/// Is a trace being written? Every event site tests this first:
/// `if tracer::on() { tracer::event(..) }`.
#[inline(always)]
pub(crate) fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Starts writing a trace to `path` for a runtime of `gomaxprocs` Ps
/// (`crate::trace::start`, which starts the runtime first). Fails if a
/// trace is already being written or the file cannot be created.
pub(crate) fn start(path: &Path, gomaxprocs: u32) -> io::Result<()> {
    buf::start(path, gomaxprocs)
}

/// Stops the trace (`crate::trace::stop`); a no-op if none is running
/// (a flight recorder goes on).
pub(crate) fn stop() -> io::Result<()> {
    buf::stop(buf::Which::File)
}

/// Stops the flight recorder (`FlightRecorder::stop`); a no-op if none is
/// running (a trace file goes on).
pub(crate) fn flight_stop() -> io::Result<()> {
    buf::stop(buf::Which::Flight)
}

/// The flight recorder's bounds and where its crash snapshots go
/// (`crate::trace::FlightConfig`, resolved).
pub(crate) struct Flight {
    pub(crate) age: Duration,
    pub(crate) max_bytes: usize,
    pub(crate) dir: PathBuf,
}

/// Starts the flight recorder (`crate::trace::FlightRecorder::start`):
/// fails if a trace or a flight recorder is already running.
pub(crate) fn flight_start(f: Flight, gomaxprocs: u32) -> io::Result<()> {
    buf::flight_start(f.age, f.max_bytes, f.dir, gomaxprocs)
}

/// Whether the flight recorder runs.
pub(crate) fn flight_running() -> bool {
    buf::flight_running()
}

/// Writes the flight recorder's window to `w` as a complete trace and
/// goes on recording; fails if it is not running.
pub(crate) fn flight_write(w: &mut dyn io::Write) -> io::Result<u64> {
    buf::flight_write(w, true)
}

/// The process is about to end on a crash, a deadlock or SIGQUIT (`why`):
/// if the flight recorder runs, its window goes to a new file whose path
/// is printed on stderr. Cheap when it does not run.
pub(crate) fn flight_dump(why: &str) {
    if on() {
        buf::flight_dump(why);
    }
}

/// What the tracer needs of the runtime, registered by the runtime when it
/// starts ([`start_from_env`]), before any trace can begin: the layer rule
/// (HACKING.md, "Layers") keeps this module from naming `runtime`.
#[derive(Clone, Copy)]
pub(crate) struct Hooks {
    /// The writer thread starts or ends: it counts as the runtime's own
    /// for the deadlock detector while it lives.
    pub(crate) thread_started: fn(),
    pub(crate) thread_exited: fn(),
    /// A trace began: sysmon must leave its deep sleep to take samples.
    pub(crate) wake_sysmon: fn(),
}

static HOOKS: std::sync::OnceLock<Hooks> = std::sync::OnceLock::new();

/// The runtime's hooks (registered before the first trace can start).
fn hooks() -> Hooks {
    *HOOKS
        .get()
        .expect("trace hooks are registered at runtime start")
}

/// Registers the runtime's hooks, then starts the trace named by
/// `GOROUTINE_TRACE` (runtime start; the runtime is being started, so it
/// must not be started again here).
pub(crate) fn start_from_env(gomaxprocs: u32, runtime: Hooks) {
    let _ = HOOKS.set(runtime);
    let Some(path) = std::env::var_os("GOROUTINE_TRACE") else {
        return;
    };
    if path.is_empty() {
        return;
    }
    if let Some(spec) = path.to_str().and_then(|p| p.strip_prefix("flight:")) {
        let r = parse_flight(spec).and_then(|f| flight_start(f, gomaxprocs));
        if let Err(e) = r {
            eprintln!(
                "goroutine: GOROUTINE_TRACE=flight:{spec}: cannot start the flight recorder: {e}"
            );
        }
        return;
    }
    if let Err(e) = buf::start(Path::new(&path), gomaxprocs) {
        eprintln!(
            "goroutine: GOROUTINE_TRACE={:?}: cannot start the trace: {e}",
            path.to_string_lossy()
        );
    }
}

/// The flight recorder's default byte bound (`crate::trace::FlightConfig`).
pub(crate) const FLIGHT_MAX_BYTES: usize = 16 << 20;

/// Reads `GOROUTINE_TRACE=flight:<seconds>[:<dir>]`'s part after `flight:`.
fn parse_flight(spec: &str) -> io::Result<Flight> {
    let (secs, dir) = match spec.split_once(':') {
        Some((s, d)) => (s, Some(PathBuf::from(d))),
        None => (spec, None),
    };
    let age = secs
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s > 0.0)
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{secs:?} is not a positive number of seconds"),
            )
        })?;
    Ok(Flight {
        age,
        max_bytes: FLIGHT_MAX_BYTES,
        dir: dir.unwrap_or_else(std::env::temp_dir),
    })
}

/// `M::trace_buf`'s initial value: no buffer claimed yet.
pub(crate) fn no_buf() -> *mut () {
    buf::no_buf()
}

/// Marks the calling thread as sysmon (its batches carry M id `u32::MAX`).
pub(crate) fn set_sysmon_thread() {
    buf::set_thread_id(u32::MAX);
}

/// The format's version (docs/trace-format.md), in the file's header.
const VERSION: u32 = 4;

// Event types (docs/trace-format.md).
const GO_CREATE: u8 = 1;
const GO_START: u8 = 2;
const GO_STOP: u8 = 3;
const GO_BLOCK: u8 = 4;
const GO_UNBLOCK: u8 = 5;
const GO_END: u8 = 6;
const STEAL: u8 = 7;
const PROC_START: u8 = 8;
const PROC_STOP: u8 = 9;
const M_PARK: u8 = 10;
const M_WAKE: u8 = 11;
const SYSCALL_ENTER: u8 = 12;
const SYSCALL_EXIT: u8 = 13;
const SYSCALL_HANDOFF: u8 = 14;
const PREEMPT: u8 = 15;
const TIMER_FIRE: u8 = 16;
const NETPOLL_READY: u8 = 17;
const GO_NAME: u8 = 18;
const RUNQ_SAMPLE: u8 = 19;
const GO_COUNT: u8 = 20;
const PROC_REVOKE: u8 = 21;
/// A GoStart right after a slice end of the same batch, sharing its
/// timestamp and its P: only the goroutine is written (no `ts_delta`, no
/// P; docs/trace-format.md).
const GO_START_LOCAL: u8 = 22;
/// Set in an event's type byte: the event has no `ts_delta` and takes the
/// timestamp of the batch's previous event, as a lower bound of its own
/// (docs/trace-format.md, "Shared timestamps"; `buf.rs`, the same).
const SAME_TIME: u8 = 0x80;
/// Set in the type byte of a GoCreate, GoStart, GoStop, GoBlock, GoUnblock
/// or GoEnd: its running goroutine's field (`G_RUN`) and its P field are
/// not written, as they equal the batch's running and P registers
/// (docs/trace-format.md, "Implied fields").
const IMPLICIT: u8 = 0x40;
/// The bits of a type byte that are its type.
const TYPE_BITS: u8 = 0x3f;

/// How many uvarint fields follow an event's timestamp (GoName: `g` and
/// `len`, then `len` bytes), for the flight recorder, which cuts batches
/// at an event (docs/trace-format.md's table).
const fn field_count(ty: u8) -> usize {
    match ty {
        M_PARK | M_WAKE => 0,
        PROC_START | PROC_STOP | SYSCALL_HANDOFF | NETPOLL_READY | GO_START_LOCAL => 1,
        GO_START | GO_END | SYSCALL_ENTER | PREEMPT | TIMER_FIRE | GO_NAME => 2,
        GO_CREATE | GO_STOP | GO_BLOCK | GO_UNBLOCK | STEAL | SYSCALL_EXIT | RUNQ_SAMPLE
        | PROC_REVOKE => 3,
        GO_COUNT => 4,
        _ => 0,
    }
}

/// Goroutine id fields (`g_kind`): an id of the goroutine running on the
/// batch's M (predicted by, and then stored in, the batch's "running"
/// register), of another goroutine (the "other" register), or a GoStart's
/// (predicted by "other", the goroutine last created or readied, then
/// stored in "running" only: "other" keeps that goroutine, which the
/// started one often readies next, as skynet's leaves their parent).
const G_RUN: u8 = 1;
const G_OTHER: u8 = 2;
const G_START: u8 = 3;

/// The kind of field `i` of an event of type `ty` (0: not a goroutine id).
/// Ids are written as the zig-zag difference from the register their kind
/// names (both 0 at a batch's start): a goroutine's neighbours in time
/// usually have close ids, and the running one recurs, so most ids take
/// one byte (docs/trace-format.md, "Goroutine ids").
#[inline(always)]
const fn g_kind(ty: u8, i: usize) -> u8 {
    match (ty, i) {
        (GO_CREATE | GO_UNBLOCK, 0) => G_OTHER,
        (GO_CREATE | GO_UNBLOCK, 1) => G_RUN,
        (GO_START | GO_START_LOCAL, 0) => G_START,
        (GO_STOP | GO_BLOCK | GO_END | SYSCALL_ENTER | SYSCALL_EXIT, 0) => G_RUN,
        (PREEMPT | GO_NAME | PROC_REVOKE, 0) => G_OTHER,
        _ => 0,
    }
}

/// A batch's registers: the running goroutine, the other goroutine (ids
/// are written against them) and the P (the `IMPLICIT` bit implies it).
type Regs = [u64; 3];

/// The registers at a batch's start: no P yet (never a P's number).
const REGS_START: Regs = [0, 0, u64::MAX];

/// The types that may carry `IMPLICIT`.
#[inline(always)]
const fn may_imply(ty: u8) -> bool {
    matches!(
        ty,
        GO_CREATE | GO_START | GO_STOP | GO_BLOCK | GO_UNBLOCK | GO_END
    )
}

/// Field `i` of an event of type `ty` is its P (of the types that may
/// carry `IMPLICIT`).
#[inline(always)]
const fn p_field(ty: u8, i: usize) -> bool {
    matches!(
        (ty, i),
        (GO_CREATE | GO_UNBLOCK, 2) | (GO_START | GO_STOP | GO_BLOCK | GO_END, 1)
    )
}

/// Field `i` of type `ty` is left out when the event carries `IMPLICIT`.
#[inline(always)]
const fn implied(ty: u8, i: usize) -> bool {
    may_imply(ty) && (g_kind(ty, i) == G_RUN || p_field(ty, i))
}

/// Whether an event of type `ty` with fields `args` may be written with
/// `IMPLICIT`: every field it would leave out equals its register.
#[inline(always)]
fn implicit(regs: &Regs, ty: u8, args: &[u64]) -> bool {
    // Per index, not a loop, as `Inner::write_fields`: the tests fold.
    #[inline(always)]
    fn field_ok<const I: usize>(regs: &Regs, ty: u8, args: &[u64]) -> bool {
        if I >= args.len() {
            return true;
        }
        (g_kind(ty, I) != G_RUN || args[I] == regs[0]) && (!p_field(ty, I) || args[I] == regs[2])
    }
    may_imply(ty)
        && field_ok::<0>(regs, ty, args)
        && field_ok::<1>(regs, ty, args)
        && field_ok::<2>(regs, ty, args)
        && field_ok::<3>(regs, ty, args)
}

/// Field `i` (value `a`) of an event of type `ty` as written, not implied:
/// a goroutine id against its register, else the value (a P field
/// becomes the P register). Updates the registers.
#[inline(always)]
fn encode_field(regs: &mut Regs, ty: u8, i: usize, a: u64) -> u64 {
    match g_kind(ty, i) {
        0 => {
            if p_field(ty, i) {
                regs[2] = a;
            }
            a
        }
        k => g_encode(regs, k, a),
    }
}

/// The inverse of `encode_field`; `v` is `None` for an implied field.
fn decode_field(regs: &mut Regs, ty: u8, i: usize, v: Option<u64>) -> u64 {
    match (v, g_kind(ty, i)) {
        (None, _) if p_field(ty, i) => regs[2],
        (None, _) => regs[0],
        (Some(v), 0) => {
            if p_field(ty, i) {
                regs[2] = v;
            }
            v
        }
        (Some(v), k) => g_decode(regs, k, v),
    }
}

/// Writes goroutine id `g` of a field of kind `k` (not 0) against the
/// batch's registers `regs` (running, other), which it updates.
#[inline(always)]
fn g_encode(regs: &mut Regs, k: u8, g: u64) -> u64 {
    let d = g.wrapping_sub(regs[(k != G_RUN) as usize]) as i64;
    if k != G_OTHER {
        regs[0] = g;
    }
    if k == G_OTHER {
        regs[1] = g;
    }
    zigzag(d)
}

/// The inverse of `g_encode`.
fn g_decode(regs: &mut Regs, k: u8, v: u64) -> u64 {
    let g = regs[(k != G_RUN) as usize].wrapping_add((v >> 1) ^ (v & 1).wrapping_neg());
    if k != G_OTHER {
        regs[0] = g;
    }
    if k == G_OTHER {
        regs[1] = g;
    }
    g
}

/// Zig-zag: small differences of either sign become small unsigned numbers.
#[inline(always)]
const fn zigzag(d: i64) -> u64 {
    ((d << 1) ^ (d >> 63)) as u64
}

/// The P field of GoUnblock (and SyscallExit) when the goroutine went to
/// the global queue.
pub(crate) const GLOBAL: u32 = u32::MAX;

/// GoStop reasons.
pub(crate) const STOP_YIELD: u64 = 0;
pub(crate) const STOP_PREEMPT: u64 = 1;
pub(crate) const STOP_YIELD_LOCAL: u64 = 2;

// The emit functions: cold and out of line, so that a disabled event site
// is only its branch.

/// `m`: the calling thread's M, `None` on a plain thread. The scheduler's
/// own events take the M they run on (`buf::emit_m`: the buffer is found
/// through it).
/// A GoCreate on an M takes the batch's previous event's time (`buf.rs`,
/// "Shared timestamps").
#[cold]
#[inline(never)]
pub(crate) fn go_create(m: Option<&M>, g: u64, parent: u64, p: u32) {
    buf::emit_here_prev(m, GO_CREATE, &[g, parent, p as u64], None);
}

/// A GoCreate of goroutine `g` by the goroutine running on `m` (the
/// calling thread's M, holding a P), if it continues the run of creates
/// the thread's last event began: left for the thread's next event to
/// write (`buf.rs`, "Deferred creates": here two loads and a store, no
/// call), and true; else false, and the caller calls `go_create`.
#[inline(always)]
pub(crate) fn go_create_deferred(m: Option<&M>, g: u64) -> bool {
    m.is_some_and(|m| buf::defer_create(m, g))
}

#[cold]
#[inline(never)]
pub(crate) fn go_start(m: &M, g: u64, p: u32) {
    buf::emit_m_ordered(m, GO_START, &[g, p as u64]);
}

/// A GoStart on the scheduler's quick path: if the slice end traced just
/// before it on this thread was the batch's last event, it becomes a
/// GoStartLocal, which takes that event's timestamp and P, written by the
/// thread's next event (`buf.rs`, "Deferred quick starts": here only two
/// loads and a store, no call); else a GoStart.
#[inline(always)]
pub(crate) fn go_start_quick(m: &M, g: u64, p: u32) {
    if !buf::defer_quick_start(m, g) {
        go_start(m, g, p);
    }
}

/// The events that end a goroutine's slice on its M, whose timestamp a
/// quick GoStart after them may share.
#[inline(always)]
const fn ends_slice(ty: u8) -> bool {
    matches!(ty, GO_END | GO_BLOCK | GO_STOP)
}

#[cold]
#[inline(never)]
pub(crate) fn go_stop(m: &M, g: u64, p: u32, reason: u64) {
    buf::emit_m(m, GO_STOP, &[g, p as u64, reason]);
}

#[cold]
#[inline(never)]
pub(crate) fn go_block(m: &M, g: &G, p: u32, reason: u64) {
    let ts = buf::emit_m_end(m, GO_BLOCK, &[g.id(), p as u64, reason]);
    g.set_trace_block_ts(ts);
}

/// A GoUnblock on an M takes the batch's previous event's time if `g`'s
/// GoBlock (its timestamp, kept in the G by `go_block`) was not later
/// (`buf.rs`, "Shared timestamps").
#[cold]
#[inline(never)]
pub(crate) fn go_unblock(m: Option<&M>, g: &G, by_g: u64, p: u32) {
    unblock(m, g, by_g, p);
}

/// `go_unblock` by the goroutine running on `m` (0 if none, or on a plain
/// thread: `park::ready`'s case), looked up here: one call instead of a
/// wrapper's two.
#[cold]
#[inline(never)]
pub(crate) fn go_unblock_by(m: Option<&M>, g: &G, p: u32) {
    let by_g = m.and_then(|m| m.curg()).map_or(0, |c| c.id());
    unblock(m, g, by_g, p);
}

/// The body of both GoUnblock sites, inlined into each (one call each).
#[inline(always)]
fn unblock(m: Option<&M>, g: &G, by_g: u64, p: u32) {
    let floor = g.trace_block_ts();
    buf::emit_here_prev(m, GO_UNBLOCK, &[g.id(), by_g, p as u64], Some(floor));
}

#[cold]
#[inline(never)]
pub(crate) fn go_end(m: &M, g: u64, p: u32) {
    buf::emit_m_end(m, GO_END, &[g, p as u64]);
}

#[cold]
#[inline(never)]
pub(crate) fn steal(thief: u32, victim: u32, count: u64) {
    buf::emit(STEAL, &[thief as u64, victim as u64, count], &[]);
}

#[cold]
#[inline(never)]
pub(crate) fn proc_start(p: u32) {
    buf::emit(PROC_START, &[p as u64], &[]);
}

#[cold]
#[inline(never)]
pub(crate) fn proc_stop(p: u32) {
    buf::emit(PROC_STOP, &[p as u64], &[]);
}

#[cold]
#[inline(never)]
pub(crate) fn m_park() {
    buf::emit(M_PARK, &[], &[]);
}

#[cold]
#[inline(never)]
pub(crate) fn m_wake() {
    buf::emit(M_WAKE, &[], &[]);
}

#[cold]
#[inline(never)]
pub(crate) fn syscall_enter(g: u64, p: u32) {
    buf::emit(SYSCALL_ENTER, &[g, p as u64], &[]);
}

#[cold]
#[inline(never)]
pub(crate) fn syscall_exit(g: u64, p: u32, fast: bool) {
    buf::emit(SYSCALL_EXIT, &[g, p as u64, fast as u64], &[]);
}

#[cold]
#[inline(never)]
pub(crate) fn syscall_handoff(p: u32) {
    buf::emit(SYSCALL_HANDOFF, &[p as u64], &[]);
}

/// A P taken from an M blocked in the kernel outside the runtime, running
/// goroutine `g`, in system call `nr` (-1: unknown).
#[cold]
#[inline(never)]
pub(crate) fn proc_revoke(g: u64, p: u32, nr: i64) {
    buf::emit(PROC_REVOKE, &[g, p as u64, nr as u64], &[]);
}

#[cold]
#[inline(never)]
pub(crate) fn preempt(g: u64, p: u32) {
    buf::emit(PREEMPT, &[g, p as u64], &[]);
}

#[cold]
#[inline(never)]
pub(crate) fn timer_fire(p: u32, count: u64) {
    buf::emit(TIMER_FIRE, &[p as u64, count], &[]);
}

#[cold]
#[inline(never)]
pub(crate) fn netpoll_ready(count: u64) {
    buf::emit(NETPOLL_READY, &[count], &[]);
}

/// The most name bytes a GoName carries (longer names are cut at a
/// character boundary).
pub(crate) const MAX_NAME: usize = 256;

#[cold]
#[inline(never)]
pub(crate) fn go_name(g: u64, name: &str) {
    let mut end = name.len().min(MAX_NAME);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    let bytes = &name.as_bytes()[..end];
    buf::emit(GO_NAME, &[g, bytes.len() as u64], bytes);
}

#[cold]
#[inline(never)]
pub(crate) fn runq_sample(p: u32, local: u64, global: u64) {
    buf::emit(RUNQ_SAMPLE, &[p as u64, local, global], &[]);
}

#[cold]
#[inline(never)]
pub(crate) fn go_count(runnable: u64, running: u64, waiting: u64, syscall: u64) {
    buf::emit(GO_COUNT, &[runnable, running, waiting, syscall], &[]);
}
