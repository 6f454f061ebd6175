//! An HTTP/1.1 keep-alive server that shuts down gracefully on SIGTERM or
//! SIGINT, the way a Go server does with `signal.Notify`,
//! `Listener.SetDeadline`, `Conn.SetReadDeadline`, `context` and a
//! `sync.WaitGroup`:
//!
//! 1. stop accepting: a past deadline on the listener wakes the accept
//!    loop;
//! 2. close idle keep-alive connections: a past read deadline wakes each
//!    goroutine parked in `read`;
//! 3. let requests in flight finish, each with a context that gets a 5 s
//!    deadline at shutdown (`Context::with_timeout`); a connection that
//!    finishes a request during shutdown answers `Connection: close`;
//! 4. wait for every connection goroutine (WaitGroup), or force-close the
//!    stragglers when the deadline passes;
//! 5. print a one-line summary and exit 0.
//!
//! ```text
//! cargo run --release --example graceful_server [ADDR]   # default 127.0.0.1:8080
//! curl http://127.0.0.1:8080/             # Hello, World!
//! curl http://127.0.0.1:8080/slow?ms=2000 # answers after 2 s
//! kill -TERM <pid>                        # or Ctrl-C
//! ```
//!
//! Paths: `/slow?ms=N` answers after N ms (or `503` if the shutdown
//! deadline passes first); anything else answers `Hello, World!`.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use goroutine::context::{Cancel, Context};
use goroutine::net::{TcpListener, TcpStream};
use goroutine::sync::{Mutex, WaitGroup};
use goroutine::{go, select};

/// How long requests in flight get once shutdown starts.
const GRACE: Duration = Duration::from_secs(5);

struct Conn {
    stream: Arc<TcpStream>,
    /// Between a complete request head and the end of its response.
    busy: bool,
}

struct Server {
    conns: Mutex<HashMap<u64, Conn>>,
    /// Set under `conns`' lock (see `finish_request` and `shutdown`).
    shutting_down: AtomicBool,
    /// The context of every request; its deadline comes at shutdown, by
    /// replacing it (under `conns`' lock) with a child that has one.
    ctx: Mutex<Context>,
    requests: AtomicU64,
    connections: AtomicU64,
}

fn main() {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8080".into());
    std::process::exit(run_server(&addr));
}

/// Runs the server on `addr` until SIGTERM or SIGINT; the exit code (also
/// run by `tests/graceful_server.rs` in a child process).
pub fn run_server(addr: &str) -> i32 {
    let addr = addr.to_string();
    goroutine::run(move || match serve_until_signal(&addr) {
        Ok(summary) => {
            println!("{summary}");
            0
        }
        Err(e) => {
            eprintln!("graceful_server: {e}");
            1
        }
    })
}

fn serve_until_signal(addr: &str) -> io::Result<String> {
    let sigs = goroutine::signal::notify(&[libc::SIGTERM, libc::SIGINT])?;
    let listener = Arc::new(TcpListener::bind(addr)?);
    println!("listening on {}", listener.local_addr()?);
    io::stdout().flush()?;

    let (base, base_cancel) = Context::background().with_cancel();
    let server = Arc::new(Server {
        conns: Mutex::new(HashMap::new()),
        shutting_down: AtomicBool::new(false),
        ctx: Mutex::new(base),
        requests: AtomicU64::new(0),
        connections: AtomicU64::new(0),
    });
    let wg = WaitGroup::new();

    let accept_loop = {
        let (listener, server, wg) = (listener.clone(), server.clone(), wg.clone());
        go(move || accept_loop(&listener, &server, &wg))
    };

    let sig = sigs.recv().expect("the signal channel stays open");
    let t0 = Instant::now();
    let name = if sig == libc::SIGINT {
        "SIGINT"
    } else {
        "SIGTERM"
    };

    // 1. Stop accepting.
    listener.set_deadline(Some(Instant::now()));
    accept_loop
        .join()
        .expect("the accept loop does not panic")?;
    // 2 and 3. Close idle connections; give the busy ones a deadline.
    let (idle, _drain_cancel) = shutdown(&server);
    // 4. Wait for the connection goroutines, or force them when the
    //    deadline passes.
    let drain = server.ctx.lock().clone();
    let (all_done_tx, all_done) = goroutine::chan::<()>(0);
    {
        let wg = wg.clone();
        go(move || {
            wg.wait();
            drop(all_done_tx);
        });
    }
    let mut forced = 0;
    select! {
        recv(all_done) -> _ => {},
        recv(drain.done()) -> _ => {
            base_cancel.cancel();
            for c in server.conns.lock().values() {
                c.stream.set_deadline(Some(Instant::now()));
                forced += 1;
            }
            wg.wait();
        },
    }
    Ok(format!(
        "graceful_server: {name}: stopped accepting, served {} requests on {} connections, \
         closed {idle} idle, forced {forced}, done in {} ms",
        server.requests.load(Ordering::Relaxed),
        server.connections.load(Ordering::Relaxed),
        t0.elapsed().as_millis()
    ))
}

