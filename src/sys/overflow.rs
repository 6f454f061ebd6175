//! Stack-overflow reporting: a `SIGSEGV`/`SIGBUS` handler that recognises a
//! fault in the guard page of the running goroutine's stack, and the
//! alternate signal stacks it runs on.
//!
//! A goroutine that overflows its stack faults in the guard page below it
//! (`g::stack`). The kernel cannot push a signal frame on that stack, so the
//! handler runs on the thread's alternate signal stack (`SA_ONSTACK`; every
//! thread that runs goroutines calls [`install_altstack_for_current_thread`]).
//! The handler asks the runtime's `lookup` whether the fault address is the
//! guard of the goroutine running on this thread; if so it writes
//! `goroutine N has overflowed its stack (size 256 KiB)` and Go's
//! `fatal error: stack overflow` to stderr with `write(2)` and exits with
//! status 2 as Go does (`SIGABRT` with `GOTRACEBACK=crash`:
//! `super::fatal_exit`). Everything on that path is async-signal-safe: no
//! allocation, no locks, no formatting machinery.
//!
//! Any other fault is passed on to the handler that was installed before
//! ours, so Rust's own "thread 'x' has overflowed its stack" report for plain
//! threads (std installs its handler before `main`) and any host handler keep
//! working. If the previous action was `SIG_DFL` or `SIG_IGN`, it is put back
//! and the handler returns: the faulting instruction runs again and the
//! kernel delivers the fault with the default action, so the process dies of
//! `SIGSEGV` exactly as without us.
//!
//! `SA_NODEFER` is deliberately not used: should the lookup itself fault, the
//! nested fault finds the signal blocked and the kernel kills the process at
//! once instead of recursing on the alternate stack.
//!
//! SIGQUIT (the goroutine dump, `runtime::dump`): the handler only writes a
//! byte to a pipe whose read end a runtime thread blocks on, then chains to
//! the previous handler if that was a function. Nothing else happens in
//! signal context, except for the dump's own requests: see
//! [`capture_registers`].

use std::cell::{Cell, UnsafeCell};
use std::io;
use std::mem::{self, MaybeUninit};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::Once;

use super::mem as vm;

/// The runtime's question to the handler: is `fault_addr` in the guard page
/// of the goroutine running on this thread? If so, its id and usable stack
/// size. Called in signal context: it must be async-signal-safe (atomics and
/// const thread-locals only; no allocation, no locks).
pub(crate) type OverflowLookup = fn(fault_addr: usize) -> Option<(u64, usize)>;

/// Usable size of the alternate signal stacks we create (at least; see
/// `altstack_size`).
const ALTSTACK_SIZE: usize = 64 * 1024;

static LOOKUP: AtomicPtr<()> = AtomicPtr::new(ptr::null_mut());
static INSTALL: Once = Once::new();

/// The action that was installed for a signal before ours.
pub(super) struct PrevAction {
    action: UnsafeCell<MaybeUninit<libc::sigaction>>,
    /// Set (Release) once `action` is written; never cleared.
    saved: AtomicBool,
}

// SAFETY: `action` is written once, inside `INSTALL`, before `saved` is set
// with Release; it is only read after `saved` is seen true with Acquire.
unsafe impl Sync for PrevAction {}

impl PrevAction {
    pub(super) const fn new() -> PrevAction {
        PrevAction {
            action: UnsafeCell::new(MaybeUninit::uninit()),
            saved: AtomicBool::new(false),
        }
    }

    /// Records the previous action.
    ///
    /// # Safety
    /// At most once per `PrevAction`, by the one thread installing our
    /// handler (inside a `Once`).
    pub(super) unsafe fn save(&self, old: libc::sigaction) {
        // SAFETY: `saved` is still false (called once), so no reader looks
        // at `action` yet; the Release store below publishes it.
        unsafe { (*self.action.get()).write(old) };
        self.saved.store(true, Ordering::Release);
    }

    /// The saved action, or `SIG_DFL` if none was saved (yet).
    pub(super) fn get(&self) -> libc::sigaction {
        if self.saved.load(Ordering::Acquire) {
            // SAFETY: written once before `saved` was set (see Sync above).
            unsafe { (*self.action.get()).assume_init() }
        } else {
            default_action()
        }
    }
}

static PREV_SEGV: PrevAction = PrevAction::new();
static PREV_BUS: PrevAction = PrevAction::new();

pub(super) fn default_action() -> libc::sigaction {
    // SAFETY: sigaction is a plain C struct for which all-zero is valid:
    // SIG_DFL (0), no flags, an empty mask.
    unsafe { mem::zeroed() }
}

