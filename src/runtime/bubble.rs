//! synctest bubbles (Go 1.25's `testing/synctest`): groups of goroutines
//! with a fake clock of their own, which moves only when every goroutine
//! of the group is durably blocked. The public face is `crate::synctest`;
//! this is the runtime's half: membership, the clock, the bubble's timer
//! heap, and the check that advances the clock or reports a deadlock.
//!
//! # Membership
//! A goroutine belongs to at most one bubble, for its whole life. The root
//! joins itself ([`join_current`]) before running the test's body; a
//! goroutine spawned by a member, or by a bubble timer's function
//! (`time::after_func`) while the bubble's clock moves, joins the spawner's
//! bubble in `newproc`, before it is published on a run queue ([`inherit`]),
//! so no check can miss it. It leaves when it ends (`gdestroy`:
//! [`exited`]). Membership is a side table keyed by the G record's address
//! ([`MEMBERS`]), not a field of `G` (the record keeps its three cache
//! lines); the hot paths (spawn, park, exit) look at it only while some
//! bubble exists ([`ACTIVE`]): one relaxed load and a predictable branch
//! otherwise.
//!
//! # The check (Go's `maybeWakeLocked`)
//! Each time a member parks (after its `unlock` step made the park
//! final, on the scheduler's stack) and each time one exits, [`check`]
//! runs, serialized by the bubble's `advance` lock:
//! - no member left: the bubble is done; the caller of `synctest::test`
//!   is told;
//! - some member is running, runnable, in a system call, or parked in a
//!   wait that is not durable: nothing to do (that member's next park or
//!   exit checks again);
//! - every member durably blocked, and one of them in `synctest::wait`:
//!   that one is readied, the clock stays;
//! - else, a bubble timer pending: the clock jumps to the earliest one and
//!   every timer due then fires; a readied member ends the loop, else
//!   (a tick nobody receives) the clock jumps again;
//! - else: deadlock. The caller of `synctest::test` is told, with the dump
//!   of the members; they stay parked for ever (their records leak, as in
//!   Go).
//!
//! Invariant that makes "every member durably blocked" stable while the
//! check reads it: a durable wait can end only through a member (all of
//! them parked) or a bubble timer, fired here, under `advance`, or by a
//! running member that started it due ([`fire_due`]: not while every
//! member is blocked).
//! Using a bubble's channels or timers from outside the bubble is misuse;
//! the public types panic where they can tell (`time::Timer` from outside
//! its bubble, channels made in a bubble, a `WaitGroup` bound to it, a
//! `Condvar` notify that would wake a member: `crate::synctest`'s note).
//! Statuses are read under the `state` lock, which every member's check
//! takes after its own park's status store, so of two members parking at
//! once the second to lock sees the first parked.
//!
//! # Durable waits
//! `crate::synctest`'s module note has the table, with the reasons; here
//! it is [`durable`].
//!
//! # The clock
//! Virtual time is kept on `sys::time::nanotime`'s scale: a bubble's clock
//! starts at the real `nanotime` of its creation and only moves forward.
//! Its wall clock (`time::now`) is 2000-01-01 00:00:00 UTC plus the
//! virtual time elapsed, and its `Instant`s are the real `Instant` of its
//! creation plus the same: differences of either are virtual durations.
//!
//! # Real-time groups
//! A `#[goroutine::test]` without `synctest` runs its body as the root of
//! a *real-time group* (`Bubble::new_real`): the same membership, but no
//! clock of its own (its goroutines read the real one, their timers go on
//! the Ps' heaps, noted weakly in the group so it can tell whether one is
//! pending), no channel tagging, no `wait`. Its check only retires it
//! when its last member ends. Its deadlock is found by the test's thread,
//! which polls [`real_group_deadlock`]: every member durably blocked, no
//! timer of theirs pending, and no park or exit among them (the `epoch`)
//! over [`CONFIRM_POLLS`] polls in a row. Plain threads outside the
//! runtime may still wake a member (nothing forbids it here), which the
//! confirmation window (5 s) covers for the waits tests make.
//!
//! # Lock order
//! A bubble's `advance` lock is taken with no other lock held (on the
//! scheduler's stack, as a member parks, held through the park's unlock
//! step and the check after it ([`parking`]), or after an exit); under
//! it, the park's unlock step (a channel's or a timer's lock), the `state` lock
//! (short, with nothing under it but the membership table, a leaf), and
//! the bubble's timers fire (their locks, their channels' locks, the
//! scheduler's ready path) with `state` released.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use crate::g::{Status, WaitReason, G};
use crate::m;
use crate::p::timerheap::{Timer, Timers};
use std::sync::{Arc, Weak};

