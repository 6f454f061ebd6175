//! The netpoller (Go's netpoll.go + netpoll_epoll.go): goroutines park on a
//! file descriptor's readiness instead of blocking their thread.
//!
//! # The OS layer: mio
//! One `mio::Poll` (epoll on Linux, kqueue elsewhere) for the process, every
//! fd registered once, edge-triggered, for read and write; a `mio::Waker`
//! (an eventfd) breaks a blocked wait. We use mio rather than rustix because
//! it is the well-kept portable layer over exactly these calls (epoll,
//! kqueue, eventfd/pipe wakers), so porting the netpoller to another target
//! needs no code here; rustix would give thin Linux-only wrappers that we
//! would have to redo per OS. The scheduler protocol itself (who polls,
//! when, and how ready goroutines are injected) is ours, below.
//! A blocking poll with a deadline also arms a timerfd in the same epoll
//! set (`sys::timerfd`), because epoll's timeout is in whole milliseconds:
//! the blocked poller then wakes for the next timer to the nanosecond.
//!
//! # Who polls (invariants)
//! - At most one M blocks in the poller, with no P: the one that swapped
//!   `sched.lastpoll` from non-zero to 0 (`find_runnable`, step 10). Its
//!   deadline is the earliest timer (`sched.poll_until`). Anyone who adds an
//!   earlier timer, or needs it back, calls [`netpoll_break`].
//! - Non-blocking polls (`find_runnable`, step 6, after one pass over the
//!   other Ps' rings and before the spinning search; sysmon after 10 ms
//!   without a poll) take the poll lock with `try_lock`, so they never wait
//!   behind the blocked poller.
//!
//! # A descriptor's wait slots (Go's pollDesc.rg / wg)
//! Each direction has one slot: `NIL`, `READY` (an edge arrived, nobody
//! consumed it), `WAIT` (a goroutine is about to park), or the address of
//! the parked G. The waiter goes NIL -> WAIT, parks, and its park's unlock
//! step commits WAIT -> G; an edge turns the slot to READY (taking out a G
//! it finds, which the poller readies; the commit's CAS then fails and the
//! waiter does not park). A deadline timer turns WAIT/G to NIL the same way.
//! Whoever swaps a G out of a slot readies it, so a G is readied exactly
//! once. Waiters treat every wakeup as "retry the operation".
//!
//! # Re-arming a deadline (Go's poll_runtime_pollSetDeadline)
//! A waiter does not own a fixed deadline: it reads it (through a closure)
//! after its slot is WAIT. A setter stores the new deadline and then wakes
//! the slot through [`PollWake`] (WAIT/G -> NIL, as a timer does). Both
//! sides use `SeqCst` on the deadline and on the slot (a Dekker pair), so
//! either the setter finds WAIT or a G and wakes it, or the waiter reads the
//! new deadline. A woken waiter returns; its caller re-reads the deadlines,
//! fails if one has passed, and otherwise retries and waits again under the
//! new one (later, or none).
//!
//! Descriptors are never freed (Go's pollcache): a stale event for a closed
//! fd is recognised by the sequence number packed in the event's token.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Registry, Token, Waker};

use crate::cacheline::CacheLine;
use crate::g::{WaitReason, G};
use crate::m;
use crate::runtime::park;
use crate::runtime::timers::{Timer, TimerFn};
use crate::sys::timerfd::TimerFd;

const NIL: usize = 0;
const READY: usize = 1;
const WAIT: usize = 2;

const WAKER_TOKEN: Token = Token(usize::MAX);
/// The precise-timeout timer's events (see `sys::timerfd`).
const TIMER_TOKEN: Token = Token(usize::MAX - 1);
const SEQ_SHIFT: u32 = 48;

struct Poller {
    poll: Mutex<PollState>,
    registry: Registry,
    waker: Waker,
}

/// What the polling thread owns (under `Poller::poll`).
struct PollState {
    poll: Poll,
    events: Events,
    /// Ends a blocking poll at its deadline to the nanosecond (epoll's own
    /// timeout is in whole milliseconds, rounded up); `None` where the OS
    /// has none. Registered edge-triggered under `TIMER_TOKEN`.
    timer: Option<TimerFd>,
    /// When the timer was last set to fire (nanotime), 0 if disarmed; a
    /// value in the past means it has fired.
    timer_at: i64,
}

