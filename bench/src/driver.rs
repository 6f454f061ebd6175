//! The driver (spawns one process per run, collects figures and peak RSS,
//! prints the table) and the worker mode it spawns.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use crate::workloads::{self, net, Cfg, Figure, Workload, RUNTIMES};
use serde_json::{json, Value as Json};

#[derive(Debug)]
pub struct Options {
    pub workloads: Vec<String>,
    pub procs: Vec<usize>,
    pub runs: usize,
    pub json: Option<PathBuf>,
    pub quick: bool,
    /// The runtimes to run (`--runtimes`); the others' cells say so.
    pub runtimes: Vec<&'static str>,
}

impl Options {
    pub fn parse(args: &[String]) -> Result<Options, String> {
        let mut o = Options {
            workloads: Vec::new(),
            procs: vec![1, 2],
            runs: 3,
            json: None,
            quick: false,
            runtimes: RUNTIMES.to_vec(),
        };
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let mut val = |name: &str| it.next().cloned().ok_or(format!("{name} needs a value"));
            match a.as_str() {
                "--procs" => {
                    o.procs = val("--procs")?
                        .split(',')
                        .map(|p| {
                            p.trim()
                                .parse()
                                .map_err(|_| format!("bad --procs value {p:?}"))
                        })
                        .collect::<Result<_, _>>()?;
                    if o.procs.contains(&0) {
                        return Err("--procs must be >= 1".into());
                    }
                }
                "--runs" => {
                    o.runs = val("--runs")?.parse().map_err(|_| "bad --runs value")?;
                    if o.runs == 0 {
                        return Err("--runs must be >= 1".into());
                    }
                }
                "--json" => o.json = Some(val("--json")?.into()),
                "--quick" => o.quick = true,
                "--runtimes" => {
                    o.runtimes = val("--runtimes")?
                        .split(',')
                        .map(|r| {
                            RUNTIMES
                                .iter()
                                .copied()
                                .find(|k| *k == r.trim())
                                .ok_or(format!(
                                    "unknown runtime {r:?} in --runtimes (one of {})",
                                    RUNTIMES.join(", ")
                                ))
                        })
                        .collect::<Result<_, _>>()?;
                }
                s if s.starts_with('-') => return Err(format!("unknown option {s}")),
                s => {
                    let known: Vec<&str> = workloads::all().iter().map(|w| w.name).collect();
                    for name in s.split(',') {
                        match name {
                            "all" => o.workloads.extend(known.iter().map(|s| s.to_string())),
                            "prodcons" => o.workloads.extend(
                                ["prodcons0", "prodcons10", "prodcons100"].map(String::from),
                            ),
                            "fanout" => o
                                .workloads
                                .extend(["fanout4", "fanout64", "fanout1024"].map(String::from)),
                            "echo" => o.workloads.extend(
                                ["echo_100", "echo_10k", "echo_100_512b"].map(String::from),
                            ),
                            "latency" => o.workloads.extend(LATENCY.map(String::from)),
                            n if known.contains(&n) => o.workloads.push(n.to_string()),
                            n => match workloads::NOT_YET.iter().find(|(w, _)| *w == n) {
                                Some((_, why)) => return Err(format!("{n}: {why}")),
                                None => {
                                    return Err(format!(
                                        "unknown workload {n:?} (see `bench list`)"
                                    ))
                                }
                            },
                        }
                    }
                }
            }
        }
        if o.workloads.is_empty() {
            return Err("no workload given".into());
        }
        o.workloads.dedup();
        Ok(o)
    }
}

/// The workloads `latency` names: the ticker beside each load
/// (`workloads::ticker`).
const LATENCY: [&str; 6] = [
    "latency_yield",
    "latency_spin",
    "latency_blocking",
    "latency_hog",
    "latency_mpsc",
    "latency_echo",
];

/// `bench __worker <runtime> <workload> <procs> <quick>`: one measurement,
/// one line `RESULT\t<value>\t<unit>\t<answer>` on stdout, then one line
/// `EXTRA\t<name>\t<value>\t<unit>` per secondary figure.
pub fn worker(args: &[String]) -> ExitCode {
    let [rt, name, procs, quick] = args else {
        eprintln!("usage: bench __worker <runtime> <workload> <procs> <0|1>");
        return ExitCode::from(2);
    };
    let Some(w) = workloads::all().into_iter().find(|w| w.name == name) else {
        eprintln!("unknown workload {name}");
        return ExitCode::from(2);
    };
    let cfg = Cfg {
        procs: procs.parse().expect("procs"),
        quick: quick == "1",
    };
    let f = match rt.as_str() {
        "ours" => Ok(w.ours),
        "tokio" => w.tokio,
        "may" => w.may,
        "threads" => w.threads,
        _ => Err("no such runtime in the worker"),
    };
    match f {
        Ok(f) => {
            print_figure(&f(cfg));
            ExitCode::SUCCESS
        }
        Err(why) => {
            eprintln!("{why}");
            ExitCode::from(3)
        }
    }
}

