//! `tracing` spans follow their goroutine (feature `tracing`, issue 44):
//! every event's parent chain is the one its goroutine entered, whatever
//! thread it resumed on. Each test runs in its own process
//! (`isolated_test!`): a subscriber is set process-wide, as a service does,
//! since goroutines run on the runtime's threads.
//!
//! The recording layer tags each span with its `g` field (the goroutine's
//! number in the test) and records, for each event, its own `g` and the
//! chain of (span name, tag) from the event's parent up to the root.
//! Without the spans following (the feature off, or the hooks removed from
//! `switch_out`), the events after a runtime call land in other
//! goroutines' spans: the 1,000-goroutine test sees most of them wrong.

#![cfg(feature = "tracing")]

#[macro_use]
mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use goroutine::{chan, go, run, Builder, Receiver, Sender};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{info, info_span, instrument, Event, Instrument, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{Layer, Registry};

/// A span's `g` field.
struct Tag(Option<u64>);

/// One event: its own `g`, and (name, g) of each span from its parent up.
type Chain = Vec<(String, Option<u64>)>;

#[derive(Default)]
struct Record {
    events: Mutex<Vec<(Option<u64>, String, Chain)>>,
    opened: Mutex<u64>,
    closed: Mutex<u64>,
}

struct Recorder(Arc<Record>);

struct GField(Option<u64>);

impl Visit for GField {
    fn record_u64(&mut self, f: &Field, v: u64) {
        if f.name() == "g" {
            self.0 = Some(v);
        }
    }
    fn record_i64(&mut self, f: &Field, v: i64) {
        if f.name() == "g" {
            self.0 = Some(v as u64);
        }
    }
    fn record_debug(&mut self, f: &Field, v: &dyn std::fmt::Debug) {
        if f.name() == "g" {
            self.0 = format!("{v:?}").parse().ok();
        }
    }
}

/// The message of an event (its `message` field).
struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, f: &Field, v: &dyn std::fmt::Debug) {
        if f.name() == "message" {
            self.0 = format!("{v:?}");
        }
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Recorder {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut g = GField(None);
        attrs.record(&mut g);
        ctx.span(id)
            .expect("new span")
            .extensions_mut()
            .insert(Tag(g.0));
        *self.0.opened.lock().unwrap() += 1;
    }

    fn on_close(&self, _id: Id, _ctx: Context<'_, S>) {
        *self.0.closed.lock().unwrap() += 1;
    }

    fn on_event(&self, ev: &Event<'_>, ctx: Context<'_, S>) {
        let mut g = GField(None);
        ev.record(&mut g);
        let mut msg = Message(String::new());
        ev.record(&mut msg);
        let chain: Chain = ctx
            .event_scope(ev)
            .map(|scope| {
                scope
                    .map(|s| {
                        let tag = s.extensions().get::<Tag>().and_then(|t| t.0);
                        (s.name().to_string(), tag)
                    })
                    .collect()
            })
            .unwrap_or_default();
        self.0.events.lock().unwrap().push((g.0, msg.0, chain));
    }
}

/// Sets the recording subscriber as the process's default.
fn install() -> Arc<Record> {
    let rec = Arc::new(Record::default());
    tracing::subscriber::set_global_default(Registry::default().with(Recorder(rec.clone())))
        .expect("set the subscriber");
    rec
}

/// The events whose chain is not `want(g)`, with a few shown.
fn misattributed(rec: &Record, want: impl Fn(Option<u64>) -> Chain) -> (usize, usize, Vec<String>) {
    let events = rec.events.lock().unwrap();
    let mut bad = 0;
    let mut shown = Vec::new();
    for (g, msg, chain) in events.iter() {
        let w = want(*g);
        if *chain != w {
            bad += 1;
            if shown.len() < 5 {
                let depth = chain.len();
                let head: Vec<_> = chain.iter().take(4).collect();
                shown.push(format!(
                    "g {g:?} {msg:?}: chain (depth {depth}) {head:?}, want {w:?}"
                ));
            }
        }
    }
    (bad, events.len(), shown)
}

/// Every span opened was closed (nothing leaked by the carrying).
fn all_closed(rec: &Record) {
    let opened = *rec.opened.lock().unwrap();
    let closed = *rec.closed.lock().unwrap();
    assert_eq!(opened, closed, "spans opened {opened}, closed {closed}");
}

/// Unbuffered channels for goroutines `2k` and `2k + 1`: each pair's
/// `(Sender, Receiver)` ends, the even one's first.
fn pairs(n: usize) -> Vec<(Sender<u64>, Receiver<u64>)> {
    let mut v = Vec::new();
    for _ in 0..n / 2 {
        let (atx, arx) = chan::<u64>(0);
        let (btx, brx) = chan::<u64>(0);
        v.push((atx, brx));
        v.push((btx, arx));
    }
    v
}

/// One round trip with the partner (`pairs`): the even goroutine sends
/// first, the odd one receives first, so each operation parks until the
/// partner comes.
fn ping_pong(g: u64, tx: &Sender<u64>, rx: &Receiver<u64>) {
    if g % 2 == 0 {
        tx.send(g).unwrap();
        rx.recv().unwrap();
    } else {
        rx.recv().unwrap();
        tx.send(g).unwrap();
    }
}