static POLLER: OnceLock<Poller> = OnceLock::new();
/// Goroutines parked in the poller (Go's netpollWaiters). Written at every
/// park and wake for I/O, by every M: on lines of its own
/// (`crate::cacheline`).
static WAITERS: CacheLine<AtomicI32> = CacheLine::new(AtomicI32::new(0));
/// A break is pending (Go's netpollWakeSig): at most one eventfd write.
static WAKE_SIG: AtomicBool = AtomicBool::new(false);
/// Free descriptors.
static CACHE: Mutex<Vec<&'static PollDesc>> = Mutex::new(Vec::new());

/// Creates the poller; called when the runtime starts.
pub(crate) fn init() -> io::Result<()> {
    if POLLER.get().is_some() {
        return Ok(());
    }
    let poll = Poll::new()?;
    let registry = poll.registry().try_clone()?;
    let waker = Waker::new(&registry, WAKER_TOKEN)?;
    // Without a timer the poller still works, with millisecond timeouts.
    let timer = TimerFd::new().filter(|t| {
        registry
            .register(
                &mut SourceFd(&t.as_raw_fd()),
                TIMER_TOKEN,
                Interest::READABLE,
            )
            .is_ok()
    });
    let _ = POLLER.set(Poller {
        poll: Mutex::new(PollState {
            poll,
            events: Events::with_capacity(128),
            timer,
            timer_at: 0,
        }),
        registry,
        waker,
    });
    Ok(())
}

/// Whether any goroutine waits in the poller.
#[inline]
pub(crate) fn any_waiters() -> bool {
    WAITERS.load(Ordering::Relaxed) > 0
}

/// Interrupts a blocked [`netpoll`] (Go's netpollBreak).
pub(crate) fn netpoll_break() {
    let Some(p) = POLLER.get() else { return };
    if WAKE_SIG
        .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
        .is_ok()
    {
        if let Err(e) = p.waker.wake() {
            WAKE_SIG.store(false, Ordering::Release);
            eprintln!("goroutine: netpoll break failed: {e}");
        }
    }
}

/// A non-blocking poll took the event of a pending break. mio registers
/// the waker's eventfd edge-triggered, so that event is gone: no blocking
/// poll will see it and clear `WAKE_SIG`, and while it stays set every
/// later `netpoll_break` would do nothing (Go's break fd is level-triggered:
/// its non-blocking polls leave the event to the next blocking one). So
/// clear it here, and break again if an M is elected to block in the poller
/// (`lastpoll == 0`): the break may have been meant for it.
#[cold]
fn retake_break() {
    WAKE_SIG.store(false, Ordering::Release);
    if crate::runtime::sched().lastpoll.load(Ordering::SeqCst) == 0 {
        netpoll_break();
    }
}

/// Polls for ready descriptors and returns the goroutines they ready, each
/// already `Runnable` (Go's netpoll). `delay_ns < 0` blocks until an event
/// or a break, `0` does not block, `> 0` blocks at most that long.
pub(crate) fn netpoll(delay_ns: i64) -> Vec<&'static G> {
    let until = if delay_ns > 0 {
        crate::sys::time::nanotime() + delay_ns
    } else {
        0
    };
    poll_for(delay_ns, until)
}

/// [`netpoll`] blocking until nanotime `until` at the latest (0: until an
/// event or a break): the idle M's wait for the next timer.
pub(crate) fn netpoll_until(until: i64) -> Vec<&'static G> {
    let delay_ns = if until == 0 {
        -1
    } else {
        (until - crate::sys::time::nanotime()).max(0)
    };
    poll_for(delay_ns, until)
}