fn print_figure(fig: &Figure) {
    println!("RESULT\t{}\t{}\t{}", fig.value, fig.unit, fig.answer);
    for e in &fig.extra {
        println!("EXTRA\t{}\t{}\t{}", e.name, e.value, e.unit);
    }
}

/// `bench __client <workload> <procs> <quick> <port>`: a network workload's
/// load generator against the server at 127.0.0.1:port; prints the same
/// lines as a worker.
pub fn client(args: &[String]) -> ExitCode {
    let [name, procs, quick, port] = args else {
        eprintln!("usage: bench __client <workload> <procs> <0|1> <port>");
        return ExitCode::from(2);
    };
    let Some(c) = workloads::all()
        .into_iter()
        .find(|w| w.name == name)
        .and_then(|w| w.client)
    else {
        eprintln!("no network workload {name}");
        return ExitCode::from(2);
    };
    let (Ok(procs), Ok(port)) = (procs.parse(), port.parse()) else {
        eprintln!("bad procs or port");
        return ExitCode::from(2);
    };
    let cfg = Cfg {
        procs,
        quick: quick == "1",
    };
    print_figure(&(c.run)(cfg, port));
    ExitCode::SUCCESS
}

/// What one run of one runtime gave.
#[derive(Debug, PartialEq)]
struct Run {
    value: f64,
    unit: String,
    answer: String,
    rss_kb: u64,
    /// Secondary figures: name, value, unit.
    extra: Vec<(String, f64, String)>,
}

/// A table cell: the runs of one runtime for one workload and worker count.
#[derive(Default)]
struct Cell {
    values: Vec<f64>,
    rss_kb: Vec<u64>,
    unit: String,
    answer: String,
    error: Option<String>,
    not_applicable: Option<String>,
    /// Secondary figures of the same runs: name, values, unit.
    extra: Vec<(String, Vec<f64>, String)>,
}

impl Cell {
    fn push(&mut self, r: Run) {
        self.values.push(r.value);
        self.rss_kb.push(r.rss_kb);
        self.unit = r.unit;
        self.answer = r.answer;
        for (name, v, unit) in r.extra {
            match self.extra.iter_mut().find(|e| e.0 == name) {
                Some(e) => e.1.push(v),
                None => self.extra.push((name, vec![v], unit)),
            }
        }
    }

    /// The cell of secondary figure `name` (same runs, RSS and errors).
    fn extra_cell(&self, name: &str) -> Cell {
        let (values, unit) = match self.extra.iter().find(|e| e.0 == name) {
            Some((_, v, u)) => (v.clone(), u.clone()),
            None => (Vec::new(), String::new()),
        };
        Cell {
            values,
            rss_kb: self.rss_kb.clone(),
            unit,
            answer: self.answer.clone(),
            error: self.error.clone(),
            not_applicable: self.not_applicable.clone(),
            extra: Vec::new(),
        }
    }

    fn stats(&self) -> Option<(f64, f64, f64)> {
        if self.values.is_empty() || self.error.is_some() {
            return None;
        }
        let mut v = self.values.clone();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let med = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some((med, v[0], v[n - 1]))
    }
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn go_env(cmd: &mut Command) {
    let home = std::env::var("HOME").unwrap_or_else(|_| "/tmp".into());
    cmd.env("HOME", &home);
    if std::env::var_os("GOCACHE").is_none() {
        cmd.env("GOCACHE", "/tmp/gocache");
    }
    if std::env::var_os("GOPATH").is_none() {
        cmd.env("GOPATH", "/tmp/gopath");
    }
}

/// Builds bench/go/<prog>.go into target/go-peers/<prog> unless the binary
/// is newer than the source. With `BENCH_GO_PEERS=<dir>` set, the peers are
/// taken as built from that folder and nothing is built: for a machine
/// without Go, the binaries copied from one that has it.
fn go_binary(prog: &str) -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("BENCH_GO_PEERS") {
        let bin = PathBuf::from(dir).join(prog);
        return if bin.is_file() {
            Ok(bin)
        } else {
            Err(format!("BENCH_GO_PEERS: no {}", bin.display()))
        };
    }
    let src = root().join("bench/go").join(format!("{prog}.go"));
    let dir = root().join("target/go-peers");
    let bin = dir.join(prog);
    let mtime = |p: &PathBuf| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if let (Some(b), Some(s)) = (mtime(&bin), mtime(&src)) {
        if b >= s {
            return Ok(bin);
        }
    }
    let mut cmd = Command::new("go");
    go_env(&mut cmd);
    std::fs::create_dir_all(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
    eprintln!("bench: building {}", src.display());
    match cmd.arg("build").arg("-o").arg(&bin).arg(&src).output() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err("go not installed (apt-get install -y golang-go)".into())
        }
        Err(e) => Err(format!("go build: {e}")),
        Ok(out) if !out.status.success() => Err(format!(
            "go build failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Ok(_) => Ok(bin),
    }
}

/// Runs a child to completion (killed after `limit`), returning stdout and
/// its peak RSS from wait4, or an error naming what went wrong.
fn run_child(mut cmd: Command, limit: Duration) -> Result<(String, u64), String> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| format!("spawn: {e}"))?;
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let out_t = std::thread::spawn(move || read_capped(&mut so));
    let err_t = std::thread::spawn(move || read_capped(&mut se));
    let reaped = reap(child.id() as libc::pid_t, Instant::now() + limit)?;
    let stdout = out_t.join().unwrap_or_default();
    let stderr = err_t.join().unwrap_or_default();
    reaped.outcome(limit, &stderr)?;
    Ok((stdout, reaped.rss_kb))
}

