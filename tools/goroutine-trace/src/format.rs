//! The execution trace format, version 4 (`docs/trace-format.md`): constants,
//! the event enum, and the names the tool prints for codes.
//!
//! This module is the single place that knows the numbering. The decoder
//! (`decode.rs`) and the writer (`writer.rs`) both go through [`Event::ty`],
//! [`Event::fields`] and [`Event::from_fields`], so a change of the table in the
//! document is a change here only.

/// `"GRTRACE\0"`, the first 8 bytes of every trace.
pub const MAGIC: [u8; 8] = *b"GRTRACE\0";
/// The only version this tool reads.
pub const VERSION: u32 = 4;
/// magic 8 + version 4 + flags 4 + start_ns 8 + unix_start_ns 8 + gomaxprocs 4 + reserved 4.
pub const HEADER_LEN: usize = 40;
/// Tag byte of a batch record.
pub const BATCH_TAG: u8 = 0xB7;
/// tag 1 + m_id 4 + payload_len 4.
pub const BATCH_HEADER_LEN: usize = 9;
/// Tag byte of the trailer record.
pub const TRAILER_TAG: u8 = 0xE0;
/// tag 1 + end_ns 8 + dropped_events 8.
pub const TRAILER_LEN: usize = 17;
/// The runtime's batch buffer size; the writer flushes at this size too.
pub const BATCH_SIZE: usize = 64 * 1024;
/// `GoUnblock.p` when the goroutine was queued on the global run queue.
pub const GLOBAL_QUEUE: u64 = u32::MAX as u64;
/// Highest event type number of version 1.
pub const MAX_EVENT_TYPE: u8 = 21;

/// The wire type of a GoStart that shares the timestamp and the P of the
/// slice end (GoEnd, GoBlock, GoStop) just before it in its batch: `u8 22 |
/// g` (no `ts_delta`). Decoded as a [`Event::GoStart`].
pub const GO_START_LOCAL: u8 = 22;

/// Set in an event's type byte (not a GoStartLocal's): the event has no
/// `ts_delta` and takes the timestamp of the batch's previous event, a
/// lower bound of its own (the runtime read no clock for it). Never on a
/// batch's first event.
pub const SAME_TIME: u8 = 0x80;

/// Set in the type byte of a GoCreate, GoStart, GoStop, GoBlock, GoUnblock
/// or GoEnd: its running goroutine's field ([`G_RUN`]) and its P field are
/// not written; they equal the batch's running and P registers
/// (docs/trace-format.md, "Implied fields").
pub const IMPLICIT: u8 = 0x40;
/// The bits of a type byte that are the event's type.
pub const TYPE_BITS: u8 = 0x3f;

/// The trace header, as written at the start of the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub version: u32,
    pub flags: u32,
    /// `nanotime` when tracing started; event times are relative to it.
    pub start_ns: u64,
    /// Wall clock at start (display only).
    pub unix_start_ns: u64,
    pub gomaxprocs: u32,
}

/// One event, without its timestamp. Field names follow the format table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    GoCreate {
        g: u64,
        parent: u64,
        p: u64,
    },
    GoStart {
        g: u64,
        p: u64,
    },
    GoStop {
        g: u64,
        p: u64,
        reason: u64,
    },
    GoBlock {
        g: u64,
        p: u64,
        wait_reason: u64,
    },
    GoUnblock {
        g: u64,
        by_g: u64,
        p: u64,
    },
    GoEnd {
        g: u64,
        p: u64,
    },
    Steal {
        thief_p: u64,
        victim_p: u64,
        count: u64,
    },
    ProcStart {
        p: u64,
    },
    ProcStop {
        p: u64,
    },
    MPark,
    MWake,
    SyscallEnter {
        g: u64,
        p: u64,
    },
    SyscallExit {
        g: u64,
        p: u64,
        fast: u64,
    },
    SyscallHandoff {
        p: u64,
    },
    Preempt {
        g: u64,
        p: u64,
    },
    TimerFire {
        p: u64,
        count: u64,
    },
    NetpollReady {
        count: u64,
    },
    GoName {
        g: u64,
        name: String,
    },
    RunqSample {
        p: u64,
        local_len: u64,
        global_len: u64,
    },
    GoCount {
        runnable: u64,
        running: u64,
        waiting: u64,
        syscall: u64,
    },
    /// Sysmon took `p` from the M running `g`, which was blocked in the
    /// kernel outside the runtime in system call `syscall_nr` (the field is
    /// the two's complement of a signed number: -1, `u64::MAX` on the wire,
    /// when unknown). See [`syscall_nr`] and [`syscall_name`].
    ProcRevoke {
        g: u64,
        p: u64,
        syscall_nr: u64,
    },
}