fn poll_for(delay_ns: i64, until: i64) -> Vec<&'static G> {
    let mut out = Vec::new();
    let Some(p) = POLLER.get() else {
        return out;
    };
    let mut guard = if delay_ns == 0 {
        match p.poll.try_lock() {
            Ok(g) => g,
            Err(_) => return out,
        }
    } else {
        match p.poll.lock() {
            Ok(g) => g,
            Err(e) => e.into_inner(),
        }
    };
    let st = &mut *guard;
    let timeout = match delay_ns {
        d if d < 0 => None,
        0 => Some(Duration::ZERO),
        d => Some(Duration::from_nanos(d as u64)),
    };
    if delay_ns != 0 {
        st.set_timer(delay_ns, until);
    }
    let (poll, events) = (&mut st.poll, &mut st.events);
    let mut took_break = false;
    loop {
        match poll.poll(events, timeout) {
            Ok(()) => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                if delay_ns > 0 {
                    // Return so the caller recomputes its deadline.
                    return out;
                }
            }
            Err(e) => crate::runtime::throw(&format!("netpoll: poll failed: {e}")),
        }
    }
    for ev in events.iter() {
        let token = ev.token();
        if token == WAKER_TOKEN {
            if delay_ns != 0 {
                WAKE_SIG.store(false, Ordering::Release);
            } else {
                took_break = true;
            }
            continue;
        }
        if token == TIMER_TOKEN {
            continue;
        }
        let ptr = token.0 & ((1usize << SEQ_SHIFT) - 1);
        let tag = (token.0 >> SEQ_SHIFT) as u64;
        // SAFETY: tokens are addresses of leaked, never-freed PollDescs.
        let pd = unsafe { &*(ptr as *const PollDesc) };
        // Pairs with the release in `PollFd::new` (TSan only).
        #[cfg(goroutine_sanitize = "thread")]
        crate::sys::tsan::acquire(pd);
        if pd.seq.load(Ordering::Acquire) & 0x7fff != tag {
            continue; // the fd was closed (and maybe reused) since
        }
        let r = ev.is_readable() || ev.is_read_closed() || ev.is_error();
        let w = ev.is_writable() || ev.is_write_closed() || ev.is_error();
        if r {
            if let Some(g) = unblock(&pd.rg, true) {
                out.push(g);
            }
        }
        if w {
            if let Some(g) = unblock(&pd.wg, true) {
                out.push(g);
            }
        }
    }
    if took_break {
        drop(guard);
        retake_break();
    }
    // Their ready samples are taken as they are queued, after their
    // GoUnblocks (`schedule::netpoll_readied`).
    for g in &out {
        g.cas_waiting_to_runnable();
    }
    if !out.is_empty() {
        // Several threads may poll (non-blocking polls use try_lock, but
        // sysmon and an M can take turns): a real read-modify-write, once
        // per non-empty poll.
        crate::runtime::stats::NETPOLL_READY.fetch_add(out.len() as u64, Ordering::Relaxed);
        if crate::tracer::on() {
            crate::tracer::netpoll_ready(out.len() as u64);
        }
    }
    out
}

impl PollState {
    /// Before a blocking poll: arms the timer for a wait of `delay_ns`
    /// (> 0) that ends at nanotime `until`, unless it is already set for
    /// that deadline (an idle runtime with one far timer polls again and
    /// again until it); or disarms a still pending one for a wait without a
    /// deadline (< 0), which it would otherwise end for nothing. A failed
    /// `set` leaves epoll's millisecond timeout to end the wait.
    fn set_timer(&mut self, delay_ns: i64, until: i64) {
        let Some(t) = &self.timer else { return };
        if delay_ns > 0 {
            // `timer_at == until` with `until` still ahead: not fired yet.
            if self.timer_at != until {
                self.timer_at = if t.set(delay_ns).is_ok() { until } else { 0 };
            }
        } else if self.timer_at != 0 {
            if self.timer_at > crate::sys::time::nanotime() {
                let _ = t.set(0);
            }
            self.timer_at = 0;
        }
    }
}

/// One descriptor's poll state (module note).
struct PollDesc {
    rg: AtomicUsize,
    wg: AtomicUsize,
    /// Bumped on every close: stale events carry an older value.
    seq: AtomicU64,
    fd: AtomicI32,
}

/// Turns a wait slot to READY (`ioready`) or NIL (timeout), returning the
/// parked G found in it, if any (Go's netpollunblock).
fn unblock(slot: &AtomicUsize, ioready: bool) -> Option<&'static G> {
    let new = if ioready { READY } else { NIL };
    let mut old = slot.load(Ordering::Acquire);
    loop {
        if old == READY || (old == NIL && !ioready) {
            return None;
        }
        match slot.compare_exchange_weak(old, new, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => {
                if old > WAIT {
                    WAITERS.fetch_sub(1, Ordering::Relaxed);
                    // SAFETY: a slot above WAIT holds the address of a parked
                    // G (G records are never freed).
                    return Some(unsafe { &*(old as *const G) });
                }
                return None;
            }
            Err(cur) => old = cur,
        }
    }
}

