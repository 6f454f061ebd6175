//! Asynchronous preemption, the OS half (x86-64 and aarch64 Linux): the `SIGURG`
//! handler and its chaining, `tgkill`, the code range of the object that
//! holds the runtime, and the sigreturn-based save and restore of an
//! interrupted context on the goroutine's own stack. Whether to preempt is
//! the runtime's decision (`runtime::asyncpreempt`, the design in
//! `docs/preemption.md`); this file only knows signals and the kernel's
//! frame layout.
//!
//! # The handler
//! `SIGURG` (Go's choice: ignored by default, used only for TCP urgent
//! data), installed with `SA_SIGINFO | SA_ONSTACK | SA_RESTART`, so it runs
//! on the M's alternate signal stack. It calls the runtime's [`Decide`]
//! with the interrupted context; if the runtime does not consume the signal
//! (it was not sysmon's), the action installed before ours gets it (for
//! `SIG_DFL` and `SIG_IGN` that means nothing: `SIGURG`'s default is to
//! ignore it). `errno` is preserved.
//!
//! # Redirecting the interrupted thread ([`Interrupted::redirect`])
//! The kernel's frame (on the alternate stack) holds the interrupted
//! registers in a `ucontext` and the extended FP state (`xsave` layout) it
//! points to. We copy both below the interrupted stack pointer and make the
//! handler's return land in a trampoline instead:
//!
//! ```text
//!   high   +-----------------------------+ <- interrupted RSP
//!          | red zone (128 bytes)        |    leaf code may keep data here
//!          +-----------------------------+
//!          | (alignment)                 |
//!          +-----------------------------+ <- fp (64-byte aligned: xrstor)
//!          | FP state copy               |    `extended_size` bytes (512
//!          |  (fxsave + xsave + MAGIC2)  |    without the xstate trailer)
//!          +-----------------------------+
//!          | (alignment)                 |
//!          +-----------------------------+ <- uc (64-byte aligned)
//!          | kernel ucontext copy (304)  |    fpstate pointer -> fp
//!          +-----------------------------+
//!          | 0 (fake return address)     | <- RSP at trampoline entry
//!          +-----------------------------+    (= 8 mod 16, as after a call)
//!   low    | trampoline frames ...       |
//! ```
//!
//! The live context is changed to RSP = the fake return address, RIP = the
//! trampoline, RDI = `uc`, RSI = the runtime's argument, and the direction
//! flag cleared (the ABI's state at a call). The kernel's `rt_sigreturn`
//! then "returns" into the trampoline, in normal context.
//!
//! # Restoring ([`resume`])
//! When the goroutine runs again, possibly on another thread, the
//! trampoline calls [`resume`]: it replaces the saved `uc_stack` and signal
//! mask with the *current* thread's (`rt_sigreturn` installs both; the old
//! thread's alternate stack must not be shared), then jumps to a 4-instruction
//! stub that points RSP at the saved `ucontext`, drops the goroutine's
//! in-runtime count and issues `rt_sigreturn` itself. The kernel reloads
//! every register, flags, RIP, RSP and the whole FP/SIMD state (`xrstor`)
//! from the copy: the interrupted code continues as if nothing happened.
//! The stub's PCs are refused by [`preemptible_pc`]: between the count's
//! drop and the system call the goroutine is in no runtime call, but must
//! not be preempted again.
//!
//! # aarch64
//! The same design with the arm64 frame. The kernel's `ucontext` (4560
//! bytes) holds the general registers, SP, PC and PSTATE in its
//! `sigcontext`, and the FP/SIMD state (and SVE's, where present) inline, as
//! records in the `sigcontext`'s reserved area: no pointer to follow, so
//! the whole `ucontext` is copied. A frame whose records spill outside it
//! (an `extra_context` record, for large SVE or SME state) is refused.
//! There is no red zone (AAPCS64 Linux). The save area is an `rt_sigframe`
//! as `rt_sigreturn` reads it: 128 bytes (the unused `siginfo` slot) below
//! the `ucontext` copy, both 16-byte aligned:
//!
//! ```text
//!   high   +-----------------------------+ <- interrupted SP
//!          | (alignment)                 |
//!          +-----------------------------+ <- uc (16-byte aligned)
//!          | kernel ucontext copy (4560) |
//!          +-----------------------------+
//!          | siginfo slot (128, unused)  |
//!          +-----------------------------+ <- SP at trampoline entry
//!   low    | trampoline frames ...       |
//! ```
//!
//! The live context gets SP = that entry, PC = the trampoline, X0 = `uc`,
//! X1 = the argument, X30 (the return address) = 0 and PSTATE's BTYPE
//! cleared (as the kernel does when it starts a handler). The stub sets SP
//! to `uc - 128`, drops the count (a byte load, subtract, store: no other
//! writer runs on this thread, and the stub's PCs are refused) and calls
//! `rt_sigreturn` (139).

