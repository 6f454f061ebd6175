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

use std::io;
use std::path::Path;

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
/// A no-op if no trace is running.
pub fn stop() -> io::Result<()> {
    tracer::stop()
}

/// Whether a trace is being written.
// entry: one atomic load of the trace switch
pub fn is_enabled() -> bool {
    tracer::on()
}