/// Live bubbles; while 0, the hooks do nothing.
static ACTIVE: AtomicUsize = AtomicUsize::new(0);
/// Live synctest bubbles (the fake-clock ones, not real-time groups);
/// while 0, channel operations and clock reads skip the bubble tables.
static VIRTUAL: AtomicUsize = AtomicUsize::new(0);
/// Bubble ids (Go numbers them from 1).
static NEXT_ID: AtomicU64 = AtomicU64::new(1);
/// Which bubble each member belongs to, by G address (module note).
static MEMBERS: Mutex<Option<HashMap<usize, &'static Bubble>>> = Mutex::new(None);

/// Channels made in a bubble: how many, and their bubble by address (the
/// `Chan` inside its `Arc`), so that an operation from outside the bubble
/// panics (`crate::synctest`'s note, "Misuse"). Untagged when the channel
/// is freed. While none is tagged, the check is one relaxed load.
static CHANS_TAGGED: AtomicUsize = AtomicUsize::new(0);
/// [`VIRTUAL`] plus [`CHANS_TAGGED`]: while 0, a channel operation's
/// check ([`check_chan`]) is this one relaxed load.
static CHAN_CHECKS: AtomicUsize = AtomicUsize::new(0);
static CHANS: Mutex<Option<HashMap<usize, u64>>> = Mutex::new(None);

thread_local! {
    /// The bubble whose timers this thread fires right now: goroutines
    /// that timer functions spawn join it.
    static FIRING: std::cell::Cell<Option<&'static Bubble>> = const { std::cell::Cell::new(None) };
}

/// Where a bubble's outcome goes: `synctest::test`'s, called once, on the
/// scheduler's stack with no lock held, so it must not block (it sends on
/// a channel with room). A function rather than a channel here: the
/// runtime does not name the layer above it.
pub(crate) type Done = Box<dyn FnOnce(Outcome) + Send>;

/// How a bubble ended, sent to the caller of `synctest::test`.
pub(crate) enum Outcome {
    /// Every member exited.
    Done,
    /// Every member is durably blocked and no timer is pending: the text
    /// is the report (headline and the members' dump).
    Deadlock(String),
}

/// One bubble. Leaked: a few hundred bytes a test, and `&'static` is what
/// the timer heap and the membership table need.
pub(crate) struct Bubble {
    id: u64,
    /// A synctest bubble (fake clock); false: a test's real-time group
    /// (module note, "Real-time groups").
    virt: bool,
    /// Bumped at every check (a member parked, exited): a real-time
    /// group's deadlock must hold across two polls with no change.
    epoch: AtomicU64,
    /// A real-time group's timers, to tell whether one is pending.
    real_timers: Mutex<Vec<Weak<Timer>>>,
    /// Virtual `nanotime` (module note, "The clock").
    now: AtomicI64,
    /// `now` when the bubble was made, and the real `Instant` then.
    start_ns: i64,
    start_instant: Instant,
    timers: Timers,
    advance: Mutex<()>,
    state: Mutex<State>,
}