/// A descriptor registered with the netpoller. Drop it before closing its
/// fd: dropping deregisters the fd.
pub(crate) struct PollFd {
    pd: &'static PollDesc,
}

impl std::fmt::Debug for PollFd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PollFd")
            .field("fd", &self.pd.fd.load(Ordering::Relaxed))
            .finish()
    }
}

impl PollFd {
    /// Registers `fd` (already non-blocking), edge-triggered, read + write.
    pub(crate) fn new(fd: RawFd) -> io::Result<PollFd> {
        crate::runtime::start();
        let p = POLLER
            .get()
            .ok_or_else(|| io::Error::other("the netpoller is not available"))?;
        let pd: &'static PollDesc = match CACHE.lock().ok().and_then(|mut c| c.pop()) {
            Some(pd) => pd,
            None => Box::leak(Box::new(PollDesc {
                rg: AtomicUsize::new(NIL),
                wg: AtomicUsize::new(NIL),
                seq: AtomicU64::new(0),
                fd: AtomicI32::new(-1),
            })),
        };
        pd.rg.store(NIL, Ordering::Relaxed);
        pd.wg.store(NIL, Ordering::Relaxed);
        pd.fd.store(fd, Ordering::Relaxed);
        let seq = pd.seq.load(Ordering::Relaxed) & 0x7fff;
        let token = Token(pd as *const PollDesc as usize | ((seq as usize) << SEQ_SHIFT));
        // The kernel orders this registration before any event it reports,
        // but TSan only sees that through one epoll fd, and we register
        // through a dup of the one `netpoll` waits on (`Registry::try_clone`).
        #[cfg(goroutine_sanitize = "thread")]
        crate::sys::tsan::release(pd);
        if let Err(e) = p.registry.register(
            &mut SourceFd(&fd),
            token,
            Interest::READABLE | Interest::WRITABLE,
        ) {
            pd.seq.fetch_add(1, Ordering::AcqRel);
            if let Ok(mut c) = CACHE.lock() {
                c.push(pd);
            }
            return Err(e);
        }
        Ok(PollFd { pd })
    }

    /// Waits until the fd may be writable; `Err(TimedOut)` once the fixed
    /// `deadline` has passed. A goroutine parks; a plain thread blocks in
    /// poll(2).
    pub(crate) fn wait_write(&self, deadline: Option<Instant>) -> io::Result<()> {
        let edge = self.wait(false, &|| deadline)?;
        match deadline {
            Some(d) if !edge && Instant::now() >= d => Err(timed_out()),
            _ => Ok(()),
        }
    }

    /// A handle that wakes this descriptor's waiters (see [`PollWake`]).
    pub(crate) fn waker(&self) -> PollWake {
        PollWake { pd: self.pd }
    }

    /// Waits once in one direction until an edge, the deadline `deadline()`
    /// or a [`PollWake::wake`]; true if an edge woke it. The caller
    /// re-checks its deadlines and retries its operation after every
    /// return (module note, "Re-arming a deadline").
    ///
    /// `deadline` is read after the slot is WAIT, with `SeqCst` (its
    /// setter stores with `SeqCst` and then wakes): either the setter's
    /// wake finds WAIT or a G, or this read sees the new deadline.
    pub(crate) fn wait(
        &self,
        read: bool,
        deadline: &dyn Fn() -> Option<Instant>,
    ) -> io::Result<bool> {
        if m::current_g().is_none() {
            return self.wait_thread(read, deadline());
        }
        let pd = self.pd;
        let slot: &'static AtomicUsize = if read { &pd.rg } else { &pd.wg };
        // An unconsumed edge: retry at once.
        if slot
            .compare_exchange(READY, NIL, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            return Ok(true);
        }
        if slot
            .compare_exchange(NIL, WAIT, Ordering::SeqCst, Ordering::Acquire)
            .is_err()
        {
            // READY arrived in between (WAIT or a G would mean two waiters
            // in one direction, which the net types never do).
            let cur = slot.swap(NIL, Ordering::AcqRel);
            if cur != READY {
                crate::runtime::throw("netpoll: two goroutines wait on one fd direction");
            }
            return Ok(true);
        }
        let deadline = deadline();
        if deadline.is_some_and(|d| Instant::now() >= d) {
            // Already past: do not park. An edge may have arrived since.
            return Ok(slot.swap(NIL, Ordering::AcqRel) == READY);
        }
        let timer = deadline.map(|d| {
            let t = Timer::new(TimerFn::Call(Box::new(move || {
                if let Some(g) = unblock(slot, false) {
                    park::ready(g);
                }
            })));
            t.start(crate::sys::time::to_nanotime(d), 0);
            t
        });
        // The park inlined into this frame (not generic): `g::switch`'s
        // note, "Returns after a switch".
        park::park_inline(m::Here::lookup(), WaitReason::IoWait, &mut |g| {
            // Counted before the commit publishes the G: whoever swaps it
            // out decrements.
            WAITERS.fetch_add(1, Ordering::Relaxed);
            let ok = slot
                .compare_exchange(
                    WAIT,
                    g as *const G as usize,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_ok();
            if !ok {
                WAITERS.fetch_sub(1, Ordering::Relaxed);
            }
            ok
        });
        // Woken by an edge (READY), a deadline or a wake (NIL), or the
        // commit failed.
        let old = slot.swap(NIL, Ordering::AcqRel);
        if old > WAIT {
            crate::runtime::throw("netpoll: woken while still parked");
        }
        if let Some(t) = timer {
            t.stop();
        }
        Ok(old == READY)
    }

    /// A plain thread's wait: poll(2) on the one descriptor (`sys::poll`).
    /// Nothing can re-arm it (a [`PollWake`] wakes goroutines only): it
    /// waits for an edge or the deadline it started with. Ok(true) on an
    /// edge.
    fn wait_thread(&self, read: bool, deadline: Option<Instant>) -> io::Result<bool> {
        let timeout = match deadline {
            None => -1,
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Ok(false);
                }
                left.as_millis().clamp(1, i32::MAX as u128) as i32
            }
        };
        crate::sys::poll::poll_one(self.pd.fd.load(Ordering::Relaxed), read, timeout)
    }
}

