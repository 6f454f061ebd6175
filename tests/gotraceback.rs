//! `GOTRACEBACK` as Go 1.19 behaves, for the two reports that always
//! concern every goroutine: the deadlock (a fatal error) and SIGQUIT (a
//! runtime throw). Each scenario runs under `GOTRACEBACK` unset, `none`,
//! `single`, `all`, `system` and `crash`, and what it prints is reduced to
//! three facts: the exit status, how many of the program's own goroutines
//! are shown with a frame of the program, and whether the runtime's frames
//! are shown.
//!
//! The facts are pinned here (they hold without Go), and, where `go` is on
//! the PATH, the same programs written in Go are run under the same levels
//! and must give the same facts (else that half prints `SKIPPED`).
//!
//! Measured with Go 1.19.8 (linux/amd64), 2026-04:
//! - deadlock: `none` prints the headline only; every other level prints
//!   every goroutine (a fatal error forces "all" even under `single`);
//!   `system` and `crash` add the runtime's frames; exit status 2, but
//!   `crash` raises SIGABRT (134).
//! - SIGQUIT: every goroutine with the runtime's frames under every level,
//!   `none` included (a runtime throw forces level 2); exit status 2, but
//!   `crash` raises SIGABRT.
//!
//! Also here, as SIGQUIT's dump is the subject: goroutines running on
//! other threads (blocked in a plain `std` call, spinning, in a system
//! call through the runtime) show as what they are, with their frames.
//!
//! No libtest harness (`harness = false`): the deadlock needs a process
//! whose only plain thread is `main` (see tests/deadlock.rs).

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use goroutine::{chan, go, run, select, Receiver};

const SCENARIO: &str = "GOROUTINE_GOTRACEBACK_SCENARIO";

/// The levels tried; `None`: unset.
const LEVELS: [Option<&str>; 6] = [
    None,
    Some("none"),
    Some("single"),
    Some("all"),
    Some("system"),
    Some("crash"),
];

#[inline(never)]
fn worker(rx: Receiver<u32>) -> u32 {
    rx.recv().unwrap_or(0)
}

/// Ends in a tail call of `time::sleep`: its frame must still show.
#[inline(never)]
fn sleeper() {
    goroutine::time::sleep(Duration::from_secs(3600))
}

/// Blocked in the kernel outside the runtime (a plain `std` sleep).
#[inline(never)]
fn plain_sleeper() -> u32 {
    std::thread::sleep(Duration::from_secs(3600));
    std::hint::black_box(1)
}

/// Blocked in a plain `read(2)` of a pipe nobody writes to.
#[inline(never)]
fn plain_reader(mut f: std::fs::File) -> usize {
    use std::io::Read;
    let mut b = [0u8; 1];
    let n = f.read(&mut b).unwrap_or(0);
    std::hint::black_box(n)
}

/// Computes without any runtime call.
#[inline(never)]
fn spinner() -> u64 {
    let mut x = 0u64;
    loop {
        x = std::hint::black_box(x.wrapping_add(1));
        if x == u64::MAX {
            return x;
        }
    }
}

/// In a system call the runtime knows of (`syscall_blocking`).
#[inline(never)]
fn in_syscall() -> u32 {
    goroutine::syscall_blocking(|| std::thread::sleep(Duration::from_secs(3600)));
    std::hint::black_box(2)
}

fn scenario(name: &str) {
    // SAFETY: a valid rlimit; `crash` must not leave core files behind.
    unsafe {
        let none = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        libc::setrlimit(libc::RLIMIT_CORE, &none);
    }
    match name {
        // Go: two workers on a channel nobody sends on, main in `select {}`.
        "deadlock" => run(|| {
            let (tx, rx) = chan::<u32>(0);
            for _ in 0..2 {
                let rx = rx.clone();
                go(move || worker(rx));
            }
            let _keep = tx;
            select! {}
        }),
        // Go: a worker on a channel, a sleeper, and main signals itself.
        "sigquit" => run(|| {
            let (tx, rx) = chan::<u32>(0);
            go(move || worker(rx));
            go(sleeper);
            goroutine::time::sleep(Duration::from_millis(200));
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(libc::getpid(), libc::SIGQUIT) };
            goroutine::time::sleep(Duration::from_secs(30));
            drop(tx);
        }),
        // Goroutines on other threads: blocked outside the runtime, spinning,
        // in a system call through the runtime; main signals itself.
        "sigquit_threads" => {
            let mut fds = [0; 2];
            // SAFETY: `fds` has room for the two descriptors.
            assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
            // SAFETY: a fresh descriptor we own; the write end stays open.
            let r = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fds[0]) };
            run(move || {
                go(plain_sleeper);
                go(move || plain_reader(r));
                go(spinner);
                go(in_syscall);
                goroutine::time::sleep(Duration::from_millis(300));
                // SAFETY: kill has no memory-safety preconditions.
                unsafe { libc::kill(libc::getpid(), libc::SIGQUIT) };
                goroutine::time::sleep(Duration::from_secs(30));
            })
        }
        other => panic!("unknown scenario {other}"),
    }
    std::process::exit(0);
}

