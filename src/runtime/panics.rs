//! What happens to a goroutine's panic.
//!
//! As on a std thread: the panic goes through the process's panic hook at
//! the moment it happens, and `JoinHandle::join` then returns it as a
//! `JoinError` (goroutine id, name, message, location). With std's default
//! hook in place the runtime prints what that hook prints, naming the
//! goroutine instead of the thread:
//!
//! `goroutine 17 (worker) panicked at src/main.rs:4:5:` / `boom`
//!
//! with the backtrace `RUST_BACKTRACE` asks for (`1`: the goroutine's own
//! frames, the panic machinery and the runtime hidden; `full`: every frame
//! with its address), or the one-time note saying how to get one. A hook
//! the program set, before or after the runtime started, is called instead,
//! and prints what it likes.
//!
//! With `GOROUTINE_PANIC=abort` the process ends as Go's does when the
//! panic reaches the top of the goroutine's stack (after its destructors
//! ran, as Go's deferred calls do; a `catch_unwind` inside the goroutine
//! stops it, as `recover` does), whether or not anyone holds its handle:
//! `panic: boom`, a blank line, `goroutine 17 [running]:`, the frames of
//! the panicking goroutine from the user's first frame (captured by the
//! hook: the stack is unwound by then), `created by`, and exit status 2.
//! `GOTRACEBACK=none` omits the frames, `all` adds every other goroutine,
//! `system` shows the runtime's frames too. A panic that cannot unwind (one
//! in a destructor during unwinding) ends the process at once: the report
//! then lists the chain of panics, as Go lists a panic raised while
//! panicking.
//!
//! # Mechanism and invariants
//! - The runtime installs a wrapper hook when it starts. The wrapper stays
//!   outermost: it owns a [`Rewrap`] guard, and when `set_hook` replaces
//!   the wrapper (std drops the old hook after releasing its lock), the
//!   guard's `Drop` wraps the new hook at once. A hook the program installs
//!   with `take_hook` + `set_hook`, keeping the wrapper to call, keeps it
//!   too. So no goroutine panic misses the wrapper unless the program keeps
//!   the wrapper alive without calling it.
//! - For a panic on a goroutine the wrapper records it under the
//!   goroutine's id (location, message, and the frames when they will be
//!   printed): the unwinding goroutine reads the record back when the
//!   panic reaches its top, on whatever thread it is on by then. A
//!   goroutine that caught a panic itself removes its record when it ends
//!   ([`forget`]), so records never accumulate.
//! - Whether the wrapped hook is std's default is decided when it is
//!   wrapped ([`wrap_current`]): `take_hook` returns the default boxed by
//!   one function of std, so its vtable is compared with a second default
//!   taken right after. A hook that is not recognised is called, never
//!   skipped: the worst a miss can do is print std's thread-named message.
//! - Any other panic (a plain thread's) goes to the wrapped hook unchanged.

use std::collections::HashMap;
use std::io::Write;
use std::panic::PanicHookInfo;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::g::G;
use crate::m;
use crate::traceback::{self, Spawn};

type Hook = Box<dyn Fn(&PanicHookInfo<'_>) + Sync + Send + 'static>;

/// One panic of a goroutine, as the hook saw it.
struct Panic {
    message: String,
    location: String,
    /// Innermost first; empty unless something will print them.
    frames: Vec<usize>,
}

/// The panics of a goroutine whose unwinding has not reached its top yet,
/// oldest first (more than one: a panic raised while unwinding).
struct Record {
    panics: Vec<Panic>,
    spawn: Spawn,
}

static RECORDS: Mutex<Option<HashMap<u64, Record>>> = Mutex::new(None);
/// How many records exist: lets a goroutine that ends normally skip the
/// lock ([`forget`]).
static PENDING: AtomicUsize = AtomicUsize::new(0);
static ABORT: OnceLock<bool> = OnceLock::new();
/// The one-time note of the default hook has been printed.
static NOTE_SHOWN: AtomicBool = AtomicBool::new(false);

/// What `RUST_BACKTRACE` asks for, as std reads it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Backtrace {
    Off,
    Short,
    Full,
}

fn backtrace_style() -> Backtrace {
    static STYLE: OnceLock<Backtrace> = OnceLock::new();
    *STYLE.get_or_init(|| match std::env::var("RUST_BACKTRACE") {
        Err(_) => Backtrace::Off,
        Ok(v) if v == "0" => Backtrace::Off,
        Ok(v) if v == "full" => Backtrace::Full,
        Ok(_) => Backtrace::Short,
    })
}

