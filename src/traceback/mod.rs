//! Goroutine tracebacks: the frames of every goroutine in `dump()`,
//! `dump_grouped()`, the deadlock report, SIGQUIT and the
//! `GOROUTINE_PANIC=abort` report.
//!
//! # Where a parked goroutine's stack starts
//! Every goroutine stack keeps a small [`StackHeader`] in its top
//! [`HEADER_BYTES`](crate::g::stack::HEADER_BYTES), above what corosensei
//! uses, in the cache line of corosensei's parent link (which every switch
//! reads and writes anyway). Just before a goroutine switches to its M's
//! scheduler (`g::switch::switch_to_scheduler`, the only way out of a
//! goroutine stack) it stores its exact PC, SP and frame pointer there: three
//! stores into an L1-hot line, nothing else on any fast path. When it first
//! runs it also copies its spawn record there from the task cell: its
//! parent's id and an address inside the spawning function (`go` and
//! `Builder::spawn` are `#[inline(always)]` and read the instruction
//! pointer: one instruction). Symbolising that address gives both the
//! spawning function and the line of the spawn (the inlined `go`'s call
//! site), and keeps the task cell's header at 48 bytes, so a small closure's
//! cell still fits the 64-byte class.
//!
//! # Unwinding (the protocol)
//! A suspended goroutine's stack is walked with the binaries' CFI
//! ([`unwind`]) from the recorded context, and symbolised afterwards with the
//! `backtrace` crate (addr2line over the DWARF of `debug = 1` builds). Both
//! are cached per address (the decoded CFI step for one collection, the
//! symbols for the process), so 100,000 identical stacks cost one decoding
//! and one symbolisation per distinct PC.
//!
//! A stack may only be read while nothing can run on it. The rule:
//! **a goroutine's stack is walked only while the world is stopped**, as Go's
//! `runtime.Stack(buf, true)` does:
//! - `dump`, `dump_grouped` and SIGQUIT stop the world
//!   (`runtime::procresize::with_world_stopped`: every P stopped except the
//!   caller's). A goroutine runs only on an M holding a P, and an M passes
//!   through the scheduler (where it stops its P) between any two
//!   goroutines, so once the world is stopped every goroutine whose status is
//!   `Waiting` or `Runnable` is fully switched out (its context recorded, its
//!   stack untouched) and stays so until the world restarts. A waker may
//!   still move a `Waiting` G to a run queue meanwhile: that touches the G's
//!   status and a queue, not its stack, and nothing resumes it before the
//!   world starts again. The dump changes no goroutine's state, so it can
//!   neither lose a wakeup nor wake anybody twice.
//! - The deadlock report runs when every M is parked and every P idle:
//!   nothing can run, which pins every stack the same way.
//! - Goroutines in `Running` or `Syscall` state (other than the caller) are
//!   running on another thread: see "Goroutines on other threads" below.
//! - The caller's own goroutine is walked from its live registers.
//! - Only the raw PCs are collected while the world is stopped; it restarts
//!   before the (slower, allocating) symbolisation.
//! - SIGQUIT waits at most [`SIGQUIT_STOP_WAIT`] for the world to stop (a
//!   goroutine spinning outside any runtime call never stops); after that it
//!   prints the headers without frames and says so.
//! - Visibility: the header is written with plain stores by the goroutine
//!   before it switches out; its M then reaches the scheduler and stops its
//!   P under the sched lock, which the stopping thread takes after it: the
//!   stores happen before the dump's reads. (A G parked long ago was
//!   switched out before its M's later trips through the same lock.)
//! - A goroutine stopped by a signal inside a preemptible region switched
//!   out from `asyncpreempt`'s trampoline, whose return address is 0 and
//!   sits right below the save area of the interrupted registers: the walk
//!   recognises the trampoline's FDE and continues from the interrupted PC.
//! - Every read of the walk is bounds-checked against the goroutine's own
//!   stack (`unwind`'s note): a broken chain ends the walk, it never reads
//!   another thread's memory.
//! - Sanitizer builds (`goroutine_sanitize`) record nothing (under ASan
//!   corosensei keeps fiber data between the parent link and the header, so
//!   the header is not 16 bytes above the yielder; TSan builds are treated
//!   alike): dumps there show headers only.
//!
//! # Goroutines on other threads
//! A goroutine in `Running` or `Syscall` state runs on another thread, and
//! its stack changes under any reader: `dump()` prints Go's `goroutine
//! running on other thread; stack unavailable` for it. Two things are
//! known without reading the stack, and the dump says them
//! (`runtime::dump`'s `other_threads`):
//! - **Blocked outside the runtime.** A goroutine in `running` whose M is
//!   in the goroutine's own code (its handshake word is even: `m::revoke`)
//!   and whose thread is in a system call (`/proc/self/task/TID/syscall`,
//!   read for these goroutines only, on the dump's request) is blocked in a
//!   plain `std` call (`runtime::retake`'s blocked threads, what
//!   `GODEBUG=blockwarn` reports): it shows as `goroutine 7 [syscall,
//!   blocked outside the runtime: nanosleep]:`, and `dump()` says
//!   `goroutine blocked on other thread; stack unavailable`.
//! - **Its frames, from its own thread (SIGQUIT only).** SIGQUIT's dump
//!   sends SIGQUIT to the thread of each such goroutine (`tgkill`), one at
//!   a time; the thread's handler records the interrupted registers and
//!   waits in the handler while the dump walks its stack from them, as for
//!   a parked goroutine, then returns ([`ThreadWalker`],
//!   `sys::overflow::capture_registers`). Sound: the stack is read only
//!   while its thread is held (the handler publishes with Release after
//!   the interrupted code's writes; the dump acquires), the walk is
//!   bounds-checked to the goroutine's stack and ignored unless the
//!   interrupted SP lies in it, and nothing is allocated or locked while a
//!   thread is held (it may hold the allocator's lock): the unwinder's
//!   lock and memory are taken first. A thread that does not answer in
//!   100 ms (SIGQUIT blocked there) keeps `stack unavailable`. Only
//!   SIGQUIT does this: the held thread's interrupted system call restarts
//!   or fails with `EINTR` as for any signal, acceptable for a process
//!   about to exit, not for `dump()` in a live one. Go itself sends
//!   SIGQUIT to its other threads this way under `GOTRACEBACK=crash`.
//!
//! # `GOTRACEBACK`
//! As Go 1.19 behaves (measured: `tests/gotraceback.rs` compares with Go
//! where it is installed):
//!
//! | report | `none` | `single` | `all` | `system` | `crash` |
//! |---|---|---|---|---|---|
//! | deadlock (a fatal error) | headline only | every goroutine | every goroutine | + runtime frames | + runtime frames, then `SIGABRT` |
//! | SIGQUIT (a runtime throw) | every goroutine, runtime frames | same | same | same | same, then `SIGABRT` |
//!
//! Exit status 2 in every case but `crash`. A fatal error prints every
//! goroutine even under `single` because Go's `gotraceback` forces "all"
//! while throwing; a runtime throw (SIGQUIT) forces level 2 (`system`)
//! too. The `GOROUTINE_PANIC=abort` report is a panic's: the panicking
//! goroutine under `single`, its default (`runtime::panics`). Go's
//! numbers work (`0` none, `1` all, `2` system); another value is
//! named on stderr and the default used. `dump()` and `dump_grouped()`
//! always print every goroutine and show runtime frames only with
//! `system`.
//!
//! # What is shown
//! Frames of the runtime itself (this crate's internals, corosensei, std's
//! panic and closure-call shims) are hidden unless `GOTRACEBACK=system`, as
//! Go hides `runtime.*`. With `strip = true` (no symbols) the frames print
//! as `?` (`dump_grouped` still gives their addresses), and file:line needs `debug >= 1`
//! (`"limited"`). `"line-tables-only"` gives file:line but names without
//! their paths (`recv<u32>`, not `goroutine::chan::Receiver<T>::recv`), so
//! the runtime's frames are not recognised and stay shown, and spawn sites
//! can be wrong.

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod unwind;