/// How a child ended.
struct Reaped {
    status: i32,
    rss_kb: u64,
    killed: bool,
}

impl Reaped {
    /// Ok for a clean exit, else an error naming what went wrong.
    fn outcome(&self, limit: Duration, stderr: &str) -> Result<(), String> {
        let status = self.status;
        if self.killed {
            return Err(format!("timed out after {} s", limit.as_secs()));
        }
        if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
            return Ok(());
        }
        let how = if libc::WIFSIGNALED(status) {
            format!("killed by signal {}", libc::WTERMSIG(status))
        } else {
            format!("exit {}", libc::WEXITSTATUS(status))
        };
        Err(format!("{how}: {}", error_line(stderr)))
    }
}

/// Waits for child `pid` (SIGKILL after `deadline`); its status and peak
/// RSS from wait4.
fn reap(pid: libc::pid_t, deadline: Instant) -> Result<Reaped, String> {
    let mut killed = false;
    loop {
        let mut status = 0;
        // SAFETY: an all-zero rusage is valid; wait4 writes into locals.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `pid` is our child, not yet reaped (std never waits on it).
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
        if r == pid {
            return Ok(Reaped {
                status,
                rss_kb: ru.ru_maxrss as u64,
                killed,
            });
        }
        if r < 0 {
            return Err(format!("wait4: {}", std::io::Error::last_os_error()));
        }
        if !killed && Instant::now() > deadline {
            // SAFETY: signals our own unreaped child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            killed = true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Reads a child's pipe to the end, keeping only its first and last 32 KiB:
/// a failing peer can print megabytes (may prints a panic per coroutine),
/// and the driver's own RSS must stay small, as a child spawned through
/// vfork inherits the driver's RSS high-water mark in its `ru_maxrss`.
fn read_capped(r: &mut impl Read) -> String {
    const CAP: usize = 32 << 10;
    let (mut head, mut tail) = (Vec::new(), std::collections::VecDeque::new());
    let mut buf = [0u8; 8192];
    let mut skipped = false;
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &b in &buf[..n] {
            if head.len() < CAP {
                head.push(b);
            } else {
                tail.push_back(b);
                if tail.len() > CAP {
                    tail.pop_front();
                    skipped = true;
                }
            }
        }
    }
    if skipped {
        head.extend_from_slice(b"\n[...]\n");
    }
    head.extend(tail);
    String::from_utf8_lossy(&head).into_owned()
}

/// The most telling line of a failed child's stderr: a Rust panic's
/// message, Go's panic line, or the last line.
fn error_line(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if let Some(i) = lines.iter().position(|l| l.contains("panicked at")) {
        if let Some(msg) = lines.get(i + 1) {
            return msg.to_string();
        }
        return lines[i].to_string();
    }
    if let Some(l) = lines
        .iter()
        .find(|l| l.starts_with("panic:") || l.starts_with("fatal error:"))
    {
        return l.to_string();
    }
    lines
        .last()
        .map_or_else(|| "no output".into(), |l| l.to_string())
}

/// A command that runs this tool again (a worker or a load client): under
/// the emulator the tool itself runs under, if any, as the test suite's
/// children do (tests/common): `GOROUTINE_TEST_RUNNER`, else cargo's
/// runner variable for aarch64 when built for aarch64. CI's "aarch64 under
/// qemu" step runs `--quick` this way, as a smoke test.
fn self_command() -> Result<Command, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let runner = emulator();
    let words: Vec<&str> = runner.as_deref().unwrap_or("").split_whitespace().collect();
    Ok(match words.split_first() {
        Some((prog, args)) => {
            let mut cmd = Command::new(prog);
            cmd.args(args).arg(exe);
            cmd
        }
        None => Command::new(exe),
    })
}

/// The emulator this tool runs under, if any (see [`self_command`]).
fn emulator() -> Option<String> {
    std::env::var("GOROUTINE_TEST_RUNNER")
        .ok()
        .or_else(|| {
            cfg!(target_arch = "aarch64")
                .then(|| std::env::var("CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER").ok())
                .flatten()
        })
        .filter(|r| !r.trim().is_empty())
}

/// Why the Go column is skipped: under an emulator the Go peers would be
/// built for and run on the host, natively, beside our runtime emulated,
/// which compares nothing (CI's "aarch64 under qemu" runs `--quick` as a
/// smoke test of ours). The cell says SKIPPED, never a failure.
const GO_SKIPPED_EMULATED: &str =
    "SKIPPED: emulated run; Go peers are host binaries, not cross-built";

/// `GOROUTINE_TEST_TIME_SCALE` (tests/common), which lengthens a run's
/// time limit under an emulator; 1 when unset or not a number >= 1.
fn time_scale() -> f64 {
    std::env::var("GOROUTINE_TEST_TIME_SCALE")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|f| f.is_finite() && *f >= 1.0)
        .unwrap_or(1.0)
}

