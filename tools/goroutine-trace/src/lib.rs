//! `goroutine-trace`: reads the execution traces written by the `goroutine`
//! runtime (format v4, `docs/trace-format.md`) and turns them into an HTML
//! timeline (`view`), Chrome/Perfetto JSON (`perfetto`) or a text summary
//! (`stats`). It only reads files: no dependency on the runtime.
//!
//! ```text
//! bytes --decode--> Trace (time-sorted events) --model::build--> Model --> html / perfetto / stats
//! ```
//!
//! `writer` and `gen` write traces: the tests use them to produce traces
//! without the runtime (a synthetic G/M/P simulation), and to craft bad files.

pub mod decode;
pub mod format;
pub mod gen;
pub mod html;
pub mod json;
pub mod model;
pub mod perfetto;
pub mod progress;
pub mod stats;
pub mod writer;
