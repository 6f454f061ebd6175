//! Deadlock detection (Go's checkdead), as Go's own tests check it: each
//! scenario runs as a separate process whose only plain thread is `main`,
//! and must end with `fatal error: all goroutines are asleep - deadlock!`,
//! each goroutine's wait reason, and exit status 2 -- or, for the
//! no-false-positive scenarios, finish normally.
//!
//! This target has no libtest harness (`harness = false` in Cargo.toml):
//! libtest runs each test on a thread of its own while `main` waits for it
//! outside the runtime, and the runtime rightly refuses to call a process
//! dead while a thread it cannot see into is alive.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::Duration;

use goroutine::{chan, go, run, select};

const SCENARIO: &str = "GOROUTINE_DEADLOCK_SCENARIO";

fn scenario(name: &str) {
    match name {
        "select_forever" => run(|| select! {}),
        "chan_nobody_sends" => run(|| {
            let (_tx, rx) = chan::<i32>(0);
            let _keep = _tx.clone();
            let _ = rx.recv();
        }),
        "locked_blocked_forever" => run(|| {
            go(|| {
                goroutine::lock_os_thread();
                let (_tx, rx) = chan::<i32>(0);
                let _ = rx.recv();
            });
            let (_tx2, rx2) = chan::<i32>(0);
            let _ = rx2.recv();
        }),
        "many_blocked" => run(|| {
            let (tx, rx) = chan::<i32>(0);
            for _ in 0..100 {
                let tx = tx.clone();
                go(move || {
                    let _ = tx.send(1);
                    let _ = tx.send(2);
                });
            }
            // Receive some, then wait for a value nobody will send.
            for _ in 0..100 {
                rx.recv().unwrap();
            }
            let (_t, never) = chan::<i32>(0);
            let _ = never.recv();
            drop(tx);
        }),
        // No false positives: a pending timer, a pending network accept,
        // and a plain thread that will send later.
        "timer_pending" => run(|| {
            let (tx, rx) = chan::<i32>(0);
            go(move || {
                goroutine::time::sleep(Duration::from_millis(300));
                tx.send(1).unwrap();
            });
            assert_eq!(rx.recv().unwrap(), 1);
            println!("ok");
        }),
        "accept_pending" => run(|| {
            let l = goroutine::net::TcpListener::bind("127.0.0.1:0").unwrap();
            println!("port {}", l.local_addr().unwrap().port());
            std::io::stdout().flush().unwrap();
            let (_c, _) = l.accept().unwrap();
            println!("ok");
        }),
        "thread_sends_later" => {
            let (tx, rx) = chan::<i32>(0);
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(300));
                tx.send(7).unwrap();
            });
            let v = run(move || rx.recv().unwrap());
            assert_eq!(v, 7);
            println!("ok");
        }
        // Reported promptly whatever timers came before (Go's rule: the
        // check runs when an M parks and when the last timer goes).
        "sleeper_then_block" => run(|| {
            go(|| goroutine::time::sleep(Duration::from_secs(1)));
            let (_tx, rx) = chan::<i32>(0);
            let _ = rx.recv();
        }),
        "stopped_timer_then_block" => run(|| {
            let t = goroutine::time::Timer::new(Duration::from_secs(3600));
            assert!(t.stop());
            let (_tx, rx) = chan::<i32>(0);
            let _ = rx.recv();
        }),
        "recv_timeout_answered_then_block" => run(|| {
            let (tx, rx) = chan::<i32>(0);
            go(move || tx.send(5).unwrap());
            assert_eq!(rx.recv_timeout(Duration::from_secs(3600)).unwrap(), 5);
            let (_tx2, rx2) = chan::<i32>(0);
            let _ = rx2.recv();
        }),
        // The last thing alive is a plain thread, which exits: nothing in
        // the runtime sees it go (sysmon's back-off finds it).
        "thread_exits_last" => run(|| {
            let (tx, rx) = chan::<i32>(0);
            let held = tx.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(300));
                drop(held);
            });
            let _keep = tx;
            let _ = rx.recv();
        }),
        // As thread_exits_last, after a long idle spell that the thread
        // ends by waking the main goroutine: sysmon's back-off must start
        // afresh then, not go on doubling from the spell before.
        "thread_exits_after_waking" => run(|| {
            let (tx, rx) = chan::<i32>(0);
            let held = tx.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_secs(4));
                held.send(1).unwrap();
                std::thread::sleep(Duration::from_millis(300));
                drop(held);
            });
            let _keep = tx;
            assert_eq!(rx.recv().unwrap(), 1);
            let _ = rx.recv();
        }),
        // The last thing alive is a plain thread, which then blocks in a
        // runtime wait nobody can end.
        "thread_blocks_last" => run(|| {
            let (tx, rx) = chan::<i32>(0);
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(300));
                let _keep = tx;
                let (_tx2, rx2) = chan::<i32>(0);
                let _ = rx2.recv();
            });
            let _ = rx.recv();
        }),
        // No false positive: a goroutine blocked in the kernel outside the
        // runtime still counts as running.
        "goroutine_in_kernel_sleep" => run(|| {
            let (tx, rx) = chan::<i32>(0);
            go(move || {
                std::thread::sleep(Duration::from_millis(1500));
                tx.send(3).unwrap();
            });
            assert_eq!(rx.recv().unwrap(), 3);
            println!("ok");
        }),
        // The descriptor table is full when everything blocks: the check
        // reads the thread count through a descriptor opened at start.
        "full_descriptor_table" => run(|| {
            let (hog, full) = common::fill_descriptor_table(64);
            assert_eq!(full.raw_os_error(), Some(libc::EMFILE), "{full}");
            let (_tx, rx) = chan::<i32>(0);
            let _ = rx.recv();
            drop(hog);
        }),
        // Run under GOROUTINE_TRACE=flight:...: the report writes the
        // flight recorder's window to a file.
        "flight_recorder" => run(|| {
            let (_tx, rx) = chan::<i32>(0);
            let h = goroutine::Builder::new()
                .name("stuck-receiver")
                .spawn(move || rx.recv())
                .unwrap();
            for _ in 0..100 {
                go(goroutine::yield_now).join().unwrap();
            }
            let _ = h.join();
        }),
        other => panic!("unknown scenario {other}"),
    }
}