struct State {
    members: Vec<&'static G>,
    /// The member in `synctest::wait`, if any.
    waiter: Option<&'static G>,
    /// Where the outcome goes; taken when sent.
    done: Option<Done>,
    /// Counted in [`ACTIVE`] (until its outcome is sent, or a real-time
    /// group's last member ends).
    live: bool,
    /// The root goroutine's id: once it has exited, the clock stops (Go's
    /// rule: a bubble whose root is gone and whose other goroutines are
    /// durably blocked is deadlocked, pending timers or not).
    root: u64,
    /// Members in a channel operation on a channel made outside the
    /// bubble (by G address): not durably blocked while it lasts.
    foreign: Vec<usize>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether any bubble exists (the hooks' one branch).
#[inline(always)]
pub(crate) fn active() -> bool {
    ACTIVE.load(Ordering::Relaxed) != 0
}

/// Whether a goroutine parked for `r` is durably blocked: it can be woken
/// only by another member or a bubble timer (`crate::synctest`'s table).
pub(crate) fn durable(r: WaitReason) -> bool {
    match r {
        WaitReason::ChanReceive
        | WaitReason::ChanSend
        | WaitReason::Select
        | WaitReason::SelectNoCases
        | WaitReason::ChanReceiveNilChan
        | WaitReason::ChanSendNilChan
        | WaitReason::SyncCondWait
        | WaitReason::SyncWaitGroupWait
        | WaitReason::Sleep
        | WaitReason::Join
        | WaitReason::SynctestWait => true,
        WaitReason::None
        | WaitReason::SyncMutexLock
        | WaitReason::SyncRWMutexRLock
        | WaitReason::SyncRWMutexLock
        | WaitReason::SyncOnceDo
        | WaitReason::Semacquire
        | WaitReason::IoWait
        | WaitReason::BlockOn => false,
    }
}

impl Bubble {
    /// A new bubble whose outcome goes to `done`.
    pub(crate) fn new(done: Done) -> &'static Bubble {
        Bubble::make(true, Some(done))
    }

    /// A test's real-time group (module note, "Real-time groups").
    pub(crate) fn new_real() -> &'static Bubble {
        Bubble::make(false, None)
    }

    fn make(virt: bool, done: Option<Done>) -> &'static Bubble {
        let now = crate::sys::time::nanotime();
        ACTIVE.fetch_add(1, Ordering::Relaxed);
        if virt {
            VIRTUAL.fetch_add(1, Ordering::Relaxed);
            CHAN_CHECKS.fetch_add(1, Ordering::Relaxed);
        }
        Box::leak(Box::new(Bubble {
            id: if virt {
                NEXT_ID.fetch_add(1, Ordering::Relaxed)
            } else {
                0
            },
            virt,
            epoch: AtomicU64::new(0),
            real_timers: Mutex::new(Vec::new()),
            now: AtomicI64::new(now),
            start_ns: now,
            start_instant: Instant::now(),
            timers: Timers::new(),
            advance: Mutex::new(()),
            state: Mutex::new(State {
                members: Vec::new(),
                waiter: None,
                done,
                live: true,
                root: 0,
                foreign: Vec::new(),
            }),
        }))
    }

    /// A synctest bubble (true) or a test's real-time group.
    pub(crate) fn is_virtual(&self) -> bool {
        self.virt
    }

    /// A real-time group's member started timer `t`.
    pub(crate) fn note_real_timer(&self, t: &Arc<Timer>) {
        let mut v = lock(&self.real_timers);
        if v.len() >= 64 {
            v.retain(|w| w.upgrade().is_some_and(|t| t.is_pending()));
        }
        v.push(Arc::downgrade(t));
    }

    /// Whether a real-time group's timer is pending (pruning the others).
    fn real_timer_pending(&self) -> bool {
        let mut v = lock(&self.real_timers);
        v.retain(|w| w.upgrade().is_some_and(|t| t.is_pending()));
        !v.is_empty()
    }

    /// The virtual `nanotime`.
    pub(crate) fn nanotime(&self) -> i64 {
        self.now.load(Ordering::Acquire)
    }

    /// Virtual time elapsed since the bubble began.
    pub(crate) fn elapsed(&self) -> Duration {
        Duration::from_nanos((self.nanotime() - self.start_ns).max(0) as u64)
    }

    /// The bubble's `Instant` now (module note, "The clock").
    pub(crate) fn instant(&self) -> Instant {
        self.start_instant + self.elapsed()
    }

    /// The bubble's wall clock: 2000-01-01 00:00:00 UTC plus the elapsed
    /// virtual time.
    pub(crate) fn system_time(&self) -> SystemTime {
        const Y2K: u64 = 946_684_800;
        SystemTime::UNIX_EPOCH + Duration::from_secs(Y2K) + self.elapsed()
    }

    /// The bubble's timer heap.
    pub(crate) fn timers(&'static self) -> &'static Timers {
        &self.timers
    }

    /// Makes `g` a member (before it can run or park).
    fn add(&'static self, g: &'static G) {
        lock(&self.state).members.push(g);
        lock(&MEMBERS)
            .get_or_insert_with(HashMap::new)
            .insert(g as *const G as usize, self);
    }
}