/// Installs the stack-overflow handler for `SIGSEGV` and `SIGBUS` once per
/// process, saving the previous actions for chaining. `lookup` (see
/// [`OverflowLookup`]) is stored on every call; the latest one is used.
pub(crate) fn install_overflow_handler(lookup: OverflowLookup) {
    // The handler's exit reads the mode: never the environment there.
    super::init_crash_mode();
    LOOKUP.store(lookup as *mut (), Ordering::Release);
    INSTALL.call_once(|| {
        for (sig, prev) in [(libc::SIGSEGV, &PREV_SEGV), (libc::SIGBUS, &PREV_BUS)] {
            let mut new = default_action();
            new.sa_sigaction = on_fault as *const () as libc::sighandler_t;
            new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            let mut old = default_action();
            // SAFETY: `new` is a valid action whose handler has the SA_SIGINFO
            // signature; `old` is a valid place for the previous one. The
            // mask is emptied by sigemptyset on a live struct. Swapping in one
            // call means no handler installed concurrently is lost; a fault
            // before `prev` is written below is handled as if the previous
            // action were SIG_DFL.
            let r = unsafe {
                libc::sigemptyset(&mut new.sa_mask);
                libc::sigaction(sig, &new, &mut old)
            };
            if r != 0 {
                // Only possible for an invalid signal number.
                continue;
            }
            // SAFETY: we are inside INSTALL, the only writer.
            unsafe { prev.save(old) };
        }
    });
}

/// The signal handler.
extern "C" fn on_fault(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: __errno_location returns this thread's errno slot.
    let errno_slot = unsafe { libc::__errno_location() };
    // SAFETY: as above, a valid pointer.
    let saved_errno = unsafe { *errno_slot };

    // SAFETY: with SA_SIGINFO the kernel passes a valid siginfo_t. si_addr is
    // meaningful for kernel-generated faults (si_code > 0) only; for signals
    // sent with kill/tgkill that union member holds the sender's pid/uid.
    let (code, addr) = unsafe {
        match info.as_ref() {
            Some(i) => (i.si_code, i.si_addr() as usize),
            None => (0, 0),
        }
    };
    if code > 0 && addr != 0 {
        let f = LOOKUP.load(Ordering::Acquire);
        if !f.is_null() {
            // SAFETY: LOOKUP only ever holds an `OverflowLookup` stored by
            // install_overflow_handler; function and data pointers have the
            // same size and representation on supported targets.
            let lookup = unsafe { mem::transmute::<*mut (), OverflowLookup>(f) };
            if let Some((id, size)) = lookup(addr) {
                report_overflow_and_exit(id, size);
            }
        }
    }

    // SAFETY: forwarding the arguments the kernel gave us, unchanged.
    unsafe { chain(sig, info, ctx, code) };
    // SAFETY: as above.
    unsafe { *errno_slot = saved_errno };
}

/// Passes a fault that is not a goroutine stack overflow to the previous
/// action.
///
/// # Safety
/// Must be called from the signal handler with the arguments the kernel
/// passed to it.
unsafe fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void, code: i32) {
    let prev = if sig == libc::SIGBUS {
        &PREV_BUS
    } else {
        &PREV_SEGV
    };
    let old = prev.get();
    let handler = old.sa_sigaction;
    if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
        let from_fault = code > 0;
        if !from_fault && handler == libc::SIG_IGN {
            // Sent with kill() and ignored before we came: keep ignoring it.
            return;
        }
        // SAFETY: restoring a disposition the process had before.
        unsafe { libc::sigaction(sig, &old, ptr::null_mut()) };
        if !from_fault {
            // Sent with kill(): re-send it; it is blocked until we return,
            // then the default action (termination) applies.
            // SAFETY: raise has no memory-safety preconditions.
            unsafe { libc::raise(sig) };
        }
        // A fault: returning re-executes the faulting instruction, which
        // faults again with the old disposition (the kernel forces the default
        // action for an ignored or blocked synchronous fault).
        return;
    }
    // SAFETY: forwarding the kernel's arguments (our contract).
    unsafe { call_handler(&old, sig, info, ctx) };
}

/// Calls the handler function of `old` (neither `SIG_DFL` nor `SIG_IGN`)
/// as the kernel would have: honouring `SA_RESETHAND` and `SA_SIGINFO`.
///
/// # Safety
/// Must be called from a signal handler with the arguments the kernel
/// passed to it; `old.sa_sigaction` must be a handler function.
pub(super) unsafe fn call_handler(
    old: &libc::sigaction,
    sig: libc::c_int,
    info: *mut libc::siginfo_t,
    ctx: *mut libc::c_void,
) {
    let handler = old.sa_sigaction;
    if old.sa_flags & libc::SA_RESETHAND != 0 {
        // What the kernel would have done on entry to that handler.
        let dfl = default_action();
        // SAFETY: installing SIG_DFL is always valid.
        unsafe { libc::sigaction(sig, &dfl, ptr::null_mut()) };
    }
    if old.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: a SA_SIGINFO action's handler has this signature.
        let f = unsafe {
            mem::transmute::<
                libc::sighandler_t,
                extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void),
            >(handler)
        };
        f(sig, info, ctx);
    } else {
        // SAFETY: a plain action's handler has this signature.
        let f =
            unsafe { mem::transmute::<libc::sighandler_t, extern "C" fn(libc::c_int)>(handler) };
        f(sig);
    }
}

