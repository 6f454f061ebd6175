//! GOMAXPROCS, GOROUTINE_MAX_THREADS and GODEBUG from the environment.
//!
//! A bad value is never fatal: it is reported on stderr in one line (once:
//! each variable is read once, at runtime start) and the default is used.

use std::sync::atomic::Ordering;
use std::sync::OnceLock;

use super::{MAX_PROCS, MAX_THREADS};

/// Applies `GOROUTINE_MAX_THREADS` (the thread cap, default 10,000); a bad
/// value is reported on stderr in one line and the default kept.
pub(crate) fn max_threads_from_env() {
    let Some(v) = std::env::var_os("GOROUTINE_MAX_THREADS") else {
        return;
    };
    let v = v.to_string_lossy();
    match v.trim().parse::<usize>() {
        Ok(n) if n >= 2 => MAX_THREADS.store(n, Ordering::Relaxed),
        _ => eprintln!(
            "goroutine: GOROUTINE_MAX_THREADS={v:?} is not an integer >= 2; using the default {}",
            MAX_THREADS.load(Ordering::Relaxed)
        ),
    }
}

/// The process's cgroup CPU limit files, opened on first use (none outside
/// a limited cgroup, or with `GODEBUG=containermaxprocs=0`).
fn cgroup_limit() -> Option<&'static crate::sys::cgroup::CpuLimit> {
    static LIMIT: OnceLock<Option<crate::sys::cgroup::CpuLimit>> = OnceLock::new();
    LIMIT
        .get_or_init(|| {
            godebug()
                .containermaxprocs
                .then(|| crate::sys::cgroup::CpuLimit::open(std::path::Path::new("/")))
                .flatten()
        })
        .as_ref()
}

/// The default GOMAXPROCS, as Go 1.25 computes it: the CPUs in the
/// affinity mask, lowered to the cgroup CPU limit rounded up (at least 2
/// unless fewer CPUs are available), the tightest of the cgroup and its
/// parents (`sys::cgroup`). Read again by sysmon every second
/// ([`crate::runtime::procresize::follow_cgroup`]).
pub(crate) fn default_procs() -> usize {
    let cpus = crate::sys::cgroup::affinity_cpus();
    let limit = cgroup_limit().and_then(|l| l.read());
    crate::sys::cgroup::procs_for(limit, cpus).min(MAX_PROCS)
}

/// The cgroup CPU limit now (`None`: none, or not followed).
pub(crate) fn cgroup_cpu_limit() -> Option<f64> {
    cgroup_limit().and_then(|l| l.read())
}

/// Whether sysmon should follow the cgroup limit: there is one, and
/// GOMAXPROCS was not set by the environment (`GODEBUG=updatemaxprocs=0`
/// turns it off too; `set_max_procs` turns it off for good).
pub(crate) fn follows_cgroup() -> bool {
    godebug().updatemaxprocs
        && cgroup_limit().is_some()
        && std::env::var_os("GOMAXPROCS").is_none_or(|v| v.is_empty())
}

/// GOMAXPROCS as the runtime will use it; a bad value is reported on stderr
/// in one line and the default is used (never fatal).
pub(crate) fn gomaxprocs_from_env() -> usize {
    let default = default_procs();
    match std::env::var_os("GOMAXPROCS") {
        None => default,
        Some(v) => {
            let (n, warning) = parse_gomaxprocs(&v.to_string_lossy(), default);
            if let Some(w) = warning {
                eprintln!("{w}");
            }
            n
        }
    }
}

/// Parses a GOMAXPROCS value: the number to use and, for a bad value, the
/// one-line warning to print.
pub(crate) fn parse_gomaxprocs(value: &str, default: usize) -> (usize, Option<String>) {
    if value.is_empty() {
        return (default, None);
    }
    match value.trim().parse::<u64>() {
        Ok(0) | Err(_) => (
            default,
            Some(format!(
                "goroutine: GOMAXPROCS={value:?} is not a positive integer; using the default {default} (CPUs available to this process)"
            )),
        ),
        Ok(n) if n > MAX_PROCS as u64 => (
            MAX_PROCS,
            Some(format!(
                "goroutine: GOMAXPROCS={value:?} is above the maximum {MAX_PROCS}; using {MAX_PROCS}"
            )),
        ),
        Ok(n) => (n as usize, None),
    }
}

