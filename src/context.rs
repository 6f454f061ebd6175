//! Cancellation that flows through a program (Go's `context` package, in
//! Rust idiom).
//!
//! ```
//! use std::time::Duration;
//! use goroutine::context::{Context, ContextError};
//! use goroutine::select;
//!
//! goroutine::run(|| {
//!     let (ctx, _cancel) = Context::background().with_timeout(Duration::from_millis(20));
//!     let (_tx, work) = goroutine::chan::<u32>(0); // work that never finishes
//!     select! {
//!         recv(work) -> v => println!("done: {v:?}"),
//!         recv(ctx.done()) -> _ => assert_eq!(ctx.err(), Some(ContextError::DeadlineExceeded)),
//!     }
//! });
//! ```
//!
//! # Design and invariants
//! A [`Context`] is a cheap handle (`Option<Arc<Node>>`; `None` is
//! [`Context::background`], which is never cancelled). Each cancellable
//! node has:
//! - `err`, set once (a `OnceLock`): the first cancellation wins, and `err`
//!   is set *before* `done` closes, so whoever sees `done` closed reads the
//!   reason.
//! - `done`: a channel nobody sends on; cancelling drops its only sender,
//!   which closes it, so any number of goroutines or `select!`s see it.
//! - `children`: weak references to the cancellable nodes derived from it.
//!   A child registers under its parent's `children` lock after checking
//!   the parent's `err` under the same lock, and a cancelling parent sets
//!   `err` before taking that lock to drain the children: so a child is
//!   either drained (and cancelled) or sees the parent cancelled and
//!   cancels itself. Nothing is missed.
//! - A cancelled node removes itself from its parent and drops its children
//!   and its timer: after `cancel` nothing refers to it but the handles
//!   still held, so create/cancel cycles do not leak (tested over 100,000).
//! - The deadline of a derived context is the earlier of its own and its
//!   parent's; a node only arms a timer when its own deadline is the
//!   earlier one (the parent's cancellation reaches it otherwise).
//!
//! Go's `WithValue` is left out: in Rust, request-scoped data travels as
//! typed arguments or fields, checked by the compiler, rather than as
//! `any` values looked up by key at run time.
//!
//! Cancelling (from [`Cancel`], its drop, or a timer) only takes short std
//! locks and closes channels; it never waits for anything, so it can be
//! called from goroutines, plain threads and timer callbacks alike.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::{Duration, Instant};

use crate::chan::{chan, Receiver, Sender};

/// Why a context was cancelled (Go's `context.Canceled` and
/// `context.DeadlineExceeded`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ContextError {
    /// [`Cancel::cancel`] was called (or the `Cancel` dropped), on this
    /// context or an ancestor.
    Canceled,
    /// The context's deadline passed.
    DeadlineExceeded,
}

impl fmt::Display for ContextError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ContextError::Canceled => "context canceled",
            ContextError::DeadlineExceeded => "context deadline exceeded",
        })
    }
}

impl std::error::Error for ContextError {}

/// `DeadlineExceeded` becomes `TimedOut`, `Canceled` becomes `Interrupted`,
/// so `?` works in functions returning `io::Result`.
impl From<ContextError> for std::io::Error {
    fn from(e: ContextError) -> std::io::Error {
        let kind = match e {
            ContextError::Canceled => std::io::ErrorKind::Interrupted,
            ContextError::DeadlineExceeded => std::io::ErrorKind::TimedOut,
        };
        std::io::Error::new(kind, e)
    }
}

/// Carries a cancellation signal and a deadline across goroutines (Go's
/// `context.Context`). Cheap to clone (one `Arc`); `Send + Sync`.
#[derive(Clone, Default)]
pub struct Context {
    node: Option<Arc<Node>>,
}

/// Cancels the context it came with, and all contexts derived from it (Go's
/// `CancelFunc`). Dropping it cancels too, so a context never outlives its
/// scope by accident; call [`Cancel::cancel`] early to release resources
/// sooner. Cancelling twice does nothing.
pub struct Cancel {
    node: Arc<Node>,
}

struct Node {
    id: u64,
    parent: Option<Arc<Node>>,
    deadline: Option<Instant>,
    err: OnceLock<ContextError>,
    done_rx: Receiver<()>,
    /// Dropped (closing `done_rx`) on cancellation.
    done_tx: Mutex<Option<Sender<()>>>,
    children: Mutex<HashMap<u64, Weak<Node>>>,
    timer: Mutex<Option<crate::time::Timer>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Plain data; nothing panics while a guard is held.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The channel of `background()`: never closed (its sender lives forever).
fn never() -> &'static Receiver<()> {
    static NEVER: OnceLock<(Sender<()>, Receiver<()>)> = OnceLock::new();
    &NEVER.get_or_init(|| chan(0)).1
}

impl Context {
    /// The root context: never cancelled, no deadline (Go's
    /// `context.Background`).
    // entry: a constructor or getter of the context tree; no runtime state
    pub fn background() -> Context {
        Context { node: None }
    }

    /// A child that is cancelled when `cancel` is called (or dropped) or
    /// when this context is (Go's `WithCancel`).
    pub fn with_cancel(&self) -> (Context, Cancel) {
        self.derive(None)
    }

