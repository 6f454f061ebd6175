//! Reading a trace file: header, batches, trailer, then one time-sorted event
//! list.
//!
//! The decoder never panics on bad input: every read is bounds-checked and
//! every failure is a [`DecodeError`] that says where it happened and how far
//! decoding got (complete batches and events before the fault). With
//! [`DecodeOptions::lenient`] a fault after the header ends decoding instead,
//! keeping everything read so far (including the complete events of a
//! truncated batch) and recording the error text in [`Trace::warning`]: the
//! way to look at the trace of a process that died while writing it.

use crate::format::{
    decode_field, field_count, g_decode, implied, may_imply, Event, GRegs, Header,
    BATCH_HEADER_LEN, BATCH_TAG, GO_START_LOCAL, G_START, HEADER_LEN, IMPLICIT, MAGIC, REGS_START,
    SAME_TIME, TRAILER_LEN, TRAILER_TAG, TYPE_BITS, VERSION,
};
use std::fmt;

/// An event with its time and the M whose batch carried it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimedEvent {
    /// Nanoseconds since the header's `start_ns`.
    pub ts: u64,
    pub m: u32,
    pub ev: Event,
    /// Whether the event carries a time of its own: false where it took
    /// its batch's previous event's (`SAME_TIME`, a GoStartLocal), a lower
    /// bound of its own (docs/trace-format.md, "Shared timestamps").
    pub stamped: bool,
}

/// A decoded trace.
#[derive(Clone, Debug)]
pub struct Trace {
    pub header: Header,
    /// All events, sorted by time (stable: batch order breaks ties).
    pub events: Vec<TimedEvent>,
    /// The trailer's `end_ns`, relative to `start_ns` (None: no trailer, lenient mode).
    pub end_ns: Option<u64>,
    /// The trailer's `dropped_events`.
    pub dropped: u64,
    pub batches: usize,
    /// Size of the file in bytes.
    pub bytes: u64,
    /// Lenient mode: why decoding stopped before the end of the file.
    pub warning: Option<String>,
}

impl Trace {
    /// Length of the trace: the trailer's end, or the last event if later.
    pub fn duration(&self) -> u64 {
        let last = self.events.last().map_or(0, |e| e.ts);
        self.end_ns.unwrap_or(0).max(last)
    }
}

#[derive(Clone, Copy, Debug, Default)]
pub struct DecodeOptions {
    /// Stop at the first fault after the header and keep what was read.
    pub lenient: bool,
}

/// How far decoding got before a fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reached {
    /// Complete batches decoded.
    pub batches: usize,
    /// Events decoded (in complete batches, plus those of the faulty batch before the fault).
    pub events: usize,
}

impl fmt::Display for Reached {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} complete batch{} and {} event{} were read before it",
            self.batches,
            if self.batches == 1 { "" } else { "es" },
            self.events,
            if self.events == 1 { "" } else { "s" }
        )
    }
}

