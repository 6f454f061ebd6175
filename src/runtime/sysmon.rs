//! sysmon: the system monitor (Go's sysmon), a dedicated thread without a P.
//!
//! Each cycle it
//! - polls the network if nobody has for 10 ms, injecting what is ready;
//! - starts an M when a timer is overdue and no M is looking (all busy);
//! - `retake`s: a P whose goroutine has run for 10 ms without a scheduling
//!   point gets `preempt` set (cooperative preemption: the goroutine yields
//!   at its next runtime call or `preempt_point()`, to the global queue),
//!   and if that goroutine is in a preemptible region its thread also gets
//!   `SIGURG` (asynchronous preemption, `asyncpreempt.rs`);
//!   a P that has stayed in one system call for a whole sysmon tick is taken
//!   (`Syscall -> Idle` CAS) and handed off, unless it has no work and other
//!   Ms are idle or spinning, in which case it waits 10 ms.
//!
//! Sleep: 20 us per cycle; after 50 cycles with nothing to do the sleep
//! doubles each cycle up to 10 ms. When every P is idle (or the world is
//! stopped) sysmon sleeps on its note until the next timer (at most 60 s);
//! system-call entry/exit and `startm` wake it (`wake_if_waiting`).
//!
//! sysmon's own view of each P (last schedtick/syscalltick seen and when)
//! is private to this thread: no other code reads it.

use std::sync::atomic::{AtomicI64, Ordering};

use super::{idle, sched, syscall, timers};
use crate::p::PStatus;
use crate::sys::time::nanotime;

/// A goroutine may run this long before sysmon asks it to yield (Go's
/// forcePreemptNS).
pub(crate) const FORCE_PREEMPT_NS: i64 = 10_000_000;

/// The slice in effect: `FORCE_PREEMPT_NS`, unless the undocumented test
/// knob `GOROUTINE_DEBUG_FORCEPREEMPTNS` (nanoseconds, at least 100 us)
/// shortens it so that preemption tests see thousands of preemptions per
/// second. Written once before sysmon starts.
static FORCE_PREEMPT: AtomicI64 = AtomicI64::new(FORCE_PREEMPT_NS);

fn force_preempt_ns() -> i64 {
    FORCE_PREEMPT.load(Ordering::Relaxed)
}

#[derive(Clone, Copy, Default)]
struct PView {
    schedtick: u32,
    schedwhen: i64,
    syscalltick: u32,
    syscallwhen: i64,
}

/// Starts the sysmon thread (once, at runtime start).
pub(crate) fn start() {
    if let Some(ns) = std::env::var("GOROUTINE_DEBUG_FORCEPREEMPTNS")
        .ok()
        .and_then(|v| v.trim().parse::<i64>().ok())
    {
        FORCE_PREEMPT.store(ns.clamp(100_000, FORCE_PREEMPT_NS), Ordering::Relaxed);
    }
    let r = std::thread::Builder::new()
        .name("goroutine-sysmon".into())
        .stack_size(128 * 1024)
        .spawn(sysmon);
    if r.is_ok() {
        super::checkdead::internal_thread_started();
    }
    if let Err(e) = r {
        eprintln!("goroutine: cannot start sysmon ({e}): no preemption or syscall handoff");
    }
}

/// Wakes sysmon from its deep sleep, if it is in one.
#[inline]
pub(crate) fn wake_if_waiting() {
    let s = sched();
    if s.sysmonwait.load(Ordering::SeqCst) {
        let _l = s.lock();
        if s.sysmonwait.load(Ordering::SeqCst) {
            s.sysmonwait.store(false, Ordering::SeqCst);
            s.sysmonnote.wakeup();
        }
    }
}