pub(crate) mod format;
pub(crate) mod json;

use crate::g::{Status, WaitReason, G};

/// How long SIGQUIT waits for the world to stop before printing headers
/// only.
pub(crate) const SIGQUIT_STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The header at the top of every goroutine stack (module note). Written
/// only by the goroutine itself, read only while it is pinned.
#[repr(C)]
pub(crate) struct StackHeader {
    /// The context recorded at the last switch out: exact PC, SP, RBP.
    /// (The scheduler also reads SP, to start loading a cold stack before
    /// it resumes it: [`StackHeader::prefetch_resume`].)
    pc: usize,
    sp: usize,
    fp: usize,
    /// The spawn record, from the task cell at first run.
    spawn: Spawn,
    _spare: usize,
}

const _: () = assert!(std::mem::size_of::<StackHeader>() == crate::g::stack::HEADER_BYTES);

/// Most stack lines [`StackHeader::prefetch_resume`] starts loading.
const RESUME_PREFETCH_LINES: usize = 16;

impl StackHeader {
    /// The header of the stack whose usable range ends at `top`.
    #[inline]
    pub(crate) fn at(top: usize) -> *mut StackHeader {
        crate::g::stack::header_addr(top) as *mut StackHeader
    }

    /// Records the spawn site (the goroutine itself, at first run).
    ///
    /// # Safety
    /// `h` is the running goroutine's own header.
    pub(crate) unsafe fn set_site(h: *mut StackHeader, spawn: Spawn) {
        // SAFETY: our own stack's header (caller's contract).
        unsafe {
            (*h).spawn = spawn;
            (*h).pc = 0;
        }
    }

