//! A TLS echo server and client: rustls over `goroutine::net` sockets, one
//! goroutine per connection. rustls is synchronous (`StreamOwned` over any
//! `Read + Write`), so it runs over our sockets unchanged: every read and
//! write that would block parks the goroutine.
//!
//! ```text
//! # Demo: a server and 100 concurrent clients in one process.
//! cargo run --release --example tls_echo
//!
//! # Server only: writes its self-signed certificate next to it, for a
//! # real client:
//! cargo run --release --example tls_echo -- server 127.0.0.1:8443
//! openssl s_client -connect 127.0.0.1:8443 -CAfile tls_echo_cert.pem -quiet
//!
//! # Our client against it:
//! cargo run --release --example tls_echo -- client 127.0.0.1:8443 tls_echo_cert.pem
//! ```
//!
//! The server and client functions are also driven by `tests/ecosystem.rs`.

use std::io::{self, Read, Write};
use std::sync::Arc;

use goroutine::net::{TcpListener, TcpStream};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection};

/// A self-signed certificate for `localhost` and `127.0.0.1`, and its key.
pub struct Identity {
    pub cert: CertificateDer<'static>,
    pub key: PrivatePkcs8KeyDer<'static>,
    pub cert_pem: String,
}

pub fn self_signed() -> Identity {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
        .expect("generate a self-signed certificate");
    Identity {
        cert: ck.cert.der().clone(),
        key: PrivatePkcs8KeyDer::from(ck.key_pair.serialize_der()),
        cert_pem: ck.cert.pem(),
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

pub fn server_config(id: &Identity) -> Arc<ServerConfig> {
    let config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_no_client_auth()
        .with_single_cert(
            vec![id.cert.clone()],
            PrivateKeyDer::Pkcs8(id.key.clone_key()),
        )
        .expect("server certificate");
    Arc::new(config)
}

/// A client trusting exactly `cert`.
pub fn client_config(cert: CertificateDer<'static>) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots.add(cert).expect("trust the server's certificate");
    let config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    Arc::new(config)
}

/// Echoes everything the client sends until it closes; returns the bytes
/// echoed.
pub fn serve(conn: TcpStream, config: Arc<ServerConfig>) -> io::Result<u64> {
    let tls = ServerConnection::new(config).map_err(io::Error::other)?;
    let mut s = rustls::StreamOwned::new(tls, conn);
    let mut buf = [0u8; 16 * 1024];
    let mut total = 0;
    loop {
        let n = match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            // A client that leaves without close_notify (openssl s_client
            // on ^C): done.
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(e),
        };
        s.write_all(&buf[..n])?;
        s.flush()?;
        total += n as u64;
    }
    s.conn.send_close_notify();
    let _ = s.flush();
    Ok(total)
}

/// Connects to `addr`, sends `data` in chunks and reads each echo back;
/// returns what came back.
pub fn echo_client(addr: &str, config: Arc<ClientConfig>, data: &[u8]) -> io::Result<Vec<u8>> {
    let name = ServerName::try_from("localhost").expect("a valid name");
    let tls = ClientConnection::new(config, name).map_err(io::Error::other)?;
    let mut s = rustls::StreamOwned::new(tls, TcpStream::connect(addr)?);
    let mut back = Vec::with_capacity(data.len());
    for chunk in data.chunks(8 * 1024) {
        s.write_all(chunk)?;
        s.flush()?;
        let mut got = vec![0u8; chunk.len()];
        s.read_exact(&mut got)?;
        back.extend_from_slice(&got);
    }
    s.conn.send_close_notify();
    s.flush()?;
    // The server answers with its own close_notify: a clean end of file.
    let mut rest = Vec::new();
    s.read_to_end(&mut rest)?;
    back.extend_from_slice(&rest);
    Ok(back)
}

/// Accepts connections forever, one goroutine each.
pub fn run_server(listener: TcpListener, config: Arc<ServerConfig>) {
    for conn in listener.incoming() {
        match conn {
            Ok(conn) => {
                let config = config.clone();
                goroutine::go(move || {
                    if let Err(e) = serve(conn, config) {
                        eprintln!("tls_echo: connection: {e}");
                    }
                });
            }
            Err(e) => eprintln!("tls_echo: accept: {e}"),
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("server") => {
            let addr = args.get(1).cloned().unwrap_or("127.0.0.1:8443".into());
            let id = self_signed();
            std::fs::write("tls_echo_cert.pem", &id.cert_pem).expect("write tls_echo_cert.pem");
            goroutine::run(move || {
                let l = TcpListener::bind(&addr).unwrap_or_else(|e| {
                    eprintln!("tls_echo: cannot listen on {addr}: {e}");
                    std::process::exit(1)
                });
                println!(
                    "tls_echo: TLS echo on {} (certificate in tls_echo_cert.pem)",
                    l.local_addr().unwrap()
                );
                run_server(l, server_config(&id));
            });
        }
        Some("client") => {
            let (Some(addr), Some(pem)) = (args.get(1), args.get(2)) else {
                eprintln!("usage: tls_echo client ADDR CERT.pem");
                std::process::exit(2);
            };
            let pem = std::fs::read(pem).expect("read the certificate");
            let cert =
                rustls::pki_types::pem::PemObject::from_pem_slice(&pem).expect("a PEM certificate");
            let addr = addr.clone();
            let out = goroutine::run(move || {
                echo_client(&addr, client_config(cert), b"hello over TLS\n")
            })
            .expect("echo");
            print!("{}", String::from_utf8_lossy(&out));
        }
        _ => demo(),
    }
}

/// A server and 100 clients, every byte checked.
fn demo() {
    const CLIENTS: usize = 100;
    let id = self_signed();
    let (sc, cc) = (server_config(&id), client_config(id.cert.clone()));
    goroutine::run(move || {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().unwrap().to_string();
        goroutine::go(move || run_server(l, sc));
        let start = std::time::Instant::now();
        let clients: Vec<_> = (0..CLIENTS)
            .map(|i| {
                let (addr, cc) = (addr.clone(), cc.clone());
                goroutine::go(move || {
                    let data: Vec<u8> = (0..64 * 1024).map(|k| (k * 7 + i) as u8).collect();
                    let back = echo_client(&addr, cc, &data).expect("echo");
                    assert!(back == data, "client {i}: the echo differs");
                    back.len()
                })
            })
            .collect();
        let total: usize = clients.into_iter().map(|h| h.join().unwrap()).sum();
        println!(
            "tls_echo: {CLIENTS} TLS clients echoed {total} bytes, all checked, in {:?}",
            start.elapsed()
        );
    });
}