/// Names of event types 1..=21, indexed by type number (index 0 unused).
pub const EVENT_NAMES: [&str; MAX_EVENT_TYPE as usize + 1] = [
    "(none)",
    "GoCreate",
    "GoStart",
    "GoStop",
    "GoBlock",
    "GoUnblock",
    "GoEnd",
    "Steal",
    "ProcStart",
    "ProcStop",
    "MPark",
    "MWake",
    "SyscallEnter",
    "SyscallExit",
    "SyscallHandoff",
    "Preempt",
    "TimerFire",
    "NetpollReady",
    "GoName",
    "RunqSample",
    "GoCount",
    "ProcRevoke",
];

/// Number of uvarint fields of each event type (GoName: the `g` and `len`
/// fields; the name bytes follow). `None` for unknown types.
pub fn field_count(ty: u8) -> Option<usize> {
    Some(match ty {
        10 | 11 => 0,
        8 | 9 | 14 | 17 => 1,
        2 | 6 | 12 | 15 | 16 | 18 => 2,
        1 | 3 | 4 | 5 | 7 | 13 | 19 | 21 => 3,
        20 => 4,
        _ => return None,
    })
}

/// Goroutine id field kinds ([`g_kind`]; docs/trace-format.md, "Goroutine
/// ids"): predicted by the batch's "running" register, by its "other"
/// register, or a GoStart's (predicted by "other", stored in "running").
pub const G_RUN: u8 = 1;
pub const G_OTHER: u8 = 2;
pub const G_START: u8 = 3;

/// The kind of field `i` of an event of wire type `ty` (0: not a goroutine id).
pub fn g_kind(ty: u8, i: usize) -> u8 {
    match (ty, i) {
        (1 | 5, 0) => G_OTHER,
        (1 | 5, 1) => G_RUN,
        (2 | GO_START_LOCAL, 0) => G_START,
        (3 | 4 | 6 | 12 | 13, 0) => G_RUN,
        (15 | 18 | 21, 0) => G_OTHER,
        _ => 0,
    }
}

/// A batch's registers: the running goroutine, the other goroutine, the P
/// ([`REGS_START`] at its start).
pub type GRegs = [u64; 3];

/// The registers at a batch's start: no P yet (never a P's number).
pub const REGS_START: GRegs = [0, 0, u64::MAX];

/// The types that may carry [`IMPLICIT`].
pub fn may_imply(ty: u8) -> bool {
    matches!(ty, 1..=6)
}

/// Field `i` of an event of wire type `ty` is its P (of the types that may
/// carry [`IMPLICIT`]).
pub fn p_field(ty: u8, i: usize) -> bool {
    matches!((ty, i), (1 | 5, 2) | (2 | 3 | 4 | 6, 1))
}

/// Field `i` of type `ty` is left out when the event carries [`IMPLICIT`].
pub fn implied(ty: u8, i: usize) -> bool {
    may_imply(ty) && (g_kind(ty, i) == G_RUN || p_field(ty, i))
}

