//! The goroutine dump ([`crate::dump`]) and SIGQUIT.
//!
//! # The dump
//! Every live goroutine gets Go's traceback header, in id order (the
//! caller's own goroutine first, as Go prints the current one first):
//!
//! ```text
//! goroutine 17 [chan receive, 3 minutes]:
//!         name: worker
//! ```
//!
//! The status is Go's (`runnable`, `running`, `syscall`) or, for a parked
//! goroutine, its wait reason; `N minutes` is added, as in Go, once it has
//! waited at least a minute (measured from the park, on sysmon's coarse
//! clock, so within ~10 ms). A named goroutine (`Builder::name`) gets a
//! `name:` line. There are no stack frames: we cannot unwind another
//! goroutine's stack.
//!
//! The Gs are found by walking the G arena (`G::for_each`), reading only
//! their atomic fields; names come from the name registry. Nothing is
//! stopped, so a goroutine may change state while the dump is written.
//!
//! # SIGQUIT
//! As in Go, SIGQUIT (Ctrl-\) writes `SIGQUIT: quit`, a blank line and the
//! dump on stderr, then exits with status 2. The signal handler
//! (`sys::signal::install_quit_handler`) only writes a byte to a pipe
//! (async-signal-safe), and calls the handler that was installed before
//! ours, if any (chaining); a dedicated thread blocked on the pipe's read
//! end writes the dump and exits, in ordinary thread context where it may
//! allocate and lock. (A signalfd or `sigwait` would need SIGQUIT blocked
//! in every thread, including threads that existed before the runtime.)
//! `exit` runs the `atexit` hooks, so a running trace is completed.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::FromRawFd;

use crate::g::{Status, WaitReason};
use crate::sys::time::nanotime;

struct Entry {
    id: u64,
    status: Status,
    reason: WaitReason,
    /// `G::waitsince`: ms since runtime start plus one, 0 if never.
    waitsince: u32,
}

/// Writes the dump (module note) to `w`.
pub(crate) fn dump(w: &mut dyn Write) -> io::Result<()> {
    let me = crate::current_id();
    let mut gs: Vec<Entry> = Vec::new();
    crate::g::G::for_each(|g| {
        let status = g.status();
        if matches!(status, Status::Idle | Status::Dead) {
            return;
        }
        gs.push(Entry {
            id: g.id(),
            status,
            reason: g.wait_reason(),
            waitsince: g.waitsince(),
        });
    });
    gs.sort_by_key(|e| (e.id != me, e.id));
    let names: HashMap<u64, _> = crate::g::names().into_iter().collect();
    let now = crate::runtime::stats::ms_since_start(nanotime());
    let mut out = String::new();
    for e in &gs {
        header(&mut out, e, now);
        if let Some(name) = names.get(&e.id) {
            out.push_str("\tname: ");
            out.push_str(name);
            out.push('\n');
        }
        out.push('\n');
    }
    w.write_all(out.as_bytes())?;
    w.flush()
}

/// `goroutine 17 [chan receive, 3 minutes]:` (`now` on the coarse clock's
/// scale).
fn header(out: &mut String, e: &Entry, now: u32) {
    use std::fmt::Write as _;
    let status = match e.status {
        Status::Runnable => "runnable",
        Status::Running => "running",
        Status::Syscall => "syscall",
        Status::Waiting if e.reason != WaitReason::None => e.reason.as_str(),
        Status::Waiting => "waiting",
        Status::Idle => "idle",
        Status::Dead => "dead",
    };
    let _ = write!(out, "goroutine {} [{status}", e.id);
    if e.status == Status::Waiting && e.waitsince != 0 {
        let minutes = now.wrapping_sub(e.waitsince) / 60_000;
        if minutes >= 1 {
            let _ = write!(out, ", {minutes} minutes");
        }
    }
    out.push_str("]:\n");
}

/// Installs the SIGQUIT handler and starts its thread (runtime start).
pub(crate) fn install_sigquit() {
    let (rd, wr) = match crate::sys::signal::pipe() {
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
    if let Err(e) = crate::sys::signal::install_quit_handler(wr) {
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
    let mut err = io::stderr().lock();
    let _ = err.write_all(b"SIGQUIT: quit\n\n");
    let _ = dump(&mut err);
    drop(err);
    std::process::exit(2);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(status: Status, reason: WaitReason, waited_ms: i64) -> String {
        let now = 1_000_000;
        let mut out = String::new();
        let e = Entry {
            id: 17,
            status,
            reason,
            waitsince: if waited_ms < 0 {
                0
            } else {
                now - waited_ms as u32
            },
        };
        header(&mut out, &e, now);
        out
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