use std::io;
#[cfg(target_arch = "aarch64")]
use std::mem::offset_of;
use std::mem::{self, size_of};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, AtomicUsize, Ordering};
use std::sync::Once;

use super::overflow::{call_handler, default_action, PrevAction};

/// The x86-64 frame layout (module note).
#[cfg(target_arch = "x86_64")]
mod frame {
    use std::mem::{offset_of, size_of};

    /// The kernel's `struct ucontext` on x86-64 (uapi `asm/ucontext.h`), with
    /// `struct sigcontext` flattened: what `rt_sigreturn` reads. glibc's
    /// `ucontext_t` starts the same way but is longer (its `sigset_t` is 128
    /// bytes and it carries an FP save area): we copy only the kernel's part.
    #[repr(C)]
    pub(crate) struct SavedContext {
        pub(super) uc_flags: u64,
        pub(super) uc_link: u64,
        pub(super) uc_stack: libc::stack_t,
        /// r8..r15, rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp, rip, eflags,
        /// cs/gs/fs/ss, err, trapno, oldmask, cr2 (glibc's `REG_*` order).
        pub(super) gregs: [u64; 23],
        /// The FP state: `struct _fpstate` (fxsave layout plus xsave data).
        pub(super) fpstate: u64,
        pub(super) reserved1: [u64; 8],
        /// The kernel's signal mask word (64 signals).
        pub(super) uc_sigmask: u64,
    }

    const _: () = assert!(size_of::<SavedContext>() == 304);
    const _: () =
        assert!(offset_of!(SavedContext, gregs) == offset_of!(libc::ucontext_t, uc_mcontext));
    const _: () =
        assert!(offset_of!(SavedContext, uc_sigmask) == offset_of!(libc::ucontext_t, uc_sigmask));
    const _: () = assert!(libc::SYS_rt_sigreturn == 15);

    pub(super) const REG_RDI: usize = 8;
    pub(super) const REG_RSI: usize = 9;
    pub(super) const REG_RSP: usize = 15;
    pub(super) const REG_RIP: usize = 16;
    pub(super) const REG_EFL: usize = 17;
    const _: () = assert!(libc::REG_RDI as usize == REG_RDI);
    const _: () = assert!(libc::REG_RSI as usize == REG_RSI);
    const _: () = assert!(libc::REG_RSP as usize == REG_RSP);
    const _: () = assert!(libc::REG_RIP as usize == REG_RIP);
    const _: () = assert!(libc::REG_EFL as usize == REG_EFL);

    /// EFLAGS.DF: string instructions run backwards. Cleared for the trampoline.
    pub(super) const EFLAGS_DF: u64 = 1 << 10;

    /// The x86-64 red zone: leaf code may use 128 bytes below RSP.
    pub(super) const RED_ZONE: usize = 128;

    /// The legacy (`fxsave`) part of the FP state, and where the kernel's
    /// `struct _fpx_sw_bytes` sits in its software-reserved bytes.
    pub(super) const FXSAVE_SIZE: usize = 512;
    pub(super) const FPX_SW_BYTES: usize = 464;
    pub(super) const FP_XSTATE_MAGIC1: u32 = 0x4650_5853;
    /// More than any real xsave area (AVX-512 with AMX tiles is ~11 KiB):
    /// anything larger means we misread the frame; refuse.
    pub(super) const MAX_FPSTATE: usize = 64 * 1024;
}
#[cfg(target_arch = "x86_64")]
pub(crate) use frame::SavedContext;
#[cfg(target_arch = "x86_64")]
use frame::*;

/// The kernel's `struct ucontext` on aarch64 (uapi `asm/ucontext.h`, laid
/// out as glibc's `ucontext_t`): what `rt_sigreturn` reads, FP/SIMD state
/// included (module note, "aarch64").
#[cfg(target_arch = "aarch64")]
pub(crate) type SavedContext = libc::ucontext_t;

#[cfg(target_arch = "aarch64")]
const _: () = assert!(size_of::<SavedContext>() == 4560);
#[cfg(target_arch = "aarch64")]
const _: () = assert!(libc::SYS_rt_sigreturn == 139);

/// The `siginfo` slot of an `rt_sigframe`, below its `ucontext`.
#[cfg(target_arch = "aarch64")]
const SIGINFO_SIZE: usize = 128;

/// PSTATE.BTYPE (bits 10-11): the branch type a BTI landing pad checks.
#[cfg(target_arch = "aarch64")]
const PSTATE_BTYPE: u64 = 3 << 10;

