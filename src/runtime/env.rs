//! GOMAXPROCS and GOROUTINE_MAX_THREADS from the environment.

use std::sync::atomic::Ordering;

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

/// The default: CPUs available to this process (affinity and cgroup aware).
pub(crate) fn default_procs() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(MAX_PROCS)
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

#[cfg(test)]
mod tests {
    use super::*;

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
