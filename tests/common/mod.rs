//! Runs a test body in a fresh process of the same test binary, so that it
//! gets its own runtime (GOMAXPROCS, goroutine ids, memory) while cargo runs
//! the other tests in parallel threads of the parent process.
//!
//! Two environment variables let the suite run under an emulator
//! (CI's "aarch64 under qemu" step, README "Supported platforms"):
//! - `GOROUTINE_TEST_RUNNER`: the command a child test process is started
//!   with, split on spaces (`qemu-aarch64 -L /usr/aarch64-linux-gnu`), as
//!   cargo starts the test binary itself with its `runner`. Without it, the
//!   child takes cargo's `CARGO_TARGET_<TRIPLE>_RUNNER` variable for this
//!   target when that is in the environment (cargo does not export a runner
//!   set in `.cargo/config.toml`, so set it by environment). Needed where
//!   the kernel cannot run the target's binaries itself (no `binfmt_misc`):
//!   a child started bare exits 127.
//! - `GOROUTINE_TEST_TIME_SCALE`: the one factor every time limit of the
//!   tests is multiplied by ([`time_scale`], [`scaled`]), for an emulator
//!   that runs code several times slower. Default 1; limits are only ever
//!   lengthened, so a slow run still checks the same behaviour.
#![allow(dead_code)]

use std::process::{Command, Output};

const CHILD_VAR: &str = "GOROUTINE_TEST_CHILD";

/// True in the child process started by [`spawn`] for test `name`.
pub fn is_child(name: &str) -> bool {
    std::env::var(CHILD_VAR).is_ok_and(|v| v == name)
}

/// The runner a child process of this test binary starts under, if any
/// (the module note): its program and leading arguments.
pub fn runner() -> Option<Vec<String>> {
    let cargo_var = if cfg!(target_arch = "aarch64") {
        "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER"
    } else if cfg!(target_arch = "riscv64") {
        "CARGO_TARGET_RISCV64GC_UNKNOWN_LINUX_GNU_RUNNER"
    } else {
        "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER"
    };
    let spec = std::env::var("GOROUTINE_TEST_RUNNER")
        .or_else(|_| std::env::var(cargo_var))
        .ok()?;
    let words: Vec<String> = spec.split_whitespace().map(String::from).collect();
    (!words.is_empty()).then_some(words)
}

/// A command that runs this test binary again, under the runner if one is
/// configured (the module note). Every test that re-runs itself starts its
/// child through this.
pub fn self_command() -> Command {
    let exe = std::env::current_exe().expect("current_exe");
    match runner() {
        Some(words) => {
            let mut cmd = Command::new(&words[0]);
            cmd.args(&words[1..]).arg(exe);
            cmd
        }
        None => Command::new(exe),
    }
}

/// The factor every time limit of the tests is multiplied by:
/// `GOROUTINE_TEST_TIME_SCALE` (a positive number), default 1.
pub fn time_scale() -> f64 {
    static SCALE: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *SCALE.get_or_init(|| match std::env::var("GOROUTINE_TEST_TIME_SCALE") {
        Err(_) => 1.0,
        Ok(v) => match v.trim().parse::<f64>() {
            Ok(f) if f.is_finite() && f >= 1.0 => f,
            _ => panic!("GOROUTINE_TEST_TIME_SCALE={v:?}: want a number >= 1"),
        },
    })
}

/// Time limit `d` scaled by [`time_scale`].
pub fn scaled(d: std::time::Duration) -> std::time::Duration {
    d.mul_f64(time_scale())
}

/// Re-runs test `name` of this binary in a new process with `env` set.
pub fn spawn(name: &str, env: &[(&str, &str)]) -> Output {
    let mut cmd = self_command();
    cmd.args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD_VAR, name)
        .env_remove("GOMAXPROCS")
        // Fatal errors exit 2 unless GOTRACEBACK=crash: a child sees it
        // only where its test sets it.
        .env_remove("GOTRACEBACK");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("spawn test child")
}