fn spawn(name: &str) -> std::process::Child {
    common::self_command()
        .env(SCENARIO, name)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn scenario")
}

fn expect_deadlock(name: &str, reasons: &[&str]) {
    expect_deadlock_within(name, reasons, None);
}

/// `within`: the deadlock must be reported before this much time has
/// passed since the process started (generous: the box may be loaded).
fn expect_deadlock_within(name: &str, reasons: &[&str], within: Option<Duration>) {
    let start = std::time::Instant::now();
    let out = spawn(name).wait_with_output().unwrap();
    let took = start.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{name}: {}\n{stderr}",
        out.status
    );
    assert!(
        stderr.starts_with("fatal error: all goroutines are asleep - deadlock!"),
        "{name}: {stderr}"
    );
    for r in reasons {
        assert!(stderr.contains(r), "{name}: missing {r:?} in:\n{stderr}");
    }
    if let Some(limit) = within {
        assert!(
            took < limit,
            "{name}: reported after {took:?} (limit {limit:?})"
        );
    }
    println!("{name}: ok ({} ms)", took.as_millis());
}

/// A deadlock under a flight recorder: the report says where its window
/// went, and the file opens in the trace tool with the stuck goroutine.
fn flight_recorder_writes_its_window() {
    let dir = std::env::temp_dir().join(format!("flight-{}-deadlock", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let out = common::self_command()
        .env(SCENARIO, "flight_recorder")
        .env("GOROUTINE_TRACE", format!("flight:30:{}", dir.display()))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with("fatal error: all goroutines are asleep - deadlock!"),
        "{stderr}"
    );
    let line = stderr
        .lines()
        .find(|l| l.starts_with("goroutine: flight recorder (deadlock): trace written to "))
        .unwrap_or_else(|| panic!("no flight recorder line:\n{stderr}"));
    let path = std::path::PathBuf::from(line.rsplit_once(" to ").unwrap().1);
    assert_eq!(path.parent(), Some(dir.as_path()), "{line}");
    let bytes = std::fs::read(&path).unwrap();
    let t = goroutine_trace::decode::decode(&bytes, Default::default(), &mut |_, _| {})
        .unwrap_or_else(|e| panic!("the tool cannot read {}: {e}", path.display()));
    let _ = goroutine_trace::model::build(&t, &mut |_, _| {});
    let stuck = t.events.iter().find_map(|e| match &e.ev {
        goroutine_trace::format::Event::GoName { g, name } if name == "stuck-receiver" => Some(*g),
        _ => None,
    });
    let stuck = stuck.expect("the stuck goroutine's name");
    assert!(
        t.events.iter().any(|e| matches!(
            e.ev,
            goroutine_trace::format::Event::GoBlock { g, .. } if g == stuck
        )),
        "the stuck goroutine's block"
    );
    let _ = std::fs::remove_dir_all(&dir);
    println!("flight_recorder: ok");
}

fn expect_success(name: &str) {
    let mut child = spawn(name);
    if name == "accept_pending" {
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let line = lines.next().unwrap().unwrap();
        let port: u16 = line.strip_prefix("port ").unwrap().parse().unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let _c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let status = child.wait().unwrap();
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
        assert!(status.success(), "{name}: {status}\n{stderr}");
        println!("{name}: ok");
        return;
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{name}: {}\n{stderr}", out.status);
    assert!(String::from_utf8_lossy(&out.stdout).contains("ok"));
    println!("{name}: ok");
}

fn main() {
    if let Ok(name) = std::env::var(SCENARIO) {
        scenario(&name);
        return;
    }
    expect_deadlock("select_forever", &["goroutine 1 [select (no cases)]:"]);
    expect_deadlock("chan_nobody_sends", &["goroutine 1 [chan receive]:"]);
    expect_deadlock(
        "locked_blocked_forever",
        &[
            "goroutine 1 [chan receive]:",
            "[chan receive, locked to thread]:",
        ],
    );
    expect_deadlock(
        "many_blocked",
        &["goroutine 1 [chan receive]:", "[chan send]:"],
    );
    // Each must be reported within 10 s of the process start. Before:
    // - sleeper_then_block: 20-60 s (sysmon deep-slept past the last M's
    //   park); now about 1.06 s;
    // - stopped_timer_then_block, recv_timeout_answered_then_block: an hour
    //   (the stopped timers); now about 0.06 s;
    // - thread_exits_last: 60 s (a thread's exit wakes nobody); now 0.37 s.
    for name in [
        "sleeper_then_block",
        "stopped_timer_then_block",
        "recv_timeout_answered_then_block",
        "thread_exits_last",
        "thread_blocks_last",
        "full_descriptor_table",
    ] {
        expect_deadlock_within(
            name,
            &["goroutine 1 [chan receive]:"],
            Some(Duration::from_secs(10)),
        );
    }
    // The thread exits at 4.3 s. With a back-off that kept doubling from
    // the first idle spell, the report came at 9.2 s; now at 4.4 s.
    expect_deadlock_within(
        "thread_exits_after_waking",
        &["goroutine 1 [chan receive]:"],
        Some(Duration::from_secs(8)),
    );
    flight_recorder_writes_its_window();
    expect_success("goroutine_in_kernel_sleep");
    expect_success("timer_pending");
    expect_success("accept_pending");
    expect_success("thread_sends_later");
}