/// What is wrong with an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventFault {
    /// A type byte outside 1..=`MAX_EVENT_TYPE`.
    UnknownType(u8),
    /// A uvarint longer than 10 bytes or above u64::MAX.
    BadVarint,
    /// The event's fields run past the end of its batch.
    PastBatchEnd,
    /// A GoName whose bytes are not UTF-8.
    NameNotUtf8,
    /// A GoStartLocal with no GoEnd, GoBlock or GoStop before it in its
    /// batch to take its P from.
    LocalStartAlone,
    /// An event with `SAME_TIME` set first in its batch: no time to share.
    SameTimeFirst,
    /// An event with `IMPLICIT` set before any event of its batch named a
    /// P: no P to imply.
    ImplicitNoP,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// The file is shorter than the 40-byte header.
    TooShort {
        len: u64,
    },
    BadMagic {
        found: [u8; 8],
    },
    UnsupportedVersion {
        version: u32,
    },
    /// A batch whose payload runs past the end of the file.
    TruncatedBatch {
        batch: usize,
        m: u32,
        offset: u64,
        payload_len: u64,
        available: u64,
        reached: Reached,
    },
    /// A batch header or the trailer cut by the end of the file.
    TruncatedRecord {
        what: &'static str,
        offset: u64,
        need: u64,
        available: u64,
        reached: Reached,
    },
    /// A bad event inside a batch (`offset`: file offset of its type byte).
    BadEvent {
        fault: EventFault,
        batch: usize,
        m: u32,
        offset: u64,
        reached: Reached,
    },
    /// A record tag that is neither a batch (0xB7) nor the trailer (0xE0).
    UnknownRecord {
        tag: u8,
        offset: u64,
        reached: Reached,
    },
    /// The file ends without a trailer (the tracer did not stop cleanly).
    MissingTrailer {
        reached: Reached,
    },
    /// Bytes after the trailer.
    TrailingData {
        offset: u64,
        len: u64,
    },
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::TooShort { len } => write!(
                f,
                "not a goroutine trace: {len} bytes, shorter than the {HEADER_LEN}-byte header"
            ),
            DecodeError::BadMagic { found } => write!(
                f,
                "not a goroutine trace: the file starts with {:?}, expected \"GRTRACE\\0\"",
                String::from_utf8_lossy(found)
            ),
            DecodeError::UnsupportedVersion { version } => write!(
                f,
                "unsupported trace format version {version}: this tool reads version {VERSION} only{}",
                if *version < VERSION {
                    "; the trace was written by an older runtime, whose format this tool no \
                     longer reads (read it with the goroutine-trace of that runtime's release)"
                } else {
                    "; the trace was written by a newer runtime: use its goroutine-trace"
                }
            ),
            DecodeError::TruncatedBatch {
                batch,
                m,
                offset,
                payload_len,
                available,
                reached,
            } => write!(
                f,
                "truncated batch #{batch} (M {m}) at byte {offset}: its header announces \
                 {payload_len} payload bytes but the file has only {available} left; {reached}"
            ),
            DecodeError::TruncatedRecord {
                what,
                offset,
                need,
                available,
                reached,
            } => write!(
                f,
                "truncated {what} at byte {offset}: needs {need} bytes, the file has {available} left; {reached}"
            ),
            DecodeError::BadEvent {
                fault,
                batch,
                m,
                offset,
                reached,
            } => {
                match fault {
                    EventFault::UnknownType(t) => write!(f, "unknown event type {t}")?,
                    EventFault::BadVarint => write!(f, "malformed varint in an event")?,
                    EventFault::PastBatchEnd => write!(f, "event runs past the end of its batch")?,
                    EventFault::NameNotUtf8 => write!(f, "GoName event with a non-UTF-8 name")?,
                    EventFault::LocalStartAlone => write!(
                        f,
                        "GoStartLocal event with no slice end before it in its batch"
                    )?,
                    EventFault::SameTimeFirst => write!(
                        f,
                        "an event that shares the previous event's time is first in its batch"
                    )?,
                    EventFault::ImplicitNoP => write!(
                        f,
                        "an event that implies its P comes before any P in its batch"
                    )?,
                }
                write!(f, " at byte {offset} (batch #{batch}, M {m}); {reached}")
            }
            DecodeError::UnknownRecord {
                tag,
                offset,
                reached,
            } => write!(
                f,
                "unknown record tag 0x{tag:02X} at byte {offset} (expected a batch 0xB7 or the trailer 0xE0); {reached}"
            ),
            DecodeError::MissingTrailer { reached } => write!(
                f,
                "the trace has no trailer (the tracer did not stop cleanly; --lenient reads it anyway); {reached}"
            ),
            DecodeError::TrailingData { offset, len } => {
                write!(f, "{len} unexpected bytes after the trailer at byte {offset}")
            }
        }
    }
}

impl std::error::Error for DecodeError {}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut x = [0; 4];
    x.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(x)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

/// Reads a uvarint at `*pos` in `b`, advancing `pos`.
pub fn read_uvarint(b: &[u8], pos: &mut usize) -> Result<u64, EventFault> {
    let mut x: u64 = 0;
    let mut shift = 0u32;
    loop {
        let Some(&byte) = b.get(*pos) else {
            return Err(EventFault::PastBatchEnd);
        };
        *pos += 1;
        if shift == 63 && byte > 1 {
            return Err(EventFault::BadVarint);
        }
        x |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(x);
        }
        shift += 7;
        if shift > 63 {
            return Err(EventFault::BadVarint);
        }
    }
}

/// Parses the 40-byte header.
pub fn decode_header(b: &[u8]) -> Result<Header, DecodeError> {
    if b.len() < 8 || b[..8] != MAGIC {
        if b.len() < HEADER_LEN && MAGIC.starts_with(&b[..b.len().min(8)]) {
            return Err(DecodeError::TooShort {
                len: b.len() as u64,
            });
        }
        let mut found = [0; 8];
        let n = b.len().min(8);
        found[..n].copy_from_slice(&b[..n]);
        return Err(DecodeError::BadMagic { found });
    }
    if b.len() < HEADER_LEN {
        return Err(DecodeError::TooShort {
            len: b.len() as u64,
        });
    }
    let version = u32_at(b, 8);
    if version != VERSION {
        return Err(DecodeError::UnsupportedVersion { version });
    }
    Ok(Header {
        version,
        flags: u32_at(b, 12),
        start_ns: u64_at(b, 16),
        unix_start_ns: u64_at(b, 24),
        gomaxprocs: u32_at(b, 32),
    })
}

