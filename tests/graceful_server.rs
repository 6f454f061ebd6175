//! The `graceful_server` example in a child process under load, stopped by
//! SIGTERM: every request that got a response got a complete one, the
//! exit code is 0, and it stops within its 5 s grace period (plus slack
//! for a loaded machine).

mod common;

#[allow(dead_code)]
#[path = "../examples/graceful_server.rs"]
mod graceful_server;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CHILD: &str = "graceful_child";

#[test]
fn graceful_child() {
    if common::is_child(CHILD) {
        std::process::exit(graceful_server::run_server("127.0.0.1:0"));
    }
}

/// Reads one response; `Ok(None)` if the connection closed before any byte
/// of it, `Err` for a response cut short. Returns whether it said
/// `Connection: close`.
fn read_response(r: &mut BufReader<TcpStream>) -> Result<Option<bool>, String> {
    let mut line = String::new();
    match r.read_line(&mut line) {
        Ok(0) | Err(_) => return Ok(None),
        Ok(_) => {}
    }
    if !line.starts_with("HTTP/1.1 ") {
        return Err(format!("bad status line {line:?}"));
    }
    let (mut len, mut close) = (None, false);
    loop {
        let mut h = String::new();
        match r.read_line(&mut h) {
            Ok(0) | Err(_) => return Err(format!("headers cut short after {line:?}")),
            Ok(_) => {}
        }
        if h == "\r\n" {
            break;
        }
        let lower = h.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length: ") {
            len = Some(v.trim().parse::<usize>().map_err(|e| e.to_string())?);
        }
        if lower.starts_with("connection: close") {
            close = true;
        }
    }
    let len = len.ok_or("no Content-Length")?;
    let mut body = vec![0; len];
    r.read_exact(&mut body)
        .map_err(|e| format!("body cut short: {e}"))?;
    if !line.contains("200") || !(body.starts_with(b"Hello") || body.starts_with(b"slept")) {
        return Err(format!(
            "unexpected response {line:?} {:?}",
            String::from_utf8_lossy(&body)
        ));
    }
    Ok(Some(close))
}

#[test]
fn sigterm_under_load() {
    let mut child = common::self_command()
        .args(["--exact", CHILD, "--nocapture", "--test-threads=1"])
        .env("GOROUTINE_TEST_CHILD", CHILD)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // A watchdog: a hang fails the test instead of blocking it. SIGQUIT
    // first (a goroutine dump), SIGKILL if that did not end it either.
    let pid = child.id() as i32;
    let done = Arc::new(AtomicBool::new(false));
    {
        let done = done.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(120));
            if !done.load(Ordering::Relaxed) {
                eprintln!("graceful_server child still running after 120 s: killing it");
                common::send_signal(pid, libc::SIGQUIT, "goroutine-sigqu");
                std::thread::sleep(Duration::from_secs(10));
                if !done.load(Ordering::Relaxed) {
                    // SAFETY: signalling our own child.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
        });
    }
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let addr = loop {
        let mut line = String::new();
        assert_ne!(out.read_line(&mut line).unwrap(), 0, "child exited early");
        // libtest may have printed "test graceful_child ... " first.
        if let Some(i) = line.find("listening on ") {
            break line[i + "listening on ".len()..].trim().to_string();
        }
    };

    let stop = Arc::new(AtomicBool::new(false));
    let complete = Arc::new(AtomicU64::new(0));
    let clients: Vec<_> = (0..16)
        .map(|i| {
            let (addr, stop, complete) = (addr.clone(), stop.clone(), complete.clone());
            std::thread::spawn(move || -> Result<(), String> {
                while !stop.load(Ordering::Relaxed) {
                    let Ok(c) = TcpStream::connect(&addr) else {
                        return Ok(()); // the listener is gone
                    };
                    let mut w = c.try_clone().unwrap();
                    let mut r = BufReader::new(c);
                    // Keep-alive: many requests per connection, some slow.
                    for k in 0.. {
                        let path = if (i + k) % 4 == 0 {
                            "/slow?ms=300"
                        } else {
                            "/"
                        };
                        let req = format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n");
                        if w.write_all(req.as_bytes()).is_err() {
                            break;
                        }
                        match read_response(&mut r)? {
                            None | Some(true) => break,
                            Some(false) => {
                                complete.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        if k % 5 == 4 {
                            // Idle for a while on a keep-alive connection.
                            std::thread::sleep(Duration::from_millis(50));
                        }
                    }
                }
                Ok(())
            })
        })
        .collect();

    std::thread::sleep(Duration::from_millis(700));
    let before = complete.load(Ordering::Relaxed);
    assert!(before > 0, "no request completed before the signal");
    let t = Instant::now();
    common::send_signal(pid, libc::SIGTERM, "goroutine-signa");
    let status = child.wait().unwrap();
    let took = t.elapsed();
    done.store(true, Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().unwrap().unwrap();
    }
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert!(status.success(), "exit status {status:?}; output: {rest}");
    assert!(
        rest.contains("graceful_server: SIGTERM: stopped accepting"),
        "no summary line in {rest:?}"
    );
    // The 5 s grace period, plus slack for a loaded machine.
    assert!(took < Duration::from_secs(15), "took {took:?} to stop");
    eprintln!(
        "{} responses, all complete; stopped in {took:?}: {}",
        complete.load(Ordering::Relaxed),
        rest.trim()
    );
}
