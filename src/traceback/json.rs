//! The goroutine dump as JSON (`crate::dump_json`; schema in
//! docs/dump-json.md), for scripts: one object per goroutine with the same
//! content as the `debug=2` text (`format`), in fields instead of lines.
//!
//! Written by hand, not with serde: the library has no serde dependency,
//! and the schema is a few flat fields. Strings are escaped per RFC 8259
//! (quote, backslash, control characters as `\u00XX`), so any symbol or
//! path name stays valid JSON.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use super::format::{self, Sym};
use super::{GInfo, Level, NoStack};
use crate::g::Status;

/// The schema's version (docs/dump-json.md): bumped when a field changes
/// meaning or goes away; new fields may appear without a bump.
pub(crate) const SCHEMA_VERSION: u32 = 1;

/// `gs` as one JSON document; `now` on the coarse clock's scale (ms since
/// the runtime started), as `GInfo::waitsince`.
///
/// `blocked`: the goroutines whose thread is blocked in a system call
/// outside the runtime, with the call's number (`runtime::dump`). `cpu`:
/// each goroutine's CPU time in ns (`runtime::metrics`).
pub(crate) fn render(
    gs: &[GInfo],
    names: &HashMap<u64, Arc<str>>,
    blocked: &HashMap<u64, i64>,
    cpu: &HashMap<u64, u64>,
    now: u32,
    level: Level,
) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "{{\"schema\":\"goroutine-dump\",\"version\":{SCHEMA_VERSION},\"goroutines\":["
    );
    for (i, g) in gs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("\n{\"id\":");
        let _ = write!(out, "{}", g.id);
        out.push_str(",\"name\":");
        match names.get(&g.id) {
            Some(n) => string(&mut out, n),
            None => out.push_str("null"),
        }
        out.push_str(",\"state\":");
        string(&mut out, state(g.status));
        out.push_str(",\"wait_reason\":");
        if g.status == Status::Waiting {
            string(&mut out, format::status_str(g.status, g.reason));
        } else {
            out.push_str("null");
        }
        out.push_str(",\"wait_ms\":");
        if g.status == Status::Waiting && g.waitsince != 0 {
            let _ = write!(out, "{}", now.wrapping_sub(g.waitsince));
        } else {
            out.push_str("null");
        }
        out.push_str(",\"blocked_in_syscall\":");
        match blocked.get(&g.id) {
            Some(&nr) => match crate::sys::procfs::syscall_name(nr) {
                Some(name) => string(&mut out, name),
                None => string(&mut out, &format!("system call {nr}")),
            },
            None => out.push_str("null"),
        }
        out.push_str(",\"cpu_time_ns\":");
        match cpu.get(&g.id) {
            Some(ns) => {
                let _ = write!(out, "{ns}");
            }
            None => out.push_str("null"),
        }
        let _ = write!(out, ",\"locked_to_thread\":{}", g.locked);
        out.push_str(",\"frames\":");
        match &g.pcs {
            Ok(pcs) => {
                out.push('[');
                for (j, (pc, s)) in format::visible_frames(pcs, level).iter().enumerate() {
                    if j > 0 {
                        out.push(',');
                    }
                    frame(&mut out, Some(*pc), s);
                }
                out.push(']');
                out.push_str(",\"frames_unavailable\":null");
            }
            Err(why) => {
                out.push_str("[],\"frames_unavailable\":");
                string(&mut out, unavailable(*why));
            }
        }
        out.push_str(",\"created_by\":");
        if g.spawn.pc == 0 {
            out.push_str("null");
        } else {
            let c = format::creator(g.spawn.pc);
            out.push_str("{\"function\":");
            string(&mut out, &c.name);
            out.push_str(",\"file\":");
            opt_string(&mut out, c.file.as_deref());
            out.push_str(",\"line\":");
            match c.line {
                Some(l) => {
                    let _ = write!(out, "{l}");
                }
                None => out.push_str("null"),
            }
            out.push_str(",\"goroutine\":");
            if g.spawn.parent != 0 {
                let _ = write!(out, "{}", g.spawn.parent);
            } else {
                out.push_str("null");
            }
            out.push('}');
        }
        out.push('}');
    }
    out.push_str("\n]}\n");
    out
}

fn state(s: Status) -> &'static str {
    match s {
        Status::Runnable => "runnable",
        Status::Running => "running",
        Status::Syscall => "syscall",
        Status::Waiting => "waiting",
        Status::Idle => "idle",
        Status::Dead => "dead",
    }
}

fn unavailable(why: NoStack) -> &'static str {
    match why {
        NoStack::Running => "running on another thread",
        NoStack::Blocked => "blocked in the kernel outside the runtime",
        NoStack::NotStarted => "not started",
        NoStack::NotStopped => "the world was not stopped",
        NoStack::Unsupported => "no unwinder for this platform",
    }
}

fn frame(out: &mut String, pc: Option<usize>, s: &Sym) {
    out.push_str("{\"function\":");
    string(out, &s.name);
    out.push_str(",\"file\":");
    opt_string(out, s.file.as_deref());
    out.push_str(",\"line\":");
    match s.line {
        Some(l) => {
            let _ = write!(out, "{l}");
        }
        None => out.push_str("null"),
    }
    if let Some(pc) = pc {
        let _ = write!(out, ",\"pc\":\"{pc:#x}\"");
    }
    out.push('}');
}

fn opt_string(out: &mut String, s: Option<&str>) {
    match s {
        Some(s) => string(out, s),
        None => out.push_str("null"),
    }
}

/// A JSON string literal (RFC 8259 escapes).
fn string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_escaped() {
        let mut s = String::new();
        string(&mut s, "a\"b\\c\nd\u{1}é");
        assert_eq!(s, "\"a\\\"b\\\\c\\nd\\u0001é\"");
    }
}
