//! Spawning goroutines and waiting for them: `go`, `Builder`, `JoinHandle`,
//! `JoinError`, `run`. The typed half of the task cell is in `cell.rs`.

mod cell;

use std::any::Any;
use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::sync::Arc;

use self::cell::{new_task, panic_message, JoinRef};
use crate::g::stack;
use crate::g::WaitReason;
use crate::m;
use crate::runtime::park::{self, Waiter};
use crate::runtime::proc;

/// Spawns a goroutine running `f` and returns a handle to join it.
///
/// The goroutine is queued on the current P's `runnext` (it runs next on
/// this processor, as in Go); called outside the runtime, it goes to the
/// global queue and the runtime is started if needed.
///
/// ```
/// let h = goroutine::go(|| 6 * 7);
/// assert_eq!(h.join().unwrap(), 42);
/// ```
///
/// As Go's `go` statement, it cannot fail: when no memory is left for the
/// goroutine's records (an address-space limit, `RLIMIT_AS`), the process
/// ends with Go's `fatal error: out of memory` and exit status 2.
/// [`Builder::spawn`] returns that failure as an error instead.
#[inline(always)]
pub fn go<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let pc = crate::traceback::caller_pc();
    crate::runtime::entry::call_here(move |here| {
        let here = crate::runtime::coop_preempt::check_here(here);
        let site = spawn_site(pc, here);
        match spawn_here(f, site, stack::default_stack_size(), None, here) {
            Ok(h) => h,
            Err(_) => crate::runtime::out_of_memory(),
        }
    })
}

/// The spawn shared by `go` and `Builder::spawn`, inside the entry gate:
/// takes a G and allocates the task cell, then makes the goroutine
/// runnable. Out of memory it gives `f` back, nothing else changed.
#[inline(always)]
fn spawn_here<F, T>(
    f: F,
    site: crate::traceback::Spawn,
    stack_size: usize,
    name: Option<Arc<str>>,
    here: m::Here,
) -> Result<JoinHandle<T>, F>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let pp = proc::spawn_p(here);
    let Some(g) = proc::newg(pp) else {
        return Err(f);
    };
    let (task, join) = match new_task(f, site, here) {
        Ok(t) => t,
        Err(f) => {
            proc::gfput_unused(g, pp);
            return Err(f);
        }
    };
    let id = proc::newproc(pp, g, task, stack_size, name, here);
    Ok(JoinHandle {
        task: join,
        id,
        taken: false,
        _t: PhantomData,
    })
}

/// The closure `Builder::spawn` could not spawn, given back out of the
/// entry gate to be dropped there (its captures' destructors are user
/// code): `f` itself, or `f` wrapped to pin its thread.
enum Unspawned<A, B> {
    Plain(A),
    Pinned(B),
}

/// The spawn record of a goroutine spawned by our caller (module note of
/// `traceback`): `pc`, an address in the spawning function (read by
/// `caller_pc` in `go` / `Builder::spawn` / `run`, which are inlined into
/// it), and the id of the goroutine running `here` (inside the entry gate,
/// where no signal can move it between the two reads). No allocation, no
/// lock.
#[inline(always)]
fn spawn_site(pc: usize, here: m::Here) -> crate::traceback::Spawn {
    crate::traceback::Spawn {
        pc,
        parent: here.g().map_or(0, |g| g.id()),
    }
}

