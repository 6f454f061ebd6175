//! The execution tracer: scheduler events written to a file in the binary
//! format of `docs/trace-format.md` (read by the `goroutine-trace` tool).
//!
//! ```no_run
//! goroutine::trace::start("app.trace")?;
//! goroutine::run(|| { /* the work to look at */ });
//! goroutine::trace::stop()?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! `GOROUTINE_TRACE=path` starts a trace when the runtime starts.
//!
//! # Stopping
//! Call [`stop`]: it writes the last events and the trailer and closes the
//! file. As a safety net, an `atexit` hook stops a running trace when the
//! process exits through `exit` (returning from `main`,
//! `std::process::exit`, the SIGQUIT dump); a process that aborts or dies
//! of a signal leaves a trace without its last batches and trailer.
//!
//! Off, each event site in the scheduler costs one predictable branch; on,
//! BENCHMARKS.md gives what a trace costs.
//!
//! # The flight recorder
//! [`FlightRecorder`] traces the same events into memory instead of a file
//! and keeps only the most recent ones: the last [`FlightConfig::age`] of
//! the trace, and never more than [`FlightConfig::max_bytes`] of full
//! batches (the oldest batches go first). [`FlightRecorder::write_to`]
//! writes that window out as a complete trace, which the `goroutine-trace`
//! tool opens like any other (a trace that starts in the middle of the
//! program), and recording goes on. It is meant to run all the time and be
//! written out when something goes wrong:
//!
//! ```no_run
//! use goroutine::trace::{FlightConfig, FlightRecorder};
//! let fr = FlightRecorder::new(FlightConfig::default());
//! fr.start()?;
//! // ... later, when a request was too slow:
//! fr.write_to(&mut std::fs::File::create("slow.trace")?)?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! While it runs, the runtime also writes its window to a new file
//! `goroutine-flight-<pid>-<n>.trace` in [`FlightConfig::dir`] and prints
//! the path on stderr when the process ends on SIGQUIT, on a deadlock
//! (`all goroutines are asleep`) or on a goroutine's panic under
//! `GOROUTINE_PANIC=abort`. `GOROUTINE_TRACE=flight:<seconds>` (or
//! `flight:<seconds>:<dir>`) starts one when the runtime starts, with the
//! default byte bound and, without a directory, `std::env::temp_dir()`.
//!
//! One session at a time: a flight recorder and a trace file exclude each
//! other ([`start`] fails while a flight recorder runs, and the reverse).
//! Memory: the ring's `max_bytes`, plus one 64 KiB batch in the making per
//! thread that records events, as for a trace file; writing a snapshot
//! copies the window once more for the time it takes. A snapshot stops the
//! recording for as long as it takes to collect every thread's batch (a
//! few microseconds): events in that moment are not recorded, and the
//! trace tool absorbs the gap as it does a trace's start.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::tracer;

/// Starts writing an execution trace to `path` (created or truncated).
/// Fails if a trace is already being written or the file cannot be
/// created. Starts the runtime if needed.
pub fn start(path: impl AsRef<Path>) -> io::Result<()> {
    let s = crate::runtime::start();
    tracer::start(path.as_ref(), s.gomaxprocs())
}

/// Stops the trace: flushes every thread's buffer, writes the trailer and
/// closes the file. Returns the first write error the writer met, if any.
/// A no-op if no trace is running (a [`FlightRecorder`] goes on).
pub fn stop() -> io::Result<()> {
    tracer::stop()
}

/// Whether a trace is being written or a flight recorder runs.
// entry: one atomic load of the trace switch
pub fn is_enabled() -> bool {
    tracer::on()
}

/// The flight recorder's bounds ([`FlightRecorder`]).
#[derive(Clone, Debug)]
pub struct FlightConfig {
    /// How far back a snapshot goes: the events of the last `age`, as far
    /// as `max_bytes` allows. Default 10 s.
    pub age: Duration,
    /// The most bytes of full batches kept in memory; the oldest batches
    /// are dropped beyond it, whatever their age. Default 16 MiB; at least
    /// one batch (64 KiB) is always kept.
    pub max_bytes: usize,
    /// Where the snapshots written on SIGQUIT, a deadlock or an abort go
    /// (`None`: `std::env::temp_dir()`).
    pub dir: Option<PathBuf>,
}

impl Default for FlightConfig {
    fn default() -> FlightConfig {
        FlightConfig {
            age: Duration::from_secs(10),
            max_bytes: tracer::FLIGHT_MAX_BYTES,
            dir: None,
        }
    }
}

/// Keeps the last seconds of the execution trace in memory, to write them
/// out when something goes wrong (the module note, "The flight recorder").
/// Go 1.25's `runtime/trace.FlightRecorder`.
#[derive(Debug)]
pub struct FlightRecorder {
    config: FlightConfig,
}

impl FlightRecorder {
    /// A recorder with these bounds; it records nothing until
    /// [`start`](FlightRecorder::start).
    // entry: builds a value, touches no runtime state
    pub fn new(config: FlightConfig) -> FlightRecorder {
        FlightRecorder { config }
    }

    /// Starts recording (and the runtime, if needed). Fails if a trace or
    /// a flight recorder is already running, or if `age` is zero.
    pub fn start(&self) -> io::Result<()> {
        if self.config.age.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "FlightConfig::age is zero",
            ));
        }
        let s = crate::runtime::start();
        tracer::flight_start(
            tracer::Flight {
                age: self.config.age,
                max_bytes: self.config.max_bytes,
                dir: self.config.dir.clone().unwrap_or_else(std::env::temp_dir),
            },
            s.gomaxprocs(),
        )
    }

    /// Writes the recorded window (the last `age`, within `max_bytes`) to
    /// `w` as a complete trace file and goes on recording. Returns the
    /// bytes written. Fails if no flight recorder is running (this one or
    /// the one `GOROUTINE_TRACE=flight:...` started: there is one per
    /// process).
    pub fn write_to(&self, w: &mut impl io::Write) -> io::Result<u64> {
        tracer::flight_write(w)
    }

    /// Stops recording and frees the ring; a no-op if no flight recorder
    /// runs (a trace file being written goes on).
    pub fn stop(&self) -> io::Result<()> {
        tracer::flight_stop()
    }

    /// Whether a flight recorder is running (this one or the
    /// environment's).
    pub fn is_running(&self) -> bool {
        crate::runtime::entry::call(tracer::flight_running)
    }
}