    /// Starts loading the stack lines that resuming the switched-out
    /// goroutine whose stack ends at `top` reads first: from the SP of its
    /// last switch out (recorded in the header) up to the header, at most
    /// [`RESUME_PREFETCH_LINES`] lines. A resume pops the saved registers
    /// at that SP, then returns frame by frame up the stack; on a cold
    /// stack each of those lines is a miss, taken one after another since
    /// each return waits for the address it loads. Started together, they
    /// overlap. A hint only: the header is read, nothing is written, and a
    /// prefetch never faults.
    ///
    /// # Safety
    /// `top` is the top of a live stack whose goroutine is switched out and
    /// owned by the caller (popped from a run queue), so its header holds
    /// the context of that switch out.
    #[inline]
    pub(crate) unsafe fn prefetch_resume(top: usize) {
        let h = Self::at(top);
        // SAFETY: the header of a live, switched-out stack (caller's
        // contract); the goroutine wrote it before it was queued.
        let sp = unsafe { (*h).sp };
        let end = h as usize;
        if sp == 0 || sp >= end {
            return;
        }
        let mut line = sp & !63;
        let last = end.min(line + RESUME_PREFETCH_LINES * 64);
        while line < last {
            crate::sys::mem::prefetch(line);
            line += 64;
        }
    }

    /// Records the calling goroutine's context (PC, SP, RBP) in `h`. Inlined
    /// into `switch_to_scheduler`: the PC recorded lies in the same function
    /// as the switch, and its CFI row describes this very SP.
    ///
    /// # Safety
    /// `h` is the running goroutine's own header.
    #[inline(always)]
    pub(crate) unsafe fn record(h: *mut StackHeader) {
        #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
        // SAFETY: three stores into our own stack's header (caller's
        // contract); no stack use, flags preserved.
        unsafe {
            std::arch::asm!(
                "lea {pc}, [rip]",
                "mov [{h}], {pc}",
                "mov [{h} + 8], rsp",
                "mov [{h} + 16], rbp",
                h = in(reg) h,
                pc = out(reg) _,
                options(nostack, preserves_flags),
            );
        }
        #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
        let _ = h;
    }
}

/// Where a goroutine was spawned: recorded by `go` / `Builder::spawn` in
/// the task cell, copied to the stack header at first run.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Spawn {
    /// An address inside the spawning function (see [`caller_pc`]); 0 if
    /// unknown.
    pub(crate) pc: usize,
    /// The spawning goroutine's id (0: a plain thread).
    pub(crate) parent: u64,
}

