//! A minimal HTTP/1.1 server answering every request with
//! `Hello, World!\n`: keep-alive, pipelined requests, `Connection: close`,
//! HTTP/1.0 clients, request bodies with `Content-Length`. One goroutine per
//! connection.
//!
//! ```text
//! cargo run --release --example http_hello [ADDR]    # default 127.0.0.1:8080
//! curl -v http://127.0.0.1:8080/
//! wrk -t2 -c100 -d10s http://127.0.0.1:8080/
//! ```
//!
//! The connection handler, [`serve`], is also run by `tests/net.rs`.

use std::io::{self, Read, Write};
use std::time::Duration;

use goroutine::net::TcpListener;

const BODY: &[u8] = b"Hello, World!\n";

/// Largest request head (request line and headers) plus body we accept.
const MAX_REQUEST: usize = 16 * 1024;

/// Serves requests on `conn` until the client closes it, asks for
/// `Connection: close`, sends something that is not HTTP/1.x, or an I/O
/// error. Every complete request already received is answered before the
/// next read, and the answers go out in one write (pipelining).
pub fn serve<S: Read + Write>(mut conn: S) -> io::Result<()> {
    let mut buf = vec![0u8; MAX_REQUEST];
    let (mut start, mut end) = (0, 0);
    let mut out = Vec::with_capacity(4096);
    loop {
        let mut close = false;
        while !close {
            match parse(&buf[start..end]) {
                Parsed::Incomplete => break,
                Parsed::Request(req) => {
                    start += req.len;
                    close = !req.keep_alive;
                    respond(&mut out, &req);
                }
                Parsed::Bad(status) => {
                    error(&mut out, status);
                    close = true;
                }
            }
        }
        if !close && start == 0 && end == buf.len() {
            error(&mut out, "413 Content Too Large");
            close = true;
        }
        if !out.is_empty() {
            conn.write_all(&out)?;
            out.clear();
        }
        if close {
            return Ok(());
        }
        // Keep the unparsed tail at the front of the buffer.
        buf.copy_within(start..end, 0);
        end -= start;
        start = 0;
        let n = conn.read(&mut buf[end..])?;
        if n == 0 {
            return Ok(());
        }
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

fn parse(data: &[u8]) -> Parsed {
    let Some(head_len) = data.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Parsed::Incomplete;
    };
    let Ok(head) = std::str::from_utf8(&data[..head_len]) else {
        return Parsed::Bad("400 Bad Request");
    };
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or("");
    let mut parts = request_line.split(' ');
    let (Some(method), Some(_target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Parsed::Bad("400 Bad Request");
    };
    let http10 = match version {
        "HTTP/1.1" => false,
        "HTTP/1.0" => true,
        _ => return Parsed::Bad("505 HTTP Version Not Supported"),
    };
    let (mut close, mut keep_alive, mut body_len) = (false, false, 0usize);
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            return Parsed::Bad("400 Bad Request");
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("connection") {
            for token in value.split(',').map(str::trim) {
                close |= token.eq_ignore_ascii_case("close");
                keep_alive |= token.eq_ignore_ascii_case("keep-alive");
            }
        } else if name.eq_ignore_ascii_case("content-length") {
            match value.parse() {
                Ok(n) => body_len = n,
                Err(_) => return Parsed::Bad("400 Bad Request"),
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            return Parsed::Bad("501 Not Implemented");
        }
    }
    let len = head_len + 4 + body_len;
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
        head: method == "HEAD",
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

fn main() {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8080".to_string());
    goroutine::run(move || {
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
    });
}
