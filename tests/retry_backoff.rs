//! An example of testing timing code with virtual time: a retry loop with
//! exponential backoff against a service that is down for ten minutes.
//! In a synctest bubble (`#[goroutine::test(synctest)]`) every sleep and
//! timeout runs on the bubble's fake clock, so the ten virtual minutes
//! take milliseconds, and the times asserted are exact on any machine.

use std::time::{Duration, Instant, SystemTime};

use goroutine::{chan, go, select, time, Sender};

/// Calls `op` until it succeeds or `max_attempts` failed, sleeping between
/// attempts: 1 s, then doubling, at most 2 minutes. Returns the result and
/// the number of attempts.
fn retry_with_backoff<T, E>(
    max_attempts: u32,
    mut op: impl FnMut() -> Result<T, E>,
) -> (Result<T, E>, u32) {
    let mut delay = Duration::from_secs(1);
    let mut attempt = 1;
    loop {
        match op() {
            Ok(v) => return (Ok(v), attempt),
            Err(e) if attempt == max_attempts => return (Err(e), attempt),
            Err(_) => {}
        }
        time::sleep(delay);
        delay = (delay * 2).min(Duration::from_secs(120));
        attempt += 1;
    }
}

type Request = Sender<Result<&'static str, &'static str>>;

/// A service that answers "unavailable" until `healthy_at`, then "ok";
/// with `hang`, it answers nothing before then.
fn service(healthy_at: SystemTime, hang: bool) -> Sender<Request> {
    let (tx, rx) = chan::<Request>(0);
    go(move || {
        // A hung service holds on to its requests, answering none.
        let mut held = Vec::new();
        for reply in rx.iter() {
            if time::now() >= healthy_at {
                let _ = reply.send(Ok("ok"));
            } else if hang {
                held.push(reply);
            } else {
                let _ = reply.send(Err("unavailable"));
            }
        }
    });
    tx
}

/// One call with a 5 s timeout.
fn call(svc: &Sender<Request>) -> Result<&'static str, &'static str> {
    let (reply, answer) = chan(1);
    svc.send(reply).map_err(|_| "service gone")?;
    select! {
        recv(answer) -> r => r.unwrap_or(Err("no answer")),
        default(Duration::from_secs(5)) => Err("timeout"),
    }
}

#[goroutine::test(synctest)]
fn retries_until_the_service_is_back_after_ten_minutes() {
    let real = Instant::now();
    let start = time::now();
    let svc = service(start + Duration::from_secs(600), false);
    let (result, attempts) = retry_with_backoff(20, || call(&svc));
    assert_eq!(result, Ok("ok"));
    // Attempts at 0, 1, 3, 7, 15, 31, 63, 127 s, then every 2 minutes:
    // 247, 367, 487, 607 s.
    assert_eq!(attempts, 12);
    assert_eq!(
        time::now().duration_since(start).unwrap(),
        Duration::from_secs(607)
    );
    // Ten virtual minutes, in (much) less than a second of real time.
    assert!(
        real.elapsed() < Duration::from_secs(1),
        "{:?}",
        real.elapsed()
    );
}

#[goroutine::test(synctest)]
fn each_attempt_times_out_while_the_service_hangs() {
    let start = time::now();
    let svc = service(start + Duration::from_secs(600), true);
    let (result, attempts) = retry_with_backoff(5, || call(&svc));
    assert_eq!(result, Err("timeout"));
    assert_eq!(attempts, 5);
    // Five 5 s timeouts and the sleeps between them: 1 + 2 + 4 + 8 s.
    assert_eq!(
        time::now().duration_since(start).unwrap(),
        Duration::from_secs(25 + 15)
    );
}
