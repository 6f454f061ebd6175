//! `goroutine::context`, with Go's context_test.go ported where it applies:
//! TestBackground, TestWithCancel, TestParentFinishesChild,
//! TestChildFinishesFirst, TestDeadline, TestTimeout, TestCanceledTimeout,
//! TestWithCancelCanceledParent, plus the tree (depth 5, width 10)
//! and a flat RSS over 100,000 create/cancel cycles.

mod common;

use std::time::{Duration, Instant};

use common::within;
use goroutine::context::{Context, ContextError};
use goroutine::{go, select, TryRecvError};

fn is_done(ctx: &Context) -> bool {
    match ctx.done().try_recv() {
        Err(TryRecvError::Closed) => true,
        Err(TryRecvError::Empty) => false,
        Ok(()) => panic!("something was sent on a done channel"),
    }
}

#[test]
fn background() {
    let c = Context::background();
    assert_eq!(c.err(), None);
    assert_eq!(c.deadline(), None);
    assert!(!is_done(&c));
    assert_eq!(format!("{c:?}"), "Context::background()");
    assert_eq!(ContextError::Canceled.to_string(), "context canceled");
    assert_eq!(
        ContextError::DeadlineExceeded.to_string(),
        "context deadline exceeded"
    );
}

#[test]
fn with_cancel_parent_and_children() {
    within(60, || {
        let (c1, cancel) = Context::background().with_cancel();
        let (c2, _cancel2) = c1.with_cancel();
        let (c3, cancel3) = c2.with_timeout(Duration::from_secs(3600));
        let all = [&c1, &c2, &c3];
        for c in all {
            assert_eq!(c.err(), None);
            assert!(!is_done(c));
        }
        // Cancelling a child leaves its parent alone (TestChildFinishesFirst).
        cancel3.cancel();
        assert_eq!(c3.err(), Some(ContextError::Canceled));
        assert!(is_done(&c3));
        assert_eq!(c2.err(), None);
        // Cancelling the parent reaches the grandchild (TestParentFinishesChild).
        let (c4, _cancel4) = c2.with_cancel();
        cancel.cancel();
        for c in [&c1, &c2, &c4] {
            assert_eq!(c.err(), Some(ContextError::Canceled));
            assert!(is_done(c));
        }
        // Twice: nothing changes.
        cancel.cancel();
        assert_eq!(c1.err(), Some(ContextError::Canceled));
    });
}

#[test]
fn dropping_cancel_cancels() {
    let (c, cancel) = Context::background().with_cancel();
    let clone = c.clone();
    drop(cancel);
    assert_eq!(clone.err(), Some(ContextError::Canceled));
    assert!(is_done(&clone));
}

#[test]
fn canceled_parent_gives_canceled_child() {
    let (parent, cancel) = Context::background().with_cancel();
    cancel.cancel();
    let (child, _c) = parent.with_cancel();
    assert_eq!(child.err(), Some(ContextError::Canceled));
    let (child, _c) = parent.with_timeout(Duration::from_millis(1));
    // The parent's reason, not the child's deadline.
    assert_eq!(child.err(), Some(ContextError::Canceled));
}

#[test]
fn deadlines_fire_and_are_inherited() {
    within(60, || {
        let t = Instant::now();
        let (c, _cancel) = Context::background().with_deadline(t + Duration::from_millis(50));
        assert_eq!(c.deadline(), Some(t + Duration::from_millis(50)));
        // A child asking for a later deadline gets the parent's.
        let (child, _cc) = c.with_timeout(Duration::from_secs(3600));
        assert_eq!(child.deadline(), c.deadline());
        // An earlier one is its own.
        let early = t + Duration::from_millis(10);
        let (child2, _cc2) = c.with_deadline(early);
        assert_eq!(child2.deadline(), Some(early));
        // done closes, after err is set (a goroutine woken by done reads it).
        let c2 = c.clone();
        let h = go(move || {
            assert!(c2.done().recv().is_err());
            c2.err()
        });
        assert_eq!(h.join().unwrap(), Some(ContextError::DeadlineExceeded));
        assert!(t.elapsed() >= Duration::from_millis(50));
        // The parent closes its done before it cancels its children (as in
        // Go): a child's err is read once its own done has closed.
        assert!(child.done().recv().is_err());
        assert_eq!(child.err(), Some(ContextError::DeadlineExceeded));
        assert!(child2.done().recv().is_err());
        assert_eq!(child2.err(), Some(ContextError::DeadlineExceeded));
        // A deadline already past cancels at once.
        let (past, _p) = Context::background().with_deadline(Instant::now());
        assert_eq!(past.err(), Some(ContextError::DeadlineExceeded));
        assert!(is_done(&past));
        // Cancelled before its timeout: Canceled (TestCanceledTimeout).
        let (c, cancel) = Context::background().with_timeout(Duration::from_secs(1));
        cancel.cancel();
        assert_eq!(c.err(), Some(ContextError::Canceled));
    });
}