/// The bubble of goroutine `g`, if any.
#[inline]
pub(crate) fn of(g: &'static G) -> Option<&'static Bubble> {
    if !active() {
        return None;
    }
    lookup(g)
}

#[cold]
fn lookup(g: &'static G) -> Option<&'static Bubble> {
    lock(&MEMBERS)
        .as_ref()
        .and_then(|m| m.get(&(g as *const G as usize)).copied())
}

/// The bubble of the calling goroutine, or the one whose timers this
/// thread fires; None outside bubbles.
#[inline]
pub(crate) fn current() -> Option<&'static Bubble> {
    if !active() {
        return None;
    }
    current_slow()
}

#[cold]
fn current_slow() -> Option<&'static Bubble> {
    match m::current_g_checked() {
        Some(g) => lookup(g),
        None => FIRING.with(|f| f.get()),
    }
}

/// The calling goroutine's synctest bubble (not a real-time group).
#[inline]
pub(crate) fn current_virtual() -> Option<&'static Bubble> {
    if VIRTUAL.load(Ordering::Relaxed) == 0 {
        return None;
    }
    current().filter(|b| b.virt)
}

/// Whether any synctest bubble (not a real-time group) exists: the one
/// relaxed load that the `sync` types' bubble checks cost otherwise.
#[inline(always)]
pub(crate) fn virtual_active() -> bool {
    VIRTUAL.load(Ordering::Relaxed) != 0
}

/// Go's rule for `sync.Cond`: a goroutine of a synctest bubble may be
/// woken from a notify list only by a member of the same bubble. False if
/// the caller may not wake `g` (the caller panics with Go's message,
/// [`WAKE_FROM_OUTSIDE`]). Called only while [`virtual_active`].
#[cold]
pub(crate) fn may_wake(g: &'static G) -> bool {
    match lookup(g).filter(|b| b.virt) {
        None => true,
        Some(b) => current_virtual().is_some_and(|c| std::ptr::eq(c, b)),
    }
}

/// The panic of a notify that would wake a bubble's goroutine from outside
/// the bubble (Go's text).
pub(crate) const WAKE_FROM_OUTSIDE: &str =
    "semaphore wake of synctest goroutine from outside bubble";

/// A timer of bubble `b` was started due already (a zero duration:
/// `time::Timer::new(ZERO)`, `after_func(ZERO, ..)`, a reset to zero): it
/// fires now, on the caller's side, at the bubble's current time, as in
/// Go, rather than when the bubble next blocks. So a `select!` with
/// `default` on a zero timer's channel finds its value, and a zero
/// `after_func` runs while its creator keeps running.
///
/// The clock does not move here, so virtual times stay what they were
/// (the module note's determinism): whoever fires a due timer, it fires at
/// `now`. The caller is a member (running, so no check is moving the
/// clock), or the check itself (a timer function that starts a timer,
/// under `advance`); a heap entry fires once however many run the heap
/// (`p/timerheap.rs`), so racing the check's own `run_due` is harmless.
#[cold]
#[inline(never)]
pub(crate) fn fire_due(b: &'static Bubble) {
    let now = b.nanotime();
    let prev_bubble = FIRING.with(|f| f.replace(Some(b)));
    let prev_instant = crate::p::timerheap::replace_fire_instant(Some(b.instant()));
    b.timers.run_due::<super::timers::Sched>(now);
    crate::p::timerheap::replace_fire_instant(prev_instant);
    FIRING.with(|f| f.set(prev_bubble));
}

