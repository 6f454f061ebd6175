//! A synthetic trace generator for tests: a small discrete-event simulation
//! of a G/M/P scheduler that writes what a tracer would see.
//!
//! It is not the runtime and does not try to be faithful; it only has to
//! produce *valid* format-v2 traces that exercise every event type the way the
//! runtime will: several Ps and Ms, goroutines created, started, stopped
//! (yield, yield-local, preempted by sysmon), blocked for every wait reason and
//! unblocked by another goroutine, a timer or the netpoller, syscalls that
//! return fast or lose their P to a sysmon handoff, goroutines blocked in the
//! kernel outside the runtime whose P sysmon revokes (ProcRevoke; they get a P
//! back at their next runtime call), work stealing between Ps,
//! Ps going idle and being woken, and sysmon's RunqSample/GoCount samples.
//!
//! Every event is emitted at the simulation's current time, which never goes
//! back, so each M's events are in time order as the format requires; batches
//! are flushed per M when full, so they interleave in the file.

use crate::decode::TimedEvent;
use crate::format::{Event, GLOBAL_QUEUE};
use crate::writer::TraceWriter;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// What to simulate.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// GOMAXPROCS.
    pub procs: u32,
    /// Goroutines in total, the main goroutine included.
    pub goroutines: u32,
    pub seed: u64,
    /// Batch size of the writer (the runtime uses 64 KiB; small batches make
    /// more interleaving).
    pub batch_size: usize,
    /// Sysmon's sampling period in ns (the runtime samples every 10 ms; a
    /// short trace needs shorter periods to have samples at all).
    pub sample_every: u64,
    /// Every n-th goroutine gets a name (GoName).
    pub name_every: u32,
}

impl Default for Scenario {
    fn default() -> Scenario {
        Scenario {
            procs: 4,
            goroutines: 400,
            seed: 1,
            batch_size: 4096,
            sample_every: 100_000,
            name_every: 5,
        }
    }
}

/// The generated trace and what a reader should find in it.
pub struct Generated {
    /// The trace file's bytes.
    pub bytes: Vec<u8>,
    /// Every event written, in generation order (time order); `ts` relative to start.
    pub events: Vec<TimedEvent>,
    /// Goroutine run slices: GoStarts plus fast syscall exits (the goroutine
    /// keeps running on its P after a fast exit, which opens a new slice).
    pub slices: usize,
    pub goroutines: usize,
    /// Trailer end time, relative to start.
    pub end_ns: u64,
    pub start_ns: u64,
}