/// What a report says, reduced (module note).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Facts {
    /// Exit code, or the signal that ended the process (negated).
    exit: i32,
    /// Goroutines shown with one of the program's own frames.
    own: usize,
    /// Whether the runtime's frames are shown.
    runtime_frames: bool,
}

/// Splits `text` into goroutine blocks (from a `goroutine N [` header to
/// the next blank line) and reduces it. `own_prefix` starts a frame of the
/// program, `runtime_prefix` a frame of the runtime.
fn facts(exit: i32, text: &str, own_prefix: &str, runtime_prefix: &str) -> Facts {
    let mut own = 0;
    let mut runtime_frames = false;
    let mut in_block = false;
    let mut block_is_own = false;
    for line in text.lines().chain(std::iter::once("")) {
        let is_header = line
            .strip_prefix("goroutine ")
            .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()));
        if is_header || line.is_empty() {
            if in_block && block_is_own {
                own += 1;
            }
            in_block = is_header;
            block_is_own = false;
            continue;
        }
        if !in_block {
            continue;
        }
        let frame = line.trim_start_matches('<');
        if frame.starts_with(own_prefix) {
            block_is_own = true;
        }
        if frame.starts_with(runtime_prefix) {
            runtime_frames = true;
        }
    }
    Facts {
        exit,
        own,
        runtime_frames,
    }
}

fn exit_of(status: std::process::ExitStatus) -> i32 {
    match (status.code(), status.signal()) {
        (Some(c), _) => c,
        (None, Some(s)) => -s,
        _ => i32::MIN,
    }
}

/// Runs `cmd` with `level` and returns its exit and stderr.
fn run_with(mut cmd: Command, level: Option<&str>) -> (i32, String) {
    cmd.env_remove("GOTRACEBACK")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(l) = level {
        cmd.env("GOTRACEBACK", l);
    }
    // SAFETY: only setrlimit, async-signal-safe, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let none = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &none);
            Ok(())
        });
    }
    let out = cmd.output().expect("run a scenario");
    (
        exit_of(out.status),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn ours(name: &str, level: Option<&str>) -> (Facts, String) {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.env(SCENARIO, name);
    let (exit, err) = run_with(c, level);
    (facts(exit, &err, "gotraceback::", "goroutine::"), err)
}

/// What this runtime must print (module note), with or without Go.
fn pinned(name: &str, level: Option<&str>) -> Facts {
    let crash = level == Some("crash");
    let exit = if crash { -libc::SIGABRT } else { 2 };
    match name {
        "deadlock" => Facts {
            exit,
            own: if level == Some("none") { 0 } else { 3 },
            runtime_frames: matches!(level, Some("system" | "crash")),
        },
        _ => Facts {
            exit,
            own: 3,
            runtime_frames: true,
        },
    }
}

fn pinned_behaviour() {
    for name in ["deadlock", "sigquit"] {
        for level in LEVELS {
            let (got, err) = ours(name, level);
            let want = pinned(name, level);
            assert_eq!(got, want, "{name} under GOTRACEBACK={level:?}:\n{err}");
            if name == "sigquit" {
                assert!(err.starts_with("SIGQUIT: quit\n"), "{err}");
                // The tail-called sleep keeps its caller's frame.
                assert!(err.contains("gotraceback::sleeper(...)"), "{err}");
            } else {
                assert!(
                    err.starts_with("fatal error: all goroutines are asleep - deadlock!"),
                    "{err}"
                );
            }
        }
    }
    println!("pinned_behaviour: ok");
}

const GO_DEADLOCK: &str = r#"package main

func worker(c chan int) { <-c }

func main() {
	c := make(chan int)
	go worker(c)
	go worker(c)
	select {}
}
"#;

const GO_SIGQUIT: &str = r#"package main

import (
	"os"
	"syscall"
	"time"
)

func worker(c chan int) { <-c }

func sleeper() { time.Sleep(time.Hour) }

func main() {
	c := make(chan int)
	go worker(c)
	go sleeper()
	time.Sleep(200 * time.Millisecond)
	syscall.Kill(os.Getpid(), syscall.SIGQUIT)
	time.Sleep(30 * time.Second)
}
"#;

/// `go` on the PATH, if any.
fn go_tool() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("go"))
        .find(|p| p.is_file())
}

