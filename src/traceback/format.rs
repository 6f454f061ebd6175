//! Symbolisation (cached per address) and Go's two text forms: `debug=2`
//! (every goroutine, frames with `\tfile:line`) and pprof's `debug=1`
//! (identical stacks folded, with their count, largest first).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use super::{GInfo, Level, NoStack};
use crate::g::{Status, WaitReason};

/// One symbolised (possibly inlined) frame.
#[derive(Clone, Debug)]
pub(crate) struct Sym {
    pub(crate) name: String,
    pub(crate) file: Option<String>,
    pub(crate) line: Option<u32>,
    /// Offset from the function's start (outermost frame of an inline group).
    pub(crate) offset: Option<usize>,
    pub(crate) internal: bool,
}

/// Symbols by return address (module note of `traceback`: cached per
/// address, for the life of the process).
static CACHE: Mutex<Option<HashMap<usize, Arc<[Sym]>>>> = Mutex::new(None);

/// The frames (innermost first, inlined ones expanded) at return address
/// `addr`.
pub(crate) fn symbolise(addr: usize) -> Arc<[Sym]> {
    if let Some(s) = CACHE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashMap::new)
        .get(&addr)
    {
        return s.clone();
    }
    let mut syms: Vec<Sym> = Vec::new();
    backtrace::resolve(addr as *mut std::ffi::c_void, |s| {
        let name = s
            .name()
            .map(|n| format!("{n:#}"))
            .unwrap_or_else(|| "?".to_string());
        // backtrace's gimli symboliser reports the queried address, not the
        // function's start: no `+0x..` offsets.
        let offset = None;
        let internal = is_internal(&name);
        syms.push(Sym {
            name,
            file: s.filename().map(|f| f.display().to_string()),
            line: s.lineno(),
            offset,
            internal,
        });
    });
    if syms.is_empty() {
        syms.push(Sym {
            name: "?".to_string(),
            file: None,
            line: None,
            offset: None,
            internal: false,
        });
    }
    let syms: Arc<[Sym]> = syms.into();
    CACHE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashMap::new)
        .insert(addr, syms.clone());
    syms
}

/// The line a dump ends with when none of its frames has a file:line
/// ([`lacks_line_tables`]): Cargo's default release profile keeps no line
/// tables (`debug = 0`), so every location would print as `?` without a
/// word on why.
pub(crate) const LINE_TABLES_HINT: &str = "note: no frame has a file:line: this binary has no \
     line tables; add `debug = \"limited\"` under `[profile.release]` in Cargo.toml \
     (and keep its symbols: no `strip = true`)\n";

/// Whether the frames of `gs` show no file:line at all (and there are
/// frames): the binary was built without line tables. Any frame counts,
/// shown or hidden: with line tables the runtime's own frames have them.
pub(crate) fn lacks_line_tables(gs: &[GInfo]) -> bool {
    let mut frames = 0;
    for g in gs {
        let pcs = g.pcs.as_deref().unwrap_or(&[]);
        for s in pcs.iter().flat_map(|&pc| symbolise(pc).to_vec()) {
            if s.file.is_some() && s.line.is_some() {
                return false;
            }
            frames += 1;
        }
    }
    frames > 0
}

/// Frames of the runtime itself, hidden unless `GOTRACEBACK=system`.
pub(crate) fn is_internal(name: &str) -> bool {
    const PREFIXES: [&str; 16] = [
        "stack_init_trampoline",
        "__rustc::",
        "goroutine::",
        "corosensei::",
        "backtrace::",
        "std::panicking::",
        "std::panic::",
        "std::rt::",
        "std::sys::",
        "std::thread::",
        "core::ops::function::",
        "core::panic::",
        "alloc::boxed::Box<F,A> as core::ops::function::",
        "alloc::boxed::Box<F, A> as core::ops::function::",
        "__rust_",
        "rust_begin_unwind",
    ];
    // `<&goroutine::net::TcpStream as std::io::Read>::read` is the
    // runtime's too.
    let n = name
        .trim_start_matches(['<', '&'])
        .trim_start_matches("mut ");
    PREFIXES.iter().any(|p| n.starts_with(p))
}

