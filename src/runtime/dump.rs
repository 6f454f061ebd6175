//! The goroutine dump ([`crate::dump`]) and SIGQUIT.
//!
//! # The dump
//! Every live goroutine gets Go's traceback (`debug=2`), in id order (the
//! caller's own goroutine first, as Go prints the current one first):
//!
//! ```text
//! goroutine 17 [chan receive, 3 minutes]:
//!         name: worker
//! myapp::worker(...)
//!         /src/main.rs:8
//! created by myapp::main in goroutine 1
//!         /src/main.rs:14
//! ```
//!
//! The status is Go's (`runnable`, `running`, `syscall`; `syscall, blocked
//! outside the runtime: read` for a goroutine whose thread is blocked in a
//! plain `std` call: `traceback`'s note, "Goroutines on other threads") or,
//! for a parked goroutine, its wait reason; `N minutes` is added, as in Go, once it has
//! waited at least a minute (measured from the park, on sysmon's coarse
//! clock, so within ~10 ms). A named goroutine (`Builder::name`) gets a
//! `name:` line. How the frames are found, and why it is safe while other
//! goroutines run (the world is stopped while stacks are read), is
//! `traceback`'s module note. `dump_grouped` prints pprof's `debug=1` form.
//!
//! # SIGQUIT
//! As in Go, SIGQUIT (Ctrl-\) writes `SIGQUIT: quit`, a blank line and the
//! dump on stderr, then exits with status 2 (`GOTRACEBACK=crash`: raises
//! `SIGABRT`). Go handles SIGQUIT as a runtime throw, which prints every
//! goroutine with the runtime's frames whatever `GOTRACEBACK` says
//! (measured with Go 1.19: the same dump under `none`, `single`, `all`,
//! `system` and `crash`); so does this dump. The signal handler
//! (`sys::overflow::install_quit_handler`) only writes a byte to a pipe
//! (async-signal-safe), and calls the handler that was installed before
//! ours, if any (chaining); a dedicated thread blocked on the pipe's read
//! end writes the dump (it waits at most 2 s for the world to stop, then
//! prints headers only; goroutines on other threads give their own frames,
//! `traceback`'s note) and exits, in ordinary thread context where it may
//! allocate and lock. (A signalfd or `sigwait` would need SIGQUIT blocked
//! in every thread, including threads that existed before the runtime.)
//! `exit` runs the `atexit` hooks, so a running trace is completed; a
//! running flight recorder writes its window to a file first
//! (`trace::FlightRecorder`), as on a deadlock report and an abort.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::FromRawFd;

use crate::traceback::{self, format, GInfo, Level, Pinned};

/// Writes the dump (module note) to `w`.
///
/// Collection and symbolisation are runtime calls (no asynchronous
/// preemption): they take the scheduler's and the symboliser's locks.
pub(crate) fn dump(w: &mut dyn Write) -> io::Result<()> {
    let level = traceback::level(Level::All).max(Level::All);
    let text = super::entry::call(|| {
        let mut gs = collect_stopped();
        let blocked = other_threads(&mut gs, None);
        render_with(&gs, level, &blocked)
    });
    w.write_all(text.as_bytes())?;
    w.flush()
}

