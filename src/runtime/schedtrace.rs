//! `GODEBUG=schedtrace=N[,scheddetail=1]`: every N ms sysmon prints Go's
//! scheduler summary line on stderr (Go's `schedtrace`), with `scheddetail`
//! the extended line and one line per P, M and goroutine.
//!
//! ```text
//! SCHED 1004ms: gomaxprocs=4 idleprocs=0 threads=6 spinningthreads=0 needspinning=0 idlethreads=1 blockedthreads=0 runqueue=0 [3 2 0 1]
//! ```
//!
//! The fields are Go's, computed from our state:
//! - `threads`: the Ms plus sysmon (Go's `mcount` counts sysmon's M too);
//! - `blockedthreads` (ours, not Go's): threads whose goroutine blocked in
//!   the kernel outside the runtime and whose P was taken (`retake.rs`),
//!   not yet back in the runtime;
//! - `needspinning`: always 0 (Go 1.21's needspinning flag, which makes a
//!   spinner that found no work re-check once more, is not implemented: our
//!   delicate dance re-checks every queue instead);
//! - the per-P run queue lengths (`[..]` and `runqsize=`) count the ring
//!   plus runnext (Go prints the ring only);
//! - `m=` of a P whose M is in a system call is `nil` (our M gives its P
//!   up on entry); `lockedg=`/`lockedm=` are always `nil` (the wiring lives
//!   in owner-only fields that sysmon may not read).
//! - The `G` lines list the live goroutines (Go also lists dead ones,
//!   which are on free lists here, status 0): `status=4(chan receive)`.
//!
//! The snapshot is taken without stopping anything, as Go does: fields of
//! different Ps, Ms and Gs may be from slightly different instants.

use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::atomic::Ordering;

use super::sched;
use crate::g::Status;
use crate::sys::time::nanotime;

/// Prints one schedtrace report on stderr.
pub(crate) fn print(detailed: bool) {
    let out = render(detailed);
    let _ = std::io::stderr().lock().write_all(out.as_bytes());
}

/// The report that [`print`] writes.
pub(crate) fn render(detailed: bool) -> String {
    let s = sched();
    let ms = (nanotime() - super::start_time()) / 1_000_000;
    let (idlethreads, stopwait) = {
        let l = s.lock();
        (l.midle.len(), l.stw.remaining())
    };
    let allm: Vec<_> = s
        .allm
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .copied()
        .filter(|m| !m.is_dead())
        .collect();
    let n = s.gomaxprocs() as usize;
    let mut out = String::new();
    let _ = write!(
        out,
        "SCHED {ms}ms: gomaxprocs={n} idleprocs={} threads={} spinningthreads={} needspinning=0 idlethreads={idlethreads} blockedthreads={} runqueue={}",
        s.spin.npidle(),
        allm.len() + 1,
        s.spin.nmspinning(),
        super::retake::blocked_threads(),
        s.runqsize.load(Ordering::Relaxed),
    );
    if detailed {
        let _ = writeln!(
            out,
            " gcwaiting={} nmidlelocked={} stopwait={stopwait} sysmonwait={}",
            s.stw_waiting.load(Ordering::Relaxed),
            super::checkdead::IDLE_LOCKED_MS.load(Ordering::Relaxed),
            s.sysmonwait.load(Ordering::Relaxed),
        );
    }
    for i in 0..n {
        let Some(p) = s.allp(i) else { continue };
        let len = p.runq_len();
        if detailed {
            let m = allm.iter().find(|m| m.p_id() == Some(i as u32));
            let _ = write!(
                out,
                "  P{i}: status={} schedtick={} syscalltick={} m=",
                p.status() as u32,
                p.schedtick(),
                p.syscalltick(),
            );
            match m {
                Some(m) => {
                    let _ = write!(out, "{}", m.id);
                }
                None => out.push_str("nil"),
            }
            let _ = writeln!(
                out,
                " runqsize={len} gfreecnt={} timerslen={}",
                p.counters.gfree.load(Ordering::Relaxed),
                p.timers.len(),
            );
        } else {
            out.push(' ');
            if i == 0 {
                out.push('[');
            }
            let _ = write!(out, "{len}");
            if i == n - 1 {
                out.push(']');
            }
        }
    }
    if !detailed {
        out.push('\n');
        return out;
    }
    let mut running: Vec<(usize, u64)> = Vec::new();
    for m in &allm {
        let _ = write!(out, "  M{}: p=", m.id);
        match m.p_id() {
            Some(p) => {
                let _ = write!(out, "{p}");
            }
            None => out.push_str("nil"),
        }
        out.push_str(" curg=");
        match m.curg_from_outside() {
            Some(g) => {
                running.push((g as *const _ as usize, m.id));
                let _ = write!(out, "{}", g.id());
            }
            None => out.push_str("nil"),
        }
        let blocked = m.parks.load(Ordering::Relaxed) != m.wakes.load(Ordering::Relaxed);
        let _ = writeln!(
            out,
            " mallocing=0 throwing=0 preemptoff= locks=0 dying=0 spinning={} blocked={blocked} lockedg=nil",
            m.is_spinning(),
        );
    }
    crate::g::G::for_each(|g| {
        let status = g.status();
        if matches!(status, Status::Idle | Status::Dead) {
            return;
        }
        let reason = if status == Status::Waiting {
            g.wait_reason().as_str()
        } else {
            ""
        };
        let _ = write!(out, "  G{}: status={}({reason}) m=", g.id(), status as u32);
        match running.iter().find(|(p, _)| *p == g as *const _ as usize) {
            Some((_, m)) => {
                let _ = write!(out, "{m}");
            }
            None => out.push_str("nil"),
        }
        out.push_str(" lockedm=nil\n");
    });
    out
}