/// The command of one run: the Go program, or this tool's worker mode.
fn runtime_command(w: &Workload, rt: &str, procs: usize, quick: bool) -> Result<Command, String> {
    let cfg = Cfg { procs, quick };
    let mut cmd = if rt == "go" {
        let (prog, args) = (w.go?)(cfg);
        let mut cmd = Command::new(go_binary(prog)?);
        cmd.args(args);
        cmd
    } else {
        let mut cmd = self_command()?;
        cmd.args([
            "__worker",
            rt,
            w.name,
            &procs.to_string(),
            if quick { "1" } else { "0" },
        ]);
        cmd
    };
    cmd.env("GOMAXPROCS", procs.to_string());
    Ok(cmd)
}

fn run_once(w: &Workload, rt: &str, procs: usize, quick: bool) -> Result<Run, String> {
    let limit = Duration::from_secs(if quick { 30 } else { 120 }).mul_f64(time_scale());
    if w.client.is_some() {
        return run_served(w, rt, procs, quick, limit);
    }
    let cmd = runtime_command(w, rt, procs, quick)?;
    let (out, rss) = run_child(cmd, limit)?;
    if rt == "go" {
        parse_go(&out, rss)
    } else {
        parse_worker(&out, rss)
    }
}

/// One run of a network workload (see `workloads::net`): the runtime's
/// server in one process, the load generator (`bench __client`) in another;
/// the figures are the load generator's, the peak RSS the server's.
fn run_served(
    w: &Workload,
    rt: &str,
    procs: usize,
    quick: bool,
    limit: Duration,
) -> Result<Run, String> {
    let deadline = Instant::now() + limit;
    let mut cmd = runtime_command(w, rt, procs, quick)?;
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| format!("spawn: {e}"))?;
    let stdin = child.stdin.take();
    let so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let out_t = std::thread::spawn(move || {
        let mut r = BufReader::new(so);
        let mut head = String::new();
        while head.len() < 4096 {
            let mut line = String::new();
            if !matches!(r.read_line(&mut line), Ok(1..)) {
                break;
            }
            head.push_str(&line);
            if let Some(port) = net::parse_port(&line) {
                let _ = tx.send(port);
                break;
            }
        }
        drop(tx);
        head + &read_capped(&mut r)
    });
    let err_t = std::thread::spawn(move || read_capped(&mut se));
    let load = match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(port) => run_client(w, procs, quick, port, limit),
        Err(_) => Err("the server announced no port".to_string()),
    };
    // The server ends at end of file on its stdin: it gets 10 s for that
    // (a load generator that timed out is the error to report then).
    drop(stdin);
    let grace = Instant::now() + Duration::from_secs(10);
    let reaped = reap(child.id() as libc::pid_t, deadline.max(grace))?;
    let _ = out_t.join();
    let stderr = err_t.join().unwrap_or_default();
    match (reaped.outcome(limit, &stderr), load) {
        // A server that failed explains a failed load, unless it only
        // outlived a load generator that failed.
        (Err(_), Err(e)) if reaped.killed => Err(e),
        (Err(e), _) => Err(format!("server: {e}")),
        (Ok(()), load) => {
            let mut run = load?;
            run.rss_kb = reaped.rss_kb;
            Ok(run)
        }
    }
}

/// The load generator of a network workload against `port`; its RSS is
/// not reported.
fn run_client(
    w: &Workload,
    procs: usize,
    quick: bool,
    port: u16,
    limit: Duration,
) -> Result<Run, String> {
    let mut cmd = self_command()?;
    cmd.args([
        "__client",
        w.name,
        &procs.to_string(),
        if quick { "1" } else { "0" },
        &port.to_string(),
    ]);
    let (out, _) = run_child(cmd, limit).map_err(|e| format!("load: {e}"))?;
    parse_worker(&out, 0)
}

/// A worker's output: its `RESULT` line and any `EXTRA` lines.
fn parse_worker(out: &str, rss_kb: u64) -> Result<Run, String> {
    let line = out
        .lines()
        .find(|l| l.starts_with("RESULT\t"))
        .ok_or_else(|| format!("no RESULT line: {}", out.trim()))?;
    let f: Vec<&str> = line.split('\t').collect();
    if f.len() != 4 {
        return Err(format!("bad RESULT line: {line}"));
    }
    let value = f[1].parse().map_err(|_| format!("bad figure: {line}"))?;
    let mut extra = Vec::new();
    for line in out.lines().filter(|l| l.starts_with("EXTRA\t")) {
        let e: Vec<&str> = line.split('\t').collect();
        match e[..] {
            [_, name, v, unit] => {
                let v = v.parse().map_err(|_| format!("bad figure: {line}"))?;
                extra.push((name.to_string(), v, unit.to_string()));
            }
            _ => return Err(format!("bad EXTRA line: {line}")),
        }
    }
    Ok(Run {
        value,
        unit: f[2].into(),
        answer: f[3].into(),
        rss_kb,
        extra,
    })
}