/// Goroutines running on other threads (module note, "Goroutines on
/// other threads"): finds each one's thread (its M), and notes those whose
/// thread is blocked in a system call outside the runtime (status
/// `running`, the M in the goroutine's own code, `/proc/self/task/TID/
/// syscall` naming a call). With `walker` (SIGQUIT only), also takes their
/// frames, each thread holding still in its handler while its stack is
/// walked; else those blocked are marked so (`NoStack::Blocked`). Returns
/// the blocked ones' system calls by goroutine id.
fn other_threads(
    gs: &mut [GInfo],
    mut walker: Option<&mut traceback::ThreadWalker>,
) -> HashMap<u64, i64> {
    use crate::g::{Status, G};
    let mut blocked = HashMap::new();
    let on_other = |g: &GInfo| {
        matches!(g.status, Status::Running | Status::Syscall)
            && matches!(g.pcs, Err(traceback::NoStack::Running))
    };
    if !gs.iter().any(on_other) {
        return blocked;
    }
    // Each live M's goroutine, thread and handshake word (even: the
    // goroutine's own code; `m::revoke`).
    let ms: Vec<(&'static G, i32, u32)> = {
        let all = super::sched()
            .allm
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        all.iter()
            .filter(|m| !m.is_dead())
            .filter_map(|m| m.curg().map(|g| (g, m.tid(), m.revoke.word())))
            .collect()
    };
    // Every thread answers within 100 ms or is given up on; all of them
    // within a second.
    let end = std::time::Instant::now() + std::time::Duration::from_secs(1);
    for info in gs.iter_mut().filter(|g| on_other(g)) {
        let Some(&(g, tid, word)) = ms.iter().find(|(g, _, _)| g.id() == info.id) else {
            continue;
        };
        let nr = if info.status == Status::Running && word & 1 == 0 {
            crate::sys::procfs::blocked_syscall(tid).filter(|&nr| nr >= 0)
        } else {
            None
        };
        if let Some(nr) = nr {
            blocked.insert(info.id, nr);
            info.pcs = Err(traceback::NoStack::Blocked);
        }
        let (Some(w), Some(range)) = (walker.as_deref_mut(), g.stack_range()) else {
            continue;
        };
        let deadline = end.min(std::time::Instant::now() + std::time::Duration::from_millis(100));
        if let Some((pcs, spawn)) = w.frames(tid, range, deadline) {
            info.pcs = Ok(pcs);
            info.spawn = spawn;
        }
    }
    blocked
}

/// Writes pprof's `debug=1` form (`crate::dump_grouped`) to `w`.
pub(crate) fn dump_grouped(w: &mut dyn Write) -> io::Result<()> {
    let level = traceback::level(Level::All).max(Level::All);
    let text = super::entry::call(|| format::grouped(&collect_stopped(), level));
    w.write_all(text.as_bytes())?;
    w.flush()
}

/// Writes the dump as JSON (`crate::dump_json`) to `w`.
pub(crate) fn dump_json(w: &mut dyn Write) -> io::Result<()> {
    let level = traceback::level(Level::All).max(Level::All);
    let text = super::entry::call(|| {
        let mut gs = collect_stopped();
        let blocked = other_threads(&mut gs, None);
        let names: HashMap<u64, _> = crate::g::names().into_iter().collect();
        let cpu = super::stats::cpu_times_ns();
        let now = crate::runtime::stats::ms_since_start(crate::sys::time::nanotime());
        traceback::json::render(&gs, &names, &blocked, &cpu, now, level)
    });
    w.write_all(text.as_bytes())?;
    w.flush()
}

/// Go's `debug=2` text of `gs`: headers, names, frames, spawn sites.
pub(crate) fn render(gs: &[GInfo], level: Level) -> String {
    render_with(gs, level, &HashMap::new())
}

/// [`render`], with the goroutines whose thread is blocked outside the
/// runtime (their system calls by id: [`other_threads`]).
fn render_with(gs: &[GInfo], level: Level, blocked: &HashMap<u64, i64>) -> String {
    let names: HashMap<u64, _> = crate::g::names().into_iter().collect();
    let now = crate::runtime::stats::ms_since_start(crate::sys::time::nanotime());
    let mut out = String::new();
    for g in gs {
        match blocked.get(&g.id) {
            Some(&nr) => format::header_blocked(&mut out, g, nr),
            None => format::header(&mut out, g, now),
        }
        if let Some(name) = names.get(&g.id) {
            out.push_str("\tname: ");
            out.push_str(name);
            out.push('\n');
        }
        format::write_frames(&mut out, g, level);
        out.push('\n');
    }
    // Once per dump, after it: every location above printed as `?`.
    if format::lacks_line_tables(gs) {
        out.push_str(format::LINE_TABLES_HINT);
    }
    out
}