/// Keeps the caller's frame on the stack across the call just before it,
/// for tracebacks: an empty `asm!` statement (no instructions) that the
/// compiler must assume has effects, so that call is not the caller's last
/// act and cannot become a tail call.
///
/// Why: a function that ends by calling a runtime function that parks
/// (`fn nap() { time::sleep(d) }`) is compiled to a jump into it, which
/// replaces the function's frame with the callee's; a dump of the parked
/// goroutine then walks straight from the runtime's frames to the
/// goroutine's entry shim and shows no frame of the program at all (the
/// walk itself was complete: the frame was simply gone). So each public,
/// non-generic runtime call that parks and returns `()` (the shape a tail
/// call takes) is an `#[inline(always)]` wrapper around its out-of-line
/// body, ending with this: inlined into the caller, the call to the body is
/// followed by this statement and stays a call. Generic calls that return
/// a value (`recv`, `send`, `lock`, `join`) move their result after the
/// call and were not tail calls to begin with. Cost: the caller keeps a
/// `call` and a `ret` instead of a `jmp`.
#[inline(always)]
pub(crate) fn keep_caller_frame() {
    // SAFETY: an empty statement: no instructions, no memory, no stack.
    unsafe { std::arch::asm!("", options(nomem, nostack, preserves_flags)) }
}

/// The address of the next instruction: inlined (always) into `go` and
/// `Builder::spawn`, which are inlined (always) into their caller, it lies
/// in the function that spawns. One instruction.
#[inline(always)]
pub(crate) fn caller_pc() -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        let pc: usize;
        // SAFETY: reads the instruction pointer; no memory, no stack.
        unsafe {
            std::arch::asm!("lea {}, [rip]", out(reg) pc, options(nomem, nostack, preserves_flags))
        };
        pc
    }
    #[cfg(not(target_arch = "x86_64"))]
    0
}

/// `GOTRACEBACK`, as Go reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Level {
    /// No goroutine tracebacks.
    None,
    /// Only the current goroutine.
    Single,
    /// Every goroutine, runtime frames hidden.
    All,
    /// Every goroutine, runtime frames shown.
    System,
}

/// Parses a `GOTRACEBACK` value; `None` for a bad one.
pub(crate) fn parse_level(v: &str) -> Option<Level> {
    Some(match v {
        "none" | "0" => Level::None,
        "single" => Level::Single,
        "all" | "1" => Level::All,
        "system" | "2" | "crash" | "wer" => Level::System,
        _ => return None,
    })
}

/// `GOTRACEBACK`, or `default` when unset; a bad value is reported once.
pub(crate) fn level(default: Level) -> Level {
    static WARNED: std::sync::Once = std::sync::Once::new();
    match std::env::var("GOTRACEBACK") {
        Err(_) => default,
        Ok(v) if v.is_empty() => default,
        Ok(v) => parse_level(&v).unwrap_or_else(|| {
            WARNED.call_once(|| {
                eprintln!(
                    "goroutine: GOTRACEBACK={v:?} is not none, single, all, system or crash; \
                     using the default"
                )
            });
            default
        }),
    }
}

/// Why a goroutine's frames are missing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NoStack {
    /// It runs on another thread.
    Running,
    /// Its thread is blocked in the kernel outside the runtime (a plain
    /// `std` call), and no frames were taken from it.
    Blocked,
    /// It has not started yet (no stack).
    NotStarted,
    /// The world could not be stopped in time (SIGQUIT).
    NotStopped,
    /// No unwinder on this platform.
    #[cfg_attr(all(target_arch = "x86_64", target_os = "linux"), allow(dead_code))]
    Unsupported,
}

/// One goroutine, as collected while pinned.
pub(crate) struct GInfo {
    pub(crate) id: u64,
    pub(crate) status: Status,
    pub(crate) reason: WaitReason,
    pub(crate) waitsince: u32,
    pub(crate) locked: bool,
    /// Return addresses (module note of `unwind`), innermost first.
    pub(crate) pcs: Result<Vec<usize>, NoStack>,
    pub(crate) spawn: Spawn,
}