pub(crate) fn abort_mode() -> bool {
    *ABORT.get_or_init(|| match std::env::var("GOROUTINE_PANIC") {
        Err(_) => false,
        Ok(v) if v == "abort" => true,
        Ok(v) if v == "report" || v.is_empty() => false,
        Ok(v) => {
            eprintln!(
                "goroutine: GOROUTINE_PANIC={v:?} is not `abort` or `report`; using `report`"
            );
            false
        }
    })
}

/// Installs the hook wrapper (once, at runtime start).
pub(crate) fn install_hook() {
    abort_mode();
    backtrace_style();
    wrap_current();
}

/// Kept by the wrapper: when the wrapper is dropped (replaced by
/// `set_hook`, or taken and dropped), the hook now current is wrapped
/// (module note).
struct Rewrap;

impl Drop for Rewrap {
    fn drop(&mut self) {
        // std refuses hook changes on a panicking thread; a wrapper dropped
        // there (taken and dropped during unwinding) is not replaced.
        if !std::thread::panicking() {
            wrap_current();
        }
    }
}

/// Wraps the current hook (module note).
fn wrap_current() {
    let prev = std::panic::take_hook();
    // `take_hook` left std's default installed: take it too, boxed the
    // way `prev` was if `prev` is the default (module note).
    let default = std::panic::take_hook();
    #[allow(ambiguous_wide_pointer_comparisons)]
    let prev_is_default = std::ptr::eq(&*prev, &*default);
    drop(default);
    let guard = Rewrap;
    std::panic::set_hook(Box::new(move |info| {
        let _owned = &guard;
        match m::current_g() {
            Some(g) => on_goroutine_panic(g, info, &prev, prev_is_default),
            None => prev(info),
        }
    }));
}

/// The text of a panic payload, as std's default hook shows it.
pub(crate) fn payload_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "Box<dyn Any>".to_owned()
    }
}

/// std's messages for a panic that cannot unwind: the process aborts
/// right after the hook returns.
fn cannot_unwind(message: &str) -> bool {
    message == "panic in a destructor during cleanup"
        || message == "panic in a function that cannot unwind"
}

fn on_goroutine_panic(g: &'static G, info: &PanicHookInfo<'_>, prev: &Hook, prev_is_default: bool) {
    let message = payload_text(info.payload());
    let location = info
        .location()
        .map(|l| l.to_string())
        .unwrap_or_else(|| "<unknown>".into());
    let fatal = cannot_unwind(&message);
    let prints_default = prev_is_default && !abort_mode();
    let want_frames = abort_mode() || (prints_default && backtrace_style() != Backtrace::Off);
    // Runtime calls: the unwinder's and the symboliser's locks must not be
    // held across an asynchronous preemption.
    let frames = if want_frames {
        crate::runtime::entry::call(|| traceback::own_frames(g.stack_range()))
    } else {
        Vec::new()
    };
    let backtrace = if prints_default && backtrace_style() != Backtrace::Off {
        let full = backtrace_style() == Backtrace::Full;
        Some(crate::runtime::entry::call(|| {
            traceback::format::rust_backtrace(&frames, full)
        }))
    } else {
        None
    };
    {
        let mut map = RECORDS.lock().unwrap_or_else(|e| e.into_inner());
        let map = map.get_or_insert_with(HashMap::new);
        let rec = map.entry(g.id()).or_insert_with(|| {
            PENDING.fetch_add(1, Ordering::Relaxed);
            Record {
                panics: Vec::new(),
                spawn: traceback::own_spawn(g.stack_range()),
            }
        });
        rec.panics.push(Panic {
            message: message.clone(),
            location: location.clone(),
            frames,
        });
    }
    if !prints_default {
        if !prev_is_default {
            prev(info);
        }
        if fatal && abort_mode() {
            // std aborts when we return: report the chain now, as Go does.
            die(g.id());
        }
        return;
    }
    // std's default hook, naming the goroutine.
    let mut out = String::new();
    {
        use std::fmt::Write as _;
        // SAFETY: the hook runs on the panicking goroutine, which owns its
        // Inner.
        let name = unsafe { g.inner() }.name.clone();
        let _ = match name {
            Some(n) => writeln!(out, "goroutine {} ({n}) panicked at {location}:", g.id()),
            None => writeln!(out, "goroutine {} panicked at {location}:", g.id()),
        };
        let _ = writeln!(out, "{message}");
        match backtrace {
            Some(bt) => out.push_str(&bt),
            None => {
                if !fatal && !NOTE_SHOWN.swap(true, Ordering::Relaxed) {
                    out.push_str(
                        "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n",
                    );
                }
            }
        }
    }
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(out.as_bytes());
    let _ = err.flush();
}