fn accept_loop(listener: &TcpListener, server: &Arc<Server>, wg: &WaitGroup) -> io::Result<()> {
    let mut next_id = 0u64;
    loop {
        let stream = match listener.accept() {
            Ok((s, _)) => Arc::new(s),
            Err(e) if e.kind() == io::ErrorKind::TimedOut => return Ok(()),
            // EMFILE and friends: the listener keeps working.
            Err(e) => {
                eprintln!("graceful_server: accept: {e}");
                goroutine::time::sleep(Duration::from_millis(10));
                continue;
            }
        };
        next_id += 1;
        let id = next_id;
        {
            let mut conns = server.conns.lock();
            if server.shutting_down.load(Ordering::Relaxed) {
                continue; // accepted just before the deadline: close it
            }
            conns.insert(
                id,
                Conn {
                    stream: stream.clone(),
                    busy: false,
                },
            );
        }
        server.connections.fetch_add(1, Ordering::Relaxed);
        wg.add(1);
        let (server, wg) = (server.clone(), wg.clone());
        go(move || {
            let _ = serve_conn(&server, id, &stream);
            server.conns.lock().remove(&id);
            wg.done();
        });
    }
}

/// Marks shutdown; closes idle connections with a past read deadline and
/// gives requests in flight a context with a `GRACE` deadline. Returns
/// how many idle connections it closed.
fn shutdown(server: &Server) -> (usize, Cancel) {
    let conns = server.conns.lock();
    server.shutting_down.store(true, Ordering::Relaxed);
    let mut ctx = server.ctx.lock();
    let (drain, cancel) = ctx.with_timeout(GRACE);
    *ctx = drain;
    let mut idle = 0;
    for c in conns.values().filter(|c| !c.busy) {
        c.stream.set_read_deadline(Some(Instant::now()));
        idle += 1;
    }
    (idle, cancel)
}

/// Serves requests on one connection until the client closes it, asks for
/// `Connection: close`, an error, or shutdown.
fn serve_conn(server: &Server, id: u64, stream: &TcpStream) -> io::Result<()> {
    let mut conn = stream;
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        // Read one request head (bodies are not supported: GET and HEAD).
        let head_len = loop {
            if let Some(i) = find(&buf, b"\r\n\r\n") {
                break i + 4;
            }
            if buf.len() > 16 * 1024 {
                conn.write_all(b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")?;
                return Ok(());
            }
            let n = conn.read(&mut chunk)?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        let ctx = {
            let mut conns = server.conns.lock();
            if let Some(c) = conns.get_mut(&id) {
                c.busy = true;
            }
            server.ctx.lock().clone()
        };
        let head = String::from_utf8_lossy(&buf[..head_len]).into_owned();
        buf.drain(..head_len);
        let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
        let client_close = head.to_ascii_lowercase().contains("connection: close");
        let (status, body) = handle(&ctx, &path);
        let close = finish_request(server, id) || client_close;
        let response = format!(
            "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n{}\r\n{body}",
            body.len(),
            if close { "Connection: close\r\n" } else { "" },
        );
        conn.write_all(response.as_bytes())?;
        server.requests.fetch_add(1, Ordering::Relaxed);
        if close {
            return Ok(());
        }
    }
}

/// Marks the connection idle again; true if it should close (shutdown has
/// begun). Under the registry lock, so that `shutdown` either sees it busy
/// (and leaves it to finish) or this sees `shutting_down`.
fn finish_request(server: &Server, id: u64) -> bool {
    let mut conns = server.conns.lock();
    if let Some(c) = conns.get_mut(&id) {
        c.busy = false;
    }
    server.shutting_down.load(Ordering::Relaxed)
}

fn handle(ctx: &Context, path: &str) -> (&'static str, String) {
    if let Some(ms) = path.strip_prefix("/slow?ms=") {
        let Ok(ms) = ms.parse::<u64>() else {
            return ("400 Bad Request", "bad ms\n".into());
        };
        select! {
            recv(goroutine::time::after(Duration::from_millis(ms))) -> _ => {
                ("200 OK", format!("slept {ms} ms\n"))
            },
            recv(ctx.done()) -> _ => {
                ("503 Service Unavailable", "shutting down\n".to_string())
            },
        }
    } else {
        ("200 OK", "Hello, World!\n".into())
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}
