//! Real protocol crates over `goroutine::net`: the rustls TLS echo, the
//! tungstenite WebSocket echo and the httparse HTTP server of the
//! examples, each driven by 100+ concurrent client goroutines with every
//! byte checked.

mod common;

#[allow(dead_code)]
#[path = "../examples/http_hello.rs"]
mod http_hello;
#[allow(dead_code)]
#[path = "../examples/tls_echo.rs"]
mod tls_echo;
#[allow(dead_code)]
#[path = "../examples/ws_echo.rs"]
mod ws_echo;

use std::io::{Read, Write};

use common::within;
use goroutine::go;
use goroutine::net::{TcpListener, TcpStream};

const CONNS: usize = 120;

#[test]
fn rustls_echo_with_many_clients() {
    within(120, || {
        let id = tls_echo::self_signed();
        let (sc, cc) = (
            tls_echo::server_config(&id),
            tls_echo::client_config(id.cert.clone()),
        );
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        go(move || tls_echo::run_server(l, sc));
        let clients: Vec<_> = (0..CONNS)
            .map(|i| {
                let (addr, cc) = (addr.clone(), cc.clone());
                go(move || {
                    let data: Vec<u8> = (0..40_000usize).map(|k| (k * 31 + i) as u8).collect();
                    let back = tls_echo::echo_client(&addr, cc, &data).unwrap();
                    assert!(back == data, "client {i}: echo differs");
                })
            })
            .collect();
        for c in clients {
            c.join().unwrap();
        }
    });
}

#[test]
fn tungstenite_echo_with_many_clients() {
    use tungstenite::Message;
    within(120, || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("ws://{}/chat", l.local_addr().unwrap());
        go(move || ws_echo::run_server(l));
        let clients: Vec<_> = (0..CONNS)
            .map(|i| {
                let url = url.clone();
                go(move || {
                    let msgs: Vec<Message> = (0..20usize)
                        .map(|k| match k % 3 {
                            0 => Message::text(format!("{i}:{k} héllo")),
                            1 => Message::binary(vec![(i ^ k) as u8; 70_000 + k]),
                            _ => Message::binary((0..k * 100).map(|b| b as u8).collect::<Vec<_>>()),
                        })
                        .collect();
                    let back = ws_echo::echo_client(&url, &msgs).unwrap();
                    assert!(back == msgs, "client {i}: echo differs");
                })
            })
            .collect();
        for c in clients {
            c.join().unwrap();
        }
    });
}

#[test]
fn httparse_server_with_many_clients() {
    const OK: &[u8] =
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 14\r\n\r\nHello, World!\n";
    within(120, || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        go(move || {
            for conn in l.incoming() {
                let conn = conn.unwrap();
                go(move || {
                    conn.set_read_timeout(Some(http_hello::IDLE_TIMEOUT))
                        .unwrap();
                    http_hello::serve(&conn).unwrap()
                });
            }
        });
        let clients: Vec<_> = (0..CONNS)
            .map(|i| {
                go(move || {
                    let mut c = TcpStream::connect(addr).unwrap();
                    // Requests as real clients send them: CRLF, bare LF, a
                    // leading empty line, pipelined, a body, split writes.
                    let reqs: [&[u8]; 5] = [
                        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
                        b"GET /lf HTTP/1.1\nHost: x\n\n",
                        b"\r\nGET /blank HTTP/1.1\r\nHost: x\r\n\r\n",
                        b"POST /p HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello",
                        b"GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n",
                    ];
                    let mut expect = 0;
                    for (k, r) in reqs.iter().enumerate() {
                        if (i + k) % 2 == 0 {
                            c.write_all(r).unwrap();
                        } else {
                            let (a, b) = r.split_at(r.len() / 2);
                            c.write_all(a).unwrap();
                            c.write_all(b).unwrap();
                        }
                        expect += if k == 4 { 2 } else { 1 };
                    }
                    c.write_all(b"GET /end HTTP/1.1\r\nConnection: close\r\n\r\n")
                        .unwrap();
                    let mut all = Vec::new();
                    c.read_to_end(&mut all).unwrap();
                    let mut want = OK.repeat(expect);
                    want.extend_from_slice(
                        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 14\r\nConnection: close\r\n\r\nHello, World!\n",
                    );
                    assert_eq!(
                        String::from_utf8_lossy(&all),
                        String::from_utf8_lossy(&want),
                        "client {i}"
                    );
                })
            })
            .collect();
        for c in clients {
            c.join().unwrap();
        }
    });
}
