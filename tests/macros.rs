//! `#[goroutine::main]`, `#[goroutine::test]` and borrowing `run` (issue 40,
//! items 1 and 2): what the expansions do at run time, and (`compile_fail`)
//! the compile errors for misuse, from `tests/ui/*.rs` with their expected
//! messages beside them (`*.stderr`). After changing a message (or the
//! helpers' signatures, which two of them quote), regenerate them with
//! `TRYBUILD=overwrite cargo test --release --test macros compile_fail` and
//! read the diff.

mod common;

use std::error::Error;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};

// ------------------------------------------------------------ the test macro

#[goroutine::test]
fn body_runs_as_a_goroutine() {
    assert_ne!(goroutine::current_id(), 0);
    let (tx, rx) = goroutine::chan(0);
    goroutine::go(move || tx.send(7).unwrap());
    assert_eq!(rx.recv().unwrap(), 7);
}

#[goroutine::test]
fn may_return_a_result_that_is_not_send() -> Result<(), Box<dyn Error>> {
    // `Box<dyn Error>` is not `Send`: it stays on the goroutine.
    let n: u32 = "42".parse()?;
    let doubled = goroutine::go(move || n * 2).join()?;
    assert_eq!(doubled, 84);
    Ok(())
}

#[goroutine::test]
fn explicit_unit_return() -> () {
    assert_ne!(goroutine::current_id(), 0);
}

#[goroutine::test]
#[should_panic(expected = "boom in a goroutine test")]
fn a_panic_fails_the_test() {
    panic!("boom in a goroutine test");
}

#[goroutine::test]
#[should_panic(expected = "a joined goroutine's panic")]
fn a_joined_goroutines_panic_fails_the_test() {
    let h = goroutine::go(|| panic!("a joined goroutine's panic"));
    if let Err(e) = h.join() {
        std::panic::resume_unwind(e.into_panic());
    }
}

#[goroutine::test(max_procs = 1)]
fn max_procs_one() {
    assert_eq!(goroutine::max_procs(), 1);
    // Still 1 after parking: no other test changed it meanwhile.
    goroutine::time::sleep(std::time::Duration::from_millis(1));
    assert_eq!(goroutine::max_procs(), 1);
}

#[goroutine::test(max_procs = 3)]
fn max_procs_three() -> Result<(), std::num::ParseIntError> {
    assert_eq!(goroutine::max_procs(), 3);
    goroutine::time::sleep(std::time::Duration::from_millis(1));
    assert_eq!(goroutine::max_procs(), 3);
    Ok(())
}

/// README's "Testing code that uses goroutines" example.
#[goroutine::test]
fn worker_answers() -> Result<(), Box<dyn Error>> {
    let (tx, rx) = goroutine::chan(0);
    goroutine::go(move || tx.send(42).unwrap());
    assert_eq!(rx.recv_timeout(std::time::Duration::from_secs(5))?, 42);
    Ok(())
}

/// What a failing `#[goroutine::test]` gives the harness: an `Err` whose
/// `Debug` is the body's error's `Debug` text (the harness prints
/// `Error: <text>`), made from a `!Send` error.
#[test]
fn an_err_fails_the_test_with_the_errors_debug_text() {
    let r = goroutine::__private::test(
        goroutine::__private::Options::new(),
        || -> Result<(), Box<dyn Error>> { Err("it broke".into()) },
    );
    let e = r.expect_err("an Err body must fail the test");
    assert_eq!(format!("{e:?}"), "\"it broke\"");
}

// In a process of its own: between the restoring call and the check,
// another max_procs test of this binary (they run on parallel threads)
// may set its own value (seen under AddressSanitizer: 1 for 2).
isolated_test! {
    fn max_procs_is_restored_after_a_test_that_panicked() {
        let before = goroutine::max_procs();
        let want = if before == 2 { 3 } else { 2 };
        let r = std::panic::catch_unwind(|| {
            goroutine::__private::test::<(), _>(
                goroutine::__private::Options::new().max_procs(want),
                move || {
                    assert_eq!(goroutine::max_procs(), want);
                    panic!("test body panicked");
                },
            )
        });
        assert!(r.is_err());
        goroutine::__private::test(
            goroutine::__private::Options::new().max_procs(before),
            || (),
        );
        assert_eq!(goroutine::max_procs(), before);
    }
}

// ------------------------------------------------------------ the main macro

#[goroutine::main]
fn main_that_returns_ok() -> Result<(), Box<dyn Error>> {
    assert_ne!(goroutine::current_id(), 0);
    let v: Vec<u32> = vec!["1".parse()?, "2".parse()?];
    assert_eq!(v, [1, 2]);
    Ok(())
}

#[goroutine::main]
fn main_that_fails() -> Result<(), Box<dyn Error>> {
    Err("main failed on purpose".into())
}

#[goroutine::main]
fn main_without_a_result() {
    assert_ne!(goroutine::current_id(), 0);
}

#[test]
fn main_exit_codes_follow_the_result() {
    assert!(main_that_returns_ok() == ExitCode::SUCCESS);
    assert!(main_without_a_result() == ExitCode::SUCCESS);
    assert!(main_that_fails() == ExitCode::FAILURE);
}

#[goroutine::main(max_procs = 3)]
fn main_with_three_procs() {
    assert_eq!(goroutine::max_procs(), 3);
}

#[goroutine::main]
fn main_that_fails_loudly() -> Result<(), Box<dyn Error>> {
    Err("main failed on purpose".into())
}

