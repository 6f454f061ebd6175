//! Writing format-v4 traces, the way the runtime's tracer does: one buffer per
//! M, each flushed as a batch when full, so batches of different Ms interleave
//! in the file in flush order and the reader has to sort. Used by the
//! synthetic generator (`gen.rs`) and by the tests to craft (bad) files.

use crate::format::{
    encode_field, implicit, implied, Event, GRegs, BATCH_SIZE, BATCH_TAG, IMPLICIT, MAGIC,
    REGS_START, TRAILER_TAG, VERSION,
};
use std::collections::BTreeMap;

/// Appends `x` as an unsigned LEB128 varint.
pub fn put_uvarint(out: &mut Vec<u8>, mut x: u64) {
    while x >= 0x80 {
        out.push((x as u8) | 0x80);
        x >>= 7;
    }
    out.push(x as u8);
}

/// Appends one event as the first of a batch: type, `ts_delta`, fields
/// (and GoName's bytes).
pub fn encode_event(out: &mut Vec<u8>, ts_delta: u64, ev: &Event) {
    encode_event_after(out, ts_delta, ev, &mut REGS_START.clone());
}

/// Appends one event after others of its batch, `regs` the batch's
/// registers so far ([`REGS_START`] at its start), which it updates:
/// goroutine ids are written as differences from them, and the running
/// goroutine and P left out where they equal them ([`IMPLICIT`]), as the
/// runtime writes them.
pub fn encode_event_after(out: &mut Vec<u8>, ts_delta: u64, ev: &Event, regs: &mut GRegs) {
    let ty = ev.ty();
    let (fields, n) = ev.fields();
    let imp = implicit(regs, ty, &fields[..n]);
    out.push(if imp { ty | IMPLICIT } else { ty });
    put_uvarint(out, ts_delta);
    for (i, &f) in fields[..n].iter().enumerate() {
        if !(imp && implied(ty, i)) {
            put_uvarint(out, encode_field(regs, ty, i, f));
        }
    }
    if let Event::GoName { name, .. } = ev {
        out.extend_from_slice(name.as_bytes());
    }
}

/// The 40-byte header.
pub fn header_bytes(version: u32, start_ns: u64, unix_start_ns: u64, gomaxprocs: u32) -> Vec<u8> {
    let mut h = Vec::with_capacity(40);
    h.extend_from_slice(&MAGIC);
    h.extend_from_slice(&version.to_le_bytes());
    h.extend_from_slice(&0u32.to_le_bytes());
    h.extend_from_slice(&start_ns.to_le_bytes());
    h.extend_from_slice(&unix_start_ns.to_le_bytes());
    h.extend_from_slice(&gomaxprocs.to_le_bytes());
    h.extend_from_slice(&0u32.to_le_bytes());
    h
}

/// Appends a batch record.
pub fn put_batch(out: &mut Vec<u8>, m: u32, payload: &[u8]) {
    out.push(BATCH_TAG);
    out.extend_from_slice(&m.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(payload);
}

/// Appends the trailer.
pub fn put_trailer(out: &mut Vec<u8>, end_ns: u64, dropped: u64) {
    out.push(TRAILER_TAG);
    out.extend_from_slice(&end_ns.to_le_bytes());
    out.extend_from_slice(&dropped.to_le_bytes());
}

struct MBuf {
    data: Vec<u8>,
    /// Absolute time of the buffer's last event (None: the buffer is empty,
    /// the next event's delta is relative to `start_ns`).
    last: Option<u64>,
    /// The batch's goroutine id registers.
    regs: GRegs,
}

/// An in-memory trace writer with per-M buffers.
pub struct TraceWriter {
    out: Vec<u8>,
    bufs: BTreeMap<u32, MBuf>,
    start_ns: u64,
    batch_size: usize,
    scratch: Vec<u8>,
}

impl TraceWriter {
    pub fn new(start_ns: u64, unix_start_ns: u64, gomaxprocs: u32) -> TraceWriter {
        TraceWriter {
            out: header_bytes(VERSION, start_ns, unix_start_ns, gomaxprocs),
            bufs: BTreeMap::new(),
            start_ns,
            batch_size: BATCH_SIZE,
            scratch: Vec::new(),
        }
    }

    /// Flush each M's buffer at `n` bytes instead of 64 KiB (small batches
    /// make many interleavings in small tests).
    pub fn batch_size(mut self, n: usize) -> TraceWriter {
        self.batch_size = n.max(16);
        self
    }

    /// Records `ev` on M `m` at `ts` nanoseconds after `start_ns`. Times of one
    /// M must not decrease (a decrease is written as delta 0).
    pub fn event(&mut self, m: u32, ts: u64, ev: &Event) {
        let abs = self.start_ns + ts;
        let buf = self.bufs.entry(m).or_insert_with(|| MBuf {
            data: Vec::new(),
            last: None,
            regs: REGS_START,
        });
        let delta = match buf.last {
            Some(last) => abs.saturating_sub(last),
            None => ts,
        };
        self.scratch.clear();
        let mut regs = buf.regs;
        encode_event_after(&mut self.scratch, delta, ev, &mut regs);
        if !buf.data.is_empty() && buf.data.len() + self.scratch.len() > self.batch_size {
            put_batch(&mut self.out, m, &buf.data);
            buf.data.clear();
            // A new batch starts over relative to start_ns.
            self.scratch.clear();
            regs = REGS_START;
            encode_event_after(&mut self.scratch, ts, ev, &mut regs);
        }
        buf.regs = regs;
        buf.data.extend_from_slice(&self.scratch);
        buf.last = Some(abs.max(buf.last.unwrap_or(0)));
    }

    /// Flushes every M's buffer (in M order) and appends the trailer.
    pub fn finish(mut self, end_ts: u64, dropped: u64) -> Vec<u8> {
        for (&m, buf) in &self.bufs {
            if !buf.data.is_empty() {
                put_batch(&mut self.out, m, &buf.data);
            }
        }
        put_trailer(&mut self.out, self.start_ns + end_ts, dropped);
        self.out
    }
}