/// The dump of a deadlocked synctest bubble's goroutines (`bubble`): as
/// [`render`], each header marked as Go marks a bubble's:
/// `goroutine 10 [chan receive (durable), synctest bubble 1]:`.
/// Without a bubble number (a test's real-time group), headers as the
/// process-wide deadlock report's, marked `(durable)` only.
pub(crate) fn render_bubble(gs: &[GInfo], level: Level, bubble: Option<u64>) -> String {
    let names: HashMap<u64, _> = crate::g::names().into_iter().collect();
    let mut out = String::new();
    for g in gs {
        let status = format::status_str(g.status, g.reason);
        let durable = g.status == crate::g::Status::Waiting && super::bubble::durable(g.reason);
        let _ = std::fmt::Write::write_fmt(
            &mut out,
            format_args!(
                "goroutine {} [{}{}",
                g.id,
                status,
                if durable { " (durable)" } else { "" },
            ),
        );
        if let Some(id) = bubble {
            let _ = std::fmt::Write::write_fmt(&mut out, format_args!(", synctest bubble {id}"));
        }
        out.push_str("]:\n");
        if let Some(name) = names.get(&g.id) {
            out.push_str("\tname: ");
            out.push_str(name);
            out.push('\n');
        }
        format::write_frames(&mut out, g, level);
        out.push('\n');
    }
    if format::lacks_line_tables(gs) {
        out.push_str(format::LINE_TABLES_HINT);
    }
    out
}

/// Installs the SIGQUIT handler and starts its thread (runtime start).
pub(crate) fn install_sigquit() {
    let (rd, wr) = match crate::sys::overflow::pipe() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("goroutine: no SIGQUIT dump (pipe: {e})");
            return;
        }
    };
    let r = std::thread::Builder::new()
        .name("goroutine-sigquit".into())
        .stack_size(128 * 1024)
        .spawn(move || sigquit_thread(rd));
    if let Err(e) = r {
        eprintln!("goroutine: no SIGQUIT dump (thread: {e})");
        return;
    }
    // It blocks in read(2) forever: a runtime thread for checkdead.
    super::checkdead::internal_thread_started();
    if let Err(e) = crate::sys::overflow::install_quit_handler(wr) {
        eprintln!("goroutine: no SIGQUIT dump (sigaction: {e})");
    }
}

fn sigquit_thread(rd: std::os::fd::RawFd) {
    // SAFETY: `rd` is the read end of the pipe just created, owned by this
    // thread alone from now on.
    let mut pipe = unsafe { File::from_raw_fd(rd) };
    let mut b = [0u8; 1];
    loop {
        match pipe.read(&mut b) {
            Ok(1) => break,
            Ok(_) => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        }
    }
    // Go's level for a runtime throw, whatever GOTRACEBACK says (module
    // note); a bad value is still named.
    let _ = traceback::level(Level::All);
    let level = Level::System;
    // Stop the world on a helper thread: a goroutine spinning outside any
    // runtime call never lets it stop (module note of `traceback`).
    let (tx, rx) = std::sync::mpsc::channel();
    let helper = std::thread::Builder::new()
        .name("goroutine-sigquit-stw".into())
        .spawn(move || {
            let _ = tx.send(collect_stopped());
        });
    let gs = match helper {
        // Detached (its handle dropped): the process exits below without
        // joining it, and a finished thread that was neither joined nor
        // detached is a leak to ThreadSanitizer (exit status 66).
        Ok(h) => {
            drop(h);
            rx.recv_timeout(traceback::SIGQUIT_STOP_WAIT).ok()
        }
        Err(_) => None,
    };
    let mut gs = gs.unwrap_or_else(|| traceback::collect(Pinned::No, false));
    // The goroutines on other threads give their frames themselves.
    let mut walker = traceback::ThreadWalker::new();
    let blocked = other_threads(&mut gs, Some(&mut walker));
    drop(walker);
    let text = render_with(&gs, level, &blocked);
    let mut err = io::stderr().lock();
    let _ = err.write_all(b"SIGQUIT: quit\n\n");
    let _ = err.write_all(text.as_bytes());
    let _ = err.flush();
    drop(err);
    crate::tracer::flight_dump("SIGQUIT");
    crate::sys::exit_after_report()
}

