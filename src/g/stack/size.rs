//! Stack sizes: the size a goroutine asks for, the default and the
//! environment variables (`GOROUTINE_STACK_SIZE`, `GOROUTINE_STACK_GUARD`).

use super::*;

// ---------------------------------------------------------------------------
// Sizes and environment
// ---------------------------------------------------------------------------

/// Checks a requested stack size and rounds it up to the page size.
///
/// Sizes below 16 KiB or above 1 GiB are rejected with
/// [`io::ErrorKind::InvalidInput`].
pub(crate) fn validate_stack_size(bytes: usize) -> io::Result<usize> {
    if !(MIN_STACK_SIZE..=MAX_STACK_SIZE).contains(&bytes) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "goroutine stack size of {bytes} bytes is out of range: \
                 it must be between 16 KiB ({MIN_STACK_SIZE} bytes) and 1 GiB \
                 ({MAX_STACK_SIZE} bytes)"
            ),
        ));
    }
    let page = mem::page_size();
    Ok((bytes + page - 1) & !(page - 1))
}

/// The stack size used when a spawn does not ask for one: 256 KiB, or
/// `GOROUTINE_STACK_SIZE` (bytes, with an optional `K`/`KiB`/`M`/`MiB`/`G`/
/// `GiB` suffix, case-insensitive) read once. A bad value is reported with one
/// line on stderr and the default is used. Always page-aligned.
pub(crate) fn default_stack_size() -> usize {
    static SIZE: OnceLock<usize> = OnceLock::new();
    *SIZE.get_or_init(|| {
        let raw = std::env::var_os(STACK_SIZE_ENV);
        let (size, warning) = stack_size_from_env(raw.as_deref().map(|v| v.to_str().ok_or(v)));
        if let Some(w) = warning {
            eprintln!("{w}");
        }
        size
    })
}

/// The default stack size given the value of `GOROUTINE_STACK_SIZE`
/// (`None`: unset; `Err`: not UTF-8), and the warning line to print if the
/// value was rejected.
pub(super) fn stack_size_from_env(
    value: Option<Result<&str, &std::ffi::OsStr>>,
) -> (usize, Option<String>) {
    let fallback = |shown: String, why: String| {
        let w = format!(
            "goroutine: ignoring {STACK_SIZE_ENV}={shown}: {why}; using the default \
             stack size of {} KiB",
            DEFAULT_STACK_SIZE / 1024
        );
        (DEFAULT_STACK_SIZE, Some(w))
    };
    match value {
        // Unset or empty (`GOROUTINE_STACK_SIZE=`): the default, silently,
        // as for GOMAXPROCS.
        None | Some(Ok("")) => (DEFAULT_STACK_SIZE, None),
        Some(Err(os)) => fallback(format!("{os:?}"), "not valid UTF-8".to_owned()),
        Some(Ok(s)) => match parse_stack_size(s)
            .and_then(|b| validate_stack_size(b).map_err(|e| e.to_string()))
        {
            Ok(size) => (size, None),
            Err(why) => fallback(format!("{s:?}"), why),
        },
    }
}

/// Parses `<digits>[ ][K|KiB|M|MiB|G|GiB]` (suffix case-insensitive, powers
/// of 1024) into bytes. Does not check the range.
pub(super) fn parse_stack_size(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return Err(
            "expected a number of bytes, optionally followed by K, KiB, M, MiB, G or GiB".into(),
        );
    }
    let (num, suffix) = s.split_at(digits);
    let shift = match suffix.trim().to_ascii_lowercase().as_str() {
        "" => 0,
        "k" | "kib" => 10,
        "m" | "mib" => 20,
        "g" | "gib" => 30,
        other => {
            return Err(format!(
                "unknown size suffix {other:?} (use K, KiB, M, MiB, G or GiB)"
            ))
        }
    };
    num.parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .ok_or_else(|| "number too large".to_owned())
}

/// Whether `GOROUTINE_STACK_GUARD` forces `mprotect` guards, and the warning
/// line for a value that is ignored (`None`: unset; `Err`: not UTF-8).
pub(super) fn guard_env_forces_mprotect(
    value: Option<Result<&str, &std::ffi::OsStr>>,
) -> (bool, Option<String>) {
    let shown = match value {
        None | Some(Ok("")) => return (false, None),
        Some(Ok("mprotect")) => return (true, None),
        Some(Ok(v)) => format!("{v:?}"),
        Some(Err(v)) => format!("{v:?}"),
    };
    let w =
        format!("goroutine: ignoring {GUARD_ENV}={shown}: the only accepted value is \"mprotect\"");
    (false, Some(w))
}