/// Writes the overflow report to stderr and ends the process as Go does
/// for its `fatal error: stack overflow`: exit status 2, or `SIGABRT` with
/// `GOTRACEBACK=crash` (`super::fatal_exit`). Async-signal-safe: the mode
/// was read when the handler was installed.
fn report_overflow_and_exit(id: u64, size: usize) -> ! {
    let mut buf = [0u8; 128];
    let n = format_overflow(&mut buf, id, size);
    write_all_stderr(&buf[..n]);
    write_all_stderr(b"fatal error: stack overflow\n");
    super::fatal_exit()
}

/// Formats `goroutine {id} has overflowed its stack (size {S})\n` into `buf`
/// without allocating, where S is `N KiB` for a multiple of 1024 and
/// `N bytes` otherwise. Returns the length (at most 90 bytes).
fn format_overflow(buf: &mut [u8; 128], id: u64, size: usize) -> usize {
    let mut w = BufWriter { buf, len: 0 };
    w.push(b"goroutine ");
    w.push_u64(id);
    w.push(b" has overflowed its stack (size ");
    if size != 0 && size % 1024 == 0 {
        w.push_u64((size / 1024) as u64);
        w.push(b" KiB)\n");
    } else {
        w.push_u64(size as u64);
        w.push(b" bytes)\n");
    }
    w.len
}

struct BufWriter<'a> {
    buf: &'a mut [u8; 128],
    len: usize,
}

impl BufWriter<'_> {
    fn push(&mut self, s: &[u8]) {
        for &b in s {
            if self.len < self.buf.len() {
                self.buf[self.len] = b;
                self.len += 1;
            }
        }
    }

    fn push_u64(&mut self, mut v: u64) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.push(&digits[i..]);
    }
}

/// write(2) all of `bytes` to fd 2, retrying on EINTR and short writes.
fn write_all_stderr(mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: `bytes` is a valid readable buffer of that length.
        let n = unsafe { libc::write(2, bytes.as_ptr().cast(), bytes.len()) };
        if n > 0 {
            bytes = &bytes[n as usize..];
        } else if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        } else {
            return;
        }
    }
}

// ---------------------------------------------------------------------------
// SIGQUIT: the goroutine dump request
// ---------------------------------------------------------------------------

/// The write end of the dump request pipe (-1: none).
static QUIT_FD: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);
static PREV_QUIT: PrevAction = PrevAction::new();
static INSTALL_QUIT: Once = Once::new();

/// A pipe, both ends close-on-exec, the write end non-blocking (a signal
/// handler writing to a full pipe must not block). Returns (read, write).
pub(crate) fn pipe() -> io::Result<(std::os::fd::RawFd, std::os::fd::RawFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fcntl on the descriptor we just created.
    let r = unsafe {
        let fl = libc::fcntl(fds[1], libc::F_GETFL);
        libc::fcntl(fds[1], libc::F_SETFL, fl | libc::O_NONBLOCK)
    };
    if r != 0 {
        let e = io::Error::last_os_error();
        // SAFETY: closing the two descriptors we own.
        unsafe {
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
        return Err(e);
    }
    Ok((fds[0], fds[1]))
}

/// Installs the SIGQUIT handler (once per process): on SIGQUIT it writes
/// one byte to `fd` (the runtime's dump thread reads it), then calls the
/// handler installed before ours, if that was a function (chaining).
pub(crate) fn install_quit_handler(fd: std::os::fd::RawFd) -> io::Result<()> {
    QUIT_FD.store(fd, Ordering::Release);
    let mut result = Ok(());
    INSTALL_QUIT.call_once(|| {
        let mut new = default_action();
        new.sa_sigaction = on_quit as *const () as libc::sighandler_t;
        new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
        let mut old = default_action();
        // SAFETY: `new` is a valid action whose handler has the SA_SIGINFO
        // signature; `old` is a valid place for the previous one; the mask is
        // emptied on a live struct.
        let r = unsafe {
            libc::sigemptyset(&mut new.sa_mask);
            libc::sigaction(libc::SIGQUIT, &new, &mut old)
        };
        if r != 0 {
            result = Err(io::Error::last_os_error());
            return;
        }
        // SAFETY: inside INSTALL_QUIT, the only writer; `saved` is still
        // false, so no reader looks at `action` yet.
        unsafe { (*PREV_QUIT.action.get()).write(old) };
        PREV_QUIT.saved.store(true, Ordering::Release);
    });
    result
}

/// The SIGQUIT handler: async-signal-safe (an atomic load and write(2);
/// for a capture request, atomics, `gettid` and `futex`).
extern "C" fn on_quit(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: __errno_location returns this thread's errno slot.
    let errno_slot = unsafe { libc::__errno_location() };
    // SAFETY: as above, a valid pointer.
    let saved_errno = unsafe { *errno_slot };
    if CAPTURING.load(Ordering::Acquire) && sent_by_us(info) {
        // The dump's request to this thread (or a late one, given up on):
        // not the user's SIGQUIT, so no new dump and no chaining.
        capture_here(ctx);
        // SAFETY: as above.
        unsafe { *errno_slot = saved_errno };
        return;
    }
    let fd = QUIT_FD.load(Ordering::Acquire);
    if fd >= 0 {
        let b = [b'q'];
        // SAFETY: writing one byte from a valid buffer; a full pipe (a
        // request is already pending) fails with EAGAIN, which is fine.
        unsafe { libc::write(fd, b.as_ptr().cast(), 1) };
    }
    let old = PREV_QUIT.get();
    let handler = old.sa_sigaction;
    if handler != libc::SIG_DFL && handler != libc::SIG_IGN {
        if old.sa_flags & libc::SA_SIGINFO != 0 {
            // SAFETY: a SA_SIGINFO action's handler has this signature; we
            // pass on the kernel's arguments unchanged.
            let f = unsafe {
                mem::transmute::<
                    libc::sighandler_t,
                    extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void),
                >(handler)
            };
            f(sig, info, ctx);
        } else {
            // SAFETY: a plain action's handler has this signature.
            let f = unsafe {
                mem::transmute::<libc::sighandler_t, extern "C" fn(libc::c_int)>(handler)
            };
            f(sig);
        }
    }
    // SAFETY: as above.
    unsafe { *errno_slot = saved_errno };
}

