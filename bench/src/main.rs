//! The benchmark tool: runs each workload on this runtime and on its peers
//! (Go, tokio, may, OS threads) at the same worker count, each run in its
//! own process, and prints one table of medians, peak RSS and the ratio
//! ours / best peer. See `bench --help`.

mod driver;
mod plot;
mod workloads;

use std::process::ExitCode;

const USAGE: &str = "\
usage: bench <workload>[,<workload>...]|all [--procs 1,2] [--runs N] [--json out.json] [--quick]
             [--runtimes ours,go,tokio,may,threads]
       bench plot <out.json> [--out DIR]
       bench list

Runs each workload on this runtime (ours), Go (bench/go/*.go, built on first
use into target/go-peers), tokio, may and OS threads, each run in its own
process, interleaved; prints median (min-max) over the runs, peak RSS and
ours / best peer. `prodcons` means prodcons0,prodcons10,prodcons100;
`fanout` means fanout4,fanout64,fanout1024; `echo` means
echo_100,echo_10k,echo_100_512b; `latency` means latency_yield,
latency_spin,latency_blocking,latency_hog,latency_mpsc,latency_echo (a
1 ms ticker's worst gap beside each load). Secondary figures of a run
(parked's spawn+park and wake-all times, timers' p50 and max oversleep,
hog_fairness' probe lateness, syscalls' peak threads, echo's and http's
p50/p99 latency, the latency family's p99 gap and ticks per second) get
rows <workload>.<metric>. Rates (req/s, ticks/s) are better higher,
every other figure lower. echo and http run each server in its own
process and the load generator (a one-thread tokio client; wrk) in another;
their RSS is the server's.
--quick: small sizes (a few seconds in all), for CI.
--runtimes: run only these (default all five); the others' cells say so.
BENCH_GO_PEERS=<dir>: take the Go peers as built from <dir> and build none
(for a machine without Go).";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("__worker") => driver::worker(&args[1..]),
        Some("__client") => driver::client(&args[1..]),
        Some("plot") => plot::main(&args[1..]),
        Some("list") => {
            print!("{}", workloads::list());
            ExitCode::SUCCESS
        }
        None | Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        Some(_) => match driver::Options::parse(&args) {
            Ok(opts) => driver::main(opts),
            Err(e) => {
                eprintln!("bench: {e}\n{USAGE}");
                ExitCode::from(2)
            }
        },
    }
}