/// Whether an event of type `ty` with `fields` is written with
/// [`IMPLICIT`]: the runtime sets it whenever every field it leaves out
/// equals its register.
pub fn implicit(regs: &GRegs, ty: u8, fields: &[u64]) -> bool {
    may_imply(ty)
        && fields.iter().enumerate().all(|(i, &f)| {
            (g_kind(ty, i) != G_RUN || f == regs[0]) && (!p_field(ty, i) || f == regs[2])
        })
}

/// Field `i` (value `f`) of an event of type `ty` as written, not implied:
/// a goroutine id against its register, else the value (a P field becomes
/// the P register). Updates the registers.
pub fn encode_field(regs: &mut GRegs, ty: u8, i: usize, f: u64) -> u64 {
    match g_kind(ty, i) {
        0 => {
            if p_field(ty, i) {
                regs[2] = f;
            }
            f
        }
        k => g_encode(regs, k, f),
    }
}

/// The inverse of [`encode_field`]; `v` is `None` for an implied field.
pub fn decode_field(regs: &mut GRegs, ty: u8, i: usize, v: Option<u64>) -> u64 {
    match (v, g_kind(ty, i)) {
        (None, _) if p_field(ty, i) => regs[2],
        (None, _) => regs[0],
        (Some(v), 0) => {
            if p_field(ty, i) {
                regs[2] = v;
            }
            v
        }
        (Some(v), k) => g_decode(regs, k, v),
    }
}

/// Goroutine id `g` of a field of kind `k` (not 0), as written: the zig-zag
/// difference from its register. Updates the registers.
pub fn g_encode(regs: &mut GRegs, k: u8, g: u64) -> u64 {
    let d = g.wrapping_sub(regs[(k != G_RUN) as usize]);
    g_store(regs, k, g);
    zigzag(d)
}

/// The inverse of [`g_encode`].
pub fn g_decode(regs: &mut GRegs, k: u8, v: u64) -> u64 {
    let g = regs[(k != G_RUN) as usize].wrapping_add(unzigzag(v));
    g_store(regs, k, g);
    g
}

fn g_store(regs: &mut GRegs, k: u8, g: u64) {
    if k != G_OTHER {
        regs[0] = g;
    }
    if k == G_OTHER {
        regs[1] = g;
    }
}

/// Zig-zag encoding of a goroutine id's difference (wrapping).
pub fn zigzag(d: u64) -> u64 {
    let d = d as i64;
    ((d << 1) ^ (d >> 63)) as u64
}

/// The inverse of [`zigzag`] (wrapping).
pub fn unzigzag(v: u64) -> u64 {
    (v >> 1) ^ (v & 1).wrapping_neg()
}

impl Event {
    /// The type byte.
    pub fn ty(&self) -> u8 {
        match self {
            Event::GoCreate { .. } => 1,
            Event::GoStart { .. } => 2,
            Event::GoStop { .. } => 3,
            Event::GoBlock { .. } => 4,
            Event::GoUnblock { .. } => 5,
            Event::GoEnd { .. } => 6,
            Event::Steal { .. } => 7,
            Event::ProcStart { .. } => 8,
            Event::ProcStop { .. } => 9,
            Event::MPark => 10,
            Event::MWake => 11,
            Event::SyscallEnter { .. } => 12,
            Event::SyscallExit { .. } => 13,
            Event::SyscallHandoff { .. } => 14,
            Event::Preempt { .. } => 15,
            Event::TimerFire { .. } => 16,
            Event::NetpollReady { .. } => 17,
            Event::GoName { .. } => 18,
            Event::RunqSample { .. } => 19,
            Event::GoCount { .. } => 20,
            Event::ProcRevoke { .. } => 21,
        }
    }

