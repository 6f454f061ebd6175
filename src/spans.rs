//! `tracing` spans that follow their goroutine (feature `tracing`).
//!
//! A `tracing` subscriber keeps the stack of entered spans per OS thread
//! (tracing-subscriber's `Registry` does; so does every subscriber that
//! answers `current_span`). A goroutine that enters a span (`span.enter()`,
//! `#[instrument]`, `in_scope`) and then makes a runtime call may resume on
//! another thread: without help its span would stay entered on the old
//! thread, where the next goroutine's events would be logged inside it, and
//! its guard's `exit` would run on a thread where the span was never
//! entered. This module does for stackful code what tracing's
//! `Instrumented` does for a future polled by many threads: it exits the
//! goroutine's spans when the goroutine leaves a thread and enters them
//! again where it resumes.
//!
//! # Protocol
//! The runtime calls [`suspend`] and [`resume`] around every switch out of
//! a goroutine (`runtime::lockosthread::switch_out`, the one way out; the
//! hooks are registered by [`capture`], which every spawn calls, so before
//! any goroutine it follows runs). Both run on the goroutine's own stack,
//! as the goroutine: `suspend` on the thread it leaves, before the switch;
//! `resume` on the thread it resumed on, after it.
//!
//! - `base` is the thread's current span when the goroutine last started
//!   running on it (at its start and at each resume): normally none, as a
//!   scheduler thread enters no span. What lies above it on the thread's
//!   stack is the goroutine's.
//! - `suspend`: with the thread's default dispatcher, while the current
//!   span is not `base`, take a reference to it (`clone_span`), `exit` it
//!   and push it on the goroutine's list, innermost first. So the thread is
//!   left as the goroutine found it, and the spans stay open while the
//!   goroutine is away (the references). The loop stops at a subscriber
//!   that tracks no current span (`current_span` answers none) and after
//!   [`MAX_DEPTH`] spans (a subscriber whose `exit` does not pop).
//! - `resume`: record `base`, then `enter` the list outermost first, with
//!   the dispatcher the spans were exited from, and drop the references
//!   (`try_close`). The user's guards then `exit` on a thread where their
//!   span is entered, innermost first, as on one thread.
//! - The list lives in a goroutine-local ([`crate::local!`]) that only the
//!   goroutine touches. It is empty while the goroutine runs and holds the
//!   goroutine's spans while it is switched out. A goroutine inside no span
//!   never touches it: `suspend` finds no current span, and `resume`, told
//!   nothing was carried, finds the thread inside none either, so `base`
//!   stays none. (Should a thread ever be found inside a span at a
//!   goroutine's start or resume, [`SOME_BASE`] makes every resume record
//!   its `base` from then on.) A hook that finds it
//!   borrowed (subscriber code that itself switched, from inside a hook)
//!   does nothing, and neither does its pair: the resume hook of a switch
//!   runs exactly when its suspend hook ran.
//! - A locked goroutine resumes on the thread it left: its spans are exited
//!   and entered again on the same thread, which is correct and, for the
//!   thread's other users, invisible (no other goroutine runs there
//!   meanwhile). A goroutine whose P is revoked while it blocks in the
//!   kernel keeps its thread, so nothing moves until its next switch.
//!
//! # Spawning inside a span
//! `go` (and `Builder::spawn`, and `run`) captures the spawner's current
//! span ([`capture`], a reference to it), and the child runs *inside* it:
//! the runtime enters it when the child starts ([`start`]), and from then
//! on it is the outermost span of the child's list, exited at every switch
//! out and entered at every switch in, and exited for good when the child
//! ends. This is what `tokio::spawn(fut.instrument(Span::current()))`
//! does: the child's events and spans have the spawner's span as their
//! parent, while the span is entered only on the thread running the child,
//! only while it runs, never held entered by the spawner on the child's
//! behalf; the child's own `Span::current()` is that span. The issue asked
//! for "parent context, not entered"; entering it while the child runs is
//! the only way a subscriber attributes the child's events to it (parents
//! of events come from the current span), so the span is entered by the
//! runtime, not left to a guard of the user. A child that wants a root span
//! of its own makes one with `info_span!(parent: None, ..)`.
//!
//! The parent is followed only when the child's thread's default
//! dispatcher sees it as current once entered: a span captured under a
//! scoped dispatcher (`with_default` on the spawning plain thread) is not
//! the scheduler threads' subscriber's, and is left alone.
//!
//! `run` on a thread that has entered spans: the thread itself never runs
//! goroutines (it waits for the main goroutine), so its spans stay its own,
//! entered as they were; the main goroutine runs inside the thread's
//! current span, as any child does.
//!
//! # Ending
//! When the goroutine's closure returns or unwinds, the user's guards have
//! exited their spans (unwinding drops them as usual); [`Running`]'s drop
//! then exits whatever is left above `base` (the spawner's span, and any
//! span whose guard was leaked) and drops the reference to the spawner's
//! span. Nothing of the goroutine stays entered on the thread.
//!
//! # Cost
//! Without the feature none of this is compiled. With it, until a
//! dispatcher is set, a switch costs one relaxed load and a spawn one more
//! check. With one: a `current_span` query on each side of a switch, two
//! goroutine-local accesses, and an exit and an enter per entered span.
//!
//! # Limits
//! - The hooks call the subscriber's `current_span`, `enter`, `exit`,
//!   `clone_span` and `try_close` inside the runtime, sometimes with a
//!   channel's lock held (a park's). A subscriber must not make goroutine
//!   runtime calls (channel operations, `goroutine::sync`) from those
//!   methods; no subscriber of the ecosystem does.
//! - Only the thread's default dispatcher is followed: a scoped default
//!   (`tracing::subscriber::with_default`) set inside a goroutine stays on
//!   the thread it was set on and is not carried (set the global default).

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};