/// `nanotime`, or the calling goroutine's bubble's virtual one.
#[inline]
pub(crate) fn nanotime() -> i64 {
    match current_virtual() {
        Some(b) => b.nanotime(),
        None => crate::sys::time::nanotime(),
    }
}

/// `Instant::now`, or the bubble's.
#[inline]
pub(crate) fn instant_now() -> Instant {
    match current_virtual() {
        Some(b) => b.instant(),
        None => Instant::now(),
    }
}

/// The running goroutine joins `b` (the root of `synctest::test`, or of a
/// test's real-time group). A root spawned from a real-time group's member
/// (`synctest::test` inside a `#[goroutine::test]`) leaves that group.
pub(crate) fn join_current(b: &'static Bubble) {
    let g = m::current_g().expect("a bubble's root is a goroutine");
    if let Some(old) = lookup(g) {
        let mut st = lock(&old.state);
        if let Some(i) = st.members.iter().position(|m| std::ptr::eq(*m, g)) {
            st.members.swap_remove(i);
        }
    }
    if b.virt {
        lock(&b.state).root = g.id();
    }
    b.add(g);
}

/// `newproc`'s hook: a goroutine spawned from a bubble (by a member, or by
/// a bubble timer's function) joins it. `g` is not published yet.
#[inline(always)]
pub(crate) fn inherit(here: m::Here, g: &'static G) {
    if active() {
        inherit_slow(here, g)
    }
}

#[cold]
#[inline(never)]
fn inherit_slow(here: m::Here, g: &'static G) {
    let parent = match here.g() {
        Some(p) => lookup(p),
        None => FIRING.with(|f| f.get()),
    };
    if let Some(b) = parent {
        b.add(g);
    }
}

/// A member's park in progress: its bubble and the bubble's `advance`
/// lock, held from before the G's status becomes `Waiting` until the check
/// after its park's unlock step ([`parked`]).
pub(crate) struct Parking(Option<(&'static Bubble, MutexGuard<'static, ()>)>);

/// The scheduler's hook before a park's status change (on g0, no lock
/// held). Between `Waiting` and the end of the park's unlock step a G
/// looks durably blocked while what will wake it is not registered yet (a
/// sleep's timer starts in that step): a check made by another member's
/// park meanwhile would move the clock past the sleeper's deadline, or
/// call the bubble deadlocked. So a member parks holding its bubble's
/// `advance` lock, which every check takes; the lock order is the one
/// checks already keep (`advance`, then a timer's or a channel's lock).
#[inline(always)]
pub(crate) fn parking(g: &'static G) -> Parking {
    if active() {
        parking_slow(g)
    } else {
        Parking(None)
    }
}

#[cold]
#[inline(never)]
fn parking_slow(g: &'static G) -> Parking {
    Parking(lookup(g).map(|b| (b, lock(&b.advance))))
}

/// The scheduler's hook after a park became final (on g0): a member's
/// bubble is checked, under the lock [`parking`] took.
#[inline(always)]
pub(crate) fn parked(p: Parking) {
    if let Parking(Some((b, guard))) = p {
        check_locked(b, guard);
    }
}

/// `gdestroy`'s hook: a member left (on g0, no lock held).
#[inline(always)]
pub(crate) fn exited(g: &'static G) {
    if active() {
        exited_slow(g)
    }
}