    pub fn name(&self) -> &'static str {
        EVENT_NAMES[self.ty() as usize]
    }

    /// The uvarint fields in format order (for GoName: `g` and the byte length).
    pub fn fields(&self) -> ([u64; 4], usize) {
        let f = |a: &[u64]| {
            let mut out = [0; 4];
            out[..a.len()].copy_from_slice(a);
            (out, a.len())
        };
        match *self {
            Event::GoCreate { g, parent, p } => f(&[g, parent, p]),
            Event::GoStart { g, p } => f(&[g, p]),
            Event::GoStop { g, p, reason } => f(&[g, p, reason]),
            Event::GoBlock { g, p, wait_reason } => f(&[g, p, wait_reason]),
            Event::GoUnblock { g, by_g, p } => f(&[g, by_g, p]),
            Event::GoEnd { g, p } => f(&[g, p]),
            Event::Steal {
                thief_p,
                victim_p,
                count,
            } => f(&[thief_p, victim_p, count]),
            Event::ProcStart { p } => f(&[p]),
            Event::ProcStop { p } => f(&[p]),
            Event::MPark | Event::MWake => f(&[]),
            Event::SyscallEnter { g, p } => f(&[g, p]),
            Event::SyscallExit { g, p, fast } => f(&[g, p, fast]),
            Event::SyscallHandoff { p } => f(&[p]),
            Event::Preempt { g, p } => f(&[g, p]),
            Event::TimerFire { p, count } => f(&[p, count]),
            Event::NetpollReady { count } => f(&[count]),
            Event::GoName { g, ref name } => f(&[g, name.len() as u64]),
            Event::RunqSample {
                p,
                local_len,
                global_len,
            } => f(&[p, local_len, global_len]),
            Event::GoCount {
                runnable,
                running,
                waiting,
                syscall,
            } => f(&[runnable, running, waiting, syscall]),
            Event::ProcRevoke { g, p, syscall_nr } => f(&[g, p, syscall_nr]),
        }
    }

    /// Builds an event from its type and uvarint fields (`field_count(ty)` of
    /// them). GoName's name is passed separately. `None` for unknown types.
    pub fn from_fields(ty: u8, a: &[u64], name: Option<String>) -> Option<Event> {
        let x = |i: usize| a.get(i).copied().unwrap_or(0);
        Some(match ty {
            1 => Event::GoCreate {
                g: x(0),
                parent: x(1),
                p: x(2),
            },
            2 => Event::GoStart { g: x(0), p: x(1) },
            3 => Event::GoStop {
                g: x(0),
                p: x(1),
                reason: x(2),
            },
            4 => Event::GoBlock {
                g: x(0),
                p: x(1),
                wait_reason: x(2),
            },
            5 => Event::GoUnblock {
                g: x(0),
                by_g: x(1),
                p: x(2),
            },
            6 => Event::GoEnd { g: x(0), p: x(1) },
            7 => Event::Steal {
                thief_p: x(0),
                victim_p: x(1),
                count: x(2),
            },
            8 => Event::ProcStart { p: x(0) },
            9 => Event::ProcStop { p: x(0) },
            10 => Event::MPark,
            11 => Event::MWake,
            12 => Event::SyscallEnter { g: x(0), p: x(1) },
            13 => Event::SyscallExit {
                g: x(0),
                p: x(1),
                fast: x(2),
            },
            14 => Event::SyscallHandoff { p: x(0) },
            15 => Event::Preempt { g: x(0), p: x(1) },
            16 => Event::TimerFire {
                p: x(0),
                count: x(1),
            },
            17 => Event::NetpollReady { count: x(0) },
            18 => Event::GoName {
                g: x(0),
                name: name.unwrap_or_default(),
            },
            19 => Event::RunqSample {
                p: x(0),
                local_len: x(1),
                global_len: x(2),
            },
            20 => Event::GoCount {
                runnable: x(0),
                running: x(1),
                waiting: x(2),
                syscall: x(3),
            },
            21 => Event::ProcRevoke {
                g: x(0),
                p: x(1),
                syscall_nr: x(2),
            },
            _ => return None,
        })
    }
}

/// GoStop reasons.
pub fn stop_reason_name(reason: u64) -> &'static str {
    match reason {
        0 => "yield",
        1 => "preempted",
        2 => "yield-local",
        _ => "stopped",
    }
}