/// The record that moves FP/SIMD-related state out of the `ucontext`
/// (`EXTRA_MAGIC`), and the end record's magic.
#[cfg(target_arch = "aarch64")]
const EXTRA_MAGIC: u32 = 0x4558_5401;
#[cfg(target_arch = "aarch64")]
const END_MAGIC: u32 = 0;

/// Where the records of FP/SIMD state start in the `sigcontext` (its
/// 16-byte aligned `__reserved` area, after PSTATE), and how long they are.
#[cfg(target_arch = "aarch64")]
const RESERVED_AT: usize = (offset_of!(libc::mcontext_t, pstate) + 8 + 15) & !15;
#[cfg(target_arch = "aarch64")]
const RESERVED_LEN: usize = size_of::<libc::mcontext_t>() - RESERVED_AT;
#[cfg(target_arch = "aarch64")]
const _: () = assert!(RESERVED_AT == 288 && RESERVED_LEN == 4096);

/// The reserved area of `c`'s `sigcontext` (glibc keeps the field private).
#[cfg(target_arch = "aarch64")]
fn reserved(c: &mut SavedContext) -> &mut [u8] {
    let at = &mut c.uc_mcontext as *mut libc::mcontext_t as *mut u8;
    // SAFETY: `RESERVED_AT..+RESERVED_LEN` lies inside the mcontext (the
    // assertion above), plain bytes, borrowed with `c`.
    unsafe { std::slice::from_raw_parts_mut(at.add(RESERVED_AT), RESERVED_LEN) }
}

/// Whether the records of the reserved area all lie inside it, ending with
/// the end record and without an `extra_context` (module note).
#[cfg(target_arch = "aarch64")]
fn records_inline(reserved: &[u8]) -> bool {
    let mut at = 0;
    while at + 8 <= reserved.len() {
        let word = |o: usize| u32::from_ne_bytes(reserved[o..o + 4].try_into().unwrap());
        let (magic, size) = (word(at), word(at + 4) as usize);
        if magic == END_MAGIC {
            return true;
        }
        if magic == EXTRA_MAGIC || size < 8 || size % 16 != 0 || at + size > reserved.len() {
            return false;
        }
        at += size;
    }
    false
}

/// The runtime's decision, called in signal context with the interrupted
/// context: returns true if the signal was its own (consumed), false to
/// pass it to the previous action. Must be async-signal-safe.
pub(crate) type Decide = fn(&mut Interrupted) -> bool;

/// Where a redirected thread continues: `(saved context, argument)`.
pub(crate) type Trampoline = extern "C" fn(*mut SavedContext, usize) -> !;

static DECIDE: AtomicPtr<()> = AtomicPtr::new(ptr::null_mut());
static PREV_URG: PrevAction = PrevAction::new();
static INSTALL: Once = Once::new();
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// Executable segments of the object holding the runtime, `[lo, hi)` pairs
/// (0, 0 = unused); written once before `INSTALLED` is set.
const MAX_RANGES: usize = 4;
static CODE: [AtomicUsize; 2 * MAX_RANGES] = [const { AtomicUsize::new(0) }; 2 * MAX_RANGES];

/// Our process id, for `tgkill`.
static PID: AtomicUsize = AtomicUsize::new(0);

/// The address of the runtime's trampoline, the function a preempted
/// goroutine is redirected to (`runtime::asyncpreempt`): registered with
/// the handler, read by the unwinder (`traceback::unwind`), which
/// continues through its save area into the interrupted code. 0 until a
/// handler is installed, when no frame can be the trampoline's.
static TRAMPOLINE: AtomicUsize = AtomicUsize::new(0);

/// The trampoline's address (0 before [`install`]).
#[inline]
pub(crate) fn trampoline_addr() -> usize {
    TRAMPOLINE.load(Ordering::Acquire)
}