/// Runs `f` as a goroutine and blocks the calling thread until it returns,
/// giving back its result. The first goroutine ever is the main goroutine
/// (id 1). Starts the runtime if needed; may be called from several threads
/// at once. Other goroutines keep running after `run` returns.
///
/// Called from inside a goroutine, `f` simply runs on the calling goroutine.
///
/// If `f` panics, the panic is resumed on the calling thread.
///
/// `f` may borrow from the caller, as the closures of
/// [`std::thread::scope`] do, and its result need not be `'static`;
/// goroutines that `f` spawns with [`go`] stay `'static`:
///
/// ```
/// let words = vec!["a", "bb", "ccc"];
/// let total = goroutine::run(|| words.iter().map(|w| w.len()).sum::<usize>());
/// assert_eq!(total, 6);
/// assert_eq!(words.len(), 3); // still ours
/// ```
///
/// # Why borrowing is sound
/// `f` runs on another thread (an M of the runtime), so it and its result
/// must be `Send`, as for a scoped thread; the question is only lifetimes.
/// A borrow in `f` is used by the goroutine while `run` has not returned,
/// so it is sound if the goroutine is done with `f` before `run` returns
/// or unwinds, on every path:
/// - **`f` returns.** The goroutine writes the result into a slot in
///   `run`'s frame, then its task completes (`g/task.rs`: COMPLETE is set
///   with Release after the closure has been consumed); the calling thread
///   is blocked in `join` until it observes COMPLETE (Acquire), and only
///   then reads the slot and returns.
/// - **`f` panics.** The goroutine catches the panic (`entry::user`);
///   unwinding drops `f`'s captures on the goroutine before the task
///   completes, so when `join` returns the panic, nothing borrowed is left
///   in the goroutine; the payload (`'static` by type) is resumed here.
/// - **the goroutine never starts** (no stack could be mapped): the task
///   is completed with that error only after the closure has been dropped
///   (`cell::fail`), and `run` panics with it afterwards.
/// - **`run` itself would unwind while the goroutine may still run** (a
///   bug in the wait): a guard aborts the process instead, so no path
///   leaves the goroutine holding a borrow of a frame that is gone.
///   Unlike the early `thread::scoped`, nothing here depends on a guard
///   value's destructor running: the wait is inside `run`, so
///   `mem::forget` cannot skip it.
/// - **the caller is already a goroutine.** `f` runs right here, on the
///   caller's own stack, like any closure call.
/// - **the caller is an M's own thread outside a goroutine** (user code
///   called on a scheduler stack, were there any): that is a plain thread
///   to `run`, which blocks it until the goroutine is done, so the frame
///   stays alive; a scheduler thread blocked this way may deadlock the
///   runtime, but never frees a borrowed frame early.
///
/// Goroutine-local values set by `f` ([`local!`](crate::local!)) are
/// `'static` and dropped before the task completes.
#[inline(always)]
pub fn run<F, T>(f: F) -> T
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    if m::current_g_checked().is_some() {
        return f();
    }
    let mut slot: Option<T> = None;
    let out = SendPtr(&mut slot as *mut Option<T>);
    let body: Box<dyn FnOnce() + Send + '_> = Box::new(move || {
        let out = out;
        let v = f();
        // SAFETY: `slot` outlives the goroutine's use of it: `run` waits
        // below for the task to complete, and reads `slot` only after.
        unsafe { *out.0 = Some(v) };
    });
    // SAFETY: only the lifetime is changed. The box borrows from this
    // frame (`f`'s captures, `slot`); `run` does not return or unwind
    // before the goroutine has consumed or dropped it: `join` returns only
    // after the task completed, which is after the closure was run and
    // dropped, or dropped unrun (doc comment above), and `abort` covers an
    // unwind of `join` itself.
    let body: Box<dyn FnOnce() + Send + 'static> = unsafe { std::mem::transmute(body) };
    let abort = AbortOnUnwind;
    let joined = go(body).join();
    std::mem::forget(abort);
    match joined {
        Ok(()) => match slot {
            Some(v) => v,
            None => unreachable!("the main goroutine completed without a result"),
        },
        Err(e) if e.is_panic() => {
            // resume_unwind skips the panic hook: say what happened, as the
            // hook would have for a panic on this thread.
            eprintln!(
                "goroutine {} panicked at {}:\n{}",
                e.id(),
                e.location().unwrap_or("<unknown>"),
                e.message()
            );
            std::panic::resume_unwind(e.into_panic())
        }
        Err(e) => panic!("{e}"),
    }
}

/// `run`'s pointer to its result slot, moved into the goroutine.
struct SendPtr<T>(*mut Option<T>);

// SAFETY: the pointer carries a `T` (which is `Send`) from the goroutine to
// `run`'s frame; `run` reads the slot only after the goroutine is done.
unsafe impl<T: Send> Send for SendPtr<T> {}

/// Aborts the process if dropped: `run` holds one while a goroutine may
/// still use its frame, and forgets it once the goroutine is done.
struct AbortOnUnwind;