    /// A child whose deadline is `now + timeout`, or this context's deadline
    /// if that is earlier (Go's `WithTimeout`). A timeout too large for an
    /// `Instant` means no deadline of its own.
    pub fn with_timeout(&self, timeout: Duration) -> (Context, Cancel) {
        match crate::runtime::bubble::instant_now().checked_add(timeout) {
            Some(d) => self.with_deadline(d),
            None => self.with_cancel(),
        }
    }

    /// A child cancelled with [`ContextError::DeadlineExceeded`] at
    /// `deadline`, or this context's deadline if that is earlier (Go's
    /// `WithDeadline`). A deadline already past cancels it at once.
    pub fn with_deadline(&self, deadline: Instant) -> (Context, Cancel) {
        self.derive(Some(deadline))
    }

    /// A channel that is closed when this context is cancelled (never, for
    /// `background`). Nothing is ever sent: a receive returns `Err` once it
    /// is closed. Use it as a `select!` operand:
    /// `recv(ctx.done()) -> _ => ...`.
    // entry: a constructor or getter of the context tree; no runtime state
    pub fn done(&self) -> &Receiver<()> {
        match &self.node {
            Some(n) => &n.done_rx,
            None => never(),
        }
    }

    /// Why the context was cancelled, or `None` while it is not.
    // entry: a constructor or getter of the context tree; no runtime state
    pub fn err(&self) -> Option<ContextError> {
        self.node.as_ref().and_then(|n| n.err.get().copied())
    }

    /// The deadline: the earliest along this context's ancestry.
    // entry: a constructor or getter of the context tree; no runtime state
    pub fn deadline(&self) -> Option<Instant> {
        self.node.as_ref().and_then(|n| n.deadline)
    }

    fn derive(&self, own: Option<Instant>) -> (Context, Cancel) {
        let inherited = self.deadline();
        let deadline = match (own, inherited) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        static IDS: AtomicU64 = AtomicU64::new(0);
        let (tx, rx) = chan(0);
        let node = Arc::new(Node {
            id: IDS.fetch_add(1, Ordering::Relaxed),
            parent: self.node.clone(),
            deadline,
            err: OnceLock::new(),
            done_rx: rx,
            done_tx: Mutex::new(Some(tx)),
            children: Mutex::new(HashMap::new()),
            timer: Mutex::new(None),
        });
        // Register with the parent, unless it is already cancelled (the
        // module note's protocol).
        if let Some(parent) = &self.node {
            let mut children = lock(&parent.children);
            match parent.err.get() {
                Some(&e) => {
                    drop(children);
                    node.cancel(e);
                }
                None => {
                    children.insert(node.id, Arc::downgrade(&node));
                }
            }
        }
        // Arm a timer only when our own deadline is the earlier one.
        if let Some(d) = own.filter(|&d| Some(d) == deadline) {
            if node.err.get().is_none() {
                let left = d.saturating_duration_since(crate::runtime::bubble::instant_now());
                if left.is_zero() {
                    node.cancel(ContextError::DeadlineExceeded);
                } else {
                    let weak = Arc::downgrade(&node);
                    let t = crate::time::after_func(left, move || {
                        if let Some(n) = weak.upgrade() {
                            n.cancel(ContextError::DeadlineExceeded);
                        }
                    });
                    *lock(&node.timer) = Some(t);
                    // Cancelled meanwhile (by the parent): it did not see
                    // the timer, so stop it here.
                    if node.err.get().is_some() {
                        if let Some(t) = lock(&node.timer).take() {
                            t.stop();
                        }
                    }
                }
            }
        }
        (
            Context {
                node: Some(node.clone()),
            },
            Cancel { node },
        )
    }
}

impl Node {
    /// Cancels this node and its descendants with `e`; the first call wins.
    fn cancel(self: &Arc<Self>, e: ContextError) {
        if self.err.set(e).is_err() {
            return;
        }
        // Closes `done` (err is already visible).
        drop(lock(&self.done_tx).take());
        if let Some(t) = lock(&self.timer).take() {
            t.stop();
        }
        let children = std::mem::take(&mut *lock(&self.children));
        for child in children.into_values().filter_map(|w| w.upgrade()) {
            child.cancel(e);
        }
        if let Some(parent) = &self.parent {
            lock(&parent.children).remove(&self.id);
        }
    }
}

impl Cancel {
    /// Cancels the context with [`ContextError::Canceled`], and every
    /// context derived from it; releases its timer. Does nothing if it is
    /// already cancelled.
    // entry: composes gated calls (dropping a `Sender`, `Timer::stop`) under std locks of its own
    pub fn cancel(&self) {
        self.node.cancel(ContextError::Canceled);
    }
}

impl Drop for Cancel {
    // entry: composes gated calls (dropping a `Sender`, `Timer::stop`) under std locks of its own
    fn drop(&mut self) {
        self.cancel();
    }
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.node {
            None => f.write_str("Context::background()"),
            Some(n) => f
                .debug_struct("Context")
                .field("deadline", &n.deadline)
                .field("err", &n.err.get())
                .finish(),
        }
    }
}

impl fmt::Debug for Cancel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cancel")
            .field("err", &self.node.err.get())
            .finish()
    }
}

/// `Context` is cheap to share between goroutines.
const _: () = {
    const fn send_sync<T: Send + Sync + Clone>() {}
    send_sync::<Context>();
};