/// Installs the `SIGURG` handler once per process: finds the code range
/// first (the handler refuses every PC until it is known), then swaps in
/// our action, saving the previous one for chaining. `decide` and the
/// runtime's `trampoline` address are stored on every call (a hook
/// registered at start: this layer never names the runtime). Fails if the
/// code range cannot be found or `sigaction` fails; asynchronous
/// preemption is then off.
pub(crate) fn install(decide: Decide, trampoline: usize) -> io::Result<()> {
    TRAMPOLINE.store(trampoline, Ordering::Release);
    DECIDE.store(decide as *mut (), Ordering::Release);
    INSTALL.call_once(|| {
        PID.store(std::process::id() as usize, Ordering::Relaxed);
        if !find_code_ranges() {
            return;
        }
        let mut new = default_action();
        new.sa_sigaction = on_sigurg as *const () as libc::sighandler_t;
        new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
        let mut old = default_action();
        // SAFETY: `new` is a valid action whose handler has the SA_SIGINFO
        // signature; `old` is a valid out-parameter. One swap, so a handler
        // installed concurrently is not lost; a SIGURG arriving before
        // `PREV_URG` is saved is chained as if the old action were SIG_DFL
        // (which ignores it).
        let r = unsafe {
            libc::sigemptyset(&mut new.sa_mask);
            libc::sigaction(libc::SIGURG, &new, &mut old)
        };
        if r != 0 {
            return;
        }
        // SAFETY: inside INSTALL, the only writer.
        unsafe { PREV_URG.save(old) };
        // Release: pairs with the Acquire load in `installed`; the code
        // ranges and PID are written before.
        INSTALLED.store(true, Ordering::Release);
    });
    if installed() {
        Ok(())
    } else {
        Err(io::Error::other(
            "cannot install the SIGURG handler (code range or sigaction)",
        ))
    }
}

/// Whether the handler is installed (sysmon sends nothing before).
#[inline]
pub(crate) fn installed() -> bool {
    INSTALLED.load(Ordering::Acquire)
}

/// Sends `SIGURG` to thread `tid` of this process; false if the thread is
/// gone.
pub(crate) fn signal_thread(tid: i32) -> bool {
    let pid = PID.load(Ordering::Relaxed) as libc::pid_t;
    // SAFETY: tgkill has no memory-safety preconditions; the tgid check
    // keeps a recycled tid from naming another process's thread.
    unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, libc::SIGURG) == 0 }
}

/// The calling thread's signal mask (the kernel's 64-bit word).
pub(crate) fn current_sigmask() -> u64 {
    let mut mask: u64 = 0;
    // SAFETY: a query (no new set); `mask` holds the kernel's 8 bytes.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            ptr::null::<u64>(),
            &mut mask as *mut u64,
            size_of::<u64>(),
        )
    };
    mask
}

/// Whether an interrupted `pc` may be preempted as far as code location
/// goes: it lies in the object holding the runtime (the main executable, in
/// which Rust code and the statically linked std live), not in libc, the
/// dynamic loader, the vDSO or another shared library (the system
/// allocator among them), and not in the sigreturn stub. Async-signal-safe.
pub(crate) fn preemptible_pc(pc: usize) -> bool {
    let (stub_lo, stub_hi) = stub_range();
    if pc >= stub_lo && pc < stub_hi {
        return false;
    }
    for r in 0..MAX_RANGES {
        let lo = CODE[2 * r].load(Ordering::Relaxed);
        let hi = CODE[2 * r + 1].load(Ordering::Relaxed);
        if lo < hi && pc >= lo && pc < hi {
            return true;
        }
    }
    false
}

fn stub_range() -> (usize, usize) {
    let lo = goroutine_asyncpreempt_sigreturn
        as unsafe extern "C" fn(*mut SavedContext, *mut u8) -> ! as usize;
    // SAFETY: only the address of the label is taken, never its contents
    // (an unsafe operation before Rust 1.82, the crate's MSRV is 1.80).
    #[allow(unused_unsafe)]
    let hi = unsafe { ptr::addr_of!(goroutine_asyncpreempt_sigreturn_end) } as usize;
    (lo, hi)
}

/// Records the executable `PT_LOAD` segments of the loaded object that
/// contains this function. Not async-signal-safe (`dl_iterate_phdr` takes
/// the loader's lock): called once at install.
fn find_code_ranges() -> bool {
    struct Search {
        want: usize,
        ranges: [(usize, usize); MAX_RANGES],
        found: bool,
    }
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: `data` is the `Search` passed below; `info` is valid for
        // this call, and its `dlpi_phdr` array has `dlpi_phnum` entries.
        let (s, info) = unsafe { (&mut *(data as *mut Search), &*info) };
        let phdrs = if info.dlpi_phdr.is_null() {
            &[][..]
        } else {
            // SAFETY: as above.
            unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) }
        };
        let mut ranges = [(0, 0); MAX_RANGES];
        let mut n = 0;
        let mut ours = false;
        for ph in phdrs {
            if ph.p_type != libc::PT_LOAD || ph.p_flags & libc::PF_X == 0 {
                continue;
            }
            let lo = (info.dlpi_addr as usize).wrapping_add(ph.p_vaddr as usize);
            let hi = lo.wrapping_add(ph.p_memsz as usize);
            ours |= s.want >= lo && s.want < hi;
            if n < MAX_RANGES {
                ranges[n] = (lo, hi);
                n += 1;
            }
        }
        if ours {
            s.ranges = ranges;
            s.found = true;
            return 1;
        }
        0
    }
    let mut s = Search {
        want: find_code_ranges as fn() -> bool as usize,
        ranges: [(0, 0); MAX_RANGES],
        found: false,
    };
    // SAFETY: `each` matches the callback type and only reads what the
    // loader passes it; `s` outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(each), &mut s as *mut Search as *mut libc::c_void) };
    if !s.found {
        return false;
    }
    for (i, (lo, hi)) in s.ranges.iter().enumerate() {
        CODE[2 * i].store(*lo, Ordering::Relaxed);
        CODE[2 * i + 1].store(*hi, Ordering::Relaxed);
    }
    true
}