/// Go's status in brackets: `chan receive`, `running`, ...
pub(crate) fn status_str(status: Status, reason: WaitReason) -> &'static str {
    match status {
        Status::Runnable => "runnable",
        Status::Running => "running",
        Status::Syscall => "syscall",
        Status::Waiting if reason != WaitReason::None => reason.as_str(),
        Status::Waiting => "waiting",
        Status::Idle => "idle",
        Status::Dead => "dead",
    }
}

/// Frames of the standard library.
fn is_std(name: &str) -> bool {
    const STD: [&str; 3] = ["core::", "std::", "alloc::"];
    let n = name.trim_start_matches('<');
    // `<T as Trait>::f`: the standard library's when both the trait and
    // the type are (a primitive, or a std path): `<usize as
    // core::slice::index::SliceIndex<[T]>>::index` is, `<app::Foo as
    // core::fmt::Display>::fmt` is not.
    // An unqualified name (`usize`, `Iterator` in a short form) counts as
    // the standard library's.
    let std_path = |p: &str| {
        let head = p.split(['<', '>']).next().unwrap_or(p);
        !head.contains("::") || STD.iter().any(|s| p.starts_with(s))
    };
    if let Some((ty, rest)) = n.split_once(" as ") {
        return std_path(ty.trim_start_matches(['&', '*', '[', '('])) && std_path(rest);
    }
    STD.iter().any(|p| n.starts_with(p))
}

/// A panic's frames (`pcs`, innermost first, as the panic hook captured
/// them) in the form of std's `RUST_BACKTRACE` output: `stack backtrace:`,
/// then `  N: name` with `at file:line` under it. Short (`full` false):
/// from the first frame outside the panic machinery, the standard library
/// and the runtime, without the runtime's frames; full: every frame, with
/// its address.
pub(crate) fn rust_backtrace(pcs: &[usize], full: bool) -> String {
    let mut out = String::from("stack backtrace:\n");
    let mut n = 0;
    let mut leading = true;
    for &pc in pcs {
        for s in symbolise(pc).iter() {
            if !full {
                if s.internal || (leading && is_std(&s.name)) {
                    continue;
                }
                leading = false;
            }
            if full {
                let _ = writeln!(out, "{n:>4}: {pc:#018x} - {}", s.name);
            } else {
                let _ = writeln!(out, "{n:>4}: {}", s.name);
            }
            if let (Some(f), Some(l)) = (&s.file, s.line) {
                let _ = writeln!(out, "             at {f}:{l}");
            }
            n += 1;
        }
    }
    if !full {
        out.push_str(
            "note: Some details are omitted, run with `RUST_BACKTRACE=full` for a verbose backtrace.\n",
        );
    }
    out
}

/// The visible frames of `pcs` (innermost first). Below `System`, the
/// runtime's frames are hidden, and so are the standard library's frames
/// innermost of the first user frame (the runtime's own callees).
pub(crate) fn visible_frames(pcs: &[usize], level: Level) -> Vec<(usize, Sym)> {
    let mut out = Vec::new();
    let mut leading = true;
    for &pc in pcs {
        for s in symbolise(pc).iter() {
            if level >= Level::System {
                out.push((pc, s.clone()));
                continue;
            }
            if s.internal || (leading && is_std(&s.name)) {
                continue;
            }
            leading = false;
            out.push((pc, s.clone()));
        }
    }
    out
}

/// Appends the frames and the spawn site of `g` in `debug=2` form.
pub(crate) fn write_frames(out: &mut String, g: &GInfo, level: Level) {
    match &g.pcs {
        Ok(pcs) => {
            for (pc, s) in visible_frames(pcs, level) {
                let _ = writeln!(out, "{}(...)", s.name);
                match (&s.file, s.line) {
                    (Some(f), Some(l)) => {
                        let _ = write!(out, "\t{f}:{l}");
                    }
                    (Some(f), None) => {
                        let _ = write!(out, "\t{f}");
                    }
                    // Not resolved (no debug info, or no descriptor left to
                    // open the binary with): the return address at least.
                    _ => {
                        let _ = write!(out, "\t? pc={pc:#x}");
                    }
                }
                if let Some(o) = s.offset {
                    let _ = write!(out, " +{o:#x}");
                }
                out.push('\n');
            }
        }
        Err(NoStack::Running) => {
            out.push_str("\tgoroutine running on other thread; stack unavailable\n")
        }
        Err(NoStack::Blocked) => {
            out.push_str("\tgoroutine blocked on other thread; stack unavailable\n")
        }
        Err(NoStack::NotStarted) => {}
        Err(NoStack::NotStopped) => {
            out.push_str("\tstack unavailable (the world was not stopped)\n")
        }
        Err(NoStack::Unsupported) => {
            out.push_str("\tstack unavailable (no unwinder for this platform)\n")
        }
    }
    write_site(out, g);
}