/// Collects with every parked goroutine's frames: stops the world (`traceback`'s
/// module note) unless the runtime never started. Like every stop-the-world here
/// (and Go's before asynchronous preemption), it waits for each running
/// goroutine to reach a runtime call or to be stopped by a signal inside a
/// preemptible region.
pub(crate) fn collect_stopped() -> Vec<GInfo> {
    if super::start_time() == 0 {
        return traceback::collect(Pinned::Yes, true);
    }
    // A runtime call: no asynchronous preemption while the world is
    // stopped and the scheduler's locks are held.
    super::entry::call(|| {
        super::procresize::with_world_stopped(|| traceback::collect(Pinned::Yes, true))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::g::{Status, WaitReason};
    use crate::traceback::NoStack;

    fn line(status: Status, reason: WaitReason, waited_ms: i64) -> String {
        let now = 1_000_000;
        let mut out = String::new();
        let e = GInfo {
            id: 17,
            status,
            reason,
            waitsince: if waited_ms < 0 {
                0
            } else {
                now - waited_ms as u32
            },
            locked: false,
            pcs: Err(NoStack::NotStarted),
            spawn: Default::default(),
        };
        format::header(&mut out, &e, now);
        out
    }
    /// Cargo's default release profile keeps no line tables: the dump says
    /// once how to get file:line, and says nothing when it has them.
    #[test]
    fn a_dump_without_line_tables_says_how_to_get_them() {
        let g = |id, pcs| GInfo {
            id,
            status: Status::Waiting,
            reason: WaitReason::ChanReceive,
            waitsince: 0,
            locked: false,
            pcs: Ok(pcs),
            spawn: Default::default(),
        };
        // Addresses that symbolise to nothing, as in a binary without
        // line tables: once for the whole dump.
        let text = render(&[g(17, vec![0x10, 0x20]), g(18, vec![0x30])], Level::All);
        assert_eq!(text.matches("debug = \"limited\"").count(), 1, "{text}");
        assert!(text.ends_with(format::LINE_TABLES_HINT), "{text}");
        let grouped = format::grouped(&[g(17, vec![0x10])], Level::All);
        assert!(
            grouped.starts_with("goroutine profile: total 1\n"),
            "{grouped}"
        );
        assert!(
            grouped.contains("\n# note: no frame has a file:line"),
            "{grouped}"
        );
        // A frame of this test binary, which has line tables: no note.
        let here = a_dump_without_line_tables_says_how_to_get_them as fn() as usize + 1;
        let text = render(&[g(17, vec![here, 0x10])], Level::All);
        assert!(!text.contains("line-tables-only"), "{text}");
        // No frames at all (headers only): nothing to explain.
        let mut none = g(17, vec![]);
        none.pcs = Err(NoStack::NotStopped);
        assert!(!render(&[none], Level::All).contains("line-tables-only"));
    }

    #[test]
    fn headers_are_gos() {
        let min = 60_000;
        assert_eq!(
            line(Status::Waiting, WaitReason::ChanReceive, 3 * min + 5),
            "goroutine 17 [chan receive, 3 minutes]:\n"
        );
        assert_eq!(
            line(Status::Waiting, WaitReason::Select, min - 1),
            "goroutine 17 [select]:\n"
        );
        assert_eq!(
            line(Status::Waiting, WaitReason::Sleep, min),
            "goroutine 17 [sleep, 1 minutes]:\n"
        );
        assert_eq!(
            line(Status::Waiting, WaitReason::SyncMutexLock, -1),
            "goroutine 17 [sync.Mutex.Lock]:\n"
        );
        assert_eq!(
            line(Status::Runnable, WaitReason::None, 5 * min),
            "goroutine 17 [runnable]:\n"
        );
        assert_eq!(
            line(Status::Running, WaitReason::None, -1),
            "goroutine 17 [running]:\n"
        );
        assert_eq!(
            line(Status::Syscall, WaitReason::None, -1),
            "goroutine 17 [syscall]:\n"
        );
    }
}