/// The location of the panic that reached goroutine `id`'s top (its last
/// one). The record stays until [`forget`] or the abort report takes it.
pub(crate) fn location(id: u64) -> Option<String> {
    if PENDING.load(Ordering::Relaxed) == 0 {
        return None;
    }
    let map = RECORDS.lock().unwrap_or_else(|e| e.into_inner());
    map.as_ref()?
        .get(&id)?
        .panics
        .last()
        .map(|p| p.location.clone())
}

fn take(id: u64) -> Option<Record> {
    if PENDING.load(Ordering::Relaxed) == 0 {
        return None;
    }
    let mut map = RECORDS.lock().unwrap_or_else(|e| e.into_inner());
    let r = map.as_mut().and_then(|m| m.remove(&id));
    if r.is_some() {
        PENDING.fetch_sub(1, Ordering::Relaxed);
    }
    r
}

/// Goroutine `id` ended: drops its record (its panics, or one it caught
/// itself). One relaxed load when no goroutine has a record.
#[inline]
pub(crate) fn forget(id: u64) {
    if PENDING.load(Ordering::Relaxed) != 0 {
        drop(take(id));
    }
}

/// A panic reached the top of goroutine `id`'s stack. In abort mode the
/// process ends here with Go's report (module note); otherwise nothing
/// happens (the hook reported it, the joiner gets it).
pub(crate) fn reached_top(id: u64, message: &str, location: Option<&str>) {
    if abort_mode() {
        die_with(id, message, location);
    }
}

/// Ends the process with Go's report of goroutine `id`'s recorded panics.
#[cold]
fn die(id: u64) -> ! {
    let rec = take(id);
    let report = abort_report(id, rec, None, None);
    write_and_exit(&report)
}

#[cold]
fn die_with(id: u64, message: &str, location: Option<&str>) -> ! {
    let rec = take(id);
    let report = abort_report(id, rec, Some(message), location);
    write_and_exit(&report)
}

fn write_and_exit(report: &str) -> ! {
    let mut out = std::io::stderr().lock();
    let _ = out.write_all(report.as_bytes());
    let _ = out.flush();
    drop(out);
    crate::tracer::flight_dump("panic");
    std::process::exit(2);
}

/// Go's report of a fatal panic: `panic: msg` (each panic of the chain,
/// later ones indented, as Go prints a panic raised while panicking), the
/// panicking goroutine with its frames and creator, and with
/// `GOTRACEBACK=all` every other goroutine. Built whole before stderr is
/// locked: stopping the world (`all`) while holding it could wait forever
/// for a goroutine blocked on that very lock.
fn abort_report(
    id: u64,
    rec: Option<Record>,
    message: Option<&str>,
    location: Option<&str>,
) -> String {
    use std::fmt::Write as _;

    use crate::traceback::{format, GInfo, Level};
    let level = traceback::level(Level::Single);
    let (mut panics, spawn) = match rec {
        Some(r) => (r.panics, r.spawn),
        None => (Vec::new(), Spawn::default()),
    };
    if panics.is_empty() {
        // The hook never saw it (the program kept the wrapper without
        // calling it): what the payload says.
        panics.push(Panic {
            message: message.unwrap_or("<unknown>").to_owned(),
            location: location.unwrap_or("<unknown>").to_owned(),
            frames: Vec::new(),
        });
    }
    let mut out = String::new();
    for (i, p) in panics.iter().enumerate() {
        let indent = if i == 0 { "" } else { "\t" };
        let _ = writeln!(out, "{indent}panic: {}", p.message);
    }
    out.push('\n');
    let last = panics.last().expect("at least one panic");
    if level >= Level::Single {
        let _ = writeln!(out, "goroutine {id} [running]:");
        if last.frames.is_empty() {
            let _ = writeln!(out, "\t{}", last.location);
        } else {
            let g = GInfo {
                id,
                status: crate::g::Status::Running,
                reason: crate::g::WaitReason::None,
                waitsince: 0,
                locked: false,
                pcs: Ok(last.frames.clone()),
                spawn,
            };
            // A runtime call: the symboliser's lock must not be held
            // across an asynchronous preemption.
            crate::runtime::entry::call(|| format::write_frames(&mut out, &g, level));
            // Where the program panicked: the cleanup panic that ended a
            // chain is std's, not the program's.
            let at = panics
                .iter()
                .rev()
                .find(|p| !cannot_unwind(&p.message))
                .unwrap_or(last);
            let _ = writeln!(out, "panicked at {}", at.location);
        }
    }
    if level >= Level::All {
        // As Go does with GOTRACEBACK=all: every other goroutine too.
        let text = crate::runtime::entry::call(|| {
            let others: Vec<GInfo> = super::dump::collect_stopped()
                .into_iter()
                .filter(|g| g.id != id)
                .collect();
            super::dump::render(&others, level)
        });
        out.push('\n');
        out.push_str(&text);
    }
    out
}