/// Decodes the events of one batch payload (`base`: file offset of the
/// payload), appending to `out`. On a fault the events before it stay in `out`.
fn decode_batch(
    payload: &[u8],
    base: usize,
    m: u32,
    out: &mut Vec<TimedEvent>,
) -> Result<(), (EventFault, u64)> {
    let mut pos = 0;
    let mut ts: u64 = 0;
    let mut fields = [0u64; 4];
    let mut regs: GRegs = REGS_START;
    // The P of the batch's last GoEnd, GoBlock or GoStop (None: none yet).
    let mut slice_p: Option<u64> = None;
    while pos < payload.len() {
        let at = (base + pos) as u64;
        let byte = payload[pos];
        pos += 1;
        // `SAME_TIME`: no delta, the previous event's time (a GoStartLocal
        // never carries it: it has its own rule). `IMPLICIT`: the running
        // goroutine and the P are the registers'.
        let ty = byte & TYPE_BITS;
        let same = byte & SAME_TIME != 0;
        let imp = byte & IMPLICIT != 0;
        if (same && (ty == GO_START_LOCAL || ty == 0)) || (imp && !may_imply(ty)) {
            return Err((EventFault::UnknownType(byte), at));
        }
        if same && pos == 1 {
            return Err((EventFault::SameTimeFirst, at));
        }
        if imp && regs[2] == REGS_START[2] {
            return Err((EventFault::ImplicitNoP, at));
        }
        if ty == GO_START_LOCAL {
            // A GoStart with the timestamp and the P of the slice end
            // before it: no delta, one field.
            let p = slice_p.ok_or((EventFault::LocalStartAlone, at))?;
            let v = read_uvarint(payload, &mut pos).map_err(|f| (f, at))?;
            let g = g_decode(&mut regs, G_START, v);
            out.push(TimedEvent {
                ts,
                m,
                ev: Event::GoStart { g, p },
                stamped: false,
            });
            continue;
        }
        let n = field_count(ty).ok_or((EventFault::UnknownType(byte), at))?;
        let delta = if same {
            0
        } else {
            read_uvarint(payload, &mut pos).map_err(|f| (f, at))?
        };
        for (i, slot) in fields.iter_mut().take(n).enumerate() {
            let v = if imp && implied(ty, i) {
                None
            } else {
                Some(read_uvarint(payload, &mut pos).map_err(|f| (f, at))?)
            };
            *slot = decode_field(&mut regs, ty, i, v);
        }
        let name = if ty == 18 {
            let len = fields[1];
            let end = (pos as u64)
                .checked_add(len)
                .filter(|&e| e <= payload.len() as u64)
                .ok_or((EventFault::PastBatchEnd, at))? as usize;
            let s = std::str::from_utf8(&payload[pos..end])
                .map_err(|_| (EventFault::NameNotUtf8, at))?
                .to_owned();
            pos = end;
            Some(s)
        } else {
            None
        };
        ts = ts.wrapping_add(delta);
        if matches!(ty, 3 | 4 | 6) {
            slice_p = Some(fields[1]);
        }
        let ev =
            Event::from_fields(ty, &fields[..n], name).ok_or((EventFault::UnknownType(ty), at))?;
        out.push(TimedEvent {
            ts,
            m,
            ev,
            stamped: !same,
        });
    }
    Ok(())
}

/// One batch as it lies in the file (see [`decode_in_file_order`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    /// The batch header's M id.
    pub m: u32,
    /// The batch header's payload length in bytes.
    pub payload_len: u32,
    /// Its events in batch order, `ts` relative to the header's `start_ns`.
    pub events: Vec<TimedEvent>,
}

/// A trace as the file holds it: batches in flush order, each with its
/// events in its own order (nothing sorted).
#[derive(Clone, Debug)]
pub struct FileTrace {
    pub header: Header,
    pub batches: Vec<Batch>,
    /// The trailer's `end_ns`, relative to `start_ns`.
    pub end_ns: u64,
    /// The trailer's `dropped_events`.
    pub dropped: u64,
}

/// Decodes a whole, complete trace file without sorting: for checks of the
/// file's own structure (batch sizes, time order within each batch).
pub fn decode_in_file_order(b: &[u8]) -> Result<FileTrace, DecodeError> {
    let raw = read_all(b, DecodeOptions::default(), &mut |_, _| {})?;
    let mut batches = Vec::with_capacity(raw.batches.len());
    let mut events = raw.events.into_iter();
    let mut first = 0;
    for (i, &(m, payload_len, _)) in raw.batches.iter().enumerate() {
        let next = raw.batches.get(i + 1).map_or(usize::MAX, |b| b.2);
        let n = next.saturating_sub(first);
        batches.push(Batch {
            m,
            payload_len,
            events: events.by_ref().take(n).collect(),
        });
        first = next;
    }
    Ok(FileTrace {
        header: raw.header,
        batches,
        end_ns: raw.end_ns.unwrap_or(0),
        dropped: raw.dropped,
    })
}