fn write_site(out: &mut String, g: &GInfo) {
    if g.spawn.pc == 0 {
        return;
    }
    let creator = creator(g.spawn.pc);
    let _ = write!(out, "created by {}", creator.name);
    if g.spawn.parent != 0 {
        let _ = write!(out, " in goroutine {}", g.spawn.parent);
    }
    out.push_str("\n\t");
    write_file_line(out, &creator);
    out.push('\n');
}

fn write_file_line(out: &mut String, s: &Sym) {
    match (&s.file, s.line) {
        (Some(f), Some(l)) => {
            let _ = write!(out, "{f}:{l}");
        }
        (Some(f), None) => out.push_str(f),
        _ => out.push('?'),
    }
}

/// The spawning function and the line of the spawn, from the address
/// recorded inside the inlined `go` (module note of `traceback`). The
/// inline chain at that address runs from `go`'s own callees, through
/// `go` (and `run`), out to the spawning function, whose line is the call
/// of `go`: take the first frame outside the runtime and std after `go`.
pub(crate) fn creator(pc: usize) -> Sym {
    // `+ 1`: `symbolise` takes return-address-like values.
    let syms = symbolise(pc + 1);
    let from = syms
        .iter()
        .position(|s| {
            s.name
                .trim_start_matches('<')
                .starts_with("goroutine::spawn::")
        })
        .map_or(0, |i| i + 1);
    let at = syms
        .iter()
        .skip(from)
        .position(|s| !s.internal && !is_std(&s.name))
        .map_or(syms.len() - 1, |i| i + from);
    syms[at].clone()
}

/// The `goroutine 17 [chan receive, 3 minutes]:` line (without newline);
/// `now` on the coarse clock's scale.
pub(crate) fn header(out: &mut String, g: &GInfo, now: u32) {
    let _ = write!(
        out,
        "goroutine {} [{}",
        g.id,
        status_str(g.status, g.reason)
    );
    if g.status == Status::Waiting && g.waitsince != 0 {
        let minutes = now.wrapping_sub(g.waitsince) / 60_000;
        if minutes >= 1 {
            let _ = write!(out, ", {minutes} minutes");
        }
    }
    if g.locked {
        out.push_str(", locked to thread");
    }
    out.push_str("]:\n");
}

/// The header of a goroutine whose thread is blocked in system call `nr`
/// outside the runtime (a plain `std` call: `runtime::retake`'s blocked
/// threads), as `goroutine 7 [syscall, blocked outside the runtime:
/// nanosleep]:`.
pub(crate) fn header_blocked(out: &mut String, g: &GInfo, nr: i64) {
    let _ = write!(
        out,
        "goroutine {} [syscall, blocked outside the runtime: ",
        g.id
    );
    match crate::sys::procfs::syscall_name(nr) {
        Some(name) => out.push_str(name),
        None => {
            let _ = write!(out, "system call {nr}");
        }
    }
    out.push_str("]:\n");
}