/// xorshift64*: deterministic and dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in lo..hi (hi > lo).
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo).max(1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum GState {
    Runnable,
    Running,
    Waiting,
    Syscall,
    Dead,
}

struct G {
    state: GState,
    /// Run segments left before the goroutine ends.
    segments: u32,
}

#[derive(Default)]
struct P {
    m: Option<u32>,
    cur: Option<u64>,
    run_since: u64,
    runq: VecDeque<u64>,
    /// The goroutine whose syscall holds this P.
    syscall: Option<u64>,
    /// Its goroutine (`cur`) is blocked in the kernel outside the runtime.
    kernel: bool,
    /// Bumped whenever pending ticks become stale.
    gen: u64,
    idle_spins: u32,
}

#[derive(Default)]
struct M {
    p: Option<u32>,
    parked: bool,
    in_syscall: bool,
}

#[derive(Clone, Copy)]
enum Wake {
    ByGoroutine,
    Timer(u32),
    Netpoll,
}

#[derive(Clone, Copy)]
enum Happening {
    Tick {
        p: u32,
        gen: u64,
    },
    Wake {
        g: u64,
        how: Wake,
    },
    SyscallDone {
        g: u64,
        m: u32,
        p: u32,
    },
    Retake {
        g: u64,
        m: u32,
        p: u32,
    },
    /// Sysmon looks at a P whose goroutine is blocked in the kernel.
    Revoke {
        g: u64,
        m: u32,
        p: u32,
    },
    /// The kernel returns to a goroutine blocked outside the runtime.
    KernelDone {
        g: u64,
        m: u32,
        p: u32,
    },
    Sysmon,
}

const SYSMON_M: u32 = 0;
const US: u64 = 1_000;

struct Sim {
    sc: Scenario,
    rng: Rng,
    now: u64,
    w: TraceWriter,
    events: Vec<TimedEvent>,
    queue: BinaryHeap<Reverse<(u64, u64)>>,
    pending: Vec<Happening>,
    gs: Vec<G>,
    ps: Vec<P>,
    ms: Vec<M>,
    global: VecDeque<u64>,
    to_spawn: u32,
    alive: u32,
    slices: usize,
    /// Goroutines runnable, running, waiting, in syscall.
    counts: [u64; 4],
}

impl Sim {
    fn emit(&mut self, m: u32, ev: Event) {
        self.w.event(m, self.now, &ev);
        self.events.push(TimedEvent {
            ts: self.now,
            m,
            ev,
            stamped: true,
        });
    }

    /// Changes g's state, keeping the GoCount tallies.
    fn set_state(&mut self, g: u64, s: GState) {
        let old = std::mem::replace(&mut self.gs[g as usize].state, s);
        for (st, d) in [(old, -1i64), (s, 1)] {
            let i = match st {
                GState::Runnable => 0,
                GState::Running => 1,
                GState::Waiting => 2,
                GState::Syscall => 3,
                GState::Dead => continue,
            };
            self.counts[i] = self.counts[i].wrapping_add_signed(d);
        }
    }

    fn at(&mut self, ts: u64, h: Happening) {
        let seq = self.pending.len() as u64;
        self.pending.push(h);
        self.queue.push(Reverse((ts, seq)));
    }

    fn tick_in(&mut self, p: u32, d: u64) {
        let gen = self.ps[p as usize].gen;
        self.at(self.now + d, Happening::Tick { p, gen });
    }

    fn pm(&self, p: u32) -> u32 {
        self.ps[p as usize].m.unwrap_or(SYSMON_M)
    }

    fn spawn(&mut self, parent: u64, p: u32) -> u64 {
        let g = self.gs.len() as u64;
        self.gs.push(G {
            state: GState::Runnable,
            segments: self.rng.range(1, 9) as u32,
        });
        self.alive += 1;
        self.counts[0] += 1;
        let m = self.pm(p);
        self.emit(
            m,
            Event::GoCreate {
                g,
                parent,
                p: p as u64,
            },
        );
        if g == 2 {
            // A name that needs escaping in HTML and JSON.
            self.emit(
                m,
                Event::GoName {
                    g,
                    name: "<script>\"quoted\" & ünïcode \\ </script>".into(),
                },
            );
        } else if g % u64::from(self.sc.name_every.max(1)) == 0 {
            let kinds = ["worker", "http-handler", "db-conn", "ticker", "fetcher"];
            let name = format!("{}-{}", kinds[(g % 5) as usize], g);
            self.emit(m, Event::GoName { g, name });
        }
        g
    }

    /// An M with no P that is not in a syscall, or a new one.
    fn idle_m(&mut self) -> (u32, bool) {
        for (i, m) in self.ms.iter().enumerate().skip(1) {
            if m.p.is_none() && !m.in_syscall && m.parked {
                return (i as u32, true);
            }
        }
        self.ms.push(M::default());
        ((self.ms.len() - 1) as u32, false)
    }

    /// Gives an idle P an M when there is work (Go's wakep).
    fn wake_idle_p(&mut self) {
        let Some(p) = (0..self.sc.procs)
            .find(|&p| self.ps[p as usize].m.is_none() && self.ps[p as usize].syscall.is_none())
        else {
            return;
        };
        self.start_p_on_new_m(p);
    }

    fn start_p_on_new_m(&mut self, p: u32) {
        let (m, was_parked) = self.idle_m();
        if was_parked {
            self.emit(m, Event::MWake);
        }
        self.ms[m as usize].parked = false;
        self.ms[m as usize].p = Some(p);
        self.ps[p as usize].m = Some(m);
        self.ps[p as usize].idle_spins = 0;
        self.emit(m, Event::ProcStart { p: p as u64 });
        self.ps[p as usize].gen += 1;
        let d = self.rng.range(US, 3 * US);
        self.tick_in(p, d);
    }

    fn stop_p(&mut self, p: u32) {
        let m = self.pm(p);
        self.emit(m, Event::ProcStop { p: p as u64 });
        self.emit(m, Event::MPark);
        self.ps[p as usize].m = None;
        self.ps[p as usize].gen += 1;
        self.ms[m as usize].p = None;
        self.ms[m as usize].parked = true;
    }

    fn start(&mut self, p: u32, g: u64) {
        let m = self.pm(p);
        self.emit(m, Event::GoStart { g, p: p as u64 });
        self.slices += 1;
        self.set_state(g, GState::Running);
        let ps = &mut self.ps[p as usize];
        ps.cur = Some(g);
        ps.run_since = self.now;
        ps.idle_spins = 0;
        ps.gen += 1;
        let d = self.rng.range(US, 40 * US);
        self.tick_in(p, d);
    }

    fn find_work(&mut self, p: u32) {
        let pi = p as usize;
        if let Some(g) = self.ps[pi].runq.pop_front() {
            return self.start(p, g);
        }
        if let Some(g) = self.global.pop_front() {
            return self.start(p, g);
        }
        let n = self.sc.procs;
        let off = self.rng.range(0, u64::from(n)) as u32;
        for i in 0..n {
            let v = (off + i) % n;
            let len = self.ps[v as usize].runq.len();
            if v != p && len >= 2 {
                let count = len / 2;
                let stolen: Vec<u64> = self.ps[v as usize].runq.drain(..count).collect();
                self.ps[pi].runq.extend(stolen);
                let m = self.pm(p);
                self.emit(
                    m,
                    Event::Steal {
                        thief_p: p as u64,
                        victim_p: v as u64,
                        count: count as u64,
                    },
                );
                let g = self.ps[pi].runq.pop_front().expect("stole at least one");
                return self.start(p, g);
            }
        }
        if self.alive == 0 || self.ps[pi].idle_spins >= 3 {
            self.stop_p(p);
        } else {
            self.ps[pi].idle_spins += 1;
            self.tick_in(p, 3 * US);
        }
    }

    /// The goroutine running on `p` reached the end of its run segment.
    fn decide(&mut self, p: u32, g: u64) {
        let pi = p as usize;
        let m = self.pm(p);
        if self.to_spawn > 0 && self.rng.chance(if g == 1 { 30 } else { 12 }) {
            self.to_spawn -= 1;
            let child = self.spawn(g, p);
            self.ps[pi].runq.push_front(child);
            self.wake_idle_p();
            let d = self.rng.range(US / 2, 5 * US);
            return self.tick_in(p, d);
        }
        let gs = &mut self.gs[g as usize];
        gs.segments = gs.segments.saturating_sub(1);
        if gs.segments == 0 && !(g == 1 && self.to_spawn > 0) {
            self.set_state(g, GState::Dead);
            self.alive -= 1;
            self.emit(m, Event::GoEnd { g, p: p as u64 });
            self.ps[pi].cur = None;
            return self.tick_in(p, US / 2);
        }
        let r = self.rng.range(0, 100);
        if r < 20 {
            self.emit(
                m,
                Event::GoStop {
                    g,
                    p: p as u64,
                    reason: 0,
                },
            );
            self.set_state(g, GState::Runnable);
            self.ps[pi].runq.push_back(g);
            self.ps[pi].cur = None;
            self.tick_in(p, US / 4);
        } else if r < 25 {
            self.emit(
                m,
                Event::GoStop {
                    g,
                    p: p as u64,
                    reason: 2,
                },
            );
            self.set_state(g, GState::Runnable);
            self.ps[pi].runq.push_back(g);
            self.ps[pi].cur = None;
            self.tick_in(p, US / 4);
        } else if r < 68 {
            let wait_reason = self.rng.range(1, 17);
            self.emit(
                m,
                Event::GoBlock {
                    g,
                    p: p as u64,
                    wait_reason,
                },
            );
            self.set_state(g, GState::Waiting);
            self.ps[pi].cur = None;
            let how = match wait_reason {
                15 => Wake::Timer(p),
                16 => Wake::Netpoll,
                _ => Wake::ByGoroutine,
            };
            let d = self.rng.range(2 * US, 300 * US);
            self.at(self.now + d, Happening::Wake { g, how });
            self.tick_in(p, US / 4);
        } else if r < 84 {
            self.emit(m, Event::SyscallEnter { g, p: p as u64 });
            self.set_state(g, GState::Syscall);
            self.ps[pi].cur = None;
            self.ps[pi].syscall = Some(g);
            self.ps[pi].gen += 1;
            self.ms[m as usize].in_syscall = true;
            if self.rng.chance(65) {
                let d = self.rng.range(US, 30 * US);
                self.at(self.now + d, Happening::SyscallDone { g, m, p });
            } else {
                let d = self.rng.range(150 * US, 800 * US);
                self.at(self.now + d, Happening::SyscallDone { g, m, p });
                self.at(self.now + 50 * US, Happening::Retake { g, m, p });
            }
        } else if r < 90 {
            // Blocks in the kernel outside the runtime (no event): sysmon
            // revokes the P if it lasts.
            self.ps[pi].kernel = true;
            self.ps[pi].gen += 1;
            self.ms[m as usize].in_syscall = true;
            let d = if self.rng.chance(30) {
                self.rng.range(US, 40 * US)
            } else {
                self.rng.range(100 * US, 600 * US)
            };
            self.at(self.now + d, Happening::KernelDone { g, m, p });
            self.at(self.now + 50 * US, Happening::Revoke { g, m, p });
        } else if r < 93 {
            // A long computation: sysmon will preempt it.
            let d = self.rng.range(300 * US, 900 * US);
            self.tick_in(p, d);
        } else {
            // Keeps computing a little longer (no event).
            let d = self.rng.range(US, 30 * US);
            self.tick_in(p, d);
        }
    }

    fn wake(&mut self, g: u64, how: Wake) {
        if self.gs[g as usize].state != GState::Waiting {
            return;
        }
        self.set_state(g, GState::Runnable);
        let with_m: Vec<u32> = (0..self.sc.procs)
            .filter(|&p| self.ps[p as usize].m.is_some())
            .collect();
        match how {
            Wake::ByGoroutine => {
                let running: Vec<u32> = (0..self.sc.procs)
                    .filter(|&p| self.ps[p as usize].cur.is_some() && !self.ps[p as usize].kernel)
                    .collect();
                if running.is_empty() {
                    self.emit(
                        SYSMON_M,
                        Event::GoUnblock {
                            g,
                            by_g: 0,
                            p: GLOBAL_QUEUE,
                        },
                    );
                    self.global.push_back(g);
                } else {
                    let p = running[self.rng.range(0, running.len() as u64) as usize];
                    let by_g = self.ps[p as usize].cur.unwrap_or(0);
                    let m = self.pm(p);
                    self.emit(
                        m,
                        Event::GoUnblock {
                            g,
                            by_g,
                            p: p as u64,
                        },
                    );
                    self.ps[p as usize].runq.push_front(g);
                }
            }
            Wake::Timer(p0) => {
                let p = if self.ps[p0 as usize].m.is_some() {
                    Some(p0)
                } else {
                    with_m.first().copied()
                };
                match p {
                    Some(p) => {
                        let m = self.pm(p);
                        self.emit(
                            m,
                            Event::TimerFire {
                                p: p as u64,
                                count: 1,
                            },
                        );
                        self.emit(
                            m,
                            Event::GoUnblock {
                                g,
                                by_g: 0,
                                p: p as u64,
                            },
                        );
                        self.ps[p as usize].runq.push_back(g);
                    }
                    None => {
                        self.emit(
                            SYSMON_M,
                            Event::TimerFire {
                                p: p0 as u64,
                                count: 1,
                            },
                        );
                        self.emit(
                            SYSMON_M,
                            Event::GoUnblock {
                                g,
                                by_g: 0,
                                p: GLOBAL_QUEUE,
                            },
                        );
                        self.global.push_back(g);
                    }
                }
            }
            Wake::Netpoll => {
                let m = match with_m.first() {
                    Some(&p) => self.pm(p),
                    None => SYSMON_M,
                };
                self.emit(m, Event::NetpollReady { count: 1 });
                self.emit(
                    m,
                    Event::GoUnblock {
                        g,
                        by_g: 0,
                        p: GLOBAL_QUEUE,
                    },
                );
                self.global.push_back(g);
            }
        }
        self.wake_idle_p();
    }

    fn syscall_done(&mut self, g: u64, m: u32, p: u32) {
        let pi = p as usize;
        self.ms[m as usize].in_syscall = false;
        if self.ps[pi].syscall == Some(g) && self.ps[pi].m == Some(m) {
            self.emit(
                m,
                Event::SyscallExit {
                    g,
                    p: p as u64,
                    fast: 1,
                },
            );
            self.slices += 1;
            self.set_state(g, GState::Running);
            let ps = &mut self.ps[pi];
            ps.syscall = None;
            ps.cur = Some(g);
            ps.run_since = self.now;
            ps.gen += 1;
            let d = self.rng.range(US, 20 * US);
            self.tick_in(p, d);
        } else {
            self.emit(
                m,
                Event::SyscallExit {
                    g,
                    p: p as u64,
                    fast: 0,
                },
            );
            self.set_state(g, GState::Runnable);
            self.global.push_back(g);
            self.emit(m, Event::MPark);
            self.ms[m as usize].parked = true;
            self.wake_idle_p();
        }
    }

    fn retake(&mut self, g: u64, m: u32, p: u32) {
        let pi = p as usize;
        if self.ps[pi].syscall != Some(g) || self.ps[pi].m != Some(m) {
            return;
        }
        self.emit(SYSMON_M, Event::SyscallHandoff { p: p as u64 });
        self.ps[pi].syscall = None;
        self.ps[pi].m = None;
        self.ps[pi].gen += 1;
        self.ms[m as usize].p = None;
        if !self.ps[pi].runq.is_empty() || !self.global.is_empty() {
            self.start_p_on_new_m(p);
        }
    }

    fn revoke(&mut self, g: u64, m: u32, p: u32) {
        let pi = p as usize;
        let ps = &self.ps[pi];
        if !ps.kernel || ps.m != Some(m) || ps.cur != Some(g) {
            return;
        }
        // nanosleep, read, futex, an unknown call, a number no table has.
        let nrs = [35, 0, 202, u64::MAX, 999];
        let syscall_nr = nrs[self.rng.range(0, nrs.len() as u64) as usize];
        self.emit(
            SYSMON_M,
            Event::ProcRevoke {
                g,
                p: p as u64,
                syscall_nr,
            },
        );
        self.set_state(g, GState::Syscall);
        let ps = &mut self.ps[pi];
        ps.kernel = false;
        ps.cur = None;
        ps.m = None;
        ps.gen += 1;
        self.ms[m as usize].p = None;
        if !self.ps[pi].runq.is_empty() || !self.global.is_empty() {
            // The handoff comes after the revocation (events of different
            // Ms at the same time have no order a reader can rely on).
            self.now += 100;
            self.start_p_on_new_m(p);
        }
    }

    /// The kernel returned to g, blocked outside the runtime on M m (which
    /// held P p when it blocked).
    fn kernel_done(&mut self, g: u64, m: u32, p: u32) {
        let pi = p as usize;
        self.ms[m as usize].in_syscall = false;
        if self.ps[pi].kernel && self.ps[pi].m == Some(m) && self.ps[pi].cur == Some(g) {
            // Not revoked: it goes on running on its P.
            self.ps[pi].kernel = false;
            self.ps[pi].gen += 1;
            let d = self.rng.range(US, 20 * US);
            return self.tick_in(p, d);
        }
        // Revoked: at its next runtime call it takes an idle P (the runtime
        // writes only the ProcStart; a SyscallExit before it is allowed
        // too), else it queues globally and its M parks.
        let idle = (0..self.sc.procs)
            .find(|&q| self.ps[q as usize].m.is_none() && self.ps[q as usize].syscall.is_none());
        match idle {
            Some(q) => {
                if self.rng.chance(50) {
                    self.emit(
                        m,
                        Event::SyscallExit {
                            g,
                            p: q as u64,
                            fast: 1,
                        },
                    );
                }
                self.emit(m, Event::ProcStart { p: q as u64 });
                self.slices += 1;
                self.set_state(g, GState::Running);
                self.ms[m as usize].p = Some(q);
                let ps = &mut self.ps[q as usize];
                ps.m = Some(m);
                ps.cur = Some(g);
                ps.run_since = self.now;
                ps.idle_spins = 0;
                ps.gen += 1;
                let d = self.rng.range(US, 20 * US);
                self.tick_in(q, d);
            }
            None => {
                self.emit(
                    m,
                    Event::SyscallExit {
                        g,
                        p: GLOBAL_QUEUE,
                        fast: 0,
                    },
                );
                self.set_state(g, GState::Runnable);
                self.global.push_back(g);
                self.emit(m, Event::MPark);
                self.ms[m as usize].parked = true;
            }
        }
    }

    fn sysmon(&mut self) {
        let counts = self.counts;
        for p in 0..self.sc.procs {
            let ev = Event::RunqSample {
                p: p as u64,
                local_len: self.ps[p as usize].runq.len() as u64,
                global_len: self.global.len() as u64,
            };
            self.emit(SYSMON_M, ev);
        }
        self.emit(
            SYSMON_M,
            Event::GoCount {
                runnable: counts[0],
                running: counts[1],
                waiting: counts[2],
                syscall: counts[3],
            },
        );
        for p in 0..self.sc.procs {
            let pi = p as usize;
            if let Some(g) = self.ps[pi].cur {
                if !self.ps[pi].kernel && self.now - self.ps[pi].run_since > 250 * US {
                    self.emit(SYSMON_M, Event::Preempt { g, p: p as u64 });
                    let m = self.pm(p);
                    self.emit(
                        m,
                        Event::GoStop {
                            g,
                            p: p as u64,
                            reason: 1,
                        },
                    );
                    self.set_state(g, GState::Runnable);
                    self.global.push_back(g);
                    self.ps[pi].cur = None;
                    self.ps[pi].gen += 1;
                    self.tick_in(p, US / 2);
                }
            }
        }
        if self.alive > 0 {
            let next = self.now + self.sc.sample_every;
            self.at(next, Happening::Sysmon);
        }
    }
}

/// Runs the scenario and returns the trace.
pub fn generate(sc: &Scenario) -> Generated {
    let start_ns = 1_000_000_007;
    let procs = sc.procs.max(1);
    let sc = Scenario {
        procs,
        goroutines: sc.goroutines.max(1),
        ..sc.clone()
    };
    let mut sim = Sim {
        rng: Rng(sc.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1),
        now: 0,
        w: TraceWriter::new(start_ns, 1_700_000_000_000_000_000, procs).batch_size(sc.batch_size),
        events: Vec::new(),
        queue: BinaryHeap::new(),
        pending: Vec::new(),
        // Goroutine 0 is "none"; ids start at 1 (the main goroutine).
        gs: vec![G {
            state: GState::Dead,
            segments: 0,
        }],
        ps: (0..procs).map(|_| P::default()).collect(),
        ms: vec![M::default()],
        global: VecDeque::new(),
        to_spawn: sc.goroutines.max(1) - 1,
        alive: 0,
        slices: 0,
        counts: [0; 4],
        sc,
    };
    // P0 runs on M1 with the main goroutine; the other Ps start idle.
    sim.now = 2 * US;
    sim.ms.push(M {
        p: Some(0),
        ..M::default()
    });
    sim.ps[0].m = Some(1);
    sim.emit(1, Event::ProcStart { p: 0 });
    let main = sim.spawn(0, 0);
    sim.emit(
        1,
        Event::GoName {
            g: main,
            name: "main".into(),
        },
    );
    sim.ps[0].runq.push_back(main);
    sim.tick_in(0, US);
    let first = sim.sc.sample_every;
    sim.at(first, Happening::Sysmon);

    while let Some(Reverse((ts, seq))) = sim.queue.pop() {
        sim.now = sim.now.max(ts);
        match sim.pending[seq as usize] {
            Happening::Tick { p, gen } => {
                let ps = &sim.ps[p as usize];
                if ps.gen != gen || ps.m.is_none() {
                    continue;
                }
                match ps.cur {
                    Some(g) => sim.decide(p, g),
                    None if ps.syscall.is_none() => sim.find_work(p),
                    None => {}
                }
            }
            Happening::Wake { g, how } => sim.wake(g, how),
            Happening::SyscallDone { g, m, p } => sim.syscall_done(g, m, p),
            Happening::Retake { g, m, p } => sim.retake(g, m, p),
            Happening::Revoke { g, m, p } => sim.revoke(g, m, p),
            Happening::KernelDone { g, m, p } => sim.kernel_done(g, m, p),
            Happening::Sysmon => sim.sysmon(),
        }
    }
    let end_ns = sim.now + 5 * US;
    Generated {
        goroutines: sim.gs.len() - 1,
        slices: sim.slices,
        events: sim.events,
        bytes: sim.w.finish(end_ns, 0),
        end_ns,
        start_ns,
    }
}
