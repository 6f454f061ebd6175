//! A WebSocket echo server and client: tungstenite over `goroutine::net`
//! sockets, one goroutine per connection. tungstenite works over any
//! `Read + Write` stream, so it runs over our sockets unchanged.
//!
//! ```text
//! # Demo: a server and 100 concurrent clients in one process.
//! cargo run --release --example ws_echo
//!
//! # Server only, for a real client (a browser's `new WebSocket(...)`,
//! # websocat, or our client):
//! cargo run --release --example ws_echo -- server 127.0.0.1:9001
//! cargo run --release --example ws_echo -- client ws://127.0.0.1:9001/
//! ```
//!
//! The server and client functions are also driven by `tests/ecosystem.rs`.

use std::io;

use goroutine::net::{TcpListener, TcpStream};
use tungstenite::{Message, WebSocket};

fn ws_err(e: tungstenite::Error) -> io::Error {
    match e {
        tungstenite::Error::Io(e) => e,
        e => io::Error::other(e),
    }
}

/// Echoes every text and binary message until the client closes; returns
/// the number of messages echoed.
pub fn serve(conn: TcpStream) -> io::Result<u64> {
    let mut ws = tungstenite::accept(conn).map_err(|e| io::Error::other(e.to_string()))?;
    let mut n = 0;
    loop {
        match ws.read() {
            Ok(m @ (Message::Text(_) | Message::Binary(_))) => {
                ws.send(m).map_err(ws_err)?;
                n += 1;
            }
            // tungstenite answers pings and the closing handshake itself.
            Ok(_) => {}
            Err(tungstenite::Error::ConnectionClosed) => return Ok(n),
            // A client that just drops the connection: done.
            Err(tungstenite::Error::Protocol(
                tungstenite::error::ProtocolError::ResetWithoutClosingHandshake,
            )) => return Ok(n),
            Err(e) => return Err(ws_err(e)),
        }
    }
}

/// Connects to `url` (`ws://host:port/path`).
pub fn connect(url: &str) -> io::Result<WebSocket<TcpStream>> {
    let uri: tungstenite::http::Uri = url
        .parse()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{url}: {e}")))?;
    let host = uri.host().unwrap_or("127.0.0.1");
    let port = uri.port_u16().unwrap_or(80);
    let stream = TcpStream::connect((host, port))?;
    let (ws, _response) =
        tungstenite::client(url, stream).map_err(|e| io::Error::other(e.to_string()))?;
    Ok(ws)
}

/// Sends each message and reads its echo; closes cleanly; returns the
/// echoes.
pub fn echo_client(url: &str, msgs: &[Message]) -> io::Result<Vec<Message>> {
    let mut ws = connect(url)?;
    let mut back = Vec::with_capacity(msgs.len());
    for m in msgs {
        ws.send(m.clone()).map_err(ws_err)?;
        back.push(ws.read().map_err(ws_err)?);
    }
    ws.close(None).map_err(ws_err)?;
    // Drive the closing handshake to its end.
    loop {
        match ws.read() {
            Ok(_) => {}
            Err(tungstenite::Error::ConnectionClosed) => break,
            Err(e) => return Err(ws_err(e)),
        }
    }
    Ok(back)
}

/// Accepts connections forever, one goroutine each.
pub fn run_server(listener: TcpListener) {
    for conn in listener.incoming() {
        match conn {
            Ok(conn) => {
                goroutine::go(move || {
                    if let Err(e) = serve(conn) {
                        eprintln!("ws_echo: connection: {e}");
                    }
                });
            }
            Err(e) => eprintln!("ws_echo: accept: {e}"),
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("server") => {
            let addr = args.get(1).cloned().unwrap_or("127.0.0.1:9001".into());
            goroutine::run(move || {
                let l = TcpListener::bind(&addr).unwrap_or_else(|e| {
                    eprintln!("ws_echo: cannot listen on {addr}: {e}");
                    std::process::exit(1)
                });
                println!(
                    "ws_echo: WebSocket echo on ws://{}/",
                    l.local_addr().unwrap()
                );
                run_server(l);
            });
        }
        Some("client") => {
            let url = args
                .get(1)
                .cloned()
                .unwrap_or("ws://127.0.0.1:9001/".into());
            let back =
                goroutine::run(move || echo_client(&url, &[Message::text("hello over WebSocket")]))
                    .expect("echo");
            for m in back {
                println!("{m}");
            }
        }
        _ => demo(),
    }
}

/// A server and 100 clients, every message checked.
fn demo() {
    const CLIENTS: usize = 100;
    goroutine::run(|| {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("ws://{}/", l.local_addr().unwrap());
        goroutine::go(move || run_server(l));
        let start = std::time::Instant::now();
        let clients: Vec<_> = (0..CLIENTS)
            .map(|i| {
                let url = url.clone();
                goroutine::go(move || {
                    let msgs: Vec<Message> = (0..50)
                        .map(|k| match k % 2 {
                            0 => Message::text(format!("client {i} message {k}")),
                            _ => Message::binary(vec![(i + k) as u8; 1000 + k]),
                        })
                        .collect();
                    let back = echo_client(&url, &msgs).expect("echo");
                    assert!(back == msgs, "client {i}: the echo differs");
                    back.len()
                })
            })
            .collect();
        let total: usize = clients.into_iter().map(|h| h.join().unwrap()).sum();
        println!(
            "ws_echo: {CLIENTS} WebSocket clients echoed {total} messages, all checked, in {:?}",
            start.elapsed()
        );
    });
}