/// A Go peer's output: the figure on the first line `<name> procs=P
/// [<param>=<v>...]: <value> <unit> [(comment)]`, secondary figures on
/// lines `<name> procs=P <metric>: <value> <unit>` (a word without `=`
/// names the metric). A wrong answer panics the Go program.
fn parse_go(out: &str, rss_kb: u64) -> Result<Run, String> {
    let mut main = None;
    let mut extra = Vec::new();
    for line in out.lines() {
        let Some((head, fig)) = line.split_once(": ") else {
            continue;
        };
        let head: Vec<&str> = head.split_whitespace().collect();
        if head.len() < 2 || !head[1].starts_with("procs=") {
            continue;
        }
        let (v, unit) = fig.trim().split_once(' ').unwrap_or((fig.trim(), ""));
        let value: f64 = v
            .parse()
            .map_err(|_| format!("bad figure in Go's output: {line}"))?;
        let unit = unit.split(" (").next().unwrap_or(unit).trim().to_string();
        match head[2..].iter().find(|w| !w.contains('=')) {
            Some(name) => extra.push((name.to_string(), value, unit)),
            None if main.is_none() => main = Some((value, unit)),
            None => {}
        }
    }
    let (value, unit) = main.ok_or_else(|| format!("no figure in Go's output: {}", out.trim()))?;
    Ok(Run {
        value,
        unit,
        answer: "checked by the Go program".into(),
        rss_kb,
        extra,
    })
}

fn not_applicable(w: &Workload, rt: &str, procs: usize) -> Option<String> {
    if procs < w.min_procs {
        return Some(format!("needs {} workers", w.min_procs));
    }
    if let Some(why) = w.client.as_ref().and_then(|c| (c.missing)()) {
        return Some(why.into());
    }
    let why = match rt {
        "tokio" => w.tokio.err(),
        "may" => w.may.err(),
        "threads" => w.threads.err(),
        "go" => {
            w.go.err()
                .or_else(|| emulator().map(|_| GO_SKIPPED_EMULATED))
        }
        _ => None,
    };
    why.map(String::from)
}

struct Row {
    /// The workload's name, or `<workload>.<metric>` for a secondary figure.
    workload: String,
    what: &'static str,
    procs: usize,
    cells: Vec<(&'static str, Cell)>,
}

impl Row {
    fn unit(&self) -> String {
        let c = self
            .cells
            .iter()
            .find(|(_, c)| !c.values.is_empty() && c.error.is_none());
        c.map(|(_, c)| c.unit.clone()).unwrap_or_default()
    }

    fn higher_is_better(&self) -> bool {
        workloads::higher_is_better(&self.unit())
    }

    /// ours / best peer and the best peer's name (best: the smallest
    /// figure, or the biggest for a rate).
    fn ratio(&self) -> Option<(f64, &'static str)> {
        let ours = self.cells.iter().find(|(r, _)| *r == "ours")?.1.stats()?.0;
        let peers = self
            .cells
            .iter()
            .filter(|(r, _)| *r != "ours")
            .filter_map(|(r, c)| c.stats().map(|s| (s.0, *r)));
        let best = if self.higher_is_better() {
            peers.max_by(|a, b| a.0.total_cmp(&b.0))?
        } else {
            peers.min_by(|a, b| a.0.total_cmp(&b.0))?
        };
        Some((ours / best.0, best.1))
    }

