//! A hand-written progress bar on stderr: drawn only when stderr is a
//! terminal, redrawn at most ten times a second, erased when done.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

pub struct Progress {
    enabled: bool,
    label: String,
    last: Option<Instant>,
    drawn: bool,
    unit_bytes: bool,
}

const WIDTH: usize = 30;

impl Progress {
    /// A bar for one phase. `enabled` is anded with "stderr is a terminal".
    pub fn new(label: &str, enabled: bool) -> Progress {
        Progress {
            enabled: enabled && std::io::stderr().is_terminal(),
            label: label.to_string(),
            last: None,
            drawn: false,
            unit_bytes: false,
        }
    }

    /// Show `done`/`total` as MiB instead of counts.
    pub fn bytes(mut self) -> Progress {
        self.unit_bytes = true;
        self
    }

    /// Next phase, same bar line.
    pub fn phase(&mut self, label: &str, unit_bytes: bool) {
        self.label = label.to_string();
        self.unit_bytes = unit_bytes;
        self.last = None;
    }

    pub fn update(&mut self, done: u64, total: u64) {
        if !self.enabled {
            return;
        }
        let now = Instant::now();
        if let Some(last) = self.last {
            if now.duration_since(last) < Duration::from_millis(100) && done < total {
                return;
            }
        }
        self.last = Some(now);
        let frac = if total == 0 {
            1.0
        } else {
            (done as f64 / total as f64).min(1.0)
        };
        let fill = (frac * WIDTH as f64) as usize;
        let amount = if self.unit_bytes {
            format!(
                "{:.1}/{:.1} MiB",
                done as f64 / 1048576.0,
                total as f64 / 1048576.0
            )
        } else {
            format!("{done}/{total}")
        };
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r{:<10} [{}{}] {:>3.0}% {}\x1b[K",
            self.label,
            "#".repeat(fill),
            ".".repeat(WIDTH - fill),
            frac * 100.0,
            amount
        );
        let _ = err.flush();
        self.drawn = true;
    }

    /// Erases the bar.
    pub fn finish(&mut self) {
        if self.drawn {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[K");
            let _ = err.flush();
            self.drawn = false;
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}