fn sysmon() {
    let s = sched();
    let mut views: Vec<PView> = Vec::new();
    let mut idle_cycles = 0u32;
    let mut delay_us = 20u64;
    // At most one slice between looks at the Ps (10 ms, Go's cap).
    let max_delay_us = (force_preempt_ns() as u64 / 1_000).min(10_000);
    loop {
        if idle_cycles == 0 {
            delay_us = 20;
        } else if idle_cycles > 50 {
            delay_us *= 2;
        }
        delay_us = delay_us.min(max_delay_us);
        std::thread::sleep(std::time::Duration::from_micros(delay_us));
        let mut now = nanotime();

        if s.gcwaiting.load(Ordering::SeqCst) || s.spin.npidle() == s.gomaxprocs() {
            let l = s.lock();
            if s.gcwaiting.load(Ordering::SeqCst) || s.spin.npidle() == s.gomaxprocs() {
                drop(l);
                // Every P is idle: maybe nothing can ever run again.
                super::checkdead::check();
                now = nanotime();
                let l = s.lock();
                let still_idle =
                    s.gcwaiting.load(Ordering::SeqCst) || s.spin.npidle() == s.gomaxprocs();
                let next = timers::next_when();
                if still_idle && (next == 0 || next > now) {
                    s.sysmonnote.clear();
                    s.sysmonwait.store(true, Ordering::SeqCst);
                    drop(l);
                    let mut sleep = 60_000_000_000i64;
                    if next != 0 {
                        sleep = sleep.min(next - now);
                    }
                    let woken = s.sysmonnote.sleep_timeout(sleep);
                    let _l = s.lock();
                    s.sysmonwait.store(false, Ordering::SeqCst);
                    if woken {
                        idle_cycles = 0;
                        delay_us = 20;
                    }
                    now = nanotime();
                }
            }
        }

        // Poll the network if nobody has for 10 ms.
        let lastpoll = s.lastpoll.load(Ordering::SeqCst);
        if lastpoll != 0
            && lastpoll + 10_000_000 < now
            && s.lastpoll
                .compare_exchange(lastpoll, now, Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
        {
            let list = crate::netpoll::netpoll(0);
            if !list.is_empty() {
                super::schedule::inject(list);
            }
        }

        // An overdue timer that no M looks at.
        let next = timers::next_when();
        if next != 0 && next < now {
            idle::startm(None, false);
        }

        if retake(s, now, &mut views) > 0 {
            idle_cycles = 0;
        } else {
            idle_cycles += 1;
        }
    }
}

/// Preempts long-running goroutines and takes Ps back from system calls;
/// returns how many Ps it took.
fn retake(s: &'static super::Sched, now: i64, views: &mut Vec<PView>) -> u32 {
    let n = s.gomaxprocs() as usize;
    if views.len() < n {
        views.resize(n, PView::default());
    }
    let mut taken = 0;
    for (id, pd) in views.iter_mut().enumerate().take(n) {
        let Some(p) = s.allp(id) else { continue };
        let status = p.status();
        if status == PStatus::Running || status == PStatus::Syscall {
            let t = p.schedtick();
            if pd.schedtick != t {
                pd.schedtick = t;
                pd.schedwhen = now;
            } else if pd.schedwhen + force_preempt_ns() <= now {
                p.preempt.store(true, Ordering::Release);
                if status == PStatus::Running {
                    super::asyncpreempt::preempt_m(p, now);
                }
            }
        }
        if status != PStatus::Syscall {
            continue;
        }
        let t = p.syscalltick();
        if pd.syscalltick != t {
            pd.syscalltick = t;
            pd.syscallwhen = now;
            continue;
        }
        // Nothing to do for it and others are looking: leave it 10 ms.
        if p.runq.is_empty()
            && s.spin.nmspinning() + s.spin.npidle() > 0
            && pd.syscallwhen + 10_000_000 > now
        {
            continue;
        }
        if let Some(pp) = p.cas_from_syscall(PStatus::Idle) {
            pp.bump_syscalltick();
            taken += 1;
            syscall::handoffp(pp);
        }
    }
    taken
}