impl Drop for AbortOnUnwind {
    fn drop(&mut self) {
        crate::runtime::throw(
            "goroutine::run unwound while its goroutine may still borrow its frame",
        );
    }
}

/// Goroutine factory with options (name, stack size, pinned to a thread).
#[derive(Debug, Default, Clone)]
pub struct Builder {
    name: Option<String>,
    stack_size: Option<usize>,
    lock_os_thread: bool,
}

impl Builder {
    // entry: a builder setter or constructor; `spawn` is gated
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Names the goroutine (shown in panics, dumps and traces). An empty
    /// name means no name.
    ///
    /// Takes anything that converts into a `String`: `name("worker")`,
    /// `name(format!("worker-{i}"))`. Write the value itself, not
    /// `name("x".into())`: with a generic parameter the compiler cannot
    /// tell which type `.into()` should make (E0283). No signature accepts
    /// all three forms: a concrete `String` (std's `thread::Builder::name`)
    /// would refuse `name("worker")`, which code already relies on.
    // entry: a builder setter or constructor; `spawn` is gated
    pub fn name(mut self, name: impl Into<String>) -> Builder {
        self.name = Some(name.into()).filter(|n| !n.is_empty());
        self
    }

    /// With `true`, the goroutine runs on one OS thread for its whole life,
    /// from the first instruction of its closure: as if it called
    /// [`lock_os_thread`](crate::lock_os_thread) first thing, except that
    /// [`unlock_os_thread`](crate::unlock_os_thread) cannot undo it. No
    /// other goroutine runs on that thread meanwhile, and the thread ends
    /// with the goroutine (its `thread_local!` values are dropped there).
    ///
    /// For code that must stay on one thread: thread-affine libraries (GUI
    /// toolkits, OpenGL contexts, some C libraries), `thread_local!` values
    /// held across runtime calls, `std::sync::MutexGuard`s or std's stdout
    /// lock held across them (`docs/soundness.md`). Costs an OS thread per
    /// such goroutine (started when it ends, to replace the one it takes),
    /// and each of its switches is a thread hand-off (some microseconds
    /// instead of ~100 ns).
    ///
    /// ```
    /// let same = goroutine::run(|| {
    ///     goroutine::Builder::new()
    ///         .lock_os_thread(true)
    ///         .spawn(|| {
    ///             let before = std::thread::current().id();
    ///             goroutine::time::sleep(std::time::Duration::from_millis(1));
    ///             before == std::thread::current().id()
    ///         })
    ///         .unwrap()
    ///         .join()
    ///         .unwrap()
    /// });
    /// assert!(same);
    /// ```
    // entry: a builder setter or constructor; `spawn` is gated
    pub fn lock_os_thread(mut self, pinned: bool) -> Builder {
        self.lock_os_thread = pinned;
        self
    }

    /// Usable stack bytes for this goroutine (rounded up to whole pages;
    /// 16 KiB to 1 GiB). The default is 256 KiB, or `GOROUTINE_STACK_SIZE`.
    // entry: a builder setter or constructor; `spawn` is gated
    pub fn stack_size(mut self, bytes: usize) -> Builder {
        self.stack_size = Some(bytes);
        self
    }

    /// Spawns the goroutine. Fails with `InvalidInput` for a stack size out
    /// of range, and with `OutOfMemory` when no memory can be mapped for
    /// the goroutine's records (an address-space limit, `RLIMIT_AS`); `f`
    /// is then dropped. The stack itself is taken when the goroutine first
    /// runs; if that fails (address space or mapping limit exhausted),
    /// `join` reports it as a [`JoinError`] that is not a panic.
    #[inline(always)]
    pub fn spawn<F, T>(self, f: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let pc = crate::traceback::caller_pc();
        // Before the gate: on error `f` is dropped in the caller's code.
        let size = match self.stack_size {
            Some(n) => Some(stack::validate_stack_size(n)?),
            None => None,
        };
        let r = crate::runtime::entry::call_here(move |here| {
            let site = spawn_site(pc, here);
            let size = size.unwrap_or_else(stack::default_stack_size);
            let name = self.name.map(Arc::from);
            if self.lock_os_thread {
                let pinned = move || {
                    crate::runtime::entry::call(crate::runtime::lockosthread::pin);
                    f()
                };
                spawn_here(pinned, site, size, name, here).map_err(Unspawned::Pinned)
            } else {
                spawn_here(f, site, size, name, here).map_err(Unspawned::Plain)
            }
        });
        r.map_err(|f| {
            drop(f);
            // No allocation: an error of this kind only.
            io::Error::from(io::ErrorKind::OutOfMemory)
        })
    }
}