#[cold]
#[inline(never)]
fn exited_slow(g: &'static G) {
    let key = g as *const G as usize;
    let Some(b) = lock(&MEMBERS).as_mut().and_then(|m| m.remove(&key)) else {
        return;
    };
    {
        let mut st = lock(&b.state);
        if let Some(i) = st.members.iter().position(|m| std::ptr::eq(*m, g)) {
            st.members.swap_remove(i);
        }
    }
    check(b);
}

/// Registers the calling member as `synctest::wait`'s waiter; the caller
/// then parks with `WaitReason::SynctestWait`. Errs outside a bubble, or if
/// another member is waiting already (Go's "wait already in progress").
pub(crate) fn set_waiter(g: &'static G) -> Result<&'static Bubble, &'static str> {
    let Some(b) = of(g).filter(|b| b.virt) else {
        return Err("synctest::wait called outside a synctest bubble");
    };
    let mut st = lock(&b.state);
    if st.waiter.is_some() {
        return Err("synctest::wait: wait already in progress");
    }
    st.waiter = Some(g);
    Ok(b)
}

/// How many clock jumps one check makes while no member wakes (timers
/// that fire for nobody: a ticker whose receiver waits elsewhere) before it
/// calls the bubble stuck.
const MAX_IDLE_JUMPS: usize = 1 << 20;

/// The check of the module note.
fn check(b: &'static Bubble) {
    check_locked(b, lock(&b.advance));
}

/// [`check`] with the bubble's `advance` lock held (`_adv`).
fn check_locked(b: &'static Bubble, _adv: MutexGuard<'static, ()>) {
    b.epoch.fetch_add(1, Ordering::Relaxed);
    if !b.virt {
        // A real-time group: only its end is noted here; its deadlock is
        // the waiting test's poll ([`real_group_deadlock`]).
        let mut st = lock(&b.state);
        if st.members.is_empty() && st.live {
            st.live = false;
            ACTIVE.fetch_sub(1, Ordering::Relaxed);
        }
        return;
    }
    for _ in 0..MAX_IDLE_JUMPS {
        let mut st = lock(&b.state);
        if st.done.is_none() {
            return;
        }
        if st.members.is_empty() {
            let tx = st.done.take();
            drop(st);
            finish(b, tx, Outcome::Done);
            return;
        }
        let all_blocked = st.members.iter().all(|g| {
            g.status() == Status::Waiting
                && durable(g.wait_reason())
                && !st.foreign.contains(&(*g as *const G as usize))
        });
        if !all_blocked {
            return;
        }
        if let Some(w) = st.waiter.take() {
            drop(st);
            super::park::ready(w);
            return;
        }
        if !st.members.iter().any(|g| g.id() == st.root) {
            let text = deadlock_report(
                b,
                &st.members,
                "main bubble goroutine has exited but blocked goroutines remain",
            );
            let tx = st.done.take();
            drop(st);
            finish(b, tx, Outcome::Deadlock(text));
            return;
        }
        let next = b.timers.next();
        if next == 0 {
            let text = deadlock_report(b, &st.members, "all goroutines in bubble are blocked");
            let tx = st.done.take();
            drop(st);
            finish(b, tx, Outcome::Deadlock(text));
            return;
        }
        drop(st);
        if next > b.now.load(Ordering::Relaxed) {
            b.now.store(next, Ordering::Release);
        }
        let instant = b.instant();
        FIRING.with(|f| f.set(Some(b)));
        crate::p::timerheap::set_fire_instant(Some(instant));
        b.timers.run_due::<super::timers::Sched>(next);
        crate::p::timerheap::set_fire_instant(None);
        FIRING.with(|f| f.set(None));
    }
    let st = lock(&b.state);
    let text = deadlock_report(
        b,
        &st.members,
        "bubble's timers keep firing and wake no goroutine",
    );
    drop(st);
    let tx = lock(&b.state).done.take();
    finish(b, tx, Outcome::Deadlock(text));
}

