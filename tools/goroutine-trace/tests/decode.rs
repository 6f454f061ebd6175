//! The decoder against the generator (round trip) and against bad files.

use goroutine_trace::decode::{
    decode, DecodeError, DecodeOptions, EventFault, Reached, TimedEvent,
};
use goroutine_trace::format::{Event, HEADER_LEN, VERSION};
use goroutine_trace::gen::{generate, Scenario};
use goroutine_trace::writer::{encode_event, header_bytes, put_batch, put_trailer, TraceWriter};
use goroutine_trace::{html, model, perfetto};
use std::collections::BTreeMap;

fn strict(b: &[u8]) -> Result<goroutine_trace::decode::Trace, DecodeError> {
    decode(b, DecodeOptions::default(), &mut |_, _| {})
}

fn lenient(b: &[u8]) -> Result<goroutine_trace::decode::Trace, DecodeError> {
    decode(b, DecodeOptions { lenient: true }, &mut |_, _| {})
}

/// (offset, m, payload_len) of every batch of a well-formed file.
fn batches(b: &[u8]) -> Vec<(usize, u32, usize)> {
    let mut out = Vec::new();
    let mut pos = HEADER_LEN;
    while b[pos] == 0xB7 {
        let m = u32::from_le_bytes(b[pos + 1..pos + 5].try_into().unwrap());
        let len = u32::from_le_bytes(b[pos + 5..pos + 9].try_into().unwrap()) as usize;
        out.push((pos, m, len));
        pos += 9 + len;
    }
    assert_eq!(b[pos], 0xE0);
    assert_eq!(pos + 17, b.len());
    out
}

fn per_m(events: &[TimedEvent]) -> BTreeMap<u32, Vec<(u64, Event)>> {
    let mut map: BTreeMap<u32, Vec<(u64, Event)>> = BTreeMap::new();
    for e in events {
        map.entry(e.m).or_default().push((e.ts, e.ev.clone()));
    }
    map
}

#[test]
fn round_trip_against_the_generator() {
    for seed in 1..=4 {
        let sc = Scenario {
            seed,
            procs: 2 + seed as u32,
            batch_size: 512 << seed,
            ..Scenario::default()
        };
        let g = generate(&sc);
        let t = strict(&g.bytes).expect("a generated trace decodes");
        assert_eq!(t.header.version, VERSION);
        assert_eq!(t.header.gomaxprocs, sc.procs);
        assert_eq!(t.header.start_ns, g.start_ns);
        assert_eq!(t.end_ns, Some(g.end_ns));
        assert_eq!(t.dropped, 0);
        assert_eq!(t.warning, None);
        assert_eq!(t.batches, batches(&g.bytes).len());
        assert!(
            t.batches > 8,
            "small batches interleave: {} batches",
            t.batches
        );
        assert_eq!(t.events.len(), g.events.len());
        // Sorted by time, and each M's sequence is exactly what was written.
        assert!(t.events.windows(2).all(|w| w[0].ts <= w[1].ts));
        assert_eq!(per_m(&t.events), per_m(&g.events));
        // Every event type appears in the scenario.
        let m = model::build(&t, &mut |_, _| {});
        for (ty, &n) in m.event_counts.iter().enumerate().skip(1) {
            assert!(n > 0, "seed {seed}: no events of type {ty}");
        }
        assert_eq!(m.slice_count(), g.slices, "seed {seed}");
        assert_eq!(m.goroutines.len(), g.goroutines);
        assert_eq!(
            m.goroutines.iter().filter(|g| g.ended.is_some()).count(),
            g.goroutines
        );
    }
}

#[test]
fn batches_interleave_out_of_time_order() {
    let g = generate(&Scenario::default());
    let bs = batches(&g.bytes);
    let ms: std::collections::HashSet<u32> = bs.iter().map(|b| b.1).collect();
    assert!(ms.len() >= 4, "several Ms: {ms:?}");
    // Some batch starts earlier than the previous batch's last event: the
    // decoder must sort.
    let first_ts = |&(off, _, len): &(usize, u32, usize)| {
        let mut one = header_bytes(VERSION, g.start_ns, 0, 1);
        put_batch(&mut one, 0, &g.bytes[off + 9..off + 9 + len]);
        put_trailer(&mut one, g.start_ns, 0);
        let t = strict(&one).unwrap();
        (t.events.first().unwrap().ts, t.events.last().unwrap().ts)
    };
    let spans: Vec<_> = bs.iter().map(first_ts).collect();
    assert!(spans.windows(2).any(|w| w[1].0 < w[0].1));
}