/// An owned permission to wait for a goroutine's result. Dropping it
/// detaches the goroutine.
pub struct JoinHandle<T> {
    task: JoinRef<T>,
    id: u64,
    /// The result was taken by a poll (`Future`).
    taken: bool,
    _t: PhantomData<T>,
}

impl<T> JoinHandle<T> {
    /// The goroutine's id.
    // entry: a getter; no runtime state
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Whether the goroutine has finished.
    // entry: one atomic load of the task's state
    pub fn is_finished(&self) -> bool {
        self.task.header().is_complete()
    }

    /// Waits for the goroutine and returns its result, or the panic it died
    /// of. Parks the calling goroutine; outside the runtime, blocks the
    /// calling thread.
    ///
    /// Inlined into the caller; the wait is the one frame `wait_complete`
    /// (as a channel receive's is `RawChan::block`: `g::switch`'s note,
    /// "Returns after a switch").
    #[inline]
    pub fn join(self) -> Result<T, JoinError> {
        crate::runtime::entry::call(move || {
            assert!(!self.taken, "JoinHandle joined after it returned Ready");
            let header = self.task.header();
            if !header.is_complete() {
                // SAFETY: this JoinHandle is the single joiner, and it is
                // consumed by this call, so this runs once.
                unsafe { wait_complete(header) };
            }
            self.task.take_output(self.id)
        })
    }
}

/// Waits until the task of `header` completes: parks the calling goroutine
/// (the park and its switch inlined here: not generic), or blocks the
/// calling thread.
///
/// # Safety
/// Only the task's single joiner may call this, once.
#[inline(never)]
unsafe fn wait_complete(header: &crate::g::task::Header) {
    let here = m::Here::lookup();
    if here.g().is_some() {
        park::park_inline(here, WaitReason::Join, &mut |g| {
            // SAFETY: the single joiner, once (contract).
            unsafe { header.register(Waiter::Goroutine(g)) }
        });
    } else {
        // SAFETY: as above.
        if unsafe { header.register(Waiter::Thread(std::thread::current())) } {
            let _blocked = crate::runtime::checkdead::thread_blocked();
            while !header.is_complete() {
                std::thread::park();
            }
        }
    }
}

/// Awaiting a `JoinHandle` waits for the goroutine from async code (any
/// executor, or [`block_on`](crate::block_on)), as `join` does from
/// goroutines and threads. Polling it again after it returned `Ready`
/// panics.
///
/// # Cancel safety
/// Awaiting `&mut handle` and giving up (a `select!` whose other branch
/// won) loses nothing: the result stays with the goroutine's record until
/// a poll returns it, so the handle can be awaited or
/// [`join`](JoinHandle::join)ed again. Dropping the handle itself
/// detaches the goroutine, as always.
///
/// ```
/// let h = goroutine::go(|| 6 * 7);
/// assert_eq!(goroutine::block_on(h).unwrap(), 42);
/// ```
// No field is structurally pinned (the result is moved out, never pinned).
impl<T> Unpin for JoinHandle<T> {}

impl<T> std::future::Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<T, JoinError>> {
        let this = self.get_mut();
        crate::runtime::entry::call(move || {
            assert!(!this.taken, "JoinHandle polled after it returned Ready");
            let header = this.task.header();
            if !header.is_complete() {
                // SAFETY: this JoinHandle is the single joiner; `register`
                // takes back a waiter it registered on an earlier poll.
                if unsafe { header.register(Waiter::Waker(Box::new(cx.waker().clone()))) } {
                    return std::task::Poll::Pending;
                }
            }
            this.taken = true;
            std::task::Poll::Ready(this.task.take_output(this.id))
        })
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("id", &self.id)
            .field("finished", &self.is_finished())
            .finish()
    }
}

