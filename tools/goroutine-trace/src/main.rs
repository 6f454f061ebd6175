//! The `goroutine-trace` command line.

use goroutine_trace::decode::{self, DecodeOptions, Trace};
use goroutine_trace::model::{self, Model};
use goroutine_trace::progress::Progress;
use goroutine_trace::{gen, html, perfetto, stats};
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

const USAGE: &str = "\
goroutine-trace: read goroutine execution traces (docs/trace-format.md, format v4)

usage:
  goroutine-trace view     TRACE [-o OUT.html] [--top N]   self-contained HTML timeline
  goroutine-trace perfetto TRACE [-o OUT.json] [--no-flows] Chrome/Perfetto trace-event JSON
  goroutine-trace stats    TRACE                            text summary
  goroutine-trace generate OUT [--procs N] [--goroutines N] [--seed N]
                                                            write a synthetic trace (for testing)

options:
  -o, --output PATH   where to write (default: TRACE with .html / .json)
  --top N             rows of the per-goroutine table in the HTML page (default 500)
  --no-flows          no flow events for wakeups in the Perfetto output
  --lenient           read a damaged or unfinished trace up to the first fault
  -q, --quiet         no progress bar
  -h, --help          this text
";

struct Args {
    cmd: String,
    input: PathBuf,
    output: Option<PathBuf>,
    top: usize,
    flows: bool,
    lenient: bool,
    quiet: bool,
    procs: u32,
    goroutines: u32,
    seed: u64,
}

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let mut pos = Vec::new();
    let mut a = Args {
        cmd: String::new(),
        input: PathBuf::new(),
        output: None,
        top: 500,
        flows: true,
        lenient: false,
        quiet: false,
        procs: 4,
        goroutines: 400,
        seed: 1,
    };
    fn num<T: std::str::FromStr>(flag: &str, v: Option<String>) -> Result<T, String> {
        let v = v.ok_or_else(|| format!("{flag} needs a value"))?;
        v.parse()
            .map_err(|_| format!("{flag}: not a valid number: {v:?}"))
    }
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "-h" | "--help" | "help" => {
                print!("{USAGE}");
                std::process::exit(0);
            }
            "-V" | "--version" => {
                println!("goroutine-trace {}", env!("CARGO_PKG_VERSION"));
                std::process::exit(0);
            }
            "-o" | "--output" => {
                a.output = Some(it.next().ok_or("-o needs a path")?.into());
            }
            "--top" => a.top = num("--top", it.next())?,
            "--procs" => a.procs = num("--procs", it.next())?,
            "--goroutines" => a.goroutines = num("--goroutines", it.next())?,
            "--seed" => a.seed = num("--seed", it.next())?,
            "--no-flows" => a.flows = false,
            "--lenient" => a.lenient = true,
            "-q" | "--quiet" => a.quiet = true,
            s if s.starts_with('-') && s.len() > 1 => return Err(format!("unknown option {s}")),
            _ => pos.push(arg),
        }
    }
    let mut pos = pos.into_iter();
    a.cmd = pos.next().ok_or("no command given")?;
    a.input = pos.next().ok_or("no trace file given")?.into();
    if let Some(extra) = pos.next() {
        return Err(format!("unexpected argument {extra:?}"));
    }
    Ok(a)
}

/// Reads the file with a progress bar (traces can be hundreds of MiB).
fn read_file(path: &Path, bar: &mut Progress) -> std::io::Result<Vec<u8>> {
    let mut f = File::open(path)?;
    let total = f.metadata().map(|m| m.len()).unwrap_or(0);
    let mut buf = Vec::with_capacity(total as usize);
    let mut chunk = vec![0u8; 4 << 20];
    loop {
        let n = f.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        bar.update(buf.len() as u64, total.max(buf.len() as u64));
    }
    Ok(buf)
}

fn load(a: &Args, bar: &mut Progress) -> Result<(Trace, Model), String> {
    let name = a.input.display();
    let bytes = read_file(&a.input, bar).map_err(|e| format!("{name}: {e}"))?;
    bar.phase("decoding", true);
    let opts = DecodeOptions { lenient: a.lenient };
    let trace = decode::decode(&bytes, opts, &mut |d, t| bar.update(d, t))
        .map_err(|e| format!("{name}: {e}"))?;
    drop(bytes);
    if let Some(w) = &trace.warning {
        bar.finish();
        eprintln!("goroutine-trace: warning: {name}: {w}");
    }
    bar.phase("analysing", false);
    let model = model::build(&trace, &mut |d, t| bar.update(d, t));
    Ok((trace, model))
}

fn create(path: &Path) -> Result<BufWriter<File>, String> {
    File::create(path)
        .map(|f| BufWriter::with_capacity(1 << 20, f))
        .map_err(|e| format!("{}: {e}", path.display()))
}

fn run(a: &Args) -> Result<(), String> {
    let mut bar = Progress::new("reading", !a.quiet).bytes();
    match a.cmd.as_str() {
        "view" => {
            let (trace, model) = load(a, &mut bar)?;
            let out = a
                .output
                .clone()
                .unwrap_or_else(|| a.input.with_extension("html"));
            bar.phase("writing", false);
            let mut w = create(&out)?;
            let title = a
                .input
                .file_name()
                .map_or_else(|| "trace".into(), |s| s.to_string_lossy().into_owned());
            let opts = html::Options { top: a.top, title };
            html::write(&mut w, &trace, &model, &opts, &mut |d, t| bar.update(d, t))
                .and_then(|()| w.flush())
                .map_err(|e| format!("{}: {e}", out.display()))?;
            bar.finish();
            eprintln!(
                "wrote {} ({} Ps, {} goroutine slices, {} goroutines)",
                out.display(),
                model.lanes.len(),
                model.slice_count(),
                model.goroutines.len()
            );
        }
        "perfetto" => {
            let (_, model) = load(a, &mut bar)?;
            let out = a
                .output
                .clone()
                .unwrap_or_else(|| a.input.with_extension("json"));
            bar.phase("writing", false);
            let mut w = create(&out)?;
            let opts = perfetto::Options { flows: a.flows };
            let n = perfetto::write(&mut w, &model, opts, &mut |d, t| bar.update(d, t))
                .and_then(|n| w.flush().map(|()| n))
                .map_err(|e| format!("{}: {e}", out.display()))?;
            bar.finish();
            eprintln!(
                "wrote {}: {} goroutine slices, {} syscall spans, {} instants, {} counter samples, {} flows \
                 (open it in https://ui.perfetto.dev or chrome://tracing)",
                out.display(),
                n.slices,
                n.syscalls,
                n.instants,
                n.counters,
                n.flows
            );
        }
        "stats" => {
            let (trace, model) = load(a, &mut bar)?;
            bar.finish();
            print!("{}", stats::summary(&trace, &model));
        }
        "generate" => {
            let sc = gen::Scenario {
                procs: a.procs,
                goroutines: a.goroutines,
                seed: a.seed,
                ..gen::Scenario::default()
            };
            let g = gen::generate(&sc);
            std::fs::write(&a.input, &g.bytes)
                .map_err(|e| format!("{}: {e}", a.input.display()))?;
            eprintln!(
                "wrote {}: {} events, {} goroutines, {} slices",
                a.input.display(),
                g.events.len(),
                g.goroutines,
                g.slices
            );
        }
        other => {
            return Err(format!(
                "unknown command {other:?} (view, perfetto, stats, generate)"
            ))
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let a = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("goroutine-trace: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(&a) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("goroutine-trace: {e}");
            ExitCode::FAILURE
        }
    }
}