#[test]
fn done_in_select() {
    within(60, || {
        let (ctx, _cancel) = Context::background().with_timeout(Duration::from_millis(30));
        let (_tx, never) = goroutine::chan::<u32>(0);
        let got = select! {
            recv(never) -> _ => None,
            recv(ctx.done()) -> _ => ctx.err(),
        };
        assert_eq!(got, Some(ContextError::DeadlineExceeded));
        let e: std::io::Error = ContextError::DeadlineExceeded.into();
        assert_eq!(e.kind(), std::io::ErrorKind::TimedOut);
    });
}

/// A tree of depth 5 and width 10 (111,110 contexts): cancelling the root
/// closes every `done()`, seen by goroutines parked on a sample of them.
#[test]
fn tree_depth_5_width_10() {
    within(300, || {
        let (root, cancel) = Context::background().with_cancel();
        let mut level = vec![root.clone()];
        let mut all = Vec::new();
        let mut cancels = Vec::new();
        for _ in 0..5 {
            let mut next = Vec::with_capacity(level.len() * 10);
            for parent in &level {
                for _ in 0..10 {
                    let (c, k) = parent.with_cancel();
                    next.push(c);
                    cancels.push(k);
                }
            }
            all.extend(next.iter().cloned());
            level = next;
        }
        assert_eq!(all.len(), 111_110);
        let waiters: Vec<_> = all
            .iter()
            .step_by(97)
            .map(|c| {
                let c = c.clone();
                go(move || {
                    let _ = c.done().recv();
                    c.err()
                })
            })
            .collect();
        assert!(all.iter().all(|c| !is_done(c)));
        cancel.cancel();
        assert!(all.iter().all(is_done));
        assert!(all.iter().all(|c| c.err() == Some(ContextError::Canceled)));
        for w in waiters {
            assert_eq!(w.join().unwrap(), Some(ContextError::Canceled));
        }
        drop(cancels);
    });
}

/// Resident set size in KiB.
#[cfg_attr(
    any(goroutine_sanitize = "address", goroutine_sanitize = "thread"),
    allow(dead_code)
)]
fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = s.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4
}

/// What the heap holds, in KiB: RSS, or under a sanitizer the bytes its
/// allocator has handed out and not had back. ASan keeps freed blocks in
/// its quarantine before reusing them, so RSS grows under it whether or
/// not anything leaks; TSan's allocator and shadow add their own growth.
fn live_kib() -> u64 {
    #[cfg(any(goroutine_sanitize = "address", goroutine_sanitize = "thread"))]
    {
        extern "C" {
            fn __sanitizer_get_current_allocated_bytes() -> usize;
        }
        // SAFETY: a query of the sanitizer allocator, no preconditions.
        (unsafe { __sanitizer_get_current_allocated_bytes() } / 1024) as u64
    }
    #[cfg(not(any(goroutine_sanitize = "address", goroutine_sanitize = "thread")))]
    rss_kib()
}

isolated_test! {
/// Nothing leaks after `cancel`: 100,000 create/cancel cycles of a child,
/// a grandchild and a timer under a long-lived parent keep RSS flat. In its
/// own process: the other tests' allocations would blur the RSS.
fn create_cancel_cycles_do_not_leak() {
    within(300, || {
        let (parent, _keep) = Context::background().with_cancel();
        let cycle = |parent: &Context| {
            let (c, cancel) = parent.with_cancel();
            let (g, _gc) = c.with_timeout(Duration::from_secs(3600));
            cancel.cancel();
            assert_eq!(g.err(), Some(ContextError::Canceled));
        };
        for _ in 0..20_000 {
            cycle(&parent);
        }
        let before = live_kib();
        for _ in 0..100_000 {
            cycle(&parent);
        }
        let after = live_kib();
        // One leaked node per cycle would be well over 10 MiB.
        assert!(
            after < before + 4 * 1024,
            "RSS grew from {before} KiB to {after} KiB over 100,000 cycles"
        );
        assert_eq!(parent.err(), None);
    });
}
}