/// The signal handler.
extern "C" fn on_sigurg(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: __errno_location returns this thread's errno slot.
    let errno_slot = unsafe { libc::__errno_location() };
    // SAFETY: as above, a valid pointer.
    let saved_errno = unsafe { *errno_slot };

    let mut consumed = false;
    let f = DECIDE.load(Ordering::Acquire);
    if !f.is_null() && !ctx.is_null() {
        // SAFETY: DECIDE only ever holds a `Decide` stored by `install`;
        // function and data pointers have the same representation here.
        let decide = unsafe { mem::transmute::<*mut (), Decide>(f) };
        let mut it = Interrupted {
            uc: ctx as *mut SavedContext,
        };
        consumed = decide(&mut it);
    }
    if !consumed {
        let old = PREV_URG.get();
        let h = old.sa_sigaction;
        if h != libc::SIG_DFL && h != libc::SIG_IGN {
            // SAFETY: forwarding the kernel's arguments, unchanged, to the
            // handler function that was installed before ours.
            unsafe { call_handler(&old, sig, info, ctx) };
        }
    }
    // SAFETY: as above.
    unsafe { *errno_slot = saved_errno };
}

/// The interrupted context, as the kernel saved it in the signal frame.
pub(crate) struct Interrupted {
    /// The kernel's ucontext (its first 304 bytes are `SavedContext`).
    uc: *mut SavedContext,
}

/// Where [`Interrupted::redirect`] will write, computed first so the
/// runtime can check it against the goroutine's stack.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Plan {
    uc: usize,
    #[cfg(target_arch = "x86_64")]
    fp: usize,
    #[cfg(target_arch = "x86_64")]
    fp_size: usize,
    /// The trampoline's entry SP; the lowest address written.
    pub(crate) entry_sp: usize,
}

impl Interrupted {
    fn ctx(&self) -> &SavedContext {
        // SAFETY: `uc` points to the kernel's ucontext in the live frame of
        // the handler that created `self`.
        unsafe { &*self.uc }
    }

    #[cfg(target_arch = "x86_64")]
    /// The interrupted instruction pointer.
    pub(crate) fn pc(&self) -> usize {
        self.ctx().gregs[REG_RIP] as usize
    }

    #[cfg(target_arch = "x86_64")]
    /// The interrupted stack pointer.
    pub(crate) fn sp(&self) -> usize {
        self.ctx().gregs[REG_RSP] as usize
    }

    #[cfg(target_arch = "x86_64")]
    /// The interrupted code's signal mask.
    pub(crate) fn sigmask(&self) -> u64 {
        self.ctx().uc_sigmask
    }

    #[cfg(target_arch = "x86_64")]
    /// The save-area layout below the interrupted SP, or None if the FP
    /// state in the frame is missing or looks wrong.
    pub(crate) fn plan(&self) -> Option<Plan> {
        let fp_src = self.ctx().fpstate as usize;
        if fp_src == 0 {
            return None;
        }
        // SAFETY: the kernel's FP state is at least the 512-byte fxsave
        // area; `_fpx_sw_bytes` lies inside it (magic1, extended_size).
        let (magic1, extended) = unsafe {
            let sw = (fp_src + FPX_SW_BYTES) as *const u32;
            (
                ptr::read_unaligned(sw),
                ptr::read_unaligned(sw.add(1)) as usize,
            )
        };
        let fp_size = if magic1 == FP_XSTATE_MAGIC1 {
            extended
        } else {
            FXSAVE_SIZE
        };
        if !(FXSAVE_SIZE..=MAX_FPSTATE).contains(&fp_size) {
            return None;
        }
        let sp = self.sp();
        let fp = sp.checked_sub(RED_ZONE + fp_size)? & !63;
        let uc = fp.checked_sub(size_of::<SavedContext>())? & !63;
        let entry_sp = uc.checked_sub(8)?;
        Some(Plan {
            uc,
            fp,
            fp_size,
            entry_sp,
        })
    }