/// The GODEBUG settings the runtime knows (Go's `debug` vars).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GoDebug {
    /// `schedtrace=N`: sysmon prints a scheduler line every N ms (0: off).
    pub(crate) schedtrace_ms: i64,
    /// `scheddetail=1`: schedtrace also prints every P, M and goroutine.
    pub(crate) scheddetail: bool,
    /// `blockwarn=1`: warn once on stderr when a goroutine blocked in the
    /// kernel outside the runtime loses its P (`runtime::retake`).
    pub(crate) blockwarn: bool,
    /// `blockrevoke=0`: never take the P of such a goroutine (default on).
    pub(crate) blockrevoke: bool,
    /// `hogrevoke=0`: never take the P of a goroutine that computes
    /// without runtime calls (`runtime::retake`, rule 5; default on).
    pub(crate) hogrevoke: bool,
    /// `syscallhandoff=0`: no hand-off at entry of a system call predicted
    /// to block (`runtime::syscall`), only sysmon's retake, as in Go
    /// (default on).
    pub(crate) syscallhandoff: bool,
    /// `containermaxprocs=0`: GOMAXPROCS's default ignores the cgroup CPU
    /// limit, as in Go 1.25 (default on).
    pub(crate) containermaxprocs: bool,
    /// `updatemaxprocs=0`: sysmon does not follow changes of the cgroup
    /// CPU limit, as in Go 1.25 (default on).
    pub(crate) updatemaxprocs: bool,
    /// `cputime=1`: measure CPU time per goroutine (`runtime::metrics`; a
    /// clock read at every switch, so off by default).
    pub(crate) cputime: bool,
}

impl Default for GoDebug {
    fn default() -> Self {
        GoDebug {
            schedtrace_ms: 0,
            scheddetail: false,
            blockwarn: false,
            blockrevoke: true,
            hogrevoke: true,
            syscallhandoff: true,
            containermaxprocs: true,
            updatemaxprocs: true,
            cputime: false,
        }
    }
}

static GODEBUG: OnceLock<GoDebug> = OnceLock::new();

/// The GODEBUG settings (read from the environment on first use).
pub(crate) fn godebug() -> GoDebug {
    *GODEBUG.get_or_init(|| {
        let Some(v) = std::env::var_os("GODEBUG") else {
            return GoDebug::default();
        };
        let (d, warnings) = parse_godebug(&v.to_string_lossy());
        for w in warnings {
            eprintln!("{w}");
        }
        d
    })
}