/// Builds `src` with `go` into `dir`; the binary, or why not.
fn go_build(go: &Path, dir: &Path, name: &str, src: &str) -> Result<PathBuf, String> {
    let file = dir.join(format!("{name}.go"));
    std::fs::write(&file, src).map_err(|e| e.to_string())?;
    let bin = dir.join(name);
    let mut c = Command::new(go);
    c.arg("build")
        .arg("-o")
        .arg(&bin)
        .arg(&file)
        .current_dir(dir);
    // A bare environment (CI, sandboxes) may lack HOME: give Go its caches
    // here, and never let it reach the network.
    if std::env::var_os("GOCACHE").is_none() && std::env::var_os("HOME").is_none() {
        c.env("GOCACHE", dir.join("gocache"));
    }
    if std::env::var_os("GOPATH").is_none() && std::env::var_os("HOME").is_none() {
        c.env("GOPATH", dir.join("gopath"));
    }
    c.env("GOPROXY", "off").env("GOFLAGS", "");
    let out = c.output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(bin)
}

fn against_go() {
    let Some(go) = go_tool() else {
        println!("against_go: SKIPPED (no `go` on the PATH)");
        return;
    };
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("gotraceback");
    std::fs::create_dir_all(&dir).unwrap();
    for (name, src) in [("deadlock", GO_DEADLOCK), ("sigquit", GO_SIGQUIT)] {
        let bin = match go_build(&go, &dir, name, src) {
            Ok(b) => b,
            Err(e) => {
                println!("against_go: SKIPPED (`go build` failed: {e})");
                return;
            }
        };
        for level in LEVELS {
            let (exit, err) = run_with(Command::new(&bin), level);
            let theirs = facts(exit, &err, "main.", "runtime.");
            let (mine, my_err) = ours(name, level);
            assert_eq!(
                mine, theirs,
                "{name} under GOTRACEBACK={level:?}: ours (left) differs from Go's (right)\n\
                 --- ours:\n{my_err}\n--- Go's:\n{err}"
            );
        }
    }
    println!("against_go: ok");
}

/// The goroutine of a dump (its block of lines) in which `frame` shows.
fn block_of<'a>(dump: &'a str, frame: &str) -> Option<&'a str> {
    dump.split("\n\n").find(|b| b.contains(frame))
}

/// SIGQUIT shows each goroutine running on another thread as what it is,
/// with its frames, taken by its own thread (it showed `[running]` and
/// `stack unavailable` for each): blocked in a plain `std` call, with the
/// system call its thread is in; spinning; in a system call through the
/// runtime.
fn sigquit_threads() {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.env(SCENARIO, "sigquit_threads").env("GOMAXPROCS", "4");
    let (exit, err) = run_with(c, None);
    assert_eq!(exit, 2, "{err}");
    for (frame, header) in [
        // glibc sleeps in clock_nanosleep, others in nanosleep.
        ("gotraceback::plain_sleeper(...)", "nanosleep]:"),
        (
            "gotraceback::plain_reader(...)",
            "[syscall, blocked outside the runtime: read]:",
        ),
        ("gotraceback::spinner(...)", "[running]:"),
        ("gotraceback::in_syscall(...)", "[syscall]:"),
    ] {
        let block = block_of(&err, frame).unwrap_or_else(|| panic!("no {frame} in:\n{err}"));
        assert!(block.contains(header), "{header} for {frame}:\n{block}");
        if !header.starts_with('[') {
            assert!(
                block.contains("[syscall, blocked outside the runtime: "),
                "{block}"
            );
        }
        assert!(!block.contains("stack unavailable"), "{block}");
        assert!(block.contains("\ncreated by "), "{block}");
    }
    println!("sigquit_threads: ok");
}

fn main() {
    if let Ok(name) = std::env::var(SCENARIO) {
        scenario(&name);
        return;
    }
    if cfg!(any(
        goroutine_sanitize = "address",
        goroutine_sanitize = "thread"
    )) {
        // Sanitizer builds record no contexts (`g::switch`): no frames.
        println!("gotraceback: skipped in sanitizer builds");
        return;
    }
    pinned_behaviour();
    sigquit_threads();
    against_go();
}