    #[cfg(target_arch = "x86_64")]
    /// Copies the context to the save area of `plan` and makes the handler's
    /// return continue in `to(saved, arg)` on the interrupted stack.
    ///
    /// # Safety
    /// `[plan.entry_sp, self.sp())` must be writable memory of the
    /// interrupted stack that nothing else uses (it is below the
    /// interrupted SP's red zone), `plan` must come from `self.plan()`, and
    /// `to` must never return.
    pub(crate) unsafe fn redirect(&mut self, plan: &Plan, to: Trampoline, arg: usize) {
        let src = self.uc;
        let saved = plan.uc as *mut SavedContext;
        // SAFETY: the source is the kernel's frame (valid for its ucontext
        // and its FP state of `fp_size` bytes, as `plan` read); the
        // destinations are the caller's save area, disjoint from the frame
        // (which is on the alternate signal stack).
        unsafe {
            ptr::copy_nonoverlapping(src as *const SavedContext, saved, 1);
            ptr::copy_nonoverlapping(
                (*src).fpstate as usize as *const u8,
                plan.fp as *mut u8,
                plan.fp_size,
            );
            (*saved).fpstate = plan.fp as u64;
            // The trampoline's return address: none (ends backtraces).
            (plan.entry_sp as *mut u64).write(0);
            let g = &mut (*src).gregs;
            g[REG_RSP] = plan.entry_sp as u64;
            g[REG_RIP] = to as usize as u64;
            g[REG_RDI] = plan.uc as u64;
            g[REG_RSI] = arg as u64;
            g[REG_EFL] &= !EFLAGS_DF;
        }
    }

    /// The interrupted instruction pointer.
    #[cfg(target_arch = "aarch64")]
    pub(crate) fn pc(&self) -> usize {
        self.ctx().uc_mcontext.pc as usize
    }

    /// The interrupted stack pointer.
    #[cfg(target_arch = "aarch64")]
    pub(crate) fn sp(&self) -> usize {
        self.ctx().uc_mcontext.sp as usize
    }

    /// The interrupted code's signal mask (the kernel's word: the first 8
    /// bytes of glibc's `sigset_t`).
    #[cfg(target_arch = "aarch64")]
    pub(crate) fn sigmask(&self) -> u64 {
        // SAFETY: `sigset_t` is at least 8 bytes of plain data.
        unsafe {
            ptr::read_unaligned(&self.ctx().uc_sigmask as *const libc::sigset_t as *const u64)
        }
    }

    /// The save-area layout below the interrupted SP (module note,
    /// "aarch64"), or None if the frame's state does not all lie inside
    /// the `ucontext` (an `extra_context` record).
    #[cfg(target_arch = "aarch64")]
    pub(crate) fn plan(&self) -> Option<Plan> {
        // SAFETY: `uc` points to the kernel's ucontext in the live frame of
        // the handler that created `self`; only read here.
        if !records_inline(reserved(unsafe { &mut *self.uc })) {
            return None;
        }
        let uc = self.sp().checked_sub(size_of::<SavedContext>())? & !15;
        let entry_sp = uc.checked_sub(SIGINFO_SIZE)?;
        Some(Plan { uc, entry_sp })
    }

    /// Copies the context to the save area of `plan` and makes the handler's
    /// return continue in `to(saved, arg)` on the interrupted stack.
    ///
    /// # Safety
    /// `[plan.entry_sp, self.sp())` must be writable memory of the
    /// interrupted stack that nothing else uses (it is below the
    /// interrupted SP), `plan` must come from `self.plan()`, and `to` must
    /// never return.
    #[cfg(target_arch = "aarch64")]
    pub(crate) unsafe fn redirect(&mut self, plan: &Plan, to: Trampoline, arg: usize) {
        let src = self.uc;
        let saved = plan.uc as *mut SavedContext;
        // SAFETY: the source is the kernel's ucontext in the handler's frame
        // (on the alternate signal stack), FP/SIMD records included; the
        // destination is the caller's save area, disjoint from it.
        unsafe {
            ptr::copy_nonoverlapping(src as *const SavedContext, saved, 1);
            let mc = &mut (*src).uc_mcontext;
            mc.sp = plan.entry_sp as u64;
            mc.pc = to as usize as u64;
            mc.regs[0] = plan.uc as u64;
            mc.regs[1] = arg as u64;
            // The trampoline's return address: none (ends backtraces).
            mc.regs[30] = 0;
            mc.pstate &= !PSTATE_BTYPE;
        }
    }
}