// ---------------------------------------------------------------------------
// SIGQUIT's dump: the registers of a thread that runs a goroutine
// ---------------------------------------------------------------------------

/// The registers a thread's own handler recorded ([`capture_registers`]).
#[cfg_attr(
    not(all(target_arch = "x86_64", target_os = "linux")),
    allow(dead_code)
)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Captured {
    pub(crate) pc: usize,
    pub(crate) sp: usize,
    pub(crate) fp: usize,
    pub(crate) bx: usize,
}

/// Set when the dump starts capturing: from then on a SIGQUIT this process
/// sent to one of its threads (`tgkill`) is a capture request, never the
/// user's. The process exits after that dump.
static CAPTURING: AtomicBool = AtomicBool::new(false);
/// The thread asked ([`capture_registers`]); 0: none.
static CAPTURE_TID: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);
/// The request's state: `IDLE` -> `REQUESTED` (the dump) -> `TAKING` (the
/// handler claimed it) -> `CAPTURED` (registers written; the handler waits)
/// -> `IDLE` (the dump is done with the stack: the handler returns).
static CAPTURE_STATE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(IDLE);
#[cfg_attr(
    not(all(target_arch = "x86_64", target_os = "linux")),
    allow(dead_code)
)]
static CAPTURE_REGS: [std::sync::atomic::AtomicUsize; 4] = [
    std::sync::atomic::AtomicUsize::new(0),
    std::sync::atomic::AtomicUsize::new(0),
    std::sync::atomic::AtomicUsize::new(0),
    std::sync::atomic::AtomicUsize::new(0),
];
const IDLE: u32 = 0;
const REQUESTED: u32 = 1;
const TAKING: u32 = 2;
const CAPTURED: u32 = 3;
/// Longest a thread waits in its handler for the dump to release it.
const HOLD_MAX_NS: i64 = 5_000_000_000;

/// Whether `info` is a signal this process sent to one of its threads with
/// `tgkill` (what [`capture_registers`] sends).
fn sent_by_us(info: *mut libc::siginfo_t) -> bool {
    // SAFETY: with SA_SIGINFO the kernel passes a valid siginfo_t; for
    // SI_TKILL its pid field is the sender's.
    unsafe {
        info.as_ref()
            .is_some_and(|i| i.si_code == libc::SI_TKILL && i.si_pid() == libc::getpid())
    }
}