/// How the caller guarantees that parked stacks do not run.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pinned {
    /// The world is stopped, or every M is parked (deadlock): walk them.
    Yes,
    /// Nothing is pinned: headers only.
    No,
}

/// Collects every live goroutine (module note). The caller's own goroutine,
/// if any, comes first with its live frames.
pub(crate) fn collect(pinned: Pinned, with_frames: bool) -> Vec<GInfo> {
    let me = crate::m::current_g_checked();
    let mut out: Vec<GInfo> = Vec::new();
    let mut walker = Walker::default();
    G::for_each(|g| {
        let status = g.status();
        if matches!(status, Status::Idle | Status::Dead) {
            return;
        }
        let is_me = me.is_some_and(|m| std::ptr::eq(m, g));
        let range = g.stack_range();
        let mut spawn = Spawn::default();
        let pcs = if is_me {
            if let Some((_, hi)) = range {
                // SAFETY: our own running stack's header.
                let h = unsafe { &*StackHeader::at(hi) };
                spawn = h.spawn;
            }
            if with_frames {
                Ok(own_frames(range))
            } else {
                Err(NoStack::NotStopped)
            }
        } else {
            match status {
                Status::Running | Status::Syscall => Err(NoStack::Running),
                _ if pinned == Pinned::No => Err(NoStack::NotStopped),
                _ => match range {
                    None => Err(NoStack::NotStarted),
                    Some((_, hi)) => {
                        // SAFETY: pinned (the caller's promise and the
                        // module note): the stack is switched out and
                        // unchanging, its header written before the switch.
                        let h = unsafe { &*StackHeader::at(hi) };
                        spawn = h.spawn;
                        if with_frames {
                            // SAFETY: as above.
                            unsafe { parked_frames(&mut walker, h, hi) }
                        } else {
                            Err(NoStack::NotStopped)
                        }
                    }
                },
            }
        };
        let locked = match status {
            // SAFETY: pinned and parked: nobody changes its Inner.
            Status::Waiting if pinned == Pinned::Yes => unsafe { g.inner() }.lockedm.is_some(),
            _ => false,
        };
        out.push(GInfo {
            id: g.id(),
            status,
            reason: g.wait_reason(),
            waitsince: g.waitsince(),
            locked,
            pcs,
            spawn,
        });
    });
    let me = me.map(|g| g.id());
    out.sort_by_key(|e| (Some(e.id) != me, e.id));
    out
}