/// Restores the context saved by [`Interrupted::redirect`]: fixes its
/// alternate stack and signal mask for the calling thread, drops
/// `in_runtime` by one and `rt_sigreturn`s into the interrupted code.
///
/// # Safety
/// `saved` must be the save area written by `redirect` for the goroutine
/// running on the calling thread, which must be running on that goroutine's
/// stack below the save area (in the trampoline); nothing of the caller's
/// frames is used again.
pub(crate) unsafe fn resume(saved: *mut SavedContext, in_runtime: &AtomicU8) -> ! {
    // SAFETY: a zeroed stack_t is a valid out-parameter.
    let mut st: libc::stack_t = unsafe { mem::zeroed() };
    // SAFETY: querying only.
    if unsafe { libc::sigaltstack(ptr::null(), &mut st) } != 0 {
        st = libc::stack_t {
            ss_sp: ptr::null_mut(),
            ss_flags: libc::SS_DISABLE,
            ss_size: 0,
        };
    }
    // We are not on the alternate stack; the kernel reports SS_ONSTACK only
    // for a thread that is, and would refuse to install it then.
    st.ss_flags &= !libc::SS_ONSTACK;
    let mask = current_sigmask();
    // SAFETY: `saved` is our save area (contract); the stub never returns.
    unsafe {
        (*saved).uc_stack = st;
        #[cfg(target_arch = "x86_64")]
        {
            (*saved).uc_sigmask = mask;
        }
        // The kernel's word: the first 8 bytes of glibc's `sigset_t`.
        #[cfg(target_arch = "aarch64")]
        ptr::write_unaligned(
            &mut (*saved).uc_sigmask as *mut libc::sigset_t as *mut u64,
            mask,
        );
        goroutine_asyncpreempt_sigreturn(saved, in_runtime.as_ptr())
    }
}

// The sigreturn stub: RSP = the saved ucontext (the kernel finds the frame
// at RSP - 8, where a handler's `ret` would have popped its return address),
// the goroutine's in-runtime count drops by one, then rt_sigreturn (15).
// Hidden symbols: they do not leave the final binary's symbol table.
#[cfg(target_arch = "x86_64")]
std::arch::global_asm!(
    ".pushsection .text.goroutine_asyncpreempt_sigreturn,\"ax\",@progbits",
    ".p2align 4",
    ".globl goroutine_asyncpreempt_sigreturn",
    ".hidden goroutine_asyncpreempt_sigreturn",
    ".type goroutine_asyncpreempt_sigreturn,@function",
    "goroutine_asyncpreempt_sigreturn:",
    "mov rsp, rdi",
    "sub byte ptr [rsi], 1",
    "mov eax, 15",
    "syscall",
    "ud2",
    ".globl goroutine_asyncpreempt_sigreturn_end",
    ".hidden goroutine_asyncpreempt_sigreturn_end",
    "goroutine_asyncpreempt_sigreturn_end:",
    ".size goroutine_asyncpreempt_sigreturn, goroutine_asyncpreempt_sigreturn_end - goroutine_asyncpreempt_sigreturn",
    ".popsection",
);

// The aarch64 stub (module note, "aarch64"): SP = the saved ucontext minus
// the siginfo slot (the rt_sigframe rt_sigreturn reads at SP), the count
// drops by one, then rt_sigreturn (139).
#[cfg(target_arch = "aarch64")]
std::arch::global_asm!(
    ".pushsection .text.goroutine_asyncpreempt_sigreturn,\"ax\",@progbits",
    ".p2align 4",
    ".globl goroutine_asyncpreempt_sigreturn",
    ".hidden goroutine_asyncpreempt_sigreturn",
    ".type goroutine_asyncpreempt_sigreturn,@function",
    "goroutine_asyncpreempt_sigreturn:",
    "sub sp, x0, #128",
    "ldrb w9, [x1]",
    "sub w9, w9, #1",
    "strb w9, [x1]",
    "mov x8, #139",
    "svc #0",
    "brk #0",
    ".globl goroutine_asyncpreempt_sigreturn_end",
    ".hidden goroutine_asyncpreempt_sigreturn_end",
    "goroutine_asyncpreempt_sigreturn_end:",
    ".size goroutine_asyncpreempt_sigreturn, goroutine_asyncpreempt_sigreturn_end - goroutine_asyncpreempt_sigreturn",
    ".popsection",
);