/// The handler's side of a capture: if this thread is the one asked,
/// records the interrupted registers from `ctx`, publishes them, and waits
/// until the dump has read the stack (at most [`HOLD_MAX_NS`]), so that
/// the stack does not change under the walk. Async-signal-safe.
fn capture_here(ctx: *mut libc::c_void) {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    if tid != CAPTURE_TID.load(Ordering::Acquire)
        || CAPTURE_STATE
            .compare_exchange(REQUESTED, TAKING, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
    {
        return;
    }
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        // SAFETY: with SA_SIGINFO the kernel passes the interrupted
        // context as a valid ucontext_t.
        let gregs = unsafe { &(*(ctx as *const libc::ucontext_t)).uc_mcontext.gregs };
        for (slot, r) in
            CAPTURE_REGS
                .iter()
                .zip([libc::REG_RIP, libc::REG_RSP, libc::REG_RBP, libc::REG_RBX])
        {
            slot.store(gregs[r as usize] as usize, Ordering::Relaxed);
        }
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    let _ = ctx;
    // Release: the registers, and everything this thread wrote to its
    // stack before the signal, happen before the dump's Acquire load.
    CAPTURE_STATE.store(CAPTURED, Ordering::Release);
    super::futex::wake(&CAPTURE_STATE, i32::MAX);
    let mut waited = 0;
    while CAPTURE_STATE.load(Ordering::Acquire) == CAPTURED && waited < HOLD_MAX_NS {
        super::futex::wait_timeout(&CAPTURE_STATE, CAPTURED, 100_000_000);
        waited += 100_000_000;
    }
}

/// Asks thread `tid` of this process for the registers it was interrupted
/// at: sends it SIGQUIT (`tgkill`), whose handler records them and then
/// holds the thread in the handler until [`release_captured`], so that its
/// stack stays as it was while the caller walks it. `None` if the thread
/// did not answer by `deadline` (SIGQUIT blocked there, or the thread is
/// gone) or the platform has no capture. One request at a time.
///
/// Only SIGQUIT's dump may call this: from the first call on, a SIGQUIT
/// this process sends to one of its threads is no longer a dump request
/// (the process exits after the dump). The interrupted system call of a
/// released thread restarts (`SA_RESTART`) or fails with `EINTR`, as for
/// any signal. The caller must not allocate or lock between a successful
/// call and the release: the held thread may hold the allocator's lock.
#[cfg_attr(
    not(all(target_arch = "x86_64", target_os = "linux")),
    allow(dead_code)
)]
pub(crate) fn capture_registers(tid: i32, deadline: std::time::Instant) -> Option<Captured> {
    if !cfg!(all(target_arch = "x86_64", target_os = "linux"))
        || QUIT_FD.load(Ordering::Acquire) < 0
    {
        return None;
    }
    CAPTURING.store(true, Ordering::Release);
    CAPTURE_STATE.store(REQUESTED, Ordering::Relaxed);
    // Release: the state is REQUESTED before the handler can see its tid.
    CAPTURE_TID.store(tid, Ordering::Release);
    // SAFETY: tgkill has no memory-safety preconditions; the tgid check
    // keeps it inside this process.
    let sent = unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, libc::SIGQUIT) == 0 };
    loop {
        // Acquire: pairs with the handler's Release store of CAPTURED.
        match CAPTURE_STATE.load(Ordering::Acquire) {
            CAPTURED => {
                let r = |i: usize| CAPTURE_REGS[i].load(Ordering::Relaxed);
                return Some(Captured {
                    pc: r(0),
                    sp: r(1),
                    fp: r(2),
                    bx: r(3),
                });
            }
            // Claimed: the registers come within microseconds.
            TAKING => {}
            // Out of time: withdraw the request, unless the handler just
            // claimed it (then the registers come next round).
            _ if (!sent || std::time::Instant::now() >= deadline)
                && CAPTURE_STATE
                    .compare_exchange(REQUESTED, IDLE, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok() =>
            {
                CAPTURE_TID.store(0, Ordering::Relaxed);
                return None;
            }
            _ => {}
        }
        std::thread::sleep(std::time::Duration::from_micros(20));
    }
}

/// Lets the thread held by a successful [`capture_registers`] return from
/// its handler.
#[cfg_attr(
    not(all(target_arch = "x86_64", target_os = "linux")),
    allow(dead_code)
)]
pub(crate) fn release_captured() {
    CAPTURE_TID.store(0, Ordering::Relaxed);
    // Release: the caller's reads of the stack happen before the thread
    // resumes and writes it again.
    CAPTURE_STATE.store(IDLE, Ordering::Release);
    super::futex::wake(&CAPTURE_STATE, i32::MAX);
}

// ---------------------------------------------------------------------------
// Alternate signal stacks
// ---------------------------------------------------------------------------

/// The alternate signal stack we installed on this thread, unmapped when the
/// thread exits.
struct AltStack {
    /// Start of the mapping (the guard page), 0 if none.
    base: Cell<usize>,
    len: Cell<usize>,
}