/// The unwinder of one collection, made on first use (it locks the module
/// table and caches decoded CFI for the collection's length).
#[derive(Default)]
struct Walker(#[cfg(all(target_arch = "x86_64", target_os = "linux"))] Option<unwind::Walker>);

/// The frames of a parked goroutine from its recorded context.
///
/// # Safety
/// The goroutine is pinned (module note).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
unsafe fn parked_frames(
    walker: &mut Walker,
    h: &StackHeader,
    top: usize,
) -> Result<Vec<usize>, NoStack> {
    if h.pc == 0 || h.sp == 0 || h.sp >= top {
        return Err(NoStack::NotStarted);
    }
    let regs = unwind::Regs {
        pc: h.pc,
        sp: h.sp,
        fp: h.fp,
        bx: 0,
    };
    let w = walker.0.get_or_insert_with(unwind::Walker::new);
    // SAFETY: pinned (caller's contract); `[sp, top)` is the G's stack.
    Ok(unsafe { w.walk(regs, crate::g::stack::header_addr(top)) })
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
unsafe fn parked_frames(
    _walker: &mut Walker,
    _h: &StackHeader,
    _top: usize,
) -> Result<Vec<usize>, NoStack> {
    Err(NoStack::Unsupported)
}

/// The running goroutine's spawn record (module note), from the header of
/// its stack, whose usable range is `range`. Sanitizer builds keep no
/// header: unknown there.
pub(crate) fn own_spawn(range: Option<(usize, usize)>) -> Spawn {
    #[cfg(not(any(goroutine_sanitize = "address", goroutine_sanitize = "thread")))]
    if let Some((_, hi)) = range {
        // SAFETY: the caller's own running stack: its header was written
        // by the goroutine itself at its first run.
        return unsafe { (*StackHeader::at(hi)).spawn };
    }
    let _ = range;
    Spawn::default()
}

/// The calling goroutine's own frames, from its live registers, up to the
/// top of its stack.
#[inline(never)]
pub(crate) fn own_frames(range: Option<(usize, usize)>) -> Vec<usize> {
    let mut out = Vec::new();
    backtrace::trace(|f| {
        let sp = f.sp() as usize;
        if let Some((lo, hi)) = range {
            if sp != 0 && (sp < lo || sp >= hi) {
                return false;
            }
        }
        out.push(f.ip() as usize);
        out.len() < 100
    });
    out
}

/// Takes the frames of goroutines running on other threads, for SIGQUIT's
/// dump (module note, "Goroutines on other threads"). Made before any
/// thread is held: it takes the unwinder's lock and all the memory a walk
/// needs, so that nothing is allocated or locked while a thread waits in
/// its handler (it may hold the allocator's lock).
pub(crate) struct ThreadWalker {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    walker: unwind::Walker,
    buf: Vec<usize>,
}

impl ThreadWalker {
    /// Distinct return addresses a dump may meet while threads are held
    /// without allocating.
    #[cfg_attr(
        not(all(target_arch = "x86_64", target_os = "linux")),
        allow(dead_code)
    )]
    const STEPS: usize = 4096;

    pub(crate) fn new() -> ThreadWalker {
        #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
        let walker = {
            let mut w = unwind::Walker::new();
            w.reserve(Self::STEPS);
            w
        };
        ThreadWalker {
            #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
            walker,
            buf: Vec::with_capacity(unwind_max_frames()),
        }
    }

    /// The frames and the spawn record of the goroutine whose stack is
    /// `range`, running on thread `tid` (its M's): the thread records its registers in its
    /// SIGQUIT handler and waits there while its stack is walked
    /// (`sys::overflow::capture_registers`). `None` if it did not answer by
    /// `deadline`, or was not on that stack (it moved on meanwhile).
    ///
    /// Sound for any thread, anywhere: the stack is read only while its
    /// thread is held (the handler's Release and our Acquire order its
    /// earlier writes before the reads; the handler itself runs on the
    /// alternate signal stack, or below the interrupted SP), every read is
    /// bounds-checked to the goroutine's stack, and nothing is allocated or
    /// locked meanwhile.
    pub(crate) fn frames(
        &mut self,
        tid: i32,
        range: (usize, usize),
        deadline: std::time::Instant,
    ) -> Option<(Vec<usize>, Spawn)> {
        if cfg!(any(
            goroutine_sanitize = "address",
            goroutine_sanitize = "thread"
        )) {
            // Module note: sanitizer builds keep no tracebacks.
            return None;
        }
        #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
        {
            let regs = crate::sys::overflow::capture_registers(tid, deadline)?;
            let top = crate::g::stack::header_addr(range.1);
            let on_stack = regs.sp >= range.0 && regs.sp < top;
            let mut spawn = Spawn::default();
            if on_stack {
                // SAFETY: the header of the stack the held thread runs on,
                // written by its goroutine at first run (before this run:
                // ordered by the handler's Release, as the stack is).
                spawn = unsafe { (*StackHeader::at(range.1)).spawn };
                let r = unwind::Regs {
                    pc: regs.pc,
                    sp: regs.sp,
                    fp: regs.fp,
                    bx: regs.bx,
                };
                // SAFETY: the thread is held in its handler (above), so
                // `[sp, top)`, the part of the goroutine's stack in use,
                // is mapped and does not change until the release.
                unsafe { self.walker.walk_into(r, top, &mut self.buf) };
            }
            crate::sys::overflow::release_captured();
            on_stack.then(|| (self.buf.clone(), spawn))
        }
        #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
        {
            let _ = (tid, range, deadline, &mut self.buf);
            None
        }
    }
}

fn unwind_max_frames() -> usize {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        unwind::MAX_FRAMES
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    {
        0
    }
}
