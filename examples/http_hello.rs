//! A minimal HTTP/1.1 server answering every request with
//! `Hello, World!\n`: keep-alive, pipelined requests, `Connection: close`,
//! HTTP/1.0 clients, request bodies with `Content-Length`, an idle timeout
//! between requests and a deadline for each whole request (Go's
//! `IdleTimeout` and `ReadHeaderTimeout`), both with Go-style read
//! deadlines. One goroutine per connection; requests are parsed by the
//! `httparse` crate (the parser under hyper), over `goroutine::net`
//! sockets.
//!
//! ```text
//! cargo run --release --example http_hello [ADDR]    # default 127.0.0.1:8080
//! curl -v http://127.0.0.1:8080/
//! wrk -t2 -c100 -d10s http://127.0.0.1:8080/
//! ```
//!
//! The connection handler, [`serve`], is also run by `tests/net.rs`.

use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

use goroutine::net::{TcpListener, TcpStream};

const BODY: &[u8] = b"Hello, World!\n";

/// Largest request head (request line and headers) plus body we accept.
const MAX_REQUEST: usize = 16 * 1024;

/// How long a connection may stay silent between requests.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a request may take to arrive whole (head and body), from its
/// first byte: a client that sends one byte every 29 s must not hold a
/// connection (and its goroutine) forever. Go's `ReadHeaderTimeout`.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The bounds [`serve_with`] keeps.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Silence allowed between requests (then the connection is closed).
    pub idle: Duration,
    /// Time allowed for one request to arrive whole, from its first byte
    /// (then `408 Request Timeout` and close).
    pub request: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            idle: IDLE_TIMEOUT,
            request: REQUEST_TIMEOUT,
        }
    }
}

/// How long a connection closed on an error answer keeps reading (and
/// dropping) what the client still sends, after its write side is shut:
/// closing a socket with unread bytes sends a reset, which can destroy the
/// answer before the client reads it. Go's `rstAvoidanceDelay`.
const LINGER: Duration = Duration::from_millis(500);

/// What [`serve`] needs of a connection besides `Read` and `Write`: Go's
/// read deadline, which also ends a read already waiting.
pub trait Conn: Read + Write {
    fn set_read_deadline(&self, deadline: Option<Instant>);

    /// Closes gracefully after an error answer: shut the write side (the
    /// client sees the answer, then EOF) and drain the read side for at
    /// most [`LINGER`], so that the close sends no reset. A connection
    /// without deadlines cannot bound the drain and skips it.
    fn lingering_close(&mut self) {}
}

impl Conn for &TcpStream {
    fn set_read_deadline(&self, deadline: Option<Instant>) {
        TcpStream::set_read_deadline(self, deadline);
    }

    fn lingering_close(&mut self) {
        if self.shutdown(std::net::Shutdown::Write).is_err() {
            return;
        }
        TcpStream::set_read_deadline(self, Some(Instant::now() + LINGER));
        let mut sink = [0u8; 512];
        while matches!(self.read(&mut sink), Ok(n) if n > 0) {}
    }
}

/// A stream served without deadlines (another runtime's, or a plain
/// thread's): [`serve`] then bounds only what the stream's own timeouts
/// bound. The benchmark tool serves every runtime's streams this way, so
/// that all of them do the same work per request (Go's `net/http` sets no
/// deadline either unless a server asks for one).
pub struct NoDeadline<S>(pub S);

impl<S: Read> Read for NoDeadline<S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

impl<S: Write> Write for NoDeadline<S> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl<S: Read + Write> Conn for NoDeadline<S> {
    fn set_read_deadline(&self, _: Option<Instant>) {}
}

/// [`serve_with`] with the default [`Limits`].
pub fn serve<S: Conn>(conn: S) -> io::Result<()> {
    serve_with(conn, Limits::default())
}

/// Serves requests on `conn` until the client closes it, asks for
/// `Connection: close`, sends something that is not HTTP/1.x, stays idle
/// longer than `limits.idle`, takes longer than `limits.request` to send
/// one request, or an I/O error. Every complete request already received is
/// answered before the next read, and the answers go out in one write
/// (pipelining).
pub fn serve_with<S: Conn>(mut conn: S, limits: Limits) -> io::Result<()> {
    let mut buf = vec![0u8; MAX_REQUEST];
    let (mut start, mut end) = (0, 0);
    let mut out = Vec::with_capacity(4096);
    // The deadline of the request whose bytes are in the buffer, set when
    // its first byte arrived; `None` between requests.
    let mut request_deadline: Option<Instant> = None;
    loop {
        let (mut close, mut error_close) = (false, false);
        while !close {
            match parse(&buf[start..end]) {
                Parsed::Incomplete => break,
                Parsed::Request(req) => {
                    start += req.len;
                    close = !req.keep_alive;
                    request_deadline = None;
                    respond(&mut out, &req);
                }
                Parsed::Bad(status) => {
                    error(&mut out, status);
                    (close, error_close) = (true, true);
                }
            }
        }
        if !close && start == 0 && end == buf.len() {
            error(&mut out, "413 Content Too Large");
            (close, error_close) = (true, true);
        }
        if !out.is_empty() {
            conn.write_all(&out)?;
            out.clear();
        }
        if close {
            if error_close {
                conn.lingering_close();
            }
            return Ok(());
        }
        // Keep the unparsed tail at the front of the buffer.
        buf.copy_within(start..end, 0);
        end -= start;
        start = 0;
        // Part of a request is here: it has until its deadline, however
        // slowly the rest trickles in. Otherwise: the idle timeout.
        if end > 0 && request_deadline.is_none() {
            request_deadline = Some(Instant::now() + limits.request);
        }
        conn.set_read_deadline(Some(
            request_deadline.unwrap_or_else(|| Instant::now() + limits.idle),
        ));
        let n = match conn.read(&mut buf[end..]) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            // A deadline passed (or a read timeout the caller set): in the
            // middle of a request, say so; between requests, close as
            // servers do, without an answer.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
                ) =>
            {
                if end > 0 {
                    error(&mut out, "408 Request Timeout");
                    if conn.write_all(&out).is_ok() {
                        conn.lingering_close();
                    }
                }
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        end += n;
    }
}