impl Drop for AltStack {
    fn drop(&mut self) {
        let (base, len) = (self.base.get(), self.len.get());
        let Some(p) = NonNull::new(base as *mut u8) else {
            return;
        };
        let sp = base + vm::page_size();
        // SAFETY: a zeroed stack_t is a valid out-parameter.
        let mut cur: libc::stack_t = unsafe { mem::zeroed() };
        // SAFETY: querying only.
        if unsafe { libc::sigaltstack(ptr::null(), &mut cur) } != 0 {
            return;
        }
        if cur.ss_sp as usize == sp && cur.ss_flags & libc::SS_DISABLE == 0 {
            if cur.ss_flags & libc::SS_ONSTACK != 0 {
                // Running on it (cannot happen in a thread-local destructor):
                // leak it rather than unmap a live stack.
                return;
            }
            let off = libc::stack_t {
                ss_sp: ptr::null_mut(),
                ss_flags: libc::SS_DISABLE,
                ss_size: 0,
            };
            // SAFETY: disabling the alternate stack of the calling thread.
            if unsafe { libc::sigaltstack(&off, ptr::null_mut()) } != 0 {
                return;
            }
        }
        // SAFETY: the mapping is ours, no longer registered as this thread's
        // alternate stack, and nothing runs on it.
        let _ = unsafe { vm::unmap(p, len) };
    }
}

thread_local! {
    static ALTSTACK: AltStack = const { AltStack { base: Cell::new(0), len: Cell::new(0) } };
}

fn altstack_size(page: usize) -> usize {
    // SAFETY: getauxval has no preconditions; it returns 0 if unknown.
    let min = unsafe { libc::getauxval(libc::AT_MINSIGSTKSZ) } as usize;
    let size = ALTSTACK_SIZE.max(libc::SIGSTKSZ).max(min.saturating_mul(4));
    (size + page - 1) & !(page - 1)
}