/// Wait reasons of GoBlock (the `WaitReason` discriminants of the runtime).
pub const WAIT_REASONS: [&str; 19] = [
    "none",
    "join",
    "chan receive",
    "chan send",
    "select",
    "select (no cases)",
    "chan receive (nil chan)",
    "chan send (nil chan)",
    "sync.Mutex.Lock",
    "sync.RWMutex.RLock",
    "sync.RWMutex.Lock",
    "sync.Cond.Wait",
    "sync.WaitGroup.Wait",
    "sync.Once.Do",
    "semacquire",
    "sleep",
    "IO wait",
    "block_on",
    "synctest.Wait",
];

/// The name of a wait reason; reasons appended after this tool was written
/// print as `wait reason N`.
pub fn wait_reason_name(r: u64) -> std::borrow::Cow<'static, str> {
    match WAIT_REASONS.get(r as usize) {
        Some(s) => (*s).into(),
        None => format!("wait reason {r}").into(),
    }
}

/// The system call number of a ProcRevoke as the runtime meant it: the wire
/// value is a signed number cast to u64 (None: -1, unknown).
pub fn syscall_nr(wire: u64) -> Option<i64> {
    match wire as i64 {
        n if n < 0 => None,
        n => Some(n),
    }
}

/// Linux system call numbers of the calls a goroutine typically blocks in,
/// for the architecture this tool was built for (the trace does not say
/// which architecture wrote it: it is assumed to be the same).
#[cfg(target_arch = "x86_64")]
const SYSCALLS: &[(i64, &str)] = &[
    (0, "read"),
    (1, "write"),
    (2, "open"),
    (7, "poll"),
    (17, "pread64"),
    (18, "pwrite64"),
    (19, "readv"),
    (20, "writev"),
    (23, "select"),
    (35, "nanosleep"),
    (42, "connect"),
    (43, "accept"),
    (44, "sendto"),
    (45, "recvfrom"),
    (46, "sendmsg"),
    (47, "recvmsg"),
    (61, "wait4"),
    (72, "fcntl"),
    (73, "flock"),
    (74, "fsync"),
    (16, "ioctl"),
    (202, "futex"),
    (230, "clock_nanosleep"),
    (232, "epoll_wait"),
    (247, "waitid"),
    (257, "openat"),
    (270, "pselect6"),
    (271, "ppoll"),
    (281, "epoll_pwait"),
    (288, "accept4"),
];
#[cfg(target_arch = "aarch64")]
const SYSCALLS: &[(i64, &str)] = &[
    (25, "fcntl"),
    (29, "ioctl"),
    (32, "flock"),
    (56, "openat"),
    (63, "read"),
    (64, "write"),
    (65, "readv"),
    (66, "writev"),
    (67, "pread64"),
    (68, "pwrite64"),
    (72, "pselect6"),
    (73, "ppoll"),
    (82, "fsync"),
    (95, "waitid"),
    (98, "futex"),
    (101, "nanosleep"),
    (115, "clock_nanosleep"),
    (202, "accept"),
    (203, "connect"),
    (206, "sendto"),
    (207, "recvfrom"),
    (211, "sendmsg"),
    (212, "recvmsg"),
    (22, "epoll_pwait"),
    (242, "accept4"),
    (260, "wait4"),
];
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const SYSCALLS: &[(i64, &str)] = &[];

/// The name of a system call number (see [`SYSCALLS`]), if this tool knows it.
pub fn syscall_name(nr: i64) -> Option<&'static str> {
    SYSCALLS.iter().find(|&&(n, _)| n == nr).map(|&(_, s)| s)
}

/// How a ProcRevoke's system call is shown: `nanosleep`, `syscall 999`, or
/// `unknown syscall` (wire value: see [`syscall_nr`]).
pub fn syscall_label(wire: u64) -> String {
    match syscall_nr(wire) {
        None => "unknown syscall".into(),
        Some(n) => match syscall_name(n) {
            Some(name) => name.into(),
            None => format!("syscall {n}"),
        },
    }
}