/// Parses GODEBUG (`key=value,key=value`): the settings and one warning per
/// bad value of a known key. Unknown keys and entries without `=` are
/// ignored, as Go does; when a key repeats, the last one wins.
pub(crate) fn parse_godebug(value: &str) -> (GoDebug, Vec<String>) {
    let mut d = GoDebug::default();
    let mut warnings = Vec::new();
    for entry in value.split(',') {
        let Some((key, val)) = entry.split_once('=') else {
            continue;
        };
        let key = key.trim();
        if ![
            "schedtrace",
            "scheddetail",
            "blockwarn",
            "blockrevoke",
            "hogrevoke",
            "syscallhandoff",
            "containermaxprocs",
            "updatemaxprocs",
            "cputime",
        ]
        .contains(&key)
        {
            continue;
        }
        match val.trim().parse::<i64>() {
            Ok(n) if n >= 0 => match key {
                "schedtrace" => d.schedtrace_ms = n,
                "scheddetail" => d.scheddetail = n > 0,
                "blockwarn" => d.blockwarn = n > 0,
                "blockrevoke" => d.blockrevoke = n > 0,
                "hogrevoke" => d.hogrevoke = n > 0,
                "containermaxprocs" => d.containermaxprocs = n > 0,
                "updatemaxprocs" => d.updatemaxprocs = n > 0,
                "cputime" => d.cputime = n > 0,
                _ => d.syscallhandoff = n > 0,
            },
            _ => warnings.push(format!(
                "goroutine: GODEBUG: {key}={val:?} is not a non-negative integer; ignored"
            )),
        }
    }
    (d, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn godebug_values() {
        let d = |schedtrace_ms, scheddetail| GoDebug {
            schedtrace_ms,
            scheddetail,
            ..GoDebug::default()
        };
        assert_eq!(parse_godebug(""), (d(0, false), vec![]));
        assert_eq!(parse_godebug("schedtrace=1000"), (d(1000, false), vec![]));
        assert_eq!(
            parse_godebug("schedtrace=10,scheddetail=1"),
            (d(10, true), vec![])
        );
        assert_eq!(
            parse_godebug("gctrace=1,schedtrace=5,madvdontneed=1"),
            (d(5, false), vec![])
        );
        assert_eq!(
            parse_godebug("schedtrace=5,schedtrace=7"),
            (d(7, false), vec![])
        );
        assert_eq!(parse_godebug("scheddetail=0"), (d(0, false), vec![]));
        assert_eq!(parse_godebug("nokey,=3,schedtrace"), (d(0, false), vec![]));
        let (b, w) = parse_godebug("blockwarn=1,blockrevoke=0");
        assert!(w.is_empty());
        assert!(b.blockwarn && !b.blockrevoke && b.syscallhandoff);
        assert!(GoDebug::default().blockrevoke && !GoDebug::default().blockwarn);
        assert!(!parse_godebug("syscallhandoff=0").0.syscallhandoff);
        assert!(GoDebug::default().hogrevoke && !parse_godebug("hogrevoke=0").0.hogrevoke);
        assert_eq!(parse_godebug("hogrevoke=x").1.len(), 1);
        assert!(!GoDebug::default().cputime && parse_godebug("cputime=1").0.cputime);
        assert_eq!(parse_godebug("cputime=on").1.len(), 1);
    }

    #[test]
    fn godebug_bad_values_warn_once_each() {
        let (d, w) = parse_godebug("schedtrace=abc,gctrace=x,scheddetail=-1");
        assert_eq!(d, GoDebug::default());
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("schedtrace=\"abc\""), "{}", w[0]);
        assert!(w[1].contains("scheddetail=\"-1\""), "{}", w[1]);
        assert!(w.iter().all(|w| !w.contains('\n') && w.contains("GODEBUG")));
        let (d, w) = parse_godebug("schedtrace=,scheddetail=1");
        assert_eq!(
            d,
            GoDebug {
                schedtrace_ms: 0,
                scheddetail: true,
                ..GoDebug::default()
            }
        );
        assert_eq!(w.len(), 1);
    }

    #[test]
    fn valid_values() {
        assert_eq!(parse_gomaxprocs("1", 4), (1, None));
        assert_eq!(parse_gomaxprocs("16", 4), (16, None));
        assert_eq!(parse_gomaxprocs(" 3 ", 4), (3, None));
        assert_eq!(parse_gomaxprocs("", 4), (4, None));
    }

    #[test]
    fn bad_values_warn_and_use_default() {
        for bad in ["0", "-1", "abc", "2x", "1.5"] {
            let (n, w) = parse_gomaxprocs(bad, 4);
            assert_eq!(n, 4, "{bad}");
            let w = w.expect("a warning");
            assert!(w.contains("GOMAXPROCS"), "{w}");
            assert!(w.contains(bad), "{w}");
            assert!(w.contains("default 4"), "{w}");
            assert!(!w.contains('\n'));
        }
    }

    #[test]
    fn huge_value_is_capped() {
        let (n, w) = parse_gomaxprocs("99999", 4);
        assert_eq!(n, MAX_PROCS);
        assert!(w.unwrap().contains("99999"));
    }
}