#[test]
fn every_event_survives_the_writer() {
    let evs = vec![
        Event::GoCreate {
            g: u64::MAX,
            parent: 0,
            p: 1 << 40,
        },
        Event::GoStart { g: 1, p: 0 },
        Event::GoStop {
            g: 1,
            p: 0,
            reason: 2,
        },
        Event::GoBlock {
            g: 1,
            p: 0,
            wait_reason: 999,
        },
        Event::GoUnblock {
            g: 1,
            by_g: 2,
            p: u32::MAX as u64,
        },
        Event::GoEnd { g: 1, p: 0 },
        Event::Steal {
            thief_p: 1,
            victim_p: 0,
            count: 128,
        },
        Event::ProcStart { p: 3 },
        Event::ProcStop { p: 3 },
        Event::MPark,
        Event::MWake,
        Event::SyscallEnter { g: 5, p: 1 },
        Event::SyscallExit {
            g: 5,
            p: 1,
            fast: 1,
        },
        Event::SyscallHandoff { p: 1 },
        Event::Preempt { g: 5, p: 1 },
        Event::TimerFire { p: 0, count: 3 },
        Event::NetpollReady { count: 7 },
        Event::GoName {
            g: 5,
            name: String::new(),
        },
        Event::GoName {
            g: 6,
            name: "ünï \"<x>\" ".repeat(40),
        },
        Event::RunqSample {
            p: 0,
            local_len: 256,
            global_len: 1 << 33,
        },
        Event::GoCount {
            runnable: 1,
            running: 2,
            waiting: 3,
            syscall: 4,
        },
    ];
    let mut w = TraceWriter::new(u64::MAX / 4, 42, 4).batch_size(64);
    for (i, e) in evs.iter().enumerate() {
        w.event((i % 3) as u32, i as u64 * 1_000_000_007, e);
    }
    let bytes = w.finish(evs.len() as u64 * 1_000_000_007, 9);
    let t = strict(&bytes).unwrap();
    assert_eq!(t.dropped, 9);
    assert_eq!(t.header.unix_start_ns, 42);
    let got: Vec<Event> = t.events.iter().map(|e| e.ev.clone()).collect();
    assert_eq!(got, evs);
    for (i, e) in t.events.iter().enumerate() {
        assert_eq!(e.ts, i as u64 * 1_000_000_007);
        assert_eq!(e.m, (i % 3) as u32);
    }
}

fn err_text(e: &DecodeError) -> String {
    e.to_string()
}

#[test]
fn wrong_magic() {
    let g = generate(&Scenario::default());
    let mut b = g.bytes.clone();
    b[..8].copy_from_slice(b"GOTRACE\0");
    let e = strict(&b).unwrap_err();
    assert!(matches!(e, DecodeError::BadMagic { .. }), "{e:?}");
    assert!(err_text(&e).contains("not a goroutine trace"), "{e}");
    // Lenient mode does not accept a file that is not a trace.
    assert!(lenient(&b).is_err());
    let e = strict(b"hello, world, this is not a trace at all").unwrap_err();
    assert!(matches!(e, DecodeError::BadMagic { .. }), "{e:?}");
    assert!(matches!(
        strict(b"").unwrap_err(),
        DecodeError::TooShort { len: 0 }
    ));
    assert!(matches!(
        strict(b"GRTR").unwrap_err(),
        DecodeError::TooShort { len: 4 }
    ));
    let e = strict(&g.bytes[..30]).unwrap_err();
    assert!(matches!(e, DecodeError::TooShort { len: 30 }), "{e:?}");
    assert!(e.to_string().contains("40-byte header"), "{e}");
}

#[test]
fn unsupported_version() {
    let g = generate(&Scenario::default());
    let mut b = g.bytes.clone();
    // Version 3 wrote every running goroutine and P, version 2 had no
    // shared timestamps (and version 1 wrote goroutine ids as
    // themselves): older traces.
    for old in [1u32, 2, 3] {
        b[8..12].copy_from_slice(&old.to_le_bytes());
        let e = strict(&b).unwrap_err();
        assert_eq!(e, DecodeError::UnsupportedVersion { version: old });
        let msg = e.to_string();
        assert!(
            msg.starts_with(&format!(
                "unsupported trace format version {old}: this tool reads version 4 only"
            )),
            "{msg}"
        );
        assert!(msg.contains("older runtime"), "{msg}");
        assert!(lenient(&b).is_err());
    }
    b[8..12].copy_from_slice(&5u32.to_le_bytes());
    let e = strict(&b).unwrap_err();
    assert_eq!(e, DecodeError::UnsupportedVersion { version: 5 });
    assert!(e.to_string().contains("newer runtime"), "{e}");
}

