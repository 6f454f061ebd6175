//! TCP echo server: one goroutine per connection, each copying what it
//! reads back to the client until end of file.
//!
//! ```text
//! cargo run --release --example echo_server [ADDR]    # default 127.0.0.1:7878
//! ```
//!
//! Try it with `nc 127.0.0.1 7878`. The connection handler, [`echo`], is
//! also run by `tests/net.rs`.

use std::io;
use std::time::Duration;

use goroutine::net::{TcpListener, TcpStream};

/// Copies everything `conn` receives back to it until the client shuts
/// down its side; returns the number of bytes echoed.
pub fn echo(conn: &TcpStream) -> io::Result<u64> {
    // `Read` and `Write` are implemented for `&TcpStream`: one handle is both
    // ends of the copy.
    io::copy(&mut &*conn, &mut &*conn)
}

#[goroutine::main]
fn main() {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:7878".to_string());
    let listener = match TcpListener::bind(&addr) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("echo_server: cannot listen on {addr}: {e}");
            std::process::exit(1);
        }
    };
    println!(
        "echo_server: listening on {} (GOMAXPROCS={})",
        listener.local_addr().expect("local_addr"),
        goroutine::max_procs()
    );
    for conn in listener.incoming() {
        match conn {
            Ok(conn) => {
                goroutine::go(move || {
                    if let Err(e) = echo(&conn) {
                        eprintln!("echo_server: {e}");
                    }
                });
            }
            Err(e) => {
                // Out of descriptors, for example: back off a little and
                // keep serving, as Go's net/http does.
                eprintln!("echo_server: accept: {e}");
                goroutine::time::sleep(Duration::from_millis(5));
            }
        }
    }
}