    /// Whether ratio `x` leaves ours level with or behind the best peer.
    fn not_ahead(&self, x: f64) -> bool {
        if self.higher_is_better() {
            x <= 1.0
        } else {
            x >= 1.0
        }
    }
}

fn fmt_num(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn cell_text(c: &Cell) -> String {
    if let Some(why) = &c.not_applicable {
        if why.starts_with("SKIPPED") {
            return why.clone();
        }
        return format!("n/a ({why})");
    }
    if let Some(e) = &c.error {
        let e: String = e.chars().take(70).collect();
        return format!("FAIL: {e}");
    }
    match c.stats() {
        Some((m, lo, hi)) => {
            let rss = c.rss_kb.iter().max().copied().unwrap_or(0);
            format!(
                "{} ({}-{}) {:.0}MB",
                fmt_num(m),
                fmt_num(lo),
                fmt_num(hi),
                rss as f64 / 1024.0
            )
        }
        None => "-".into(),
    }
}

pub fn main(o: Options) -> ExitCode {
    let all = workloads::all();
    let mut rows = Vec::new();
    let start = Instant::now();
    if let Some(runner) = emulator().filter(|_| o.runtimes.contains(&"go")) {
        eprintln!("bench: {GO_SKIPPED_EMULATED} (runner: {runner}); the Go column is not run");
    }
    for name in &o.workloads {
        let w = all.iter().find(|w| w.name == name).unwrap();
        let mut extra_rows = Vec::new();
        for &procs in &o.procs {
            let mut cells: Vec<(&'static str, Cell)> =
                RUNTIMES.iter().map(|r| (*r, Cell::default())).collect();
            for (rt, c) in cells.iter_mut() {
                c.not_applicable = if o.runtimes.contains(rt) {
                    not_applicable(w, rt, procs)
                } else {
                    Some("not run: --runtimes".into())
                };
            }
            for k in 1..=o.runs {
                for (rt, c) in cells.iter_mut() {
                    if c.not_applicable.is_some() || c.error.is_some() {
                        continue;
                    }
                    eprintln!(
                        "bench: {} procs={procs}: {rt} run {k} of {}",
                        w.name, o.runs
                    );
                    match run_once(w, rt, procs, o.quick) {
                        Ok(r) => c.push(r),
                        Err(e) => {
                            eprintln!("bench: {} procs={procs}: {rt} failed: {e}", w.name);
                            c.error = Some(e);
                        }
                    }
                }
            }
            let mut names: Vec<String> = Vec::new();
            for (_, c) in &cells {
                for (name, _, _) in &c.extra {
                    if !names.contains(name) {
                        names.push(name.clone());
                    }
                }
            }
            for name in names {
                let cells = cells
                    .iter()
                    .map(|(rt, c)| (*rt, c.extra_cell(&name)))
                    .collect();
                extra_rows.push(Row {
                    workload: format!("{}.{name}", w.name),
                    what: w.what,
                    procs,
                    cells,
                });
            }
            rows.push(Row {
                workload: w.name.to_string(),
                what: w.what,
                procs,
                cells,
            });
        }
        // Secondary figures after the workload's rows, grouped by metric.
        extra_rows.sort_by(|a, b| a.workload.cmp(&b.workload).then(a.procs.cmp(&b.procs)));
        rows.append(&mut extra_rows);
    }
    print_table(&rows, &o);
    eprintln!("bench: done in {:.1} s", start.elapsed().as_secs_f64());
    if let Some(path) = &o.json {
        let j = to_json(&rows, &o);
        if let Err(e) = std::fs::write(path, j.to_string() + "\n") {
            eprintln!("bench: writing {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        eprintln!("bench: wrote {}", path.display());
    }
    // Our runtime failing (a wrong answer included) fails the tool; a peer
    // failing is reported in its cell.
    let ours_failed = rows.iter().any(|r| {
        r.cells
            .iter()
            .any(|(rt, c)| *rt == "ours" && c.error.is_some())
    });
    if ours_failed {
        eprintln!("bench: our runtime failed a workload (see the table)");
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn print_table(rows: &[Row], o: &Options) {
    let mut head = vec!["workload".to_string(), "procs".into(), "unit".into()];
    head.extend(RUNTIMES.iter().map(|r| r.to_string()));
    head.push("ours/best".into());
    let mut table = vec![head];
    for r in rows {
        let mut line = vec![r.workload.clone(), r.procs.to_string(), r.unit()];
        line.extend(r.cells.iter().map(|(_, c)| cell_text(c)));
        line.push(match r.ratio() {
            Some((x, best)) if r.not_ahead(x) => format!("{x:.2} ({best}) <- not ahead"),
            Some((x, best)) => format!("{x:.2} ({best})"),
            None => "-".into(),
        });
        table.push(line);
    }
    let widths: Vec<usize> = (0..table[0].len())
        .map(|i| {
            table
                .iter()
                .map(|l| l[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    println!(
        "median (min-max) over {} run(s) per cell, each in its own process; peak RSS (max over runs); {}",
        o.runs,
        if o.quick { "--quick sizes" } else { "full sizes" }
    );
    for (i, l) in table.iter().enumerate() {
        let cells: Vec<String> = l
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        println!("| {} |", cells.join(" | "));
        if i == 0 {
            let sep: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
            println!("|-{}-|", sep.join("-|-"));
        }
    }
}

fn to_json(rows: &[Row], o: &Options) -> Json {
    let results: Vec<Json> = rows
        .iter()
        .map(|r| {
            let rts: serde_json::Map<String, Json> = r
                .cells
                .iter()
                .map(|(rt, c)| {
                    let mut f = json!({
                        "values": c.values,
                        "peak_rss_kb": c.rss_kb,
                        "unit": c.unit,
                        "answer": c.answer,
                        "error": c.error,
                        "not_applicable": c.not_applicable,
                    });
                    if let Some((m, lo, hi)) = c.stats() {
                        let obj = f.as_object_mut().expect("an object");
                        obj.insert("median".into(), json!(m));
                        obj.insert("min".into(), json!(lo));
                        obj.insert("max".into(), json!(hi));
                    }
                    (rt.to_string(), f)
                })
                .collect();
            let (ratio, best) = match r.ratio() {
                Some((x, b)) => (json!(x), json!(b)),
                None => (Json::Null, Json::Null),
            };
            json!({
                "workload": r.workload,
                "what": r.what,
                "procs": r.procs,
                "unit": r.unit(),
                "higher_is_better": r.higher_is_better(),
                "runtimes": rts,
                "ours_over_best_peer": ratio,
                "best_peer": best,
            })
        })
        .collect();
    json!({
        "quick": o.quick,
        "runs": o.runs,
        "procs": o.procs,
        "results": results,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn options() {
        let o = Options::parse(&args(
            "prodcons,skynet --procs 1,4 --runs 5 --quick --json x.json",
        ))
        .unwrap();
        assert_eq!(
            o.workloads,
            ["prodcons0", "prodcons10", "prodcons100", "skynet"]
        );
        assert_eq!(o.procs, [1, 4]);
        assert_eq!(o.runs, 5);
        assert!(o.quick);
        assert_eq!(o.json, Some(PathBuf::from("x.json")));
        let all = Options::parse(&args("all")).unwrap();
        assert_eq!(all.workloads.len(), workloads::all().len());
        assert_eq!(all.procs, [1, 2]);
        assert!(Options::parse(&args("nope")).is_err());
        assert_eq!(
            Options::parse(&args("echo,http")).unwrap().workloads,
            ["echo_100", "echo_10k", "echo_100_512b", "http"]
        );
        assert!(Options::parse(&args("spawn --runs 0")).is_err());
        assert!(Options::parse(&args("spawn --procs 0")).is_err());
        assert!(Options::parse(&args("--quick")).is_err());
        assert_eq!(all.runtimes, RUNTIMES);
        let some = Options::parse(&args("spawn --runtimes ours,go")).unwrap();
        assert_eq!(some.runtimes, ["ours", "go"]);
        assert!(Options::parse(&args("spawn --runtimes ours,java")).is_err());
    }

    #[test]
    fn medians() {
        let c = Cell {
            values: vec![3.0, 1.0, 2.0, 10.0],
            ..Cell::default()
        };
        assert_eq!(c.stats(), Some((2.5, 1.0, 10.0)));
        let c = Cell {
            values: vec![3.0],
            error: Some("x".into()),
            ..Cell::default()
        };
        assert_eq!(c.stats(), None);
    }

    #[test]
    fn ratio_and_mark() {
        let cell = |v: f64| Cell {
            values: vec![v],
            ..Cell::default()
        };
        let failed = Cell {
            error: Some("boom".into()),
            ..Cell::default()
        };
        let row = Row {
            workload: "w".into(),
            what: "",
            procs: 1,
            cells: vec![
                ("ours", cell(50.0)),
                ("go", cell(100.0)),
                ("tokio", cell(40.0)),
                ("may", failed),
            ],
        };
        assert_eq!(row.ratio(), Some((1.25, "tokio")));
        assert!(row.not_ahead(1.25) && row.not_ahead(1.0) && !row.not_ahead(0.8));
        assert_eq!(cell_text(&row.cells[3].1), "FAIL: boom");
    }

    #[test]
    fn ratio_of_a_rate() {
        let cell = |v: f64| Cell {
            values: vec![v],
            unit: "req/s".into(),
            ..Cell::default()
        };
        let mut row = Row {
            workload: "echo_100".into(),
            what: "",
            procs: 1,
            cells: vec![
                ("ours", cell(50.0)),
                ("go", cell(100.0)),
                ("tokio", cell(40.0)),
            ],
        };
        assert!(row.higher_is_better());
        // Best is the biggest rate; below 1 ours is behind.
        assert_eq!(row.ratio(), Some((0.5, "go")));
        assert!(row.not_ahead(0.5) && row.not_ahead(1.0) && !row.not_ahead(1.2));
        row.cells[0].1.values = vec![120.0];
        assert_eq!(row.ratio(), Some((1.2, "go")));
    }

    #[test]
    fn new_workloads_parse() {
        let o = Options::parse(&args("pingpong_cross,parked_1m,fib,parked")).unwrap();
        assert_eq!(
            o.workloads,
            ["pingpong_cross", "parked_1m", "fib", "parked"]
        );
        let o = Options::parse(&args("timers,timers_churn,syscalls,hog_fairness")).unwrap();
        assert_eq!(
            o.workloads,
            ["timers", "timers_churn", "syscalls", "hog_fairness"]
        );
        let o = Options::parse(&args("echo_10k,http,echo_100_512b")).unwrap();
        assert_eq!(o.workloads, ["echo_10k", "http", "echo_100_512b"]);
        let o = Options::parse(&args("latency,latency_echo")).unwrap();
        assert_eq!(o.workloads, LATENCY);
        for name in LATENCY {
            assert!(workloads::all().iter().any(|w| w.name == name), "{name}");
        }
    }

    #[test]
    fn min_procs() {
        let all = workloads::all();
        let cross = all.iter().find(|w| w.name == "pingpong_cross").unwrap();
        for rt in RUNTIMES {
            assert_eq!(
                not_applicable(cross, rt, 1).as_deref(),
                Some("needs 2 workers")
            );
            assert_eq!(not_applicable(cross, rt, 2), None, "{rt}");
        }
        let fib = all.iter().find(|w| w.name == "fib").unwrap();
        assert_eq!(not_applicable(fib, "ours", 1), None);
        assert!(not_applicable(fib, "threads", 1).is_some());
    }

    #[test]
    fn go_output() {
        let out = "parked procs=2: 2722 B/parked (100000 goroutines; wake 439 ns per goroutine)\n\
                   parked procs=2 spawn_park: 1779 ns/goroutine\n\
                   parked procs=2 wake_all: 43.895 ms\n";
        let r = parse_go(out, 7).unwrap();
        assert_eq!(
            (r.value, r.unit.as_str(), r.rss_kb),
            (2722.0, "B/parked", 7)
        );
        assert_eq!(
            r.extra,
            [
                ("spawn_park".to_string(), 1779.0, "ns/goroutine".to_string()),
                ("wake_all".to_string(), 43.895, "ms".to_string())
            ]
        );
        let r = parse_go("yield procs=2 goroutines=100: 130.9 ns/yield\n", 0).unwrap();
        assert_eq!((r.value, r.unit.as_str()), (130.9, "ns/yield"));
        assert!(r.extra.is_empty());
        let r = parse_go("building\nfib procs=1: 4.734 ms (fib(30) = 832040)\n", 0).unwrap();
        assert_eq!((r.value, r.unit.as_str()), (4.734, "ms"));
        assert!(r.extra.is_empty());
        assert!(parse_go("panic: wrong\n", 0).is_err());
        assert!(parse_go("x procs=1: fast ms\n", 0).is_err());
    }

    #[test]
    fn worker_output() {
        let out = "noise\nRESULT\t4763.5\tB/parked\t100 woke\nEXTRA\tspawn_park\t2141.6\tns/goroutine\nEXTRA\twake_all\t317.6\tms\n";
        let r = parse_worker(out, 3).unwrap();
        assert_eq!(
            (r.value, r.unit.as_str(), r.answer.as_str()),
            (4763.5, "B/parked", "100 woke")
        );
        assert_eq!(r.extra.len(), 2);
        assert_eq!(
            r.extra[1],
            ("wake_all".to_string(), 317.6, "ms".to_string())
        );
        assert!(parse_worker("RESULT\t1\tms\n", 0).is_err());
        assert!(parse_worker("nothing\n", 0).is_err());
        assert!(parse_worker("RESULT\t1\tms\tok\nEXTRA\tx\t1\n", 0).is_err());
    }

    #[test]
    fn extra_cells() {
        let run = |v: f64, wake: f64| Run {
            value: v,
            unit: "B/parked".into(),
            answer: "ok".into(),
            rss_kb: 10,
            extra: vec![("wake_all".into(), wake, "ms".into())],
        };
        let mut c = Cell::default();
        c.push(run(1.0, 5.0));
        c.push(run(3.0, 7.0));
        assert_eq!(c.stats(), Some((2.0, 1.0, 3.0)));
        let w = c.extra_cell("wake_all");
        assert_eq!(w.stats(), Some((6.0, 5.0, 7.0)));
        assert_eq!((w.unit.as_str(), w.rss_kb.len()), ("ms", 2));
        assert_eq!(c.extra_cell("nope").stats(), None);
        let failed = Cell {
            error: Some("boom".into()),
            ..Cell::default()
        };
        assert_eq!(cell_text(&failed.extra_cell("wake_all")), "FAIL: boom");
    }

    /// An emulated run's Go column says SKIPPED, with its reason, in the
    /// table (not "n/a", not a failure); other reasons keep "n/a".
    #[test]
    fn skipped_cells() {
        let skipped = Cell {
            not_applicable: Some(GO_SKIPPED_EMULATED.into()),
            ..Cell::default()
        };
        assert_eq!(cell_text(&skipped), GO_SKIPPED_EMULATED);
        assert!(cell_text(&skipped.extra_cell("x")).starts_with("SKIPPED: emulated"));
        let na = Cell {
            not_applicable: Some("needs 2 workers".into()),
            ..Cell::default()
        };
        assert_eq!(cell_text(&na), "n/a (needs 2 workers)");
    }

    #[test]
    fn panic_messages() {
        let rust = "thread 'main' panicked at src/x.rs:1:2:\nskynet: wrong sum\nnote: run with RUST_BACKTRACE=1\n";
        assert_eq!(error_line(rust), "skynet: wrong sum");
        let go = "panic: wrong\n\ngoroutine 1 [running]:\nmain.main()\n";
        assert_eq!(error_line(go), "panic: wrong");
        assert_eq!(error_line(""), "no output");
    }
}