#[test]
fn truncated_batch_reports_how_far_it_got() {
    let g = generate(&Scenario::default());
    let bs = batches(&g.bytes);
    let k = bs.len() / 2;
    let (off, m, len) = bs[k];
    let cut = off + 9 + len / 2;
    let b = &g.bytes[..cut];
    // Events in the complete batches before the cut.
    let before = strict(&{
        let mut v = g.bytes[..off].to_vec();
        put_trailer(&mut v, 0, 0);
        v
    })
    .unwrap()
    .events
    .len();
    let e = strict(b).unwrap_err();
    match &e {
        DecodeError::TruncatedBatch {
            batch,
            m: em,
            offset,
            payload_len,
            available,
            reached,
        } => {
            assert_eq!(*batch, k);
            assert_eq!(*em, m);
            assert_eq!(*offset, off as u64);
            assert_eq!(*payload_len, len as u64);
            assert_eq!(*available, (len / 2) as u64);
            assert_eq!(reached.batches, k);
            // The complete events of the partial batch count too.
            assert!(reached.events > before, "{} > {before}", reached.events);
        }
        other => panic!("expected TruncatedBatch, got {other:?}"),
    }
    let text = e.to_string();
    assert!(
        text.contains(&format!("truncated batch #{k} (M {m})")),
        "{text}"
    );
    assert!(text.contains(&format!("{k} complete batches")), "{text}");

    // Lenient mode keeps what was read.
    let t = lenient(b).unwrap();
    assert_eq!(t.batches, k);
    assert!(t.warning.as_deref().unwrap().contains("truncated batch"));
    let DecodeError::TruncatedBatch { reached, .. } = e else {
        unreachable!()
    };
    assert_eq!(t.events.len(), reached.events);
    assert_eq!(t.end_ns, None);

    // Cut inside a batch header, and inside the trailer.
    let e = strict(&g.bytes[..off + 4]).unwrap_err();
    assert!(
        matches!(
            e,
            DecodeError::TruncatedRecord {
                what: "batch header",
                ..
            }
        ),
        "{e:?}"
    );
    let e = strict(&g.bytes[..g.bytes.len() - 3]).unwrap_err();
    assert!(
        matches!(
            e,
            DecodeError::TruncatedRecord {
                what: "trailer",
                ..
            }
        ),
        "{e:?}"
    );
    // No trailer at all.
    let e = strict(&g.bytes[..off]).unwrap_err();
    assert_eq!(
        e,
        DecodeError::MissingTrailer {
            reached: Reached {
                batches: k,
                events: before
            }
        }
    );
    assert!(e.to_string().contains("no trailer"), "{e}");
}

fn one_batch(payload: &[u8]) -> Vec<u8> {
    let mut b = header_bytes(VERSION, 100, 0, 2);
    put_batch(&mut b, 7, payload);
    put_trailer(&mut b, 200, 0);
    b
}

#[test]
fn unknown_event_type() {
    let mut p = Vec::new();
    encode_event(&mut p, 5, &Event::GoStart { g: 1, p: 0 });
    let at = p.len();
    p.extend_from_slice(&[99, 1, 2, 3]);
    let b = one_batch(&p);
    let e = strict(&b).unwrap_err();
    assert_eq!(
        e,
        DecodeError::BadEvent {
            fault: EventFault::UnknownType(99),
            batch: 0,
            m: 7,
            offset: (HEADER_LEN + 9 + at) as u64,
            reached: Reached {
                batches: 0,
                events: 1
            },
        }
    );
    let text = e.to_string();
    let want = format!(
        "unknown event type 99 at byte {} (batch #0, M 7)",
        HEADER_LEN + 9 + at
    );
    assert!(text.starts_with(&want), "{text}");
    // Type 0 is not an event either.
    assert!(matches!(
        strict(&one_batch(&[0, 0])).unwrap_err(),
        DecodeError::BadEvent {
            fault: EventFault::UnknownType(0),
            ..
        }
    ));
    let t = lenient(&b).unwrap();
    assert_eq!(t.events.len(), 1);
    assert!(t.warning.unwrap().contains("unknown event type 99"));
}

