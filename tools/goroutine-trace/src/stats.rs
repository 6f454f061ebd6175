//! `goroutine-trace stats`: a short text summary of a trace.

use crate::decode::Trace;
use crate::format::EVENT_NAMES;
use crate::model::{MarkKind, Model};
use std::collections::HashSet;
use std::fmt::Write;

/// A duration in the unit that reads best (`812 ns`, `12.3 us`, `4.56 ms`, `1.234 s`).
pub fn fmt_ns(ns: u64) -> String {
    let f = ns as f64;
    if ns < 1_000 {
        format!("{ns} ns")
    } else if ns < 1_000_000 {
        format!("{:.1} us", f / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.2} ms", f / 1e6)
    } else {
        format!("{:.3} s", f / 1e9)
    }
}

/// `2023-11-14 22:13:20 UTC` from Unix nanoseconds (days-to-civil, proleptic Gregorian).
pub fn fmt_unix(ns: u64) -> String {
    let secs = ns / 1_000_000_000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

fn mib(bytes: u64) -> String {
    if bytes < 1 << 20 {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    } else {
        format!("{:.2} MiB", bytes as f64 / (1 << 20) as f64)
    }
}

/// The summary text.
pub fn summary(trace: &Trace, model: &Model) -> String {
    let mut s = String::new();
    let ms: HashSet<u32> = trace.events.iter().map(|e| e.m).collect();
    let _ = writeln!(
        s,
        "trace:       {}, format v{}, {} batches from {} Ms, {} dropped events",
        mib(trace.bytes),
        trace.header.version,
        trace.batches,
        ms.len(),
        trace.dropped
    );
    if let Some(w) = &trace.warning {
        let _ = writeln!(s, "warning:     {w}");
    }
    let _ = writeln!(
        s,
        "duration:    {} (started {})",
        fmt_ns(model.duration),
        fmt_unix(trace.header.unix_start_ns)
    );
    let _ = writeln!(s, "GOMAXPROCS:  {}", trace.header.gomaxprocs);
    let created = model
        .goroutines
        .iter()
        .filter(|g| g.created.is_some())
        .count();
    let ended = model
        .goroutines
        .iter()
        .filter(|g| g.ended.is_some())
        .count();
    let named = model.goroutines.iter().filter(|g| g.name.is_some()).count();
    let _ = writeln!(
        s,
        "goroutines:  {} seen ({created} created in the trace, {ended} ended, {named} named); at most {} alive at once",
        model.goroutines.len(),
        model.max_alive
    );
    let slices = model.slice_count() as u64;
    let busy: u64 = model.lanes.iter().map(|l| l.busy).sum();
    let _ = writeln!(
        s,
        "slices:      {slices} goroutine run slices, mean {}",
        fmt_ns(busy.checked_div(slices).unwrap_or(0))
    );
    let woken = model.wakeups.len();
    let _ = writeln!(s, "wakeups:     {woken}");
    let _ = writeln!(s, "events:      {}", model.total_events);
    let stamped = trace.events.iter().filter(|e| e.stamped).count();
    let _ = writeln!(
        s,
        "timestamps:  {stamped} events read the clock, {} share their batch's previous time (a lower bound of their own)",
        trace.events.len() - stamped
    );
    for (ty, &c) in model.event_counts.iter().enumerate().skip(1) {
        if c > 0 {
            let _ = writeln!(s, "  {:<16}{c:>12}", EVENT_NAMES[ty]);
        }
    }
    let _ = writeln!(
        s,
        "per-P utilisation (running goroutines / trace duration):"
    );
    let _ = writeln!(
        s,
        "  {:<6}{:>7}{:>13}{:>13}{:>10}{:>14}",
        "P", "busy", "running", "in syscall", "slices", "steals in/out"
    );
    for lane in &model.lanes {
        let sys: u64 = lane.syscalls.iter().map(|x| x.end - x.start).sum();
        let (mut sin, mut sout) = (0, 0);
        for mk in &model.marks {
            if let MarkKind::Steal { victim, .. } = mk.kind {
                if mk.p == Some(lane.p) {
                    sin += 1;
                }
                if victim == lane.p {
                    sout += 1;
                }
            }
        }
        let pct = if model.duration > 0 {
            lane.busy as f64 * 100.0 / model.duration as f64
        } else {
            0.0
        };
        let _ = writeln!(
            s,
            "  {:<6}{:>6.1}%{:>13}{:>13}{:>10}{:>14}",
            format!("P{}", lane.p),
            pct,
            fmt_ns(lane.busy),
            fmt_ns(sys),
            lane.slices.len(),
            format!("{sin}/{sout}")
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(fmt_ns(812), "812 ns");
        assert_eq!(fmt_ns(12_345), "12.3 us");
        assert_eq!(fmt_ns(4_560_000), "4.56 ms");
        assert_eq!(fmt_ns(1_234_000_000), "1.234 s");
        assert_eq!(fmt_unix(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(
            fmt_unix(1_700_000_000_000_000_000),
            "2023-11-14 22:13:20 UTC"
        );
        assert_eq!(fmt_unix(951_782_400_000_000_000), "2000-02-29 00:00:00 UTC");
    }
}
