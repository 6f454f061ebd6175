//! An HTTP server traced with `tracing` (feature `tracing`): one goroutine
//! per connection, `#[instrument]`-ed handlers that read the socket, sleep
//! and ask a backend goroutine over a channel, with tracing-subscriber's
//! fmt layer printing each event with its spans and its OS thread. The
//! goroutines move between threads at every one of those calls; each
//! request's events still print inside its own spans
//! (`conn{peer=..}:request{id=.. path=..}`), never another request's.
//!
//! ```text
//! cargo run --release --features tracing --example traced_server [ADDR]   # 127.0.0.1:8080
//! for i in $(seq 20); do curl -s http://127.0.0.1:8080/item/$i & done; wait
//! ```

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use goroutine::net::{TcpListener, TcpStream};
use goroutine::{chan, go, Sender};
use tracing::{info, instrument, warn};

/// A request to the backend: a key and where to send the answer.
type Ask = (String, Sender<String>);

static NEXT_REQUEST: AtomicU64 = AtomicU64::new(1);

fn main() -> io::Result<()> {
    tracing_subscriber::fmt()
        .with_thread_ids(true)
        .with_target(false)
        .init();
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8080".into());
    goroutine::run(move || {
        let (backend, asks) = chan::<Ask>(0);
        go(move || {
            for (key, reply) in asks {
                // The backend is a goroutine of its own: its work is not
                // part of any request's span.
                goroutine::time::sleep(Duration::from_millis(2));
                let _ = reply.send(format!("value of {key}"));
            }
        });
        let listener = TcpListener::bind(&addr)?;
        info!(addr = %listener.local_addr()?, "listening");
        loop {
            let (conn, peer) = listener.accept()?;
            let backend = backend.clone();
            go(move || {
                if let Err(e) = connection(conn, peer, &backend) {
                    warn!(error = %e, "connection failed");
                }
            });
        }
    })
}

/// Serves one connection: one request, then close.
#[instrument(name = "conn", skip(conn, backend))]
fn connection(mut conn: TcpStream, peer: SocketAddr, backend: &Sender<Ask>) -> io::Result<()> {
    info!("accepted");
    let Some(path) = read_request(&mut conn)? else {
        info!("closed before a request");
        return Ok(());
    };
    let id = NEXT_REQUEST.fetch_add(1, Ordering::Relaxed);
    let body = request(id, &path, backend);
    write!(
        conn,
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    info!(bytes = body.len(), "answered");
    Ok(())
}

/// Reads the request head and returns its path (None: closed first).
#[instrument(skip(conn))]
fn read_request(conn: &mut TcpStream) -> io::Result<Option<String>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        let n = conn.read(&mut chunk)?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf) {
            Ok(httparse::Status::Complete(_)) => {
                let path = req.path.unwrap_or("/").to_string();
                info!(%path, "request read");
                return Ok(Some(path));
            }
            Ok(httparse::Status::Partial) if buf.len() < 16 * 1024 => continue,
            _ => return Err(io::Error::new(io::ErrorKind::InvalidData, "bad request")),
        }
    }
}

/// The handler: some local work, then a question to the backend.
#[instrument(skip(backend))]
fn request(id: u64, path: &str, backend: &Sender<Ask>) -> String {
    info!("handling");
    goroutine::time::sleep(Duration::from_millis(1));
    let value = lookup(path, backend);
    info!(%value, "handled");
    format!("request {id}: {value}\n")
}

/// Asks the backend goroutine and waits for its answer.
#[instrument(skip(backend))]
fn lookup(key: &str, backend: &Sender<Ask>) -> String {
    let (reply, answer) = chan(1);
    backend
        .send((key.to_string(), reply))
        .expect("backend gone");
    info!("asked the backend");
    let value = answer.recv().expect("backend gone");
    info!("backend answered");
    value
}