#[test]
fn malformed_events() {
    // A varint of 11 bytes.
    let e = strict(&one_batch(&[
        2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0, 0,
    ]))
    .unwrap_err();
    assert!(
        matches!(
            e,
            DecodeError::BadEvent {
                fault: EventFault::BadVarint,
                ..
            }
        ),
        "{e:?}"
    );
    // A varint above u64::MAX (10th byte > 1).
    let e = strict(&one_batch(&[
        2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0,
    ]))
    .unwrap_err();
    assert!(
        matches!(
            e,
            DecodeError::BadEvent {
                fault: EventFault::BadVarint,
                ..
            }
        ),
        "{e:?}"
    );
    // u64::MAX itself is fine.
    let mut p = Vec::new();
    encode_event(&mut p, 0, &Event::GoStart { g: u64::MAX, p: 0 });
    assert!(strict(&one_batch(&p)).is_ok());
    // Fields missing at the end of the batch.
    let e = strict(&one_batch(&[3, 0, 1])).unwrap_err();
    assert!(
        matches!(
            e,
            DecodeError::BadEvent {
                fault: EventFault::PastBatchEnd,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(
        e.to_string().contains("runs past the end of its batch"),
        "{e}"
    );
    // A name longer than the batch, and one that is not UTF-8.
    let e = strict(&one_batch(&[18, 0, 1, 200, b'a'])).unwrap_err();
    assert!(
        matches!(
            e,
            DecodeError::BadEvent {
                fault: EventFault::PastBatchEnd,
                ..
            }
        ),
        "{e:?}"
    );
    let e = strict(&one_batch(&[18, 0, 1, 2, 0xff, 0xfe])).unwrap_err();
    assert!(
        matches!(
            e,
            DecodeError::BadEvent {
                fault: EventFault::NameNotUtf8,
                ..
            }
        ),
        "{e:?}"
    );
    // An unknown record tag, and bytes after the trailer.
    let mut b = header_bytes(VERSION, 0, 0, 1);
    b.push(0x42);
    let e = strict(&b).unwrap_err();
    assert!(
        matches!(e, DecodeError::UnknownRecord { tag: 0x42, .. }),
        "{e:?}"
    );
    assert!(e.to_string().contains("0x42"), "{e}");
    let mut b = one_batch(&[]);
    b.push(0);
    assert!(matches!(
        strict(&b).unwrap_err(),
        DecodeError::TrailingData { len: 1, .. }
    ));
}

/// Feeds damaged traces through everything (decoder, model, both outputs):
/// errors are fine, panics are not.
#[test]
fn damaged_traces_never_panic() {
    let g = generate(&Scenario {
        goroutines: 60,
        batch_size: 300,
        ..Scenario::default()
    });
    let run = |b: &[u8]| {
        for opts in [DecodeOptions::default(), DecodeOptions { lenient: true }] {
            if let Ok(t) = decode(b, opts, &mut |_, _| {}) {
                let m = model::build(&t, &mut |_, _| {});
                let mut sink = Vec::new();
                html::write(&mut sink, &t, &m, &html::Options::default(), &mut |_, _| {}).unwrap();
                perfetto::write(&mut sink, &m, perfetto::Options::default(), &mut |_, _| {})
                    .unwrap();
                let _ = goroutine_trace::stats::summary(&t, &m);
            }
        }
    };
    // Every truncation length.
    for n in 0..g.bytes.len() {
        run(&g.bytes[..n]);
    }
    // Random byte flips, with a deterministic generator.
    let mut x: u64 = 0x1234_5678_9abc_def1;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..1500 {
        let mut b = g.bytes.clone();
        for _ in 0..1 + next() % 4 {
            let i = HEADER_LEN + (next() as usize) % (b.len() - HEADER_LEN);
            b[i] = next() as u8;
        }
        run(&b);
    }
}

#[test]
fn goroutine_ids_and_local_starts() {
    use goroutine_trace::format::{zigzag, IMPLICIT, REGS_START};
    use goroutine_trace::writer::{encode_event_after, put_uvarint};
    // GoEnd of g 1000 on P 3 (registers: running 1000, other 0, P 3: the
    // first P of the batch is written), then a GoStartLocal of g 998
    // (predicted by "other"): a GoStart of 998 on P 3 at the GoEnd's time.
    let mut p = Vec::new();
    let mut regs = REGS_START;
    encode_event_after(&mut p, 40, &Event::GoEnd { g: 1000, p: 3 }, &mut regs);
    assert_eq!(regs, [1000, 0, 3]);
    assert_eq!(p[0], 6);
    p.push(22);
    put_uvarint(&mut p, zigzag(998));
    regs = [998, 0, 3];
    // Then a GoBlock of 998 on P 3, 5 ns later: the running goroutine and
    // the P are the registers', so only its time and reason are written.
    let block = Event::GoBlock {
        g: 998,
        p: 3,
        wait_reason: 2,
    };
    let at = p.len();
    encode_event_after(&mut p, 5, &block, &mut regs);
    assert_eq!(&p[at..], &[4 | IMPLICIT, 5, 2]);
    // A GoStop of 998 on P 4 names both.
    let stop = Event::GoStop {
        g: 998,
        p: 4,
        reason: 1,
    };
    let at = p.len();
    encode_event_after(&mut p, 1, &stop, &mut regs);
    assert_eq!(&p[at..], &[3, 1, 0, 4, 1]);
    let t = strict(&one_batch(&p)).unwrap();
    let evs: Vec<_> = t.events.iter().map(|e| (e.ts, e.ev.clone())).collect();
    assert_eq!(
        evs,
        vec![
            (40, Event::GoEnd { g: 1000, p: 3 }),
            (40, Event::GoStart { g: 998, p: 3 }),
            (45, block),
            (46, stop),
        ]
    );
    // `IMPLICIT` before any P of the batch, or on a type without it.
    let e = strict(&one_batch(&[6 | IMPLICIT, 40])).unwrap_err();
    assert!(e.to_string().contains("before any P"), "{e}");
    let e = strict(&one_batch(&[8, 40, 1, 7 | IMPLICIT, 1, 1, 1, 1])).unwrap_err();
    assert!(e.to_string().contains("unknown event type"), "{e}");
    // A GoStartLocal with no slice end before it in its batch.
    let e = strict(&one_batch(&[22, 2])).unwrap_err();
    assert!(e.to_string().contains("GoStartLocal"), "{e}");
}

#[test]
fn same_time_events() {
    use goroutine_trace::format::{zigzag, IMPLICIT, REGS_START, SAME_TIME};
    use goroutine_trace::writer::{encode_event_after, put_uvarint};
    // GoStart of g 7 on P 1 at 40, then a GoCreate of g 8 (parent 7) and a
    // GoUnblock of g 3 (by 7) with `SAME_TIME`: no delta, both at 40;
    // then a GoEnd of 7, 6 ns later.
    let mut p = Vec::new();
    let mut regs = REGS_START;
    encode_event_after(&mut p, 40, &Event::GoStart { g: 7, p: 1 }, &mut regs);
    p.push(1 | SAME_TIME);
    put_uvarint(&mut p, zigzag(8)); // g_new 8 against "other" 0
    put_uvarint(&mut p, 0); // parent 7 against "running" 7
    put_uvarint(&mut p, 1);
    // The same with the running goroutine and the P implied.
    p.push(5 | SAME_TIME | IMPLICIT);
    put_uvarint(&mut p, zigzag(3u64.wrapping_sub(8))); // g 3 against "other" 8
    regs = [7, 3, 1];
    encode_event_after(&mut p, 6, &Event::GoEnd { g: 7, p: 1 }, &mut regs);
    let t = strict(&one_batch(&p)).unwrap();
    let evs: Vec<_> = t.events.iter().map(|e| (e.ts, e.ev.clone())).collect();
    assert_eq!(
        evs,
        vec![
            (40, Event::GoStart { g: 7, p: 1 }),
            (
                40,
                Event::GoCreate {
                    g: 8,
                    parent: 7,
                    p: 1
                }
            ),
            (
                40,
                Event::GoUnblock {
                    g: 3,
                    by_g: 7,
                    p: 1
                }
            ),
            (46, Event::GoEnd { g: 7, p: 1 }),
        ]
    );
    // First in its batch: no previous event's time to take.
    let e = strict(&one_batch(&[1 | SAME_TIME, 2, 0, 1])).unwrap_err();
    assert!(e.to_string().contains("first in its batch"), "{e}");
    // Not on a GoStartLocal.
    let e = strict(&one_batch(&[22 | SAME_TIME, 2])).unwrap_err();
    assert!(e.to_string().contains("unknown event type"), "{e}");
}