use tracing_core::dispatcher::{self, Dispatch};
use tracing_core::span::Id;

/// The most spans one switch moves (module note, "Protocol").
const MAX_DEPTH: usize = 512;

/// A goroutine's spans while it is switched out, and what it found on the
/// thread (module note, "Protocol").
#[derive(Default)]
struct Carried {
    /// The thread's current span when the goroutine last started running.
    base: Option<Id>,
    /// The spans exited at the last switch out, innermost first, each with
    /// a reference of ours; empty while the goroutine runs.
    held: Vec<Id>,
    /// The dispatcher `held` was exited from.
    dispatch: Option<Dispatch>,
    /// The spawner's span the goroutine runs inside, with our reference.
    parent: Option<(Dispatch, Id)>,
}

crate::local! {
    static CARRIED: RefCell<Carried> = RefCell::new(Carried::default());
}

/// The thread's default dispatcher. Cloned out rather than used inside
/// `get_default`: a subscriber's `exit` may itself ask for the default
/// (tracing-subscriber's registry closes a span that way), which nested in
/// `get_default` would answer with no subscriber once a scoped default
/// exists anywhere.
fn thread_dispatch() -> Dispatch {
    dispatcher::get_default(Dispatch::clone)
}

/// `d`'s current span on this thread.
fn current(d: &Dispatch) -> Option<Id> {
    d.current_span().id().cloned()
}

/// Set once a goroutine found its thread inside a span when it started
/// running there (a `base`: not the case on the runtime's threads, whose
/// span stacks are empty between goroutines). Until then a goroutine with
/// nothing to carry needs no `base` recorded (it stays none).
static SOME_BASE: AtomicBool = AtomicBool::new(false);