/// `main(max_procs = 3)` starts the runtime with 3 Ps: the environment's
/// GOMAXPROCS (a bad value, which would be reported if it were read) is
/// never consulted. In a child process: its own runtime, started here.
#[test]
fn main_with_max_procs_does_not_read_gomaxprocs() {
    if common::is_child("main_with_max_procs_does_not_read_gomaxprocs") {
        assert!(main_with_three_procs() == ExitCode::SUCCESS);
        return;
    }
    let out = common::spawn(
        "main_with_max_procs_does_not_read_gomaxprocs",
        &[("GOMAXPROCS", "not-a-number")],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("GOMAXPROCS"), "{stderr}");
}

#[test]
fn main_prints_its_error_as_a_plain_main_does() {
    if common::is_child("main_prints_its_error_as_a_plain_main_does") {
        assert!(main_that_fails_loudly() == ExitCode::FAILURE);
        return;
    }
    let out = common::spawn("main_prints_its_error_as_a_plain_main_does", &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("Error: \"main failed on purpose\""),
        "{stderr}"
    );
}

// ------------------------------------------------------------ borrowing run

#[test]
fn run_borrows_from_its_caller() {
    let words = [String::from("a"), String::from("bb")];
    let mut count = 0;
    let longest: &str = goroutine::run(|| {
        count += words.len();
        // The result borrows `words`: not 'static.
        words.iter().max_by_key(|w| w.len()).unwrap().as_str()
    });
    assert_eq!(longest, "bb");
    assert_eq!(count, 2);
}

/// Counts its drops in a counter it borrows.
struct DropCount<'a>(&'a AtomicUsize);

impl Drop for DropCount<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn run_with_a_panicking_borrowed_closure() {
    let drops = AtomicUsize::new(0);
    let data = vec![1, 2, 3];
    let guard = DropCount(&drops);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        goroutine::run(|| {
            let _moved_in = &guard;
            let _owned = DropCount(&drops);
            assert_eq!(data.len(), 3);
            panic!("borrowing closure panicked");
        })
    }));
    let payload = r.expect_err("the panic must reach run's caller");
    assert_eq!(
        payload.downcast_ref::<&str>(),
        Some(&"borrowing closure panicked")
    );
    // The closure's own value was dropped on the goroutine before `run`
    // unwound: nothing the goroutine holds uses `drops` after this point.
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert_eq!(data, [1, 2, 3]);
    drop(guard);
    assert_eq!(drops.load(Ordering::SeqCst), 2);
}

#[test]
fn run_with_a_closure_that_owns_a_borrow_drops_it_before_returning() {
    let drops = AtomicUsize::new(0);
    let owned = DropCount(&drops);
    goroutine::run(move || {
        let _keep = owned;
        goroutine::yield_now();
    });
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
fn run_called_from_a_goroutine_runs_on_that_goroutine() {
    let outer = goroutine::run(|| {
        let me = goroutine::current_id();
        let mut local = 10;
        let inner = goroutine::run(|| {
            local += 1;
            goroutine::current_id()
        });
        assert_eq!(local, 11);
        (me, inner)
    });
    assert_eq!(outer.0, outer.1);
    assert_ne!(outer.0, 0);
}

#[test]
fn run_from_a_spawned_goroutine_borrowing_its_locals() {
    let h = goroutine::go(|| {
        let v = [1u64, 2, 3];
        let sum = goroutine::run(|| v.iter().sum::<u64>());
        (sum, v.len())
    });
    assert_eq!(goroutine::run(|| h.join().unwrap()), (6, 3));
}

// ------------------------------------------------------------ synctest

/// `synctest`: the body runs in a bubble, on its fake clock.
#[goroutine::test(synctest)]
fn synctest_option_runs_in_a_bubble() {
    let start = goroutine::time::now();
    assert_eq!(
        start,
        std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(946_684_800)
    );
    goroutine::time::sleep(std::time::Duration::from_secs(86_400));
    assert_eq!(
        goroutine::time::now().duration_since(start).unwrap(),
        std::time::Duration::from_secs(86_400)
    );
    assert!(goroutine::synctest::bubble_id().is_some());
}

/// With `max_procs` too, and a result.
#[goroutine::test(synctest, max_procs = 2)]
fn synctest_option_with_max_procs() -> Result<(), String> {
    assert_eq!(goroutine::max_procs(), 2);
    let t = goroutine::time::after(std::time::Duration::from_secs(60));
    t.recv().map_err(|e| format!("{e:?}"))?;
    Ok(())
}

/// A deadlock in a `synctest` test fails it at once.
#[goroutine::test(synctest)]
#[should_panic(expected = "deadlock: all goroutines in bubble are blocked")]
fn synctest_option_deadlock_fails_the_test() {
    let (_tx, rx) = goroutine::chan::<()>(0);
    rx.recv().unwrap();
}

// ------------------------------------------------------------ compile errors

#[test]
#[cfg_attr(
    any(goroutine_sanitize = "address", goroutine_sanitize = "thread"),
    ignore = "compares rustc's messages with ones blessed on stable, and the sanitizer runs use \
              nightly, whose messages differ (a span in main_bad_return.stderr)"
)]
#[cfg_attr(
    goroutine_qemu,
    ignore = "compile-time checks only: trybuild runs the host's cargo and rustc, nothing runs \
              on aarch64, and the native run checks the same messages"
)]
fn compile_fail() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