/// Why a goroutine produced no result.
pub struct JoinError {
    // Boxed: a `Result<T, JoinError>` sits in every task cell, and goroutines
    // are meant to be cheap (this keeps it one word).
    inner: Box<ErrorInner>,
}

struct ErrorInner {
    id: u64,
    name: Option<String>,
    kind: ErrorKind,
}

/// A panic payload, held so that `JoinError` is `Sync` (and so fits
/// `Box<dyn Error + Send + Sync>` and `anyhow::Error`): the payload itself
/// (`dyn Any + Send`) need not be `Sync`, and it is never reachable through
/// `&JoinError`, only by value through [`JoinError::into_panic`].
struct Payload(Box<dyn Any + Send + 'static>);

// SAFETY: `Sync` lets several threads hold `&Payload` at once; no method
// of `Payload` or of `JoinError` takes `&self` to the box (the message was
// copied out at creation), and the box is moved out only by value
// (`into_panic` consumes the `JoinError`), so no shared access to the
// `!Sync` payload exists. (std's `Exclusive`, unstable, is the same idea.)
unsafe impl Sync for Payload {}

enum ErrorKind {
    Panic {
        message: String,
        location: Option<String>,
        payload: Payload,
    },
    Start(io::Error),
}

// entry: a plain error value; no runtime state
impl JoinError {
    pub(crate) fn panicked(
        id: u64,
        name: Option<&str>,
        payload: Box<dyn Any + Send + 'static>,
    ) -> JoinError {
        JoinError {
            inner: Box::new(ErrorInner {
                id,
                name: name.map(str::to_owned),
                kind: ErrorKind::Panic {
                    message: panic_message(&*payload),
                    location: crate::runtime::panics::location(id),
                    payload: Payload(payload),
                },
            }),
        }
    }

    /// The panic reached the top of the goroutine's stack: with
    /// `GOROUTINE_PANIC=abort` the process ends here (`runtime::panics`).
    pub(crate) fn reached_top(&self) {
        if let ErrorKind::Panic {
            message, location, ..
        } = &self.inner.kind
        {
            crate::runtime::panics::reached_top(self.inner.id, message, location.as_deref());
        }
    }

    /// Where the goroutine panicked (`file:line:column`), when known.
    pub fn location(&self) -> Option<&str> {
        match &self.inner.kind {
            ErrorKind::Panic { location, .. } => location.as_deref(),
            ErrorKind::Start(_) => None,
        }
    }

    pub(crate) fn start_failed(id: u64, err: io::Error) -> JoinError {
        JoinError {
            inner: Box::new(ErrorInner {
                id,
                name: None,
                kind: ErrorKind::Start(err),
            }),
        }
    }

    /// The id of the goroutine that failed.
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// True if the goroutine panicked (false: it could not start).
    pub fn is_panic(&self) -> bool {
        matches!(self.inner.kind, ErrorKind::Panic { .. })
    }

    /// The panic message (`&str` or `String` payloads), or the start error.
    pub fn message(&self) -> String {
        match &self.inner.kind {
            ErrorKind::Panic { message, .. } => message.clone(),
            ErrorKind::Start(e) => e.to_string(),
        }
    }

    /// The panic payload, to resume the panic with
    /// `std::panic::resume_unwind`. For a start failure, the `io::Error`.
    pub fn into_panic(self) -> Box<dyn Any + Send + 'static> {
        match self.inner.kind {
            ErrorKind::Panic { payload, .. } => payload.0,
            ErrorKind::Start(e) => Box::new(e),
        }
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "goroutine {}", self.inner.id)?;
        if let Some(n) = &self.inner.name {
            write!(f, " ({n})")?;
        }
        match &self.inner.kind {
            ErrorKind::Panic { message, .. } => write!(f, " panicked: {message}"),
            ErrorKind::Start(e) => write!(f, " could not start: {e}"),
        }
    }
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A `JoinError` is `Send + Sync + 'static`: `h.join()?` works in a function
/// returning `Result<_, Box<dyn Error + Send + Sync>>` or `anyhow::Result`.
impl std::error::Error for JoinError {}
