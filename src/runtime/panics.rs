//! What happens to a goroutine's panic.
//!
//! Go crashes the program on any unrecovered goroutine panic. Here a panic
//! is the goroutine's result: `JoinHandle::join` returns it as a
//! `JoinError` (with the goroutine id, name, message and location), and
//! nothing is printed for a panic somebody joins. A panic nobody will join
//! (its `JoinHandle` was dropped before or after it finished, without
//! `join`) is printed once on stderr:
//!
//! `goroutine 17 panicked at src/main.rs:4:5:` / `boom`
//!
//! With `GOROUTINE_PANIC=abort` such an unjoined panic instead ends the
//! process the way Go does: `panic: boom`, a blank line,
//! `goroutine 17 [running]:`, the frames of the panicking goroutine
//! (captured by the hook when it panicked; `GOTRACEBACK=none` omits them,
//! `all` adds every other goroutine, `system` shows the runtime's frames
//! too) and the location, exit status 2.
//!
//! # Mechanism
//! The runtime wraps the process's panic hook when it starts. For a panic
//! on a goroutine the wrapper records the location (by goroutine id: the
//! unwinding goroutine may migrate to another thread before `catch_unwind`
//! sees the payload, so thread-local storage cannot carry it) and prints
//! nothing; any other panic goes to the previous hook unchanged. A hook set
//! *after* the runtime started replaces the wrapper and sees every panic.
//! Who reports an unjoined panic is decided by the task cell's state word
//! (`g/task.rs`): the goroutine if its handle was already gone when it
//! finished, else the handle when dropped without joining: exactly once.

use std::collections::HashMap;
use std::io::Write;
use std::sync::Mutex;
use std::sync::OnceLock;

use crate::m;

static LOCATIONS: Mutex<Option<HashMap<u64, String>>> = Mutex::new(None);
/// In abort mode: the panicking goroutine's frames, captured by the hook
/// (the stack is unwound by the time the report is printed).
static FRAMES: Mutex<Option<HashMap<u64, Vec<usize>>>> = Mutex::new(None);
static ABORT: OnceLock<bool> = OnceLock::new();

fn abort_mode() -> bool {
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
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| match m::current_g() {
        Some(g) => {
            let loc = info
                .location()
                .map(|l| l.to_string())
                .unwrap_or_else(|| "<unknown>".into());
            let mut map = LOCATIONS.lock().unwrap_or_else(|e| e.into_inner());
            map.get_or_insert_with(HashMap::new).insert(g.id(), loc);
            drop(map);
            if abort_mode() {
                // A runtime call: the unwinder's lock must not be held
                // across an asynchronous preemption.
                let frames = crate::runtime::asyncpreempt::in_runtime(|| {
                    crate::traceback::own_frames(g.stack_range())
                });
                let mut map = FRAMES.lock().unwrap_or_else(|e| e.into_inner());
                map.get_or_insert_with(HashMap::new).insert(g.id(), frames);
            }
        }
        None => prev(info),
    }));
}

/// The location recorded for goroutine `id`'s panic, if any.
pub(crate) fn take_location(id: u64) -> Option<String> {
    let mut map = LOCATIONS.lock().unwrap_or_else(|e| e.into_inner());
    map.as_mut().and_then(|m| m.remove(&id))
}

/// A panic that nobody will join: print it, or end the process.
#[cold]
pub(crate) fn unjoined(id: u64, name: Option<&str>, message: &str, location: Option<&str>) {
    let loc = location.unwrap_or("<unknown>");
    if abort_mode() {
        // The whole report is built before stderr is locked: stopping the
        // world (GOTRACEBACK=all) while holding it could wait forever for a
        // goroutine blocked on that very lock.
        let report = abort_report(id, message, loc);
        let mut out = std::io::stderr().lock();
        let _ = out.write_all(report.as_bytes());
        let _ = out.flush();
        std::process::exit(2);
    }
    let stderr = std::io::stderr();
    let mut out = stderr.lock();
    match name {
        Some(n) => {
            let _ = writeln!(out, "goroutine {id} ({n}) panicked at {loc}:\n{message}");
        }
        None => {
            let _ = writeln!(out, "goroutine {id} panicked at {loc}:\n{message}");
        }
    }
}

/// Go's report of a fatal panic: `panic: msg`, the panicking goroutine
/// with its frames, and with `GOTRACEBACK=all` every other goroutine.
fn abort_report(id: u64, message: &str, loc: &str) -> String {
    use std::fmt::Write as _;

    use crate::traceback::{self, format, GInfo, Level};
    let level = traceback::level(Level::Single);
    let frames = FRAMES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_mut()
        .and_then(|m| m.remove(&id));
    let mut out = format!("panic: {message}\n\n");
    if level >= Level::Single {
        let _ = writeln!(out, "goroutine {id} [running]:");
        match frames {
            Some(pcs) => {
                let g = GInfo {
                    id,
                    status: crate::g::Status::Running,
                    reason: crate::g::WaitReason::None,
                    waitsince: 0,
                    locked: false,
                    pcs: Ok(pcs),
                    spawn: Default::default(),
                };
                // A runtime call: the symboliser's lock must not be held
                // across an asynchronous preemption.
                crate::runtime::asyncpreempt::in_runtime(|| {
                    format::write_frames(&mut out, &g, level)
                });
                let _ = writeln!(out, "panicked at {loc}");
            }
            None => {
                let _ = writeln!(out, "\t{loc}");
            }
        }
    }
    if level >= Level::All {
        // As Go does with GOTRACEBACK=all: every other goroutine too.
        let text = crate::runtime::asyncpreempt::in_runtime(|| {
            let others: Vec<GInfo> = traceback::collect_stopped()
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