/// Re-runs test `name` in a new process and fails if it failed.
pub fn run_isolated(name: &str, env: &[(&str, &str)]) {
    let out = spawn(name, env);
    assert!(
        out.status.success(),
        "isolated test {name} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A test whose body runs in its own process, with environment `env`.
#[macro_export]
macro_rules! isolated_test {
    ($(#[$meta:meta])* fn $name:ident() $([$($k:literal = $v:literal),*])? $body:block) => {
        $(#[$meta])*
        #[test]
        fn $name() {
            if !common::is_child(stringify!($name)) {
                common::run_isolated(stringify!($name), &[$($(($k, $v)),*)?]);
                return;
            }
            $body
        }
    };
}

/// Runs `f` on a fresh plain thread (outside the runtime) and returns its
/// result. A panic in `f` fails the test with that panic; a test still
/// running after `secs` seconds (times [`time_scale`]) fails too, so that a lost wakeup fails
/// instead of hanging the suite.
pub fn within_thread<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(catch_unwind(AssertUnwindSafe(f)));
    });
    let limit = scaled(std::time::Duration::from_secs(secs));
    match rx.recv_timeout(limit) {
        Ok(Ok(v)) => v,
        Ok(Err(panic)) => resume_unwind(panic),
        Err(_) => panic!("test still running after {limit:?} (lost wakeup?)"),
    }
}

/// Runs `f` as the main goroutine of [`goroutine::run`], on a fresh thread,
/// under the limit of [`within_thread`].
pub fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    within_thread(secs, move || goroutine::run(f))
}

/// Sets the soft open-file limit (`RLIMIT_NOFILE`) to `soft`, then opens
/// `/dev/null` until the descriptor table is full. Returns the files
/// (dropping them frees the table) and the error that stopped the loop,
/// which the caller checks is EMFILE.
pub fn fill_descriptor_table(soft: u64) -> (Vec<std::fs::File>, std::io::Error) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a live rlimit for both calls.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim), 0);
        lim.rlim_cur = soft;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &lim), 0);
    }
    let mut files = Vec::new();
    loop {
        match std::fs::File::open("/dev/null") {
            Ok(f) => files.push(f),
            Err(e) => return (files, e),
        }
    }
}

/// Sends `sig` to process `pid` (this one or a child): with `kill`, or
/// under ThreadSanitizer to the runtime thread that waits for it, with
/// `tgkill` (`thread`: its name as `/proc` shows it, cut to 15 bytes:
/// `goroutine-signa` for `signal::notify`'s signals, `goroutine-sigqu`
/// for SIGQUIT).
///
/// Why: TSan runs the handler of an asynchronous signal at once only on a
/// thread that is inside a call it intercepts (`poll`, `read`); on any
/// other thread it queues the signal until that thread next enters one.
/// The kernel offers a signal sent to the process to the main thread
/// first, here libtest's, which waits in std's futex wait: a raw system
/// call, not intercepted, and restarted after the handler (SA_RESTART).
/// So under TSan a plain `kill` was never handled (tests/graceful_server.rs
/// hung: its child served on past the watchdog, whose SIGQUIT met the same
/// fate). The runtime's signal threads wait in `poll` and `read`.
pub fn send_signal(pid: i32, sig: i32, thread: &str) {
    if cfg!(goroutine_sanitize = "thread") {
        let find = || {
            std::fs::read_dir(format!("/proc/{pid}/task"))
                .into_iter()
                .flatten()
                .flatten()
                .find(|t| {
                    std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == thread)
                })
                .and_then(|t| t.file_name().to_str()?.parse::<i32>().ok())
        };
        // A thread just started may not carry its name yet.
        let mut tid = find();
        for _ in 0..100 {
            if tid.is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
            tid = find();
        }
        if let Some(tid) = tid {
            // SAFETY: a signal to a thread of our own process or child.
            let r = unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, sig) };
            assert_eq!(r, 0, "tgkill: {}", std::io::Error::last_os_error());
            return;
        }
        eprintln!("no thread {thread:?} in process {pid}: signalling the process");
    }
    // SAFETY: kill has no memory-safety preconditions.
    assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
}

/// Skynet (Go's benchmark, the event-heaviest workload): a tree of
/// goroutines, ten children each, down to `size` leaves numbered from
/// `num`; each node sends its leaves' sum up. A root of 1M leaves sends
/// 499,999,500,000.
pub fn skynet(up: goroutine::Sender<u64>, num: u64, size: u64) {
    if size == 1 {
        up.send(num).expect("skynet: parent gone");
        return;
    }
    let sub = size / 10;
    let (tx, rx) = goroutine::chan::<u64>(0);
    for i in 0..10 {
        let tx = tx.clone();
        goroutine::go(move || skynet(tx, num + i * sub, sub));
    }
    drop(tx);
    let sum: u64 = (0..10)
        .map(|_| rx.recv().expect("skynet: child gone"))
        .sum();
    up.send(sum).expect("skynet: parent gone");
}