/// Gives the calling thread an alternate signal stack (64 KiB, plus a guard
/// page below it) unless it already has one (Rust's std gives one to the
/// threads it spawns while its own overflow handler is installed). Without
/// one, a goroutine stack overflow on this thread cannot be reported: the
/// kernel kills the process with a bare `SIGSEGV`. Freed at thread exit.
pub(crate) fn install_altstack_for_current_thread() -> io::Result<()> {
    // SAFETY: a zeroed stack_t is a valid out-parameter.
    let mut cur: libc::stack_t = unsafe { mem::zeroed() };
    // SAFETY: querying only.
    if unsafe { libc::sigaltstack(ptr::null(), &mut cur) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if cur.ss_flags & libc::SS_DISABLE == 0 {
        return Ok(());
    }
    let page = vm::page_size();
    let size = altstack_size(page);
    let len = size + page;
    let base = vm::reserve(len)?;
    let unmap = |e: io::Error| {
        // SAFETY: our fresh mapping, never used.
        let _ = unsafe { vm::unmap(base, len) };
        e
    };
    // SAFETY: the first page of our fresh mapping, holding nothing.
    if unsafe { vm::guard_install(base, page) }.is_err() {
        // SAFETY: as above.
        unsafe { vm::protect_none(base, page) }.map_err(unmap)?;
    }
    let st = libc::stack_t {
        ss_sp: (base.as_ptr() as usize + page) as *mut libc::c_void,
        ss_flags: 0,
        ss_size: size,
    };
    // SAFETY: `st` describes `size` bytes of read-write memory that we own and
    // keep mapped until the thread exits (AltStack's destructor).
    if unsafe { libc::sigaltstack(&st, ptr::null_mut()) } != 0 {
        return Err(unmap(io::Error::last_os_error()));
    }
    let registered = ALTSTACK.try_with(|a| {
        a.base.set(base.as_ptr() as usize);
        a.len.set(len);
    });
    // If the thread is already tearing down its thread-locals, the stack
    // stays installed and is leaked (a few pages, once).
    let _ = registered;
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::process::{Command, Output};

    const CHILD_ENV: &str = "GOROUTINE_TEST_CHILD";

    /// Whether this process is the child spawned by [`run_child`] for the test
    /// at `path` (`module::tests::name`, without the crate name).
    pub(crate) fn child_scenario(path: &str) -> bool {
        std::env::var(CHILD_ENV).is_ok_and(|v| v == path)
    }

    /// Re-runs this test binary for just the test at `path`, with the child
    /// marker set, and returns its output.
    pub(crate) fn run_child(path: &str) -> Output {
        run_child_env(path, &[])
    }

    /// [`run_child`] with `env` set (and `GOTRACEBACK` only if `env` sets it).
    pub(crate) fn run_child_env(path: &str, env: &[(&str, &str)]) -> Output {
        let mut c = Command::new(std::env::current_exe().unwrap());
        c.args(["--exact", path, "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, path)
            .env_remove("RUST_BACKTRACE")
            .env_remove("GOTRACEBACK");
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().unwrap()
    }

    fn killed_by(out: &Output) -> Option<i32> {
        use std::os::unix::process::ExitStatusExt;
        out.status.signal()
    }

    #[test]
    fn overflow_message_format() {
        let mut buf = [0u8; 128];
        let n = format_overflow(&mut buf, 7, 256 * 1024);
        assert_eq!(
            &buf[..n],
            b"goroutine 7 has overflowed its stack (size 256 KiB)\n"
        );
        let n = format_overflow(&mut buf, 0, 1000);
        assert_eq!(
            &buf[..n],
            b"goroutine 0 has overflowed its stack (size 1000 bytes)\n"
        );
        let n = format_overflow(&mut buf, u64::MAX, usize::MAX);
        let s = std::str::from_utf8(&buf[..n]).unwrap();
        assert_eq!(
            s,
            "goroutine 18446744073709551615 has overflowed its stack \
             (size 18446744073709551615 bytes)\n"
        );
        assert!(n <= 90);
    }

    static GUARD: [std::sync::atomic::AtomicUsize; 3] = [
        std::sync::atomic::AtomicUsize::new(0),
        std::sync::atomic::AtomicUsize::new(0),
        std::sync::atomic::AtomicUsize::new(0),
    ];

    fn test_lookup(addr: usize) -> Option<(u64, usize)> {
        let lo = GUARD[0].load(Ordering::Relaxed);
        let hi = GUARD[1].load(Ordering::Relaxed);
        (lo != 0 && addr >= lo && addr < hi).then(|| (42, GUARD[2].load(Ordering::Relaxed)))
    }

    #[inline(never)]
    fn recurse(depth: u64) -> u64 {
        let buf = [depth; 16];
        std::hint::black_box(&buf);
        if std::hint::black_box(depth) == u64::MAX {
            return 0;
        }
        recurse(depth + 1).wrapping_add(std::hint::black_box(buf[3]))
    }

    fn current_altstack() -> libc::stack_t {
        // SAFETY: zeroed stack_t is a valid out-parameter; querying only.
        unsafe {
            let mut cur: libc::stack_t = mem::zeroed();
            assert_eq!(libc::sigaltstack(ptr::null(), &mut cur), 0);
            cur
        }
    }

    fn disable_altstack() {
        let off = libc::stack_t {
            ss_sp: ptr::null_mut(),
            ss_flags: libc::SS_DISABLE,
            ss_size: 0,
        };
        // SAFETY: disabling this thread's alternate stack (std's, if any,
        // stays mapped until the thread exits).
        assert_eq!(unsafe { libc::sigaltstack(&off, ptr::null_mut()) }, 0);
    }

    #[test]
    fn altstack_is_installed_once_per_thread() {
        std::thread::spawn(|| {
            disable_altstack();
            install_altstack_for_current_thread().unwrap();
            let cur = current_altstack();
            assert_eq!(cur.ss_flags & libc::SS_DISABLE, 0);
            assert!(cur.ss_size >= ALTSTACK_SIZE);
            let mine = ALTSTACK.with(|a| a.base.get());
            assert_eq!(cur.ss_sp as usize, mine + vm::page_size());
            // Idempotent: keeps the installed one.
            install_altstack_for_current_thread().unwrap();
            assert_eq!(current_altstack().ss_sp, cur.ss_sp);
        })
        .join()
        .unwrap();
        // A thread that already has one (std's) keeps it.
        std::thread::spawn(|| {
            let before = current_altstack();
            install_altstack_for_current_thread().unwrap();
            let after = current_altstack();
            if before.ss_flags & libc::SS_DISABLE == 0 {
                assert_eq!(before.ss_sp, after.ss_sp);
                assert_eq!(ALTSTACK.with(|a| a.base.get()), 0);
            }
        })
        .join()
        .unwrap();
    }

    /// Go's `fatal error: stack overflow` exits with status 2, and raises
    /// `SIGABRT` only under `GOTRACEBACK=crash` (measured with Go 1.19).
    #[test]
    fn goroutine_overflow_is_reported_and_exits_2() {
        let name = "sys::overflow::tests::goroutine_overflow_is_reported_and_exits_2";
        if child_scenario(name) {
            use crate::g::stack::{StackCache, DEFAULT_STACK_SIZE};
            use corosensei::Coroutine;
            // Run on a thread whose alternate stack is ours, not std's.
            std::thread::spawn(|| {
                disable_altstack();
                install_altstack_for_current_thread().unwrap();
                let mut cache = StackCache::new();
                let stack = cache.get(DEFAULT_STACK_SIZE).unwrap();
                let (lo, hi) = stack.guard_range();
                GUARD[0].store(lo, Ordering::Relaxed);
                GUARD[1].store(hi, Ordering::Relaxed);
                GUARD[2].store(stack.usable_size(), Ordering::Relaxed);
                install_overflow_handler(test_lookup);
                let mut co =
                    Coroutine::with_stack(stack, |_y: &corosensei::Yielder<(), ()>, ()| recurse(0));
                let _ = co.resume(());
                eprintln!("CHILD: the coroutine returned");
            })
            .join()
            .unwrap();
            return;
        }
        for (env, code, signal) in [
            (&[][..], Some(2), None),
            (&[("GOTRACEBACK", "system")][..], Some(2), None),
            (&[("GOTRACEBACK", "crash")][..], None, Some(libc::SIGABRT)),
        ] {
            let out = run_child_env(name, env);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                stderr.contains(
                    "goroutine 42 has overflowed its stack (size 256 KiB)\n\
                     fatal error: stack overflow\n"
                ),
                "{env:?}: {stderr}"
            );
            assert_eq!(
                out.status.code(),
                code,
                "{env:?}: {:?}\n{stderr}",
                out.status
            );
            assert_eq!(
                killed_by(&out),
                signal,
                "{env:?}: {:?}\n{stderr}",
                out.status
            );
        }
    }

    #[test]
    #[cfg_attr(
        goroutine_sanitize = "thread",
        ignore = "std's overflow handler overflows std's own signal stack in a TSan build: the \
                  child prints `thread '` and dies of SIGSEGV (gdb: the handler's frames reach \
                  the page below the alternate stack while it writes the thread's name)"
    )]
    fn thread_overflow_still_gets_std_report() {
        let name = "sys::overflow::tests::thread_overflow_still_gets_std_report";
        if child_scenario(name) {
            install_overflow_handler(test_lookup);
            std::thread::Builder::new()
                .name("victim".into())
                .stack_size(128 * 1024)
                .spawn(|| recurse(0))
                .unwrap()
                .join()
                .unwrap();
            return;
        }
        let out = run_child(name);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("thread 'victim'"), "{stderr}");
        assert!(stderr.contains("has overflowed its stack"), "{stderr}");
        assert!(!stderr.contains("goroutine"), "{stderr}");
        assert_eq!(
            killed_by(&out),
            Some(libc::SIGABRT),
            "{:?}\n{stderr}",
            out.status
        );
    }

    /// Faults on a PROT_NONE page that is no goroutine's guard.
    fn fault_elsewhere() {
        let page = vm::page_size();
        let p = vm::reserve(page).unwrap();
        // SAFETY: our fresh page, holding nothing.
        unsafe { vm::protect_none(p, page).unwrap() };
        EXPECTED_ADDR.store(p.as_ptr() as usize, Ordering::Relaxed);
        // SAFETY: deliberately faults (the test's point); never returns.
        unsafe { ptr::write_volatile(p.as_ptr(), 1) };
    }

    static EXPECTED_ADDR: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    #[test]
    fn other_faults_chain_to_std_and_kill_with_sigsegv() {
        let name = "sys::overflow::tests::other_faults_chain_to_std_and_kill_with_sigsegv";
        if child_scenario(name) {
            install_overflow_handler(test_lookup);
            fault_elsewhere();
            eprintln!("CHILD: survived the fault");
            return;
        }
        let out = run_child(name);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            killed_by(&out),
            Some(libc::SIGSEGV),
            "{:?}\n{stderr}",
            out.status
        );
        assert!(!stderr.contains("overflowed"), "{stderr}");
    }

    #[test]
    fn previous_default_action_is_restored_for_other_faults() {
        let name = "sys::overflow::tests::previous_default_action_is_restored_for_other_faults";
        if child_scenario(name) {
            for sig in [libc::SIGSEGV, libc::SIGBUS] {
                let dfl = default_action();
                // SAFETY: installing SIG_DFL.
                unsafe { libc::sigaction(sig, &dfl, ptr::null_mut()) };
            }
            install_overflow_handler(test_lookup);
            fault_elsewhere();
            eprintln!("CHILD: survived the fault");
            return;
        }
        let out = run_child(name);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            killed_by(&out),
            Some(libc::SIGSEGV),
            "{:?}\n{stderr}",
            out.status
        );
    }

    extern "C" fn host_handler(
        _sig: libc::c_int,
        info: *mut libc::siginfo_t,
        _: *mut libc::c_void,
    ) {
        // SAFETY: the kernel's (forwarded) siginfo.
        let addr = unsafe { (*info).si_addr() } as usize;
        let code = if addr == EXPECTED_ADDR.load(Ordering::Relaxed) {
            7
        } else {
            8
        };
        // SAFETY: _exit is async-signal-safe.
        unsafe { libc::_exit(code) };
    }

    #[test]
    fn previous_siginfo_handler_gets_the_same_arguments() {
        let name = "sys::overflow::tests::previous_siginfo_handler_gets_the_same_arguments";
        if child_scenario(name) {
            let mut host = default_action();
            host.sa_sigaction = host_handler as *const () as libc::sighandler_t;
            host.sa_flags = libc::SA_SIGINFO;
            // SAFETY: installing a valid SA_SIGINFO handler.
            unsafe { libc::sigaction(libc::SIGSEGV, &host, ptr::null_mut()) };
            install_overflow_handler(test_lookup);
            fault_elsewhere();
            return;
        }
        let out = run_child(name);
        assert_eq!(out.status.code(), Some(7), "{:?}", out.status);
    }
}