/// pprof's `debug=1` form of `gs`.
pub(crate) fn grouped(gs: &[GInfo], level: Level) -> String {
    type Key<'a> = (&'static str, &'a [usize], usize);
    let mut groups: HashMap<Key<'_>, usize> = HashMap::new();
    let mut order: Vec<Key<'_>> = Vec::new();
    const EMPTY: &[usize] = &[];
    for g in gs {
        let pcs: &[usize] = g.pcs.as_deref().unwrap_or(EMPTY);
        let key = (status_str(g.status, g.reason), pcs, g.spawn.pc);
        let n = groups.entry(key).or_insert(0);
        if *n == 0 {
            order.push(key);
        }
        *n += 1;
    }
    // Largest first; ties in first-seen order (goroutine id order).
    let mut ranked: Vec<(usize, usize)> = order
        .iter()
        .enumerate()
        .map(|(i, k)| (groups[k], i))
        .collect();
    ranked.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut out = String::new();
    let _ = writeln!(out, "goroutine profile: total {}", gs.len());
    for (count, i) in ranked {
        let (status, pcs, spawn_pc) = order[i];
        let _ = write!(out, "{count} @");
        for pc in pcs {
            let _ = write!(out, " {pc:#x}");
        }
        let _ = writeln!(out, "\n# [{status}]");
        for (pc, s) in visible_frames(pcs, level) {
            let _ = write!(out, "#\t{:#x}\t{}", pc - 1, s.name);
            if let Some(o) = s.offset {
                let _ = write!(out, "+{o:#x}");
            }
            match (&s.file, s.line) {
                (Some(f), Some(l)) => {
                    let _ = writeln!(out, "\t{f}:{l}");
                }
                _ => out.push('\n'),
            }
        }
        if spawn_pc != 0 {
            let c = creator(spawn_pc);
            let _ = write!(out, "#\tcreated by {}\t", c.name);
            write_file_line(&mut out, &c);
            out.push('\n');
        }
        out.push('\n');
    }
    // A comment line, as pprof's form allows, after the profile.
    if lacks_line_tables(gs) {
        out.push_str("# ");
        out.push_str(LINE_TABLES_HINT);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traceback::{parse_level, GInfo, NoStack};

    fn g(id: u64, reason: WaitReason, pcs: Result<Vec<usize>, NoStack>) -> GInfo {
        GInfo {
            id,
            status: Status::Waiting,
            reason,
            waitsince: 0,
            locked: false,
            pcs,
            spawn: Default::default(),
        }
    }

    #[test]
    fn levels_are_gos() {
        assert_eq!(parse_level("none"), Some(Level::None));
        assert_eq!(parse_level("0"), Some(Level::None));
        assert_eq!(parse_level("single"), Some(Level::Single));
        assert_eq!(parse_level("all"), Some(Level::All));
        assert_eq!(parse_level("1"), Some(Level::All));
        assert_eq!(parse_level("system"), Some(Level::System));
        assert_eq!(parse_level("2"), Some(Level::System));
        assert_eq!(parse_level("crash"), Some(Level::System));
        assert_eq!(parse_level("lots"), None);
        assert!(Level::None < Level::Single && Level::All < Level::System);
    }

    #[test]
    fn runtime_frames_are_internal() {
        assert!(is_internal("goroutine::chan::Receiver<T>::recv"));
        assert!(is_internal("<goroutine::chan::Receiver<T>>::recv"));
        assert!(is_internal(
            "<&goroutine::net::tcp_stream::TcpStream as std::io::Read>::read"
        ));
        assert!(is_internal(
            "<&mut goroutine::io::Fd<T> as std::io::Read>::read"
        ));
        assert!(is_internal("corosensei::coroutine::on_stack"));
        assert!(is_internal("std::panicking::try"));
        assert!(is_internal("stack_init_trampoline"));
        assert!(!is_internal("myapp::worker"));
        assert!(!is_internal("goroutine_user::worker"));
        assert!(is_std("<core::slice::iter::Iter<T> as Iterator>::for_each"));
        assert!(is_std(
            "<usize as core::slice::index::SliceIndex<[T]>>::index"
        ));
        assert!(!is_std("<myapp::Foo as core::fmt::Display>::fmt"));
        assert!(!is_std("<usize as myapp::Trait>::f"));
        assert!(!is_std("myapp::main"));
    }

    #[test]
    fn grouping_counts_and_orders_largest_first() {
        // Addresses that symbolise to nothing: grouping works on the raw
        // addresses and the status.
        let a = vec![0x10, 0x20];
        let b = vec![0x30];
        let mut gs = vec![g(1, WaitReason::Select, Ok(b.clone()))];
        for id in 2..5 {
            gs.push(g(id, WaitReason::ChanReceive, Ok(a.clone())));
        }
        // Same stack, other wait reason: another group.
        gs.push(g(5, WaitReason::ChanSend, Ok(a.clone())));
        gs.push(g(6, WaitReason::Select, Ok(b)));
        let out = grouped(&gs, Level::All);
        let heads: Vec<&str> = out.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(heads[0], "goroutine profile: total 6");
        assert_eq!(heads[1], "3 @ 0x10 0x20", "{out}");
        assert_eq!(heads[3], "2 @ 0x30", "{out}");
        assert_eq!(heads[5], "1 @ 0x10 0x20", "{out}");
        assert!(out.contains("# [chan receive]\n"), "{out}");
        assert!(out.contains("# [chan send]\n"), "{out}");
    }
}