/// Sends the outcome (once) and retires the bubble from the hooks' count.
fn finish(b: &'static Bubble, tx: Option<Done>, outcome: Outcome) {
    let Some(tx) = tx else { return };
    {
        let mut st = lock(&b.state);
        if st.live {
            st.live = false;
            ACTIVE.fetch_sub(1, Ordering::Relaxed);
            VIRTUAL.fetch_sub(1, Ordering::Relaxed);
            CHAN_CHECKS.fetch_sub(1, Ordering::Relaxed);
        }
    }
    tx(outcome);
}

/// The report of a deadlocked bubble: a headline, then each member as the
/// process-wide report shows it, its header marked `(durable)` and with
/// the bubble's number.
fn deadlock_report(b: &Bubble, members: &[&'static G], what: &str) -> String {
    use crate::traceback::Level;
    let level = crate::traceback::level(Level::All).max(Level::All);
    // Every member is parked and can be woken only by another member or a
    // bubble timer (module note), and the `state` lock is held: their
    // stacks are pinned.
    let gs = crate::traceback::collect_these(members);
    let mut out = format!("deadlock: {what}\n\n");
    out.push_str(&super::dump::render_bubble(
        &gs,
        level,
        b.virt.then_some(b.id),
    ));
    out
}

/// How many polls in a row must find a real-time group deadlocked, with
/// nothing changed, before it is reported: 5 s of polls. A plain thread
/// (or a goroutine of another group) may still wake a member, and nothing
/// tells the runtime it will; the window is what a test's thread may take
/// to do so before the test is called deadlocked. Long enough for the
/// waits tests make on a loaded machine, short enough that a deadlocked
/// test fails in seconds instead of hanging.
pub(crate) const CONFIRM_POLLS: u32 = 20;

/// A real-time group's deadlock poll: the report if every member is
/// durably blocked and none of its timers is pending, with nothing changed
/// over [`CONFIRM_POLLS`] polls in a row (`seen`: the epoch seen and how
/// many polls saw it, updated here). None otherwise.
pub(crate) fn real_group_deadlock(
    b: &'static Bubble,
    seen: &mut Option<(u64, u32)>,
) -> Option<String> {
    let _adv = lock(&b.advance);
    let st = lock(&b.state);
    let epoch = b.epoch.load(Ordering::Relaxed);
    let dead = !st.members.is_empty()
        && st
            .members
            .iter()
            .all(|g| g.status() == Status::Waiting && durable(g.wait_reason()))
        && !b.real_timer_pending();
    if !dead {
        *seen = None;
        return None;
    }
    let n = match *seen {
        Some((e, n)) if e == epoch => n + 1,
        _ => 1,
    };
    *seen = Some((epoch, n));
    if n < CONFIRM_POLLS {
        return None;
    }
    Some(deadlock_report(
        b,
        &st.members,
        "all goroutines of the test are asleep",
    ))
}

/// A channel was made at `addr`: if the caller is in a bubble, the channel
/// belongs to it.
#[inline]
pub(crate) fn tag_chan(addr: usize) {
    if let Some(b) = current_virtual() {
        lock(&CHANS)
            .get_or_insert_with(HashMap::new)
            .insert(addr, b.id);
        CHANS_TAGGED.fetch_add(1, Ordering::Relaxed);
        CHAN_CHECKS.fetch_add(1, Ordering::Relaxed);
    }
}

/// The channel at `addr` is freed.
#[inline]
pub(crate) fn untag_chan(addr: usize) {
    if CHANS_TAGGED.load(Ordering::Relaxed) != 0 {
        untag_slow(addr)
    }
}

#[cold]
fn untag_slow(addr: usize) {
    if lock(&CHANS)
        .as_mut()
        .and_then(|m| m.remove(&addr))
        .is_some()
    {
        CHANS_TAGGED.fetch_sub(1, Ordering::Relaxed);
        CHAN_CHECKS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Whether channel operations must be checked ([`check_chan`],
/// [`chan_op_done`]): some channel is tagged or some virtual bubble lives.
/// A blocking send or receive tests this once and takes an out-of-line
/// path with both checks when it is true, so that outside bubbles its
/// body stays small enough to inline into its caller.
#[inline(always)]
pub(crate) fn chan_checks_on() -> bool {
    CHAN_CHECKS.load(Ordering::Relaxed) != 0
}

/// Panics (Go's message: `op` is `send on`, `receive on`, `close of`) if
/// the channel at `addr` belongs to a bubble the caller is not in. A
/// bubble's member about to block (`may_block`) on a channel made outside
/// it is marked as not durably blocked until [`chan_op_done`].
#[inline]
pub(crate) fn check_chan(addr: usize, op: &str, may_block: bool) {
    if CHAN_CHECKS.load(Ordering::Relaxed) != 0 {
        check_chan_slow(addr, op, may_block)
    }
}

#[cold]
#[inline(never)]
fn check_chan_slow(addr: usize, op: &str, may_block: bool) {
    let owner = lock(&CHANS).as_ref().and_then(|m| m.get(&addr).copied());
    let here = current_virtual();
    match (owner, here) {
        (Some(o), h) if h.map(|b| b.id) != Some(o) => {
            panic!("{op} synctest channel from outside bubble")
        }
        (None, Some(b)) if may_block => mark_not_durable(b),
        _ => {}
    }
}

/// Marks the calling member of `b` as not durably blocked until
/// [`chan_op_done`]: it is about to wait on something made outside `b`.
fn mark_not_durable(b: &'static Bubble) {
    if let Some(g) = m::current_g_checked() {
        let key = g as *const G as usize;
        let mut st = lock(&b.state);
        if !st.foreign.contains(&key) {
            st.foreign.push(key);
        }
    }
}

/// The calling goroutine is about to wait on an object that binds it to
/// no bubble, or to another one (a `WaitGroup` whose count was added
/// outside its bubble: `sync/waitgroup.rs`): if it is a synctest
/// bubble's member, that wait is not durable until [`chan_op_done`].
/// True if it was marked.
#[cold]
pub(crate) fn not_durable_begin() -> bool {
    match current_virtual() {
        Some(b) => {
            mark_not_durable(b);
            true
        }
        None => false,
    }
}

/// A channel operation (or `select!`) of the calling goroutine ended, or
/// a wait marked by [`not_durable_begin`]: it no longer waits on
/// something made outside its bubble.
#[inline]
pub(crate) fn chan_op_done() {
    if VIRTUAL.load(Ordering::Relaxed) != 0 {
        chan_op_done_slow()
    }
}

#[cold]
#[inline(never)]
fn chan_op_done_slow() {
    let Some(g) = m::current_g_checked() else {
        return;
    };
    if let Some(b) = lookup(g).filter(|b| b.virt) {
        let key = g as *const G as usize;
        let mut st = lock(&b.state);
        if let Some(i) = st.foreign.iter().position(|k| *k == key) {
            st.foreign.swap_remove(i);
        }
    }
}

/// Whether the channel at `addr` was made in a bubble (a timer kit made
/// there is not given to a P's cache).
pub(crate) fn chan_is_tagged(addr: usize) -> bool {
    CHANS_TAGGED.load(Ordering::Relaxed) != 0
        && lock(&CHANS).as_ref().is_some_and(|m| m.contains_key(&addr))
}

/// Panics if a timer of bubble `owner` is stopped or reset (`op`: `stop
/// of`, `reset of`) from outside it (Go's messages). A timer made outside
/// every bubble may be used anywhere.
#[inline]
pub(crate) fn check_timer(owner: Option<u64>, op: &str) {
    if let Some(o) = owner {
        if current_virtual().map(|b| b.id) != Some(o) {
            panic!("{op} synctest timer from outside bubble");
        }
    }
}

/// The calling goroutine's bubble's number, if any.
#[inline]
pub(crate) fn current_id() -> Option<u64> {
    current_virtual().map(|b| b.id)
}