/// The program: 1,000 goroutines each enter their own span, log,
/// yield, send to and receive from a partner goroutine, sleep
/// 100 us, and log again. Each event must be inside its own goroutine's
/// span only.
fn thousand_requests() {
    let rec = install();
    run(|| {
        let pairs = pairs(1000);
        let hs: Vec<_> = (0..1000u64)
            .zip(pairs)
            .map(|(i, (tx, rx))| {
                go(move || {
                    let span = info_span!("req", g = i);
                    let _e = span.enter();
                    info!(g = i, "first");
                    goroutine::yield_now();
                    info!(g = i, "after yield");
                    ping_pong(i, &tx, &rx);
                    info!(g = i, "after channel");
                    goroutine::time::sleep(Duration::from_micros(100));
                    info!(g = i, "second");
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
    });
    let (bad, total, shown) = misattributed(&rec, |g| vec![("req".to_string(), g)]);
    assert_eq!(total, 4000);
    assert_eq!(bad, 0, "{bad} of {total} events misattributed: {shown:#?}");
    all_closed(&rec);
}

isolated_test! {
    fn thousand_requests_gomaxprocs_1() ["GOMAXPROCS" = "1"] {
        thousand_requests();
    }
}

isolated_test! {
    fn thousand_requests_gomaxprocs_2() ["GOMAXPROCS" = "2"] {
        thousand_requests();
    }
}

isolated_test! {
    fn thousand_requests_gomaxprocs_4() ["GOMAXPROCS" = "4"] {
        thousand_requests();
    }
}

#[instrument(skip(tx, rx))]
fn outer(g: u64, tx: &Sender<u64>, rx: &Receiver<u64>) {
    info!(g, "outer before");
    middle(g, tx, rx);
    info!(g, "outer after");
}

#[instrument(skip(tx, rx))]
fn middle(g: u64, tx: &Sender<u64>, rx: &Receiver<u64>) {
    info!(g, "middle before");
    goroutine::yield_now();
    inner(g, tx, rx);
    goroutine::time::sleep(Duration::from_micros(50));
    info!(g, "middle after");
}

#[instrument(skip(tx, rx))]
fn inner(g: u64, tx: &Sender<u64>, rx: &Receiver<u64>) {
    info!(g, "inner before");
    ping_pong(g, tx, rx);
    info!(g, "inner between");
    goroutine::yield_now();
    info!(g, "inner after");
}

/// `#[instrument]` three deep across channel operations, spawned inside a
/// `root` span: every event's chain is exactly its goroutine's own, under
/// the spawner's span (`go` inside a span runs the child inside it).
fn instrumented_chain() {
    let rec = install();
    run(|| {
        let root = info_span!("root");
        let _r = root.enter();
        let hs: Vec<_> = (0..400u64)
            .zip(pairs(400))
            .map(|(i, (tx, rx))| go(move || outer(i, &tx, &rx)))
            .collect();
        for h in hs {
            h.join().unwrap();
        }
    });
    // Each event's chain: its own function, its callers, then `root`; every
    // span but `root` tagged with the event's goroutine.
    let events = rec.events.lock().unwrap();
    assert_eq!(events.len(), 400 * 7);
    let mut wrong = 0;
    let mut shown = Vec::new();
    for (g, msg, chain) in events.iter() {
        let names: Vec<&str> = chain.iter().map(|(n, _)| n.as_str()).collect();
        let want: &[&str] = if msg.starts_with("inner") {
            &["inner", "middle", "outer", "root"]
        } else if msg.starts_with("middle") {
            &["middle", "outer", "root"]
        } else {
            &["outer", "root"]
        };
        let tags_ok = chain
            .iter()
            .all(|(n, t)| if n == "root" { t.is_none() } else { t == g });
        if names != want || !tags_ok {
            wrong += 1;
            if shown.len() < 5 {
                let head: Vec<_> = chain.iter().take(5).collect();
                shown.push(format!("g {g:?} {msg:?}: depth {} {head:?}", chain.len()));
            }
        }
    }
    drop(events);
    assert_eq!(
        wrong,
        0,
        "{wrong} of {} events misattributed: {shown:#?}",
        400 * 7
    );
    all_closed(&rec);
}

isolated_test! {
    fn instrument_three_deep_gomaxprocs_1() ["GOMAXPROCS" = "1"] {
        instrumented_chain();
    }
}

isolated_test! {
    fn instrument_three_deep_gomaxprocs_4() ["GOMAXPROCS" = "4"] {
        instrumented_chain();
    }
}

isolated_test! {
    // A goroutine that panics with two spans entered across runtime calls:
    // unwinding exits them where they are entered, nothing is left on its
    // thread for the next goroutine there, and both spans close.
    fn panic_with_spans_entered() ["GOMAXPROCS" = "1"] {
        let rec = install();
        run(|| {
            let hs: Vec<_> = (0..50u64)
                .map(|i| {
                    go(move || {
                        let a = info_span!("a", g = i);
                        let _a = a.enter();
                        goroutine::yield_now();
                        let b = info_span!("b", g = i);
                        let _b = b.enter();
                        goroutine::time::sleep(Duration::from_micros(10));
                        info!(g = i, "doomed");
                        if i % 2 == 0 {
                            panic!("goroutine {i} fails inside its spans");
                        }
                    })
                })
                .collect();
            for (i, h) in hs.into_iter().enumerate() {
                assert_eq!(h.join().is_err(), i % 2 == 0);
            }
            // The main goroutine entered nothing: its events are at the root.
            for _ in 0..10 {
                goroutine::yield_now();
                info!("main");
            }
        });
        let events = rec.events.lock().unwrap();
        assert_eq!(events.len(), 60);
        for (g, msg, chain) in events.iter() {
            if msg == "main" {
                assert!(chain.is_empty(), "main's event inside {chain:?}");
            } else {
                let want = vec![("b".to_string(), *g), ("a".to_string(), *g)];
                assert_eq!(*chain, want, "g {g:?}");
            }
        }
        drop(events);
        all_closed(&rec);
    }
}

isolated_test! {
    // `block_on` of an instrumented future, in a goroutine (the future
    // waits for another goroutine, so the goroutine parks between polls)
    // and on a plain thread.
    fn block_on_instrumented() ["GOMAXPROCS" = "2"] {
        let rec = install();
        let fut = |g: u64| {
            async move {
                info!(g, "polled");
                let h = go(move || {
                    goroutine::time::sleep(Duration::from_millis(1));
                    info!(g = 1000 + g, "helper");
                });
                h.await.unwrap();
                info!(g, "resumed");
            }
            .instrument(info_span!("fut", g = g))
        };
        run(move || {
            let hs: Vec<_> = (0..20u64)
                .map(|i| go(move || goroutine::block_on(fut(i))))
                .collect();
            for h in hs {
                h.join().unwrap();
            }
        });
        goroutine::block_on(fut(99));
        let events = rec.events.lock().unwrap();
        assert_eq!(events.len(), 21 * 3);
        for (g, msg, chain) in events.iter() {
            let g = g.unwrap();
            let want = if msg == "helper" {
                // Spawned from inside the future's poll: runs in its span.
                vec![("fut".to_string(), Some(g - 1000))]
            } else {
                vec![("fut".to_string(), Some(g))]
            };
            assert_eq!(*chain, want, "{msg}");
        }
        drop(events);
        all_closed(&rec);
    }
}

isolated_test! {
    // `run` from a thread that entered a span: the thread's span stays the
    // thread's (still current after `run`); the main goroutine runs inside
    // it, as any child of a spawner inside a span.
    fn run_keeps_the_callers_spans() ["GOMAXPROCS" = "2"] {
        let rec = install();
        let outer = info_span!("caller", g = 7);
        let _o = outer.enter();
        run(|| {
            info!(g = 7, "main");
            goroutine::yield_now();
            goroutine::time::sleep(Duration::from_millis(1));
            let inner = info_span!("main-span", g = 7);
            let _i = inner.enter();
            goroutine::time::sleep(Duration::from_millis(1));
            info!(g = 7, "main inner");
        });
        assert_eq!(
            tracing::Span::current().metadata().map(|m| m.name()),
            Some("caller")
        );
        info!(g = 7, "after run");
        let events = rec.events.lock().unwrap();
        let caller = ("caller".to_string(), Some(7));
        let inner = ("main-span".to_string(), Some(7));
        let want = [
            ("main", vec![caller.clone()]),
            ("main inner", vec![inner, caller.clone()]),
            ("after run", vec![caller]),
        ];
        assert_eq!(events.len(), want.len());
        for ((_, msg, chain), (wmsg, wchain)) in events.iter().zip(want.iter()) {
            assert_eq!(msg, wmsg);
            assert_eq!(chain, wchain, "{msg}");
        }
    }
}

isolated_test! {
    // Goroutines locked to their thread (spawned pinned, or locked for a
    // while) next to free ones: the same bookkeeping, exact chains.
    fn locked_goroutines() ["GOMAXPROCS" = "2"] {
        let rec = install();
        run(|| {
            let hs: Vec<_> = (0..40u64)
                .map(|i| {
                    let body = move || {
                        let s = info_span!("s", g = i);
                        let _s = s.enter();
                        if i % 4 == 1 {
                            goroutine::lock_os_thread();
                        }
                        for _ in 0..5 {
                            goroutine::yield_now();
                            goroutine::time::sleep(Duration::from_micros(20));
                            info!(g = i, "tick");
                        }
                        if i % 4 == 1 {
                            goroutine::unlock_os_thread();
                        }
                    };
                    if i % 4 == 0 {
                        Builder::new().lock_os_thread(true).spawn(body).unwrap()
                    } else {
                        go(body)
                    }
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
        });
        let (bad, total, shown) = misattributed(&rec, |g| vec![("s".to_string(), g)]);
        assert_eq!(total, 200);
        assert_eq!(bad, 0, "{bad} of {total} events misattributed: {shown:#?}");
        all_closed(&rec);
    }
}