/// Decodes a whole trace file held in memory. `progress(done, total)` is called
/// with byte offsets as batches are read.
pub fn decode(
    b: &[u8],
    opts: DecodeOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Trace, DecodeError> {
    let raw = read_all(b, opts, progress)?;
    let mut events = raw.events;
    // Batches of different Ms interleave in flush order: sort by time. The
    // sort is stable, so batch order breaks ties as the format asks.
    events.sort_by_key(|e| e.ts);
    Ok(Trace {
        header: raw.header,
        events,
        end_ns: raw.end_ns,
        dropped: raw.dropped,
        batches: raw.batches.len(),
        bytes: b.len() as u64,
        warning: raw.warning,
    })
}

/// What [`read_all`] found, in file order.
struct Raw {
    header: Header,
    events: Vec<TimedEvent>,
    /// Per complete batch: M id, payload length, index of its first event.
    batches: Vec<(u32, u32, usize)>,
    end_ns: Option<u64>,
    dropped: u64,
    warning: Option<String>,
}

/// Reads every record of the file in order (the common part of [`decode`]
/// and [`decode_in_file_order`]).
fn read_all(
    b: &[u8],
    opts: DecodeOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Raw, DecodeError> {
    let header = decode_header(b)?;
    let total = b.len() as u64;
    let mut events: Vec<TimedEvent> = Vec::with_capacity(b.len() / 6);
    let mut batch_list: Vec<(u32, u32, usize)> = Vec::new();
    let mut pos = HEADER_LEN;
    let mut end_ns = None;
    let mut dropped = 0;
    let mut warning = None;
    let mut since_report = 0usize;

    let result: Result<(), DecodeError> = loop {
        let batches = batch_list.len();
        let reached = Reached {
            batches,
            events: events.len(),
        };
        if pos >= b.len() {
            break Err(DecodeError::MissingTrailer { reached });
        }
        let tag = b[pos];
        let left = (b.len() - pos) as u64;
        match tag {
            BATCH_TAG => {
                if left < BATCH_HEADER_LEN as u64 {
                    break Err(DecodeError::TruncatedRecord {
                        what: "batch header",
                        offset: pos as u64,
                        need: BATCH_HEADER_LEN as u64,
                        available: left,
                        reached,
                    });
                }
                let m = u32_at(b, pos + 1);
                let len = u32_at(b, pos + 5) as usize;
                let start = pos + BATCH_HEADER_LEN;
                let avail = b.len() - start;
                if len > avail {
                    // Keep the complete events of the partial payload (lenient mode uses them).
                    let _ = decode_batch(&b[start..], start, m, &mut events);
                    break Err(DecodeError::TruncatedBatch {
                        batch: batches,
                        m,
                        offset: pos as u64,
                        payload_len: len as u64,
                        available: avail as u64,
                        reached: Reached {
                            batches,
                            events: events.len(),
                        },
                    });
                }
                let first = events.len();
                if let Err((fault, offset)) =
                    decode_batch(&b[start..start + len], start, m, &mut events)
                {
                    break Err(DecodeError::BadEvent {
                        fault,
                        batch: batches,
                        m,
                        offset,
                        reached: Reached {
                            batches,
                            events: events.len(),
                        },
                    });
                }
                batch_list.push((m, len as u32, first));
                pos = start + len;
                since_report += len;
                if since_report >= 1 << 20 {
                    since_report = 0;
                    progress(pos as u64, total);
                }
            }
            TRAILER_TAG => {
                if left < TRAILER_LEN as u64 {
                    break Err(DecodeError::TruncatedRecord {
                        what: "trailer",
                        offset: pos as u64,
                        need: TRAILER_LEN as u64,
                        available: left,
                        reached,
                    });
                }
                end_ns = Some(u64_at(b, pos + 1).saturating_sub(header.start_ns));
                dropped = u64_at(b, pos + 9);
                pos += TRAILER_LEN;
                if pos < b.len() {
                    break Err(DecodeError::TrailingData {
                        offset: pos as u64,
                        len: (b.len() - pos) as u64,
                    });
                }
                break Ok(());
            }
            _ => {
                break Err(DecodeError::UnknownRecord {
                    tag,
                    offset: pos as u64,
                    reached,
                })
            }
        }
    };
    if let Err(e) = result {
        if !opts.lenient {
            return Err(e);
        }
        warning = Some(e.to_string());
    }
    progress(total, total);
    Ok(Raw {
        header,
        events,
        batches: batch_list,
        end_ns,
        dropped,
        warning,
    })
}
