//! What `#[goroutine::main]` and `#[goroutine::test]` expand to call
//! (`goroutine-macros`'s design note): reached as `goroutine::__private`,
//! not a stable API.
//!
//! # Invariants
//! - The body runs as a goroutine through [`crate::run`], and its result is
//!   made `Send` *inside* that goroutine (`Termination::report` for `main`,
//!   the error's `Debug` text for a test), so a body may return a `!Send`
//!   error such as `Box<dyn Error>`: it never leaves the goroutine's thread.
//! - `max_procs` of a test holds [`PROCS`] for writing for the whole test,
//!   every other `#[goroutine::test]` holds it for reading: a test that
//!   set GOMAXPROCS runs alone among them, and restores the previous value
//!   (also when it panics) before the next one starts. Plain `#[test]`s
//!   that call `goroutine::run` themselves are not ordered by it.

use std::fmt;
use std::process::{ExitCode, Termination};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// The options of `#[goroutine::main]` and `#[goroutine::test]`, as the
/// macros write them: `Options::new().max_procs(4)`. A new option (a
/// `synctest` flag, say) is one more setter here and one more arm of the
/// macro crate's `parse_options`; what the macros expand to stays the same
/// shape.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    max_procs: Option<usize>,
}

// entry: a builder of plain values; no runtime state
impl Options {
    pub const fn new() -> Options {
        Options { max_procs: None }
    }

    /// GOMAXPROCS for the body (`max_procs = n`).
    pub const fn max_procs(mut self, n: usize) -> Options {
        self.max_procs = Some(n);
        self
    }
}

/// `#[goroutine::main]`: starts the runtime (with `max_procs` Ps if given),
/// runs `f` as the main goroutine and turns its result into the process's
/// exit code there, as a plain `main`'s would be (an `Err` prints
/// `Error: {e:?}`). Inlined, as `run` is, so that dumps say the main
/// goroutine was created by the user's `main`.
#[inline(always)]
pub fn main<R, F>(opts: Options, f: F) -> ExitCode
where
    R: Termination,
    F: FnOnce() -> R + Send,
{
    if let Some(n) = opts.max_procs {
        start_with_max_procs(n);
    }
    crate::run(move || f().report())
}

/// Starts the runtime with `n` Ps; if it had started already (a static's
/// initializer used it), sets GOMAXPROCS to `n`.
fn start_with_max_procs(n: usize) {
    let started = crate::runtime::entry::call(move || crate::runtime::start_with_procs(n));
    if !started {
        crate::set_max_procs(n);
    }
}

/// Orders the tests that set GOMAXPROCS against the other
/// `#[goroutine::test]`s (module note).
static PROCS: RwLock<()> = RwLock::new(());

/// `#[goroutine::test]`: runs `f` as a goroutine (at GOMAXPROCS
/// `max_procs` if given) and gives its result to the test harness on the
/// test's own thread, where a failure's `Error: ...` line is captured with
/// the test's output.
// Inlined, as `run` is: the goroutine was created by the test function.
#[inline(always)]
pub fn test<R, F>(opts: Options, f: F) -> R::Outer
where
    R: TestReturn,
    F: FnOnce() -> R + Send,
{
    let _order = match opts.max_procs {
        Some(n) => Order::Alone(SetProcs::new(n)),
        None => Order::Shared(PROCS.read().unwrap_or_else(|e| e.into_inner())),
    };
    R::outer(crate::run(move || f().into_sendable()))
}

#[allow(dead_code)] // held for its destructor
enum Order {
    Shared(RwLockReadGuard<'static, ()>),
    Alone(SetProcs),
}

/// GOMAXPROCS set for one test; the previous value comes back on drop.
struct SetProcs {
    prev: usize,
    // Dropped after `drop` restored `prev`.
    _alone: RwLockWriteGuard<'static, ()>,
}

impl SetProcs {
    fn new(n: usize) -> SetProcs {
        // A test that panicked poisoned the lock; the value it guards (none)
        // cannot be inconsistent.
        let alone = PROCS.write().unwrap_or_else(|e| e.into_inner());
        SetProcs {
            prev: crate::set_max_procs(n),
            _alone: alone,
        }
    }
}

impl Drop for SetProcs {
    fn drop(&mut self) {
        crate::set_max_procs(self.prev);
    }
}

/// What a `#[goroutine::test]` function may return: `()` or
/// `Result<(), E>` with `E: Debug`, as a plain test (`Termination`
/// values beyond those are not supported).
#[diagnostic::on_unimplemented(
    message = "`#[goroutine::test]` functions return `()` or `Result<(), E>` with `E: Debug`, not `{Self}`",
    label = "this return type"
)]
pub trait TestReturn {
    /// What crosses from the goroutine to the test's thread.
    type Sendable: Send;
    /// What the test function returns to the harness.
    type Outer;
    /// On the goroutine.
    fn into_sendable(self) -> Self::Sendable;
    /// On the test's thread.
    fn outer(s: Self::Sendable) -> Self::Outer;
}

impl TestReturn for () {
    type Sendable = ();
    type Outer = ();
    fn into_sendable(self) {}
    fn outer(_: ()) {}
}

impl<E: fmt::Debug> TestReturn for Result<(), E> {
    type Sendable = Result<(), String>;
    type Outer = Result<(), TestFailure>;

    fn into_sendable(self) -> Result<(), String> {
        self.map_err(|e| format!("{e:?}"))
    }

    fn outer(s: Result<(), String>) -> Result<(), TestFailure> {
        s.map_err(TestFailure)
    }
}

/// The error of a failed `#[goroutine::test]`: the `Debug` text of the
/// body's error, which the harness prints as `Error: <text>` as it would
/// have printed the error itself.
pub struct TestFailure(String);

impl fmt::Debug for TestFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