/// The suspend hook (module note): exits the goroutine's spans on the
/// thread it leaves, keeping them open. Returns whether it took any.
fn suspend() -> bool {
    let d = thread_dispatch();
    // A goroutine inside no span: nothing to look up.
    let Some(first) = current(&d) else {
        return false;
    };
    CARRIED
        .try_with(|c| {
            let Ok(mut c) = c.try_borrow_mut() else {
                return false;
            };
            if c.base.as_ref() == Some(&first) {
                return false;
            }
            let c = &mut *c;
            for _ in 0..MAX_DEPTH {
                let Some(id) = current(&d) else { break };
                if c.base.as_ref() == Some(&id) {
                    break;
                }
                let held = d.clone_span(&id);
                d.exit(&id);
                c.held.push(held);
            }
            let took = !c.held.is_empty();
            if took {
                c.dispatch = Some(d);
            }
            took
        })
        .unwrap_or(false)
}

/// The resume hook (module note): enters the goroutine's spans again on
/// the thread it resumed on, outermost first. `carried`: the suspend hook
/// took some.
fn resume(carried: bool) {
    let base = current(&thread_dispatch());
    // Nothing to enter and nothing to record: no goroutine-local access
    // (and no allocation for the goroutines that never enter a span).
    if !carried && base.is_none() && !SOME_BASE.load(Ordering::Relaxed) {
        return;
    }
    let _ = CARRIED.try_with(|c| {
        let Ok(mut c) = c.try_borrow_mut() else {
            return;
        };
        let c = &mut *c;
        if base.is_some() {
            SOME_BASE.store(true, Ordering::Relaxed);
        }
        c.base = base;
        let Some(d) = c.dispatch.take() else { return };
        for id in c.held.iter().rev() {
            d.enter(id);
        }
        for id in c.held.drain(..) {
            d.try_close(id);
        }
    });
}

/// The spawner's current span, captured by `go` for the child to run
/// inside (module note, "Spawning inside a span"). Dropped unused (the
/// child never ran), it drops its reference.
pub(crate) struct Parent(Option<(Dispatch, Id)>);

impl Drop for Parent {
    fn drop(&mut self) {
        if let Some((d, id)) = self.0.take() {
            d.try_close(id);
        }
    }
}

/// Called by every spawn, on the spawner: registers the hooks (first call)
/// and captures the spawner's current span.
pub(crate) fn capture() -> Parent {
    crate::runtime::lockosthread::set_span_hooks(suspend, resume);
    if !dispatcher::has_been_set() {
        return Parent(None);
    }
    let d = thread_dispatch();
    let held = current(&d).map(|id| d.clone_span(&id));
    Parent(held.map(|id| (d, id)))
}

/// The goroutine's start, first thing on its stack: records `base` and
/// enters the spawner's span. Its drop, when the closure returns or
/// unwinds, ends the goroutine's spans (module note, "Ending").
pub(crate) struct Running(());

/// See [`Running`].
pub(crate) fn start(mut parent: Parent) -> Running {
    if !dispatcher::has_been_set() {
        return Running(());
    }
    let _ = CARRIED.try_with(|c| {
        let Ok(mut c) = c.try_borrow_mut() else {
            return;
        };
        let here = thread_dispatch();
        c.base = current(&here);
        if c.base.is_some() {
            SOME_BASE.store(true, Ordering::Relaxed);
        }
        if let Some((d, id)) = parent.0.take() {
            d.enter(&id);
            if current(&here).as_ref() == Some(&id) {
                c.parent = Some((d, id));
            } else {
                // Not the thread's subscriber's span (module note).
                d.exit(&id);
                d.try_close(id);
            }
        }
    });
    Running(())
}

impl Drop for Running {
    fn drop(&mut self) {
        if !dispatcher::has_been_set() {
            return;
        }
        let _ = CARRIED.try_with(|c| {
            let Ok(mut c) = c.try_borrow_mut() else {
                return;
            };
            let base = c.base.take();
            let d = thread_dispatch();
            for _ in 0..MAX_DEPTH {
                let Some(id) = current(&d) else { break };
                if base.as_ref() == Some(&id) {
                    break;
                }
                d.exit(&id);
            }
            if let Some((d, id)) = c.parent.take() {
                d.try_close(id);
            }
        });
    }
}