/// One parsed request: its length in the buffer and how to answer it.
struct Request {
    len: usize,
    keep_alive: bool,
    /// HTTP/1.0 with `Connection: keep-alive`: the answer must say so.
    say_keep_alive: bool,
    head: bool,
}

enum Parsed {
    Incomplete,
    Request(Request),
    Bad(&'static str),
}

/// Most headers a request may have.
const MAX_HEADERS: usize = 64;

/// Parses the request at the start of `data` with httparse, which follows
/// RFC 9112: bare-LF line ends are accepted, empty lines before the request
/// line are skipped.
fn parse(data: &[u8]) -> Parsed {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let head_len = match req.parse(data) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Parsed::Incomplete,
        Err(httparse::Error::Version) => return Parsed::Bad("505 HTTP Version Not Supported"),
        Err(httparse::Error::TooManyHeaders) => {
            return Parsed::Bad("431 Request Header Fields Too Large")
        }
        Err(_) => return Parsed::Bad("400 Bad Request"),
    };
    let http10 = req.version == Some(0);
    let (mut close, mut keep_alive, mut body_len) = (false, false, None::<usize>);
    for h in req.headers.iter() {
        let Ok(value) = std::str::from_utf8(h.value) else {
            return Parsed::Bad("400 Bad Request");
        };
        let value = value.trim();
        if h.name.eq_ignore_ascii_case("connection") {
            for token in value.split(',').map(str::trim) {
                close |= token.eq_ignore_ascii_case("close");
                keep_alive |= token.eq_ignore_ascii_case("keep-alive");
            }
        } else if h.name.eq_ignore_ascii_case("content-length") {
            // RFC 9112 6.3: differing or invalid lengths are an error.
            match (value.parse::<usize>(), body_len) {
                (Ok(n), None) => body_len = Some(n),
                (Ok(n), Some(m)) if n == m => {}
                _ => return Parsed::Bad("400 Bad Request"),
            }
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            return Parsed::Bad("501 Not Implemented");
        }
    }
    let len = head_len + body_len.unwrap_or(0);
    if len > MAX_REQUEST {
        return Parsed::Bad("413 Content Too Large");
    }
    if data.len() < len {
        return Parsed::Incomplete;
    }
    Parsed::Request(Request {
        len,
        keep_alive: !close && (!http10 || keep_alive),
        say_keep_alive: http10 && keep_alive && !close,
        head: req.method == Some("HEAD"),
    })
}

fn respond(out: &mut Vec<u8>, req: &Request) {
    out.extend_from_slice(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: ");
    out.extend_from_slice(BODY.len().to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
    if !req.keep_alive {
        out.extend_from_slice(b"Connection: close\r\n");
    } else if req.say_keep_alive {
        out.extend_from_slice(b"Connection: keep-alive\r\n");
    }
    out.extend_from_slice(b"\r\n");
    if !req.head {
        out.extend_from_slice(BODY);
    }
}

fn error(out: &mut Vec<u8>, status: &str) {
    out.extend_from_slice(
        format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").as_bytes(),
    );
}

#[goroutine::main]
fn main() {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8080".to_string());
    let listener = match TcpListener::bind(&addr) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("http_hello: cannot listen on {addr}: {e}");
            std::process::exit(1);
        }
    };
    println!(
        "http_hello: listening on http://{}/ (GOMAXPROCS={})",
        listener.local_addr().expect("local_addr"),
        goroutine::max_procs()
    );
    for conn in listener.incoming() {
        match conn {
            Ok(conn) => {
                goroutine::go(move || {
                    // Small answers: do not wait for more to coalesce.
                    let _ = conn.set_nodelay(true);
                    let _ = serve(&conn);
                });
            }
            Err(e) => {
                // Out of descriptors, for example: back off a little and
                // keep serving, as Go's net/http does.
                eprintln!("http_hello: accept: {e}");
                goroutine::time::sleep(Duration::from_millis(5));
            }
        }
    }
}