/// Wakes the goroutine parked on one descriptor in one direction, without
/// an edge, so that it re-reads its deadline (Go's netpollunblock from
/// `poll_runtime_pollSetDeadline`). Copyable and valid forever: descriptors
/// are never freed, and a wake that reaches a descriptor since reused by
/// another socket is a spurious wakeup there, which every waiter tolerates.
#[derive(Clone, Copy)]
pub(crate) struct PollWake {
    pd: &'static PollDesc,
}

impl std::fmt::Debug for PollWake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PollWake").finish_non_exhaustive()
    }
}

impl PollWake {
    /// Wakes the reader (`read`) or the writer, if one is parked or about
    /// to park; callable from any thread.
    pub(crate) fn wake(self, read: bool) {
        let slot = if read { &self.pd.rg } else { &self.pd.wg };
        // SeqCst: pairs with the waiter's NIL -> WAIT (see `PollFd::wait`).
        if slot.load(Ordering::SeqCst) == NIL {
            return;
        }
        if let Some(g) = unblock(slot, false) {
            park::ready(g);
        }
    }

    /// Whether two handles name the same descriptor.
    pub(crate) fn same(self, other: PollWake) -> bool {
        std::ptr::eq(self.pd, other.pd)
    }
}

impl Drop for PollFd {
    fn drop(&mut self) {
        let pd = self.pd;
        let fd = pd.fd.swap(-1, Ordering::Relaxed);
        if let Some(p) = POLLER.get() {
            let _ = p.registry.deregister(&mut SourceFd(&fd));
        }
        pd.seq.fetch_add(1, Ordering::AcqRel);
        // Nobody can be waiting: waiting borrows the owner of this PollFd.
        pd.rg.store(NIL, Ordering::Relaxed);
        pd.wg.store(NIL, Ordering::Relaxed);
        if let Ok(mut c) = CACHE.lock() {
            c.push(pd);
        }
    }
}

fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "i/o timeout")
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A break whose event a non-blocking poll takes must not leave
    /// `WAKE_SIG` set, or every later break would be dropped (the waker is
    /// edge-triggered: see `retake_break`).
    #[test]
    fn a_break_taken_by_a_non_blocking_poll_does_not_stick() {
        init().unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        netpoll_break();
        // Another test's runtime may poll too (the poller is per process):
        // whoever takes the event, the flag must come down.
        while WAKE_SIG.load(Ordering::Acquire) {
            assert!(
                Instant::now() < deadline,
                "WAKE_SIG still set: later breaks would be lost"
            );
            let _ = netpoll(0);
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