extern "C" {
    fn goroutine_asyncpreempt_sigreturn(saved: *mut SavedContext, in_runtime: *mut u8) -> !;
    static goroutine_asyncpreempt_sigreturn_end: u8;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_range_is_the_runtime_object_not_libc_nor_the_stub() {
        assert!(find_code_ranges());
        let here = code_range_is_the_runtime_object_not_libc_nor_the_stub as fn() as usize;
        assert!(preemptible_pc(here));
        assert!(preemptible_pc(on_sigurg as *const () as usize));
        // SAFETY: dlsym with a NUL-terminated name; only the address is used.
        let getpid = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"getpid".as_ptr()) } as usize;
        assert_ne!(getpid, 0);
        assert!(!preemptible_pc(getpid), "a PC in libc must be refused");
        let (lo, hi) = stub_range();
        assert!(hi > lo && hi - lo < 64);
        for pc in lo..hi {
            assert!(!preemptible_pc(pc), "the sigreturn stub must be refused");
        }
        assert!(!preemptible_pc(0));
    }

    /// A fake kernel context whose SP is `sp` and whose FP state is `fp`.
    #[cfg(target_arch = "x86_64")]
    fn fake(sp: usize, fp: &mut [u8]) -> SavedContext {
        // SAFETY: all-zero is a valid SavedContext (integers and a stack_t).
        let mut c: SavedContext = unsafe { mem::zeroed() };
        c.gregs[REG_RSP] = sp as u64;
        c.fpstate = fp.as_mut_ptr() as u64;
        c
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn save_area_layout() {
        let mut fp = vec![0u8; 4096];
        // Legacy FP state only (no xstate magic): 512 bytes.
        for sp in [0x7000_1000usize, 0x7000_1008, 0x7000_0ff3] {
            let mut c = fake(sp, &mut fp);
            let it = Interrupted { uc: &mut c };
            let p = it.plan().unwrap();
            assert_eq!(p.fp_size, FXSAVE_SIZE);
            assert_eq!(p.fp % 64, 0, "xrstor needs 64-byte alignment");
            assert!(p.fp + p.fp_size <= sp - RED_ZONE, "the red zone is kept");
            assert_eq!(p.uc % 64, 0);
            assert!(p.uc + size_of::<SavedContext>() <= p.fp);
            assert_eq!(p.entry_sp, p.uc - 8);
            assert_eq!(p.entry_sp % 16, 8, "the ABI's alignment at a call");
        }
        // With the xstate trailer, `extended_size` bytes.
        fp[FPX_SW_BYTES..FPX_SW_BYTES + 4].copy_from_slice(&FP_XSTATE_MAGIC1.to_ne_bytes());
        fp[FPX_SW_BYTES + 4..FPX_SW_BYTES + 8].copy_from_slice(&2696u32.to_ne_bytes());
        let mut c = fake(0x7000_1000, &mut fp);
        let p = Interrupted { uc: &mut c }.plan().unwrap();
        assert_eq!(p.fp_size, 2696);
        assert!(p.fp + 2696 <= 0x7000_1000 - RED_ZONE);
        // An absurd size or a missing FP state: refused.
        fp[FPX_SW_BYTES + 4..FPX_SW_BYTES + 8].copy_from_slice(&(1u32 << 20).to_ne_bytes());
        let mut c = fake(0x7000_1000, &mut fp);
        assert!(Interrupted { uc: &mut c }.plan().is_none());
        let mut c = fake(0x7000_1000, &mut fp);
        c.fpstate = 0;
        assert!(Interrupted { uc: &mut c }.plan().is_none());
    }

    #[cfg(target_arch = "aarch64")]
    #[test]
    fn save_area_layout() {
        // SAFETY: all-zero is a valid ucontext_t (integers and arrays).
        let mut c: SavedContext = unsafe { mem::zeroed() };
        // An FP/SIMD record (528 bytes), then the end record.
        let fpsimd = 0x4650_8001u32.to_ne_bytes();
        reserved(&mut c)[..4].copy_from_slice(&fpsimd);
        reserved(&mut c)[4..8].copy_from_slice(&528u32.to_ne_bytes());
        for sp in [0x7000_1000usize, 0x7000_1008, 0x7000_0ff3] {
            c.uc_mcontext.sp = sp as u64;
            let p = Interrupted { uc: &mut c }.plan().unwrap();
            assert_eq!(p.uc % 16, 0);
            assert!(p.uc + size_of::<SavedContext>() <= sp, "below the SP");
            assert_eq!(p.entry_sp, p.uc - SIGINFO_SIZE, "an rt_sigframe at SP");
            assert_eq!(p.entry_sp % 16, 0, "the ABI's SP alignment");
        }
        // An extra_context record (state outside the ucontext): refused.
        reserved(&mut c)[528..532].copy_from_slice(&EXTRA_MAGIC.to_ne_bytes());
        reserved(&mut c)[532..536].copy_from_slice(&32u32.to_ne_bytes());
        assert!(Interrupted { uc: &mut c }.plan().is_none());
        // No end record: refused.
        reserved(&mut c)[528..].fill(0xff);
        assert!(Interrupted { uc: &mut c }.plan().is_none());
    }
}
